"""The in-memory form every reader and generator returns: :class:`TemporalDataset`."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

import numpy as np

from .._deprecation import deprecated_alias
from .._validate import feature_array, index_array, time_values

if TYPE_CHECKING:  # for the annotation only: the graph module imports the C++ extension
    from ..graph import TemporalGraph

__all__ = ["TemporalDataset", "sort_by_time"]


def sort_by_time(ts: np.ndarray) -> Optional[np.ndarray]:
    """Return the stable permutation that orders ``ts``, or ``None`` if already ordered.

    Stability matters: interactions that share a timestamp (common in e-mail and rating
    data) keep their file order, so loading the same file twice gives the same edge ids.
    """
    if ts.size < 2 or bool(np.all(ts[1:] >= ts[:-1])):
        return None
    return np.argsort(ts, kind="stable")


@dataclass(eq=False, repr=False, kw_only=True)
class TemporalDataset:
    """A continuous-time dynamic graph: interactions ``(src, dst, ts)`` in time order.

    Construct it with keywords; the constructor checks every invariant below and coerces
    dtypes (ids to int64, features to float32), so a dataset that exists is well formed.

    Parameters
    ----------
    name : str
        Short name, e.g. ``"wikipedia"``.
    src, dst : numpy.ndarray
        int64 ``[E]`` endpoints of each interaction, in ``[0, num_nodes)``.
    ts : numpy.ndarray
        ``[E]`` interaction times, non-decreasing and finite: int64 when the source wrote
        integer times, float64 otherwise (float32 is refused: it cannot resolve Unix seconds).
    num_nodes : int
        Number of nodes ``N``; ids not used by any edge are isolated nodes.
    edge_feat : numpy.ndarray, optional
        float32 ``[E, d_e]`` features of each interaction.
    node_feat : numpy.ndarray, optional
        float32 ``[N, d_n]`` static node features.
    labels : numpy.ndarray, optional
        ``[E]`` per-interaction labels (e.g. the JODIE state label of the source).
    bipartite : bool
        Whether every edge goes from a source-side node to a destination-side node.
    num_src_nodes : int, optional
        For bipartite data, sources are ids ``[0, num_src_nodes)`` and destinations
        ``[num_src_nodes, num_nodes)``.  Required when ``bipartite``, ``None`` otherwise.
    synthetic : bool
        ``True`` for generated data (never mistake it for a real benchmark).
    source : str
        The file the data came from, or a description of how it was generated.
    original_ids : numpy.ndarray, optional
        ``[N]`` id (or name) each node had in the source file, when ids were relabelled.
        For bipartite data each side keeps its own id space, so an id may repeat.

    Raises
    ------
    ValueError
        If any array has the wrong shape, an id is outside ``[0, num_nodes)``, a time is
        NaN/infinite or times are not sorted.
    tbdfs_dgl.DtypeError
        If an array has the wrong dtype (float ids, float32 times, text features): the
        checks :class:`~tbdfs_dgl.TemporalGraph` makes too.  It is both a ``TypeError``
        and a ``ValueError``, so ``except ValueError`` still catches it.
    """

    name: str
    src: np.ndarray
    dst: np.ndarray
    ts: np.ndarray
    num_nodes: int
    edge_feat: Optional[np.ndarray] = None
    node_feat: Optional[np.ndarray] = None
    labels: Optional[np.ndarray] = None
    bipartite: bool = False
    num_src_nodes: Optional[int] = None
    synthetic: bool = False
    source: str = ""
    original_ids: Optional[np.ndarray] = None

    def __post_init__(self) -> None:
        if isinstance(self.num_nodes, bool) or int(self.num_nodes) != self.num_nodes \
                or self.num_nodes < 0:
            raise ValueError(f"num_nodes must be a non-negative integer, got {self.num_nodes!r}")
        self.num_nodes = N = int(self.num_nodes)
        self.src = index_array(self.src, "src", upper=N, upper_name="num_nodes")
        self.dst = index_array(self.dst, "dst", upper=N, upper_name="num_nodes")
        ts = time_values(self.ts, "ts")
        # integer times stay integers: Unix seconds exactly as the source wrote them
        self.ts = np.ascontiguousarray(ts, dtype=np.int64) if ts.dtype.kind in "iu" else ts
        E = self.src.shape[0]
        if self.dst.shape[0] != E or self.ts.shape[0] != E:
            raise ValueError(f"src, dst and ts must have equal length, got {E}, "
                             f"{self.dst.shape[0]} and {self.ts.shape[0]}")
        if E > 1:
            down = np.flatnonzero(self.ts[1:] < self.ts[:-1])
            if down.size:
                i = int(down[0])
                raise ValueError(f"ts must be sorted: ts[{i}] = {self.ts[i]} > ts[{i + 1}] = "
                                 f"{self.ts[i + 1]} (sort rows stably with sort_by_time)")
        self.edge_feat = feature_array(self.edge_feat, "edge_feat", E)
        self.node_feat = feature_array(self.node_feat, "node_feat", N)
        if self.labels is not None:
            self.labels = np.asarray(self.labels)
            if self.labels.shape != (E,):
                raise ValueError(f"labels must have shape [E={E}], got {self.labels.shape}")
        if self.original_ids is not None:
            self.original_ids = np.asarray(self.original_ids)
            if self.original_ids.shape != (N,):
                raise ValueError(f"original_ids must have shape [num_nodes={N}], "
                                 f"got {self.original_ids.shape}")
        self.bipartite = bool(self.bipartite)
        if self.bipartite:
            U = self.num_src_nodes
            if U is None or int(U) != U or not 0 <= U <= N:
                raise ValueError(f"bipartite data needs num_src_nodes in [0, {N}], got {U!r}")
            self.num_src_nodes = U = int(U)
            if E and self.src.max() >= U:
                bad = int(np.flatnonzero(self.src >= U)[0])
                raise ValueError(f"bipartite: src[{bad}] = {int(self.src[bad])} is not a source "
                                 f"id (sources are [0, {U}))")
            if E and self.dst.min() < U:
                bad = int(np.flatnonzero(self.dst < U)[0])
                raise ValueError(f"bipartite: dst[{bad}] = {int(self.dst[bad])} is not a "
                                 f"destination id (destinations are [{U}, {N}))")
        elif self.num_src_nodes is not None:
            raise ValueError("num_src_nodes is only meaningful for bipartite data")
        object.__setattr__(self, "_checked", True)

    def __setattr__(self, name: str, value: Any) -> None:
        # Feature tables swapped in after construction are checked like the constructor's,
        # so a table with too few rows fails here, by name, not as an IndexError in a model.
        if self.__dict__.get("_checked"):
            if name == "edge_feat":
                value = feature_array(value, "edge_feat", int(self.src.shape[0]))
            elif name == "node_feat":
                value = feature_array(value, "node_feat", int(self.num_nodes))
        object.__setattr__(self, name, value)

    # ------------------------------------------------------------------ sizes
    @property
    def num_edges(self) -> int:
        """Number of interactions ``E``."""
        return int(self.src.shape[0])

    @property
    def num_dst_nodes(self) -> Optional[int]:
        """Destination-side node count of bipartite data, ``None`` otherwise."""
        return self.num_nodes - self.num_src_nodes if self.bipartite else None

    @property
    def edge_dim(self) -> int:
        """Edge feature width ``d_e`` (0 without edge features): ``TBDFSModel(edge_dim=)``."""
        return 0 if self.edge_feat is None else int(self.edge_feat.shape[1])

    @property
    def node_dim(self) -> int:
        """Node feature width ``d_n`` (0 without node features): ``TBDFSModel(node_dim=)``."""
        return 0 if self.node_feat is None else int(self.node_feat.shape[1])

    #: Deprecated names of the widths (release 0.1), forwarding with a warning.
    edge_feat_dim = deprecated_alias("edge_dim")
    node_feat_dim = deprecated_alias("node_dim")

    # ------------------------------------------------------------------ conversions
    def to_graph(self, directed: bool = False) -> "TemporalGraph":
        """Build the sampler's :class:`tbdfs_dgl.TemporalGraph` over these interactions.

        Parameters
        ----------
        directed : bool
            If ``False`` (the usual choice for temporal GNNs) each interaction is visible
            from both endpoints.

        Returns
        -------
        tbdfs_dgl.TemporalGraph
            Edge ids of the graph are the row indices of this dataset.
        """
        # Imported here so that reading data needs neither torch nor the compiled sampler.
        from ..graph import TemporalGraph

        return TemporalGraph(self.src, self.dst, self.ts, num_nodes=self.num_nodes,
                             edge_feat=self.edge_feat, node_feat=self.node_feat,
                             directed=directed)

    def summary(self) -> str:
        """Return a short multi-line human-readable description."""
        lines = [f"{self.name}{' (synthetic)' if self.synthetic else ''}: "
                 f"{self.num_nodes:,} nodes, {self.num_edges:,} interactions"]
        if self.bipartite:
            lines.append(f"  bipartite: {self.num_src_nodes:,} sources + "
                         f"{self.num_dst_nodes:,} destinations")
        if self.num_edges:
            t0, t1 = self.ts[0], self.ts[-1]
            span = float(t1) - float(t0)
            lines.append(f"  time: {t0} .. {t1} ({self.ts.dtype}, span {span:,.6g} = "
                         f"{span / 86400:,.1f} days if seconds), "
                         f"{np.unique(self.ts).size:,} distinct")
            active = np.unique(np.concatenate([self.src, self.dst])).size
            lines.append(f"  active nodes: {active:,}; self-loops: "
                         f"{int(np.count_nonzero(self.src == self.dst)):,}")
        lines.append(f"  edge features: {self.edge_dim}, node features: "
                     f"{self.node_dim}")
        if self.labels is not None:
            vals, counts = np.unique(self.labels, return_counts=True)
            shown = ", ".join(f"{v}: {c:,}" for v, c in list(zip(vals, counts))[:6])
            lines.append(f"  labels: {shown}{' ...' if vals.size > 6 else ''}")
        if self.source:
            lines.append(f"  source: {self.source}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        parts = [f"name={self.name!r}", f"num_nodes={self.num_nodes}",
                 f"num_edges={self.num_edges}", f"bipartite={self.bipartite}"]
        if self.bipartite:
            parts.append(f"num_src_nodes={self.num_src_nodes}")
        parts += [f"edge_feat_dim={self.edge_dim}", f"node_feat_dim={self.node_dim}",
                  f"labels={self.labels is not None}"]
        if self.synthetic:
            parts.append("synthetic=True")
        return f"TemporalDataset({', '.join(parts)})"
