"""Model checkpoints: written atomically and durably, checked (sha256) when read."""
from __future__ import annotations

import os
import tempfile
from typing import Any, Dict, Optional, Tuple

import torch

__all__ = ["save_checkpoint", "load_checkpoint", "write_checked", "read_checked"]

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
    import io

    encoding = getattr(model, "time_encoding", None)
    if encoding is not None:  # the formulation itself, whatever the default when loaded
        model_kwargs = dict(model_kwargs, time_encoding=encoding)
    # The BFS layers' form, likewise.
    for name in ("attn_dim", "attn_norm", "empty_neighbourhood"):
        if hasattr(model, name):
            model_kwargs = dict(model_kwargs, **{name: getattr(model, name)})
    # Recorded only when set, so that versions without the option still load the rest.
    if getattr(model, "attn_residual", False):
        model_kwargs = dict(model_kwargs, attn_residual=True)
    payload = {"model_kwargs": model_kwargs,
               "state_dict": {k: v.detach().cpu() for k, v in model.state_dict().items()},
               "extra": extra or {}}
    buf = io.BytesIO()
    torch.save(payload, buf)
    write_checked(path, _CKPT_MAGIC, buf.getvalue())


def write_checked(path: str, magic: bytes, body: bytes) -> None:
    """Write ``magic``, a JSON header line with ``body``'s sha256 and size, and ``body`` to
    ``path`` atomically and durably (temp file, fsync, rename, fsync of the folder).

    :func:`read_checked` reads it back; :func:`save_checkpoint` and the resumable training
    state (:mod:`.training_state`) are written this way.
    """
    import hashlib
    import json

    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    _remove_stale_temps(directory)
    header = json.dumps({"format": 1, "sha256": hashlib.sha256(body).hexdigest(),
                         "size": len(body)}).encode() + b"\n"
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f"{_CKPT_TMP}{os.getpid()}-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(magic + header)
            f.write(body)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    _fsync_dir(directory)


def read_checked(path: str, magic: bytes, what: str, plain_ok: bool = False) -> bytes:
    """The body of a file written by :func:`write_checked` with ``magic``, checked against
    its header.  A file without ``magic`` is returned whole with ``plain_ok`` (checkpoints
    of the previous release: a plain ``torch.save``), else refused.

    Raises
    ------
    ValueError
        If the file is empty or (unless ``plain_ok``) does not start with ``magic``, or
        its header is damaged, or its body is truncated, padded or corrupted (``what``
        names the kind of file in the message).
    """
    import hashlib
    import json

    with open(path, "rb") as f:
        data = f.read()
    if not data:
        raise ValueError(f"{path}: the {what} file is empty (an interrupted save?)")
    if not data.startswith(magic):
        if plain_ok:
            return data
        raise ValueError(f"{path}: not a {what} file (it does not start with "
                         f"{magic.strip().decode()!r})")
    end = data.find(b"\n", len(magic))
    try:
        header = json.loads(data[len(magic):end]) if end > 0 else None
    except ValueError:
        header = None
    if not isinstance(header, dict) or not {"sha256", "size"} <= header.keys():
        raise ValueError(f"{path}: the {what} header is damaged")
    body = data[end + 1:]
    if len(body) != header["size"]:
        raise ValueError(f"{path}: the {what} is truncated or padded ({len(body)} "
                         f"payload bytes, expected {header['size']})")
    if hashlib.sha256(body).hexdigest() != header["sha256"]:
        raise ValueError(f"{path}: the {what} is corrupted (sha256 of its payload does "
                         "not match the one stored when it was saved)")
    return body


def _read_checkpoint(path: str, map_location: Any) -> Dict[str, Any]:
    import io

    source = io.BytesIO(read_checked(path, _CKPT_MAGIC, "checkpoint", plain_ok=True))
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
    from .._deprecation import upgrade_kwargs
    from ..model import RENAMED_KWARGS, TBDFSModel  # after the checks: reading needs no DGL
    from ..nn.time_encoder import resolve_time_encoding

    # Checkpoints saved before release 0.2 use the old argument names: upgraded silently.
    kwargs = upgrade_kwargs(payload["model_kwargs"], RENAMED_KWARGS)
    # Saved before the choice existed: release 0.1's form, or its deprecated spelling.
    kwargs["time_encoding"] = resolve_time_encoding(kwargs.get("time_encoding"),
                                                    kwargs.pop("normalize_time", None))
    # Saved before the BFS layers' form was a choice: TGAT's, whatever today's default.
    kwargs.setdefault("attn_norm", False)
    kwargs.setdefault("attn_dim", kwargs.get("hidden_dim"))
    # Saved before round 10: empty neighbourhoods attended to nothing.
    kwargs.setdefault("empty_neighbourhood", "zero")
    kwargs.setdefault("attn_residual", False)
    model = TBDFSModel(**kwargs)
    try:
        model.load_state_dict(payload["state_dict"])
    except RuntimeError as err:
        raise ValueError(
            f"{path}: its weights do not fit the model its arguments describe (time "
            f"encoding {model.time_encoding!r}, attn_norm={model.attn_norm}, "
            f"attn_dim={model.attn_dim}): {err}. If it was written by a version that saved "
            "no or another form, load it with the form it was trained with: rebuild "
            "TBDFSModel(**model_kwargs, time_encoding=..., attn_norm=..., attn_dim=...) and "
            "load its state_dict") from err
    return model, payload.get("extra", {})
