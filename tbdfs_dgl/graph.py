"""`TemporalGraph`: timestamped interactions held in the C++ time-sorted CSR."""
from __future__ import annotations

import os
from typing import Any, Dict, Optional, Sequence, Tuple

import numpy as np
import torch

from . import _C, graph_io, streaming
from ._deprecation import FEAT_RENAMES, deprecated_alias, renamed_kwargs
from ._validate import feature_tensor, index_array, time_array

__all__ = ["TemporalGraph", "relabel_nodes"]

MAX_GRAPH_BYTES_ENV = "TBDFS_MAX_GRAPH_BYTES"


def relabel_nodes(src: Any, dst: Any) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Map arbitrary (sparse) node ids to ``0..N-1`` in increasing order of the raw ids.

    Parameters
    ----------
    src, dst : array-like of int
        Raw endpoint ids (any non-negative int64 values).

    Returns
    -------
    src, dst : numpy.ndarray
        int64 compact ids.
    node_ids : numpy.ndarray
        int64 ``[N]``: ``node_ids[new] == raw``; ``np.searchsorted(node_ids, raw)`` maps
        raw ids (of nodes in the graph) to compact ones.
    """
    src_a, dst_a = index_array(src, "src"), index_array(dst, "dst")
    node_ids, inverse = np.unique(np.concatenate([src_a, dst_a]), return_inverse=True)
    inverse = inverse.astype(np.int64, copy=False)
    return inverse[: len(src_a)].copy(), inverse[len(src_a):].copy(), node_ids


def _max_graph_bytes() -> float:
    env = os.environ.get(MAX_GRAPH_BYTES_ENV)
    if env:
        try:
            return float(env)
        except ValueError:
            raise ValueError(f"${MAX_GRAPH_BYTES_ENV} must be a number of bytes, got {env!r}"
                             ) from None
    return _C.physical_memory_bytes() / 2 or float("inf")


class TemporalGraph:
    r"""A graph of timestamped interactions, ready for temporal neighbour sampling.

    Edge ``i`` is input row ``i``: ``(src[i], dst[i], ts[i])``.  Every node's neighbours are
    kept sorted by (time, edge id) in a compact C++ CSR built in ``O(E log E)`` (linear when
    the rows are already in time order).

    Parameters
    ----------
    src, dst : array-like of int
        Endpoints of each interaction, ids in ``[0, num_nodes)``.
    ts : array-like of int or float
        Time of each interaction; any order.  Kept as float64 (int64 times up to 2**53 are
        exact); float32 is refused.
    num_nodes : int, optional
        Number of nodes; defaults to the largest id + 1.
    edge_feat : tensor or array ``[E, d_e]``, optional
        Edge features, row ``i`` for edge ``i``.  Formerly ``edge_feats`` (deprecated).
    node_feat : tensor or array ``[N, d_n]``, optional
        Node features.  Formerly ``node_feats`` (deprecated).
    directed : bool
        ``False`` (default): both endpoints see each interaction.  ``True``: a node sees only
        the sources of its in-edges, the direction DGL passes messages in.
    relabel : bool
        Map the raw ids to ``0..N-1`` (increasing raw id) first, for sparse ids such as
        ``2**31 - 2``; :attr:`node_ids` then holds each node's raw id and
        :meth:`compact_ids` maps raw ids for the sampler.  ``node_feat`` rows follow the
        compact ids; ``num_nodes`` must be left out.  Default ``False``.

    Raises
    ------
    MemoryError
        When the CSR for ``num_nodes`` (largest id + 1) and the edges would need more than
        half the physical memory (``$TBDFS_MAX_GRAPH_BYTES`` overrides), before allocating.
    """

    #: Deprecated attribute names (release 0.1), forwarding with a warning.
    edge_feats = deprecated_alias("edge_feat")
    node_feats = deprecated_alias("node_feat")

    @renamed_kwargs(FEAT_RENAMES)
    def __init__(
        self,
        src: Any,
        dst: Any,
        ts: Any,
        num_nodes: Optional[int] = None,
        edge_feat: Any = None,
        node_feat: Any = None,
        directed: bool = False,
        relabel: bool = False,
    ) -> None:
        src_a = index_array(src, "src")
        dst_a = index_array(dst, "dst")
        ts_a = time_array(ts, "ts")
        if not (len(src_a) == len(dst_a) == len(ts_a)):
            raise ValueError(
                f"src, dst and ts must have the same length, got {len(src_a)}, {len(dst_a)} "
                f"and {len(ts_a)}"
            )
        node_ids = None
        if relabel:
            if num_nodes is not None:
                raise ValueError("num_nodes cannot be given with relabel=True (it is the "
                                 "number of distinct ids)")
            src_a, dst_a, node_ids = relabel_nodes(src_a, dst_a)
        largest = int(max(src_a.max(), dst_a.max())) if len(src_a) else -1
        if num_nodes is None:
            num_nodes = largest + 1
            # At most 2E ids are used: far more nodes than that means raw, sparse ids (one
            # id near 2**31 asks for tens of GB).  Passing num_nodes confirms the intent.
            if num_nodes > max(1 << 20, 16 * 2 * len(src_a)):
                raise ValueError(
                    f"the largest node id is {largest} for only {len(src_a)} edges: node ids "
                    "index arrays of (largest id + 1) entries, so sparse raw ids waste memory "
                    f"(~{_C.graph_build_bytes(num_nodes, len(src_a), bool(directed)) / 2**30:.3g}"
                    " GiB here). Pass relabel=True (raw ids kept in .node_ids; map roots with "
                    ".compact_ids), map them with tbdfs_dgl.graph.relabel_nodes(src, dst), or "
                    "pass num_nodes explicitly if the ids are meant as they are.")
        elif not isinstance(num_nodes, (int, np.integer)) or isinstance(num_nodes, bool):
            raise TypeError(f"num_nodes must be an int, got {type(num_nodes).__name__}")
        elif num_nodes <= largest:
            raise ValueError(
                f"num_nodes={num_nodes} is too small: the largest node id is {largest}"
            )
        if num_nodes > np.iinfo(np.int32).max:
            raise ValueError(
                f"num_nodes = {num_nodes} exceeds the {np.iinfo(np.int32).max} nodes the CSR "
                "supports; if the ids are sparse, pass relabel=True (or map them with "
                "tbdfs_dgl.graph.relabel_nodes)")
        need = _C.graph_build_bytes(int(num_nodes), len(src_a), bool(directed))
        limit = _max_graph_bytes()
        if need > limit:
            distinct = len(np.unique(np.concatenate([src_a, dst_a]))) if len(src_a) else 0
            raise MemoryError(
                f"building this graph needs about {need / 2**30:.3g} GiB for num_nodes = "
                f"{num_nodes} ({distinct} distinct ids among {len(src_a)} edges), above the "
                f"limit of {limit / 2**30:.3g} GiB (half the physical memory, or "
                f"${MAX_GRAPH_BYTES_ENV}). Node ids index arrays of num_nodes entries: for "
                "sparse raw ids pass relabel=True (raw ids kept in .node_ids) or map them "
                "with tbdfs_dgl.graph.relabel_nodes(src, dst).")
        csr = _C.TCSR.build(src_a, dst_a, ts_a, int(num_nodes), bool(directed))
        self._init(csr, edge_feat, node_feat, node_ids)

    def _init(self, csr: "_C.TCSR", edge_feat: Any, node_feat: Any,
              node_ids: Optional[np.ndarray] = None) -> None:
        self._csr = csr
        if node_ids is not None:
            node_ids = np.ascontiguousarray(node_ids, dtype=np.int64)
            if node_ids.shape != (csr.num_nodes,):
                raise ValueError(f"node_ids must have {csr.num_nodes} entries, got shape "
                                 f"{node_ids.shape}")
            node_ids.flags.writeable = False
        self.node_ids: Optional[np.ndarray] = node_ids
        self.edge_feat = edge_feat
        self.node_feat = node_feat
        self._input_edges: Optional[Tuple[np.ndarray, np.ndarray, np.ndarray]] = None

    # ------------------------------------------------------------------ constructors
    @classmethod
    @renamed_kwargs(FEAT_RENAMES)
    def from_pandas(
        cls,
        df: Any,
        src: str = "src",
        dst: str = "dst",
        time: str = "ts",
        edge_feat_cols: Optional[Sequence[str]] = None,
        num_nodes: Optional[int] = None,
        node_feat: Any = None,
        directed: bool = False,
    ) -> "TemporalGraph":
        """Build from a DataFrame with one row per interaction.

        Parameters
        ----------
        df : pandas.DataFrame
            The interactions.
        src, dst, time : str
            Column names of the endpoints and the time.
        edge_feat_cols : sequence of str, optional
            Numeric columns to use as edge features.
        num_nodes, node_feat, directed
            As in the constructor.
        """
        for col in [src, dst, time, *(edge_feat_cols or [])]:
            if col not in df.columns:
                raise KeyError(f"column {col!r} not in the DataFrame (columns: {list(df.columns)})")
        feats = df[list(edge_feat_cols)].to_numpy(dtype=np.float32) if edge_feat_cols else None
        return cls(df[src].to_numpy(), df[dst].to_numpy(), df[time].to_numpy(), num_nodes,
                   feats, node_feat, directed)

    @classmethod
    def from_dgl(
        cls,
        g: Any,
        time_field: str = "ts",
        edge_feat_field: Optional[str] = None,
        node_feat_field: Optional[str] = None,
        directed: bool = False,
    ) -> "TemporalGraph":
        """Build from a homogeneous DGLGraph whose ``edata[time_field]`` holds edge times.

        Edge ``i`` of the result is edge ``i`` of ``g``.
        """
        if len(g.ntypes) != 1 or len(g.etypes) != 1:
            raise ValueError("from_dgl needs a homogeneous graph (one node and one edge type)")
        if time_field not in g.edata:
            raise KeyError(f"the graph has no edge field {time_field!r} with edge times "
                           f"(edge fields: {list(g.edata.keys())})")
        u, v = g.edges(order="eid")
        ef = g.edata[edge_feat_field] if edge_feat_field else None
        nf = g.ndata[node_feat_field] if node_feat_field else None
        return cls(u, v, g.edata[time_field], g.num_nodes(), ef, nf, directed)

    def compact_ids(self, raw: Any) -> np.ndarray:
        """Map raw node ids to this graph's ids (identity unless built with ``relabel``).

        Parameters
        ----------
        raw : array-like of int
            Raw ids, each of a node of the graph.

        Returns
        -------
        numpy.ndarray
            int64 ids in ``[0, num_nodes)``.
        """
        raw_a = index_array(raw, "raw")
        if self.node_ids is None:
            return index_array(raw_a, "raw", upper=self.num_nodes)
        pos = np.searchsorted(self.node_ids, raw_a)
        if len(self.node_ids):
            found = self.node_ids[np.minimum(pos, len(self.node_ids) - 1)]
            bad = (pos >= len(self.node_ids)) | (found != raw_a)
        else:
            bad = np.ones(len(raw_a), bool)
        if bad.any():
            i = int(np.argmax(bad))
            raise KeyError(f"raw[{i}] = {raw_a[i]} is not a node of this graph")
        return pos.astype(np.int64)

    # ------------------------------------------------------------------ streaming
    @renamed_kwargs(FEAT_RENAMES)
    def add_edges(self, src: Any, dst: Any, ts: Any, edge_feat: Any = None) -> None:
        """Append interactions in place, as edges ``num_edges, num_edges + 1, ...``.

        Existing samplers see them on their next ``sample()``, which then gives exactly
        what a graph built from all the interactions at once gives.  Amortized cost
        O(rows), whatever the graph's size (design: :mod:`tbdfs_dgl.streaming`).

        Parameters
        ----------
        src, dst : int or array-like of int
            Endpoints (raw ids if the graph was built with ``relabel=True``, where new raw
            ids must be larger than every known one).  Ids ``>= num_nodes`` add nodes
            (with zero ``node_feat`` rows).
        ts : int, float or array-like
            Times, each ``>=`` the graph's latest time (in any order among themselves).
        edge_feat : tensor or array ``[n, d_e]``, optional
            Features of the new interactions; required exactly when the graph has
            ``edge_feat``.

        Raises
        ------
        ValueError
            For a time earlier than the graph's latest (naming the first such row) or any
            other bad row; the graph is then unchanged.
        """
        streaming.add_edges(self, src, dst, ts, edge_feat)

    # ------------------------------------------------------------------ properties
    @property
    def edge_feat(self) -> Optional[torch.Tensor]:
        """float32 ``[num_edges, d_e]`` edge features (or ``None``); checked when set."""
        return self._edge_feat

    @edge_feat.setter
    def edge_feat(self, value: Any) -> None:
        # Checked on every assignment: a table with too few rows would otherwise surface as
        # an IndexError deep inside a model.
        self._edge_feat = feature_tensor(value, "edge_feat", self._csr.num_edges)

    @property
    def node_feat(self) -> Optional[torch.Tensor]:
        """float32 ``[num_nodes, d_n]`` node features (or ``None``); checked when set."""
        return self._node_feat

    @node_feat.setter
    def node_feat(self, value: Any) -> None:
        self._node_feat = feature_tensor(value, "node_feat", self._csr.num_nodes)

    @property
    def num_nodes(self) -> int:
        """Number of nodes."""
        return self._csr.num_nodes

    @property
    def num_edges(self) -> int:
        """Number of interactions."""
        return self._csr.num_edges

    @property
    def directed(self) -> bool:
        """Whether only in-edges are seen (see the constructor)."""
        return self._csr.directed

    @property
    def csr(self) -> "_C.TCSR":
        """The C++ CSR (for the sampler)."""
        return self._csr

    @property
    def nbytes(self) -> int:
        """Bytes held: the CSR's arrays plus feature tensors."""
        n = self._csr.nbytes
        for t in (self.edge_feat, self.node_feat):
            if t is not None:
                n += t.element_size() * t.nelement()
        return n

    def edges(self) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Return ``(src, dst, ts)`` in input-row order (int64, int64, float64)."""
        if self._input_edges is None:
            self._input_edges = tuple(self._csr.input_edges())
            for a in self._input_edges:
                a.flags.writeable = False
        return self._input_edges

    @property
    def time_range(self) -> Tuple[float, float]:
        """Earliest and latest interaction time (``nan`` for an empty graph)."""
        ts = self.edges()[2]
        return (float(ts.min()), float(ts.max())) if len(ts) else (float("nan"), float("nan"))

    def to_dgl(self) -> Any:
        """Return a DGLGraph with the same edges (in input order).

        ``edata['ts']`` holds the times (float64), ``edata['feat']``/``ndata['feat']`` the
        features when present.  An undirected temporal graph is returned with its input
        directions; use ``dgl.to_bidirected`` style conversions if you need both.
        """
        from ._dgl import require_dgl

        dgl = require_dgl("TemporalGraph.to_dgl")

        src, dst, ts = self.edges()
        g = dgl.graph((torch.from_numpy(src.copy()), torch.from_numpy(dst.copy())),
                      num_nodes=self.num_nodes)
        g.edata["ts"] = torch.from_numpy(ts.copy())
        if self.edge_feat is not None:
            g.edata["feat"] = self.edge_feat
        if self.node_feat is not None:
            g.ndata["feat"] = self.node_feat
        return g

    # ------------------------------------------------------------------ files
    def save(self, path: str) -> None:
        """Write the graph to the directory ``path`` (.npy arrays and a JSON header).

        ``path`` is created, or replaced if it holds a saved graph.  Format:
        :mod:`tbdfs_dgl.graph_io`.
        """
        graph_io.save_graph(self, path)

    @classmethod
    def load(cls, path: str, mmap: bool = True, verify: bool = False) -> "TemporalGraph":
        """Read a graph written by :meth:`save`.

        Parameters
        ----------
        path : str
            The directory.
        mmap : bool
            Map the CSR's files read-only (default): processes loading the same files share
            one copy through the page cache (the ranks of a distributed run).  Appending to a
            mapped graph first copies it into the process's own memory.  ``False``: read
            into the process's memory.
        verify : bool
            Also compare every file's CRC-32 with the header (reads every byte).  The lists
            are checked structurally either way.

        Raises
        ------
        ValueError
            For a directory without a header, another format or version, and missing,
            truncated or mismatched files (naming the file).
        """
        return graph_io.load_graph(cls, path, mmap=mmap, verify=verify)

    @property
    def is_mapped(self) -> bool:
        """Whether the CSR reads files mapped by :meth:`load` (shared, read-only)."""
        return self._csr.mapped

    # ------------------------------------------------------------------ pickling
    def __getstate__(self) -> Dict[str, Any]:
        # Pickled as the CSR's own arrays, so workers and ranks skip the rebuild.
        arrays = {k: np.asarray(v) for k, v in self._csr.arrays().items()}
        return {
            "num_nodes": self.num_nodes,
            "num_edges": self.num_edges,
            "directed": self.directed,
            "arrays": arrays,
            "edge_feat": streaming.trimmed(self.edge_feat),  # not a grown table's spare rows
            "node_feat": streaming.trimmed(self.node_feat),
            "node_ids": self.node_ids,
        }

    def __setstate__(self, state: Dict[str, Any]) -> None:
        # from_arrays checks every CSR invariant (a crafted pickle gives a ValueError).
        csr = _C.TCSR.from_arrays(state["num_nodes"], state["num_edges"], state["directed"],
                                  **state["arrays"])
        # Pickles of release 0.1 name the features *_feats.
        feats = [state[k] if k in state else state[k + "s"] for k in ("edge_feat", "node_feat")]
        self._init(csr, *feats, state.get("node_ids"))

    def __repr__(self) -> str:
        kind = "directed" if self.directed else "undirected"
        ef = 0 if self.edge_feat is None else self.edge_feat.shape[1]
        nf = 0 if self.node_feat is None else self.node_feat.shape[1]
        return (f"TemporalGraph(num_nodes={self.num_nodes}, num_edges={self.num_edges}, {kind}, "
                f"edge_feat_dim={ef}, node_feat_dim={nf})")
