"""The reader registry: which reader reads which files, under which names, from where.

A new file format is one reader function and one registration::

    from tbdfs_dgl.data import DatasetSource, register_reader

    @register_reader("lastfm", files=("lastfm.tsv", "lastfm/lastfm.tsv"), aliases=("last-fm",),
                     sniff=lambda path, first_line: first_line.startswith("user_id\\ttrack"),
                     source=DatasetSource("https://example.org/lastfm.tsv", "lastfm.tsv"))
    def read_lastfm(path) -> TemporalDataset:
        ...

Then :func:`~tbdfs_dgl.data.load_dataset` finds ``"lastfm"`` (and ``"last-fm"``) in the data
folder, reads any file the sniffer recognises, :data:`~tbdfs_dgl.data.DATASET_NAMES` lists
it and :func:`~tbdfs_dgl.data.fetch_dataset` downloads it.  The built-in readers register
themselves at the end of :mod:`tbdfs_dgl.data.readers`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple, TypeVar

from .dataset import TemporalDataset
from .download import SOURCES, DatasetSource

__all__ = ["register_reader", "unregister_reader", "canonical_name", "dataset_files",
           "sniff_reader", "DATASET_NAMES", "Reader", "Sniffer"]

#: A reader as the registry calls it: a path (file or folder) in, a dataset out.
Reader = Callable[[Path], TemporalDataset]
#: ``sniff(path, first_line) -> bool``: whether a reader reads ``path``.  ``first_line`` is
#: the file's first line (decompressed, stripped), ``""`` for a folder.
Sniffer = Callable[[Path, str], bool]
R = TypeVar("R", bound=Callable)

#: Names that need no registered files (handled by load_dataset itself).
_BUILTIN_NAMES: Tuple[str, ...] = ("synthetic",)


@dataclass
class _Dataset:
    files: List[Tuple[str, Reader]] = field(default_factory=list)  # tried in order
    aliases: List[str] = field(default_factory=list)
    source_added: bool = False


_DATASETS: Dict[str, _Dataset] = {}
_ALIASES: Dict[str, str] = {}
_SNIFFERS: List[Tuple[Sniffer, Reader]] = []


def _key(name: str) -> str:
    return name.strip().lower().replace("_", "-")


def canonical_name(name: str) -> str:
    """``name`` as the registry keys it: lower case, ``-`` for ``_``, aliases resolved."""
    key = _key(name)
    return _ALIASES.get(key, key)


def register_reader(name: Optional[str] = None, *, files: Sequence[str] = (),
                    aliases: Sequence[str] = (), sniff: Optional[Sniffer] = None,
                    source: Optional[DatasetSource] = None) -> Callable[[R], R]:
    """Register a reader (decorator): under a dataset name, as a sniffer, or both.

    Parameters
    ----------
    name : str, optional
        Dataset name :func:`~tbdfs_dgl.data.load_dataset` accepts (case-insensitive, ``_``
        and ``-`` alike).  Registering a name again adds candidate files to it (tried after
        the earlier ones), so one name can be served by several readers.
    files : sequence of str
        Where the dataset lies, relative to the data folder, in the order to try them;
        required with ``name``.
    aliases : sequence of str
        Other names for ``name``.
    sniff : callable, optional
        ``sniff(path, first_line) -> bool``: whether this reader reads ``path`` when
        ``load_dataset`` is given a path.  Sniffers are tried in registration order;
        :func:`~tbdfs_dgl.data.read_edge_list` reads files that none recognises.
    source : DatasetSource, optional
        Where to download ``name`` (goes into :data:`~tbdfs_dgl.data.SOURCES`).

    Returns
    -------
    callable
        A decorator that registers the reader and returns it unchanged.

    Raises
    ------
    ValueError
        For ``name`` without ``files`` (or the reverse), ``aliases`` or ``source`` without
        ``name``, or a name or alias that already means another dataset.
    """
    if name is None and (files or aliases or source is not None):
        raise ValueError("files, aliases and source belong to a dataset name: pass name")
    if name is not None and not files:
        raise ValueError(f"dataset {name!r}: pass files=(...), where it lies in the data folder")
    key = None if name is None else _key(name)
    if key is not None:
        if key in _ALIASES or key in _BUILTIN_NAMES:
            raise ValueError(f"{name!r} already names a dataset ({canonical_name(key)!r})")
        for alias in map(_key, aliases):
            if alias in _DATASETS or alias in _BUILTIN_NAMES or \
                    _ALIASES.get(alias, key) != key:
                raise ValueError(f"alias {alias!r} already names a dataset "
                                 f"({canonical_name(alias)!r})")
        if source is not None and key in SOURCES:
            raise ValueError(f"dataset {key!r} already has a download source")

    def add(reader: R) -> R:
        if key is not None:
            entry = _DATASETS.setdefault(key, _Dataset())
            entry.files.extend((rel, reader) for rel in files)
            for alias in map(_key, aliases):
                _ALIASES[alias] = key
                entry.aliases.append(alias)
            if source is not None:
                SOURCES[key] = source
                entry.source_added = True
        if sniff is not None:
            _SNIFFERS.append((sniff, reader))
        return reader

    return add


def unregister_reader(reader: Callable) -> None:
    """Undo every registration of ``reader``: its files, its sniffer, and the names (with
    their aliases and download sources) that no other reader serves."""
    for key, entry in list(_DATASETS.items()):
        entry.files = [(rel, r) for rel, r in entry.files if r is not reader]
        if not entry.files:
            del _DATASETS[key]
            for alias in entry.aliases:
                _ALIASES.pop(alias, None)
            if entry.source_added:
                SOURCES.pop(key, None)
    _SNIFFERS[:] = [(s, r) for s, r in _SNIFFERS if r is not reader]


def dataset_files(name: str) -> List[Tuple[str, Reader]]:
    """The ``(relative path, reader)`` candidates of a registered name (``[]`` if none)."""
    entry = _DATASETS.get(canonical_name(name))
    return [] if entry is None else list(entry.files)


def sniff_reader(path: Path, first_line: str) -> Optional[Reader]:
    """The first registered reader whose sniffer recognises ``path``, else ``None``."""
    for sniff, reader in _SNIFFERS:
        if sniff(path, first_line):
            return reader
    return None


class _Names(Sequence):
    """The names :func:`~tbdfs_dgl.data.load_dataset` knows, kept current as readers are
    registered: a read-only sequence that prints like a tuple."""

    def _names(self) -> Tuple[str, ...]:
        return tuple(_DATASETS) + _BUILTIN_NAMES

    def __getitem__(self, i):  # type: ignore[override]
        return self._names()[i]

    def __len__(self) -> int:
        return len(self._names())

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __contains__(self, name: object) -> bool:
        return name in self._names()

    def __repr__(self) -> str:
        return repr(self._names())


#: Names :func:`~tbdfs_dgl.data.load_dataset` understands (registered ones plus
#: ``"synthetic"``); current after every :func:`register_reader`.
DATASET_NAMES: Sequence[str] = _Names()
