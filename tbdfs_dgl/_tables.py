"""Conversions between a layer's dense table (:class:`~tbdfs_dgl.batch.LayerTable`) and the
equivalent DGL block.  Only :func:`block_from_table` and :func:`table_from_block` touch DGL,
and they import it when called."""
from __future__ import annotations

from typing import Any, Optional

import torch

from .batch import LayerTable

__all__ = ["block_from_table", "table_from_block", "table_from_csc"]


def table_from_csc(indptr: torch.Tensor, eid: torch.Tensor, dt: torch.Tensor,
                   src_nodes: torch.Tensor, src_ts: torch.Tensor,
                   fanout: Optional[int] = None) -> LayerTable:
    """Pad a sampled layer in CSC form (destination ``d``'s neighbours are the sources
    ``num_dst + indptr[d] .. num_dst + indptr[d + 1] - 1``, edges in that order) to a table.

    Parameters
    ----------
    indptr : torch.Tensor
        int64 ``[N_dst + 1]``.
    eid, dt : torch.Tensor
        ``[E]`` interaction row and time gap of every edge.
    src_nodes, src_ts : torch.Tensor
        ``[N_src]`` node id and time of every source instance.
    fanout : int, optional
        Table width; default the largest in-degree (at least 1).
    """
    device = indptr.device
    num_dst = indptr.shape[0] - 1
    deg = indptr[1:] - indptr[:-1]
    k = int(deg.max()) if fanout is None and num_dst else int(fanout or 0)
    k = max(k, 1)
    col = torch.arange(k, device=device)
    mask = col.unsqueeze(0) < deg.unsqueeze(1)
    pos = indptr[:-1].unsqueeze(1) + col  # edge position of slot (d, j)
    pos = torch.where(mask, pos, torch.zeros_like(pos))
    if eid.numel():
        eid_t = torch.where(mask, eid[pos], torch.full_like(pos, -1))
        dt_t = torch.where(mask, dt.to(torch.float64)[pos], torch.zeros((), dtype=torch.float64,
                                                                        device=device))
    else:
        eid_t = torch.full_like(pos, -1)
        dt_t = torch.zeros(pos.shape, dtype=torch.float64, device=device)
    nbr = torch.where(mask, pos + num_dst, torch.zeros_like(pos))
    return LayerTable(src_nodes=src_nodes, src_ts=src_ts.to(torch.float64), nbr=nbr,
                      mask=mask, dt=dt_t, eid=eid_t)


def table_from_block(block: Any, fanout: Optional[int] = None) -> LayerTable:
    """The dense table of a DGL block whose sources after the destinations are its edges'
    sources in edge-id order (as :class:`~tbdfs_dgl.TemporalSampler` and hand-made test
    blocks lay them out); other blocks are re-read in that order through their CSC arrays.

    Reads ``srcdata[dgl.NID]``, ``srcdata['ts']``, ``edata[dgl.EID]``, ``edata['dt']``.
    """
    import dgl

    indptr, indices, eperm = block.adj_tensors("csc")
    num_dst = block.num_dst_nodes()
    # Slots follow CSC order.  For the sampler's blocks the source of CSC position i is
    # num_dst + i; any other block gets its real source positions below.
    eid = block.edata[dgl.EID][eperm]
    dt = block.edata["dt"][eperm]
    table = table_from_csc(indptr.to(torch.int64), eid, dt, block.srcdata[dgl.NID],
                           block.srcdata["ts"], fanout)
    expected = torch.arange(num_dst, num_dst + indices.shape[0], device=indices.device)
    if not torch.equal(indices.to(torch.int64), expected):
        col = torch.arange(table.fanout, device=indices.device)
        pos = torch.where(table.mask, indptr[:-1].unsqueeze(1).to(torch.int64) + col, 0)
        real = indices.to(torch.int64)[pos] if indices.numel() else pos
        table.nbr = torch.where(table.mask, real, torch.zeros_like(real))
    return table


def block_from_table(table: LayerTable) -> Any:
    """The DGL block of a table: ``srcdata``/``dstdata`` carry ``dgl.NID`` and ``'ts'``,
    ``edata`` carries ``dgl.EID`` and ``'dt'``; edges in row-major order of ``mask``."""
    import dgl

    from ._blocks import csc_block

    mask = table.mask
    device = mask.device
    deg = mask.sum(dim=1)
    indptr = torch.zeros(table.num_dst + 1, dtype=torch.int64, device=device)
    torch.cumsum(deg, dim=0, out=indptr[1:])
    indices = table.nbr[mask]
    num_edges = indices.shape[0]
    if device.type == "cpu":
        block = csc_block(indptr, indices, torch.arange(num_edges), table.num_src, table.num_dst)
    else:
        block = dgl.create_block(("csc", (indptr, indices,
                                          torch.arange(num_edges, device=device))),
                                 num_src_nodes=table.num_src, num_dst_nodes=table.num_dst)
    block.srcdata[dgl.NID] = table.src_nodes
    block.srcdata["ts"] = table.src_ts
    block.dstdata[dgl.NID] = table.src_nodes[: table.num_dst]
    block.dstdata["ts"] = table.src_ts[: table.num_dst]
    block.edata[dgl.EID] = table.eid[mask]
    block.edata["dt"] = table.dt[mask]
    return block
