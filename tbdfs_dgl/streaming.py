"""Appending interactions to a built :class:`~tbdfs_dgl.TemporalGraph` (streaming inserts).

Design
------
Appended interactions are never earlier than the graph's latest time and take the next
edge ids, so each belongs at the *end* of its endpoints' time-sorted neighbour lists.  The
C++ CSR (``csrc/append.h``) therefore gives every node a segment ``(start, degree,
capacity)`` in one pool: an entry goes into its list's spare slots, a full list moves to
the end of the pool with ~1.5x the room (geometric growth, so its copy is paid for by the
appends that filled it), and the space lists move out of is reclaimed lazily by one
repacking pass once the pool exceeds 1.5x the live entries.  Each list stays one
contiguous sorted range, which is all the sampler reads, so existing samplers see the new
interactions on their next ``sample()`` and sample exactly what a graph built from all
the interactions at once gives.  An append costs O(rows) amortized, independent of the
graph's size; the alternatives were a per-node log beside the packed CSR (every eligible
window split in two, a branch in the sampler's hot loops) or a rebuild (O(E) a chunk).

Feature tables grow the same way (:class:`GrowableRows`: geometric capacity, the graph
holding a view of the filled rows), so appending features is O(rows) too.

One event at a time from Python takes a fast path (plain ints and floats straight to C++,
no array conversions): the per-call cost is then a few microseconds.
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

import numpy as np
import torch

from . import _C
from ._validate import MAX_EXACT_TIME, feature_tensor, index_array, time_array

__all__ = ["GrowableRows", "add_edges", "trimmed"]

_ID_TYPES = frozenset({int, np.int64, np.int32, np.int16, np.int8, np.uint8, np.uint16,
                       np.uint32})
_TIME_TYPES = frozenset({float, int, np.float64, np.int64, np.int32})
# Ids above this many nodes must not look like sparse raw ids (see TemporalGraph).
_DENSE_IDS_FLOOR = 1 << 20


class GrowableRows:
    """A ``[n, d]`` table that grows by whole rows in amortized O(rows).

    The rows live in a buffer with spare capacity (grown 1.25x at a time); :attr:`view`
    is the filled part, the tensor a graph hands out.  CPU buffers are written through
    numpy (a torch slice assignment costs tens of microseconds, too much for one row).

    Parameters
    ----------
    table : torch.Tensor
        The initial ``[n, d]`` rows (taken as they are, not copied until it grows).
    """

    def __init__(self, table: torch.Tensor) -> None:
        self._buf = table
        self._np = table.numpy() if table.device.type == "cpu" else None
        self._n = table.shape[0]
        self.view = table

    def extend(self, rows: torch.Tensor) -> torch.Tensor:
        """Append ``rows`` (``[k, d]``) and return the new :attr:`view` (``[n + k, d]``)."""
        k = rows.shape[0]
        need = self._n + k
        if need > self._buf.shape[0]:
            cap = max(need, self._buf.shape[0] + self._buf.shape[0] // 4, 16)
            buf = self._buf.new_empty((cap, *self._buf.shape[1:]))
            buf[: self._n] = self._buf[: self._n]
            self._buf = buf
            self._np = buf.numpy() if buf.device.type == "cpu" else None
        if self._np is not None and rows.device.type == "cpu":
            self._np[self._n:need] = rows.numpy()
        else:
            self._buf[self._n:need] = rows
        self._n = need
        self.view = self._buf[:need]
        return self.view


def trimmed(t: Optional[torch.Tensor]) -> Optional[torch.Tensor]:
    """``t`` without the spare capacity of a grown table (pickling a view would save its
    whole buffer)."""
    if t is None or t.untyped_storage().nbytes() <= t.nelement() * t.element_size():
        return t
    return t.clone()


def _grow(graph: Any, attr: str, rows: torch.Tensor) -> None:
    """Append ``rows`` to the feature table ``graph.<attr>`` (a view of a GrowableRows)."""
    tables: Dict[str, GrowableRows] = graph.__dict__.setdefault("_growable", {})
    current = getattr(graph, attr)
    table = tables.get(attr)
    if table is None or table.view is not current:  # new, or replaced by the user since
        table = tables[attr] = GrowableRows(current)
    setattr(graph, attr, table.extend(rows))


def _edge_rows(graph: Any, edge_feat: Any, n: int) -> Optional[torch.Tensor]:
    """Check the features of ``n`` appended rows against the graph's edge features."""
    have = graph.edge_feat
    if have is None:
        if edge_feat is not None:
            raise ValueError("edge_feat given, but the graph has no edge features")
        return None
    if edge_feat is None:
        raise ValueError(f"the graph has {have.shape[1]} edge features per interaction: "
                         "pass edge_feat for the appended ones")
    if isinstance(edge_feat, torch.Tensor) and edge_feat.dim() == 1 and n == 1:
        edge_feat = edge_feat.unsqueeze(0)
    elif not isinstance(edge_feat, torch.Tensor) and np.ndim(edge_feat) == 1 and n == 1:
        edge_feat = np.asarray(edge_feat)[None]
    rows = feature_tensor(edge_feat, "edge_feat", n)
    if rows.shape[1] != have.shape[1]:
        raise ValueError(f"edge_feat has {rows.shape[1]} columns, the graph's edge features "
                         f"{have.shape[1]}")
    return rows


