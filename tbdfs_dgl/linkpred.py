"""Temporal link prediction: the chronological split, training with early stopping, evaluation.

The protocol is TGAT's (Xu et al., ICLR 2020), which the tBDFS paper follows: a 70/15/15
split by time; 10% of the nodes first seen after the validation start are held out of
training entirely so that the inductive metrics are measured on truly unseen nodes; one
negative per positive; the training sampler sees training interactions only, evaluation
samplers see every interaction strictly before each query time.
"""
from __future__ import annotations

import contextlib
import copy
import os
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import torch
import torch.nn.functional as F

from ._malloc import retain_freed_memory
from .data.dataset import TemporalDataset
from .graph import TemporalGraph
from .metrics import link_prediction_metrics
from .nn.time_encoder import TimeEncoder, resolve_time_encoding
from .sampler import TemporalSampler

__all__ = [
    "ChronologicalSplit",
    "chronological_split",
    "NegativeSampler",
    "TrainConfig",
    "LinkPredictionTrainer",
    "save_checkpoint",
    "load_checkpoint",
    "check_device",
]


# ---------------------------------------------------------------------------- split
@dataclass
class ChronologicalSplit:
    """Which interactions train, validate and test (boolean masks over the dataset's rows).

    Attributes
    ----------
    train, val, test : numpy.ndarray
        Rows used for training (after removing held-out nodes), validation and test.
    val_inductive, test_inductive : numpy.ndarray
        Validation/test rows with at least one endpoint never seen in training.
    held_out_nodes : numpy.ndarray
        The nodes removed from training for the inductive evaluation.
    val_time, test_time : float
        Split points: validation rows have ``val_time < t <= test_time``.
    """

    train: np.ndarray
    val: np.ndarray
    test: np.ndarray
    val_inductive: np.ndarray
    test_inductive: np.ndarray
    held_out_nodes: np.ndarray
    val_time: float
    test_time: float

    def summary(self) -> str:
        """One line with the sizes of each part."""
        return (f"train {int(self.train.sum())} | val {int(self.val.sum())} "
                f"(inductive {int(self.val_inductive.sum())}) | test {int(self.test.sum())} "
                f"(inductive {int(self.test_inductive.sum())}) | held-out nodes "
                f"{len(self.held_out_nodes)}")


def chronological_split(data: TemporalDataset, val_ratio: float = 0.15, test_ratio: float = 0.15,
                        new_node_ratio: float = 0.1, seed: int = 0) -> ChronologicalSplit:
    """Split interactions by time, holding some late-appearing nodes out of training.

    Parameters
    ----------
    data : TemporalDataset
        Interactions in time order.
    val_ratio, test_ratio : float
        Fractions of interactions (by time quantile) for validation and test.
    new_node_ratio : float
        Fraction of *all* nodes to hold out, drawn from those that appear in validation or
        test (TGAT's rule).
    seed : int
        Seed for choosing the held-out nodes.
    """
    if data.num_edges < 3:
        raise ValueError(f"{data.name}: a split needs at least 3 interactions, got {data.num_edges}")
    if not (0 < val_ratio < 1 and 0 < test_ratio < 1 and val_ratio + test_ratio < 1):
        raise ValueError(f"bad split ratios: val={val_ratio}, test={test_ratio}")
    ts = data.ts.astype(np.float64)
    val_time, test_time = np.quantile(ts, [1 - val_ratio - test_ratio, 1 - test_ratio])
    late = ts > val_time
    late_nodes = np.union1d(data.src[late], data.dst[late])
    active = np.union1d(data.src, data.dst)
    rng = np.random.default_rng(seed)
    n_hold = min(len(late_nodes), int(new_node_ratio * len(active)))
    held_out = np.sort(rng.choice(late_nodes, n_hold, replace=False)) if n_hold else late_nodes[:0]
    is_held = np.zeros(data.num_nodes, bool)
    is_held[held_out] = True
    touches_held = is_held[data.src] | is_held[data.dst]
    train = (ts <= val_time) & ~touches_held
    seen = np.zeros(data.num_nodes, bool)
    seen[data.src[train]] = True
    seen[data.dst[train]] = True
    new_edge = ~seen[data.src] | ~seen[data.dst]
    val = (ts > val_time) & (ts <= test_time)
    test = ts > test_time
    return ChronologicalSplit(train, val, test, val & new_edge, test & new_edge, held_out,
                              float(val_time), float(test_time))


