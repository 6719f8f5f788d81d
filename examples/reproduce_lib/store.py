"""The results file: one JSON object per finished run, appended and fsynced.

A line is written only once its run has finished, in one ``write`` followed by ``flush`` and
``fsync``, so an interrupted grid leaves every finished run on disk and nothing of the run
it was in.  Reading is tolerant: a torn last line (a crash inside the write itself) is
skipped with a warning, and the next append starts on a fresh line.
"""
from __future__ import annotations

import fcntl
import json
import math
import os
import warnings
from pathlib import Path
from typing import Any, Dict, Iterable, List, Set, Tuple

__all__ = ["ResultsStore", "run_key", "clean_json"]

Key = Tuple[str, str, int, str]


def run_key(record: Dict[str, Any]) -> Key:
    """(dataset, variant, seed, budget): what makes a run unique."""
    return (str(record["dataset"]), str(record["variant"]), int(record["seed"]),
            str(record["budget"]))


def clean_json(obj: Any) -> Any:
    """``obj`` with NaN/inf floats as ``None`` and numpy scalars/arrays as plain Python, so
    every line is strict JSON."""
    if isinstance(obj, dict):
        return {str(k): clean_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [clean_json(v) for v in obj]
    if hasattr(obj, "tolist") and not isinstance(obj, (str, bytes)):
        return clean_json(obj.tolist())
    if isinstance(obj, bool) or obj is None or isinstance(obj, (int, str)):
        return obj
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    try:
        f = float(obj)
    except (TypeError, ValueError):
        return str(obj)
    return f if math.isfinite(f) else None


class ResultsStore:
    """Append-only JSON-lines file of finished runs."""

    def __init__(self, path: os.PathLike) -> None:
        self.path = Path(path)

    def load(self) -> List[Dict[str, Any]]:
        """Every well-formed record, in file order (a later duplicate key is dropped)."""
        if not self.path.exists():
            return []
        out: List[Dict[str, Any]] = []
        seen: Set[Key] = set()
        with open(self.path, "r", encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                line = line.strip()
                if not line:
                    continue
                try:
                    rec = json.loads(line)
                    key = run_key(rec)
                except (ValueError, KeyError, TypeError) as err:
                    warnings.warn(f"{self.path}:{n}: skipping an unreadable line ({err}); "
                                  "a run interrupted while writing leaves one", stacklevel=2)
                    continue
                if key in seen:
                    continue
                seen.add(key)
                out.append(rec)
        return out

    def done(self) -> Set[Key]:
        """Keys of the finished runs."""
        return {run_key(r) for r in self.load()}

    def append(self, record: Dict[str, Any]) -> None:
        """Write one finished run durably (one write, flush, fsync)."""
        run_key(record)  # refuse records without a key before touching the file
        line = json.dumps(clean_json(record), sort_keys=True, allow_nan=False) + "\n"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a+b") as fh:
            # Shards (--shard) append to one file: one writer at a time.
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
            fh.seek(0, os.SEEK_END)
            if fh.tell() > 0:
                fh.seek(-1, os.SEEK_END)
                if fh.read(1) != b"\n":  # a torn line from a crash: keep ours separate
                    line = "\n" + line
                fh.seek(0, os.SEEK_END)
            fh.write(line.encode("utf-8"))
            fh.flush()
            os.fsync(fh.fileno())

    def extend(self, records: Iterable[Dict[str, Any]]) -> None:
        for r in records:
            self.append(r)
