"""Input checks shared by the graph, the sampler and the datasets: arrays in, clear errors out.

One check per kind of input, and one exception type per kind of problem:

* a wrong dtype (float ids, float32 times, text features) raises :class:`DtypeError`, a
  ``TypeError``;
* a wrong shape or value (2-D ids, a negative id, a NaN time, too few feature rows) raises
  ``ValueError``.

:class:`DtypeError` also subclasses ``ValueError``: :class:`~tbdfs_dgl.data.TemporalDataset`
documented ``ValueError`` for every bad input before the checks were shared, and
``except ValueError`` around it keeps working.

numpy only at import: torch is used when the caller passes a tensor or asks for one
(:func:`feature_tensor`), so ``tbdfs_dgl.data`` loads without it.
"""
from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, Optional

import numpy as np

if TYPE_CHECKING:
    import torch

# float64 represents every integer up to 2**53 exactly; larger integer times would be
# rounded silently on the way into the CSR.
MAX_EXACT_TIME = 2**53
_INT64_MAX = 2**63 - 1


class DtypeError(TypeError, ValueError):
    """An array has a dtype this library does not take (e.g. float ids, float32 times)."""


def _is_tensor(x: Any) -> bool:
    # Without torch imported nothing can be a tensor: no need to import it to find out.
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def to_numpy(x: Any, name: str) -> np.ndarray:
    """Return ``x`` (array, tensor, list) as a numpy array without copying where possible."""
    if _is_tensor(x):
        import torch

        if x.dtype in (torch.bfloat16, torch.complex32) or x.dtype.is_complex:
            # numpy has no such dtype: say so instead of torch's "unsupported ScalarType".
            raise DtypeError(f"{name} has dtype {x.dtype}, which this library does not take: "
                             "use int64 for ids, float64 or int64 for times, float32 for "
                             "features")
        return x.detach().cpu().numpy()
    if isinstance(x, np.ndarray):
        return x
    try:
        return np.asarray(x)
    except Exception as err:  # noqa: BLE001 - numpy raises many kinds here
        raise TypeError(f"{name} must be array-like, got {type(x).__name__}") from err


def _vector(x: Any, name: str) -> np.ndarray:
    a = to_numpy(x, name)
    if a.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {tuple(a.shape)}")
    return a


def _outside(name: str, a: np.ndarray, bad: np.ndarray, message: str) -> ValueError:
    i = int(np.argmax(bad))
    return ValueError(f"{name}[{i}] = {int(a[i])} {message}")


def index_array(x: Any, name: str, upper: Optional[int] = None,
                upper_name: Optional[str] = None) -> np.ndarray:
    """Check a 1-D array of integer ids and return it as contiguous int64.

    Parameters
    ----------
    x : array-like
        The ids.
    name : str
        Name used in error messages.
    upper : int, optional
        Exclusive upper bound (e.g. the number of nodes).
    upper_name : str, optional
        What ``upper`` is (e.g. ``"num_nodes"``).  Given, an id on either side of
        ``[0, upper)`` is reported as outside ``[0, upper_name=upper)``; otherwise a
        negative id is reported as negative and a large one as out of range.

    Raises
    ------
    DtypeError
        For non-integer ids (an empty float array, ``np.asarray([])``, is taken as no ids).
    ValueError
        For a shape other than 1-D, an id outside the bounds or beyond int64.
    """
    a = _vector(x, name)
    if a.size == 0 and a.dtype.kind == "f":
        a = a.astype(np.int64)  # np.asarray([]) is float64
    if a.dtype == np.bool_ or a.dtype.kind not in "iu":
        # The hint fits floats; ids given as strings (or objects) need a mapping first.
        hint = ("cast integer node ids stored as floats with .astype('int64')"
                if a.dtype.kind == "f" else
                "map other ids (e.g. strings) to 0..n-1 first, e.g. with "
                "np.unique(ids, return_inverse=True)")
        raise DtypeError(f"{name} must hold integer ids, got dtype {a.dtype}; {hint}")
    if a.dtype.kind == "u" and a.dtype.itemsize == 8 and a.size and int(a.max()) > _INT64_MAX:
        # The cast to int64 would wrap these to negative numbers.
        i = int(np.argmax(a > _INT64_MAX))
        raise ValueError(f"{name}[{i}] = {int(a[i])} does not fit in int64; ids must be < 2**63 "
                         "(map such ids to 0..N-1 before building the graph)")
    a = np.ascontiguousarray(a, dtype=np.int64)
    if not a.size:
        return a
    too_big = upper is not None and int(a.max()) >= upper
    if upper_name is not None and (too_big or int(a.min()) < 0):
        raise _outside(name, a, (a < 0) | (a >= upper), f"is outside [0, {upper_name}={upper})")
    if int(a.min()) < 0:
        raise _outside(name, a, a < 0, "is negative; ids must be >= 0")
    if too_big:
        raise _outside(name, a, a >= upper, f"is out of range [0, {upper})")
    return a


