"""``hpcpolicy simulate``: tables, --json document, outcome Parquet, and one-line errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import polars as pl
import pytest
from cli_helpers import invoke as run_command
from cli_helpers import one_line_error
from typer.testing import Result

from benchmarks.builders.job_tables import job_table, write_job_table
from hpcpolicy import schemas
from hpcpolicy.sim.metrics import SUMMARY_KEYS

# Eight jobs on a 4-processor machine (header MaxProcs 4). By hand, FCFS without backfilling:
#   1: submit 0,  4 procs, run 100 -> [0, 100)
#   2: submit 10, 2 procs, run 50  -> waits for 1: [100, 150)
#   3: submit 20, 2 procs, run 10  -> beside 2: [100, 110)
#   4: submit 30, 8 procs          -> never fits: reported, not started, skipped
#   5: submit 40, 1 proc,  run 30  -> when 3 ends: [110, 140)
#   6: submit 50, 1 proc,  run 20  -> beside 5: [110, 130)
#   7: submit 60, 3 procs, run 40  -> 1 free at 130, 2 at 140, 4 when 2 ends: [150, 190)
#   8: submit 70, 2 procs, run 15  -> behind 7 (1 free): [190, 205)
# Waits 0, 90, 80, 70, 60, 90, 120 -> mean 510 / 7.
JOBS = [
    {"submit": 0, "wait": 0, "run_time_s": 100, "req_cpus": 4, "req_walltime_s": 100,
     "user": "ann", "partition": "batch"},
    {"submit": 10, "wait": 90, "run_time_s": 50, "req_cpus": 2, "req_walltime_s": 60,
     "user": "bob", "partition": "batch"},
    {"submit": 20, "wait": 80, "run_time_s": 10, "req_cpus": 2, "req_walltime_s": 20,
     "user": "ann", "partition": "debug"},
    {"submit": 30, "wait": 0, "run_time_s": 5, "req_cpus": 8, "req_walltime_s": 10,
     "user": "cy", "partition": "batch"},
    {"submit": 40, "wait": 70, "run_time_s": 30, "req_cpus": 1, "req_walltime_s": 40,
     "user": "bob", "partition": "batch"},
    {"submit": 50, "wait": 60, "run_time_s": 20, "req_cpus": 1, "req_walltime_s": 30,
     "user": "ann", "partition": "debug"},
    {"submit": 60, "wait": 90, "run_time_s": 40, "req_cpus": 3, "req_walltime_s": 50,
     "user": "cy", "partition": "batch"},
    {"submit": 70, "wait": 80, "run_time_s": 15, "req_cpus": 2, "req_walltime_s": 15,
     "user": "bob", "partition": "batch"},
]


def jobs_parquet(tmp_path: Path, rows: list[dict[str, Any]] | None = None,
                 header: list[dict[str, Any]] | None = None) -> Path:
    return write_job_table(tmp_path / "jobs.parquet", job_table(JOBS if rows is None else rows),
                           [{"MaxProcs": 4}] if header is None else header)


def invoke(*args: str) -> Result:
    return run_command("simulate", *args)


# --- errors: no engine needed, each a single line naming the culprit and the fix ---

def test_cluster_spec_typo(tmp_path: Path) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_text('[[groups]]\nname = "cpu"\ncount = 4\ncors = 1\n')
    line = one_line_error(invoke(str(jobs_parquet(tmp_path)), "--cluster", str(spec)))
    assert f"{spec}: groups[0]: unknown key 'cors'; did you mean 'cores'?" in line


def test_unknown_policy_lists_the_valid_ones(tmp_path: Path) -> None:
    line = one_line_error(invoke(str(jobs_parquet(tmp_path)), "-p", "fifo"))
    assert "policy 'fifo' is neither a heuristic (" in line
    assert all(name in line for name in ("fcfs", "sjf", "f1", "wfp3", "unicep"))


def test_empty_job_table(tmp_path: Path) -> None:
    line = one_line_error(invoke(str(jobs_parquet(tmp_path, rows=[]))))
    assert "jobs.parquet: the job table is empty" in line


def test_table_without_requested_walltimes_asks_for_a_fallback(tmp_path: Path) -> None:
    rows = [{**r, "req_walltime_s": None} for r in JOBS]
    line = one_line_error(invoke(str(jobs_parquet(tmp_path, rows=rows)), "-p", "sjf"))
    assert "8 of 8 jobs have no requested walltime" in line
    assert "--walltime-fallback runtime" in line


def test_unknown_machine_size(tmp_path: Path) -> None:
    line = one_line_error(invoke(str(jobs_parquet(tmp_path, header=[{}]))))
    assert "machine size is unknown" in line and "--procs N" in line


@pytest.mark.parametrize(("args", "text"), [
    (["--warm"], "--window-size and --warm need --windows N or --window-starts"),
    (["--window-starts", "1,x"], "--window-starts '1,x': give 0-based job indices"),
    (["--window-starts", "6", "--window-size", "4"],
     "window start(s) [6] + size 4 run past the workload's 8 jobs"),
    (["--procs-from", "most"], "procs_from 'most' is not one of requested, allocated, max"),
    (["--compat", "pbs"], "compat 'pbs' is not one of rlscheduler, hpcopt"),
    (["--compat", "slurm"], "has no NodeList to infer it from; give --cluster FILE"),
    (["-b", "greedy"], "backfill 'greedy' is not one of none, easy, conservative"),
    (["--procs", "2", "--cluster", "x.toml"], "give only one"),
])
def test_bad_options(tmp_path: Path, args: list[str], text: str) -> None:
    assert text in one_line_error(invoke(str(jobs_parquet(tmp_path)), *args))


def test_missing_table_and_existing_outputs(tmp_path: Path) -> None:
    line = one_line_error(invoke(str(tmp_path / "absent.parquet")))
    assert "absent.parquet: no such file" in line
    table = jobs_parquet(tmp_path)
    existing = tmp_path / "out.json"
    existing.write_text("{}")
    line = one_line_error(invoke(str(table), "--json", str(existing)))
    assert f"{existing} already exists; pass --overwrite" in line
    assert existing.read_text() == "{}"


# --- runs ---

def test_single_run_table_json_and_outcomes(tmp_path: Path) -> None:
    table, doc_path, out = jobs_parquet(tmp_path), tmp_path / "s.json", tmp_path / "o.parquet"
    result = invoke(str(table), "--json", str(doc_path), "-o", str(out))
    assert result.exit_code == 0, result.output
    assert "fcfs" in result.stdout and "1.2m" in result.stdout  # mean wait 510 / 7 s
    assert "1 jobs need more than the machine has" in result.stdout  # job 4: 8 of 4 procs
    doc = json.loads(doc_path.read_text())
    jsonschema.validate(doc, schemas.load("sim_summary"))
    (run,) = doc["runs"]
    assert set(run["summary"]) == set(SUMMARY_KEYS)
    assert run["summary"]["jobs"] == 7 and run["never_fits"] == {"jobs": 1, "job_ids": ["4"]}
    assert doc["cluster"]["cores"] == 4 and doc["cluster"]["source"] == "swf-header"
    outcomes = pl.read_parquet(out)
    assert outcomes.columns[:6] == ["policy", "backfill", "window", "job_id", "submit", "start"]
    assert outcomes.height == 8
    # strict FCFS, computed by hand above
    assert outcomes["start"].to_list() == [0, 100, 100, None, 110, 110, 150, 190]
    assert run["summary"]["mean_wait_s"] == pytest.approx(510 / 7)


def test_comparison_runs_every_combination_on_the_same_windows(tmp_path: Path) -> None:
    doc_path = tmp_path / "s.json"
    result = invoke(str(jobs_parquet(tmp_path)), "-p", "fcfs", "-p", "sjf", "-b", "none",
                    "-b", "easy", "--window-starts", "0,3", "--window-size", "5",
                    "--json", str(doc_path))
    assert result.exit_code == 0, result.output
    doc = json.loads(doc_path.read_text())
    jsonschema.validate(doc, schemas.load("sim_summary"))
    assert [(r["policy"], r["backfill"]) for r in doc["runs"]] == [
        ("fcfs", "none"), ("fcfs", "easy"), ("sjf", "none"), ("sjf", "easy")]
    assert doc["windows"]["starts"] == [0, 3]
    assert all([w["start"] for w in r["windows"]] == [0, 3] for r in doc["runs"])
    for row in ("fcfs", "sjf"):
        assert row in result.stdout
    assert "mean over windows" in result.stdout


def test_same_inputs_give_byte_identical_outputs(tmp_path: Path) -> None:
    table = jobs_parquet(tmp_path)
    docs = []
    for i in range(2):
        doc, out = tmp_path / f"s{i}.json", tmp_path / f"o{i}.parquet"
        result = invoke(str(table), "-p", "sjf", "-b", "easy", "--windows", "2",
                        "--window-size", "4", "--seed", "7", "--json", str(doc), "-o", str(out))
        assert result.exit_code == 0, result.output
        docs.append((doc.read_bytes(), pl.read_parquet(out)))
    assert docs[0][0] == docs[1][0]
    assert docs[0][1].equals(docs[1][1])


def test_warm_window_starts_behind_the_running_jobs(tmp_path: Path) -> None:
    # Window = jobs 5-8 (indices 4-7, t0 = 40). The reference FCFS+EASY replay of jobs 1-4
    # has job 1 running over [0, 100) at t0 (pre-loaded: all 4 processors); jobs 2 and 3
    # still wait (backlog, left out); job 4 never fits. Then, FCFS without backfilling:
    # 5 and 6 start at 100; 7 (3 procs) when 6 ends at 120; 8 behind it when 7 ends at 160.
    doc_path, out = tmp_path / "s.json", tmp_path / "o.parquet"
    result = invoke(str(jobs_parquet(tmp_path)), "--window-starts", "4", "--window-size", "4",
                    "--warm", "--json", str(doc_path), "-o", str(out))
    assert result.exit_code == 0, result.output
    (window,) = json.loads(doc_path.read_text())["runs"][0]["windows"]
    assert (window["preloaded"], window["backlog"]) == (1, 2)
    assert pl.read_parquet(out)["start"].to_list() == [100, 100, 120, 160]
    assert "warm (pre-loaded)" in result.stdout
