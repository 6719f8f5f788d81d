"""The settings of a link-prediction run."""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Dict, Optional, Sequence

import numpy as np
import torch

from .._strategy import strategy_parts
from ..eval_negatives import EVAL_NEGATIVES

__all__ = ["TrainConfig", "COMPILE_MODES"]

# torch.compile's modes (None: its default).
COMPILE_MODES = (None, "default", "reduce-overhead", "max-autotune",
                 "max-autotune-no-cudagraphs")


@dataclass
class TrainConfig:
    """Settings of a link-prediction run (the paper's defaults).

    Each field is explained where it is declared; ``retain_memory`` here.

    ``retain_memory`` (off by default) tunes glibc's malloc for the *whole process* and for
    good (:func:`tbdfs_dgl._malloc.retain_freed_memory`: no ``mmap``, 256 MiB top pad, no
    trimming), so that batch-sized tensors are reused instead of faulted in again.  It
    pays for wide models, whose per-path tensors are far above glibc's largest mmap
    threshold (32 MiB), and costs peak memory; it is opt-in because it changes the
    allocator of everything else in the process.  Measured A/B in alternating processes
    (ABBA, a fresh process per run; JODIE Wikipedia, 1 torch thread, a 2-core machine
    with one other single-threaded job)::

        PYTHONPATH=. python examples/benchmark_malloc.py --rounds 2 \\
            -- --settings official172 --variants tbdfs --batches 3 --warmup 1

    Medians (min-max) over the processes of each arm, off -> on:

    - ``official172`` (2 each): 6508 (6197-6819) -> 4300 (4184-4416) ms/step (1.51x);
      peak RSS 3218 -> 4559 (4478-4639) MB; minor faults 5.10M -> 1.15M; system CPU
      10.8 -> 3.4 s a process.
    - ``defaults`` (3 each; ``--rounds 3 -- --settings defaults --variants tbdfs
      --batches 8 --warmup 2``): 400 (383-446) -> 389 (366-398) ms/step, paired
      differences changing sign; peak RSS 1028 (1000-1124) -> 1134 (1115-1160) MB.

    (Before round 6 the tuning only raised the mmap threshold to 32 MiB, which left the
    wide tensors mapped afresh: no gain beyond the spread at either setting.)

    Since round 37 the trainer also bounds the tuned heap
    (:class:`tbdfs_dgl._malloc.RetainedHeapBound`, checked after every step): over
    hundreds of steps fragmentation grew it without bound (TGAT at the ``full`` budget's
    [20, 20] uniform neighbours on Wikipedia: 8.3 GB resident after 300 steps, 13.7 GB
    after 3.5 epochs, against 1.2-1.5 GB untuned), and two such runs exhausted a 24 GB
    machine.  Bounded, once the resident set passes two steps' working sets above its
    size after the last trim, the free blocks' pages go back to the system.  The same
    setting, 180 steps, ABBA (``paper``, ``tgat-plain``; the figures above were of 4-10
    steps, before the bound): untuned 614-726 ms/step, peak RSS 1.18 GB; tuned and
    bounded 466-484 ms, 2.0-2.1 GB; tuned unbounded 399 ms, 4.9-5.1 GB and growing.
    Huge pages for torch's large tensors (``THP_MEM_ALLOC_ENABLE=1``, read before torch
    loads, so the example scripts set it for ``--retain-memory``) with the bounded heap
    gave 384-389 ms at 1.7-1.8 GB there, and tBDFS 1078-1140 ms against 1489 untuned
    (on their own they slowed tBDFS to 2554 ms; :func:`tbdfs_dgl._malloc.huge_page_tensors`).
    """

    epochs: int = 1
    batch_size: int = 200
    lr: float = 1e-4
    patience: int = 5
    fanouts: Sequence[int] = (10, 10)
    strategy: str = "recent"
    num_threads: Optional[int] = None
    seed: int = 0
    device: str = "cpu"
    max_batches: Optional[int] = None  # per epoch and per evaluation, for smoke runs
    # Budgeted runs on whole graphs: every query still sees the whole history, but each
    # epoch trains on ``train_batches`` randomly drawn training batches (a fresh draw per
    # epoch, kept in time order), and validation/test score ``val_events``/``test_events``
    # randomly drawn interactions of their part (one fixed draw per seed).
    train_batches: Optional[int] = None
    val_events: Optional[int] = None
    test_events: Optional[int] = None
    save_dir: Optional[str] = None
    prefetch: bool = True  # sample the next batch in a thread while the model runs
    # With prefetch: batches sampled ahead at once, each in a thread of its own (the C++
    # sampler and the copies release the GIL).  On a GPU the model can outrun one thread
    # (docs/benchmarks/model_gpu.md, round 7); every batch has its own random stream, so
    # the batches are the same for any value.
    prefetch_batches: int = 1
    # torch.compile the model; batches are padded to fixed shapes so that it compiles once
    # (per train/eval mode) instead of once per batch.
    compile: bool = False
    # torch.compile's ``mode`` when ``compile`` is set: None (torch's default) or e.g.
    # 'reduce-overhead', which on a GPU replays each step's kernels as a CUDA graph (the
    # padded shapes above make that possible); docs/benchmarks/model_gpu.md measures both.
    compile_mode: Optional[str] = None
    amp: Optional[str] = None  # 'bf16': autocast the model's matrix products to bfloat16
    # Training negatives among all training destinations ('all', the default: TGAT's and
    # DyGLib's protocol) or only those that interacted before the batch ('active'): then
    # the first batches of a stream cannot be solved by "has any history" alone, which
    # helps the first ~40 steps, but over whole epochs 'all' is 3-5 points of validation
    # AP better (CollegeMsg, 2 seeds; docs/learning_efficiency.md, section 10.3).
    # Evaluation negatives are unaffected.
    train_negatives: str = "all"
    progress: bool = True
    retain_memory: bool = False  # process-wide malloc tuning; see the class docstring
    # Evaluation negatives (validation and test): DyGLib's 'random', 'historical' or
    # 'inductive' (tbdfs_dgl.eval_negatives), ``eval_candidates`` = K per positive.  The
    # default ('random', 1) is TGAT's protocol, drawn exactly as in every earlier release;
    # K > 1 adds MRR and Hits@{1,3,10} (one positive against its K candidates, TGB's
    # protocol).  See LinkPredictionTrainer.evaluate.
    eval_negatives: str = "random"
    eval_candidates: int = 1
    # Save the sampler graphs here and sample from memory-mapped copies: the ranks of a
    # distributed run share them (default there: a temporary folder; see linkpred.distributed).
    graph_dir: Optional[str] = None
    # Resume file: after every epoch the whole training state is written here, and a fit
    # started while the file exists goes on after its last epoch, as if it had not stopped
    # (tbdfs_dgl.linkpred.training_state).  The caller deletes it once the run is recorded.
    # One-process runs only.
    resume_path: Optional[str] = None

    def __post_init__(self) -> None:
        if self.amp not in (None, "bf16"):
            raise ValueError(f"TrainConfig.amp must be None or 'bf16', got {self.amp!r}")
        if self.compile_mode not in COMPILE_MODES:
            raise ValueError(f"TrainConfig.compile_mode must be one of {COMPILE_MODES}, got "
                             f"{self.compile_mode!r}")
        if self.compile_mode is not None and not self.compile:
            raise ValueError("TrainConfig.compile_mode is set but compile is False: set "
                             "compile=True to use it")
        if self.train_negatives not in ("all", "active"):
            raise ValueError(f"TrainConfig.train_negatives must be 'all' or 'active', got "
                             f"{self.train_negatives!r}")
        if self.eval_negatives not in EVAL_NEGATIVES:
            raise ValueError(f"TrainConfig.eval_negatives must be one of {EVAL_NEGATIVES}, "
                             f"got {self.eval_negatives!r}")

        def is_int(v: Any) -> bool:
            return isinstance(v, (int, np.integer)) and not isinstance(v, bool)

        for name, low in (("epochs", 1), ("batch_size", 1), ("patience", 0), ("seed", 0),
                          ("eval_candidates", 1), ("prefetch_batches", 1)):
            v = getattr(self, name)
            if not is_int(v) or v < low:
                raise ValueError(f"TrainConfig.{name} must be an integer >= {low}, got {v!r}")
        if isinstance(self.lr, bool) or not isinstance(self.lr, (int, float, np.floating)) \
                or not np.isfinite(self.lr) or self.lr <= 0:
            raise ValueError(f"TrainConfig.lr must be a finite number > 0, got {self.lr!r}")
        for name in ("max_batches", "train_batches", "val_events", "test_events",
                     "num_threads"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, np.integer))
                                  or v < 1):
                raise ValueError(f"TrainConfig.{name} must be None or an integer >= 1, "
                                 f"got {v!r}")
        # The sampler and torch would refuse these too, but only once a trainer is built
        # (or, for the device, at its first batch): name them where they were set.
        fanouts = self.fanouts
        if isinstance(fanouts, (str, bytes)) \
                or not isinstance(fanouts, (Sequence, np.ndarray)) or np.ndim(fanouts) != 1 \
                or len(fanouts) == 0 or not all(is_int(k) and k >= 1 for k in fanouts):
            raise ValueError(f"TrainConfig.fanouts must be a non-empty sequence of integers "
                             f">= 1 (neighbours per layer), got {fanouts!r}")
        try:
            strategy_parts(self.strategy)
        except ValueError as err:
            raise ValueError(f"TrainConfig.{err}") from None
        try:
            torch.device(self.device)
        except (RuntimeError, TypeError) as err:
            raise ValueError(f"TrainConfig.device must name a torch device ('cpu', 'cuda', "
                             f"'cuda:1', ...), got {self.device!r}") from err

    @property
    def default_eval_negatives(self) -> bool:
        """Whether evaluation uses TGAT's one random negative per positive, drawn as in
        every earlier release (:class:`~.negatives.NegativeSampler`)."""
        return self.eval_negatives == "random" and self.eval_candidates == 1

    def to_dict(self) -> Dict[str, Any]:
        """The settings as plain JSON-ready values (``fanouts`` as a list)."""
        d = asdict(self)
        d["fanouts"] = list(self.fanouts)
        return d
