"""Attention along each root-to-leaf temporal path (tBDFS's DFS branch, step 1)."""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, List, Optional, Sequence, Tuple, Union

import torch
import torch.nn.functional as F
from torch import nn

from .._deprecation import renamed_kwargs
from ._common import (AGG_MODES, WIDTH_RENAMES, NodeRows, check_heads, masked_softmax,
                      reset_attention, resolve_time_encoder)
from ._compile import compiling
from . import _distinct, _gathered_scores, _leaf_merge
from ._gemm import rows_linear
from ._slots import SlotScores, autocast_dtype, merge_narrow, slot_product
from .time_encoder import TimeEncoder

if TYPE_CHECKING:  # the batch types are only needed for annotations
    from ..batch import LayerTable, PathBatch

__all__ = ["PathEncoder"]


class _Combine(torch.autograd.Function):
    """One online-softmax output update, ``out = alpha · out_par + beta · v``.

    ``out_par``: ``[B, n, H, dk]`` parent states, ``alpha``/``beta``: ``[B, n, k, H']``
    (``H' = H``, or 1 for uniform weights), ``v``: ``[B, n, k, H, dk]``; returns ``[B, n, k,
    H, dk]``.  Autograd would keep and re-read broadcast temporaries of the per-child
    tensors (about 2.5x slower forward + backward on a CPU, measured); here forward is one
    product and one fused multiply-add, backward one pass per gradient.
    """

    @staticmethod
    def forward(ctx, out_par: torch.Tensor, alpha: torch.Tensor, beta: torch.Tensor,
                v: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(out_par, alpha, beta, v)
        # Plain flags, not ctx.needs_input_grad: torch.compile (2.2) cannot trace that.
        ctx.grads = (out_par.requires_grad, alpha.requires_grad, beta.requires_grad,
                     v.requires_grad)
        if not _narrow(v):
            # In place on the product: one temporary of v's size, not two.
            return (v * beta.unsqueeze(-1)).addcmul_(out_par.unsqueeze(2), alpha.unsqueeze(-1))
        # Narrow heads (width-4 models): the broadcasts over a 2-wide last dim run as
        # 2-element inner loops (4x slower than one strided pass per head column).
        # Written column by column into one buffer, in place (dynamo cannot trace out=
        # writes into column views).
        out = v.clone()
        for j in range(v.shape[-1]):
            out[..., j].mul_(beta).addcmul_(out_par[..., j].unsqueeze(2), alpha)
        return out

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> Tuple[Optional[torch.Tensor], ...]:
        out_par, alpha, beta, v = ctx.saved_tensors
        g_par, g_alpha, g_beta, g_v = ctx.grads
        grad_par = grad_alpha = grad_beta = grad_v = None
        narrow = _narrow(v)
        if g_par:
            grad_par = (grad * alpha.unsqueeze(-1)).sum(2)
        # Large tensors (on a CPU): the per-head dot products as batched matrix-vector
        # products, reading grad in place, instead of a broadcast product of grad's size
        # and its sum (2-3x faster at width 172; slower on small ones, measured).
        big = not narrow and v.device.type == "cpu" and v.numel() * v.element_size() > _BIG
        if g_alpha:
            op = out_par.unsqueeze(2)
            if big:
                grad_alpha = _dot_per_parent(grad, out_par)
            else:
                grad_alpha = _last_dim_dot(grad, op) if narrow else (grad * op).sum(-1)
            grad_alpha = grad_alpha.sum_to_size(alpha.shape)
        if g_beta:
            if big:
                dk = v.shape[-1]
                grad_beta = torch.bmm(grad.reshape(-1, 1, dk), v.reshape(-1, dk, 1)).view(
                    v.shape[:-1])
            else:
                grad_beta = _last_dim_dot(grad, v) if narrow else (grad * v).sum(-1)
            grad_beta = grad_beta.sum_to_size(beta.shape)
        if g_v:
            if narrow:
                grad_v = grad.clone()
                for j in range(v.shape[-1]):
                    grad_v[..., j].mul_(beta)
            else:
                grad_v = grad * beta.unsqueeze(-1)
        return grad_par, grad_alpha, grad_beta, grad_v


class _AddReluDropout(torch.autograd.Function):
    """``dropout(relu(x + c))`` in place on ``x``: ``x`` is a fresh ``[B·n, W]`` product
    (``n`` paths per root), ``c`` the ``[B, 1, W]`` per-root term.

    As separate ops this allocates five path-sized tensors forward and backward (at width
    172 each is a fresh, page-faulted mapping); here the output overwrites ``x`` (in
    ``forward``, out of autograd's sight: an in-place op on a view of the product would
    make autograd copy it whole in backward), the mask is a byte tensor, and backward is
    one threshold pass and one scale, reading only the output: an entry survives iff it is
    positive and kept, so ``grad_x = grad · [out > 0] / (1 - p)``.
    """

    @staticmethod
    def forward(ctx, x: torch.Tensor, c: torch.Tensor, p: float) -> torch.Tensor:
        ctx.mark_dirty(x)
        x.view(c.shape[0], -1, x.shape[-1]).add_(c)
        x.clamp_min_(0.0)
        ctx.scale = 1.0
        if p > 0.0:
            x.mul_(_leaf_merge.keep_mask(x.shape, p))  # as the fused hop draws it
            ctx.scale = 1.0 / (1.0 - p)
            x.mul_(ctx.scale)
        ctx.save_for_backward(x)
        ctx.c_shape = c.shape
        return x

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> Tuple[Optional[torch.Tensor], ...]:
        (out,) = ctx.saved_tensors
        grad_x = torch.ops.aten.threshold_backward(grad, out, 0.0)
        if ctx.scale != 1.0:
            grad_x.mul_(ctx.scale)
        B = ctx.c_shape[0]
        grad_c = grad_x.view(B, -1, grad_x.shape[-1]).sum(1, keepdim=True)
        return grad_x, grad_c, None


def _combine(out_par: torch.Tensor, alpha: torch.Tensor, beta: torch.Tensor,
             v: torch.Tensor) -> torch.Tensor:
    """``alpha · out_par + beta · v`` (see :class:`_Combine`); under ``torch.compile`` as
    plain ops, which the compiler fuses and differentiates itself (its backward would
    otherwise be a graph break)."""
    if compiling():
        return out_par.unsqueeze(2) * alpha.unsqueeze(-1) + v * beta.unsqueeze(-1)
    return _Combine.apply(out_par, alpha, beta, v)


def _add_relu_dropout_(x: torch.Tensor, c: torch.Tensor, drop: nn.Dropout) -> torch.Tensor:
    """``drop(relu(x.view(B, n, W) + c))`` for ``x: [B·n, W]``, ``c: [B, 1, W]``, as
    ``[B, n, W]``; on a CPU fused, overwriting ``x`` (see :class:`_AddReluDropout`)."""
    B, W = c.shape[0], x.shape[-1]
    p = drop.p if drop.training else 0.0
    if x.device.type != "cpu" or compiling() or p >= 1.0 or x._is_view():
        return drop(F.relu(x.view(B, -1, W) + c))  # GPU / compile: kernels fuse this
    return _AddReluDropout.apply(x, c, p).view(B, -1, W)


# Bytes above which _Combine's backward takes its dot products as batched products (glibc
# maps larger blocks afresh, so each temporary of that size is page-faulted in again).
_BIG = 32 << 20


def _dot_per_parent(grad: torch.Tensor, out_par: torch.Tensor) -> torch.Tensor:
    """``(grad * out_par.unsqueeze(2)).sum(-1)`` for ``grad: [B, n, k, H, dk]``,
    ``out_par: [B, n, H, dk]``: per head, one batched ``[k, dk] x [dk, 1]`` product per
    parent, over strided views of ``grad`` (no temporary of its size)."""
    B, n, k, H, dk = grad.shape
    g = grad.reshape(B * n, k, H, dk)
    o = out_par.reshape(B * n, H, dk)
    out = grad.new_empty(B * n, k, H)
    for m in range(H):
        out[..., m] = torch.bmm(g[:, :, m, :], o[:, m, :, None]).squeeze(-1)
    return out.view(B, n, k, H)


# Head width up to which _Combine works one head column at a time (on a CPU).
_NARROW_HEAD = 8


def _narrow(v: torch.Tensor) -> bool:
    return v.shape[-1] <= _NARROW_HEAD and v.device.type == "cpu"


def _last_dim_dot(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``(a * b).sum(-1)`` for a short last dim, as one strided pass per column (a sum over
    a 2-wide last dim is ~10x slower on a CPU)."""
    out = a[..., 0] * b[..., 0]
    for j in range(1, a.shape[-1]):
        out.addcmul_(a[..., j], b[..., j])
    return out


class PathEncoder(nn.Module):
    r"""Encode every temporal path of every root into one vector (tBDFS, DFS step 1).

    For the path :math:`p = (j_0 = i, j_1, \ldots, j_L)` of root :math:`i` queried at time
    :math:`t`, node :math:`j_h` contributes
    :math:`z_h = [h_{j_h} \| x_{e_h} \| \Phi(t - t_{j_h})]` where :math:`e_h` is the edge that
    reached :math:`j_h` and :math:`t` is the *root's* time (not the parent's); the root
    contributes :math:`z_0 = [h_i \| 0 \| \Phi(0)]`.  With ``within_path_agg='attn'``
    (attention over the path's nodes)

    .. math::
        q &= W_Q [h_i \| 0 \| \Phi(0)], \quad
        \alpha^{(m)}_{h} = \mathrm{softmax}_{h \in \{0..L\},\ \mathrm{present}}
            \left(q^{(m)} \cdot (W_K z_h)^{(m)} / \sqrt{d_k}\right) \\
        r_p &= W_2\,\mathrm{ReLU}\left(W_1 \left[h_i \,\Big\|\,
            \big\Vert_m \textstyle\sum_h \alpha^{(m)}_h (W_V z_h)^{(m)}\right] + b_1\right) + b_2

    and with ``within_path_agg='mean'`` the weights :math:`\alpha_h` are uniform over the
    present nodes (the paper's path-average ablation).  Missing hops never contribute; the root is
    always present, so an empty path still has a finite representation.

    Parameters
    ----------
    in_dim : int
        Width of the node features (the query's too).
    out_dim : int
        Output width; a multiple of ``num_heads``.
    num_heads : int, optional
        Attention heads, of width ``out_dim // num_heads``.  Default: ``2``.
    edge_dim : int, optional
        Edge feature width (``0``: none).  Default: ``0``.
    time_dim : int, optional
        Width of :math:`\Phi` (checked against ``time_encoder`` if both given).
        Default: ``100``.
    within_path_agg : {'attn', 'mean'}, optional
        Aggregation within each path, over its nodes (``path_agg`` before: deprecated).
        Default: ``'attn'``.
    feat_drop, attn_drop : float, optional
        Dropout on the merge's hidden layer / on the attention weights.  Default: ``0``.
    time_encoder : TimeEncoder, optional
        A (shared) time encoder; a private one is built if omitted.

    Notes
    -----
    Nothing of width :math:`d_k` is formed per path slot (``B·P·L`` of them): the query is
    pulled back through :math:`W_K` once per root (:math:`q \cdot W_K z = (W_K^\top q) \cdot
    z`), so the scores are batched dot products with the raw slot inputs, and the values
    enter only through :math:`\sum_h \alpha_h W_V z_h`, contracted without forming
    :math:`W_V z_h` per slot.  The node part of :math:`W_1` is applied once per root, and
    the model has its aggregator apply :math:`W_2` once per root.  Only the gathers
    and :math:`\Phi` are computed per slot.  :meth:`encode_tree` computes the same from the
    layer tables, once per sampled instance instead of once per slot.
    """

    @renamed_kwargs(WIDTH_RENAMES, path_agg="within_path_agg")
    def __init__(
        self,
        in_dim: int,
        out_dim: int,
        num_heads: int = 2,
        edge_dim: int = 0,
        time_dim: Optional[int] = None,
        within_path_agg: str = "attn",
        feat_drop: float = 0.0,
        attn_drop: float = 0.0,
        time_encoder: Optional[TimeEncoder] = None,
    ) -> None:
        super().__init__()
        if within_path_agg not in AGG_MODES:
            raise ValueError(f"within_path_agg must be one of {AGG_MODES}, "
                             f"got {within_path_agg!r}")
        if edge_dim < 0:
            raise ValueError(f"edge_dim must be >= 0, got {edge_dim}")
        self._in_dim = in_dim
        self._out_dim = out_dim
        self._num_heads = num_heads
        self._head_dim = check_heads(out_dim, num_heads)
        self._edge_dim = edge_dim
        self._within_path_agg = within_path_agg
        self.time_encoder = resolve_time_encoder(time_dim, time_encoder)
        self._time_dim = self.time_encoder.effective_dim
        hd = num_heads * self._head_dim
        key_in = in_dim + edge_dim + self._time_dim
        if within_path_agg == "attn":
            self.fc_q = nn.Linear(in_dim + self._time_dim, hd, bias=False)
            self.fc_k = nn.Linear(key_in, hd, bias=False)
        else:
            self.register_module("fc_q", None)
            self.register_module("fc_k", None)
        self.fc_v = nn.Linear(key_in, hd, bias=False)
        self.fc1 = nn.Linear(in_dim + hd, out_dim)
        self.fc2 = nn.Linear(out_dim, out_dim)
        self.feat_drop = nn.Dropout(feat_drop)
        self.attn_drop = nn.Dropout(attn_drop)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Reinitialise the learnable parameters (Xavier normal, zero biases)."""
        reset_attention((self.fc_q, self.fc_k, self.fc_v), (self.fc1, self.fc2))

    def _slot_inputs(
        self,
        paths: "PathBatch",
        feat: Optional[Union[torch.Tensor, Sequence[torch.Tensor]]],
        root_times: torch.Tensor,
        edge_feat: Optional[torch.Tensor],
    ) -> List[Tuple[torch.Tensor, slice]]:
        """Raw per-slot inputs ``[B, P, L, w]`` with their column range in ``fc_k``/``fc_v``."""
        B, P, L = paths.src_index.shape
        D, E, T = self._in_dim, self._edge_dim, self._time_dim
        # Empty slots read row 0 / edge 0 / Δt = 0 whatever they hold: finite values that
        # the zero weights below discard (cheaper than masking the wide tensors).
        mask = paths.mask
        idx = paths.src_index.masked_fill(~mask, 0)
        parts = []
        if feat is None:
            pass  # all-zero node inputs (a featureless graph): their terms vanish
        elif isinstance(feat, torch.Tensor):
            parts.append((feat[idx.reshape(-1)].view(B, P, L, D), slice(0, D)))
        else:
            if len(feat) != L:
                raise ValueError(f"feat has {len(feat)} per-hop tensors, paths have {L} hops")
            parts.append((torch.stack([f[idx[..., h]] for h, f in enumerate(feat)], dim=2),
                          slice(0, D)))
        if edge_feat is not None and E and edge_feat.numel():
            if edge_feat.shape[-1] != E:
                raise ValueError(f"edge_feat has width {edge_feat.shape[-1]}, the module "
                                 f"expects edge_dim={E}")
            if edge_feat.dim() == 4:  # already gathered per slot
                if edge_feat.shape[:3] != (B, P, L):
                    raise ValueError(f"per-slot edge_feat must be [{B}, {P}, {L}, {E}], got "
                                     f"{tuple(edge_feat.shape)}")
                x = edge_feat
            else:
                eids = paths.eids.masked_fill(~mask, 0).reshape(-1)
                x = edge_feat[eids].view(B, P, L, E)
            parts.append((x.float(), slice(D, D + E)))
        if T:
            # Gap to the ROOT's query time, in float64 until the encoder's cosine.
            dt = root_times.to(torch.float64).view(B, 1, 1) - paths.ts.to(torch.float64)
            dt = dt.masked_fill(~mask, 0.0)
            parts.append((self.time_encoder(dt), slice(D + E, D + E + T)))
        return parts

    def _root_terms(self, query_feat: torch.Tensor, root_times: torch.Tensor
                    ) -> Tuple[List[Tuple[torch.Tensor, slice]], Optional[torch.Tensor],
                               Optional[torch.Tensor]]:
        r"""The root's own terms, shared by :meth:`_encode_slots` and :meth:`_encode_tree`.

        Returns the root input :math:`z_0 = [h_i \| 0 \| \Phi(0)]` as ``(part, column
        range)`` pairs (the zero edge part left out) and, with attention, the query pulled
        back through :math:`W_K`, :math:`\tilde q = W_K^\top q / \sqrt{d_k}`
        (``[B, H, key_in]``: an input's score is then a dot product with it) and the
        root's own score ``[B, H]``; ``None, None`` with ``within_path_agg='mean'``.
        """
        B = query_feat.shape[0]
        H, dk = self._num_heads, self._head_dim
        D, E, T = self._in_dim, self._edge_dim, self._time_dim
        root_parts = [(query_feat, slice(0, D))]
        phi0 = None
        if T:
            phi0 = self.time_encoder(root_times.new_zeros(1, dtype=torch.float64)).to(
                self.fc_v.weight.dtype)
            root_parts.append((phi0.expand(B, T), slice(D + E, D + E + T)))
        if self._within_path_agg != "attn":
            return root_parts, None, None
        q = F.linear(query_feat, self.fc_q.weight[:, :D])
        if phi0 is not None:
            q = q + F.linear(phi0, self.fc_q.weight[:, D:])
        wk = self.fc_k.weight.view(H, dk, -1)
        q_pull = torch.einsum("bhd,hdw->bhw", q.view(B, H, dk), wk) / math.sqrt(dk)
        s_root = sum(torch.einsum("bw,bhw->bh", x, q_pull[..., c]) for x, c in root_parts)
        return root_parts, q_pull, s_root

    def forward(
        self,
        paths: "PathBatch",
        feat: Optional[Union[torch.Tensor, Sequence[torch.Tensor]]],
        query_feat: torch.Tensor,
        root_times: torch.Tensor,
        edge_feat: Optional[torch.Tensor] = None,
    ) -> torch.Tensor:
        r"""Encode the paths.

        Parameters
        ----------
        paths : PathBatch
            ``[B, P, L]`` path tensors (``src_index``, ``eids``, ``ts``, ``mask`` are read).
        feat : torch.Tensor or sequence of torch.Tensor or None
            Node features of the path hops: one ``[N, in_dim]`` tensor indexed by
            ``paths.src_index`` for every hop, or ``L`` tensors where ``feat[h]`` is indexed
            by ``paths.src_index[..., h]`` (hop ``h + 1``).
            ``None`` stands for all-zero node inputs (featureless graphs), whose terms
            are skipped.
        query_feat : torch.Tensor
            ``[B, in_dim]`` features :math:`h_i` of the roots (query and hop 0).
        root_times : torch.Tensor
            ``[B]`` query times of the roots (float64 preferred).
        edge_feat : torch.Tensor, optional
            ``[E, edge_dim]`` edge features indexed by ``paths.eids``, or the same already
            gathered per slot, ``[B, P, L, edge_dim]``; zeros if omitted.

        Returns
        -------
        torch.Tensor
            ``[B, P, out_dim]``, one representation per path slot (finite for empty
            slots, which callers should mask out with ``paths.mask.any(-1)``).
        """
        return self._encode_slots(paths, feat, query_feat, root_times, edge_feat, True)

    def _encode_slots(self, paths: "PathBatch",
                      feat: Optional[Union[torch.Tensor, Sequence[torch.Tensor]]],
                      query_feat: torch.Tensor, root_times: torch.Tensor,
                      edge_feat: Optional[torch.Tensor], project: bool) -> torch.Tensor:
        r""":meth:`forward`; ``project=False`` stops before the merge's last linear map
        ``fc2`` and returns the hidden layer :math:`u_p`, with :math:`r_p =
        \mathrm{fc2}(u_p)`, so that :class:`~tbdfs_dgl.TBDFSModel`, whose aggregator only
        takes convex combinations and linear functions of the :math:`r_p`, applies ``fc2``
        once per root instead of once per path."""
        B, P, L = paths.src_index.shape
        H, dk, D = self._num_heads, self._head_dim, self._in_dim
        mask = paths.mask
        parts = self._slot_inputs(paths, feat, root_times, edge_feat)
        root_parts, q_pull, s_root = self._root_terms(query_feat, root_times)

        if self._within_path_agg == "attn":
            # Slots with no input at all (no node, edge or time parts) score 0.
            s_slot = sum((torch.bmm(x.view(B, P * L, -1), q_pull[..., c].transpose(1, 2))
                          for x, c in parts), q_pull.new_zeros(B, P * L, H)).view(B, P, L, H)
            scores = torch.cat([s_root.view(B, 1, 1, H).expand(B, P, 1, H), s_slot], dim=2)
            present = torch.cat([mask.new_ones(B, P, 1), mask], dim=2).unsqueeze(-1)
            # The root is always present, so no row is all-masked here.
            attn = self.attn_drop(masked_softmax(scores, present, dim=2))
        else:
            present = torch.cat([mask.new_ones(B, P, 1), mask], dim=2).to(query_feat.dtype)
            attn = (present / present.sum(dim=2, keepdim=True)).unsqueeze(-1).expand(
                B, P, L + 1, H)
        a_root, a_slot = attn[:, :, 0], attn[:, :, 1:]  # [B, P, H], [B, P, L, H]

        wv = self.fc_v.weight.view(H, dk, -1)
        v_root = sum(F.linear(x, self.fc_v.weight[:, c]) for x, c in root_parts)
        agg = a_root.unsqueeze(-1) * v_root.view(B, 1, H, dk)  # [B, P, H, dk]
        for x, c in parts:
            # sum_h a_h W_V z_h: one contraction per input part, never forming W_V z per
            # slot (the cheapest of the orders tried on CPU; a C++ kernel for the per-path
            # weighted sums was 5% faster on one thread and 12% slower on two).
            agg = agg + torch.einsum("bplh,bplw,hdw->bphd", a_slot, x, wv[..., c])
        hidden = (F.linear(query_feat, self.fc1.weight[:, :D], self.fc1.bias).unsqueeze(1)
                  + F.linear(agg.reshape(B, P, H * dk), self.fc1.weight[:, D:]))
        hidden = self.feat_drop(F.relu(hidden))
        return self.fc2(hidden) if project else hidden

    def encode_tree(
        self,
        layers: Sequence["LayerTable"],
        feat: Optional[Union[torch.Tensor, Sequence[torch.Tensor]]],
        query_feat: torch.Tensor,
        root_times: torch.Tensor,
        edge_feat: Optional[Union[torch.Tensor, Sequence[Optional[torch.Tensor]]]] = None,
    ) -> Tuple[torch.Tensor, torch.Tensor]:
        r"""Encode every root-to-leaf path straight from the layer tables, sharing the work
        of each sampled instance between all the paths through it.

        Same result as :meth:`forward` on the :class:`~tbdfs_dgl.batch.PathBatch` of the
        same tree (see Notes for the one difference, attention dropout in training).

        Parameters
        ----------
        layers : sequence of LayerTable
            The ``L`` tables in DGL order (``layers[-1]`` has the ``B`` roots as its first
            destinations).  Hop ``h`` (``h = 0``: the roots' neighbours) is
            ``layers[L - 1 - h]``, and its width ``k_h`` fixes the slot layout: ``P =
            prod(k_h)`` slots, slot ``p``'s child choice at hop ``h`` being digit ``h`` of
            ``p`` in mixed radix with hop 0 most significant (the sampler's path layout
            when the tables are as wide as its fanouts).
        feat : torch.Tensor or NodeRows or sequence of torch.Tensor or None
            Node features of the sampled instances: one ``[N, in_dim]`` tensor indexed by
            source positions (valid in every layer, e.g. ``layers[0]``'s sources), the same
            as a :class:`~tbdfs_dgl.nn.NodeRows` (``table[index]`` with ``index`` the
            positions' node ids: the value map is then applied once per node and
            gathered, cheaper when instances outnumber nodes), or ``L`` tensors where
            ``feat[h]`` is indexed by the source positions of hop ``h``'s table
            ``layers[L - 1 - h]`` (the instances reached at hop ``h + 1``).  ``None``
            stands for all-zero node inputs, whose terms are skipped.
        query_feat : torch.Tensor
            ``[B, in_dim]`` features :math:`h_i` of the roots.
        root_times : torch.Tensor
            ``[B]`` query times of the roots (float64 preferred).
        edge_feat : torch.Tensor or sequence of torch.Tensor, optional
            ``[num_interactions, edge_dim]`` edge features indexed by the tables' ``eid``,
            or ``L`` tensors ``[N_dst, k, edge_dim]`` already gathered per table slot, in
            the order of ``layers``; zeros if omitted.

        Returns
        -------
        (torch.Tensor, torch.Tensor)
            ``[B, P, out_dim]`` path representations (finite in empty slots) and the bool
            ``[B, P]`` path mask, ``True`` where the slot holds a root-to-leaf chain (equal
            to ``paths.mask.any(-1)`` of the same tree).

        Notes
        -----
        Every sampled instance lies in exactly one root's tree, under one parent, so the
        padded dense layout ``[B, k_0, ..., k_{d-1}]`` of depth ``d`` holds each depth-``d``
        instance once.  Its raw input :math:`z`, score :math:`s = \tilde q_i \cdot z` and
        value :math:`W_V z` are computed there once, by GEMMs over all instances, and
        the softmax along a path is accumulated down the tree as an online softmax: the
        state of a root-to-instance chain is, per head, its running maximum :math:`m`,
        denominator :math:`d = \sum e^{s - m}` and normalised output :math:`o = \sum
        e^{s - m} W_V z / d`, and a child's state is its parent's combined with its own
        term (:math:`m' = \max(m, s)`, :math:`d' = d e^{m - m'} + e^{s - m'}`,
        :math:`o' = o\, d e^{m - m'} / d' + W_V z\, e^{s - m'} / d'`).  The cost per path
        is then one state update and ``fc1``, instead of ``L`` slots gathered,
        time-encoded, scored and contracted with :math:`W_V`.  A chain that ends early
        keeps its state down the zero digits, which is the slot the path layout gives it.
        The running maximum is a constant to autograd: the result does not depend on it, so
        its exact gradient is zero, and leaving it out saves the backward of the max.
        The states are kept in float32 (or the parameters' dtype if wider), also under
        autocast.  On a CPU, in float32, where every input part of the leaves comes as
        distinct rows (node rows, interactions, time gaps that repeat), the last hop and
        ``fc1``'s ReLU layer run as one C++ kernel that applies ``fc1`` per parent and per
        distinct row instead of per path (:mod:`tbdfs_dgl.nn._leaf_merge`; the same
        result up to float rounding, and the same dropout draws), and the scores of such
        inputs are read from their rows in place (:mod:`tbdfs_dgl.nn._gathered_scores`),
        so they are never gathered per instance.  Shapes depend only on the
        tables' shapes and Python loops only over the hops: no host synchronisation, and
        the method traces as one graph under :func:`torch.compile` (with ``use_time=False``
        on CPU, where the time encoder's native kernel is a graph break of its own).

        Attention dropout (training only) differs from :meth:`forward`'s, deliberately:
        there each (path, node) weight is dropped independently, which no sharing between
        paths allows.  Here each instance's *numerator* weight is dropped (and rescaled by
        ``1 / (1 - p)``) once for all the paths through it (the root's once per root and
        head), while the denominator is left whole, so the kept weights are those of the
        undropped softmax, as with :class:`torch.nn.Dropout` applied after a softmax.  In
        eval mode the two are identical.
        """
        return self._encode_tree(layers, feat, query_feat, root_times, edge_feat, True)

    def _encode_tree(self, layers: Sequence["LayerTable"],
                     feat: Optional[Union[torch.Tensor, Sequence[torch.Tensor]]],
                     query_feat: torch.Tensor, root_times: torch.Tensor,
                     edge_feat: Optional[Union[torch.Tensor, Sequence[Optional[torch.Tensor]]]],
                     project: bool) -> Tuple[torch.Tensor, torch.Tensor]:
        """:meth:`encode_tree`; ``project=False`` returns the hidden layer before ``fc2``
        (see :meth:`_encode_slots`)."""
        L = len(layers)
        if L == 0:
            raise ValueError("encode_tree needs at least one layer table")
        B = query_feat.shape[0]
        H, dk = self._num_heads, self._head_dim
        D, E, T = self._in_dim, self._edge_dim, self._time_dim
        device = query_feat.device
        tables = list(layers)[::-1]  # hop order: tables[h] is hop h
        if tables[0].num_dst < B:
            raise ValueError(f"layers[-1] has {tables[0].num_dst} destinations for {B} roots")
        per_hop_feat = feat is not None and not isinstance(feat, (torch.Tensor, NodeRows))
        # Node rows given per node (the model's h^(0)): their value projection once per
        # node, gathered per instance below, instead of a GEMM over every instance.
        node_v = (F.linear(feat.table, self.fc_v.weight[:, :D])
                  if isinstance(feat, NodeRows) and D else None)
        if per_hop_feat and len(feat) != L:
            raise ValueError(f"feat has {len(feat)} per-hop tensors, layers have {L} hops")
        use_edge = False
        per_slot_edge = False
        if edge_feat is not None and E:
            if isinstance(edge_feat, torch.Tensor):
                use_edge = edge_feat.numel() > 0
                if use_edge and (edge_feat.dim() != 2 or edge_feat.shape[-1] != E):
                    raise ValueError(f"edge_feat must be [num_interactions, {E}], got "
                                     f"{tuple(edge_feat.shape)}")
            else:
                if len(edge_feat) != L:
                    raise ValueError(f"edge_feat has {len(edge_feat)} per-layer tensors, "
                                     f"layers have {L}")
                use_edge = per_slot_edge = all(x is not None for x in edge_feat)
        # The parameters' dtype: the time encodings and edge rows (float32 by construction)
        # are cast to it, node features are taken as given (as in forward).  Softmax
        # states are at least float32 whatever the activations are (bf16 under autocast).
        wdtype = self.fc_v.weight.dtype
        sdtype = torch.promote_types(wdtype, torch.float32)

        root_parts, q_pull, s_root = self._root_terms(query_feat, root_times)
        v_root = sum(F.linear(x, self.fc_v.weight[:, c]) for x, c in root_parts)
        v_root = v_root.view(B, 1, H, dk).to(sdtype)
        attn = self._within_path_agg == "attn"
        if attn:
            # State of the chain made of the root alone: m = s_root, so its weight is 1.
            # The running max m is a constant to autograd (the results do not depend on
            # it, so its exact gradient is 0): the root's score then enters through its
            # weight w0 = exp(s_root - m), exactly 1.
            s_root = s_root.to(sdtype).view(B, 1, H)
            m = s_root.detach()
            den = torch.exp(s_root - m)
            out = (self.attn_drop(den) / den).unsqueeze(-1) * v_root
        else:
            out, den = v_root, v_root.new_ones(B, 1, 1)

        root_t = root_times.to(device=device, dtype=torch.float64).view(B, 1, 1)
        # The last hop fused with fc1 (see _leaf_merge), where its kernel runs and every
        # value part of the leaves comes as distinct rows (checked at the last hop).
        fuse = (_leaf_merge.available(device, sdtype) and wdtype == sdtype
                and (self.feat_drop.p < 1.0 or not self.feat_drop.training))
        hidden = None
        # Parts that come as rows of a table (distinct keys, node rows) are then not
        # gathered per instance: values come from the rows, and so do the scores, by a
        # kernel that reads them in place (or there are none: uniform weights).
        rows_only = not attn or _gathered_scores.available(device, wdtype)
        # Depth-d dense layout: [B, n_d] with n_d = k_0·…·k_{d-1}, row-major over the
        # child choices (the slot order); pos = source position of the instance in hop
        # d-1's table (= its destination row in hop d's), present = the instance exists.
        pos = torch.arange(B, device=device).view(B, 1)
        present = torch.ones(B, 1, dtype=torch.bool, device=device)
        valid = present
        n = 1
        for h, table in enumerate(tables):
            k = table.fanout
            # Children of every depth-h instance; absent parents read row 0 (finite),
            # their children masked out below.
            child = table.nbr[pos]  # [B, n, k]
            c_mask = table.mask[pos] & present.unsqueeze(-1)
            flat = child.reshape(-1)
            # Input parts: (per-instance inputs [B, n·k, w], their columns); the inputs
            # are None for a part kept as table rows only (see rows_only).  By column
            # start, the parts kept as rows: `scored` (rows, the instances' row index) for
            # the scores, `shared` (distinct rows, inverse index) for the values, mapped
            # once per row.
            parts = []
            scored = {}
            shared = {}
            node_ids = None
            # index_select: the row gather CPU kernels do fastest (2-4x aten::index here).
            if isinstance(feat, NodeRows):
                node_ids = feat.index.index_select(0, flat)
                # (narrow rows stay gathered: merge_narrow joins them with the others)
                if rows_only and _distinct.pays(feat.table, D, self._out_dim):
                    scored[0] = (feat.table, node_ids)
                    parts.append((None, slice(0, D)))
                else:
                    parts.append((feat.table.index_select(0, node_ids).view(B, n * k, D),
                                  slice(0, D)))
            elif feat is not None:
                f = feat[h] if per_hop_feat else feat
                parts.append((f.index_select(0, flat).view(B, n * k, D), slice(0, D)))
            if use_edge:
                if per_slot_edge:
                    x = edge_feat[L - 1 - h].index_select(0, pos.reshape(-1))  # [B·n, k, E]
                else:
                    eids = table.eid[pos].clamp(min=0).reshape(-1)
                    # A batch reaches each interaction many times (Wikipedia, [20, 20]:
                    # ~46k distinct among ~200k slots of hop 2): the value map once per
                    # distinct interaction (on a CPU, see _distinct).
                    rows = (_distinct.distinct_rows(eids)
                            if _distinct.pays(edge_feat, E, self._out_dim) else None)
                    if rows is not None:
                        x_u = edge_feat.index_select(0, rows[0]).to(wdtype)
                        shared[D] = scored[D] = (x_u, rows[1])
                        x = None if rows_only else x_u.index_select(0, rows[1])
                    else:
                        x = edge_feat.index_select(0, eids)
                parts.append((None if x is None else x.reshape(B, n * k, E).to(wdtype),
                              slice(D, D + E)))
            if T:
                # Gap to the ROOT's time (as forward), in float64 until the encoder.
                dt = root_t - table.src_ts[child].to(torch.float64)
                dt = torch.where(c_mask, dt, torch.zeros((), dtype=dt.dtype, device=device))
                # Gaps repeat (see _distinct): on a CPU the encoding and its value map
                # once per distinct gap.
                phi, rows = _distinct.encode_gaps(self.time_encoder, dt, wdtype, self._out_dim,
                                                  gather=not rows_only)
                if rows is not None:
                    shared[D + E] = scored[D + E] = rows
                parts.append((None if phi is None else phi.view(B, n * k, T),
                              slice(D + E, D + E + T)))
            if all(x is not None for x, _ in parts):
                parts = merge_narrow(parts)  # one part if all are narrow (width-4 models)
            # Each instance's terms once, for all the paths below it: one GEMM (values)
            # and one batched product with the root's pulled-back query (scores) per input
            # part.  Separate parts rather than one concatenated z (unless all are narrow):
            # no copy, and no gradient is formed for a part that needs none (raw edge
            # features).
            v = s = None
            # (unless merge_narrow joined the node part with the others)
            per_node = node_v is not None and parts[0][1] == slice(0, D)
            tabled = [(per_node and i == 0) or (c.start in shared and c.stop - c.start
                                                 == shared[c.start][0].shape[-1])
                      for i, (_, c) in enumerate(parts)]
            # The fused last hop takes each part's distinct rows and the leaves' index.
            leaf_rows = [] if fuse and h == L - 1 and parts and all(tabled) else None
            if per_node:
                if leaf_rows is not None:
                    leaf_rows.append((node_v, node_ids))
                else:
                    v = node_v.index_select(0, node_ids)
            for i, (x, c) in enumerate(parts):
                w_c = self.fc_v.weight[:, c]
                if per_node and i == 0:
                    pass  # gathered above
                elif tabled[i]:
                    rows, inv = shared[c.start]
                    if leaf_rows is not None:
                        # the value map composed with fc1's in the fused hop
                        leaf_rows.append((rows, inv, w_c))
                    else:
                        v_s = rows_linear(rows, w_c).index_select(0, inv)
                        # In place on a fresh gather (index_select keeps no output for
                        # its backward): no third tensor of v's size.
                        v = v_s if v is None else v.add_(v_s)
                else:
                    v = rows_linear(x.reshape(B * n * k, -1), w_c, v)
                if attn and x is not None:
                    # [B, n·k, w] x [B, H, w]: the layer's score product, whose backward
                    # avoids the slow CPU batched-GEMM shapes of autograd's bmm.
                    s_c = slot_product(SlotScores, x, q_pull[..., c])
                    s = s_c if s is None else s + s_c
            cols = [c for x, c in parts if x is None]  # parts as table rows only
            if attn and cols:
                s_r = _gathered_scores.gathered_scores(
                    [q_pull[..., c] for c in cols], [scored[c.start] for c in cols])
                s_r = s_r.view(B, n * k, H)
                s = s_r if s is None else s + s_r
            if leaf_rows is None:
                v = (v.view(B, n, k, H, dk) if v is not None
                     else out.new_zeros(B, n, k, H, dk))
            keep = c_mask.unsqueeze(-1)  # [B, n, k, 1]
            if attn:
                s = (s.view(B, n, k, H).to(sdtype) if s is not None
                     else m.new_zeros(B, n, k, H))
                # Online softmax step; an absent child leaves its parent's state unchanged
                # (its score replaced by the parent's max, its weight zeroed), so a chain
                # that ends early carries its state down to the leaf slots.
                # m is kept out of autograd (see the root's state): no max/where/exp
                # backward passes over the [B, n, k, H] scores for it.
                m_par = m.unsqueeze(2)  # [B, n, 1, H]
                m_new = torch.where(keep, torch.maximum(m_par, s.detach()), m_par)
                den_par = den.unsqueeze(2) * torch.exp(m_par - m_new)  # rescaled to m_new
                w = torch.exp(torch.where(keep, s, m_new) - m_new) * keep
                den = den_par + w
                # The state holds out = num / den, not num: the update's factors are
                # [.., H] tensors, and no per-path division (nor its backward) is left.
                alpha, beta = den_par / den, self.attn_drop(w) / den
                m = m_new.reshape(B, n * k, H)
                den = den.reshape(B, n * k, H)
            else:
                # Uniform weights: a running mean over the present nodes.
                den_par = den.unsqueeze(2)
                den = den_par + keep
                alpha, beta = den_par / den, keep / den
                den = den.reshape(B, n * k, 1)
            if leaf_rows is not None:
                hidden = _leaf_merge.leaf_merge(
                    F.linear(query_feat, self.fc1.weight[:, :D], self.fc1.bias), out, alpha,
                    beta, leaf_rows, self.fc1.weight[:, D:], self.feat_drop)
            else:
                out = _combine(out, alpha, beta, v.to(out.dtype)).reshape(B, n * k, H, dk)
            # A slot holds a chain iff its first node exists and every later child choice
            # is either an existing node or 0 (where an early-ending chain is stored).
            digit0 = torch.arange(k, device=device) == 0
            valid = valid.unsqueeze(-1) & (c_mask | digit0) if h else c_mask
            valid = valid.reshape(B, n * k)
            pos, present, n = child.reshape(B, n * k), c_mask.reshape(B, n * k), n * k

        if hidden is not None:  # the fused last hop made it
            return (self.fc2(hidden) if project else hidden), valid
        agg = out.reshape(B, n, H * dk).to(wdtype)
        hidden = _add_relu_dropout_(
            rows_linear(agg.reshape(B * n, H * dk), self.fc1.weight[:, D:]),
            F.linear(query_feat, self.fc1.weight[:, :D], self.fc1.bias).unsqueeze(1),
            self.feat_drop)
        return (self.fc2(hidden) if project else hidden), valid

    def extra_repr(self) -> str:
        return (f"in_dim={self._in_dim}, out_dim={self._out_dim}, "
                f"num_heads={self._num_heads}, edge_dim={self._edge_dim}, "
                f"time_dim={self._time_dim}, within_path_agg={self._within_path_agg!r}")
