"""Readers for temporal interaction files in the layouts their publishers release.

Every reader returns a :class:`~tbdfs_dgl.data.TemporalDataset` whose rows are sorted
stably by time and whose node ids are compact.  Bipartite data (users interacting with
items) is laid out as sources ``[0, U)`` followed by destinations ``[U, U + I)``.

Malformed input never produces a dataset: a missing file raises ``FileNotFoundError`` and a
bad row raises ``ValueError`` naming the file, the line and what was wrong with it.
"""
from __future__ import annotations

import io
import zipfile
from pathlib import Path
from typing import Dict, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
import pandas as pd

from ._table import PathLike, Table, read_bytes, read_table, require_file
from .dataset import TemporalDataset, sort_by_time
from .download import DatasetSource
from .registry import Sniffer, register_reader

__all__ = [
    "read_edge_list",
    "read_snap_temporal",
    "read_jodie_csv",
    "read_tgat_processed",
    "read_reddit_hyperlinks",
    "read_act_mooc",
    "read_movielens",
    "read_booking",
]

Column = Union[int, str]


# ---------------------------------------------------------------------------- helpers
def _relabel(src: np.ndarray, dst: np.ndarray, bipartite: bool
             ) -> Tuple[np.ndarray, np.ndarray, int, Optional[int], np.ndarray]:
    """Map ids (ints or names) to ``0..N-1`` in sorted order of the original ids.

    Sorted order (rather than order of first appearance) keeps relabelling a monotone
    function of the original ids, so already-compact files keep their numbering up to a
    constant shift.  Bipartite sides are relabelled separately: their id spaces may overlap.
    """
    if bipartite:
        s_codes, s_uniq = pd.factorize(src, sort=True)
        d_codes, d_uniq = pd.factorize(dst, sort=True)
        U = len(s_uniq)
        original = np.concatenate([np.asarray(s_uniq), np.asarray(d_uniq)])
        return (s_codes.astype(np.int64), d_codes.astype(np.int64) + U, U + len(d_uniq), U,
                original)
    codes, uniq = pd.factorize(np.concatenate([src, dst]), sort=True)
    codes = codes.astype(np.int64)
    return codes[: len(src)], codes[len(src):], len(uniq), None, np.asarray(uniq)


def _dataset(name: str, src: np.ndarray, dst: np.ndarray, ts: np.ndarray, *, source: str,
             relabel: bool = True, bipartite: bool = False,
             edge_feat: Optional[np.ndarray] = None, labels: Optional[np.ndarray] = None,
             ) -> TemporalDataset:
    """Relabel ids, sort rows stably by time and build the dataset."""
    if relabel:
        src, dst, num_nodes, num_src, original = _relabel(src, dst, bipartite)
    else:
        original = None
        num_nodes = int(max(src.max(), dst.max())) + 1 if len(src) else 0
        num_src = None
        if bipartite:
            num_src = int(src.max()) + 1
            if dst.min() < num_src:
                raise ValueError(f"{source}: bipartite=True with relabel=False needs every "
                                 f"destination id above every source id, but destination "
                                 f"{int(dst.min())} <= source {num_src - 1}; pass relabel=True")
    order = sort_by_time(ts)
    if order is not None:
        src, dst, ts = src[order], dst[order], ts[order]
        edge_feat = None if edge_feat is None else edge_feat[order]
        labels = None if labels is None else labels[order]
    return TemporalDataset(name=name, src=src, dst=dst, ts=ts, num_nodes=num_nodes,
                           edge_feat=edge_feat, labels=labels, bipartite=bipartite,
                           num_src_nodes=num_src, source=source, original_ids=original)


def _resolve(table: Table, col: Column, role: str) -> Column:
    """Turn a column position or header name into a key of ``table.df``."""
    cols = list(table.df.columns)
    if isinstance(col, str):
        if col not in cols:
            raise ValueError(f"{table.path}: no column named {col!r} for {role}; "
                             f"the header has {cols}")
        return col
    if not 0 <= int(col) < len(cols):
        raise ValueError(f"{table.path}: {role} is column {col}, but rows have only "
                         f"{len(cols)} columns (columns are numbered from 0)")
    return cols[int(col)]


def _require_columns(table: Table, names: Sequence[str], layout: str) -> None:
    missing = [c for c in names if c not in table.df.columns]
    if missing:
        raise ValueError(f"{table.path}: not in {layout} layout, missing column(s) {missing}; "
                         f"header has {list(table.df.columns)}")


