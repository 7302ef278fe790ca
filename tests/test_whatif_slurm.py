"""What-if with the site's slurm.conf: configuration changes as candidates, answered as a change
to apply (issue 40 items 3 and 4)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from cli_helpers import invoke, one_line_error
from whatif_jobs import synthetic
from whatif_slurm_site import write_conf

from benchmarks.builders.job_tables import job_table, write_job_table
from hpcpolicy import schemas
from hpcpolicy.errors import ConfigError
from hpcpolicy.slurmconf import read_slurm_conf
from hpcpolicy.whatif import WhatifConfig, run_whatif
from hpcpolicy.whatif.html import render_html
from hpcpolicy.whatif.markdown import render_markdown
from hpcpolicy.whatif.slurm_candidates import slurm_machine
from hpcpolicy.whatif.spec import parse_candidate_spec


@pytest.fixture
def conf(tmp_path: Path) -> Path:
    """The site's slurm.conf, alone in its folder."""
    return write_conf(tmp_path)


def _whatif(conf: Path, *candidates: str) -> dict[str, Any]:
    cfg = WhatifConfig(candidates=candidates, slurm_conf=str(conf), bootstrap=200)
    jobs = synthetic(300, weeks=3)
    return run_whatif(jobs, slurm_machine(conf), cfg, source="jobs.parquet").doc


def test_config_candidates_carry_the_change_to_apply(conf: Path, tmp_path: Path) -> None:
    doc = _whatif(conf, "PriorityWeightJobSize=5000,PriorityMaxAge=14-0",
                  "qos normal MaxJobsPerUser=50", "sjf+easy")
    jsonschema.validate(doc, schemas.load("whatif"))
    assert doc["config"]["baseline"] == "slurm.conf"
    assert doc["config"]["slurm_conf"] == str(conf)
    assert [(r["id"], r["policy"]) for r in doc["runs"]] == [
        ("as-logged/slurm.conf", "slurm"),
        ("as-logged/PriorityWeightJobSize=5000,PriorityMaxAge=14-0", "slurm"),
        ("as-logged/qos normal MaxJobsPerUser=50", "slurm"), ("as-logged/sjf+easy", "sjf")]
    assert doc["scenarios"][0]["cluster"]["cores"] == 64  # slurm.conf's nodes
    # every candidate against the one baseline: the site's configuration as given
    assert {c["baseline_run"] for c in doc["comparisons"]} == {"as-logged/slurm.conf"}
    section = doc["slurm"]
    assert section["baseline_run"] == "as-logged/slurm.conf"
    assert "pooled engine" in section["policy_note"]
    weights, qos = section["candidates"]
    assert weights["runs"] == ["as-logged/PriorityWeightJobSize=5000,PriorityMaxAge=14-0"]
    assert weights["sacctmgr"] == [] and weights["restart_keys"] == []
    assert weights["apply"][-1] == "scontrol reconfigure"
    assert any(w.startswith("sprio") for w in weights["watch"])
    # the diff applies cleanly to the file it was made from, and gives the candidate
    folder = weights["patch_folder"]
    assert Path(folder) == conf.parent
    check = subprocess.run(["patch", "-p1", "--dry-run", "-d", folder],
                           input=weights["diff"], text=True, capture_output=True)
    assert check.returncode == 0, check.stdout + check.stderr
    copy = tmp_path / "copy"
    shutil.copytree(conf.parent, copy)
    subprocess.run(["patch", "-p1", "-s", "-d", str(copy)], input=weights["diff"], text=True,
                   check=True)
    patched = read_slurm_conf(copy / "slurm.conf")
    assert patched.priority.weights["JobSize"] == 5000
    assert patched.priority.max_age_s == 14 * 86400
    assert "one day's wait" in (copy / "slurm.conf").read_text()  # comments kept
    # a QOS limit is a sacctmgr command, not a slurm.conf edit
    assert qos["diff"] == "" and qos["apply"] == []
    assert qos["sacctmgr"] == ["sacctmgr -i modify qos where name=normal set MaxJobsPerUser=50"]
    assert any("QOSMaxJobsPerUserLimit" in w for w in qos["watch"])


def test_the_changed_configuration_is_what_is_replayed(conf: Path) -> None:
    doc = _whatif(conf, "PriorityWeightJobSize=5000", "bf_window=2880")
    runs = {r["id"]: r["summary"] for r in doc["runs"]}
    assert runs["as-logged/PriorityWeightJobSize=5000"] != runs["as-logged/slurm.conf"]
    diff = doc["slurm"]["candidates"][1]["diff"]
    assert "-SchedulerParameters=bf_window=1440,bf_continue" in diff
    assert "+SchedulerParameters=bf_window=2880,bf_continue" in diff
    assert any(w.startswith("sdiag") for w in doc["slurm"]["candidates"][1]["watch"])


def test_report_md_and_html_show_the_change(conf: Path) -> None:
    cfg = WhatifConfig(candidates=("PriorityWeightAge=5000", "qos normal MaxJobsPerUser=50"),
                       slurm_conf=str(conf), bootstrap=200)
    result = run_whatif(synthetic(300, weeks=3), slurm_machine(conf), cfg, source="jobs.parquet")
    doc = result.doc
    text = render_markdown(doc)
    assert "## Configuration changes: what to apply" in text
    assert "```diff\n--- a/slurm.conf\n+++ b/slurm.conf\n" in text
    assert "+PriorityWeightAge=5000   # one day's wait is worth this much\n" in text
    assert "sacctmgr -i modify qos where name=normal set MaxJobsPerUser=50\n" in text
    assert "\n2. scontrol reconfigure\n" in text
    page = render_html(doc, result.run_outcomes())
    assert '<section id="slurm-changes">' in page
    assert "+PriorityWeightAge=5000   # one day&#39;s wait is worth this much\n" in page
    assert "sacctmgr -i modify qos where name=normal set MaxJobsPerUser=50" in page


