#!/usr/bin/env python
"""Benchmark TBDFSModel training as LinkPredictionTrainer runs it: ms per batch and s per
epoch, sampling included, on CPU or CUDA.

Each configuration (setting × variant × implementation) gets its own trainer on the same
data.  A timed round runs ``--batches`` training batches drawn at random from the training
period (in time order, as the ``graphs`` reproduction budget does): the prefetching sampler
thread, the copy to the device, forward, loss, backward and the Adam step — everything of
an epoch except evaluation.  Configurations take turns in every round, so that load from
other processes falls on all of them alike; the figures are medians over rounds of the
per-batch wall time, and s/epoch multiplies that by the epoch's training batches (ours, and
the official code's 382 on Wikipedia).

Settings (``--settings``):

- ``defaults``: ours — fanouts [10, 10] recent, width 100, time width 100, featureless.
- ``paper``: the ``full`` reproduction budget's — the paper's sampler, fanouts [20, 20]
  uniform, with our model (width 100, time width 100, featureless); what issue 13's
  ``full`` grid runs (with the ``-plain`` variants, the budget's layer form).
- ``official4`` / ``official172``: the official tDFS code's Wikipedia setting —
  fanouts [20, 20] uniform, model width = time width = feature width W (4 or 172), W zero
  columns of node and edge features (the official code's stand-in for absent features).

Implementations (``--impls``): ``dense`` is the package (dense tables, torch only, any
device); ``dgl`` is the release-0.1 computation kept as the tests' reference (DGL message
passing on blocks, the per-slot path encoder; CPU only with PyPI's DGL) — the baseline;
``torch`` is the package with the extension's CPU kernels switched off (what an install
without the compiled extension runs), to weigh the kernels in one run.

Examples::

    PYTHONPATH=. .venv/bin/python examples/benchmark_model.py --quick          # smoke run
    PYTHONPATH=. .venv/bin/python examples/benchmark_model.py --threads 1 \\
        --settings defaults,official4 --impls dense,dgl --json docs/benchmarks/model_cpu.json
    python3 examples/benchmark_model.py --device cuda --settings defaults,official4,official172 \\
        --compile --json out.json                                    # on a GPU, without DGL
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
from typing import Any, Dict, List, Optional

# --retain-memory also asks torch to put its tensors of 2 MB or more on transparent huge
# pages, a switch torch reads at its first allocation, so it is set before torch loads
# (tbdfs_dgl._malloc.huge_page_tensors; THP_MEM_ALLOC_ENABLE=0 keeps them off).
if "--retain-memory" in sys.argv[1:]:
    os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tbdfs_dgl import TBDFSModel  # noqa: E402
from tbdfs_dgl.data import (TemporalDataset, default_data_dir, load_dataset,  # noqa: E402
                            make_wikipedia_like)
from tbdfs_dgl.linkpred import LinkPredictionTrainer, TrainConfig  # noqa: E402
from tbdfs_dgl.nn import _native, cpu_gemm_backend  # noqa: E402

SETTINGS = {
    "defaults": dict(fanouts=(10, 10), strategy="recent", width=100, time_width=100,
                     feat_width=0),
    "paper": dict(fanouts=(20, 20), strategy="uniform", width=100, time_width=100,
                  feat_width=0),
    "official4": dict(fanouts=(20, 20), strategy="uniform", width=4, time_width=4,
                      feat_width=4),
    "official172": dict(fanouts=(20, 20), strategy="uniform", width=172, time_width=172,
                        feat_width=172),
}
#: Model arguments of each variant (the model's defaults otherwise: since round 9 the BFS
#: layers' attn_norm form, docs/learning_efficiency.md section 12); "-plain": TGAT's layer
#: form with empty neighbourhoods attending to nothing, the default before round 9, which
#: the earlier speed tables measured; "-nopad": the default form without the padding of
#: empty neighbourhoods (TBDFSModel(empty_neighbourhood='zero')); "-dyglib": DyGLib's
#: layer whole, its residual and TGAT's embedded padding node (attn_residual=True,
#: empty_neighbourhood='padding_node'; section 15).
VARIANTS: Dict[str, Dict[str, Any]] = {"tbdfs": {"alpha": 0.5}, "tgat": {"alpha": 1.0},
                                       "dfs": {"alpha": 0.0}}
for _name, _alpha in (("tbdfs", 0.5), ("tgat", 1.0)):
    VARIANTS[f"{_name}-plain"] = {"alpha": _alpha, "attn_norm": False,
                                  "empty_neighbourhood": "zero"}
    VARIANTS[f"{_name}-nopad"] = {"alpha": _alpha, "empty_neighbourhood": "zero"}
    VARIANTS[f"{_name}-dyglib"] = {"alpha": _alpha, "attn_residual": True,
                                   "empty_neighbourhood": "padding_node"}
IMPLS = ("dense", "dgl", "torch")
#: The implementations compared with ``dense`` round by round when measured with it.
BASELINES = ("dgl", "torch")
OFFICIAL_BATCHES_PER_EPOCH = 382  # the official code's Wikipedia epoch (batch 200)


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", default="wikipedia",
                   help="a load_dataset name (default wikipedia), 'synthetic' (60k events) or "
                        "'synthetic-wikipedia' (Wikipedia's size: 8,227 + 1,000 nodes, "
                        "157,474 events; for machines without the data)")
    p.add_argument("--data-dir", default=None, help="default: TBDFS_DATA_DIR or ../shared/data")
    p.add_argument("--settings", default="defaults,official4", help=f"of {', '.join(SETTINGS)}")
    p.add_argument("--variants", default="tbdfs,tgat", help=f"of {', '.join(VARIANTS)}")
    p.add_argument("--impls", default="dense",
                   help="of dense, dgl (the release-0.1 computation) and torch (dense with "
                        "the C++ kernels off)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--compile", action="store_true", help="torch.compile the dense model")
    p.add_argument("--compile-mode", default=None,
                   help="torch.compile's mode with --compile (e.g. reduce-overhead)")
    p.add_argument("--amp", choices=["bf16"], default=None)
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    p.add_argument("--sampler-threads", type=int, default=1)
    p.add_argument("--prefetch-batches", type=int, default=1,
                   help="TrainConfig.prefetch_batches: batches sampled ahead, a thread each")
    p.add_argument("--batch-size", type=int, default=200)
    p.add_argument("--batches", type=int, default=None, help="timed batches a round (8)")
    p.add_argument("--rounds", type=int, default=None, help="timed rounds (3)")
    p.add_argument("--warmup", type=int, default=None, help="untimed batches first (2)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--retain-memory", action="store_true",
                   help="TrainConfig.retain_memory: tune glibc malloc (process-wide; "
                        "bounded), and huge pages for torch's large tensors "
                        "(THP_MEM_ALLOC_ENABLE=1 unless set; examples/benchmark_malloc.py "
                        "measures each)")
    p.add_argument("--json", type=Path, default=None, help="write every figure here")
    p.add_argument("--quick", action="store_true", help="smoke run on a small synthetic graph")
    return p.parse_args(argv)


def _dataset(args: argparse.Namespace) -> TemporalDataset:
    if args.dataset == "synthetic-wikipedia" and not args.quick:
        return make_wikipedia_like(num_users=8227, num_pages=1000, num_events=157474,
                                   seed=args.seed)
    if args.quick or args.dataset == "synthetic":
        n = 3000 if args.quick else 60000
        return make_wikipedia_like(num_users=300 if args.quick else 2000,
                                   num_pages=60 if args.quick else 300, num_events=n,
                                   seed=args.seed)
    return load_dataset(args.dataset, args.data_dir or default_data_dir())


def _with_zero_features(data: TemporalDataset, width: int) -> TemporalDataset:
    from dataclasses import replace

    if width == 0:
        return replace(data, node_feat=None, edge_feat=None)
    return replace(data, edge_feat=np.zeros((data.num_edges, width), np.float32),
                   node_feat=np.zeros((data.num_nodes, width), np.float32))


def _trainer(data: TemporalDataset, setting: Dict[str, Any], variant: str, impl: str,
             args: argparse.Namespace, batches: int) -> LinkPredictionTrainer:
    torch.manual_seed(args.seed)
    model: torch.nn.Module = TBDFSModel(
        data.node_dim, data.edge_dim, setting["time_width"], setting["width"],
        num_layers=len(setting["fanouts"]), **VARIANTS[variant])
    if impl == "dgl":
        from tbdfs_dgl._reference import ReferenceModel

        model = ReferenceModel(model)
    compiled = args.compile and impl == "dense"  # the DGL baseline runs eager
    cfg = TrainConfig(batch_size=args.batch_size, fanouts=setting["fanouts"],
                      strategy=setting["strategy"], num_threads=args.sampler_threads,
                      seed=args.seed, device=args.device, train_batches=batches,
                      compile=compiled, amp=args.amp,
                      compile_mode=args.compile_mode if compiled else None,
                      progress=False, retain_memory=args.retain_memory,
                      prefetch_batches=args.prefetch_batches)
    return LinkPredictionTrainer(model, data, cfg, log=lambda line: None)


def _kernels(impl: str) -> Any:
    """The context an implementation's batches run in: ``torch`` without the C++ kernels."""
    return _native.all_disabled() if impl == "torch" else contextlib.nullcontext()


