"""The first replay on a machine compiles the engine for about a minute: it says so, rather
than sit silent (issue 41); later runs, with numba's cache in place, say nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import invoke

from benchmarks.builders.job_tables import job_table, write_job_table
from hpcpolicy.sim import compiled

NOTE = "compiling the replay engine"


def _table(tmp_path: Path) -> Path:
    rows = [{"submit": 10 * i, "run_time_s": 60, "req_cpus": 1, "req_walltime_s": 120,
             "wait": 0} for i in range(5)]
    return write_job_table(tmp_path / "jobs.parquet", job_table(rows), [{"MaxProcs": 4}])


@pytest.mark.parametrize(("cached", "noted"), [(False, True), (True, False)])
def test_simulate_says_when_it_compiles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        cached: bool, noted: bool) -> None:
    monkeypatch.setattr(compiled, "engine_compiled", lambda: cached)
    result = invoke("simulate", str(_table(tmp_path)))
    assert result.exit_code == 0, result.output
    assert (NOTE in result.output) is noted, result.output


def test_an_empty_numba_cache_is_seen_as_not_compiled(tmp_path: Path) -> None:
    code = "from hpcpolicy.sim.compiled import engine_compiled; print(engine_compiled())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}, check=True)
    assert out.stdout.strip() == "False", out.stderr
