#!/usr/bin/env python
"""Benchmark the tbdfs-dgl temporal sampler in isolation, on training-like batches.

A batch holds ``--batch-size`` consecutive interactions; its roots are their sources, their
destinations and one random negative destination each, all at the interaction's time (so
600 roots for 200 interactions).  Batches are taken from across the whole time range (a
seeded, stratified random set of batch starts).

Measured per strategy x thread count, as the median over ``--repeats`` of
roots/s, sampled edges/s, valid paths/s and ms/batch:

(a)  the C++ sampler alone, ``TemporalSampler.sample_arrays(paths=True)``, and with
     ``paths=False`` for context;
(b)  the full ``TemporalSampler.sample()``: a ``TemporalBatch`` with its dense layer tables,
     paths and (read once, so built) DGL blocks;
(c)  the same blocks by ``dgl.create_block`` calls, on pre-sampled arrays with their input
     tensors prepared outside the timing and no data set (DGL's standard way, the target's
     yardstick); (c') the same by ``tbdfs_dgl._blocks.csc_block``, which (b) uses (DGL's
     graph-index constructors, checked against ``create_block``);
(d)  DGL GraphBolt's temporal sampler (uniform only; it has no most-recent strategy), both
     per hop with each neighbour at its edge's time (the same semantics as tbdfs) and as
     shipped (``TemporalNeighborSampler``: every sampled neighbour inherits its
     destination's query time);
(e)  the pure-Python reference of ``tests/reference.py`` on a few batches.

Plus the CSR build time, the CSR's bytes against the raw input arrays, the RSS growth
during the build and the process's peak RSS.

Timing: ``time.perf_counter`` after untimed warm-up calls; within each repeat the methods
take turns over slices of the batches, so load from other processes on a shared machine
falls on all of them alike.  The ``cpu/wall`` column (process CPU seconds per wall second)
shows such load: below the thread count means the process waited for a core.

"Valid paths" are the root-to-leaf path slots that hold at least one hop (``mask[:, :, 0]``);
every root has ``prod(fanouts)`` slots, so slots/s = roots/s x prod(fanouts).

Examples::

    PYTHONPATH=. .venv/bin/python examples/benchmark_sampler.py          # Wikipedia
    PYTHONPATH=. .venv/bin/python examples/benchmark_sampler.py --synthetic 1000000,20000000 \\
        --threads 1 --json bench-synthetic.json
    PYTHONPATH=. .venv/bin/python examples/benchmark_sampler.py --quick  # smoke run
    make bench ARGS="--strategy recent --threads 1,2,4"

The sampler's C++ threads are set by ``--threads``; torch's intra-op threads are set to the
same count for each configuration (DGL and GraphBolt use them).  BLAS is not involved, so
OPENBLAS/MKL thread variables make no difference.
"""
from __future__ import annotations

import argparse
import gc
import gzip
import importlib.util
import json
import os
import platform
import random
import resource
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

REPO = Path(__file__).resolve().parents[1]
DEFAULT_REL = Path("wikipedia") / "wikipedia-edges.txt.gz"

# Workload targets from the issue; printed next to the results, never asserted.
TARGETS = {
    "wikipedia": {"roots_per_s_1t": 660_000},
    "synthetic-1M-20M": {"roots_per_s_1t": 220_000, "build_s": 10.0},
    "block_overhead_max": 1.5,   # (b) / (c)
    "two_thread_speedup_min": 1.7,
}


# ----------------------------------------------------------------------------- arguments
def default_data_path() -> Path:
    """``$TBDFS_DATA_DIR`` (or ``../shared/data`` beside the checkout) / wikipedia edges."""
    env = os.environ.get("TBDFS_DATA_DIR")
    base = Path(env).expanduser() if env else REPO.parent / "shared" / "data"
    return base / DEFAULT_REL


def _int_list(text: str) -> List[int]:
    try:
        vals = [int(x) for x in text.replace(" ", "").split(",") if x]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}")
    if not vals or min(vals) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return vals


