"""Running one (dataset, variant, seed) of the grid, and estimating the grid's time."""
from __future__ import annotations

import datetime as _dt
import hashlib
import json
import math
import os
import platform
import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch

from tbdfs_dgl import TBDFSModel, seed_everything
from tbdfs_dgl.data import TemporalDataset, load_dataset, make_wikipedia_like
from tbdfs_dgl.linkpred import (EventBatch, LinkPredictionTrainer, NegativeSampler,
                               TrainConfig, chronological_split)
from tbdfs_dgl.nn import cpu_gemm_backend

from .grid import VARIANTS, Budget, RunSpec

__all__ = ["get_dataset", "run_one", "state_path", "remove_state", "runs_in_progress",
           "unresumable_states",
           "Hardware", "model_kwargs", "train_config", "code_version", "measure_speed",
           "SpeedSample", "estimate_grid"]

ROOT = Path(__file__).resolve().parents[2]
_CACHE: Dict[Tuple[str, Optional[str], Optional[int]], TemporalDataset] = {}


def _full_dataset(name: str, data_dir: Optional[str]) -> TemporalDataset:
    if name == "synthetic":
        return make_wikipedia_like(num_users=1000, num_pages=200, num_events=20000,
                                   path_strength=0.6, seed=0)
    data = load_dataset(name, data_dir)
    if name == "wikipedia" and data.edge_feat is not None:
        # the grid uses Wikipedia's edges only (what ../shared/data has), even where the
        # full JODIE release with its 172 LIWC features is available
        from dataclasses import replace

        data = replace(data, edge_feat=None, source=f"{data.source} (edge features dropped)")
    return data


def get_dataset(name: str, max_events: Optional[int] = None,
                data_dir: Optional[str] = None) -> TemporalDataset:
    """The dataset, cut to its first ``max_events`` interactions (time order) if given.

    Node ids (and so ``num_nodes`` and the bipartite sides) are kept; nodes that only occur
    later are isolated.  Cached per process.
    """
    key = (name, data_dir, max_events)
    if key in _CACHE:
        return _CACHE[key]
    full_key = (name, data_dir, None)
    if full_key not in _CACHE:
        _CACHE[full_key] = _full_dataset(name, data_dir)
    full = _CACHE[full_key]
    if max_events is None or max_events >= full.num_edges:
        _CACHE[key] = full
        return full
    k = int(max_events)
    data = TemporalDataset(
        name=full.name, src=full.src[:k], dst=full.dst[:k], ts=full.ts[:k],
        num_nodes=full.num_nodes,
        edge_feat=None if full.edge_feat is None else full.edge_feat[:k],
        node_feat=full.node_feat, labels=None if full.labels is None else full.labels[:k],
        bipartite=full.bipartite, num_src_nodes=full.num_src_nodes,
        synthetic=full.synthetic, source=f"first {k} of {full.num_edges} rows of {full.source}",
        original_ids=full.original_ids)
    _CACHE[key] = data
    return data


def model_kwargs(budget: Budget, data: TemporalDataset, variant_kwargs: Dict[str, Any]
                 ) -> Dict[str, Any]:
    """TBDFSModel arguments of a run: the budget's sizes, the variant's switches."""
    kw: Dict[str, Any] = dict(
        node_dim=data.node_dim, edge_dim=data.edge_dim, time_dim=budget.time_dim,
        hidden_dim=budget.hidden_dim, num_layers=len(budget.fanouts), num_heads=budget.num_heads,
        dropout=budget.dropout, alpha=0.5, within_path_agg="attn", across_paths_agg="attn",
        path_inputs="raw", use_time=True, num_nodes=data.num_nodes, node_embedding_dim=0,
        # The budget's formulation: release 0.1's 'cos_sin' for the reports made with it,
        # the library's current default for the full budgets.
        time_encoding=budget.time_encoding,
        # The BFS layers' form, explicit: the budget's, not the library's default (the
        # model derives the form's width and init from it).
        attn_norm=budget.attn_norm, empty_neighbourhood=budget.empty_neighbourhood)
    kw.update(variant_kwargs)
    return kw


