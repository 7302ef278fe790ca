"""``hpcpolicy whatif``: the report folder, one-line errors, reruns, and the bars on real logs."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import pytest
from cli_helpers import invoke, one_line_error
from conftest import shared_file
from whatif_jobs import synthetic

from benchmarks.builders.job_tables import job_table, write_job_table
from hpcpolicy import schemas
from hpcpolicy.ingest import ingest

REPORT = ("report.html", "report.json", "report.md", "outcomes.parquet")


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Ten weeks of a busy 64-processor machine, with logged starts and a hostile job name."""
    w = synthetic(800)
    rows: list[dict[str, Any]] = [
        {"submit": int(s), "wait": int(ls - s), "run_time_s": int(r), "req_cpus": int(p),
         "req_walltime_s": int(q), "user": f"u{u}", "partition": "batch"}
        for s, ls, r, p, q, u in zip(w.submit, w.logged_start, w.run_time, w.procs,
                                     w.req_walltime, w.user, strict=True)]
    rows[5]["job_id"] = "<script>alert(1)</script>"
    for row in rows[6::7]:
        row["user"] = "<img src=x onerror=alert(2)>"
    path = tmp_path_factory.mktemp("whatif") / "jobs.parquet"
    return write_job_table(path, job_table(rows), [{"MaxProcs": 64}])


def test_report_folder_terminal_summary_and_rerun(table: Path, tmp_path: Path) -> None:
    out = tmp_path / "report"
    args = ["whatif", str(table), "-c", "sjf+easy", "-c", "f1", "-s", "nodes=+25%",
            "--bootstrap", "300", "--outcomes", "-o", str(out)]
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir()) == sorted(REPORT)
    doc = json.loads((out / "report.json").read_text())
    jsonschema.validate(doc, schemas.load("whatif"))
    assert [c["candidate_run"] for c in doc["comparisons"]] == [
        "as-logged/sjf+easy", "as-logged/f1+easy", "nodes=+25%/sjf+easy", "nodes=+25%/f1+easy"]
    for text in ("verdict:", "as-logged/sjf+easy vs as-logged/fcfs+easy", "mean bounded",
                 "fidelity:", "report.html"):
        assert text in result.stdout, text
    md = (out / "report.md").read_text()
    assert r"\<img src=x onerror=alert(2)>" in md and not re.search(r"(?<!\\)<img", md), md
    before = {name: (out / name).read_bytes() for name in REPORT}
    again = invoke(*args)
    assert "already holds a report" in one_line_error(again) and "--overwrite" in again.stderr
    assert invoke(*args, "--overwrite").exit_code == 0
    assert {name: (out / name).read_bytes() for name in REPORT} == before


def test_quiet_prints_the_report_path(table: Path, tmp_path: Path) -> None:
    result = invoke("-q", "whatif", str(table), "--bootstrap", "200", "-o", str(tmp_path / "r"))
    assert result.exit_code == 0, result.output
    assert result.stdout.split() == [str(tmp_path / "r" / "report.html")]


@pytest.mark.parametrize("args, words", [
    (["-s", "cores=+10%"], "unknown key 'cores'"),
    (["-c", "magic+easy"], "neither a heuristic"),
    (["-c", "sjf+eazy"], "backfilling 'eazy'"),
    (["--period", "fortnight"], "--period 'fortnight'"),
    (["--metric", "joy"], "unknown metric 'joy'"),
    (["-c", "fcfs+easy"], "is the baseline itself"),
    (["--bootstrap", "5"], "--bootstrap must be at least 100"),
    (["-s", "cluster=/nonexistent/spec.toml"], "/nonexistent/spec.toml"),
])
def test_bad_input_is_one_line(table: Path, tmp_path: Path, args: list[str], words: str) -> None:
    out = tmp_path / "r"
    message = one_line_error(invoke("whatif", str(table), *args, "-o", str(out)))
    assert words in message
    assert not (out / "report.json").exists()


