"""Every named choice of the command line is accepted in any case (``-b EASY``, ``--algo PPO``).

Each command runs on a tiny table; a choice written in capitals must give the same result as
the same choice in lower case, never a refusal.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from cli_helpers import invoke

from benchmarks.builders.job_tables import job_table, write_job_table

JOBS = [{"submit": 10 * i, "wait": 0, "run_time_s": 50 + i, "req_cpus": 1 + i % 4,
         "req_walltime_s": 100, "user": "ann", "partition": "batch"} for i in range(12)]


@pytest.fixture
def table(tmp_path: Path) -> Path:
    return write_job_table(tmp_path / "jobs.parquet", job_table(JOBS), [{"MaxProcs": 4}])


def _same_output(lower: list[str], upper: list[str]) -> None:
    low, up = invoke(*lower), invoke(*upper)
    assert low.exit_code == 0, low.output
    assert up.exit_code == 0, up.output
    assert _no_times(up.stdout) == _no_times(low.stdout)


def _no_times(text: str) -> str:
    """The output without its wall-clock timings."""
    return re.sub(r"\d+\.\d+ s\b", "T s", text)


def test_simulate_choices_in_capitals(table: Path) -> None:
    _same_output(
        ["simulate", str(table), "-p", "sjf", "-b", "easy", "--procs-from", "requested",
         "--walltime-fallback", "max", "--engine", "fast"],
        ["simulate", str(table), "-p", "SJF", "-b", "EASY", "--procs-from", "REQUESTED",
         "--walltime-fallback", "MAX", "--engine", "FAST"])


def test_evaluate_choices_in_capitals(table: Path) -> None:
    _same_output(
        ["evaluate", str(table), "--policy", "fcfs,sjf", "-b", "none,easy", "--windows", "1",
         "--window-size", "6", "--split", "all"],
        ["evaluate", str(table), "--policy", "FCFS,Sjf", "-b", "NONE,Easy", "--windows", "1",
         "--window-size", "6", "--split", "ALL"])


@pytest.mark.slow  # over the ten-minute budget of the default suite; run with -m slow
def test_whatif_metric_and_specs_in_capitals(table: Path, tmp_path: Path) -> None:
    common = ["--period", "1h", "--bootstrap", "100"]
    low = invoke("whatif", str(table), "--baseline", "fcfs+easy", "-c", "sjf+none",
                 "--metric", "mean_wait_s", "-o", str(tmp_path / "a"), *common)
    up = invoke("whatif", str(table), "--baseline", "FCFS+EASY", "-c", "SJF+NONE",
                "--metric", "MEAN_WAIT_S", "-o", str(tmp_path / "b"), *common)
    assert low.exit_code == 0, low.output
    assert up.exit_code == 0, up.output
    assert up.stdout.replace(str(tmp_path / "b"), "X") == \
        low.stdout.replace(str(tmp_path / "a"), "X")


def test_train_algo_in_capitals_reaches_the_input_check(tmp_path: Path) -> None:
    """``--algo PPO`` is read as ppo: the run stops on the missing table, not on the name."""
    result = invoke("train", str(tmp_path / "missing.parquet"), "--algo", "PPO")
    assert result.exit_code == 1
    assert "unknown --algo" not in result.output
    assert "missing.parquet" in result.output


def test_ingest_format_in_capitals(tmp_path: Path) -> None:
    swf = Path(__file__).parent / "data" / "stats_tiny.swf"
    low = invoke("ingest", str(swf), "--format", "swf", "-o", str(tmp_path / "a.parquet"))
    up = invoke("ingest", str(swf), "--format", "SWF", "-o", str(tmp_path / "b.parquet"))
    assert low.exit_code == 0, low.output
    assert up.exit_code == 0, up.output
