#!/usr/bin/env python
"""A/B of ``TrainConfig.retain_memory`` (glibc malloc tuning): ms per training step, peak RSS.

``mallopt`` is process-wide and cannot be undone, so every measurement is a process of its
own: ``examples/benchmark_model.py`` (one setting, one variant, one timed round) runs with
and without ``--retain-memory``, the two alternating in ABBA order so that load from other
processes falls on both alike.  Per child: ms per training step (sampling, forward,
backward, Adam), peak RSS, minor page faults and system CPU seconds (from ``os.wait4``).

Examples (the figures quoted in ``TrainConfig``'s docstring)::

    PYTHONPATH=. .venv/bin/python examples/benchmark_malloc.py --rounds 2 \\
        -- --settings official172 --variants tbdfs --batches 3 --warmup 1
    PYTHONPATH=. .venv/bin/python examples/benchmark_malloc.py --rounds 3 \\
        -- --settings defaults --variants tbdfs --batches 8 --warmup 2

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
ARMS = ("default", "retain")


def run_child(retain: bool, extra: List[str]) -> Dict[str, float]:
    """One benchmark_model.py process; its ms/step and its own resource usage."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "r.json"
        cmd = [sys.executable, str(BENCH), "--rounds", "1", "--json", str(out), *extra]
        if retain:
            cmd.append("--retain-memory")
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
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
    p.add_argument("--json", type=Path, default=None, help="write every figure here")
    args = p.parse_args(own)
    if args.rounds < 1:
        p.error("--rounds must be >= 1")
    runs: Dict[str, List[Dict[str, float]]] = {a: [] for a in ARMS}
    for r in range(args.rounds):
        order = ARMS if r % 2 == 0 else ARMS[::-1]  # ABBA: neither arm always goes first
        for arm in order:
            runs[arm].append(run_child(arm == "retain", extra))
            print(f"round {r} {arm}: " + ", ".join(f"{k} {v:.1f}" for k, v in
                                                   runs[arm][-1].items()), flush=True)
    keys = list(runs[ARMS[0]][0])
    table = {arm: {k: summary([x[k] for x in runs[arm]]) for k in keys} for arm in ARMS}
    print("| retain_memory | " + " | ".join(f"{k} median (min-max)" for k in keys) + " |")
    print("|---|" + "---:|" * len(keys))
    for arm in ARMS:
        cells = [f"{t['median']:.1f} ({t['min']:.1f}-{t['max']:.1f})"
                 for t in table[arm].values()]
        print(f"| {arm == 'retain'} | " + " | ".join(cells) + " |")
    if args.json:
        doc: Dict[str, Any] = {"benchmark_model_args": extra, "rounds": args.rounds,
                               "runs": runs, "summary": table, "cpu_count": os.cpu_count()}
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
