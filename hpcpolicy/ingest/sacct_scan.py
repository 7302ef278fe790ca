"""Lines and fields of a sacct export, and the one global pass that finds superseded records.

The rows of an export are read as whole lines (so that a rejected row keeps its exact text)
and split into fields with vectorised string expressions. Which records are superseded
(``sacct --duplicates`` prints every requeued run of a job; only the last one is kept) and
which step rows have no job row is a property of the whole file, so :func:`scan_records`
reads the job-id column once before the main pass and hands it the line numbers concerned.
Its memory grows with the number of rows (14 bytes each), not with their width.

Example:
    >>> from pathlib import Path
    >>> from hpcpolicy.ingest.sacct_layout import read_layout
    >>> layout = read_layout(Path("sacct.txt"))  # doctest: +SKIP
    >>> records = scan_records(Path("sacct.txt"), layout)  # doctest: +SKIP
    >>> records.superseded_lines.len()  # doctest: +SKIP
    0
"""

from __future__ import annotations

import codecs
import gzip
import os
import tempfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from hpcpolicy.errors import InputFormatError
from hpcpolicy.ingest.detect import is_gzip
from hpcpolicy.ingest.sacct_layout import SacctLayout

__all__ = [
    "Fields",
    "SacctRecords",
    "decoded_copy",
    "id_text",
    "line_source",
    "scan_records",
    "split_fields",
    "step_flag",
]

_CSV_FIELD = r',(?:"(?:[^"]|"")*"|[^,"]*)'
"""One CSV field with its leading comma (the line is read with a comma put in front)."""


def line_source(path: Path, layout: SacctLayout, lossy: bool) -> pl.LazyFrame:
    """The export's data rows: ``_line`` (1-based line number), ``_raw`` (the exact text) and
    ``_bad_bytes`` (True where a ``lossy`` copy shows a replaced byte, U+FFFD).

    Header lines (the first one and repeats of it in concatenated exports) and empty lines
    are not rows (a line of spaces is a row, rejected for its field count).
    """
    frame = pl.scan_lines(path, name="_raw", row_index_name="_line", row_index_offset=1)
    bad = pl.col("_raw").str.contains("\ufffd", literal=True) if lossy else pl.lit(False)
    frame = frame.select(pl.col("_line").cast(pl.Int64), pl.col("_raw"), bad.alias("_bad_bytes"))
    keep = (pl.col("_line") >= layout.first_row) & (pl.col("_raw").str.len_bytes() > 0)
    if layout.header_line is not None:
        keep &= pl.col("_raw") != layout.header_line
    return frame.filter(keep)


def decoded_copy(path: Path) -> Path:
    """A UTF-8 copy of a file that is not valid UTF-8 (plain or gzipped), each bad byte
    replaced by U+FFFD and every line where it was. The caller deletes it."""
    fd, name = tempfile.mkstemp(prefix=f"hpcpolicy-{path.name[:40]}-", suffix=".utf8")
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    opener = gzip.open if is_gzip(path) else open
    try:
        with opener(path, "rb") as src, os.fdopen(fd, "w", encoding="utf-8", newline="") as out:
            while chunk := src.read(1 << 22):
                out.write(decoder.decode(chunk))
            out.write(decoder.decode(b"", final=True))
    except (OSError, EOFError, zlib.error) as exc:
        Path(name).unlink(missing_ok=True)
        raise _unreadable(path, exc) from None
    return Path(name)


def id_text(raw: pl.Expr, layout: SacctLayout, index: int) -> pl.Expr:
    """Field ``index`` of each line without splitting the rest (the job id of every row)."""
    if layout.style == "csv":
        return _csv_field(pl.concat_str(pl.lit(","), raw).str.extract_all(_CSV_FIELD), index)
    return raw.str.extract(rf"^(?:[^|]*\|){{{index}}}([^|]*)", 1)


def step_flag(raw: pl.Expr, layout: SacctLayout, index: int) -> pl.Expr:
    """True for step rows (``123.batch``): the id field (column ``index``) holds a ``.``."""
    if layout.style != "csv" and index == 0:  # the usual layout: two byte searches per line
        dot, bar = raw.str.find(".", literal=True), raw.str.find("|", literal=True)
        return (dot < bar).fill_null(False)
    return id_text(raw, layout, index).str.contains(".", literal=True).fill_null(False)


