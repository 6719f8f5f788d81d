"""Pinning processes to CPU cores of their own (tbdfs_dgl.linkpred.affinity)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tbdfs_dgl.linkpred.affinity import (cpus_by_physical_core, cpus_for_process,
                                         parse_pin_spec, pin_process)

ROOT = Path(__file__).resolve().parents[1]


def fake_sysfs(tmp_path, cores):
    """A sysfs cpu folder where ``cores[cpu] = (package, core)``."""
    for cpu, (package, core) in cores.items():
        topology = tmp_path / f"cpu{cpu}" / "topology"
        topology.mkdir(parents=True)
        (topology / "physical_package_id").write_text(f"{package}\n")
        (topology / "core_id").write_text(f"{core}\n")
    return str(tmp_path)


# 8 CPUs, 4 physical cores, Linux's usual numbering: CPU c and c + 4 are siblings.
SIBLINGS_APART = {c: (0, c % 4) for c in range(8)}


def test_hardware_threads_of_a_core_sit_side_by_side(tmp_path):
    sysfs = fake_sysfs(tmp_path, SIBLINGS_APART)
    assert cpus_by_physical_core(range(8), sysfs) == [0, 4, 1, 5, 2, 6, 3, 7]
    # Two packages with the same core ids are different cores.
    sysfs2 = fake_sysfs(tmp_path / "two", {0: (0, 0), 1: (1, 0), 2: (0, 0), 3: (1, 0)})
    assert cpus_by_physical_core([3, 2, 1, 0], sysfs2) == [0, 2, 1, 3]


def test_a_cpu_sysfs_says_nothing_about_is_a_core_of_its_own(tmp_path):
    sysfs = fake_sysfs(tmp_path, {0: (0, 0), 1: (0, 0)})
    assert cpus_by_physical_core([0, 1, 2, 3], sysfs) == [0, 1, 2, 3]
    assert cpus_by_physical_core([3, 1, 0], str(tmp_path / "missing")) == [0, 1, 3]


@pytest.mark.parametrize("count, shares", [
    (1, [[0, 4, 1, 5, 2, 6, 3, 7]]),
    (4, [[0, 4], [1, 5], [2, 6], [3, 7]]),          # a physical core each
    (8, [[0], [4], [1], [5], [2], [6], [3], [7]]),
    (3, [[0, 4], [1, 5], [2, 6]]),                   # the leftover core stays unused
])
def test_processes_get_equal_shares_whole_cores_first(tmp_path, count, shares):
    sysfs = fake_sysfs(tmp_path, SIBLINGS_APART)
    got = [cpus_for_process(i, count, range(8), sysfs) for i in range(count)]
    assert got == shares
    flat = [c for share in got for c in share]
    assert len(flat) == len(set(flat))                # no CPU in two shares


def test_only_the_allowed_cpus_are_shared(tmp_path):
    sysfs = fake_sysfs(tmp_path, SIBLINGS_APART)
    assert cpus_for_process(1, 2, [1, 2, 5, 6], sysfs) == [2, 6]


@pytest.mark.parametrize("index, count, message", [
    (0, 9, "9 processes cannot have a CPU each: only 8 CPUs"),
    (2, 2, r"index must be in \[0, count\)"),
    (-1, 2, r"index must be in \[0, count\)"),
    (0, 0, r"index must be in \[0, count\)"),
])
def test_impossible_shares_are_named(tmp_path, index, count, message):
    with pytest.raises(ValueError, match=message):
        cpus_for_process(index, count, range(8), fake_sysfs(tmp_path, SIBLINGS_APART))


def test_pin_specs_are_read():
    assert parse_pin_spec("3/8") == (3, 8)
    assert parse_pin_spec("auto", {"LOCAL_RANK": "2", "LOCAL_WORLD_SIZE": "4"}) == (2, 4)
    assert parse_pin_spec("auto", {}) == (0, 1)       # not under torchrun: one of one


@pytest.mark.parametrize("spec, message", [
    ("x", "takes 'auto' or 'i/n'"), ("3", "takes 'auto' or 'i/n'"),
    ("a/b", "takes 'auto' or 'i/n'"), ("8/8", r"index must be in \[0, n\)"),
    ("-1/2", r"index must be in \[0, n\)"), ("0/0", r"index must be in \[0, n\)"),
])
def test_bad_pin_specs_are_named(spec, message):
    with pytest.raises(ValueError, match=message):
        parse_pin_spec(spec)


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs Linux")
def test_a_pinned_process_and_its_threads_run_on_its_share():
    # In a child process: pinning changes the whole process, not just this test.
    code = ("import os, threading\n"
            "from tbdfs_dgl.linkpred.affinity import cpus_for_process, pin_process\n"
            "want = cpus_for_process(0, 1)\n"
            "got = pin_process(0, 1)\n"
            "seen = []\n"
            "t = threading.Thread(target=lambda: seen.append(sorted(os.sched_getaffinity(0))))\n"
            "t.start(); t.join()\n"
            "assert got == want and sorted(os.sched_getaffinity(0)) == sorted(got), got\n"
            "assert seen == [sorted(got)], seen\n"
            "n = len(os.sched_getaffinity(0))\n"
            "if n >= 2:\n"
            "    last = pin_process(1, 2)\n"
            "    assert sorted(os.sched_getaffinity(0)) == sorted(last)\n"
            "    assert len(last) == n // 2\n"
            "print('ok')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
