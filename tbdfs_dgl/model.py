"""The tBDFS model: a TGAT (BFS) stack blended with a temporal-path (DFS) branch."""
from __future__ import annotations

import numbers
import warnings
from typing import TYPE_CHECKING, Any, List, Optional, Tuple, Union

import torch
from torch import nn

from ._deprecation import FEAT_RENAMES, deprecated_alias, renamed_kwargs
from .explain import PathAttention, explain
from .nn import (LinkScorer, NodeRows, PathAggregator, PathEncoder, TemporalAttentionConv,
                 TimeEncoder)
from .nn._compile import compiling
from .nn.time_encoder import resolve_time_encoding
from .nn.temporal_attention import INITS

if TYPE_CHECKING:
    from .batch import TemporalBatch

__all__ = ["TBDFSModel"]

PATH_INPUTS = ("raw", "bfs")
# The time-encoding form of new models (docs/learning_efficiency.md); checkpoints record
# theirs, and those recording none are release 0.1's 'cos_sin'.
DEFAULT_TIME_ENCODING = "cos_phase"
# The BFS layers' form of new models (round 9, docs/learning_efficiency.md section 12):
# DyGLib's attention without its residual.  Checkpoints record attn_dim and attn_norm;
# those recording neither are TGAT's form (attn_norm=False, attn_dim=hidden_dim).
DEFAULT_ATTN_NORM = True
DEFAULT_ATTN_INIT = "torch"
# What a BFS destination without eligible neighbours attends to (round 10,
# docs/learning_efficiency.md section 14): TGAT's and DyGLib's padding at time 0.
# Checkpoints record it; those recording nothing are 'zero' (a_i = 0), the only behaviour
# before round 10.
DEFAULT_EMPTY_NEIGHBOURHOOD = "padding"
#: What a BFS destination without eligible neighbours attends to (``empty_neighbourhood``).
EMPTY_NEIGHBOURHOODS = ("zero", "padding", "padding_node")
AGG_MODES = ("attn", "mean")

#: Constructor arguments renamed in release 0.2 (old name -> new name); the old names still
#: work, with a DeprecationWarning, and checkpoints saved with them load silently.
RENAMED_KWARGS = {"path_agg": "within_path_agg", "paths_agg": "across_paths_agg"}


