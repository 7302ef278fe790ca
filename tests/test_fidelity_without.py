"""fidelity --site gives, out of sample, the figures of the site model with and without each
of its elements (issue 42 part 3)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_site import _as_logged, _workload
from typer.testing import CliRunner

from benchmarks.builders.job_tables import job_table, write_job_table
from hpcpolicy.cluster import ClusterSpec
from hpcpolicy.sim.types import RunLimits, SimConfig


def test_fidelity_site_gives_each_element_with_and_without(tmp_path: Path) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    from hpcpolicy.commands import app
    from schemas import load

    logged = _as_logged(_workload(600), ClusterSpec.homogeneous(64),
                        SimConfig(backfill="easy", limits=RunLimits(user_jobs=4)))
    table = write_job_table(tmp_path / "jobs.parquet", job_table([
        {"submit": int(logged.submit[i]), "wait": int(logged.logged_start[i] - logged.submit[i]),
         "user": f"u{logged.user[i]}", "run_time_s": int(logged.run_time[i]),
         "req_cpus": int(logged.procs[i]), "req_walltime_s": int(logged.req_walltime[i])}
        for i in range(len(logged))]))
    site = tmp_path / "site.toml"
    site.write_text("[limits]\nuser_jobs = 4\n[capacity]\navailability = 0.9\n")
    out = tmp_path / "f.json"
    res = CliRunner().invoke(app, ["fidelity", str(table), "--procs", "64", "--site", str(site),
                                   "--json", str(out)])
    assert res.exit_code == 0, res.output
    doc = json.loads(out.read_text())
    jsonschema.validate(doc, load("fidelity"))
    assert set(doc["without"]) == {"limits", "capacity"}
    assert doc["without"]["limits"] != doc["without"]["capacity"]
    assert "without limits" in res.output and "without capacity" in res.output
    assert "as fitted" in res.output
