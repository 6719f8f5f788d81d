"""Train tBDFS for temporal link prediction on the JODIE Wikipedia graph.

Examples
--------
The README's main job (one short epoch)::

    python examples/train_wikipedia.py

tBDFS against TGAT (its alpha = 1 special case) in one run, five epochs::

    python examples/train_wikipedia.py --alpha 0.5,1 --epochs 5

Data: ``--data`` takes a JODIE ``wikipedia.csv`` or an edge list such as
``../shared/data/wikipedia/wikipedia-edges.txt.gz``.  Without it the script looks in
``--data-dir`` (default ``$TBDFS_DATA_DIR``, else ``../shared/data``), then tries to download
JODIE's ``wikipedia.csv``; offline it says so and trains on a synthetic Wikipedia-like graph,
named as such in every line it prints and in the JSON it writes.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tbdfs_dgl import TBDFSModel, seed_everything  # noqa: E402
from tbdfs_dgl.data import (TemporalDataset, default_data_dir, fetch_dataset,  # noqa: E402
                            load_dataset, make_wikipedia_like)
from tbdfs_dgl.linkpred import LinkPredictionTrainer, TrainConfig  # noqa: E402


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    d = p.add_argument_group("data")
    d.add_argument("--data", default=None, help="a JODIE wikipedia.csv or an edge-list file")
    d.add_argument("--data-dir", default=None, help="folder with the datasets "
                   "(default: $TBDFS_DATA_DIR, else ../shared/data)")
    d.add_argument("--no-download", action="store_true", help="never try to download")
    s = p.add_argument_group("sampling")
    s.add_argument("--fanouts", default="10,10", help="neighbours per layer")
    s.add_argument("--strategy", default="recent", choices=["recent", "uniform"])
    s.add_argument("--num-threads", type=int, default=None, help="sampler threads")
    s.add_argument("--torch-threads", type=int, default=None,
                   help="torch intra-op threads (default: torch's own choice)")
    m = p.add_argument_group("model")
    m.add_argument("--alpha", default="0.5",
                   help="BFS/DFS blend; a comma list trains each in turn (e.g. 0.5,1 for "
                        "tBDFS and TGAT); 'learn' for a learned gate")
    m.add_argument("--hidden-dim", type=int, default=100)
    m.add_argument("--time-dim", type=int, default=100)
    m.add_argument("--num-heads", type=int, default=2)
    m.add_argument("--dropout", type=float, default=0.1)
    m.add_argument("--node-embedding-dim", type=int, default=0,
                   help="learnable node embeddings (transductive) for featureless graphs")
    m.add_argument("--path-agg", default="attn", choices=["attn", "mean"])
    m.add_argument("--paths-agg", default="attn", choices=["attn", "mean"])
    m.add_argument("--path-inputs", default="raw", choices=["raw", "bfs"])
    m.add_argument("--no-time", action="store_true", help="the paper's '-time' ablation")
    m.add_argument("--time-encoding", default=None,
                   choices=["cos_sin", "cos_sin_unscaled", "cos_phase"],
                   help="form of the time encoding (TBDFSModel(time_encoding=...)); "
                        "default: the model's (docs/learning_efficiency.md)")
    m.add_argument("--unscaled-time", action="store_true",
                   help="same as --time-encoding cos_sin_unscaled")
    m.add_argument("--feat-dim", type=int, default=None,
                   help="replace the node/edge features by this many zero columns (the "
                        "official code's setting for featureless graphs, for timing)")
    t = p.add_argument_group("training")
    t.add_argument("--epochs", type=int, default=1)
    t.add_argument("--batch-size", type=int, default=200)
    t.add_argument("--lr", type=float, default=1e-4)
    t.add_argument("--patience", type=int, default=5)
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--device", default="cpu", help="cpu, cuda or cuda:i (the model needs no "
                   "DGL, so any device torch supports works)")
    t.add_argument("--compile", action="store_true",
                   help="torch.compile the model (batches padded to fixed shapes)")
    t.add_argument("--amp", choices=["bf16"], default=None,
                   help="autocast the model's matrix products to bfloat16")
    t.add_argument("--train-negatives", choices=["all", "active"], default="active",
                   help="training negatives among all training destinations (TGAT) or only "
                        "those active before the batch (docs/learning_efficiency.md)")
    t.add_argument("--max-batches", type=int, default=None,
                   help="cap batches per epoch and per evaluation (smoke runs)")
    t.add_argument("--save-dir", default="runs/train_wikipedia")
    t.add_argument("--no-progress", action="store_true")
    return p.parse_args(argv)


def get_data(args: argparse.Namespace) -> TemporalDataset:
    """The requested data, else Wikipedia from the data folder, a download, or synthetic."""
    if args.data:
        if not os.path.exists(args.data):
            raise SystemExit(f"error: --data {args.data}: no such file")
        return load_dataset(args.data)
    try:
        return load_dataset("wikipedia", args.data_dir)
    except FileNotFoundError as missing:
        print(f"note: {missing}")
    if not args.no_download:
        target = args.data_dir or default_data_dir() or (Path.home() / ".cache" / "tbdfs_dgl")
        try:
            path = fetch_dataset("wikipedia", target)
            return load_dataset(path)
        except (RuntimeError, OSError) as offline:
            print(f"note: {offline}")
    print("note: no Wikipedia data available: training on the SYNTHETIC Wikipedia-like graph "
          "instead (tbdfs_dgl.data.make_wikipedia_like); its numbers say nothing about Wikipedia")
    return make_wikipedia_like(num_users=2000, num_pages=300, num_events=60000, seed=args.seed)


def model_kwargs(args: argparse.Namespace, data: TemporalDataset, alpha: Any) -> Dict[str, Any]:
    fanouts = [int(x) for x in args.fanouts.split(",")]
    return dict(node_dim=data.node_feat_dim, edge_dim=data.edge_feat_dim, time_dim=args.time_dim,
                hidden_dim=args.hidden_dim, num_layers=len(fanouts), num_heads=args.num_heads,
                dropout=args.dropout, alpha=alpha, path_agg=args.path_agg,
                paths_agg=args.paths_agg, path_inputs=args.path_inputs,
                use_time=not args.no_time, num_nodes=data.num_nodes,
                node_embedding_dim=args.node_embedding_dim,
                time_encoding=time_encoding(args))


def time_encoding(args: argparse.Namespace) -> Any:
    """``--time-encoding``, or its older spelling ``--unscaled-time`` (None: the default)."""
    if args.unscaled_time:
        if args.time_encoding not in (None, "cos_sin_unscaled"):
            raise SystemExit(f"error: --unscaled-time contradicts --time-encoding "
                             f"{args.time_encoding}")
        return "cos_sin_unscaled"
    return args.time_encoding


def with_zero_features(data: TemporalDataset, width: int) -> TemporalDataset:
    """The official code's featureless setting: ``width`` zero columns on nodes and edges."""
    from dataclasses import replace

    return replace(data, edge_feat=np.zeros((data.num_edges, width), np.float32),
                   node_feat=np.zeros((data.num_nodes, width), np.float32))


