"""A temporal edge sampler for ``dgl.dataloading.DataLoader``.

``dgl.dataloading.as_edge_prediction_sampler`` turns a node sampler into an edge sampler,
but its seed nodes are bare node ids: the time of each seed edge is lost, so a node sampler
behind it cannot restrict a neighbourhood to the interactions before that edge.
:class:`TemporalEdgeSampler` keeps DGL's contract and carries the times: every seed edge
``(u, v, t)`` becomes the two *instances* ``u@t`` and ``v@t`` (node, query time), whose
neighbourhoods :class:`~tbdfs_dgl.TemporalSampler` samples strictly before ``t`` (its
``time_rule``).  The seed edge itself is therefore never among its own neighbours, and
DGL's ``exclude`` option is not needed.

Example
-------
>>> import dgl, torch
>>> from tbdfs_dgl import TemporalGraph, TemporalSampler
>>> from tbdfs_dgl.dataloading import TemporalEdgeSampler
>>> tg = TemporalGraph(src, dst, ts)                      # doctest: +SKIP
>>> edge_sampler = TemporalEdgeSampler(TemporalSampler(tg, [10, 10], seed=0), negatives=1)
>>> loader = dgl.dataloading.DataLoader(tg.to_dgl(), torch.arange(tg.num_edges),
...                                     edge_sampler, batch_size=200, num_workers=2)
>>> for input_nodes, pair_graph, neg_graph, blocks in loader:   # doctest: +SKIP
...     ...  # pair_graph.ndata['ts'] / blocks[-1].dstdata['ts']: the instances' times

Needs DGL: importing this module without it raises an ImportError that says so.
"""
from __future__ import annotations

import hashlib
from typing import Any, Callable, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch

from ._dgl import require_dgl
from .batch import TemporalBatch
from .sampler import TemporalSampler

dgl = require_dgl("tbdfs_dgl.dataloading (TemporalEdgeSampler for dgl.dataloading.DataLoader)")
from dgl.dataloading import Sampler  # noqa: E402 - after the check that DGL imports
from dgl.dataloading.base import set_edge_lazy_features, set_src_lazy_features  # noqa: E402

__all__ = ["TemporalEdgeSampler", "root_instances"]

Negatives = Union[None, int, Callable[[Any, torch.Tensor], Tuple[Any, Any]]]
OUTPUTS = ("blocks", "batch")