def _dates_to_seconds(table: Table, col: str, fmt: str) -> np.ndarray:
    """Parse a date/time column (taken as UTC) to int64 seconds since the Unix epoch."""
    raw = table.df[col]
    parsed = pd.to_datetime(raw, format=fmt, errors="coerce")
    bad = np.flatnonzero(parsed.isna().to_numpy())
    if bad.size:
        r = int(bad[0])
        raise table.error(r, f"{col} {raw.iloc[r]!r} is not a date in the form {fmt!r}")
    return parsed.to_numpy().astype("datetime64[s]").astype(np.int64)


def _name_from(path: Path) -> str:
    stem = path.name
    for ext in (".gz", ".txt", ".csv", ".tsv", ".dat"):
        if stem.lower().endswith(ext):
            stem = stem[: -len(ext)]
    return stem.lower()


# ---------------------------------------------------------------------------- generic
def read_edge_list(path: PathLike, columns: Optional[Mapping[str, Column]] = None,
                   sep: Optional[str] = None, relabel: bool = True, bipartite: bool = False,
                   edge_feat_cols: Union[str, Sequence[Column], None] = "rest",
                   name: Optional[str] = None) -> TemporalDataset:
    """Read a ``src dst ts [features...]`` interaction list.

    Parameters
    ----------
    path : str or os.PathLike
        Plain or gzip-compressed text (detected from the magic bytes, not the extension).
        Whole-line comments starting with ``#`` or ``%`` and blank lines are skipped; a
        first line with no numeric field is taken as a header.
    columns : dict, optional
        Where each field is: keys ``"src"``, ``"dst"``, ``"ts"`` and optionally
        ``"label"``; values are 0-based positions or header names.  Default
        ``{"src": 0, "dst": 1, "ts": 2}``.
    sep : str, optional
        Field separator; ``None`` detects comma, tab or whitespace from the first line.
    relabel : bool
        Map ids to compact ``0..N-1`` in increasing order of the original ids (kept in
        ``original_ids``).  With ``False`` ids are used as they are and ``num_nodes`` is
        ``max id + 1``.
    bipartite : bool
        Sources and destinations are different kinds of node.  With ``relabel`` each side
        is numbered separately: sources ``0..U-1`` then destinations ``U..U+I-1``.
    edge_feat_cols : "rest", sequence or None
        Columns that become float32 edge features; ``"rest"`` takes every column that is
        not src, dst, ts or label.
    name : str, optional
        Dataset name; defaults to the file name without extensions.

    Returns
    -------
    TemporalDataset
        Rows sorted stably by time.  ``ts`` is int64 when every time was written as an
        integer, float64 otherwise.

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    ValueError
        On an empty file, rows with differing column counts, a non-numeric or NaN value,
        a negative or fractional id, or an infinite time; the message names the line.
    """
    p = require_file(path)
    if sep is not None and (sep.strip() == "" or sep == r"\s+"):
        sep = None  # any whitespace means "runs of whitespace"
    elif sep is None:
        sep = "auto"
    table = read_table(p, sep=sep, header="auto")
    spec: Dict[str, Column] = {"src": 0, "dst": 1, "ts": 2}
    if columns is not None:
        unknown = set(columns) - {"src", "dst", "ts", "label"}
        if unknown:
            raise ValueError(f"columns has unknown key(s) {sorted(unknown)}; use src, dst, "
                             "ts and optionally label")
        spec.update(columns)
    ncols = table.df.shape[1]
    if ncols < 3:
        raise ValueError(f"{p}: expected at least 3 columns (src dst ts), found {ncols} "
                         f"on line {table.line_of(0)[0]}")
    keys = {role: _resolve(table, c, role) for role, c in spec.items()}
    if len(set(keys.values())) != len(keys):
        raise ValueError(f"{p}: columns {spec} use the same column twice")
    src = table.ids(keys["src"], "source id")
    dst = table.ids(keys["dst"], "destination id")
    ts = table.times(keys["ts"])
    labels = table.numeric(keys["label"], "label") if "label" in keys else None
    if edge_feat_cols == "rest":
        feat_keys = [c for c in table.df.columns if c not in keys.values()]
    elif edge_feat_cols is None:
        feat_keys = []
    else:
        feat_keys = [_resolve(table, c, "an edge feature") for c in edge_feat_cols]
    edge_feat = table.floats(feat_keys, "edge feature") if feat_keys else None
    return _dataset(name or _name_from(p), src, dst, ts, source=str(p), relabel=relabel,
                    bipartite=bipartite, edge_feat=edge_feat, labels=labels)


