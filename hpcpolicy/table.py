"""Open a job table written by ``hpcpolicy ingest`` and check it is one this version reads.

Every reader of ``jobs.parquet`` (stats, workload building, cluster resolution) goes through
:func:`open_job_table`, so a missing file, a foreign Parquet file or a table of another schema
version gets the same clear message everywhere.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from hpcpolicy.errors import InputFormatError, SchemaValidationError
from hpcpolicy.schema import JOB_COLUMNS, METADATA_PREFIX, SCHEMA_VERSION, polars_schema

__all__ = ["JobTable", "open_job_table"]


@dataclass(frozen=True)
class JobTable:
    """A checked job table: its lazy frame and what its Parquet metadata says."""

    path: Path
    """The Parquet file."""
    frame: pl.LazyFrame
    """Lazy scan of the table (canonical columns, checked)."""
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


def open_job_table(path: str | Path) -> JobTable:
    """Open a job table written by ``hpcpolicy ingest`` and check it is one this version reads.

    Args:
        path: the ``NAME.parquet`` file.

    Returns:
        The lazy table and its metadata; nothing but the footer has been read.

    Raises:
        InputFormatError: the file is missing or is a folder.
        SchemaValidationError: not a Parquet file, not a job table, a table of another major
            schema version, or canonical columns missing or of the wrong type.

    Example:
        >>> table = open_job_table("jobs.parquet")  # doctest: +SKIP
        >>> table.metadata["schema_version"]  # doctest: +SKIP
        '1.1'
    """
    path = Path(path)
    if not path.exists():
        raise InputFormatError(f"{path}: no such file; make one with `hpcpolicy ingest LOG -o "
                               f"{path}`")
    if path.is_dir():
        raise InputFormatError(f"{path}: is a folder; give the NAME.parquet job table inside it")
    remake = f"make one with `hpcpolicy ingest LOG -o {path.name}`"
    try:
        raw = pl.read_parquet_metadata(path)
    except (pl.exceptions.PolarsError, OSError) as exc:
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
    frame = pl.scan_parquet(path)
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
    return JobTable(path=path, frame=frame, metadata=meta)
