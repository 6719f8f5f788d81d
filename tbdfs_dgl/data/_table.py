"""Parse delimited text tables while remembering which file line each row came from.

Every reader in :mod:`tbdfs_dgl.data.readers` goes through :func:`read_table` so that a
malformed file fails with the same kind of message everywhere: the file, the 1-based line
number, the offending text and what was expected.  pandas does the parsing (it is tens of
times faster than a Python loop); the line bookkeeping is only recomputed on the error path.
"""
from __future__ import annotations

import gzip
import io
import os
import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import IO, List, Optional, Sequence, Tuple, Union

import numpy as np
import pandas as pd

__all__ = ["PathLike", "Table", "require_file", "is_gzip", "open_binary", "read_bytes",
           "read_table"]

PathLike = Union[str, "os.PathLike[str]"]

_GZIP_MAGIC = b"\x1f\x8b"
# A line that holds no data: blank, or a whole-line comment starting with '#' or '%'.
_SKIP_LINE = re.compile(rb"(?m)^[ \t\r]*(?:[#%][^\n]*)?(?:\n|\Z)")
_BLANK_LINE = re.compile(rb"(?m)^[ \t\r]*(?:\n|\Z)")
_INT64_MAX = np.iinfo(np.int64).max
_NON_SPACE = re.compile(rb"\S")


def require_file(path: PathLike, what: str = "data file") -> Path:
    """Return ``path`` as a :class:`~pathlib.Path`, raising if it is not a readable file.

    Raises
    ------
    FileNotFoundError
        If nothing exists at ``path`` or it is a directory.
    """
    p = Path(path).expanduser()
    if not p.exists():
        raise FileNotFoundError(f"{what} not found: {p}")
    if p.is_dir():
        raise FileNotFoundError(f"{what} {p} is a directory, expected a file")
    return p


def is_gzip(path: PathLike) -> bool:
    """Whether the file at ``path`` is gzip-compressed, judged by its magic bytes.

    The extension is not trusted: publishers ship ``.txt`` files that are gzipped and
    users gunzip files without renaming them.
    """
    with open(path, "rb") as fh:
        return fh.read(2) == _GZIP_MAGIC


def open_binary(path: PathLike) -> IO[bytes]:
    """Open ``path`` for binary reading, transparently decompressing gzip."""
    p = require_file(path)
    return gzip.open(p, "rb") if is_gzip(p) else open(p, "rb")


def read_bytes(path: PathLike) -> bytes:
    """Return the whole (decompressed) content of ``path``."""
    p = require_file(path)
    try:
        with open_binary(p) as fh:
            return fh.read()
    except (OSError, EOFError) as exc:  # truncated or corrupt gzip stream
        raise ValueError(f"{p}: cannot decompress ({exc})") from exc


def _split_fields(line: str, sep: Optional[str]) -> List[str]:
    if sep is None:
        return line.split()
    if len(sep) == 1:
        return line.split(sep)
    return re.split(sep, line)


