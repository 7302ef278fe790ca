"""The rows of a sacct export as a lazy frame, and what a whole pass learns about the file.

:func:`scan_sacct` streams the file through the compiled scanner
(:mod:`hpcpolicy.ingest.sacct.kernel`), two pieces at a time, and hands Polars one frame per
piece: a row per job row or rejected line, with its raw text, the fields the job-table
expressions read (:class:`hpcpolicy.ingest.sacct.fields.Fields`: text, or parsed numbers with
a status), and one row standing for all the step rows of the piece folded into their jobs
(``_rows`` = how many). The text goes to Polars through its CSV reader, split by a control
byte that the text does not hold.

Two rules need the whole file: a job's record is superseded by a later record of the same job
(``sacct --duplicates``), and a step is an orphan when its job has no row anywhere. The scan
keeps a 128-bit key per job row (and per step that does not follow its job row) in a
:class:`PassLog`; :func:`settle` reads it after the pass. In the usual export neither rule
applies and the one pass stands; otherwise the pass is run again, told the lines concerned.
Keys are two different 64-bit hashes of the job id: two ids share both with a chance of the
order of 10^-23 in a file of 10^8 rows.

Example:
    Two jobs, and the batch step of the first folded into it (the last row, with no line):

    >>> import pathlib, tempfile
    >>> from hpcpolicy.ingest.sacct.fields import Fields
    >>> from hpcpolicy.ingest.sacct.layout import read_layout
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "sacct.txt"
    >>> _ = p.write_text("JobID|Submit|State\\n7|2024-03-01T10:00:00|COMPLETED\\n"
    ...     "7.batch|2024-03-01T10:00:00|COMPLETED\\n8|2024-03-01T10:01:00|PENDING\\n")
    >>> layout = read_layout(p)
    >>> fields = Fields(layout)
    >>> state = fields.get("State")
    >>> frame, log = scan_sacct(p, layout, fields)
    >>> frame.select("_line", "_rows", state).collect().rows()
    [(2, 1, 'COMPLETED'), (4, 1, 'PENDING'), (None, 1, None)]
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl
from polars.io.plugins import register_io_source

from hpcpolicy.ingest.plan import STEP_FOLDED
from hpcpolicy.ingest.sacct import kernel
from hpcpolicy.ingest.sacct.fields import Fields
from hpcpolicy.ingest.sacct.layout import SacctLayout
from hpcpolicy.ingest.slurm_fields import TIME_FORMATS
from hpcpolicy.ingest.text_chunks import (
    CHUNK_BYTES,
    WORKERS,
    LineChunks,
    push_down,
    scan_pieces,
)
from hpcpolicy.limits import Limits

__all__ = ["REASONS", "Known", "PassLog", "Settled", "scan_sacct", "settle"]

REASONS: tuple[str | None, ...] = (None, "non_utf8", "field_count", "orphan_step", STEP_FOLDED,
                                   "control_chars", None)
"""``_scan_reason`` by the kernel's code (None: a job row, to be checked by the expressions;
the last, a job row whose name held ``|``, also sets ``_rejoined``)."""

FREE_TEXT = frozenset(c.lower() for c in (
    "JobName", "Comment", "AdminComment", "SystemComment", "WorkDir", "SubmitLine",
    "Constraints", "Reason", "StdIn", "StdOut", "StdErr", "Container", "Extra", "MCSLabel"))
"""sacct columns whose text the user or an admin chooses freely, so may hold a ``|``."""


def rejoin_index(layout: SacctLayout, id_index: int | None) -> int:
    """The one free-text column a ``|`` row with too many fields can be read back with, or -1:
    with several, the extra ``|`` could belong to either; before the job id, the id itself
    would be read from the wrong field; CSV quotes its fields instead."""
    free = [i for i, c in enumerate(layout.columns) if c.lower() in FREE_TEXT]
    first_after = -1 if id_index is None else id_index
    if layout.style == "csv" or len(free) != 1 or free[0] <= first_after:
        return -1
    return free[0]

ROWS_PER_CALL = 1 << 16
"""Rows (and loose step keys) one kernel call writes at most: one frame."""
_STYLES = {"parsable2": kernel.PARSABLE2, "parsable": kernel.PARSABLE, "csv": kernel.CSV}
_SEPARATORS = tuple(b for b in range(31, 0, -1) if b not in (9, 10, 13))
"""Control bytes that may separate the fields handed to Polars, in order of preference."""


@dataclass(frozen=True)
class Known:
    """What a first pass found, for a second pass to apply."""

    superseded: npt.NDArray[np.int64]
    """Sorted lines of job records that a later record of the same job supersedes."""
    orphans: npt.NDArray[np.int64]
    """Sorted lines of steps whose job has no row."""


@dataclass(frozen=True)
class Settled:
    """The whole-file facts of one pass (see :func:`settle`)."""

    known: Known
    copies: int | None
    """Without a job-id column: rows that are exact copies of an earlier row; else None."""


@dataclass
class PassLog:
    """The keys the last complete pass of :func:`scan_sacct` gathered (None before one)."""

    keys: npt.NDArray[np.uint64] | None = None
    """(h1, h2) of each job row with an id (each row, in an export without ids)."""
    key_lines: npt.NDArray[np.int64] | None = None
    loose: npt.NDArray[np.uint64] | None = None
    """(h1, h2) of the job part of each step that does not follow a row of its job."""
    loose_lines: npt.NDArray[np.int64] | None = None


def _sep_pair(clash: int) -> tuple[int, int] | None:
    free = [b for b in _SEPARATORS if not (clash >> b) & 1]
    return (free[0], free[1]) if len(free) >= 2 else None


@dataclass
class _Chunk:
    """What the kernel made of one piece of the file."""

    frames: list[pl.DataFrame]
    keys: npt.NDArray[np.uint64]
    key_lines: npt.NDArray[np.int64]
    loose: npt.NDArray[np.uint64]
    loose_lines: npt.NDArray[np.int64]
    lines: int
    """Lines the piece holds."""
    last_job: npt.NDArray[np.uint64]
    """Key of the piece's last job row (empty if it has none)."""