def read_snap_temporal(path: PathLike, name: Optional[str] = None) -> TemporalDataset:
    """Read a SNAP temporal network such as CollegeMsg, email-Eu-core-temporal or Bitcoin-OTC.

    Two layouts are recognised: ``src dst unixts`` (whitespace, e.g. CollegeMsg,
    email-Eu-core-temporal, sx-*) and the signed-network CSV ``source,target,rating,time``
    (soc-sign-bitcoinotc / bitcoinalpha), whose rating becomes a 1-dim edge feature.
    Networks are general (not bipartite), ids are relabelled to ``0..N-1``.

    Parameters
    ----------
    path : str or os.PathLike
        The file, gzip-compressed or not.
    name : str, optional
        Dataset name; default derived from the file name (``collegemsg``, ``email-eu``,
        ``bitcoin-otc``, ...).

    Returns
    -------
    TemporalDataset
    """
    p = require_file(path)
    table = read_table(p, sep="auto", header=False)
    ncols = table.df.shape[1]
    stem = _name_from(p)
    default_name = {"collegemsg": "collegemsg", "email-eu-core-temporal": "email-eu",
                    "soc-sign-bitcoinotc": "bitcoin-otc",
                    "soc-sign-bitcoinalpha": "bitcoin-alpha"}.get(stem, stem)
    if ncols == 4 and table.sep == ",":
        src = table.ids(0, "source id")
        dst = table.ids(1, "target id")
        edge_feat = table.floats([2], "rating")
        ts = table.times(3)
    elif ncols == 3:
        src, dst, ts = table.ids(0, "source id"), table.ids(1, "target id"), table.times(2)
        edge_feat = None
    else:
        raise ValueError(f"{p}: expected SNAP layout 'src dst ts' (3 columns) or "
                         f"'source,target,rating,time' (4, comma-separated), found {ncols} "
                         f"columns on line {table.line_of(0)[0]}")
    return _dataset(name or default_name, src, dst, ts, source=str(p), edge_feat=edge_feat)


# ---------------------------------------------------------------------------- JODIE / TGAT
def read_jodie_csv(path: PathLike, name: Optional[str] = None) -> TemporalDataset:
    """Read a JODIE release (``wikipedia.csv``, ``reddit.csv``, ``mooc.csv``, ``lastfm.csv``).

    Layout: one header line, then ``user_id,item_id,timestamp,state_label,f1,...,fK``.
    The header names only five columns however many features follow, so it is skipped
    rather than used.

    Parameters
    ----------
    path : str or os.PathLike
        The CSV, gzip-compressed or not.
    name : str, optional
        Dataset name; default the file name (``wikipedia``...).

    Returns
    -------
    TemporalDataset
        Bipartite: user ``u`` is node ``u`` and item ``i`` is node ``num_users + i``, where
        ``num_users = max(user_id) + 1`` (ids are 0-based and dense per side in JODIE's
        files, so this matches TGAT/TGN's numbering minus their padding node 0).
        ``labels`` is ``state_label`` (int64), ``edge_feat`` the ``K`` feature columns
        (``None`` if ``K = 0``), ``ts`` float64 seconds.
    """
    p = require_file(path)
    table = read_table(p, sep=",", header="auto", use_header_names=False, skip_comments=False)
    _check_jodie_header(p, table)
    ncols = table.df.shape[1]
    if ncols < 4:
        raise ValueError(f"{p}: JODIE rows need at least 4 columns (user_id, item_id, "
                         f"timestamp, state_label), found {ncols} on line {table.line_of(0)[0]}")
    users = table.ids(0, "user_id")
    items = table.ids(1, "item_id")
    ts = table.times(2, "timestamp")
    labels = table.ids(3, "state_label")
    edge_feat = table.floats(list(range(4, ncols)), "feature") if ncols > 4 else None
    # relabel=False then gives num_src_nodes = max(user_id) + 1 = the item offset
    return _dataset(name or _name_from(p), users, items + int(users.max()) + 1, ts,
                    source=str(p), relabel=False, bipartite=True, edge_feat=edge_feat,
                    labels=labels)


_JODIE_COLUMNS = ("user_id", "item_id", "timestamp", "state_label")


def _check_jodie_header(p: Path, table: Table) -> None:
    """Columns are read by position; refuse a header that puts JODIE's names elsewhere."""
    if not table.header_lines:
        return
    first = next((ln for ln in table.data.split(b"\n") if ln.strip()), b"")
    names = [f.strip().strip("\"'").strip().lower()
             for f in first.decode("utf-8", "replace").rstrip("\r").split(",")]
    for pos, name in enumerate(names[:4]):
        if name in _JODIE_COLUMNS and name != _JODIE_COLUMNS[pos]:
            raise ValueError(
                f"{p}, line 1: the header puts {name!r} in column {pos + 1}, where JODIE's "
                f"layout has {_JODIE_COLUMNS[pos]!r}; columns are read by position "
                f"({', '.join(_JODIE_COLUMNS)}, features...). Reorder the columns, or read "
                "the file with read_edge_list(path, columns={'src': 'user_id', 'dst': "
                "'item_id', 'ts': 'timestamp', 'label': 'state_label'}, bipartite=True)")


