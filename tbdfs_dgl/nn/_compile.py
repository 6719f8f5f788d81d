"""Whether code runs under ``torch.compile`` tracing (torch 2.2 and later spell it
differently): data-dependent shortcuts are skipped there."""
from __future__ import annotations

import torch

__all__ = ["compiling"]

# Looked up once here: a ``getattr`` on a module inside traced code is a graph break for
# torch 2.2's dynamo, and ``compiling()`` is called inside the model's forward.
_IS_COMPILING = getattr(torch.compiler, "is_compiling", None)
if _IS_COMPILING is None:  # torch < 2.3
    _IS_COMPILING = torch._dynamo.is_compiling


def compiling() -> bool:
    """``True`` while dynamo traces the caller."""
    return bool(_IS_COMPILING())
