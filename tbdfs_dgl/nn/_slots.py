"""Products over the ``[rows, slots, ·]`` tensors of the dense layers (neighbour slots of a
layer table, paths of a root), shared by the TGAT layer, the path encoder and the path
aggregator: custom autograd functions whose backward passes avoid the slow batched-matmul
shapes autograd would pick on a CPU, and the narrow-width special cases."""
from __future__ import annotations

from typing import Any, List, Optional, Tuple

import torch

__all__ = ["SlotAverage", "SlotScores", "autocast_dtype", "merge_narrow", "slot_product",
           "thin_bmm"]


def thin_bmm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a @ b`` for ``a: [N, k, c]``, ``b: [N, c, W]`` with a tiny contraction ``c`` (the
    heads).  CPU batched GEMM handles such shapes poorly (measured about 5x slower than
    this, more inside autograd's backward), so on the CPU this is ``c`` fused
    multiply-adds of broadcast outer products instead, for wide enough rows.  With narrow
    ones (``W < 32``, e.g. width-4 models) the short inner loops make that 1.5-2.5x slower
    than ``bmm`` itself; with very narrow rows (``W <= 4``) and long columns (``k >= 64``,
    per-path products) the transposed product ``(b^T a^T)^T`` is 1.7x faster than ``bmm``
    (measured, torch 2.2, one thread)."""
    c = a.shape[-1]
    if a.device.type != "cpu" or c > 4:
        return torch.bmm(a, b)
    if b.shape[-1] <= 4 and a.shape[1] >= 64:
        return torch.bmm(b.transpose(1, 2), a.transpose(1, 2)).transpose(1, 2).contiguous()
    if b.shape[-1] < 32:
        return torch.bmm(a, b)
    out = a[..., 0:1] * b[:, 0:1, :]
    for i in range(1, c):
        out.addcmul_(a[..., i:i + 1], b[:, i:i + 1, :])
    return out


def merge_narrow(parts: List[Tuple[torch.Tensor, slice]]) -> List[Tuple[torch.Tensor, slice]]:
    """The per-slot input parts as one concatenated part when they are narrow (at most 16
    columns in all, e.g. width-4 models) and adjacent, on a CPU.

    Each part costs a few batched products with tiny matrices forward and backward, whose
    per-matrix overhead dominates at such widths; one product over the concatenation is
    cheaper than the copy (measured: the width-4 TGAT training step 1.25x faster).  Wide
    parts stay separate (the copy would cost more than it saves)."""
    if len(parts) < 2 or parts[0][0].device.type != "cpu":
        return parts
    width = sum(p.shape[-1] for p, _ in parts)
    first, last = parts[0][1].start, parts[-1][1].stop
    if width > 16 or width != last - first or any(
            a[1].stop != b[1].start for a, b in zip(parts, parts[1:])):
        return parts
    return [(torch.cat([p for p, _ in parts], dim=-1), slice(first, last))]


class SlotScores(torch.autograd.Function):
    """``scores = p @ q^T``: ``[N, k, W] x [N, H, W] -> [N, k, H]``, with a backward that
    avoids the slow CPU batched-GEMM shapes autograd's ``bmm`` backward would use."""

    @staticmethod
    def forward(ctx, p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(p, q)
        # A plain flag, not ctx.needs_input_grad: torch.compile (2.2) cannot trace that.
        ctx.grad_p = p.requires_grad
        return torch.bmm(p, q.transpose(1, 2))

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> Tuple[Optional[torch.Tensor], ...]:
        p, q = ctx.saved_tensors
        grad_p = thin_bmm(grad, q) if ctx.grad_p else None
        # [N, H, k] x [N, k, W]: the orientation with the long rows (3-5x faster than
        # autograd's [N, W, k] x [N, k, H] on a CPU).
        grad_q = torch.bmm(grad.transpose(1, 2), p)
        return grad_p, grad_q


class SlotAverage(torch.autograd.Function):
    """``avg = a^T @ p``: ``[N, k, H] x [N, k, W] -> [N, H, W]`` (attention-weighted sums
    of the slots' inputs), with a backward shaped like :class:`SlotScores`'."""

    @staticmethod
    def forward(ctx, a: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(a, p)
        ctx.grad_p = p.requires_grad
        return torch.bmm(a.transpose(1, 2), p)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> Tuple[Optional[torch.Tensor], ...]:
        a, p = ctx.saved_tensors
        grad_a = torch.bmm(p, grad.transpose(1, 2))
        grad_p = thin_bmm(a, grad) if ctx.grad_p else None
        return grad_a, grad_p


# torch >= 2.4 asks autocast per device type; older torch has one query per device kind.
# Decided once here: a try/except around the call would not trace under torch.compile.
_PER_DEVICE_AUTOCAST = hasattr(torch, "get_autocast_dtype")


def autocast_dtype(device_type: str) -> Optional[torch.dtype]:
    """The dtype autocast computes matrix products in on ``device_type``, or ``None``."""
    if _PER_DEVICE_AUTOCAST:
        if torch.is_autocast_enabled(device_type):
            return torch.get_autocast_dtype(device_type)
        return None
    if device_type == "cpu":
        return torch.get_autocast_cpu_dtype() if torch.is_autocast_cpu_enabled() else None
    if device_type == "cuda" and torch.is_autocast_enabled():
        return torch.get_autocast_gpu_dtype()
    return None


def slot_product(fn: Any, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Apply :class:`SlotScores` or :class:`SlotAverage` with both operands in one dtype:
    autocast's (as its ``bmm`` would use) or their common one.  Autocast is then switched
    off inside, so that forward and backward agree on that dtype."""
    device_type = a.device.type
    dtype = autocast_dtype(device_type) or torch.promote_types(a.dtype, b.dtype)
    with torch.autocast(device_type, enabled=False):
        return fn.apply(a.to(dtype), b.to(dtype))
