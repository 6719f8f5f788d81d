"""Functional time encoding (TGAT's Bochner encoding in its cosine/sine form)."""
from __future__ import annotations

import math
import warnings
from fractions import Fraction
from typing import Callable, Optional, Tuple

import numpy as np
import torch
from torch import nn

from ._compile import compiling
from ._native import native

__all__ = ["TIME_ENCODINGS", "TimeEncoder", "TimeEncodingRangeError", "reduce_phase",
           "resolve_time_encoding"]

# pi/2 = _C1 + _C2 + _C3 (csrc/phase_reduce.h): _C1 and _C2 have 23 significant bits, so
# q * _C1 and q * _C2 are exact for |q| < 2^30 and the reduction below is exact but for
# its last rounding.
_C1 = float.fromhex("0x1.921fb4p+0")
_C2 = float.fromhex("0x1.4442d0p-24")
_C3 = float.fromhex("0x1.8469898cc5170p-48")
# Phases at or beyond this (or not finite) go to the exact large-argument reduction.
_SMALL = 2.0**29
_LOW_BITS = (1 << 27) - 1  # cleared to split a double into 26 + 27 significant bits


def _high_half(x: torch.Tensor) -> torch.Tensor:
    """``x`` with its low 27 mantissa bits cleared (a split that no fma can disturb)."""
    return (x.view(torch.int64) & ~_LOW_BITS).view(torch.float64)


