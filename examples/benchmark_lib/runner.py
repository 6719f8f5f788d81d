"""Running the measurements (a)-(e) over strategies and thread counts."""
from __future__ import annotations

import argparse
import gc
import importlib.util
import os
import random
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from .graphbolt import GraphBoltRunner
from .log import log
from .timing import figures, timed_method, timed_repeats, warm_up
from .workload import spread

# examples/benchmark_lib/runner.py -> the checkout's root is two folders up
REPO = Path(__file__).resolve().parents[2]


def load_reference(w: Dict[str, Any], args: argparse.Namespace
                   ) -> Tuple[Any, Any, Optional[str]]:
    """The pure-Python reference sampler (``tests/reference.py``) and its adjacency.

    Returns
    -------
    reference, adjacency, error
        The module and the adjacency of workload ``w``, or ``None`` for both and why (the
        graph is above ``--reference-max-edges``, or loading failed).
    """
    if w["num_edges"] > args.reference_max_edges:
        return None, None, (f"skipped: {w['num_edges']:,} interactions > "
                            f"--reference-max-edges {args.reference_max_edges:,}")
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
        return None, None, f"{type(err).__name__}: {err}"
    return reference, ref_adj, None


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
    """Time (a)-(d) per strategy and thread count, then (e) once per strategy; one row each."""
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
                    methods[key] = timed_method(fn, all_idx, edges=ps["edges"], paths=paths)
            if gbr is not None and strat == gb_strategy:
                for key, maker in (("d_graphbolt_per_hop", gbr.per_hop),
                                   ("d_graphbolt_shipped", gbr.shipped)):
                    run = maker(fanouts)

                    def gb_fn(i: int, run=run) -> int:
                        return run(*torch_batches[i])[0]

                    methods[key] = timed_method(gb_fn, gb_idx, count_from_run=True, edges_runs=[])
            gb_failed = warm_up(methods, nb, args.budget_s)
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
    m = timed_method(None, done, count_from_run=True,
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