def _size_pair(text: str) -> Tuple[int, int]:
    parts = text.replace(" ", "").split(",")
    try:
        n, e = (int(float(p)) for p in parts)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--synthetic expects N,E (e.g. 1000000,20000000), "
                                         f"got {text!r}")
    if n < 2 or e < 1:
        raise argparse.ArgumentTypeError("--synthetic needs N >= 2 nodes and E >= 1 edges")
    return n, e


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="Benchmark the tbdfs-dgl temporal sampler (C++ arrays, DGL blocks, "
                    "GraphBolt, pure-Python reference) on training-like batches.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    src = p.add_mutually_exclusive_group()
    src.add_argument("--data", type=Path, default=None,
                     help=f"edge-list file 'src dst ts' (gzip or plain); default "
                          f"$TBDFS_DATA_DIR or ../shared/data, then {DEFAULT_REL}")
    src.add_argument("--synthetic", type=_size_pair, default=None, metavar="N,E",
                     help="power-law graph with N nodes and E time-sorted interactions")
    p.add_argument("--batch-size", type=int, default=200,
                   help="interactions per batch (3 roots each: src, dst, negative dst)")
    p.add_argument("--fanouts", type=_int_list, default=[10, 10],
                   help="neighbours per layer, DGL order (last = the roots' own)")
    p.add_argument("--strategy", choices=["recent", "uniform", "both"], default="both")
    p.add_argument("--threads", type=_int_list, default=[1, 2], help="thread counts to run")
    p.add_argument("--repeats", type=int, default=None, help="timed repeats (default 5, quick 1)")
    p.add_argument("--batches", type=int, default=None,
                   help="batches per repeat (default 200, quick 5)")
    p.add_argument("--graphbolt-batches", type=int, default=None,
                   help="batches per repeat for GraphBolt (default min(batches, 20), quick 2)")
    p.add_argument("--reference-batches", type=int, default=None,
                   help="batches for the pure-Python reference (default 2, quick 1)")
    p.add_argument("--budget-s", type=float, default=15.0,
                   help="GraphBolt and the reference: fewer batches when one repeat would "
                        "take longer than this")
    p.add_argument("--build-repeats", type=int, default=None,
                   help="CSR builds timed (default 3, quick 1)")
    p.add_argument("--reference-max-edges", type=int, default=1_000_000,
                   help="skip the pure-Python reference above this many interactions")
    p.add_argument("--no-graphbolt", action="store_true", help="skip GraphBolt (d)")
    p.add_argument("--no-reference", action="store_true", help="skip the Python reference (e)")
    p.add_argument("--directed", action="store_true",
                   help="directed graph (default undirected: both endpoints see an interaction)")
    p.add_argument("--seed", type=int, default=0, help="seed of batches, negatives, sampler")
    p.add_argument("--json", type=Path, default=None, help="write every figure here")
    p.add_argument("--quick", action="store_true", help="smoke run: few batches, one repeat")
    a = p.parse_args(argv)
    q = a.quick
    a.repeats = a.repeats if a.repeats is not None else (1 if q else 5)
    a.batches = a.batches if a.batches is not None else (5 if q else 200)
    a.graphbolt_batches = (a.graphbolt_batches if a.graphbolt_batches is not None
                           else (2 if q else min(a.batches, 20)))
    a.reference_batches = (a.reference_batches if a.reference_batches is not None
                           else (1 if q else 2))
    a.build_repeats = a.build_repeats if a.build_repeats is not None else (1 if q else 3)
    for name in ("batch_size", "repeats", "batches", "graphbolt_batches", "reference_batches",
                 "build_repeats"):
        if getattr(a, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1")
    a.strategies = ["recent", "uniform"] if a.strategy == "both" else [a.strategy]
    return a


def log(msg: str) -> None:
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------- data
def read_edges_local(path: Path) -> Tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Fallback reader: gzip or plain ``src dst ts`` (whitespace or comma), ids relabelled."""
    import pandas as pd

    with open(path, "rb") as fh:
        gz = fh.read(2) == b"\x1f\x8b"
    opener = gzip.open if gz else open
    with opener(path, "rt") as fh:
        first = fh.readline()
    with opener(path, "rt") as fh:
        df = pd.read_csv(fh, sep="," if "," in first else r"\s+", header=None,
                         usecols=[0, 1, 2], comment="#")
    src_raw, dst_raw = df[0].to_numpy(np.int64), df[1].to_numpy(np.int64)
    ts = df[2].to_numpy(np.float64)
    uniq, inv = np.unique(np.concatenate([src_raw, dst_raw]), return_inverse=True)
    src, dst = inv[: len(src_raw)].astype(np.int64), inv[len(src_raw):].astype(np.int64)
    order = np.argsort(ts, kind="stable")
    return src[order], dst[order], ts[order], len(uniq)


def power_law_local(num_nodes: int, num_edges: int, seed: int
                    ) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Fallback generator: Chung-Lu power-law endpoints, Poisson (sorted) times."""
    rng = np.random.default_rng(seed)
    perm = rng.permutation(num_nodes).astype(np.int64)
    b, top = 1.0 / 1.1, float(num_nodes + 1)

    def draw(n: int) -> np.ndarray:
        x = np.power(1.0 + rng.random(n) * (top ** (1.0 - b) - 1.0), 1.0 / (1.0 - b))
        return perm[np.clip(x.astype(np.int64) - 1, 0, num_nodes - 1)]

    src, dst = draw(num_edges), draw(num_edges)
    loop = src == dst
    dst[loop] = (dst[loop] + 1) % num_nodes
    ts = np.cumsum(rng.exponential(1.0, num_edges))
    return src, dst, ts


def load_workload(args: argparse.Namespace) -> Dict[str, Any]:
    t0 = time.perf_counter()
    if args.synthetic is not None:
        n, e = args.synthetic
        try:
            from tbdfs_dgl.data import make_power_law
            src, dst, ts = make_power_law(n, e, seed=args.seed)
            how = f"tbdfs_dgl.data.make_power_law({n}, {e}, seed={args.seed})"
        except ImportError as err:
            log(f"tbdfs_dgl.data unavailable ({err}); using the local generator")
            src, dst, ts = power_law_local(n, e, args.seed)
            how = f"local power-law generator ({n}, {e}, seed={args.seed})"
        name = "synthetic-1M-20M" if (n, e) == (1_000_000, 20_000_000) else f"synthetic-{n}-{e}"
        num_nodes = n
    else:
        path = args.data
        try:
            from tbdfs_dgl.data import read_edge_list
            ds = read_edge_list(path, edge_feat_cols=None)
            src, dst, ts, num_nodes = ds.src, ds.dst, ds.ts, ds.num_nodes
            how = "tbdfs_dgl.data.read_edge_list"
        except ImportError as err:
            log(f"tbdfs_dgl.data unavailable ({err}); using the local reader")
            src, dst, ts, num_nodes = read_edges_local(path)
            how = "local reader"
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


# ----------------------------------------------------------------------------- memory
def _status_bytes(field: str) -> Optional[int]:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def rss_bytes() -> int:
    v = _status_bytes("VmRSS")
    if v is not None:
        return v
    import psutil
    return int(psutil.Process().memory_info().rss)


def ru_maxrss_bytes() -> int:
    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(r) * (1 if sys.platform == "darwin" else 1024)


class PeakProbe:
    """Peak RSS over a region: the kernel's high-water mark reset via /proc/self/clear_refs
    where allowed, else a thread polling the RSS every millisecond."""

    def __init__(self) -> None:
        self.process_peak = 0  # high-water marks seen before resets
        self._stop = threading.Event()
        self._poll_peak = 0
        self._thread: Optional[threading.Thread] = None
        self.method = ""

    def __enter__(self) -> "PeakProbe":
        self.process_peak = max(_status_bytes("VmHWM") or 0, ru_maxrss_bytes())
        try:
            with open("/proc/self/clear_refs", "w") as fh:
                fh.write("5")
            self.method = "VmHWM reset"
        except OSError:
            self.method = "polling"
            self._poll_peak = rss_bytes()
            self._thread = threading.Thread(target=self._poll, daemon=True)
            self._thread.start()
        return self

    def _poll(self) -> None:
        while not self._stop.is_set():
            self._poll_peak = max(self._poll_peak, rss_bytes())
            time.sleep(0.001)

    def __exit__(self, *exc: Any) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self.peak = max(self._poll_peak, rss_bytes())
        else:
            self.peak = _status_bytes("VmHWM") or rss_bytes()


# ----------------------------------------------------------------------------- build
def measure_build(w: Dict[str, Any], directed: bool, repeats: int) -> Tuple[Any, Dict]:
    from tbdfs_dgl import TemporalGraph

    src, dst, ts, N = w["src"], w["dst"], w["ts"], w["num_nodes"]
    gc.collect()
    rss0 = rss_bytes()
    with PeakProbe() as probe:
        t0 = time.perf_counter()
        g = TemporalGraph(src, dst, ts, num_nodes=N, directed=directed)
        first = time.perf_counter() - t0
    rss1 = rss_bytes()
    times = [first]
    for _ in range(repeats - 1):
        g = None
        gc.collect()
        t0 = time.perf_counter()
        g = TemporalGraph(src, dst, ts, num_nodes=N, directed=directed)
        times.append(time.perf_counter() - t0)
    raw = src.nbytes + dst.nbytes + len(ts) * 8  # int64 src, dst + float64 ts
    csr = int(g.csr.nbytes)
    info = {
        "build_s_median": statistics.median(times), "build_s_all": times,
        "csr_bytes": csr, "raw_input_bytes": int(raw), "csr_over_raw": csr / raw,
        "rss_before_build": rss0, "rss_held_growth": rss1 - rss0,
        "rss_peak_growth": probe.peak - rss0, "peak_method": probe.method,
        "rss_peak_growth_over_csr": (probe.peak - rss0) / csr if csr else float("nan"),
        "rss_held_growth_over_csr": (rss1 - rss0) / csr if csr else float("nan"),
        "process_peak_before_build": probe.process_peak,
        "process_peak_after_build": max(probe.process_peak, probe.peak, rss_bytes(),
                                        _status_bytes("VmHWM") or 0),
    }
    return g, info


# ----------------------------------------------------------------------------- GraphBolt
class GraphBoltRunner:
    """DGL GraphBolt's temporal neighbour sampling on the same graph and batches."""

    def __init__(self, w: Dict[str, Any], directed: bool, int_ts: np.ndarray) -> None:
        import torch
        import dgl.graphbolt as gb

        self.gb, self.torch = gb, torch
        src, dst, N, E = w["src"], w["dst"], w["num_nodes"], w["num_edges"]
        t0 = time.perf_counter()
        if directed:  # a node sees the sources of its in-edges
            col, row, eid = dst, src, np.arange(E, dtype=np.int64)
        else:  # both endpoints see the interaction; a self-loop once (as tbdfs does)
            back = np.flatnonzero(src != dst)
            col = np.concatenate([dst, src[back]])
            row = np.concatenate([src, dst[back]])
            eid = np.concatenate([np.arange(E, dtype=np.int64), back])
        # CSC by destination; GraphBolt filters each neighbour list by time itself, so the
        # order inside a list does not matter (a stable sort keeps input-row order).
        order = np.argsort(col, kind="stable")
        indptr = np.zeros(N + 1, np.int64)
        np.cumsum(np.bincount(col, minlength=N), out=indptr[1:])
        eid_sorted = eid[order]
        self.ts_by_row = torch.from_numpy(int_ts)
        attrs = {"ts": torch.from_numpy(int_ts[eid_sorted]),
                 gb.ORIGINAL_EDGE_ID: torch.from_numpy(eid_sorted)}
        self.graph = gb.fused_csc_sampling_graph(torch.from_numpy(indptr),
                                                 torch.from_numpy(row[order]),
                                                 edge_attributes=attrs)
        self.build_s = time.perf_counter() - t0
        self.nbytes = int(indptr.nbytes + 8 * len(order) * 3)
        del col, row, eid, order

    def per_hop(self, fanouts: Sequence[int]) -> Callable[[Any, Any], Tuple[int, Any]]:
        """Hop by hop, each sampled neighbour at the time of its edge (tbdfs semantics)."""
        torch, g, ts_by_row = self.torch, self.graph, self.ts_by_row
        fans = [torch.LongTensor([k]) for k in reversed(list(fanouts))]

        def run(nodes: Any, times: Any) -> Tuple[int, Any]:
            m = 0
            first = None
            for f in fans:
                sg = g.temporal_sample_neighbors(nodes, times, f,
                                                 edge_timestamp_attr_name="ts")
                nbr, eids = sg.sampled_csc.indices, sg.original_edge_ids
                if first is None:
                    first = sg.sampled_csc.indptr
                m += len(nbr)
                nodes = torch.cat([nodes, nbr])
                times = torch.cat([times, ts_by_row[eids]])
            return m, first

        return run

    def shipped(self, fanouts: Sequence[int]) -> Callable[[Any, Any], Tuple[int, Any]]:
        """``TemporalNeighborSampler.sample_subgraphs`` exactly as DGL 2.1.0 ships it."""
        import types
        from dgl.graphbolt.impl.temporal_neighbor_sampler import TemporalNeighborSampler

        torch, g = self.torch, self.graph
        fans: List[Any] = []
        for k in fanouts:  # the constructor's own conversion (outermost first -> reversed)
            fans.insert(0, torch.LongTensor([int(k)]))
        state = types.SimpleNamespace(graph=g, fanouts=fans, replace=False, prob_name=None,
                                      node_timestamp_attr_name=None,
                                      edge_timestamp_attr_name="ts",
                                      sampler=g.temporal_sample_neighbors)

        def run(nodes: Any, times: Any) -> Tuple[int, Any]:
            _, subgraphs = TemporalNeighborSampler.sample_subgraphs(state, nodes, times)
            return sum(len(s.sampled_csc.indices) for s in subgraphs), None

        return run


# ----------------------------------------------------------------------------- timing
CHUNKS_PER_REPEAT = 10


def timed_repeats(methods: Dict[str, Dict[str, Any]], repeats: int) -> None:
    """Time every method over its batches, ``repeats`` times.

    Within a repeat the methods take turns, ``CHUNKS_PER_REPEAT`` slices of their batches
    each, so every method's time is spread over the same stretch of wall-clock time and
    load from other processes on a shared machine hits them all alike.  Per-repeat wall
    and CPU seconds go to ``m['times']`` / ``m['cpu']``.
    """
    for _ in range(repeats):
        acc = {k: [0.0, 0.0, 0] for k in methods}
        slices = {k: np.array_split(np.asarray(m["idx"]), min(CHUNKS_PER_REPEAT, len(m["idx"])))
                  for k, m in methods.items()}
        for c in range(CHUNKS_PER_REPEAT):
            for k, m in methods.items():
                if c >= len(slices[k]):
                    continue
                fn, counted = m["fn"], 0
                c0, t0 = time.process_time(), time.perf_counter()
                for i in slices[k][c].tolist():
                    out = fn(i)
                    if out is not None:
                        counted += out
                t1, c1 = time.perf_counter(), time.process_time()
                acc[k][0] += t1 - t0
                acc[k][1] += c1 - c0
                acc[k][2] += counted
        for k, m in methods.items():
            m["times"].append(acc[k][0])
            m["cpu"].append(acc[k][1])
            if m.get("count_from_run"):
                m["edges_runs"].append(acc[k][2])


def figures(m: Dict[str, Any], roots_per_batch: int) -> Dict[str, Any]:
    nb = len(m["idx"])
    med = statistics.median(m["times"])
    roots = roots_per_batch * nb
    edges = (statistics.median(m["edges_runs"]) if m.get("count_from_run")
             else m["edges"])
    paths = m.get("paths")
    out = {
        "batches": nb, "repeats": len(m["times"]), "seconds_per_repeat": m["times"],
        "cpu_seconds_per_repeat": m["cpu"], "seconds_median": med,
        "cpu_over_wall": statistics.median(c / t for c, t in zip(m["cpu"], m["times"])),
        "roots_per_s": roots / med, "edges_per_s": edges / med,
        "valid_paths_per_s": (paths / med) if paths is not None else None,
        "ms_per_batch": 1e3 * med / nb,
        "sampled_edges_per_batch": edges / nb,
    }
    if paths is not None:
        out["valid_paths_per_batch"] = paths / nb
    for k in ("note", "check"):
        if k in m:
            out[k] = m[k]
    return out


def _method(fn: Callable, idx: List[int], **extra: Any) -> Dict[str, Any]:
    return dict({"fn": fn, "idx": idx, "times": [], "cpu": []}, **extra)


def _warm_up(methods: Dict[str, Dict[str, Any]], nb: int, budget_s: float) -> Dict[str, str]:
    """A few untimed calls each; GraphBolt's batch count is cut to fit ``budget_s``.

    A GraphBolt method that raises is removed; the error texts are returned by name.
    """
    errors: Dict[str, str] = {}
    for key, m in list(methods.items()):
        t0 = time.perf_counter()
        try:
            m["fn"](m["idx"][0])
        except Exception as err:  # noqa: BLE001 - report GraphBolt's failure, go on
            if not key.startswith("d_"):
                raise
            errors[key] = f"{type(err).__name__}: {err}"
            log(f"{key} failed: {errors[key]}")
            del methods[key]
            continue
        one = time.perf_counter() - t0
        if key.startswith("d_"):
            fit = max(1, int(budget_s / max(one, 1e-9)))
            if fit < len(m["idx"]):
                m["idx"] = spread(nb, fit)
                m["note"] = f"batches cut to {len(m['idx'])} to fit --budget-s"
            m["fn"](m["idx"][-1])
        else:
            for i in m["idx"][1:3]:
                m["fn"](i)
    return errors


def _prepare_strategy(graph: Any, args: argparse.Namespace, strat: str,
                      batches: List[Dict[str, np.ndarray]]) -> Dict[str, Any]:
    """What a strategy samples does not depend on the thread count (same seed and batch
    ids): count its edges and valid paths once and keep the arrays that (c) needs."""
    import torch
    from tbdfs_dgl import TemporalSampler

    s = TemporalSampler(graph, args.fanouts, strategy=strat, seed=args.seed, num_threads=1)
    edges, paths, block_args, all_hops, hop0 = 0, 0, [], [], []
    for i, b in enumerate(batches):
        hops, p = s.sample_arrays(b["nodes"], b["times"], batch_id=i, paths=True)
        edges += sum(len(h[4]) for h in hops)
        paths += int(p[3][:, :, 0].sum())
        del p
        block_args.append([(torch.from_numpy(indptr),
                            torch.arange(num_dst, len(src_nodes), dtype=torch.int64),
                            torch.arange(len(eids), dtype=torch.int64),
                            len(src_nodes), num_dst)
                           for (num_dst, src_nodes, _st, indptr, eids, _dt) in reversed(hops)])
        all_hops.append(list(reversed(hops)))
        hop0.append(np.diff(hops[0][3]))
    return {"edges": edges, "paths": paths, "block_args": block_args, "hops": all_hops,
            "hop0_counts": hop0}


def run_benchmark(args: argparse.Namespace, w: Dict[str, Any], graph: Any,
                  batches: List[Dict[str, np.ndarray]], gbr: Optional[GraphBoltRunner],
                  gb_error: Optional[str], reference: Any, ref_adj: Any,
                  ref_error: Optional[str]) -> List[Dict[str, Any]]:
    import dgl
    import torch
    from tbdfs_dgl import TemporalSampler
    from tbdfs_dgl._blocks import csc_block
    from tbdfs_dgl.sampler import make_block

    fanouts = args.fanouts
    roots_per_batch = len(batches[0]["nodes"])
    nb = len(batches)
    all_idx = list(range(nb))
    gb_idx = spread(nb, args.graphbolt_batches)
    ref_idx = spread(nb, args.reference_batches)
    results: List[Dict[str, Any]] = []
    torch_batches = ([(torch.from_numpy(b["nodes"]), torch.from_numpy(w["int_ts"][b["rows"]]))
                      for b in batches] if gbr is not None else None)
    gb_strategy = "uniform"  # GraphBolt samples uniformly; it has no most-recent strategy
    strategies = list(args.strategies)
    if gbr is not None and gb_strategy not in strategies:
        strategies.append(gb_strategy)  # GraphBolt rows only

    for strat in strategies:
        ours = strat in args.strategies
        ps = _prepare_strategy(graph, args, strat, batches) if ours else None
        for t_i, threads in enumerate(args.threads):
            torch.set_num_threads(threads)
            log(f"{w['name']}: strategy={strat} threads={threads}")
            methods: Dict[str, Dict[str, Any]] = {}
            if ours:
                sampler = TemporalSampler(graph, fanouts, strategy=strat, seed=args.seed,
                                          num_threads=threads)

                def arrays_paths(i: int, s=sampler) -> None:
                    b = batches[i]
                    s.sample_arrays(b["nodes"], b["times"], batch_id=i, paths=True)

                def arrays_nopaths(i: int, s=sampler) -> None:
                    b = batches[i]
                    s.sample_arrays(b["nodes"], b["times"], batch_id=i, paths=False)

                def full_batch(i: int, s=sampler) -> None:
                    b = batches[i]
                    # Blocks are built on first access now: touch them, as (b) promises.
                    s.sample(b["nodes"], b["times"], batch_id=i).blocks

                def bare_blocks(i: int, ba=ps["block_args"]) -> None:
                    for ip, ind, ea, ns, nd in ba[i]:
                        dgl.create_block(("csc", (ip, ind, ea)), num_src_nodes=ns,
                                         num_dst_nodes=nd)

                def fast_blocks(i: int, ba=ps["block_args"]) -> None:
                    for ip, ind, ea, ns, nd in ba[i]:
                        csc_block(ip, ind, ea, ns, nd)

                def data_blocks(i: int, hs=ps["hops"]) -> None:
                    for hop in hs[i]:
                        make_block(*hop)

                for key, fn, paths in (("a_arrays_paths", arrays_paths, ps["paths"]),
                                       ("a_arrays_nopaths", arrays_nopaths, None),
                                       ("b_temporal_batch", full_batch, ps["paths"]),
                                       ("c_create_block", bare_blocks, None),
                                       ("c_csc_block", fast_blocks, None),
                                       ("c_make_block", data_blocks, None)):
                    methods[key] = _method(fn, all_idx, edges=ps["edges"], paths=paths)
            if gbr is not None and strat == gb_strategy:
                for key, maker in (("d_graphbolt_per_hop", gbr.per_hop),
                                   ("d_graphbolt_shipped", gbr.shipped)):
                    run = maker(fanouts)

                    def gb_fn(i: int, run=run) -> int:
                        return run(*torch_batches[i])[0]

                    methods[key] = _method(gb_fn, gb_idx, count_from_run=True, edges_runs=[])
            gb_failed = _warm_up(methods, nb, args.budget_s)
            if "d_graphbolt_per_hop" in methods and ours:
                # GraphBolt's hop-1 counts must equal ours: min(k, eligible edges) per root
                run = gbr.per_hop(fanouts)
                ok = all(np.array_equal(np.diff(run(*torch_batches[i])[1].numpy()),
                                        ps["hop0_counts"][i]) for i in gb_idx)
                methods["d_graphbolt_per_hop"]["check"] = (
                    "hop-1 edge counts equal tbdfs' (strict t_e < t)" if ok
                    else "hop-1 edge counts DIFFER from tbdfs'")
            timed_repeats(methods, args.repeats)
            load = " ".join(f"{x:.2f}" for x in os.getloadavg())
            for key, m in methods.items():
                row = {"strategy": strat, "threads": threads, "measurement": key,
                       "loadavg_after": load}
                row.update(figures(m, roots_per_batch))
                results.append(row)
            if gbr is None and gb_error and strat == gb_strategy:
                gb_failed = {"d_graphbolt_per_hop": gb_error}
            for key, err in gb_failed.items():
                results.append({"strategy": strat, "threads": threads, "measurement": key,
                                "error": err})
        if ours and not args.no_reference:
            results.append(_run_reference(args, strat, graph, batches, ref_idx, reference,
                                          ref_adj, ref_error, roots_per_batch))
        del ps
        gc.collect()
    return results


def _run_reference(args: argparse.Namespace, strat: str, graph: Any,
                   batches: List[Dict[str, np.ndarray]], ref_idx: List[int], reference: Any,
                   ref_adj: Any, ref_error: Optional[str], roots_per_batch: int
                   ) -> Dict[str, Any]:
    """(e): the pure-Python reference, single-threaded, one pass over a few batches."""
    from tbdfs_dgl import TemporalSampler

    row: Dict[str, Any] = {"strategy": strat, "threads": 1, "measurement": "e_python_reference"}
    if reference is None or ref_adj is None:
        row["error"] = ref_error or "unavailable"
        return row
    log(f"pure-Python reference: strategy={strat}")
    fanouts = args.fanouts
    pyrng = random.Random(args.seed)

    def uniform_choose(entries: List[Tuple], k: int) -> List[Tuple]:
        return entries if len(entries) <= k else sorted(pyrng.sample(entries, k))

    choose = reference.most_recent if strat == "recent" else uniform_choose
    out: Dict[int, Any] = {}
    wall = cpu = 0.0
    done: List[int] = []
    for i in ref_idx:  # nothing to warm up in pure Python; stop at the budget
        b = batches[i]
        c0, t0 = time.process_time(), time.perf_counter()
        hops = reference.sample_tree(ref_adj, b["nodes"].tolist(), b["times"].tolist(),
                                     fanouts, strict=True, choose=choose)
        p = reference.explode_paths(hops, fanouts)
        wall += time.perf_counter() - t0
        cpu += time.process_time() - c0
        out[i] = (hops, int(p["mask"][:, :, 0].sum()))
        done.append(i)
        if wall > args.budget_s:
            break
    m = _method(None, done, count_from_run=True,
                edges_runs=[sum(len(h["eids"]) for i in done for h in out[i][0])],
                paths=sum(out[i][1] for i in done))
    m["times"], m["cpu"] = [wall], [cpu]
    if len(done) < len(ref_idx):
        m["note"] = f"stopped after {len(done)} batches (--budget-s)"
    if strat == "recent":  # deterministic: must be the C++ tree exactly
        s1 = TemporalSampler(graph, fanouts, strategy="recent", seed=args.seed, num_threads=1)
        same = True
        for i in done:
            hops, _ = s1.sample_arrays(batches[i]["nodes"], batches[i]["times"], batch_id=i,
                                       paths=False)
            for h, rh in zip(hops, out[i][0]):
                same &= h[1].tolist() == rh["src_nodes"] and h[4].tolist() == rh["eids"]
        m["check"] = "same tree as the C++ sampler" if same else "tree DIFFERS from the C++ sampler"
    row.update(figures(m, roots_per_batch))
    row["note"] = "; ".join(x for x in ("pure Python, single-threaded", m.get("note")) if x)
    return row


# ----------------------------------------------------------------------------- report
LABELS = {
    "a_arrays_paths": "(a) C++ sample_arrays, paths=True",
    "a_arrays_nopaths": "(a) C++ sample_arrays, paths=False",
    "b_temporal_batch": "(b) sample(): TemporalBatch, DGL blocks + paths",
    "c_create_block": "(c) bare dgl.create_block calls of (b)",
    "c_csc_block": "(c') the same blocks by tbdfs_dgl._blocks.csc_block, as (b) builds them",
    "c_make_block": "(c+) make_block(): csc_block + NID/ts/EID/dt data",
    "d_graphbolt_per_hop": "(d) GraphBolt per hop, edge-time frontier",
    "d_graphbolt_shipped": "(d) GraphBolt TemporalNeighborSampler as shipped",
    "e_python_reference": "(e) pure-Python reference",
}


def si(x: Optional[float]) -> str:
    if x is None:
        return "-"
    for unit, div in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= div:
            return f"{x / div:.3g}{unit}"
    return f"{x:.3g}"


def fmt_bytes(n: float) -> str:
    for unit, div in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= div:
            return f"{n / div:.3g} {unit}"
    return f"{int(n)} B"


def _find(results: List[Dict], strat: str, threads: int, key: str) -> Optional[Dict]:
    for r in results:
        if (r["strategy"], r["threads"], r["measurement"]) == (strat, threads, key):
            return r
    return None


def add_targets(results: List[Dict], w: Dict[str, Any], args: argparse.Namespace,
                build: Dict[str, Any]) -> Dict[str, Any]:
    """Attach target verdicts to rows; return the ratio table's figures."""
    std_work = args.fanouts == [10, 10] and args.batch_size == 200
    wl = TARGETS.get(w["name"]) if std_work else None
    ratios = []
    threads = args.threads
    for strat in args.strategies:
        for t in threads:
            a = _find(results, strat, t, "a_arrays_paths")
            a0 = _find(results, strat, t, "a_arrays_nopaths")
            b = _find(results, strat, t, "b_temporal_batch")
            c = _find(results, strat, t, "c_create_block")
            a1 = _find(results, strat, 1, "a_arrays_paths") if 1 in threads else None
            d = _find(results, strat, t, "d_graphbolt_per_hop")
            e = _find(results, strat, 1, "e_python_reference")
            row = {"strategy": strat, "threads": t}
            if b and c and "ms_per_batch" in b and "ms_per_batch" in c:
                row["b_over_c"] = b["ms_per_batch"] / c["ms_per_batch"]
                if a:  # the block-building part of (b): (b) minus its C++ call (a)
                    row["b_minus_a_over_c"] = ((b["ms_per_batch"] - a["ms_per_batch"])
                                               / c["ms_per_batch"])
                ok = row["b_over_c"] <= TARGETS["block_overhead_max"]
                b["target"] = (f"(b)/(c) = {row['b_over_c']:.2f}x, target <= "
                               f"{TARGETS['block_overhead_max']}x: {'met' if ok else 'MISSED'}")
            if a and a1 and t != 1:
                row["speedup_vs_1_thread"] = a["roots_per_s"] / a1["roots_per_s"]
                ok = row["speedup_vs_1_thread"] >= TARGETS["two_thread_speedup_min"] * (t / 2)
                if t == 2:
                    a["target"] = (f"{row['speedup_vs_1_thread']:.2f}x of 1 thread, target "
                                   f">= {TARGETS['two_thread_speedup_min']}x: "
                                   f"{'met' if ok else 'MISSED'}")
            if a and t == 1 and wl and "roots_per_s_1t" in wl:
                ok = a["roots_per_s"] >= wl["roots_per_s_1t"]
                per_cpu = a["roots_per_s"] / max(a["cpu_over_wall"], 1e-9)
                a["roots_per_cpu_s"] = per_cpu
                a["target"] = (f">= {si(wl['roots_per_s_1t'])} roots/s: "
                               f"{'met' if ok else 'MISSED'} ({si(per_cpu)} roots per "
                               f"CPU-second)")
            if a0 and d and "roots_per_s" in d:
                row["nopaths_over_graphbolt"] = a0["roots_per_s"] / d["roots_per_s"]
            if a and e and "roots_per_s" in e:
                row["paths_over_reference"] = a["roots_per_s"] / e["roots_per_s"]
            ratios.append(row)
    targets = {"workload": w["name"] if wl else None, "applied": wl or {}}
    if wl and "build_s" in wl:
        build["target"] = (f"< {wl['build_s']:g} s: "
                           f"{'met' if build['build_s_median'] < wl['build_s'] else 'MISSED'}")
    targets["ratios"] = ratios
    return targets


def render(args: argparse.Namespace, w: Dict[str, Any], results: List[Dict],
           build: Dict[str, Any], targets: Dict[str, Any], gb_info: Dict[str, Any],
           machine: Dict[str, Any], final_peak: int) -> str:
    P = int(np.prod(args.fanouts))
    lines = []
    kind = "directed" if args.directed else "undirected"
    lines.append(f"### Sampler benchmark: {w['name']} ({w['num_nodes']:,} nodes, "
                 f"{w['num_edges']:,} interactions, {kind})")
    lines.append("")
    lines.append(f"fanouts {args.fanouts}, {args.batch_size} interactions = "
                 f"{3 * args.batch_size} roots per batch (src, dst, 1 negative dst), "
                 f"{args.batches} batches across the time range, median of {args.repeats} "
                 f"repeats; {machine['cpu_model']}, {machine['cpus_usable']} usable cores "
                 f"(load avg {machine['loadavg_start']} at start). Valid paths = non-empty path "
                 f"slots (each root has {P} slots). cpu/wall = process CPU seconds per wall "
                 f"second while timing (below the thread count: waiting for a core).")
    lines.append("")
    hdr = ("| strategy | threads | measurement | batches | roots/s | sampled edges/s "
           "| valid paths/s | ms/batch | cpu/wall | target, checks |")
    lines.append(hdr)
    lines.append("|---|---:|---|---:|---:|---:|---:|---:|---:|---|")
    for r in results:
        label = LABELS.get(r["measurement"], r["measurement"])
        if "error" in r:
            err = r["error"] if r["error"].startswith("skipped") else f"failed: {r['error']}"
            lines.append(f"| {r['strategy']} | {r['threads']} | {label} | - | {err} "
                         f"| | | | | |")
            continue
        notes = "; ".join(x for x in (r.get("target"), r.get("check"), r.get("note")) if x)
        lines.append(
            f"| {r['strategy']} | {r['threads']} | {label} | {r['batches']} | "
            f"{si(r['roots_per_s'])} | {si(r['edges_per_s'])} | {si(r['valid_paths_per_s'])} | "
            f"{r['ms_per_batch']:.3g} | {r['cpu_over_wall']:.2f} | {notes} |")
    lines.append("")
    ratios = targets["ratios"]
    if ratios:
        lines.append("| strategy | threads | (b)/(c), target <= 1.5x | ((b)-(a))/(c) | "
                     "(a) speedup vs 1 thread, target >= 1.7x at 2 | "
                     "(a, no paths) / GraphBolt per hop | (a) / Python reference |")
        lines.append("|---|---:|---:|---:|---:|---:|---:|")

        def x(v: Optional[float]) -> str:
            return "-" if v is None else f"{v:.3g}x"
        for r in ratios:
            lines.append(f"| {r['strategy']} | {r['threads']} | {x(r.get('b_over_c'))} | "
                         f"{x(r.get('b_minus_a_over_c'))} | "
                         f"{x(r.get('speedup_vs_1_thread'))} | "
                         f"{x(r.get('nopaths_over_graphbolt'))} | "
                         f"{x(r.get('paths_over_reference'))} |")
        lines.append("")
    lines.append("| graph | value | target |")
    lines.append("|---|---:|---|")
    bt = ", ".join(f"{t:.3g}" for t in build["build_s_all"])
    lines.append(f"| CSR build (TemporalGraph), median of {len(build['build_s_all'])} | "
                 f"{build['build_s_median']:.3g} s ({bt}) | {build.get('target', '')} |")
    lines.append(f"| CSR bytes (graph.csr.nbytes) | {fmt_bytes(build['csr_bytes'])} | |")
    lines.append(f"| raw input bytes (src, dst int64 + ts float64) | "
                 f"{fmt_bytes(build['raw_input_bytes'])} | |")
    lines.append(f"| CSR bytes / raw input bytes | {build['csr_over_raw']:.3g}x | |")
    lines.append(f"| RSS growth during build: peak ({build['peak_method']}) / held after | "
                 f"{fmt_bytes(build['rss_peak_growth'])} / {fmt_bytes(build['rss_held_growth'])}"
                 f" | |")
    lines.append(f"| RSS growth during build / CSR bytes: peak / held | "
                 f"{build['rss_peak_growth_over_csr']:.3g}x / "
                 f"{build['rss_held_growth_over_csr']:.3g}x | |")
    lines.append(f"| process peak RSS after loading + CSR build | "
                 f"{fmt_bytes(build['process_peak_after_build'])} | |")
    lines.append(f"| process peak RSS, whole run (adds GraphBolt's graph, the Python "
                 f"reference's adjacency, cached arrays for (c)) | {fmt_bytes(final_peak)} | |")
    lines.append(f"| data {'generation' if args.synthetic else 'loading'} "
                 f"({w['loaded_by']}) | {w['load_s']:.3g} s | |")
    if gb_info.get("build_s") is not None:
        lines.append(f"| GraphBolt graph build (CSC + ts + edge ids) / bytes | "
                     f"{gb_info['build_s']:.3g} s / {fmt_bytes(gb_info['nbytes'])} | |")
    lines.append("")
    if gb_info:
        lines.append("GraphBolt (dgl " + machine["versions"].get("dgl", "?") + "): "
                     + gb_info.get("semantics", gb_info.get("error", "")))
    return "\n".join(lines)


def machine_info() -> Dict[str, Any]:
    info: Dict[str, Any] = {"platform": platform.platform(), "python": platform.python_version()}
    model = None
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    info["cpu_model"] = model or platform.processor() or "unknown"
    info["cpu_count"] = os.cpu_count()
    try:
        info["cpus_usable"] = len(os.sched_getaffinity(0))
    except AttributeError:
        info["cpus_usable"] = os.cpu_count()
    mem = _meminfo_total()
    if mem:
        info["mem_total_bytes"] = mem
    try:
        info["loadavg_start"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        info["loadavg_start"] = "?"
    versions: Dict[str, str] = {}
    for mod in ("numpy", "torch", "dgl", "tbdfs_dgl", "pandas", "psutil"):
        try:
            versions[mod] = str(__import__(mod).__version__)
        except Exception:  # noqa: BLE001 - any import problem: just leave it out
            pass
    try:
        commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True, timeout=5).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain"],
                               capture_output=True, text=True, timeout=5).stdout.strip()
        if commit:
            versions["tbdfs_dgl_git"] = commit + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        pass
    info["versions"] = versions
    return info


