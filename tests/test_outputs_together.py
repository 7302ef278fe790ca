"""The outputs of one run are replaced together: a run killed at any point leaves the old set
or the new one, and the next run removes what the killed one left (issue 28, item 1)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest
from cli_helpers import invoke, one_line_error
from conftest import DATA, ROOT

from hpcpolicy.atomic import file_sha256

TINY = DATA / "stats_tiny.swf"
QUIRKS = DATA / "swf_quirks.swf"
WHATIF = ("--bootstrap", "100", "--period", "1h")

# Runs a command and exits at once (as SIGKILL would stop it) after its N-th rename.
_KILLED_AFTER_RENAME = """
import os, sys
n, count, real = int(sys.argv[1]), [0], os.replace
def replace(a, b):
    real(a, b)
    count[0] += 1
    if count[0] == n:
        os._exit(9)
os.replace = replace
from hpcpolicy.commands import app
sys.argv = ["hpcpolicy", *sys.argv[2:]]
app()
"""


def _killed_after_rename(n: int, *args: str) -> int:
    done = subprocess.run([sys.executable, "-c", _KILLED_AFTER_RENAME, str(n), *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode


def _ingest_state(out: Path) -> tuple[int, int, str]:
    """(jobs, rejects, source sha256) read through the library, checked against the report."""
    from hpcpolicy.table import open_job_table

    table = open_job_table(out)
    report = json.loads(out.with_name("t.ingest.json").read_text())
    jobs = table.frame.collect().height
    rejects = pl.read_parquet(out.with_name("t.rejects.parquet")).height
    sources = json.loads(table.metadata["sources"])
    assert (jobs, rejects) == (report["jobs_kept"], report["rows_rejected"])
    assert [s["sha256"] for s in sources] == [s["sha256"] for s in report["inputs"]]
    return jobs, rejects, report["inputs"][0]["sha256"]


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


@pytest.mark.parametrize("renames", [1, 2])
def test_ingest_killed_while_renaming_leaves_one_whole_set(tmp_path: Path, renames: int) -> None:
    out = tmp_path / "t.parquet"
    assert invoke("ingest", str(TINY), "-o", str(out)).exit_code == 0
    old = _ingest_state(out)
    code = _killed_after_rename(renames, "ingest", str(QUIRKS), "-o", str(out), "--overwrite",
                                "--max-reject-fraction", "1")
    assert code == 9
    now = _ingest_state(out)
    assert now != old  # the journal was written before the first rename: the new set holds
    assert invoke("ingest", str(QUIRKS), "-o", str(out), "--overwrite",
                  "--max-reject-fraction", "1").exit_code == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "t.ingest.json", "t.parquet", "t.rejects.parquet"]


@pytest.mark.parametrize("renames", [2])
def test_whatif_killed_while_renaming_leaves_one_whole_report(tmp_path: Path,
                                                              renames: int) -> None:
    from hpcpolicy.atomic import finish_commit, journal_for

    table, rep = tmp_path / "t.parquet", tmp_path / "rep"
    assert invoke("ingest", str(TINY), "-o", str(table)).exit_code == 0
    assert invoke("whatif", str(table), "-c", "sjf+easy", *WHATIF, "-o", str(rep)).exit_code == 0
    before = {p.name: p.read_bytes() for p in rep.iterdir()}
    code = _killed_after_rename(renames, "whatif", str(table), "-c", "f1+easy", *WHATIF,
                                "-o", str(rep), "--overwrite")
    assert code == 9
    assert finish_commit(journal_for(rep / "report.json"))
    after = {p.name: p.read_bytes() for p in rep.iterdir()}
    assert sorted(after) == sorted(before)
    assert all(after[name] != before[name] for name in after)  # every file is the new one
    assert b"f1+easy" in after["report.json"] and b"f1+easy" in after["report.html"]


def test_next_run_removes_leftovers_of_killed_runs(tmp_path: Path) -> None:
    out, rep = tmp_path / "t.parquet", tmp_path / "rep"
    pid = _dead_pid()
    rep.mkdir()
    litter = [tmp_path / f".t.parquet.{pid}.abcdefgh.part",
              tmp_path / ".t.rejects.parquet.k2j3h4g5.part",  # before names held the pid
              tmp_path / f"..t.parquet.commit.{pid}.zzzzzzzz.part",
              rep / f".report.html.{pid}.abcdefgh.part", rep / ".outcomes.parquet.a1b2c3d4.part"]
    for path in litter:
        path.write_bytes(b"x" * 100)
    live = tmp_path / f".t.parquet.{os.getpid()}.abcdefgh.part"  # a run still going
    live.write_bytes(b"x")
    assert invoke("ingest", str(TINY), "-o", str(out)).exit_code == 0
    assert invoke("whatif", str(out), "-c", "sjf+easy", *WHATIF, "-o", str(rep)).exit_code == 0
    assert not any(p.exists() for p in litter)
    assert live.exists()


def test_policy_build_folders_of_killed_exports_are_removed(tmp_path: Path) -> None:
    from hpcpolicy.atomic import build_dir, replace_dir

    target = tmp_path / "policy"
    stale = [tmp_path / f".policy.{_dead_pid()}.abcdefgh.build", tmp_path / ".policy.q1w2e3r4"]
    for folder in stale:
        folder.mkdir()
        (folder / "policy.onnx").write_bytes(b"x")
    build = build_dir(target)
    (build / "manifest.json").write_text("{}")
    replace_dir(build, target)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["policy"]


def test_replace_dir_killed_between_renames_puts_the_old_folder_back(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hpcpolicy import atomic

    target = tmp_path / "policy"
    target.mkdir()
    (target / "v").write_text("old")
    build = atomic.build_dir(target)
    (build / "v").write_text("new")
    monkeypatch.setattr(atomic, "_exchange", lambda a, b: False)  # a file system that cannot
    real = os.replace

    def dies_on_second(a: object, b: object) -> None:
        if not target.exists():
            raise KeyboardInterrupt  # stands for the kill between the two renames
        real(a, b)  # type: ignore[arg-type]

    monkeypatch.setattr(atomic.os, "replace", dies_on_second)
    with pytest.raises(KeyboardInterrupt):
        atomic.replace_dir(build, target)
    monkeypatch.setattr(atomic.os, "replace", real)
    for aside in tmp_path.glob(f".policy.{os.getpid()}.*"):  # as if this run were gone
        aside.rename(aside.with_name(aside.name.replace(str(os.getpid()), str(_dead_pid()))))
    atomic.remove_leftovers(target)
    assert (target / "v").read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["policy"]


def test_a_journal_naming_files_elsewhere_is_ignored(tmp_path: Path) -> None:
    from hpcpolicy.atomic import finish_commit, journal_for

    (tmp_path / "sub").mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    journal = journal_for(tmp_path / "sub" / "t.parquet")
    journal.write_text(json.dumps({"replace": [["../victim.txt", "t.parquet"]],
                                   "remove": ["../victim.txt"]}))
    assert not finish_commit(journal)
    assert victim.read_text() == "keep" and not (tmp_path / "sub" / "t.parquet").exists()


# Runs a command that stops before it writes anything (after its checks), until told to go.
_PAUSED_BEFORE_WRITING = """
import pathlib, sys, time
from hpcpolicy import atomic
ready, go = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
def paused(write):
    def wait_then(*args, **kwargs):
        ready.touch()
        deadline = time.monotonic() + 120
        while not go.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        return write(*args, **kwargs)
    return wait_then
