"""``--walltime-fallback max`` says exactly what it used, for how many jobs, and who ran past it.

The issue's case: one partition records no requested walltime at all, so its jobs fall back to
the longest request of the *whole log* (another partition's limit), and many of them ran far
longer. The note must say so, as a warning, and suggest the alternatives.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_helpers import invoke

from benchmarks.builders.job_tables import job_table, write_job_table
from hpcpolicy.errors import ConfigError
from hpcpolicy.workload import Workload, WorkloadOptions

# partition "standard": requests of 1 h and 2 h; "hybrid": no request at all, and three of its
# four jobs run longer than the 2 h that the whole log's longest request allows.
ROWS = [
    {"submit": 0, "run_time_s": 600, "req_cpus": 1, "req_walltime_s": 3600,
     "partition": "standard"},
    {"submit": 10, "run_time_s": 900, "req_cpus": 1, "req_walltime_s": 7200,
     "partition": "standard"},
    {"submit": 20, "run_time_s": 300, "req_cpus": 1, "partition": "standard"},
    {"submit": 30, "run_time_s": 3600, "req_cpus": 1, "partition": "hybrid"},
    {"submit": 40, "run_time_s": 9000, "req_cpus": 1, "partition": "hybrid"},
    {"submit": 50, "run_time_s": 36000, "req_cpus": 1, "partition": "hybrid"},
    {"submit": 60, "run_time_s": 360000, "req_cpus": 1, "partition": "hybrid"},
]


def _notes() -> list[str]:
    w = Workload.from_table(job_table(ROWS), options=WorkloadOptions(walltime_fallback="max"))
    assert w.req_walltime.tolist() == [3600, 7200, 7200, 7200, 7200, 7200, 7200]
    return list(w.notes)


def test_the_note_counts_each_source_and_the_overruns() -> None:
    notes = _notes()
    own = next(n for n in notes if "their partition's longest request" in n)
    assert own.startswith("1 of 7 jobs")
    fallback = next(n for n in notes if "whole log" in n)
    assert fallback.startswith("warning: ")
    assert "4 of 7 jobs (57%)" in fallback
    assert "partition hybrid" in fallback
    assert "2.0h (7,200 s, from partition standard)" in fallback
    assert "3 of them ran longer than that (up to 4.2d)" in fallback
    assert "--walltime-fallback runtime" in fallback and "LENGTH" in fallback


def test_the_warning_suggests_a_value_from_the_run_times() -> None:
    fallback = next(n for n in _notes() if "whole log" in n)
    # hybrid's run times: 1 h, 2.5 h, 10 h, 100 h; the 99th percentile is the longest, 100 h
    assert "99th-percentile run time is 4.2d, so --walltime-fallback 5d" in fallback


def test_a_length_is_accepted_as_the_fallback(tmp_path: Path) -> None:
    w = Workload.from_table(job_table(ROWS), options=WorkloadOptions(
        walltime_fallback=WorkloadOptions.parse_walltime_fallback("12h")))
    assert w.req_walltime.tolist()[2:] == [43200] * 5
    table = write_job_table(tmp_path / "jobs.parquet",
                            job_table([{**r, "wait": 0} for r in ROWS]), [{"MaxProcs": 4}])
    result = invoke("simulate", str(table), "--walltime-fallback", "12h")
    assert result.exit_code == 0, result.output
    assert "planned with 43200 s" in " ".join(result.output.split())


def test_with_no_request_at_all_the_error_suggests_a_value() -> None:
    rows = [{k: v for k, v in r.items() if k != "req_walltime_s"} for r in ROWS]
    with pytest.raises(ConfigError, match="--walltime-fallback 5d would cover 99 % of them"):
        Workload.from_table(job_table(rows), options=WorkloadOptions(walltime_fallback="auto"))


def test_no_warning_when_every_partition_has_its_own_requests() -> None:
    rows = [r for r in ROWS if r["partition"] == "standard"]
    w = Workload.from_table(job_table(rows), options=WorkloadOptions(walltime_fallback="max"))
    assert not any(n.startswith("warning: ") for n in w.notes)


def test_simulate_prints_the_warning_as_a_warning(tmp_path: Path) -> None:
    table = write_job_table(tmp_path / "jobs.parquet",
                            job_table([{**r, "wait": 0} for r in ROWS]), [{"MaxProcs": 4}])
    result = invoke("simulate", str(table), "--walltime-fallback", "max")
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "warning: 4 of 7 jobs (57%) have no requested walltime" in text
    assert "note: warning:" not in text


