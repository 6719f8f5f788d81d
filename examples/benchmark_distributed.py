"""Data-parallel training and memory-mapped graphs: throughput, memory, a large graph.

Three measurements, each printing its figures and (``--json``) writing them:

``throughput``: events trained per second (sampled and trained, the training epoch's wall
time) by ``torchrun --nproc_per_node N examples/train_wikipedia.py`` for each N::

    python examples/benchmark_distributed.py throughput --procs 1,2 -- --max-batches 40

By default the global batch stays ``--batch-size`` events whatever N (strong scaling: each
rank's share shrinks).  ``--events-per-proc B`` gives every rank ``B`` events instead (weak
scaling: a global batch of ``B x N``, so the optimisation changes with N)::

    python examples/benchmark_distributed.py throughput --procs 1,4,8 --events-per-proc 200 \
        -- --max-batches 20

``--independent`` runs N separate one-process trainings at once instead (no DDP, no
communication; each rank's batch ``--events-per-proc``, or ``--batch-size``): the control
that tells the machine's shared memory bandwidth and caches apart from DDP's all-reduce
and waiting for the slowest rank::

    python examples/benchmark_distributed.py throughput --procs 1,4,8 --independent \
        --events-per-proc 200 -- --max-batches 20

``--pin-cores`` pins every process to its own share of the CPUs, whole physical cores
first (``train_wikipedia.py --pin-cores``), instead of leaving placement to the operating
system.

``memory``: a graph saved once, loaded by N processes with ``mmap=True`` and with
``mmap=False``, each sampling a few batches; per process the resident memory of its own
(RssAnon), of mapped files (RssFile, shared) and its proportional share (Pss)::

    python examples/benchmark_distributed.py memory --nodes 1000000 --edges 20000000 --procs 2

``large``: end to end on a power-law graph (``make_power_law``): build, train
``--train-batches`` batches, evaluate ``--eval-events`` events of validation and test;
peak RSS per rank.  Under ``torchrun`` it trains data-parallel::

    python examples/benchmark_distributed.py large --nodes 1000000 --edges 20000000
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def memory_status() -> Dict[str, float]:
    """This process's RssAnon, RssFile (MB, from /proc/self/status), Pss (MB) and peak RSS."""
    out: Dict[str, float] = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("RssAnon", "RssFile", "VmHWM"):
                out[key] = int(value.split()[0]) / 1024
    try:
        with open("/proc/self/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    out["Pss"] = int(line.split()[1]) / 1024
    except OSError:
        pass
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


# ---------------------------------------------------------------- throughput
def throughput(args: argparse.Namespace, rest: List[str]) -> Dict[str, Any]:
    if args.events_per_proc is not None and args.events_per_proc < 1:
        raise SystemExit(f"error: --events-per-proc must be >= 1, got {args.events_per_proc}")
    if args.events_per_proc is not None and any(a.startswith("--batch-size") for a in rest):
        raise SystemExit("error: --events-per-proc sets train_wikipedia's --batch-size "
                         "(events per proc x procs); do not pass --batch-size after '--'")
    runs: List[Dict[str, Any]] = []
    out_doc = {"runs": runs, "command_tail": rest, "cpu_count": os.cpu_count(),
               "events_per_proc": args.events_per_proc, "independent": args.independent,
               "pin_cores": args.pin_cores}
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS=str(args.threads))
    script = [str(ROOT / "examples" / "train_wikipedia.py"), "--no-progress"]
    for n in [int(x) for x in args.procs.split(",")]:
        if args.independent:
            runs.append(_independent_run(n, script, rest, args.events_per_proc, env,
                                         args.pin_cores))
        else:
            batch = [] if args.events_per_proc is None else [
                "--batch-size", str(args.events_per_proc * n)]
            with tempfile.TemporaryDirectory() as out:
                pin = ["--pin-cores", "auto"] if args.pin_cores else []
                cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
                       f"--nproc_per_node={n}", *script, "--save-dir", out, *rest, *batch,
                       *pin]
                t0 = time.perf_counter()
                subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
                wall = time.perf_counter() - t0
                m = json.loads((Path(out) / "metrics.json").read_text())
            r = m["runs"][0]
            events = r["batches_per_epoch"] * m["args"]["batch_size"]
            runs.append({"procs": n, "events": events, "train_seconds": r["seconds_per_epoch"],
                         "events_per_second": events / r["seconds_per_epoch"],
                         "sampling_seconds": r["sampling_seconds_per_epoch"],
                         "model_seconds": r["model_seconds_per_epoch"], "wall_seconds": wall,
                         "test_ap": r["test"]["transductive"]["ap"],
                         "batch_size": m["args"]["batch_size"]})
        print(f"{n} process(es){' (independent)' if args.independent else ''}: "
              f"{runs[-1]['events_per_second']:.0f} events/s ({runs[-1]['events']} events "
              f"in {runs[-1]['train_seconds']:.1f} s; whole run {runs[-1]['wall_seconds']:.0f} s)")
        base = runs[0]["events_per_second"] / runs[0]["procs"]
        for done in runs:
            done["fraction_of_linear"] = done["events_per_second"] / (base * done["procs"])
        if args.json:  # after every process count, so a run stopped by a time limit keeps them
            Path(args.json).write_text(json.dumps(out_doc, indent=2, default=float))
    return out_doc


