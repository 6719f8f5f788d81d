"""The link-prediction trainer: training with early stopping on validation AP, evaluation.

The protocol is TGAT's (Xu et al., ICLR 2020), which the tBDFS paper follows: a 70/15/15
split by time; 10% of the nodes first seen after the validation start are held out of
training entirely so that the inductive metrics are measured on truly unseen nodes; one
negative per positive; the training sampler sees training interactions only, evaluation
samplers see every interaction strictly before each query time.  Evaluation can instead
use DyGLib's historical/inductive negatives and rank each positive against K candidates
(TGB's MRR and Hits@k): ``TrainConfig.eval_negatives`` / ``eval_candidates``.
"""
from __future__ import annotations

import collections
import contextlib
import copy
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import torch
import torch.nn.functional as F

from .._deprecation import deprecated_alias
from .._malloc import RetainedHeapBound, retain_freed_memory
from ..data.dataset import TemporalDataset
from ..explain import AlphaRecorder
from ..graph import TemporalGraph
from ..metrics import link_prediction_metrics, ranking_metrics
from ..nn.time_encoder import TimeEncoder
from ..sampler import TemporalSampler
from . import distributed, streams
from .batches import EventBatch, chronological_batches
from .checkpoints import save_checkpoint
from .config import TrainConfig
from .device import check_device
from .negatives import EvaluationCandidates, NegativeSampler
from .progress import progress_bar
from .split import ChronologicalSplit, chronological_split
from .training_state import (TrainingState, load_training_state, run_identity,
                             save_training_state)

__all__ = ["LinkPredictionTrainer", "TrainResult", "EpochStats"]

# On a GPU, training reads its loss back (and so waits for the device) every this many
# steps; in between the host queues work ahead of the device.
SYNC_EVERY = 32


@dataclass
class EpochStats:
    """One epoch of :meth:`LinkPredictionTrainer.fit`: mean loss, validation metrics, seconds."""

    epoch: int
    loss: float
    val: Dict[str, Dict[str, float]]
    seconds: float
    sample_seconds: float
    model_seconds: float
    eval_seconds: float
    batches: int


