"""TGAT's temporal graph attention layer (tBDFS's BFS branch), on dense layer tables or on
DGL blocks.

The dense path (a :class:`~tbdfs_dgl.batch.LayerTable`) runs on torch alone; DGL is imported
only when the layer is given a DGL graph."""
from __future__ import annotations

import math
from typing import Any, List, Optional, Tuple, Union

import torch
import torch.nn.functional as F
from torch import nn

from .._deprecation import renamed_kwargs
from .._dgl import require_dgl
from ..batch import LayerTable
from ._common import (WIDTH_RENAMES, NodeRows, check_heads, reset_attention,
                      resolve_time_encoder)
from ._compile import compiling
from ._gemm import few_outputs_linear
from ._slots import SlotAverage, SlotScores, merge_narrow, slot_product
from .time_encoder import TimeEncoder

__all__ = ["TemporalAttentionConv"]

#: Initialisations of :class:`TemporalAttentionConv` (``init``).
INITS = ("xavier", "torch")
#: What a destination without eligible neighbours attends to (``empty_neighbourhood``).
EMPTY_NEIGHBOURHOODS = ("zero", "padding")

Feat = Optional[Union[torch.Tensor, Tuple[torch.Tensor, torch.Tensor], NodeRows]]


def _as_pair(value: Any) -> Tuple[Any, Any]:
    """``(a, b)`` as is, anything else as ``(value, value)`` (DGL's ``expand_as_pair`` for
    sizes, without DGL)."""
    if isinstance(value, tuple):
        if len(value) != 2:
            raise ValueError(f"expected one value or a pair, got {len(value)} values")
        return value
    return value, value


def _dense_feat_pair(feat: Union[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]],
                     num_dst: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """Source and destination features of a table layer: a ``(src, dst)`` pair as is, else
    the destinations are the first ``num_dst`` sources (the block convention)."""
    if isinstance(feat, tuple):
        return _as_pair(feat)
    return feat, feat[:num_dst]


def _slot_softmax(scores: torch.Tensor, mask: torch.Tensor, scale: float) -> torch.Tensor:
    """Softmax over the ``k`` slots (dim 1) of ``[N, k, H]`` logits ``scale * scores``,
    restricted to ``mask`` (``[N, k]``).

    Computed in (at least) float32 whatever autocast produced the scores in, because bf16
    logits lose the small differences softmax amplifies.  Masked slots get the most
    negative finite float instead of ``-inf``: an all-masked row then yields a uniform
    (finite) softmax that the final ``where`` zeroes, so neither the weights nor their
    gradients ever see NaN, with no data-dependent branch (``torch.compile``/CUDA-graph
    friendly).  In a row with a real slot the masked ones underflow to exactly 0.
    """
    dtype = torch.promote_types(scores.dtype, torch.float32)
    scores = scores.to(dtype) * scale  # scaling the [N, k, H] logits is the cheapest spot
    keep = mask.unsqueeze(-1)
    scores = torch.where(keep, scores, torch.finfo(dtype).min)
    return torch.where(keep, torch.softmax(scores, dim=1), 0.0)


def _check_edge_inputs(graph: Any, edge_feat: Optional[torch.Tensor], dt: torch.Tensor) -> None:
    """Per-edge inputs of a DGL graph must be ``[E]`` / ``[E, width]``: DGL's kernels do not
    check, and a table-shaped ``[N_dst, k]`` tensor would read out of bounds."""
    num_edges = graph.num_edges()
    if dt.dim() != 1 or dt.shape[0] != num_edges:
        raise ValueError(f"on a DGL graph dt must be [num_edges] = [{num_edges}], got "
                         f"{list(dt.shape)}")
    if edge_feat is not None and (edge_feat.dim() != 2 or edge_feat.shape[0] != num_edges):
        raise ValueError(f"on a DGL graph edge_feat must be [num_edges, width] with "
                         f"num_edges = {num_edges}, got {list(edge_feat.shape)}")


