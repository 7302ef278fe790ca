"""Hand-made canonical job tables for workload, cluster and simulate tests."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl

from hpcpolicy.schema import METADATA_PREFIX, SCHEMA_VERSION, polars_schema

T0 = datetime(2024, 3, 1, 12, 0, tzinfo=UTC)


def job_table(rows: list[dict[str, Any]]) -> pl.DataFrame:
    """A canonical job table: ``submit``/``wait`` in seconds after T0, unnamed columns null,
    ``job_id`` 1, 2, ... unless given."""
    schema = polars_schema()
    cols: dict[str, list[Any]] = {name: [] for name in schema.names()}
    for i, row in enumerate(rows):
        row = dict(row)
        submit = T0 + timedelta(seconds=row.pop("submit"))
        wait = row.pop("wait", None)
        values = {
            "job_id": str(i + 1), "submit_time": submit, "state": "completed",
            "wait_time_s": wait,
            "start_time": submit + timedelta(seconds=wait) if wait is not None else None,
            **row,
        }
        for name in cols:
            cols[name].append(values.get(name))
    return pl.DataFrame(cols, schema=schema)


def write_job_table(path: Path, frame: pl.DataFrame,
                    header: list[dict[str, Any]] | None = None) -> Path:
    """Write ``frame`` as ``hpcpolicy ingest`` would: with schema version and header metadata."""
    frame.write_parquet(path, metadata={
        f"{METADATA_PREFIX}schema_version": SCHEMA_VERSION,
        f"{METADATA_PREFIX}header": json.dumps(header or []),
    })
    return path