class _Batches:
    """One pass over the file: frames of rows, keys gathered into a :class:`PassLog`.

    Pieces of the file are scanned by two threads at once (:func:`hpcpolicy.ingest.text_chunks.
    scan_pieces`; the kernel and Polars' CSV reader run without the GIL). A piece is scanned
    on its own: a step at its start whose job row ends the piece before is kept as a loose
    key, matched once the file is read; a second pass, which must find orphan steps by line,
    numbers lines from the file's start.
    """

    def __init__(self, path: Path, layout: SacctLayout, fields: Fields, known: Known | None,
                 id_index: int | None, limits: Limits | None) -> None:
        self.path = path
        self.limits = limits or Limits()
        # the kernel writes a row only with room for 6 bytes per byte of its line, and 4 per
        # field: a buffer that cannot hold the longest line would never move on
        self.out_bytes = max(2 * CHUNK_BYTES,
                             6 * self.limits.line_bytes + 8 * layout.n_fields + (1 << 16))
        self.used = np.array(fields.indexes(), dtype=np.int64)
        self.runs = kernel.runs_of(self.used)
        self.parsed, self.words, self.word_ends, self.n_missing = fields.spec()
        self.names = ["_raw", *fields.text_columns(), "_end"]
        self.schema = dict.fromkeys(self.names, pl.String)
        self.numbers = fields.number_columns()
        self.layout = np.array([_STYLES[layout.style], layout.n_fields,
                                -1 if id_index is None else id_index, layout.first_row,
                                _SEPARATORS[0], _SEPARATORS[1],
                                ord(TIME_FORMATS[layout.time_format][8]),
                                rejoin_index(layout, id_index)], dtype=np.int64)
        header = (layout.header_line or "").encode()
        self.header = np.frombuffer(header, dtype=np.uint8)
        self.orphans = (known.orphans if known is not None else np.empty(0, dtype=np.int64))
        self.gathered: list[_Chunk] = []
        self.last_job = np.empty(0, dtype=np.uint64)
        self.local = threading.local()

    def frames(self) -> Iterator[pl.DataFrame]:
        """The frames of the whole file, in order."""
        chunks = LineChunks(self.path, "a sacct export", buffers=WORKERS + 2,
                            limits=self.limits)
        numbered = len(self.orphans) > 0  # orphans are found by absolute line number
        for chunk, offset in scan_pieces(chunks, self._chunk, numbered):
            yield from self._done(chunk, offset)

    def _done(self, chunk: _Chunk, offset: int) -> list[pl.DataFrame]:
        """The frames of a scanned piece, its lines numbered from the file's start by adding
        ``offset``; its keys are kept for :meth:`record`, less the loose steps of the last job
        row of the pieces before (the usual steps at a piece's start)."""
        frames, chunk.frames = chunk.frames, []
        if offset:
            chunk.key_lines += offset
            chunk.loose_lines += offset
            frames = [f.with_columns(pl.col("_line") + offset) for f in frames]
        if len(self.last_job) and len(chunk.loose):
            known = (chunk.loose == self.last_job).all(axis=1)
            chunk.loose, chunk.loose_lines = chunk.loose[~known], chunk.loose_lines[~known]
        if len(chunk.last_job):
            self.last_job = chunk.last_job
        self.gathered.append(chunk)  # the keys only: the frames are the caller's
        return frames

    def record(self, log: PassLog) -> None:
        """Put the keys of the (complete) pass into ``log``."""
        keys, lines = np.empty((0, 2), dtype=np.uint64), np.empty(0, dtype=np.int64)
        log.keys = np.concatenate([keys, *[c.keys for c in self.gathered]])
        log.key_lines = np.concatenate([lines, *[c.key_lines for c in self.gathered]])
        log.loose = np.concatenate([keys, *[c.loose for c in self.gathered]])
        log.loose_lines = np.concatenate([lines, *[c.loose_lines for c in self.gathered]])

    def _buffers(self) -> tuple[npt.NDArray[Any], ...]:
        """This thread's output arrays (reused: what a frame keeps is copied out of them)."""
        if not hasattr(self.local, "arrays"):
            self.local.arrays = (
                np.empty(self.out_bytes, dtype=np.uint8),
                np.empty(ROWS_PER_CALL, dtype=np.int64), np.empty(ROWS_PER_CALL, dtype=np.uint8),
                np.zeros((len(self.numbers), ROWS_PER_CALL + 1), dtype=np.int64),
                np.zeros((len(self.parsed), ROWS_PER_CALL + 1), dtype=np.uint8),
                np.empty((ROWS_PER_CALL, 2), dtype=np.uint64),
                np.empty(ROWS_PER_CALL, dtype=np.int64),
                np.empty((ROWS_PER_CALL, 2), dtype=np.uint64),
                np.empty(ROWS_PER_CALL, dtype=np.int64))
        return self.local.arrays  # type: ignore[no-any-return]

    def _chunk(self, buf: npt.NDArray[np.uint8], end: int, first_line: int,
               first_piece: bool) -> _Chunk:
        """Scan ``buf[:end]``, numbering its lines from ``first_line + 1``."""
        layout = self.layout.copy()
        if not first_piece:  # lines before the first data row are all in the first piece
            layout[3] = 0
        state = np.zeros(len(kernel.STATE_FIELDS), dtype=np.uint64)
        state[0] = first_line
        state[1] = np.searchsorted(self.orphans, first_line + 1)
        out, line_no, code, nums, flags, keys, key_lines, loose, loose_lines = self._buffers()
        lanes = buf.view(np.uint64)
        frames, found = [], []
        pos = 0
        while pos < end:
            sep, cr_sub = int(layout[4]), int(layout[5])
            o = len(self.names)  # a first row of nulls: the CSV reader drops a byte order mark
            out[:o - 1] = sep
            out[o - 1] = 10
            pos, rows, o, n_keys, n_loose, folded, ctrl, clash = kernel.scan_chunk(
                buf, lanes, pos, end, layout, self.header, self.used, self.runs, self.parsed,
                self.words, self.word_ends, self.n_missing, self.orphans, state, out, o,
                line_no, code, nums, flags, keys, key_lines, loose, loose_lines)
            found.append((keys[:n_keys].copy(), key_lines[:n_keys].copy(),
                          loose[:n_loose].copy(), loose_lines[:n_loose].copy()))
            pair = _sep_pair(clash) if clash >= 0 else None
            if pair is not None:
                layout[4], layout[5] = pair
            if rows or folded:
                if folded:  # the row of the folded steps: no text, no numbers
                    out[o:o + len(self.names) - 1] = sep
                    out[o + len(self.names) - 1] = 10
                    o += len(self.names)
                    nums[:, rows] = 0
                    flags[:, rows] = 0
                n = rows + (folded > 0)
                frames.append(self._frame(out[:o], sep, cr_sub, int(ctrl),
                                          line_no[:rows].copy(), code[:rows].copy(), folded,
                                          nums[:, :n].copy(), flags[:, :n].copy()))
            if clash >= 0 and pair is None:  # no two separators left: a row of its own
                pos = self._control_row(buf, pos, end, state, frames)
        keys_, key_lines_, loose_, loose_lines_ = (np.concatenate(p)
                                                   for p in zip(*found, strict=True))
        return _Chunk(frames, keys_, key_lines_, loose_, loose_lines_,
                      lines=int(state[0]) - first_line,
                      last_job=state[3:5].copy() if state[2] else state[:0].copy())

    def _control_row(self, buf: npt.NDArray[np.uint8], pos: int, end: int,
                     state: npt.NDArray[np.uint64], frames: list[pl.DataFrame]) -> int:
        """Reject the line at ``buf[pos]``, which holds nearly every control byte, as
        ``control_chars`` (its text kept exactly); return where the next line starts."""
        stop = bytes(buf[pos:end]).find(b"\n")
        stop = end if stop < 0 else pos + stop
        raw = bytes(buf[pos:stop]).removesuffix(b"\r").decode("utf-8", errors="replace")
        state[0] += 1
        row = {name: None for name in self.schema if name != "_end"}
        frames.append(pl.DataFrame(
            {**row, "_raw": raw, "_line": int(state[0]), "_rows": 1,
             "_scan_reason": "control_chars", "_rejoined": False,
             **dict.fromkeys(self.numbers, 0), **{f"_f{j}": 0 for j in range(len(self.parsed))}},
            schema={**dict.fromkeys(row, pl.String), "_line": pl.Int64, "_rows": pl.Int64,
                    "_scan_reason": pl.String, "_rejoined": pl.Boolean,
                    **dict.fromkeys(self.numbers, pl.Int64),
                    **{f"_f{j}": pl.UInt8 for j in range(len(self.parsed))}}))
        return stop + 1

    def _frame(self, text: npt.NDArray[np.uint8], sep: int, cr_sub: int, ctrl: int,
               line_no: npt.NDArray[np.int64], code: npt.NDArray[np.uint8], folded: int,
               nums: npt.NDArray[np.int64], flags: npt.NDArray[np.uint8]) -> pl.DataFrame:
        """The rows written by one kernel call (+ the row of the folded steps) as a frame."""
        frame = pl.read_csv(text.tobytes(), separator=chr(sep), has_header=False,
                            quote_char=None, schema=self.schema).slice(1).drop("_end")
        if (ctrl >> 13) & 1:  # \r was written as another control byte
            frame = frame.with_columns(pl.all().str.replace_all(chr(cr_sub), "\r", literal=True))
        n = len(line_no)
        if folded:
            line_no = np.append(line_no, 0)
            code = np.append(code, REASONS.index(STEP_FOLDED)).astype(np.uint8)
        counts = np.ones(len(line_no), dtype=np.int64)
        counts[n:] = folded
        lines = pl.Series(line_no)
        return frame.with_columns(
            _line=lines.scatter(n, None) if folded else lines,
            _rows=pl.Series(counts),
            _scan_reason=_REASON_NAMES.gather(code),
            _rejoined=pl.Series(code == kernel.CODE_JOB_REJOINED),
            **{name: pl.Series(nums[k]) for k, name in enumerate(self.numbers)},
            **{f"_f{j}": pl.Series(flags[j]) for j in range(len(flags))},
        )


