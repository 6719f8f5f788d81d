"""Link-prediction metrics over whole splits (never averages of per-batch figures)."""
from __future__ import annotations

from typing import Dict

import numpy as np
from sklearn.metrics import average_precision_score, f1_score, roc_auc_score

__all__ = ["link_prediction_metrics", "METRICS"]

METRICS = ("accuracy", "f1", "ap", "auc")


def link_prediction_metrics(pos_logits: np.ndarray, neg_logits: np.ndarray) -> Dict[str, float]:
    """Accuracy (threshold 0.5 on the probability), F1, AP and ROC-AUC of one split.

    Parameters
    ----------
    pos_logits, neg_logits : numpy.ndarray
        Logits of the positive interactions and of their sampled negatives.

    Returns
    -------
    dict
        ``accuracy``, ``f1``, ``ap``, ``auc`` and ``count`` (positives).  Metrics are ``nan``
        when the split is empty.
    """
    pos = np.asarray(pos_logits, dtype=np.float64).ravel()
    neg = np.asarray(neg_logits, dtype=np.float64).ravel()
    out: Dict[str, float] = {"count": float(len(pos))}
    if len(pos) == 0 or len(neg) == 0:
        out.update({m: float("nan") for m in METRICS})
        return out
    if not (np.isfinite(pos).all() and np.isfinite(neg).all()):
        raise ValueError("link_prediction_metrics got NaN or infinite logits")
    y = np.concatenate([np.ones(len(pos)), np.zeros(len(neg))])
    logits = np.concatenate([pos, neg])
    pred = logits >= 0.0  # sigmoid(x) >= 0.5
    out["accuracy"] = float((pred == y).mean())
    out["f1"] = float(f1_score(y, pred, zero_division=0))
    out["ap"] = float(average_precision_score(y, logits))
    out["auc"] = float(roc_auc_score(y, logits))
    return out


# ---------------------------------------------------------------------------- ranking
RANKING_HITS = (1, 3, 10)


def _ranking_inputs(pos_scores: np.ndarray, neg_scores: np.ndarray) -> tuple:
    pos = np.asarray(pos_scores, dtype=np.float64).ravel()
    neg = np.asarray(neg_scores, dtype=np.float64)
    if neg.ndim == 1 and len(pos) == len(neg):
        neg = neg[:, None]  # one negative per positive
    if neg.ndim != 2 or neg.shape[0] != len(pos):
        raise ValueError(f"neg_scores must have shape [n, K] with n = {len(pos)} positives, got "
                         f"{neg.shape}")
    if neg.shape[1] == 0:
        raise ValueError("neg_scores has no candidates (K = 0)")
    if not (np.isfinite(pos).all() and np.isfinite(neg).all()):
        raise ValueError("ranking metrics got NaN or infinite scores")
    return pos, neg


def ranks(pos_scores: np.ndarray, neg_scores: np.ndarray) -> np.ndarray:
    """Rank of each positive among itself and its ``K`` negatives, ties averaged.

    TGB's (and OGB's) rule: the rank is ``1 + (optimistic + pessimistic) / 2`` with
    ``optimistic = #(neg > pos)`` and ``pessimistic = #(neg >= pos)``, so a positive tied with
    ``m`` negatives sits in the middle of the tie (a constant scorer does not score well).

    Parameters
    ----------
    pos_scores : numpy.ndarray
        ``[n]`` score of each positive (logits or probabilities: only the order matters).
    neg_scores : numpy.ndarray
        ``[n, K]`` scores of the candidates ranked against positive ``i`` (``[n]`` for
        ``K = 1``).

    Returns
    -------
    numpy.ndarray
        float64 ``[n]`` ranks in ``[1, K + 1]``, half-integers where ties split.
    """
    pos, neg = _ranking_inputs(pos_scores, neg_scores)
    optimistic = (neg > pos[:, None]).sum(axis=1)
    pessimistic = (neg >= pos[:, None]).sum(axis=1)
    return 1.0 + 0.5 * (optimistic + pessimistic)


def mrr(pos_scores: np.ndarray, neg_scores: np.ndarray) -> float:
    """Mean reciprocal rank of the positives against their candidates (see :func:`ranks`).

    Returns ``nan`` when there are no positives.
    """
    r = ranks(pos_scores, neg_scores)
    return float(np.mean(1.0 / r)) if len(r) else float("nan")


def hits_at_k(pos_scores: np.ndarray, neg_scores: np.ndarray, k: int) -> float:
    """Fraction of positives ranked within the top ``k`` (``rank <= k``, see :func:`ranks`).

    A positive tied with negatives counts by its averaged rank, as in TGB: tied with one
    negative it has rank 1.5, which is not a hit at 1.  Returns ``nan`` without positives.
    """
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k must be a positive int, got {k!r}")
    r = ranks(pos_scores, neg_scores)
    return float(np.mean(r <= k)) if len(r) else float("nan")


def ranking_metrics(pos_scores: np.ndarray, neg_scores: np.ndarray,
                    hits: tuple = RANKING_HITS) -> Dict[str, float]:
    """MRR and Hits@k of one split, one positive against its ``K`` candidates (TGB's
    one-vs-many protocol).

    Returns
    -------
    dict
        ``mrr``, ``hits@k`` for each ``k`` in ``hits``, ``count`` (positives) and
        ``candidates`` (``K``); metrics are ``nan`` when the split is empty.
    """
    for k in hits:
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            raise ValueError(f"hits must hold positive ints, got {k!r}")
    pos, neg = _ranking_inputs(pos_scores, neg_scores)
    out: Dict[str, float] = {"count": float(len(pos)), "candidates": float(neg.shape[1])}
    if len(pos) == 0:
        out["mrr"] = float("nan")
        out.update({f"hits@{k}": float("nan") for k in hits})
        return out
    r = ranks(pos, neg)
    out["mrr"] = float(np.mean(1.0 / r))
    out.update({f"hits@{k}": float(np.mean(r <= k)) for k in hits})
    return out


__all__ += ["RANKING_HITS", "ranks", "mrr", "hits_at_k", "ranking_metrics"]