def _per_edge_graph(block, num_dst: int):
    """A block with one source per edge of ``block`` (edge ``e``: ``e -> dst(e)``, edge id
    ``e``), so that per-edge inputs go through DGL's broadcasting SDDMM/SpMM as source
    features, without forming ``[E, heads, width]`` products."""
    dgl = require_dgl("TemporalAttentionConv on a DGL graph")
    from .._blocks import csc_block

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

    with :math:`M` heads of width :math:`d_k = d_v =` ``attn_dim // num_heads``
    (``attn_dim`` defaults to ``out_dim``).  A destination without in-edges gets
    :math:`a_i = 0`, so its output is a function of :math:`h_i` alone; with
    ``empty_neighbourhood='padding'`` it attends, as TGAT's and DyGLib's code do, over
    padding slots at time 0: :math:`a_i = W_V [0 \| 0 \| \Phi(t_i)]`.  ``attn_norm``
    puts DyGLib's :math:`\mathrm{LayerNorm}(W_O a_i + b_O)` in place of :math:`a_i`.

    The layer runs on a dense :class:`~tbdfs_dgl.batch.LayerTable` (torch only, any
    device; ``torch.compile``- and CUDA-graph-friendly: no data-dependent shapes or host
    syncs) or on a DGL block/graph (needs DGL).  Both compute the same function with the
    same parameters.

    Parameters
    ----------
    in_dim : int or pair of ints
        Input width of the source (and destination) node features.
    out_dim : int
        Output width; a multiple of ``num_heads``.
    num_heads : int, optional
        Number of attention heads.  Default: ``2``.
    edge_dim : int, optional
        Width of the edge features :math:`x_{ij}` (``0``: none, as if zero).  Default: ``0``.
    time_dim : int, optional
        Width of :math:`\Phi`; ignored-but-checked when ``time_encoder`` is given.
        Default: ``100``.
    feat_drop : float, optional
        Dropout on the hidden layer of the feed-forward merge (with ``attn_norm``: on
        ``W_O``'s output instead, as DyGLib places it).  Default: ``0``.
    attn_drop : float, optional
        Dropout on the attention weights (per edge and head).  Default: ``0``.
    time_encoder : TimeEncoder, optional
        A (shared) time encoder; a private one is built if omitted.
    attn_dim : int, optional
        Width of the attention (all heads together, a multiple of ``num_heads``): the
        width of :math:`q, k, v` and of :math:`a_i`.  Default: ``out_dim`` (TGAT).
        DyGLib's TGAT uses ``in_dim + time_dim``.
    attn_norm : bool, optional
        Map the attention output before the merge, as DyGLib's multi-head attention does
        (without its residual): :math:`o_i = \mathrm{LayerNorm}(\mathrm{Dropout}(W_O a_i
        + b_O))`, and the merge reads :math:`[h_i \| o_i]` with no dropout of its own
        (DyGLib's ``MergeLayer``).  A destination without in-edges then gets
        :math:`o_i = \mathrm{LayerNorm}(b_O)`.  Default: ``False`` (TGAT: the merge reads
        :math:`a_i`).  ``docs/learning_efficiency.md`` (section 12) measures what it
        changes.
    attn_residual : bool, optional
        With ``attn_norm``, add DyGLib's residual, the query input, before the LayerNorm:
        :math:`o_i = \mathrm{LayerNorm}(\mathrm{Dropout}(W_O a_i + b_O) + [h_i \|
        \Phi(0)])` (:math:`h_i = 0` without node inputs).  Needs ``attn_norm=True`` and
        ``attn_dim == in_dim + time_dim`` (the destinations' width), as DyGLib's layer has
        them.  Default: ``False``.  ``docs/learning_efficiency.md`` (section 15) measures
        it.
    init : {'xavier', 'torch'}, optional
        Initialisation of the linear maps: ``'xavier'`` (TGAT's: Xavier-normal attention
        maps, ReLU-gained Xavier-normal merge, zero biases) or ``'torch'`` (torch's
        defaults, as DyGLib leaves them).  Default: ``'xavier'``.
    empty_neighbourhood : {'zero', 'padding'}, optional
        What a destination without in-edges (no eligible neighbour) attends to.
        ``'zero'``: nothing, :math:`a_i = 0` (TGAT's paper).  ``'padding'``: what TGAT's
        and DyGLib's code compute.  They pad every neighbourhood with masked slots (node 0,
        zero node and edge inputs, time 0), and a softmax over all-masked scores is uniform
        over the padding.  So :math:`a_i = W_V [0 \| 0 \| \Phi(t_i - 0)]`, which encodes
        the destination's own time :math:`t_i` (so it depends on where the graph's clock
        starts).  Needs the destinations' times: a table's ``src_ts``, or ``dstdata['ts']``
        on a DGL graph.  Without time (``time_dim`` 0) the two are the same.  Above the
        first layer TGAT's and DyGLib's padding slots carry the padding node's own
        embedding: ``forward``'s ``padding_feat`` (see :meth:`padding_output`).  Default:
        ``'zero'``.  ``docs/learning_efficiency.md`` (sections 14 and 15) measures it.

    Notes
    -----
    Nothing of width :math:`d_k` or :math:`d_v` is ever formed per edge.  The score is
    linear in the key input, so :math:`q_i \cdot W_K z = (W_K^\top q_i) \cdot z`: the query
    is pulled back to input space once per destination and dotted with the raw edge inputs
    (a batched ``[k, width] x [width, heads]`` product per destination on a table, DGL
    SDDMM on a graph).  Likewise :math:`\sum_j \alpha_{ij} W_V z_j = W_V \sum_j \alpha_{ij}
    z_j`: raw inputs are averaged first and projected once per destination.  With fan-in
    :math:`k` this divides the projection work by about :math:`k`.

    On a table, forward + backward of a layer with 6600 destinations, ``k = 10``, width
    and time width 100, two heads took (one CPU thread, thread time) about 65 ms without
    node features and 115 ms with them, against 145 ms and 305 ms for the DGL path and
    300 ms and 500 ms for projecting every slot with :math:`W_K, W_V`.
    """

    @renamed_kwargs(WIDTH_RENAMES)
    def __init__(
        self,
        in_dim: Union[int, Tuple[int, int]],
        out_dim: int,
        num_heads: int = 2,
        edge_dim: int = 0,
        time_dim: Optional[int] = None,
        feat_drop: float = 0.0,
        attn_drop: float = 0.0,
        time_encoder: Optional[TimeEncoder] = None,
        attn_dim: Optional[int] = None,
        attn_norm: bool = False,
        init: str = "xavier",
        empty_neighbourhood: str = "zero",
        attn_residual: bool = False,
    ) -> None:
        super().__init__()
        self._in_src_dim, self._in_dst_dim = _as_pair(in_dim)
        self._out_dim = out_dim
        self._num_heads = num_heads
        check_heads(out_dim, num_heads)
        self._head_dim = check_heads(out_dim if attn_dim is None else attn_dim, num_heads,
                                     "attn_dim")
        if not isinstance(attn_norm, bool):
            raise ValueError(f"attn_norm must be True or False, got {attn_norm!r}")
        if not isinstance(attn_residual, bool):
            raise ValueError(f"attn_residual must be True or False, got {attn_residual!r}")
        if attn_residual and not attn_norm:
            raise ValueError("attn_residual=True needs attn_norm=True: the residual is "
                             "added before attn_norm's LayerNorm")
        if init not in INITS:
            raise ValueError(f"init must be one of {INITS}, got {init!r}")
        self._init = init
        if empty_neighbourhood not in EMPTY_NEIGHBOURHOODS:
            raise ValueError(f"empty_neighbourhood must be one of {EMPTY_NEIGHBOURHOODS}, "
                             f"got {empty_neighbourhood!r}")
        self.empty_neighbourhood = empty_neighbourhood
        if edge_dim < 0:
            raise ValueError(f"edge_dim must be >= 0, got {edge_dim}")
        self._edge_dim = edge_dim
        self.time_encoder = resolve_time_encoder(time_dim, time_encoder)
        # Φ ≡ 0 without time: its weight columns would be dead, so they are not created.
        self._time_dim = self.time_encoder.effective_dim
        hd = num_heads * self._head_dim
        if attn_residual and hd != self._in_dst_dim + self._time_dim:
            raise ValueError(
                f"attn_residual=True adds the query input [h_i || Phi(0)] (width in_dim + "
                f"time_dim = {self._in_dst_dim} + {self._time_dim}) to the attention "
                f"output: attn_dim must be {self._in_dst_dim + self._time_dim}, got {hd}")
        self._attn_residual = attn_residual
        key_in = self._in_src_dim + edge_dim + self._time_dim
        # Query input [h_i ‖ 0 ‖ Φ(0)]: the zero edge part contributes nothing, so W_Q has
        # only the node and time columns.
        self.fc_q = nn.Linear(self._in_dst_dim + self._time_dim, hd, bias=False)
        self.fc_k = nn.Linear(key_in, hd, bias=False)
        self.fc_v = nn.Linear(key_in, hd, bias=False)
        # attn_norm: W_O and a LayerNorm between the attention and the merge (registered
        # only when used, so that TGAT's state dict keeps its keys).
        self.fc_o = nn.Linear(hd, hd) if attn_norm else None
        self.attn_layer_norm = nn.LayerNorm(hd) if attn_norm else None
        self.fc1 = nn.Linear(self._in_dst_dim + hd, out_dim)
        self.fc2 = nn.Linear(out_dim, out_dim)
        self.feat_drop = nn.Dropout(feat_drop)
        self.attn_drop = nn.Dropout(attn_drop)
        self.reset_parameters()

    @property
    def attn_dim(self) -> int:
        """Width of the attention, all heads together."""
        return self._num_heads * self._head_dim

    @property
    def attn_norm(self) -> bool:
        """Whether the attention output passes ``W_O`` and a LayerNorm before the merge."""
        return self.fc_o is not None

    @property
    def attn_residual(self) -> bool:
        """Whether the query input ``[h_i ‖ Φ(0)]`` is added before ``attn_norm``'s
        LayerNorm (DyGLib's residual)."""
        return self._attn_residual

    def reset_parameters(self) -> None:
        """Reinitialise the learnable parameters as ``init`` says (the LayerNorm of
        ``attn_norm`` to the identity).

        The shared time encoder is left alone: its owner resets it.
        """
        if self._init == "torch":
            for lin in (self.fc_q, self.fc_k, self.fc_v, self.fc_o, self.fc1, self.fc2):
                if lin is not None:
                    lin.reset_parameters()
        else:
            reset_attention((self.fc_q, self.fc_k, self.fc_v, self.fc_o), (self.fc1, self.fc2))
            if self.fc_o is not None:
                nn.init.zeros_(self.fc_o.bias)
        if self.attn_layer_norm is not None:
            self.attn_layer_norm.reset_parameters()

    def _merge_hidden_drop(self, hidden: torch.Tensor) -> torch.Tensor:
        """Dropout on the merge FFN's hidden layer: TGAT's place for ``feat_drop``; with
        ``attn_norm`` it acts on ``W_O``'s output instead (DyGLib's places)."""
        return hidden if self.fc_o is not None else self.feat_drop(hidden)

    def _merge(self, h_dst: Optional[torch.Tensor], o: torch.Tensor) -> torch.Tensor:
        """The merge FFN ``fc2(ReLU(fc1([h_i ‖ o])))`` (``h_dst`` ``None``: zero node
        inputs, whose ``fc1`` columns are skipped)."""
        if h_dst is None:
            hidden = F.relu(F.linear(o, self.fc1.weight[:, self._in_dst_dim:], self.fc1.bias))
        else:
            hidden = F.relu(self.fc1(torch.cat([h_dst, o], dim=-1)))
        return self.fc2(self._merge_hidden_drop(hidden))

    def _attention_output(self, agg: torch.Tensor,
                          padding: Optional[tuple] = None,
                          h_dst: Optional[torch.Tensor] = None,
                          phi0: Optional[torch.Tensor] = None) -> torch.Tensor:
        """What the merge reads of the attention output ``agg`` (``[N_dst, attn_dim]``):
        ``agg`` itself (TGAT), or ``LayerNorm(Dropout(W_O agg + b_O))`` (``attn_norm``),
        with ``attn_residual`` ``LayerNorm(Dropout(W_O agg + b_O) + [h_dst ‖ phi0])``
        (``h_dst`` ``None``: zero node inputs; ``phi0``: ``[1, T]``, ``None`` without
        time).  ``padding``: ``(empty, dst_time, padding_feat)`` from
        :meth:`_padding_inputs`; the destinations marked ``empty`` take the padding's
        attention output instead of ``agg``."""
        if padding is not None:
            agg = self._pad_empty(agg, *padding)
        if self.fc_o is None:
            return agg
        o = self.feat_drop(self.fc_o(agg))
        if self._attn_residual:
            o = o + self._residual(o, h_dst, phi0)
        return self.attn_layer_norm(o)

    def _residual(self, o: torch.Tensor, h_dst: Optional[torch.Tensor],
                  phi0: Optional[torch.Tensor]) -> torch.Tensor:
        """The query input ``[h_i ‖ Φ(0)]`` in ``o``'s dtype, broadcastable to ``o``."""
        Dd = self._in_dst_dim
        if phi0 is None:  # no time: the residual is h_i alone (Dd == attn_dim)
            return o.new_zeros(1, Dd) if h_dst is None else h_dst.to(o.dtype)
        phi0 = phi0.reshape(1, -1).to(o.dtype)
        if h_dst is None:  # zero node inputs: only Φ(0), one row for every destination
            return F.pad(phi0, (Dd, 0))
        return torch.cat([h_dst.to(o.dtype), phi0.expand(h_dst.shape[0], -1)], dim=-1)

    def _pad_empty(self, agg: torch.Tensor, empty: torch.Tensor,
                   dst_time: Optional[torch.Tensor],
                   padding_feat: Optional[torch.Tensor] = None) -> torch.Tensor:
        """``agg`` with the rows of ``empty`` destinations replaced by
        ``W_V [h_pad ‖ 0 ‖ Φ(t_i)]``: attention over identical padding slots at time 0
        (edge inputs zero, node input ``padding_feat`` ``[1, in_src]``, zero if ``None``)
        averages to one slot's value.  ``dst_time`` may be ``None`` without time."""
        D, E, T = self._in_src_dim, self._edge_dim, self._time_dim
        w_time = self.fc_v.weight[:, D + E:D + E + T]
        node_term = None
        if padding_feat is not None:  # one row, the same for every padded destination
            w_node = self.fc_v.weight[:, :D]
            node_term = F.linear(padding_feat.to(w_node.dtype), w_node)
        if not T:  # then only the node term (padding_feat given, else nothing to pad)
            if node_term is None:
                return agg
            return torch.where(empty.unsqueeze(-1), node_term.to(agg.dtype), agg)

        def padding_value(t: torch.Tensor) -> torch.Tensor:
            # float64: absolute times (e.g. 1e9 s) need the exact phases Φ computes.
            phi = self.time_encoder(t.to(torch.float64))
            value = F.linear(phi.to(w_time.dtype), w_time)
            if node_term is not None:
                value = value + node_term
            return value.to(agg.dtype)

        if agg.device.type == "cpu" and not compiling():
            # Eager on a CPU: encode only the empty rows (a fraction of them; encoding every
            # destination's time made a TGAT step ~15% slower).
            idx = torch.nonzero(empty).squeeze(1)
            return agg.index_put((idx,), padding_value(dst_time[idx]))
        # Elsewhere torch.where over every row: no data-dependent shapes or host syncs
        # (torch.compile, CUDA graphs, GPU streams).
        return torch.where(empty.unsqueeze(-1), padding_value(dst_time), agg)

    def _padding_inputs(self, graph: Any, num_dst: int,
                        padding_feat: Optional[torch.Tensor] = None) -> Optional[tuple]:
        """``(empty, dst_time, padding_feat)`` for ``empty_neighbourhood='padding'``
        (``None`` when it changes nothing): destinations without an eligible neighbour,
        their times, and the padding slots' node input (checked, ``[1, in_src]``)."""
        padding_feat = self._check_padding_feat(padding_feat)
        if self.empty_neighbourhood != "padding":
            return None
        if not self._time_dim and padding_feat is None:
            return None  # the padding's value would be 0, as without it
        if isinstance(graph, LayerTable):
            return ~graph.mask.any(dim=1), graph.src_ts[:num_dst], padding_feat
        if self._time_dim and "ts" not in graph.dstdata:
            raise ValueError("empty_neighbourhood='padding' needs the destinations' times: "
                             "give the DGL graph dstdata['ts'] (TemporalBatch's blocks "
                             "carry them)")
        dst_time = graph.dstdata["ts"] if self._time_dim else None
        return graph.in_degrees() == 0, dst_time, padding_feat

    def _check_padding_feat(self, padding_feat: Optional[torch.Tensor]
                            ) -> Optional[torch.Tensor]:
        """``padding_feat`` as ``[1, in_src]`` (a clear error for anything else)."""
        if padding_feat is None:
            return None
        if self.empty_neighbourhood != "padding":
            raise ValueError("padding_feat is the padding slots' node input: it needs "
                             "empty_neighbourhood='padding'")
        if not isinstance(padding_feat, torch.Tensor):
            raise TypeError(f"padding_feat must be a tensor, got {type(padding_feat).__name__}")
        if padding_feat.dim() == 1:
            padding_feat = padding_feat.unsqueeze(0)
        if tuple(padding_feat.shape) != (1, self._in_src_dim):
            raise ValueError(f"padding_feat must be [{self._in_src_dim}] or [1, "
                             f"{self._in_src_dim}] (one row of the layer's source width), "
                             f"got {list(padding_feat.shape)}")
        return padding_feat

    def padding_output(self, padding_feat: Optional[torch.Tensor] = None) -> torch.Tensor:
        r"""The layer's output for TGAT's and DyGLib's padding node at time 0: a node
        without history, whose own (padding) neighbours carry ``padding_feat`` and whose
        input is ``padding_feat`` too (``None``: zero, a first layer).

        In TGAT's and DyGLib's code the padding node 0 is embedded by the same recursion
        as any node, so above the first layer a padding slot's node input is this output of
        the layer below, not zero.  :class:`~tbdfs_dgl.TBDFSModel`
        (``empty_neighbourhood='padding_node'``) feeds it to the next layer as its
        ``padding_feat``.

        Parameters
        ----------
        padding_feat : torch.Tensor, optional
            ``[1, in_dim]``: the padding node's input (its embedding one layer down).

        Returns
        -------
        torch.Tensor
            ``[1, out_dim]``.
        """
        padding_feat = self._check_padding_feat(padding_feat)
        if self.empty_neighbourhood != "padding":
            raise ValueError("padding_output is the padding node's embedding: it needs "
                             "empty_neighbourhood='padding'")
        Dd, T = self._in_dst_dim, self._time_dim
        if padding_feat is not None and Dd != self._in_src_dim:
            raise ValueError(f"padding_output: the padding node's input is both a source "
                             f"({self._in_src_dim} wide) and a destination ({Dd} wide) row; "
                             "a layer with two input widths has no such node")
        w = self.fc_v.weight
        zero_time = torch.zeros(1, dtype=torch.float64, device=w.device)
        phi0 = self.time_encoder(zero_time).to(w.dtype) if T else None
        agg = self._pad_empty(w.new_zeros(1, w.shape[0]),
                              torch.ones(1, dtype=torch.bool, device=w.device), zero_time,
                              padding_feat)
        # Its input is padding_feat (None: zero, as a featureless first layer's).
        return self._merge(padding_feat, self._attention_output(agg, None, padding_feat, phi0))

    def forward(
        self,
        graph: Union[LayerTable, Any],
        feat: Feat,
        edge_feat: Optional[torch.Tensor] = None,
        dt: Optional[torch.Tensor] = None,
        padding_feat: Optional[torch.Tensor] = None,
    ) -> torch.Tensor:
        r"""Compute the layer on a dense layer table or on a DGL block (or any graph).

        Parameters
        ----------
        graph : LayerTable or DGLGraph
            A :class:`~tbdfs_dgl.batch.LayerTable` (torch only), a DGL block (destination
            nodes are the first ``num_dst_nodes()`` sources) or a homogeneous DGL graph.
        feat : torch.Tensor or pair of torch.Tensor or NodeRows or None
            Source features ``[N_src, in_src]`` (the destinations are the first ``N_dst``
            sources), the same as a :class:`~tbdfs_dgl.nn.NodeRows` (rows gathered from a
            per-node table, gradients summed per node), or ``(src, dst)`` features.
            ``None`` stands for all-zero node inputs (a featureless graph's first layer):
            the same result, without the node terms.
        edge_feat : torch.Tensor, optional
            On a table: ``[N_dst, k, edge_dim]``, already gathered per slot (masked slots
            may hold any finite value).  On a graph: ``[E, edge_dim]`` aligned with its
            edges.  Zeros if omitted.
        dt : torch.Tensor, optional
            Time gaps (destination time minus edge time): ``[N_dst, k]`` on a table
            (default ``graph.dt``; masked slots are ignored), ``[E]`` on a graph (default
            ``graph.edata['dt']``).
        padding_feat : torch.Tensor, optional
            With ``empty_neighbourhood='padding'``: the padding slots' node input, ``[1,
            in_src]`` (TGAT's and DyGLib's padding node embedded one layer down,
            :meth:`padding_output` of the layer below).  ``None``: zero (a first layer).

        Returns
        -------
        torch.Tensor
            ``[N_dst, out_dim]``.
        """
        if isinstance(graph, LayerTable):
            return self._forward_table(graph, feat, edge_feat, dt, padding_feat)
        if isinstance(feat, NodeRows):
            feat = feat.gather()
        if feat is None:
            return self._forward_without_node_inputs(graph, edge_feat, dt, padding_feat)
        return self._forward_graph(graph, feat, edge_feat, dt, padding_feat)

    # ------------------------------------------------------------------ dense table path
    def _table_parts(self, edge_feat: Optional[torch.Tensor], dt: torch.Tensor,
                     dtype: torch.dtype) -> List[Tuple[torch.Tensor, slice]]:
        """The per-slot raw inputs present, edge features ``x`` then ``Φ(dt)``, each
        ``[N_dst, k, width]``, with the columns of ``fc_k``/``fc_v`` they meet."""
        D, E, T = self._in_src_dim, self._edge_dim, self._time_dim
        parts = []
        if edge_feat is not None:
            if edge_feat.shape[-1] != E:
                raise ValueError(f"edge_feat has width {edge_feat.shape[-1]}, the layer "
                                 f"expects edge_dim={E}")
            if edge_feat.dim() != 3 or edge_feat.shape[:2] != dt.shape:
                raise ValueError(f"on a LayerTable edge_feat must be [N_dst, k, {E}] = "
                                 f"{list(dt.shape) + [E]}, got {list(edge_feat.shape)}")
            if E:
                parts.append((edge_feat.to(dtype), slice(D, D + E)))
        if T:
            parts.append((self.time_encoder(dt).to(dtype), slice(D + E, D + E + T)))
        return parts

    @staticmethod
    def _pulled_back_average(parts: List[Tuple[torch.Tensor, slice]], attn: torch.Tensor,
                             wv: torch.Tensor) -> torch.Tensor:
        """``Σ_j α_ij W_V z_ij`` per head, ``[N_dst, H, d_v]``, from the per-part averages
        ``Σ_j α_ij z_ij`` (``attn``: ``[N_dst, k, H]``) projected once per destination."""
        avg = [slot_product(SlotAverage, attn, p) for p, _ in parts]  # [N_dst, H, width]
        first, last = parts[0][1].start, parts[-1][1].stop
        if sum(p.shape[-1] for p, _ in parts) == last - first:
            # The usual case, columns contiguous: one product over all of them.
            avg_all = avg[0] if len(avg) == 1 else torch.cat(avg, dim=-1)
            return torch.einsum("nhw,hdw->nhd", avg_all, wv[..., first:last])
        out = None
        for a, (_, cols) in zip(avg, parts):
            term = torch.einsum("nhw,hdw->nhd", a, wv[..., cols])
            out = term if out is None else out + term
        return out

    def _forward_table(self, table: LayerTable, feat: Feat, edge_feat: Optional[torch.Tensor],
                       dt: Optional[torch.Tensor],
                       padding_feat: Optional[torch.Tensor] = None) -> torch.Tensor:
        """``forward`` on a dense table: batched products over ``[N_dst, k, ·]`` slots.

        The per-slot inputs (neighbour features, edge features, ``Φ(dt)``) stay separate
        tensors, each dotted with its slice of the pulled-back query: concatenating them
        would copy ``N_dst·k·width`` floats forward and split the gradient back, which made
        forward + backward with node features about 1.6x slower on a CPU (measured).
        """
        mask = table.mask
        num_dst, k = mask.shape
        H, dk, D, Dd = self._num_heads, self._head_dim, self._in_src_dim, self._in_dst_dim
        T = self._time_dim
        if dt is None or dt is table.dt:  # the table's own gaps are 0 where padded
            dt = table.dt
        else:
            # Padding slots are never attended to, but Φ of a non-finite gap would still
            # poison the products below (0 * inf = NaN).
            dt = torch.where(mask, dt, torch.zeros((), dtype=dt.dtype, device=dt.device))
        w_dtype = self.fc_k.weight.dtype
        parts = self._table_parts(edge_feat, dt, w_dtype)
        wk = self.fc_k.weight.view(H, dk, -1)
        wv = self.fc_v.weight.view(H, dk, -1)
        scale = 1.0 / math.sqrt(dk)
        phi0 = self.time_encoder(dt.new_zeros(1)).to(w_dtype) if T else None

        if feat is None:
            # Zero node inputs: every destination has the same query (from Φ(0) alone), so
            # the scores are plain matrix products with the per-slot inputs.
            w1 = self.fc1.weight[:, Dd:]
            parts = merge_narrow(parts)
            if not parts:  # no input at all: a_i = 0 for every destination
                agg = w1.new_zeros(num_dst, H * dk)
            else:
                if T:
                    q = F.linear(phi0, self.fc_q.weight[:, Dd:]).view(H, dk)
                    q_pull = torch.einsum("hd,hdw->hw", q, wk[..., D:])  # [H, E + T]
                    score = None
                    for p, cols in parts:
                        term = few_outputs_linear(p, q_pull[:, cols.start - D: cols.stop - D])
                        score = term if score is None else score + term  # [N_dst, k, H]
                else:  # a zero query: uniform attention over the real slots
                    score = parts[0][0].new_zeros(num_dst, k, H)
                attn = self.attn_drop(_slot_softmax(score, mask, scale))
                agg = self._pulled_back_average(parts, attn, wv)
            o = self._attention_output(agg.reshape(num_dst, -1),
                                       self._padding_inputs(table, num_dst, padding_feat),
                                       None, phi0)
            return self._merge(None, o)

        if isinstance(feat, NodeRows):
            # Rows read straight from the node table: their gradients are summed per node,
            # with no per-instance tensor in between.
            h_dst = feat.head(num_dst)
            h_nbr = feat.gather(table.nbr.reshape(-1)).view(num_dst, k, -1)
        else:
            h_src, h_dst = _dense_feat_pair(feat, num_dst)
            # index_select (backward: index_add_) rather than h_src[nbr] (backward: an
            # accumulating index_put_, which sorts on CUDA); padding slots read source 0
            # and get zero weight.
            h_nbr = torch.index_select(h_src, 0, table.nbr.reshape(-1)).view(num_dst, k, -1)
        q = F.linear(h_dst, self.fc_q.weight[:, :Dd])
        if T:
            q = q + F.linear(phi0, self.fc_q.weight[:, Dd:])
        parts = merge_narrow([(h_nbr, slice(0, D))] + parts)
        # The query pulled back to key-input space, q~ = W_K^T q: [N_dst, H, D + E + T].
        q_pull = torch.einsum("nhd,hdw->nhw", q.view(num_dst, H, dk), wk)
        score = None
        for p, cols in parts:
            term = slot_product(SlotScores, p, q_pull[..., cols])
            score = term if score is None else score + term  # [N_dst, k, H]
        attn = self.attn_drop(_slot_softmax(score, mask, scale))
        agg = self._pulled_back_average(parts, attn, wv)
        o = self._attention_output(agg.reshape(num_dst, -1),
                                   self._padding_inputs(table, num_dst, padding_feat),
                                   h_dst, phi0)
        return self._merge(h_dst, o)

    # ------------------------------------------------------------------------ DGL path
    def _forward_graph(self, block, feat: Union[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]],
                       edge_feat: Optional[torch.Tensor], dt: Optional[torch.Tensor],
                       padding_feat: Optional[torch.Tensor] = None) -> torch.Tensor:
        """``forward`` on a DGL graph with node features (SDDMM/SpMM message passing)."""
        require_dgl("TemporalAttentionConv on a DGL graph")
        import dgl.function as fn
        from dgl.nn.functional import edge_softmax
        from dgl.utils import expand_as_pair

        with block.local_scope():
            h_src, h_dst = expand_as_pair(feat, block)
            if dt is None:
                dt = block.edata["dt"]
            _check_edge_inputs(block, edge_feat, dt)
            num_dst = h_dst.shape[0]
            H, dk, D = self._num_heads, self._head_dim, self._in_src_dim
            T = self._time_dim

            # Query, then pulled back to key-input space: q~ = W_K^T q / sqrt(dk).
            q = F.linear(h_dst, self.fc_q.weight[:, : self._in_dst_dim])
            phi0 = None
            if T:
                phi0 = self.time_encoder(dt.new_zeros(1))
                phi0 = phi0.to(torch.promote_types(phi0.dtype, q.dtype))
                q = q + F.linear(phi0, self.fc_q.weight[:, self._in_dst_dim:])
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
            o = self._attention_output(agg.reshape(num_dst, -1),
                                       self._padding_inputs(block, num_dst, padding_feat),
                                       h_dst, phi0)
            return self._merge(h_dst, o)

    def _edge_inputs(self, edge_feat: Optional[torch.Tensor], dt: torch.Tensor,
                     dtype: torch.dtype) -> Tuple[List[torch.Tensor], slice]:
        """Per-edge raw inputs ``z = [x ‖ Φ(dt)]`` (the parts present) and their columns in
        ``fc_k``/``fc_v``, which are contiguous."""
        D, E, T = self._in_src_dim, self._edge_dim, self._time_dim
        if edge_feat is not None and edge_feat.shape[-1] != E:
            raise ValueError(f"edge_feat has width {edge_feat.shape[-1]}, the layer "
                             f"expects edge_dim={E}")
        z_parts, z_start = [], D + E
        if edge_feat is not None and E:
            z_parts.append(edge_feat.to(dtype))
            z_start = D
        if T:
            # Φ is float32: promoted, so that a float64 layer stays float64 (and a bf16
            # input under autocast still meets a float32 Φ, as before).
            phi = self.time_encoder(dt)
            z_parts.append(phi.to(torch.promote_types(phi.dtype, dtype)))
        return z_parts, slice(z_start, D + E + T)

    def _forward_without_node_inputs(self, block, edge_feat: Optional[torch.Tensor],
                                     dt: Optional[torch.Tensor],
                                     padding_feat: Optional[torch.Tensor] = None
                                     ) -> torch.Tensor:
        r"""``forward`` on a DGL graph with all-zero node features.

        Every destination then has the same query (from :math:`\Phi(0)` alone), so the
        scores are one dense product with the per-edge inputs and only the attention-weighted
        sum of those inputs needs the graph.
        """
        require_dgl("TemporalAttentionConv on a DGL graph")
        import dgl.function as fn
        from dgl.nn.functional import edge_softmax

        with block.local_scope():
            if dt is None:
                dt = block.edata["dt"]
            _check_edge_inputs(block, edge_feat, dt)
            num_dst = block.num_dst_nodes() if block.is_block else block.num_nodes()
            H, dk, T = self._num_heads, self._head_dim, self._time_dim
            w1 = self.fc1.weight[:, self._in_dst_dim:]
            z_parts, z_col = self._edge_inputs(edge_feat, dt, w1.dtype)
            phi0 = None
            if T:
                phi0 = self.time_encoder(dt.new_zeros(1))
                phi0 = phi0.to(torch.promote_types(phi0.dtype, w1.dtype))
            if not z_parts:  # no input at all: a_i = 0 for every destination
                agg = w1.new_zeros(num_dst, H * dk)
            else:
                z = torch.cat(z_parts, dim=-1)
                if T:
                    q = F.linear(phi0, self.fc_q.weight[:, self._in_dst_dim:])
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
            o = self._attention_output(agg.reshape(num_dst, -1),
                                       self._padding_inputs(block, num_dst, padding_feat),
                                       None, phi0)
            return self._merge(None, o)

    def extra_repr(self) -> str:
        return (f"in_dim={self._in_src_dim}, out_dim={self._out_dim}, "
                f"num_heads={self._num_heads}, edge_dim={self._edge_dim}, "
                f"time_dim={self._time_dim}"
                + (f", attn_dim={self.attn_dim}" if self.attn_dim != self._out_dim else "")
                + (", attn_norm=True" if self.attn_norm else "")
                + (", attn_residual=True" if self.attn_residual else "")
                + (f", init={self._init!r}" if self._init != "xavier" else "")
                + (f", empty_neighbourhood={self.empty_neighbourhood!r}"
                   if self.empty_neighbourhood != "zero" else ""))