@dataclass(frozen=True)
class Hardware:
    """Where and how a run computes (never part of a run's identity: a cell may pool runs
    made on CPU and GPU; each record says which)."""

    device: str = "cpu"
    compile: bool = False
    amp: Optional[str] = None
    compile_mode: Optional[str] = None  # e.g. 'reduce-overhead' (CUDA graphs) with compile
    retain_memory: bool = False  # TrainConfig.retain_memory: glibc malloc keeps freed memory
    huge_pages: bool = False  # THP_MEM_ALLOC_ENABLE: torch's large tensors on huge pages


def train_config(budget: Budget, seed: int, hardware: Hardware = Hardware()) -> TrainConfig:
    return TrainConfig(epochs=budget.epochs, batch_size=budget.batch_size, lr=budget.lr,
                       patience=budget.patience, fanouts=list(budget.fanouts),
                       strategy=budget.strategy, seed=int(seed),
                       max_batches=budget.max_batches, train_batches=budget.train_batches,
                       val_events=budget.val_events, test_events=budget.test_events,
                       eval_negatives=budget.eval_negatives,
                       eval_candidates=budget.eval_candidates, save_dir=None, progress=False,
                       train_negatives=budget.train_negatives, device=hardware.device,
                       compile=hardware.compile, amp=hardware.amp,
                       compile_mode=hardware.compile_mode,
                       retain_memory=hardware.retain_memory)


_CODE: Optional[Dict[str, Any]] = None


def code_version() -> Dict[str, Any]:
    """Git commit, whether the tree is dirty, and a hash of the package's Python sources (the
    model is still being tuned: runs made with different model code are flagged)."""
    global _CODE
    if _CODE is not None:
        return _CODE
    out: Dict[str, Any] = {}
    try:
        out["git_commit"] = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
            timeout=10).stdout.strip() or None
        out["git_dirty"] = bool(subprocess.run(
            ["git", "status", "--porcelain", "--", "tbdfs_dgl", "csrc"], cwd=ROOT,
            capture_output=True, text=True, timeout=10).stdout.strip())
    except (OSError, subprocess.SubprocessError):
        out["git_commit"], out["git_dirty"] = None, None
    h = hashlib.sha256()
    pkg = ROOT / "tbdfs_dgl"
    for p in sorted(pkg.rglob("*.py")):
        h.update(str(p.relative_to(pkg)).encode())
        h.update(p.read_bytes())
    out["package_sha"] = h.hexdigest()[:12]
    _CODE = out
    return out


def _device_name(device: str) -> str:
    """``device`` and, for a GPU, its model (the report groups wall times by it)."""
    dev = torch.device(device)
    if dev.type == "cuda" and torch.cuda.is_available():
        return f"{device} ({torch.cuda.get_device_name(dev)})"
    return device


def _mean(xs: Sequence[float]) -> Optional[float]:
    return float(np.mean(xs)) if len(xs) else None


def _state_folder(budget: Budget, state_dir: os.PathLike) -> Path:
    """The budget's folder of training states (its name's brackets and commas replaced)."""
    return Path(state_dir) / re.sub(r"[^A-Za-z0-9._-]+", "_", budget.name)


def state_path(spec: RunSpec, state_dir: os.PathLike) -> Path:
    """Where ``spec``'s training state is kept while it runs (one file per run)."""
    return _state_folder(spec.budget, state_dir) / \
        f"{spec.dataset}__{spec.variant.name}__seed{spec.seed}.state"


def runs_in_progress(budget: Budget, state_dir: os.PathLike) -> List[Dict[str, Any]]:
    """How far each run of ``budget`` with a training state in ``state_dir`` has got:
    its name, epochs done, best epoch and validation AP, the last epoch's validation AP,
    wall seconds so far and whether only the final tests remain."""
    from tbdfs_dgl.linkpred.training_state import read_training_state

    out = []
    for path in sorted(_state_folder(budget, state_dir).glob("*.state")):
        try:
            state = read_training_state(str(path))
        except ValueError as err:
            out.append({"run": path.stem, "error": str(err)})
            continue
        last = state.history[-1]["val"]["transductive"]["ap"] if state.history else None
        out.append({"run": path.stem.replace("__", "/"), "epochs_done": state.epochs_done,
                    "best_epoch": state.best_epoch, "best_val_ap": state.best_val_ap,
                    "last_val_ap": last, "seconds": state.seconds,
                    "stopped": state.stopped})
    return out


