"""Rows of a comma-separated trace with a header line, as text columns, read lazily.

The GPU-trace readers share this scan: :func:`read_header` checks the header against a
:class:`~hpcpolicy.ingest.gpu.layouts.CsvLayout` (a missing column is a one-line error naming
it), and :func:`scan_csv` gives one row per data line with

* one String column per layout column (null where the file lacks an optional column), the
  field text with surrounding blanks removed;
* ``_line`` (1-based line number), ``_raw`` (the line's text) and ``_reason``:
  ``non_utf8`` or ``field_count`` when the line cannot be split into the header's fields
  (its columns are then null), else null.

Fields may be quoted (``"a,b"``); a quoted field may not span lines. Blank lines are skipped.
Plain and gzipped files are read as a stream of pieces of whole lines
(:class:`~hpcpolicy.ingest.text_chunks.LineChunks`, which holds every line, and so every
field, to the header's :class:`~hpcpolicy.limits.Limits` as it reads); the lines are
split into fields by Polars, and only lines with a quote by Python's csv module.

Example:
    >>> import pathlib, tempfile
    >>> from hpcpolicy.ingest.gpu.layouts import HELIOS
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "log.csv"
    >>> _ = p.write_text("job_id,state,submit_time\\n7,COMPLETED,2020-06-09 18:41:01\\n8,x\\n")
    >>> rows = scan_csv(p, read_header(p, HELIOS)).collect()
    >>> rows.select("_line", "job_id", "state", "_reason").rows()
    [(2, '7', 'COMPLETED', None), (3, None, None, 'field_count')]
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from hpcpolicy.errors import InputFormatError
from hpcpolicy.ingest.detect import head_text
from hpcpolicy.ingest.gpu.layouts import CsvLayout
from hpcpolicy.ingest.text_chunks import LineChunks, lazy_frames
from hpcpolicy.limits import Limits

__all__ = ["PIECE_BYTES", "CsvHeader", "read_header", "scan_csv", "split_fields"]

PIECE_BYTES = 4 << 20
"""Bytes of whole lines read and turned into one batch of rows at a time (half the compiled
scanners' pieces: on 500,000 Helios rows, 8 MiB pieces took 470 MB and 4 MiB 310 MB)."""


@dataclass(frozen=True)
class CsvHeader:
    """Where each layout column sits in one file."""

    layout: CsvLayout
    """The layout the file was checked against."""
    width: int
    """Fields in the header line (every data line must have as many)."""
    index: dict[str, int]
    """Layout column -> 0-based field position, for the columns the file has."""
    limits: Limits
    """The bounds the file's lines are read with."""


def split_fields(line: str) -> list[str]:
    """The comma-separated fields of one line, blanks around each removed, quotes honoured."""
    fields = next(csv.reader([line])) if '"' in line else line.split(",")
    return [f.strip() for f in fields]


def read_header(path: Path, layout: CsvLayout, limits: Limits | None = None) -> CsvHeader:
    """Check the header line of ``path`` against ``layout``.

    Raises:
        InputFormatError: the file is missing or empty, the header is longer or wider than
            ``limits`` (default :class:`Limits()`) allow, a required column is missing, or a
            column the layout reads appears twice; the message names the column and lists
            the columns the layout needs.
    """
    limits = limits or Limits()
    lines = head_text(path, limits.header_bytes + 1).splitlines()
    at, first = next(((i, ln) for i, ln in enumerate(lines, 1) if ln.strip()), (1, ""))
    if len(first.encode()) > limits.header_bytes:
        raise limits.header_error(str(path), at)
    limits.check_columns(first.count(",") + 1, str(path), at)
    names = [f.strip('"').lower() for f in split_fields(first)]
    needs = ", ".join(layout.required)
    missing = [c for c in layout.required if c not in names]
    if missing:
        shown = first if len(first) <= 80 else first[:77] + "..."
        raise InputFormatError(
            f"{path}: line 1: column {missing[0]!r} missing; the {layout.name} format "
            f"({layout.title}) needs the columns {needs} (line 1 reads {shown!r})"
        )
    twice = [c for c in layout.columns if names.count(c) > 1]
    if twice:
        raise InputFormatError(f"{path}: line 1: column {twice[0]!r} appears twice; keep one")
    index = {c: names.index(c) for c in layout.columns if c in names}
    return CsvHeader(layout=layout, width=len(names), index=index, limits=limits)


def _decoded(data: bytes) -> tuple[list[str], list[bool] | None]:
    """Whole lines as text without their newline, and which were not UTF-8 (None: all were)."""
    try:
        return data.decode("utf-8").removesuffix("\n").split("\n"), None
    except UnicodeDecodeError:
        lines = data.removesuffix(b"\n").split(b"\n")
        bad = []
        for line in lines:
            try:
                line.decode("utf-8")
                bad.append(False)
            except UnicodeDecodeError:
                bad.append(True)
        return [line.decode("utf-8", errors="replace") for line in lines], bad


def _fields(raw: pl.Series) -> pl.Series:
    """Each line's fields (quoted lines split as CSV, the others at every comma); a line the
    CSV rules cannot split has none (a ``field_count`` reject)."""
    fields = raw.str.split(",")
    quoted = raw.str.contains('"', literal=True)
    if not quoted.any():
        return fields
    parsed: list[list[str] | None] = [None] * len(raw)
    for i in quoted.arg_true():
        try:
            parsed[i] = next(csv.reader([raw[i]]))
        except csv.Error:  # a bare \r outside quotes: no CSV row, so none of its fields
            parsed[i] = []
    return pl.select(pl.when(quoted).then(pl.Series(parsed, dtype=pl.List(pl.String)))
                     .otherwise(fields)).to_series()


def _batches(path: Path, header: CsvHeader) -> Iterator[pl.DataFrame]:
    """Frames of the scan schema, one per piece of the file, in file order."""
    layout = header.layout
    first = 1
    header_seen = False
    article = "an" if layout.title[0] in "AEIOU" else "a"
    chunks = LineChunks(path, f"{article} {layout.title}", limits=header.limits,
                        piece_bytes=PIECE_BYTES)
    for buf, end in chunks.pieces():
        texts, bad = _decoded(buf[:end].tobytes())
        frame = pl.DataFrame({
            "_line": pl.int_range(first, first + len(texts), eager=True),
            "_raw": pl.Series(texts, dtype=pl.String).str.strip_chars_end("\r"),
            "_bad": bad if bad is not None else [False] * len(texts),
        }).filter(pl.col("_raw").str.strip_chars() != "")  # blank lines are not rows
        first += len(texts)
        if not header_seen and frame.height:
            frame, header_seen = frame.slice(1), True
        fields = _fields(frame["_raw"])
        reason = (pl.when(pl.col("_bad")).then(pl.lit("non_utf8"))
                  .when(pl.col("_f").list.len() != header.width).then(pl.lit("field_count")))
        yield frame.with_columns(_f=fields).with_columns(_reason=reason).select(
            "_line", "_raw", "_reason",
            *[pl.when(pl.col("_reason").is_null() & pl.lit(c in header.index))
              .then(pl.col("_f").list.get(header.index.get(c, 0), null_on_oob=True)
                    .str.strip_chars()).alias(c)
              for c in layout.columns],
        ).cast(dict(_schema(layout)))  # type: ignore[arg-type]


def _schema(layout: CsvLayout) -> pl.Schema:
    return pl.Schema({"_line": pl.Int64(), "_raw": pl.String(), "_reason": pl.String(),
                      **{c: pl.String() for c in layout.columns}})


def scan_csv(path: Path, header: CsvHeader) -> pl.LazyFrame:
    """A lazy frame with one row per data line of ``path`` (see the module docstring).

    Reading happens when the frame is collected; a damaged gzip stream then raises
    :class:`InputFormatError`.
    """

    return lazy_frames(lambda: _batches(path, header), _schema(header.layout),
                       header.layout.name, path)