def _check_dim(name: str, value: object, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")


def _check_feat(kind: str, feat: Optional[torch.Tensor], dim: int, rows: str) -> None:
    """``{kind}_feat`` must be ``[rows, dim]`` when ``dim > 0``, absent (or empty) otherwise."""
    if feat is not None and not isinstance(feat, torch.Tensor):
        raise TypeError(f"{kind}_feat must be a torch.Tensor, got {type(feat).__name__} "
                        "(a NumPy array converts with torch.from_numpy)")
    if dim:
        if feat is None:
            raise ValueError(f"the model has {kind}_dim={dim}: pass {kind}_feat")
        if feat.dim() != 2 or feat.shape[1] != dim:
            raise ValueError(f"{kind}_feat must be [{rows}, {dim}], got {tuple(feat.shape)}")
    elif feat is not None and feat.numel():
        raise ValueError(f"{kind}_feat given but the model has {kind}_dim=0")


def _check_rows(ids: torch.Tensor, rows: int, what: str, table: str) -> None:
    """Every id in ``ids`` must index one of ``rows`` rows of ``table``, or the gather fails
    with a bare "index out of range".  Checked on a CPU only: on a GPU the maximum would
    wait for the device, and under ``torch.compile`` it would break the graph."""
    if ids.device.type != "cpu" or ids.numel() == 0 or compiling():
        return
    top = int(ids.max())
    if top >= rows:
        raise ValueError(f"the batch refers to {what} {top}, but {table} has {rows} "
                         f"row{'' if rows == 1 else 's'}: "
                         f"pass one row per {what} of the graph the batch was sampled from")


class TBDFSModel(nn.Module):
    r"""tBDFS (Singer et al., AAAI 2022): temporal embeddings from BFS and DFS aggregation.

    .. math::
        h_i(t) = \alpha\, h^{BFS}_i(t) + (1 - \alpha)\, h^{DFS}_i(t)

    :math:`h^{BFS}` is an ``num_layers``-layer TGAT stack
    (:class:`~tbdfs_dgl.nn.TemporalAttentionConv`) over the sampled blocks;
    :math:`h^{DFS}` encodes every root-to-leaf temporal path
    (:class:`~tbdfs_dgl.nn.PathEncoder`) and attends over them with :math:`h^{BFS}` as the
    query (:class:`~tbdfs_dgl.nn.PathAggregator`).

    Parameters
    ----------
    node_dim : int
        Width of the node features (``0``: featureless).
    edge_dim : int
        Width of the edge (interaction) features (``0``: featureless).
    time_dim : int
        Width of the time encoding (even).
    hidden_dim : int
        Model width: every embedding, whatever the input widths; a multiple of
        ``num_heads``.  Node inputs are projected to it first (zeros when there are none, as
        in TGAT); edge features enter the attention maps directly.
    num_layers : int, optional
        BFS layers ``L``; batches must have ``L`` blocks and ``L``-hop paths.  Default: 2.
    num_heads : int, optional
        Attention heads everywhere.  Default: 2.
    dropout : float, optional
        Dropout on attention weights and merge layers.  Default: 0.1.
    alpha : float in [0, 1] or 'learn', optional
        BFS weight.  ``1`` is exactly TGAT (the DFS modules are not even built); ``0`` is
        DFS only (the BFS stack still gives the query); ``'learn'`` blends with a per-root
        gate :math:`\sigma(w^\top [h^{BFS} \| h^{DFS}] + b)`.  Default: 0.5.
    within_path_agg : {'attn', 'mean'}, optional
        Aggregation within each path, over its nodes (``'mean'``: the paper's path-average
        ablation).  Formerly ``path_agg`` (deprecated alias).
    across_paths_agg : {'attn', 'mean'}, optional
        Aggregation across a root's paths.  Formerly ``paths_agg`` (deprecated alias).
    path_inputs : {'raw', 'bfs'}, optional
        Node inputs of the path branch.  ``'raw'`` (the paper): the input embedding
        :math:`h^{(0)}` for every path node and for the root (query).  ``'bfs'`` (the
        official code): hop ``h`` (``1..L``, an instance sampled as a source of
        ``blocks[L-h]``) feeds its layer-``(L-h)`` BFS embedding :math:`h^{(L-h)}` (the
        output of BFS layer ``L-h-1`` for that instance; :math:`h^{(0)}` for the leaves) and
        the root feeds :math:`h^{(L-1)}`, its embedding before the last BFS layer.
    use_time : bool, optional
        ``False`` zeroes the time encoding (the paper's "−time" ablation; sample with
        ``time_rule='inclusive'`` then, see :attr:`time_rule`).
    num_nodes : int, optional
        Number of nodes; required when ``node_embedding_dim > 0``.
    node_embedding_dim : int, optional
        If ``> 0``, a learnable ``nn.Embedding(num_nodes, node_embedding_dim)`` is
        concatenated to the node features (transductive).  Default: 0.
    normalize_time : bool, optional
        Deprecated spelling of ``time_encoding`` (``DeprecationWarning``): ``True`` is
        ``'cos_sin'``, ``False`` ``'cos_sin_unscaled'``.
    time_encoding : {'cos_sin', 'cos_sin_unscaled', 'cos_phase'}, optional
        Form of the time encoding (:class:`~tbdfs_dgl.nn.TimeEncoder`): release 0.1's
        ``'cos_sin'`` (scaled cos/sin pairs), the same unscaled, or DyGLib's
        ``cos(w·Δt + b)`` (``'cos_phase'``, which learned fastest early on CollegeMsg,
        ``docs/learning_efficiency.md``).  Default ``'cos_phase'`` (or what
        ``normalize_time`` says); release 0.1 had ``'cos_sin'``.  Recorded in checkpoints
        with the other arguments; checkpoints without either are release-0.1 models.
    attn_dim : int, optional
        Attention width of the BFS layers (:class:`~tbdfs_dgl.nn.TemporalAttentionConv`),
        a multiple of ``num_heads``.  Default: with ``attn_norm``, DyGLib's width
        ``hidden_dim + time_dim`` (``hidden_dim`` without time), rounded up to a multiple
        of ``num_heads``; without it, TGAT's ``hidden_dim``.
    attn_norm : bool, optional
        BFS layers map their attention output by ``W_O``, dropout and a LayerNorm before
        the merge (DyGLib's attention without its residual; see
        :class:`~tbdfs_dgl.nn.TemporalAttentionConv`).  Default ``True`` since round 9,
        which learned faster per step (``docs/learning_efficiency.md`` section 12);
        ``False`` is TGAT's form, the default before.  Checkpoints record ``attn_dim``
        and ``attn_norm``; those recording neither are TGAT's form.
    attn_init : {'xavier', 'torch'}, optional
        Initialisation of the BFS layers: TGAT's Xavier-normal or torch's defaults
        (DyGLib's).  Default: ``'torch'`` with ``attn_norm``, else ``'xavier'``.
    empty_neighbourhood : {'zero', 'padding', 'padding_node'}, optional
        What a BFS destination without eligible neighbours attends to (see
        :class:`~tbdfs_dgl.nn.TemporalAttentionConv`): nothing (``'zero'``), or padding
        slots at time 0, whose value encodes the destination's own time: with zero node
        input (``'padding'``), or, exactly as TGAT's and DyGLib's code, with the padding
        node's own embedding one layer down (``'padding_node'``: their padding node 0 is
        embedded by the same recursion as any node, :meth:`~tbdfs_dgl.nn.
        TemporalAttentionConv.padding_output`; in the first layer its input is what a node
        with zero features gets, ``node_proj(0)``, or zero without node inputs).  Default
        ``'padding'`` since round 10, which learned faster on CollegeMsg and as fast on
        Wikipedia (``docs/learning_efficiency.md`` section 14); ``'zero'`` is the behaviour
        before.  ``'padding_node'`` learns faster still in the first steps and a little
        less over whole epochs (section 15).  Checkpoints record it; those without it are
        ``'zero'``.
    attn_residual : bool, optional
        With ``attn_norm``, BFS layers also add DyGLib's residual (their query input
        ``[h_i ‖ Φ(0)]``) before the LayerNorm: DyGLib's attention layer whole.  Needs
        ``attn_dim == hidden_dim + time_dim`` (the default width with ``attn_norm``).
        Default ``False`` (``docs/learning_efficiency.md`` section 15 measures it).
        Checkpoints record it when set.
    """

    #: Deprecated attribute names (release 0.1), forwarding with a warning.
    path_agg = deprecated_alias("within_path_agg")
    paths_agg = deprecated_alias("across_paths_agg")

    @renamed_kwargs(RENAMED_KWARGS)
    def __init__(
        self,
        node_dim: int,
        edge_dim: int,
        time_dim: int,
        hidden_dim: int,
        num_layers: int = 2,
        num_heads: int = 2,
        dropout: float = 0.1,
        alpha: Union[float, str] = 0.5,
        within_path_agg: str = "attn",
        across_paths_agg: str = "attn",
        path_inputs: str = "raw",
        use_time: bool = True,
        num_nodes: Optional[int] = None,
        node_embedding_dim: int = 0,
        normalize_time: Optional[bool] = None,
        time_encoding: Optional[str] = None,
        attn_dim: Optional[int] = None,
        attn_norm: bool = DEFAULT_ATTN_NORM,
        attn_init: Optional[str] = None,
        empty_neighbourhood: str = DEFAULT_EMPTY_NEIGHBOURHOOD,
        attn_residual: bool = False,
    ) -> None:
        super().__init__()
        _check_dim("node_dim", node_dim, 0)
        _check_dim("edge_dim", edge_dim, 0)
        _check_dim("time_dim", time_dim, 2)
        if normalize_time is not None:
            warnings.warn("TBDFSModel(normalize_time=...) is deprecated: use time_encoding="
                          "'cos_sin' (True) or 'cos_sin_unscaled' (False)", DeprecationWarning,
                          stacklevel=3)  # the caller, past the renamed_kwargs wrapper
        elif time_encoding is None:
            time_encoding = DEFAULT_TIME_ENCODING
        time_encoding = resolve_time_encoding(time_encoding, normalize_time)
        if time_dim % 2 and time_encoding != "cos_phase":
            raise ValueError(f"time_dim must be even (cos/sin pairs), got {time_dim}")
        _check_dim("hidden_dim", hidden_dim, 1)
        _check_dim("num_layers", num_layers, 1)
        _check_dim("num_heads", num_heads, 1)
        if hidden_dim % num_heads:
            raise ValueError(f"hidden_dim ({hidden_dim}) must be a multiple of num_heads "
                             f"({num_heads})")
        # attn_dim, attn_norm and attn_residual are checked by TemporalAttentionConv.
        if empty_neighbourhood not in EMPTY_NEIGHBOURHOODS:
            raise ValueError(f"empty_neighbourhood must be one of {EMPTY_NEIGHBOURHOODS}, "
                             f"got {empty_neighbourhood!r}")
        if attn_dim is None:
            attn_dim = hidden_dim
            if attn_norm is True and use_time:
                attn_dim = -(-(hidden_dim + time_dim) // num_heads) * num_heads
        if attn_init is None:
            attn_init = DEFAULT_ATTN_INIT if attn_norm is True else "xavier"
        if attn_init not in INITS:  # checked here too: the layer calls it `init`
            raise ValueError(f"attn_init must be one of {INITS}, got {attn_init!r}")
        if not isinstance(dropout, numbers.Real) or not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout!r}")
        if isinstance(alpha, str):
            if alpha != "learn":
                raise ValueError(f"alpha must be a number in [0, 1] or 'learn', got {alpha!r}")
        elif (isinstance(alpha, bool) or not isinstance(alpha, numbers.Real)
              or not 0.0 <= float(alpha) <= 1.0):
            raise ValueError(f"alpha must be a number in [0, 1] or 'learn', got {alpha!r}")
        for name, value in (("within_path_agg", within_path_agg),
                            ("across_paths_agg", across_paths_agg)):
            if value not in AGG_MODES:
                raise ValueError(f"{name} must be one of {AGG_MODES}, got {value!r}")
        if path_inputs not in PATH_INPUTS:
            raise ValueError(f"path_inputs must be one of {PATH_INPUTS}, got {path_inputs!r}")
        _check_dim("node_embedding_dim", node_embedding_dim, 0)
        if node_embedding_dim > 0:
            if num_nodes is None:
                raise ValueError("node_embedding_dim > 0 needs num_nodes")
            _check_dim("num_nodes", num_nodes, 1)

        self.node_dim = int(node_dim)
        self.edge_dim = int(edge_dim)
        self.time_dim = int(time_dim)
        self.hidden_dim = int(hidden_dim)
        self.num_layers = int(num_layers)
        self.num_heads = int(num_heads)
        self.alpha = alpha if isinstance(alpha, str) else float(alpha)
        self.within_path_agg = within_path_agg
        self.across_paths_agg = across_paths_agg
        self.path_inputs = path_inputs
        self.use_time = bool(use_time)
        self.num_nodes = num_nodes
        self.node_embedding_dim = int(node_embedding_dim)
        self.time_encoding = time_encoding
        self.normalize_time = time_encoding == "cos_sin"
        self.attn_init = attn_init

        self.time_encoder = TimeEncoder(time_dim, use_time=use_time, encoding=time_encoding)
        self.node_embedding = (nn.Embedding(num_nodes, node_embedding_dim)
                               if node_embedding_dim > 0 else None)
        node_in = node_dim + node_embedding_dim
        # Featureless graphs use h^(0) = 0 (as TGAT) instead of a projection of nothing.
        self.node_proj = nn.Linear(node_in, hidden_dim) if node_in > 0 else None
        self.layers = nn.ModuleList(
            TemporalAttentionConv(hidden_dim, hidden_dim, num_heads, edge_dim=edge_dim,
                                  feat_drop=dropout, attn_drop=dropout,
                                  time_encoder=self.time_encoder, attn_dim=attn_dim,
                                  attn_norm=attn_norm, init=attn_init,
                                  # the layers pad; padding_node only adds their input
                                  empty_neighbourhood=("zero" if empty_neighbourhood == "zero"
                                                       else "padding"),
                                  attn_residual=attn_residual)
            for _ in range(num_layers))
        self.attn_dim = self.layers[0].attn_dim
        self.attn_norm = self.layers[0].attn_norm
        self.empty_neighbourhood = empty_neighbourhood
        self.attn_residual = self.layers[0].attn_residual
        if self.uses_dfs:
            self.path_encoder = PathEncoder(hidden_dim, hidden_dim, num_heads,
                                            edge_dim=edge_dim, within_path_agg=within_path_agg,
                                            feat_drop=dropout, attn_drop=dropout,
                                            time_encoder=self.time_encoder)
            self.path_aggregator = PathAggregator(hidden_dim, hidden_dim, num_heads,
                                                  across_paths_agg=across_paths_agg,
                                                  attn_drop=dropout)
        else:
            # alpha == 1 is TGAT: no DFS parameters, no DFS work.
            self.register_module("path_encoder", None)
            self.register_module("path_aggregator", None)
        self.gate = nn.Linear(2 * hidden_dim, 1) if alpha == "learn" else None
        # Link scorer FFN(h_i ‖ h_j), TGAT's affinity MergeLayer.  Its layers are registered
        # under the model's names of release 0.1 (score_fc1, score_fc2), so state dicts keep
        # their keys; the scorer around them is held outside the module tree, else they
        # would be registered (and saved) twice.
        self.score_fc1 = nn.Linear(2 * hidden_dim, hidden_dim)
        self.score_fc2 = nn.Linear(hidden_dim, 1)
        object.__setattr__(self, "_link_scorer",
                           LinkScorer.from_layers(self.score_fc1, self.score_fc2))
        self.reset_parameters()

    @property
    def link_scorer(self) -> LinkScorer:
        """The link scorer of :meth:`score` (its layers are :attr:`score_fc1`,
        :attr:`score_fc2`)."""
        return self._link_scorer

    @property
    def uses_dfs(self) -> bool:
        """Whether the DFS (path) branch exists, i.e. ``alpha != 1``."""
        return isinstance(self.alpha, str) or self.alpha != 1.0

    @property
    def time_rule(self) -> str:
        """Sampler time rule this model is meant for (``TemporalSampler(time_rule=...)``).

        ``'strict'`` (edges with :math:`t_e < t`) normally; ``'inclusive'``
        (:math:`t_e \\le t`) with ``use_time=False``, the paper's "−time" ablation.
        For link prediction keep ``'strict'`` regardless: with ``'inclusive'`` a query
        (u, v, t) would see its own interaction among u's neighbours, so
        :class:`~tbdfs_dgl.linkpred.LinkPredictionTrainer` always samples strictly.
        """
        return "strict" if self.use_time else "inclusive"

    def reset_parameters(self) -> None:
        """Reinitialise every learnable parameter."""
        self.time_encoder.reset_parameters()
        if self.node_embedding is not None:
            nn.init.normal_(self.node_embedding.weight, std=0.1)
        for lin in (self.node_proj, self.gate):
            if lin is not None:
                nn.init.xavier_normal_(lin.weight)
                nn.init.zeros_(lin.bias)
        self._link_scorer.reset_parameters()
        for mod in [*self.layers, self.path_encoder, self.path_aggregator]:
            if mod is not None:
                mod.reset_parameters()

    # ------------------------------------------------------------------ inputs
    def _node_inputs(self, nids: torch.Tensor, node_feat: Optional[torch.Tensor]
                     ) -> torch.Tensor:
        """``h^(0)``: projected node features (+ embedding) of the instances ``nids``."""
        h0 = self._node_rows(nids, node_feat)
        return h0.gather() if isinstance(h0, NodeRows) else h0

    def _node_rows(self, nids: torch.Tensor, node_feat: Optional[torch.Tensor]
                   ) -> Union[torch.Tensor, NodeRows]:
        """:meth:`_node_inputs`, kept per node (:class:`~tbdfs_dgl.nn.NodeRows`)
        when the graph has fewer nodes than the batch has instances."""
        device = nids.device
        _check_feat("node", node_feat, self.node_dim, "N")
        if self.node_proj is None:
            return torch.zeros(nids.shape[0], self.hidden_dim, device=device)
        if self.node_dim:
            _check_rows(nids, node_feat.shape[0], "node", "node_feat")
        if self.node_embedding is not None:
            _check_rows(nids, self.node_embedding.num_embeddings, "node",
                        f"the node embedding (num_nodes={self.node_embedding.num_embeddings})")
        rows = node_feat.shape[0] if self.node_dim else self.node_embedding.num_embeddings
        if rows <= nids.shape[0]:
            # h^(0) depends on the node alone, and a batch holds more instances than the
            # graph has nodes (e.g. 252k instances of 9k Wikipedia nodes at [20, 20]):
            # project every node once and gather, instead of once per instance.
            table = self._node_table(node_feat, device)
            rows_h0 = NodeRows(self.node_proj(table), nids)
            # On a CPU the layers and the path encoder then read rows from the node table
            # (measured faster).  Elsewhere the gathered tensor, as before: the summed
            # gradients would be atomic adds into few rows (hub nodes), not measured on a
            # GPU.
            return rows_h0 if device.type == "cpu" else rows_h0.gather()
        parts = []
        if self.node_dim:
            # Features may live on another device (e.g. CPU tables for a GPU model).
            parts.append(node_feat[nids.to(node_feat.device)].to(device, torch.float32))
        if self.node_embedding is not None:
            parts.append(self.node_embedding(nids))
        x = parts[0] if len(parts) == 1 else torch.cat(parts, dim=-1)
        return self.node_proj(x)

    def _node_table(self, node_feat: Optional[torch.Tensor], device: torch.device
                    ) -> torch.Tensor:
        """Every node's input row (features ‖ embedding) on ``device``."""
        parts = []
        if self.node_dim:
            parts.append(node_feat.to(device, torch.float32))
        if self.node_embedding is not None:
            parts.append(self.node_embedding.weight)
        return parts[0] if len(parts) == 1 else torch.cat(parts, dim=-1)

    def _edge_inputs(self, eids: torch.Tensor, edge_feat: Optional[torch.Tensor]
                     ) -> Optional[torch.Tensor]:
        """Raw features of the interactions ``eids`` (``None`` when featureless); padding
        (``eid = -1``) reads row 0, which the attention masks out."""
        if not self.edge_dim:
            return None
        rows = eids.clamp(min=0).to(edge_feat.device)
        _check_rows(rows, edge_feat.shape[0], "interaction", "edge_feat")
        # index_select: the row gather CPU kernels do fastest (2-4x advanced indexing).
        out = edge_feat.index_select(0, rows.reshape(-1))
        out = out.view(*rows.shape, edge_feat.shape[1])
        return out.to(eids.device, torch.float32)

    def _check_edge_feat(self, edge_feat: Optional[torch.Tensor]) -> None:
        _check_feat("edge", edge_feat, self.edge_dim, "E")

    # ----------------------------------------------------------------- forward
    @renamed_kwargs(FEAT_RENAMES)
    def bfs(self, batch: "TemporalBatch", node_feat: Optional[torch.Tensor] = None,
            edge_feat: Optional[torch.Tensor] = None) -> List[torch.Tensor]:
        """Run the BFS (TGAT) stack.

        Returns
        -------
        list of torch.Tensor
            ``L + 1`` tensors: ``hs[l]`` (``l < L``) is :math:`h^{(l)}` for the source nodes
            of ``layers[l]`` (``blocks[l]``) and ``hs[L]`` (``[B, hidden_dim]``) is
            :math:`h^{BFS}` of the roots.
        """
        return self._bfs(batch, node_feat, self._layer_edge_inputs(batch, edge_feat))

    def _check_batch(self, batch: "TemporalBatch") -> None:
        if batch.num_layers != self.num_layers:
            raise ValueError(f"batch has {batch.num_layers} layers, the model num_layers="
                             f"{self.num_layers}")
        if batch.num_roots == 0:
            raise ValueError("the batch has no roots: sample at least one (node, time) pair")

    def _layer_edge_inputs(self, batch: "TemporalBatch", edge_feat: Optional[torch.Tensor]
                           ) -> List[Optional[torch.Tensor]]:
        """Edge features per layer slot (``[N_dst, k, edge_dim]``, or ``None``s): read once,
        shared by the BFS layers and the path branch."""
        self._check_batch(batch)
        self._check_edge_feat(edge_feat)
        return [self._edge_inputs(t.eid, edge_feat) for t in batch.layers]

    def _bfs(self, batch: "TemporalBatch", node_feat: Optional[torch.Tensor],
             xs: List[Optional[torch.Tensor]],
             h0: Optional[Union[torch.Tensor, NodeRows]] = None
             ) -> List[Union[torch.Tensor, NodeRows]]:
        layers = batch.layers
        if h0 is None:
            h0 = self._node_inputs(layers[0].src_nodes, node_feat)
        # h^(0) may stay per node (NodeRows, from forward): the layers and the path
        # encoder gather its rows themselves, and their gradients land on the node table
        # instead of a per-instance tensor.
        h = h0
        hs = [h]
        pads = self.padding_feats()
        for i, (conv, table, x) in enumerate(zip(self.layers, layers, xs)):
            # Featureless graphs: h^(0) = 0, and the first layer skips its node terms.
            inputs = None if i == 0 and self.node_proj is None else h
            h = conv(table, inputs, x, table.dt, padding_feat=pads[i])
            hs.append(h)
        if h.shape[0] != batch.num_roots:
            raise ValueError(f"layers[-1] has {h.shape[0]} destination instances for "
                             f"{batch.num_roots} roots")
        return hs

    def padding_feats(self) -> List[Optional[torch.Tensor]]:
        """Per BFS layer, the node input of its padding slots: the padding node's embedding
        one layer down with ``empty_neighbourhood='padding_node'`` (``[1, hidden_dim]``,
        recomputed on every call so that gradients reach it), else ``None`` (zero)."""
        if self.empty_neighbourhood != "padding_node":
            return [None] * self.num_layers
        h = None
        if self.node_proj is not None:  # a node with zero features (and no embedding row)
            w = self.node_proj.weight
            h = self.node_proj(w.new_zeros(1, w.shape[1]))
        pads = []
        for i, conv in enumerate(self.layers):
            pads.append(h)
            if i + 1 < self.num_layers:
                h = conv.padding_output(h)
        return pads

    @renamed_kwargs(FEAT_RENAMES)
    def dfs(self, batch: "TemporalBatch", hs: List[torch.Tensor],
            edge_feat: Optional[torch.Tensor] = None) -> Tuple[torch.Tensor, torch.Tensor]:
        """Run the path branch on top of :meth:`bfs`'s output.

        Returns
        -------
        (torch.Tensor, torch.Tensor)
            :math:`h^{DFS}` ``[B, hidden_dim]`` (zero rows for roots without a path) and
            the bool ``[B, 1]`` "has a path" mask.
        """
        return self._dfs(batch, hs, self._layer_edge_inputs(batch, edge_feat))

    def _dfs(self, batch: "TemporalBatch", hs: List[Union[torch.Tensor, NodeRows]],
             xs: List[Optional[torch.Tensor]], get_attention: bool = False,
             edge_feat: Optional[torch.Tensor] = None) -> tuple:
        """The path branch (``hs[0]`` may be a :class:`~tbdfs_dgl.nn.NodeRows`); the path
        encoder reads the interactions' rows from ``edge_feat`` where given and on the
        batch's device (on a CPU it then projects each distinct interaction once), else
        from the per-slot ``xs``."""
        L, B = self.num_layers, batch.num_roots
        if self.path_inputs == "raw":
            # Without node inputs h^(0) is all zeros: skip its (wide) share of the work.
            feat = hs[0] if self.node_proj is not None else None
            query = hs[0].head(B) if isinstance(hs[0], NodeRows) else hs[0][:B]
        else:
            # Hop h (1..L) is a source of layers[L-h], where h^(L-h) is defined; the root
            # is a source of layers[L-1] (the roots lead every layer's sources).
            per_hop = [x.gather() if isinstance(x, NodeRows) else x for x in hs[:L]]
            feat, query = [per_hop[L - 1 - h] for h in range(L)], per_hop[L - 1][:B]
        edge = xs if self.edge_dim else None
        if (self.edge_dim and edge_feat is not None
                and edge_feat.device == batch.root_times.device):
            edge = edge_feat
        # The model owns both path modules: the encoder stops before its last linear map
        # (project=False) and the aggregator applies it once per root instead of once per
        # path (the same result).
        path_hidden, path_mask = self.path_encoder._encode_tree(
            batch.layers, feat, query, batch.root_times, edge, False)
        h_dfs = self.path_aggregator._aggregate(path_hidden, hs[-1], path_mask,
                                                self.path_encoder.fc2, get_attention)
        if get_attention:  # (h_dfs, has_path, (weights [B, P, H], path mask [B, P]))
            return h_dfs[0], path_mask.any(dim=1, keepdim=True), (h_dfs[1], path_mask)
        return h_dfs, path_mask.any(dim=1, keepdim=True)

    @renamed_kwargs(FEAT_RENAMES)
    def forward(self, batch: "TemporalBatch", node_feat: Optional[torch.Tensor] = None,
                edge_feat: Optional[torch.Tensor] = None, get_attention: bool = False
                ) -> Union[torch.Tensor, Tuple[torch.Tensor, "PathAttention"]]:
        """Embed every root of ``batch`` at its query time.

        Parameters
        ----------
        batch : TemporalBatch
            Sampled layers (``L = num_layers``).
        node_feat : torch.Tensor, optional
            ``[N, node_dim]`` node features indexed by node id (``None`` if
            ``node_dim == 0``); may stay on the CPU for a GPU model (rows are gathered).
        edge_feat : torch.Tensor, optional
            ``[E, edge_dim]`` interaction features indexed by interaction row (the tables'
            ``eid``; ``None`` if ``edge_dim == 0``).

        get_attention : bool, optional
            Also return what the embedding was made of (:class:`~tbdfs_dgl.explain.
            PathAttention`: the aggregator's path weights, the blend, both branches), as
            DGL's ``GATConv``; :meth:`explain` reads it.  Default: ``False``.

        Returns
        -------
        torch.Tensor
            ``[B, hidden_dim]``.
        PathAttention, optional
            With ``get_attention``.
        """
        xs = self._layer_edge_inputs(batch, edge_feat)
        hs = self._bfs(batch, node_feat, xs,
                       self._node_rows(batch.layers[0].src_nodes, node_feat))
        h_bfs = hs[-1]
        if not self.uses_dfs:
            return (h_bfs, PathAttention.bfs_only(h_bfs)) if get_attention else h_bfs
        dfs = self._dfs(batch, hs, xs, get_attention, edge_feat)
        h_dfs, has_path = dfs[0], dfs[1]
        # No path means no history: DFS has nothing to add, fall back on the BFS embedding.
        h_dfs = torch.where(has_path, h_dfs, h_bfs)
        if self.gate is not None:
            alpha = torch.sigmoid(self.gate(torch.cat([h_bfs, h_dfs], dim=-1)))
        else:
            alpha = self.alpha
        out = alpha * h_bfs + (1.0 - alpha) * h_dfs
        if get_attention:
            return out, PathAttention(*dfs[2], alpha, h_bfs, h_dfs)
        return out

    @renamed_kwargs(FEAT_RENAMES)
    def explain(self, batch: "TemporalBatch", node_feat: Optional[torch.Tensor] = None,
                edge_feat: Optional[torch.Tensor] = None, root: Union[int, Tuple[int, int]] = 0,
                top_k: int = 5, node_ids: Optional[Any] = None) -> dict:
        """Why root ``root`` of ``batch`` got its embedding: its ``top_k`` temporal paths
        by the aggregator's attention, the blend and the branches' shares (eval mode, no
        gradients).  ``root=(i, j)`` explains a link: both endpoints and its score.

        See :func:`tbdfs_dgl.explain.explain` for the fields.
        """
        return explain(self, batch, node_feat, edge_feat, root, top_k, node_ids)

    def score(self, src_emb: torch.Tensor, dst_emb: torch.Tensor) -> torch.Tensor:
        """Link logits ``FFN(h_i ‖ h_j)``, shape ``[B]``."""
        return self._link_scorer(src_emb, dst_emb)

    def extra_repr(self) -> str:
        return (f"alpha={self.alpha!r}, within_path_agg={self.within_path_agg!r}, "
                f"across_paths_agg={self.across_paths_agg!r}, path_inputs={self.path_inputs!r}, "
                f"use_time={self.use_time}, time_encoding={self.time_encoding!r}")