def read_tgat_processed(dir: PathLike, name: str, bipartite: Optional[bool] = None
                        ) -> TemporalDataset:
    """Read the TGAT/TGN preprocessed files ``ml_{name}.csv``, ``ml_{name}.npy``,
    ``ml_{name}_node.npy``.

    The CSV has an unnamed index column then ``u, i, ts, label, idx``; ids are 1-based
    (node 0 is TGN's padding node) and ``idx`` is the row of the interaction's features in
    ``ml_{name}.npy`` (row 0 is padding).  Padding is removed: node ``k`` here is node
    ``k + 1`` there.

    Parameters
    ----------
    dir : str or os.PathLike
        Folder holding the files (TGN's ``data/``).
    name : str
        Dataset name, e.g. ``"wikipedia"``.
    bipartite : bool, optional
        Default: bipartite when every ``u`` is smaller than every ``i`` (TGN's bipartite
        re-indexing).

    Returns
    -------
    TemporalDataset
        ``node_feat`` from ``ml_{name}_node.npy`` when that file exists, else ``None``.
    """
    d = Path(dir).expanduser()
    csv = require_file(d / f"ml_{name}.csv", "TGAT/TGN interaction file")
    efile = require_file(d / f"ml_{name}.npy", "TGAT/TGN edge-feature file")
    table = read_table(csv, sep=",", header=True, skip_comments=False)
    _require_columns(table, ["u", "i", "ts", "label", "idx"], "TGAT/TGN ml_*.csv")
    u = table.ids("u", "source id u")
    i = table.ids("i", "destination id i")
    for arr, col in ((u, "u"), (i, "i")):
        if arr.min() == 0:
            raise table.error(int(np.flatnonzero(arr == 0)[0]),
                              f"{col} = 0 is TGN's padding node, ids must be >= 1")
    ts = table.times("ts")
    labels = table.numeric("label", "label")
    idx = table.ids("idx", "feature index idx")
    e_all = np.load(efile, allow_pickle=False)
    if e_all.ndim != 2:
        raise ValueError(f"{efile}: expected a 2-D edge feature matrix, got shape {e_all.shape}")
    out = np.flatnonzero((idx < 1) | (idx >= e_all.shape[0]))
    if out.size:
        raise table.error(int(out[0]), f"idx {int(idx[out[0]])} has no row in {efile.name} "
                                       f"(rows 1..{e_all.shape[0] - 1})")
    edge_feat = e_all[idx]
    src, dst = u - 1, i - 1
    num_nodes = int(max(src.max(), dst.max())) + 1
    nfile = d / f"ml_{name}_node.npy"
    node_feat = None
    if nfile.exists():
        n_all = np.load(nfile, allow_pickle=False)
        if n_all.ndim != 2 or n_all.shape[0] < num_nodes + 1:
            raise ValueError(f"{nfile}: expected shape [>= {num_nodes + 1}, d] (padding row "
                             f"plus one per node), got {n_all.shape}")
        node_feat = n_all[1:]
        num_nodes = node_feat.shape[0]
    if bipartite is None:
        bipartite = bool(src.max() < dst.min())
    num_src = int(dst.min()) if bipartite else None
    order = sort_by_time(ts)
    if order is not None:
        src, dst, ts, edge_feat, labels = (a[order] for a in (src, dst, ts, edge_feat, labels))
    return TemporalDataset(name=name, src=src, dst=dst, ts=ts, num_nodes=num_nodes,
                           edge_feat=edge_feat, node_feat=node_feat, labels=labels,
                           bipartite=bipartite, num_src_nodes=num_src, source=str(csv))