def test_missing_table_is_one_line(tmp_path: Path) -> None:
    assert "nope.parquet" in one_line_error(invoke("whatif", str(tmp_path / "nope.parquet")))


def _simulate_json(table: Path, tmp_path: Path, *extra: str) -> dict[str, dict[str, Any]]:
    path = tmp_path / f"sim{len(list(tmp_path.iterdir()))}.json"
    result = invoke("simulate", str(table), "-p", "fcfs", "-p", "sjf", "-p", "f1", "-b", "easy",
                    "--json", str(path), *extra)
    assert result.exit_code == 0, result.output
    return {r["config"]["policy"]: r["summary"]
            for r in json.loads(path.read_text())["runs"]}


def _agrees(doc: dict[str, Any], scenario: str, sim: dict[str, dict[str, Any]]) -> None:
    """Whole-run figures equal simulate's, and each verdict points the way simulate's do."""
    runs = {r["id"]: r["summary"] for r in doc["runs"] if r["scenario"] == scenario}
    for policy in ("fcfs", "sjf", "f1"):  # utilisation aside: the report's runs until the
        # last submit, as its comparisons do; simulate's until the last end
        assert {**runs[f"{scenario}/{policy}+easy"], "utilization": None} == {
            **sim[policy], "utilization": None}
    for c in (c for c in doc["comparisons"] if c["scenario"] == scenario):
        policy = c["candidate_run"].split("/")[-1].split("+")[0]
        for row in c["metrics"]:
            if row["key"] == "utilization" or row["verdict"] == "no clear difference":
                continue
            direction = np.sign(sim[policy][row["key"]] - sim["fcfs"][row["key"]])
            assert (direction < 0) == (row["verdict"] == "better"), (policy, row)


def test_hpc2n_bar_whatif_agrees_with_simulate(tmp_path: Path) -> None:
    """The issue's bar command on HPC2N; its figures and verdicts match `simulate`'s."""
    table = tmp_path / "hpc2n.parquet"
    ingest([shared_file("HPC2N-2002-2.2-cln.swf.gz")], table)
    out = tmp_path / "report"
    result = invoke("whatif", str(table), "--baseline", "fcfs+easy", "--candidate", "sjf+easy",
                    "--candidate", "f1+easy", "--scenario", "nodes=+10%", "-o", str(out))
    assert result.exit_code == 0, result.output
    doc = json.loads((out / "report.json").read_text())
    _agrees(doc, "as-logged", _simulate_json(table, tmp_path))
    spec = tmp_path / "hpc2n+10.toml"  # the log header's 120 nodes x 2 cores, + 10 %
    spec.write_text('name = "hpc2n+10%"\n[[groups]]\nname = "n"\ncount = 132\ncores = 2\n')
    _agrees(doc, "nodes=+10%", _simulate_json(table, tmp_path, "--cluster", str(spec)))
    assert doc["scenarios"][1]["cluster"]["cores"] == 264
    fid = doc["fidelity"]
    assert fid["available"] and fid["jobs"] == 202_870 and len(fid["per_month"]) >= 40
    assert all(fid[k] is not None for k in ("mean_abs_error_s", "spearman", "ks",
                                            "wasserstein_s"))


def test_ctc_fidelity_reports_its_figures(tmp_path: Path) -> None:
    table = tmp_path / "ctc.parquet"
    ingest([shared_file("CTC-SP2-1996-3.1-cln.swf.gz")], table)
    out = tmp_path / "report"
    result = invoke("whatif", str(table), "--procs", "338", "-c", "sjf+easy", "--bootstrap",
                    "300", "-o", str(out))
    assert result.exit_code == 0, result.output
    fid = json.loads((out / "report.json").read_text())["fidelity"]
    assert fid["available"] and fid["jobs"] > 70_000 and fid["trust"] in ("good", "fair", "poor")
    assert "Fidelity" in (out / "report.md").read_text()