def _sync(device: str) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def run(args: argparse.Namespace) -> Dict[str, Any]:
    torch.set_num_threads(args.threads)
    base = _dataset(args)
    n_batches = args.batches or (2 if args.quick else 8)
    rounds = args.rounds or (1 if args.quick else 3)
    warmup = args.warmup if args.warmup is not None else (1 if args.quick else 2)
    settings = [s for s in args.settings.split(",") if s]
    variants = [v for v in args.variants.split(",") if v]
    impls = [i for i in args.impls.split(",") if i]
    for name, pool in (("setting", SETTINGS), ("variant", VARIANTS), ("impl", IMPLS)):
        chosen = {"setting": settings, "variant": variants, "impl": impls}[name]
        for c in chosen:
            if c not in pool:
                raise SystemExit(f"error: unknown {name} {c!r}; choose from {', '.join(pool)}")
    rows = []
    for s in settings:
        setting = SETTINGS[s]
        data = _with_zero_features(base, setting["feat_width"])
        configs = [(v, i) for v in variants for i in impls]
        trainers = {c: _trainer(data, setting, c[0], c[1], args, n_batches) for c in configs}
        per_batch: Dict[Any, List[float]] = {c: [] for c in configs}
        sampling: Dict[Any, List[float]] = {c: [] for c in configs}
        peak: Dict[Any, float] = {}
        cuda = torch.device(args.device).type == "cuda"
        for c in configs:  # warm-up (and compilation)
            tr = trainers[c]
            if cuda:
                torch.cuda.reset_peak_memory_stats()
            tr.config.train_batches = warmup
            with _kernels(c[1]):
                tr.train_epoch(10_000)
            tr.config.train_batches = n_batches
            if cuda:
                # CUDA graphs ('reduce-overhead') take their memory while warming up, from a
                # pool of their own that replays reuse: the peak must include the warm-up.
                _sync(args.device)
                peak[c] = torch.cuda.max_memory_allocated() / 2**20
        for r in range(rounds):
            for c in configs:
                tr = trainers[c]
                if cuda:
                    torch.cuda.reset_peak_memory_stats()
                _sync(args.device)
                t0 = time.perf_counter()
                with _kernels(c[1]):
                    _, sample_s, _, n = tr.train_epoch(r)
                _sync(args.device)
                per_batch[c].append((time.perf_counter() - t0) / n)
                sampling[c].append(sample_s / n)
                if cuda:
                    peak[c] = max(peak.get(c, 0.0), torch.cuda.max_memory_allocated() / 2**20)
        for c in configs:
            tr = trainers[c]
            epoch_batches = int(np.ceil(tr.split.train.sum() / args.batch_size))
            ms = 1e3 * statistics.median(per_batch[c])
            rows.append({
                "setting": s, "variant": c[0], "impl": c[1], "device": args.device,
                "compile": tr.config.compile, "amp": args.amp,
                "compile_mode": tr.config.compile_mode,
                "prefetch_batches": args.prefetch_batches,
                "ms_per_batch": ms,
                "ms_per_batch_min": 1e3 * min(per_batch[c]),
                "ms_per_batch_max": 1e3 * max(per_batch[c]),
                # Rounds alternate between configurations, so round r of two of them
                # ran under about the same load: their per-round ratio is the fair one.
                "ms_per_batch_rounds": [1e3 * x for x in per_batch[c]],
                "sampling_ms_per_batch": 1e3 * statistics.median(sampling[c]),
                "epoch_batches": epoch_batches,
                "s_per_epoch": ms * epoch_batches / 1e3,
                "s_per_official_epoch": ms * OFFICIAL_BATCHES_PER_EPOCH / 1e3,
                "peak_gpu_mb": peak.get(c),
            })
            tr.close()
    gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else None
    return {"dataset": base.name, "num_edges": int(base.num_edges),
            "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
            "host": platform.node(), "cpu_count": os.cpu_count(), "gpu": gpu,
            "cpu_gemm": cpu_gemm_backend(),
            "versions": {"torch": torch.__version__, "python": platform.python_version(),
                         "numpy": np.__version__},
            "results": rows}


