"""Scan the data lines of an SWF log into numbers, one compiled pass per chunk of text.

Splitting runs of blanks into 18 fields is the costly part of reading SWF. With Polars string
expressions (``replace_all`` to collapse the blanks, ``split_exact``, a cast: 40 M short strings
for 2 M lines) splitting RICC x5 (2.24 M lines, 212 MB) and writing the fields took 3.4
CPU-seconds on the 2-core development machine, as much as this whole reader and the ingest
pipeline after it. This Numba kernel walks the bytes once, parsing numbers as it goes, in
about 0.7 CPU-seconds on one core, and allocates nothing per field. Everything after the scan
(unknown values, units, states, timestamps) is Polars expressions in
:mod:`hpcpolicy.ingest.swf.reader`.

The scan also judges each line, so that the text of rejected lines is the only text kept:

* blank lines and comment lines (first non-blank character ``;``) are not rows;
* a data line is rejected, first rule that applies, as ``non_utf8`` (bytes that are not
  UTF-8; in an extended file, only bytes in the first 18 fields count), ``field_count`` (not
  18 fields; in an extended file, fewer than 18: see :mod:`hpcpolicy.ingest.swf.columns`),
  ``bad_number`` (one of the first 18 fields is not a plain decimal number: optional sign,
  digits, optional fraction), ``no_job_id`` (job number -1 or not a whole number),
  ``no_submit_time`` (submit time -1), ``swf_bad_status`` (status not a whole number from -1
  to 5), ``swf_fractional_id`` (user, group, executable, queue, partition or preceding job
  number not a whole number), ``swf_long_id`` (a user, group, executable, queue or partition
  id of more than 18 digits), ``absurd_value`` (a value below 0 other than -1, or above the
  field's limit in :data:`FIELD_MAX`).

Ids are identifiers, not amounts: user, group, executable, queue and partition ids have no
size limit but the 18 digits an int64 holds, and the kept ones (:data:`ID_FIELDS`) come out
as Int64, exact (a float64 is exact only to 2^53, about 9.007e15: two hashed 18-digit ids
would merge).

The input is read in pieces of whole lines, scanned by two threads at once
(:mod:`hpcpolicy.ingest.text_chunks`), so memory stays bounded whatever the file size and both
cores work. The lazy frame comes from a Polars IO source.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numba as nb
import numpy as np
import numpy.typing as npt
import polars as pl

from hpcpolicy.ingest.text_chunks import WORKERS, LineChunks, lazy_frames, scan_pieces
from hpcpolicy.ingest.utf8 import valid_len
from hpcpolicy.limits import Limits

__all__ = ["FIELD_MAX", "FIELD_NAMES", "ID_FIELDS", "KEPT_FIELDS", "REASONS", "SCAN_SCHEMA",
           "scan_swf"]

FIELD_NAMES: tuple[str, ...] = tuple(f"f{k}" for k in range(1, 19))
"""Frame column of each SWF field, numbered as in the SWF definition (``f1`` = job number)."""

REASONS: tuple[str | None, ...] = (
    None, "non_utf8", "field_count", "bad_number", "no_job_id", "no_submit_time",
    "swf_bad_status", "swf_fractional_id", "absurd_value", "swf_long_id",
)
"""Reject reason by the kernel's code (0 = kept)."""

KEPT_FIELDS: tuple[str, ...] = ("f1", "f2", "f3", "f4", "f5", "f8", "f9", "f10", "f11", "f12",
                                "f13", "f15", "f16")
"""Fields the job table uses; the others (6, 7, 14, 17, 18) are only checked."""
ID_FIELDS: tuple[str, ...] = ("f12", "f13", "f15", "f16")
"""Kept fields that are ids (user, group, queue, partition): scanned as exact Int64."""
_NUMBER_FIELDS = tuple(FIELD_NAMES.index(f) for f in KEPT_FIELDS if f not in ID_FIELDS)
_KEPT_IDS = tuple(FIELD_NAMES.index(f) for f in ID_FIELDS)
_NUMBER_NAMES = tuple(FIELD_NAMES[k] for k in _NUMBER_FIELDS)
_WHOLE_FIELDS = (11, 12, 13, 14, 15, 16)  # user, group, executable, queue, partition, preceding
_LONG_FIELDS = (11, 12, 13, 14, 15)  # ids with no limit but their 18 digits

