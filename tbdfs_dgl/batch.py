"""The batch a :class:`~tbdfs_dgl.TemporalSampler` returns: dense layer tables, temporal paths
and (built on first access, when DGL is installed) DGL blocks.

Torch only: nothing here imports DGL until ``TemporalBatch.blocks`` is read."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, List, Optional, Union

import torch

__all__ = ["LayerTable", "PathBatch", "TemporalBatch"]

Device = Union[str, torch.device]


@dataclass
class LayerTable:
    """One sampled layer as dense, padded tables (what the model computes from).

    A destination instance has at most ``k`` sampled neighbours, so a layer is a
    ``[N_dst, k]`` table instead of a sparse graph: attention becomes batched matrix
    products, on any device torch supports.  The source instances are the destinations, in
    order, followed by the neighbour instances in row-major order of ``mask`` (the edge
    order of the equivalent DGL block).

    Attributes
    ----------
    src_nodes : torch.Tensor
        int64 ``[N_src]`` node id of every source instance (``dgl.NID`` of the block).
    src_ts : torch.Tensor
        float64 ``[N_src]`` time of every source instance.
    nbr : torch.Tensor
        int64 ``[N_dst, k]`` position of each neighbour among the source instances; ``0``
        where ``mask`` is ``False`` (a valid index, so gathers need no masking).
    mask : torch.Tensor
        bool ``[N_dst, k]``; each row's ``True`` entries come first.
    dt : torch.Tensor
        float64 ``[N_dst, k]`` destination time minus edge time; ``0`` where masked.
    eid : torch.Tensor
        int64 ``[N_dst, k]`` input row of the sampled interaction (``dgl.EID``); ``-1``
        where masked.
    """

    src_nodes: torch.Tensor
    src_ts: torch.Tensor
    nbr: torch.Tensor
    mask: torch.Tensor
    dt: torch.Tensor
    eid: torch.Tensor

    @property
    def num_dst(self) -> int:
        """Number of destination instances ``N_dst`` (the first ``N_dst`` sources)."""
        return self.nbr.shape[0]

    @property
    def num_src(self) -> int:
        """Number of source instances ``N_src``."""
        return self.src_nodes.shape[0]

    @property
    def fanout(self) -> int:
        """Table width ``k``."""
        return self.nbr.shape[1]

    def padded(self, num_dst: int, num_src: int) -> "LayerTable":
        """Return the table grown to ``num_dst`` rows and ``num_src`` source instances with
        empty rows and dummy sources (node 0, time 0) that nothing references.

        For fixed shapes (``torch.compile``): the real instances keep their positions, so
        every index stays valid and the first rows' results are unchanged.
        """
        if num_dst < self.num_dst or num_src < self.num_src or num_src < num_dst:
            raise ValueError(f"cannot pad a table of {self.num_dst} rows / {self.num_src} "
                             f"sources to {num_dst} / {num_src}")
        extra_rows, extra_src = num_dst - self.num_dst, num_src - self.num_src

        def grow(t: torch.Tensor, n: int, fill: float) -> torch.Tensor:
            if n == 0:
                return t
            return torch.cat([t, t.new_full((n, *t.shape[1:]), fill)])

        # Padding goes after the real rows and sources.  A padding row's "destination" is
        # whatever source shares its position: its result feeds only padding sources of
        # the next layer, which no table references.
        return LayerTable(src_nodes=grow(self.src_nodes, extra_src, 0),
                          src_ts=grow(self.src_ts, extra_src, 0.0),
                          nbr=grow(self.nbr, extra_rows, 0),
                          mask=grow(self.mask, extra_rows, False),
                          dt=grow(self.dt, extra_rows, 0.0),
                          eid=grow(self.eid, extra_rows, -1))

    def to(self, device: Device, non_blocking: bool = False) -> "LayerTable":
        """Return a copy with every tensor on ``device``."""
        return LayerTable(**{f.name: getattr(self, f.name).to(device, non_blocking=non_blocking)
                             for f in fields(self)})

    def pin_memory(self) -> "LayerTable":
        """Return a copy with every tensor in pinned host memory."""
        return LayerTable(**{f.name: getattr(self, f.name).pin_memory() for f in fields(self)})


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


class TemporalBatch:
    """One sampled mini-batch: the roots, their L layers and their temporal paths.

    Parameters
    ----------
    root_nodes : torch.Tensor
        int64 ``[B]`` node ids of the roots (the query nodes).
    root_times : torch.Tensor
        float64 ``[B]`` query times.
    blocks : list of DGLBlock, optional
        The layers as DGL blocks (see :attr:`blocks`); give these or ``layers``.
    paths : PathBatch, optional
        The same sampled tree as root-to-leaf chains (``None`` when not sampled; the model
        does not need them).
    layers : list of LayerTable, optional
        The layers as dense tables (see :attr:`layers`).

    Notes
    -----
    The model computes from :attr:`layers`; :attr:`blocks` (DGL interop) are built from
    them on first access, so a run that never reads them never pays for them and needs no
    DGL.  A batch made from blocks gets its tables the same way.
    """

    def __init__(self, root_nodes: torch.Tensor, root_times: torch.Tensor,
                 blocks: Optional[List[Any]] = None, paths: Optional[PathBatch] = None,
                 layers: Optional[List[LayerTable]] = None) -> None:
        if blocks is None and layers is None:
            raise ValueError("TemporalBatch needs its layers (tables) or its DGL blocks")
        self.root_nodes = root_nodes
        self.root_times = root_times
        self.paths = paths
        self._blocks = None if blocks is None else list(blocks)
        self._layers = None if layers is None else list(layers)

    @property
    def layers(self) -> List[LayerTable]:
        """``L`` dense tables in DGL's order: ``layers[-1]`` has the roots as destinations and
        ``layers[0]`` the widest source frontier; ``layers[l]`` describes ``blocks[l]``."""
        if self._layers is None:
            from ._tables import table_from_block

            self._layers = [table_from_block(b) for b in self._blocks]
        return self._layers

    @property
    def blocks(self) -> List[Any]:
        """``L`` DGL blocks in DGL's order: ``blocks[-1]`` has the roots as destination nodes
        and ``blocks[0]`` the widest source frontier.  Each block's destination nodes are the
        first ``num_dst_nodes()`` of its source nodes.  ``srcdata``/``dstdata`` carry
        ``dgl.NID`` (int64 node id) and ``'ts'`` (float64 instance time); ``edata`` carries
        ``dgl.EID`` (int64 input row of the interaction) and ``'dt'`` (float64, destination
        time minus edge time).  Built on first access; needs DGL."""
        if self._blocks is None:
            from ._dgl import require_dgl
            from ._tables import block_from_table

            require_dgl("TemporalBatch.blocks")
            self._blocks = [block_from_table(t) for t in self._layers]
        return self._blocks

    @property
    def num_roots(self) -> int:
        """Number of roots ``B``."""
        return self.root_nodes.shape[0]

    @property
    def num_layers(self) -> int:
        """Number of sampled layers ``L``."""
        return len(self._layers if self._layers is not None else self._blocks)

    @property
    def device(self) -> torch.device:
        """Device of the batch's tensors."""
        return self.root_nodes.device

    def padded(self, num_roots: int) -> "TemporalBatch":
        """Return the batch grown to the largest shapes its fanouts allow, so that every
        batch of ``num_roots`` roots (or fewer) has the same tensor shapes.

        ``torch.compile`` then compiles the model once instead of once per batch.  The
        first :attr:`num_roots` outputs of the model are unchanged; the padding roots
        (node 0 at time 0, without neighbours) give outputs to be discarded.  Paths are
        dropped (the model does not read them) and blocks are not built.
        """
        if num_roots < self.num_roots:
            raise ValueError(f"num_roots={num_roots} is smaller than the batch "
                             f"({self.num_roots} roots)")
        extra = num_roots - self.num_roots
        layers = []
        num_dst = num_roots
        for table in reversed(self.layers):  # from the roots outwards
            num_src = num_dst * (table.fanout + 1)
            layers.append(table.padded(num_dst, num_src))
            num_dst = num_src
        layers.reverse()
        roots = torch.cat([self.root_nodes, self.root_nodes.new_zeros(extra)])
        times = torch.cat([self.root_times, self.root_times.new_zeros(extra)])
        return TemporalBatch(roots, times, paths=None, layers=layers)

    def _map(self, tensor_fn: Any, table_fn: Any, block_fn: Any) -> "TemporalBatch":
        # Only what exists is moved: tables when the batch has them (what the model reads),
        # blocks only when they were built.
        layers = None if self._layers is None else [table_fn(t) for t in self._layers]
        blocks = None if self._blocks is None else [block_fn(b) for b in self._blocks]
        paths = None if self.paths is None else table_fn(self.paths)
        return TemporalBatch(tensor_fn(self.root_nodes), tensor_fn(self.root_times), blocks,
                             paths, layers)

    def to(self, device: Device, non_blocking: bool = False) -> "TemporalBatch":
        """Return a copy with every tensor (tables, paths, roots; blocks if built) on
        ``device``."""
        return self._map(lambda t: t.to(device, non_blocking=non_blocking),
                         lambda t: t.to(device, non_blocking=non_blocking),
                         lambda b: b.to(device, non_blocking=non_blocking))

    def pin_memory(self) -> "TemporalBatch":
        """Return a copy in pinned host memory (what ``DataLoader(pin_memory=True)`` calls)."""
        return self._map(lambda t: t.pin_memory(), lambda t: t.pin_memory(),
                         lambda b: b.pin_memory_())

    def record_stream(self, stream: Any) -> None:
        """Mark the batch's tensors (roots, tables, paths; blocks if built) as used by the
        CUDA ``stream`` (:meth:`torch.Tensor.record_stream`), for a batch copied on another
        stream: the caching allocator then keeps their memory until ``stream`` is done.
        Like :meth:`to`, it touches only what the batch holds: reading :attr:`layers` of a
        batch with blocks only would build tables on the device for nothing."""
        tensors = [self.root_nodes, self.root_times]
        groups = (self._layers or []) + ([self.paths] if self.paths is not None else [])
        for group in groups:
            tensors.extend(getattr(group, f.name) for f in fields(group))
        for t in tensors:
            t.record_stream(stream)
        for block in self._blocks or []:
            block.record_stream(stream)  # DGLGraph.record_stream: its structure and data

    def __repr__(self) -> str:
        return (f"TemporalBatch(num_roots={self.num_roots}, num_layers={self.num_layers}, "
                f"device={self.device})")
