"""Temporal link prediction with TGAT's protocol, one idea per module.

- :mod:`.split`: the chronological 70/15/15 split with held-out nodes (:func:`chronological_split`);
- :mod:`.negatives`: negative destinations (:class:`NegativeSampler`), and K evaluation
  candidates per interaction of DyGLib's strategies (:class:`EvaluationCandidates`);
- :mod:`.batches`: one batch's events (:class:`EventBatch`) and cutting rows into batches;
- :mod:`.streams`: which random stream each random draw of a run takes;
- :mod:`.config`: the run's settings (:class:`TrainConfig`);
- :mod:`.device`: checking the device up front (:func:`check_device`);
- :mod:`.checkpoints`: durable, checked checkpoints (:func:`save_checkpoint`,
  :func:`load_checkpoint`);
- :mod:`.progress`: the optional tqdm bar;
- :mod:`.trainer`: training with early stopping, evaluation (:class:`LinkPredictionTrainer`).

Everything public is importable from ``tbdfs_dgl.linkpred`` itself, as when it was one module.
"""
from .batches import EventBatch, chronological_batches
from .checkpoints import _read_checkpoint, load_checkpoint, save_checkpoint  # noqa: F401
from .config import TrainConfig
from .device import check_device
from .negatives import EvaluationCandidates, NegativeSampler
from .split import ChronologicalSplit, chronological_split
from .trainer import EpochStats, LinkPredictionTrainer, TrainResult

__all__ = [
    "ChronologicalSplit",
    "chronological_split",
    "NegativeSampler",
    "EvaluationCandidates",
    "TrainConfig",
    "LinkPredictionTrainer",
    "save_checkpoint",
    "load_checkpoint",
    "check_device",
    "EventBatch",
    "chronological_batches",
    "EpochStats",
    "TrainResult",
]
