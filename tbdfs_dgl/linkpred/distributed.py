"""Data-parallel training over ``torch.distributed``: ranks, their shares, reductions.

A run started by ``torchrun --nproc_per_node N`` has N ranks.  :func:`init_from_env` joins
the process group (gloo on CPU, nccl on CUDA); the trainer then

- trains on the same global batches as one process (``TrainConfig.batch_size`` events,
  the same negatives): each rank samples and embeds a contiguous share of every batch
  (:func:`share_of`) and weights its summed loss by ``N / batch_size``, so that the
  gradients DistributedDataParallel averages equal the one-process gradient of the batch;
- evaluates whole batches round robin (batch ``i`` on rank ``i % N``, with its own sampler
  batch id, so each is sampled as one process samples it) and gathers the scores, so the
  metrics are computed from the same scores on every rank;
- samples from graphs built once, saved and memory-mapped by every rank
  (:func:`shared_graphs`), so N ranks hold one copy of the CSR;
- logs, shows progress and writes checkpoints on rank 0 only.

A deterministic sampling strategy ('recent', the default) samples every event of a share
exactly as one process does; so do all but dropout (each rank draws its own masks).  A
random strategy draws each share from a stream of its own (:func:`share_batch_id`): the
same distribution, not the same trees as one process.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch

from .batches import EventBatch

__all__ = ["Ranks", "init_from_env", "current_ranks", "share_of", "share_batch_id",
           "all_sum", "gather_scores", "shared_graphs", "PairLogits", "SHARE_STREAM_STRIDE"]

# Sampler batch ids of rank shares: share s of batch b draws from b + s * stride, beyond
# every id of streams.py (< 4e9), so shares of one batch never share a stream.  Share 0 is
# the batch's own id: one rank draws what one process draws.
SHARE_STREAM_STRIDE = 1 << 40


@dataclass(frozen=True)
class Ranks:
    """This process's place in a distributed run (one rank of one: a plain run)."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def distributed(self) -> bool:
        """More than one rank."""
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        """Rank 0: the one that logs and writes files."""
        return self.rank == 0


def current_ranks() -> Ranks:
    """The ranks of the initialised process group (a plain run when there is none)."""
    if not (torch.distributed.is_available() and torch.distributed.is_initialized()):
        return Ranks()
    rank = torch.distributed.get_rank()
    return Ranks(rank, torch.distributed.get_world_size(),
                 int(os.environ.get("LOCAL_RANK", rank)))


def init_from_env(device: str = "cpu") -> Tuple[Ranks, str]:
    """Join the process group that ``torchrun`` describes in the environment.

    Parameters
    ----------
    device : str
        'cpu' (the gloo backend), 'cuda' (nccl; each rank takes GPU ``LOCAL_RANK``), or
        'cuda:i' (nccl on that GPU).

    Returns
    -------
    ranks : Ranks
        This process's rank; one rank of one when ``WORLD_SIZE`` is unset or 1 (nothing is
        initialised then).
    device : str
        The device this rank trains on.
    """
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1 or (torch.distributed.is_available() and torch.distributed.is_initialized()):
        return current_ranks(), device
    if not torch.distributed.is_available():
        raise RuntimeError("WORLD_SIZE > 1 but this torch build has no torch.distributed")
    local = int(os.environ.get("LOCAL_RANK", "0"))
    cuda = device.startswith("cuda")
    if cuda:
        if device == "cuda":
            device = f"cuda:{local}"
        torch.cuda.set_device(torch.device(device))
    torch.distributed.init_process_group("nccl" if cuda else "gloo")
    return current_ranks(), device


def share_of(item: EventBatch, ranks: Ranks) -> Tuple[EventBatch, float]:
    """This rank's contiguous share of a global batch, and the weight of its summed loss.

    Rank ``r`` of ``N`` takes events ``[r n // N, (r + 1) n // N)`` of the ``n``; the weight
    ``N / n`` makes the averaged gradients those of the batch's mean loss, however uneven
    the shares.  A rank whose share is empty (``n < N``) embeds the batch's first event
    with weight 0: every rank must run the backward pass that DDP reduces.
    """
    n = item.num_events
    lo, hi = ranks.rank * n // ranks.world_size, (ranks.rank + 1) * n // ranks.world_size
    weight = ranks.world_size / n if hi > lo else 0.0
    if hi == lo:
        lo, hi = 0, min(1, n)
    return EventBatch(*(a[lo:hi] for a in item)), weight


