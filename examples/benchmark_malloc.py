#!/usr/bin/env python
"""A/B of how CPU tensors get their memory (``TrainConfig.retain_memory``'s glibc malloc
tuning, torch's huge pages): ms per training step, peak RSS.

``mallopt`` is process-wide and cannot be undone, and torch reads its huge-page switch once,
so every measurement is a process of its own: ``examples/benchmark_model.py`` (one setting,
one variant, one timed round) runs once per arm, the arms alternating in ABBA order so that
load from other processes falls on all alike.  Per child: ms per training step (sampling,
forward, backward, Adam), peak RSS, minor page faults and system CPU seconds (from
``os.wait4``).

Examples (the figures quoted in ``TrainConfig``'s docstring)::

    PYTHONPATH=. .venv/bin/python examples/benchmark_malloc.py --rounds 2 \\
        -- --settings official172 --variants tbdfs --batches 3 --warmup 1
    PYTHONPATH=. .venv/bin/python examples/benchmark_malloc.py --rounds 3 \\
        -- --settings defaults --variants tbdfs --batches 8 --warmup 2

Arms (``--arms``, default ``default,retain``): ``default`` (glibc as it is), ``retain``
(``--retain-memory``: the tuned heap, bounded), ``thp`` (``THP_MEM_ALLOC_ENABLE=1``: torch's
tensors of 2 MB or more on transparent huge pages) and ``retain+thp``.  Each arm sets
``THP_MEM_ALLOC_ENABLE`` itself (0 or 1), so the environment does not decide.  Round 37's
figures (``tbdfs_dgl._malloc``)::

    PYTHONPATH=. .venv/bin/python examples/benchmark_malloc.py --rounds 2 \\
        --arms default,thp,retain,retain+thp -- --dataset wikipedia --settings paper \\
        --variants tgat-plain --batches 150 --warmup 30

Arguments after ``--`` go to ``benchmark_model.py``.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Dict, List, Optional

BENCH = Path(__file__).resolve().parent / "benchmark_model.py"
ARMS = ("default", "retain", "thp", "retain+thp")


def run_child(arm: str, extra: List[str]) -> Dict[str, float]:
    """One benchmark_model.py process; its ms/step and its own resource usage."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "r.json"
        cmd = [sys.executable, str(BENCH), "--rounds", "1", "--json", str(out), *extra]
        if "retain" in arm:
            cmd.append("--retain-memory")
        env = dict(os.environ, THP_MEM_ALLOC_ENABLE="1" if "thp" in arm else "0")
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, env=env)
        _, status, usage = os.wait4(proc.pid, 0)  # this child's rusage alone
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            raise SystemExit(f"benchmark_model.py failed ({proc.returncode}): {' '.join(cmd)}")
        rows = json.loads(out.read_text())["results"]
    return {"ms_per_step": statistics.mean(r["ms_per_batch"] for r in rows),
            "peak_rss_mb": usage.ru_maxrss / 1024.0,  # KiB on Linux
            "minor_faults": float(usage.ru_minflt), "sys_s": usage.ru_stime,
            "user_s": usage.ru_utime}


def summary(values: List[float]) -> Dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def main(argv: Optional[List[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    own = argv[:argv.index("--")] if "--" in argv else argv
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=4, help="processes per arm (default 4)")
    p.add_argument("--arms", default="default,retain",
                   help=f"comma-separated, of {', '.join(ARMS)} (default: default,retain)")
    p.add_argument("--json", type=Path, default=None, help="write every figure here")
    args = p.parse_args(own)
    if args.rounds < 1:
        p.error("--rounds must be >= 1")
    arms = [a for a in args.arms.split(",") if a]
    unknown = [a for a in arms if a not in ARMS]
    if unknown or len(set(arms)) != len(arms) or not arms:
        p.error(f"--arms takes distinct names of {', '.join(ARMS)}, got {args.arms!r}")
    runs: Dict[str, List[Dict[str, float]]] = {a: [] for a in arms}
    for r in range(args.rounds):
        order = arms if r % 2 == 0 else arms[::-1]  # ABBA: no arm always goes first
        for arm in order:
            runs[arm].append(run_child(arm, extra))
            print(f"round {r} {arm}: " + ", ".join(f"{k} {v:.1f}" for k, v in
                                                   runs[arm][-1].items()), flush=True)
    keys = list(runs[arms[0]][0])
    table = {arm: {k: summary([x[k] for x in runs[arm]]) for k in keys} for arm in arms}
    print("| arm | " + " | ".join(f"{k} median (min-max)" for k in keys) + " |")
    print("|---|" + "---:|" * len(keys))
    for arm in arms:
        cells = [f"{t['median']:.1f} ({t['min']:.1f}-{t['max']:.1f})"
                 for t in table[arm].values()]
        print(f"| {arm} | " + " | ".join(cells) + " |")
    if args.json:
        doc: Dict[str, Any] = {"benchmark_model_args": extra, "rounds": args.rounds,
                               "arms": arms,
                               "runs": runs, "summary": table, "cpu_count": os.cpu_count()}
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
