"""Saving a :class:`~tbdfs_dgl.TemporalGraph` to a directory and loading it, memory-mapped.

The format is a directory of ``.npy`` files (readable with :func:`numpy.load`) and a small
JSON header written last, so an interrupted save has no header and is refused::

    header.json     format, version, sizes, and each array's dtype, shape and CRC-32
    start.npy       int64 [N]   first entry of each node's list (the packed layout)
    degree.npy      int64 [N]   length of each node's list
    entries.npy     [M] records (ts f8, nbr i4, row i4, twin i4, reserved i4): the C++
                    ``Entry`` byte for byte, so the file is mapped as it is
    src.npy, dst.npy  int32 [E]  endpoints in input-row order
    edge_feat.npy, node_feat.npy, node_ids.npy   when the graph has them

``load(path, mmap=True)`` maps the CSR's files read-only and shared: every process that
loads the same directory (the ranks of a distributed run) reads one copy through the page
cache instead of holding its own.  The lists are checked on load as unpickled ones are
(``O(E)``; it reads every page once).  Feature tables are mapped copy-on-write.
"""
from __future__ import annotations

import json
import os
import shutil
import zlib
from typing import Any, Dict, Optional, Tuple

import numpy as np

from . import _C, streaming

__all__ = ["save_graph", "load_graph", "FORMAT", "VERSION", "ENTRY_DTYPE"]

FORMAT = "tbdfs-dgl TemporalGraph"
VERSION = 1
HEADER = "header.json"
# The C++ Entry (csrc/tcsr.h), 24 bytes.
ENTRY_DTYPE = np.dtype([("ts", "<f8"), ("nbr", "<i4"), ("row", "<i4"), ("twin", "<i4"),
                        ("reserved", "<i4")])
assert ENTRY_DTYPE.itemsize == 24
_CSR_DTYPES = {"start": np.dtype("<i8"), "degree": np.dtype("<i8"), "entries": ENTRY_DTYPE,
               "src": np.dtype("<i4"), "dst": np.dtype("<i4")}
_CHUNK = 1 << 22  # rows per copy / checksum step: bounds the temporary memory of a save