def share_batch_id(batch_id: int, ranks: Ranks) -> int:
    """The sampler batch id of this rank's share of batch ``batch_id``."""
    return batch_id + ranks.rank * SHARE_STREAM_STRIDE


def _device_of_backend() -> torch.device:
    # nccl reduces CUDA tensors only.
    if torch.distributed.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def all_sum(values: Sequence[float], ranks: Ranks) -> np.ndarray:
    """Elementwise sum of ``values`` over the ranks (float64; ``values`` itself alone)."""
    a = np.asarray(values, dtype=np.float64)
    if not ranks.distributed:
        return a
    t = torch.from_numpy(a.copy()).to(_device_of_backend())
    torch.distributed.all_reduce(t)
    return t.cpu().numpy()


def gather_scores(pos: np.ndarray, neg: np.ndarray, rows: np.ndarray, ranks: Ranks
                  ) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every rank's (pos, neg, rows) scores, concatenated and put in ``rows`` order.

    Evaluation rows are in time order, as one process scores them: sorting by row gives
    its arrays back exactly.
    """
    if not ranks.distributed:
        return pos, neg, rows
    parts: List[Optional[Tuple[np.ndarray, ...]]] = [None] * ranks.world_size
    torch.distributed.all_gather_object(parts, (pos, neg, rows))
    pos, neg, rows = (np.concatenate([p[i] for p in parts]) for i in range(3))
    order = np.argsort(rows, kind="stable")
    return pos[order], neg[order], rows[order]


def shared_graphs(builders: Dict[str, Callable[[], object]], ranks: Ranks,
                  directory: Optional[str] = None) -> Dict[str, object]:
    """Graphs built once by rank 0, saved, and memory-mapped by every rank.

    Parameters
    ----------
    builders : dict of str to callable
        Name -> a function building that :class:`~tbdfs_dgl.TemporalGraph` (called on
        rank 0 only, one at a time, so only one unsaved graph is in memory at once).
    ranks : Ranks
        This process's rank.
    directory : str, optional
        Where the graphs are saved (subfolders named after ``builders``), kept after the
        run.  Default: a temporary folder of rank 0, removed as soon as every rank has
        mapped the files (a mapping outlives its file's name); the ranks must then share a
        filesystem (one machine, as ``torchrun --nproc_per_node``).

    Returns
    -------
    dict of str to TemporalGraph
        The loaded graphs (mapped read-only: :meth:`~tbdfs_dgl.TemporalGraph.load`).
    """
    from ..graph import TemporalGraph

    temporary = directory is None
    root: Optional[str] = None
    if ranks.is_main:
        root = tempfile.mkdtemp(prefix="tbdfs-graphs-") if temporary else directory
        os.makedirs(root, exist_ok=True)
        for name, build in builders.items():
            build().save(os.path.join(root, name))
    box = [root]
    if ranks.distributed:
        # Broadcast only once rank 0 has saved: it doubles as the barrier.
        torch.distributed.broadcast_object_list(box, src=0)
    root = box[0]
    graphs = {name: TemporalGraph.load(os.path.join(root, name), mmap=True) for name in builders}
    if ranks.distributed:
        torch.distributed.barrier()
    if temporary and ranks.is_main:
        shutil.rmtree(root, ignore_errors=True)
    return graphs


class PairLogits(torch.nn.Module):
    """The module DistributedDataParallel wraps: a batch's (positive, negative) logits.

    It holds the model (so DDP finds its parameters) and calls ``embed(batch, n)``, the
    trainer's own forward pass, which runs the model and its ``score``.
    """

    def __init__(self, model: torch.nn.Module,
                 embed: Callable[..., Tuple[torch.Tensor, torch.Tensor]]) -> None:
        super().__init__()
        self.model = model
        self._embed = embed

    def forward(self, batch: object, n: int) -> Tuple[torch.Tensor, torch.Tensor]:
        return self._embed(batch, n)


def wrap(model: torch.nn.Module, embed: Callable[..., Tuple[torch.Tensor, torch.Tensor]],
         device: torch.device) -> torch.nn.Module:
    """``PairLogits(model, embed)`` in DistributedDataParallel (rank 0's weights to all)."""
    ids = [device.index] if device.type == "cuda" else None
    return torch.nn.parallel.DistributedDataParallel(PairLogits(model, embed), device_ids=ids)
