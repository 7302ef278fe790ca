"""Jobs without a logged run time: the hint names an option that exists, and the option works.

``simulate``, ``evaluate`` and ``whatif`` drop such jobs by default and say so; the note names
``--unknown-run-time SECONDS``, and giving it replays them with that run time.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_helpers import invoke

from benchmarks.builders.job_tables import job_table, write_job_table

ROWS = [{"submit": 600 * i, "wait": 0, "run_time_s": None if i == 3 else 50, "req_cpus": 1,
         "req_walltime_s": 100} for i in range(12)]


@pytest.fixture
def table(tmp_path: Path) -> Path:
    return write_job_table(tmp_path / "jobs.parquet", job_table(ROWS), [{"MaxProcs": 4}])


def test_the_hint_names_a_real_option_and_it_keeps_the_job(table: Path) -> None:
    dropped = invoke("simulate", str(table))
    assert dropped.exit_code == 0, dropped.output
    assert "unknown_run_time_s" not in dropped.output
    assert "--unknown-run-time SECONDS" in " ".join(dropped.output.split())
    kept = invoke("simulate", str(table), "--unknown-run-time", "60")
    assert kept.exit_code == 0, kept.output
    text = " ".join(kept.output.split())  # the terminal wraps long lines
    assert "12 jobs" in text and "dropped" not in text
    assert "1 jobs without a logged run time replayed with 60 s" in text


def test_evaluate_and_whatif_take_the_option(table: Path, tmp_path: Path) -> None:
    ev = invoke("evaluate", str(table), "--policy", "fcfs", "--windows", "1",
                "--window-size", "12", "--split", "all", "--unknown-run-time", "60")
    assert ev.exit_code == 0, ev.output
    out = tmp_path / "rep"
    wi = invoke("whatif", str(table), "-c", "sjf", "--period", "1h", "--bootstrap", "100",
                "--unknown-run-time", "60", "-o", str(out))
    assert wi.exit_code == 0, wi.output
    doc = json.loads((out / "report.json").read_text())
    assert doc["input"]["jobs"] == 12
    assert not any("unknown_run_time_s" in note for note in doc["notes"])