def root_instances(nodes: np.ndarray, times: np.ndarray) -> Tuple[np.ndarray, np.ndarray,
                                                                    np.ndarray]:
    """The distinct (node, time) instances among ``nodes``/``times``, in order of first
    appearance, and the position of every input among them.

    Returns
    -------
    root_nodes, root_times, index : numpy.ndarray
        int64 ``[R]``, float64 ``[R]`` and int64 ``[len(nodes)]`` with
        ``root_nodes[index] == nodes`` and ``root_times[index] == times``.
    """
    # +0.0 maps -0.0 to 0.0, so equal times have equal bits.
    bits = (np.asarray(times, dtype=np.float64) + 0.0).view(np.int64)
    pairs = np.stack([np.asarray(nodes, dtype=np.int64), bits], axis=1)
    if len(pairs) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.float64), np.zeros(0, np.int64)
    _, first, inverse = np.unique(pairs, axis=0, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")  # sorted -> first-appearance order
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    roots = first[order]
    return (pairs[roots, 0].copy(), np.asarray(times, dtype=np.float64)[roots] + 0.0,
            rank[inverse.ravel()])


class TemporalEdgeSampler(Sampler):
    """DGL edge sampler whose seeds are timestamped interactions.

    Use it as the ``graph_sampler`` of ``dgl.dataloading.DataLoader(g, eids, sampler, ...)``
    where ``g`` is ``sampler.graph.to_dgl()`` (or any graph whose edge ``i`` is the temporal
    graph's interaction ``i``) and ``eids`` are the interactions to iterate over.

    Parameters
    ----------
    sampler : TemporalSampler
        Samples the neighbourhoods (fanouts, strategy, time rule, seed).
    negatives : int or callable, optional
        ``k``: ``k`` negative destinations per seed edge, uniform among the temporal
        graph's destination nodes, drawn from the batch's stream (deterministic).  A
        callable follows DGL's negative-sampler contract ``(g, eids) -> (src, dst)`` with
        ``k * len(eids)`` pairs, pair ``j`` belonging to seed edge ``j // k`` (what
        ``dgl.dataloading.negative_sampler.Uniform`` returns); its randomness is its own.
        Every negative pair is scored at the time of its seed edge.
    output : {'blocks', 'batch'}
        Last element of each mini-batch: the DGL blocks (DGL's contract), or the
        :class:`~tbdfs_dgl.TemporalBatch` (dense tables, what
        :class:`~tbdfs_dgl.TBDFSModel` reads; its ``blocks`` are built on access).
    paths : bool
        Also sample root-to-leaf paths (``output='batch'`` only; models that read them).
    prefetch_node_feats, prefetch_edge_feats : list of str, optional
        ``g.ndata``/``g.edata`` fields that the DataLoader copies into ``blocks[0].srcdata``
        and every block's ``edata`` (DGL's lazy features; ``output='blocks'`` only).

    Notes
    -----
    Each mini-batch returns ``(input_nodes, pair_graph, blocks)``, or ``(input_nodes,
    pair_graph, neg_graph, blocks)`` with negatives, like ``as_edge_prediction_sampler``,
    except that the nodes of ``pair_graph``/``neg_graph`` are instances: their
    ``ndata[dgl.NID]`` and ``ndata['ts']`` are node id and time, one node per distinct
    (node, time) pair, in order of first appearance among the seed sources, seed
    destinations, negative sources and negative destinations.  They are the destination
    nodes of ``blocks[-1]``, in the same order.  ``pair_graph.edata`` holds ``dgl.EID`` and
    ``'ts'``, ``neg_graph.edata`` holds ``'ts'``.

    Streams: a mini-batch draws from the stream :meth:`batch_stream` derives from the
    sampler's seed, the epoch (:meth:`set_epoch`) and the batch's edge ids, never from the
    worker that samples it: ``num_workers = 0`` and ``2`` give the same batches.  With
    ``persistent_workers=True`` the workers keep the epoch they were started with.
    """

    def __init__(self, sampler: TemporalSampler, negatives: Negatives = None,
                 output: str = "blocks", paths: bool = False,
                 prefetch_node_feats: Optional[Sequence[str]] = None,
                 prefetch_edge_feats: Optional[Sequence[str]] = None) -> None:
        super().__init__()
        if not isinstance(sampler, TemporalSampler):
            raise TypeError(f"sampler must be a TemporalSampler, got {type(sampler).__name__}")
        if output not in OUTPUTS:
            raise ValueError(f"output must be one of {OUTPUTS}, got {output!r}")
        if negatives is not None and not callable(negatives):
            if isinstance(negatives, bool) or not isinstance(negatives, (int, np.integer)) \
                    or negatives < 1:
                raise ValueError(f"negatives must be a positive int or a DGL negative sampler "
                                 f"(g, eids) -> (src, dst), got {negatives!r}")
            negatives = int(negatives)
        if output == "batch" and (prefetch_node_feats or prefetch_edge_feats):
            raise ValueError("prefetch_node_feats/prefetch_edge_feats fill DGL blocks: use "
                             "output='blocks'")
        if paths and output != "batch":
            raise ValueError("paths=True needs output='batch' (blocks do not carry paths)")
        self.sampler = sampler
        self.negatives = negatives
        self.output = output
        self.paths = bool(paths)
        self.prefetch_node_feats = list(prefetch_node_feats or [])
        self.prefetch_edge_feats = list(prefetch_edge_feats or [])
        self.epoch = 0
        self._candidates: Optional[np.ndarray] = None

    def set_epoch(self, epoch: int) -> None:
        """Use the streams of ``epoch`` (call it before iterating the DataLoader)."""
        if isinstance(epoch, bool) or not isinstance(epoch, (int, np.integer)) or epoch < 0:
            raise ValueError(f"epoch must be a non-negative int, got {epoch!r}")
        self.epoch = int(epoch)

    def batch_stream(self, eids: Any) -> int:
        """The random stream of the mini-batch of seed edges ``eids`` (order matters).

        It is the ``batch_id`` given to :meth:`TemporalSampler.sample`: a hash of the epoch
        and the edge ids, so it does not depend on the worker or on the batches before.
        """
        e = np.ascontiguousarray(_as_numpy(eids), dtype=np.int64)
        digest = hashlib.blake2b(np.int64(self.epoch).tobytes() + e.tobytes(), digest_size=8)
        return int.from_bytes(digest.digest(), "little") & ((1 << 62) - 1)

    def _negative_pairs(self, g: Any, eids: np.ndarray, src: np.ndarray,
                        stream: int) -> Tuple[np.ndarray, np.ndarray, int]:
        n = len(eids)
        if callable(self.negatives):
            neg_src, neg_dst = self.negatives(g, torch.from_numpy(eids))
            neg_src, neg_dst = _as_numpy(neg_src).astype(np.int64), _as_numpy(neg_dst).astype(
                np.int64)
            if len(neg_src) != len(neg_dst) or (n and len(neg_src) % n):
                raise ValueError(f"the negative sampler returned {len(neg_src)} sources and "
                                 f"{len(neg_dst)} destinations for {n} seed edges: expected "
                                 "k * len(eids) of each")
            return neg_src, neg_dst, (len(neg_src) // n if n else 0)
        k = self.negatives
        if self._candidates is None:
            self._candidates = np.unique(self.sampler.graph.edges()[1])
        # Its own generator, seeded like the neighbourhoods: deterministic per batch.
        rng = np.random.default_rng([self.sampler.seed, stream])
        neg_dst = self._candidates[rng.integers(0, len(self._candidates), n * k)]
        return np.repeat(src, k), neg_dst, k

    def sample(self, g: Any, indices: Any) -> tuple:
        """Sample the mini-batch of the seed edges ``indices`` (DGL's ``Sampler`` method).

        Parameters
        ----------
        g : DGLGraph or TemporalGraph
            The graph the DataLoader was given; its edge ids must be the temporal graph's.
        indices : torch.Tensor
            int64 ids of the seed interactions.

        Returns
        -------
        tuple
            ``(input_nodes, pair_graph, blocks)``, or ``(input_nodes, pair_graph,
            neg_graph, blocks)`` with negatives; ``blocks`` is a
            :class:`~tbdfs_dgl.TemporalBatch` with ``output='batch'``.
        """
        tg = self.sampler.graph
        num_edges = g.num_edges() if callable(getattr(g, "num_edges", None)) else \
            getattr(g, "num_edges", None)
        if num_edges != tg.num_edges:
            raise ValueError(f"the DataLoader's graph has {num_edges} edges, the sampler's "
                             f"temporal graph {tg.num_edges}: edge ids would not match")
        eids = _as_numpy(indices).astype(np.int64, copy=False).ravel()
        if len(eids) and (eids.min() < 0 or eids.max() >= tg.num_edges):
            raise IndexError(f"seed edge ids must be in [0, {tg.num_edges}), got "
                             f"[{eids.min()}, {eids.max()}]")
        src_all, dst_all, ts_all = tg.edges()
        src, dst, ts = src_all[eids], dst_all[eids], ts_all[eids]
        stream = self.batch_stream(eids)
        nodes, times = [src, dst], [ts, ts]
        if self.negatives is not None:
            neg_src, neg_dst, k = self._negative_pairs(g, eids, src, stream)
            neg_ts = np.repeat(ts, k)
            nodes += [neg_src, neg_dst]
            times += [neg_ts, neg_ts]
        root_nodes, root_times, index = root_instances(np.concatenate(nodes),
                                                       np.concatenate(times))
        batch = self.sampler.sample(root_nodes, root_times, batch_id=stream, paths=self.paths)
        n = len(eids)
        pair_graph = _instance_graph(index[:n], index[n:2 * n], batch, ts)
        pair_graph.edata[dgl.EID] = torch.from_numpy(eids.copy())
        graphs: List[Any] = [pair_graph]
        if self.negatives is not None:
            m = len(neg_src)
            graphs.append(_instance_graph(index[2 * n:2 * n + m], index[2 * n + m:], batch,
                                          neg_ts))
        if self.output == "batch":
            return (batch.layers[0].src_nodes, *graphs, batch)
        blocks = batch.blocks
        if self.prefetch_node_feats:
            set_src_lazy_features(blocks[0], self.prefetch_node_feats)
        if self.prefetch_edge_feats:
            for block in blocks:
                set_edge_lazy_features(block, self.prefetch_edge_feats)
        return (blocks[0].srcdata[dgl.NID], *graphs, blocks)

    def __repr__(self) -> str:
        return (f"TemporalEdgeSampler({self.sampler!r}, negatives={self.negatives!r}, "
                f"output={self.output!r})")


def _as_numpy(x: Any) -> np.ndarray:
    return x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)


def _instance_graph(u: np.ndarray, v: np.ndarray, batch: TemporalBatch,
                    edge_ts: np.ndarray) -> Any:
    """A graph over the batch's root instances with edges ``u[i] -> v[i]`` at ``edge_ts``."""
    g = dgl.graph((torch.from_numpy(u.copy()), torch.from_numpy(v.copy())),
                  num_nodes=batch.num_roots)
    g.ndata[dgl.NID] = batch.root_nodes
    g.ndata["ts"] = batch.root_times
    g.edata["ts"] = torch.from_numpy(np.ascontiguousarray(edge_ts, dtype=np.float64))
    return g