def time_values(x: Any, name: str) -> np.ndarray:
    """Check a 1-D array of finite int or float times; return it in its integer dtype or
    as contiguous float64.

    Integer times stay integers (a dataset keeps what its file wrote); float32 and float16
    are refused because they cannot tell Unix seconds apart.

    Raises
    ------
    DtypeError
        For float32/float16, bool or non-numeric times.
    ValueError
        For a shape other than 1-D or a NaN or infinite time.
    """
    a = _vector(x, name)
    if a.size == 0 and a.dtype.kind not in "iuf":
        a = a.astype(np.int64)  # no times: whatever numpy guessed for an empty list
    if a.dtype == np.bool_ or a.dtype.kind not in "iuf":
        raise DtypeError(f"{name} must hold int or float times, got dtype {a.dtype}")
    if a.dtype.kind == "f" and a.dtype.itemsize < 8:
        # float32 cannot tell apart Unix seconds less than ~2 minutes apart; refuse rather
        # than hand the sampler timestamps that already lost their order information.
        raise DtypeError(
            f"{name} is {a.dtype}: times must be float64 or int64 (float32 cannot represent "
            "Unix seconds to the second); convert before rounding happens")
    if a.dtype.kind == "f":
        a = np.ascontiguousarray(a, dtype=np.float64)
        if a.size and not np.isfinite(a).all():
            i = int(np.argmax(~np.isfinite(a)))
            raise ValueError(f"{name}[{i}] = {a[i]} is not a finite time")
    return a


def time_array(x: Any, name: str) -> np.ndarray:
    """Check a 1-D array of times (int or float, finite) and return it as contiguous float64.

    As :func:`time_values`, and integer times beyond ``2**53`` (which float64 would round)
    raise ``ValueError``.
    """
    a = time_values(x, name)
    # In Python ints: np.abs wraps int64's minimum.
    big = max(abs(int(a.min())), abs(int(a.max()))) if a.dtype.kind in "iu" and a.size else 0
    if big > MAX_EXACT_TIME:
        raise ValueError(f"{name} has integer times beyond 2**53, which float64 cannot hold exactly")
    return np.ascontiguousarray(a, dtype=np.float64)


def _feature_rows(name: str, shape: tuple, rows: int) -> None:
    """Shape check of a ``[rows, d]`` feature table, named after what its rows are."""
    what = "edge" if "edge" in name else "node" if "node" in name else "row"
    label = {"edge": "E", "node": "num_nodes"}.get(what, "rows")
    if len(shape) != 2:
        raise ValueError(f"{name} must be 2-D [{label}={rows}, d], got shape {shape}")
    if shape[0] != rows:
        raise ValueError(f"{name} has {shape[0]} rows, expected {rows} (one per {what}): "
                         f"{name} must have shape [{label}={rows}, d], got {shape}")


def _non_finite_row(name: str, row: int) -> ValueError:
    return ValueError(f"{name} row {row} holds a NaN or infinite value")


def feature_array(x: Any, name: str, rows: int) -> Optional[np.ndarray]:
    """Check an optional ``[rows, d]`` feature matrix and return it as float32 numpy.

    A 1-D array is one feature per row.  ``name`` says what the rows are: a name holding
    ``edge`` has one row per edge, ``node`` one per node.

    Raises
    ------
    DtypeError
        For non-numeric values.
    ValueError
        For a wrong shape or a NaN or infinite value (the message names the row).
    """
    if x is None:
        return None
    a = to_numpy(x, name)
    if a.ndim == 1:
        a = a[:, None]
    _feature_rows(name, tuple(a.shape), rows)
    if a.dtype.kind not in "biuf":
        raise DtypeError(f"{name} must be numeric, got dtype {a.dtype}")
    a = np.ascontiguousarray(a, dtype=np.float32)
    if not np.isfinite(a).all():
        raise _non_finite_row(name, int(np.flatnonzero(~np.isfinite(a).all(axis=1))[0]))
    return a


def feature_tensor(x: Any, name: str, rows: int) -> Optional["torch.Tensor"]:
    """As :func:`feature_array`, returning a float32 tensor (a tensor keeps its device)."""
    if x is None:
        return None
    import torch

    if not isinstance(x, torch.Tensor):
        a = to_numpy(x, name)
        if a.dtype.kind not in "biuf":
            raise DtypeError(f"{name} must be numeric, got dtype {a.dtype}")
        x = torch.as_tensor(a)
    t = x.unsqueeze(1) if x.dim() == 1 else x
    _feature_rows(name, tuple(t.shape), rows)
    t = t.float()
    bad = ~torch.isfinite(t).all(dim=1)
    if bool(bad.any()):
        raise _non_finite_row(name, int(bad.nonzero()[0, 0]))
    return t
