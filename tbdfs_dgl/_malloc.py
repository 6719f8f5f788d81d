"""Keep freed memory for reuse: CPU training allocates and frees the same large tensors
every batch, and glibc otherwise hands them back to the system and faults them in again."""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import re
import sys
from typing import Callable, Optional

# mallopt parameters (glibc malloc.h)
_M_TRIM_THRESHOLD = -1
_M_TOP_PAD = -2
_M_MMAP_THRESHOLD = -3
_M_MMAP_MAX = -4

_applied = False
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def huge_page_tensors() -> bool:
    """Whether torch is asked to back large CPU tensors with transparent huge pages.

    torch (2.2 and later) reads ``THP_MEM_ALLOC_ENABLE`` once, at its first allocation;
    when it is a non-zero integer, every tensor of 2 MB or more is page-aligned and
    ``madvise``'d ``MADV_HUGEPAGE``, so that where the kernel allows huge pages
    (``/sys/kernel/mm/transparent_hugepage/enabled`` ``madvise`` or ``always``) memory
    faults in 2 MB at a time instead of 4 kB.  It pays together with
    :func:`retain_freed_memory`, whose kept heap keeps the huge pages mapped; on its own it
    can cost far more than it saves.  Measured in round 37 (the ``full`` budget's [20, 20]
    uniform neighbours, JODIE Wikipedia, one torch thread, one process per arm on the
    2-core machine loaded by two training runs; ms a step, peak RSS):

    ============  ===================  ====================
    arm           TGAT (180 steps)     tBDFS (100 steps)
    ============  ===================  ====================
    untuned       606-726, 1.2 GB      1489, 2.1 GB
    huge pages    432-445, 1.1 GB      2554, 1.7 GB (3.3x the system time)
    tuned heap    450-484, 2.0-2.1 GB  1424, 2.9 GB
    both          384-389, 1.7-1.8 GB  1078-1140, 2.2-2.3 GB
    ============  ===================  ====================

    (tuned heap: :func:`retain_freed_memory` with its :class:`RetainedHeapBound`.)  The
    losses are the same bit for bit.  So nothing sets it by default: the example scripts
    set it, unless it is set already, when given ``--retain-memory``; in a script of your
    own, set it before importing torch.  Where tensors are small it costs time on its own
    too (a ``--quick`` step of ``benchmark_model.py``: 395-509 ms against 335-383).

    Returns what the environment says now, read as torch reads it (C ``atoi``).
    """
    match = re.match(r"\s*[+-]?\d+", os.environ.get("THP_MEM_ALLOC_ENABLE", ""))
    return bool(match) and int(match.group()) != 0


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
    on request (``TrainConfig.retain_memory``), together with a
    :class:`RetainedHeapBound`, without which fragmentation grows the kept heap without
    bound.  No-op (returns ``False``) off glibc.  Idempotent.
    """
    global _applied
    if _applied:
        return True
    mallopt = _glibc_function("mallopt")
    if mallopt is None:
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


def _rss_bytes() -> Optional[int]:
    """Resident set size of this process (Linux ``/proc/self/statm``), or None."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, IndexError, ValueError):
        return None


class RetainedHeapBound:
    """Keeps a heap tuned by :func:`retain_freed_memory` from growing without bound.

    With nothing ever given back, fragmentation makes the heap grow: freed batch-sized
    blocks get split by smaller requests and no longer fit the next batch's tensors, so
    the heap takes fresh memory for them.  Measured in round 37 (TGAT at the ``full``
    budget's [20, 20] uniform neighbours on JODIE Wikipedia, one torch thread), the
    resident set reached 8.3 GB within the first 300 steps and 9.1 GB in the first
    evaluation, against 1.2-1.5 GB untuned; two such runs on a 24 GB machine ran out of
    memory.

    Call :meth:`after_step` between steps (the trainer does, when
    ``TrainConfig.retain_memory`` is set).  It reads the resident set size (one small
    ``/proc`` read) and, once that exceeds the size right after the last trim by more
    than ``steps_kept`` times one step's working set, calls glibc's ``malloc_trim``: the
    pages of every free block go back to the system, and the blocks stay in the heap
    for reuse.  One step's working set is learnt as the largest growth over the first
    step after a trim (at least ``min_step_bytes``).  So a process keeps at most about
    ``steps_kept`` steps' working sets of freed memory beyond what it holds, and pays
    the page faults that the tuning avoids only after a trim.  Measured as above (180
    steps, ABBA, the 2-core machine loaded by two training runs): untuned 614-726 ms a
    step, peak RSS 1.18 GB; tuned and bounded 466-484 ms, 2.0-2.1 GB (a trim every 8-10
    steps); tuned without the bound 399 ms, 4.9-5.1 GB and growing.

    Parameters
    ----------
    min_step_bytes : int
        Floor of the learnt working set of a step (default 256 MiB).
    steps_kept : float
        How many steps' working sets of freed memory may stay resident (default 2).
    """

    def __init__(self, min_step_bytes: int = 256 << 20, steps_kept: float = 2.0) -> None:
        if min_step_bytes <= 0:
            raise ValueError(f"min_step_bytes must be positive, got {min_step_bytes}")
        if not steps_kept > 0:
            raise ValueError(f"steps_kept must be positive, got {steps_kept}")
        self.step_bytes = int(min_step_bytes)
        self.steps_kept = float(steps_kept)
        self.floor: Optional[int] = None
        self.trims = 0
        self._just_trimmed = False
        self._trim = _malloc_trim()

    @property
    def active(self) -> bool:
        """Whether this platform can trim (glibc on Linux)."""
        return self._trim is not None and _rss_bytes() is not None

    def after_step(self) -> bool:
        """Check the resident set after a step; trim if it grew too far.  True if trimmed."""
        if self._trim is None:
            return False
        rss = _rss_bytes()
        if rss is None:
            return False
        if self.floor is None:
            return self._trim_now()
        if self._just_trimmed:
            self._just_trimmed = False
            self.step_bytes = max(self.step_bytes, rss - self.floor)
        if rss - self.floor > self.steps_kept * self.step_bytes:
            return self._trim_now()
        return False

    def _trim_now(self) -> bool:
        self._trim(0)
        self.trims += 1
        self.floor = _rss_bytes()
        self._just_trimmed = True
        return True


def _glibc_function(name: str) -> Optional[Callable[..., int]]:
    """The C library's function ``name`` on Linux, or None where it has none."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return getattr(libc, name)
    except (OSError, AttributeError):
        return None


def _malloc_trim() -> Optional[Callable[[int], int]]:
    """glibc's ``malloc_trim``, or None off glibc."""
    trim = _glibc_function("malloc_trim")
    if trim is None:
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim
