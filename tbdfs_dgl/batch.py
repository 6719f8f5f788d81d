"""The batch a :class:`~tbdfs_dgl.TemporalSampler` returns: DGL blocks plus path tensors."""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import List, Union

import torch

__all__ = ["PathBatch", "TemporalBatch"]

Device = Union[str, torch.device]


@dataclass
class PathBatch:
    """Root-to-leaf temporal paths of one sampled tree.

    All tensors have shape ``[B, P, L]``: ``B`` roots, ``P = prod(fanouts)`` path slots per
    root and ``L`` hops.  Slot ``[b, p, h]`` describes the instance reached after ``h + 1``
    steps from root ``b`` along path ``p`` (the root itself, hop 0, is not stored: it is the
    query).  A path is one root-to-leaf chain of the sampled tree; it stops early where a
    node had no eligible neighbour, and each chain occupies exactly one slot.

    Attributes
    ----------
    nodes : torch.Tensor
        int64 node ids, ``-1`` where the slot is empty.
    eids : torch.Tensor
        int64 ids (input rows) of the edge that reached each hop, ``-1`` where empty.
    ts : torch.Tensor
        float64 time of that edge (the instance's time), ``-1`` where empty (read ``mask``:
        real times can be negative too).
    mask : torch.Tensor
        bool, ``True`` where the slot holds a hop.
    src_index : torch.Tensor
        int64 position of each hop's instance among the source nodes of the block where it
        was sampled (hop ``h + 1`` is sampled in ``blocks[L - 1 - h]``); because each block's
        sources begin with the next block's sources, the same index is valid in
        ``blocks[0].srcdata``. ``-1`` where empty.
    """

    nodes: torch.Tensor
    eids: torch.Tensor
    ts: torch.Tensor
    mask: torch.Tensor
    src_index: torch.Tensor

    @property
    def num_roots(self) -> int:
        """Number of roots ``B``."""
        return self.nodes.shape[0]

    @property
    def num_paths(self) -> int:
        """Path slots per root ``P``."""
        return self.nodes.shape[1]

    @property
    def num_hops(self) -> int:
        """Hops per path ``L``."""
        return self.nodes.shape[2]

    def to(self, device: Device, non_blocking: bool = False) -> "PathBatch":
        """Return a copy with every tensor on ``device``."""
        return PathBatch(**{f.name: getattr(self, f.name).to(device, non_blocking=non_blocking)
                            for f in fields(self)})

    def pin_memory(self) -> "PathBatch":
        """Return a copy with every tensor in pinned host memory."""
        return PathBatch(**{f.name: getattr(self, f.name).pin_memory() for f in fields(self)})


@dataclass
class TemporalBatch:
    """One sampled mini-batch: the roots, their L DGL blocks and their temporal paths.

    Attributes
    ----------
    root_nodes : torch.Tensor
        int64 ``[B]`` node ids of the roots (the query nodes).
    root_times : torch.Tensor
        float64 ``[B]`` query times.
    blocks : list of DGLBlock
        ``L`` blocks in DGL's order: ``blocks[-1]`` has the roots as destination nodes and
        ``blocks[0]`` the widest source frontier.  Each block's destination nodes are the
        first ``num_dst_nodes()`` of its source nodes.  ``srcdata``/``dstdata`` carry
        ``dgl.NID`` (int64 node id) and ``'ts'`` (float64 instance time); ``edata`` carries
        ``dgl.EID`` (int64 input row of the interaction) and ``'dt'`` (float64, destination
        time minus edge time).
    paths : PathBatch
        The same sampled tree as root-to-leaf chains.
    """

    root_nodes: torch.Tensor
    root_times: torch.Tensor
    blocks: List
    paths: PathBatch

    @property
    def num_roots(self) -> int:
        """Number of roots ``B``."""
        return self.root_nodes.shape[0]

    @property
    def num_layers(self) -> int:
        """Number of sampled layers ``L``."""
        return len(self.blocks)

    @property
    def device(self) -> torch.device:
        """Device of the batch's tensors."""
        return self.root_nodes.device

    def to(self, device: Device, non_blocking: bool = False) -> "TemporalBatch":
        """Return a copy with the blocks, paths and roots on ``device``."""
        return TemporalBatch(
            root_nodes=self.root_nodes.to(device, non_blocking=non_blocking),
            root_times=self.root_times.to(device, non_blocking=non_blocking),
            blocks=[b.to(device, non_blocking=non_blocking) for b in self.blocks],
            paths=self.paths.to(device, non_blocking=non_blocking),
        )

    def pin_memory(self) -> "TemporalBatch":
        """Return a copy in pinned host memory (what ``DataLoader(pin_memory=True)`` calls)."""
        return TemporalBatch(
            root_nodes=self.root_nodes.pin_memory(),
            root_times=self.root_times.pin_memory(),
            blocks=[b.pin_memory_() for b in self.blocks],
            paths=self.paths.pin_memory(),
        )
