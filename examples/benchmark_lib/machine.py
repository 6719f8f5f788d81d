"""The machine a benchmark ran on: CPU, cores, memory, load and library versions."""
from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path
from typing import Any, Dict, Optional

# examples/benchmark_lib/machine.py -> the checkout's root is two folders up
REPO = Path(__file__).resolve().parents[2]


def machine_info() -> Dict[str, Any]:
    """Platform, CPU model and counts, memory, load average, versions and git commit."""
    info: Dict[str, Any] = {"platform": platform.platform(), "python": platform.python_version()}
    model = None
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    info["cpu_model"] = model or platform.processor() or "unknown"
    info["cpu_count"] = os.cpu_count()
    try:
        info["cpus_usable"] = len(os.sched_getaffinity(0))
    except AttributeError:
        info["cpus_usable"] = os.cpu_count()
    mem = _meminfo_total()
    if mem:
        info["mem_total_bytes"] = mem
    try:
        info["loadavg_start"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        info["loadavg_start"] = "?"
    versions: Dict[str, str] = {}
    for mod in ("numpy", "torch", "dgl", "tbdfs_dgl", "pandas", "psutil"):
        try:
            versions[mod] = str(__import__(mod).__version__)
        except Exception:  # noqa: BLE001 - any import problem: just leave it out
            pass
    try:
        commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True, timeout=5).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain"],
                               capture_output=True, text=True, timeout=5).stdout.strip()
        if commit:
            versions["tbdfs_dgl_git"] = commit + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        pass
    info["versions"] = versions
    return info


def _meminfo_total() -> Optional[int]:
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None