def _crc32(a: np.ndarray) -> int:
    crc = 0
    flat = a.reshape(-1) if a.ndim else a.reshape(1)
    step = max(1, (64 << 20) // max(1, flat.itemsize))
    for lo in range(0, len(flat), step):
        crc = zlib.crc32(np.ascontiguousarray(flat[lo:lo + step]).view(np.uint8), crc)
    return crc


def _write(directory: str, name: str, a: np.ndarray) -> Dict[str, Any]:
    """Write ``a`` to ``name.npy`` in chunks; its header entry."""
    out = np.lib.format.open_memmap(os.path.join(directory, name + ".npy"), mode="w+",
                                    dtype=a.dtype, shape=a.shape)
    for lo in range(0, len(a), _CHUNK):
        out[lo:lo + _CHUNK] = a[lo:lo + _CHUNK]
    out.flush()
    entry = {"dtype": a.dtype.descr if a.dtype.names else a.dtype.str, "shape": list(a.shape),
             "crc32": _crc32(out)}
    del out
    return entry


def _entries(arrays: Dict[str, np.ndarray]) -> np.ndarray:
    """The packed entries as Entry records (chunked field copies)."""
    m = len(arrays["nbr"])
    rec = np.zeros(m, ENTRY_DTYPE)
    for lo in range(0, m, _CHUNK):
        hi = min(m, lo + _CHUNK)
        for field in ("ts", "nbr", "row", "twin"):
            rec[field][lo:hi] = arrays[field][lo:hi]
    return rec


def save_graph(graph: Any, path: str) -> None:
    """Write ``graph`` to the directory ``path`` (see the module docstring).

    ``path`` is created; an existing directory is replaced only if it holds a saved graph
    (anything else raises ``FileExistsError``).  Appended graphs are saved packed.
    """
    path = os.fspath(path)
    if os.path.exists(path):
        if not os.path.isfile(os.path.join(path, HEADER)):
            raise FileExistsError(f"{path} exists and is not a saved TemporalGraph: not "
                                  "overwriting it")
        shutil.rmtree(path)
    tmp = f"{path}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    csr = graph.csr
    arrays = {k: np.asarray(v) for k, v in csr.arrays().items()}
    indptr = arrays["indptr"]
    header: Dict[str, Any] = {"format": FORMAT, "version": VERSION,
                              "num_nodes": int(csr.num_nodes), "num_edges": int(csr.num_edges),
                              "directed": bool(csr.directed), "arrays": {}}
    files = {"start": indptr[:-1], "degree": np.diff(indptr), "entries": None,
             "src": arrays["src"], "dst": arrays["dst"]}
    for name, a in files.items():
        if a is None:
            a = _entries(arrays)
        header["arrays"][name] = _write(tmp, name, a)
        del a
    del arrays
    for name in ("edge_feat", "node_feat"):
        t = streaming.trimmed(getattr(graph, name))
        if t is not None:
            header["arrays"][name] = _write(tmp, name, t.detach().cpu().numpy())
    if graph.node_ids is not None:
        header["arrays"]["node_ids"] = _write(tmp, "node_ids", np.asarray(graph.node_ids))
    with open(os.path.join(tmp, HEADER), "w") as f:
        json.dump(header, f, indent=1)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _read_header(path: str) -> Dict[str, Any]:
    file = os.path.join(path, HEADER)
    if not os.path.isdir(path):
        raise FileNotFoundError(f"{path} is not a directory (TemporalGraph.save writes one)")
    if not os.path.isfile(file):
        raise ValueError(f"{path} is not a saved TemporalGraph: no {HEADER} (an interrupted "
                         "save, or another kind of directory)")
    try:
        with open(file) as f:
            header = json.load(f)
    except (OSError, ValueError) as e:
        raise ValueError(f"{file} is not a readable header: {e}") from None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise ValueError(f"{file} is not a TemporalGraph header (format "
                         f"{header.get('format') if isinstance(header, dict) else None!r})")
    if header.get("version") != VERSION:
        raise ValueError(f"{path}: format version {header.get('version')!r}; this release "
                         f"reads version {VERSION}")
    for key in ("num_nodes", "num_edges", "directed", "arrays"):
        if key not in header:
            raise ValueError(f"{file} lacks {key!r}")
    missing = [k for k in _CSR_DTYPES if k not in header["arrays"]]
    if missing:
        raise ValueError(f"{file} lists no {', '.join(missing)} array")
    return header


def _open_array(path: str, name: str, spec: Dict[str, Any]) -> Tuple[str, int, Tuple[int, ...],
                                                                      np.dtype]:
    """Check ``name.npy`` against the header; (file, data offset, shape, dtype)."""
    file = os.path.join(path, name + ".npy")
    try:
        with open(file, "rb") as f:
            version = np.lib.format.read_magic(f)
            if version == (1, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
            elif version == (2, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
            else:
                raise ValueError(f".npy format version {version} is not one save writes")
            offset = f.tell()
    except FileNotFoundError:
        raise ValueError(f"{path}: {name}.npy is missing") from None
    except (OSError, ValueError) as e:
        raise ValueError(f"{file} is not a .npy file: {e}") from None
    want = np.dtype([tuple(x) for x in spec["dtype"]] if isinstance(spec["dtype"], list)
                    else spec["dtype"])
    if dtype != want or fortran or list(shape) != list(spec["shape"]):
        raise ValueError(f"{file} holds {dtype} {tuple(shape)}{' (Fortran order)' if fortran else ''}"
                         f", the header says {want} {tuple(spec['shape'])}")
    need = offset + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    size = os.path.getsize(file)
    if size != need:
        raise ValueError(f"{file} is {'truncated' if size < need else 'longer than its header says'}"
                         f": {size} bytes, expected {need}")
    return file, offset, tuple(shape), dtype


def load_graph(cls: Any, path: str, mmap: bool = True, verify: bool = False) -> Any:
    """Read a graph written by :func:`save_graph` (see :meth:`TemporalGraph.load`)."""
    path = os.fspath(path)
    header = _read_header(path)
    n, e = int(header["num_nodes"]), int(header["num_edges"])
    files = {}
    for name, spec in header["arrays"].items():
        files[name] = _open_array(path, name, spec)
        if name in _CSR_DTYPES and files[name][3] != _CSR_DTYPES[name]:
            raise ValueError(f"{files[name][0]}: dtype {files[name][3]}, expected "
                             f"{_CSR_DTYPES[name]}")
    for name, rows in (("start", n), ("degree", n), ("src", e), ("dst", e)):
        if files[name][2] != (rows,):
            raise ValueError(f"{files[name][0]} has shape {files[name][2]}, expected ({rows},)")
    if verify:
        for name, (file, _, _, _) in files.items():
            got = _crc32(np.load(file, mmap_mode="r"))
            if got != header["arrays"][name]["crc32"]:
                raise ValueError(f"{file}: checksum {got:#010x} differs from the header's "
                                 f"{header['arrays'][name]['crc32']:#010x}: the file changed")
    spans = {k: (files[k][0], files[k][1], int(np.prod(files[k][2], dtype=np.int64)))
             for k in _CSR_DTYPES}
    csr = _C.TCSR.map_saved(n, e, bool(header["directed"]), **spans)
    if not mmap:
        csr.own_storage()

    def feature(name: str) -> Optional[np.ndarray]:
        if name not in files:
            return None
        # Copy-on-write: shared pages until something writes (torch wants writable arrays).
        return np.load(files[name][0], mmap_mode="c" if mmap else None)

    graph = cls.__new__(cls)
    graph._init(csr, feature("edge_feat"), feature("node_feat"), feature("node_ids"))
    return graph