def _code_of_state(path: Path, code: Dict[str, Any], other_code_ok: bool = False
                   ) -> Dict[str, Any]:
    """The code version that started the run whose state is at ``path``; a new run
    records ``code`` beside the state.

    A run resumed under other package sources could mix two models' math in one record:
    refused, with what to do, unless ``other_code_ok`` (the caller has checked that the
    sources differ in nothing the run computes; the record then names both versions).
    """
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.with_suffix(".code.json").write_text(json.dumps(code, sort_keys=True) + "\n")
        return code
    return _started_code(path, code, other_code_ok)


def _started_code(path: Path, code: Dict[str, Any], other_code_ok: bool) -> Dict[str, Any]:
    """The code record beside an existing state, or ValueError saying why the run
    cannot resume under ``code``."""
    sidecar = path.with_suffix(".code.json")
    try:
        started = json.loads(sidecar.read_text())
    except (OSError, ValueError) as err:
        raise ValueError(f"{path}: its code record {sidecar} is missing or unreadable "
                         f"({err}); delete {path} to start the run over") from err
    if started.get("package_sha") != code.get("package_sha") and not other_code_ok:
        raise ValueError(
            f"{path} was written by other package sources (commit "
            f"{started.get('git_commit')}, sources {started.get('package_sha')}; now "
            f"{code.get('git_commit')}, {code.get('package_sha')}): check out commit "
            f"{started.get('git_commit')} to finish the run, or delete {path} to start it "
            "over (or, having checked that the sources differ in nothing the run computes, "
            "resume it under these: --resume-other-code)")
    return started


def unresumable_states(specs: Sequence[RunSpec], state_dir: os.PathLike,
                       other_code_ok: bool = False) -> List[str]:
    """Why each of ``specs``' saved training states cannot be resumed here (empty when
    all can), so that a grid is refused before it starts rather than at its Nth run,
    with fresh runs started in the meantime."""
    code = code_version()
    out = []
    for spec in specs:
        path = state_path(spec, state_dir)
        if path.exists():
            try:
                _started_code(path, code, other_code_ok)
            except ValueError as err:
                out.append(f"{spec.describe()}: {err}")
    return out


def remove_state(path: Optional[Path]) -> None:
    """Delete a recorded run's state and its code record."""
    if path is not None:
        for p in (path, path.with_suffix(".code.json")):
            if p.exists():
                p.unlink()