# ---------------------------------------------------------------------------- negatives
class NegativeSampler:
    """Uniform negative destinations among the nodes that are destinations of ``rows``.

    As TGAT's ``RandEdgeSampler``: training draws among the training interactions'
    destinations, evaluation among all interactions' destinations.  Drawing over every node
    id instead would offer nodes that never interact in the data at hand (e.g. a graph cut
    to its first interactions), which a model tells apart from real destinations by their
    empty history alone.

    Parameters
    ----------
    data : TemporalDataset
        The interactions.
    rows : array-like of bool or int, optional
        The interactions whose destinations are candidates (a mask or row indices);
        default all.
    """

    def __init__(self, data: TemporalDataset, rows: Optional[np.ndarray] = None,
                 active_only: bool = False) -> None:
        dst = np.asarray(data.dst)
        rows_a = np.arange(data.num_edges) if rows is None else np.asarray(rows)
        if rows_a.dtype == bool:
            rows_a = np.flatnonzero(rows_a)
        self.candidates = np.unique(dst[rows_a])
        if len(self.candidates) == 0:
            raise ValueError(f"{data.name}: no destinations to draw negatives from")
        self.first_seen: Optional[np.ndarray] = None
        if active_only:
            # Candidates in order of their first interaction among ``rows``, so that "seen
            # before t" is a prefix.
            first = np.full(data.num_nodes, np.inf)
            ts = np.asarray(data.ts, dtype=np.float64)[rows_a]
            np.minimum.at(first, np.asarray(data.src)[rows_a], ts)
            np.minimum.at(first, dst[rows_a], ts)
            f = first[self.candidates]
            order = np.argsort(f, kind="stable")
            self.candidates, self.first_seen = self.candidates[order], f[order]

    def __call__(self, n: int, rng: np.random.Generator,
                 t: Optional[float] = None) -> np.ndarray:
        """Draw ``n`` negative destinations; with ``active_only``, among the candidates that
        interacted strictly before ``t`` (all of them while none has)."""
        k = len(self.candidates)
        if self.first_seen is not None and t is not None:
            k = int(np.searchsorted(self.first_seen, t, side="left")) or k
        return self.candidates[rng.integers(0, k, n)].astype(np.int64)


# ---------------------------------------------------------------------------- config
@dataclass
class TrainConfig:
    """Settings of a link-prediction run (the paper's defaults)."""

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
    # torch.compile the model; batches are padded to fixed shapes so that it compiles once
    # (per train/eval mode) instead of once per batch.
    compile: bool = False
    amp: Optional[str] = None  # 'bf16': autocast the model's matrix products to bfloat16
    # Training negatives among all training destinations ('all': TGAT's protocol, release
    # 0.1) or only those that interacted before the batch ('active', the default): early
    # batches then cannot be solved by "has any history" alone
    # (docs/learning_efficiency.md).  Evaluation negatives are unaffected.
    train_negatives: str = "active"
    progress: bool = True
    retain_memory: bool = True  # tune glibc malloc for reuse (see _malloc.retain_freed_memory)

    def __post_init__(self) -> None:
        if self.amp not in (None, "bf16"):
            raise ValueError(f"TrainConfig.amp must be None or 'bf16', got {self.amp!r}")
        if self.train_negatives not in ("all", "active"):
            raise ValueError(f"TrainConfig.train_negatives must be 'all' or 'active', got "
                             f"{self.train_negatives!r}")
        def is_int(v: Any) -> bool:
            return isinstance(v, (int, np.integer)) and not isinstance(v, bool)

        for name, low in (("epochs", 1), ("batch_size", 1), ("patience", 0), ("seed", 0)):
            v = getattr(self, name)
            if not is_int(v) or v < low:
                raise ValueError(f"TrainConfig.{name} must be an integer >= {low}, got {v!r}")
        if isinstance(self.lr, bool) or not isinstance(self.lr, (int, float, np.floating)) \
                or not np.isfinite(self.lr) or self.lr <= 0:
            raise ValueError(f"TrainConfig.lr must be a finite number > 0, got {self.lr!r}")
        for name in ("max_batches", "train_batches", "val_events", "test_events"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, np.integer))
                                  or v < 1):
                raise ValueError(f"TrainConfig.{name} must be None or an integer >= 1, "
                                 f"got {v!r}")

    def to_dict(self) -> Dict[str, Any]:
        d = asdict(self)
        d["fanouts"] = list(self.fanouts)
        return d


