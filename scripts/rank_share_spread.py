"""How unequal are the DDP ranks' shares of one global batch in compute (issue 11)?

    OMP_NUM_THREADS=1 python scripts/rank_share_spread.py --dataset wikipedia --ranks 8 \
        --batches 6 --passes 6

A data-parallel step waits for its slowest rank.  Part of that wait could be the shares
themselves (rank r takes events ``[r n/N, (r+1) n/N)`` of each global batch, and their
neighbourhoods differ), which a cost-balanced split could even out; the rest is the
machine's step-to-step noise, which no split fixed in advance can follow.  This script
separates the two in one process: it samples each rank's share of ``--batches`` global
batches of ``ranks x events-per-rank`` events (drawn from one training epoch of the
``full-recent`` budget's setting: [10, 10] most recent, width 100), then times each share's
forward and backward pass (parameters fixed, no optimizer step) ``--passes`` times.  A
share's median over the passes is its content's cost; the spread of the passes about it is
noise.  Per global batch it prints the shares' spread (sd, and slowest minus mean: what
DDP would wait for if the machine were silent) beside the noise's.

Diagnostic only: it calls the trainer's private sampling and embedding methods.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))


def _features(batch) -> dict:
    """Sizes of a sampled share: valid neighbour slots and distinct interactions per hop
    (hop 1: the roots' neighbours; the tables come in DGL's order, widest first)."""
    out = {}
    for hop, table in enumerate(reversed(batch.layers), start=1):
        valid = table.mask.bool()
        out[f"hop{hop}_valid_slots"] = int(valid.sum())
        out[f"hop{hop}_distinct_edges"] = int(torch.unique(table.eid[valid]).numel())
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", default="wikipedia")
    p.add_argument("--ranks", type=int, default=8)
    p.add_argument("--events-per-rank", type=int, default=200)
    p.add_argument("--batches", type=int, default=6, help="global batches, drawn at random")
    p.add_argument("--passes", type=int, default=6)
    p.add_argument("--warmup-passes", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data-dir", default=os.environ.get("TBDFS_DATA_DIR"))
    p.add_argument("--retain-memory", action="store_true",
                   help="tune glibc malloc to keep freed memory (TrainConfig.retain_memory): "
                        "batch-sized tensors are then not faulted in again at every step")
    p.add_argument("--json", default=None)
    args = p.parse_args()
    if args.passes < 2:
        p.error("--passes must be >= 2 (the noise is the passes' spread)")
    if args.ranks < 1 or args.events_per_rank < 1 or args.batches < 1:
        p.error("--ranks, --events-per-rank and --batches must be >= 1")
    if args.retain_memory:
        from tbdfs_dgl._malloc import retain_freed_memory

        retain_freed_memory()

    from reproduce_lib import grid, runner
    from tbdfs_dgl import TBDFSModel, seed_everything
    from tbdfs_dgl.linkpred import LinkPredictionTrainer, distributed

    budget = grid.BUDGETS["full-recent"]
    data = runner.get_dataset(args.dataset, None, args.data_dir)
    seed_everything(args.seed)
    model = TBDFSModel(**runner.model_kwargs(budget, data, {}))
    cfg = runner.train_config(budget, args.seed)
    cfg.batch_size = args.ranks * args.events_per_rank
    cfg.progress = False
    trainer = LinkPredictionTrainer(model, data, cfg)
    items = trainer.training_batches(0)[:-1]  # the last may be short
    rng = np.random.default_rng(args.seed)
    picked = sorted(int(i) for i in rng.choice(len(items), min(args.batches, len(items)),
                                                 replace=False))
    shares, features = [], []
    for i in picked:
        for r in range(args.ranks):
            ranks = distributed.Ranks(rank=r, world_size=args.ranks)
            share, _ = distributed.share_of(items[i], ranks)
            batch, _, _ = trainer._sample(trainer.train_sampler, share,
                                          distributed.share_batch_id(i, ranks), True)
            shares.append((share, batch))
            features.append(_features(batch))

    model.train()

    def step(share, batch) -> float:
        t0 = time.perf_counter()
        pos, neg = trainer._embed(batch, share.num_events)
        loss = F.binary_cross_entropy_with_logits(pos, torch.ones_like(pos)) + \
            F.binary_cross_entropy_with_logits(neg, torch.zeros_like(neg))
        model.zero_grad(set_to_none=True)
        loss.backward()
        return 1000 * (time.perf_counter() - t0)

    for _ in range(args.warmup_passes):  # the heap grows over the first steps
        for s in shares:
            step(*s)
    t = np.array([[step(*s) for s in shares] for _ in range(args.passes)])
    t = t.reshape(args.passes, len(picked), args.ranks)  # pass, global batch, rank
    # A share's content cost is its median over the passes (the noise has a long tail:
    # an occasional step takes 1.5x).  Whether the shares' differences are their content
    # at all: the correlation of each share's deviation from its batch's mean between the
    # even and the odd passes (0: all noise; 1: all content).
    content = np.median(t, axis=0)  # [batch, rank]
    dev = t - t.mean(axis=2, keepdims=True)
    halves = np.corrcoef(dev[0::2].mean(0).ravel(), dev[1::2].mean(0).ravel())[0, 1]
    noise = np.median(np.abs(t - content), axis=0).mean()
    print(f"{args.dataset}: {len(picked)} global batches of {cfg.batch_size} events, "
          f"{args.ranks} shares each, {args.passes} timed passes; torch threads "
          f"{torch.get_num_threads()}; retain memory {args.retain_memory}")
    print("| global batch | mean share ms (medians) | shares' sd ms | slowest share − mean ms |")
    print("|---:|---:|---:|---:|")
    for i, row in zip(picked, content):
        print(f"| {i} | {row.mean():.1f} | {row.std():.1f} | {row.max() - row.mean():.1f} |")
    share_gap = float((content.max(1) - content.mean(1)).mean())
    mean_ms = float(content.mean())
    print(f"content: slowest share − mean, mean over batches {share_gap:.1f} ms "
          f"({100 * share_gap / mean_ms:.1f}% of a share's {mean_ms:.1f} ms); split-half "
          f"correlation of the shares' deviations {halves:.2f}")
    print(f"noise: a pass's median absolute deviation from the share's median {noise:.1f} ms "
          f"({100 * noise / mean_ms:.1f}%); slowest pass of a share − its median, mean "
          f"{float((t.max(0) - content).mean()):.1f} ms")
    # What could predict a share's cost before it runs: its valid neighbour slots and
    # distinct interactions per hop (within-batch deviations, pooled over the batches).
    feats = np.array([[f[k] for k in sorted(f)] for f in features], float)
    feats = feats.reshape(len(picked), args.ranks, -1)
    fdev = (feats - feats.mean(1, keepdims=True)).reshape(-1, feats.shape[-1])
    cdev = (content - content.mean(1, keepdims=True)).ravel()
    corr = {k: float(np.corrcoef(fdev[:, j], cdev)[0, 1]) if fdev[:, j].std() > 0 else None
            for j, k in enumerate(sorted(features[0]))}
    print("correlation of a share's content cost with (deviations within its batch): "
          + ", ".join(f"{k} {v:.2f}" for k, v in corr.items() if v is not None))
    if args.json:
        Path(args.json).write_text(json.dumps({
            "args": vars(args), "batches": picked, "ms": t.tolist(),
            "share_gap_ms": share_gap, "split_half_correlation": float(halves),
            "noise_mad_ms": float(noise), "mean_share_ms": mean_ms,
            "features": features, "feature_correlation": corr}, indent=1) + "\n")


if __name__ == "__main__":
    main()
