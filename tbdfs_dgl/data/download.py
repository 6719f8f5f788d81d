"""Fetching the public datasets from their publishers, safely and with honest errors."""
from __future__ import annotations

import hashlib
import os
import shutil
import socket
import tarfile
import tempfile
import urllib.error
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Optional

from ._table import PathLike

__all__ = ["DatasetSource", "SOURCES", "ChecksumError", "download", "fetch_dataset"]


@dataclass(frozen=True)
class DatasetSource:
    """Where a publisher releases one dataset file.

    Attributes
    ----------
    url : str or None
        Public URL, ``None`` when the data has no public download.
    filename : str
        Name to save it under (relative to the data directory).
    sha256 : str or None
        Expected checksum when known; publishers do not state them, so most are ``None``.
    note : str
        How to obtain it by hand, and what it holds.
    """

    url: Optional[str]
    filename: str
    sha256: Optional[str] = None
    note: str = ""


#: Public locations of the files the readers understand, keyed by dataset name.  Filled by
#: :func:`~tbdfs_dgl.data.register_reader` (``source=``): the built-in readers register
#: theirs in :mod:`tbdfs_dgl.data.readers`.
SOURCES: Dict[str, DatasetSource] = {}


class ChecksumError(ValueError):
    """A downloaded file does not have the expected SHA-256."""


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _offline_error(url: str, dest: Path, reason: object) -> RuntimeError:
    return RuntimeError(f"could not download {url}: {reason}; you appear to be offline — "
                        f"place the file at {dest} by hand or use the synthetic dataset")


def download(url: str, dest: PathLike, sha256: Optional[str] = None, progress: bool = True,
             overwrite: bool = False, timeout: float = 30.0) -> Path:
    """Download ``url`` to ``dest`` atomically, verifying its checksum when one is given.

    The bytes go to a temporary file beside ``dest`` that is renamed into place only after
    the transfer completed and the checksum matched, so an interrupted or corrupt download
    never leaves a file that a later run would trust.

    Parameters
    ----------
    url : str
        ``http(s)://`` or ``file://`` URL.
    dest : str or os.PathLike
        Where to save it; missing parent folders are created.
    sha256 : str, optional
        Expected hex SHA-256 of the file.
    progress : bool
        Show a tqdm progress bar.
    overwrite : bool
        Download even if ``dest`` exists.  Without it an existing ``dest`` is returned as is
        (after checking ``sha256`` when given).
    timeout : float
        Seconds to wait for the server to answer or send more data.

    Returns
    -------
    pathlib.Path
        ``dest``.

    Raises
    ------
    RuntimeError
        If the server cannot be reached or the transfer fails; the message says to place
        the file by hand or use the synthetic dataset.
    ChecksumError
        If the content does not match ``sha256`` (nothing is left at ``dest``).
    """
    dest = Path(dest).expanduser()
    if dest.exists() and not overwrite:
        if sha256 is not None and _sha256(dest).lower() != sha256.lower():
            raise ChecksumError(f"{dest} exists but its SHA-256 is not {sha256}; remove it or "
                                "pass overwrite=True to download again")
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".part", dir=dest.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            try:
                response = urllib.request.urlopen(url, timeout=timeout)
            except urllib.error.HTTPError as exc:
                # the network works; the publisher refused or moved the file
                raise RuntimeError(f"could not download {url}: HTTP {exc.code} {exc.reason}; "
                                   f"place the file at {dest} by hand or use the synthetic "
                                   "dataset") from exc
            except (urllib.error.URLError, OSError, socket.timeout) as exc:
                raise _offline_error(url, dest, getattr(exc, "reason", exc)) from exc
            with response:
                total = response.headers.get("Content-Length")
                total = int(total) if total and total.isdigit() else None
                from tqdm.auto import tqdm

                with tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024,
                          desc=dest.name, disable=not progress) as bar:
                    received = 0
                    try:
                        for chunk in iter(lambda: response.read(1 << 16), b""):
                            out.write(chunk)
                            received += len(chunk)
                            bar.update(len(chunk))
                    except (OSError, socket.timeout) as exc:
                        raise _offline_error(url, dest, f"transfer interrupted ({exc})") from exc
                if total is not None and received != total:
                    raise RuntimeError(f"could not download {url}: received {received} of "
                                       f"{total} bytes; place the file at {dest} by hand or "
                                       "use the synthetic dataset")
        if sha256 is not None:
            got = _sha256(tmp)
            if got.lower() != sha256.lower():
                raise ChecksumError(f"checksum mismatch for {url}: expected SHA-256 {sha256}, "
                                    f"got {got}; nothing was saved at {dest}")
        os.replace(tmp, dest)
    finally:
        if tmp.exists():
            tmp.unlink()
    return dest


def _safe_extract(archive: Path, into: Path) -> None:
    """Extract a tar or zip archive refusing members that would land outside ``into``."""
    root = into.resolve()
    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as zf:
            for m in zf.namelist():
                if not (root / m).resolve().is_relative_to(root):
                    raise ValueError(f"{archive}: member {m!r} escapes the target folder")
            zf.extractall(into)
        return
    with tarfile.open(archive) as tf:
        for m in tf.getmembers():
            if not (root / m.name).resolve().is_relative_to(root) or m.issym() or m.islnk():
                raise ValueError(f"{archive}: member {m.name!r} is a link or escapes the "
                                 "target folder")
        # the "data" filter (Python >= 3.11.4) also strips permissions and device files
        extra = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
        tf.extractall(into, **extra)


def fetch_dataset(name: str, data_dir: PathLike, progress: bool = True) -> Path:
    """Download dataset ``name`` from :data:`SOURCES` into ``data_dir`` (and extract archives).

    Parameters
    ----------
    name : str
        A key of :data:`SOURCES`.
    data_dir : str or os.PathLike
        Folder to save into.
    progress : bool
        Show a progress bar.

    Returns
    -------
    pathlib.Path
        The downloaded file, or for archives the folder they were extracted to.

    Raises
    ------
    KeyError
        For an unknown name.
    RuntimeError
        If the dataset has no public URL or the download fails.
    """
    if name not in SOURCES:
        raise KeyError(f"unknown dataset {name!r}; known: {sorted(SOURCES)}")
    src = SOURCES[name]
    dest = Path(data_dir).expanduser() / src.filename
    if src.url is None:
        if dest.exists():
            return dest
        raise RuntimeError(f"{name} cannot be downloaded: {src.note}. Expected at {dest}")
    path = download(src.url, dest, sha256=src.sha256, progress=progress)
    if path.name.endswith((".zip", ".tar.gz", ".tgz")):
        stem = path.name.split(".")[0]
        target = path.parent / stem
        if not target.exists():
            tmp = Path(tempfile.mkdtemp(prefix=f".{stem}.", dir=path.parent))
            try:
                _safe_extract(path, tmp)
                inner = tmp / stem
                shutil.move(str(inner if inner.is_dir() else tmp), str(target))
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
        return target
    return path
