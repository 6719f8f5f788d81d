"""Train tBDFS for temporal link prediction on the JODIE Wikipedia graph.

Examples
--------
The README's main job (one short epoch)::

    python examples/train_wikipedia.py

tBDFS against TGAT (its alpha = 1 special case) in one run, five epochs::

    python examples/train_wikipedia.py --alpha 0.5,1 --epochs 5

Evaluate a saved checkpoint against DyGLib's three kinds of negatives, one positive against
49 candidates (MRR, Hits@{1,3,10}; README "Evaluating like the field")::

    python examples/train_wikipedia.py --eval-only runs/train_wikipedia/tbdfs-alpha-0.5/best.pt \
        --eval-negatives random,historical,inductive --eval-candidates 1,49

Data-parallel on N processes (gloo on CPU, nccl with ``--device cuda``; each rank trains on
its share of every global batch of ``--batch-size`` events, the graphs are memory-mapped
once for all ranks, rank 0 prints and writes; see ``tbdfs_dgl.linkpred.distributed``)::

    torchrun --nproc_per_node 2 examples/train_wikipedia.py

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
from typing import Any, Callable, Dict, List, Optional, Tuple

# --retain-memory also asks torch to put its tensors of 2 MB or more on transparent huge
# pages, a switch torch reads at its first allocation, so it is set before torch loads
# (tbdfs_dgl._malloc.huge_page_tensors; THP_MEM_ALLOC_ENABLE=0 keeps them off).
if "--retain-memory" in sys.argv[1:]:
    os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tbdfs_dgl import TBDFSModel, seed_everything  # noqa: E402
from tbdfs_dgl._deprecation import add_deprecated_flag  # noqa: E402
from tbdfs_dgl.data import (TemporalDataset, default_data_dir, fetch_dataset,  # noqa: E402
                            load_dataset, make_wikipedia_like)
from tbdfs_dgl.eval_negatives import EVAL_NEGATIVES  # noqa: E402
from tbdfs_dgl.linkpred import LinkPredictionTrainer, TrainConfig, load_checkpoint  # noqa: E402
from tbdfs_dgl.linkpred.config import COMPILE_MODES  # noqa: E402
from tbdfs_dgl.linkpred.affinity import parse_pin_spec, pin_process  # noqa: E402
from tbdfs_dgl.linkpred.distributed import init_from_env  # noqa: E402


def add_model_arguments(m: Any) -> None:
    """The model's flags (read by :func:`model_kwargs`); shared with the other examples."""
    m.add_argument("--alpha", default="0.5",
                   help="BFS/DFS blend; a comma list trains each in turn (e.g. 0.5,1 for "
                        "tBDFS and TGAT); 'learn' for a learned gate")
    m.add_argument("--hidden-dim", type=int, default=100)
    m.add_argument("--time-dim", type=int, default=100)
    m.add_argument("--num-heads", type=int, default=2)
    m.add_argument("--dropout", type=float, default=0.1)
    m.add_argument("--node-embedding-dim", type=int, default=0,
                   help="learnable node embeddings (transductive) for featureless graphs")
    for flag, old, what in (("--within-path-agg", "--path-agg", "over each path's nodes"),
                            ("--across-paths-agg", "--paths-agg", "over each root's paths")):
        dest = flag[2:].replace("-", "_")
        m.add_argument(flag, dest=dest, default="attn", choices=["attn", "mean"],
                       help=f"aggregation {what} (mean: the paper's ablation)")
        add_deprecated_flag(m, old, flag, dest, choices=["attn", "mean"])
    m.add_argument("--path-inputs", default="raw", choices=["raw", "bfs"])
    m.add_argument("--no-time", action="store_true", help="the paper's '-time' ablation")
    m.add_argument("--time-encoding", default=None,
                   choices=["cos_sin", "cos_sin_unscaled", "cos_phase"],
                   help="form of the time encoding (TBDFSModel(time_encoding=...)); "
                        "default: the model's (docs/learning_efficiency.md)")
    m.add_argument("--unscaled-time", action="store_true",
                   help="same as --time-encoding cos_sin_unscaled")
    m.add_argument("--attn-dim", type=int, default=None,
                   help="attention width of the BFS layers (TBDFSModel(attn_dim=...)); "
                        "default: the model's (hidden_dim + time_dim in the attn_norm form, "
                        "hidden_dim without it)")
    m.add_argument("--attn-norm", action=argparse.BooleanOptionalAction, default=None,
                   help="W_O + LayerNorm on the BFS layers' attention output "
                        "(TBDFSModel(attn_norm=...)); default: the model's")
    m.add_argument("--attn-init", default=None, choices=["xavier", "torch"],
                   help="initialisation of the BFS layers (TBDFSModel(attn_init=...)); "
                        "default: the model's")
    m.add_argument("--empty-neighbourhood", default=None,
                   choices=["zero", "padding", "padding_node"],
                   help="what a BFS destination without eligible neighbours attends to: "
                        "nothing, or TGAT's and DyGLib's padding at time 0 (padding_node: "
                        "with the padding node embedded as their recursion embeds it) "
                        "(TBDFSModel(empty_neighbourhood=...)); default: the model's")
    m.add_argument("--attn-residual", action=argparse.BooleanOptionalAction, default=None,
                   help="with the attn_norm form, DyGLib's residual [h_i || Phi(0)] before "
                        "the LayerNorm (TBDFSModel(attn_residual=...)); default: the model's")


