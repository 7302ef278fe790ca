"""Units agree across commands (issue 29 item 12): ``train`` shows "vs best" as the same signed
change as ``evaluate`` (not a ratio), and ``evaluate`` shows waits in h/m like the others."""

from __future__ import annotations

import re
from pathlib import Path

from cli_helpers import invoke

from benchmarks.builders.job_tables import job_table, write_job_table
from hpcpolicy.commands._train_show import _format

ROWS = [{"submit": 60 * i, "wait": 0, "run_time_s": 3000 + 500 * (i % 5),
         "req_cpus": 1 + i % 4, "req_walltime_s": 8000} for i in range(40)]


def test_train_shows_vs_best_as_a_change() -> None:
    text = _format({"env/bsld": 5.112, "env/best_heuristic_bsld": 2.0, "env/bsld_vs_best": 2.556})
    assert "vs best +155.6%" in text and "2.556" not in text


def test_evaluate_shows_waits_as_durations(tmp_path: Path) -> None:
    table = write_job_table(tmp_path / "jobs.parquet", job_table(ROWS), [{"MaxProcs": 4}])
    result = invoke("evaluate", str(table), "--policy", "fcfs", "--windows", "1",
                    "--window-size", "40", "--split", "all")
    assert result.exit_code == 0, result.output
    assert "wait s" not in result.output and "response s" not in result.output
    row = next(line for line in result.output.splitlines() if line.strip().startswith("fcfs"))
    assert re.search(r"\d+\.\dh", row), row
