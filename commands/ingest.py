"""``hpcpolicy ingest``: real logs -> canonical job table + rejects + ingest report."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from hpcpolicy.commands._console import console, fail_cleanly, is_quiet, plain, print_note
from hpcpolicy.commands._options import OverwriteOpt, a_file, lower_choice
from hpcpolicy.limits import GZIP_FLOOR_BYTES, HEADER_BYTES_PER_COLUMN, Limits

__all__ = ["main"]


def main(
    inputs: Annotated[
        list[Path],
        typer.Argument(help="Log files: SWF (.swf, .swf.gz), Slurm sacct exports (.txt, .csv, "
                       ".gz), or GPU-cluster traces: an Alibaba GPU-trace pod list, a Helios "
                       "cluster_log.csv or a Philly job log as CSV. Several files are read as "
                       "one log.", show_default=False),
    ],
    out: Annotated[
        Path,
        typer.Option("--out", "-o", help="Job table to write, NAME.parquet. NAME.rejects.parquet "
                     "and NAME.ingest.json are written beside it.", callback=a_file),
    ] = Path("jobs.parquet"),
    fmt: Annotated[
        str, typer.Option("--format", "-f", help="auto (recognised from the first lines), swf, "
                          "sacct, alibaba (Alibaba GPU trace 2023 pod list), helios or philly.",
                          callback=lower_choice)
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
    origin: Annotated[
        str | None, typer.Option("--origin", help="Alibaba GPU trace: the UTC instant its "
                                 "times (seconds from the trace start) count from; the trace "
                                 "gives no date, so the default is an arbitrary "
                                 "2023-01-01T00:00:00Z.", show_default=False)
    ] = None,
    node_list: Annotated[
        Path | None, typer.Option("--node-list", help="Alibaba GPU trace: its node list "
                                  "(openb_node_list_all_node.csv), written as the cluster spec "
                                  "NAME.cluster.toml. By default the file of that name beside "
                                  "the pod list, if there is one.", callback=a_file,
                                  show_default=False)
    ] = None,
    max_line_bytes: Annotated[
        int, typer.Option("--max-line-bytes", help="Longest input line accepted, in bytes; a "
                          "longer one stops the ingest (it is not a log's line).")
    ] = Limits.line_bytes,
    max_columns: Annotated[
        int, typer.Option("--max-columns", help="Most columns an input's header may name "
                          f"({HEADER_BYTES_PER_COLUMN} header bytes allowed per column).")
    ] = Limits.columns,
    max_gzip_ratio: Annotated[
        float, typer.Option("--max-gzip-ratio", help="Most times gzip input may expand, checked "
                            f"past {GZIP_FLOOR_BYTES >> 20} MiB (real logs: 5 to 12 times).")
    ] = Limits.gzip_ratio,
    overwrite: OverwriteOpt = False,
) -> None:
    """Read job logs, clean them, and write one canonical job table.

    Every input row ends up in exactly one place: a kept job, a folded job step, or
    NAME.rejects.parquet with a reason code; the counts (rows read = kept + rejected + folded)
    are printed and stored in NAME.ingest.json. An Alibaba GPU trace with its node list also
    gives NAME.cluster.toml, the cluster spec. Outputs are written atomically: a failed
    ingest leaves no file behind.

    Examples:

        hpcpolicy ingest sacct.txt -o jobs.parquet

        hpcpolicy ingest HPC2N-2002-2.2-cln.swf.gz -o hpc2n.parquet

        hpcpolicy ingest openb_pod_list_default.csv -o openb.parquet

        hpcpolicy ingest Venus/cluster_log.csv -o venus.parquet

        sacct --allusers --duplicates --parsable2 -S 2024-01-01 -E now --format=ALL > sacct.txt
    """
    from rich.table import Table

    from hpcpolicy.ingest import IngestConfig, ingest
    from hpcpolicy.ingest.reasons import describe

    with fail_cleanly():
        cfg = IngestConfig(format=fmt, tz=tz, procs=procs,
                           max_reject_fraction=max_reject_fraction, overwrite=overwrite,
                           sacct_columns=tuple(sacct_columns.split(",")) if sacct_columns
                           else None, origin=origin,
                           node_list=str(node_list) if node_list is not None else None,
                           max_line_bytes=max_line_bytes, max_columns=max_columns,
                           max_gzip_ratio=max_gzip_ratio)
        if is_quiet():
            report = ingest(inputs, out, cfg)
        else:
            with console.status("ingesting...") as status:
                report = ingest(inputs, out, cfg,
                                on_stage=lambda msg: status.update(f"ingest: {msg}"))
    if is_quiet():
        console.print(plain(report.output), soft_wrap=True)
        if report.cluster_spec:
            console.print(plain(report.cluster_spec), soft_wrap=True)
        return
    # Paths and notes quote the user's files and logs: Text, never markup.
    table = Table(title=plain(f"ingest -> {report.output}"), show_header=False,
                  title_justify="left")
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
    if report.cluster_spec:
        table.add_row("cluster spec", plain(report.cluster_spec))
    table.add_row("time", f"{report.timings_s['total']:.2f} s")
    console.print(table)
    for note in report.notes:
        print_note(note)
