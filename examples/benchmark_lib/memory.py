"""Memory figures of the benchmark: RSS now, peak RSS over a region, and the CSR build."""
from __future__ import annotations

import gc
import resource
import statistics
import sys
import threading
import time
from typing import Any, Dict, Optional, Tuple


def status_bytes(field: str) -> Optional[int]:
    """A ``kB`` field of ``/proc/self/status`` (``VmRSS``, ``VmHWM``) in bytes, else ``None``."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def rss_bytes() -> int:
    """The resident set size now."""
    v = status_bytes("VmRSS")
    if v is not None:
        return v
    import psutil
    return int(psutil.Process().memory_info().rss)


def ru_maxrss_bytes() -> int:
    """The peak resident set size the kernel reports for the process (``ru_maxrss``)."""
    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(r) * (1 if sys.platform == "darwin" else 1024)


class PeakProbe:
    """Peak RSS over a region: the kernel's high-water mark reset via /proc/self/clear_refs
    where allowed, else a thread polling the RSS every millisecond."""

    def __init__(self) -> None:
        self.process_peak = 0  # high-water marks seen before resets
        self._stop = threading.Event()
        self._poll_peak = 0
        self._thread: Optional[threading.Thread] = None
        self.method = ""

    def __enter__(self) -> "PeakProbe":
        self.process_peak = max(status_bytes("VmHWM") or 0, ru_maxrss_bytes())
        try:
            with open("/proc/self/clear_refs", "w") as fh:
                fh.write("5")
            self.method = "VmHWM reset"
        except OSError:
            self.method = "polling"
            self._poll_peak = rss_bytes()
            self._thread = threading.Thread(target=self._poll, daemon=True)
            self._thread.start()
        return self

    def _poll(self) -> None:
        while not self._stop.is_set():
            self._poll_peak = max(self._poll_peak, rss_bytes())
            time.sleep(0.001)

    def __exit__(self, *exc: Any) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self.peak = max(self._poll_peak, rss_bytes())
        else:
            self.peak = status_bytes("VmHWM") or rss_bytes()


# ---------------------------------------------------------------------------- the CSR build
def measure_build(w: Dict[str, Any], directed: bool, repeats: int) -> Tuple[Any, Dict]:
    """Build the ``TemporalGraph`` ``repeats`` times; return the last one and its figures."""
    from tbdfs_dgl import TemporalGraph

    src, dst, ts, N = w["src"], w["dst"], w["ts"], w["num_nodes"]
    gc.collect()
    rss0 = rss_bytes()
    with PeakProbe() as probe:
        t0 = time.perf_counter()
        g = TemporalGraph(src, dst, ts, num_nodes=N, directed=directed)
        first = time.perf_counter() - t0
    rss1 = rss_bytes()
    times = [first]
    for _ in range(repeats - 1):
        g = None
        gc.collect()
        t0 = time.perf_counter()
        g = TemporalGraph(src, dst, ts, num_nodes=N, directed=directed)
        times.append(time.perf_counter() - t0)
    raw = src.nbytes + dst.nbytes + len(ts) * 8  # int64 src, dst + float64 ts
    csr = int(g.csr.nbytes)
    info = {
        "build_s_median": statistics.median(times), "build_s_all": times,
        "csr_bytes": csr, "raw_input_bytes": int(raw), "csr_over_raw": csr / raw,
        "rss_before_build": rss0, "rss_held_growth": rss1 - rss0,
        "rss_peak_growth": probe.peak - rss0, "peak_method": probe.method,
        "rss_peak_growth_over_csr": (probe.peak - rss0) / csr if csr else float("nan"),
        "rss_held_growth_over_csr": (rss1 - rss0) / csr if csr else float("nan"),
        "process_peak_before_build": probe.process_peak,
        "process_peak_after_build": max(probe.process_peak, probe.peak, rss_bytes(),
                                        status_bytes("VmHWM") or 0),
    }
    return g, info



def process_peak_rss(build: Dict[str, Any]) -> int:
    """The process's peak RSS so far (at least the peak seen before the CSR build)."""
    return max(ru_maxrss_bytes(), status_bytes("VmHWM") or 0, build["process_peak_before_build"])
