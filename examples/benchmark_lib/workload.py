"""The benchmark's workload: the interactions (a file or a power-law graph) and its batches."""
from __future__ import annotations

import argparse
import time
from typing import Any, Dict, List

import numpy as np

from tbdfs_dgl.data import make_power_law, read_edge_list


def load_workload(args: argparse.Namespace) -> Dict[str, Any]:
    """Read ``args.data`` or generate ``args.synthetic``; return the arrays and how."""
    t0 = time.perf_counter()
    if args.synthetic is not None:
        n, e = args.synthetic
        src, dst, ts = make_power_law(n, e, seed=args.seed)
        how = f"tbdfs_dgl.data.make_power_law({n}, {e}, seed={args.seed})"
        name = "synthetic-1M-20M" if (n, e) == (1_000_000, 20_000_000) else f"synthetic-{n}-{e}"
        num_nodes = n
    else:
        path = args.data
        ds = read_edge_list(path, edge_feat_cols=None)
        src, dst, ts, num_nodes = ds.src, ds.dst, ds.ts, ds.num_nodes
        how = "tbdfs_dgl.data.read_edge_list"
        name = "wikipedia" if "wikipedia" in path.name.lower() else path.name
    src = np.ascontiguousarray(src, dtype=np.int64)
    dst = np.ascontiguousarray(dst, dtype=np.int64)
    ts = np.ascontiguousarray(ts)
    return {"name": name, "src": src, "dst": dst, "ts": ts, "num_nodes": int(num_nodes),
            "num_edges": int(len(src)), "loaded_by": how,
            "source": str(args.data) if args.synthetic is None else "synthetic",
            "load_s": time.perf_counter() - t0}


def integer_times(ts: np.ndarray) -> np.ndarray:
    """int64 times with the same order and ties (GraphBolt takes int64 timestamps only)."""
    if ts.dtype.kind in "iu":
        return ts.astype(np.int64)
    if len(ts) and np.all(ts == np.round(ts)) and np.abs(ts).max() < 2**53:
        return ts.astype(np.int64)
    if len(ts) < 2 or bool(np.all(ts[1:] >= ts[:-1])):  # sorted: dense rank in O(E)
        rank = np.empty(len(ts), np.int64)
        if len(ts):
            rank[0] = 0
            np.cumsum(ts[1:] != ts[:-1], out=rank[1:])
        return rank
    return np.unique(ts, return_inverse=True)[1].astype(np.int64)


def make_batches(w: Dict[str, Any], batch_size: int, n: int, seed: int
                 ) -> List[Dict[str, np.ndarray]]:
    """``n`` batches of ``3 * batch_size`` roots, starts stratified over the rows (= time)."""
    src, dst, ts = w["src"], w["dst"], w["ts"]
    E = len(src)
    bs = min(batch_size, E)
    rng = np.random.default_rng(seed)
    span = E - bs + 1
    edges = np.linspace(0, span, n + 1)
    starts = np.array([int(rng.integers(int(lo), max(int(lo) + 1, int(hi))))
                       for lo, hi in zip(edges[:-1], edges[1:])], dtype=np.int64)
    starts = np.minimum(starts, span - 1)
    dst_pool = np.unique(dst)
    out = []
    for s in starts:
        rows = np.arange(s, s + bs)
        neg = dst_pool[rng.integers(0, len(dst_pool), bs)]
        out.append({"nodes": np.concatenate([src[rows], dst[rows], neg]),
                    "times": np.tile(ts[rows].astype(np.float64), 3),
                    "rows": np.tile(rows, 3)})
    return out


def spread(n_total: int, k: int) -> List[int]:
    """``k`` batch indices spread over ``range(n_total)`` (so still across the time range)."""
    k = min(k, n_total)
    return sorted(set(np.linspace(0, n_total - 1, k).round().astype(int).tolist()))

