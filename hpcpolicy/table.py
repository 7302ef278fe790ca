"""Open a job table written by ``hpcpolicy ingest`` and check it is one this version reads.

Every reader of ``jobs.parquet`` (stats, workload building, cluster resolution) goes through
:func:`open_job_table`, so a missing file, a foreign Parquet file or a table of another schema
version gets the same clear message everywhere.

The table is opened once: its lazy frame reads from that open file (Polars keeps its own copy
of the descriptor), not from the name. ``ingest --overwrite`` replaces a table by renaming a new
file over it, so a reader keeps reading the version it opened, whole, however many queries it
runs, while the next reader gets the new one; nothing is copied into memory for that.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from hpcpolicy.atomic import finish_commit, journal_for
from hpcpolicy.errors import InputFormatError, SchemaValidationError
from hpcpolicy.schema import JOB_COLUMNS, METADATA_PREFIX, SCHEMA_VERSION, polars_schema

__all__ = ["JobTable", "open_job_table"]


@dataclass(frozen=True)
class JobTable:
    """A checked job table: its lazy frame and what its Parquet metadata says."""

    path: Path
    """The Parquet file's name (the file itself may have been replaced since)."""
    frame: pl.LazyFrame
    """Lazy scan of the table as it was opened (canonical columns, checked)."""
    metadata: dict[str, str]
    """The ``hpcpolicy.*`` key-value metadata, prefix removed."""

    @property
    def headers(self) -> list[dict[str, Any]]:
        """Header facts of each source log (SWF ``MaxProcs``, ...), as ingest stored them."""
        return _json_list(self.metadata.get("header"))


def _json_list(text: str | None) -> list[dict[str, Any]]:
    try:
        value = json.loads(text) if text else []
    except json.JSONDecodeError:
        return []
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


_FORMAT_NAMES = {"swf": "an SWF", "sacct": "a Slurm sacct", "alibaba": "an Alibaba GPU-trace",
                 "helios": "a Helios", "philly": "a Philly"}
_LOG_SUFFIXES = (".gz", ".swf", ".csv", ".txt", ".log", ".sacct", ".parquet")


def _table_name(path: Path) -> Path:
    """A job-table name beside ``path`` that is not ``path`` itself: the log's name without
    its log suffixes, ``.parquet`` (``KTH.swf.gz`` -> ``KTH.parquet``)."""
    name = path.name
    while (suffix := Path(name).suffix.lower()) in _LOG_SUFFIXES and suffix:
        name = name[: -len(suffix)]
    candidate = path.with_name(f"{name or 'jobs'}.parquet")
    return candidate if candidate != path else path.with_name(f"{name}.jobs.parquet")


def _refuse_raw_log(path: Path) -> None:
    """Raise the message for a raw log given where a job table belongs, when ``path`` is one.

    Raises:
        InputFormatError: ``path`` is a log that ``hpcpolicy ingest`` reads.
    """
    from hpcpolicy.ingest.detect import detect_format

    try:
        fmt = detect_format(path)
    except InputFormatError:
        return
    table = _table_name(path)
    raise InputFormatError(
        f"{path}: {_FORMAT_NAMES.get(fmt, 'a raw')} log, not a job table; make the table first "
        f"with `hpcpolicy ingest {path} -o {table}`, then give {table} here")


def open_job_table(path: str | Path | JobTable) -> JobTable:
    """Open a job table written by ``hpcpolicy ingest`` and check it is one this version reads.

    Args:
        path: the ``NAME.parquet`` file; a table already opened is returned as it is, so
            that a reader given one reads that version.

    Returns:
        The lazy table and its metadata; nothing but the footer and the submit-time
        column has been read. The frame reads the file opened here, even once another
        has been renamed over ``path``.

    Raises:
        InputFormatError: the file is missing, is a folder, or is a raw log (the message gives
            the ingest command that makes its table).
        SchemaValidationError: not a Parquet file, not a job table, a table of another major
            schema version, canonical columns missing or of the wrong type, or a job without
            a submit time.

    Example:
        >>> table = open_job_table("jobs.parquet")  # doctest: +SKIP
        >>> table.metadata["schema_version"]  # doctest: +SKIP
        '1.1'
    """
    if isinstance(path, JobTable):
        return path
    path = Path(path)
    finish_commit(journal_for(path))  # an ingest killed while renaming: finish it first
    if not path.exists():
        raise InputFormatError(f"{path}: no such file; make one with `hpcpolicy ingest LOG -o "
                               f"{path}`")
    if path.is_dir():
        raise InputFormatError(f"{path}: is a folder; give the NAME.parquet job table inside it")
    remake = f"make one from your log with `hpcpolicy ingest LOG -o {_table_name(path)}`"
    try:
        with path.open("rb") as handle:  # the one opening: metadata and frame read this file
            raw = pl.read_parquet_metadata(handle)
            handle.seek(0)
            frame = pl.scan_parquet(handle)  # Polars keeps a duplicate of the descriptor
    except (pl.exceptions.PolarsError, OSError) as exc:
        _refuse_raw_log(path)
        raise SchemaValidationError(
            f"{path}: not a Parquet file ({str(exc).splitlines()[0]}); {remake}"
        ) from None
    meta = {k[len(METADATA_PREFIX):]: v for k, v in raw.items() if k.startswith(METADATA_PREFIX)}
    version = meta.get("schema_version")
    if version is None:
        raise SchemaValidationError(
            f"{path}: a Parquet file but not an hpcpolicy job table (no "
            f"{METADATA_PREFIX}schema_version metadata); {remake}"
        )
    if version.split(".")[0] != SCHEMA_VERSION.split(".")[0]:
        raise SchemaValidationError(
            f"{path}: job-table schema {version}, but this hpcpolicy reads schema "
            f"{SCHEMA_VERSION.split('.')[0]}.x; re-ingest the log with this version "
            f"(`hpcpolicy ingest LOG -o {path.name} --overwrite`)"
        )
    found = frame.collect_schema()
    minor = int(version.split(".")[1]) if version.count(".") == 1 and (
        version.split(".")[1].isdigit()) else 0
    added = [c for c in JOB_COLUMNS if c.since > minor and c.name not in found]
    if added:  # an older 1.x table: the columns added since read as unknown
        frame = frame.with_columns(pl.lit(None, dtype=c.dtype).alias(c.name) for c in added)
        found = frame.collect_schema()
    wrong = [
        f"{name} ({'missing' if name not in found else f'{found[name]}, expected {dtype}'})"
        for name, dtype in polars_schema().items()
        if found.get(name) != dtype
    ]
    if wrong:
        raise SchemaValidationError(
            f"{path}: not a valid job table (schema {version}): columns {', '.join(wrong)}; "
            f"{remake} --overwrite"
        )
    nulls = frame.select(pl.col("submit_time").null_count()).collect().item()
    if nulls:  # every tool places a job in time by its submit: a table never lacks one
        raise SchemaValidationError(
            f"{path}: {nulls} job(s) with a null submit_time; a job table places every job "
            f"in time; {remake} --overwrite")
    return JobTable(path=path, frame=frame, metadata=meta)
