"""``whatif --outcomes`` (issue 45 item 4): outcomes.parquet is written only when asked for,
and the report's figures do not depend on it."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from cli_helpers import invoke
from whatif_jobs import synthetic

from benchmarks.builders.job_tables import job_table, write_job_table

ARGS = ("-c", "sjf+easy", "-s", "nodes=+25%", "--bootstrap", "100")
SHOWN = ("report.json", "report.md", "report.html")


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Four weeks of a busy 64-processor machine, with logged starts (so fidelity is shown)."""
    w = synthetic(400, weeks=4)
    rows = [{"submit": int(s), "wait": int(ls - s), "run_time_s": int(r), "req_cpus": int(p),
             "req_walltime_s": int(q), "user": f"u{u}", "partition": "batch"}
            for s, ls, r, p, q, u in zip(w.submit, w.logged_start, w.run_time, w.procs,
                                         w.req_walltime, w.user, strict=True)]
    path = tmp_path_factory.mktemp("outcomes") / "jobs.parquet"
    return write_job_table(path, job_table(rows), [{"MaxProcs": 64}])


def test_outcomes_only_when_asked_and_the_report_is_the_same(table: Path,
                                                             tmp_path: Path) -> None:
    lean, full = tmp_path / "lean", tmp_path / "full"
    assert invoke("whatif", str(table), *ARGS, "-o", str(lean)).exit_code == 0
    result = invoke("whatif", str(table), *ARGS, "--outcomes", "-o", str(full))
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in lean.iterdir()) == sorted(SHOWN)
    assert sorted(p.name for p in full.iterdir()) == sorted((*SHOWN, "outcomes.parquet"))
    for name in SHOWN:  # every figure, table and plot identical, byte for byte
        assert (lean / name).read_bytes() == (full / name).read_bytes(), name
    runs = pl.read_parquet(full / "outcomes.parquet")["run"].unique(maintain_order=True)
    assert runs.to_list() == ["as-logged/fcfs+easy", "as-logged/sjf+easy",
                              "nodes=+25%/fcfs+easy", "nodes=+25%/sjf+easy"]


def test_a_report_rewritten_without_outcomes_loses_the_old_file(table: Path,
                                                                 tmp_path: Path) -> None:
    out = tmp_path / "r"
    litter = out / ".outcomes.parquet.a1b2c3d4.part"  # left by a killed run
    assert invoke("whatif", str(table), *ARGS, "--outcomes", "-o", str(out)).exit_code == 0
    litter.write_bytes(b"x")
    # the old outcomes describe another run's replays: they go with the report they belong to
    again = invoke("whatif", str(table), "--bootstrap", "100", "-o", str(out), "--overwrite")
    assert again.exit_code == 0, again.output
    assert sorted(p.name for p in out.iterdir()) == sorted(SHOWN)
