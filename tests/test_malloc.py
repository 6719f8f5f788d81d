"""tbdfs_dgl._malloc: retain_freed_memory in child processes (its tuning is process-wide),
and the RetainedHeapBound that keeps the tuned heap from growing without bound."""
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from tbdfs_dgl import _malloc
from tbdfs_dgl._malloc import RetainedHeapBound, huge_page_tensors

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


GLIBC = pytest.mark.skipif(
    not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc",
    reason="glibc malloc tuning")


@GLIBC
def test_retained_memory_serves_blocks_above_the_mmap_ceiling_from_the_heap():
    # glibc maps such a block on its own (and unmaps it when freed, so every batch
    # faults it in again); tuned, the heap grows to hold it and keeps it for reuse.
    assert _child(retain=False) == ["False", "False"]
    assert _child(retain=True) == ["True", "True"]


# A tuned heap fragmenting as a training loop's does: each step touches a block a little
# larger than the last (above the 32 MiB mmap ceiling) and leaves a live allocation after
# it (larger than every hole, so it comes from the top of the heap; never touched, so not
# resident), so the freed block never fits the next one and the heap takes fresh memory.
FRAGMENTING = r"""
import ctypes, sys
sys.path.insert(0, {root!r})
from tbdfs_dgl._malloc import RetainedHeapBound, _rss_bytes, retain_freed_memory

assert retain_freed_memory()
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
bound = RetainedHeapBound(min_step_bytes=64 << 20) if {bounded} else None
start, peak, pins = _rss_bytes(), 0, []
for i in range(14):
    size = (40 + 2 * i) << 20
    block = libc.malloc(size)
    ctypes.memset(block, 1, size)
    pins.append(libc.malloc(128 << 20))
    libc.free(block)
    peak = max(peak, _rss_bytes())
    if bound is not None:
        bound.after_step()
print((peak - start) >> 20, bound.trims if bound else 0)
"""


def _fragmenting_child(bounded: bool):
    code = FRAGMENTING.format(root=str(ROOT), bounded=bounded)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120).stdout.split()
    return int(out[0]), int(out[1])


@GLIBC
def test_bound_keeps_a_fragmenting_retained_heap_within_two_steps_of_its_floor():
    # Unbounded, every step's block stays resident: 40 + 42 + ... + 66 MiB = 742 MiB.
    grown, trims = _fragmenting_child(bounded=False)
    assert grown > 600 and trims == 0
    # Bounded: at most 2 x the learnt step (>= 64 MiB; a step here is <= 66 MiB) above the
    # floor, plus the step in flight; the first check trims to set the floor.
    grown, trims = _fragmenting_child(bounded=True)
    assert grown < 2 * 66 + 66 + 64, grown
    assert trims >= 3


class _FakeProcess:
    """Resident set sizes to report and the trims asked for, for RetainedHeapBound."""

    def __init__(self, monkeypatch, bound: RetainedHeapBound) -> None:
        self.rss, self.trims = 0, 0
        monkeypatch.setattr(_malloc, "_rss_bytes", lambda: self.rss)
        bound._trim = self.trim

    def trim(self, pad: int) -> int:
        self.trims += 1
        self.rss = self.after_trim
        return 1


def test_bound_trims_once_growth_passes_twice_the_learnt_step(monkeypatch):
    MB = 1 << 20
    bound = RetainedHeapBound(min_step_bytes=10 * MB)
    proc = _FakeProcess(monkeypatch, bound)
    proc.rss, proc.after_trim = 500 * MB, 300 * MB
    assert bound.after_step() and bound.floor == 300 * MB  # the first check sets the floor
    proc.rss = 350 * MB  # the step after a trim: its growth is one step's working set
    assert not bound.after_step() and bound.step_bytes == 50 * MB
    proc.rss = 400 * MB  # 100 MB above the floor: not more than 2 x 50
    assert not bound.after_step()
    proc.rss = 401 * MB
    assert bound.after_step() and proc.trims == 2 and bound.floor == 300 * MB
    proc.rss = 320 * MB  # a smaller step after this trim does not lower the learnt step
    assert not bound.after_step() and bound.step_bytes == 50 * MB
    proc.rss = 390 * MB
    assert not bound.after_step() and bound.trims == 2
    # A floor that rose (memory the trim cannot give back) is the new floor.
    proc.rss, proc.after_trim = 405 * MB, 380 * MB
    assert bound.after_step() and bound.floor == 380 * MB
    proc.rss = 470 * MB
    assert not bound.after_step() and bound.step_bytes == 90 * MB


