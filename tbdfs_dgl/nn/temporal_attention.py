"""TGAT's temporal graph attention layer on DGL blocks (tBDFS's BFS branch)."""
from __future__ import annotations

import math
from typing import List, Optional, Tuple, Union

import torch
import torch.nn.functional as F
from torch import nn

import dgl
import dgl.function as fn
from dgl.nn.functional import edge_softmax
from dgl.utils import expand_as_pair

from .._blocks import csc_block
from .time_encoder import TimeEncoder

__all__ = ["TemporalAttentionConv"]


def _resolve_time_encoder(time_feats: Optional[int],
                          time_encoder: Optional[TimeEncoder]) -> TimeEncoder:
    """Use the shared encoder when one is given, else build a private one."""
    if time_encoder is None:
        return TimeEncoder(100 if time_feats is None else time_feats)
    if time_feats is not None and time_feats != time_encoder.time_dim:
        raise ValueError(f"time_feats={time_feats} disagrees with the given time_encoder "
                         f"(time_dim={time_encoder.time_dim})")
    return time_encoder


def _check_heads(out_feats: int, num_heads: int) -> int:
    if not isinstance(num_heads, int) or num_heads < 1:
        raise ValueError(f"num_heads must be a positive integer, got {num_heads!r}")
    if not isinstance(out_feats, int) or out_feats < 1 or out_feats % num_heads:
        raise ValueError(f"out_feats ({out_feats!r}) must be a positive multiple of "
                         f"num_heads ({num_heads})")
    return out_feats // num_heads


def _reset_attention(projections, merge) -> None:
    """TGAT's initialisation: Xavier-normal attention maps (``None`` entries skipped) and a
    ReLU-gained Xavier-normal merge FFN with zero biases."""
    for lin in projections:
        if lin is not None:
            nn.init.xavier_normal_(lin.weight)
    for lin in merge:
        nn.init.xavier_normal_(lin.weight, gain=nn.init.calculate_gain("relu"))
        nn.init.zeros_(lin.bias)


def _per_edge_graph(block, num_dst: int):
    """A block with one source per edge of ``block`` (edge ``e``: ``e -> dst(e)``, edge id
    ``e``), so that per-edge inputs go through DGL's broadcasting SDDMM/SpMM as source
    features, without forming ``[E, heads, width]`` products."""
    num_edges = block.num_edges()
    if block.device.type == "cpu" and block.idtype == torch.int64:
        # The CSC arrays already exist; csc_block skips create_block's per-call overhead.
        indptr, _, eids = block.adj_tensors("csc")
        return csc_block(indptr, eids, eids, num_edges, num_dst)
    _, dst_ids = block.edges()
    return dgl.create_block(
        (torch.arange(num_edges, dtype=dst_ids.dtype, device=dst_ids.device), dst_ids),
        num_src_nodes=num_edges, num_dst_nodes=num_dst)


