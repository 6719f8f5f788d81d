"""A progress bar that is tqdm's when wanted and installed, else a silent stand-in."""
from __future__ import annotations

from typing import Any

__all__ = ["progress_bar"]


def progress_bar(total: int, desc: str, enabled: bool) -> Any:
    """A tqdm bar when enabled (and tqdm is installed), else a no-op with the same calls."""
    if enabled:
        try:
            from tqdm.auto import tqdm

            return tqdm(total=total, desc=desc, leave=False, dynamic_ncols=True)
        except ImportError:
            pass

    class _Null:
        def update(self, n: int = 1) -> None: ...
        def set_postfix(self, **kwargs: Any) -> None: ...
        def close(self) -> None: ...

    return _Null()