_SECONDS, _PROCS, _BIG, _ID = 1e10, 1e8, 1e12, 1e18
FIELD_MAX = np.array([
    _BIG,      # 1 job number
    _SECONDS,  # 2 submit time
    _SECONDS,  # 3 wait time
    _SECONDS,  # 4 run time
    _PROCS,    # 5 allocated processors
    _SECONDS,  # 6 average CPU time used
    _BIG,      # 7 used memory (KB per processor)
    _PROCS,    # 8 requested processors
    _SECONDS,  # 9 requested time
    _BIG,      # 10 requested memory (KB per processor)
    5.0,       # 11 status
    _ID,       # 12 user id
    _ID,       # 13 group id
    _ID,       # 14 executable (application) number
    _ID,       # 15 queue number
    _ID,       # 16 partition number
    _BIG,      # 17 preceding job number
    _SECONDS,  # 18 think time from preceding job
])
"""Largest plausible value of each field: 10^10 s (317 years) for times, 10^8 processors
(ten times the largest machine built), 10^12 for job numbers and memory in KB; larger is
absurd. Ids (user, group, executable, queue, partition) may have any 18 digits (10^18 as a
float64 holds them all); a longer one is ``swf_long_id``."""

_N_FIELDS = 18
_MAX_DIGITS = 18  # significant digits an int64 holds; further fraction digits are dropped
_REPLACEMENT = np.frombuffer("\ufffd".encode(), dtype=np.uint8)


@nb.njit(cache=True, nogil=True)
def _is_blank(c: int) -> bool:
    return c == 32 or (9 <= c <= 13 and c != 10)  # space, tab, CR, vertical tab, form feed


@nb.njit(cache=True, nogil=True)
def _copy_sanitized(buf: npt.NDArray[np.uint8], s: int, e: int, out: npt.NDArray[np.uint8],
                    o: int, repl: npt.NDArray[np.uint8]) -> int:
    """Copy ``buf[s:e]`` to ``out[o:]`` as valid UTF-8 text without control characters (each
    invalid byte or control character becomes U+FFFD) plus a newline; return the new end."""
    i = s
    while i < e:
        c = buf[i]
        if c >= 0x80:
            n = valid_len(buf, i, e)
            if n > 0:
                out[o:o + n] = buf[i:i + n]
                o += n
                i += n
                continue
        if c >= 0x80 or (c < 32 and c != 9):
            out[o:o + 3] = repl
            o += 3
        else:
            out[o] = c
            o += 1
        i += 1
    out[o] = 10
    return o + 1


@nb.njit(cache=True, nogil=True)
def _parse_line(buf: npt.NDArray[np.uint8], i: int, n: int, row: npt.NDArray[np.float64],
                ints: npt.NDArray[np.int64]) -> tuple[int, int, bool, bool, bool]:
    """Parse the first 18 fields of the data line starting at ``buf[i]`` into ``row``, and
    their whole parts of up to 18 digits, exact, into ``ints``.

    Returns (index of the line's end: its newline or ``n``, number of fields, the first 18
    fields numeric, their bytes valid UTF-8, the bytes of the fields after them valid UTF-8).
    """
    k = 0
    numeric = True
    utf8 = True
    tail_utf8 = True
    while i < n:
        c = buf[i]
        if c == 10:
            break
        if _is_blank(c):
            i += 1
            continue
        neg = c == 45
        if c == 45 or c == 43:
            i += 1
        mant = 0  # an integer: a chain of integer multiply-adds is faster than of floats
        digits = 0  # digits seen
        sig = 0  # significant digits in mant (leading zeros are not)
        frac = 0  # fraction digits in mant
        huge = False
        while i < n and 48 <= buf[i] <= 57:
            if sig < _MAX_DIGITS:
                mant = mant * 10 + (buf[i] - 48)
                sig += mant > 0
            else:
                huge = True
            digits += 1
            i += 1
        if i < n and buf[i] == 46:
            i += 1
            while i < n and 48 <= buf[i] <= 57:
                if sig < _MAX_DIGITS:
                    mant = mant * 10 + (buf[i] - 48)
                    sig += mant > 0
                    frac += 1
                digits += 1
                i += 1
        if digits == 0 or (i < n and buf[i] != 10 and not _is_blank(buf[i])):
            numeric = numeric and k >= _N_FIELDS
            while i < n and buf[i] != 10 and not _is_blank(buf[i]):
                step = 1
                if buf[i] >= 0x80:
                    step = valid_len(buf, i, n)
                    if step == 0:
                        utf8 = utf8 and k >= _N_FIELDS
                        tail_utf8 = tail_utf8 and k < _N_FIELDS
                        step = 1
                i += step
        if k < _N_FIELDS:
            value = float(mant) / 10.0 ** frac if frac else float(mant)
            if huge:  # a whole part of more than 18 digits: absurd in any field
                value = np.inf
            row[k] = -value if neg else value
            whole = mant
            for _ in range(frac):
                whole //= 10
            ints[k] = -whole if neg else whole
        k += 1
    return i, k, numeric, utf8, tail_utf8


