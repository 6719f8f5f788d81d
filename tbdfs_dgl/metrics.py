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
