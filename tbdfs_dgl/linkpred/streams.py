"""Which random stream each random draw of a training run takes.

Two kinds of streams, both fixed by the run's seed alone so that a run is reproducible on
any thread count:

- numpy generators keyed ``[seed, index, purpose]`` (negatives, and the random subsets of
  training batches and evaluation events): the *purpose* tag keeps, for example, the
  negatives of epoch 3 apart from the batch draw of epoch 3;
- the sampler's per-batch streams, chosen by the ``batch_id`` passed to
  :meth:`~tbdfs_dgl.TemporalSampler.sample`: every batch of a run gets its own id, from a
  range of its own per epoch and per evaluated part.

The values are those of every earlier release: changing any of them changes every result.
"""
from __future__ import annotations

import enum

import numpy as np

__all__ = ["Purpose", "PART_INDEX", "generator", "TRAIN_BATCH_IDS_PER_EPOCH",
           "EVAL_FIRST_BATCH_ID", "first_batch_id"]


class Purpose(enum.IntEnum):
    """The third key of a numpy stream: what it draws."""

    TRAIN_NEGATIVES = 1   # negatives of an epoch's training batches (index: the epoch)
    EVAL_NEGATIVES = 2    # negatives of an evaluated part (index: PART_INDEX)
    TRAIN_BATCH_DRAW = 3  # which training batches an epoch keeps (TrainConfig.train_batches)
    EVAL_EVENT_DRAW = 4   # which events of a part are scored (TrainConfig.val/test_events)


# The second key of an evaluation stream (the epoch's place in a training stream).
PART_INDEX = {"val": 0, "test": 1}


def generator(seed: int, index: int, purpose: Purpose) -> np.random.Generator:
    """The numpy generator of draw ``purpose`` for epoch or part ``index`` of run ``seed``."""
    return np.random.default_rng([seed, index, int(purpose)])


# Sampler batch ids.  Epoch e's training batches are e * TRAIN_BATCH_IDS_PER_EPOCH + i, and
# an evaluated part's are EVAL_FIRST_BATCH_ID[part] + i: the ranges stay disjoint while an
# epoch has fewer than a million batches (Wikipedia has ~550 of 200 events), a run fewer than
# 2,000 epochs and a part fewer than a billion batches.  The same batch id always draws the
# same tree, so the same part is sampled alike in every evaluation.
TRAIN_BATCH_IDS_PER_EPOCH = 1_000_000
EVAL_FIRST_BATCH_ID = {"val": 2_000_000_000, "test": 3_000_000_000}


def first_batch_id(part: str, epoch: int = 0) -> int:
    """The sampler batch id of the first batch of ``part`` ('train' of ``epoch``, 'val', 'test')."""
    if part == "train":
        return epoch * TRAIN_BATCH_IDS_PER_EPOCH
    return EVAL_FIRST_BATCH_ID[part]
