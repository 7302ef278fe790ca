"""A raw log given where a job table belongs: the message names the log's format and the
ingest command that makes the table, with a *new* name (never the log's own, which ingest
would write over)."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pytest
from cli_helpers import invoke, one_line_error

DATA = Path(__file__).parent / "data"


@pytest.fixture
def swf_gz(tmp_path: Path) -> Path:
    target = tmp_path / "KTH-SP2-1996-2.1-cln.swf.gz"
    with gzip.open(target, "wb") as f:
        f.write((DATA / "stats_tiny.swf").read_bytes())
    return target


@pytest.mark.parametrize("command", ["simulate", "whatif", "stats", "evaluate"])
def test_a_raw_swf_log_gets_the_ingest_command(command: str, swf_gz: Path) -> None:
    line = one_line_error(invoke(command, str(swf_gz)))
    assert "an SWF log, not a job table" in line
    table = swf_gz.parent / "KTH-SP2-1996-2.1-cln.parquet"
    assert f"`hpcpolicy ingest {swf_gz} -o {table}`" in line
    assert f"-o {swf_gz.name}" not in line and f"-o {swf_gz}`" not in line


def test_a_raw_sacct_export_gets_the_ingest_command(tmp_path: Path) -> None:
    log = tmp_path / "jobs.txt"
    shutil.copy(DATA / "sacct_quirks.txt", log)
    line = one_line_error(invoke("simulate", str(log)))
    assert "a Slurm sacct log, not a job table" in line
    assert f"`hpcpolicy ingest {log} -o {tmp_path / 'jobs.parquet'}`" in line


def test_a_foreign_parquet_file_is_not_told_to_overwrite_itself(tmp_path: Path) -> None:
    import polars as pl

    other = tmp_path / "mine.parquet"
    pl.DataFrame({"a": [1]}).write_parquet(other)
    line = one_line_error(invoke("simulate", str(other)))
    assert "not an hpcpolicy job table" in line
    assert "-o mine.parquet" not in line and f"-o {other}" not in line
