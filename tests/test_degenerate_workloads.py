"""Workloads the what-if cannot answer for say so (issue 28, item 11): every job larger than the
machine, a window of no jobs, a run time of 31,700 years."""

from __future__ import annotations

import json
import re
from pathlib import Path

import polars as pl
import pytest
from cli_helpers import invoke, one_line_error
from conftest import DATA

TINY = DATA / "stats_tiny.swf"
WHATIF = ("-c", "sjf+easy", "--bootstrap", "100", "--period", "1h")


def _table(tmp_path: Path, text: str, name: str = "t") -> Path:
    log = tmp_path / f"{name}.swf"
    log.write_text(text)
    out = tmp_path / f"{name}.parquet"
    assert invoke("ingest", str(log), "-o", str(out)).exit_code == 0
    return out


def _every_job_wider(factor_text: str) -> str:
    # processors allocated and requested (fields 5 and 8) of every job set to 64 > MaxProcs 16
    rows = []
    for line in factor_text.splitlines():
        fields = line.split()
        if fields and not line.startswith(";"):
            fields[4] = fields[7] = "64"
            line = " ".join(fields)
        rows.append(line)
    return "\n".join(rows) + "\n"


def test_whatif_when_no_job_fits_the_machine(tmp_path: Path) -> None:
    table = _table(tmp_path, _every_job_wider(TINY.read_text()))
    line = one_line_error(invoke("whatif", str(table), *WHATIF, "-o", str(tmp_path / "r")))
    assert "none of the 8 jobs fits" in line and "16" in line and "64" in line
    assert not (tmp_path / "r").exists()


def test_fidelity_does_not_deny_logged_starts(tmp_path: Path) -> None:
    from hpcpolicy.site.measure import fidelity

    logged = pl.DataFrame({"submit": [0, 10], "logged_start": [5, 20], "start": [None, None],
                           "wait": [None, None]}, schema_overrides={
        "start": pl.Int64, "wait": pl.Int64})
    reason = fidelity(logged, 0, "as-logged/fcfs+easy")["reason"]
    assert "records no start times" not in reason and "has a start" not in reason
    assert "logged start" in reason


@pytest.mark.parametrize(("option", "value"), [("--window-size", "0"), ("--windows", "0")])
def test_simulate_zero_windows_is_an_error(tmp_path: Path, option: str, value: str) -> None:
    table = _table(tmp_path, TINY.read_text())
    args = ["simulate", str(table), "--windows", "2", "--window-size", "4"]
    args[args.index(option) + 1] = value
    line = one_line_error(invoke(*args))
    assert line.startswith(f"error: {option}: ") and line.endswith(f"not {value}")


def test_whatif_with_an_absurd_run_time_is_an_error_not_139_gib(tmp_path: Path) -> None:
    table = _table(tmp_path, TINY.read_text())
    meta = pl.read_parquet_metadata(table)
    huge = pl.read_parquet(table).with_columns(
        pl.when(pl.col("job_id") == "3").then(10**12).otherwise(pl.col("run_time_s"))
        .alias("run_time_s"))
    huge.write_parquet(tmp_path / "huge.parquet", metadata=meta)
    line = one_line_error(invoke("whatif", str(tmp_path / "huge.parquet"), *WHATIF[:-2],
                                 "-o", str(tmp_path / "r")))
    assert "job 3" in line and "--period" in line
    assert re.search(r"\d[\d,]* windows", line)


def test_report_states_jobs_that_never_fit(tmp_path: Path) -> None:
    # three of eight jobs wider than the machine: the report runs and counts them
    text = TINY.read_text().splitlines()
    rows = [ln for ln in text if ln.strip() and not ln.startswith(";")]
    wide = _every_job_wider("\n".join(rows[:3])).splitlines()
    table = _table(tmp_path, "\n".join([ln for ln in text if ln.startswith(";")] + wide
                                       + rows[3:]) + "\n")
    result = invoke("whatif", str(table), *WHATIF, "-o", str(tmp_path / "r"))
    assert result.exit_code == 0, result.output
    doc = json.loads((tmp_path / "r" / "report.json").read_text())
    assert doc["runs"][0]["never_fits"] == 3
