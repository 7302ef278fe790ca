"""Running a command in-process and reading its one-line error, for the CLI tests."""

from __future__ import annotations

from typer.testing import CliRunner, Result

from hpcpolicy.commands import app


def invoke(*args: str) -> Result:
    """``hpcpolicy ARGS...`` in-process."""
    return CliRunner().invoke(app, list(args))


def one_line_error(result: Result) -> str:
    """The single ``error: ...`` line of a command that failed cleanly (exit 1, no traceback)."""
    assert result.exit_code == 1, (result.exit_code, result.output)
    assert isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]