def _csv_field(matches: pl.Expr, index: int) -> pl.Expr:
    """Field ``index`` (unquoted) of a list of :data:`_CSV_FIELD` matches."""
    m = matches.list.get(index, null_on_oob=True).str.slice(1)
    quoted = m.str.starts_with('"')
    return pl.when(quoted).then(
        m.str.slice(1, m.str.len_chars() - 2).str.replace_all('""', '"', literal=True)
    ).otherwise(m)


@dataclass(frozen=True)
class Fields:
    """The split fields of the rows that are parsed (job rows), and their validity.

    :meth:`get` hands out references to per-field columns; :meth:`with_fields` adds the
    columns asked for, each taken out of the split list once.
    """

    frame: pl.LazyFrame
    """The input frame with the split fields added as a list in column ``_f``."""
    valid: pl.Expr
    """True where the row has exactly the layout's number of fields."""
    layout: SacctLayout
    used: dict[str, pl.Expr] = field(default_factory=dict)
    """Field columns handed out by :meth:`get` -> how to take them out of ``_f``."""

    def get(self, name: str) -> pl.Expr | None:
        """Text of column ``name`` (null for rows not parsed), or None if the export lacks
        the column."""
        i = self.layout.index(name)
        if i is None:
            return None
        key = f"_t{i}"
        if self.layout.style == "csv":
            self.used[key] = _csv_field(pl.col("_f"), i)
        else:
            self.used[key] = pl.col("_f").list.get(i, null_on_oob=True)
        return pl.col(key)

    def with_fields(self) -> pl.LazyFrame:
        """:attr:`frame` with ``_ok`` (:attr:`valid`) and the field columns handed out."""
        return self.frame.with_columns(self.valid.alias("_ok"), **self.used)


def split_fields(frame: pl.LazyFrame, text: pl.Expr, layout: SacctLayout) -> Fields:
    """Split ``text`` (a line, or null for rows not to parse) into the layout's fields.

    A ``|`` inside a field (a job name such as ``pre|post``) adds a field and a line break
    inside one removes some: either way the count is wrong and the row is not valid, so it
    is never parsed with its fields shifted.
    """
    n = layout.n_fields
    if layout.style == "csv":
        line = pl.concat_str(pl.lit(","), text)
        frame = frame.with_columns(line.str.extract_all(_CSV_FIELD).alias("_f"))
        covered = pl.col("_f").list.eval(pl.element().str.len_bytes()).list.sum()
        valid = (pl.col("_f").list.len() == n) & (covered == line.str.len_bytes())
    else:
        frame = frame.with_columns(text.str.split("|").alias("_f"))
        last = pl.col("_f").list.get(n - 1, null_on_oob=True)
        valid = pl.col("_f").list.len() == n
        if layout.style == "parsable":
            valid &= last == ""
    return Fields(frame, valid.fill_null(False), layout)


@dataclass(frozen=True)
class SacctRecords:
    """What the pass over the job-id column found."""

    text: Path
    """The file to read rows from: the export itself, or a decoded copy when it is not valid
    UTF-8 (see ``lossy``; the plan deletes the copy when it is done with)."""
    lossy: bool
    """``text`` is a copy with bad bytes replaced; rows holding one are rejected."""
    superseded_lines: pl.Series
    """Lines of job records followed later in the file by another record of the same job."""
    orphan_lines: pl.Series
    """Lines of step records whose job record is nowhere in the file."""
    copies: int | None
    """Without a job-id column: rows that are exact copies of an earlier row (kept, since
    identical jobs cannot be told apart from copies); None when ids exist."""


def _id_column(layout: SacctLayout) -> int | None:
    i = layout.index("JobID")
    return i if i is not None else layout.index("JobIDRaw")


def _unreadable(path: Path, exc: BaseException) -> InputFormatError:
    return InputFormatError(
        f"{path}: cannot read to the end ({exc}); the file (or its gzip stream) is "
        "truncated or damaged: copy or download it again"
    )