atomic.replace_together = paused(atomic.replace_together)
atomic.atomic_path = paused(atomic.atomic_path)
from hpcpolicy.commands import app
sys.argv = ["hpcpolicy", *sys.argv[3:]]
app()
"""


def _calibration_table(path: Path) -> Path:
    from benchmarks.builders.job_tables import job_table, write_job_table

    rows = [{"submit": 300 * i, "wait": (i * 37) % 900, "run_time_s": 600 + (i * 53) % 1200,
             "req_cpus": 1 + i % 4, "req_walltime_s": 3600} for i in range(700)]
    return write_job_table(path, job_table(rows), [{"MaxProcs": 8}])


@pytest.mark.parametrize("command", ["ingest", "whatif", "calibrate", "dataset build"])
def test_a_second_run_to_the_same_new_output_is_refused_while_the_first_runs(
        tmp_path: Path, command: str) -> None:
    """Both runs looked before either wrote: without a lock both passed the check, both
    exited 0, and the first one's result replaced the second's unseen (a dataset's manifest
    then named the other run's files)."""
    if command == "ingest":
        out = tmp_path / "t.parquet"
        first, second = [str(TINY), "-o", str(out)], [str(QUIRKS), "-o", str(out),
                                                     "--max-reject-fraction", "1"]
    elif command == "dataset build":
        from offline_jobs import write_logged_table

        out = tmp_path / "data"
        first = [str(write_logged_table(tmp_path / "jobs.parquet", 300)), "--source", "logged",
                 "--k", "8", "--window-size", "40", "--seed", "2", "-o", str(out)]
        second = first
    else:
        table = (_calibration_table(tmp_path / "c.parquet") if command == "calibrate"
                 else tmp_path / "t.parquet")
        if command == "whatif":
            assert invoke("ingest", str(TINY), "-o", str(table)).exit_code == 0
        out = tmp_path / ("site.toml" if command == "calibrate" else "rep")
        first = [str(table), "-o", str(out)] + (
            ["-c", "sjf+easy", *WHATIF] if command == "whatif" else [])
        second = first
    ready, go = tmp_path / "ready", tmp_path / "go"
    proc = subprocess.Popen([sys.executable, "-c", _PAUSED_BEFORE_WRITING, str(ready), str(go),
                             *command.split(), *first], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not ready.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ready.exists(), proc.communicate()
        result = invoke(*command.split(), *second)
    finally:
        go.touch()
        _, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 0, stderr
    line = one_line_error(result)
    assert f"{out} is being written by another run (pid {proc.pid})" in line, line
    assert "choose another -o" in line
    if command == "ingest":  # the first run's result is the one there
        assert _ingest_state(out)[2] == file_sha256(TINY)
    assert not list(tmp_path.glob(".*.lock")) and not list(out.parent.glob(".*.lock"))


@pytest.mark.parametrize("overwrite", [False, True])
def test_two_runs_writing_one_set_at_once_leave_one_whole_set(tmp_path: Path,
                                                             overwrite: bool) -> None:
    """Before the lock, two commits at once interleaved their renames (a mixed set in 11 of
    400 rounds, or a run failing on a rename the other had done), and without --overwrite
    both runs passed the existence check; benchmarks/concurrent_outputs.py runs 400 rounds."""
    from benchmarks.builders.output_races import write_races

    races = write_races(tmp_path, rounds=30, overwrite=overwrite)
    assert (races.mixed, races.vanished, races.litter, races.errors) == (0, 0, 0, [])
    assert races.refused == (0 if overwrite else races.rounds)  # one run of each round


def test_a_table_replaced_again_and_again_is_read_without_a_traceback(tmp_path: Path) -> None:
    """Before the table was opened once, a profile read the new file with the old footer
    ("Invalid thrift"); benchmarks/concurrent_outputs.py runs 100 reads."""
    from benchmarks.builders.output_races import read_races

    races = read_races(tmp_path, reads=20)
    assert races.replacements >= 5  # the reads did overlap replacements
    assert (races.errors, races.mixed) == ([], 0)


def test_a_reader_on_a_read_only_file_system_leaves_the_journal(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A reader cannot take the set's lock where nothing may be written (a read-only mount of
    shared data): it reads the files as they are, without a traceback."""
    import errno

    from hpcpolicy import atomic, outlock

    journal = atomic.journal_for(tmp_path / "t.parquet")
    journal.write_text(json.dumps({"replace": [], "remove": []}))

    def read_only(*args: object, **kwargs: object) -> int:
        raise OSError(errno.EROFS, "Read-only file system", str(args[0]))

    monkeypatch.setattr(outlock.os, "open", read_only)
    assert not atomic.finish_commit(journal)
    assert journal.exists()
