"""Pinning a process to CPU cores of its own.

N training processes on one machine (DDP ranks under ``torchrun``, or independent runs)
are left by the operating system to wander over all cores, so two of them can share one
physical core (its hardware threads) while another core idles. Pinning gives process ``i``
of ``N`` an equal share of the CPUs this process may run on, whole physical cores first.

Only the standard library: no torch, no DGL.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Dict, Iterable, List, Mapping, Optional, Tuple

SYSFS_CPU = "/sys/devices/system/cpu"

__all__ = ["cpus_by_physical_core", "cpus_for_process", "parse_pin_spec", "pin_process"]


def _core_of(cpu: int, sysfs: str) -> Tuple:
    """(package, core) of a CPU from sysfs; the CPU alone when sysfs does not say."""
    topology = Path(sysfs) / f"cpu{cpu}" / "topology"
    try:
        return (int((topology / "physical_package_id").read_text()),
                int((topology / "core_id").read_text()))
    except (OSError, ValueError):
        return ("cpu", cpu)


def cpus_by_physical_core(cpus: Iterable[int], sysfs: str = SYSFS_CPU) -> List[int]:
    """Order CPUs so that the hardware threads of one physical core sit side by side.

    Parameters
    ----------
    cpus : iterable of int
        CPU numbers (as ``os.sched_getaffinity`` gives them).
    sysfs : str
        The folder holding ``cpu<N>/topology/{physical_package_id,core_id}`` (Linux's
        ``/sys/devices/system/cpu``). A CPU it says nothing about counts as a core of its own.

    Returns
    -------
    list of int
        The CPUs, grouped by physical core; the cores in the order of their lowest CPU.
    """
    groups: Dict[Tuple, List[int]] = {}
    for cpu in sorted(set(int(c) for c in cpus)):
        groups.setdefault(_core_of(cpu, sysfs), []).append(cpu)
    return [cpu for group in sorted(groups.values(), key=lambda g: g[0]) for cpu in group]


def cpus_for_process(index: int, count: int, cpus: Optional[Iterable[int]] = None,
                     sysfs: str = SYSFS_CPU) -> List[int]:
    """The CPUs that process ``index`` of ``count`` gets: an equal share, whole cores first.

    The shares are consecutive runs of :func:`cpus_by_physical_core`'s order, so with two
    hardware threads per core and a share of two, every process gets one physical core
    to itself. CPUs left over by the division stay unused.

    Parameters
    ----------
    index : int
        This process, ``0 <= index < count``.
    count : int
        How many processes share the CPUs.
    cpus : iterable of int, optional
        The CPUs to share (default: those this process may run on now).
    sysfs : str
        As in :func:`cpus_by_physical_core`.

    Returns
    -------
    list of int
        At least one CPU.

    Raises
    ------
    ValueError
        For an index outside ``[0, count)``, or more processes than CPUs.
    """
    if count < 1 or not 0 <= index < count:
        raise ValueError(f"pinning: process index must be in [0, count), got index {index} "
                         f"of count {count}")
    if cpus is None:
        cpus = (os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity")
                else range(os.cpu_count() or 1))
    allowed = sorted(set(int(c) for c in cpus))
    if count > len(allowed):
        raise ValueError(f"pinning: {count} processes cannot have a CPU each: only "
                         f"{len(allowed)} CPUs are available ({allowed})")
    order = cpus_by_physical_core(allowed, sysfs)
    share = len(order) // count
    return order[index * share:(index + 1) * share]


def parse_pin_spec(spec: str, env: Optional[Mapping[str, str]] = None) -> Tuple[int, int]:
    """Read ``--pin-cores``: ``'auto'`` or ``'i/n'``.

    Parameters
    ----------
    spec : str
        ``'auto'``: this process is ``LOCAL_RANK`` of ``LOCAL_WORLD_SIZE`` (what ``torchrun``
        sets; one process of one without them). ``'i/n'``: process ``i`` of ``n``.
    env : mapping, optional
        The environment to read for ``'auto'`` (default ``os.environ``).

    Returns
    -------
    (index, count) : tuple of int

    Raises
    ------
    ValueError
        When ``spec`` is neither form, or names an index outside ``[0, n)``.
    """
    env = os.environ if env is None else env
    if spec == "auto":
        index, count = int(env.get("LOCAL_RANK", "0")), int(env.get("LOCAL_WORLD_SIZE", "1"))
    else:
        head, sep, tail = spec.partition("/")
        try:
            if not sep:
                raise ValueError
            index, count = int(head), int(tail)
        except ValueError:
            raise ValueError(f"--pin-cores takes 'auto' or 'i/n' (process i of n), got "
                             f"{spec!r}") from None
    if count < 1 or not 0 <= index < count:
        raise ValueError(f"--pin-cores {spec!r}: process index must be in [0, n), got "
                         f"{index} of {count}")
    return index, count


def pin_process(index: int, count: int, cpus: Optional[Iterable[int]] = None,
                sysfs: str = SYSFS_CPU) -> List[int]:
    """Restrict this process (threads started later included) to its share of the CPUs.

    Call it before torch, the sampler or a DataLoader start their threads: threads inherit
    the affinity of the thread that starts them.

    Parameters
    ----------
    index, count, cpus, sysfs
        As in :func:`cpus_for_process`.

    Returns
    -------
    list of int
        The CPUs this process now runs on.

    Raises
    ------
    RuntimeError
        Where the platform cannot set a process's CPU affinity (not Linux).
    """
    if not hasattr(os, "sched_setaffinity"):
        raise RuntimeError("pinning to cores needs os.sched_setaffinity, which this platform "
                           "(not Linux) lacks; run without --pin-cores")
    chosen = cpus_for_process(index, count, cpus, sysfs)
    os.sched_setaffinity(0, chosen)
    return chosen