def _independent_run(n: int, script: List[str], rest: List[str], events_per_proc: Optional[int],
                     env: Dict[str, str], pin_cores: bool = False) -> Dict[str, Any]:
    """``n`` one-process trainings started together (seeds 0..n-1, so their batches differ
    as DDP ranks' shares do); events/s summed over them, each over its own training epoch.
    With ``pin_cores`` process ``i`` runs with ``--pin-cores i/n``."""
    batch = [] if events_per_proc is None else ["--batch-size", str(events_per_proc)]
    with tempfile.TemporaryDirectory() as tmp:
        outs = [Path(tmp) / f"p{i}" for i in range(n)]
        t0 = time.perf_counter()
        procs = [subprocess.Popen([sys.executable, *script, "--save-dir", str(out), *rest,
                                   *batch, "--seed", str(i),
                                   *(["--pin-cores", f"{i}/{n}"] if pin_cores else [])],
                                  env=env,
                                  stdout=subprocess.DEVNULL)
                 for i, out in enumerate(outs)]
        codes = [p.wait() for p in procs]
        wall = time.perf_counter() - t0
        if any(codes):
            raise SystemExit(f"error: independent training processes exited with {codes}")
        rs = [json.loads((out / "metrics.json").read_text()) for out in outs]
    per = [(m["runs"][0]["batches_per_epoch"] * m["args"]["batch_size"],
            m["runs"][0]["seconds_per_epoch"]) for m in rs]
    return {"procs": n, "events": sum(e for e, _ in per),
            "train_seconds": max(s for _, s in per),
            "events_per_second": sum(e / s for e, s in per),
            "per_process_train_seconds": [s for _, s in per], "wall_seconds": wall,
            "test_ap": [m["runs"][0]["test"]["transductive"]["ap"] for m in rs],
            "batch_size": rs[0]["args"]["batch_size"]}


# ---------------------------------------------------------------- memory
def _memory_rank(path: str, mmap: bool, batches: int, queue: Any) -> None:
    from tbdfs_dgl import TemporalGraph, TemporalSampler

    t0 = time.perf_counter()
    g = TemporalGraph.load(path, mmap=mmap)
    load_s = time.perf_counter() - t0
    sampler = TemporalSampler(g, [10, 10], strategy="recent", seed=0, num_threads=1)
    rng = np.random.default_rng(os.getpid())
    # make_power_law's times run from 0 to about num_edges (g.time_range would gather the
    # edges into 24 bytes per edge of this process's own memory).
    lo, hi = 0.0, float(g.num_edges)
    t0 = time.perf_counter()
    for b in range(batches):
        nodes = rng.integers(0, g.num_nodes, 600)
        sampler.sample_arrays(nodes, rng.uniform(lo, hi, 600), batch_id=b, paths=False)
    queue.put({"mmap": mmap, "load_seconds": load_s,
               "sample_seconds": time.perf_counter() - t0, **memory_status()})


def memory(args: argparse.Namespace) -> Dict[str, Any]:
    from tbdfs_dgl import TemporalGraph
    from tbdfs_dgl.data import make_power_law

    src, dst, ts = make_power_law(args.nodes, args.edges, seed=0)
    t0 = time.perf_counter()
    g = TemporalGraph(src, dst, ts, num_nodes=args.nodes)
    build_s = time.perf_counter() - t0
    del src, dst, ts
    with tempfile.TemporaryDirectory(dir=args.tmp) as d:
        path = os.path.join(d, "graph")
        t0 = time.perf_counter()
        g.save(path)
        save_s = time.perf_counter() - t0
        csr_mb = g.nbytes / 2**20
        del g
        ctx = mp.get_context("spawn")
        results = []
        for mmap in (True, False):
            queue = ctx.Queue()
            procs = [ctx.Process(target=_memory_rank, args=(path, mmap, args.batches, queue))
                     for _ in range(args.procs)]
            for p in procs:
                p.start()
            got = [queue.get() for _ in procs]
            for p in procs:
                p.join()
            results += got
            print(f"mmap={mmap}: per process RssAnon " +
                  ", ".join(f"{r['RssAnon']:.0f}" for r in got) + " MB, RssFile " +
                  ", ".join(f"{r['RssFile']:.0f}" for r in got) + " MB, Pss " +
                  ", ".join(f"{r.get('Pss', float('nan')):.0f}" for r in got) + " MB; load " +
                  ", ".join(f"{r['load_seconds']:.1f}" for r in got) + " s")
    return {"nodes": args.nodes, "edges": args.edges, "procs": args.procs,
            "csr_mb": csr_mb, "build_seconds": build_s, "save_seconds": save_s,
            "ranks": results}