def add_data_arguments(d: Any) -> None:
    """``--data``, ``--data-dir``, ``--no-download`` (what :func:`get_data` reads) on a
    parser or argument group; the other examples share them."""
    d.add_argument("--data", default=None, help="a JODIE wikipedia.csv or an edge-list file")
    d.add_argument("--data-dir", default=None, help="folder with the datasets "
                   "(default: $TBDFS_DATA_DIR, else ../shared/data)")
    d.add_argument("--no-download", action="store_true", help="never try to download")


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    add_data_arguments(p.add_argument_group("data"))
    s = p.add_argument_group("sampling")
    s.add_argument("--fanouts", default="10,10", help="neighbours per layer")
    s.add_argument("--strategy", default="recent", choices=["recent", "uniform"])
    s.add_argument("--num-threads", type=int, default=None, help="sampler threads")
    s.add_argument("--prefetch-batches", type=int, default=1,
                   help="batches sampled ahead at once, a thread each (GPU runs can outrun "
                        "one; the batches are the same for any value)")
    s.add_argument("--torch-threads", type=int, default=None,
                   help="torch intra-op threads (default: torch's own choice; with "
                        "--pin-cores, the process's share of the CPUs)")
    s.add_argument("--pin-cores", default=None, metavar="auto|i/n",
                   help="pin this process to an equal share of the CPUs, whole physical "
                        "cores first: 'auto' under torchrun (rank LOCAL_RANK of "
                        "LOCAL_WORLD_SIZE), 'i/n' for process i of n started side by side "
                        "(default: not pinned)")
    m = p.add_argument_group("model")
    add_model_arguments(m)
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
    t.add_argument("--compile-mode", default=None, choices=[m for m in COMPILE_MODES if m],
                   help="torch.compile's mode with --compile, e.g. reduce-overhead (CUDA "
                        "graphs on a GPU); default torch's")
    t.add_argument("--amp", choices=["bf16"], default=None,
                   help="autocast the model's matrix products to bfloat16")
    t.add_argument("--train-negatives", choices=["all", "active"], default="all",
                   help="training negatives among all training destinations (TGAT's, the "
                        "default) or only those active before the batch (faster in the "
                        "first steps, worse over epochs: docs/learning_efficiency.md)")
    t.add_argument("--max-batches", type=int, default=None,
                   help="cap batches per epoch and per evaluation (smoke runs)")
    t.add_argument("--train-batches", type=int, default=None,
                   help="train each epoch on this many randomly drawn training batches")
    t.add_argument("--val-events", type=int, default=None,
                   help="validate on this many randomly drawn validation interactions")
    t.add_argument("--test-events", type=int, default=None,
                   help="test on this many randomly drawn test interactions")
    e = p.add_argument_group("evaluation")
    e.add_argument("--eval-negatives", default="random",
                   help="evaluation negatives: random (TGAT), historical or inductive "
                        "(DyGLib's; candidates keep the positive's source); with --eval-only "
                        "a comma list evaluates each")
    e.add_argument("--eval-candidates", default="1",
                   help="negatives per positive K; K > 1 adds MRR and Hits@1/3/10 (one "
                        "positive against K candidates, TGB's protocol); with --eval-only a "
                        "comma list evaluates each")
    e.add_argument("--eval-only", default=None, metavar="CHECKPOINT",
                   help="train nothing: evaluate this checkpoint (its sampling settings and "
                        "seed, hence its split) on the test part, with the same data flags "
                        "as its training; writes <save-dir>/eval_metrics.json")
    t.add_argument("--retain-memory", action="store_true",
                   help="tune glibc malloc to keep freed memory (TrainConfig.retain_memory; "
                        "process-wide, bounded) and put torch's large tensors on huge pages "
                        "(THP_MEM_ALLOC_ENABLE=1 unless set): ~1.5x faster CPU steps for wide "
                        "models (width 172) or [20, 20] neighbours, more peak memory; no "
                        "gain at the defaults")
    t.add_argument("--save-dir", default="runs/train_wikipedia")
    t.add_argument("--resume", action="store_true",
                   help="save each run's training state after every epoch "
                        "(<save-dir>/<run>/training.state) and go on from a state already "
                        "there: a stopped run resumes after its last epoch, a finished one "
                        "only tests again (TrainConfig.resume_path; one process only)")
    t.add_argument("--graph-dir", default=None,
                   help="save the sampler graphs here and sample from memory-mapped copies "
                        "(distributed runs default to a temporary folder)")
    t.add_argument("--no-progress", action="store_true")
    args = p.parse_args(argv)
    check_args(p, args)
    if args.pin_cores is not None:
        try:
            parse_pin_spec(args.pin_cores)
        except ValueError as e:
            p.error(str(e))
    return args


