"""Whether code runs under ``torch.compile`` tracing (torch 2.2 and later spell it
differently): data-dependent shortcuts are skipped there."""
from __future__ import annotations

import torch

__all__ = ["compiling"]


def compiling() -> bool:
    """``True`` while dynamo traces the caller."""
    check = getattr(torch.compiler, "is_compiling", None)
    if check is None:  # torch < 2.3
        check = torch._dynamo.is_compiling
    return bool(check())