# ---------------------------------------------------------------------------- publishers
def read_reddit_hyperlinks(path: PathLike) -> TemporalDataset:
    """Read SNAP's Reddit Hyperlink Network (``soc-redditHyperlinks-body.tsv`` / ``-title``).

    Tab-separated with header ``SOURCE_SUBREDDIT TARGET_SUBREDDIT POST_ID TIMESTAMP
    LINK_SENTIMENT PROPERTIES``; ``TIMESTAMP`` is ``YYYY-MM-DD HH:MM:SS`` (taken as UTC)
    and ``PROPERTIES`` 86 comma-separated numbers describing the post.

    Returns
    -------
    TemporalDataset
        Directed subreddit-to-subreddit graph; node ``k`` is the ``k``-th subreddit name in
        sorted order (``original_ids`` holds the names).  ``ts`` int64 Unix seconds;
        ``edge_feat`` float32 ``[E, 87]`` = link sentiment (+1/-1) then the 86 properties;
        ``labels`` the sentiment.
    """
    p = require_file(path)
    text_cols = ["SOURCE_SUBREDDIT", "TARGET_SUBREDDIT", "POST_ID", "TIMESTAMP", "PROPERTIES"]
    table = read_table(p, sep="\t", header=True, skip_comments=False, str_columns=text_cols)
    _require_columns(table, text_cols + ["LINK_SENTIMENT"], "SNAP soc-redditHyperlinks")
    df = table.df
    for c in ("SOURCE_SUBREDDIT", "TARGET_SUBREDDIT", "PROPERTIES"):
        empty = np.flatnonzero(df[c].isna().to_numpy())
        if empty.size:
            width = table.first_bad_width(df.shape[1])
            raise width if width is not None else table.error(int(empty[0]), f"{c} is empty")
    ts = _dates_to_seconds(table, "TIMESTAMP", "%Y-%m-%d %H:%M:%S")
    sentiment = table.numeric("LINK_SENTIMENT", "LINK_SENTIMENT")
    bad = np.flatnonzero((sentiment != 1) & (sentiment != -1))
    if bad.size:
        raise table.error(int(bad[0]), f"LINK_SENTIMENT must be +1 or -1, got "
                                       f"{sentiment[bad[0]]}")
    props = df["PROPERTIES"]
    n_vals = props.str.count(",").to_numpy() + 1
    bad = np.flatnonzero(n_vals != 86)
    if bad.size:
        r = int(bad[0])
        raise table.error(r, f"PROPERTIES holds {n_vals[r]} comma-separated values, expected 86")
    feats = _parse_properties(table, props)
    edge_feat = np.concatenate([sentiment.astype(np.float32)[:, None], feats], axis=1)
    src = df["SOURCE_SUBREDDIT"].to_numpy(dtype=object)
    dst = df["TARGET_SUBREDDIT"].to_numpy(dtype=object)
    return _dataset("reddit-hyperlinks", src, dst, ts, source=str(p), edge_feat=edge_feat,
                    labels=sentiment.astype(np.int64))


def _parse_properties(table: Table, props: pd.Series) -> np.ndarray:
    """Parse the PROPERTIES strings (86 comma-separated numbers each) into float32 [E, 86]."""
    # one C-parser pass over all rows; far faster than splitting 300k strings in Python
    parsed = pd.read_csv(io.StringIO("\n".join(props.tolist())), header=None, sep=",",
                         skip_blank_lines=False, low_memory=False)
    out = np.empty((len(props), 86), dtype=np.float32)
    for j in range(86):
        col = pd.to_numeric(parsed[j], errors="coerce").to_numpy(dtype=np.float64)
        bad = np.flatnonzero(~np.isfinite(col))
        if bad.size:
            r = int(bad[0])
            raise table.error(r, f"PROPERTIES value {j + 1} is not a finite number: "
                                 f"{parsed[j].iloc[r]!r}")
        out[:, j] = col
    return out


def _find_in_dir(d: Path, names: Sequence[str]) -> Optional[Path]:
    for cand in names:
        for base in (d, *sorted(x for x in d.iterdir() if x.is_dir())):
            if (base / cand).is_file():
                return base / cand
    return None


