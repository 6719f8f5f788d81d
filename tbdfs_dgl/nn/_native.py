"""The C++ extension's CPU kernels for the layers, when the extension is built.

``tbdfs_dgl.nn`` also works where only the Python package is importable (and on GPUs):
every layer that uses a kernel has a torch path computing the same values.
"""
from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator, Optional, Set

import torch

from ._compile import compiling
from ._slots import autocast_dtype

__all__ = ["native", "disabled", "all_disabled", "float32_cpu_kernel", "as_numpy"]

_EXT: Any = None
_LOADED = False
_DISABLED: Set[str] = set()
_ALL_DISABLED = 0  # depth of all_disabled() blocks


def native(name: str, always: bool = False) -> Optional[Callable[..., Any]]:
    """The kernel ``tbdfs_dgl._C.<name>``, or ``None`` (not built, switched off, or called
    under ``torch.compile``, which cannot trace into the kernels: their torch paths
    compile).  ``always``: whenever it is built (a backward kernel whose forward ran)."""
    global _EXT, _LOADED
    if compiling() and not always:
        return None
    if not _LOADED:
        _LOADED = True
        try:
            from .. import _C as ext
        except ImportError:
            ext = None
        _EXT = ext
    if _EXT is None or (not always and (name in _DISABLED or _ALL_DISABLED)):
        return None
    return getattr(_EXT, name, None)


@contextlib.contextmanager
def disabled(*names: str) -> Iterator[None]:
    """Within the block, the named kernels are not used (their torch paths run instead);
    for benchmarks and tests that compare the two."""
    added = [n for n in names if n not in _DISABLED]
    _DISABLED.update(added)
    try:
        yield
    finally:
        _DISABLED.difference_update(added)


@contextlib.contextmanager
def all_disabled() -> Iterator[None]:
    """Within the block no kernel is used: the layers compute as they do where the
    extension is not built (``examples/benchmark_model.py --impls torch``)."""
    global _ALL_DISABLED
    _ALL_DISABLED += 1
    try:
        yield
    finally:
        _ALL_DISABLED -= 1


def float32_cpu_kernel(name: str, device: torch.device, dtype: torch.dtype) -> bool:
    """Whether the float32 CPU kernel ``name`` can serve a computation on ``device`` in
    ``dtype``: a CPU, float32, outside autocast, and :func:`native` has it."""
    return (device.type == "cpu" and dtype == torch.float32
            and autocast_dtype("cpu") is None and native(name) is not None)


def as_numpy(t: torch.Tensor) -> Any:
    """A contiguous numpy view of ``t`` for a kernel (a copy only if ``t`` is strided)."""
    return t.detach().contiguous().numpy()
