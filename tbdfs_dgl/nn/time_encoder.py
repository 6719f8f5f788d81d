"""Functional time encoding (TGAT's Bochner encoding in its cosine/sine form)."""
from __future__ import annotations

import math
from typing import Callable, Tuple

import numpy as np
import torch
from torch import nn

from ._native import native

__all__ = ["TimeEncoder"]


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


class _CosSin(torch.autograd.Function):
    """``scale·[cos(w·Δt), sin(w·Δt)]`` (interleaved), phase in float64, result float32.

    A custom function because the encoder runs on every path slot (``B·P·L`` gaps): the
    phase is reduced to ``[-π, π]`` in float64 (exact to ~1e-8 rad even at Δt = 1e8 s)
    so that the transcendental calls run in fast float32 on small arguments (float64 ones
    on ~1e8 rad arguments take a slow reduction path), and backward reuses the saved
    output instead of evaluating sin/cos again.  On the CPU the forward pass is one call
    into the C++ extension (``csrc/time_encode.h``), which does the same in a single
    vectorised pass instead of seven passes over float64 temporaries.
    """

    @staticmethod
    def forward(ctx, dt: torch.Tensor, weight: torch.Tensor, scale: float) -> torch.Tensor:
        kernel = native("time_encode") if dt.device.type == "cpu" else None
        if kernel is not None:
            out = _encode_native(kernel, dt, weight, scale)
            ctx.save_for_backward(dt, out)
            return out.flatten(-2)
        # Δt reaches 1e8 s while w reaches 1e-9: a float32 phase would have no correct
        # digit left for the high frequencies, so only the reduced phase is cast down.
        phase = dt.unsqueeze(-1) * weight.to(torch.float64)
        turns = torch.round(phase * (0.5 / math.pi))
        phase.add_(turns, alpha=-2.0 * math.pi)
        del turns
        phase32 = phase.to(torch.float32)
        del phase
        out = torch.empty(*phase32.shape, 2, dtype=torch.float32, device=dt.device)
        torch.cos(phase32, out=out[..., 0])
        torch.sin(phase32, out=out[..., 1])
        out.mul_(scale)
        ctx.save_for_backward(dt, out)
        return out.flatten(-2)

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor) -> Tuple[None, torch.Tensor, None]:
        dt, out = ctx.saved_tensors
        grad = grad_out.unflatten(-1, (-1, 2))
        # d/dphase of scale·(cos, sin) is scale·(-sin, cos) = (-out_sin, out_cos).
        grad_phase = grad[..., 1] * out[..., 0] - grad[..., 0] * out[..., 1]
        # dphase/dw = Δt; float32 keeps a relative precision, all a gradient needs.
        dt32 = dt.to(torch.float32).reshape(-1)
        grad_w = dt32 @ grad_phase.reshape(dt32.shape[0], out.shape[-2])
        return None, grad_w, None


class TimeEncoder(nn.Module):
    r"""Learnable harmonic time encoding.

    .. math::
        \Phi(\Delta t) = \sqrt{1/d}\,[\cos(w_1\Delta t), \sin(w_1\Delta t), \ldots,
        \cos(w_d\Delta t), \sin(w_d\Delta t)]

    with ``d = time_dim // 2`` learnable frequencies initialised like TGAT,
    :math:`w_k = 10^{-9 (k-1)/(d-1)}`.

    Parameters
    ----------
    time_dim : int
        Output width (even, ``>= 2``); it holds ``time_dim // 2`` cosine/sine pairs.
    use_time : bool, optional
        If ``False`` the encoding is identically zero (the paper's "−time" ablation) and the
        module has no parameter.  Modules that consume it then drop their time inputs
        altogether (see :attr:`effective_dim`).  Default: ``True``.

    Notes
    -----
    ``w·Δt`` is formed in float64 (Δt up to ~1e8 s, w down to 1e-9) and the result is cast
    to float32.
    """

    def __init__(self, time_dim: int, use_time: bool = True) -> None:
        super().__init__()
        if not isinstance(time_dim, int) or time_dim < 2 or time_dim % 2:
            raise ValueError(f"time_dim must be an even integer >= 2, got {time_dim!r}")
        self.time_dim = time_dim
        self.use_time = bool(use_time)
        self.num_freqs = time_dim // 2
        if self.use_time:
            self.weight = nn.Parameter(torch.empty(self.num_freqs))
        else:
            self.register_parameter("weight", None)
        self.reset_parameters()

    @property
    def effective_dim(self) -> int:
        """Width that carries information: ``time_dim``, or 0 when ``use_time=False``."""
        return self.time_dim if self.use_time else 0

    def reset_parameters(self) -> None:
        """Reinitialise the frequencies to ``1 / 10**linspace(0, 9, d)`` (TGAT)."""
        if self.weight is not None:
            with torch.no_grad():
                freqs = 1.0 / 10 ** np.linspace(0, 9, self.num_freqs, dtype=np.float64)
                self.weight.copy_(torch.from_numpy(freqs))

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
        return _CosSin.apply(dt, self.weight, math.sqrt(1.0 / self.num_freqs))

    def extra_repr(self) -> str:
        return f"time_dim={self.time_dim}, use_time={self.use_time}"
