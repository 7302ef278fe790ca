"""What a person reads when they get the command line wrong, or ask it for help: usage lines
that name arguments plainly, help without markup, and a mistake answered in one line with the
closest spelling (issue 41)."""

from __future__ import annotations

import re

import pytest
from test_cli import _command_names
from typer.testing import CliRunner

from hpcpolicy.commands import app

HELPS = [[], ["--help"], *[[*name.split(), "--help"] for name in _command_names()]]


@pytest.mark.parametrize("args", HELPS, ids=lambda a: " ".join(a) or "(none)")
def test_help_has_no_markup_and_plain_usage(args: list[str]) -> None:
    out = CliRunner().invoke(app, args).output
    assert not re.search(r"\[/?(bold|dim|red|green|yellow|italic)?\]", out), out
    usage = next(line for line in out.splitlines() if line.startswith("Usage:"))
    assert "{" not in usage and "}" not in usage, usage


def _mistake(*args: str) -> str:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 2, (result.exit_code, result.output)
    assert "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


def test_unknown_option_is_one_line_with_the_closest_option() -> None:
    line = _mistake("simulate", "jobs.parquet", "--polcy", "sjf")
    assert "--polcy" in line and "did you mean --policy?" in line
    assert "hpcpolicy simulate --help" in line


def test_unknown_command_is_one_line_with_the_closest_command() -> None:
    line = _mistake("simulatte")
    assert "simulatte" in line and "'simulate'" in line


@pytest.mark.parametrize(("args", "says"), [
    (("simulate",), "missing argument 'table'"),
    (("simulate", "x", "--procs", "many"), "'--procs'"),
    (("dataset", "buld"), "'build'"),
])
def test_other_mistakes_are_one_line(args: tuple[str, ...], says: str) -> None:
    assert says in _mistake(*args)