@dataclass
class Table:
    """A parsed table plus what is needed to map a row back to its file line.

    Attributes
    ----------
    df : pandas.DataFrame
        The parsed rows, columns numbered ``0..K-1`` (or named, when the file had a header).
    path : pathlib.Path
        The file the rows came from (used in error messages).
    data : bytes
        The decompressed file content the rows were parsed from.
    sep : str or None
        Field separator; ``None`` means runs of whitespace.
    header_lines : int
        Number of data-bearing lines before the first row (a header line).
    skip_comments : bool
        Whether ``#``/``%`` comment lines were skipped (blank lines always are).
    """

    df: pd.DataFrame
    path: Path
    data: bytes
    sep: Optional[str]
    header_lines: int
    skip_comments: bool

    # ------------------------------------------------------------------ locating rows
    def _data_lines(self):
        skip = _SKIP_LINE if self.skip_comments else _BLANK_LINE
        seen = 0
        for lineno, raw in enumerate(self.data.split(b"\n"), start=1):
            if skip.fullmatch(raw):
                continue
            seen += 1
            if seen > self.header_lines:
                yield lineno, raw.decode("utf-8", errors="replace").rstrip("\r")

    def line_of(self, row: int) -> Tuple[int, str]:
        """Return ``(line_number, text)`` of data row ``row`` (0-based) in the file."""
        for k, (lineno, text) in enumerate(self._data_lines()):
            if k == row:
                return lineno, text
        return -1, ""

    def error(self, row: int, message: str) -> ValueError:
        """Build a ``ValueError`` naming the file, the line of ``row`` and its text."""
        lineno, text = self.line_of(row)
        if len(text) > 120:
            text = text[:117] + "..."
        return ValueError(f"{self.path}, line {lineno}: {message} (line reads {text!r})")

    def first_bad_width(self, expected: int) -> Optional[ValueError]:
        """Error for the first row whose field count is not ``expected``, if any."""
        for lineno, text in self._data_lines():
            n = len(_split_fields(text.strip() if self.sep is None else text, self.sep))
            if n != expected:
                shown = text if len(text) <= 120 else text[:117] + "..."
                return ValueError(f"{self.path}, line {lineno}: expected {expected} columns, "
                                  f"found {n} (line reads {shown!r})")
        return None

    # ------------------------------------------------------------------ typed columns
    def _label(self, col) -> str:
        return f"column {col!r}" if isinstance(col, str) else f"column {col + 1}"

    def numeric(self, col, what: str) -> np.ndarray:
        """Column ``col`` as a numeric array; any missing or non-numeric value raises.

        A missing value is reported as a wrong column count when the row is short (the
        usual cause), otherwise as a bad value.
        """
        s = self.df[col]
        if s.dtype == object:
            coerced = pd.to_numeric(s, errors="coerce")
            bad = np.flatnonzero(coerced.isna().to_numpy() & s.notna().to_numpy())
            if bad.size:
                r = int(bad[0])
                raise self.error(r, f"{what} ({self._label(col)}) is not a number: {s.iloc[r]!r}")
            s = coerced
        values = s.to_numpy()
        if values.dtype.kind == "f":
            nan = np.flatnonzero(np.isnan(values))
            if nan.size:
                r = int(nan[0])
                width = self.first_bad_width(self.df.shape[1])
                if width is not None:
                    raise width
                raise self.error(r, f"{what} ({self._label(col)}) is missing or NaN")
        elif values.dtype.kind not in "iub":
            raise ValueError(f"{self.path}: {what} ({self._label(col)}) has non-numeric type "
                             f"{values.dtype}")
        # integers are stored as int64: refuse values that would wrap around
        if values.dtype.kind == "u" and values.size and values.max() > _INT64_MAX:
            big = int(np.argmax(values))
            raise self.error(big, f"{what} ({self._label(col)}) is too large for int64: "
                                  f"{values[big]}")
        return values

    def ids(self, col, what: str) -> np.ndarray:
        """Column ``col`` as non-negative int64 node ids."""
        v = self.numeric(col, what)
        if v.dtype.kind == "f":
            frac = np.flatnonzero(v != np.floor(v))
            if frac.size:
                r = int(frac[0])
                raise self.error(r, f"{what} ({self._label(col)}) is not an integer: {v[r]!r}")
            if v.size and np.abs(v).max() >= 2.0 ** 63:
                r = int(np.argmax(np.abs(v)))
                raise self.error(r, f"{what} ({self._label(col)}) is too large for int64: "
                                    f"{v[r]!r}")
        v = v.astype(np.int64, copy=False)
        neg = np.flatnonzero(v < 0)
        if neg.size:
            r = int(neg[0])
            raise self.error(r, f"negative {what} {int(v[r])} ({self._label(col)})")
        return v

    def times(self, col, what: str = "time") -> np.ndarray:
        """Column ``col`` as finite times: int64 if the file wrote integers, else float64."""
        v = self.numeric(col, what)
        if v.dtype.kind in "iub":
            return v.astype(np.int64, copy=False)
        v = v.astype(np.float64, copy=False)
        bad = np.flatnonzero(~np.isfinite(v))
        if bad.size:
            r = int(bad[0])
            raise self.error(r, f"{what} ({self._label(col)}) is not finite: {v[r]!r}")
        return v

    def floats(self, cols: Sequence, what: str = "feature") -> np.ndarray:
        """Columns ``cols`` stacked as a finite float32 ``[rows, len(cols)]`` matrix."""
        out = np.empty((len(self.df), len(cols)), dtype=np.float32)
        for j, c in enumerate(cols):
            v = self.numeric(c, what).astype(np.float64, copy=False)
            bad = np.flatnonzero(~np.isfinite(v))
            if bad.size:
                r = int(bad[0])
                raise self.error(r, f"{what} ({self._label(c)}) is not finite: {v[r]!r}")
            out[:, j] = v
        return out


def _line(body: bytes, k: int) -> str:
    """Line ``k`` (0-based) of ``body``, without copying the rest of a possibly huge buffer."""
    start = 0
    for _ in range(k):
        start = body.find(b"\n", start) + 1
        if start == 0:
            return ""
    end = body.find(b"\n", start)
    return body[start: end if end >= 0 else len(body)].decode("utf-8", "replace").rstrip("\r")


def _looks_like_header(line: str, sep: Optional[str]) -> bool:
    fields = [f.strip() for f in _split_fields(line.strip(), sep)]
    if not fields:
        return False
    for f in fields:
        try:
            # Quotes around a number ("1","2","3") still make a data row, not a header.
            float(f.strip("\"'").strip())
            return False
        except ValueError:
            pass
    return True


