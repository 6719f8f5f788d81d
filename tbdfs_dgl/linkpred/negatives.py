"""Negative destinations for link prediction: uniform among the destinations of given rows
(training, and TGAT's evaluation), or K candidates of DyGLib's strategies per evaluated
interaction."""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from ..data.dataset import TemporalDataset
from ..eval_negatives import EvalNegativeSampler

__all__ = ["NegativeSampler", "EvaluationCandidates"]


class NegativeSampler:
    """Uniform negative destinations among the nodes that are destinations of ``rows``.

    As TGAT's ``RandEdgeSampler``: training draws among the training interactions'
    destinations, evaluation among all interactions' destinations.  Drawing over every node
    id instead would offer nodes that never interact in the data at hand (e.g. a graph cut
    to its first interactions), which a model tells apart from real destinations by their
    empty history alone.

    Parameters
    ----------
    data : TemporalDataset
        The interactions.
    rows : array-like of bool or int, optional
        The interactions whose destinations are candidates (a mask or row indices);
        default all.
    active_only : bool
        Draw, for a batch at time ``t``, only among the candidates that interacted (among
        ``rows``) strictly before ``t`` (``TrainConfig(train_negatives='active')``).
    """

    def __init__(self, data: TemporalDataset, rows: Optional[np.ndarray] = None,
                 active_only: bool = False) -> None:
        dst = np.asarray(data.dst)
        rows_a = np.arange(data.num_edges) if rows is None else np.asarray(rows)
        if rows_a.dtype == bool:
            rows_a = np.flatnonzero(rows_a)
        self.candidates = np.unique(dst[rows_a])
        if len(self.candidates) == 0:
            raise ValueError(f"{data.name}: no destinations to draw negatives from")
        self.first_seen: Optional[np.ndarray] = None
        if active_only:
            # Candidates in order of their first interaction among ``rows``, so that "seen
            # before t" is a prefix.
            first = np.full(data.num_nodes, np.inf)
            ts = np.asarray(data.ts, dtype=np.float64)[rows_a]
            np.minimum.at(first, np.asarray(data.src)[rows_a], ts)
            np.minimum.at(first, dst[rows_a], ts)
            f = first[self.candidates]
            order = np.argsort(f, kind="stable")
            self.candidates, self.first_seen = self.candidates[order], f[order]

    def __call__(self, n: int, rng: np.random.Generator,
                 t: Optional[float] = None) -> np.ndarray:
        """Draw ``n`` negative destinations; with ``active_only``, among the candidates that
        interacted strictly before ``t`` (all of them while none has)."""
        k = len(self.candidates)
        if self.first_seen is not None and t is not None:
            k = int(np.searchsorted(self.first_seen, t, side="left")) or k
        return self.candidates[rng.integers(0, k, n)].astype(np.int64)


class EvaluationCandidates:
    """``K`` negative destinations per interaction of an evaluated part, DyGLib's way.

    DyGLib draws a batch's ``historical``/``inductive`` negatives from the batch's time
    interval, so the negatives of an interaction depend on the batch it is evaluated in.
    Here that batch is always the interaction's *chronological* batch of the whole part
    (the part's rows cut into ``batch_size`` consecutive rows): an evaluation of a random
    subset of the part (``TrainConfig.test_events``), or of batches cut differently, scores
    each interaction against exactly the candidates the whole part's evaluation gives it.

    Candidates keep the positive's source (``same_source=True`` of
    :class:`~tbdfs_dgl.eval_negatives.EvalNegativeSampler`: TGB's per-source ranking, and
    the issue's definition "destinations seen with the source before, not now"), so each
    candidate is a destination embedded at the positive's time and scored with the
    positive's source embedding.

    Parameters
    ----------
    data : TemporalDataset
        The interactions.
    split : ChronologicalSplit
        The run's split.
    part : {'val', 'test'}
        The evaluated part.
    strategy : {'random', 'historical', 'inductive'}
        DyGLib's strategy.
    num_candidates : int
        ``K`` negatives per interaction.
    batch_size : int
        Interactions per chronological batch of the part (DyGLib's evaluation batch).
    seed : int
        The run's seed.
    """

    def __init__(self, data: TemporalDataset, split: Any, part: str, strategy: str,
                 num_candidates: int, batch_size: int, seed: int) -> None:
        self.sampler = EvalNegativeSampler.for_split(
            data, split, part, strategy, num_candidates=num_candidates, same_source=True,
            seed=seed)
        self.part_rows = np.flatnonzero(getattr(split, part))
        self.batch_size = int(batch_size)

    @property
    def num_candidates(self) -> int:
        """``K``."""
        return self.sampler.num_candidates

    def __call__(self, rows: np.ndarray) -> np.ndarray:
        """int64 ``[len(rows), K]`` candidate destinations of the part's ``rows``."""
        rows = np.asarray(rows, dtype=np.int64).ravel()
        pos = np.searchsorted(self.part_rows, rows)
        inside = pos < len(self.part_rows)
        inside[inside] = self.part_rows[pos[inside]] == rows[inside]
        if not inside.all():
            raise ValueError(f"rows {rows[~inside][:5].tolist()} are not in the evaluated part")
        block = pos // self.batch_size
        out = np.empty((len(rows), self.num_candidates), np.int64)
        for b in np.unique(block):
            lo = int(b) * self.batch_size
            neg = self.sampler.sample(self.part_rows[lo:lo + self.batch_size]).dst
            mine = block == b
            out[mine] = neg[pos[mine] - lo]
        return out
