"""`TemporalSampler`: one C++ call per batch gives dense layer tables, temporal paths and
(on demand) DGL blocks."""
from __future__ import annotations

import itertools
import os
import threading
from typing import Any, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch

from . import _C
from ._strategy import STRATEGIES, Strategy, strategy_parts, to_strategy  # noqa: F401
from ._validate import index_array, time_array
from .batch import LayerTable, PathBatch, TemporalBatch
from .graph import TemporalGraph

__all__ = ["TemporalSampler", "BatchTooLargeError"]

TIME_RULES = ("strict", "inclusive")
MAX_LAYERS = 64  # csrc/budget.h: kMaxLayers
MAX_BATCH_BYTES_ENV = "TBDFS_MAX_BATCH_BYTES"


def default_max_batch_bytes() -> int:
    """Default memory limit of one sampled batch.

    ``$TBDFS_MAX_BATCH_BYTES`` when set, else half of this machine's physical memory,
    at most 16 GiB: enough for any training batch, and a bound that refuses a batch that
    would otherwise be OOM-killed part-way through.
    """
    env = os.environ.get(MAX_BATCH_BYTES_ENV)
    if env:
        try:
            value = int(float(env))
        except ValueError:
            raise ValueError(f"${MAX_BATCH_BYTES_ENV} must be a number of bytes, got {env!r}"
                             ) from None
        if value <= 0:
            raise ValueError(f"${MAX_BATCH_BYTES_ENV} must be > 0, got {env!r}")
        return value
    phys = int(_C.physical_memory_bytes()) or 2 * (16 << 30)
    return min(16 << 30, phys // 2)


class BatchTooLargeError(MemoryError, ValueError):
    """A batch whose worst-case output exceeds the sampler's ``max_batch_bytes``.

    Raised before anything is sampled or allocated.  A ``MemoryError`` (it is about
    memory) and a ``ValueError`` (the request, not the machine, is at fault).
    """


def _gib(n: float) -> str:
    return f"{n / 2**30:.3g} GiB"


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
    strategy : {'recent', 'uniform'} or Strategy
        ``'recent'``: the ``k`` latest eligible edges (ties: larger edge id first).
        ``'uniform'``: ``k`` eligible edges uniformly at random (all when fewer).
        A :class:`Strategy` member names the same: ``RECENT``, ``UNIFORM``, or
        ``UNIFORM_REPLACE`` (``'uniform'`` with ``replace=True``).  The sampler keeps the
        name and ``replace`` (its ``strategy`` is always a string).
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
    max_batch_bytes : int, optional
        Refuse (:class:`BatchTooLargeError`, before sampling) any batch whose output could
        exceed this many bytes.  The bound is the worst case: every layer multiplies the
        frontier by at most ``k + 1`` (``min(k, longest neighbour list) + 1`` without
        replacement) and each root has ``prod(fanouts) * L`` path slots.  Default:
        :func:`default_max_batch_bytes` (``$TBDFS_MAX_BATCH_BYTES``, else half the physical
        memory, at most 16 GiB).

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
        strategy: Union[str, Strategy] = "recent",
        replace: bool = False,
        time_rule: str = "strict",
        seed: Optional[int] = None,
        num_threads: Optional[int] = None,
        max_batch_bytes: Optional[int] = None,
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
        if len(fanouts) > MAX_LAYERS:
            raise ValueError(f"at most {MAX_LAYERS} layers are supported, got {len(fanouts)} "
                             "fanouts")
        slots = float(np.prod([float(k) for k in fanouts])) * len(fanouts)
        if slots > 2.0**53:
            raise ValueError(f"prod(fanouts) * layers = {slots:.3g} path slots per root: too "
                             "many for any batch; use smaller or fewer fanouts")
        if max_batch_bytes is None:
            max_batch_bytes = default_max_batch_bytes()
        if isinstance(max_batch_bytes, bool) or not isinstance(max_batch_bytes, (int, np.integer)) \
                or max_batch_bytes <= 0:
            raise ValueError(f"max_batch_bytes must be a positive int, got {max_batch_bytes!r}")
        strategy, replace = strategy_parts(strategy, replace)
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
        self.max_batch_bytes = int(max_batch_bytes)
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
        hops, path_arrays, _ = self._run(*self._check_roots(nodes, times, paths), batch_id, paths,
                                         False)
        return hops, path_arrays

    def estimate_batch_bytes(self, num_roots: int, paths: bool = True) -> int:
        """Upper bound on the bytes of a batch of ``num_roots`` roots (see ``max_batch_bytes``).

        Parameters
        ----------
        num_roots : int
            Roots in the batch.
        paths : bool
            Whether the path arrays are included.

        Returns
        -------
        int
            Bytes of the sampled tree plus, with ``paths``, the ``[B, P, L]`` path arrays.
        """
        tree, path, _, _ = _C.estimate_batch_bytes(self.graph.csr, self.fanouts, int(num_roots),
                                                   self.replace, bool(paths))
        return int(min(tree + path, 2.0**62))

    def _check_roots(self, nodes: Any, times: Any, paths: bool = True,
                     tables: bool = False, pad_roots: int = 0) -> Tuple[np.ndarray, np.ndarray]:
        nodes_a = index_array(nodes, "nodes", upper=self.graph.num_nodes)
        times_a = time_array(times, "times")
        if len(nodes_a) != len(times_a):
            raise ValueError(f"nodes and times must have the same length, got {len(nodes_a)} "
                             f"and {len(times_a)}")
        self._check_budget(len(nodes_a), paths, tables, pad_roots)
        return nodes_a, times_a

    def _table_bytes(self, num_roots: int, pad_roots: int = 0) -> float:
        """Upper bound on the dense tables' bytes: every row ``k`` slots of nbr, mask, dt
        and eid (25 bytes); a layer has at most as many rows as the frontier reaching it,
        which grows by at most ``min(k, longest list) + 1`` a layer (exactly ``k + 1`` when
        padded to ``pad_roots`` roots, plus the padded sources' node id and time)."""
        longest = self.graph.csr.max_degree  # read each time: appends may raise it
        rows, total = float(max(num_roots, pad_roots)), 0.0
        for k in reversed(self.fanouts):  # from the roots outwards
            total += rows * k * 25
            rows *= (k if pad_roots else min(k, longest)) + 1
            if pad_roots:
                total += rows * 16
        return total

    def _check_budget(self, num_roots: int, paths: bool, tables: bool = False,
                      pad_roots: int = 0) -> None:
        # Before anything is allocated: a batch that does not fit would otherwise be
        # OOM-killed part-way through (no Python exception at all).
        tree, path, instances, slots = _C.estimate_batch_bytes(
            self.graph.csr, self.fanouts, int(num_roots), self.replace, bool(paths))
        table = self._table_bytes(num_roots, pad_roots) if tables else 0.0
        if tree + path + table <= self.max_batch_bytes:
            return
        raise BatchTooLargeError(
            f"a batch of {num_roots} roots with fanouts {self.fanouts} could need up to "
            f"{_gib(tree + path + table)} ({_gib(tree)} for up to {instances:.3g} sampled "
            f"instances: each layer multiplies the frontier by up to fanout + 1; "
            f"{_gib(table)} for their [rows, fanout] tables; {_gib(path)} for "
            f"{slots:.3g} path slots: prod(fanouts) * layers per root), above the limit "
            f"max_batch_bytes = {_gib(self.max_batch_bytes)}. Use fewer roots per batch or "
            f"smaller/fewer fanouts, or raise the limit with TemporalSampler(..., "
            f"max_batch_bytes=...) or ${MAX_BATCH_BYTES_ENV}."
        )

    def _run(self, nodes: np.ndarray, times: np.ndarray, batch_id: Optional[int],
             paths: bool, tables: bool, pad_roots: int = 0,
             eid_map: Optional[np.ndarray] = None
             ) -> Tuple[List[tuple], Optional[tuple], Optional[list]]:
        return _C.sample(self.graph.csr, nodes, times, self.fanouts,
                         to_strategy(self.strategy, self.replace), self.time_rule == "strict",
                         self.seed, self._stream(batch_id), self.num_threads, paths, tables,
                         pad_roots, eid_map)

    def sample(self, nodes: Any, times: Any, batch_id: Optional[int] = None,
               paths: bool = True, pad_roots: Optional[int] = None,
               eid_map: Any = None) -> TemporalBatch:
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
        pad_roots : int, optional
            Return the batch as :meth:`TemporalBatch.padded` ``(pad_roots)`` would, written
            at those shapes by the sampler itself (no copies; fixed shapes for
            ``torch.compile``).  Needs ``paths=False``.
        eid_map : array-like of int, optional
            One id per edge of the graph: the batch reports ``eid_map[e]`` instead of each
            sampled edge's input row ``e`` (e.g. rows of a larger dataset the graph was cut
            from).

        Returns
        -------
        TemporalBatch
            Dense layer tables and paths of the same sampled tree; its DGL blocks are built
            from the tables on first access (``batch.blocks``).
        """
        pad = 0
        if pad_roots is not None:
            if isinstance(pad_roots, bool) or not isinstance(pad_roots, (int, np.integer)):
                raise TypeError(f"pad_roots must be an int, got {type(pad_roots).__name__}")
            if paths:
                raise ValueError("pad_roots pads the layer tables and drops the paths: pass "
                                 "paths=False")
            pad = int(pad_roots)
        nodes_a, times_a = self._check_roots(nodes, times, paths, tables=True, pad_roots=pad)
        map_a = None
        if eid_map is not None:
            map_a = np.ascontiguousarray(index_array(eid_map, "eid_map"))
            if len(map_a) != self.graph.num_edges:
                raise ValueError(f"eid_map has {len(map_a)} entries, the graph has "
                                 f"{self.graph.num_edges} edges")
        hops, path_arrays, tables = self._run(nodes_a, times_a, batch_id, paths, True, pad, map_a)
        if pad:
            extra = pad - len(nodes_a)
            nodes_a = np.concatenate([nodes_a, np.zeros(extra, nodes_a.dtype)])
            times_a = np.concatenate([times_a, np.zeros(extra, times_a.dtype)])
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
        self.__dict__.setdefault("max_batch_bytes", default_max_batch_bytes())  # older pickles
        self.__dict__.pop("_longest", None)  # older pickles cached the longest list
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
