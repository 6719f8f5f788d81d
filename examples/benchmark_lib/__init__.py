"""Helpers of ``examples/benchmark_sampler.py``: the workload, the measurements (a)-(e),
memory and machine figures, and the report.

Benchmark-only code: the library parts it measures (graph, sampler, blocks, readers,
generators) are imported from ``tbdfs_dgl``, never copied here.
"""
from .graphbolt import GraphBoltRunner, build_graphbolt
from .log import log
from .machine import machine_info
from .memory import measure_build, process_peak_rss
from .report import TARGETS, add_targets, render, write_json
from .runner import load_reference, run_benchmark
from .workload import integer_times, load_workload, make_batches

__all__ = ["GraphBoltRunner", "build_graphbolt", "log", "machine_info", "measure_build",
           "process_peak_rss", "TARGETS", "add_targets", "render", "write_json",
           "load_reference", "run_benchmark", "integer_times", "load_workload", "make_batches"]