def run_one(spec: RunSpec, data_dir: Optional[str] = None,
            log: Callable[[str], None] = print,
            hardware: Hardware = Hardware(),
            resume: Optional[Path] = None, other_code_ok: bool = False) -> Dict[str, Any]:
    """Train and test one run of the grid on ``hardware``; return its record.

    With ``resume`` (a :func:`state_path`), the training state is saved there after each
    epoch and a state already there is resumed (``TrainConfig.resume_path``; refused if
    other package sources wrote it, unless ``other_code_ok``); the caller deletes it
    (:func:`remove_state`) once the record is stored.  Nothing else is written.
    """
    budget = spec.budget
    # Read before training: the sources may change while a run of hours goes on, and
    # the record must name the code that ran, not the code there at its end.
    now = code = code_version()
    if resume is not None:
        code = _code_of_state(Path(resume), now, other_code_ok)
    data = get_dataset(spec.dataset, budget.max_events, data_dir)
    full_edges = get_dataset(spec.dataset, None, data_dir).num_edges
    seed_everything(spec.seed)
    kwargs = model_kwargs(budget, data, spec.variant.model_kwargs)
    model = TBDFSModel(**kwargs)
    n_params = sum(p.numel() for p in model.parameters())
    cfg = train_config(budget, spec.seed, hardware)
    if resume is not None:
        cfg.resume_path = str(resume)
    t0 = time.perf_counter()
    split = chronological_split(data, seed=cfg.seed)
    trainer = LinkPredictionTrainer(model, data, cfg, split=split, model_kwargs=kwargs,
                                    log=lambda line: log(f"[{spec.describe()}] {line}"))
    try:
        result = trainer.fit()
    finally:
        trainer.close()
    # A resumed run's wall time counts its earlier sessions' training too.
    wall = time.perf_counter() - t0 + result.earlier_seconds
    hist = result.history
    return {
        "dataset": spec.dataset, "variant": spec.variant.name, "seed": int(spec.seed),
        "budget": budget.name, "sections": list(spec.sections),
        "alpha": spec.variant.alpha, "variant_kwargs": spec.variant.model_kwargs,
        "model_kwargs": kwargs, "parameters": int(n_params),
        "config": cfg.to_dict(), "budget_settings": budget.settings(),
        "data": {
            "name": data.name, "synthetic": bool(data.synthetic), "source": data.source,
            "num_nodes": data.num_nodes, "num_edges": data.num_edges,
            "num_edges_total": full_edges, "edge_feat_dim": data.edge_dim,
            "node_feat_dim": data.node_dim,
            "split": {"train": int(split.train.sum()), "val": int(split.val.sum()),
                      "test": int(split.test.sum()),
                      "val_inductive": int(split.val_inductive.sum()),
                      "test_inductive": int(split.test_inductive.sum()),
                      "held_out_nodes": int(len(split.held_out_nodes))},
        },
        "wall_seconds": wall, "epochs_run": len(hist), "best_epoch": int(result.best_epoch),
        "best_val_ap": result.best_val_ap,
        "seconds_per_epoch": _mean([e.seconds + e.eval_seconds for e in hist]),
        "train_seconds_per_epoch": _mean([e.seconds for e in hist]),
        "eval_seconds_per_epoch": _mean([e.eval_seconds for e in hist]),
        "sample_seconds_per_epoch": _mean([e.sample_seconds for e in hist]),
        "model_seconds_per_epoch": _mean([e.model_seconds for e in hist]),
        "batches_per_epoch": hist[0].batches if hist else 0,
        "history": [{"epoch": e.epoch, "loss": e.loss,
                     "val_ap": e.val["transductive"]["ap"],
                     "val_ap_inductive": e.val["inductive"]["ap"],
                     "seconds": e.seconds, "eval_seconds": e.eval_seconds,
                     "sample_seconds": e.sample_seconds, "model_seconds": e.model_seconds,
                     "batches": e.batches} for e in hist],
        "val": result.val, "test": result.test, "peak_rss_mb": result.peak_rss_mb,
        # The learned gate's alpha over the test embeddings (learned-alpha runs only).
        **({} if result.alpha is None else {"learned_alpha": result.alpha}),
        "torch_threads": torch.get_num_threads(), "host": platform.node(),
        "cpu_count": os.cpu_count(),
        "device": _device_name(hardware.device), "compile": hardware.compile,
        "compile_mode": hardware.compile_mode, "amp": hardware.amp,
        "retain_memory": hardware.retain_memory,
        "huge_pages": hardware.huge_pages,
        "finished_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "code": code,
        **({} if result.resumed_at_epoch is None else {"resumed": {
            "at_epoch": result.resumed_at_epoch, "earlier_seconds": result.earlier_seconds,
            "segments": result.segments,
            # The sources of this last part, where they are not the ones that started it.
            **({} if now.get("package_sha") == code.get("package_sha") else {"code": now})}}),
        "versions": {"torch": torch.__version__, "numpy": np.__version__},
        # Which library did the CPU's long products (float-level differences only).
        "cpu_gemm": cpu_gemm_backend(),
    }


# ---------------------------------------------------------------------------- estimates
@dataclass
class SpeedSample:
    """Measured seconds per batch of one dataset and model family."""

    dataset: str
    family: str  # "tgat" (alpha = 1, no path branch) or "tbdfs" (every other variant)
    train_s_per_batch: float
    eval_s_per_batch: float
    setup_s: float
    train_batches: int   # batches per epoch under the budget
    val_batches: int
    test_batches: int
    train_cpu_per_batch: float = float("nan")  # process CPU seconds (all threads)
    eval_cpu_per_batch: float = float("nan")


