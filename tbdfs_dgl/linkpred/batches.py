"""The events of one link-prediction batch, and cutting rows into chronological batches."""
from __future__ import annotations

from typing import Callable, List, NamedTuple, Optional

import numpy as np

from ..data.dataset import TemporalDataset

__all__ = ["EventBatch", "chronological_batches"]


class EventBatch(NamedTuple):
    """One batch of interactions with their negatives, before sampling.

    Attributes
    ----------
    src, dst : numpy.ndarray
        Endpoints of the batch's interactions (positives).
    neg_dst : numpy.ndarray
        One negative destination per interaction (``[n]``), or ``K`` candidates per
        interaction (``[n, K]``, one-vs-K evaluation).
    ts : numpy.ndarray
        Interaction times (float64); every root of the batch is queried at its own time.
    rows : numpy.ndarray
        The interactions' rows in the dataset (time order).
    """

    src: np.ndarray
    dst: np.ndarray
    neg_dst: np.ndarray
    ts: np.ndarray
    rows: np.ndarray

    @property
    def num_events(self) -> int:
        """Interactions in the batch."""
        return len(self.rows)

    @property
    def num_candidates(self) -> int:
        """Negatives per interaction (``K``)."""
        return 1 if self.neg_dst.ndim == 1 else int(self.neg_dst.shape[1])


def chronological_batches(data: TemporalDataset, rows: np.ndarray, batch_size: int,
                          negatives: Callable[..., np.ndarray], rng: np.random.Generator,
                          max_batches: Optional[int] = None) -> List[EventBatch]:
    """Cut ``rows`` into consecutive batches of ``batch_size`` with one negative each.

    Parameters
    ----------
    data : TemporalDataset
        The interactions.
    rows : numpy.ndarray
        Dataset rows in time order.
    batch_size : int
        Interactions per batch (the last one may be shorter).
    negatives : callable
        ``negatives(n, rng, t)``, e.g. a :class:`~.negatives.NegativeSampler`; ``t`` is the
        batch's first time.
    rng : numpy.random.Generator
        Draws the negatives, batch after batch.
    max_batches : int, optional
        Stop after this many batches.
    """
    out = []
    for lo in range(0, len(rows), batch_size):
        r = rows[lo:lo + batch_size]
        out.append(EventBatch(data.src[r], data.dst[r], negatives(len(r), rng, float(data.ts[r[0]])),
                              data.ts[r].astype(np.float64), r))
        if max_batches and len(out) >= max_batches:
            break
    return out