def fanouts_of(args: argparse.Namespace) -> List[int]:
    """``--fanouts`` as integers (validated by :func:`check_args`)."""
    try:
        return [int(x) for x in args.fanouts.split(",")]
    except ValueError:
        raise ValueError(f"--fanouts must be comma-separated integers >= 1 (neighbours per "
                         f"layer), got {args.fanouts!r}") from None


def alphas_of(args: argparse.Namespace) -> List[Any]:
    """``--alpha``'s comma list: numbers, or 'learn'."""
    out: List[Any] = []
    for a in args.alpha.split(","):
        try:
            out.append(a if a == "learn" else float(a))
        except ValueError:
            raise ValueError(f"--alpha takes numbers in [0, 1] or 'learn' (a comma list "
                             f"trains each), got {a!r}") from None
    return out


def check_args(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """:func:`refuse_bad_settings` for this script (not with ``--eval-only``: the
    checkpoint's settings apply)."""
    if not args.eval_only:
        refuse_bad_settings(p, args, lambda: train_config(args, "random", 1, save_dir=None))
    if args.resume and int(os.environ.get("WORLD_SIZE", "1")) > 1:
        p.error("--resume is for one-process runs; a distributed run (WORLD_SIZE > 1) "
                "cannot resume")
    if args.resume and args.eval_only:
        p.error("--resume trains; --eval-only trains nothing: use one or the other")


def refuse_bad_settings(p: argparse.ArgumentParser, args: argparse.Namespace,
                        make_config: Callable[[], TrainConfig],
                        single_alpha: bool = False, models: bool = True) -> None:
    """Refuse bad model and training settings before any data is read: build each run's
    model (on a featureless stand-in for the data) and its TrainConfig (``make_config``),
    which name what is wrong, and report that as an argparse error (exit 2) instead of a
    traceback after loading.  The examples that share the model flags use it too
    (``models=False`` where a checkpoint's model replaces the model flags)."""
    stand_in = argparse.Namespace(node_dim=0, edge_dim=0, num_nodes=1)
    try:
        fanouts_of(args)
        if models:
            alphas = alphas_of(args)
            if single_alpha and len(alphas) != 1:
                raise ValueError(f"--alpha takes one value here, got {args.alpha!r}")
            for alpha in alphas:
                TBDFSModel(**model_kwargs(args, stand_in, alpha))
        make_config()
    except ValueError as err:
        p.error(str(err))


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


def model_kwargs(args: argparse.Namespace, data: Any, alpha: Any) -> Dict[str, Any]:
    """TBDFSModel's arguments for ``data`` (anything with node_dim, edge_dim, num_nodes)."""
    fanouts = fanouts_of(args)
    return dict(node_dim=data.node_dim, edge_dim=data.edge_dim, time_dim=args.time_dim,
                hidden_dim=args.hidden_dim, num_layers=len(fanouts), num_heads=args.num_heads,
                dropout=args.dropout, alpha=alpha, within_path_agg=args.within_path_agg,
                across_paths_agg=args.across_paths_agg, path_inputs=args.path_inputs,
                use_time=not args.no_time, num_nodes=data.num_nodes,
                node_embedding_dim=args.node_embedding_dim,
                time_encoding=time_encoding(args),
                **{k: v for k, v in (("attn_dim", args.attn_dim), ("attn_norm", args.attn_norm),
                                     ("attn_init", args.attn_init),
                                     ("empty_neighbourhood", args.empty_neighbourhood),
                                     ("attn_residual", args.attn_residual))
                   if v is not None})


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


def evaluation_settings(args: argparse.Namespace) -> List[Tuple[str, int]]:
    """The (negatives, K) pairs of ``--eval-negatives`` x ``--eval-candidates``."""
    strategies = [x.strip() for x in args.eval_negatives.split(",") if x.strip()]
    for x in strategies:
        if x not in EVAL_NEGATIVES:
            raise SystemExit(f"error: --eval-negatives {x!r}: choose from "
                             f"{', '.join(EVAL_NEGATIVES)}")
    try:
        ks = [int(x) for x in args.eval_candidates.split(",") if x.strip()]
    except ValueError:
        raise SystemExit(f"error: --eval-candidates must be integers, got "
                         f"{args.eval_candidates!r}")
    if not strategies or not ks or min(ks) < 1:
        raise SystemExit("error: --eval-negatives and --eval-candidates need values, K >= 1")
    settings = [(s, k) for s in strategies for k in ks]
    if len(settings) > 1 and not args.eval_only:
        raise SystemExit("error: comma lists of --eval-negatives/--eval-candidates need "
                         "--eval-only (training early-stops on one evaluation)")
    return settings


def train_config(args: argparse.Namespace, eval_negatives: str, eval_candidates: int,
                 save_dir: Optional[str]) -> TrainConfig:
    """The TrainConfig of a run (raises ValueError naming a bad setting)."""
    return TrainConfig(epochs=args.epochs, batch_size=args.batch_size, lr=args.lr,
                       patience=args.patience, fanouts=fanouts_of(args),
                       strategy=args.strategy, num_threads=args.num_threads, seed=args.seed,
                       device=args.device, compile=args.compile, amp=args.amp,
                       compile_mode=args.compile_mode, prefetch_batches=args.prefetch_batches,
                       train_negatives=args.train_negatives,
                       max_batches=args.max_batches, train_batches=args.train_batches,
                       val_events=args.val_events, test_events=args.test_events,
                       eval_negatives=eval_negatives, eval_candidates=eval_candidates,
                       retain_memory=args.retain_memory, save_dir=save_dir,
                       progress=not args.no_progress, graph_dir=args.graph_dir,
                       resume_path=(os.path.join(save_dir, "training.state")
                                    if args.resume and save_dir else None))


def run_one(args: argparse.Namespace, data: TemporalDataset, alpha: Any, label: str,
            save_dir: Path) -> Dict[str, Any]:
    seed_everything(args.seed)
    kwargs = model_kwargs(args, data, alpha)
    model = TBDFSModel(**kwargs)
    n_params = sum(p.numel() for p in model.parameters())
    (eval_negatives, eval_candidates), = evaluation_settings(args)
    cfg = train_config(args, eval_negatives, eval_candidates, str(save_dir / slug(label)))
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
        "eval_negatives": cfg.eval_negatives, "eval_candidates": cfg.eval_candidates,
        "seconds_total": time.perf_counter() - t0,
        "epochs_run": len(epochs), "best_epoch": result.best_epoch,
        "seconds_per_epoch": float(np.mean([e.seconds for e in epochs])) if epochs else None,
        "sampling_seconds_per_epoch": float(np.mean([e.sample_seconds for e in epochs])) if epochs else None,
        "model_seconds_per_epoch": float(np.mean([e.model_seconds for e in epochs])) if epochs else None,
        "batches_per_epoch": epochs[0].batches if epochs else 0,
        "peak_rss_mb": result.peak_rss_mb, "peak_gpu_mb": result.peak_gpu_mb,
        "val": result.val, "test": result.test, "learned_alpha": result.alpha,
        "history": [{"epoch": e.epoch, "loss": e.loss, "val_ap": e.val["transductive"]["ap"],
                     "seconds": e.seconds} for e in epochs],
    }