def _first_non_utf8(data: bytes) -> Optional[Tuple[int, int, int]]:
    """``(line number, column, byte)`` of the first byte that is not valid UTF-8, if any."""
    try:
        data.decode("utf-8")
        return None
    except UnicodeDecodeError as exc:
        pos = exc.start
    line_start = data.rfind(b"\n", 0, pos) + 1
    return data.count(b"\n", 0, pos) + 1, pos - line_start + 1, data[pos]


def _sniff_sep(first_line: str) -> Optional[str]:
    if "," in first_line:
        return ","
    if "\t" in first_line and " " not in first_line.strip():
        # pure tab-separated: keep empty fields meaningful (whitespace runs would merge them)
        return "\t"
    return None


def read_table(path: PathLike, *, sep: Optional[str] = "auto", header: Union[bool, str] = "auto",
               use_header_names: bool = True, skip_comments: bool = True,
               data: Optional[bytes] = None, str_columns: Sequence = ()) -> Table:
    """Parse a delimited text file into a :class:`Table`.

    Parameters
    ----------
    path : str or os.PathLike
        The file; gzip is detected by magic bytes.
    sep : str or None or "auto"
        Field separator.  ``None`` splits on runs of whitespace; ``"auto"`` picks ``","``
        if the first data line has a comma, ``"\\t"`` for pure tab-separated lines, and
        whitespace otherwise.
    header : bool or "auto"
        Whether the first data line holds column names.  ``"auto"`` treats it as a header
        when none of its fields parses as a number.
    use_header_names : bool
        If ``False`` a header line is skipped and columns are numbered instead (for files
        such as JODIE's whose header does not list every column).
    skip_comments : bool
        Skip whole-line comments starting with ``#`` or ``%``.
    data : bytes, optional
        Already-decompressed content to parse; ``path`` then only names it in messages.
    str_columns : sequence
        Columns to keep as strings (by name, or position when there is no header).

    Returns
    -------
    Table

    Raises
    ------
    FileNotFoundError
        If ``path`` is not a file.
    ValueError
        If the file holds no data rows or rows have differing column counts.
    """
    if data is None:
        p = require_file(path)
        raw = read_bytes(p)
    else:
        p, raw = Path(path), data
    skip = _SKIP_LINE if skip_comments else _BLANK_LINE
    m = skip.search(raw)
    # copy the content (hundreds of MB for JODIE files) only if some line must go; the
    # pattern always matches emptily at the very end, which needs no removal
    body = skip.sub(b"", raw) if m is not None and m.end() > m.start() else raw
    if _NON_SPACE.search(body) is None:
        raise ValueError(f"{p}: no data rows (the file is empty or holds only comments)")
    first = _line(body, 0)
    if sep == "auto":
        sep = _sniff_sep(first)
    has_header = _looks_like_header(first, sep) if header == "auto" else bool(header)
    table = Table(pd.DataFrame(), p, raw, sep, 1 if has_header else 0, skip_comments)
    pandas_header, skiprows = (0 if has_header else None), None
    if has_header and not use_header_names:
        first = _line(body, 1)
        if not first.strip():
            raise ValueError(f"{p}: no data rows (only a header line)")
        pandas_header, skiprows = None, 1
    ncols = len(_split_fields(first.strip() if sep is None else first, sep))
    kwargs = dict(header=pandas_header, skiprows=skiprows, index_col=False,
                  skip_blank_lines=True, engine="c", low_memory=False)
    if sep is None:
        kwargs["sep"] = r"\s+"
    else:
        kwargs["sep"] = sep
        kwargs["skipinitialspace"] = True
    if str_columns:
        kwargs["dtype"] = {c: str for c in str_columns}
    try:
        with warnings.catch_warnings():
            # pandas only *warns* when rows are wider than the header and drops the excess
            warnings.simplefilter("error", pd.errors.ParserWarning)
            df = pd.read_csv(io.BytesIO(body), **kwargs)
    except (pd.errors.ParserError, pd.errors.ParserWarning) as exc:
        err = table.first_bad_width(ncols)
        if err is not None:
            raise err from None
        raise ValueError(f"{p}: cannot parse ({exc})") from exc
    except pd.errors.EmptyDataError:
        raise ValueError(f"{p}: no data rows") from None
    except UnicodeDecodeError as exc:
        where = _first_non_utf8(raw)
        if where is None:
            raise ValueError(f"{p}: not valid UTF-8 ({exc})") from exc
        line, col, byte = where
        raise ValueError(f"{p}, line {line}, column {col}: byte 0x{byte:02x} is not valid UTF-8 "
                         "(Latin-1 or another legacy encoding?); convert the file, e.g. "
                         "iconv -f latin1 -t utf-8") from exc
    if len(df) == 0:
        raise ValueError(f"{p}: no data rows (only a header line)")
    table.df = df
    return table
