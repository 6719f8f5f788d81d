"""Helpers shared by the layers of :mod:`tbdfs_dgl.nn` (torch only)."""
from __future__ import annotations

from typing import NamedTuple, Optional

import torch
from torch import nn

from .time_encoder import TimeEncoder

__all__ = ["AGG_MODES", "WIDTH_RENAMES", "NodeRows", "check_heads", "masked_softmax",
           "reset_attention", "resolve_time_encoder"]

#: Aggregations along a path and over a root's paths.
AGG_MODES = ("attn", "mean")

#: Width arguments of the layers before release 0.2 (DGL's ``*_feats``), now ``*_dim``:
#: still accepted, with a DeprecationWarning.
WIDTH_RENAMES = {"in_feats": "in_dim", "out_feats": "out_dim", "edge_feats": "edge_dim",
                 "time_feats": "time_dim", "query_feats": "query_dim"}


class NodeRows(NamedTuple):
    """Per-instance rows ``table[index]`` kept as the per-node ``table`` and the instances'
    node ``index``, so that a linear map of them can be applied once per node and gathered
    (a batch at fanouts [20, 20] holds ~25x more instances than Wikipedia has nodes)."""

    table: torch.Tensor  # [num_nodes, w]
    index: torch.Tensor  # [num_instances] int64 rows of table

    def gather(self, positions: Optional[torch.Tensor] = None) -> torch.Tensor:
        """The rows of the instances at ``positions`` (all instances if ``None``)."""
        rows = self.index if positions is None else self.index.index_select(0, positions)
        return self.table.index_select(0, rows)

    def head(self, n: int) -> torch.Tensor:
        """The rows of the first ``n`` instances (a layer's destinations, the roots)."""
        return self.table.index_select(0, self.index[:n])


def resolve_time_encoder(time_dim: Optional[int],
                          time_encoder: Optional[TimeEncoder]) -> TimeEncoder:
    """Use the shared encoder when one is given, else build a private one."""
    if time_encoder is None:
        return TimeEncoder(100 if time_dim is None else time_dim)
    if time_dim is not None and time_dim != time_encoder.time_dim:
        raise ValueError(f"time_dim={time_dim} disagrees with the given time_encoder "
                         f"(its time_dim={time_encoder.time_dim})")
    return time_encoder


def check_heads(out_dim: int, num_heads: int, name: str = "out_dim") -> int:
    """Check that ``out_dim`` (the argument ``name``) splits into ``num_heads`` heads;
    return the head width."""
    if not isinstance(num_heads, int) or num_heads < 1:
        raise ValueError(f"num_heads must be a positive integer, got {num_heads!r}")
    if (isinstance(out_dim, bool) or not isinstance(out_dim, int) or out_dim < 1
            or out_dim % num_heads):
        raise ValueError(f"{name} ({out_dim!r}) must be a positive multiple of "
                         f"num_heads ({num_heads})")
    return out_dim // num_heads


def reset_attention(projections, merge) -> None:
    """TGAT's initialisation: Xavier-normal attention maps (``None`` entries skipped) and a
    ReLU-gained Xavier-normal merge FFN with zero biases."""
    for lin in projections:
        if lin is not None:
            nn.init.xavier_normal_(lin.weight)
    for lin in merge:
        nn.init.xavier_normal_(lin.weight, gain=nn.init.calculate_gain("relu"))
        nn.init.zeros_(lin.bias)


def masked_softmax(scores: torch.Tensor, mask: torch.Tensor, dim: int) -> torch.Tensor:
    """Softmax over ``dim`` restricted to ``mask``; rows with no ``True`` entry give zeros.

    Parameters
    ----------
    scores : torch.Tensor
        Logits.
    mask : torch.Tensor
        bool, broadcastable to ``scores``; ``False`` entries get weight 0.
    dim : int
        Dimension to normalise over.

    Returns
    -------
    torch.Tensor
        Weights shaped like ``scores``, without NaN even for all-masked rows.
    """
    mask = mask.expand_as(scores)
    scores = scores.masked_fill(~mask, float("-inf"))
    # An all -inf row would give NaN (and NaN gradients): give it finite logits, then zero.
    empty = ~mask.any(dim=dim, keepdim=True)
    scores = scores.masked_fill(empty, 0.0)
    return torch.softmax(scores, dim=dim).masked_fill(~mask, 0.0)