def check_device(device: str) -> torch.device:
    """Return ``torch.device(device)`` after checking that torch can use it.

    The model runs on torch alone (no DGL), so any device torch supports works; a CUDA run
    on a machine without a visible GPU fails here with a clear message instead of deep
    inside the first batch.
    """
    try:
        dev = torch.device(device)
    except RuntimeError as err:
        raise ValueError(f"unsupported device {device!r}; use 'cpu' or 'cuda[:i]'") from err
    if dev.type == "cpu":
        return dev
    if dev.type != "cuda":
        raise ValueError(f"unsupported device {device!r}; use 'cpu' or 'cuda[:i]'")
    if not torch.cuda.is_available():
        raise RuntimeError(f"--device {device}: torch {torch.__version__} sees no CUDA device "
                           "on this machine (a CPU-only torch build, or no GPU visible)")
    if dev.index is not None and dev.index >= torch.cuda.device_count():
        raise RuntimeError(f"--device {device}: only {torch.cuda.device_count()} CUDA "
                           "device(s) visible")
    return dev


# ---------------------------------------------------------------------------- checkpoints
# A checkpoint is this line, one JSON line {"format", "sha256", "size"}, then the
# torch.save bytes of {"model_kwargs", "state_dict", "extra"}: a truncated, corrupted or
# foreign file is refused by name instead of failing inside torch.load (or loading).
_CKPT_MAGIC = b"TBDFS-CHECKPOINT\n"
_CKPT_TMP = ".ckpt-"


def _fsync_dir(directory: str) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # not supported here (e.g. some network file systems)
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _remove_stale_temps(directory: str) -> None:
    """Delete temp files of saves whose process is gone (killed mid-save)."""
    for name in os.listdir(directory):
        if not name.startswith(_CKPT_TMP):
            continue
        pid = name[len(_CKPT_TMP):].split("-", 1)[0]
        alive = False
        if pid.isdigit():
            try:
                os.kill(int(pid), 0)
                alive = True
            except ProcessLookupError:
                pass
            except PermissionError:  # another user's live process
                alive = True
        if not alive:
            try:
                os.unlink(os.path.join(directory, name))
            except OSError:
                pass


def save_checkpoint(path: str, model: torch.nn.Module, model_kwargs: Dict[str, Any],
                    extra: Optional[Dict[str, Any]] = None) -> None:
    """Write ``model`` with the arguments that rebuild it, atomically and durably.

    The bytes go to a temp file in the same folder, are fsync'ed, renamed over ``path``,
    and the folder is fsync'ed: a crash leaves either the old or the new checkpoint.  A
    sha256 of the payload is stored with it and checked by :func:`load_checkpoint`.  Temp
    files left by killed saves are removed on the next save into the folder.

    Parameters
    ----------
    path : str
        Destination file.
    model : torch.nn.Module
        The model; its state dict is saved on the CPU.
    model_kwargs : dict
        Constructor arguments of :class:`~tbdfs_dgl.TBDFSModel`.
    extra : dict, optional
        Anything else to keep (epoch, metrics...).
    """
    import hashlib
    import io
    import json

    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    _remove_stale_temps(directory)
    encoding = getattr(model, "time_encoding", None)
    if encoding is not None:  # the formulation itself, whatever the default when loaded
        model_kwargs = dict(model_kwargs, time_encoding=encoding)
    payload = {"model_kwargs": model_kwargs,
               "state_dict": {k: v.detach().cpu() for k, v in model.state_dict().items()},
               "extra": extra or {}}
    buf = io.BytesIO()
    torch.save(payload, buf)
    body = buf.getvalue()
    header = json.dumps({"format": 1, "sha256": hashlib.sha256(body).hexdigest(),
                         "size": len(body)}).encode() + b"\n"
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f"{_CKPT_TMP}{os.getpid()}-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(_CKPT_MAGIC + header)
            f.write(body)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    _fsync_dir(directory)