def read_act_mooc(dir: PathLike) -> TemporalDataset:
    """Read SNAP's act-mooc (MOOC user actions with drop-out labels).

    Parameters
    ----------
    dir : str or os.PathLike
        Folder holding ``mooc_actions.tsv`` (``ACTIONID USERID TARGETID TIMESTAMP``),
        ``mooc_action_features.tsv`` (``ACTIONID FEATURE0..FEATURE3``) and
        ``mooc_action_labels.tsv`` (``ACTIONID LABEL``), or the folder the archive
        ``act-mooc.tar.gz`` was extracted into.

    Returns
    -------
    TemporalDataset
        Bipartite users -> course targets; users ``0..U-1``, targets ``U..U+T-1`` (each
        side relabelled in increasing original id).  ``edge_feat`` float32 ``[E, 4]``,
        ``labels`` the drop-out label (int64).
    """
    d = Path(dir).expanduser()
    if not d.is_dir():
        raise FileNotFoundError(f"act-mooc folder not found: {d}")
    files = {}
    for key, fname in (("actions", "mooc_actions.tsv"), ("features", "mooc_action_features.tsv"),
                       ("labels", "mooc_action_labels.tsv")):
        f = _find_in_dir(d, [fname])
        if f is None:
            raise FileNotFoundError(f"{fname} not found in {d} (extract act-mooc.tar.gz there)")
        files[key] = f
    act = read_table(files["actions"], sep="\t", header=True, skip_comments=False)
    _require_columns(act, ["ACTIONID", "USERID", "TARGETID", "TIMESTAMP"], "act-mooc actions")
    fea = read_table(files["features"], sep="\t", header=True, skip_comments=False)
    fcols = ["FEATURE0", "FEATURE1", "FEATURE2", "FEATURE3"]
    _require_columns(fea, ["ACTIONID"] + fcols, "act-mooc features")
    lab = read_table(files["labels"], sep="\t", header=True, skip_comments=False)
    _require_columns(lab, ["ACTIONID", "LABEL"], "act-mooc labels")

    def by_action(t: Table) -> Tuple[np.ndarray, np.ndarray]:
        aid = t.ids("ACTIONID", "ACTIONID")
        order = np.argsort(aid, kind="stable")
        dup = np.flatnonzero(aid[order][1:] == aid[order][:-1])
        if dup.size:
            raise t.error(int(order[dup[0] + 1]), f"ACTIONID {int(aid[order][dup[0]])} repeats")
        return aid, order

    a_id, a_ord = by_action(act)
    f_id, f_ord = by_action(fea)
    l_id, l_ord = by_action(lab)
    for t, ids, ords in ((fea, f_id, f_ord), (lab, l_id, l_ord)):
        if ids.size != a_id.size or not np.array_equal(ids[ords], a_id[a_ord]):
            raise ValueError(f"{t.path}: its ACTIONIDs ({ids.size:,}) do not match those of "
                             f"{files['actions']} ({a_id.size:,})")
    # put features and labels into the actions' row order
    to_action_rows = np.empty_like(a_ord)
    to_action_rows[a_ord] = np.arange(a_ord.size)
    feat = fea.floats(fcols, "action feature")[f_ord][to_action_rows]
    labels = lab.ids("LABEL", "LABEL")[l_ord][to_action_rows]
    src = act.ids("USERID", "USERID")
    dst = act.ids("TARGETID", "TARGETID")
    ts = act.times("TIMESTAMP")
    # ACTIONID is the publisher's chronological order; keep it for equal timestamps
    src, dst, ts, feat, labels = (x[a_ord] for x in (src, dst, ts, feat, labels))
    return _dataset("act-mooc", src, dst, ts, source=str(files["actions"]), bipartite=True,
                    edge_feat=feat, labels=labels)


def _movielens_bytes(path: Path) -> Tuple[bytes, Path]:
    """Find the ratings inside a MovieLens file, folder or zip; return (content, name)."""
    wanted = ("u.data", "ratings.dat", "ratings.csv")
    if path.is_dir():
        f = _find_in_dir(path, wanted)
        if f is None:
            raise FileNotFoundError(f"none of {wanted} found in {path}")
        return read_bytes(f), f
    p = require_file(path, "MovieLens file")
    if zipfile.is_zipfile(p):
        with zipfile.ZipFile(p) as zf:
            for member in zf.namelist():
                if member.rsplit("/", 1)[-1] in wanted:
                    return zf.read(member), Path(f"{p}/{member}")
        raise FileNotFoundError(f"none of {wanted} found inside {p}")
    return read_bytes(p), p


def read_movielens(path: PathLike) -> TemporalDataset:
    """Read MovieLens ratings as user -> movie interactions.

    Parameters
    ----------
    path : str or os.PathLike
        ml-100k ``u.data`` (tab-separated ``user item rating timestamp``), ml-1m
        ``ratings.dat`` (``UserID::MovieID::Rating::Timestamp``), a newer ``ratings.csv``
        with header, the folder holding one of them, or the release zip.

    Returns
    -------
    TemporalDataset
        Bipartite: users ``0..U-1``, movies ``U..U+M-1`` (each side relabelled in
        increasing original id); ``edge_feat`` float32 ``[E, 1]`` the rating; ``ts``
        int64 Unix seconds.
    """
    data, shown = _movielens_bytes(Path(path).expanduser())
    if b"::" in data[:4096]:
        data = data.replace(b"::", b"\t")  # same line structure, so line numbers still hold
    table = read_table(shown, sep="auto", header="auto", skip_comments=False, data=data)
    if table.df.shape[1] != 4:
        raise ValueError(f"{shown}: expected 4 columns (user item rating timestamp), found "
                         f"{table.df.shape[1]} on line {table.line_of(0)[0]}")
    c = list(table.df.columns)
    users = table.ids(c[0], "user id")
    items = table.ids(c[1], "movie id")
    rating = table.floats([c[2]], "rating")
    ts = table.times(c[3], "timestamp")
    name = "movielens-" + ("1m" if shown.name == "ratings.dat" else
                           "100k" if shown.name == "u.data" else "ratings")
    return _dataset(name, users, items, ts, source=str(shown), bipartite=True,
                    edge_feat=rating)


