"""The sampling strategy: the C++ extension's :class:`Strategy`, and the names
``TemporalSampler(strategy=..., replace=...)`` has always taken for it."""
from __future__ import annotations

from typing import Any, Tuple

from . import _C

__all__ = ["Strategy", "STRATEGIES", "strategy_parts", "to_strategy"]

Strategy = _C.Strategy

STRATEGIES = ("recent", "uniform")  # the names TemporalSampler(strategy=...) takes

# Each strategy as a (name, replace) pair: uniform sampling with replacement has always
# been strategy='uniform', replace=True.
_PARTS = {
    Strategy.RECENT: ("recent", False),
    Strategy.UNIFORM: ("uniform", False),
    Strategy.UNIFORM_REPLACE: ("uniform", True),
}
_BY_PARTS = {parts: s for s, parts in _PARTS.items()}


def strategy_parts(strategy: Any, replace: bool = False) -> Tuple[str, bool]:
    """A strategy as ``TemporalSampler`` names it: ``(name, replace)``.

    Parameters
    ----------
    strategy : {'recent', 'uniform'} or Strategy
        A name, or a member of :class:`Strategy` (``UNIFORM_REPLACE`` implies ``replace``).
    replace : bool
        Sampling with replacement, as asked for next to the strategy.

    Returns
    -------
    tuple of (str, bool)
        The name (one of :data:`STRATEGIES`) and whether to draw with replacement.  Whether
        that pair is a valid strategy is :func:`to_strategy`'s to say.

    Raises
    ------
    ValueError
        When ``strategy`` is neither a name nor a member of :class:`Strategy`.
    """
    if isinstance(strategy, Strategy):
        if strategy not in _PARTS:  # Strategy(7) builds one that names no chooser
            raise ValueError(f"strategy must be one of {STRATEGIES} or a member of "
                             f"tbdfs_dgl.Strategy, got {strategy!r}")
        name, implied = _PARTS[strategy]
        return name, implied or bool(replace)
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {STRATEGIES}, got {strategy!r}")
    return strategy, bool(replace)


def to_strategy(name: str, replace: bool = False) -> Strategy:
    """The :class:`Strategy` of a ``(name, replace)`` pair (the inverse of
    :func:`strategy_parts`).

    Raises
    ------
    ValueError
        For an unknown name, or ``replace=True`` with any strategy but ``'uniform'``.
    """
    if name not in STRATEGIES:
        raise ValueError(f"strategy must be one of {STRATEGIES}, got {name!r}")
    try:
        return _BY_PARTS[(name, bool(replace))]
    except KeyError:
        raise ValueError("replace=True applies to strategy='uniform' only") from None
