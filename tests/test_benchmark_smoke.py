"""Smoke tests of the benchmark scripts in examples/: the sampler's and the model's --quick
runs on small synthetic graphs, and benchmark_distributed's throughput bookkeeping."""
import importlib.util
import json
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def load_example(name):
    """examples/<name>.py imported as a module (the scripts are not a package)."""
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def bench():
    return load_example("benchmark_sampler")


def test_quick_synthetic_run_writes_positive_figures(bench, tmp_path, capsys):
    out = tmp_path / "bench.json"
    rc = bench.main(["--quick", "--synthetic", "2000,20000", "--batches", "2", "--repeats", "1",
                     "--threads", "1", "--graphbolt-batches", "1", "--json", str(out)])
    assert rc == 0
    doc = json.loads(out.read_text())
    rows = doc["results"]
    kinds = {r["measurement"] for r in rows}
    assert {"a_arrays_paths", "a_arrays_nopaths", "b_temporal_batch",
            "c_create_block", "c_csc_block", "c_make_block"} <= kinds
    assert {r["strategy"] for r in rows} == {"recent", "uniform"}
    for r in rows:
        if "error" in r:  # GraphBolt may fail on some installs: then the text is reported
            assert r["measurement"].startswith("d_") and r["error"]
            continue
        for k in ("roots_per_s", "edges_per_s", "ms_per_batch"):
            assert r[k] > 0, (r["measurement"], k)
        if r["measurement"] in ("a_arrays_paths", "b_temporal_batch"):
            assert r["valid_paths_per_s"] > 0
    ref = [r for r in rows if r["measurement"] == "e_python_reference" and "error" not in r]
    for r in ref:
        if r["strategy"] == "recent":
            assert r["check"] == "same tree as the C++ sampler"
    b = doc["build"]
    assert b["build_s_median"] > 0 and b["csr_bytes"] > 0 and b["raw_input_bytes"] == 20000 * 24
    assert doc["process_peak_rss_bytes"] > 0
    assert doc["machine"]["cpu_count"] >= 1 and doc["machine"]["versions"]["torch"]
    assert doc["settings"]["fanouts"] == [10, 10]
    assert "| strategy | threads |" in capsys.readouterr().out


def test_missing_data_file_exits_with_2(bench, tmp_path, capsys):
    assert bench.main(["--data", str(tmp_path / "nope.txt.gz"), "--quick"]) == 2
    assert "not found" in capsys.readouterr().err


@pytest.fixture
def model_bench():
    return load_example("benchmark_model")