_REASON_NAMES = pl.Series("_scan_reason", REASONS, dtype=pl.String)


def scan_sacct(path: Path, layout: SacctLayout, fields: Fields, known: Known | None = None,
               limits: Limits | None = None) -> tuple[pl.LazyFrame, PassLog]:
    """A lazy frame of the export's rows, and the log its passes fill.

    Columns: ``_line`` (1-based line number; null on the row of folded steps), ``_rows``
    (input rows the row stands for: 1, or the folded steps), ``_scan_reason`` (a reason from
    :data:`REASONS`), ``_rejoined`` (a job row whose name held ``|``), ``_raw`` (the line's
    text, U+FFFD for bytes that are not UTF-8) and the columns of ``fields.used`` (text of job
    rows; only the job id for rejected rows). Take every field needed from ``fields`` before
    calling.

    Args:
        path: the export (plain or gzipped).
        layout: its layout.
        fields: the fields to copy.
        known: what a first pass found (superseded records, orphan steps), or None.
        limits: the longest line and the gzip expansion accepted (default :class:`Limits()`).

    Returns:
        The frame, and a :class:`PassLog` that a complete pass updates.

    Raises:
        InputFormatError: when the frame is collected, if the file cannot be read to its end
            or breaks ``limits``.
    """
    id_index = layout.index("JobID")
    if id_index is None:
        id_index = layout.index("JobIDRaw")
    if id_index is not None:
        fields.get(layout.columns[id_index])
    log = PassLog()
    schema = pl.Schema({
        "_raw": pl.String, **dict.fromkeys(fields.text_columns(), pl.String),
        "_line": pl.Int64, "_rows": pl.Int64, "_scan_reason": pl.String, "_rejoined": pl.Boolean,
        **dict.fromkeys(fields.number_columns(), pl.Int64),
        **{f"_f{j}": pl.UInt8 for j in range(len(fields.parsed))},
    })

    def source(with_columns: list[str] | None, predicate: pl.Expr | None, n_rows: int | None,
               batch_size: int | None) -> Iterator[pl.DataFrame]:
        batches = _Batches(path, layout, fields, known, id_index, limits)
        if (yield from push_down(batches.frames(), with_columns, predicate, n_rows)):
            batches.record(log)

    frame = register_io_source(source, schema=schema, is_pure=True,
                               explain_name="sacct", explain_detail=str(path))
    return frame, log


