"""Attention over a root's path representations (tBDFS's DFS branch, step 2)."""
from __future__ import annotations

import math
from typing import Optional, Tuple, Union

import torch
import torch.nn.functional as F
from torch import nn

from .._deprecation import renamed_kwargs
from . import _path_attention
from ._common import AGG_MODES, WIDTH_RENAMES, check_heads
from ._slots import SlotAverage, SlotScores, slot_product

__all__ = ["PathAggregator"]


def _path_softmax(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``masked_softmax(scores, mask.unsqueeze(-1), dim=1)`` for ``[B, P, H]`` scores and a
    ``[B, P]`` mask (same values and gradients), returned as a ``[B, P, H]`` view of a
    ``[B, H, P]`` tensor.

    Normalising along the last dim of the transposed copy is 2.5-4x faster (forward +
    backward, one CPU thread) than along dim 1 with the heads innermost, and the view is
    what the weighted sum ``weight^T @ path_feat`` reads as is.  Masked paths get the most
    negative finite score instead of ``-inf``: a root without any path then gets a
    uniform (finite) row that the final ``where`` zeroes, with no data-dependent branch.
    """
    keep = mask.unsqueeze(1)  # [B, 1, P]
    scores = scores.transpose(1, 2)
    scores = torch.where(keep, scores, torch.finfo(scores.dtype).min).contiguous()
    return torch.where(keep, torch.softmax(scores, dim=-1), 0.0).transpose(1, 2)


def _dropout_factors(drop: nn.Dropout, B: int, P: int, H: int, like: torch.Tensor
                     ) -> Optional[torch.Tensor]:
    """``[B, H, P]``: the factors ``drop`` would multiply the ``[B, P, H]`` weights of
    :func:`_path_softmax` by (0 or ``1 / (1 - p)``), or ``None`` outside training or with
    ``p = 0``.  Drawn as torch's dropout draws them, over a tensor with the weights'
    strides, so that a seeded run draws the same as the torch path."""
    if not drop.training or drop.p == 0.0:
        return None
    keep = 1.0 - drop.p
    noise = like.new_empty(B, H, P).transpose(1, 2)  # torch's empty_like of the weights
    return noise.bernoulli_(keep).div_(keep).transpose(1, 2)


class PathAggregator(nn.Module):
    r"""Combine the path representations of each root into :math:`h_{DFS}` (tBDFS, DFS step 2).

    With ``across_paths_agg='attn'`` the root's BFS embedding is the query and its non-empty
    paths :math:`r_p` the keys and values:

    .. math::
        \beta^{(m)}_p = \mathrm{softmax}_{p\ \mathrm{non\text{-}empty}}
            \left((W_Q h_{BFS})^{(m)} \cdot (W_K r_p)^{(m)} / \sqrt{d_k}\right), \quad
        h_{DFS} = W_O \big\Vert_{m=1}^{M} \sum_p \beta^{(m)}_p r_p + b_O

    (the value map of each head is folded into :math:`W_O`, a linear map of a linear map
    adding nothing).  With ``across_paths_agg='mean'``,
    :math:`h_{DFS} = W_O\,\mathrm{mean}_p r_p + b_O` over the non-empty paths.  A root without
    any non-empty path gets :math:`h_{DFS} = 0`.

    Parameters
    ----------
    in_dim : int
        Width of the path representations.
    out_dim : int
        Output width.
    num_heads : int, optional
        Attention heads; ``in_dim`` must be a multiple of it (key width
        ``in_dim // num_heads``).  Default: ``2``.
    query_dim : int, optional
        Width of the query (BFS embedding).  Default: ``in_dim``.
    across_paths_agg : {'attn', 'mean'}, optional
        Aggregation across a root's paths (``paths_agg`` before: deprecated).
        Default: ``'attn'``.
    attn_drop : float, optional
        Dropout on the attention weights.  Default: ``0``.

    Notes
    -----
    Keys are never formed per path: :math:`(W_Q h)\cdot(W_K r) = (W_K^\top W_Q h) \cdot r`,
    so each root's query is pulled back to the path space once and the scores are one
    batched matrix product with the raw path representations.
    """

    @renamed_kwargs(WIDTH_RENAMES, paths_agg="across_paths_agg")
    def __init__(
        self,
        in_dim: int,
        out_dim: int,
        num_heads: int = 2,
        query_dim: Optional[int] = None,
        across_paths_agg: str = "attn",
        attn_drop: float = 0.0,
    ) -> None:
        super().__init__()
        if across_paths_agg not in AGG_MODES:
            raise ValueError(f"across_paths_agg must be one of {AGG_MODES}, "
                             f"got {across_paths_agg!r}")
        self._in_dim = in_dim
        self._out_dim = out_dim
        self._num_heads = num_heads
        self._head_dim = check_heads(in_dim, num_heads)
        self._query_dim = in_dim if query_dim is None else query_dim
        self._across_paths_agg = across_paths_agg
        if across_paths_agg == "attn":
            hd = num_heads * self._head_dim
            self.fc_q = nn.Linear(self._query_dim, hd, bias=False)
            self.fc_k = nn.Linear(in_dim, hd, bias=False)
            self.fc_o = nn.Linear(num_heads * in_dim, out_dim)
        else:
            self.register_module("fc_q", None)
            self.register_module("fc_k", None)
            self.fc_o = nn.Linear(in_dim, out_dim)
        self.attn_drop = nn.Dropout(attn_drop)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Reinitialise the learnable parameters (Xavier normal, zero bias)."""
        for lin in (self.fc_q, self.fc_k, self.fc_o):
            if lin is not None:
                nn.init.xavier_normal_(lin.weight)
        nn.init.zeros_(self.fc_o.bias)

    def forward(self, path_feat: torch.Tensor, query: torch.Tensor, mask: torch.Tensor,
                get_attention: bool = False
                ) -> Union[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]]:
        """Aggregate.

        Parameters
        ----------
        path_feat : torch.Tensor
            ``[B, P, in_dim]`` path representations :math:`r_p`.
        query : torch.Tensor
            ``[B, query_dim]`` BFS embeddings of the roots.
        mask : torch.Tensor
            bool ``[B, P]``, ``True`` for non-empty paths.
        get_attention : bool, optional
            Also return the weights of the paths (as DGL's ``GATConv``).  Default: ``False``.

        Returns
        -------
        torch.Tensor
            ``[B, out_dim]``; zero rows for roots without a non-empty path.
        torch.Tensor, optional
            With ``get_attention``: the ``[B, P, H]`` weights the sum used (``H = 1`` for
            ``'mean'``), after attention dropout; each head's sum to 1 over a root's
            non-empty paths, zero on empty ones.
        """
        return self._aggregate(path_feat, query, mask, None, get_attention)

    def _aggregate(self, path_feat: torch.Tensor, query: torch.Tensor, mask: torch.Tensor,
                   path_proj: Optional[nn.Linear], get_attention: bool = False
                   ) -> Union[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]]:
        """:meth:`forward` of ``path_proj(path_feat)`` when ``path_proj`` is given, with
        the affine map applied once per root and head instead of once per path: scores are
        linear in :math:`r_p` (the bias adds a per-root constant, which softmax ignores)
        and the values enter as a weighted sum.  For :class:`~tbdfs_dgl.TBDFSModel`, which
        owns both path modules and passes its encoder's last linear map here."""
        B, P, _ = path_feat.shape
        D = self._in_dim
        has_path = mask.any(dim=1, keepdim=True)  # [B, 1]
        if self._across_paths_agg == "attn":
            H, dk = self._num_heads, self._head_dim
            q = self.fc_q(query).view(B, H, dk)
            wk = self.fc_k.weight.view(H, dk, D)
            q_pull = torch.einsum("bhd,hdw->bhw", q, wk) / math.sqrt(dk)  # [B, H, D]
            if path_proj is not None:
                q_pull = q_pull @ path_proj.weight  # (W2^T q~) . u = q~ . (r - b2)
            drop = self.attn_drop
            if (_path_attention.available(path_feat.device, path_feat.dtype)
                    and q_pull.dtype == path_feat.dtype
                    and (drop.p < 1.0 or not drop.training)):
                agg, weight = _path_attention.path_attention(
                    path_feat, q_pull, mask, _dropout_factors(drop, B, P, H, path_feat))
            else:
                # [B, P, H]; the layer's products, with a backward that avoids the slow CPU
                # batched-GEMM shapes of autograd's bmm (a contraction over the H heads).
                scores = slot_product(SlotScores, path_feat, q_pull)
                weight = drop(_path_softmax(scores, mask))
                agg = slot_product(SlotAverage, weight, path_feat)  # [B, H, in]
        else:
            weight = mask.to(path_feat.dtype)
            weight = (weight / weight.sum(dim=1, keepdim=True).clamp(min=1.0)).unsqueeze(-1)
            agg = slot_product(SlotAverage, weight, path_feat)  # [B, 1, in]
        if path_proj is not None:
            # sum_p w_p (W2 u_p + b2) = W2 sum_p w_p u_p + b2 sum_p w_p
            agg = F.linear(agg, path_proj.weight)
            if path_proj.bias is not None:
                agg = agg + weight.sum(dim=1).unsqueeze(-1) * path_proj.bias
        # Without the mask, a root with no path would get fc_o's bias: zero is clearer.
        out = self.fc_o(agg.reshape(B, -1)) * has_path.to(agg.dtype)
        return (out, weight) if get_attention else out

    def extra_repr(self) -> str:
        return (f"in_dim={self._in_dim}, out_dim={self._out_dim}, "
                f"num_heads={self._num_heads}, across_paths_agg={self._across_paths_agg!r}")
