"""Negative destinations for link prediction: uniform among the destinations of given rows."""
from __future__ import annotations

from typing import Optional

import numpy as np

from ..data.dataset import TemporalDataset

__all__ = ["NegativeSampler"]


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
