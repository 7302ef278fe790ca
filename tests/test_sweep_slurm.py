"""``sweep`` over configuration grids: slurm.conf keys x SchedulerParameters options, each
combination a configuration candidate whose cell's report says what to apply (issue 40 item 3)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import polars as pl
import pytest
from whatif_jobs import synthetic
from whatif_slurm_site import write_conf

from benchmarks.builders.job_tables import job_table, write_job_table
from hpcpolicy.errors import ConfigError
from hpcpolicy.sweep import load_spec, sweep
from hpcpolicy.sweep.slurm_grid import grid_candidates, read_grid

SPEC = """logs = ["jobs.parquet"]
slurm_conf = "etc/slurm.conf"
candidates = ["qos normal MaxJobsPerUser=50"]
period_s = 86400
bootstrap = 100

[grid]
PriorityWeightJobSize = [5000]
bf_window = [2880]
"""


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A log with no machine in its header (as a sacct export), its site's slurm.conf."""
    w = synthetic(200, weeks=2)
    rows = [{"submit": int(s), "run_time_s": int(r), "req_cpus": int(p),
             "req_walltime_s": int(q), "user": f"u{u}", "partition": "batch"}
            for s, r, p, q, u in zip(w.submit, w.run_time, w.procs, w.req_walltime, w.user,
                                     strict=True)]
    write_job_table(tmp_path / "jobs.parquet", job_table(rows))
    write_conf(tmp_path)
    return tmp_path


def test_a_configuration_grid_is_a_sweep_of_changes_to_apply(folder: Path) -> None:
    (folder / "grid.toml").write_text(SPEC)
    spec = load_spec(folder / "grid.toml")
    assert spec.slurm_conf == str(folder / "etc" / "slurm.conf")
    result = sweep(spec, folder / "sw")
    table = pl.read_parquet(folder / "sw" / "sweep.parquet")
    assert table["candidate"].to_list() == [
        "qos normal MaxJobsPerUser=50", "PriorityWeightJobSize=5000 bf_window=2880"]
    assert set(table["baseline_policy"]) == {"slurm.conf"} and result.ran == 2
    last = json.loads((folder / "sw" / table["report"][-1] / "report.json").read_text())
    assert last["config"]["slurm_conf"] == spec.slurm_conf
    (change,) = last["slurm"]["candidates"]
    assert change["keys"] == ["PriorityWeightJobSize", "SchedulerParameters"]
    check = subprocess.run(["patch", "-p1", "--dry-run", "-d", change["patch_folder"]],
                           input=change["diff"], text=True, capture_output=True)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "+PriorityWeightJobSize=5000\n" in change["diff"]
    assert "+SchedulerParameters=bf_window=2880,bf_continue\n" in change["diff"]
    again = sweep(load_spec(folder / "grid.toml"), folder / "sw")
    assert (again.ran, again.skipped) == (0, 2)


def test_grid_axes_multiply_in_the_spec_order() -> None:
    axes = read_grid({"bf_window": [1440, 2880], "PriorityWeightAge": [1, 2]}, "g.toml")
    assert grid_candidates(axes) == (
        "bf_window=1440 PriorityWeightAge=1", "bf_window=1440 PriorityWeightAge=2",
        "bf_window=2880 PriorityWeightAge=1", "bf_window=2880 PriorityWeightAge=2")


@pytest.mark.parametrize(("text", "message"), [
    ('[grid]\nbf_window = [1440]\n', "field `grid`: changes a slurm.conf: name it with "
     "slurm_conf = FILE"),
    ('slurm_conf = "etc/slurm.conf"\n[grid]\n"qos normal MaxJobsPerUser" = [5]\n',
     "key `grid.qos normal MaxJobsPerUser`: a grid takes slurm.conf keys and "
     "SchedulerParameters options"),
    ('slurm_conf = "etc/slurm.conf"\n[grid]\nPriorityWeigthAge = [5]\n',
     "key `grid.PriorityWeigthAge`: candidate 'PriorityWeigthAge=5': PriorityWeigthAge is "
     "not a slurm.conf key"),
    ('slurm_conf = "etc/slurm.conf"\n[grid]\nbf_window = []\n',
     "key `grid.bf_window` must list at least one value"),
    ('slurm_conf = "etc/slurm.conf"\n[grid]\nbf_continue = [true]\n',
     "True is not a value to write after the key"),
    ('candidates = ["PriorityWeightAge=5"]\n', "is a Slurm configuration change: give the "
     "site's slurm.conf"),
])
def test_a_bad_grid_is_one_line_naming_the_key(folder: Path, text: str, message: str) -> None:
    path = folder / "bad.toml"
    path.write_text('logs = ["jobs.parquet"]\n' + text)
    with pytest.raises(ConfigError) as err:
        load_spec(path)
    assert message in str(err.value) and "\n" not in str(err.value)
    assert str(path) in str(err.value)