def settle(log: PassLog, has_ids: bool) -> Settled:
    """The whole-file facts of the pass that filled ``log``.

    Raises:
        AssertionError: the pass did not read the whole file.
    """
    if log.keys is None or log.key_lines is None or log.loose is None or log.loose_lines is None:
        raise AssertionError("the sacct pass did not read the whole file")
    h1, h2, lines = log.keys[:, 0], log.keys[:, 1], log.key_lines
    empty = np.empty(0, dtype=np.int64)
    if not has_ids:
        keys = pl.DataFrame({"h1": h1, "h2": h2})
        return Settled(Known(empty, empty), keys.height - keys.n_unique())
    ordered = np.sort(h1)
    repeated = ordered[1:][ordered[1:] == ordered[:-1]]
    superseded = empty
    if len(repeated):  # exact on both hashes, among the few jobs whose first hash repeats
        some = np.isin(h1, repeated)
        records = pl.DataFrame({"h1": h1[some], "h2": h2[some], "line": lines[some]})
        superseded = records.filter(~pl.struct("h1", "h2").is_last_distinct())["line"].to_numpy()
    loose = pl.DataFrame({"h1": log.loose[:, 0], "h2": log.loose[:, 1],
                          "line": log.loose_lines})
    if loose.height:  # compared with the jobs whose first hash a loose step shares
        wanted = np.unique(log.loose[:, 0])
        at = np.minimum(np.searchsorted(wanted, h1), len(wanted) - 1)
        some = wanted[at] == h1
        jobs = pl.DataFrame({"h1": h1[some], "h2": h2[some]})
        loose = loose.join(jobs, on=["h1", "h2"], how="anti")
    return Settled(Known(np.sort(superseded), np.sort(loose["line"].to_numpy())), None)