# ---------------------------------------------------------------- large
def large(args: argparse.Namespace) -> Dict[str, Any]:
    import torch

    from tbdfs_dgl import TBDFSModel, seed_everything
    from tbdfs_dgl.data import TemporalDataset, make_power_law
    from tbdfs_dgl.linkpred import LinkPredictionTrainer, TrainConfig
    from tbdfs_dgl.linkpred.distributed import all_sum, init_from_env

    ranks, device = init_from_env("cpu")
    say = print if ranks.is_main else (lambda *a, **k: None)
    phases: Dict[str, float] = {}
    t0 = time.perf_counter()
    src, dst, ts = make_power_law(args.nodes, args.edges, seed=0)
    data = TemporalDataset(name=f"power-law {args.nodes}/{args.edges}", src=src, dst=dst,
                           ts=ts, num_nodes=args.nodes)
    del src, dst, ts
    phases["generate"] = time.perf_counter() - t0
    seed_everything(0)
    model = TBDFSModel(node_dim=0, edge_dim=0, time_dim=100, hidden_dim=100, num_layers=2,
                       num_heads=2, dropout=0.1)
    cfg = TrainConfig(batch_size=args.batch_size, fanouts=(10, 10), train_batches=args.train_batches,
                      val_events=args.eval_events, test_events=args.eval_events,
                      progress=False, graph_dir=args.graph_dir)
    t0 = time.perf_counter()
    trainer = LinkPredictionTrainer(model, data, cfg, log=say)
    phases["split_and_graphs"] = time.perf_counter() - t0
    after_build = memory_status()
    try:
        t0 = time.perf_counter()
        loss, sample_s, model_s, n = trainer.train_epoch(0)
        phases["train"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        val = trainer.evaluate("val")
        test = trainer.evaluate("test")
        phases["evaluate"] = time.perf_counter() - t0
    finally:
        trainer.close()
    mem = memory_status()
    per_rank = all_sum(np.eye(ranks.world_size)[ranks.rank] * mem["peak_rss_mb"], ranks)
    out = {"nodes": args.nodes, "edges": args.edges, "world_size": ranks.world_size,
           "batches": n, "batch_size": cfg.batch_size, "loss": loss,
           "train_events_per_second": n * cfg.batch_size / phases["train"],
           "sampling_seconds": sample_s, "model_seconds": model_s, "phases": phases,
           "val": val, "test": test, "peak_rss_mb_per_rank": per_rank.tolist(),
           "rank0_memory_after_graphs": after_build, "rank0_memory_end": mem,
           "mapped": trainer.train_sampler.graph.is_mapped}
    say(f"trained {n} batches in {phases['train']:.0f} s "
        f"({out['train_events_per_second']:.0f} events/s), val AP "
        f"{val['transductive']['ap']:.4f}, test AP {test['transductive']['ap']:.4f}; "
        f"peak RSS per rank {', '.join(f'{x:.0f}' for x in per_rank)} MB; phases "
        + ", ".join(f"{k} {v:.0f} s" for k, v in phases.items()))
    if ranks.distributed:
        torch.distributed.destroy_process_group()
    return out if ranks.is_main else {}


def main(argv: Any = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    rest: List[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, rest = argv[:i], argv[i + 1:]
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="what", required=True)
    t = sub.add_parser("throughput", help="train_wikipedia under torchrun, per process count")
    t.add_argument("--procs", default="1,2")
    t.add_argument("--threads", type=int, default=1, help="OMP_NUM_THREADS per process")
    t.add_argument("--events-per-proc", type=int, default=None,
                   help="weak scaling: each rank's events a batch (global batch = this x N); "
                        "default: train_wikipedia's --batch-size for every N (strong scaling)")
    t.add_argument("--independent", action="store_true",
                   help="N separate one-process trainings at once, no DDP (the control for "
                        "what sharing the machine costs; batch --events-per-proc each)")
    t.add_argument("--pin-cores", action="store_true",
                   help="pin each process to its own share of the CPUs, whole physical "
                        "cores first (train_wikipedia's --pin-cores: 'auto' under torchrun, "
                        "'i/N' for independent process i)")
    m = sub.add_parser("memory", help="RSS of N processes sampling a mapped vs copied graph")
    m.add_argument("--procs", type=int, default=2)
    m.add_argument("--batches", type=int, default=20)
    m.add_argument("--tmp", default=None, help="folder for the saved graph")
    lg = sub.add_parser("large", help="train and evaluate on a power-law graph")
    lg.add_argument("--train-batches", type=int, default=300)
    lg.add_argument("--eval-events", type=int, default=20000)
    lg.add_argument("--batch-size", type=int, default=200)
    lg.add_argument("--graph-dir", default=None)
    for s in (m, lg):
        s.add_argument("--nodes", type=int, default=1_000_000)
        s.add_argument("--edges", type=int, default=20_000_000)
    for s in (t, m, lg):
        s.add_argument("--json", default=None, help="write the figures here")
    args = p.parse_args(argv)
    out = {"throughput": lambda: throughput(args, rest), "memory": lambda: memory(args),
           "large": lambda: large(args)}[args.what]()
    if args.json and out:
        Path(args.json).write_text(json.dumps(out, indent=2, default=float))


if __name__ == "__main__":
    main()
