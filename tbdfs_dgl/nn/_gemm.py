"""Row-wise linear maps ``x @ W.T`` over the many rows of a batch (one per sampled instance
or path), shaped for what CPU GEMM kernels do fast; exact (only zero terms are added)."""
from __future__ import annotations

from typing import Optional, Tuple

import torch
import torch.nn.functional as F

from ._compile import compiling
from ._slots import autocast_dtype

__all__ = ["PaddedLinear", "rows_linear"]

# MKL's single-precision GEMM is slow when the output width is not a multiple of 16:
# [240000, 172] x [172, 172] took 331 ms and [240000, 172] x [172, 176] 241 ms (one thread,
# torch 2.2; [60000, 100] x [100, 104] 117 ms against 144 ms).  Products with at least this
# many output entries are therefore computed with zero-padded weights (below it the copy
# back costs about what the padding saves: neutral at [60000, 100]).
_PAD_MIN_OUTPUT = 1 << 24
_PAD_TO = 16


def _round_up(n: int) -> int:
    return -(-n // _PAD_TO) * _PAD_TO


def _pad_rows(w: torch.Tensor, n: int) -> torch.Tensor:
    """``w`` with zero rows appended up to ``n`` rows."""
    if n == w.shape[0]:
        return w
    return torch.cat([w, w.new_zeros(n - w.shape[0], w.shape[1])])


def _narrowed(y: torch.Tensor, n: int) -> torch.Tensor:
    return y if y.shape[1] == n else y[:, :n].contiguous()


class PaddedLinear(torch.autograd.Function):
    """``x @ w.T`` (``x: [M, K]``, ``w: [N, K]``), plus ``acc`` (``[M, N]``, updated in
    place) if given, with both the forward product and the input gradient computed
    against weights zero-padded to widths that are multiples of 16, and narrowed back.

    The padded rows/columns only add exact zeros, so the result is the plain product's
    (to the GEMM's rounding).  Worth it for wide, long products on a CPU
    (:func:`rows_linear` decides): forward + backward of ``[240000, 172] x [172, 172]``
    641 ms against 755 ms for ``F.linear`` (one thread, torch 2.2)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, w: torch.Tensor,
                acc: Optional[torch.Tensor] = None) -> torch.Tensor:
        ctx.save_for_backward(x, w)
        # Plain flags, not ctx.needs_input_grad: torch.compile (2.2) cannot trace that.
        ctx.grads = (x.requires_grad, w.requires_grad)
        ctx.has_acc = acc is not None
        n = w.shape[0]
        y = torch.mm(x, _pad_rows(w, _round_up(n)).t())
        if acc is None:
            return _narrowed(y, n)
        ctx.mark_dirty(acc)
        return acc.add_(y[:, :n])

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> Tuple[Optional[torch.Tensor], ...]:
        x, w = ctx.saved_tensors
        grad_x = grad_w = None
        if ctx.grads[0]:
            k = w.shape[1]
            grad_x = _narrowed(torch.mm(grad, _pad_rows(w.t(), _round_up(k)).t()), k)
        if ctx.grads[1]:
            grad_w = torch.mm(grad.t(), x)
        return grad_x, grad_w, (grad if ctx.has_acc else None)


def _pays_to_pad(x: torch.Tensor, weight: torch.Tensor) -> bool:
    n, k = weight.shape
    return (x.device.type == "cpu" and x.dim() == 2 and x.shape[0] * n >= _PAD_MIN_OUTPUT
            and (n % _PAD_TO or k % _PAD_TO) and x.dtype == weight.dtype == torch.float32
            and autocast_dtype("cpu") is None and not compiling())


def rows_linear(x: torch.Tensor, weight: torch.Tensor,
                acc: Optional[torch.Tensor] = None) -> torch.Tensor:
    """``x @ weight.T`` (plus ``acc``, updated in place where it can be) for ``x: [M, a]``.

    ``acc``, when given, must be a fresh tensor the caller owns (a sum being built).  On a
    CPU two shapes get special treatment, both exact:

    * a tiny weight (``<= 8`` outputs, ``<= 16`` inputs: width-4 models): GEMM kernels
      are slow on ``[M, 4] x [4, 4]`` shapes, so groups of ``r = 4`` rows are multiplied
      at once by the block-diagonal ``I_r ⊗ W`` (``[M / r, r·a] x [r·a, r·b]``, extra
      terms exactly zero), 4x faster forward and 2x for the weight gradient (measured,
      one thread);
    * a long product with widths that are not multiples of 16: :class:`PaddedLinear`.
    """
    r = 4
    b, a = weight.shape
    if (x.device.type != "cpu" or b > 8 or a > 16 or x.shape[0] % r
            or autocast_dtype("cpu") is not None):
        if _pays_to_pad(x, weight) and (acc is None or acc.dtype == x.dtype):
            return PaddedLinear.apply(x, weight, acc)
        if acc is None:
            return F.linear(x, weight)
        if autocast_dtype(x.device.type) is None and acc.dtype == x.dtype == weight.dtype:
            # In place: out-of-place addmm would first copy acc into a new tensor of
            # its size (at width 172 a 165 MB copy per batch).
            return acc.addmm_(x, weight.t())
        return torch.addmm(acc, x, weight.t())
    eye = torch.eye(r, dtype=weight.dtype, device=weight.device)
    w_blk = (eye[:, None, :, None] * weight[None, :, None, :]).reshape(r * b, r * a)
    xb = x.reshape(-1, r * a)
    out = (torch.mm(xb, w_blk.t()) if acc is None
           else torch.addmm(acc.reshape(-1, r * b), xb, w_blk.t()))
    return out.view(x.shape[0], b)
