"""Hostile log text through ``hpcpolicy ingest``: out-of-range times, Rich markup and control
characters in the log, duplicate job ids, and a ``|`` inside a sacct job name (issue 28)."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from cli_helpers import invoke, one_line_error
from conftest import DATA

TINY = DATA / "stats_tiny.swf"


def _swf_with_origin(tmp_path: Path, origin: str) -> Path:
    text = TINY.read_text().replace("; UnixStartTime: 1709294400", f"; UnixStartTime: {origin}")
    path = tmp_path / "bad.swf"
    path.write_text(text)
    return path


@pytest.mark.parametrize("origin", ["253402300800", "-99999999999", "99999999999999999999999"])
def test_swf_start_time_out_of_range_is_one_line(tmp_path: Path, origin: str) -> None:
    log = _swf_with_origin(tmp_path, origin)
    line = one_line_error(invoke("ingest", str(log), "-o", str(tmp_path / "t.parquet")))
    assert "UnixStartTime" in line and origin in line
    assert not list(tmp_path.glob("t.*"))


def test_swf_times_past_year_9999_are_rejected_not_a_traceback(tmp_path: Path) -> None:
    # the latest origin allowed plus a submit offset runs past 9999-12-31: the row is absurd
    log = _swf_with_origin(tmp_path, "253402300000")
    result = invoke("ingest", str(log), "-o", str(tmp_path / "t.parquet"),
                    "--max-reject-fraction", "1")
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "t.ingest.json").read_text())
    assert report["rejected_by_reason"].get("absurd_value", 0) >= 1
    table = pl.read_parquet(tmp_path / "t.parquet")
    assert table["submit_time"].null_count() == 0


def test_table_with_null_submit_time_is_refused(tmp_path: Path) -> None:
    from hpcpolicy.errors import SchemaValidationError
    from hpcpolicy.table import open_job_table

    invoke("ingest", str(TINY), "-o", str(tmp_path / "t.parquet"))
    good = pl.read_parquet(tmp_path / "t.parquet")
    meta = pl.read_parquet_metadata(tmp_path / "t.parquet")
    bad = good.with_columns(pl.when(pl.col("job_id") == "3").then(None)
                            .otherwise(pl.col("submit_time")).alias("submit_time"))
    bad.write_parquet(tmp_path / "bad.parquet", metadata=meta)
    with pytest.raises(SchemaValidationError, match="submit_time") as info:
        open_job_table(tmp_path / "bad.parquet")
    assert "\n" not in str(info.value)
    line = one_line_error(invoke("simulate", str(tmp_path / "bad.parquet")))
    assert "null submit_time" in line


@pytest.mark.parametrize("value", ["[/]", "[link=https://example.org]click[/link]",
                                   "[bold red]x\x1b[31m\x07\u202e"])
def test_log_text_is_printed_plainly(tmp_path: Path, value: str) -> None:
    # A header value the reader quotes in a note, in a file whose name is markup too: printed
    # as text, never as Rich markup, with control characters shown escaped.
    text = TINY.read_text().replace("; UnixStartTime: 1709294400", f"; UnixStartTime: {value}")
    log = tmp_path / "[bold]odd.swf"
    log.write_text(text)
    result = invoke("ingest", str(log), "-o", str(tmp_path / "[i]t.parquet"))
    assert result.exit_code == 0, result.output
    shown = value.replace("\x1b", "\\x1b").replace("\x07", "\\x07").replace(
        "\u202e", "\\u202e")
    assert shown in result.stdout and "[bold]odd.swf" in result.stdout
    assert "[i]t.parquet" in result.stdout
    assert "\x1b" not in result.stdout and "\x07" not in result.stdout


def test_error_line_escapes_control_characters(tmp_path: Path) -> None:
    missing = tmp_path / "gone\x1b[2J\x07.swf"
    line = one_line_error(invoke("ingest", str(missing), "-o", str(tmp_path / "t.parquet")))
    assert "gone\\x1b[2J\\x07.swf" in line
