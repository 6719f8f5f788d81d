"""Timing the measured methods: interleaved repeats, warm-up, and the figures per method.

A *method* is a dict made by :func:`timed_method`: ``fn(i)`` processes batch ``i`` (and may
return the edges it sampled), ``idx`` lists the batches it runs on, ``times``/``cpu``
collect wall and CPU seconds per repeat.
"""
from __future__ import annotations

import statistics
import time
from typing import Any, Callable, Dict, List

import numpy as np

from .log import log
from .workload import spread

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
    """Median rates of a timed method: roots/s, sampled edges/s, valid paths/s, ms/batch."""
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


def timed_method(fn: Callable, idx: List[int], **extra: Any) -> Dict[str, Any]:
    """A method to time: ``fn`` over batches ``idx``; ``extra`` holds its counts and notes."""
    return dict({"fn": fn, "idx": idx, "times": [], "cpu": []}, **extra)


def warm_up(methods: Dict[str, Dict[str, Any]], nb: int, budget_s: float) -> Dict[str, str]:
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