def _read_checkpoint(path: str, map_location: Any) -> Dict[str, Any]:
    import hashlib
    import io
    import json

    with open(path, "rb") as f:
        data = f.read()
    if not data:
        raise ValueError(f"{path}: the checkpoint file is empty (an interrupted save?)")
    if data.startswith(_CKPT_MAGIC):
        end = data.find(b"\n", len(_CKPT_MAGIC))
        try:
            header = json.loads(data[len(_CKPT_MAGIC):end]) if end > 0 else None
        except ValueError:
            header = None
        if not isinstance(header, dict) or not {"sha256", "size"} <= header.keys():
            raise ValueError(f"{path}: the checkpoint header is damaged")
        body = data[end + 1:]
        if len(body) != header["size"]:
            raise ValueError(f"{path}: the checkpoint is truncated or padded ({len(body)} "
                             f"payload bytes, expected {header['size']})")
        if hashlib.sha256(body).hexdigest() != header["sha256"]:
            raise ValueError(f"{path}: the checkpoint is corrupted (sha256 of its payload does "
                             "not match the one stored when it was saved)")
        source: Any = io.BytesIO(body)
    else:
        source = io.BytesIO(data)  # the previous release: a plain torch.save
    try:
        payload = torch.load(source, map_location=map_location)
    except Exception as err:  # noqa: BLE001 - torch/pickle raise many kinds on bad bytes
        raise ValueError(f"{path}: not a readable tbdfs checkpoint ({type(err).__name__}: "
                         f"{err})") from err
    if not isinstance(payload, dict) or not {"model_kwargs", "state_dict"} <= payload.keys():
        raise ValueError(f"{path}: not a tbdfs checkpoint (expected a dict with model_kwargs "
                         "and state_dict)")
    return payload


def load_checkpoint(path: str, map_location: Any = "cpu") -> Tuple[torch.nn.Module, Dict[str, Any]]:
    """Rebuild a :class:`~tbdfs_dgl.TBDFSModel` saved by :func:`save_checkpoint`.

    Checkpoints of the previous release (a plain ``torch.save`` of the same dict) load too.

    Parameters
    ----------
    path : str
        The checkpoint file.
    map_location : Any
        Passed to ``torch.load``.

    Returns
    -------
    (model, extra)
        The model with its weights loaded, and the extra information saved with it.

    Raises
    ------
    FileNotFoundError
        If there is no file at ``path``.
    ValueError
        If the file is empty, truncated, corrupted (checksum mismatch) or not a checkpoint,
        or its weights do not fit the model its arguments describe (the message says how
        to load it with another time encoding).
    """
    if not os.path.exists(path):
        raise FileNotFoundError(f"no checkpoint at {path}")
    payload = _read_checkpoint(path, map_location)
    from .model import TBDFSModel  # after the checks: reading needs no DGL

    kwargs = dict(payload["model_kwargs"])
    # Saved before the choice existed: release 0.1's form, or its deprecated spelling.
    kwargs["time_encoding"] = resolve_time_encoding(kwargs.get("time_encoding"),
                                                    kwargs.pop("normalize_time", None))
    model = TBDFSModel(**kwargs)
    try:
        model.load_state_dict(payload["state_dict"])
    except RuntimeError as err:
        raise ValueError(
            f"{path}: its weights do not fit the model its arguments describe (time "
            f"encoding {model.time_encoding!r}): {err}. If it was written by a version that saved no or another time "
            "encoding, load it with the form it was trained with: rebuild "
            "TBDFSModel(**model_kwargs, time_encoding=...) and load its state_dict") from err
    return model, payload.get("extra", {})


# ---------------------------------------------------------------------------- trainer
@dataclass
class EpochStats:
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

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


def _peak_rss_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


