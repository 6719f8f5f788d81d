"""One entry point, :func:`load_dataset`, that finds a dataset by name or reads a path."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

from ._table import PathLike, open_binary
from .dataset import TemporalDataset
from .download import SOURCES
from .readers import read_edge_list  # importing the readers registers them
from .registry import DATASET_NAMES, canonical_name, dataset_files, sniff_reader
from .synthetic import make_wikipedia_like

__all__ = ["load_dataset", "default_data_dir", "DATASET_NAMES"]

# tbdfs_dgl/data/load.py -> the checkout's root is three levels up
_REPO_ROOT = Path(__file__).resolve().parents[2]


def default_data_dir() -> Optional[Path]:
    """The data folder used when none is given.

    ``$TBDFS_DATA_DIR`` if set (even if it does not exist, so that a typo is reported
    rather than silently ignored), else ``../shared/data`` beside the checkout if that
    exists, else ``None``.
    """
    env = os.environ.get("TBDFS_DATA_DIR")
    if env:
        return Path(env).expanduser()
    shared = _REPO_ROOT.parent / "shared" / "data"
    return shared if shared.is_dir() else None


def _head(path: Path) -> str:
    with open_binary(path) as fh:
        return fh.read(4096).decode("utf-8", errors="replace")


def _read_path(p: Path) -> TemporalDataset:
    """Read an explicit file or folder with the registered reader its name and first line
    call for (:func:`~tbdfs_dgl.data.register_reader`'s ``sniff``), else read_edge_list."""
    first = "" if p.is_dir() else _head(p).lstrip("\ufeff").split("\n", 1)[0].strip()
    reader = sniff_reader(p, first)
    if reader is not None:
        return reader(p)
    if p.is_dir():
        raise ValueError(f"{p}: a folder, but not one a registered reader recognises "
                         "(act-mooc, MovieLens, a single TGAT/TGN ml_<name>.csv set, ...); "
                         "pass a file instead")
    return read_edge_list(p)


def load_dataset(name_or_path: PathLike, data_dir: Optional[PathLike] = None
                 ) -> TemporalDataset:
    """Load a dataset by name from the data folder, or read a file or folder.

    Parameters
    ----------
    name_or_path : str or os.PathLike
        One of :data:`DATASET_NAMES` (case-insensitive): ``"wikipedia"`` (JODIE
        ``wikipedia.csv`` if present, else the shared bipartite edge list
        ``wikipedia/wikipedia-edges.txt.gz``, which has no features or labels),
        ``"collegemsg"``, ``"email-eu"``, ``"bitcoin-otc"``, ``"reddit"``,
        ``"reddit-hyperlinks"``, ``"act-mooc"``, ``"movielens-100k"``, ``"movielens-1m"``,
        ``"booking"``, a name given to :func:`~tbdfs_dgl.data.register_reader`, or
        ``"synthetic"`` (:func:`make_wikipedia_like` with defaults; needs no files).
        Anything else is taken as a path and read with the registered reader its name and
        first line call for (falling back to :func:`read_edge_list`).
    data_dir : str or os.PathLike, optional
        Folder holding the named datasets; default :func:`default_data_dir`.

    Returns
    -------
    TemporalDataset

    Raises
    ------
    FileNotFoundError
        If a named dataset's files are not in the data folder (the message lists where it
        looked and where to get the data), or a path does not exist.
    ValueError
        For a name that is neither known nor an existing path.
    """
    raw = os.fspath(name_or_path)
    key = canonical_name(raw)
    if key == "synthetic":
        return make_wikipedia_like()
    files = dataset_files(key)
    if files and os.sep not in raw:
        base = Path(data_dir).expanduser() if data_dir is not None else default_data_dir()
        src = SOURCES.get(key)
        how = (f"download it from {src.url} (tbdfs_dgl.data.fetch_dataset({key!r}, data_dir) "
               f"does that) or place it there by hand" if src is not None and src.url else
               (src.note if src is not None else "place it there by hand"))
        if base is None:
            raise FileNotFoundError(
                f"dataset {key!r}: no data folder; pass data_dir=... or set TBDFS_DATA_DIR "
                f"(expected e.g. <data_dir>/{files[0][0]}); {how}; "
                "load_dataset('synthetic') needs no files")
        tried = []
        for rel, reader in files:
            cand = base / rel
            if cand.exists():
                return reader(cand)
            tried.append(str(cand))
        raise FileNotFoundError(
            f"dataset {key!r} not found; looked for {', '.join(tried)}. To get it, {how}; "
            "set TBDFS_DATA_DIR or pass data_dir to look elsewhere; "
            "load_dataset('synthetic') needs no files")
    p = Path(raw).expanduser()
    if p.exists():
        return _read_path(p)
    if os.sep in raw or "." in raw:
        raise FileNotFoundError(f"no such file or folder: {p}")
    raise ValueError(f"unknown dataset {raw!r}: not one of {', '.join(DATASET_NAMES)} and "
                     "not an existing path")
