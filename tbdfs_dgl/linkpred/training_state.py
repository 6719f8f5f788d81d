"""Resumable training: a run's whole state after each epoch, so that a stopped run goes on.

A run of the paper's protocol on a whole graph can take hours on a CPU, longer than a
working session.  With ``TrainConfig.resume_path`` the trainer writes, after every epoch,
everything the rest of the run depends on: the weights, Adam's moments, torch's random
state (dropout), the early-stopping counters, the best weights so far and the epochs'
statistics.  The batches and negatives of epoch ``e`` are drawn from streams fixed by
``(seed, e)`` (:mod:`.streams`), so a run resumed after epoch ``e`` goes on exactly as if it
had not stopped (on a CPU, bit for bit; ``tests/test_training_state.py``).

The file is written atomically (:func:`.checkpoints.write_checked`): a kill during a save
leaves the previous epoch's state.  It names the run it belongs to (:func:`run_identity`),
and a trainer refuses a file of another run instead of mixing two.
"""
from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

import torch

from .checkpoints import read_checked, write_checked

__all__ = ["TrainingState", "run_identity", "save_training_state", "load_training_state",
           "read_training_state"]

_STATE_MAGIC = b"TBDFS-TRAINING-STATE\n"
STATE_FORMAT = 1

# Settings that do not change what a run computes beyond float-level differences (where,
# how fast, how it reports), so a run may resume under others: e.g. started on a CPU and
# finished on a GPU.  Each segment's device is kept in ``TrainingState.segments``.
_NOT_IDENTITY = ("num_threads", "device", "prefetch", "prefetch_batches", "compile",
                 "compile_mode", "amp", "progress", "retain_memory", "save_dir", "graph_dir",
                 "resume_path")


def run_identity(config_dict: Dict[str, Any], model_kwargs: Dict[str, Any],
                 split_summary: str, num_edges: int) -> Dict[str, Any]:
    """What a resumed run must share with the run that wrote the state.

    Parameters
    ----------
    config_dict : dict
        :meth:`TrainConfig.to_dict`; the settings in ``_NOT_IDENTITY`` are left out.
    model_kwargs : dict
        The model's constructor arguments.
    split_summary : str
        :meth:`ChronologicalSplit.summary` (the sizes of the parts).
    num_edges : int
        The dataset's interactions.

    Returns
    -------
    dict
        JSON-ready values (compared as JSON).
    """
    config = {k: v for k, v in config_dict.items() if k not in _NOT_IDENTITY}
    identity = {"config": config, "model_kwargs": model_kwargs, "split": split_summary,
                "num_edges": int(num_edges)}
    # Round trip: tuples become lists, so a file read back compares equal.
    return json.loads(json.dumps(identity, sort_keys=True, default=str))


@dataclass
class TrainingState:
    """Everything :meth:`LinkPredictionTrainer.fit` needs to go on after ``epochs_done``."""

    identity: Dict[str, Any]
    epochs_done: int
    stopped: bool  # early stopping fired or the epochs ran out: only the final tests remain
    history: List[Dict[str, Any]]  # EpochStats as dicts
    best_epoch: int
    best_val_ap: float
    waited: int  # epochs since the best one
    best_state: Optional[Dict[str, torch.Tensor]]
    model_state: Dict[str, torch.Tensor]
    optimizer_state: Dict[str, Any]
    torch_rng: torch.Tensor
    cuda_rng: Optional[List[torch.Tensor]]
    seconds: float  # wall seconds of fit() so far, summed over the segments
    # One entry per time fit() ran on this state: first epoch, device.
    segments: List[Dict[str, Any]] = field(default_factory=list)


def save_training_state(path: str, state: TrainingState) -> None:
    """Write ``state`` to ``path`` atomically and durably (tensors on the CPU)."""
    payload = dict(state.__dict__, format=STATE_FORMAT)
    buf = io.BytesIO()
    torch.save(payload, buf)
    write_checked(path, _STATE_MAGIC, buf.getvalue())


def load_training_state(path: str, identity: Dict[str, Any]) -> TrainingState:
    """Read the state at ``path`` and check that it belongs to the run ``identity`` names.

    Raises
    ------
    ValueError
        If the file is not a readable training state (empty, truncated, corrupted, another
        format), or it belongs to another run: the message names the settings that differ
        and says to delete the file to start the run over.
    """
    state = read_training_state(path)
    if state.identity != identity:
        diff = _differences(state.identity, identity)
        raise ValueError(f"{path} holds the state of another run (differs in: "
                         f"{', '.join(diff)}); delete it to start this run over, or run "
                         "with the settings that wrote it")
    return state


def read_training_state(path: str) -> TrainingState:
    """Read the state at ``path`` whatever run it belongs to (e.g. to show how far a run
    in progress is); :func:`load_training_state` to resume one.

    Raises
    ------
    ValueError
        If the file is not a readable training state of this version.
    """
    body = read_checked(path, _STATE_MAGIC, "training state")
    try:
        payload = torch.load(io.BytesIO(body), map_location="cpu")
    except Exception as err:  # noqa: BLE001 - torch/pickle raise many kinds on bad bytes
        raise ValueError(f"{path}: not a readable training state ({type(err).__name__}: "
                         f"{err})") from err
    if not isinstance(payload, dict) or payload.get("format") != STATE_FORMAT:
        got = payload.get("format") if isinstance(payload, dict) else None
        raise ValueError(f"{path}: training state format {got!r}, this version reads "
                         f"{STATE_FORMAT}; delete the file to start the run over")
    payload.pop("format")
    try:
        state = TrainingState(**payload)
    except TypeError as err:  # fields added or removed without a new format number
        raise ValueError(f"{path}: a training state of another version ({err}); delete it "
                         "to start the run over") from err
    return state


def _differences(a: Any, b: Any, prefix: str = "") -> List[str]:
    """Dotted names of the leaves that differ between two JSON-like values."""
    if isinstance(a, dict) and isinstance(b, dict):
        out: List[str] = []
        for key in sorted(set(a) | set(b)):
            name = f"{prefix}{key}"
            if key not in a or key not in b:
                out.append(name)
            else:
                out.extend(_differences(a[key], b[key], name + "."))
        return out
    return [] if a == b else [prefix.rstrip(".") or "(the whole identity)"]
