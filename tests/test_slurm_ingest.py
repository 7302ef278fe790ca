"""Genuine sacct output from the real test Slurm, read by ``hpcpolicy ingest``.

One scenario (``tests/slurm/scenario.py``: a scaled KTH-SP2 window plus one job per feature) is
run once for the module (about 90 s: the timeout job must outlive its 1-minute limit), exported
with ``sacct --parsable2 --duplicates`` and ingested; each test checks one feature against what
was submitted and against the sacct text itself.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from conftest import shared_file
from slurm.scenario import FEATURES, TRACE_JOBS, scenario_plan

from hpcpolicy.ingest import IngestConfig, ingest
from hpcpolicy.slurm.submit import JobSpec, Plan, export_sacct, submit_plan, wait_finished

pytestmark = pytest.mark.slurm


class Run:
    """What the scenario left behind."""

    def __init__(self, plan: Plan, ids: dict[str, str], sacct: Path, jobs: pl.DataFrame,
                 rejects: pl.DataFrame) -> None:
        self.plan, self.ids, self.sacct = plan, ids, sacct
        self.jobs, self.rejects = jobs, rejects

    def spec(self, name: str) -> JobSpec:
        return next(j for j in self.plan.jobs if j.name == name)

    def rows(self, name: str) -> pl.DataFrame:
        return self.jobs.filter(pl.col("job_name") == name).sort("job_id")

    def row(self, name: str) -> dict[str, Any]:
        rows = self.rows(name)
        assert rows.height == 1, (name, rows)
        return rows.row(0, named=True)


@pytest.fixture(scope="module")
def run(slurm_cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> Run:
    swf = shared_file("KTH-SP2-1996-2.1-cln.swf.gz")
    work = tmp_path_factory.mktemp("slurm-scenario")
    out = Path(slurm_cluster.root) / "jobs" / work.name  # the jobs write their output here
    plan = scenario_plan(swf, work)
    ids = submit_plan(plan, out, slurm_cluster.env)
    wait_finished(ids.values(), slurm_cluster.env, timeout_s=300)
    sacct = export_sacct(ids.values(), work / "sacct.txt", slurm_cluster.env)
    ingest([sacct], work / "jobs.parquet", IngestConfig())
    return Run(plan, ids, sacct, pl.read_parquet(work / "jobs.parquet"),
               pl.read_parquet(work / "jobs.rejects.parquet"))


def _sacct_jobs(path: Path) -> dict[str, dict[str, str]]:
    """The last record of every job (not step) in the sacct text, by JobID."""
    lines = path.read_text().rstrip("\n").split("\n")
    header = lines[0].split("|")
    out: dict[str, dict[str, str]] = {}
    for line in lines[1:]:
        rec = dict(zip(header, line.split("|"), strict=True))
        if "." not in rec["JobID"]:
            out[rec["JobID"]] = rec
    return out


def _ts(text: str) -> datetime | None:
    if text in ("Unknown", "None", ""):
        return None
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC)


@pytest.mark.slow  # over the ten-minute budget of the default suite; run with -m slow
def test_every_submitted_job_is_accounted_for(run: Run) -> None:
    expected = {j.name: 4 if j.array else 1 + len(j.het) for j in run.plan.jobs}
    counts = dict(run.jobs.group_by("job_name").len().iter_rows())
    assert counts == expected
    assert run.jobs.height == TRACE_JOBS + sum(expected[f] for f in FEATURES)
    # nothing rejected but the requeued job's first run, superseded by its second
    assert run.rejects["reason"].to_list() == ["duplicate_superseded"]
    assert run.rejects["job_id"].to_list() == [run.ids["requeue"]]


def test_sizes_limits_and_memory_are_exact(run: Run) -> None:
    for spec in run.plan.jobs:
        if spec.array or spec.het:
            continue
        row = run.row(spec.name)
        assert (row["req_cpus"], row["req_nodes"], row["req_walltime_s"]) == (
            spec.cpus, spec.nodes, spec.limit_min * 60), spec.name
        assert (row["partition"], row["account"], row["user"]) == (
            spec.partition, spec.account, "root"), spec.name
        assert row["req_mem_mib"] == 100 * spec.cpus  # DefMemPerCPU=100
        if row["start_time"] is not None:
            assert (row["alloc_cpus"], row["alloc_nodes"]) == (spec.cpus, spec.nodes)


def test_times_and_states_match_the_sacct_text(run: Run) -> None:
    text = _sacct_jobs(run.sacct)
    assert set(text) == set(run.jobs["job_id"].to_list())
    for row in run.jobs.iter_rows(named=True):
        rec = text[row["job_id"]]
        for col, field in (("submit_time", "Submit"), ("eligible_time", "Eligible"),
                           ("start_time", "Start"), ("end_time", "End")):
            assert row[col] == _ts(rec[field]), (row["job_id"], col)
        assert row["state"] == rec["State"].split()[0].lower(), row["job_id"]
        if row["start_time"] is not None:
            assert row["run_time_s"] == (row["end_time"] - row["start_time"]).total_seconds()
            assert row["wait_time_s"] == (row["start_time"] - row["submit_time"]).total_seconds()


def test_trace_jobs_ran_their_scaled_time(run: Run) -> None:
    for spec in run.plan.jobs:
        if spec.name.startswith("j"):
            row = run.row(spec.name)
            assert row["state"] == "completed"
            assert spec.run_s <= row["run_time_s"] <= spec.run_s + 1  # sacct's whole seconds


def test_two_partitions_and_two_accounts(run: Run) -> None:
    assert set(run.jobs["partition"].to_list()) == {"batch", "short"}
    assert set(run.jobs["account"].to_list()) == {"physics", "biology"}


def test_array_with_throttle(run: Run) -> None:
    rows = run.rows("arr")
    base = int(run.ids["arr"])
    assert rows["array_job_id"].to_list() == [base] * 4
    assert sorted(rows["array_task_id"].to_list()) == [0, 1, 2, 3]
    assert rows["job_id"].to_list() == [f"{base}_{t}" for t in range(4)]
    assert rows["job_id_raw"].n_unique() == 4
    # %2: never more than two tasks at once
    spans = [(r["start_time"], r["end_time"]) for r in rows.iter_rows(named=True)]
    for start, _ in spans:
        assert sum(s <= start < e for s, e in spans) <= 2


def test_heterogeneous_job(run: Run) -> None:
    rows = run.rows("het")
    base = int(run.ids["het"])
    assert rows["job_id"].to_list() == [f"{base}+0", f"{base}+1"]
    assert rows["het_job_id"].to_list() == [base, base]
    assert rows["het_job_offset"].to_list() == [0, 1]
    assert rows["req_cpus"].to_list() == [2, 4]
    assert rows["start_time"].n_unique() == 1  # the components start together


def test_dependency_waits_for_its_job(run: Run) -> None:
    dep = run.row("dep")
    het_end = run.rows("het")["end_time"].max()
    assert dep["state"] == "completed"
    assert dep["start_time"] >= het_end
    assert dep["eligible_time"] >= het_end


def test_timeout(run: Run) -> None:
    row = run.row("timeout")
    assert row["state"] == "timeout"
    assert row["req_walltime_s"] == 60
    assert row["run_time_s"] >= 60


def test_failed_job_keeps_its_exit_code(run: Run) -> None:
    row = run.row("fail")
    assert (row["state"], row["exit_code"], row["partition"]) == ("failed", 3, "short")


def test_cancelled_pending_job(run: Run) -> None:
    row = run.row("never")
    assert row["state"] == "cancelled"
    assert row["start_time"] is None and row["run_time_s"] is None
    assert row["alloc_cpus"] is None and row["exit_code"] is None
    assert row["req_cpus"] == 1 and row["req_walltime_s"] == 60


def test_requeued_job_keeps_its_last_run(run: Run) -> None:
    row = run.row("requeue")
    assert row["state"] == "completed"
    assert row["run_time_s"] >= run.spec("requeue").run_s
    first = run.rejects.row(0, named=True)
    assert "REQUEUED" in first["raw"]


def test_held_job_starts_after_its_release(run: Run) -> None:
    row = run.row("held")
    assert row["state"] == "completed"
    # released 4 s into the plan; eligible (and started) only then
    assert (row["eligible_time"] - row["submit_time"]).total_seconds() >= 3
    assert row["start_time"] >= row["eligible_time"]
