"""One call that seeds every random generator a training script draws from."""
from __future__ import annotations

import random

import numpy as np
import torch

__all__ = ["seed_everything"]


def seed_everything(seed: int) -> None:
    """Seed Python's ``random``, NumPy's global generator and torch (CPU and CUDA).

    The sampler and the trainer take their own ``seed`` arguments (their streams do not
    depend on global state); this covers model initialisation, dropout and user code.

    Parameters
    ----------
    seed : int
        Any non-negative integer.
    """
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    random.seed(int(seed))
    np.random.seed(int(seed) % 2**32)
    torch.manual_seed(int(seed))  # seeds every CUDA device too
