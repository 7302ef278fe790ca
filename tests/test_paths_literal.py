"""File names are names, not glob patterns: ``out[2].parquet`` is read as it is (issue 28)."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_helpers import invoke
from conftest import DATA


@pytest.fixture(scope="module")
def bracketed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("glob")
    out = folder / "out[2].parquet"
    result = invoke("ingest", str(DATA / "stats_tiny.swf"), "-o", str(out))
    assert result.exit_code == 0, result.output
    # a file the pattern out[2].parquet would match, to tell a glob from the name itself
    (folder / "out2.parquet").write_bytes(b"not parquet")
    return out


@pytest.mark.parametrize("command", [
    ["stats"], ["simulate", "--policy", "fcfs"],
    ["evaluate", "--policy", "fcfs", "--window-size", "4", "--windows", "1", "--split", "all"],
])
def test_commands_read_a_bracketed_table(bracketed: Path, command: list[str]) -> None:
    result = invoke(command[0], str(bracketed), *command[1:])
    assert result.exit_code == 0, result.output


def test_whatif_reads_a_bracketed_table(bracketed: Path) -> None:
    out = bracketed.parent / "rep[1]"
    result = invoke("whatif", str(bracketed), "-c", "sjf+easy", "--bootstrap", "100", "-o",
                    str(out), "--period", "1h")
    assert result.exit_code == 0, result.output
    assert (out / "report.json").exists()


def test_open_job_table_does_not_expand_patterns(bracketed: Path) -> None:
    from hpcpolicy.table import open_job_table

    assert open_job_table(bracketed).frame.collect().height == 8
