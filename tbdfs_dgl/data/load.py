"""One entry point, :func:`load_dataset`, that finds a dataset by name or reads a path."""
from __future__ import annotations

import os
import zipfile
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

from ._table import PathLike, open_binary
from .dataset import TemporalDataset
from .download import SOURCES
from .readers import (read_act_mooc, read_booking, read_edge_list, read_jodie_csv,
                      read_movielens, read_reddit_hyperlinks, read_snap_temporal,
                      read_tgat_processed)
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


def _wikipedia_edges(path: Path) -> TemporalDataset:
    # users 1..8227 and pages 8228..9227 become 0..8226 and 8227..9226: the same ids that
    # read_jodie_csv gives the full release, so either source yields one numbering
    return read_edge_list(path, bipartite=True, relabel=True, name="wikipedia")


Reader = Callable[[Path], TemporalDataset]
_JODIE: Reader = read_jodie_csv
_SNAP: Reader = read_snap_temporal

#: name -> candidate locations (relative to the data folder), tried in order, and reader.
_CANDIDATES: Dict[str, List[Tuple[str, Reader]]] = {
    "wikipedia": [("wikipedia.csv", _JODIE), ("wikipedia/wikipedia.csv", _JODIE),
                  ("wikipedia/wikipedia-edges.txt.gz", _wikipedia_edges),
                  ("wikipedia/wikipedia-edges.txt", _wikipedia_edges)],
    "reddit": [("reddit.csv", _JODIE), ("reddit/reddit.csv", _JODIE)],
    "collegemsg": [(f"{d}CollegeMsg.txt{z}", _SNAP) for d in ("collegemsg/", "")
                   for z in (".gz", "")],
    "email-eu": [(f"{d}email-Eu-core-temporal.txt{z}", _SNAP) for d in ("email-eu/", "")
                 for z in (".gz", "")],
    "bitcoin-otc": [(f"{d}soc-sign-bitcoinotc.csv{z}", _SNAP) for d in ("bitcoin-otc/", "")
                    for z in (".gz", "")],
    "reddit-hyperlinks": [(f"{d}soc-redditHyperlinks-body.tsv", read_reddit_hyperlinks)
                          for d in ("", "reddit-hyperlinks/")],
    "act-mooc": [("act-mooc", read_act_mooc)],
    "movielens-100k": [("ml-100k", read_movielens), ("ml-100k.zip", read_movielens)],
    "movielens-1m": [("ml-1m", read_movielens), ("ml-1m.zip", read_movielens)],
    "booking": [(f"{d}booking_train_set.csv", read_booking) for d in ("", "booking/")],
}
#: Names :func:`load_dataset` understands.
DATASET_NAMES: Tuple[str, ...] = tuple(_CANDIDATES) + ("synthetic",)
_ALIASES = {"wiki": "wikipedia", "college-msg": "collegemsg", "email-eu-core-temporal": "email-eu",
            "email": "email-eu", "bitcoinotc": "bitcoin-otc", "mooc": "act-mooc",
            "ml-100k": "movielens-100k", "ml-1m": "movielens-1m",
            "movielens": "movielens-100k"}


def _head(path: Path) -> str:
    with open_binary(path) as fh:
        return fh.read(4096).decode("utf-8", errors="replace")


def _read_path(p: Path) -> TemporalDataset:
    """Pick a reader for an explicit file or folder from its name and first line."""
    if p.is_dir():
        if any(p.glob("mooc_actions.tsv")) or any(p.glob("*/mooc_actions.tsv")):
            return read_act_mooc(p)
        if any(p.glob("u.data")) or any(p.glob("ratings.dat")) or any(p.glob("ratings.csv")):
            return read_movielens(p)
        tgat = sorted(f.name[3:-4] for f in p.glob("ml_*.csv"))
        if len(tgat) == 1:
            return read_tgat_processed(p, tgat[0])
        raise ValueError(f"{p}: a folder, but not act-mooc, MovieLens or a single TGAT/TGN "
                         f"ml_<name>.csv set; pass a file instead")
    if zipfile.is_zipfile(p) or p.name in ("u.data", "ratings.dat"):
        return read_movielens(p)
    if p.name.startswith("ml_") and p.name.endswith(".csv"):
        return read_tgat_processed(p.parent, p.name[3:-4])
    first = _head(p).lstrip("\ufeff").split("\n", 1)[0].strip()
    if first.startswith("SOURCE_SUBREDDIT"):
        return read_reddit_hyperlinks(p)
    if first.startswith("user_id,item_id"):
        return read_jodie_csv(p)
    if "user_id" in first and "checkin" in first and "city_id" in first:
        return read_booking(p)
    lower = p.name.lower()
    if lower.startswith(("collegemsg", "email-eu-core-temporal", "soc-sign-bitcoin", "sx-")):
        return read_snap_temporal(p)
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
        ``"booking"``, or ``"synthetic"`` (:func:`make_wikipedia_like` with defaults; needs
        no files).  Anything else is taken as a path and read with the reader its name and
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
    key = raw.strip().lower().replace("_", "-")
    key = _ALIASES.get(key, key)
    if key == "synthetic":
        return make_wikipedia_like()
    if key in _CANDIDATES and os.sep not in raw:
        base = Path(data_dir).expanduser() if data_dir is not None else default_data_dir()
        src = SOURCES.get(key)
        how = (f"download it from {src.url} (tbdfs_dgl.data.fetch_dataset({key!r}, data_dir) "
               f"does that) or place it there by hand" if src is not None and src.url else
               (src.note if src is not None else "place it there by hand"))
        if base is None:
            raise FileNotFoundError(
                f"dataset {key!r}: no data folder; pass data_dir=... or set TBDFS_DATA_DIR "
                f"(expected e.g. <data_dir>/{_CANDIDATES[key][0][0]}); {how}; "
                "load_dataset('synthetic') needs no files")
        tried = []
        for rel, reader in _CANDIDATES[key]:
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
