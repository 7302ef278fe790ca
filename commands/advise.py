"""``hpcpolicy advise``: rank a live Slurm's pending jobs with a policy, and set that order."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from hpcpolicy.commands._console import console, err_console, fail_cleanly, is_quiet
from hpcpolicy.commands._options import PolicyOpt, a_file

if TYPE_CHECKING:
    from hpcpolicy.errors import SlurmError
    from hpcpolicy.slurm.advise import Change, Pass

__all__ = ["main"]

_SHOWN = 20


def _warn_failed(failed: Sequence[tuple[Change, str]]) -> None:
    """One warning line per update scontrol refused (the audit file records them too)."""
    for c, why in failed:
        err_console.print(f"warning: {c.command()} failed: {why}", markup=False, soft_wrap=True)


def _show(result: Pass | SlurmError, apply: bool) -> None:
    from rich.table import Table

    from hpcpolicy.errors import SlurmError

    if isinstance(result, SlurmError):  # a watch goes on; say why this pass was skipped
        err_console.print(f"warning: pass skipped: {result}", markup=False, soft_wrap=True)
        return
    now = result.snapshot.now
    stamp = datetime.fromtimestamp(now).strftime("%H:%M:%S")
    for s in result.snapshot.skipped:
        err_console.print(f"warning: left out: {s.describe()}", markup=False, soft_wrap=True)
    _warn_failed(result.failed)
    if is_quiet():
        console.print(f"{stamp} ranked {len(result.ranked)} changed "
                      f"{len(result.changes) - len(result.failed)}")
        return
    table = Table(title=f"{stamp}  {len(result.ranked)} pending jobs ranked "
                  f"({result.held} held left alone)", title_justify="left")
    for col in ("rank", "job", "partition", "user", "cpus", "limit", "priority",
                "predicted start"):
        table.add_column(col, justify="right" if col in ("rank", "cpus") else "left")
    new = {c.job_id: c.after for c in result.changes}
    for r, (job, start) in enumerate(zip(result.ranked[:_SHOWN], result.predicted_start,
                                         strict=False)):
        prio = f"{job.priority} -> {new[job.job_id]}" if job.job_id in new else str(job.priority)
        when = "never fits" if start < 0 else (
            "now" if start <= now else f"in {start - now} s")
        table.add_row(str(r + 1), job.job_id, job.partition, job.user, str(job.cpus),
                      f"{job.limit_s // 60} min", prio, when)
    console.print(table)
    if len(result.ranked) > _SHOWN:
        console.print(f"... and {len(result.ranked) - _SHOWN} more")
    verb = "set" if apply else "dry run, would run"
    for c in result.changes[:_SHOWN]:
        console.print(f"{verb}: {c.command()}", markup=False)
    if len(result.changes) > _SHOWN:
        console.print(f"{verb}: ... and {len(result.changes) - _SHOWN} more updates")
    if result.deferred:
        console.print(f"rate limit: {result.deferred} updates left for the next pass")


def main(
    policy: PolicyOpt = None,
    partition: Annotated[
        list[str] | None, typer.Option("--partition", help="Only rank and touch pending jobs "
                                       "of this partition (repeat for several; default all).",
                                       show_default=False)
    ] = None,
    apply: Annotated[
        bool, typer.Option("--apply", help="Set the priorities with scontrol (default: a dry "
                           "run that prints the commands).")
    ] = False,
    watch: Annotated[
        float | None, typer.Option("--watch", help="Repeat every SECONDS until Ctrl-C or "
                                   "SIGTERM (the pass under way finishes first).",
                                   min=0.1, show_default=False)
    ] = None,
    audit: Annotated[
        Path | None, typer.Option("--audit", help="JSONL file every priority change is "
                                  "appended to (needed by --apply and --restore).",
                                  callback=a_file, show_default=False)
    ] = None,
    restore: Annotated[
        bool, typer.Option("--restore", help="Hand the order back to Slurm: set every job of "
                           "the --audit file that is still pending back to the priority it had "
                           "before advise changed it.")
    ] = False,
    max_changes: Annotated[
        int, typer.Option("--max-changes", help="At most this many priority updates per pass.")
    ] = 200,
) -> None:
    """Rank the pending jobs of a live Slurm with a policy and print them with their
    predicted starts; with --apply, set that order through `scontrol update JobId=...
    Priority=...`. It never cancels, holds or resizes a job, and leaves held jobs alone.
    It reads no field a user types (account, job name...) and confirms every job through
    `squeue --json` before ranking it; a job that fails either check is left out and named
    (with --apply, in the --audit file too), and one failed update does not stop the others.

    Examples:

        hpcpolicy advise --policy sjf --partition batch

        hpcpolicy advise --policy sjf --apply --watch 30 --audit advise.jsonl

        hpcpolicy advise --restore --audit advise.jsonl
    """
    from hpcpolicy.deploy.guard import guard_note
    from hpcpolicy.errors import ConfigError
    from hpcpolicy.slurm import advise as lib

    parts = tuple(partition or ())
    with fail_cleanly():
        if restore:
            if audit is None:
                raise ConfigError("--restore needs --audit FILE, the audit of the run to undo")
            reset, failed = lib.restore(audit, partitions=parts)
            _warn_failed(failed)
            console.print(f"restored {len(reset)} job priorities from {audit}"
                          + (f" ({len(failed)} refused, recorded there)" if failed else ""))
            return
        if policy is None:
            raise ConfigError("--policy is required (e.g. --policy sjf), unless --restore")
        note = guard_note(policy)
        if note is not None:
            err_console.print(f"note: {note}", markup=False)
        cfg = lib.AdviseConfig(policy=policy, partitions=parts, apply=apply,
                               max_changes=max_changes,
                               audit=None if audit is None else str(audit))
        if watch is None:
            _show(lib.advise_pass(cfg), apply)
            return
        with contextlib.suppress(KeyboardInterrupt):  # a second Ctrl-C during a pass
            lib.watch(cfg, watch, lambda r: _show(r, apply))
        console.print("stopped")