@nb.njit(cache=True, nogil=True)
def _judge(row: npt.NDArray[np.float64], field_max: npt.NDArray[np.float64]) -> int:
    """Reject code (index into REASONS) of a line of 18 numbers, 0 to keep it."""
    job = row[0]
    if job == -1.0 or job != np.floor(job):
        return 4
    if row[1] == -1.0:
        return 5
    status = row[10]
    if status != np.floor(status) or status < -1.0 or status > field_max[10]:
        return 6
    for k in _WHOLE_FIELDS:
        if row[k] != np.floor(row[k]):
            return 7
    for k in _LONG_FIELDS:
        if row[k] > field_max[k]:
            return 9
    for k in range(_N_FIELDS):
        v = row[k]
        if (v < 0.0 and v != -1.0) or v > field_max[k]:
            return 8
    return 0


@nb.njit(cache=True, nogil=True)
def _scan_lines(
    buf: npt.NDArray[np.uint8],
    pos: int,
    n: int,
    first_line: int,
    field_max: npt.NDArray[np.float64],
    repl: npt.NDArray[np.uint8],
    extended: bool,
    out: npt.NDArray[np.float64],
    ids: npt.NDArray[np.int64],
    line_no: npt.NDArray[np.int64],
    code: npt.NDArray[np.uint8],
    raw: npt.NDArray[np.uint8],
    raw_rows: npt.NDArray[np.int64],
) -> tuple[int, int, int, int, int]:
    """Scan the lines of ``buf[pos:n]`` until it ends or ``out`` holds as many rows as it can.

    ``out[j]`` receives field ``_NUMBER_FIELDS[j]`` of each data line (NaN where a line is too
    short), ``ids[j]`` field ``_KEPT_IDS[j]`` (-1 there); ``extended``: lines of more than 18
    fields are read (their first 18), not rejected. Returns (position reached, rows, raw text
    bytes, rejected rows, lines passed).
    """
    cap = out.shape[1]
    row = np.empty(_N_FIELDS, dtype=np.float64)
    ints = np.empty(_N_FIELDS, dtype=np.int64)
    line = first_line
    r = 0
    o = 0
    nr = 0
    while pos < n and r < cap:
        s = pos
        while s < n and _is_blank(buf[s]):
            s += 1
        if s < n and buf[s] != 10 and buf[s] != 59:
            e, k, numeric, utf8, tail_utf8 = _parse_line(buf, s, n, row, ints)
            row[k:] = np.nan  # a short line leaves the previous line's values behind
            ints[k:] = -1
            if not utf8 or (not tail_utf8 and not extended):
                c = 1
            elif k < _N_FIELDS or (k > _N_FIELDS and not extended):
                c = 2
            elif not numeric:
                c = 3
            else:
                c = _judge(row, field_max)
            for j in range(len(_NUMBER_FIELDS)):
                out[j, r] = row[_NUMBER_FIELDS[j]]
            for j in range(len(_KEPT_IDS)):
                ids[j, r] = ints[_KEPT_IDS[j]]
            line_no[r] = line
            code[r] = c
            if c != 0:
                end = e - 1 if e > pos and buf[e - 1] == 13 else e
                o = _copy_sanitized(buf, pos, end, raw, o, repl)
                raw_rows[nr] = r
                nr += 1
            r += 1
        else:
            e = s
            while e < n and buf[e] != 10:
                e += 1
        line += 1
        pos = e + 1
    return pos, r, o, nr, line - first_line


_REASON_NAMES = pl.Series("_reason", REASONS, dtype=pl.String)
SCAN_SCHEMA = pl.Schema({
    "_line": pl.Int64,
    **{f: pl.Int64 if f in ID_FIELDS else pl.Float64 for f in KEPT_FIELDS},
    "_reason": pl.String,
    "_raw": pl.String,
})
"""Columns of :func:`scan_swf`: line number, the fields the job table uses (Float64, NaN where
a line lacks them; the ids Int64, -1 there), reject reason (null = kept), and the text of
rejected lines (null otherwise)."""

