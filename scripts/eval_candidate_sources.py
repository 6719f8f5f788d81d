"""How many of the trainer's evaluation candidates come from the strategy's pool.

``historical`` / ``inductive`` candidates (``same_source=True``, as the trainer draws them)
are destinations of the positive's source from the strategy's pool, filled with random
destinations when the source has fewer than ``K`` of them.  On a graph where most sources
meet few destinations the fill dominates, and the strategy then differs little from
``random``; this prints the share of pool candidates per strategy and ``K``, for the test
interactions the trainer would evaluate.

Example (the README's "Evaluating like the field" figures)::

    python scripts/eval_candidate_sources.py --data wikipedia --test-events 5000 --k 1,49
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tbdfs_dgl.data import load_dataset  # noqa: E402
from tbdfs_dgl.eval_negatives import EvalNegativeSampler  # noqa: E402
from tbdfs_dgl.linkpred import chronological_split  # noqa: E402
from tbdfs_dgl.linkpred import streams  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", default="wikipedia", help="a dataset name or file")
    p.add_argument("--data-dir", default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--batch-size", type=int, default=200)
    p.add_argument("--test-events", type=int, default=None)
    p.add_argument("--k", default="1,49", help="comma list of K")
    args = p.parse_args()
    data = load_dataset(args.data, args.data_dir)
    split = chronological_split(data, seed=args.seed)
    part = np.flatnonzero(split.test)
    rows = part
    if args.test_events is not None and args.test_events < len(part):  # the trainer's draw
        pick = streams.generator(args.seed, streams.PART_INDEX["test"],
                                 streams.Purpose.EVAL_EVENT_DRAW)
        rows = np.sort(pick.choice(part, args.test_events, replace=False))
    block = np.searchsorted(part, rows) // args.batch_size
    print(f"{data.name}: {len(rows)} test interactions, batches of {args.batch_size}")
    print("| negatives | K | candidates from the pool (%) | positives with >= K pool "
          "destinations (%) |")
    print("|---|---|---:|---:|")
    for strategy in ("historical", "inductive"):
        sampler = EvalNegativeSampler.for_split(data, split, "test", strategy, seed=args.seed)
        own = np.empty(len(rows), np.int64)  # pool destinations of each positive's source
        for b in np.unique(block):
            full = part[b * args.batch_size:(b + 1) * args.batch_size]
            ts = data.ts[full]
            pool = sampler.candidate_edges(float(ts.min()), float(ts.max()))
            src = data.src[rows[block == b]].astype(np.int64)
            lo = np.searchsorted(pool, src * data.num_nodes)
            hi = np.searchsorted(pool, (src + 1) * data.num_nodes)
            own[block == b] = hi - lo
        for k in (int(x) for x in args.k.split(",")):
            from_pool = np.minimum(own, k).sum() / (k * len(rows))
            print(f"| {strategy} | {k} | {100 * from_pool:.1f} | {100 * np.mean(own >= k):.1f} |")


if __name__ == "__main__":
    main()