def test_bound_does_nothing_where_it_cannot_read_the_resident_set(monkeypatch):
    bound = RetainedHeapBound()
    monkeypatch.setattr(_malloc, "_rss_bytes", lambda: None)
    calls = []
    bound._trim = calls.append
    assert not bound.after_step() and not bound.active and calls == []
    bound._trim = None
    assert not bound.after_step()
    with pytest.raises(ValueError, match="min_step_bytes"):
        RetainedHeapBound(min_step_bytes=0)
    with pytest.raises(ValueError, match="steps_kept"):
        RetainedHeapBound(steps_kept=0)


def test_steps_kept_sets_how_far_the_resident_set_may_grow(monkeypatch):
    MB = 1 << 20
    bound = RetainedHeapBound(min_step_bytes=10 * MB, steps_kept=3)
    proc = _FakeProcess(monkeypatch, bound)
    proc.rss, proc.after_trim = 200 * MB, 100 * MB
    assert bound.after_step()
    proc.rss = 120 * MB  # learns a 20 MB step: the limit is 100 + 3 x 20
    assert not bound.after_step()
    proc.rss = 160 * MB
    assert not bound.after_step()
    proc.rss = 161 * MB
    assert bound.after_step() and proc.trims == 2


@pytest.mark.parametrize("value, expected", [
    (None, False), ("", False), ("0", False), ("1", True), (" 2", True), ("-1", True),
    ("1x", True), ("yes", False), ("00", False)])
def test_huge_page_tensors_reads_the_variable_as_torch_does(monkeypatch, value, expected):
    if value is None:
        monkeypatch.delenv("THP_MEM_ALLOC_ENABLE", raising=False)
    else:
        monkeypatch.setenv("THP_MEM_ALLOC_ENABLE", value)
    assert huge_page_tensors() is expected


SCRIPT_ENV = r"""
import os, runpy, sys
sys.path.insert(0, {root!r})
sys.argv = [{script!r}, *{args!r}]
runpy.run_path({script!r}, run_name="imported")  # the module's top level, not main()
print(os.environ.get("THP_MEM_ALLOC_ENABLE"))
"""


@pytest.mark.parametrize("script", ["train_wikipedia.py", "reproduce.py", "benchmark_model.py"])
def test_retain_memory_flag_asks_for_huge_pages_unless_told_not_to(script):
    # Huge pages on their own cost time (tBDFS at [20, 20] uniform: 1.7x slower; a --quick
    # step: 395-509 ms against 335-383), so only the flag that keeps the heap asks for them.
    path = str(ROOT / "examples" / script)
    for args, given, expected in ((["--retain-memory"], None, "1"),
                                  (["--retain-memory"], "0", "0"),
                                  ([], None, "None")):
        code = SCRIPT_ENV.format(root=str(ROOT), script=path, args=args)
        env = {k: v for k, v in os.environ.items() if k != "THP_MEM_ALLOC_ENABLE"}
        if given is not None:
            env["THP_MEM_ALLOC_ENABLE"] = given
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             check=True, timeout=120, env=env).stdout.split()
        assert out[-1] == expected, (args, given)


TRAIN = r"""
import sys, torch
sys.path.insert(0, {root!r})
from tbdfs_dgl import TBDFSModel
from tbdfs_dgl.data import make_wikipedia_like
from tbdfs_dgl.linkpred import LinkPredictionTrainer, TrainConfig

torch.set_num_threads(1)
data = make_wikipedia_like(num_users=200, num_pages=40, num_events=3000, seed=1)
torch.manual_seed(0)
model = TBDFSModel(node_dim=0, edge_dim=0, time_dim=32, hidden_dim=32, num_heads=2, alpha=0.5)
# [20, 20] neighbours: per-path tensors above torch's 2 MB huge-page threshold.
cfg = TrainConfig(fanouts=(20, 20), strategy="uniform", progress=False, train_batches=3,
                  max_batches=2, seed=0)
trainer = LinkPredictionTrainer(model, data, cfg, log=lambda s: None)
loss, *_ = trainer.train_epoch(0)
print(float(loss).hex(), float(trainer.evaluate("val")["transductive"]["ap"]).hex())
trainer.close()
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="THP is Linux's")
def test_huge_page_tensors_change_no_loss():
    outs = []
    for value in ("0", "1"):
        env = dict(os.environ, THP_MEM_ALLOC_ENABLE=value)
        outs.append(subprocess.run([sys.executable, "-c", TRAIN.format(root=str(ROOT))],
                                   capture_output=True, text=True, check=True, timeout=300,
                                   env=env).stdout.split())
    assert outs[0] == outs[1] and len(outs[0]) == 2