def speedup_rows(results: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """The baseline/dense ratio of every (setting, variant) measured with ``dense`` and a
    baseline (``dgl``, ``torch``),
    round by round (rounds alternate the configurations, so each ratio compares two runs
    made under about the same load): median, min and max over rounds."""
    by_key = {(r["setting"], r["variant"], r["impl"]): r for r in results}
    out = []
    for (s, v, impl), dense in by_key.items():
        for baseline in BASELINES:
            other = by_key.get((s, v, baseline))
            if impl != "dense" or other is None:
                continue
            ratios = [b / a for a, b in zip(dense["ms_per_batch_rounds"],
                                            other["ms_per_batch_rounds"])]
            out.append({"setting": s, "variant": v, "baseline": baseline,
                        "speedup": statistics.median(ratios), "speedup_min": min(ratios),
                        "speedup_max": max(ratios), "speedup_rounds": ratios})
    return out


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    doc = run(args)
    print(f"{doc['dataset']} ({doc['num_edges']} interactions), batch {args.batch_size} "
          f"interactions = {3 * args.batch_size} roots, device {args.device}"
          f"{' (' + doc['gpu'] + ')' if doc['gpu'] and args.device != 'cpu' else ''}, "
          f"torch threads {args.threads}, compile {args.compile}, amp {args.amp}, "
          f"CPU GEMM {doc['cpu_gemm']} ($TBDFS_CPU_GEMM)")
    print("| setting | variant | impl | ms/batch (min-max) | sampling ms/batch | s/epoch "
          "(ours) | s/epoch (382 batches) | peak GPU MB |")
    print("|---|---|---|---:|---:|---:|---:|---:|")
    for r in doc["results"]:
        gpu = "-" if r["peak_gpu_mb"] is None else f"{r['peak_gpu_mb']:.0f}"
        print(f"| {r['setting']} | {r['variant']} | {r['impl']} | {r['ms_per_batch']:.1f} "
              f"({r['ms_per_batch_min']:.1f}-{r['ms_per_batch_max']:.1f}) | "
              f"{r['sampling_ms_per_batch']:.1f} | {r['s_per_epoch']:.1f} | "
              f"{r['s_per_official_epoch']:.1f} | {gpu} |")
    speedups = speedup_rows(doc["results"])
    for baseline in BASELINES:
        rows = [r for r in speedups if r["baseline"] == baseline]
        if not rows:
            continue
        print(f"\ndense speed-up over the {baseline} baseline, per round (same load): "
              "median (min-max)")
        print(f"| setting | variant | {baseline} / dense |")
        print("|---|---|---:|")
        for r in rows:
            print(f"| {r['setting']} | {r['variant']} | {r['speedup']:.2f}x "
                  f"({r['speedup_min']:.2f}-{r['speedup_max']:.2f}) |")
    if speedups:
        doc["speedups"] = speedups
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
