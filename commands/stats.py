"""``hpcpolicy stats``: a workload profile of a job table, as Rich tables (and JSON)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from hpcpolicy.commands._console import console, fail_cleanly, is_quiet
from hpcpolicy.commands._options import JsonOutOpt, a_file
from hpcpolicy.textfmt import duration, rich_safe

__all__ = ["main", "render_profile"]

_BARS = " ▁▂▃▄▅▆▇█"
_DISTRIBUTIONS = (
    # (label, path in the profile, unit: "s" durations, "x" factor, "" counts)
    ("cpus", ("size", "cpus"), ""),
    ("nodes", ("size", "nodes"), ""),
    ("gpus", ("size", "gpus"), ""),
    ("run time", ("run_time_s",), "s"),
    ("requested time", ("req_walltime_s",), "s"),
    ("wait", ("wait_time_s",), "s"),
    ("requested / run", ("over_request", "factor"), "x"),
)


def _count(value: float) -> str:
    if abs(value) >= 1e6:
        return f"{value / 1e6:.1f}M"
    if abs(value) >= 1e4:
        return f"{value / 1e3:.0f}k"
    # whole above a thousand: every cell of the distributions fits 80 columns
    return f"{value:,.0f}" if float(value).is_integer() or abs(value) >= 1e3 else f"{value:,.1f}"


def _amount(value: float) -> str:
    """A total or average, with fewer decimals as it grows."""
    digits = 2 if abs(value) < 10 else 1 if abs(value) < 100 else 0
    return f"{value:,.{digits}f}"


def _value(value: float | None, unit: str) -> str:
    if value is None:
        return "—"
    if unit == "s":
        return duration(value)
    if unit == "x":
        return f"{value:.2f}" if value < 100 else _count(value)
    return _count(value)


def _when(iso: str | None) -> str:
    return "—" if iso is None else f"{iso[:16].replace('T', ' ')} UTC"


def _bars(counts: list[int]) -> str:
    top = max(counts) or 1
    return "".join(_BARS[round(c / top * (len(_BARS) - 1))] for c in counts)


def _share(value: float | None) -> str:
    return "—" if value is None else f"{value:.1%}"


def _overview(p: dict[str, Any]) -> Table:
    span, load, gpu = p["time_span"], p["load"], p["gpu"]
    table = Table(title=f"workload profile: {rich_safe(p['file'], longest=None)}",
                  show_header=False, title_justify="left")
    table.add_row("jobs", f"{p['jobs']:,}")
    table.add_row("users", "—" if p["users"] is None else f"{p['users']:,}")
    if p["partitions"]:
        table.add_row("partitions", f"{p['partitions']:,}")
    table.add_row("submits", f"{_when(span['first_submit'])} .. {_when(span['last_submit'])} "
                  f"({span['days']:,.1f} days)")
    states = ", ".join(f"{s} {n / p['jobs']:.1%}" for s, n in p["states"].items())
    table.add_row("final states", states or "—")
    machine = ("unknown" if load["machine_procs"] is None
               else f"{load['machine_procs']:,} cores")
    table.add_row("machine", f"{machine} [dim]({rich_safe(load['machine_source'])})[/]")
    table.add_row("core-hours", f"{_amount(load['core_hours'])} "
                  f"[dim]({load['jobs_with_size_and_runtime']:,} jobs with size and run time)[/]")
    mean = load["mean_cores_demanded"]
    table.add_row("cores demanded", "—" if mean is None else f"{_amount(mean)} on average")
    offered = load["offered_load"]
    table.add_row("offered load", "unknown (no machine size)" if offered is None
                  else f"{offered:.1%} of the machine")
    over = p["over_request"]
    if over["jobs_with_both"]:
        table.add_row("ran past limit", _share(over["share_ran_past_limit"]))
        table.add_row("requested >= 2x run", _share(over["share_requested_2x_or_more"]))
    if gpu is not None:
        types = ", ".join(f"{rich_safe(t)} {n:,}" for t, n in gpu["by_type"].items())
        table.add_row("GPU jobs", f"{gpu['jobs']:,} ({gpu['share_jobs']:.1%}), "
                      f"{_amount(gpu['gpu_hours'])} GPU-hours [dim]({types})[/]")
        if gpu["offered_load"] is not None:
            table.add_row("offered GPU load", f"{gpu['offered_load']:.1%} of "
                          f"{gpu['machine_gpus']:,} GPUs")
    return table


def _distributions(p: dict[str, Any]) -> Table:
    table = Table(title="distributions (unknown values left out; p25/p75 in --json)",
                  title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False,
                  collapse_padding=True)
    stats = ("min", "p10", "p50", "p90", "p99", "max", "mean")
    table.add_column("", no_wrap=True)
    table.add_column("known", justify="right")
    for name in stats:
        table.add_column(name, justify="right")
    for label, keys, unit in _DISTRIBUTIONS:
        dist = p
        for key in keys:
            dist = dist[key]
        table.add_row(label, _count(dist["known"]), *[_value(dist[s], unit) for s in stats])
    return table


def _arrivals(p: dict[str, Any]) -> Table:
    arr = p["arrivals"]
    table = Table(title=f"arrivals ({rich_safe(arr['time_zone'])})", show_header=False,
                  title_justify="left")
    by_hour = arr["by_hour"]
    peak = max(range(24), key=lambda h: by_hour[h])
    table.add_row("by hour 00..23", f"{_bars(by_hour)}  [dim]peak {peak:02d}:00, "
                  f"{by_hour[peak]:,} jobs[/]")
    days = arr["by_weekday"]
    table.add_row("by weekday", f"{_bars(list(days.values()))}  [dim]"
                  + " ".join(f"{d} {_count(n)}" for d, n in days.items()) + "[/]")
    if arr["jobs_per_day_mean"] is not None:
        table.add_row("jobs per day", f"{_amount(arr['jobs_per_day_mean'])} on average")
    return table


def _top_users(p: dict[str, Any]) -> Table:
    table = Table(title="top users by core-hours", title_justify="left")
    for name in ("user", "jobs", "core-hours", "share"):
        table.add_column(name, justify="left" if name == "user" else "right")
    for u in p["top_users"]:
        table.add_row("(unknown)" if u["user"] is None else rich_safe(u["user"]),
                      f"{u['jobs']:,}", _amount(u["core_hours"]), _share(u["share_core_hours"]))
    return table


def render_profile(p: dict[str, Any], out: Console) -> None:
    """Print a profile from :func:`hpcpolicy.stats.profile` as a few Rich tables."""
    for table in (_overview(p), _distributions(p), _arrivals(p), _top_users(p)):
        out.print(table)


def main(
    table: Annotated[
        Path, typer.Argument(help="Job table written by `hpcpolicy ingest` (NAME.parquet).",
                             show_default=False),
    ],
    json_out: JsonOutOpt = None,
    procs: Annotated[
        int | None, typer.Option("--procs", help="Machine size in cores, for the offered load; "
                                 "default: the log header's MaxProcs, else unknown.")
    ] = None,
    cluster: Annotated[
        Path | None, typer.Option("--cluster", help="Cluster spec file (TOML/JSON, see "
                                  "examples/) giving cores and GPUs; instead of --procs.",
                                  callback=a_file)
    ] = None,
    tz: Annotated[
        str | None, typer.Option("--tz", help="Time zone for arrivals by hour and weekday; "
                                 "default: the log's own (SWF TimeZoneString, or the --tz it "
                                 "was ingested with), else UTC.")
    ] = None,
    top: Annotated[int, typer.Option("--top", help="How many users to list.")] = 10,
) -> None:
    """Profile a job table: jobs, users, span, states, sizes, run and wait times, over-request,
    arrivals by hour and weekday, offered load vs machine size, top users, GPU share.

    Examples:

        hpcpolicy stats jobs.parquet

        hpcpolicy stats ricc.parquet --procs 8192 --json ricc.stats.json

        hpcpolicy stats gpu-jobs.parquet --cluster examples/gpu-partition.toml
    """
    from hpcpolicy.stats import profile, save_profile

    with fail_cleanly():
        result = profile(table, procs=procs, cluster=cluster, tz=tz, top_users=top)
        if json_out is not None:
            save_profile(result, json_out)
    if not is_quiet():
        render_profile(result, console)
    if json_out is not None:
        console.print(str(json_out), markup=False, soft_wrap=True)
