"""Races on one output (issue 38): two runs writing the same output set at once, and a reader
profiling a job table while it is replaced.

``tests/test_outputs_together.py`` runs a few rounds of each; ``benchmarks/concurrent_outputs.py``
runs the issue's 400 and 100. Every run is its own process (spawned), as two commands are.

Example:
    >>> import tempfile
    >>> races = write_races(Path(tempfile.mkdtemp()), rounds=2, overwrite=True)
    >>> races.mixed, races.errors
    (0, [])
"""

from __future__ import annotations

import multiprocessing as mp
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.builders.job_tables import job_table, write_job_table

__all__ = ["SET", "ReadRaces", "WriteRaces", "read_races", "write_races"]

SET = ("t.parquet", "t.rejects.parquet", "t.ingest.json")
"""The files of one output set (named as ingest's)."""
_RENAME_S = 0.001
"""Each rename of a writer takes this long more, so that two commits at once overlap."""


@dataclass
class WriteRaces:
    """What rounds of two runs writing the same output set left."""

    rounds: int
    mixed: int = 0
    """Sets holding files of both runs, or only some of the files."""
    vanished: int = 0
    """Runs that succeeded (without --overwrite) whose set is not the one there."""
    refused: int = 0
    """Runs refused in one line (another run is writing it, or it exists)."""
    litter: int = 0
    """Lock, journal or temporary files left once both runs are done."""
    errors: list[str] = field(default_factory=list)
    """Anything else a run raised."""


@dataclass
class ReadRaces:
    """What profiling a table while it is replaced gave."""

    reads: int
    replacements: int = 0
    """Tables renamed over the one being read, meanwhile."""
    mixed: int = 0
    """Profiles whose figures come from both versions."""
    errors: list[str] = field(default_factory=list)
    """Exceptions the reads raised (each would be a traceback in ``hpcpolicy stats``)."""


def _slow_renames() -> None:
    real = os.replace

    def replace(a: Any, b: Any) -> None:
        real(a, b)
        time.sleep(_RENAME_S)

    os.replace = replace


def _write_rounds(folder: str, tag: str, rounds: int, overwrite: bool, barrier: Any,
                  results: Any) -> None:
    """One run per round: (without ``overwrite``) claim and look, then write ``tag`` into
    every file of round ``r``'s set together."""
    from hpcpolicy import atomic
    from hpcpolicy.errors import HpcPolicyError

    _slow_renames()
    outcomes = []
    for r in range(rounds):
        targets = [Path(folder) / str(r) / name for name in SET]
        barrier.wait(timeout=60)
        try:
            if not overwrite:
                atomic.claim_outputs(*targets, overwrite=False)
            with atomic.replace_together(targets) as staged:
                for tmp in staged:
                    tmp.write_text(tag, encoding="utf-8")
            outcomes.append("ok")
        except HpcPolicyError:
            outcomes.append("refused")
        except Exception as exc:  # counted: a traceback in a command
            outcomes.append(f"{type(exc).__name__}: {exc}")
    results.put((tag, outcomes))


def write_races(folder: Path, rounds: int, *, overwrite: bool) -> WriteRaces:
    """``rounds`` rounds of two runs writing the same new set in ``folder`` at once, each run
    refusing an existing set unless ``overwrite``."""
    ctx = mp.get_context("spawn")
    barrier, results = ctx.Barrier(2), ctx.Queue()
    runs = [ctx.Process(target=_write_rounds, args=(str(folder), tag, rounds, overwrite,
                                                    barrier, results)) for tag in "AB"]
    for run in runs:
        run.start()
    outcomes = dict(results.get(timeout=60 + 5 * rounds) for _ in runs)
    for run in runs:
        run.join(timeout=60)
    races = WriteRaces(rounds)
    for r in range(rounds):
        files = [folder / str(r) / name for name in SET]
        there = {f.read_text(encoding="utf-8") if f.exists() else None for f in files}
        ok = [tag for tag in "AB" if outcomes[tag][r] == "ok"]
        races.refused += sum(outcomes[tag][r] == "refused" for tag in "AB")
        races.errors += [outcomes[tag][r] for tag in "AB"
                         if outcomes[tag][r] not in ("ok", "refused")]
        if len(there) != 1:
            races.mixed += 1
        elif not overwrite:
            races.vanished += sum(tag not in there for tag in ok)
        if (folder / str(r)).is_dir():
            races.litter += sum(1 for p in (folder / str(r)).iterdir() if p.name not in SET)
    return races


def _replace_until(path: str, versions: list[bytes], stop: Any, done: Any) -> None:
    """Rename the versions of the table over ``path`` in turn, as ``ingest --overwrite``
    does, until ``stop`` is set; count them in ``done``."""
    from hpcpolicy.atomic import replace_together

    table = Path(path)
    count = 0
    while not stop.is_set():
        with replace_together([table, table.with_name("t.ingest.json")]) as (new, report):
            new.write_bytes(versions[count % len(versions)])
            report.write_text(str(count), encoding="utf-8")
        count += 1
    done.value = count


def _versions(folder: Path) -> tuple[list[bytes], dict[int, int]]:
    """Two job tables of different sizes (their bytes), and users by job count of each."""
    out, users = [], {}
    for jobs, people in ((300, 7), (500, 11)):
        rows = [{"submit": 60 * i, "wait": i % 90, "run_time_s": 100 + i % 400,
                 "req_cpus": 1 + i % 4, "req_walltime_s": 900, "user": f"u{i % people}"}
                for i in range(jobs)]
        path = write_job_table(folder / f"v{jobs}.parquet", job_table(rows), [{"MaxProcs": 8}])
        out.append(path.read_bytes())
        users[jobs] = people
    return out, users


def read_races(folder: Path, reads: int) -> ReadRaces:
    """``reads`` profiles (:func:`hpcpolicy.stats.profile`, as ``hpcpolicy stats`` reads)
    of ``folder/t.parquet`` while another process keeps renaming new tables over it."""
    from hpcpolicy.stats import profile

    versions, users = _versions(folder)
    path = folder / "t.parquet"
    path.write_bytes(versions[0])
    ctx = mp.get_context("spawn")
    stop, done = ctx.Event(), ctx.Value("i", 0)
    writer = ctx.Process(target=_replace_until, args=(str(path), versions, stop, done))
    writer.start()
    races = ReadRaces(reads)
    try:
        while not (folder / "t.ingest.json").exists() and writer.is_alive():
            time.sleep(0.01)
        for _ in range(reads):
            try:
                p = profile(path, procs=8)
            except Exception as exc:  # counted: a traceback in a command
                races.errors.append(f"{type(exc).__name__}: {str(exc).splitlines()[0]}")
                continue
            if users.get(p["jobs"]) != p["users"]:
                races.mixed += 1
    finally:
        stop.set()
        writer.join(timeout=60)
    races.replacements = int(done.value)
    return races