def _meminfo_total() -> Optional[int]:
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (np.floating,)):
        return float(x)
    return x


# ----------------------------------------------------------------------------- main
def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    if args.synthetic is None:
        args.data = args.data if args.data is not None else default_data_path()
        if not args.data.is_file():
            print(f"benchmark_sampler: error: data file not found: {args.data}\n"
                  f"  pass --data PATH, set TBDFS_DATA_DIR to the folder holding "
                  f"{DEFAULT_REL}, or use --synthetic N,E", file=sys.stderr)
            return 2
    try:
        import tbdfs_dgl  # noqa: F401
    except ImportError:
        sys.path.insert(0, str(REPO))
        import tbdfs_dgl  # noqa: F401

    machine = machine_info()
    log(f"loading {'synthetic ' + str(args.synthetic) if args.synthetic else args.data}")
    w = load_workload(args)
    log(f"{w['name']}: {w['num_nodes']:,} nodes, {w['num_edges']:,} interactions "
        f"({w['load_s']:.2f} s)")
    log(f"building the CSR ({args.build_repeats}x)")
    graph, build = measure_build(w, args.directed, args.build_repeats)
    batches = make_batches(w, args.batch_size, args.batches, args.seed)

    gbr, gb_error, gb_info = None, None, {}
    if not args.no_graphbolt:
        try:
            w["int_ts"] = integer_times(w["ts"])
            log("building the GraphBolt graph")
            gbr = GraphBoltRunner(w, args.directed, w["int_ts"])
            gb_info = {
                "build_s": gbr.build_s, "nbytes": gbr.nbytes,
                "semantics": (
                    "temporal_sample_neighbors keeps an edge when its time is strictly before "
                    "the seed's time (t_e < t, like tbdfs' default time_rule='strict') and "
                    "samples uniformly without replacement (no most-recent strategy), so it is "
                    "compared in the uniform rows. It takes int64 times only (float times are "
                    "mapped to their order-preserving rank). 'Per hop' calls it once per layer "
                    "and gives each sampled neighbour its edge's time, the same tree semantics "
                    "as tbdfs (no paths, no DGL blocks: compare with (a) paths=False). "
                    "'As shipped' is TemporalNeighborSampler.sample_subgraphs, which gives each "
                    "sampled neighbour its destination's time (compact_csc_format broadcasts "
                    "it), so every hop only has to precede the root's time, not the previous "
                    "edge: a looser rule that admits more edges, and it also compacts."),
            }
        except Exception as err:  # noqa: BLE001 - report, don't crash the benchmark
            gb_error = f"{type(err).__name__}: {err}"
            gb_info = {"error": f"failed: {gb_error}"}
            log(f"GraphBolt failed: {gb_error}")
    reference, ref_adj, ref_error = None, None, None
    if not args.no_reference:
        if w["num_edges"] > args.reference_max_edges:
            ref_error = (f"skipped: {w['num_edges']:,} interactions > "
                         f"--reference-max-edges {args.reference_max_edges:,}")
        else:
            try:
                spec = importlib.util.spec_from_file_location(
                    "tbdfs_reference", REPO / "tests" / "reference.py")
                reference = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(reference)
                log("building the pure-Python reference adjacency")
                ref_adj = reference.adjacency(w["src"].tolist(), w["dst"].tolist(),
                                              w["ts"].astype(np.float64).tolist(),
                                              w["num_nodes"], args.directed)
            except Exception as err:  # noqa: BLE001
                ref_error = f"{type(err).__name__}: {err}"
                reference = None

    results = run_benchmark(args, w, graph, batches, gbr, gb_error, reference, ref_adj,
                            ref_error)
    targets = add_targets(results, w, args, build)
    final_peak = max(ru_maxrss_bytes(), _status_bytes("VmHWM") or 0,
                     build["process_peak_before_build"])
    table = render(args, w, results, build, targets, gb_info, machine, final_peak)
    print(table)
    if args.json is not None:
        settings = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
        doc = {
            "settings": settings,
            "workload": {k: w[k] for k in ("name", "num_nodes", "num_edges", "source",
                                           "loaded_by", "load_s")},
            "roots_per_batch": 3 * args.batch_size,
            "path_slots_per_root": int(np.prod(args.fanouts)),
            "paths_counted": "valid paths: path slots holding at least one hop",
            "machine": machine,
            "build": build,
            "process_peak_rss_bytes": final_peak,
            "graphbolt": gb_info,
            "results": results,
            "targets": targets,
            "table_markdown": table,
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(_jsonable(doc), indent=2))
        log(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
