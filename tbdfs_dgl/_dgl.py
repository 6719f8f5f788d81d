"""DGL is optional: the one place that says so when a DGL-only feature is used without it."""
from __future__ import annotations

from typing import Any

__all__ = ["require_dgl", "has_dgl"]


def has_dgl() -> bool:
    """Whether ``import dgl`` works in this process."""
    try:
        import dgl  # noqa: F401
    except Exception:  # noqa: BLE001 - a broken DGL (wrong torch) raises more than ImportError
        return False
    return True


def require_dgl(feature: str) -> Any:
    """Import and return DGL, or raise an ImportError naming ``feature``.

    Everything else in tbdfs-dgl (graph, sampler, model, trainer) runs on torch alone.
    """
    try:
        import dgl
    except Exception as err:  # noqa: BLE001 - see has_dgl
        raise ImportError(
            f"{feature} needs DGL, which is not importable here ({type(err).__name__}: "
            f"{err}). The rest of tbdfs-dgl works without it; for DGL interop install a DGL "
            "build matching your torch (pip install 'tbdfs-dgl[dgl]', or DGL's wheel index "
            "for CUDA builds).", name="dgl") from err
    return dgl