def _n_batches(rows: int, bs: int, cap: Optional[int], events: Optional[int] = None,
               draw: Optional[int] = None) -> int:
    """Batches of a part: ``rows`` cut to ``events`` drawn rows, then ``draw`` drawn batches
    (TrainConfig's val/test_events and train_batches), then ``max_batches``."""
    n = math.ceil(min(rows, events or rows) / bs)
    n = min(n, draw) if draw else n
    return min(n, cap) if cap else n


class _TailTrainer(LinkPredictionTrainer):
    """A trainer whose capped batch lists are the *last* batches of the rows, so that timed
    training batches have the history of late training batches (the first ones of a split
    have almost no temporal neighbours and are much cheaper)."""

    def make_batches(self, rows: np.ndarray, rng: np.random.Generator,
                     negatives: NegativeSampler) -> List[EventBatch]:
        cap = self.config.max_batches
        if cap:
            rows = rows[max(0, len(rows) - cap * self.config.batch_size):]
        return super().make_batches(rows, rng, negatives)


def measure_speed(dataset: str, budget: Budget, family: str, batches: int = 2,
                  data_dir: Optional[str] = None, hardware: Hardware = Hardware()
                  ) -> SpeedSample:
    """Time ``batches`` training and evaluation batches (after one warm-up batch of each):
    the last batches of the training rows and of the validation rows."""
    data = get_dataset(dataset, budget.max_events, data_dir)
    variant = VARIANTS["tgat" if family == "tgat" else "tbdfs"]
    seed_everything(0)
    kwargs = model_kwargs(budget, data, variant.model_kwargs)
    cfg = train_config(budget, 0, hardware)
    t0 = time.perf_counter()
    split = chronological_split(data, seed=0)
    trainer = _TailTrainer(TBDFSModel(**kwargs), data, cfg, split=split, log=lambda s: None)
    setup = time.perf_counter() - t0
    try:
        trainer.config.max_batches = 1
        trainer.train_epoch(0)            # warm-up
        trainer.evaluate("val")
        trainer.config.max_batches = batches
        t0, c0 = time.perf_counter(), time.process_time()
        _, _, _, n_tr = trainer.train_epoch(1)
        t1, c1 = time.perf_counter(), time.process_time()
        trainer.evaluate("val")
        t2, c2 = time.perf_counter(), time.process_time()
    finally:
        trainer.close()
    n_ev = min(batches, _n_batches(int(split.val.sum()), cfg.batch_size, None))
    bs, cap = budget.batch_size, budget.max_batches
    return SpeedSample(dataset, family, (t1 - t0) / max(1, n_tr), (t2 - t1) / max(1, n_ev), setup,
                       _n_batches(int(split.train.sum()), bs, cap, draw=budget.train_batches),
                       _n_batches(int(split.val.sum()), bs, cap, budget.val_events),
                       _n_batches(int(split.test.sum()), bs, cap, budget.test_events),
                       (c1 - c0) / max(1, n_tr), (c2 - c1) / max(1, n_ev))


def estimate_grid(specs: Sequence[RunSpec], speeds: Dict[Tuple[str, str], SpeedSample],
                  cpu: bool = False) -> Tuple[float, List[Tuple[str, int, float]]]:
    """Upper-bound seconds for ``specs`` (every run goes all its epochs): the total, and per
    dataset (name, runs, seconds).  ``cpu``: from process CPU time instead of wall time."""
    per: Dict[str, List[float]] = {}
    for s in specs:
        fam = "tgat" if s.variant.alpha == 1.0 else "tbdfs"
        sp = speeds[(s.dataset, fam)]
        tr = sp.train_cpu_per_batch if cpu else sp.train_s_per_batch
        ev = sp.eval_cpu_per_batch if cpu else sp.eval_s_per_batch
        e = s.budget.epochs
        sec = (sp.setup_s + e * (sp.train_batches * tr + sp.val_batches * ev)
               + (sp.val_batches + sp.test_batches) * ev)
        per.setdefault(s.dataset, []).append(sec)
    rows = [(d, len(v), float(sum(v))) for d, v in per.items()]
    return float(sum(r[2] for r in rows)), rows
