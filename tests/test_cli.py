"""The command-line shell: help for every command, a fast ``--help``, clean one-line errors,
and a README that documents every command."""

from __future__ import annotations

import gzip
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import polars as pl
import pytest
import typer.main
from cli_helpers import one_line_error
from typer.testing import CliRunner

from hpcpolicy.commands import app
from hpcpolicy.schema import SCHEMA_VERSION, polars_schema

ROOT = Path(__file__).resolve().parent.parent
HEAVY_MODULES = ("polars", "numpy", "numba", "torch", "pyarrow")


def _command_names() -> list[str]:
    """Every command the app exposes, sub-commands as ``group verb``."""
    root = typer.main.get_command(app)
    names: list[str] = []

    def walk(cmd: object, prefix: str) -> None:
        for name, sub in sorted(getattr(cmd, "commands", {}).items()):
            full = f"{prefix}{name}"
            names.append(full)
            walk(sub, f"{full} ")

    walk(root, "")
    return names


def test_the_app_has_the_foundation_commands() -> None:
    assert {"demo", "generate", "ingest", "stats"} <= set(_command_names())


@pytest.mark.parametrize("args", [[], *[[*n.split(), "--help"] for n in _command_names()],
                                  ["--help"]])
def test_every_command_has_help(args: list[str]) -> None:
    result = CliRunner().invoke(app, args)
    assert result.exit_code in ((0, 2) if not args else (0,)), result.output
    assert "Usage" in result.output


def test_version() -> None:
    from hpcpolicy import __version__

    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0 and result.stdout.strip() == f"hpcpolicy {__version__}"


def test_help_imports_no_heavy_library() -> None:
    code = (
        "import sys\n"
        "sys.argv = ['hpcpolicy', '--help']\n"
        "from hpcpolicy.commands import main\n"
        "try:\n    main()\nexcept SystemExit as exc:\n    assert exc.code in (0, None), exc.code\n"
        f"print('LOADED', sorted(m for m in {HEAVY_MODULES!r} if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=True)
    assert "LOADED []" in done.stdout, done.stdout[-500:]


# --- error paths: exit 1, one line on stderr naming the culprit and the fix, no traceback ---

def _swf_gz(tmp: Path, jobs: int, keep: float) -> Path:
    """A gzipped SWF log of ``jobs`` lines, cut to the first ``keep`` share of its bytes."""
    body = "".join(f"{i} {i * 10} 5 100 4 -1 -1 4 200 -1 1 1 1 1 1 1 -1 -1\n"
                   for i in range(1, jobs + 1)).encode()
    data = gzip.compress(body)
    path = tmp / "trace.swf.gz"
    path.write_bytes(data[: int(len(data) * keep)])
    return path


def _gz_truncated(tmp: Path) -> Path:
    return _swf_gz(tmp, 1000, 0.5)  # breaks within the first 64 KiB, seen when detecting


def _garbage(tmp: Path) -> Path:
    path = tmp / "garbage.swf"
    path.write_bytes(bytes(range(256)) * 64)
    return path


def _garbage_text(tmp: Path) -> Path:
    path = tmp / "mystery.log"
    path.write_bytes(b"\xff\xfe\x80 nothing like a job log\n" * 10)
    return path


def _empty(tmp: Path) -> Path:
    path = tmp / "empty.txt"
    path.write_bytes(b"")
    return path


INGEST_ERRORS: dict[str, tuple[Callable[[Path], Path], list[str], list[str]]] = {
    # case: (make the input, extra options, texts the message must hold)
    "missing file": (lambda t: t / "absent.swf", [], ["absent.swf", "no such file"]),
    "missing file, format named": (lambda t: t / "absent.swf", ["--format", "swf"],
                                   ["absent.swf", "no such file"]),
    "a folder": (lambda t: t, [], ["is a folder", "give the log file(s) inside it"]),
    "empty file": (_empty, [], ["empty.txt", "empty"]),
    "empty file, format named": (_empty, ["--format", "sacct"], ["empty.txt", "empty"]),
    "binary garbage": (_garbage, [], ["garbage.swf", "binary", "supported formats"]),
    "text of no known format": (_garbage_text, [], ["mystery.log", "--format"]),
    "truncated gzip": (_gz_truncated, [], ["trace.swf.gz", "truncated", "copy it again"]),
    "unknown format": (_empty, ["--format", "xml"], ["'xml'", "auto, swf, sacct"]),
    "unknown time zone": (_empty, ["--tz", "Mars/Olympus"], ["Mars/Olympus", "IANA name"]),
    "bad reject fraction": (_empty, ["--max-reject-fraction", "2"], ["max_reject_fraction",
                                                                     "[0, 1]"]),
}


@pytest.mark.parametrize("case", sorted(INGEST_ERRORS))
def test_ingest_bad_input_is_one_clear_line(case: str, tmp_path: Path) -> None:
    make, options, texts = INGEST_ERRORS[case]
    source = make(tmp_path)
    out = tmp_path / "out" / "jobs.parquet"
    result = CliRunner().invoke(app, ["ingest", str(source), "-o", str(out), *options])
    line = one_line_error(result)
    for text in texts:
        assert text in line, (text, line)
    assert not out.parent.exists() or not list(out.parent.iterdir())


def test_gzip_truncated_deep_inside_is_one_clear_line(tmp_path: Path) -> None:
    source = _swf_gz(tmp_path, 20_000, 0.9)  # breaks ~800 KB in, past what detection reads
    out = tmp_path / "out" / "jobs.parquet"
    result = CliRunner().invoke(app, ["ingest", str(source), "-o", str(out)])
    line = one_line_error(result)
    assert "trace.swf.gz" in line and "truncated" in line, line
    assert not out.parent.exists() or not list(out.parent.iterdir())


def _job_table_v2(tmp: Path) -> Path:
    path = tmp / "v2.parquet"
    pl.DataFrame({"job_id": ["1"]}).write_parquet(path, metadata={
        "hpcpolicy.schema_version": "2.0"})
    return path


def _plain_parquet(tmp: Path) -> Path:
    path = tmp / "plain.parquet"
    pl.DataFrame({"a": [1]}).write_parquet(path)
    return path


def _empty_job_table(tmp: Path) -> Path:
    path = tmp / "jobs.parquet"
    pl.DataFrame(schema=polars_schema()).write_parquet(path, metadata={
        "hpcpolicy.schema_version": SCHEMA_VERSION})
    return path


def _text_file(tmp: Path) -> Path:
    path = tmp / "jobs.parquet"
    path.write_text("job_id,user\n1,alice\n")
    return path


STATS_ERRORS: dict[str, tuple[Callable[[Path], Path], list[str], list[str]]] = {
    "missing table": (lambda t: t / "absent.parquet", [], ["absent.parquet", "hpcpolicy ingest"]),
    "a folder": (lambda t: t, [], ["is a folder"]),
    "not parquet": (_text_file, [], ["jobs.parquet", "not a Parquet file", "hpcpolicy ingest"]),
    "not a job table": (_plain_parquet, [], ["plain.parquet", "not an hpcpolicy job table"]),
    "other schema version": (_job_table_v2, [], ["v2.parquet", "schema 2.0", "re-ingest"]),
    "bad procs": (_empty_job_table, ["--procs", "0"], ["--procs", "positive"]),
    "procs and cluster": (_empty_job_table, ["--procs", "8", "--cluster", "c.toml"],
                          ["--cluster and --procs", "only one"]),
    "missing cluster file": (_empty_job_table, ["--cluster", "absent.toml"], ["absent.toml"]),
    "unknown time zone": (_empty_job_table, ["--tz", "Mars/Olympus"], ["Mars/Olympus",
                                                                        "IANA name"]),
}


@pytest.mark.parametrize("case", sorted(STATS_ERRORS))
def test_stats_bad_input_is_one_clear_line(case: str, tmp_path: Path) -> None:
    make, options, texts = STATS_ERRORS[case]
    result = CliRunner().invoke(app, ["stats", str(make(tmp_path)), *options])
    line = one_line_error(result)
    for text in texts:
        assert text in line, (text, line)


def test_demo_bad_option_is_one_clear_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["demo", "-o", str(tmp_path / "d"), "--jobs", "0"])
    assert "jobs must be between 1 and" in one_line_error(result)
    assert not (tmp_path / "d").exists()


