"""tbdfs-dgl: the tBDFS temporal graph neural network for DGL, on a C++ temporal sampler."""
import importlib
import os as _os
from typing import Any

__version__ = "0.1.0"

# `make sanitize` points this at a sanitizer build of the extension: `tbdfs_dgl._C` is then
# found there first, the Python modules here as usual.
if _os.environ.get("TBDFS_EXT_DIR"):
    __path__.insert(0, _os.environ["TBDFS_EXT_DIR"])  # noqa: F821 - set by the import system

# Imported on first use, so that `tbdfs_dgl.data` (numpy/pandas only) and `tbdfs_dgl.nn`
# load without the compiled sampler, and `import tbdfs_dgl` stays cheap.
_LAZY = {
    "LayerTable": ".batch",
    "PathBatch": ".batch",
    "TemporalBatch": ".batch",
    "TemporalGraph": ".graph",
    "TemporalSampler": ".sampler",
    "Strategy": "._strategy",
    "BatchTooLargeError": ".sampler",
    "DtypeError": "._validate",
    "TBDFSModel": ".model",
    "seed_everything": ".seeding",
}

__all__ = list(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'tbdfs_dgl' has no attribute {name!r}")


def __dir__() -> list:
    return sorted(list(globals()) + __all__)
