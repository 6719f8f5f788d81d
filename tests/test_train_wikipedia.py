"""The flagship example end to end, on the synthetic stand-in (no data, no download)."""
import json
import os
import re
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run_offline(tmp_path, monkeypatch, capsys, alpha):
    """A tiny run with no data at hand (the synthetic stand-in); its printout."""
    monkeypatch.setenv("TBDFS_DATA_DIR", str(tmp_path / "no-data-here"))
    argv = ["train_wikipedia.py", "--no-download", "--max-batches", "2", "--hidden-dim", "8",
            "--time-dim", "8", "--fanouts", "3,3", "--alpha", alpha, "--no-progress",
            "--save-dir", str(tmp_path / "out")]
    monkeypatch.setattr(sys, "argv", argv)
    runpy.run_path(str(ROOT / "examples" / "train_wikipedia.py"), run_name="__main__")
    return capsys.readouterr().out


def test_offline_run_falls_back_to_synthetic_and_names_it(tmp_path, monkeypatch, capsys):
    out = _run_offline(tmp_path, monkeypatch, capsys, "0.5,1")
    lines = [ln for ln in out.splitlines() if ln.startswith("[")]
    assert lines and all("SYNTHETIC" in ln for ln in lines), out
    assert "no Wikipedia data available" in out
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert metrics["synthetic"] is True and metrics["dataset"].startswith("SYNTHETIC")
    assert [r["label"] for r in metrics["runs"]] == ["tBDFS (alpha=0.5)", "TGAT (alpha=1)"]
    for run in metrics["runs"]:
        for setting in ("transductive", "inductive"):
            assert 0.0 <= run["test"][setting]["ap"] <= 1.0
    assert (tmp_path / "out" / "tbdfs-alpha-0.5" / "best.pt").exists()


def test_a_learned_gate_is_reported_with_its_alpha(tmp_path, monkeypatch, capsys):
    out = _run_offline(tmp_path, monkeypatch, capsys, "learn,1")
    learned, tgat = json.loads((tmp_path / "out" / "metrics.json").read_text())["runs"]
    assert tgat["learned_alpha"] is None
    gate = learned["learned_alpha"]
    assert 0 < gate["roots_with_path"] <= gate["roots"] and 0.0 < gate["mean"] < 1.0
    assert f"learned alpha (BFS weight) on the test embeddings with a path: mean " \
           f"{gate['mean']:.3f}" in out


def test_resume_keeps_each_runs_state_and_a_finished_run_only_tests_again(tmp_path,
                                                                         monkeypatch, capsys):
    monkeypatch.setenv("TBDFS_DATA_DIR", str(tmp_path / "no-data-here"))
    argv = ["train_wikipedia.py", "--no-download", "--max-batches", "2", "--hidden-dim", "8",
            "--time-dim", "8", "--fanouts", "3,3", "--alpha", "0.5", "--epochs", "2",
            "--no-progress", "--resume", "--save-dir", str(tmp_path / "out")]
    runs = []
    for _ in range(2):
        monkeypatch.setattr(sys, "argv", argv)
        runpy.run_path(str(ROOT / "examples" / "train_wikipedia.py"), run_name="__main__")
        runs.append(json.loads((tmp_path / "out" / "metrics.json").read_text())["runs"][0])
    out = capsys.readouterr().out
    assert (tmp_path / "out" / "tbdfs-alpha-0.5" / "training.state").exists()
    assert "resumed from" in out and "2 epoch(s) done" in out and "only the final tests" in out
    assert runs[1]["history"] == runs[0]["history"] and runs[1]["test"] == runs[0]["test"]
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(SystemExit) as exit_:
        runpy.run_path(str(ROOT / "examples" / "train_wikipedia.py"), run_name="__main__")
    assert exit_.value.code == 2 and "--resume is for one-process runs" in capsys.readouterr().err


@pytest.mark.parametrize("flags, message", [
    (["--resume", "--eval-only", "best.pt"], "--resume trains; --eval-only trains nothing"),
    (["--fanouts", "a,b"], "--fanouts must be comma-separated integers"),
    (["--fanouts", "0,10"], "fanouts must be a non-empty sequence of integers >= 1"),
    (["--alpha", "0.5,x"], "--alpha takes numbers in"),
    (["--alpha", "2"], r"alpha must be a number in \[0, 1\]"),
    (["--hidden-dim", "7"], "must be a multiple of num_heads"),
    (["--batch-size", "0"], "batch_size must be an integer >= 1"),
    (["--device", "tpu"], "device must name a torch device"),
    (["--pin-cores", "4"], "--pin-cores takes 'auto' or 'i/n'"),
    (["--pin-cores", "2/2"], r"index must be in \[0, n\)"),
])
def test_bad_settings_are_argparse_errors_before_any_data_is_read(flags, message, tmp_path,
                                                                   monkeypatch, capsys):
    monkeypatch.setenv("TBDFS_DATA_DIR", str(tmp_path / "never-read"))
    monkeypatch.setattr(sys, "argv", ["train_wikipedia.py", "--no-download", *flags])
    with pytest.raises(SystemExit) as exit_:
        runpy.run_path(str(ROOT / "examples" / "train_wikipedia.py"), run_name="__main__")
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert re.search(message, err) and "Traceback" not in err, err


@pytest.mark.parametrize("script", ["online_wikipedia.py", "explain.py"])
@pytest.mark.parametrize("flags, message", [
    (["--fanouts", "a"], "--fanouts must be comma-separated integers"),
    (["--alpha", "0.5,1"], "--alpha takes one value here"),
    (["--alpha", "3"], r"alpha must be a number in \[0, 1\]"),
])
def test_the_other_examples_refuse_bad_settings_the_same_way(script, flags, message, tmp_path,
                                                             monkeypatch, capsys):
    monkeypatch.setenv("TBDFS_DATA_DIR", str(tmp_path / "never-read"))
    monkeypatch.setattr(sys, "argv", [script, "--no-download", *flags])
    monkeypatch.syspath_prepend(str(ROOT / "examples"))
    with pytest.raises(SystemExit) as exit_:
        runpy.run_path(str(ROOT / "examples" / script), run_name="__main__")
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert re.search(message, err) and "Traceback" not in err, err


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs Linux")
def test_pin_cores_runs_the_process_on_its_share(tmp_path):
    from tbdfs_dgl.linkpred.affinity import cpus_for_process
    count = 2 if len(os.sched_getaffinity(0)) >= 2 else 1
    want = cpus_for_process(count - 1, count)
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "train_wikipedia.py"), "--no-download",
         "--max-batches", "1", "--hidden-dim", "8", "--time-dim", "8", "--fanouts", "2,2",
         "--alpha", "1", "--no-progress", "--save-dir", str(tmp_path / "out"),
         "--pin-cores", f"{count - 1}/{count}"],
        capture_output=True, text=True, timeout=300,
        env=dict(os.environ, PYTHONPATH=str(ROOT), TBDFS_DATA_DIR=str(tmp_path / "none")))
    assert out.returncode == 0, out.stderr
    assert f"pinned to CPUs {want}" in out.stdout
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert metrics["args"]["pinned_cpus"] == want