def test_error_text_from_files_is_not_markup(tmp_path: Path) -> None:
    odd = tmp_path / "[bold]x[/].swf"
    result = CliRunner().invoke(app, ["ingest", str(odd), "-o", str(tmp_path / "j.parquet")])
    assert "[bold]x[/].swf" in one_line_error(result)


# --- the README documents every command ---

def _command_reference(readme: str) -> str:
    """The README section under a heading that contains 'command reference'."""
    match = re.search(r"^(#+)\s.*command reference.*$", readme, flags=re.I | re.M)
    assert match, "README.md has no heading containing 'Command reference'"
    level = len(match.group(1))
    rest = readme[match.end():]
    end = re.search(rf"^#{{1,{level}}}\s", rest, flags=re.M)
    return rest[: end.start()] if end else rest


def test_readme_documents_every_command() -> None:
    readme = ROOT / "README.md"
    assert readme.exists(), f"{readme} is missing; it must hold the command reference"
    section = _command_reference(readme.read_text(encoding="utf-8"))
    missing = [n for n in _command_names() if not re.search(rf"hpcpolicy {n}\b", section)]
    assert not missing, (
        f"README.md's command reference does not mention: {', '.join(missing)} "
        "(write each as `hpcpolicy NAME ...`)"
    )


def test_ingest_help_lists_options() -> None:
    result = CliRunner().invoke(app, ["ingest", "--help"])
    for option in ("--format", "--tz", "--procs", "--overwrite", "--max-reject-fraction"):
        assert option in result.output, option


def test_json_option_refuses_a_folder(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["stats", str(_plain_parquet(tmp_path)), "--json",
                                      str(tmp_path)])
    # the one-line error and exit 1 of every command, not a usage box (issue 28)
    assert result.exit_code == 1 and "is a folder; give the name of a file" in result.output
