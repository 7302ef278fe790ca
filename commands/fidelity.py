"""``hpcpolicy fidelity``: how closely a replay of the log as it was reproduces its waits."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from hpcpolicy.commands._console import (
    console,
    fail_cleanly,
    is_quiet,
    note_first_compile,
    plain,
    print_note,
)
from hpcpolicy.commands._options import (
    ClusterOpt,
    JsonOutOpt,
    OverwriteOpt,
    ProcsOpt,
    SiteOpt,
    SlurmCompatHelp,
    TableArg,
    WalltimeFallbackOpt,
    lower_choice,
    refuse_existing,
)
from hpcpolicy.commands._world import slurm_layout_of, world_spec
from hpcpolicy.world.protocol import TRAIN_FRAC

__all__ = ["FitFracOpt", "main", "render_sections"]

FitFracOpt = Annotated[float, typer.Option(
    "--fit-frac", help="Share of the jobs (submit order) a calibration fits on; the rest is "
    "out of sample.")]


def render_sections(rows: list[tuple[str, dict[str, Any]]], title: str) -> None:
    """One table row per (label, fidelity section)."""
    from rich import box
    from rich.table import Table

    from hpcpolicy.textfmt import duration

    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for col in ("part", "jobs", "logged mean", "replayed mean", "mean err", "spearman",
                "trust"):
        table.add_column(col, justify="left" if col in ("part", "trust") else "right")
    for label, s in rows:
        if not s.get("available", True) or s.get("spearman") is None:
            continue
        rel = s["mean_wait_rel_error"]
        # a partition name from the log is text, never markup
        table.add_row(plain(label), f"{s['jobs']:,}", duration(s["logged_mean_wait_s"]),
                      duration(s["simulated_mean_wait_s"]),
                      "-" if rel is None else f"{rel:+.0%}", f"{s['spearman']:.2f}",
                      s["trust"] or "-")
    console.print(table)


def main(
    table: TableArg,
    site: SiteOpt = None,
    compat: Annotated[str | None, typer.Option(
        "--compat", help="Another engine; only " + SlurmCompatHelp,
        callback=lower_choice)] = None,
    fit_frac: FitFracOpt = TRAIN_FRAC,
    cluster: ClusterOpt = None,
    procs: ProcsOpt = None,
    walltime_fallback: WalltimeFallbackOpt = None,
    json_out: JsonOutOpt = None,
    overwrite: OverwriteOpt = False,
) -> None:
    """Replay the log as it was (FCFS + EASY, the site model's world, or Slurm's own
    scheduling with --compat slurm) and compare the replayed waits with the logged ones: on
    the whole log, out of sample (after --fit-frac), by month, partition and job size.

    Examples:

        hpcpolicy fidelity jobs.parquet

        hpcpolicy fidelity jobs.parquet --site site.toml --json fidelity.json

        hpcpolicy fidelity sacct.parquet --compat slurm --cluster examples/slurm-test.toml
    """
    from hpcpolicy.atomic import write_json
    from hpcpolicy.compat import SLURM_FLAVOUR
    from hpcpolicy.errors import ConfigError
    from hpcpolicy.sim.windows import never_fits_note
    from hpcpolicy.site.fidelity import FidelityConfig, fidelity_report, unchecked
    from hpcpolicy.world import eligible_delay, open_workload, open_world

    with fail_cleanly():
        note_first_compile()
        refuse_existing(json_out, overwrite=overwrite)
        config = FidelityConfig(fit_frac=fit_frac)
        if compat not in (None, SLURM_FLAVOUR):
            raise ConfigError(f"fidelity --compat takes {SLURM_FLAVOUR} only, not {compat!r}")
        spec = world_spec(cluster, procs, walltime_fallback=walltime_fallback)
        workload = open_workload(table, spec.workload)
        nothing_to_check = unchecked(workload)
        if nothing_to_check is not None:  # an answer, not a failure: exit 0
            print_note(nothing_to_check + ("; no JSON written" if json_out else ""))
            return
        if compat == SLURM_FLAVOUR:
            layout = slurm_layout_of(table, workload, cluster, procs, **{"--site": site})
            machine = layout.cluster()
            engine = (layout.simulator(), "priority/basic", "slurm backfill")
            if not is_quiet():
                for note in machine.notes:
                    print_note(note)
            report = fidelity_report(workload, machine, None, config, engine=engine)
        else:  # the log as it was, and the site model fidelity_report applies to it
            machine = open_world(table, spec, jobs=workload).cluster
            model = spec.with_site(site).site_model()
            delay = eligible_delay(table, workload) if model and model.use_eligible else None
            report = fidelity_report(workload, machine, model, config, delay=delay)
        if json_out is not None:
            write_json(json_out, report)
    if is_quiet():
        return
    never = never_fits_note(report["never_fits"]["job_ids"], report["never_fits"]["jobs"])
    if never:
        print_note(never)
    render_sections([("whole log", report["whole"]), ("fitted part", report["fit"]),
                     ("out of sample", report["out_of_sample"])],
                    f"fidelity of {report['policy']} + {report['backfill']} on "
                    f"{report['machine']['name']}")
    for key, title in (("by_partition", "by partition"), ("by_size", "by job size (cores)"),
                       ("by_month", "by month")):
        render_sections([(r["group"], r) for r in report[key]], title)
    if report["without"]:
        _without(report["out_of_sample"], report["without"])
    console.print(f"replay {report['engine_s']:.2f} s; total {report['wall_s']:.2f} s")


def _without(oos: dict[str, Any], without: dict[str, dict[str, Any]]) -> None:
    """Out of sample: the site model as it is, and without each of its elements."""
    from rich import box
    from rich.table import Table

    table = Table(title="out of sample, without each element of the site model",
                  title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for col in ("model", "spearman", "mean err", "trust"):
        table.add_column(col, justify="left" if col in ("model", "trust") else "right")
    for label, s in [("as fitted", oos), *((f"without {k}", v) for k, v in without.items())]:
        rel, rho = s["mean_wait_rel_error"], s["spearman"]
        table.add_row(label, "-" if rho is None else f"{rho:.2f}",
                      "-" if rel is None else f"{rel:+.0%}", s["trust"] or "-")
    console.print(table)