def evaluate_checkpoint(args: argparse.Namespace, data: TemporalDataset) -> Dict[str, Any]:
    """Evaluate ``args.eval_only`` on the test part for every (negatives, K) asked for.

    The sampling settings and the seed (so the split and the sampler's streams) are the
    checkpoint's own (its saved TrainConfig); the evaluation settings (negatives, K,
    ``--test-events``, ``--max-batches``, device, threads) are this command's.
    """
    model, extra = load_checkpoint(args.eval_only)
    if getattr(model, "edge_dim", 0) != data.edge_dim or getattr(model, "node_dim", 0) != \
            data.node_dim:
        raise SystemExit(f"error: {args.eval_only} was trained with node/edge feature widths "
                         f"{model.node_dim}/{model.edge_dim}, the data has {data.node_dim}/"
                         f"{data.edge_dim}: give the data flags of its training")
    if getattr(model, "num_nodes", None) not in (None, data.num_nodes):
        raise SystemExit(f"error: {args.eval_only} was trained on {model.num_nodes} nodes, the "
                         f"data has {data.num_nodes}: give the data flags of its training")
    saved = extra.get("config") or {}
    if not saved:
        print(f"note: {args.eval_only} has no saved TrainConfig; using this command's sampling "
              "settings and seed")
    evals = []
    for negatives, k in evaluation_settings(args):
        cfg = TrainConfig(
            batch_size=saved.get("batch_size", args.batch_size),
            fanouts=saved.get("fanouts", fanouts_of(args)),
            strategy=saved.get("strategy", args.strategy), seed=saved.get("seed", args.seed),
            num_threads=args.num_threads, device=args.device, amp=args.amp,
            max_batches=args.max_batches, test_events=args.test_events,
            eval_negatives=negatives, eval_candidates=k, progress=not args.no_progress)
        seed_everything(cfg.seed)
        trainer = LinkPredictionTrainer(model, data, cfg, log=print)
        t0 = time.perf_counter()
        try:
            test = trainer.evaluate("test")
        finally:
            trainer.close()
        secs = time.perf_counter() - t0
        evals.append({"eval_negatives": negatives, "eval_candidates": k, "seconds": secs,
                      "test": test})
        m = test["transductive"]
        extra_cols = (f" | MRR {m['mrr']:.4f} Hits@1 {m['hits@1']:.4f} Hits@3 "
                      f"{m['hits@3']:.4f} Hits@10 {m['hits@10']:.4f}" if k > 1 else "")
        print(f"[{data.name}] {args.eval_only}: {negatives} negatives, K={k}: test AP "
              f"{m['ap']:.4f} AUC {m['auc']:.4f}{extra_cols} ({int(m['count'])} positives, "
              f"{secs:.1f}s)", flush=True)
    return {"checkpoint": args.eval_only, "checkpoint_epoch": extra.get("epoch"),
            "checkpoint_config": saved, "evaluations": evals}


