"""The model as release 0.1 computed it: DGL message passing on the blocks and the
per-slot path encoder on the PathBatch.  The dense, DGL-free path must match it."""
from __future__ import annotations

from typing import List, Optional

import dgl
import torch


def reference_bfs(model, batch, node_feat=None, edge_feat=None) -> List[torch.Tensor]:
    """``TBDFSModel.bfs`` through DGL blocks."""
    blocks = batch.blocks
    h = model._node_inputs(blocks[0].srcdata[dgl.NID], node_feat)
    hs = [h]
    pads = model.padding_feats()
    for i, (layer, block) in enumerate(zip(model.layers, blocks)):
        x = model._edge_inputs(block.edata[dgl.EID], edge_feat)
        inputs = None if i == 0 and model.node_proj is None else h
        h = layer(block, inputs, x, block.edata["dt"], padding_feat=pads[i])
        hs.append(h)
    return hs


def reference_forward(model, batch, node_feat: Optional[torch.Tensor] = None,
                      edge_feat: Optional[torch.Tensor] = None) -> torch.Tensor:
    """``TBDFSModel.forward`` as the DGL/per-slot reference computes it."""
    hs = reference_bfs(model, batch, node_feat, edge_feat)
    h_bfs = hs[-1]
    if not model.uses_dfs:
        return h_bfs
    paths = batch.paths
    L, B = model.num_layers, batch.num_roots
    if model.path_inputs == "raw":
        feat = hs[0] if model.node_proj is not None else None
        query = hs[0][:B]
    else:
        feat, query = [hs[L - 1 - h] for h in range(L)], hs[L - 1][:B]
    edge = None
    if model.edge_dim:
        eids = paths.eids.masked_fill(~paths.mask, 0)
        edge = edge_feat[eids].float()
    hidden = model.path_encoder._encode_slots(paths, feat, query, batch.root_times, edge, False)
    path_mask = paths.mask.any(dim=-1)
    h_dfs = model.path_aggregator._aggregate(hidden, h_bfs, path_mask, model.path_encoder.fc2)
    has_path = path_mask.any(dim=1, keepdim=True)
    h_dfs = torch.where(has_path, h_dfs, h_bfs)
    if model.gate is not None:
        alpha = torch.sigmoid(model.gate(torch.cat([h_bfs, h_dfs], dim=-1)))
    else:
        alpha = model.alpha
    return alpha * h_bfs + (1.0 - alpha) * h_dfs


class ReferenceModel(torch.nn.Module):
    """A :class:`~tbdfs_dgl.TBDFSModel` computed the release-0.1 way (DGL blocks, per-slot
    paths): the switchable baseline of ``examples/benchmark_model.py``.  Same parameters."""

    needs_paths = True  # tells LinkPredictionTrainer to sample the paths too

    def __init__(self, model) -> None:
        super().__init__()
        self.model = model

    def forward(self, batch, node_feat=None, edge_feat=None) -> torch.Tensor:
        return reference_forward(self.model, batch, node_feat, edge_feat)

    def score(self, src_emb: torch.Tensor, dst_emb: torch.Tensor) -> torch.Tensor:
        return self.model.score(src_emb, dst_emb)
