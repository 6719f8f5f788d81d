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
import sys
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

ROOT = Path(__file__).resolve().parents[1]
for p in (ROOT, ROOT / "examples"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

from benchmark_lib import (add_targets, build_graphbolt, load_reference,  # noqa: E402
                           load_workload, log, machine_info, make_batches, measure_build,
                           process_peak_rss, render, run_benchmark, write_json)
from tbdfs_dgl.data import default_data_dir  # noqa: E402

DEFAULT_REL = Path("wikipedia") / "wikipedia-edges.txt.gz"


# ----------------------------------------------------------------------------- arguments
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


def data_path(args: argparse.Namespace) -> Optional[Path]:
    """``--data``, else the Wikipedia edge list in the data folder (``None``: no folder)."""
    if args.data is not None:
        return args.data
    base = default_data_dir()
    return None if base is None else base / DEFAULT_REL


# ----------------------------------------------------------------------------- main
def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    if args.synthetic is None:
        args.data = data_path(args)
        if args.data is None or not args.data.is_file():
            where = args.data or "no data folder ($TBDFS_DATA_DIR unset, no ../shared/data)"
            print(f"benchmark_sampler: error: data file not found: {where}\n"
                  f"  pass --data PATH, set TBDFS_DATA_DIR to the folder holding "
                  f"{DEFAULT_REL}, or use --synthetic N,E", file=sys.stderr)
            return 2

    machine = machine_info()
    log(f"loading {'synthetic ' + str(args.synthetic) if args.synthetic else args.data}")
    w = load_workload(args)
    log(f"{w['name']}: {w['num_nodes']:,} nodes, {w['num_edges']:,} interactions "
        f"({w['load_s']:.2f} s)")
    log(f"building the CSR ({args.build_repeats}x)")
    graph, build = measure_build(w, args.directed, args.build_repeats)
    batches = make_batches(w, args.batch_size, args.batches, args.seed)
    gbr, gb_error, gb_info = ((None, None, {}) if args.no_graphbolt
                              else build_graphbolt(w, args.directed))
    reference, ref_adj, ref_error = ((None, None, None) if args.no_reference
                                     else load_reference(w, args))

    results = run_benchmark(args, w, graph, batches, gbr, gb_error, reference, ref_adj,
                            ref_error)
    targets = add_targets(results, w, args, build)
    final_peak = process_peak_rss(build)
    table = render(args, w, results, build, targets, gb_info, machine, final_peak)
    print(table)
    if args.json is not None:
        write_json(args.json, args, w, machine, build, final_peak, gb_info, results, targets,
                   table)
        log(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
