"""Temporal interaction datasets: readers for the publishers' layouts, downloads and
synthetic generators.

Everything here needs only numpy and pandas (tqdm for download progress); the sampler's
graph class is imported lazily by :meth:`TemporalDataset.to_graph`.
"""
from .dataset import TemporalDataset, sort_by_time
from .download import SOURCES, ChecksumError, DatasetSource, download, fetch_dataset
from .load import DATASET_NAMES, default_data_dir, load_dataset
from .readers import (read_act_mooc, read_booking, read_edge_list, read_jodie_csv,
                      read_movielens, read_reddit_hyperlinks, read_snap_temporal,
                      read_tgat_processed)
from .synthetic import make_power_law, make_wikipedia_like

__all__ = [
    "TemporalDataset",
    "sort_by_time",
    "read_edge_list",
    "read_snap_temporal",
    "read_jodie_csv",
    "read_tgat_processed",
    "read_reddit_hyperlinks",
    "read_act_mooc",
    "read_movielens",
    "read_booking",
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
