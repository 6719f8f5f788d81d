"""Everything but DGL interop works in a process where DGL cannot be imported."""
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_without_dgl(code: str, tmp_path: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "tests" / "no_dgl"), str(ROOT)])
    env["TBDFS_DATA_DIR"] = str(tmp_path / "no-data-here")
    env["OMP_NUM_THREADS"] = "1"
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_the_blocker_blocks(tmp_path):
    proc = run_without_dgl("import dgl", tmp_path)
    assert proc.returncode != 0 and "blocked by tests/no_dgl" in proc.stderr


def test_sampler_model_and_training_run_without_dgl(tmp_path):
    proc = run_without_dgl("""
        import sys
        import numpy as np
        import torch
        import tbdfs_dgl
        from tbdfs_dgl import TBDFSModel, TemporalGraph, TemporalSampler
        from tbdfs_dgl.linkpred import LinkPredictionTrainer, TrainConfig
        from tbdfs_dgl.data import make_wikipedia_like
        torch.manual_seed(0)
        rng = np.random.default_rng(0)
        g = TemporalGraph(rng.integers(0, 20, 200), rng.integers(0, 20, 200),
                          np.sort(rng.uniform(0, 100, 200)))
        batch = TemporalSampler(g, [3, 2], seed=0).sample(rng.integers(0, 20, 12),
                                                          np.full(12, 120.0))
        for kw in ({}, {"alpha": 1.0}, {"alpha": "learn", "path_inputs": "bfs"}):
            model = TBDFSModel(0, 0, 8, 8, **kw)
            out = model(batch)
            out.sum().backward()
            assert out.shape == (12, 8) and torch.isfinite(out).all()
        try:
            batch.blocks
        except ImportError as err:
            assert "TemporalBatch.blocks needs DGL" in str(err), err
        else:
            raise AssertionError("blocks built without DGL")
        data = make_wikipedia_like(num_users=40, num_pages=10, num_events=600, seed=0)
        cfg = TrainConfig(epochs=1, batch_size=50, max_batches=2, fanouts=(3, 3),
                          progress=False)
        trainer = LinkPredictionTrainer(TBDFSModel(0, 0, 8, 8), data, cfg, log=lambda s: None)
        result = trainer.fit()
        trainer.close()
        assert 0.0 <= result.test["transductive"]["ap"] <= 1.0
        assert "dgl" not in sys.modules or sys.modules["dgl"] is None
        print("OK")
    """, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "OK" in proc.stdout


def test_flagship_example_runs_without_dgl(tmp_path):
    proc = run_without_dgl(f"""
        import runpy, sys
        sys.argv = ["train_wikipedia.py", "--no-download", "--max-batches", "2",
                    "--hidden-dim", "8", "--time-dim", "8", "--fanouts", "3,3",
                    "--alpha", "0.5", "--no-progress", "--save-dir", "out"]
        runpy.run_path({str(ROOT / 'examples' / 'train_wikipedia.py')!r}, run_name="__main__")
    """, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert metrics["runs"][0]["test"]["transductive"]["ap"] >= 0.0


def test_one_vs_k_evaluation_and_eval_only_run_without_dgl(tmp_path):
    proc = run_without_dgl(f"""
        import runpy, sys
        base = ["train_wikipedia.py", "--no-download", "--max-batches", "2",
                "--hidden-dim", "8", "--time-dim", "8", "--fanouts", "3,3", "--alpha", "0.5",
                "--no-progress", "--save-dir", "out"]
        path = {str(ROOT / 'examples' / 'train_wikipedia.py')!r}
        sys.argv = base + ["--eval-negatives", "historical", "--eval-candidates", "3"]
        runpy.run_path(path, run_name="__main__")
        sys.argv = base + ["--eval-only", "out/tbdfs-alpha-0.5/best.pt",
                           "--eval-negatives", "random,inductive", "--eval-candidates", "1,4"]
        runpy.run_path(path, run_name="__main__")
        assert "dgl" not in sys.modules or sys.modules["dgl"] is None
    """, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = json.loads((tmp_path / "out" / "metrics.json").read_text())["runs"][0]
    assert (run["eval_negatives"], run["eval_candidates"]) == ("historical", 3)
    assert run["test"]["transductive"]["candidates"] == 3 and "mrr" in run["test"]["inductive"]
    evals = json.loads((tmp_path / "out" / "eval_metrics.json").read_text())["evaluations"]
    assert [(e["eval_negatives"], e["eval_candidates"]) for e in evals] == [
        ("random", 1), ("random", 4), ("inductive", 1), ("inductive", 4)]
    assert "mrr" not in evals[0]["test"]["transductive"]
    assert evals[3]["test"]["transductive"]["hits@10"] == 1.0  # K + 1 = 5 <= 10


def test_eval_negatives_and_ranking_without_dgl_and_a_clear_dataloading_error(tmp_path):
    proc = run_without_dgl("""
        import sys
        import numpy as np
        from tbdfs_dgl.data import make_wikipedia_like
        from tbdfs_dgl.eval_negatives import EvalNegativeSampler
        from tbdfs_dgl.metrics import ranking_metrics
        data = make_wikipedia_like(num_users=40, num_pages=10, num_events=600, seed=0)
        neg = EvalNegativeSampler(data, "historical", num_candidates=3).sample(np.arange(500, 550))
        assert neg.dst.shape == (50, 3)
        assert ranking_metrics(np.ones(50), np.zeros((50, 3)))["mrr"] == 1.0
        try:
            import tbdfs_dgl.dataloading
        except ImportError as err:
            assert "tbdfs_dgl.dataloading" in str(err) and "needs DGL" in str(err), err
        else:
            raise AssertionError("tbdfs_dgl.dataloading imported without DGL")
        assert "dgl" not in sys.modules or sys.modules["dgl"] is None
        print("OK")
    """, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "OK" in proc.stdout
