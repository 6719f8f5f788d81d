"""Explain a link prediction: the temporal paths tBDFS's attention weighed most, drawn.

Trains briefly (or loads ``--checkpoint``), picks a test interaction (u, v, t) (the one
the model is surest of among the first ``--candidates``, or ``--event``), and explains its
score with :meth:`TBDFSModel.explain`: for each endpoint, its top paths by the path
aggregator's attention (averaged over heads), the BFS weight alpha and the BFS / DFS
shares of the embedding.  The explanation is printed and drawn on a timeline
(``--out``, a PNG: one row per node, one arrow per interaction from the neighbour to the
node it informed, line width = the path's weight).  Without matplotlib the picture is
skipped, with a note, and the explanation still printed.

Examples
--------
::

    python examples/explain.py
    python examples/explain.py --checkpoint runs/train_wikipedia/tbdfs-alpha-0.5/best.pt --event 12

Data as in ``examples/train_wikipedia.py`` (a synthetic stand-in, named as such, when
there is none).  Needs no DGL.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples"))

from tbdfs_dgl import TBDFSModel, seed_everything  # noqa: E402
from tbdfs_dgl.linkpred import LinkPredictionTrainer, TrainConfig, load_checkpoint  # noqa: E402
from train_wikipedia import (add_data_arguments, add_model_arguments, alphas_of,  # noqa: E402
                            fanouts_of, get_data, model_kwargs, refuse_bad_settings)


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    add_data_arguments(p)
    p.add_argument("--checkpoint", default=None, help="load this model instead of training")
    p.add_argument("--fanouts", default="10,10")
    add_model_arguments(p)
    p.add_argument("--train-batches", type=int, default=200, help="brief training")
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--event", type=int, default=None,
                   help="explain test interaction number EVENT (default: the surest)")
    p.add_argument("--candidates", type=int, default=200)
    p.add_argument("--top-k", type=int, default=5)
    p.add_argument("--out", default="runs/explain/explanation.png")
    args = p.parse_args(argv)
    refuse_bad_settings(p, args, lambda: train_config(args), single_alpha=True,
                        models=not args.checkpoint)
    return args


def train_config(args: argparse.Namespace) -> TrainConfig:
    return TrainConfig(fanouts=fanouts_of(args), seed=args.seed, lr=args.lr,
                       train_batches=args.train_batches, progress=False)


def describe(side: str, ex: Dict[str, Any]) -> List[str]:
    lines = [f"  {side} node {ex['root']} at t={ex['time']:g}: alpha {ex['alpha']:.3f}, "
             f"embedding {100 * ex['bfs_share']:.0f}% BFS / {100 * ex['dfs_share']:.0f}% DFS, "
             f"{ex['num_paths']} paths (weights sum to {ex['weight_total']:.3f})"]
    for i, p in enumerate(ex["paths"]):
        hops = " <- ".join(f"{n}" for n in p["nodes"])
        when = ", ".join(f"e{e}@{t:g}" for e, t in zip(p["eids"], p["ts"]))
        lines.append(f"    #{i + 1} weight {p['weight']:.3f}: {hops}   ({when})")
    return lines


def draw(explanation: Dict[str, Any], path: Path, title: str) -> Optional[str]:
    """Timeline PNG; returns None when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    sides = [("src", explanation["src"], "tab:blue"), ("dst", explanation["dst"], "tab:orange")]
    rows: Dict[int, int] = {}
    for _, ex, _ in sides:  # the link's endpoints first, then nodes as their paths reach them
        rows.setdefault(ex["root"], len(rows))
    for _, ex, _ in sides:
        for p in ex["paths"]:
            for n in p["nodes"]:
                rows.setdefault(n, len(rows))
    fig, ax = plt.subplots(figsize=(10, 1.2 + 0.45 * len(rows)))
    # An interaction on several top paths is drawn once, as wide as their summed weight.
    arrows: Dict[tuple, float] = {}
    for side, ex, color in sides:
        for p in ex["paths"]:
            # Hop h: the interaction at ts[h] between nodes[h] (informed) and nodes[h+1].
            for h, (e, t) in enumerate(zip(p["eids"], p["ts"])):
                key = (color, e, t, rows[p["nodes"][h]], rows[p["nodes"][h + 1]])
                arrows[key] = arrows.get(key, 0.0) + p["weight"]
    heaviest = max(arrows.values() or [1.0])
    t_query = explanation["src"]["time"]
    # Time before the query on a log scale: recent and old interactions both readable.
    gaps = [t_query - t for (_, _, t, _, _) in arrows] or [1.0]
    floor = min([g for g in gaps if g > 0] or [1.0]) / 2
    for (color, e, t, a, b), w in sorted(arrows.items(), key=lambda kv: kv[1]):
        x = max(t_query - t, floor)
        ax.annotate("", xy=(x, a), xytext=(x, b),
                    arrowprops=dict(arrowstyle="->", color=color, lw=0.5 + 6.0 * w / heaviest,
                                    alpha=0.7))
        ax.plot([x], [b], "o", color=color, ms=3)
    ax.set_xscale("log")
    ax.invert_xaxis()  # the query (gap 0) on the right, older interactions to the left
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([f"node {n}" + (" (u)" if i == 0 else " (v)" if i == 1 else "")
                        for n, i in rows.items()])
    ax.set_xlabel(f"time before the query (t = {t_query:g}), log scale")
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_title(title, fontsize=10)
    from matplotlib.lines import Line2D

    ax.legend(handles=[Line2D([], [], color="tab:blue", label="paths of u"),
                       Line2D([], [], color="tab:orange", label="paths of v")],
              loc="lower left", fontsize=8, framealpha=0.9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return str(path)


def main(argv: Optional[List[str]] = None) -> Dict[str, Any]:
    args = parse_args(argv)
    data = get_data(args)
    if data.synthetic and "SYNTHETIC" not in data.name:
        data.name = f"SYNTHETIC-{data.name}"
    seed_everything(args.seed)
    if args.checkpoint:
        model, _ = load_checkpoint(args.checkpoint)
    else:
        alpha, = alphas_of(args)
        model = TBDFSModel(**model_kwargs(args, data, alpha))
    cfg = train_config(args)
    trainer = LinkPredictionTrainer(model, data, cfg, log=print)
    try:
        if not args.checkpoint:
            loss, _, _, n = trainer.train_epoch(0)
            print(f"[{data.name}] trained {n} batches, loss {loss:.4f}")
    finally:
        trainer.close()
    model.eval()
    sampler, ef = trainer.eval_sampler, trainer.edge_feat
    nf = trainer.node_feat
    test = np.flatnonzero(trainer.split.test)
    if args.event is not None:
        if not 0 <= args.event < len(test):
            raise SystemExit(f"error: --event must be in [0, {len(test)})")
        row = int(test[args.event])
    else:  # the test interaction the model is surest of, among the first candidates
        rows = test[: args.candidates]
        batch = sampler.sample(np.concatenate([data.src[rows], data.dst[rows]]),
                               np.tile(data.ts[rows].astype(np.float64), 2), paths=False)
        with torch.no_grad():
            h = model(batch, nf, ef)
            scores = model.score(h[: len(rows)], h[len(rows):])
        row = int(rows[int(torch.argmax(scores))])
    u, v, t = int(data.src[row]), int(data.dst[row]), float(data.ts[row])
    batch = sampler.sample([u, v], [t, t], paths=False)
    ex = model.explain(batch, nf, ef, root=(0, 1), top_k=args.top_k)
    print(f"[{data.name}] interaction row {row}: ({u}, {v}) at t={t:g} -> score {ex['score']:.3f} "
          f"(probability {ex['probability']:.3f})")
    for line in describe("u:", ex["src"]) + describe("v:", ex["dst"]):
        print(line)
    title = (f"{data.name}: why ({u}, {v}) at t={t:g} scored p={ex['probability']:.2f} "
             f"(top {args.top_k} paths per endpoint; line width = attention weight)")
    png = draw(ex, Path(args.out), title)
    if png is None:
        print("note: matplotlib is not installed, so no picture was drawn (pip install "
              "matplotlib, or the 'plots' extra); the explanation is printed above")
    else:
        print(f"[{data.name}] picture written to {png}")
    out = Path(args.out).with_suffix(".json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"dataset": data.name, "row": row, "explanation": ex}, indent=2))
    return ex


if __name__ == "__main__":
    main()