class TemporalAttentionConv(nn.Module):
    r"""Temporal graph attention layer from `Inductive Representation Learning on Temporal
    Graphs <https://arxiv.org/abs/2002.07962>`__ (TGAT), the BFS branch of tBDFS.

    For every destination node :math:`i` at time :math:`t`, with in-edges from sources
    :math:`j` carrying features :math:`x_{ij}` and time gaps :math:`\Delta t_{ij}`:

    .. math::
        q_i &= W_Q [h_i \| 0 \| \Phi(0)], \quad
        k_{ij} = W_K [h_j \| x_{ij} \| \Phi(\Delta t_{ij})], \quad
        v_{ij} = W_V [h_j \| x_{ij} \| \Phi(\Delta t_{ij})] \\
        \alpha^{(m)}_{ij} &= \mathrm{softmax}_{j \in \mathcal{N}(i)}
            \left(q^{(m)}_i \cdot k^{(m)}_{ij} / \sqrt{d_k}\right), \quad
        a_i = \big\Vert_{m=1}^{M} \sum_j \alpha^{(m)}_{ij} v^{(m)}_{ij} \\
        h'_i &= W_2\,\mathrm{ReLU}(W_1 [h_i \| a_i] + b_1) + b_2

    with :math:`M` heads of width :math:`d_k = d_v =` ``out_feats // num_heads``.
    A destination without in-edges gets :math:`a_i = 0`, so its output is a function of
    :math:`h_i` alone.

    Parameters
    ----------
    in_feats : int or pair of ints
        Input width of the source (and destination) node features.
    out_feats : int
        Output width; a multiple of ``num_heads``.
    num_heads : int, optional
        Number of attention heads.  Default: ``2``.
    edge_feats : int, optional
        Width of the edge features :math:`x_{ij}` (``0``: none, as if zero).  Default: ``0``.
    time_feats : int, optional
        Width of :math:`\Phi`; ignored-but-checked when ``time_encoder`` is given.
        Default: ``100``.
    feat_drop : float, optional
        Dropout on the hidden layer of the feed-forward merge.  Default: ``0``.
    attn_drop : float, optional
        Dropout on the attention weights.  Default: ``0``.
    time_encoder : TimeEncoder, optional
        A (shared) time encoder; a private one is built if omitted.

    Notes
    -----
    Nothing of width :math:`d_k` or :math:`d_v` is ever formed per edge.  The score is
    linear in the key input, so :math:`q_i \cdot W_K z = (W_K^\top q_i) \cdot z`: the query
    is pulled back to input space once per destination and dotted with the raw edge inputs
    (DGL SDDMM).  Likewise :math:`\sum_j \alpha_{ij} W_V z_j = W_V \sum_j \alpha_{ij} z_j`:
    raw inputs are averaged on the graph (SpMM) and projected once per destination.  With
    fan-in :math:`k` this divides the projection work by about :math:`k`.
    """

    def __init__(
        self,
        in_feats: Union[int, Tuple[int, int]],
        out_feats: int,
        num_heads: int = 2,
        edge_feats: int = 0,
        time_feats: Optional[int] = None,
        feat_drop: float = 0.0,
        attn_drop: float = 0.0,
        time_encoder: Optional[TimeEncoder] = None,
    ) -> None:
        super().__init__()
        self._in_src_feats, self._in_dst_feats = expand_as_pair(in_feats)
        self._out_feats = out_feats
        self._num_heads = num_heads
        self._head_feats = _check_heads(out_feats, num_heads)
        if edge_feats < 0:
            raise ValueError(f"edge_feats must be >= 0, got {edge_feats}")
        self._edge_feats = edge_feats
        self.time_encoder = _resolve_time_encoder(time_feats, time_encoder)
        # Φ ≡ 0 without time: its weight columns would be dead, so they are not created.
        self._time_feats = self.time_encoder.effective_dim
        hd = num_heads * self._head_feats
        key_in = self._in_src_feats + edge_feats + self._time_feats
        # Query input [h_i ‖ 0 ‖ Φ(0)]: the zero edge part contributes nothing, so W_Q has
        # only the node and time columns.
        self.fc_q = nn.Linear(self._in_dst_feats + self._time_feats, hd, bias=False)
        self.fc_k = nn.Linear(key_in, hd, bias=False)
        self.fc_v = nn.Linear(key_in, hd, bias=False)
        self.fc1 = nn.Linear(self._in_dst_feats + hd, out_feats)
        self.fc2 = nn.Linear(out_feats, out_feats)
        self.feat_drop = nn.Dropout(feat_drop)
        self.attn_drop = nn.Dropout(attn_drop)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Reinitialise the learnable parameters (Xavier normal, zero biases).

        The shared time encoder is left alone: its owner resets it.
        """
        _reset_attention((self.fc_q, self.fc_k, self.fc_v), (self.fc1, self.fc2))

    def forward(
        self,
        block,
        feat: Optional[Union[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]]],
        edge_feat: Optional[torch.Tensor] = None,
        dt: Optional[torch.Tensor] = None,
    ) -> torch.Tensor:
        r"""Compute the layer on a block (or any graph).

        Parameters
        ----------
        block : DGLGraph
            A DGL block (destination nodes are the first ``num_dst_nodes()`` sources) or a
            homogeneous graph.
        feat : torch.Tensor or pair of torch.Tensor or None
            Source features ``[N_src, in_src]``, or ``(src, dst)`` features.  ``None``
            stands for all-zero node inputs (a featureless graph's first layer): the same
            result, without the node terms.
        edge_feat : torch.Tensor, optional
            ``[E, edge_feats]`` features aligned with ``block``'s edges; zeros if omitted.
        dt : torch.Tensor, optional
            ``[E]`` time gaps (destination time minus edge time); defaults to
            ``block.edata['dt']``.

        Returns
        -------
        torch.Tensor
            ``[N_dst, out_feats]``.
        """
        if feat is None:
            return self._forward_without_node_inputs(block, edge_feat, dt)
        with block.local_scope():
            h_src, h_dst = expand_as_pair(feat, block)
            if dt is None:
                dt = block.edata["dt"]
            num_dst = h_dst.shape[0]
            H, dk, D = self._num_heads, self._head_feats, self._in_src_feats
            T = self._time_feats

            # Query, then pulled back to key-input space: q~ = W_K^T q / sqrt(dk).
            q = F.linear(h_dst, self.fc_q.weight[:, : self._in_dst_feats])
            if T:
                phi0 = self.time_encoder(dt.new_zeros(1))
                q = q + F.linear(phi0, self.fc_q.weight[:, self._in_dst_feats:])
            wk = self.fc_k.weight.view(H, dk, -1)
            q_pull = torch.einsum("nhd,hdw->nhw", q.view(num_dst, H, dk), wk)
            q_pull = q_pull / math.sqrt(dk)

            z_parts, z_col = self._edge_inputs(edge_feat, dt, h_src.dtype)

            block.srcdata["h"] = h_src.unsqueeze(1)
            block.dstdata["qh"] = q_pull[..., :D].contiguous()
            block.apply_edges(fn.u_dot_v("h", "qh", "s"))
            score = block.edata["s"]
            if z_parts:
                # The per-edge inputs go on the sources of a helper block with one source per
                # edge (edge e: e -> dst(e)), so that DGL's broadcasting SDDMM/SpMM handle
                # them without forming [E, H, width] products.
                z = torch.cat(z_parts, dim=-1).unsqueeze(1)
                edge_graph = _per_edge_graph(block, num_dst)
                edge_graph.srcdata["z"] = z
                edge_graph.dstdata["qz"] = q_pull[..., z_col].contiguous()
                edge_graph.apply_edges(fn.u_dot_v("z", "qz", "sz"))
                score = score + edge_graph.edata["sz"]
            # [E, H, 1]; destinations without in-edges simply receive nothing below.
            attn = self.attn_drop(edge_softmax(block, score))
            block.edata["a"] = attn
            block.update_all(fn.u_mul_e("h", "a", "m"), fn.sum("m", "hw"))
            # [N_dst, H, D]: attention-weighted raw source features, per head.
            wv = self.fc_v.weight.view(H, dk, -1)
            agg = torch.einsum("nhw,hdw->nhd", block.dstdata["hw"], wv[..., :D])
            if z_parts:
                edge_graph.edata["a"] = attn
                edge_graph.update_all(fn.u_mul_e("z", "a", "m"), fn.sum("m", "zw"))
                agg = agg + torch.einsum("nhw,hdw->nhd", edge_graph.dstdata["zw"],
                                         wv[..., z_col])
            hidden = F.relu(self.fc1(torch.cat([h_dst, agg.reshape(num_dst, -1)], dim=-1)))
            return self.fc2(self.feat_drop(hidden))

    def _edge_inputs(self, edge_feat: Optional[torch.Tensor], dt: torch.Tensor,
                     dtype: torch.dtype) -> Tuple[List[torch.Tensor], slice]:
        """Per-edge raw inputs ``z = [x ‖ Φ(dt)]`` (the parts present) and their columns in
        ``fc_k``/``fc_v``, which are contiguous."""
        D, E, T = self._in_src_feats, self._edge_feats, self._time_feats
        if edge_feat is not None and edge_feat.shape[-1] != E:
            raise ValueError(f"edge_feat has width {edge_feat.shape[-1]}, the layer "
                             f"expects edge_feats={E}")
        z_parts, z_start = [], D + E
        if edge_feat is not None and E:
            z_parts.append(edge_feat.to(dtype))
            z_start = D
        if T:
            z_parts.append(self.time_encoder(dt))
        return z_parts, slice(z_start, D + E + T)

    def _forward_without_node_inputs(self, block, edge_feat: Optional[torch.Tensor],
                                     dt: Optional[torch.Tensor]) -> torch.Tensor:
        """``forward`` with all-zero node features.

        Every destination then has the same query (from :math:`\Phi(0)` alone), so the
        scores are one dense product with the per-edge inputs and only the attention-weighted
        sum of those inputs needs the graph.
        """
        with block.local_scope():
            if dt is None:
                dt = block.edata["dt"]
            num_dst = block.num_dst_nodes() if block.is_block else block.num_nodes()
            H, dk, T = self._num_heads, self._head_feats, self._time_feats
            w1 = self.fc1.weight[:, self._in_dst_feats:]
            z_parts, z_col = self._edge_inputs(edge_feat, dt, w1.dtype)
            if not z_parts:  # no input at all: a_i = 0 for every destination
                agg = w1.new_zeros(num_dst, H * dk)
            else:
                z = torch.cat(z_parts, dim=-1)
                if T:
                    phi0 = self.time_encoder(dt.new_zeros(1))
                    q = F.linear(phi0, self.fc_q.weight[:, self._in_dst_feats:])
                    wk = self.fc_k.weight.view(H, dk, -1)[..., z_col]
                    q_pull = torch.einsum("hd,hdw->hw", q.view(H, dk), wk) / math.sqrt(dk)
                    score = (z @ q_pull.t()).unsqueeze(-1)  # [E, H, 1]
                else:  # a zero query: uniform attention
                    score = z.new_zeros(z.shape[0], H, 1)
                attn = self.attn_drop(edge_softmax(block, score))
                edge_graph = _per_edge_graph(block, num_dst)
                edge_graph.srcdata["z"] = z.unsqueeze(1)
                edge_graph.edata["a"] = attn
                edge_graph.update_all(fn.u_mul_e("z", "a", "m"), fn.sum("m", "zw"))
                wv = self.fc_v.weight.view(H, dk, -1)[..., z_col]
                agg = torch.einsum("nhw,hdw->nhd", edge_graph.dstdata["zw"], wv)
            hidden = F.relu(F.linear(agg.reshape(num_dst, -1), w1, self.fc1.bias))
            return self.fc2(self.feat_drop(hidden))

    def extra_repr(self) -> str:
        return (f"in_feats={self._in_src_feats}, out_feats={self._out_feats}, "
                f"num_heads={self._num_heads}, edge_feats={self._edge_feats}, "
                f"time_feats={self._time_feats}")
