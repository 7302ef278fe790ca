"""The machine fails the command: a full disk, a folder it may not write, a folder where a file
belongs. Each is one line on stderr and exit 1, and leaves no partial output (issue 28)."""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path

import polars as pl
import pytest
from cli_helpers import invoke, one_line_error
from conftest import DATA

TINY = DATA / "stats_tiny.swf"
WHATIF = ("-c", "sjf+easy", "--bootstrap", "100", "--period", "1h", "--outcomes")


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("env") / "t.parquet"
    assert invoke("ingest", str(TINY), "-o", str(out)).exit_code == 0
    return out


def _no_space(*_args: object, **_kwargs: object) -> None:
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def _no_space_polars(*_args: object, **_kwargs: object) -> None:
    # what Polars raises when its Rust writer meets a full disk
    raise pl.exceptions.ComputeError("failed to write: No space left on device (os error 28)")


@pytest.mark.parametrize(("target", "raiser"), [
    ("polars.LazyFrame.sink_parquet", _no_space_polars),   # outcomes.parquet
    ("polars.LazyFrame.sink_parquet", _no_space),
    ("polars.DataFrame.write_ipc", _no_space_polars),      # the runs' tables in TMPDIR
    ("pathlib.Path.write_text", _no_space),
])
def test_full_disk_during_whatif(table: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                 target: str, raiser: object) -> None:
    monkeypatch.setattr(target, raiser)
    out = tmp_path / "rep"
    line = one_line_error(invoke("whatif", str(table), *WHATIF, "-o", str(out)))
    assert "No space left on device" in line
    assert not out.exists() or not any(out.iterdir())
    assert [p.name for p in tmp_path.iterdir() if p.name != "rep"] == []


def test_full_disk_during_ingest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("pathlib.Path.write_text", _no_space)
    line = one_line_error(invoke("ingest", str(TINY), "-o", str(tmp_path / "t.parquet")))
    assert "No space left on device" in line
    assert list(tmp_path.iterdir()) == []


def _denied(*args: object, **kwargs: object) -> None:
    raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), kwargs.get("dir"))


@pytest.mark.parametrize("command", ["whatif", "ingest"])
def test_output_folder_not_writable(table: Path, tmp_path: Path,
                                    monkeypatch: pytest.MonkeyPatch, command: str) -> None:
    # root may write anywhere, so the refusal is the one the OS would give anyone else; only
    # beside the output (what-if's scratch tables go to TMPDIR: next test)
    for name in ("mkstemp", "mkdtemp"):
        real = getattr(tempfile, name)
        monkeypatch.setattr(tempfile, name, lambda *a, _real=real, **kw: (
            _denied(*a, **kw) if kw.get("dir") else _real(*a, **kw)))
    if command == "whatif":
        result = invoke("whatif", str(table), *WHATIF, "-o", str(tmp_path / "rep"))
    else:
        result = invoke("ingest", str(TINY), "-o", str(tmp_path / "t.parquet"))
    line = one_line_error(result)
    assert "Permission denied" in line and str(tmp_path) in line


def test_whatif_with_tmpdir_not_writable_names_it(table: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    real = tempfile.mkdtemp
    monkeypatch.setattr(tempfile, "mkdtemp", lambda *a, **kw: (
        real(*a, **kw) if kw.get("dir") else _denied(*a, **kw)))
    line = one_line_error(invoke("whatif", str(table), *WHATIF, "-o", str(tmp_path / "rep")))
    assert f"error: {tempfile.gettempdir()}: Permission denied" in line
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_unreadable_input(tmp_path: Path) -> None:
    log = tmp_path / "x.swf"
    log.write_text(TINY.read_text())
    log.chmod(0)
    line = one_line_error(invoke("ingest", str(log), "-o", str(tmp_path / "t.parquet")))
    assert str(log) in line


def test_unreadable_table(table: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def denied(path: object) -> None:
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))

    monkeypatch.setattr(pl, "read_parquet_metadata", denied)
    line = one_line_error(invoke("stats", str(table)))
    assert "Permission denied" in line and str(table) in line


@pytest.mark.parametrize("args", [
    ("stats", "{folder}"),
    ("simulate", "{folder}"),
    ("whatif", "{folder}", "-o", "{folder}/rep"),
    ("stats", "{table}", "--json", "{folder}"),
    ("simulate", "{table}", "--json", "{folder}"),
    ("ingest", str(TINY), "-o", "{folder}/d.parquet"),
    ("whatif", "{table}", *WHATIF, "-o", "{table}"),
    ("generate", "-o", "{folder}"),
])
def test_folder_where_a_file_belongs_and_back(table: Path, tmp_path: Path,
                                              args: tuple[str, ...]) -> None:
    (tmp_path / "d.parquet").mkdir()
    filled = [a.format(folder=tmp_path, table=table) for a in args]
    line = one_line_error(invoke(*filled))
    assert "folder" in line or "a file" in line
