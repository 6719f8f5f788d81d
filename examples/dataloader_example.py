"""Train tBDFS for a few steps through DGL's DataLoader, then rank test edges (MRR).

``TemporalEdgeSampler`` plugs the time-respecting sampler into
``dgl.dataloading.DataLoader``: each seed edge ``(u, v, t)`` is sampled as the instances
``u@t`` and ``v@t``, from the interactions strictly before ``t``; its negatives are scored at
``t`` too.  A batch does not depend on ``--num-workers`` (its random stream comes from the
seed, the epoch and its edge ids), though with workers DGL delivers the batches out of
order (each worker gets a contiguous share).  Runs on a small synthetic graph::

    python examples/dataloader_example.py --num-workers 2
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import dgl  # noqa: E402

from tbdfs_dgl import TBDFSModel, TemporalGraph, TemporalSampler, seed_everything  # noqa: E402
from tbdfs_dgl.data import make_wikipedia_like  # noqa: E402
from tbdfs_dgl.dataloading import TemporalEdgeSampler  # noqa: E402
from tbdfs_dgl.eval_negatives import EvalNegativeSampler  # noqa: E402
from tbdfs_dgl.metrics import ranking_metrics  # noqa: E402


def main(argv: list | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--num-workers", type=int, default=0)
    p.add_argument("--batch-size", type=int, default=200)
    p.add_argument("--steps", type=int, default=5, help="training mini-batches")
    p.add_argument("--candidates", type=int, default=10, help="negatives per test edge")
    args = p.parse_args(argv)
    seed_everything(0)

    data = make_wikipedia_like(num_users=200, num_pages=50, num_events=4000, seed=0)
    graph = TemporalGraph(data.src, data.dst, data.ts, num_nodes=data.num_nodes)
    cut = int(0.8 * data.num_edges)  # train on the first 80% of the interactions

    # DGL's contract: (input_nodes, pair_graph, neg_graph, blocks) per mini-batch.  With
    # output="batch" the last element is the TemporalBatch (dense tables) TBDFSModel reads.
    edge_sampler = TemporalEdgeSampler(TemporalSampler(graph, [10, 10], seed=0),
                                       negatives=1, output="batch")
    loader = dgl.dataloading.DataLoader(graph.to_dgl(), torch.arange(cut), edge_sampler,
                                        batch_size=args.batch_size, shuffle=False,
                                        num_workers=args.num_workers)
    model = TBDFSModel(0, 0, time_dim=16, hidden_dim=32)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    edge_sampler.set_epoch(0)  # streams of epoch 0 (the workers get a copy per epoch)
    for step, (_, pair, neg, batch) in enumerate(loader):
        if step == args.steps:
            break
        h = model(batch)  # one embedding per instance: pair.ndata['ts'] is its time
        pos = model.score(*(h[i] for i in pair.edges(order="eid")))
        negs = model.score(*(h[i] for i in neg.edges(order="eid")))
        loss = F.binary_cross_entropy_with_logits(pos, torch.ones_like(pos)) + \
            F.binary_cross_entropy_with_logits(negs, torch.zeros_like(negs))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"step {step}: loss {loss.item():.4f} ({batch.num_roots} instances)")

    # One-vs-K ranking of the last 20% against DyGLib's historical negatives.
    rows = np.arange(cut, data.num_edges)
    negatives = EvalNegativeSampler(data, "historical", num_candidates=args.candidates,
                                    same_source=True, seed=0)
    sampler = TemporalSampler(graph, [10, 10], seed=0)
    model.eval()
    pos_all, neg_all = [], []
    with torch.no_grad():
        for lo in range(0, len(rows), args.batch_size):
            r = rows[lo:lo + args.batch_size]
            cand = negatives.sample(r)
            n, k = cand.dst.shape
            nodes = np.concatenate([data.src[r], data.dst[r], cand.dst.ravel()])
            times = np.concatenate([data.ts[r], data.ts[r], np.repeat(data.ts[r], k)])
            h = model(sampler.sample(nodes, times, batch_id=lo, paths=False))
            h_src = h[:n]
            pos_all.append(model.score(h_src, h[n:2 * n]).numpy())
            neg_all.append(model.score(h_src.repeat_interleave(k, 0), h[2 * n:]).view(n, k)
                           .numpy())
    metrics = ranking_metrics(np.concatenate(pos_all), np.concatenate(neg_all))
    print("test ranking:", {key: round(v, 4) for key, v in metrics.items()})
    return metrics


if __name__ == "__main__":
    main()