def read_booking(path: PathLike, drop_hidden: bool = True) -> TemporalDataset:
    """Read the Booking.com WSDM WebTour 2021 challenge trips as user -> city check-ins.

    Parameters
    ----------
    path : str or os.PathLike
        ``booking_train_set.csv`` (or the test set): header ``user_id, checkin, checkout,
        city_id, device_class, affiliate_id, booker_country, hotel_country, utrip_id``,
        optionally preceded by an unnamed index column; dates ``YYYY-MM-DD``.
    drop_hidden : bool
        Drop rows with ``city_id == 0``: the test set hides each trip's final city that
        way, and keeping them would make every hidden city one popular fake node.

    Returns
    -------
    TemporalDataset
        Bipartite: users ``0..U-1``, cities ``U..U+C-1``; one interaction per reservation
        at its check-in date (int64 Unix seconds, midnight UTC); ``edge_feat`` float32
        ``[E, 1]`` the number of nights.  The data has no public URL: it is distributed to
        registered challenge participants.
    """
    p = require_file(path)
    table = read_table(p, sep=",", header=True, skip_comments=False,
                       str_columns=["checkin", "checkout"])
    _require_columns(table, ["user_id", "checkin", "checkout", "city_id"], "Booking.com WSDM")
    users = table.ids("user_id", "user_id")
    cities = table.ids("city_id", "city_id")
    checkin = _dates_to_seconds(table, "checkin", "%Y-%m-%d")
    checkout = _dates_to_seconds(table, "checkout", "%Y-%m-%d")
    nights = ((checkout - checkin) / 86400.0).astype(np.float32)[:, None]
    if drop_hidden:
        keep = cities != 0
        users, cities, checkin, nights = users[keep], cities[keep], checkin[keep], nights[keep]
        if users.size == 0:
            raise ValueError(f"{p}: every row has city_id 0 (hidden); nothing to read")
    return _dataset("booking", users, cities, checkin, source=str(p), bipartite=True,
                    edge_feat=nights)


# ---------------------------------------------------------------------------- registrations
def _read_wikipedia_edges(path: PathLike) -> TemporalDataset:
    """Read the bipartite Wikipedia edge list (``wikipedia-edges.txt.gz``, ``user page ts``).

    Users 1..8227 and pages 8228..9227 become 0..8226 and 8227..9226: the ids that
    :func:`read_jodie_csv` gives JODIE's full release, so either source yields one
    numbering.  The edge list has no features or labels.
    """
    return read_edge_list(path, bipartite=True, relabel=True, name="wikipedia")


def _read_tgat_path(path: Path) -> TemporalDataset:
    """:func:`read_tgat_processed` for a path: an ``ml_<name>.csv`` or the folder of one set."""
    if path.is_dir():
        (csv,) = path.glob("ml_*.csv")
        return read_tgat_processed(path, csv.name[3:-4])
    return read_tgat_processed(path.parent, path.name[3:-4])


def _is_tgat(p: Path, first_line: str) -> bool:
    if p.is_dir():
        return len(list(p.glob("ml_*.csv"))) == 1
    return p.name.startswith("ml_") and p.name.endswith(".csv")


def _is_act_mooc(p: Path, first_line: str) -> bool:
    return p.is_dir() and (any(p.glob("mooc_actions.tsv")) or any(p.glob("*/mooc_actions.tsv")))


def _is_movielens(p: Path, first_line: str) -> bool:
    if p.is_dir():
        return any(any(p.glob(f)) for f in ("u.data", "ratings.dat", "ratings.csv"))
    return zipfile.is_zipfile(p) or p.name in ("u.data", "ratings.dat")


def _header(prefix: str) -> Sniffer:
    return lambda p, first_line: first_line.startswith(prefix)


def _named(*prefixes: str) -> Sniffer:
    return lambda p, first_line: p.name.lower().startswith(prefixes)


def _snap_files(folder: str, file: str) -> Tuple[str, ...]:
    """A SNAP file's places: in its own folder or the data folder, gzip-compressed or not."""
    return tuple(f"{d}{file}{z}" for d in (f"{folder}/", "") for z in (".gz", ""))


def _is_booking(p: Path, first_line: str) -> bool:
    return all(c in first_line for c in ("user_id", "checkin", "city_id"))


_SNAP = "https://snap.stanford.edu/data"
_JODIE = "http://snap.stanford.edu/jodie"
_GROUPLENS = "https://files.grouplens.org/datasets/movielens"

