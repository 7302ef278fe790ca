"""``hpcpolicy whatif``: compare candidate policies with today's on the log, and write a report."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from hpcpolicy.commands._console import (
    console,
    fail_cleanly,
    is_quiet,
    note_first_compile,
    print_note,
    short_names,
    with_progress,
)
from hpcpolicy.commands._options import (
    ClusterOpt,
    OverwriteOpt,
    ProcsFromOpt,
    ProcsOpt,
    SeedOpt,
    SiteOpt,
    SpreadPenaltyOpt,
    TableArg,
    UnknownRunTimeOpt,
    WalltimeFallbackOpt,
    a_file,
    a_folder,
    lower_choice,
)
from hpcpolicy.commands._world import world_spec
from hpcpolicy.textfmt import visible

__all__ = ["main", "parse_period", "render_whatif"]

_VERDICT_STYLE = {"better": "bold green", "worse": "bold red", "mixed": "bold yellow",
                  "likely better": "green", "likely worse": "red", "no clear difference": "bold",
                  "no difference": "bold", "identical": "bold"}


def parse_period(text: str) -> int:
    """``7d``, ``1w``, ``12h``, seconds or Slurm's ``1-00:00:00``, as seconds (the one parser of
    lengths, :func:`hpcpolicy.durations.parse_duration`).

    Example:
        >>> parse_period("1w"), parse_period("12h"), parse_period("1-00:00:00")
        (604800, 43200, 86400)
    """
    from hpcpolicy.durations import DURATION_HINT, parse_duration
    from hpcpolicy.errors import ConfigError

    seconds = parse_duration(text)
    if seconds is None or seconds <= 0:
        raise ConfigError(f"--period {text!r}: write {DURATION_HINT}")
    return seconds


def render_whatif(doc: dict[str, Any]) -> None:
    """The verdict, one table per comparison and the fidelity in one paragraph."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    from hpcpolicy.whatif.compare import get_metric
    from hpcpolicy.whatif.verdicts import (
        format_value,
        relative_change,
        relative_interval,
        verdict_phrase,
    )

    # Every text below may hold names from the log: visible Text, never markup.
    console.print(Text.assemble(("verdict: ", "bold"), visible(doc["verdict"])), soft_wrap=True)
    for note in doc["notes"]:
        if note.startswith("warning: "):
            print_note(note)
    runs = {r["id"]: r for r in doc["runs"]}
    labels, legend = short_names([r["policy"] for r in doc["runs"]])
    for line in legend:
        console.print(line, markup=False, soft_wrap=True)

    def name(run_id: str) -> str:
        run = runs[run_id]
        spec = str(run["spec"]).replace(run["policy"], labels[run["policy"]], 1)
        return f"{run['scenario']}/{spec}"

    for c in doc["comparisons"]:
        table = Table(title=Text(f"{name(c['candidate_run'])} vs {name(c['baseline_run'])}"),
                      title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
        table.add_column("metric", ratio=1, min_width=12)
        for col in ("baseline", "candidate", "change", "CI"):
            table.add_column(col, justify="right", no_wrap=True)  # numbers are never cut
        table.add_column("verdict", ratio=1, min_width=9)
        for r in c["metrics"]:
            m = get_metric(r["key"])
            table.add_row(m.label, format_value(m, r["baseline"]),
                          format_value(m, r["candidate"]), relative_change(r),
                          relative_interval(r), Text(r["verdict"], _VERDICT_STYLE[r["verdict"]]))
        console.print(table)
        for r in c["metrics"]:
            if r.get("rel_note"):
                console.print(Text.assemble(("  note: ", "dim"), get_metric(r["key"]).label,
                                            ": ", r["rel_note"]), soft_wrap=True)
        primary = next(r for r in c["metrics"] if r["key"] == doc["config"]["metric"])
        console.print(Text.assemble(
            ("→ ", "dim"), (verdict_phrase(c["verdict"], primary), _VERDICT_STYLE[c["verdict"]]),
            f" over {c['windows']} windows"), soft_wrap=True)
        for t in c["tradeoffs"]:
            console.print(Text.assemble(("  trade-off: ", "yellow"), visible(t)), soft_wrap=True)
    f = doc["fidelity"]
    text = f["explanation"] if f["available"] else f"not available: {f['reason']}"
    console.print(Text.assemble(("fidelity: ", "bold"), visible(text)), soft_wrap=True)


def main(
    table: TableArg,
    baseline: Annotated[str, typer.Option(
        "--baseline", help="Today's policy as best known: POLICY+BACKFILL (fcfs+easy, "
        "fairshare+easy, ...).")] = "fcfs+easy",
    candidate: Annotated[list[str] | None, typer.Option(
        "--candidate", "-c", help="A policy to compare, POLICY[+BACKFILL] (backfilling "
        "default easy): a heuristic (sjf+easy) or a trained policy folder (runs/x/policy); "
        "with --slurm-conf also a change to it (PriorityWeightAge=5000, 'qos normal "
        "MaxJobsPerUser=50', conf:new-slurm.conf); repeat for several.")] = None,
    slurm_conf: Annotated[Path | None, typer.Option(
        "--slurm-conf", help="The site's slurm.conf: the baseline is it, replayed in the Slurm "
        "world on its nodes (--baseline is not used), and each -c change is it with the "
        "change applied.", callback=a_file, show_default=False)] = None,
    sacctmgr: Annotated[Path | None, typer.Option(
        "--sacctmgr", help="With --slurm-conf: folder of `sacctmgr show qos -P` (qos.txt) and "
        "`sacctmgr show assoc -P` (assoc.txt) dumps.", callback=a_folder,
        show_default=False)] = None,
    scenario: Annotated[list[str] | None, typer.Option(
        "--scenario", "-s", help="Also compare under a changed world: nodes=+10%, "
        "cluster=spec.toml, load=1.2, estimates=actual, range=2002-01-01..2002-07-01 "
        "(comma-join changes for one scenario; repeat for several).")] = None,
    out: Annotated[Path, typer.Option(
        "--out", "-o", help="Report folder (report.html, report.json, report.md; "
        "outcomes.parquet with --outcomes).", callback=a_folder)] = Path("report"),
    outcomes: Annotated[bool, typer.Option(
        "--outcomes", help="Also write outcomes.parquet: every replayed job of every run, one "
        "row each (for your own analysis; the report does not need it).")] = False,
    period: Annotated[str, typer.Option(
        "--period", help="Window of the paired comparison: 7d, 1w, 1d, 12h...")] = "7d",
    metric: Annotated[str, typer.Option(
        "--metric", help="Primary metric, which decides each verdict: mean_bsld, mean_wait_s, "
        "p95_wait_s, p95_bsld, mean_response_s or utilization.",
        callback=lower_choice)] = "mean_bsld",
    bootstrap: Annotated[int, typer.Option(
        "--bootstrap", help="Bootstrap replicates for the confidence intervals.")] = 2000,
    confidence: Annotated[float, typer.Option(
        "--confidence", help="Confidence level of the intervals.")] = 0.95,
    cluster: ClusterOpt = None,
    spread_penalty: SpreadPenaltyOpt = None,
    procs: ProcsOpt = None,
    procs_from: ProcsFromOpt = None,
    walltime_fallback: WalltimeFallbackOpt = None,
    unknown_run_time: UnknownRunTimeOpt = None,
    seed: SeedOpt = 0,
    site: SiteOpt = None,
    overwrite: OverwriteOpt = False,
) -> None:
    """Compare candidate policies with today's on your own log, and write a report to act on.

    Each candidate and the baseline are replayed on the same jobs, under the log as it was and
    under each --scenario. The log is cut into windows (--period) and each metric's
    difference gets a bootstrap confidence interval: a candidate is called better or worse
    only where the interval excludes zero, and trade-offs (a metric or a group of users that
    loses) are listed. Fidelity: where the log records start times, the baseline's replay is
    held against the logged waits, so you can see how far the simulator can be trusted here.

    Examples:

        hpcpolicy whatif jobs.parquet --candidate sjf+easy --candidate f1+easy

        hpcpolicy whatif jobs.parquet -c runs/ppo/policy -s nodes=+10% -s load=1.2 -o report/

        hpcpolicy whatif jobs.parquet --baseline fairshare+easy -c sjf+conservative
    """
    from hpcpolicy.table import open_job_table
    from hpcpolicy.whatif import WhatifConfig, check_report_dir, run_whatif, write_report
    from hpcpolicy.whatif.slurm_candidates import slurm_config, slurm_machine
    from hpcpolicy.world import open_world

    with fail_cleanly():
        note_first_compile()
        cfg = WhatifConfig(baseline=baseline, candidates=tuple(candidate or ("sjf+easy",)),
                           scenarios=tuple(scenario or ()), period_s=parse_period(period),
                           metric=metric, bootstrap=bootstrap, confidence=confidence, seed=seed,
                           **slurm_config(slurm_conf, sacctmgr, {"--site": site,
                                                                 "--cluster": cluster,
                                                                 "--procs": procs}))
        base, cands = cfg.run_specs()
        cfg.scenario_list()
        check_report_dir(out, overwrite=overwrite)
        world = open_world(table, world_spec(  # with slurm.conf, run_whatif takes its nodes
            cluster, slurm_machine(slurm_conf).total_cores if slurm_conf else procs, site,
            procs_from=procs_from, walltime_fallback=walltime_fallback,
            unknown_run_time=unknown_run_time, spread_penalty=spread_penalty,
            allocators=tuple(s.allocator for s in (base, *cands))))
        source_format = open_job_table(table).metadata.get("source_format")
        result = with_progress(
            lambda step: run_whatif(world.workload, world.cluster, cfg, source=str(table),
                                    source_format=source_format, on_step=step,
                                    site=None if site is None else world,
                                    site_path=None if site is None else str(site)),
            "replaying")
        paths = write_report(result, out, overwrite=overwrite, outcomes=outcomes)
    if is_quiet():
        console.print(visible(paths["html"], longest=None), markup=False, soft_wrap=True)
        return
    render_whatif(result.doc)
    shown = visible(paths["html"], longest=None)
    also = ", ".join(p.name for k, p in paths.items() if k != "html")
    console.print(f"report: {shown}  (also {also})", markup=False, soft_wrap=True)
