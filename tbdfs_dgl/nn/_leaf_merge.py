r"""The path encoder's last hop and its merge layer's first linear map as one CPU kernel.

At the last hop, leaf :math:`p` (a child of the chain state :math:`o_q` of its parent
:math:`q`, under root :math:`b`) ends its path's attention with, per head :math:`m`,
:math:`a^{(m)}_p = \alpha_{pm} o^{(m)}_q + \beta_{pm} v^{(m)}_p`, where the leaf's value
:math:`v_p = \sum_i V_i[\iota_i(p)]` is a sum of rows gathered from the input parts'
distinct rows (a node's, an interaction's, a time gap's value).  The merge layer then takes
:math:`u_p = \mathrm{dropout}(\mathrm{ReLU}(W_1 [h_b \| a_p] + b_1))`.  Per head, with
:math:`W_1^{(m)}` the columns of :math:`W_1` that meet head :math:`m`,

.. math::
    W_1 [h_b \| a_p] + b_1 = r_b + \sum_m \alpha_{pm} P_{qm} + \beta_{pm} \sum_i C_{i,m}[\iota_i(p)]

with :math:`r_b = W_1^{h} h_b + b_1` once per root, :math:`P_{qm} = W_1^{(m)} o^{(m)}_q` once
per parent and :math:`C_{i,m} = W_1^{(m)} V^{(m)}_i` once per distinct row.  What is left
per leaf is weighted sums of those rows, the ReLU and the dropout: no per-leaf matrix
product (the merge layer's product over every path was the largest cost of the branch),
and no per-leaf tensor but the output, written once (``csrc/leaf_merge.h``).

A part given as raw rows :math:`X_i` with its value map :math:`W_V^{(i)}` (so that
:math:`V_i = X_i W_V^{(i)\top}`) gets :math:`C_{i,m} = X_i (W_1^{(m)} W_V^{(i,m)})^\top`:
the two maps composed first (a ``[H·W, c]`` matrix), then one long product over the rows,
where that costs no more multiply-adds than the two in turn (``c·H·W <= H·d·(c + W)``;
equal at the defaults).  The one long product beats the value map followed by per-head
batched products and their layout copies (U = 24,000 time gaps: 36 against 57 ms forward
and backward, one thread; docs/benchmarks/model.md, round 19).
"""
from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

import torch
from torch import nn

from ._gemm import rows_linear
from ._native import as_numpy, float32_cpu_kernel, native

__all__ = ["available", "keep_mask", "leaf_merge"]


def available(device: torch.device, dtype: torch.dtype) -> bool:
    """Whether :func:`leaf_merge` can run: the C++ kernels built, a CPU, float32, outside
    autocast (and ``torch.compile``, where :func:`~._native.native` says no)."""
    return float32_cpu_kernel("leaf_merge_forward", device, dtype)


class _LeafMerge(torch.autograd.Function):
    """``out [N, W]`` from ``root [B, W]``, ``parent [B·n, H, W]``, ``alpha``/``beta``
    ``[N, H]`` and the parts' ``(rows [U_i, H, W], index [N])`` (see the module)."""

    @staticmethod
    def forward(ctx, root: torch.Tensor, parent: torch.Tensor, alpha: torch.Tensor,
                beta: torch.Tensor, seed: Optional[int], keep: float, k: int,
                *parts: torch.Tensor) -> torch.Tensor:
        rows, index = list(parts[0::2]), list(parts[1::2])
        rows = [r.contiguous() for r in rows]
        index = [i.contiguous() for i in index]
        root, parent = root.contiguous(), parent.contiguous()
        alpha, beta = alpha.contiguous(), beta.contiguous()
        out = root.new_empty(alpha.shape[0], root.shape[1])
        native("leaf_merge_forward")(
            as_numpy(root), as_numpy(parent), as_numpy(alpha), as_numpy(beta),
            [as_numpy(r) for r in rows], [as_numpy(i) for i in index], seed, keep, k,
            out.numpy(), torch.get_num_threads())
        ctx.save_for_backward(out, root, parent, alpha, beta, *rows, *index)
        ctx.meta = (seed is not None, 1.0 / keep, k, len(rows))
        # Its backward kernel, fetched now: a kernel switched off later (``_native``)
        # must not leave this forward without its gradient.
        ctx.kernel = native("leaf_merge_backward", always=True)
        return out

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> Tuple:
        dropout, scale, k, n = ctx.meta
        out, root, parent, alpha, beta, *rest = ctx.saved_tensors
        rows, index = rest[:n], rest[n:]
        grad = grad.contiguous()
        g_root, g_parent = torch.empty_like(root), torch.empty_like(parent)
        g_alpha, g_beta = torch.empty_like(alpha), torch.empty_like(beta)
        g_rows = [torch.zeros_like(r) for r in rows]
        ctx.kernel(
            as_numpy(grad), as_numpy(out), as_numpy(root), as_numpy(parent), as_numpy(alpha),
            as_numpy(beta), [as_numpy(r) for r in rows], [as_numpy(i) for i in index], dropout,
            scale, k,
            g_root.numpy(), g_parent.numpy(), g_alpha.numpy(), g_beta.numpy(),
            [g.numpy() for g in g_rows], torch.get_num_threads())
        part_grads: List = []
        for g in g_rows:
            part_grads += [g, None]
        return (g_root, g_parent, g_alpha, g_beta, None, None, None, *part_grads)


