"""``hpcpolicy evaluate``: the comparison table, --json, and one-line errors."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import invoke as run_command
from cli_helpers import one_line_error
from env_jobs import write_table
from typer.testing import Result


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_table(tmp_path_factory.mktemp("evaluate") / "jobs.parquet", 300)


def check_document(doc: dict[str, Any]) -> None:
    """The ``evaluate --json`` document ``doc`` follows schemas/evaluate.schema.json (its
    run summaries: simulate's, schemas/sim_summary.schema.json)."""
    jsonschema = pytest.importorskip("jsonschema")
    from referencing import Registry, Resource

    from hpcpolicy import schemas

    schema = schemas.load("evaluate")
    jsonschema.Draft202012Validator.check_schema(schema)
    registry = Registry().with_resource("urn:hpcpolicy:schema:sim_summary",
                                        Resource.from_contents(schemas.load("sim_summary")))
    jsonschema.Draft202012Validator(schema, registry=registry).validate(doc)


def invoke(*args: str) -> Result:
    return run_command("evaluate", *args)


def test_table_and_json(table: Path, tmp_path: Path) -> None:
    out = tmp_path / "e.json"
    result = invoke(str(table), "--policy", "fcfs,sjf", "-p", "f1", "--backfill", "none,easy",
                    "--windows", "3", "--window-size", "40", "--seed", "4", "--json", str(out))
    assert result.exit_code == 0, result.output
    assert "mean over windows, ±std across windows" in result.output
    assert "3 window(s) of 40 jobs from the test part (train_frac 0.7)" in result.output
    starred = [line for line in result.output.splitlines()
               if re.match(r"^ ?\S+ \*\s+(none|easy) ", line)]
    assert len(starred) == 2  # one best heuristic per backfilling mode
    doc = json.loads(out.read_text())
    check_document(doc)
    assert [(r["policy"], r["backfill"]) for r in doc["runs"]] == [
        (p, b) for b in ("none", "easy") for p in ("fcfs", "sjf", "f1")]
    assert all(210 <= s <= 260 for s in doc["windows"]["starts"])
    assert set(doc["runs"][0]["spread"]["mean_bsld"]) == {"std", "min", "max"}
    again = tmp_path / "again.json"
    quiet = run_command("-q", "evaluate", str(table), "-p", "fcfs,sjf,f1", "-b", "none,easy",
                        "--windows", "3", "--window-size", "40", "--seed", "4", "--json",
                        str(again))
    assert quiet.exit_code == 0 and quiet.output.strip() == str(again)
    assert json.loads(again.read_text()) == doc


def test_errors(table: Path, tmp_path: Path) -> None:
    assert "policy 'fifo' is neither a heuristic" in one_line_error(
        invoke(str(table), "-p", "fcfs,fifo", "--window-size", "40"))
    assert "the test part holds 90 jobs (of 300, train_frac 0.7), fewer than one window of " \
           "100" in one_line_error(invoke(str(table), "--window-size", "100"))
    assert "are not inside the test part" in one_line_error(
        invoke(str(table), "--window-size", "40", "--window-starts", "5,220"))
    assert "--window-starts '5,x'" in one_line_error(
        invoke(str(table), "--window-size", "40", "--window-starts", "5,x"))
    exists = tmp_path / "e.json"
    exists.write_text("{}")
    assert "already exists; pass --overwrite" in one_line_error(
        invoke(str(table), "--json", str(exists)))


def test_the_trained_policy_note_is_not_said_of_heuristics(table: Path) -> None:
    """Issue 41: on a machine where no queue forms, backfilling starts nothing; the note that
    explains this for a trained policy (which learns to pick jobs that fit) is not printed
    for a heuristic."""
    result = invoke(str(table), "--policy", "fcfs,sjf", "--backfill", "easy", "--windows", "2",
                    "--window-size", "40", "--procs", "100000")
    assert result.exit_code == 0, result.output
    assert "trained policy" not in result.output
