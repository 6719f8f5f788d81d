"""Evaluation negatives as DyGLib defines them: ``random``, ``historical`` and ``inductive``.

DyGLib (Yu et al., "Towards Better Dynamic Graph Learning", NeurIPS 2023; its
``utils.NegativeEdgeSampler``) evaluates link prediction against three kinds of negative
edges, drawn per chronological batch of positives whose times span ``[t0, t1]``:

``random``
    The positive's source with a destination drawn uniformly (with replacement) among the
    distinct destinations of the sampler's interactions.  Nothing is excluded: the positive
    itself can be drawn.  This is TGAT's setting and today's default.
``historical``
    Edges ``(u, v)`` of the sampler's interactions seen at some time in ``[t_min, t0]`` but
    not in ``[t0, t1]`` (seen before, not now), drawn without replacement.  When there are
    fewer such edges than negatives to draw, all of them are used and the rest are random
    edges from ``distinct sources x distinct destinations`` that are not an edge of the
    batch (DyGLib's "random sample with collision check").
``inductive``
    Edges seen in ``[t_min, t0]`` but not in ``[t_min, last_observed_time]`` (first seen
    after the training/validation period, i.e. in the evaluated period) and not in
    ``[t0, t1]``; the same fill rule.

DyGLib replaces the whole edge for ``historical``/``inductive`` (the negative's source is
the historical edge's source).  ``same_source=True`` keeps the positive's source instead
and draws destinations ``v`` with ``(source, v)`` in the pool (TGB's per-source candidates,
the natural setting for one-vs-K ranking), filling with random destinations that are not
a batch destination of that source.

Deviations from DyGLib (all deliberate, none changes which edges are eligible):

* Random streams: DyGLib draws from one ``RandomState(seed)`` reset before each pass over
  a split, so a batch's negatives depend on every batch before it.  Here each batch draws
  from ``numpy.random.default_rng([seed, stream])``, ``stream`` defaulting to the batch's
  first row, so a batch's negatives do not depend on which batches were evaluated before
  it (capped or parallel evaluation).  The draws differ from DyGLib's numbers; the
  distributions are the same.
* Order: DyGLib puts the random fill first and then the pool edges in Python ``set``
  order; here the drawn negatives are shuffled before they are assigned to positives
  (irrelevant to AP, which ignores the pairing; it keeps ranking candidates mixed).
* Candidates: ``num_candidates = K`` draws ``n * K`` negatives per batch of ``n``
  positives (without replacement across the batch, as DyGLib draws its ``n``) and gives
  positive ``i`` row ``i`` of the ``[n, K]`` result.  ``K = 1`` is DyGLib's setting.
* The collision check's product space is enumerated implicitly (DyGLib builds a Python set
  of every ``source x destination`` pair, ``|sources| * |destinations|`` tuples).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple

import numpy as np

__all__ = ["EVAL_NEGATIVES", "NegativeEdges", "EvalNegativeSampler"]

EVAL_NEGATIVES = ("random", "historical", "inductive")


@dataclass
class NegativeEdges:
    """The negatives of one batch of ``n`` positives, ``K`` per positive.

    Attributes
    ----------
    src, dst : numpy.ndarray
        int64 ``[n, K]``: negative ``k`` of positive ``i`` is ``(src[i, k], dst[i, k])``,
        scored at the positive's time.  ``src[i]`` is the positive's source except for
        DyGLib's edge-level ``historical``/``inductive`` negatives.
    """

    src: np.ndarray
    dst: np.ndarray

    @property
    def num_candidates(self) -> int:
        """``K``, negatives per positive."""
        return int(self.dst.shape[1])


def _draw_excluding(rng: np.random.Generator, m: int, excluded: np.ndarray,
                    size: int) -> np.ndarray:
    """``size`` indices of ``[0, m)`` outside the sorted, distinct ``excluded``; distinct
    when enough remain (DyGLib: ``replace=len(possible) < size``)."""
    avail = m - len(excluded)
    if avail <= 0:
        raise ValueError("no candidate negative edge is left once the batch's own edges are "
                         "excluded")
    j = rng.choice(avail, size=size, replace=avail < size)
    # The j-th index not excluded: skip every excluded value at or below it.
    return j + np.searchsorted(excluded - np.arange(len(excluded)), j, side="right")


def _found(table: np.ndarray, values: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """Whether each of ``values`` is in the sorted ``table``, and its position there."""
    pos = np.searchsorted(table, values)
    hit = pos < len(table)
    hit[hit] = table[pos[hit]] == values[hit]
    return hit, pos


class EvalNegativeSampler:
    """Negative destinations for evaluating temporal link prediction (DyGLib's strategies).

    Parameters
    ----------
    data : TemporalDataset
        The interactions (``src``, ``dst``, ``ts``, ``num_nodes``), in time order.
    strategy : {'random', 'historical', 'inductive'}
        See the module docstring.
    rows : array-like of bool or int, optional
        The interactions this sampler knows (DyGLib's sampler ``Data``): candidates, history
        and batch intervals are read from them.  Default: all.  DyGLib's new-node evaluation
        passes the new-node rows of the split.
    last_observed_time : float, optional
        End of the observed period for ``'inductive'`` (required there): the validation
        start for validation, the test start for test (:meth:`for_split`).
    num_candidates : int
        Negatives per positive ``K`` (``1``: DyGLib's AP setting; larger: one-vs-K ranking).
    same_source : bool
        Keep the positive's source for ``historical``/``inductive`` negatives (TGB-style
        per-source candidates) instead of DyGLib's whole-edge negatives.
    seed : int
        Seed; with the batch's stream it fixes every draw.
    """

    def __init__(self, data: Any, strategy: str = "random", rows: Any = None,
                 last_observed_time: Optional[float] = None, num_candidates: int = 1,
                 same_source: bool = False, seed: int = 0) -> None:
        if strategy not in EVAL_NEGATIVES:
            raise ValueError(f"strategy must be one of {EVAL_NEGATIVES}, got {strategy!r}")
        if isinstance(num_candidates, bool) or not isinstance(num_candidates, (int, np.integer)) \
                or num_candidates < 1:
            raise ValueError(f"num_candidates must be a positive int, got {num_candidates!r}")
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise ValueError(f"seed must be a non-negative int, got {seed!r}")
        if strategy == "inductive":
            if last_observed_time is None or not np.isfinite(float(last_observed_time)):
                raise ValueError("strategy='inductive' needs a finite last_observed_time (the "
                                 "end of the period whose edges count as already seen)")
        self.strategy = strategy
        self.num_candidates = int(num_candidates)
        self.same_source = bool(same_source)
        self.seed = int(seed)
        self.last_observed_time = (None if last_observed_time is None
                                   else float(last_observed_time))
        self.name = getattr(data, "name", "data")
        self.num_nodes = int(data.num_nodes)
        self._src_all = np.asarray(data.src, dtype=np.int64)
        self._dst_all = np.asarray(data.dst, dtype=np.int64)
        ts_all = np.asarray(data.ts, dtype=np.float64)
        self._ts_all = ts_all
        pool = np.arange(len(ts_all)) if rows is None else np.asarray(rows)
        if pool.dtype == bool:
            if pool.shape != ts_all.shape:
                raise ValueError(f"rows mask has shape {pool.shape}, the data {ts_all.shape}")
            pool = np.flatnonzero(pool)
        pool = pool[np.argsort(ts_all[pool], kind="stable")]
        src, dst, ts = self._src_all[pool], self._dst_all[pool], ts_all[pool]
        if len(pool) == 0:
            raise ValueError(f"{self.name}: no interactions to draw negatives from")
        self.unique_src = np.unique(src)
        self.unique_dst = np.unique(dst)
        self._pool_ts = ts
        self._pool_keys = self._keys(src, dst)
        # Every distinct edge with the time it is first seen: the edges seen in [t_min, t]
        # are those first seen by t.
        self._edge_keys, first = np.unique(self._pool_keys, return_index=True)
        self._edge_first = ts[first]

    @classmethod
    def for_split(cls, data: Any, split: Any, part: str, strategy: str = "random",
                  new_nodes: bool = False, num_candidates: int = 1, same_source: bool = False,
                  seed: int = 0) -> "EvalNegativeSampler":
        """The sampler DyGLib builds for one evaluated part of a chronological split.

        Parameters
        ----------
        data : TemporalDataset
            The interactions.
        split : ChronologicalSplit
            Reads ``val_time``, ``test_time`` and, with ``new_nodes``, the part's
            ``{part}_inductive`` rows.
        part : {'val', 'test'}
            The evaluated part: ``last_observed_time`` is ``split.val_time`` for validation
            and ``split.test_time`` for test (DyGLib: the last training / validation time).
        new_nodes : bool
            The sampler of the new-node evaluation: it knows only the part's new-node rows
            (DyGLib's ``new_node_{val,test}_data``).
        num_candidates, same_source, seed
            As in the constructor; the seed is mixed with the part and ``new_nodes`` as
            DyGLib uses distinct seeds for its four evaluation samplers.
        """
        if part not in ("val", "test"):
            raise ValueError(f"part must be 'val' or 'test', got {part!r}")
        rows = getattr(split, f"{part}_inductive") if new_nodes else None
        last = split.val_time if part == "val" else split.test_time
        stream_seed = int(np.random.SeedSequence(
            [seed, 0 if part == "val" else 1, int(new_nodes)]).generate_state(1)[0])
        return cls(data, strategy, rows=rows, last_observed_time=last,
                   num_candidates=num_candidates, same_source=same_source, seed=stream_seed)

    def _keys(self, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
        return src.astype(np.int64) * self.num_nodes + dst.astype(np.int64)

    # ------------------------------------------------------------------ pools
    def candidate_edges(self, t0: float, t1: float) -> np.ndarray:
        """Sorted keys ``src * num_nodes + dst`` of the ``historical``/``inductive`` pool of a
        batch spanning ``[t0, t1]`` (DyGLib's ``unique_historical_edges`` /
        ``unique_inductive_edges``)."""
        seen = self._edge_first <= t0
        if self.strategy == "inductive":
            seen &= self._edge_first > self.last_observed_time
        lo = np.searchsorted(self._pool_ts, t0, side="left")
        hi = np.searchsorted(self._pool_ts, t1, side="right")
        now = np.unique(self._pool_keys[lo:hi])
        pool = self._edge_keys[seen]
        return pool[~np.isin(pool, now, assume_unique=True)]

    # ------------------------------------------------------------------ drawing
    def sample(self, rows: Any, stream: Optional[int] = None) -> NegativeEdges:
        """The negatives of one batch of positives.

        Parameters
        ----------
        rows : array-like of int
            Dataset rows of the batch's positives (a chronological batch: its interval is
            ``[min ts, max ts]`` of these rows).
        stream : int, optional
            Random stream of the batch; default its first row.

        Returns
        -------
        NegativeEdges
            ``[n, K]`` negative sources and destinations.
        """
        rows_a = np.asarray(rows, dtype=np.int64).ravel()
        n, k = len(rows_a), self.num_candidates
        if n == 0:
            empty = np.zeros((0, k), np.int64)
            return NegativeEdges(empty, empty.copy())
        if rows_a.min() < 0 or rows_a.max() >= len(self._ts_all):
            raise IndexError(f"rows must be in [0, {len(self._ts_all)}), got "
                             f"[{rows_a.min()}, {rows_a.max()}]")
        stream = int(rows_a[0]) if stream is None else int(stream)
        if stream < 0:
            raise ValueError(f"stream must be >= 0, got {stream}")
        rng = np.random.default_rng([self.seed, stream])
        src, dst = self._src_all[rows_a], self._dst_all[rows_a]
        if self.strategy == "random":
            neg = self.unique_dst[rng.integers(0, len(self.unique_dst), (n, k))]
            return NegativeEdges(np.repeat(src[:, None], k, axis=1), neg)
        ts = self._ts_all[rows_a]
        pool = self.candidate_edges(float(ts.min()), float(ts.max()))
        if self.same_source:
            return self._per_source(rng, src, dst, pool)
        keys = self._whole_edges(rng, src, dst, pool, n * k)
        rng.shuffle(keys)
        keys = keys.reshape(n, k)
        return NegativeEdges(keys // self.num_nodes, keys % self.num_nodes)

    def _whole_edges(self, rng: np.random.Generator, src: np.ndarray, dst: np.ndarray,
                     pool: np.ndarray, size: int) -> np.ndarray:
        """DyGLib: ``size`` pool edges without replacement, or the whole pool plus random
        ``source x destination`` edges that are not edges of the batch."""
        if size <= len(pool):
            return pool[rng.choice(len(pool), size=size, replace=False)]
        ns, nd = len(self.unique_src), len(self.unique_dst)
        hit_s, i_s = _found(self.unique_src, src)
        hit_d, i_d = _found(self.unique_dst, dst)
        ok = hit_s & hit_d  # a batch edge outside the product cannot collide
        excluded = np.unique(i_s[ok] * nd + i_d[ok])
        pick = _draw_excluding(rng, ns * nd, excluded, size - len(pool))
        fill = self._keys(self.unique_src[pick // nd], self.unique_dst[pick % nd])
        return np.concatenate([fill, pool])

    def _per_source(self, rng: np.random.Generator, src: np.ndarray, dst: np.ndarray,
                    pool: np.ndarray) -> NegativeEdges:
        """Per positive: ``K`` pool destinations of its own source, filled with random
        destinations that the source does not reach in this batch."""
        k, nn = self.num_candidates, self.num_nodes
        lo = np.searchsorted(pool, src * nn)
        hi = np.searchsorted(pool, (src + 1) * nn)
        batch_dsts: Dict[int, np.ndarray] = {}
        out = np.empty((len(src), k), np.int64)
        for i, s in enumerate(src.tolist()):
            own = pool[lo[i]:hi[i]] - s * nn
            if k <= len(own):
                out[i] = own[rng.choice(len(own), size=k, replace=False)]
                continue
            if s not in batch_dsts:
                hit, pos = _found(self.unique_dst, np.unique(dst[src == s]))
                batch_dsts[s] = pos[hit]  # sorted, distinct
            pick = _draw_excluding(rng, len(self.unique_dst), batch_dsts[s], k - len(own))
            row = np.concatenate([self.unique_dst[pick], own])
            rng.shuffle(row)
            out[i] = row
        return NegativeEdges(np.repeat(src[:, None], k, axis=1), out)

    def __repr__(self) -> str:
        return (f"EvalNegativeSampler(strategy={self.strategy!r}, "
                f"num_candidates={self.num_candidates}, same_source={self.same_source}, "
                f"seed={self.seed})")
