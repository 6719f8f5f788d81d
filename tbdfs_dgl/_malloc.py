"""Keep freed memory for reuse: CPU training allocates and frees the same large tensors
every batch, and glibc otherwise hands them back to the system and faults them in again."""
from __future__ import annotations

import ctypes
import ctypes.util
import sys

# mallopt parameters (glibc malloc.h)
_M_TRIM_THRESHOLD = -1
_M_TOP_PAD = -2
_M_MMAP_THRESHOLD = -3
_M_MMAP_MAX = -4

_applied = False


def retain_freed_memory() -> bool:
    """Tune glibc's malloc so that batch-sized tensors are reused instead of re-faulted.

    Serves every block from the heap (no ``mmap``: glibc maps blocks above its threshold,
    at most 32 MiB, afresh on each allocation and faults every page in again), grows the
    heap in 256 MiB steps and never trims it.  The process keeps its peak heap and some
    fragmentation, in exchange for far fewer page faults: measured in alternating
    processes (``examples/benchmark_malloc.py``, figures in
    :class:`~tbdfs_dgl.linkpred.TrainConfig`'s docstring), the official width-172 training
    step is about 1.5x faster, with about 40% more peak RSS; at the defaults, whose
    tensors stay below 32 MiB, no gain beyond the spread.  So the trainer applies it only
    on request (``TrainConfig.retain_memory``).  No-op (returns ``False``) off glibc.
    Idempotent.
    """
    global _applied
    if _applied:
        return True
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    ok = bool(mallopt(_M_MMAP_THRESHOLD, 32 << 20))
    # No mmap at all: blocks above the threshold's 32 MiB ceiling (a width-172 batch has
    # many 165 MB tensors) would otherwise still be mapped afresh and faulted in on every
    # use, whatever the threshold.
    ok &= bool(mallopt(_M_MMAP_MAX, 0))
    ok &= bool(mallopt(_M_TOP_PAD, 256 << 20))
    ok &= bool(mallopt(_M_TRIM_THRESHOLD, 2**31 - 1))
    _applied = ok
    return ok
