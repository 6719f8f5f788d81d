#!/usr/bin/env python
"""Benchmark one training step and one evaluation pass of TBDFSModel on sampled batches.

A batch holds ``--batch-size`` interactions taken from across the graph's time range; its
roots are their sources, destinations and one random negative each (600 roots for 200
interactions), sampled once, before any timing, with ``TemporalSampler`` (the sampler has
its own benchmark, ``benchmark_sampler.py``).  Per model variant and torch thread count:

- **train ms/batch**: forward, the link loss (one negative per positive), backward and an
  Adam step, as ``LinkPredictionTrainer`` does;
- **eval ms/batch**: forward under ``torch.no_grad()`` in eval mode.

Both are medians over the timed batches after two warm-up batches; variants take turns in
every repeat so that load from other processes falls on all of them alike.  ``cpu/wall``
below the thread count means the process waited for a core.

``--baseline`` adds rows that switch off this package's CPU speed-ups, to measure them on
the same machine in the same run: ``torch-time`` evaluates the time encoding with torch
operations instead of the C++ kernel, ``zero-inputs`` feeds explicit zero node features to
the first BFS layer of a featureless graph instead of skipping the node terms.

Examples::

    PYTHONPATH=. .venv/bin/python examples/benchmark_model.py                # Wikipedia
    PYTHONPATH=. .venv/bin/python examples/benchmark_model.py --threads 1 --baseline \\
        --json docs/benchmarks/model_wikipedia.json
    PYTHONPATH=. .venv/bin/python examples/benchmark_model.py --quick       # smoke run
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tbdfs_dgl import TBDFSModel, TemporalGraph, TemporalSampler  # noqa: E402
from tbdfs_dgl.data import (TemporalDataset, default_data_dir, load_dataset,  # noqa: E402
                            make_wikipedia_like)

VARIANTS = {"tbdfs": dict(alpha=0.5), "tgat": dict(alpha=1.0), "dfs": dict(alpha=0.0)}
BASELINES = ("torch-time", "zero-inputs")


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", default="wikipedia",
                   help="a load_dataset name (default wikipedia), or 'synthetic'")
    p.add_argument("--data-dir", default=None, help="default: TBDFS_DATA_DIR or ../shared/data")
    p.add_argument("--batch-size", type=int, default=200)
    p.add_argument("--fanouts", default="10,10")
    p.add_argument("--strategy", choices=["recent", "uniform"], default="uniform")
    p.add_argument("--hidden-dim", type=int, default=100)
    p.add_argument("--time-dim", type=int, default=100)
    p.add_argument("--variants", default="tbdfs,tgat", help=f"of {', '.join(VARIANTS)}")
    p.add_argument("--threads", default="1,2", help="torch thread counts")
    p.add_argument("--batches", type=int, default=None, help="timed batches (default 8)")
    p.add_argument("--repeats", type=int, default=None, help="rounds over the batches (2)")
    p.add_argument("--baseline", action="store_true",
                   help=f"also time with the speed-ups off ({', '.join(BASELINES)})")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", type=Path, default=None, help="write every figure here")
    p.add_argument("--quick", action="store_true", help="smoke run on a small synthetic graph")
    return p.parse_args(argv)


def _dataset(args: argparse.Namespace) -> TemporalDataset:
    if args.quick or args.dataset == "synthetic":
        n = 3000 if args.quick else 20000
        return make_wikipedia_like(num_users=300, num_pages=60, num_events=n, seed=args.seed)
    return load_dataset(args.dataset, args.data_dir or default_data_dir())


@contextlib.contextmanager
def _switched_off(baseline: Optional[str]) -> Iterator[None]:
    """Temporarily undo one speed-up (see the module docstring)."""
    if baseline is None:
        yield
        return
    if baseline == "torch-time":
        from tbdfs_dgl.nn import _native

        with _native.disabled("time_encode"):
            yield
        return
    if baseline == "zero-inputs":
        from tbdfs_dgl.nn import TemporalAttentionConv

        saved = TemporalAttentionConv.forward

        def forward(self, block, feat, *a, **k):
            if feat is None:
                feat = torch.zeros(block.num_src_nodes(), self._in_src_feats)
            return saved(self, block, feat, *a, **k)

        TemporalAttentionConv.forward = forward
        try:
            yield
        finally:
            TemporalAttentionConv.forward = saved
        return
    raise ValueError(f"unknown baseline {baseline!r}")


def _batches(data: TemporalDataset, args: argparse.Namespace, count: int) -> List[Any]:
    graph = TemporalGraph(data.src, data.dst, data.ts, num_nodes=data.num_nodes)
    sampler = TemporalSampler(graph, fanouts=[int(x) for x in args.fanouts.split(",")],
                              strategy=args.strategy, seed=args.seed, num_threads=1)
    rng = np.random.default_rng(args.seed)
    bs = args.batch_size
    # Batch starts spread over the second half of the time range, where histories are full.
    starts = np.linspace(data.num_edges // 2, data.num_edges - bs, count).astype(np.int64)
    lo, hi = (data.num_src_nodes, data.num_nodes) if data.bipartite else (0, data.num_nodes)
    out = []
    for s in starts:
        r = slice(int(s), int(s) + bs)
        ts = data.ts[r].astype(np.float64)
        neg = rng.integers(lo, hi, bs)
        out.append(sampler.sample(np.concatenate([data.src[r], data.dst[r], neg]),
                                  np.concatenate([ts, ts, ts])))
    return out


def _train_step(model: TBDFSModel, opt: torch.optim.Optimizer, batch: Any, n: int) -> None:
    h = model(batch)
    pos, neg = model.score(h[:n], h[n:2 * n]), model.score(h[:n], h[2 * n:])
    loss = (F.binary_cross_entropy_with_logits(pos, torch.ones_like(pos))
            + F.binary_cross_entropy_with_logits(neg, torch.zeros_like(neg)))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()


def run(args: argparse.Namespace) -> Dict[str, Any]:
    data = _dataset(args)
    n_timed = args.batches or (2 if args.quick else 8)
    repeats = args.repeats or (1 if args.quick else 2)
    batches = _batches(data, args, n_timed + 2)
    rows = []
    names = [v for v in args.variants.split(",") if v]
    for v in names:
        if v not in VARIANTS:
            raise SystemExit(f"error: unknown variant {v!r}; choose from {', '.join(VARIANTS)}")
    configs = [(v, None) for v in names]
    if args.baseline:
        configs += [(v, b) for v in names for b in BASELINES]
    for threads in [int(x) for x in args.threads.split(",")]:
        torch.set_num_threads(threads)
        models = {}
        for v, b in configs:
            torch.manual_seed(args.seed)
            m = TBDFSModel(data.node_feat_dim, 0, args.time_dim, args.hidden_dim,
                           num_layers=len(args.fanouts.split(",")), **VARIANTS[v])
            models[(v, b)] = (m, torch.optim.Adam(m.parameters(), lr=1e-4))
        times: Dict[Any, Dict[str, List[float]]] = {c: {"train": [], "eval": [], "cpu": []}
                                                     for c in configs}
        for c in configs:  # warm-up
            m, opt = models[c]
            with _switched_off(c[1]):
                for b in batches[:2]:
                    _train_step(m, opt, b, args.batch_size)
        for _ in range(repeats):
            for c in configs:
                m, opt = models[c]
                with _switched_off(c[1]):
                    w0, c0 = time.perf_counter(), time.process_time()
                    for b in batches[2:]:
                        t = time.perf_counter()
                        _train_step(m, opt, b, args.batch_size)
                        times[c]["train"].append(time.perf_counter() - t)
                    m.eval()
                    with torch.no_grad():
                        for b in batches[2:]:
                            t = time.perf_counter()
                            m(b)
                            times[c]["eval"].append(time.perf_counter() - t)
                    m.train()
                    times[c]["cpu"].append((time.process_time() - c0) /
                                           max(1e-9, time.perf_counter() - w0))
        for c in configs:
            t = times[c]
            rows.append({"variant": c[0], "baseline": c[1] or "", "threads": threads,
                         "train_ms_per_batch": 1e3 * statistics.median(t["train"]),
                         "eval_ms_per_batch": 1e3 * statistics.median(t["eval"]),
                         "cpu_per_wall": statistics.mean(t["cpu"])})
    return {"dataset": data.name, "num_edges": int(data.num_edges),
            "settings": {k: (str(v) if isinstance(v, Path) else v)
                         for k, v in vars(args).items()},
            "host": platform.node(), "cpu_count": os.cpu_count(),
            "versions": {"torch": torch.__version__, "python": platform.python_version()},
            "results": rows}


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    doc = run(args)
    print(f"{doc['dataset']} ({doc['num_edges']} interactions), batch {args.batch_size} "
          f"interactions = {3 * args.batch_size} roots, fanouts {args.fanouts} "
          f"({args.strategy}), hidden {args.hidden_dim}, time {args.time_dim}")
    print("| variant | speed-ups off | threads | train ms/batch | eval ms/batch | cpu/wall |")
    print("|---|---|---:|---:|---:|---:|")
    for r in doc["results"]:
        print(f"| {r['variant']} | {r['baseline'] or '-'} | {r['threads']} | "
              f"{r['train_ms_per_batch']:.0f} | {r['eval_ms_per_batch']:.0f} | "
              f"{r['cpu_per_wall']:.2f} |")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