def slug(label: str) -> str:
    """A folder name for a run label: 'tBDFS (alpha=0.5)' -> 'tbdfs-alpha-0.5'."""
    return re.sub(r"[^a-z0-9.]+", "-", label.lower()).strip("-")


def run_one(args: argparse.Namespace, data: TemporalDataset, alpha: Any, label: str,
            save_dir: Path) -> Dict[str, Any]:
    seed_everything(args.seed)
    kwargs = model_kwargs(args, data, alpha)
    model = TBDFSModel(**kwargs)
    n_params = sum(p.numel() for p in model.parameters())
    cfg = TrainConfig(epochs=args.epochs, batch_size=args.batch_size, lr=args.lr,
                      patience=args.patience, fanouts=[int(x) for x in args.fanouts.split(",")],
                      strategy=args.strategy, num_threads=args.num_threads, seed=args.seed,
                      device=args.device, compile=args.compile, amp=args.amp,
                      train_negatives=args.train_negatives,
                      max_batches=args.max_batches,
                      save_dir=str(save_dir / slug(label)), progress=not args.no_progress)
    print(f"[{data.name}] {label}: alpha={alpha}, {n_params} parameters, fanouts {cfg.fanouts}, "
          f"{cfg.strategy} sampling, device {cfg.device}")
    trainer = LinkPredictionTrainer(model, data, cfg, model_kwargs=kwargs,
                                    log=lambda line: print(f"[{data.name}] {label}: {line}"))
    t0 = time.perf_counter()
    try:
        result = trainer.fit()
    finally:
        trainer.close()
    epochs = result.history
    return {
        "label": label, "alpha": alpha, "parameters": n_params,
        "seconds_total": time.perf_counter() - t0,
        "epochs_run": len(epochs), "best_epoch": result.best_epoch,
        "seconds_per_epoch": float(np.mean([e.seconds for e in epochs])) if epochs else None,
        "sampling_seconds_per_epoch": float(np.mean([e.sample_seconds for e in epochs])) if epochs else None,
        "model_seconds_per_epoch": float(np.mean([e.model_seconds for e in epochs])) if epochs else None,
        "batches_per_epoch": epochs[0].batches if epochs else 0,
        "peak_rss_mb": result.peak_rss_mb, "peak_gpu_mb": result.peak_gpu_mb,
        "val": result.val, "test": result.test,
        "history": [{"epoch": e.epoch, "loss": e.loss, "val_ap": e.val["transductive"]["ap"],
                     "seconds": e.seconds} for e in epochs],
    }