BATCH_ROWS = 1 << 16
"""Rows per frame the scan hands to Polars."""


@dataclass
class _Piece:
    """The frames of one piece of the file, its lines numbered from the piece's start."""

    frames: list[pl.DataFrame]
    lines: int


def _scan_piece(buf: npt.NDArray[np.uint8], end: int, first_line: int, extended: bool) -> _Piece:
    """Scan ``buf[:end]`` into frames of at most :data:`BATCH_ROWS` rows."""
    raw_rows = np.empty(BATCH_ROWS, dtype=np.int64)
    raw = np.empty(3 * end + BATCH_ROWS, dtype=np.uint8)
    frames = []
    line = first_line
    pos = 0
    while pos < end:
        # fresh arrays for each frame: Polars takes them over without copying
        out = np.empty((len(_NUMBER_FIELDS), BATCH_ROWS), dtype=np.float64)
        ids = np.empty((len(_KEPT_IDS), BATCH_ROWS), dtype=np.int64)
        line_no = np.empty(BATCH_ROWS, dtype=np.int64)
        code = np.empty(BATCH_ROWS, dtype=np.uint8)
        pos, rows, raw_len, n_raw, passed = _scan_lines(
            buf, pos, end, line + 1, FIELD_MAX, _REPLACEMENT, extended, out, ids, line_no, code,
            raw, raw_rows)
        line += passed
        if rows:
            frames.append(_frame(rows, out, ids, line_no, code, raw[:raw_len],
                                 raw_rows[:n_raw]))
    return _Piece(frames, line - first_line)


def _batches(path: Path, limits: Limits | None, extended: bool) -> Iterator[pl.DataFrame]:
    """Frames of :data:`SCAN_SCHEMA`, at most :data:`BATCH_ROWS` rows each, in file order
    (pieces of the file are scanned by two threads at once)."""
    chunks = LineChunks(path, "an SWF text log", buffers=WORKERS + 2, limits=limits)

    def scan(buf: npt.NDArray[np.uint8], end: int, first_line: int, _first: bool) -> _Piece:
        return _scan_piece(buf, end, first_line, extended)

    for piece, offset in scan_pieces(chunks, scan):
        for frame in piece.frames:
            yield frame.with_columns(pl.col("_line") + offset) if offset else frame


def _frame(rows: int, out: npt.NDArray[np.float64], ids: npt.NDArray[np.int64],
           line_no: npt.NDArray[np.int64], code: npt.NDArray[np.uint8],
           raw: npt.NDArray[np.uint8], raw_rows: npt.NDArray[np.int64]) -> pl.DataFrame:
    """The first ``rows`` scanned rows as a frame."""
    text = pl.Series("_raw", dtype=pl.String).extend_constant(None, rows)
    if len(raw_rows):
        rejected = pl.read_csv(raw.tobytes(), has_header=False, separator="\x1f",
                               quote_char=None, schema={"_raw": pl.String})["_raw"]
        text = text.scatter(raw_rows, rejected)
    return pl.DataFrame({
        "_line": line_no[:rows],
        **{name: (ids[ID_FIELDS.index(name)] if name in ID_FIELDS
                  else out[_NUMBER_NAMES.index(name)])[:rows] for name in KEPT_FIELDS},
        "_reason": _REASON_NAMES.gather(code[:rows]),
        "_raw": text,
    }, schema=SCAN_SCHEMA)


def scan_swf(path: Path, limits: Limits | None = None, extended: bool = False) -> pl.LazyFrame:
    """A lazy frame of :data:`SCAN_SCHEMA`, one row per data line of the SWF file ``path``;
    ``extended``: the file has columns after field 18 (:mod:`hpcpolicy.ingest.swf.columns`),
    so a line of more than 18 fields is read, not rejected.

    Reading happens when the frame is collected, chunk by chunk; a truncated or damaged gzip
    stream, or a line or gzip expansion past ``limits`` (default :class:`Limits()`), then
    raises :class:`InputFormatError`.

    Example:
        >>> import pathlib, tempfile
        >>> p = pathlib.Path(tempfile.mkdtemp()) / "t.swf"
        >>> _ = p.write_text("; Version: 2.2\\n1 0 5 60 4 -1 -1 4 100 -1 1 1 1 -1 1 -1 -1 -1\\n")
        >>> scan_swf(p).select("_line", "f1", "f4", "_reason").collect().row(0)
        (2, 1.0, 60.0, None)
    """

    return lazy_frames(lambda: _batches(path, limits, extended), SCAN_SCHEMA, "swf", path)