def _collect(path: Path, query: pl.LazyFrame) -> pl.DataFrame:
    """Run the pass; a broken file becomes a one-line InputFormatError."""
    try:
        return query.collect(engine="streaming")
    except OSError as exc:
        raise _unreadable(path, exc) from None


def scan_records(path: Path, layout: SacctLayout) -> SacctRecords:
    """Read the job-id column once and find superseded and orphan records.

    Several records of one job id (``sacct --duplicates``, or exactly repeated rows) keep the
    last one in file order. A step (``123.batch``) whose job ``123`` has no row is an orphan.
    Records are matched on ``JobID`` (else ``JobIDRaw``) through a 64-bit hash; the few rows
    whose hashes repeat are compared exactly in a second, filtered read. Steps are checked
    against the job row before them first and against all job rows only when that differs,
    so the whole pass keeps 14 bytes per row.

    Raises:
        InputFormatError: the file cannot be read to its end (truncated gzip, I/O error).
    """
    index = _id_column(layout)
    text, lossy = path, False
    try:
        frame = _collect(path, _key_query(path, layout, index))
    except pl.exceptions.ComputeError as exc:
        if "utf8" not in str(exc).lower() and "utf-8" not in str(exc).lower():
            raise InputFormatError(f"{path}: {exc}") from None
        text, lossy = decoded_copy(path), True
        frame = _collect(path, _key_query(text, layout, index))
    empty = pl.Series("_line", [], dtype=pl.Int64)
    if index is None:
        copies = frame.height - frame["_hash"].n_unique()
        return SacctRecords(text, lossy, empty, empty, copies)
    jobs = frame.filter(~pl.col("_step") & ~pl.col("_empty"))
    candidates = jobs.filter(pl.col("_hash").is_duplicated())["_line"]
    superseded = empty
    if candidates.len():
        keys = _collect(path, line_source(text, layout, lossy).filter(
            pl.col("_line").is_in(candidates.cast(pl.Int64).implode())
        ).select("_line", id_text(pl.col("_raw"), layout, index).alias("_key")))
        superseded = keys.filter(~pl.col("_key").is_last_distinct())["_line"]
    after_job = frame.with_columns(
        pl.when(~pl.col("_step")).then(pl.col("_hash")).forward_fill().alias("_job")
    ).filter(pl.col("_step") & (pl.col("_hash") != pl.col("_job")).fill_null(True))
    orphans = after_job.filter(~pl.col("_hash").is_in(jobs["_hash"].implode()))["_line"]
    return SacctRecords(text, lossy, superseded.cast(pl.Int64), orphans.cast(pl.Int64), None)


def _key_query(path: Path, layout: SacctLayout, index: int | None) -> pl.LazyFrame:
    """``_line``, ``_hash`` (of the job part of the id: ``123`` for ``123.batch``), ``_step``
    and ``_empty`` (no id) of every data row; without an id column, the line's hash."""
    rows = line_source(path, layout, lossy=False)
    line = pl.col("_line").cast(pl.UInt32)
    raw = pl.col("_raw")
    if index is None:
        return rows.select(line, raw.hash(seed=0).alias("_hash"))
    if layout.style != "csv" and index == 0:  # the usual layout: no split, one short regex
        rows = rows.select("_line", step_flag(raw, layout, index).alias("_step"),
                           raw.str.extract(r"^([^|.]*)", 1).alias("_job"))
        return rows.select(
            line,
            pl.col("_job").hash(seed=0).alias("_hash"),
            "_step",
            (pl.col("_job").fill_null("") == "").alias("_empty"),
        )
    rows = rows.select("_line", id_text(raw, layout, index).alias("_id"))
    rows = rows.with_columns(pl.col("_id").str.find(".", literal=True).alias("_dot"))
    job = pl.when(pl.col("_dot").is_null()).then(pl.col("_id")).otherwise(
        pl.col("_id").str.head(pl.col("_dot")))
    return rows.select(
        line,
        job.hash(seed=0).alias("_hash"),
        pl.col("_dot").is_not_null().alias("_step"),
        (pl.col("_id").fill_null("") == "").alias("_empty"),
    )