def _two_over_pi_bits(bits: int) -> int:
    """``floor(2/pi * 2**bits)`` from Machin's formula in integers (computed once)."""
    prec = bits + 64

    def arctan_inv(x: int) -> int:
        total = term = (1 << prec) // x
        n, sign = 1, -1
        while term:
            term //= x * x
            n += 2
            total += sign * (term // n)
            sign = -sign
        return total

    pi = 4 * (4 * arctan_inv(5) - arctan_inv(239))  # pi * 2**prec
    return (2 << (prec + bits)) // pi


_TWO_OVER_PI_BITS = 1400  # |w dt| < 2^1024, plus 376 bits of fraction
_TWO_OVER_PI: Optional[int] = None


def _reduce_exact_python(w: float, dt: float) -> Tuple[int, float]:
    """``w * dt = q * pi/2 + y`` in exact rational arithmetic (no extension needed)."""
    global _TWO_OVER_PI
    if _TWO_OVER_PI is None:
        _TWO_OVER_PI = _two_over_pi_bits(_TWO_OVER_PI_BITS)
    x = Fraction(w) * Fraction(dt)
    t = x * Fraction(_TWO_OVER_PI, 1 << _TWO_OVER_PI_BITS)  # x * 2/pi, error < 2^-376
    q = round(t)
    return q % 4, float(t - q) * (math.pi / 2)


def reduce_phase(w: torch.Tensor, dt: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """Exact argument reduction: ``w * dt = quadrant * pi/2 + y`` for float64 tensors.

    The phase is the exact product (``p + err`` by a two-product), so the result is right
    to ~1e-16 rad however large ``w * dt`` is; a rounded float64 product is off by up to
    0.5 rad at ``2**52``.

    Parameters
    ----------
    w, dt : torch.Tensor
        float64, broadcastable to each other.

    Returns
    -------
    quadrant : torch.Tensor
        int64 in ``0..3``.
    y : torch.Tensor
        float64 in ``[-pi/4, pi/4]`` (NaN where ``w * dt`` is not finite).
    """
    w, dt = torch.broadcast_tensors(w, dt)
    p = w * dt
    w_hi, dt_hi = _high_half(w.contiguous()), _high_half(dt.contiguous())
    w_lo, dt_lo = w - w_hi, dt - dt_hi
    err = ((w_hi * dt_hi - p) + w_hi * dt_lo + w_lo * dt_hi) + w_lo * dt_lo
    q = torch.round(p * (2.0 / math.pi))
    y = ((p - q * _C1) - q * _C2) - q * _C3 + err
    quadrant = torch.remainder(q, 4).to(torch.int64)
    large = ~(p.abs() < _SMALL)
    if bool(large.any()):
        idx = large.nonzero(as_tuple=True)
        wl = w[idx].detach().cpu().contiguous().numpy()
        dl = dt[idx].detach().cpu().contiguous().numpy()
        kernel = native("reduce_phases")
        if kernel is not None:
            ql, yl = kernel(wl, dl)
        else:
            ql = np.zeros(len(wl), np.int64)
            yl = np.full(len(wl), np.nan)
            for i, (a, b) in enumerate(zip(wl.tolist(), dl.tolist())):
                if math.isfinite(a * b):
                    ql[i], yl[i] = _reduce_exact_python(a, b)
        quadrant = quadrant.clone()
        y = y.clone()
        quadrant[idx] = torch.from_numpy(np.asarray(ql)).to(quadrant.device)
        y[idx] = torch.from_numpy(np.asarray(yl)).to(y.device)
    return quadrant, y


def _encode_native(kernel: Callable[..., None], dt: torch.Tensor, weight: torch.Tensor,
                   scale: float) -> torch.Tensor:
    """The C++ kernel on CPU tensors: ``[*dt.shape, d, 2]`` float32, same values as the
    torch path below (double phase reduction, float sine/cosine)."""
    d = weight.shape[0]
    flat = dt.detach().reshape(-1).contiguous()
    out = torch.empty(flat.shape[0], 2 * d, dtype=torch.float32)
    kernel(flat.numpy(), weight.detach().to(torch.float64).contiguous().numpy(), float(scale),
           out.numpy(), torch.get_num_threads())
    return out.view(*dt.shape, d, 2)


def _reduced_phase(dt: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """``w·Δt`` reduced to about ``[-π, π]`` (float32 ``[*dt.shape, d]``), exact to ~1e-15
    rad before the cast.  Four passes in the common case; the exact pieces run only on the
    frequencies whose ``|w|·max|Δt|`` needs them (TGAT's grid: a handful at most)."""
    phase = dt.unsqueeze(-1) * w
    err_cols = large_cols = None
    if dt.numel() and w.numel():
        # NaN reaches compare False, so NaN inputs take the exact (NaN-keeping) branches.
        reach = w.abs() * dt.abs().max()
        err_cols = (~(reach < 2.0**26)).nonzero(as_tuple=True)[0]
        large_cols = (~(reach < _SMALL)).nonzero(as_tuple=True)[0]
    # Kept before the in-place reduction below: the exact pieces need the rounded products.
    p_err = phase[..., err_cols] if err_cols is not None and len(err_cols) else None
    p_large = phase[..., large_cols] if large_cols is not None and len(large_cols) else None
    # 2π = 4·(_C1 + _C2 + _C3): q·4·_C1 is exact (23-bit head) and q·4·(_C2 + _C3) errs
    # by ~2^-50 rad for the q < 2^27 that reach here.
    turns = torch.round(phase * (0.5 / math.pi))
    reduced = phase.sub_(turns, alpha=4 * _C1).sub_(turns, alpha=4 * (_C2 + _C3))
    del turns, phase
    if p_err is not None:
        # The rounded product is off by up to ulp(w·Δt)/2: add that error (two-product).
        wc = w[err_cols]
        w_hi = _high_half(wc.contiguous())
        dt_hi = _high_half(dt.contiguous())
        w_lo, dt_lo = wc - w_hi, (dt - dt_hi).unsqueeze(-1)
        dt_hi = dt_hi.unsqueeze(-1)
        err = (dt_hi * w_hi).sub_(p_err)
        err.add_(dt_lo * w_hi).add_(dt_hi * w_lo).add_(dt_lo * w_lo)
        reduced[..., err_cols] += err
        del err
    if p_large is not None:
        large = ~(p_large.abs() < _SMALL)
        if bool(large.any()):
            idx = large.nonzero(as_tuple=True)
            dts = dt.unsqueeze(-1).expand_as(p_large)[idx]
            quadrant, y = reduce_phase(w[large_cols].expand_as(p_large)[idx], dts)
            # y + quadrant·π/2 with the quadrant taken in {-1, 0, 1, 2}: within [-3π/4, 5π/4]
            fixed = reduced[..., large_cols]
            fixed[idx] = y + (torch.remainder(quadrant + 1, 4) - 1).to(y.dtype) * (math.pi / 2)
            reduced[..., large_cols] = fixed
    return reduced.to(torch.float32)


def _exact_pairs(dt: torch.Tensor, weight: torch.Tensor, scale: float) -> torch.Tensor:
    """``scale·(cos, sin)(w·Δt)`` as float32 ``[*dt.shape, d, 2]``, exact for any phase: the C++
    kernel on the CPU, else the torch reduction below (no autograd)."""
    kernel = native("time_encode") if dt.device.type == "cpu" else None
    if kernel is not None:
        return _encode_native(kernel, dt, weight, scale)
    # Δt reaches 1e8 s while w reaches 1e-9, and Δt·w can be huge (nanosecond gaps):
    # the phase is reduced modulo 2π in float64 and only the reduced angle is cast down.
    phase = _reduced_phase(dt, weight.detach().to(torch.float64))
    out = torch.empty(*phase.shape, 2, dtype=torch.float32, device=dt.device)
    torch.cos(phase, out=out[..., 0])
    torch.sin(phase, out=out[..., 1])
    del phase
    return out.mul_(scale) if scale != 1.0 else out


class _CosSin(torch.autograd.Function):
    """``scale·[cos(w·Δt), sin(w·Δt)]`` (interleaved), phase in float64, result float32.

    A custom function because the encoder runs on every path slot (``B·P·L`` gaps): the
    exact phase ``w·Δt`` is reduced modulo ``π/2`` in float64 (:func:`reduce_phase`:
    right to ~1e-16 rad at any magnitude, e.g. nanosecond gaps of 1e18) so that the
    transcendental calls run in fast float32 on small arguments, and backward reuses the saved
    output instead of evaluating sin/cos again.  On the CPU the forward pass is one call
    into the C++ extension (``csrc/time_encode.h``), which does the same in a single
    vectorised pass instead of seven passes over float64 temporaries.
    """

    @staticmethod
    def forward(ctx, dt: torch.Tensor, weight: torch.Tensor, scale: float) -> torch.Tensor:
        out = _exact_pairs(dt, weight, scale)
        ctx.save_for_backward(dt, out)
        return out.flatten(-2)

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor) -> Tuple[None, torch.Tensor, None]:
        dt, out = ctx.saved_tensors
        return None, _weight_grad(dt, out, grad_out), None


def _weight_grad(dt: torch.Tensor, out: torch.Tensor, grad_out: torch.Tensor) -> torch.Tensor:
    """Gradient of the frequencies from the saved output ``[*S, d, 2]``."""
    grad = grad_out.unflatten(-1, (-1, 2))
    # d/dphase of scale·(cos, sin) is scale·(-sin, cos) = (-out_sin, out_cos).
    grad_phase = grad[..., 1] * out[..., 0] - grad[..., 0] * out[..., 1]
    # dphase/dw = Δt; float32 keeps a relative precision, all a gradient needs.
    dt32 = dt.to(torch.float32).reshape(-1)
    return dt32 @ grad_phase.reshape(dt32.shape[0], out.shape[-2])


# The fixed-cost reduction below is exact (two-product + 3-constant Cody-Waite) for phases
# under this bound; beyond it only the data-dependent exact path above is.
DEVICE_PHASE_LIMIT = 2.0**29


class TimeEncodingRangeError(ValueError):
    """A time gap times a frequency reached the range where the GPU / compiled time
    encoding is no longer exact (``|w·Δt| >= 2**29`` rad)."""


def _fixed_pairs(dt: torch.Tensor, weight: torch.Tensor,
                 scale: float) -> Tuple[torch.Tensor, torch.Tensor]:
    """``scale·(cos, sin)(w·Δt)`` (float32 ``[*dt.shape, d, 2]``) in a fixed sequence of
    elementwise ops, exact for phases under :data:`DEVICE_PHASE_LIMIT`; and the device flag
    saying whether any phase reached it (no autograd)."""
    w = weight.detach().to(torch.float64)
    p = dt.unsqueeze(-1) * w
    # Two-product: p + err is the exact w·Δt (the halves' products are exact).
    w_hi = _high_half(w.contiguous())
    dt_hi = _high_half(dt.contiguous()).unsqueeze(-1)
    w_lo, dt_lo = w - w_hi, dt.unsqueeze(-1) - dt_hi
    err = ((dt_hi * w_hi - p) + dt_lo * w_hi + dt_hi * w_lo) + dt_lo * w_lo
    q = torch.round(p * (2.0 / math.pi))
    y = ((p - q * _C1) - q * _C2) - q * _C3 + err
    # y + quadrant·π/2 with the quadrant in {-1, 0, 1, 2}: within [-3π/4, 5π/4].
    phase = (y + (torch.remainder(q + 1, 4) - 1) * (math.pi / 2)).to(torch.float32)
    out = torch.stack([torch.cos(phase), torch.sin(phase)], dim=-1) * scale
    overflow = ~(p.abs() < DEVICE_PHASE_LIMIT).all()  # NaN counts as overflow
    return out, overflow


class _CosSinFixed(torch.autograd.Function):
    """``_CosSin`` for CUDA and ``torch.compile``: the same exact reduction for phases under
    :data:`DEVICE_PHASE_LIMIT`, in a fixed sequence of elementwise ops — no data-dependent
    branch, no host round trip.  Also returns whether any phase reached the limit (a device
    flag, read where the caller synchronises anyway)."""

    @staticmethod
    def forward(ctx, dt: torch.Tensor, weight: torch.Tensor,
                scale: float) -> Tuple[torch.Tensor, torch.Tensor]:
        out, overflow = _fixed_pairs(dt, weight, scale)
        ctx.save_for_backward(dt, out)
        ctx.mark_non_differentiable(overflow)
        return out.flatten(-2), overflow

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor, _grad_flag: Optional[torch.Tensor]
                 ) -> Tuple[None, torch.Tensor, None]:
        dt, out = ctx.saved_tensors
        return None, _weight_grad(dt, out, grad_out), None


def _rotate(pairs: torch.Tensor, bias: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """``(cos, sin)(θ + b)`` (two float32 ``[*S, d]``) from the pairs ``(cos, sin)(θ)``
    ``[*S, d, 2]``, with ``cos b``, ``sin b`` from float64."""
    b = bias.detach().to(torch.float64)
    cos_b, sin_b = torch.cos(b).to(torch.float32), torch.sin(b).to(torch.float32)
    cos_t, sin_t = pairs.unbind(-1)
    return cos_t * cos_b - sin_t * sin_b, sin_t * cos_b + cos_t * sin_b


def _encode_phase_native(kernel: Callable[..., None], dt: torch.Tensor, weight: torch.Tensor,
                         bias: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """:func:`_rotate` of :func:`_exact_pairs` in one pass of the C++ kernel (CPU): the
    rotation is done where the pair is computed, so no ``[*S, d, 2]`` pair is stored."""
    d = weight.shape[0]
    flat = dt.detach().reshape(-1).contiguous()
    b = bias.detach().to(torch.float64)
    cos_out = torch.empty(flat.shape[0], d, dtype=torch.float32)
    sin_out = torch.empty(flat.shape[0], d, dtype=torch.float32)
    kernel(flat.numpy(), weight.detach().to(torch.float64).contiguous().numpy(),
           torch.cos(b).to(torch.float32).numpy(), torch.sin(b).to(torch.float32).numpy(),
           cos_out.numpy(), sin_out.numpy(), torch.get_num_threads())
    return cos_out.view(*dt.shape, d), sin_out.view(*dt.shape, d)


class _CosPhase(torch.autograd.Function):
    r"""``cos(w·Δt + b)`` (DyGLib's / TGAT's official form), float32, exact like
    :class:`_CosSin`: the exactly reduced pair ``(cos, sin)(w·Δt)`` (the C++ kernel or
    :func:`_exact_pairs` on the CPU, any phase; :func:`_fixed_pairs` when ``fixed``: GPU /
    compiled, phases under :data:`DEVICE_PHASE_LIMIT`) is rotated by the phase ``b``:
    :math:`\cos(θ + b) = \cos θ \cos b - \sin θ \sin b` (``cos b``, ``sin b`` from float64),
    within a few float32 ulps of 1 of the exact value.  Backward uses
    :math:`\sin(θ + b)` from the same pair: ``d/db = -sin(w·Δt + b)``, ``d/dw = Δt·d/db``.
    Returns the encoding and the out-of-range flag (always ``False`` unless ``fixed``)."""

    @staticmethod
    def forward(ctx, dt: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
                fixed: bool) -> Tuple[torch.Tensor, torch.Tensor]:
        kernel = native("time_encode_phase") if dt.device.type == "cpu" and not fixed else None
        if fixed:
            pairs, overflow = _fixed_pairs(dt, weight, 1.0)
            out, sin_out = _rotate(pairs, bias)
        else:
            overflow = torch.zeros((), dtype=torch.bool, device=dt.device)
            if kernel is not None:
                out, sin_out = _encode_phase_native(kernel, dt, weight, bias)
            else:
                out, sin_out = _rotate(_exact_pairs(dt, weight, 1.0), bias)
        ctx.save_for_backward(dt, sin_out)
        ctx.mark_non_differentiable(overflow)
        return out, overflow

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor, _grad_flag: Optional[torch.Tensor]
                 ) -> Tuple[None, torch.Tensor, torch.Tensor, None]:
        dt, sin_out = ctx.saved_tensors
        d = sin_out.shape[-1]
        grad_phase = (grad_out * sin_out).neg_().reshape(-1, d)
        dt32 = dt.to(torch.float32).reshape(-1)
        return None, dt32 @ grad_phase, grad_phase.sum(0), None


TIME_ENCODINGS = ("cos_sin", "cos_sin_unscaled", "cos_phase")


def resolve_time_encoding(encoding: Optional[str], normalize: Optional[bool]) -> str:
    """The encoding form from ``encoding`` or its older spelling ``normalize`` (``True``:
    ``'cos_sin'``, ``False``: ``'cos_sin_unscaled'``); ``'cos_sin'`` when neither is given.

    Raises
    ------
    ValueError
        On an unknown form, or when both are given and disagree.
    """
    by_flag = None if normalize is None else ("cos_sin" if normalize else "cos_sin_unscaled")
    if encoding is None:
        return by_flag or "cos_sin"
    if encoding not in TIME_ENCODINGS:
        raise ValueError(f"time encoding must be one of {TIME_ENCODINGS}, got {encoding!r}")
    if by_flag is not None and by_flag != encoding:
        raise ValueError(f"normalize={normalize} (encoding {by_flag!r}) disagrees with "
                         f"encoding={encoding!r}: give only one of them")
    return encoding


class TimeEncoder(nn.Module):
    r"""Learnable harmonic time encoding, in one of three forms (``encoding``).

    ``'cos_sin'`` (release 0.1), with ``d = time_dim // 2`` frequencies:

    .. math::
        \Phi(\Delta t) = \sqrt{1/d}\,[\cos(w_1\Delta t), \sin(w_1\Delta t), \ldots,
        \cos(w_d\Delta t), \sin(w_d\Delta t)]

    ``'cos_sin_unscaled'``: the same without :math:`\sqrt{1/d}` (entries in ``[-1, 1]``).

    ``'cos_phase'`` (DyGLib's TGAT and TGAT's official code), with ``d = time_dim``
    frequencies and a learnable phase :math:`b` (initialised to 0):

    .. math::
        \Phi(\Delta t) = [\cos(w_1\Delta t + b_1), \ldots, \cos(w_d\Delta t + b_d)]

    Frequencies are initialised like TGAT, :math:`w_k = 10^{-9 (k-1)/(d-1)}`.  On
    CollegeMsg the unscaled forms learned several times faster in the first steps than
    ``'cos_sin'``, and ``'cos_phase'`` fastest (``docs/learning_efficiency.md``).

    Parameters
    ----------
    time_dim : int
        Output width (``>= 2``; even for the cos/sin forms, which hold ``time_dim // 2``
        pairs).
    use_time : bool, optional
        If ``False`` the encoding is identically zero (the paper's "−time" ablation) and the
        module has no parameter.  Modules that consume it then drop their time inputs
        altogether (see :attr:`effective_dim`).  Default: ``True``.
    normalize : bool, optional
        Deprecated spelling of the form (``DeprecationWarning``): ``True`` is
        ``'cos_sin'``, ``False`` ``'cos_sin_unscaled'``.
    encoding : {'cos_sin', 'cos_sin_unscaled', 'cos_phase'}, optional
        The form above.  Default: ``'cos_sin'`` (or what ``normalize`` says).

    Notes
    -----
    The phase ``w·Δt`` is the exact product, reduced exactly (:func:`reduce_phase`), so
    the float32 result is right to float32 precision for any finite float64 ``Δt`` (NaN
    only where ``w·Δt`` overflows float64); ``'cos_phase'`` adds :math:`b` to the reduced
    phase by a rotation (a few float32 ulps of 1).  The C++ kernel (CPU) and the torch path
    (GPU, or without the extension) agree to a few float32 ulps.
    """

    def __init__(self, time_dim: int, use_time: bool = True, normalize: Optional[bool] = None,
                 encoding: Optional[str] = None) -> None:
        super().__init__()
        if normalize is not None:
            warnings.warn("TimeEncoder(normalize=...) is deprecated: use encoding='cos_sin' "
                          "(True) or 'cos_sin_unscaled' (False)", DeprecationWarning,
                          stacklevel=2)
        encoding = resolve_time_encoding(encoding, normalize)
        even = encoding != "cos_phase"
        if (not isinstance(time_dim, int) or isinstance(time_dim, bool) or time_dim < 2
                or (even and time_dim % 2)):
            kind = "an even integer" if even else "an integer"
            raise ValueError(f"time_dim must be {kind} >= 2 for encoding={encoding!r}, "
                             f"got {time_dim!r}")
        self.time_dim = time_dim
        self.use_time = bool(use_time)
        self.encoding = encoding
        self.num_freqs = time_dim if encoding == "cos_phase" else time_dim // 2
        if self.use_time:
            self.weight = nn.Parameter(torch.empty(self.num_freqs))
        else:
            self.register_parameter("weight", None)
        if self.use_time and encoding == "cos_phase":
            self.bias = nn.Parameter(torch.zeros(self.num_freqs))
        else:
            self.register_parameter("bias", None)
        # Set where the fixed-cost (GPU / compiled) encoding met a phase it cannot reduce
        # exactly; not saved with the model.  See check_range().
        self.register_buffer("range_exceeded", torch.zeros((), dtype=torch.bool),
                             persistent=False)
        self.reset_parameters()

    @property
    def normalize(self) -> bool:
        r"""Whether the output is scaled by :math:`\sqrt{1/d}` (only ``'cos_sin'``)."""
        return self.encoding == "cos_sin"

    @property
    def effective_dim(self) -> int:
        """Width that carries information: ``time_dim``, or 0 when ``use_time=False``."""
        return self.time_dim if self.use_time else 0

    def reset_parameters(self) -> None:
        """Reinitialise the frequencies to ``1 / 10**linspace(0, 9, d)`` (TGAT) and the
        phases (``'cos_phase'``) to 0."""
        if self.weight is not None:
            with torch.no_grad():
                freqs = 1.0 / 10 ** np.linspace(0, 9, self.num_freqs, dtype=np.float64)
                self.weight.copy_(torch.from_numpy(freqs))
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def forward(self, dt: torch.Tensor) -> torch.Tensor:
        """Encode time gaps.

        Parameters
        ----------
        dt : torch.Tensor
            Time gaps of any shape ``S`` (any real dtype; cast to float64).

        Returns
        -------
        torch.Tensor
            float32 of shape ``S + (time_dim,)``.
        """
        if not self.use_time:
            return torch.zeros(*dt.shape, self.time_dim, device=dt.device)
        dt = dt.to(torch.float64)
        exact = dt.device.type == "cpu" and not compiling()  # exact for any phase
        if self.encoding == "cos_phase":
            out, exceeded = _CosPhase.apply(dt, self.weight, self.bias, not exact)
        else:
            scale = math.sqrt(1.0 / self.num_freqs) if self.encoding == "cos_sin" else 1.0
            if exact:
                return _CosSin.apply(dt, self.weight, scale)
            out, exceeded = _CosSinFixed.apply(dt, self.weight, scale)
        if not exact:
            self.range_exceeded.logical_or_(exceeded)
        return out

    def check_range(self) -> None:
        """Raise :class:`TimeEncodingRangeError` if, since the module was built, the
        GPU / compiled encoding met a phase ``|w·Δt| >= 2**29`` rad, where its fixed-cost
        reduction stops being exact.  Reading the flag synchronises with the device: call
        it where you synchronise anyway (the trainer does, every ``SYNC_EVERY`` steps on a
        GPU, after each step on a CPU)."""
        if bool(self.range_exceeded):
            raise TimeEncodingRangeError(
                "a time gap times a frequency of the time encoding reached 2**29 rad, beyond "
                "which the GPU / torch.compile encoding is not exact (largest frequency "
                f"{float(self.weight.detach().abs().max()):.3g} per time unit). Measure "
                "time in coarser units (e.g. seconds instead of milliseconds or "
                "nanoseconds: gaps below ~5e8 units stay exact at TGAT's largest frequency "
                "of 1), or run the model on the CPU without compiling, whose encoding is "
                "exact for any gap.")

    def extra_repr(self) -> str:
        return (f"time_dim={self.time_dim}, use_time={self.use_time}, "
                f"encoding={self.encoding!r}")
