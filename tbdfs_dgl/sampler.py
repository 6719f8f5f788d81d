"""`TemporalSampler`: one C++ call per batch gives dense layer tables, temporal paths and
(on demand) DGL blocks."""
from __future__ import annotations

import itertools
import os
import threading
from typing import Any, List, Optional, Sequence, Tuple

import numpy as np
import torch

from . import _C
from ._validate import index_array, time_array
from .batch import LayerTable, PathBatch, TemporalBatch
from .graph import TemporalGraph

__all__ = ["TemporalSampler"]

STRATEGIES = ("recent", "uniform")
TIME_RULES = ("strict", "inclusive")


def default_num_threads() -> int:
    """Cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


class TemporalSampler:
    r"""Time-respecting multi-layer neighbour sampler for a :class:`TemporalGraph`.

    A sampled *instance* is a (node, time) pair.  For every destination instance of a layer
    the source instances are the instance itself, then up to ``k`` neighbour instances: the
    neighbour at the time of the connecting edge.  The next layer's destinations are this
    layer's sources.

    Parameters
    ----------
    graph : TemporalGraph
        The graph to sample from.
    fanouts : sequence of int
        Neighbours per layer, in DGL's order: ``fanouts[-1]`` applies to the roots' own
        neighbours (``blocks[-1]``), ``fanouts[0]`` to the outermost layer.
    strategy : {'recent', 'uniform'}
        ``'recent'``: the ``k`` latest eligible edges (ties: larger edge id first).
        ``'uniform'``: ``k`` eligible edges uniformly at random (all when fewer).
    replace : bool
        Uniform sampling with replacement (always ``k`` edges when any is eligible).
    time_rule : {'strict', 'inclusive'}
        Eligible edges have ``t_e < t`` (strict, the paper's rule) or ``t_e <= t``.
    seed : int, optional
        Seed of the random streams.  Default: derived from ``torch.initial_seed()``, so
        ``torch.manual_seed`` makes runs repeatable.
    num_threads : int, optional
        Threads per call (default: the cores this process may use).  Results do not depend
        on it.

    Notes
    -----
    Each call draws from the stream of its batch: ``batch_id`` when given, otherwise the
    sampler's call counter.  The same seed and batch id give the same tree on any thread
    count and in any process, which is what DataLoader workers and DDP ranks need.
    """

    def __init__(
        self,
        graph: TemporalGraph,
        fanouts: Sequence[int],
        strategy: str = "recent",
        replace: bool = False,
        time_rule: str = "strict",
        seed: Optional[int] = None,
        num_threads: Optional[int] = None,
    ) -> None:
        if not isinstance(graph, TemporalGraph):
            raise TypeError(f"graph must be a TemporalGraph, got {type(graph).__name__}")
        fanouts = list(fanouts)
        if not fanouts:
            raise ValueError("fanouts must name at least one layer")
        for i, k in enumerate(fanouts):
            if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
                raise TypeError(f"fanouts[{i}] must be an int, got {k!r}")
            if k < 1:
                raise ValueError(f"fanouts[{i}] = {k} must be >= 1")
        if strategy not in STRATEGIES:
            raise ValueError(f"strategy must be one of {STRATEGIES}, got {strategy!r}")
        if time_rule not in TIME_RULES:
            raise ValueError(f"time_rule must be one of {TIME_RULES}, got {time_rule!r}")
        if replace and strategy != "uniform":
            raise ValueError("replace=True applies to strategy='uniform' only")
        if num_threads is None:
            num_threads = default_num_threads()
        if num_threads < 1:
            raise ValueError(f"num_threads must be >= 1, got {num_threads}")
        if seed is None:
            seed = torch.initial_seed()
        if not 0 <= int(seed) < 2**64:
            raise ValueError(f"seed must be in [0, 2**64), got {seed}")
        self.graph = graph
        self.fanouts = [int(k) for k in fanouts]
        self.strategy = strategy
        self.replace = bool(replace)
        self.time_rule = time_rule
        self.seed = int(seed)
        self.num_threads = int(num_threads)
        self._calls = itertools.count()
        self._lock = threading.Lock()

    @property
    def num_layers(self) -> int:
        """Number of sampled layers (blocks)."""
        return len(self.fanouts)

    @property
    def num_paths(self) -> int:
        """Path slots per root: the product of the fanouts."""
        return int(np.prod(self.fanouts))

    def _stream(self, batch_id: Optional[int]) -> int:
        # Explicit batch ids and the call counter use disjoint halves of the stream space.
        if batch_id is None:
            with self._lock:
                return 2 * next(self._calls)
        if int(batch_id) < 0:
            raise ValueError(f"batch_id must be >= 0, got {batch_id}")
        return 2 * int(batch_id) + 1

    def sample_arrays(
        self, nodes: Any, times: Any, batch_id: Optional[int] = None, paths: bool = True
    ) -> Tuple[List[tuple], Optional[tuple]]:
        """Sample and return the raw numpy arrays (no torch, no DGL).

        Returns
        -------
        hops : list of tuple
            One ``(num_dst, src_nodes, src_ts, indptr, eids, dt)`` per layer, from the roots
            outwards (so ``hops[h]`` becomes ``blocks[L - 1 - h]``).
        paths : tuple or None
            ``(nodes, eids, ts, mask, src_index)``, each ``[B, P, L]``.
        """
        hops, path_arrays, _ = self._run(*self._check_roots(nodes, times), batch_id, paths,
                                         False)
        return hops, path_arrays

    def _check_roots(self, nodes: Any, times: Any) -> Tuple[np.ndarray, np.ndarray]:
        nodes_a = index_array(nodes, "nodes", upper=self.graph.num_nodes)
        times_a = time_array(times, "times")
        if len(nodes_a) != len(times_a):
            raise ValueError(f"nodes and times must have the same length, got {len(nodes_a)} "
                             f"and {len(times_a)}")
        return nodes_a, times_a

    def _run(self, nodes: np.ndarray, times: np.ndarray, batch_id: Optional[int],
             paths: bool, tables: bool) -> Tuple[List[tuple], Optional[tuple], Optional[list]]:
        return _C.sample(self.graph.csr, nodes, times, self.fanouts, self.strategy == "recent",
                         self.replace, self.time_rule == "strict", self.seed,
                         self._stream(batch_id), self.num_threads, paths, tables)

    def sample(self, nodes: Any, times: Any, batch_id: Optional[int] = None,
               paths: bool = True) -> TemporalBatch:
        """Sample the L-layer tree of each (node, time) root.

        Parameters
        ----------
        nodes : array-like of int, shape ``[B]``
            Root node ids.
        times : array-like of int or float, shape ``[B]``
            Query time of each root: only edges before it (see ``time_rule``) are seen.
        batch_id : int, optional
            Picks the random stream (see Notes of the class).
        paths : bool, optional
            Also explode the tree into root-to-leaf paths (``batch.paths``).  The model
            reads the tree from the layer tables and does not need them.  Default: ``True``.

        Returns
        -------
        TemporalBatch
            Dense layer tables and paths of the same sampled tree; its DGL blocks are built
            from the tables on first access (``batch.blocks``).
        """
        nodes_a, times_a = self._check_roots(nodes, times)
        hops, path_arrays, tables = self._run(nodes_a, times_a, batch_id, paths, True)
        # No copies: every tensor is a view of an array the C++ call allocated.
        layers = [LayerTable(torch.from_numpy(hop[1]), torch.from_numpy(hop[2]),
                             *(torch.from_numpy(a) for a in table))
                  for hop, table in zip(reversed(hops), reversed(tables))]
        path_batch = (None if path_arrays is None
                      else PathBatch(*(torch.from_numpy(a) for a in path_arrays)))
        return TemporalBatch(torch.from_numpy(nodes_a), torch.from_numpy(times_a),
                             paths=path_batch, layers=layers)

    def __getstate__(self) -> dict:
        # Locks do not pickle; the call counter travels as a number.
        state = dict(self.__dict__)
        with self._lock:
            state["_calls"] = next(self._calls)
            self._calls = itertools.count(state["_calls"])
        del state["_lock"]
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._calls = itertools.count(state["_calls"])
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return (f"TemporalSampler(fanouts={self.fanouts}, strategy={self.strategy!r}, "
                f"replace={self.replace}, time_rule={self.time_rule!r}, seed={self.seed}, "
                f"num_threads={self.num_threads})")


_iota = torch.arange(1 << 16, dtype=torch.int64)
_iota_lock = threading.Lock()


def iota(begin: int, end: int) -> torch.Tensor:
    """``arange(begin, end)`` as a view of one shared, growing tensor.

    Blocks need two such ranges per layer.  Building them afresh is a measurable share of
    a batch, and torch.arange's intra-op threads stall when another process holds a core.
    """
    global _iota
    with _iota_lock:
        if end > len(_iota):
            _iota = torch.from_numpy(np.arange(max(end, 2 * len(_iota)), dtype=np.int64))
        return _iota[begin:end]


def make_block(num_dst: int, src_nodes: np.ndarray, src_ts: np.ndarray, indptr: np.ndarray,
               eids: np.ndarray, dt: np.ndarray) -> Any:
    """Turn one sampled layer (as :meth:`TemporalSampler.sample_arrays` returns it) into a
    DGL block, destinations first among the sources.  Needs DGL."""
    from ._blocks import csc_block
    from ._dgl import require_dgl

    dgl = require_dgl("make_block")

    num_src, m = len(src_nodes), len(eids)
    # Neighbour instances are laid out after the destinations, in edge order.
    block = csc_block(torch.from_numpy(indptr), iota(num_dst, num_src), iota(0, m),
                      num_src, num_dst)
    nid, ts = torch.from_numpy(src_nodes), torch.from_numpy(src_ts)
    block.srcdata[dgl.NID] = nid
    block.srcdata["ts"] = ts
    block.dstdata[dgl.NID] = nid[:num_dst]
    block.dstdata["ts"] = ts[:num_dst]
    block.edata[dgl.EID] = torch.from_numpy(eids)
    block.edata["dt"] = torch.from_numpy(dt)
    return block
