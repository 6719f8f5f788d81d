"""Old public names kept working for one release, with a :class:`DeprecationWarning`.

Three shapes of rename, one helper each: keyword arguments (:func:`renamed_kwargs`),
attributes and properties (:func:`deprecated_alias`) and command-line flags
(:func:`add_deprecated_flag`).  Everything here is plain Python (no torch, no DGL).
"""
from __future__ import annotations

import argparse
import functools
import inspect
import sys
import warnings
from typing import Any, Callable, Dict, Mapping, TypeVar

__all__ = ["FEAT_RENAMES", "renamed_kwargs", "upgrade_kwargs", "deprecated_alias",
           "add_deprecated_flag"]

F = TypeVar("F", bound=Callable[..., Any])

#: When the old names go.
REMOVAL = "it will be removed in the next release"

#: Feature-tensor arguments named ``*_feats`` before release 0.2 (tensors are ``*_feat``,
#: integer widths ``*_dim``).
FEAT_RENAMES = {"node_feats": "node_feat", "edge_feats": "edge_feat"}


def _message(kind: str, old: str, new: str, where: str) -> str:
    return f"{kind} {old!r} of {where} is deprecated, use {new!r} ({REMOVAL})"


def _caller_stacklevel() -> int:
    """``stacklevel`` of the first frame outside this module and torch's ``Module.__call__``
    (a renamed ``forward`` argument then points at the line that called the model)."""
    frame, level = sys._getframe(1), 1
    while frame is not None and (
            frame.f_code.co_filename == __file__
            or frame.f_globals.get("__name__", "").startswith("torch.nn.modules")):
        frame, level = frame.f_back, level + 1
    return level


def upgrade_kwargs(kwargs: Mapping[str, Any], renames: Mapping[str, str],
                   where: str = "this function", warn: bool = False) -> Dict[str, Any]:
    """Return ``kwargs`` with every old key of ``renames`` replaced by its new name.

    Parameters
    ----------
    kwargs : mapping
        Keyword arguments, possibly with old names.
    renames : mapping
        ``{old: new}``.
    where : str
        What takes the arguments, for the messages.
    warn : bool
        Emit a :class:`DeprecationWarning` per old name, attributed to the first caller
        outside this module (``False``: silent, e.g. for arguments read back from a
        checkpoint saved before the rename).

    Raises
    ------
    TypeError
        If an old name and its new name are both given.
    """
    out = dict(kwargs)
    for old, new in renames.items():
        if old not in out:
            continue
        if new in out:
            raise TypeError(f"{where} got both {new!r} and its deprecated name {old!r}; "
                            f"pass {new!r} only")
        if warn:
            warnings.warn(_message("argument", old, new, where), DeprecationWarning,
                          stacklevel=_caller_stacklevel())
        out[new] = out.pop(old)
    return out


def renamed_kwargs(*tables: Mapping[str, str], **renames: str) -> Callable[[F], F]:
    """Decorator: accept old keyword names ``{old: new}`` with a warning.

    The renames are those of ``tables`` (shared tables, of which only the entries whose new
    name is a parameter of the decorated function apply) and of ``renames``.  Passing an
    old name and its new name together is a :class:`TypeError`.  Arguments passed by
    position are untouched (only the names changed, not the order).
    """
    def decorate(func: F) -> F:
        where = func.__qualname__.replace(".__init__", "")
        params = inspect.signature(func).parameters
        mine = {old: new for table in tables for old, new in table.items() if new in params}
        mine.update(renames)

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if kwargs and not mine.keys().isdisjoint(kwargs):
                kwargs = upgrade_kwargs(kwargs, mine, where, warn=True)
            return func(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    return decorate


def deprecated_alias(new: str) -> property:
    """A class attribute that forwards to attribute ``new``, warning on every use.

    Setting it sets ``new`` (and fails the same way when ``new`` is read-only).
    """
    return _Alias(new)


class _Alias(property):
    """A forwarding property that knows its own (old) name, for the warning."""

    def __init__(self, new: str) -> None:
        super().__init__(self._get, self._set, doc=f"Deprecated alias of :attr:`{new}`.")
        self.new = new
        self.old = "<alias>"

    def __set_name__(self, owner: type, name: str) -> None:
        self.old = name

    def _warn(self, obj: Any) -> None:
        warnings.warn(_message("attribute", self.old, self.new, type(obj).__name__),
                      DeprecationWarning, stacklevel=3)

    def _get(self, obj: Any) -> Any:
        self._warn(obj)
        return getattr(obj, self.new)

    def _set(self, obj: Any, value: Any) -> None:
        self._warn(obj)
        setattr(obj, self.new, value)


class _DeprecatedFlag(argparse.Action):
    """Stores into the new flag's ``dest`` and warns that the flag was renamed."""

    def __init__(self, option_strings: Any, dest: str, new_flag: str = "", **kwargs: Any
                 ) -> None:
        super().__init__(option_strings, dest, **kwargs)
        self.new_flag = new_flag

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: Any = None) -> None:
        # Attributed to __main__, where Python shows DeprecationWarnings by default: the
        # person typing the command is the one who has to change it.
        warnings.warn_explicit(
            f"{option_string} is deprecated, use {self.new_flag} ({REMOVAL})",
            DeprecationWarning, filename=sys.argv[0] or "<command line>", lineno=0,
            module="__main__")
        setattr(namespace, self.dest, values)


def add_deprecated_flag(parser: Any, old: str, new: str, dest: str, **kwargs: Any) -> None:
    """Accept ``old`` as a hidden, warning alias of the flag ``new`` (stored in ``dest``).

    ``kwargs`` (``type``, ``choices``, ...) should match the new flag's; the new flag
    holds the default.
    """
    parser.add_argument(old, dest=dest, action=_DeprecatedFlag, new_flag=new,
                        default=argparse.SUPPRESS, help=argparse.SUPPRESS, **kwargs)
