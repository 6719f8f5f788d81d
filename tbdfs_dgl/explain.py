r"""Path-level explanations of tBDFS embeddings and link scores.

The DFS branch already says why: :math:`h^{DFS}_i = W_O \Vert_m \sum_p \beta^{(m)}_p r_p`
attends over root :math:`i`'s sampled temporal paths, so the weights :math:`\beta_p`
(averaged over the heads) rank the paths by how much of :math:`h^{DFS}` each one makes, and
the blend :math:`h = \alpha h^{BFS} + (1 - \alpha) h^{DFS}` says how much of the embedding
the paths make at all.  Torch only: no DGL.
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Tuple, Type, Union

import numpy as np
import torch

if TYPE_CHECKING:
    from .batch import TemporalBatch

__all__ = ["AlphaRecorder", "PathAttention", "explain", "root_paths"]


@dataclass
class PathAttention:
    """What :meth:`TBDFSModel.forward(..., get_attention=True)
    <tbdfs_dgl.TBDFSModel.forward>` made the embeddings of.

    Attributes
    ----------
    weight : torch.Tensor or None
        ``[B, P, H]`` weights of the path aggregator (``H = 1`` for ``paths_agg='mean'``);
        per head they sum to 1 over a root's paths.  ``None`` without a DFS branch.
    mask : torch.Tensor or None
        bool ``[B, P]``: the slot holds a root-to-leaf chain.
    alpha : float or torch.Tensor
        The BFS weight: the model's constant, or the learned gate's ``[B, 1]`` values.
    h_bfs, h_dfs : torch.Tensor
        ``[B, hidden_dim]`` branch embeddings (``h_dfs`` is ``h_bfs`` for roots without
        a path, as the blend uses it).
    """

    weight: Optional[torch.Tensor]
    mask: Optional[torch.Tensor]
    alpha: Union[float, torch.Tensor]
    h_bfs: torch.Tensor
    h_dfs: torch.Tensor

    @classmethod
    def bfs_only(cls, h_bfs: torch.Tensor) -> "PathAttention":
        """The attention of a model without a DFS branch (``alpha = 1``)."""
        return cls(None, None, 1.0, h_bfs, h_bfs)


def root_paths(batch: "TemporalBatch", root: int, slots: List[int]) -> List[Dict[str, list]]:
    """Read path slots of one root (slots holding a chain) from the batch's layer tables.

    Slot ``p``'s child choice at hop ``h`` is digit ``h`` of ``p`` in the mixed radix of
    the tables' widths, hop 0 most significant (the layout of ``batch.paths`` and of the
    path encoder); a chain that ends early stops where its child is missing.

    Returns
    -------
    list of dict
        Per slot: ``nodes`` (the root first), ``eids`` (input rows of the interactions
        along the path) and ``ts`` (their times), from the root outwards.
    """
    tables = list(batch.layers)[::-1]  # hop order
    widths = [t.fanout for t in tables]
    out = []
    for p in slots:
        digits, rest = [], p
        for k in reversed(widths):
            digits.append(rest % k)
            rest //= k
        digits.reverse()
        nodes, eids, ts = [int(batch.root_nodes[root])], [], []
        pos = root
        for table, d in zip(tables, digits):
            if not bool(table.mask[pos, d]):
                break
            child = int(table.nbr[pos, d])
            nodes.append(int(table.src_nodes[child]))
            eids.append(int(table.eid[pos, d]))
            ts.append(float(table.src_ts[child]))
            pos = child
        out.append({"nodes": nodes, "eids": eids, "ts": ts})
    return out


def _raw_id(node_ids: Any, node: int) -> Any:
    """Node ``node``'s raw id: an int for integer ids (NumPy's too), else as given (e.g. a
    name), so the result stays JSON-ready."""
    raw = node_ids[node]
    if isinstance(raw, np.generic):
        raw = raw.item()
    return int(raw) if isinstance(raw, numbers.Integral) else raw


def _explain_root(att: PathAttention, batch: "TemporalBatch", root: int, top_k: int,
                  node_ids: Optional[Any]) -> Dict[str, Any]:
    alpha = att.alpha if isinstance(att.alpha, float) else float(att.alpha[root])
    bfs = alpha * float(att.h_bfs[root].norm())
    dfs = (1.0 - alpha) * float(att.h_dfs[root].norm())
    paths: List[Dict[str, Any]] = []
    total = 0.0
    if att.weight is not None and bool(att.mask[root].any()):
        w = att.weight[root].float().mean(dim=-1) * att.mask[root]  # [P], heads averaged
        total = float(w.sum())
        k = min(top_k, int(att.mask[root].sum()))
        top = torch.topk(w, k)
        for path, weight in zip(root_paths(batch, root, top.indices.tolist()), top.values):
            if node_ids is not None:
                path["nodes"] = [_raw_id(node_ids, n) for n in path["nodes"]]
            path["weight"] = float(weight)
            paths.append(path)
    return {
        "root": int(batch.root_nodes[root]) if node_ids is None
        else _raw_id(node_ids, int(batch.root_nodes[root])),
        "time": float(batch.root_times[root]),
        "paths": paths,
        "num_paths": 0 if att.mask is None else int(att.mask[root].sum()),
        "weight_total": total,
        "alpha": alpha,
        # Shares of the embedding's two terms, by norm: |a h_BFS| and |(1 - a) h_DFS|.
        "bfs_share": bfs / (bfs + dfs) if bfs + dfs > 0 else 1.0,
        "dfs_share": dfs / (bfs + dfs) if bfs + dfs > 0 else 0.0,
    }


@torch.no_grad()
def explain(model: torch.nn.Module, batch: "TemporalBatch", node_feat: Optional[torch.Tensor] = None,
            edge_feat: Optional[torch.Tensor] = None, root: Union[int, Tuple[int, int]] = 0,
            top_k: int = 5, node_ids: Optional[Any] = None) -> Dict[str, Any]:
    """Explain the embedding of one root of ``batch`` (or the score of a link).

    The model runs once in eval mode (no dropout), asked for its attention.

    Parameters
    ----------
    model : TBDFSModel
        The model.
    batch : TemporalBatch
        A sampled batch (``batch.paths`` not needed: paths are read from the tables).
    node_feat, edge_feat : torch.Tensor, optional
        The features the model takes.
    root : int or (int, int)
        Position of the root in the batch; a pair ``(i, j)`` explains the link from root
        ``i`` to root ``j`` (both at their own times).
    top_k : int
        Paths to return per root.
    node_ids : array-like, optional
        Raw id of every node (``TemporalGraph.node_ids`` of a relabelled graph, or names):
        nodes are reported with them (integers as Python ints, anything else as given).

    Returns
    -------
    dict
        For one root: ``root`` (node id), ``time``, ``paths`` (up to ``top_k``, heaviest
        first, each ``{nodes, eids, ts, weight}``: nodes from the root outwards, the
        interactions' input rows and times, the aggregator's weight averaged over heads),
        ``num_paths`` and ``weight_total`` (the weights of all its paths sum to this, 1
        when it has any), ``alpha`` (the BFS weight, the gate's value with
        ``alpha='learn'``), ``bfs_share`` and ``dfs_share`` (norms of
        :math:`\\alpha h^{BFS}` and :math:`(1-\\alpha) h^{DFS}` over their sum).  For a
        link: ``{"src": ..., "dst": ..., "score": logit, "probability": ...}``.
    """
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
        raise ValueError(f"top_k must be an int >= 1, got {top_k!r}")
    pair = isinstance(root, (tuple, list))
    roots = [int(r) for r in root] if pair else [int(root)]
    if pair and len(roots) != 2:
        raise ValueError(f"a link is explained from a pair of roots (i, j), got {root!r}")
    for r in roots:
        if not 0 <= r < batch.num_roots:
            raise IndexError(f"root {r} is not a root of the batch ({batch.num_roots} roots)")
    if node_ids is not None:
        top = max(int(t.src_nodes.max()) for t in batch.layers if t.src_nodes.numel())
        if len(node_ids) <= top:
            raise ValueError(f"node_ids has {len(node_ids)} entries, but the batch refers to "
                             f"node {top}: pass one raw id per node of the graph")
    was_training = model.training
    model.eval()
    try:
        h, att = model(batch, node_feat, edge_feat, get_attention=True)
    finally:
        model.train(was_training)
    parts = [_explain_root(att, batch, r, top_k, node_ids) for r in roots]
    if not pair:
        return parts[0]
    logit = float(model.score(h[roots[0]][None], h[roots[1]][None])[0])
    return {"src": parts[0], "dst": parts[1], "score": logit,
            "probability": float(torch.sigmoid(torch.tensor(logit)))}


class AlphaRecorder:
    """The learned gate's :math:`\\alpha` (``TBDFSModel(alpha='learn')``) over every root
    the model embeds while the recorder is entered.

    A forward hook on ``model.gate`` (no change to the computation) adds the BFS weight of
    each root *with a temporal path* to a histogram of :attr:`BINS` bins over [0, 1], with
    the values' sum and sum of squares.  A root without a path is left out: its blend is
    :math:`h^{BFS}` whatever :math:`\\alpha` (the model sets :math:`h^{DFS} = h^{BFS}`
    there, which is how the hook tells it).  Histograms add, so the ranks of a distributed
    run can pool theirs (``summary(reduce=...)``).

    Parameters
    ----------
    model : torch.nn.Module
        A model with a learned gate (a ``gate`` submodule taking
        :math:`[h^{BFS} \\Vert h^{DFS}]`), on any device.

    Examples
    --------
    >>> with AlphaRecorder(model) as rec:           # doctest: +SKIP
    ...     model(batch)
    >>> rec.summary()["mean"]                        # doctest: +SKIP
    """

    #: Histogram bins over [0, 1]: quantiles are read to within 1 / BINS.
    BINS = 1000

    def __init__(self, model: torch.nn.Module) -> None:
        gate = getattr(model, "gate", None)
        if not isinstance(gate, torch.nn.Module):
            raise ValueError("AlphaRecorder needs a model with a learned gate "
                             "(TBDFSModel(alpha='learn')); this one has a fixed alpha")
        self._gate = gate
        self._handle: Any = None
        self._hist: Optional[torch.Tensor] = None  # float64 counts, on the model's device
        self._moments: Optional[torch.Tensor] = None  # [roots, with path, sum, sum of squares]

    def __enter__(self) -> "AlphaRecorder":
        if self._handle is not None:
            raise RuntimeError("this AlphaRecorder is already recording")
        self._handle = self._gate.register_forward_hook(self._record)
        return self

    def __exit__(self, kind: Optional[Type[BaseException]], value: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        self._handle.remove()
        self._handle = None

    def _record(self, module: torch.nn.Module, inputs: Tuple[torch.Tensor, ...],
                output: torch.Tensor) -> None:
        x = inputs[0].detach()
        d = x.shape[-1] // 2
        with_path = (x[:, :d] != x[:, d:]).any(dim=-1)
        a = torch.sigmoid(output.detach().double().reshape(-1))
        # Roots without a path go to -1, which the histogram's range leaves out: no
        # boolean indexing, so no wait for the device in the middle of an evaluation.
        hist = torch.histc(torch.where(with_path, a, -1.0), bins=self.BINS, min=0.0, max=1.0)
        a = a * with_path
        moments = torch.stack([a.new_full((), float(a.numel())), with_path.sum().double(),
                               a.sum(), (a * a).sum()])
        # Kept on the model's device and added there: no host copy per batch.
        self._hist = hist if self._hist is None else self._hist + hist
        self._moments = moments if self._moments is None else self._moments + moments

    def summary(self, reduce: Optional[Callable[[np.ndarray], np.ndarray]] = None
                ) -> Dict[str, float]:
        """What was recorded.

        Parameters
        ----------
        reduce : callable, optional
            Sums a float64 array over processes (e.g. the ranks of a distributed run); the
            histogram and moments go through it before the figures are read.

        Returns
        -------
        dict
            ``roots`` (embedded), ``roots_with_path`` (those the figures are over),
            ``mean`` and ``std`` of :math:`\\alpha`, and its quantiles ``p10``, ``p50``,
            ``p90`` (to within ``1 / BINS``; NaN where no root had a path).
        """
        hist = (np.zeros(self.BINS) if self._hist is None
                else self._hist.cpu().numpy().astype(np.float64))
        moments = np.zeros(4) if self._moments is None else self._moments.cpu().numpy()
        pooled = np.concatenate([hist, moments])
        if reduce is not None:
            pooled = np.asarray(reduce(pooled), dtype=np.float64)
        hist, (roots, n, total, squares) = pooled[:self.BINS], pooled[self.BINS:]
        out = {"roots": int(roots), "roots_with_path": int(n)}
        if n == 0:
            return {**out, **{k: float("nan") for k in ("mean", "std", "p10", "p50", "p90")}}
        mean = total / n
        out["mean"] = float(mean)
        out["std"] = float(np.sqrt(max(squares / n - mean * mean, 0.0)))
        cum = np.cumsum(hist)
        for q in (10, 50, 90):
            # The upper edge of the bin where the q-th percentile falls.
            out[f"p{q}"] = float((np.searchsorted(cum, q / 100 * n) + 1) / self.BINS)
        return out
