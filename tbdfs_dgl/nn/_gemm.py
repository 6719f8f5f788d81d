"""Row-wise linear maps ``x @ W.T`` over the many rows of a batch (one per sampled instance
or path), shaped for what CPU GEMM kernels do fast, and routed to the faster of the two
GEMM libraries torch ships on x86 CPUs; exact (only zero terms are added, or the same
products summed by another kernel)."""
from __future__ import annotations

import os
import platform
from typing import Any, Optional, Tuple

import torch
import torch.nn.functional as F

from ._compile import compiling
from ._slots import autocast_dtype

__all__ = ["PaddedLinear", "cpu_gemm_backend", "few_outputs_linear", "rows_linear"]

# torch's CPU matrix products go to MKL's sgemm, which is slow on some of the batch's
# long, narrow shapes on at least some x86 CPUs; oneDNN (also in torch's x86 builds,
# reached through the op below) was faster on them.  One thread, torch 2.2, the
# development machine's AMD EPYC, ms (docs/benchmarks/model.md, round 14):
#   [60000, 100] x [100, 100]           15 against 24 (forward and input gradient)
#   [240000, 172] x [172, 172]          357 against 471 (MKL with padded weights)
#   [62000, 2] x [2, 100]               1.9 against 5.5 (input gradient of scores)
#   [2, 62000] x [62000, 100]           2.2 against 9.0 (weight gradient of scores)
#   [60000, 200] x [200, 200]           level
#   [62000, 100] x [100, 2]             4.0 against 1.5: MKL (few output columns)
#   [100, 60000] x [60000, 100]         22.6 against 18.5: MKL (weight gradient)
# and routing the products of 2,048-16,384 rows at widths 100-200 too (forwards up to
# 1.3x faster, weight gradients slower) gained nothing on a whole training step.  So
# oneDNN takes the long products where it won, MKL the rest.
# TBDFS_CPU_GEMM=mkl turns it off.
_ONEDNN_MIN_ROWS = 1 << 14
_ONEDNN_MIN_WIDTH = 16  # narrower weights keep rows_linear's block-diagonal products
_GEMM_ENV = "TBDFS_CPU_GEMM"
_GEMM_BACKENDS = ("auto", "mkl")
_onednn_op: Any = None  # resolved on first use; False when unavailable


def cpu_gemm_backend() -> str:
    """The library used for the batch's long row products on a CPU: ``'onednn'`` or
    ``'mkl'`` (torch's default).

    ``$TBDFS_CPU_GEMM`` chooses: ``auto`` (the default) takes oneDNN where this build of
    torch has it on an x86 CPU, ``mkl`` keeps torch's own matrix products throughout.
    Both give the same products up to the order of float additions.

    Raises
    ------
    ValueError
        On another value of ``$TBDFS_CPU_GEMM``.
    """
    choice = os.environ.get(_GEMM_ENV, "auto").strip().lower() or "auto"
    if choice not in _GEMM_BACKENDS:
        raise ValueError(f"${_GEMM_ENV} must be one of {_GEMM_BACKENDS}, got {choice!r}")
    if choice == "mkl":
        return "mkl"
    return "onednn" if _linear_op() is not None else "mkl"


def _linear_op() -> Any:
    """oneDNN's ``x @ w.T`` (the op torch's own CPU compiler emits), or ``None`` where this
    build of torch lacks it or is not on an x86 CPU."""
    global _onednn_op
    if _onednn_op is None:
        _onednn_op = False
        if (platform.machine().lower() in ("x86_64", "amd64")
                and torch.backends.mkldnn.is_available()):
            try:
                op = torch.ops.mkldnn._linear_pointwise
                probe = torch.arange(6, dtype=torch.float32).view(3, 2)
                if torch.equal(op(probe, probe[:2], None, "none", [], ""), probe @ probe[:2].t()):
                    _onednn_op = op
            except (AttributeError, RuntimeError, NotImplementedError, TypeError):
                pass
    return _onednn_op or None


def _dense(t: torch.Tensor) -> torch.Tensor:
    """``t`` itself if it is contiguous or the transpose of a contiguous matrix (oneDNN
    reads both layouts in place), else a contiguous copy: on other strided views (a column
    slice of a weight) oneDNN fell back to a kernel hundreds of times slower (measured)."""
    return t if t.is_contiguous() or t.t().is_contiguous() else t.contiguous()


