"""Benchmark TemporalGraph.add_edges: streaming throughput, against rebuilding, and memory.

For each graph the first half of the interactions is built at once and the second half
appended in chunks of 1 (one ``add_edges(u, v, t)`` call per event, plain Python scalars;
capped at ``--one-at-a-time`` events), 100 and 10,000 (``add_edges`` with arrays, and the
extension's ``_C.append_edges`` alone for 10,000).  Rebuilding from scratch is the build
time of the whole graph: a system that rebuilds after every chunk of ``k`` events ingests
``k / build time`` events/s.  Memory: the CSR's bytes after appending (lists with spare
slots, the pool's unreclaimed space) against a fresh build of the same interactions; the
appended graph's lists are checked equal to the fresh build's.

Examples
--------
::

    python examples/benchmark_append.py                           # Wikipedia + 1M/20M synthetic
    python examples/benchmark_append.py --synthetic 100000,2000000  # a smaller synthetic graph
"""
from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tbdfs_dgl import TemporalGraph, _C  # noqa: E402
from tbdfs_dgl.data import load_dataset, make_power_law  # noqa: E402


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--data-dir", default=None, help="folder with wikipedia/ (default: "
                   "$TBDFS_DATA_DIR, else ../shared/data); skipped when absent")
    p.add_argument("--synthetic", default="1000000,20000000",
                   help="num_nodes,num_edges of the power-law graph ('' to skip)")
    p.add_argument("--one-at-a-time", type=int, default=200_000,
                   help="events appended one call each (the rest of the half is skipped)")
    p.add_argument("--repeats", type=int, default=3, help="best of this many timings")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default=None, help="also write the results here")
    return p.parse_args(argv)


def best_of(repeats: int, fn) -> float:
    times = []
    for _ in range(repeats):
        gc.collect()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def graphs(args: argparse.Namespace) -> List[Tuple[str, np.ndarray, np.ndarray, np.ndarray]]:
    out = []
    try:
        ds = load_dataset("wikipedia", args.data_dir)
        out.append(("wikipedia", ds.src, ds.dst, ds.ts.astype(np.float64)))
    except FileNotFoundError as missing:
        print(f"note: skipping Wikipedia: {missing}")
    if args.synthetic:
        n, e = (int(x) for x in args.synthetic.split(","))
        t0 = time.perf_counter()
        src, dst, ts = make_power_law(n, e, seed=args.seed)
        print(f"synthetic-{n}-{e}: generated in {time.perf_counter() - t0:.1f} s")
        out.append((f"synthetic-{n}-{e}", src, dst, ts))
    return out


def bench(name: str, src: np.ndarray, dst: np.ndarray, ts: np.ndarray,
          args: argparse.Namespace) -> Dict[str, Any]:
    E, half = len(src), len(src) // 2
    n = int(max(src.max(), dst.max())) + 1
    res: Dict[str, Any] = {"graph": name, "num_nodes": n, "num_edges": E, "prefix_edges": half}
    build_s = best_of(args.repeats, lambda: TemporalGraph(src, dst, ts, num_nodes=n))
    fresh = TemporalGraph(src, dst, ts, num_nodes=n)
    res["rebuild_seconds"] = build_s
    res["fresh_csr_bytes"] = fresh.csr.nbytes
    rest = (src[half:], dst[half:], ts[half:])

    def prefix() -> TemporalGraph:
        return TemporalGraph(src[:half], dst[:half], ts[:half], num_nodes=n)

    rows = []
    # One event per call, plain Python scalars (what a stream consumer has in hand).
    k1 = min(args.one_at_a_time, E - half)
    s1, d1, t1 = (a[:k1].tolist() for a in rest)
    timings = []
    for _ in range(args.repeats):
        g = prefix()
        gc.collect()
        t0 = time.perf_counter()
        for u, v, t in zip(s1, d1, t1):
            g.add_edges(u, v, t)
        timings.append(time.perf_counter() - t0)
    rows.append({"chunk": 1, "api": "add_edges(u, v, t)", "events": k1,
                 "events_per_s": k1 / min(timings)})
    del g
    for chunk, api in ((100, "add_edges"), (10_000, "add_edges"), (10_000, "_C.append_edges")):
        timings = []
        for _ in range(args.repeats):
            g = prefix()
            parts = [tuple(a[i:i + chunk] for a in rest) for i in range(0, E - half, chunk)]
            gc.collect()
            t0 = time.perf_counter()
            if api == "add_edges":
                for s, d, t in parts:
                    g.add_edges(s, d, t)
            else:
                for s, d, t in parts:
                    _C.append_edges(g.csr, s, d, t)
            timings.append(time.perf_counter() - t0)
        layout = _C.csr_layout(g.csr)
        same = all(np.array_equal(x, y) for x, y in
                   zip(g.csr.arrays().values(), fresh.csr.arrays().values()))
        rows.append({"chunk": chunk, "api": api, "events": E - half,
                     "events_per_s": (E - half) / min(timings),
                     "csr_bytes": g.csr.nbytes,
                     "memory_vs_fresh": g.csr.nbytes / fresh.csr.nbytes,
                     # counting the pool's reserved but untouched tail too (virtual memory)
                     "reserved_vs_fresh": (g.csr.nbytes + 24 * (layout["pool_capacity_entries"]
                                                                 - layout["pool_entries"]))
                     / fresh.csr.nbytes,
                     "relocations": layout["relocations"], "compactions": layout["compactions"],
                     "pool_over_live": layout["pool_entries"] / max(1, layout["live_entries"]),
                     "equal_to_fresh_build": bool(same)})
        del g, parts
    for r in rows:
        r["rebuild_events_per_s"] = r["chunk"] / build_s
    res["rows"] = rows
    return res


def report(results: List[Dict[str, Any]]) -> str:
    lines = ["| graph | chunk | API | events/s | rebuilding: events/s | CSR bytes vs fresh "
             "build (with reserved) | lists moved / repacks | equal to fresh build |",
             "|---|---:|---|---:|---:|---:|---:|---|"]
    for res in results:
        for r in res["rows"]:
            mem = (f"{r['memory_vs_fresh']:.3f}x ({r['reserved_vs_fresh']:.3f}x)"
                   if "memory_vs_fresh" in r else "-")
            moved = f"{r['relocations']} / {r['compactions']}" if "relocations" in r else "-"
            same = {True: "yes", False: "NO"}.get(r.get("equal_to_fresh_build"), "-")
            lines.append(f"| {res['graph']} | {r['chunk']:,} | `{r['api']}` | "
                         f"{r['events_per_s']:,.0f} | {r['rebuild_events_per_s']:,.1f} | {mem} "
                         f"| {moved} | {same} |")
    lines.append("")
    for res in results:
        lines.append(f"- {res['graph']}: {res['num_nodes']:,} nodes, {res['num_edges']:,} "
                     f"edges, first {res['prefix_edges']:,} built at once; a full rebuild "
                     f"takes {res['rebuild_seconds']:.3f} s; fresh CSR "
                     f"{res['fresh_csr_bytes'] / 2**20:,.1f} MiB")
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> List[Dict[str, Any]]:
    args = parse_args(argv)
    results = []
    for name, src, dst, ts in graphs(args):
        t0 = time.perf_counter()
        results.append(bench(name, src, dst, ts, args))
        print(f"{name}: benchmarked in {time.perf_counter() - t0:.1f} s", flush=True)
    print(report(results))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return results


if __name__ == "__main__":
    main()