#: From this many distinct rows the composed product goes to oneDNN (where it is the CPU
#: GEMM backend): forward and backward of [U, 100] x [100, 200], one thread, MKL / oneDNN:
#: 12.2 / 10.5 ms at 6,000 rows, 19.4 / 18.2 at 10,000, 28.1 / 20.8 at 14,000.
_COMPOSED_ONEDNN_ROWS = 4096


def _head_rows(rows: torch.Tensor, value_weight: Optional[torch.Tensor], w: torch.Tensor
               ) -> torch.Tensor:
    """``[U, H, W]``: each head's columns of the merge layer (``w``: ``[W, H, d]``) applied
    to a part's value rows: ``rows`` themselves (``[U, H·d]``) or, with ``value_weight``
    (``[H·d, c]``), the value map of the raw ``rows`` (``[U, c]``), composed with them
    first where that is no costlier (see the module)."""
    W, H, d = w.shape
    if value_weight is not None:
        c = value_weight.shape[1]
        if c * W <= d * (c + W):
            composed = torch.einsum("whd,hdc->hwc", w, value_weight.view(H, d, c).to(w.dtype))
            return rows_linear(rows.to(w.dtype), composed.reshape(H * W, c),
                               min_onednn_rows=_COMPOSED_ONEDNN_ROWS).view(-1, H, W)
        rows = rows_linear(rows, value_weight)
    return torch.einsum("uhd,whd->uhw", rows.view(-1, H, d).to(w.dtype), w)


def leaf_merge(root_term: torch.Tensor, states: torch.Tensor, alpha: torch.Tensor,
               beta: torch.Tensor, parts: Sequence[Tuple[torch.Tensor, ...]],
               weight: torch.Tensor, drop: nn.Dropout) -> torch.Tensor:
    r"""The merge layer's hidden units of every path, fused with the last hop (see the
    module; only where :func:`available`).

    Parameters
    ----------
    root_term : torch.Tensor
        ``[B, W]``: :math:`W_1^{h} h_b + b_1` per root.
    states : torch.Tensor
        ``[B, n, H, d]``: the chain states :math:`o_q` of the last hop's parents.
    alpha, beta : torch.Tensor
        ``[B, n, k, H]`` (or ``H = 1``, shared by the heads): each leaf's weights of its
        parent's state and of its own value.
    parts : sequence of (torch.Tensor, torch.Tensor) or (torch.Tensor, torch.Tensor, torch.Tensor)
        The leaves' value parts: rows ``[U_i, H·d]`` and the ``[B·n·k]`` int64 row of
        every leaf (absent leaves may point anywhere: their ``beta`` is 0); or raw rows
        ``[U_i, c]``, that index and their value map ``[H·d, c]``.
    weight : torch.Tensor
        ``[W, H·d]``: the columns of :math:`W_1` that meet the attention output.
    drop : torch.nn.Dropout
        Dropout on the hidden units, drawn in the kernel as :func:`keep_mask` draws it.

    Returns
    -------
    torch.Tensor
        ``[B, n·k, W]``.
    """
    B, n, H, d = states.shape
    k = alpha.shape[2]
    W = weight.shape[0]
    N = B * n * k
    w = weight.view(W, H, d)
    # Per parent and per distinct row, the map of each head's columns: [rows, H, W].
    parent = torch.einsum("qhd,whd->qhw", states.reshape(B * n, H, d), w)
    flat: List[torch.Tensor] = []
    for part in parts:
        rows, index = part[0], part[1]
        flat += [_head_rows(rows, part[2] if len(part) > 2 else None, w), index]
    a = alpha.expand(B, n, k, H).reshape(N, H)
    b = beta.expand(B, n, k, H).reshape(N, H)
    p = drop.p if drop.training else 0.0
    seed = _draw_seed() if p > 0.0 else None
    out = _LeafMerge.apply(root_term, parent, a, b, seed, 1.0 - p, k, *flat)
    return out.view(B, n * k, W)


def _draw_seed() -> int:
    """A seed for the kernel's dropout, from torch's default generator (so that
    ``torch.manual_seed`` makes a run repeatable)."""
    return int(torch.randint(0, 2**62, (), dtype=torch.int64))


def keep_mask(shape: Sequence[int], p: float) -> torch.Tensor:
    """A dropout keep mask (1 with probability ``1 - p``), ``uint8`` of ``shape`` (its last
    dim the units of a row), drawn as :func:`leaf_merge` draws its dropout where the kernel
    is built, with torch's ``bernoulli_`` where it is not.

    The unfused path draws its masks here, so that a seeded run draws the same whichever
    path runs.  The kernel draws each unit's decision from a counter-based generator
    (``csrc/dropout_bits.h``) as it writes the unit: no mask is drawn into memory and read
    back (torch's ``bernoulli_`` took ~12 ms of a default tBDFS step for the leaves' 6
    million units)."""
    fn = native("dropout_keep_mask")
    if fn is None:
        return torch.empty(tuple(shape), dtype=torch.uint8).bernoulli_(1.0 - p)
    mask = torch.empty(tuple(shape), dtype=torch.uint8)
    if mask.numel() == 0:
        return mask
    fn(_draw_seed(), 1.0 - p, mask.view(-1, mask.shape[-1]).numpy(), torch.get_num_threads())
    return mask
