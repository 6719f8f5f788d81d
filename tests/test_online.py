"""OnlineScorer and the streaming examples (which must run without DGL)."""
import json

import numpy as np
import pytest
import torch

from tbdfs_dgl import TBDFSModel, TemporalGraph, TemporalSampler
from tbdfs_dgl.online import OnlineScorer

from test_without_dgl import ROOT, run_without_dgl


def stream(seed: int):
    rng = np.random.default_rng(seed)
    E, N = 600, 30
    src, dst = rng.integers(0, N, E), rng.integers(0, N, E)
    ts = np.sort(rng.integers(0, 200, E)).astype(np.float64)
    ef = torch.randn(E, 3)
    return src, dst, ts, ef, N


def test_scoring_before_ingesting_equals_scoring_on_the_whole_graph(_seed_everything):
    src, dst, ts, ef, N = stream(_seed_everything)
    model = TBDFSModel(0, 3, 8, 8, num_nodes=N, node_embedding_dim=4)
    full = TemporalGraph(src, dst, ts, num_nodes=N, edge_feat=ef)
    first = 300
    g = TemporalGraph(src[:first], dst[:first], ts[:first], num_nodes=N, edge_feat=ef[:first])
    scorer = OnlineScorer(model, g, TemporalSampler(g, [4, 3], seed=0), batch_size=7)
    offline = OnlineScorer(model, full, TemporalSampler(full, [4, 3], seed=0), batch_size=64)
    got, want = [], []
    for i in range(first, len(src)):  # score each event, then ingest it
        got.append(scorer.score(src[i], dst[i], ts[i]))
        scorer.ingest(int(src[i]), int(dst[i]), float(ts[i]), ef[i])
    want = offline.score(src[first:], dst[first:], ts[first:])
    np.testing.assert_allclose(np.concatenate(got), want, rtol=1e-4, atol=1e-5)
    assert scorer.events_ingested == len(src) - first and g.num_edges == full.num_edges
    assert torch.equal(g.edge_feat, full.edge_feat)
    # Batching queries changes nothing; the default time is the latest ingested one.
    np.testing.assert_allclose(scorer.score(src[:50], dst[:50]),
                               offline.score(src[:50], dst[:50], np.full(50, ts[-1])),
                               rtol=1e-4, atol=1e-5)
    p = scorer.score([1], [2], [500.0], probability=True)
    assert 0 < p[0] < 1 and model.training  # the model's mode is left as it was


def test_online_scorer_refuses_mismatched_inputs():
    src, dst, ts, ef, N = stream(0)
    g = TemporalGraph(src, dst, ts, num_nodes=N)
    other = TemporalGraph(src, dst, ts, num_nodes=N)
    model = TBDFSModel(0, 0, 8, 8)
    with pytest.raises(ValueError, match="sampler must sample from the scorer's graph"):
        OnlineScorer(model, g, TemporalSampler(other, [2], seed=0))
    scorer = OnlineScorer(model, g, TemporalSampler(g, [2, 2], seed=0))
    with pytest.raises(ValueError, match="out of range"):
        scorer.score([N + 5], [0], [10.0])
    with pytest.raises(ValueError, match="same length"):
        scorer.score([0, 1], [0], [10.0])
    empty = TemporalGraph([], [], [], num_nodes=3)
    with pytest.raises(ValueError, match="no event ingested"):
        OnlineScorer(model, empty, TemporalSampler(empty, [2, 2], seed=0)).score([0], [1])


def test_online_example_replays_without_dgl(tmp_path):
    proc = run_without_dgl(f"""
        import runpy, sys
        sys.argv = ["online_wikipedia.py", "--no-download", "--train-batches", "2",
                    "--hidden-dim", "8", "--time-dim", "8", "--fanouts", "3,3",
                    "--test-events", "120", "--chunk", "50", "--latency-queries", "5",
                    "--save-dir", "out"]
        runpy.run_path({str(ROOT / 'examples' / 'online_wikipedia.py')!r}, run_name="__main__")
    """, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    m = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert m["synthetic"] and m["test_events"] == 120
    # Each event scored from exactly the events before it, as offline.
    assert abs(m["ap_difference_points"]) < 1e-3
    assert m["ingest_events_per_s_one_at_a_time"] > 0 and m["single_link_latency"]["count"] == 5


def test_explain_example_prints_and_says_so_without_matplotlib(tmp_path):
    proc = run_without_dgl(f"""
        import runpy, sys
        sys.modules["matplotlib"] = None  # as if not installed
        sys.argv = ["explain.py", "--no-download", "--train-batches", "2", "--hidden-dim",
                    "8", "--time-dim", "8", "--fanouts", "3,3", "--candidates", "20",
                    "--out", "out/x.png"]
        runpy.run_path({str(ROOT / 'examples' / 'explain.py')!r}, run_name="__main__")
    """, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "matplotlib is not installed" in proc.stdout and "weight" in proc.stdout
    ex = json.loads((tmp_path / "out" / "x.json").read_text())["explanation"]
    assert set(ex) == {"src", "dst", "score", "probability"}
    assert not (tmp_path / "out" / "x.png").exists()