def test_a_heuristic_restart_key_and_a_report_without_slurm(conf: Path) -> None:
    doc = _whatif(conf, "SelectType=select/linear")
    change = doc["slurm"]["candidates"][0]
    assert change["restart_keys"] == ["SelectType"]
    assert any("restart slurmctld" in s for s in change["apply"])
    assert doc["slurm"]["policy_note"] is None
    plain = run_whatif(synthetic(200, weeks=2), slurm_machine(conf),
                       WhatifConfig(candidates=("sjf+easy",), bootstrap=200),
                       source="jobs.parquet").doc
    assert "slurm" not in plain and "slurm_conf" not in plain["config"]
    jsonschema.validate(plain, schemas.load("whatif"))


@pytest.mark.parametrize(("candidate", "slurm", "message"), [
    ("PriorityWeightAge=5000", False, "is a Slurm configuration change: give the site's "
     "slurm.conf it changes with --slurm-conf FILE"),
    ("qos normal MaxJobsPerUser=50", False, "--slurm-conf FILE"),
    ("magic", True, "'magic' is neither a heuristic (fcfs"),
    ("magic+easy", False, "a trained policy folder (runs/NAME/policy) nor a Slurm "
     "configuration change (PriorityWeightAge=5000"),
    ("PriorityWeigthAge=5000", True, "PriorityWeigthAge is not a slurm.conf key"),
    ("qos normal MaxJobz=5", True, "MaxJobz is not a QOS option"),
])
def test_a_candidate_that_is_neither_says_the_fix(candidate: str, slurm: bool,
                                                  message: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_candidate_spec(candidate, "slurm.conf" if slurm else None)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_machine_scenarios_and_bad_changes_stop_before_any_replay(conf: Path) -> None:
    cfg = WhatifConfig(candidates=("PriorityWeightAge=5000",), scenarios=("nodes=+10%",),
                       slurm_conf=str(conf))
    with pytest.raises(ConfigError, match="with --slurm-conf the machine is slurm.conf's "
                       "nodes, so nodes= does not apply; compare a changed node list as a "
                       r"candidate \(-c conf:NEW-slurm.conf\)"):
        cfg.scenario_list()
    cfg = WhatifConfig(candidates=("partition debug MaxTime=1-0",), slurm_conf=str(conf))
    with pytest.raises(ConfigError, match=r"no partition debug in slurm\.conf; one of batch"):
        run_whatif(synthetic(50, weeks=1), slurm_machine(conf), cfg, source="jobs.parquet")


@pytest.fixture
def header_less(tmp_path: Path) -> Path:
    """A job table with no machine in its header, as a sacct export is."""
    w = synthetic(200, weeks=2)
    rows = [{"submit": int(s), "run_time_s": int(r), "req_cpus": int(p),
             "req_walltime_s": int(q), "user": f"u{u}", "partition": "batch"}
            for s, r, p, q, u in zip(w.submit, w.run_time, w.procs, w.req_walltime, w.user,
                                     strict=True)]
    return write_job_table(tmp_path / "jobs.parquet", job_table(rows))


def test_the_command_compares_changes_on_slurm_conf(conf: Path, header_less: Path,
                                                    tmp_path: Path) -> None:
    out = tmp_path / "report"
    result = invoke("whatif", str(header_less), "--slurm-conf", str(conf), "-c",
                    "PriorityWeightAge=5000,PriorityMaxAge=14-0", "-c", "sjf+easy",
                    "--bootstrap", "100", "-o", str(out))
    assert result.exit_code == 0, result.output
    doc = json.loads((out / "report.json").read_text())
    assert doc["config"]["slurm_conf"] == str(conf)
    assert [c["change"] for c in doc["slurm"]["candidates"]] == [
        "PriorityWeightAge=5000,PriorityMaxAge=14-0"]
    assert "Configuration changes: what to apply" in (out / "report.md").read_text()


@pytest.mark.parametrize(("args", "message"), [
    (["-c", "PriorityWeightAge=5000"], "is a Slurm configuration change: give the site's "
     "slurm.conf it changes with --slurm-conf FILE"),
    (["-c", "magic", "--slurm-conf", "{conf}"], "'magic' is neither a heuristic"),
    (["-c", "PriorityWeightAge=5000", "--slurm-conf", "{conf}", "-s", "nodes=+10%"],
     "nodes= does not apply"),
    (["-c", "sjf", "--sacctmgr", "{dumps}"], "--sacctmgr describes the accounts of a "
     "slurm.conf: give the site's slurm.conf with --slurm-conf too"),
    (["-c", "sjf", "--slurm-conf", "{conf}", "--procs", "64"], "--procs and --slurm-conf both "
     "describe the site: slurm.conf's nodes are the machine, so drop --procs"),
])
def test_the_command_refuses_in_one_line(conf: Path, header_less: Path, tmp_path: Path,
                                         args: list[str], message: str) -> None:
    (tmp_path / "dumps").mkdir()
    given = [a.format(conf=conf, dumps=tmp_path / "dumps") for a in args]
    line = one_line_error(invoke("whatif", str(header_less), *given, "-o",
                                 str(tmp_path / "r")))
    assert message in line