def _onednn_mm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """``x @ w.T`` by oneDNN, for 2-D ``x`` and ``w``."""
    return _linear_op()(_dense(x), _dense(w), None, "none", [], "")


def _onednn_pays(rows: int, x: torch.Tensor, weight: torch.Tensor,
                 min_rows: Optional[int] = None) -> bool:
    min_rows = _ONEDNN_MIN_ROWS if min_rows is None else min_rows
    return (x.device.type == "cpu" and rows >= min_rows
            and x.dtype == weight.dtype == torch.float32
            and autocast_dtype("cpu") is None and not compiling()
            and cpu_gemm_backend() == "onednn")


class _OneDNNLinear(torch.autograd.Function):
    """``x @ w.T`` for long ``x: [M, K]`` and ``w: [N, K]``: forward and input gradient
    by oneDNN, weight gradient (a long contraction, where MKL is faster) by torch."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x, w)
        # Plain flags, not ctx.needs_input_grad: torch.compile (2.2) cannot trace that.
        ctx.grads = (x.requires_grad, w.requires_grad)
        return _onednn_mm(x, w)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> Tuple[Optional[torch.Tensor], ...]:
        x, w = ctx.saved_tensors
        grad_x = _onednn_mm(grad, w.t()) if ctx.grads[0] else None
        grad_w = torch.mm(grad.t(), x) if ctx.grads[1] else None
        return grad_x, grad_w


class _FewOutputsLinear(torch.autograd.Function):
    """``x @ w.T`` for long ``x: [..., K]`` and a ``w: [N, K]`` with few rows: forward by
    torch (MKL is faster with so few output columns), both gradients by oneDNN."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x, w)
        ctx.grads = (x.requires_grad, w.requires_grad)
        return torch.matmul(x, w.t())

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> Tuple[Optional[torch.Tensor], ...]:
        x, w = ctx.saved_tensors
        n, k = w.shape
        g2 = grad.reshape(-1, n)
        grad_x = _onednn_mm(g2, w.t()).view(x.shape) if ctx.grads[0] else None
        # [N, M] x [M, K] as oneDNN's x @ w.T with x = g2^T, w = x^T: transposed
        # views, read in place.
        grad_w = _onednn_mm(g2.t(), x.reshape(-1, k).t()) if ctx.grads[1] else None
        return grad_x, grad_w


def few_outputs_linear(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """``x @ weight.T`` for ``x: [..., K]`` and a ``weight: [N, K]`` with at most 8 rows
    (scores against a few pulled-back queries, one per head); on a CPU its backward is
    oneDNN's where that is faster (see :func:`cpu_gemm_backend`)."""
    rows = x.numel() // max(x.shape[-1], 1)
    if weight.shape[0] <= 8 and _onednn_pays(rows, x, weight):
        return _FewOutputsLinear.apply(x, weight)
    return torch.matmul(x, weight.t())

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
                acc: Optional[torch.Tensor] = None,
                min_onednn_rows: Optional[int] = None) -> torch.Tensor:
    """``x @ weight.T`` (plus ``acc``, updated in place where it can be) for ``x: [M, a]``.

    ``acc``, when given, must be a fresh tensor the caller owns (a sum being built);
    ``min_onednn_rows`` moves the long-product threshold below (16,384 rows) for a caller
    that measured its shape.  On a CPU three shapes get special treatment, all exact:

    * a tiny weight (``<= 8`` outputs, ``<= 16`` inputs: width-4 models): GEMM kernels
      are slow on ``[M, 4] x [4, 4]`` shapes, so groups of ``r = 4`` rows are multiplied
      at once by the block-diagonal ``I_r ⊗ W`` (``[M / r, r·a] x [r·a, r·b]``, extra
      terms exactly zero), 4x faster forward and 2x for the weight gradient (measured,
      one thread);
    * a long product (at least 16,384 rows) with both widths at least 16: oneDNN's
      forward and input gradient where torch has it (see :func:`cpu_gemm_backend`),
      MKL's weight gradient;
    * otherwise a long product with widths that are not multiples of 16:
      :class:`PaddedLinear`.
    """
    r = 4
    b, a = weight.shape
    if (x.dim() == 2 and min(a, b) >= _ONEDNN_MIN_WIDTH
            and _onednn_pays(x.shape[0], x, weight, min_onednn_rows)):
        y = _OneDNNLinear.apply(x, weight)
        return y if acc is None else acc.add_(y)
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
