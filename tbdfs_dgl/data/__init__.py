"""Temporal interaction datasets: readers for the publishers' layouts, downloads and
synthetic generators.

Everything here needs only numpy and pandas (tqdm for download progress); the sampler's
graph class is imported lazily by :meth:`TemporalDataset.to_graph`.  A new file format is
one reader function and one :func:`register_reader` call (see :mod:`.registry`).
"""
from . import readers as _readers
from .dataset import TemporalDataset, sort_by_time
from .download import SOURCES, ChecksumError, DatasetSource, download, fetch_dataset
from .load import DATASET_NAMES, default_data_dir, load_dataset
from .readers import *  # noqa: F401,F403 - every reader in readers.__all__
from .registry import register_reader, unregister_reader
from .synthetic import make_power_law, make_wikipedia_like

__all__ = [
    "TemporalDataset",
    "sort_by_time",
    *_readers.__all__,
    "register_reader",
    "unregister_reader",
    "load_dataset",
    "default_data_dir",
    "DATASET_NAMES",
    "download",
    "fetch_dataset",
    "SOURCES",
    "DatasetSource",
    "ChecksumError",
    "make_wikipedia_like",
    "make_power_law",
]
