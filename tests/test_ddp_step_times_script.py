"""Smoke test of scripts/ddp_step_times.py (issue 11's per-step DDP diagnostic): its hooks
still fit the trainer's code (it patches ``_embed``, ``distributed.wrap`` and backward) and
its summary adds up."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(not (torch.distributed.is_available()
                         and torch.distributed.is_gloo_available()), reason="no gloo backend")
def test_step_times_of_independent_and_ddp_processes(tmp_path):
    out = tmp_path / "steps.json"
    run = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "ddp_step_times.py"), "--procs", "2",
         "--events-per-proc", "20", "--skip", "alone", "--json", str(out), "--",
         "--no-download", "--max-batches", "4", "--hidden-dim", "8", "--time-dim", "8",
         "--fanouts", "2,2", "--alpha", "1"],
        capture_output=True, text=True, timeout=600,
        env=dict(os.environ, TBDFS_DATA_DIR=str(tmp_path / "no-data-here")))
    assert run.returncode == 0, run.stderr[-3000:]
    doc = json.loads(out.read_text())
    assert "alone" not in doc
    for name in ("independent", "ddp"):
        s = doc[name]
        assert s["processes"] == 2 and s["steps_timed"] == 2, s  # 4 steps, 2 of warm-up
        assert len(s["compute_ms_per_process"]) == 2
        parts = s["forward_ms"] + s["local_backward_ms"] + s["wait_ms"] + s["optimizer_ms"]
        assert abs(parts - s["step_ms"]) <= 0.5, s  # each part rounded to 0.1 ms
        assert s["slowest_rank_compute_ms"] >= max(s["compute_ms_per_process"]) - 0.1
    assert doc["independent"]["wait_ms"] == 0.0  # no DDP: no all-reduce to wait for
    assert doc["ddp"]["wait_ms"] > 0.0
