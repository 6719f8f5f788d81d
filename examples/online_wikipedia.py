"""Replay Wikipedia's test split as a stream: each event scored from the events before it.

The model is trained briefly (or loaded with ``--checkpoint``), evaluated offline on the
test split as :class:`~tbdfs_dgl.linkpred.LinkPredictionTrainer` does (a graph of every
interaction, queries seeing those strictly before them), then the test split is replayed
online: a graph of the interactions before the test split grows chunk by chunk
(:meth:`TemporalGraph.add_edges`), and each event, with the offline evaluation's negative,
is scored by :class:`~tbdfs_dgl.online.OnlineScorer` from the interactions ingested before
it.  It prints both APs, the ingest rate and the query latencies (p50 / p99).

``--mode arrival`` (default) is what a system sees that scores every event as it arrives,
micro-batched: a chunk is ingested, then its events are scored at their own times; the
strict time rule shows each the events before it and never itself nor anything later, so
the result equals scoring one event at a time before ingesting it (and the offline AP).
``--mode stale`` scores a chunk before ingesting it: each event is blind to the earlier
events of its own chunk (a system whose history lags by up to one chunk); ``--chunk 1``
makes the two modes the same.

Examples
--------
::

    python examples/online_wikipedia.py                    # train one short epoch, replay
    python examples/online_wikipedia.py --chunk 1          # exact replay (slower)
    python examples/online_wikipedia.py --checkpoint runs/train_wikipedia/tbdfs-alpha-0.5/best.pt

Data as in ``examples/train_wikipedia.py`` (a synthetic stand-in, named as such, when
there is none).  Needs no DGL.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples"))

from tbdfs_dgl import TBDFSModel, TemporalGraph, TemporalSampler, seed_everything  # noqa: E402
from tbdfs_dgl.linkpred import (EventBatch, LinkPredictionTrainer, TrainConfig,  # noqa: E402
                                load_checkpoint, streams)
from tbdfs_dgl.metrics import link_prediction_metrics  # noqa: E402
from tbdfs_dgl.online import OnlineScorer  # noqa: E402
from train_wikipedia import (add_data_arguments, add_model_arguments, alphas_of,  # noqa: E402
                            fanouts_of, get_data, model_kwargs, refuse_bad_settings)


class FirstTestEvents(LinkPredictionTrainer):
    """Evaluates on the test split's first ``test_events`` rows in time order (all when
    ``None``), so that a prefix of the stream can be replayed."""

    test_events: Optional[int] = None

    def evaluation_batches(self, part: str) -> List[EventBatch]:
        if part != "test":
            return super().evaluation_batches(part)
        rows = np.flatnonzero(self.split.test)[: self.test_events]
        rng = streams.generator(self.config.seed, streams.PART_INDEX[part],
                                streams.Purpose.EVAL_NEGATIVES)
        return self.make_batches(rows, rng, self.eval_negatives)


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    add_data_arguments(p)
    p.add_argument("--checkpoint", default=None, help="load this model instead of training")
    p.add_argument("--fanouts", default="10,10")
    p.add_argument("--strategy", default="recent", choices=["recent", "uniform"])
    add_model_arguments(p)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--train-batches", type=int, default=200,
                   help="training batches per epoch (a brief training)")
    p.add_argument("--batch-size", type=int, default=200)
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cpu")
    p.add_argument("--chunk", type=int, default=200, help="events ingested and scored at a time")
    p.add_argument("--mode", choices=["arrival", "stale"], default="arrival",
                   help="arrival: ingest a chunk, then score its events at their times "
                        "(each sees exactly the events before it); stale: score a chunk "
                        "before ingesting it")
    p.add_argument("--test-events", type=int, default=None,
                   help="replay only the first N test events (offline AP on the same ones)")
    p.add_argument("--latency-queries", type=int, default=300,
                   help="single-link queries timed one at a time for the latency figures")
    p.add_argument("--save-dir", default="runs/online_wikipedia")
    args = p.parse_args(argv)
    refuse_bad_settings(p, args, lambda: train_config(args), single_alpha=True,
                        models=not args.checkpoint)
    return args


def train_config(args: argparse.Namespace) -> TrainConfig:
    return TrainConfig(epochs=args.epochs, batch_size=args.batch_size, lr=args.lr,
                       fanouts=fanouts_of(args), strategy=args.strategy, seed=args.seed,
                       device=args.device, train_batches=args.train_batches, progress=False)


def percentiles(seconds: List[float]) -> Dict[str, float]:
    ms = np.asarray(seconds) * 1e3
    return {"p50_ms": float(np.percentile(ms, 50)), "p99_ms": float(np.percentile(ms, 99)),
            "count": int(len(ms))}


def main(argv: Optional[List[str]] = None) -> Dict[str, Any]:
    args = parse_args(argv)
    data = get_data(args)
    if data.synthetic and "SYNTHETIC" not in data.name:
        data.name = f"SYNTHETIC-{data.name}"
    name = data.name
    seed_everything(args.seed)
    fanouts = fanouts_of(args)
    if args.checkpoint:
        model, _ = load_checkpoint(args.checkpoint)
        kwargs = None
    else:
        alpha, = alphas_of(args)
        kwargs = model_kwargs(args, data, alpha)
        model = TBDFSModel(**kwargs)
    cfg = train_config(args)
    trainer = FirstTestEvents(model, data, cfg, model_kwargs=kwargs,
                              log=lambda line: print(f"[{name}] {line}"))
    trainer.test_events = args.test_events
    try:
        if not args.checkpoint:
            for epoch in range(args.epochs):
                loss, _, _, n = trainer.train_epoch(epoch)
                print(f"[{name}] epoch {epoch}: loss {loss:.4f} over {n} batches")
        # The offline evaluation (LinkPredictionTrainer.evaluate) of the test rows replayed
        # below, on the same batches and negatives.
        model.eval()
        t0 = time.perf_counter()
        offline = trainer.evaluate("test")["transductive"]
        offline_s = time.perf_counter() - t0
        items = trainer.evaluation_batches("test")
        rows = np.concatenate([item.rows for item in items])
        print(f"[{name}] offline test AP {offline['ap']:.4f} ({len(rows)} events, {offline_s:.1f} s)")
    finally:
        trainer.close()

    # Online: the graph of everything before the test split, growing as the test replays.
    first = int(rows[0])
    ef = None if data.edge_feat is None else torch.from_numpy(data.edge_feat)
    graph = TemporalGraph(data.src[:first], data.dst[:first], data.ts[:first],
                          num_nodes=data.num_nodes,
                          edge_feat=None if ef is None else ef[:first],
                          node_feat=None if data.node_feat is None else data.node_feat)
    sampler = TemporalSampler(graph, fanouts, strategy=args.strategy, time_rule="strict",
                              seed=args.seed)
    scorer = OnlineScorer(model, graph, sampler, batch_size=2 * args.chunk, device=args.device)
    pos_all, neg_all, call_s = [], [], []
    t0 = time.perf_counter()
    for src, dst, neg, ts, r in items:  # EventBatch fields
        for lo in range(0, len(src), args.chunk):
            s, d, n, t = (a[lo:lo + args.chunk] for a in (src, dst, neg, ts))
            rr = r[lo:lo + args.chunk]
            if args.mode == "arrival":
                scorer.ingest(s, d, t, None if ef is None else ef[rr])
            t1 = time.perf_counter()
            logits = scorer.score(np.concatenate([s, s]), np.concatenate([d, n]),
                                  np.concatenate([t, t]))
            call_s.append(time.perf_counter() - t1)
            pos_all.append(logits[: len(s)])
            neg_all.append(logits[len(s):])
            if args.mode == "stale":
                scorer.ingest(s, d, t, None if ef is None else ef[rr])
    replay_s = time.perf_counter() - t0
    online = link_prediction_metrics(np.concatenate(pos_all), np.concatenate(neg_all))
    ingest_rate = scorer.events_ingested / max(scorer.ingest_seconds, 1e-12)

    # Single-link latency: one candidate per call, at test events' times.
    pick = np.random.default_rng(args.seed).choice(rows, min(args.latency_queries, len(rows)),
                                                   replace=False)
    single = []
    for r in pick:
        t1 = time.perf_counter()
        scorer.score(data.src[r], data.dst[r], float(data.ts[r]))
        single.append(time.perf_counter() - t1)
    one_at_a_time = _ingest_one_at_a_time(data, first, min(len(rows), 20_000))

    result = {
        "dataset": name, "synthetic": bool(data.synthetic), "test_events": int(len(rows)),
        "chunk": args.chunk, "mode": args.mode,
        "offline_ap": offline["ap"], "online_ap": online["ap"],
        "ap_difference_points": 100 * (online["ap"] - offline["ap"]),
        "replay_seconds": replay_s,
        "ingest_events_per_s_chunked": ingest_rate,
        "ingest_events_per_s_one_at_a_time": one_at_a_time,
        "score_call_latency": percentiles(call_s),
        "single_link_latency": percentiles(single),
        "device": args.device, "torch_threads": torch.get_num_threads(),
        "args": vars(args),
    }
    print(f"[{name}] online test AP {online['ap']:.4f} (offline {offline['ap']:.4f}, "
          f"difference {result['ap_difference_points']:+.2f} points; chunks of {args.chunk}, "
          f"{args.mode} mode)")
    print(f"[{name}] ingest: {ingest_rate:,.0f} events/s in chunks of {args.chunk}, "
          f"{one_at_a_time:,.0f} events/s one at a time")
    c, s1 = result["score_call_latency"], result["single_link_latency"]
    print(f"[{name}] latency: a chunk's {2 * args.chunk} links p50 {c['p50_ms']:.1f} ms / p99 "
          f"{c['p99_ms']:.1f} ms; one link p50 {s1['p50_ms']:.1f} ms / p99 {s1['p99_ms']:.1f} ms")
    save = Path(args.save_dir)
    save.mkdir(parents=True, exist_ok=True)
    tmp = save / "metrics.json.tmp"
    tmp.write_text(json.dumps(result, indent=2, default=float))
    os.replace(tmp, save / "metrics.json")
    print(f"[{name}] written to {save / 'metrics.json'}")
    return result


def _ingest_one_at_a_time(data: Any, first: int, n: int) -> float:
    """Events/s of add_edges called once per event (plain Python scalars)."""
    g = TemporalGraph(data.src[:first], data.dst[:first], data.ts[:first], num_nodes=data.num_nodes)
    src = data.src[first:first + n].tolist()
    dst = data.dst[first:first + n].tolist()
    ts = data.ts[first:first + n].astype(np.float64).tolist()
    t0 = time.perf_counter()
    for u, v, t in zip(src, dst, ts):
        g.add_edges(u, v, t)
    return n / (time.perf_counter() - t0)


if __name__ == "__main__":
    main()
