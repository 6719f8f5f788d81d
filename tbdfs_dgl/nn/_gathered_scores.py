"""Attention scores of instances whose inputs are rows of small tables, by a CPU kernel.

Where an input part comes as distinct rows (``tbdfs_dgl.nn._distinct``: node rows,
interactions, time gaps), an instance's score against its root's pulled-back query is a
dot product with a gathered row; ``csrc/gathered_scores.cpp`` reads the rows in place
instead of gathering a ``[N, K]`` tensor per part first (and scattering its gradient back),
which the path encoder's last hop would otherwise do for its 60,000 leaves at the defaults.
"""
from __future__ import annotations

from typing import List, Sequence, Tuple

import torch

from ._native import as_numpy, float32_cpu_kernel, native

__all__ = ["available", "gathered_scores"]


def available(device: torch.device, dtype: torch.dtype) -> bool:
    """Whether :func:`gathered_scores` can run: the C++ kernels built, a CPU, float32, outside
    autocast (and ``torch.compile``, where :func:`~._native.native` says no)."""
    return float32_cpu_kernel("gathered_scores_forward", device, dtype)


class _GatheredScores(torch.autograd.Function):
    @staticmethod
    def forward(ctx, n: int, *args: torch.Tensor) -> torch.Tensor:
        k = len(args) // 3
        queries = [q.contiguous() for q in args[:k]]
        rows = [r.contiguous() for r in args[k:2 * k]]
        index = [i.contiguous() for i in args[2 * k:]]
        H = queries[0].shape[1]
        scores = queries[0].new_empty(n, H)
        native("gathered_scores_forward")([as_numpy(q) for q in queries], [as_numpy(r) for r in rows],
                                          [as_numpy(i) for i in index], scores.numpy(),
                                          torch.get_num_threads())
        ctx.save_for_backward(*queries, *rows, *index)
        ctx.k = k
        # Fetched now: a kernel switched off later must not leave this forward without
        # its gradient.
        ctx.kernel = native("gathered_scores_backward", always=True)
        return scores

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> Tuple:
        k = ctx.k
        saved = ctx.saved_tensors
        queries, rows, index = saved[:k], saved[k:2 * k], saved[2 * k:]
        want_q = ctx.needs_input_grad[1:1 + k]
        want_r = ctx.needs_input_grad[1 + k:1 + 2 * k]
        g_q = [torch.empty_like(q) if w else None for q, w in zip(queries, want_q)]
        g_r = [torch.zeros_like(r) if w else None for r, w in zip(rows, want_r)]
        ctx.kernel(
            [as_numpy(q) for q in queries], [as_numpy(r) for r in rows], [as_numpy(i) for i in index],
            as_numpy(grad), [None if g is None else g.numpy() for g in g_q],
            [None if g is None else g.numpy() for g in g_r], torch.get_num_threads())
        return (None, *g_q, *g_r, *([None] * k))


def gathered_scores(queries: Sequence[torch.Tensor],
                    tables: Sequence[Tuple[torch.Tensor, torch.Tensor]]) -> torch.Tensor:
    """``scores[p, m] = Σ_i queries[i][b, m] · rows_i[index_i[p]]`` for the ``N``
    instances ``p`` (``b = p // (N // B)``: each root's instances contiguous).

    Parameters
    ----------
    queries : sequence of torch.Tensor
        ``[B, H, K_i]``: each part's slice of the roots' pulled-back queries.
    tables : sequence of (torch.Tensor, torch.Tensor)
        Each part's rows ``[U_i, K_i]`` and the instances' ``[N]`` int64 row index.

    Returns
    -------
    torch.Tensor
        ``[N, H]``.
    """
    n = tables[0][1].shape[0]
    flat: List[torch.Tensor] = list(queries) + [r for r, _ in tables] + [i for _, i in tables]
    return _GatheredScores.apply(n, *flat)