def _check_growth(graph: Any, largest: int, num_edges: int) -> None:
    """Refuse ids that would grow the graph far beyond its edges (sparse raw ids)."""
    if largest >= max(graph.num_nodes, _DENSE_IDS_FLOOR, 16 * 2 * num_edges):
        raise ValueError(
            f"node id {largest} would grow the graph to {largest + 1} nodes for "
            f"{num_edges} edges: node ids index arrays of (largest id + 1) entries, so "
            "sparse raw ids waste memory; build the graph with relabel=True (add_edges then "
            "takes raw ids) or map the ids to 0..N-1 first")


def _compact_new_ids(known: np.ndarray, raw: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """Map raw ids of a relabelled graph (raw ids ``known``) to compact ones; new raw ids
    (larger than every known one, so that the raw ids stay sorted) get the next compact
    ids.  Returns the compact ids and the raw ids of every node afterwards."""
    pos = np.searchsorted(known, raw)
    hit = pos < len(known)
    hit[hit] = known[pos[hit]] == raw[hit]
    new = raw[~hit]
    if len(new) == 0:
        return pos.astype(np.int64), known
    top = int(known[-1]) if len(known) else -1
    if int(new.min()) <= top:
        i = int(np.argmax(~hit & (raw <= top)))
        raise ValueError(f"raw id {int(raw[i])} (position {i}) is not a node of this graph and "
                         f"not larger than its largest raw id {top}: a relabelled graph "
                         "grows by raw ids larger than every known one (which keeps "
                         "node_ids sorted)")
    fresh = np.unique(new)
    out = pos.astype(np.int64)
    out[~hit] = len(known) + np.searchsorted(fresh, new)
    ids = np.concatenate([known, fresh])
    ids.flags.writeable = False
    return out, ids


def add_edges(graph: Any, src: Any, dst: Any, ts: Any, edge_feat: Any = None) -> None:
    """Append interactions to ``graph`` in place (see :meth:`TemporalGraph.add_edges`)."""
    csr = graph.csr
    nodes_before = csr.num_nodes
    # Fast path: one event as plain scalars, checked by the extension itself.
    if (type(src) in _ID_TYPES and type(dst) in _ID_TYPES and type(ts) in _TIME_TYPES
            and graph.node_ids is None and 0 <= src < _DENSE_IDS_FLOOR
            and 0 <= dst < _DENSE_IDS_FLOOR and -MAX_EXACT_TIME <= ts <= MAX_EXACT_TIME):
        rows = _edge_rows(graph, edge_feat, 1)
        _C.append_edge(csr, src, dst, ts)
    else:
        src_a = index_array(np.atleast_1d(src) if np.ndim(src) == 0 else src, "src")
        dst_a = index_array(np.atleast_1d(dst) if np.ndim(dst) == 0 else dst, "dst")
        ts_a = time_array(np.atleast_1d(ts) if np.ndim(ts) == 0 else ts, "ts")
        if not (len(src_a) == len(dst_a) == len(ts_a)):
            raise ValueError(f"src, dst and ts must have the same length, got {len(src_a)}, "
                             f"{len(dst_a)} and {len(ts_a)}")
        rows = _edge_rows(graph, edge_feat, len(src_a))
        if graph.node_ids is not None:
            # Checked before the raw ids are mapped: a failing append must change nothing.
            bad = np.flatnonzero(ts_a < csr_latest_time(graph))
            if len(bad):
                i = int(bad[0])
                raise ValueError(f"ts[{i}] = {ts_a[i]} is earlier than the graph's latest "
                                 f"time {csr_latest_time(graph)}: interactions can only be "
                                 "appended in time order")
            ids, node_ids = _compact_new_ids(graph.node_ids, np.concatenate([src_a, dst_a]))
            src_a, dst_a = ids[: len(src_a)], ids[len(src_a):]
        elif len(src_a):
            _check_growth(graph, int(max(src_a.max(), dst_a.max())),
                          csr.num_edges + len(src_a))
        _C.append_edges(csr, src_a, dst_a, ts_a)
        if graph.node_ids is not None:
            graph.node_ids = node_ids
    graph._input_edges = None
    if rows is not None:
        _grow(graph, "_edge_feat", rows)
    grown = csr.num_nodes - nodes_before
    if grown and graph.node_feat is not None:
        # New nodes have no features yet: zero rows (assign node_feat to set them).
        _grow(graph, "_node_feat", graph.node_feat.new_zeros(grown, graph.node_feat.shape[1]))


def csr_latest_time(graph: Any) -> float:
    """Latest interaction time of the graph (``-inf`` when it has none)."""
    return float(_C.csr_layout(graph.csr)["latest_time"])
