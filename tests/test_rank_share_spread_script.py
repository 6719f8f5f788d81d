"""Smoke test of scripts/rank_share_spread.py (issue 11's diagnostic of how unequal the DDP
ranks' shares are): it still fits the trainer's private sampling and embedding methods,
and its JSON has one timing per pass, global batch and rank."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def test_shares_are_timed_per_pass_batch_and_rank(tmp_path):
    out = tmp_path / "spread.json"
    run = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "rank_share_spread.py"), "--dataset",
         "synthetic", "--ranks", "2", "--events-per-rank", "20", "--batches", "3",
         "--passes", "2", "--warmup-passes", "1", "--json", str(out)],
        capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "| global batch | mean share ms" in run.stdout
    doc = json.loads(out.read_text())
    ms = np.array(doc["ms"])
    assert ms.shape == (2, 3, 2) and (ms > 0).all()
    assert len(doc["batches"]) == 3 and doc["batches"] == sorted(doc["batches"])
    assert len(doc["features"]) == 6
    for f in doc["features"]:
        # [10, 10] neighbours: a share's 60 roots (20 sources, destinations, negatives)
        # have at most 600 first-hop slots; the second hop's 10 slots are for each root
        # and each first-hop neighbour
        assert 0 < f["hop1_valid_slots"] <= 60 * 10
        assert 0 < f["hop2_valid_slots"] <= (60 + 600) * 10
        for hop in (1, 2):
            assert 0 < f[f"hop{hop}_distinct_edges"] <= f[f"hop{hop}_valid_slots"]
    assert set(doc["feature_correlation"]) == set(doc["features"][0])