def test_model_benchmark_quick_run_with_the_dgl_baseline(model_bench, tmp_path, capsys):
    mod = model_bench
    out = tmp_path / "model.json"
    assert mod.main(["--quick", "--impls", "dense,dgl", "--settings", "defaults,official4",
                     "--batches", "1", "--batch-size", "20", "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    rows = doc["results"]
    assert {(r["setting"], r["variant"], r["impl"]) for r in rows} == {
        (s, v, i) for s in ("defaults", "official4") for v in ("tbdfs", "tgat")
        for i in ("dense", "dgl")}
    for r in rows:
        assert r["ms_per_batch"] > 0 and r["s_per_epoch"] > 0 and r["epoch_batches"] > 0
        assert r["sampling_ms_per_batch"] >= 0 and r["peak_gpu_mb"] is None
        assert len(r["ms_per_batch_rounds"]) == 1
    # One speed-up per (setting, variant), each the ratio of the two rounds' figures.
    by_key = {(r["setting"], r["variant"], r["impl"]): r for r in rows}
    assert len(doc["speedups"]) == 4
    for sp in doc["speedups"]:
        dense = by_key[(sp["setting"], sp["variant"], "dense")]["ms_per_batch_rounds"][0]
        dgl = by_key[(sp["setting"], sp["variant"], "dgl")]["ms_per_batch_rounds"][0]
        assert sp["speedup"] == pytest.approx(dgl / dense, rel=1e-12)
        assert sp["speedup_min"] == sp["speedup_max"] == sp["speedup"]
    printed = capsys.readouterr().out
    assert "| defaults | tbdfs | dense |" in printed and "| dgl / dense |" in printed


def test_speedup_rows_pair_rounds_and_skip_configurations_without_a_baseline(model_bench):
    mod = model_bench

    def row(variant, impl, rounds):
        return {"setting": "s", "variant": variant, "impl": impl,
                "ms_per_batch_rounds": rounds}

    rows = [row("tbdfs", "dense", [1.0, 2.0, 4.0]), row("tbdfs", "dgl", [3.0, 5.0, 6.0]),
            row("tgat", "dense", [1.0])]
    (sp,) = mod.speedup_rows(rows)
    assert (sp["setting"], sp["variant"], sp["baseline"]) == ("s", "tbdfs", "dgl")
    assert sp["speedup_rounds"] == [3.0, 2.5, 1.5]
    assert (sp["speedup"], sp["speedup_min"], sp["speedup_max"]) == (2.5, 1.5, 3.0)
    # the kernels-off baseline, paired the same way
    (sp,) = mod.speedup_rows(rows[:1] + [row("tbdfs", "torch", [2.0, 2.0, 2.0])])
    assert sp["baseline"] == "torch" and sp["speedup_rounds"] == [2.0, 1.0, 0.5]


def test_model_benchmark_kernels_off_runs_without_the_extensions_kernels(model_bench,
                                                                          monkeypatch):
    # --impls torch: the same dense model, every batch with the C++ kernels switched off.
    from tbdfs_dgl.nn import _native

    if _native.native("time_encode") is None:
        pytest.skip("extension not built")
    used = []

    class Spy:  # records which kernels the layers fetch
        def __getattr__(self, name):
            used.append(name)
            return getattr(real, name)

    real = _native._EXT
    monkeypatch.setattr(_native, "_EXT", Spy())
    for impl in ("dense", "torch"):
        used.clear()
        doc = model_bench.run(model_bench.parse_args(
            ["--quick", "--impls", impl, "--settings", "defaults", "--variants", "tbdfs",
             "--batches", "1", "--batch-size", "20"]))
        assert [r["impl"] for r in doc["results"]] == [impl]
        assert bool(used) == (impl == "dense"), used


@pytest.fixture(scope="module")
def dist_bench():
    return load_example("benchmark_distributed")


def _fake_torchrun(calls):
    """Stands in for ``subprocess.run`` of torchrun: records the command and writes the
    metrics.json train_wikipedia would, with an epoch of 10 batches taking 2 s x procs^0.5."""
    def run(cmd, check, env, stdout):
        calls.append(cmd)
        procs = int(next(a for a in cmd if a.startswith("--nproc_per_node=")).split("=")[1])
        batch = int(cmd[cmd.index("--batch-size") + 1]) if "--batch-size" in cmd else 200
        save = Path(cmd[cmd.index("--save-dir") + 1])
        run_doc = {"batches_per_epoch": 10, "seconds_per_epoch": 2.0 * procs ** 0.5,
                   "sampling_seconds_per_epoch": 0.1, "model_seconds_per_epoch": 1.9,
                   "test": {"transductive": {"ap": 0.5}}}
        (save / "metrics.json").write_text(json.dumps({"args": {"batch_size": batch},
                                                       "runs": [run_doc]}))
    return run


def test_distributed_throughput_weak_scaling_sets_the_global_batch(dist_bench, tmp_path,
                                                                    monkeypatch):
    calls = []
    monkeypatch.setattr(dist_bench.subprocess, "run", _fake_torchrun(calls))
    out = tmp_path / "weak.json"
    dist_bench.main(["throughput", "--procs", "1,4", "--events-per-proc", "50",
                     "--json", str(out), "--", "--max-batches", "3"])
    assert [c[c.index("--batch-size") + 1] for c in calls] == ["50", "200"]
    assert all(c[-4:-2] == ["--max-batches", "3"] for c in calls)
    doc = json.loads(out.read_text())
    assert doc["events_per_proc"] == 50
    runs = doc["runs"]
    assert [r["batch_size"] for r in runs] == [50, 200]
    assert [r["events"] for r in runs] == [500, 2000]
    # 250 events/s for one process; 4 processes: 2000 events in 4 s = 500/s = 0.5 of 4 x 250
    assert runs[0]["fraction_of_linear"] == pytest.approx(1.0)
    assert runs[1]["fraction_of_linear"] == pytest.approx(0.5)


def test_distributed_throughput_strong_scaling_keeps_the_batch(dist_bench, monkeypatch):
    calls = []
    monkeypatch.setattr(dist_bench.subprocess, "run", _fake_torchrun(calls))
    dist_bench.main(["throughput", "--procs", "1,2", "--", "--max-batches", "3"])
    assert all("--batch-size" not in c for c in calls)


@pytest.mark.parametrize("argv, message", [
    (["--events-per-proc", "0"], "--events-per-proc must be >= 1"),
    (["--events-per-proc", "10", "--", "--batch-size", "100"], "do not pass --batch-size"),
])
def test_distributed_throughput_refuses_conflicting_batch_options(dist_bench, monkeypatch,
                                                                   argv, message):
    monkeypatch.setattr(dist_bench.subprocess, "run", _fake_torchrun([]))
    with pytest.raises(SystemExit, match=message):
        dist_bench.main(["throughput", "--procs", "1", *argv])


class _FakePopen:
    """Stands in for one ``subprocess.Popen`` of train_wikipedia.py: writes its metrics.json
    at once, with a 10-batch epoch taking 2 s, or 4 s for seed 1 (a slower process)."""
    calls = []

    def __init__(self, cmd, env, stdout):
        _FakePopen.calls.append(cmd)
        batch = int(cmd[cmd.index("--batch-size") + 1]) if "--batch-size" in cmd else 200
        seed = int(cmd[len(cmd) - 1 - cmd[::-1].index("--seed") + 1])
        save = Path(cmd[cmd.index("--save-dir") + 1])
        save.mkdir(parents=True)
        run_doc = {"batches_per_epoch": 10, "seconds_per_epoch": 4.0 if seed == 1 else 2.0,
                   "test": {"transductive": {"ap": 0.5 + seed / 100}}}
        (save / "metrics.json").write_text(json.dumps({"args": {"batch_size": batch},
                                                       "runs": [run_doc]}))

    def wait(self):
        return 0


def test_distributed_throughput_independent_processes_sum_their_rates(dist_bench, tmp_path,
                                                                       monkeypatch):
    _FakePopen.calls = []
    monkeypatch.setattr(dist_bench.subprocess, "Popen", _FakePopen)
    monkeypatch.setattr(dist_bench.subprocess, "run", None)  # no torchrun in this mode
    out = tmp_path / "independent.json"
    dist_bench.main(["throughput", "--procs", "1,2", "--independent", "--events-per-proc", "50",
                     "--json", str(out), "--", "--max-batches", "3"])
    calls = _FakePopen.calls
    assert len(calls) == 3 and not any("torch.distributed.run" in c for c in calls)
    assert all(c[c.index("--batch-size") + 1] == "50" for c in calls)  # each its own batch
    assert [c[c.index("--seed") + 1] for c in calls] == ["0", "0", "1"]
    doc = json.loads(out.read_text())
    assert doc["independent"] is True
    one, two = doc["runs"]
    assert (one["events"], two["events"]) == (500, 1000)
    # 250 events/s alone; together 250 + 125 = 375 = 0.75 of 2 x 250
    assert two["events_per_second"] == pytest.approx(375.0)
    assert two["per_process_train_seconds"] == [2.0, 4.0]
    assert two["fraction_of_linear"] == pytest.approx(0.75)


def test_distributed_throughput_pins_every_process_to_its_share(dist_bench, monkeypatch):
    _FakePopen.calls = []
    monkeypatch.setattr(dist_bench.subprocess, "Popen", _FakePopen)
    dist_bench.main(["throughput", "--procs", "2", "--independent", "--pin-cores", "--",
                     "--max-batches", "3"])
    assert [c[c.index("--pin-cores") + 1] for c in _FakePopen.calls] == ["0/2", "1/2"]
    calls = []
    monkeypatch.setattr(dist_bench.subprocess, "run", _fake_torchrun(calls))
    dist_bench.main(["throughput", "--procs", "2", "--pin-cores", "--", "--max-batches", "3"])
    (cmd,) = calls
    assert cmd[cmd.index("--pin-cores") + 1] == "auto"     # each rank reads LOCAL_RANK
    dist_bench.main(["throughput", "--procs", "2", "--", "--max-batches", "3"])
    assert "--pin-cores" not in calls[1]