def table(name: str, runs: List[Dict[str, Any]]) -> str:
    head = "| dataset | model | setting | Accuracy | F1 | AP | AUC | s/epoch (sampling / model) |"
    rows = [head, "|" + "---|" * 8]
    for r in runs:
        for setting in ("transductive", "inductive"):
            m = r["test"][setting]
            rows.append(f"| {name} | {r['label']} | {setting} | {m['accuracy']:.4f} | {m['f1']:.4f} "
                        f"| {m['ap']:.4f} | {m['auc']:.4f} | {r['seconds_per_epoch']:.1f} "
                        f"({r['sampling_seconds_per_epoch']:.1f} / {r['model_seconds_per_epoch']:.1f}) |")
    return "\n".join(rows)


def main(argv: Optional[List[str]] = None) -> Dict[str, Any]:
    args = parse_args(argv)
    if args.torch_threads:
        torch.set_num_threads(args.torch_threads)
    data = get_data(args)
    if args.feat_dim is not None:
        data = with_zero_features(data, args.feat_dim)
    if data.synthetic and "SYNTHETIC" not in data.name:
        data.name = f"SYNTHETIC-{data.name}"
    print(f"[{data.name}] {data.summary() if hasattr(data, 'summary') else data.num_edges}")
    save_dir = Path(args.save_dir)
    runs = []
    for a in args.alpha.split(","):
        alpha: Any = a if a == "learn" else float(a)
        label = {1.0: "TGAT (alpha=1)"}.get(alpha, f"tBDFS (alpha={a})")
        runs.append(run_one(args, data, alpha, label, save_dir))
    print()
    print(table(data.name, runs))
    out = {"dataset": data.name, "synthetic": bool(data.synthetic), "source": data.source,
           "args": vars(args), "runs": runs,
           "versions": {"torch": torch.__version__, "numpy": np.__version__}}
    save_dir.mkdir(parents=True, exist_ok=True)
    path = save_dir / "metrics.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(out, indent=2, default=float))
    os.replace(tmp, path)
    print(f"\n[{data.name}] metrics written to {path}")
    return out


if __name__ == "__main__":
    main()