# The order of the sniffers below is the order load_dataset tries them on a path: folders
# (act-mooc, MovieLens, TGAT), then files by name or header; read_edge_list reads the rest.
register_reader(sniff=_is_act_mooc)(read_act_mooc)
register_reader(sniff=_is_movielens)(read_movielens)
register_reader(sniff=_is_tgat)(_read_tgat_path)
register_reader(sniff=_header("SOURCE_SUBREDDIT"))(read_reddit_hyperlinks)
register_reader(sniff=_header("user_id,item_id"))(read_jodie_csv)
register_reader(sniff=_is_booking)(read_booking)
register_reader(sniff=_named("collegemsg", "email-eu-core-temporal", "soc-sign-bitcoin", "sx-")
                )(read_snap_temporal)

# Dataset names: where each lies in the data folder and where its publisher releases it.
register_reader("wikipedia", files=("wikipedia.csv", "wikipedia/wikipedia.csv"),
                aliases=("wiki",),
                source=DatasetSource(f"{_JODIE}/wikipedia.csv", "wikipedia.csv",
                                     note="JODIE Wikipedia edits with 172 LIWC features and ban "
                                          "labels (about 530 MB); read with read_jodie_csv")
                )(read_jodie_csv)
register_reader("wikipedia", files=("wikipedia/wikipedia-edges.txt.gz",
                                    "wikipedia/wikipedia-edges.txt"))(_read_wikipedia_edges)
register_reader("reddit", files=("reddit.csv", "reddit/reddit.csv"),
                source=DatasetSource(f"{_JODIE}/reddit.csv", "reddit.csv",
                                     note="JODIE Reddit posts; read with read_jodie_csv")
                )(read_jodie_csv)
register_reader("collegemsg", files=_snap_files("collegemsg", "CollegeMsg.txt"),
                aliases=("college-msg",),
                source=DatasetSource(f"{_SNAP}/CollegeMsg.txt.gz", "collegemsg/CollegeMsg.txt.gz",
                                     note="SNAP CollegeMsg; read_snap_temporal")
                )(read_snap_temporal)
register_reader("email-eu", files=_snap_files("email-eu", "email-Eu-core-temporal.txt"),
                aliases=("email-eu-core-temporal", "email"),
                source=DatasetSource(f"{_SNAP}/email-Eu-core-temporal.txt.gz",
                                     "email-eu/email-Eu-core-temporal.txt.gz",
                                     note="SNAP email-Eu-core-temporal; read_snap_temporal")
                )(read_snap_temporal)
register_reader("bitcoin-otc", files=_snap_files("bitcoin-otc", "soc-sign-bitcoinotc.csv"),
                aliases=("bitcoinotc",),
                source=DatasetSource(f"{_SNAP}/soc-sign-bitcoinotc.csv.gz",
                                     "bitcoin-otc/soc-sign-bitcoinotc.csv.gz",
                                     note="SNAP Bitcoin OTC ratings; read_snap_temporal")
                )(read_snap_temporal)
register_reader("reddit-hyperlinks", files=("soc-redditHyperlinks-body.tsv",
                                            "reddit-hyperlinks/soc-redditHyperlinks-body.tsv"),
                source=DatasetSource(f"{_SNAP}/soc-redditHyperlinks-body.tsv",
                                     "soc-redditHyperlinks-body.tsv",
                                     note="SNAP subreddit hyperlinks; read_reddit_hyperlinks")
                )(read_reddit_hyperlinks)
register_reader("act-mooc", files=("act-mooc",), aliases=("mooc",),
                source=DatasetSource(f"{_SNAP}/act-mooc.tar.gz", "act-mooc.tar.gz",
                                     note="SNAP MOOC actions; extracted, then read_act_mooc")
                )(read_act_mooc)
register_reader("movielens-100k", files=("ml-100k", "ml-100k.zip"),
                aliases=("ml-100k", "movielens"),
                source=DatasetSource(f"{_GROUPLENS}/ml-100k.zip", "ml-100k.zip",
                                     note="GroupLens; read_movielens")
                )(read_movielens)
register_reader("movielens-1m", files=("ml-1m", "ml-1m.zip"), aliases=("ml-1m",),
                source=DatasetSource(f"{_GROUPLENS}/ml-1m.zip", "ml-1m.zip",
                                     note="GroupLens; read_movielens")
                )(read_movielens)
register_reader("booking", files=("booking_train_set.csv", "booking/booking_train_set.csv"),
                source=DatasetSource(None, "booking_train_set.csv",
                                     note="Booking.com WSDM WebTour 2021 challenge data has no "
                                          "public URL: it was distributed to registered "
                                          "participants; place booking_train_set.csv by hand "
                                          "and use read_booking")
                )(read_booking)