@dataclass
class TrainResult:
    """What :meth:`LinkPredictionTrainer.fit` returns."""

    history: List[EpochStats] = field(default_factory=list)
    best_epoch: int = -1
    best_val_ap: float = float("-inf")
    test: Dict[str, Dict[str, float]] = field(default_factory=dict)
    val: Dict[str, Dict[str, float]] = field(default_factory=dict)
    peak_rss_mb: float = 0.0
    peak_gpu_mb: Optional[float] = None  # torch.cuda.max_memory_allocated, CUDA runs only
    # A learned gate's alpha over the test split's embeddings, best weights
    # (explain.AlphaRecorder.summary); None for a fixed alpha or a compiled model.
    alpha: Optional[Dict[str, float]] = None
    # Resumed runs (TrainConfig.resume_path): the epochs done before this fit, the wall
    # seconds that the earlier fits spent on them, and where each fit trained (first epoch
    # and device, one entry per fit, this one last).
    resumed_at_epoch: Optional[int] = None
    earlier_seconds: float = 0.0
    segments: List[Dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> Dict[str, Any]:
        """The result as a plain dict (:func:`dataclasses.asdict`)."""
        return asdict(self)


def _to_cpu(obj: Any) -> Any:
    """``obj`` (an optimiser's state dict) with its tensors copied to the CPU."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().cpu()
    if isinstance(obj, dict):
        return {k: _to_cpu(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to_cpu(v) for v in obj)
    return obj


def _peak_rss_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


class LinkPredictionTrainer:
    """Trains and evaluates a tBDFS model for temporal link prediction.

    Parameters
    ----------
    model : torch.nn.Module
        A :class:`~tbdfs_dgl.TBDFSModel` (anything with ``forward(batch, node_feat,
        edge_feat)`` and ``score(src, dst)``).
    data : TemporalDataset
        The interactions.
    config : TrainConfig
        Run settings.
    split : ChronologicalSplit, optional
        Default: :func:`chronological_split` with ``config.seed``.
    model_kwargs : dict, optional
        Constructor arguments of ``model``, stored in checkpoints.
    log : callable
        Where the per-epoch summary lines go.
    """

    # release-0.1 names of the feature tensors (the naming rule: tensors end in _feat)
    node_feats = deprecated_alias("node_feat")
    edge_feats = deprecated_alias("edge_feat")

    def __init__(self, model: torch.nn.Module, data: TemporalDataset, config: TrainConfig,
                 split: Optional[ChronologicalSplit] = None,
                 model_kwargs: Optional[Dict[str, Any]] = None,
                 log: Callable[[str], None] = print) -> None:
        self.config = config
        self.ranks = distributed.current_ranks()
        if config.resume_path and self.ranks.distributed:
            raise ValueError("TrainConfig.resume_path is for one-process runs; a distributed "
                             "run cannot resume (leave resume_path unset)")
        self.device = check_device(config.device)
        # The tuned heap keeps what it frees; the bound gives back what fragmentation
        # would otherwise pile up (checked between steps, in _iterate).
        self._heap_bound = RetainedHeapBound() \
            if config.retain_memory and retain_freed_memory() else None
        self.model = model.to(self.device)
        self.data = data
        self.split = split or chronological_split(data, seed=config.seed)
        self.model_kwargs = model_kwargs or {}
        self.log = log if self.ranks.is_main else (lambda line: None)
        self.train_negatives = NegativeSampler(
            data, self.split.train, active_only=config.train_negatives == "active")
        self.eval_negatives = NegativeSampler(data)
        # Always strict, even for the "-time" ablation (whose model asks for 'inclusive'):
        # an inclusive sampler would show every query its own interaction, a label leak.
        time_rule = "strict"
        threads = config.num_threads
        if threads is None and config.prefetch:
            threads = 1  # the model's own threads run beside the prefetching sampler
        edge_feat = None if data.edge_feat is None else torch.from_numpy(data.edge_feat)
        node_feat = None if data.node_feat is None else torch.from_numpy(data.node_feat)
        full, train_graph = self._graphs()
        # The training graph renumbers edges; its sampler maps them back to dataset rows.
        self._train_rows = np.ascontiguousarray(np.flatnonzero(self.split.train), np.int64)
        kw = dict(fanouts=list(config.fanouts), strategy=config.strategy, time_rule=time_rule,
                  seed=config.seed, num_threads=threads)
        self.train_sampler = TemporalSampler(train_graph, **kw)
        self.eval_sampler = TemporalSampler(full, **kw)
        self.edge_feat = None if edge_feat is None else edge_feat.to(self.device)
        self.node_feat = None if node_feat is None else node_feat.to(self.device)
        # On a GPU, fused Adam updates every parameter in one kernel launch instead of a
        # few per parameter (the small default model's step is bound by launches there).
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=config.lr,
                                          fused=True if self.device.type == "cuda" else None)
        self._pool = ThreadPoolExecutor(config.prefetch_batches) if config.prefetch else None
        # Made here, not on first use: the prefetching threads share it.
        self._copy_stream = torch.cuda.Stream(self.device) if self.device.type == "cuda" else None
        # Padding to the largest batch lets torch.compile see one set of shapes.
        self._pad_roots = 3 * config.batch_size if config.compile else None
        self._forward = (torch.compile(self.model, mode=config.compile_mode)
                         if config.compile else self.model)
        self._cuda_graphs = (config.compile and self.device.type == "cuda"
                             and config.compile_mode in ("reduce-overhead", "max-autotune"))
        self._needs_paths = bool(getattr(model, "needs_paths", False))
        self._ddp = None
        if self.ranks.distributed:
            self._ddp = distributed.wrap(self.model, self._embed, self.device)
            # Dropout masks of their own per rank (rank 0 keeps the one-process stream).
            if self.ranks.rank > 0:
                torch.manual_seed(torch.initial_seed() + self.ranks.rank)

    def _graphs(self) -> Tuple[TemporalGraph, TemporalGraph]:
        """The sampler graphs: all interactions, and the training ones (renumbered).

        Distributed (or with ``config.graph_dir``), built once, saved and memory-mapped by
        every rank (:func:`.distributed.shared_graphs`).
        """
        data, tr = self.data, self.split.train
        builders = {
            "full": lambda: TemporalGraph(data.src, data.dst, data.ts, num_nodes=data.num_nodes),
            "train": lambda: TemporalGraph(data.src[tr], data.dst[tr], data.ts[tr],
                                           num_nodes=data.num_nodes),
        }
        if self.ranks.distributed or self.config.graph_dir is not None:
            graphs = distributed.shared_graphs(builders, self.ranks, self.config.graph_dir)
        else:
            graphs = {name: build() for name, build in builders.items()}
        return graphs["full"], graphs["train"]

    # ------------------------------------------------------------------ batches
    def make_batches(self, rows: np.ndarray, rng: np.random.Generator,
                     negatives: NegativeSampler) -> List[EventBatch]:
        """Cut dataset ``rows`` (time order) into chronological batches with negatives.

        Both :meth:`training_batches` and :meth:`evaluation_batches` go through here, so an
        override chooses which rows train and evaluate: e.g. the reproduction's speed
        estimate keeps the *last* ``max_batches`` batches of the rows instead of the first.

        Parameters
        ----------
        rows : numpy.ndarray
            Dataset rows in time order.
        rng : numpy.random.Generator
            Draws the negatives.
        negatives : NegativeSampler
            :attr:`train_negatives` or :attr:`eval_negatives`.

        Returns
        -------
        list of EventBatch
            ``config.batch_size`` rows each (the last may be shorter), at most
            ``config.max_batches``.
        """
        return chronological_batches(self.data, rows, self.config.batch_size, negatives, rng,
                                     self.config.max_batches)

    def training_batches(self, epoch: int) -> List[EventBatch]:
        """The batches that :meth:`train_epoch` trains on in ``epoch``, in order.

        All training rows cut by :meth:`make_batches`; with ``config.train_batches``, that
        many of them drawn at random (a fresh draw per epoch, kept in time order).  Fixed by
        ``(config.seed, epoch)``.  Override to train on other batches.
        """
        rng = streams.generator(self.config.seed, epoch, streams.Purpose.TRAIN_NEGATIVES)
        items = self.make_batches(np.flatnonzero(self.split.train), rng, self.train_negatives)
        n = self.config.train_batches
        if n is not None and n < len(items):
            draw = streams.generator(self.config.seed, epoch, streams.Purpose.TRAIN_BATCH_DRAW)
            pick = draw.choice(len(items), n, replace=False)
            items = [items[i] for i in np.sort(pick)]
        return items

    def evaluation_batches(self, part: str) -> List[EventBatch]:
        """The batches that :meth:`evaluate` scores for ``part`` ('val' or 'test'), in order.

        The part's rows (with ``config.val_events``/``test_events``, that many drawn at
        random) cut by :meth:`make_batches`; the same for every call of a seed.  Override to
        evaluate on other batches.
        """
        if part not in streams.PART_INDEX:
            raise ValueError(f"part must be 'val' or 'test', got {part!r}")
        index = streams.PART_INDEX[part]
        rows = np.flatnonzero(getattr(self.split, part))
        cap = self.config.val_events if part == "val" else self.config.test_events
        if cap is not None and cap < len(rows):
            pick = streams.generator(self.config.seed, index, streams.Purpose.EVAL_EVENT_DRAW)
            rows = np.sort(pick.choice(rows, cap, replace=False))
        rng = streams.generator(self.config.seed, index, streams.Purpose.EVAL_NEGATIVES)
        items = self.make_batches(rows, rng, self.eval_negatives)
        if self.config.default_eval_negatives:
            return items
        return self._with_candidates(part, items)

    def _with_candidates(self, part: str, items: List[EventBatch]) -> List[EventBatch]:
        """``items`` with ``config.eval_candidates`` candidates of ``config.eval_negatives``
        per interaction (:class:`~.negatives.EvaluationCandidates`), cut into chunks of at
        most ``3 * batch_size`` roots (``batch_size // (K + 2) * 3`` interactions), so a
        forward pass embeds no more nodes than a training batch whatever ``K``."""
        cfg = self.config
        k = cfg.eval_candidates
        if not items:
            return items
        candidates = EvaluationCandidates(self.data, self.split, part, cfg.eval_negatives, k,
                                          cfg.batch_size, cfg.seed)
        neg = candidates(np.concatenate([item.rows for item in items]))
        if k == 1:
            neg = neg[:, 0]
        chunk = min(cfg.batch_size, max(1, 3 * cfg.batch_size // (k + 2)))
        out, at = [], 0
        for item in items:
            for lo in range(0, item.num_events, chunk):
                sl = slice(lo, lo + chunk)
                m = len(item.rows[sl])
                out.append(EventBatch(item.src[sl], item.dst[sl], neg[at:at + m], item.ts[sl],
                                      item.rows[sl]))
                at += m
        return out

    def _sample(self, sampler: TemporalSampler, item: EventBatch, batch_id: int,
                remap_eids: bool) -> Tuple[Any, float, Optional[torch.cuda.Event]]:
        """Sample ``item`` and move it to the device: (batch, seconds, the copy's event
        on a GPU, else ``None``)."""
        t0 = time.perf_counter()
        k = item.num_candidates  # each candidate is embedded at its positive's time
        nodes = np.concatenate([item.src, item.dst, item.neg_dst.reshape(-1)])
        times = np.concatenate([item.ts, item.ts, item.ts if k == 1 else np.repeat(item.ts, k)])
        # TBDFSModel reads the tree from the layer tables: no path explosion needed, unless
        # the model says otherwise (``needs_paths``, e.g. the per-slot reference).  The
        # sampler writes the padded shapes and the dataset rows itself: no copies here.
        paths = self._needs_paths
        pad = self._pad_roots if not paths else None
        batch = sampler.sample(nodes, times, batch_id=batch_id, paths=paths, pad_roots=pad,
                               eid_map=self._train_rows if remap_eids else None)
        if paths and self._pad_roots is not None:
            batch = batch.padded(self._pad_roots)
        if self.device.type == "cuda":
            # Pinned memory and a stream of its own let the copy run, from the sampling
            # thread, while the GPU still works on the previous batch; a copy on the
            # default stream would also wait for it, and would break the capture of a
            # CUDA graph (compile_mode='reduce-overhead') running meanwhile.
            with torch.cuda.stream(self._copy_stream):
                batch = batch.pin_memory().to(self.device, non_blocking=True)
                copied = torch.cuda.Event()
                copied.record(self._copy_stream)
            return batch, time.perf_counter() - t0, copied
        return batch.to(self.device), time.perf_counter() - t0, None

    @staticmethod
    def _wait_for_copy(batch: Any, copied: Optional[torch.cuda.Event]) -> Any:
        """Order the current stream after ``batch``'s copy (see :meth:`_sample`), and tell
        the caching allocator that the current stream uses its tensors (so their memory is
        not handed to the next copy while this stream may still read it)."""
        if copied is None:
            return batch
        stream = torch.cuda.current_stream(batch.device)
        stream.wait_event(copied)
        batch.record_stream(stream)
        return batch

    def _iterate(self, sampler: TemporalSampler, items: List[EventBatch],
                 first_id: int, remap: bool, batch_ids: Optional[Sequence[int]] = None
                 ) -> Iterator[Tuple[EventBatch, Any, float]]:
        """Yield (item, batch, sample seconds), sampling ``config.prefetch_batches``
        batches ahead when prefetching.

        Item ``i`` is sampled with batch id ``first_id + i``, or ``batch_ids[i]``.
        """
        if not items:
            return
        ids = range(first_id, first_id + len(items)) if batch_ids is None else batch_ids
        if self._pool is None:
            for i, item in enumerate(items):
                batch, secs, copied = self._sample(sampler, item, ids[i], remap)
                yield item, self._wait_for_copy(batch, copied), secs
                self._after_step()
            return

        def submit(j: int) -> Any:
            return self._pool.submit(self._sample, sampler, items[j], ids[j], remap)

        ahead = min(self.config.prefetch_batches, len(items))
        pending = collections.deque(submit(j) for j in range(ahead))
        for i, item in enumerate(items):
            batch, secs, copied = pending.popleft().result()
            if i + ahead < len(items):
                pending.append(submit(i + ahead))
            yield item, self._wait_for_copy(batch, copied), secs
            self._after_step()

    def _after_step(self) -> None:
        if self._heap_bound is not None:
            self._heap_bound.after_step()

    def _embed(self, batch: Any, n: int, k: int = 1) -> Tuple[torch.Tensor, torch.Tensor]:
        """Logits of the ``n`` positives (``[n]``) and of their ``k`` negatives each
        (``[n * k]``, positive-major)."""
        if self._cuda_graphs:
            # Each call is a new step: outputs of the previous replay may be overwritten.
            torch.compiler.cudagraph_mark_step_begin()
        with self._autocast():
            h = self._forward(batch, self.node_feat, self.edge_feat)
            # Padding roots (compiled runs) come after the (2 + k) n real ones.
            h_src, h_dst, h_neg = h[:n], h[n:2 * n], h[2 * n:(2 + k) * n]
            h_src_neg = h_src if k == 1 else h_src.repeat_interleave(k, dim=0)
            pos, neg = self.model.score(h_src, h_dst), self.model.score(h_src_neg, h_neg)
        return pos.float(), neg.float()

    def _check_time_range(self) -> None:
        """Fail clearly if the GPU / compiled time encoding met a phase it cannot reduce
        exactly (the CPU encoding is exact everywhere and never sets the flag)."""
        if self.device.type != "cpu" or self.config.compile:
            for module in self.model.modules():
                if isinstance(module, TimeEncoder):
                    module.check_range()

    def _autocast(self) -> Any:
        if self.config.amp is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=torch.bfloat16)

    # ------------------------------------------------------------------ training
    def train_epoch(self, epoch: int) -> Tuple[float, float, float, int]:
        """One pass over the training interactions; returns (loss, sample s, model s, batches)."""
        self.model.train()
        items = self.training_batches(epoch)
        first_id = streams.first_batch_id("train", epoch)
        ids, weights = None, None
        if self._ddp is not None:
            # Each rank trains on its share of every global batch (distributed.py).
            items, weights = map(list, zip(*(distributed.share_of(it, self.ranks) for it in items))) \
                if items else ([], [])
            ids = [distributed.share_batch_id(first_id + i, self.ranks) for i in range(len(items))]
        bar = progress_bar(len(items), f"epoch {epoch}", self.config.progress and self.ranks.is_main)
        total, sample_s, model_s = 0.0, 0.0, 0.0
        # Reading the loss (or the time encoding's range flag) waits for the device; on a
        # GPU that is done every SYNC_EVERY steps, so the host queues the next step while
        # the device still runs this one.
        sync_every = 1 if self.device.type == "cpu" else SYNC_EVERY
        pending: List[torch.Tensor] = []
        for i, (item, batch, secs) in enumerate(
                self._iterate(self.train_sampler, items, first_id, remap=True, batch_ids=ids)):
            sample_s += secs
            t0 = time.perf_counter()
            if self._ddp is None:
                pos, neg = self._embed(batch, item.num_events)
                loss = F.binary_cross_entropy_with_logits(pos, torch.ones_like(pos)) + \
                    F.binary_cross_entropy_with_logits(neg, torch.zeros_like(neg))
            else:
                pos, neg = self._ddp(batch, item.num_events)
                # Summed, weighted N / batch size: DDP's mean over ranks is then the gradient
                # of the global batch's mean loss.
                loss = weights[i] * (
                    F.binary_cross_entropy_with_logits(pos, torch.ones_like(pos), reduction="sum")
                    + F.binary_cross_entropy_with_logits(neg, torch.zeros_like(neg), reduction="sum"))
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            self.optimizer.step()
            pending.append(loss.detach())
            if len(pending) >= sync_every or i + 1 == len(items):
                total += float(torch.stack(pending).sum()) / self.ranks.world_size
                pending.clear()
                self._check_time_range()
                bar.set_postfix(loss=f"{total / (i + 1):.4f}")
            model_s += time.perf_counter() - t0
            bar.update(1)
        bar.close()
        if self._ddp is not None:
            # The batches' losses (rank shares summed); seconds averaged over the ranks.
            total, sample_s, model_s = distributed.all_sum([total, sample_s, model_s], self.ranks)
            sample_s, model_s = sample_s / self.ranks.world_size, model_s / self.ranks.world_size
        return float(total) / max(1, len(items)), float(sample_s), float(model_s), len(items)

    @torch.no_grad()
    def evaluate(self, part: str) -> Dict[str, Dict[str, float]]:
        """Transductive and inductive metrics of ``part`` ('val' or 'test') on fixed negatives.

        The negatives are ``config.eval_negatives`` with ``config.eval_candidates`` = K per
        positive.  Accuracy, F1, AP and AUC score each positive against its *first*
        candidate (one negative per positive, as with K = 1, so they stay comparable across
        K); with K > 1 the metrics also hold ``mrr``, ``hits@1``, ``hits@3``, ``hits@10`` and
        ``candidates`` (:func:`~tbdfs_dgl.metrics.ranking_metrics`: each positive ranked
        against all its K candidates).  ``inductive`` holds the same figures restricted to
        the positives with a node unseen in training, against the same candidates (DyGLib
        draws those from a sampler of the new-node interactions only).
        """
        if part not in streams.PART_INDEX:
            raise ValueError(f"part must be 'val' or 'test', got {part!r}")
        self.model.eval()
        items = self.evaluation_batches(part)
        pos_all, neg_all, row_all = [], [], []
        first_id = streams.first_batch_id(part)
        # Distributed: whole batches round robin, each with its own batch id.
        rank, world = self.ranks.rank, self.ranks.world_size
        mine, ids = items[rank::world], range(first_id + rank, first_id + len(items), world)
        for item, batch, _ in self._iterate(self.eval_sampler, mine, first_id, remap=False,
                                            batch_ids=ids):
            n, k = item.num_events, item.num_candidates
            pos, neg = self._embed(batch, n, k)
            # Kept on the device until the end: a copy to the host per batch would make
            # the host wait for the device after every batch.
            pos_all.append(pos.detach().float())
            neg_all.append(neg.detach().float() if item.neg_dst.ndim == 1
                           else neg.detach().float().reshape(n, k))
            row_all.append(item.rows)
        if pos_all:
            pos_all = [torch.cat(pos_all).cpu().numpy()]
            neg_all = [torch.cat(neg_all).cpu().numpy()]
        if not items:
            empty = np.zeros(0)
            if self.config.eval_candidates > 1:
                neg = np.zeros((0, self.config.eval_candidates))
                return {s: self._metrics(empty, neg) for s in ("transductive", "inductive")}
            return {"transductive": link_prediction_metrics(empty, empty),
                    "inductive": link_prediction_metrics(empty, empty)}
        self._check_time_range()
        # A rank without batches still joins the gather, with empty arrays of the right shape.
        neg_cols = () if items[0].neg_dst.ndim == 1 else (items[0].num_candidates,)
        pos, neg, r = (np.concatenate(a) if a else np.zeros((0,) + shape, t)
                       for a, shape, t in ((pos_all, (), np.float32), (neg_all, neg_cols, np.float32),
                                           (row_all, (), np.int64)))
        pos, neg, r = distributed.gather_scores(pos, neg, r, self.ranks)
        new = getattr(self.split, f"{part}_inductive")[r]
        return {"transductive": self._metrics(pos, neg),
                "inductive": self._metrics(pos[new], neg[new])}

    @staticmethod
    def _metrics(pos: np.ndarray, neg: np.ndarray) -> Dict[str, float]:
        """Metrics of positives against ``[n]`` negatives, or ``[n, K]`` candidates."""
        if neg.ndim == 1:
            return link_prediction_metrics(pos, neg)
        out = link_prediction_metrics(pos, neg[:, 0])
        if neg.shape[1] > 1:
            out.update(ranking_metrics(pos, neg))
        return out

    def fit(self) -> TrainResult:
        """Train with early stopping on validation AP; restore the best weights; test.

        A model with a learned gate (``alpha='learn'``) also reports the gate's values
        over the test embeddings (``TrainResult.alpha``; not for a compiled model).

        With ``config.resume_path`` the training state is saved there after every epoch,
        and a state already there is resumed (:mod:`.training_state`).
        """
        cfg = self.config
        started = time.perf_counter()
        result = TrainResult()
        best_state = None
        waited, first, stopped, earlier = 0, 0, False, 0.0
        self.log(f"split: {self.split.summary()}")
        state = self._resume() if cfg.resume_path else None
        if state is not None:
            result.history = [EpochStats(**e) for e in state.history]
            result.best_epoch, result.best_val_ap = state.best_epoch, state.best_val_ap
            best_state, waited, stopped = state.best_state, state.waited, state.stopped
            first, earlier = state.epochs_done, state.seconds
            result.resumed_at_epoch, result.earlier_seconds = first, earlier
            self.log(f"resumed from {cfg.resume_path}: {first} epoch(s) done "
                     f"(best {result.best_epoch}, val AP {result.best_val_ap:.4f})"
                     + (", only the final tests remain" if stopped else ""))
        result.segments = segments = (state.segments if state is not None else []) + [
            {"first_epoch": first, "device": str(self.device)}]
        for epoch in range(first, cfg.epochs):
            if stopped:
                break
            t0 = time.perf_counter()
            loss, sample_s, model_s, n = self.train_epoch(epoch)
            t1 = time.perf_counter()
            val = self.evaluate("val")
            t2 = time.perf_counter()
            stats = EpochStats(epoch, loss, val, t1 - t0, sample_s, model_s, t2 - t1, n)
            result.history.append(stats)
            ap = val["transductive"]["ap"]
            self.log(f"epoch {epoch} | loss {loss:.4f} | val AP {ap:.4f} AUC "
                     f"{val['transductive']['auc']:.4f} | inductive AP {val['inductive']['ap']:.4f} "
                     f"| train {t1 - t0:.1f}s (sampling {sample_s:.1f}s, model {model_s:.1f}s) "
                     f"| eval {t2 - t1:.1f}s")
            if ap > result.best_val_ap or best_state is None:
                result.best_val_ap, result.best_epoch, waited = ap, epoch, 0
                best_state = copy.deepcopy({k: v.detach().cpu() for k, v in self.model.state_dict().items()})
                if cfg.save_dir and self.ranks.is_main:
                    save_checkpoint(os.path.join(cfg.save_dir, "best.pt"), self.model,
                                    self.model_kwargs, {"epoch": epoch, "val": val,
                                                        "config": cfg.to_dict()})
            else:
                waited += 1
            stopped = waited >= cfg.patience and waited > 0
            if cfg.resume_path:
                self._save_state(result, best_state, waited,
                                 stopped=stopped or epoch + 1 == cfg.epochs,
                                 seconds=earlier + time.perf_counter() - started,
                                 segments=segments)
            if stopped:
                self.log(f"early stop: no better validation AP for {cfg.patience} epochs")
        if best_state is not None:
            self.model.load_state_dict(best_state)
        result.val = self.evaluate("val")
        # A compiled model pads its batches with roots that are not the split's, and the
        # gate's hook would see them too: recorded only where the model runs as written.
        recorder = (AlphaRecorder(self.model) if getattr(self.model, "gate", None) is not None
                    and not cfg.compile else None)
        with recorder if recorder is not None else contextlib.nullcontext():
            result.test = self.evaluate("test")
        if recorder is not None:
            result.alpha = recorder.summary(lambda a: distributed.all_sum(a, self.ranks))
        result.peak_rss_mb = _peak_rss_mb()
        if self.device.type == "cuda":
            result.peak_gpu_mb = torch.cuda.max_memory_allocated(self.device) / 2**20
        return result

    # ------------------------------------------------------------------ resuming
    def _identity(self) -> Dict[str, Any]:
        return run_identity(self.config.to_dict(), self.model_kwargs, self.split.summary(),
                            self.data.num_edges)

    def _save_state(self, result: TrainResult, best_state: Optional[Dict[str, torch.Tensor]],
                    waited: int, stopped: bool, seconds: float,
                    segments: List[Dict[str, Any]]) -> None:
        """Write the state after ``result``'s last epoch to ``config.resume_path``: the
        loop's counters, and the weights, Adam's moments and torch's random state now."""
        cuda = self.device.type == "cuda"
        save_training_state(self.config.resume_path, TrainingState(
            identity=self._identity(), epochs_done=len(result.history), stopped=stopped,
            history=[asdict(e) for e in result.history], best_epoch=result.best_epoch,
            best_val_ap=result.best_val_ap, waited=waited, best_state=best_state,
            model_state=_to_cpu(self.model.state_dict()),
            optimizer_state=_to_cpu(self.optimizer.state_dict()),
            torch_rng=torch.get_rng_state(),
            cuda_rng=torch.cuda.get_rng_state_all() if cuda else None,
            seconds=seconds, segments=segments))

    def _resume(self) -> Optional[TrainingState]:
        """Load ``config.resume_path`` into the model, the optimiser and torch's random
        state; ``None`` if there is no file yet."""
        path = self.config.resume_path
        if not os.path.exists(path):
            return None
        state = load_training_state(path, self._identity())
        self.model.load_state_dict(state.model_state)
        self.optimizer.load_state_dict(state.optimizer_state)
        torch.set_rng_state(state.torch_rng)
        if state.cuda_rng is not None and self.device.type == "cuda":
            torch.cuda.set_rng_state_all(state.cuda_rng)
        return state

    def close(self) -> None:
        """Stop the prefetching thread."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