class LinkPredictionTrainer:
    """Trains and evaluates a tBDFS model for temporal link prediction.

    Parameters
    ----------
    model : torch.nn.Module
        A :class:`~tbdfs_dgl.TBDFSModel` (anything with ``forward(batch, node_feats,
        edge_feats)`` and ``score(src, dst)``).
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

    def __init__(self, model: torch.nn.Module, data: TemporalDataset, config: TrainConfig,
                 split: Optional[ChronologicalSplit] = None,
                 model_kwargs: Optional[Dict[str, Any]] = None,
                 log: Callable[[str], None] = print) -> None:
        self.config = config
        self.device = check_device(config.device)
        if config.retain_memory:
            retain_freed_memory()
        self.model = model.to(self.device)
        self.data = data
        self.split = split or chronological_split(data, seed=config.seed)
        self.model_kwargs = model_kwargs or {}
        self.log = log
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
        full = TemporalGraph(data.src, data.dst, data.ts, num_nodes=data.num_nodes)
        tr = self.split.train
        train_graph = TemporalGraph(data.src[tr], data.dst[tr], data.ts[tr], num_nodes=data.num_nodes)
        # The training graph renumbers edges; map its edge ids back to dataset rows.
        self._train_rows = torch.from_numpy(np.flatnonzero(tr))
        kw = dict(fanouts=list(config.fanouts), strategy=config.strategy, time_rule=time_rule,
                  seed=config.seed, num_threads=threads)
        self.train_sampler = TemporalSampler(train_graph, **kw)
        self.eval_sampler = TemporalSampler(full, **kw)
        self.edge_feats = None if edge_feat is None else edge_feat.to(self.device)
        self.node_feats = None if node_feat is None else node_feat.to(self.device)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=config.lr)
        self._pool = ThreadPoolExecutor(1) if config.prefetch else None
        # Padding to the largest batch lets torch.compile see one set of shapes.
        self._pad_roots = 3 * config.batch_size if config.compile else None
        self._forward = torch.compile(self.model) if config.compile else self.model
        self._needs_paths = bool(getattr(model, "needs_paths", False))

    # ------------------------------------------------------------------ batches
    def _batches(self, rows: np.ndarray, rng: np.random.Generator,
                 negatives: NegativeSampler) -> List[Tuple[np.ndarray, ...]]:
        """Chronological batches of (src, dst, neg, ts) for the given dataset rows."""
        bs = self.config.batch_size
        out = []
        for lo in range(0, len(rows), bs):
            r = rows[lo:lo + bs]
            out.append((self.data.src[r], self.data.dst[r],
                        negatives(len(r), rng, float(self.data.ts[r[0]])),
                        self.data.ts[r].astype(np.float64), r))
            if self.config.max_batches and len(out) >= self.config.max_batches:
                break
        return out

    def _sample(self, sampler: TemporalSampler, item: Tuple[np.ndarray, ...], batch_id: int,
                remap_eids: bool) -> Tuple[Any, float]:
        t0 = time.perf_counter()
        src, dst, neg, ts, _ = item
        nodes = np.concatenate([src, dst, neg])
        times = np.concatenate([ts, ts, ts])
        # TBDFSModel reads the tree from the layer tables: no path explosion needed, unless
        # the model says otherwise (``needs_paths``, e.g. the per-slot reference).
        batch = sampler.sample(nodes, times, batch_id=batch_id, paths=self._needs_paths)
        if remap_eids:
            self._remap_train_eids(batch)
        if self._pad_roots is not None:
            batch = batch.padded(self._pad_roots)
        if self.device.type == "cuda":
            # Pinned memory lets the copy run asynchronously, here in the sampling thread,
            # while the GPU still works on the previous batch.
            batch = batch.pin_memory().to(self.device, non_blocking=True)
        else:
            batch = batch.to(self.device)
        return batch, time.perf_counter() - t0

    def _remap_train_eids(self, batch: Any) -> None:
        """The training graph numbers its interactions 0..; map them to dataset rows."""
        rows = self._train_rows
        for table in batch.layers:
            e = table.eid
            table.eid = torch.where(e >= 0, rows[e.clamp(min=0)], e)
        if batch.paths is not None:
            e = batch.paths.eids
            batch.paths.eids = torch.where(e >= 0, rows[e.clamp(min=0)], e)

    def _iterate(self, sampler: TemporalSampler, items: List[Tuple[np.ndarray, ...]],
                 first_id: int, remap: bool) -> Iterator[Tuple[Tuple[np.ndarray, ...], Any, float]]:
        """Yield (item, batch, sample seconds), sampling one batch ahead when prefetching."""
        if not items:
            return
        if self._pool is None:
            for i, item in enumerate(items):
                batch, secs = self._sample(sampler, item, first_id + i, remap)
                yield item, batch, secs
            return
        future = self._pool.submit(self._sample, sampler, items[0], first_id, remap)
        for i, item in enumerate(items):
            batch, secs = future.result()
            if i + 1 < len(items):
                future = self._pool.submit(self._sample, sampler, items[i + 1], first_id + i + 1, remap)
            yield item, batch, secs

    def _embed(self, batch: Any, n: int) -> Tuple[torch.Tensor, torch.Tensor]:
        with self._autocast():
            h = self._forward(batch, self.node_feats, self.edge_feats)
            # Padding roots (compiled runs) come after the 3n real ones.
            h_src, h_dst, h_neg = h[:n], h[n:2 * n], h[2 * n:3 * n]
            pos, neg = self.model.score(h_src, h_dst), self.model.score(h_src, h_neg)
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
        rng = np.random.default_rng([self.config.seed, epoch, 1])
        items = self._batches(np.flatnonzero(self.split.train), rng, self.train_negatives)
        n = self.config.train_batches
        if n is not None and n < len(items):
            pick = np.random.default_rng([self.config.seed, epoch, 3]).choice(
                len(items), n, replace=False)
            items = [items[i] for i in np.sort(pick)]
        bar = _progress(len(items), f"epoch {epoch}", self.config.progress)
        total, sample_s, model_s = 0.0, 0.0, 0.0
        for i, (item, batch, secs) in enumerate(
                self._iterate(self.train_sampler, items, epoch * 1_000_000, remap=True)):
            sample_s += secs
            t0 = time.perf_counter()
            pos, neg = self._embed(batch, len(item[0]))
            loss = F.binary_cross_entropy_with_logits(pos, torch.ones_like(pos)) + \
                F.binary_cross_entropy_with_logits(neg, torch.zeros_like(neg))
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            self.optimizer.step()
            total += float(loss.detach())  # synchronises with the device, so:
            self._check_time_range()
            model_s += time.perf_counter() - t0
            bar.update(1)
            bar.set_postfix(loss=f"{total / (i + 1):.4f}")
        bar.close()
        return total / max(1, len(items)), sample_s, model_s, len(items)

    @torch.no_grad()
    def evaluate(self, part: str) -> Dict[str, Dict[str, float]]:
        """Transductive and inductive metrics of ``part`` ('val' or 'test') on fixed negatives."""
        if part not in ("val", "test"):
            raise ValueError(f"part must be 'val' or 'test', got {part!r}")
        self.model.eval()
        rows = np.flatnonzero(getattr(self.split, part))
        cap = self.config.val_events if part == "val" else self.config.test_events
        if cap is not None and cap < len(rows):
            pick = np.random.default_rng([self.config.seed, 0 if part == "val" else 1, 4])
            rows = np.sort(pick.choice(rows, cap, replace=False))
        rng = np.random.default_rng([self.config.seed, 0 if part == "val" else 1, 2])
        items = self._batches(rows, rng, self.eval_negatives)
        pos_all, neg_all, row_all = [], [], []
        base = 2_000_000_000 if part == "val" else 3_000_000_000
        for item, batch, _ in self._iterate(self.eval_sampler, items, base, remap=False):
            pos, neg = self._embed(batch, len(item[0]))
            pos_all.append(pos.float().cpu().numpy())
            neg_all.append(neg.float().cpu().numpy())
            row_all.append(item[4])
        if not items:
            empty = np.zeros(0)
            return {"transductive": link_prediction_metrics(empty, empty),
                    "inductive": link_prediction_metrics(empty, empty)}
        self._check_time_range()
        pos, neg, r = np.concatenate(pos_all), np.concatenate(neg_all), np.concatenate(row_all)
        new = getattr(self.split, f"{part}_inductive")[r]
        return {"transductive": link_prediction_metrics(pos, neg),
                "inductive": link_prediction_metrics(pos[new], neg[new])}

    def fit(self) -> TrainResult:
        """Train with early stopping on validation AP; restore the best weights; test."""
        cfg = self.config
        result = TrainResult()
        best_state = None
        waited = 0
        self.log(f"split: {self.split.summary()}")
        for epoch in range(cfg.epochs):
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
                if cfg.save_dir:
                    save_checkpoint(os.path.join(cfg.save_dir, "best.pt"), self.model,
                                    self.model_kwargs, {"epoch": epoch, "val": val,
                                                        "config": cfg.to_dict()})
            else:
                waited += 1
                if waited >= cfg.patience:
                    self.log(f"early stop: no better validation AP for {cfg.patience} epochs")
                    break
        if best_state is not None:
            self.model.load_state_dict(best_state)
        result.val = self.evaluate("val")
        result.test = self.evaluate("test")
        result.peak_rss_mb = _peak_rss_mb()
        if self.device.type == "cuda":
            result.peak_gpu_mb = torch.cuda.max_memory_allocated(self.device) / 2**20
        return result

    def close(self) -> None:
        """Stop the prefetching thread."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None


def _progress(total: int, desc: str, enabled: bool) -> Any:
    """A tqdm bar when enabled (and tqdm is installed), else a no-op with the same calls."""
    if enabled:
        try:
            from tqdm.auto import tqdm

            return tqdm(total=total, desc=desc, leave=False, dynamic_ncols=True)
        except ImportError:
            pass

    class _Null:
        def update(self, n: int = 1) -> None: ...
        def set_postfix(self, **kwargs: Any) -> None: ...
        def close(self) -> None: ...

    return _Null()