def eval_table(name: str, result: Dict[str, Any]) -> str:
    """Markdown table of :func:`evaluate_checkpoint`'s evaluations."""
    head = ("| dataset | negatives | K | setting | AP | AUC | MRR | Hits@1 | Hits@3 | Hits@10 "
            "| positives |")
    rows = [head, "|" + "---|" * 11]
    for ev in result["evaluations"]:
        for setting in ("transductive", "inductive"):
            m = ev["test"][setting]
            rank = [f"{m[x]:.4f}" if x in m else "—"
                    for x in ("mrr", "hits@1", "hits@3", "hits@10")]
            rows.append(f"| {name} | {ev['eval_negatives']} | {ev['eval_candidates']} | "
                        f"{setting} | {m['ap']:.4f} | {m['auc']:.4f} | {' | '.join(rank)} | "
                        f"{int(m['count'])} |")
    return "\n".join(rows)


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
    if args.pin_cores is not None:
        # Before torch's thread pool, the sampler's threads and the process group start:
        # threads inherit the affinity of the thread that starts them.
        try:
            args.pinned_cpus = pin_process(*parse_pin_spec(args.pin_cores))
        except (ValueError, RuntimeError) as e:
            raise SystemExit(f"error: {e}") from None
        if not args.torch_threads and "OMP_NUM_THREADS" not in os.environ:
            args.torch_threads = len(args.pinned_cpus)
    # Under torchrun: join the process group; the other ranks stay quiet.
    ranks, args.device = init_from_env(args.device)
    if not ranks.is_main:
        sys.stdout = open(os.devnull, "w")
    try:
        return run_all(args, ranks)
    finally:
        if ranks.distributed:
            torch.distributed.destroy_process_group()


