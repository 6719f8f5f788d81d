"""Smoke test of examples/benchmark_malloc.py: one A/B round of --quick child processes."""
import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "examples" / "benchmark_malloc.py"


def test_one_quick_round_reports_both_arms(tmp_path, capsys):
    spec = importlib.util.spec_from_file_location("benchmark_malloc", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = tmp_path / "malloc.json"
    assert mod.main(["--rounds", "1", "--json", str(out), "--", "--quick", "--settings",
                     "defaults", "--variants", "tbdfs", "--batches", "1",
                     "--batch-size", "20"]) == 0
    doc = json.loads(out.read_text())
    assert set(doc["runs"]) == {"default", "retain"}
    for runs in doc["runs"].values():
        assert len(runs) == 1
        assert runs[0]["ms_per_step"] > 0 and runs[0]["peak_rss_mb"] > 0
    assert "| retain |" in capsys.readouterr().out
    for bad in ("retain,bogus", "thp,thp", ","):
        with pytest.raises(SystemExit):
            mod.main(["--arms", bad, "--", "--quick"])
