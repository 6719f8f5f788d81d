"""tbdfs_dgl._malloc.retain_freed_memory, in child processes (its tuning is process-wide)."""
import platform
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import ctypes, sys
sys.path.insert(0, {root!r})
from tbdfs_dgl._malloc import retain_freed_memory

def heap_bytes():
    for line in open("/proc/self/maps"):
        if "[heap]" in line:
            lo, hi = line.split()[0].split("-")
            return int(hi, 16) - int(lo, 16)
    return 0

tuned = retain_freed_memory() if {retain} else False
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
before = heap_bytes()
block = libc.malloc(64 << 20)  # above glibc's largest mmap threshold (32 MiB)
print(tuned, heap_bytes() - before >= (64 << 20))
"""


def _child(retain: bool) -> str:
    code = CHILD.format(root=str(ROOT), retain=retain)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=60).stdout.split()


@pytest.mark.skipif(not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc",
                    reason="glibc malloc tuning")
def test_retained_memory_serves_blocks_above_the_mmap_ceiling_from_the_heap():
    # glibc maps such a block on its own (and unmaps it when freed, so every batch
    # faults it in again); tuned, the heap grows to hold it and keeps it for reuse.
    assert _child(retain=False) == ["False", "False"]
    assert _child(retain=True) == ["True", "True"]