def run_all(args: argparse.Namespace, ranks: Any) -> Dict[str, Any]:
    if getattr(args, "pinned_cpus", None):
        print(f"pinned to CPUs {args.pinned_cpus} (--pin-cores {args.pin_cores})")
    if args.torch_threads:
        torch.set_num_threads(args.torch_threads)
    data = get_data(args)
    if args.feat_dim is not None:
        data = with_zero_features(data, args.feat_dim)
    if data.synthetic and "SYNTHETIC" not in data.name:
        data.name = f"SYNTHETIC-{data.name}"
    print(f"[{data.name}] {data.summary() if hasattr(data, 'summary') else data.num_edges}")
    save_dir = Path(args.save_dir)
    if args.eval_only:
        result = evaluate_checkpoint(args, data)
        print()
        print(eval_table(data.name, result))
        out = {"dataset": data.name, "synthetic": bool(data.synthetic), "source": data.source,
               "args": vars(args), **result,
               "versions": {"torch": torch.__version__, "numpy": np.__version__}}
        if ranks.is_main:
            write_json(out, save_dir / "eval_metrics.json")
            print(f"\n[{data.name}] metrics written to {save_dir / 'eval_metrics.json'}")
        return out
    evaluation_settings(args)  # a bad value fails before any training
    runs = []
    for a, alpha in zip(args.alpha.split(","), alphas_of(args)):
        label = {1.0: "TGAT (alpha=1)"}.get(alpha, f"tBDFS (alpha={a})")
        runs.append(run_one(args, data, alpha, label, save_dir))
    print()
    print(table(data.name, runs))
    for run in runs:
        la = run["learned_alpha"]
        if la is not None and la["roots_with_path"]:
            print(f"[{data.name}] {run['label']}: learned alpha (BFS weight) on the test "
                  f"embeddings with a path: mean {la['mean']:.3f}, p10-p90 "
                  f"{la['p10']:.3f}-{la['p90']:.3f} ({la['roots_with_path']} of {la['roots']})")
    out = {"dataset": data.name, "synthetic": bool(data.synthetic), "source": data.source,
           "args": vars(args), "runs": runs, "world_size": ranks.world_size,
           "versions": {"torch": torch.__version__, "numpy": np.__version__}}
    if not ranks.is_main:
        return out
    path = save_dir / "metrics.json"
    write_json(out, path)
    print(f"\n[{data.name}] metrics written to {path}")
    return out


def write_json(obj: Dict[str, Any], path: Path) -> None:
    """Write ``obj`` to ``path`` atomically (a temp file renamed over it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(obj, indent=2, default=float))
    os.replace(tmp, path)


if __name__ == "__main__":
    main()
