"""The path aggregator's attention (scores, masked softmax, dropout, weighted sum) as one
CPU kernel.

:class:`~tbdfs_dgl.nn.PathAggregator` attends from each root's pulled-back query over its
``[P, D]`` path representations.  In torch ops that is two batched products forward, four
backward, a masked softmax with its copies and their backward: about ten passes over the
``[B, P, D]`` features (60,000 x 100 floats at the defaults), each a trip through memory.
``csrc/path_attention.cpp`` does it root by root, the root's paths staying in cache between
the score pass and the weighted sum: one pass over the features forward, one backward.
"""
from __future__ import annotations

from typing import Optional, Tuple

import torch

from ._native import as_numpy, float32_cpu_kernel, native

__all__ = ["available", "path_attention"]


def available(device: torch.device, dtype: torch.dtype) -> bool:
    """Whether :func:`path_attention` can run: the C++ kernels built, a CPU, float32, outside
    autocast (and ``torch.compile``, where :func:`~._native.native` says no)."""
    return float32_cpu_kernel("path_attention_forward", device, dtype)


class _PathAttention(torch.autograd.Function):
    """``(agg [B, H, D], weight [B, H, P])`` from ``feat [B, P, D]``, ``query [B, H, D]``,
    ``mask [B, P]`` and the dropout factors ``drop [B, H, P]`` (or ``None``)."""

    @staticmethod
    def forward(ctx, feat: torch.Tensor, query: torch.Tensor, mask: torch.Tensor,
                drop: Optional[torch.Tensor]) -> Tuple[torch.Tensor, torch.Tensor]:
        feat, query, mask = feat.contiguous(), query.contiguous(), mask.contiguous()
        B, P, D = feat.shape
        H = query.shape[1]
        prob = feat.new_empty(B, H, P)
        weight = prob if drop is None else feat.new_empty(B, H, P)
        agg = feat.new_empty(B, H, D)
        native("path_attention_forward")(
            as_numpy(feat), as_numpy(query), as_numpy(mask),
            None if drop is None else as_numpy(drop), prob.numpy(),
            None if drop is None else weight.numpy(), agg.numpy(), torch.get_num_threads())
        ctx.save_for_backward(feat, query, mask, prob, drop)
        # Fetched now: a kernel switched off later must not leave this forward without
        # its gradient.
        ctx.kernel = native("path_attention_backward", always=True)
        # A gradient that never reached the weights comes as None, not as zeros.
        ctx.set_materialize_grads(False)
        if drop is None:
            # The weights are the probabilities: a second output of the same tensor would
            # be aliased; a view keeps autograd's bookkeeping straight.
            weight = prob.view_as(prob)
        return agg, weight

    @staticmethod
    def backward(ctx, grad_agg: Optional[torch.Tensor], grad_weight: Optional[torch.Tensor]
                 ) -> Tuple:
        feat, query, mask, prob, drop = ctx.saved_tensors
        if grad_agg is None:
            grad_agg = torch.zeros(query.shape, dtype=feat.dtype)
        g_feat = torch.empty_like(feat) if ctx.needs_input_grad[0] else None
        g_query = torch.empty_like(query)
        ctx.kernel(
            as_numpy(feat), as_numpy(query), as_numpy(mask),
            None if drop is None else as_numpy(drop), as_numpy(prob), as_numpy(grad_agg),
            None if grad_weight is None else as_numpy(grad_weight),
            None if g_feat is None else g_feat.numpy(), g_query.numpy(),
            torch.get_num_threads())
        return g_feat, g_query, None, None


def path_attention(feat: torch.Tensor, query: torch.Tensor, mask: torch.Tensor,
                   drop: Optional[torch.Tensor] = None) -> Tuple[torch.Tensor, torch.Tensor]:
    r"""Per root ``b`` and head ``h``: :math:`w_{hp} = \mathrm{softmax}_p(q_h \cdot r_p)
    \cdot \mathrm{drop}_{hp}` over the present paths, and :math:`\sum_p w_{hp} r_p` (only
    where :func:`available`).

    Parameters
    ----------
    feat : torch.Tensor
        ``[B, P, D]`` path representations.
    query : torch.Tensor
        ``[B, H, D]`` per-head queries (already scaled).
    mask : torch.Tensor
        bool ``[B, P]``, ``True`` for present paths.
    drop : torch.Tensor, optional
        ``[B, H, P]`` attention dropout factors (0 or ``1 / (1 - rate)``), or ``None``.

    Returns
    -------
    agg : torch.Tensor
        ``[B, H, D]`` weighted sums (zero for a root without any path).
    weight : torch.Tensor
        ``[B, P, H]`` weights (a view of a ``[B, H, P]`` tensor), zero on absent paths.
    """
    agg, weight = _PathAttention.apply(feat, query, mask, drop)
    return agg, weight.transpose(1, 2)
