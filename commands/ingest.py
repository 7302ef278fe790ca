"""``hpcpolicy ingest``: real logs -> canonical job table + rejects + ingest report."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from hpcpolicy.commands._console import console, fail_cleanly, is_quiet
from hpcpolicy.commands._options import OverwriteOpt

__all__ = ["main"]


def main(
    inputs: Annotated[
        list[Path],
        typer.Argument(help="Log files: SWF (.swf, .swf.gz) or Slurm sacct exports (.txt, .csv, "
                       ".gz). Several files are read as one log.", show_default=False),
    ],
    out: Annotated[
        Path,
        typer.Option("--out", "-o", help="Job table to write, NAME.parquet. NAME.rejects.parquet "
                     "and NAME.ingest.json are written beside it.", dir_okay=False),
    ] = Path("jobs.parquet"),
    fmt: Annotated[
        str, typer.Option("--format", "-f", help="auto, swf or sacct.")
    ] = "auto",
    tz: Annotated[
        str, typer.Option("--tz", help="Time zone of the log's zone-less timestamps (sacct "
                          "prints the cluster's local time), e.g. Europe/Stockholm.")
    ] = "UTC",
    procs: Annotated[
        int | None, typer.Option("--procs", help="Machine size in processors for SWF logs whose "
                                 "header lacks MaxProcs (otherwise inferred and reported).")
    ] = None,
    max_reject_fraction: Annotated[
        float, typer.Option("--max-reject-fraction", help="Fail, writing nothing, when more than "
                            "this share of rows is rejected (a sign of the wrong format).")
    ] = 0.5,
    sacct_columns: Annotated[
        str | None, typer.Option("--sacct-columns", help="For a sacct export without a header "
                                 "line: its columns in order, comma-separated, as given to "
                                 "`sacct --format` (e.g. JobID,Submit,Start,End,State).")
    ] = None,
    overwrite: OverwriteOpt = False,
) -> None:
    """Read job logs, clean them, and write one canonical job table.

    Every input row ends up in exactly one place: a kept job, a folded job step, or
    NAME.rejects.parquet with a reason code; the counts (rows read = kept + rejected + folded)
    are printed and stored in NAME.ingest.json. Outputs are written atomically: a failed
    ingest leaves no file behind.

    Examples:

        hpcpolicy ingest sacct.txt -o jobs.parquet

        hpcpolicy ingest HPC2N-2002-2.2-cln.swf.gz -o hpc2n.parquet

        sacct --allusers --parsable2 --duplicates --format=ALL -S 2024-01-01 > sacct.txt
    """
    from rich.table import Table

    from hpcpolicy.ingest import IngestConfig, ingest
    from hpcpolicy.ingest.reasons import describe

    with fail_cleanly():
        cfg = IngestConfig(format=fmt, tz=tz, procs=procs,
                           max_reject_fraction=max_reject_fraction, overwrite=overwrite,
                           sacct_columns=tuple(sacct_columns.split(",")) if sacct_columns
                           else None)
        if is_quiet():
            report = ingest(inputs, out, cfg)
        else:
            with console.status("ingesting...") as status:
                report = ingest(inputs, out, cfg,
                                on_stage=lambda msg: status.update(f"ingest: {msg}"))
    if is_quiet():
        console.print(report.output)
        return
    table = Table(title=f"ingest -> {report.output}", show_header=False, title_justify="left")
    table.add_row("rows read", f"{report.rows_read:,}")
    table.add_row("jobs kept", f"{report.jobs_kept:,}")
    table.add_row("step rows folded", f"{report.steps_folded:,}")
    table.add_row("rows rejected", f"{report.rows_rejected:,}")
    for reason, n in report.rejected_by_reason.items():
        table.add_row(f"  {reason}", f"{n:,}  [dim]{describe(reason)}[/]")
    for rule, n in report.repaired_by_rule.items():
        if n:
            table.add_row(f"  repaired: {rule}", f"{n:,}  [dim]{describe(rule)}[/]")
    span = report.time_span
    table.add_row("submit span", f"{span['first_submit']} .. {span['last_submit']}")
    table.add_row("time", f"{report.timings_s['total']:.2f} s")
    console.print(table)
    for note in report.notes:
        console.print(f"[yellow]note:[/] {note}", markup=True, highlight=False)
