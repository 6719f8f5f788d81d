"""Checking, before any work, that torch can run on the device asked for."""
from __future__ import annotations

import torch

__all__ = ["check_device"]


def check_device(device: str) -> torch.device:
    """Return ``torch.device(device)`` after checking that torch can use it.

    The model runs on torch alone (no DGL), so any device torch supports works; a CUDA run
    on a machine without a visible GPU fails here with a clear message instead of deep
    inside the first batch.
    """
    try:
        dev = torch.device(device)
    except RuntimeError as err:
        raise ValueError(f"unsupported device {device!r}; use 'cpu' or 'cuda[:i]'") from err
    if dev.type == "cpu":
        return dev
    if dev.type != "cuda":
        raise ValueError(f"unsupported device {device!r}; use 'cpu' or 'cuda[:i]'")
    if not torch.cuda.is_available():
        raise RuntimeError(f"--device {device}: torch {torch.__version__} sees no CUDA device "
                           "on this machine (a CPU-only torch build, or no GPU visible)")
    if dev.index is not None and dev.index >= torch.cuda.device_count():
        raise RuntimeError(f"--device {device}: only {torch.cuda.device_count()} CUDA "
                           "device(s) visible")
    return dev
