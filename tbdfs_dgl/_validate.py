"""Input checks shared by the graph and the sampler: arrays in, clear errors out."""
from __future__ import annotations

from typing import Any, Optional

import numpy as np
import torch

# float64 represents every integer up to 2**53 exactly; larger integer times would be
# rounded silently on the way into the CSR.
MAX_EXACT_TIME = 2**53


def to_numpy(x: Any, name: str) -> np.ndarray:
    """Return ``x`` (array, tensor, list) as a numpy array without copying where possible."""
    if isinstance(x, torch.Tensor):
        if x.dtype in (torch.bfloat16, torch.complex32) or x.dtype.is_complex:
            # numpy has no such dtype: say so instead of torch's "unsupported ScalarType".
            raise TypeError(f"{name} has dtype {x.dtype}, which this library does not take: "
                            "use int64 for ids, float64 or int64 for times, float32 for "
                            "features")
        return x.detach().cpu().numpy()
    if isinstance(x, np.ndarray):
        return x
    try:
        return np.asarray(x)
    except Exception as err:  # noqa: BLE001 - numpy raises many kinds here
        raise TypeError(f"{name} must be array-like, got {type(x).__name__}") from err


def index_array(x: Any, name: str, upper: Optional[int] = None) -> np.ndarray:
    """Check a 1-D array of integer ids and return it as contiguous int64.

    Parameters
    ----------
    x : array-like
        The ids.
    name : str
        Name used in error messages.
    upper : int, optional
        Exclusive upper bound (e.g. the number of nodes).
    """
    a = to_numpy(x, name)
    if a.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {tuple(a.shape)}")
    if a.size == 0 and a.dtype.kind == "f":
        a = a.astype(np.int64)  # np.asarray([]) is float64
    if a.dtype == np.bool_ or a.dtype.kind not in "iu":
        raise TypeError(f"{name} must hold integer ids, got dtype {a.dtype}")
    if a.dtype.kind == "u" and a.dtype.itemsize == 8 and a.size and int(a.max()) > 2**63 - 1:
        # The cast to int64 would wrap these to negative numbers.
        i = int(np.argmax(a > 2**63 - 1))
        raise ValueError(f"{name}[{i}] = {int(a[i])} does not fit in int64; ids must be < 2**63 "
                         "(map such ids to 0..N-1 before building the graph)")
    a = np.ascontiguousarray(a, dtype=np.int64)
    if a.size:
        lo = int(a.min())
        if lo < 0:
            i = int(np.argmax(a < 0))
            raise ValueError(f"{name}[{i}] = {a[i]} is negative; ids must be >= 0")
        if upper is not None:
            hi = int(a.max())
            if hi >= upper:
                i = int(np.argmax(a >= upper))
                raise ValueError(f"{name}[{i}] = {a[i]} is out of range [0, {upper})")
    return a


def time_array(x: Any, name: str) -> np.ndarray:
    """Check a 1-D array of times (int or float, finite) and return it as contiguous float64."""
    a = to_numpy(x, name)
    if a.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {tuple(a.shape)}")
    if a.dtype == np.bool_ or a.dtype.kind not in "iuf":
        raise TypeError(f"{name} must hold int or float times, got dtype {a.dtype}")
    if a.dtype.kind == "f" and a.dtype.itemsize < 8:
        raise TypeError(
            f"{name} is {a.dtype}: times must be float64 or int64 (float32 cannot represent "
            "Unix seconds to the second); convert before rounding happens"
        )
    # In Python ints: np.abs wraps int64's minimum, a cast wraps uint64 >= 2**63.
    big = max(abs(int(a.min())), abs(int(a.max()))) if a.dtype.kind in "iu" and a.size else 0
    if big > MAX_EXACT_TIME:
        raise ValueError(f"{name} has integer times beyond 2**53, which float64 cannot hold exactly")
    a = np.ascontiguousarray(a, dtype=np.float64)
    if a.size and not np.isfinite(a).all():
        i = int(np.argmax(~np.isfinite(a)))
        raise ValueError(f"{name}[{i}] = {a[i]} is not a finite time")
    return a


def feature_tensor(x: Any, name: str, rows: int) -> Optional[torch.Tensor]:
    """Check an optional ``[rows, d]`` feature matrix and return it as a float32 tensor."""
    if x is None:
        return None
    t = x if isinstance(x, torch.Tensor) else torch.as_tensor(to_numpy(x, name))
    if t.dim() == 1:
        t = t.unsqueeze(1)
    if t.dim() != 2:
        raise ValueError(f"{name} must be 2-D [{rows}, d], got shape {tuple(t.shape)}")
    if t.shape[0] != rows:
        what = "edge" if "edge" in name else "node" if "node" in name else "row"
        raise ValueError(f"{name} has {t.shape[0]} rows, expected {rows} (one per {what})")
    t = t.float()
    if not torch.isfinite(t).all():
        raise ValueError(f"{name} contains NaN or infinite values")
    return t
