"""``hpcpolicy calibrate``: fit a site model to the earlier part of a log."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from hpcpolicy.commands._console import console, fail_cleanly, is_quiet, note_first_compile
from hpcpolicy.commands._options import (
    ClusterOpt,
    JsonOutOpt,
    OverwriteOpt,
    ProcsOpt,
    TableArg,
    WalltimeFallbackOpt,
    a_file,
    refuse_existing,
)
from hpcpolicy.commands._world import world_spec
from hpcpolicy.commands.fidelity import FitFracOpt, render_sections
from hpcpolicy.world.protocol import TRAIN_FRAC

__all__ = ["main"]


def main(
    table: TableArg,
    out: Annotated[Path, typer.Option("--out", "-o", help="Site model to write (TOML).",
                                      callback=a_file)],
    fit_frac: FitFracOpt = TRAIN_FRAC,
    cluster: ClusterOpt = None,
    procs: ProcsOpt = None,
    walltime_fallback: WalltimeFallbackOpt = None,
    json_out: JsonOutOpt = None,
    overwrite: OverwriteOpt = False,
) -> None:
    """Fit a site model (site.toml) on the first --fit-frac of the log, with the simulator in
    the loop; report out-of-sample fidelity before and after, and what each element adds.

    Examples:

        hpcpolicy calibrate jobs.parquet -o site.toml

        hpcpolicy fidelity jobs.parquet --site site.toml
    """
    from hpcpolicy.atomic import write_json
    from hpcpolicy.site.calibrate import CalibrateConfig, calibrate
    from hpcpolicy.world import open_world, save_site
    from hpcpolicy.world.apply import logged_delay

    with fail_cleanly():
        note_first_compile()
        refuse_existing(out, json_out, overwrite=overwrite)
        config = CalibrateConfig(fit_frac=fit_frac)
        world = open_world(table, world_spec(cluster, procs,
                                             walltime_fallback=walltime_fallback))
        result = calibrate(world.workload, world.cluster, config,
                           delay=logged_delay(table, world.workload), source=str(table))
        save_site(result.site, out)
        if json_out is not None:
            write_json(json_out, {"before": result.before, "after": result.after,
                                  "ablation": result.ablation, "wall_s": result.wall_s,
                                  "elements": result.site.elements()})
    if is_quiet():
        console.print(str(out))
        return
    render_sections([("uncalibrated", result.before), ("calibrated", result.after)],
                    "out-of-sample fidelity")
    _ablation(result.ablation)
    console.print(f"kept: {', '.join(result.site.elements()) or 'nothing'}; wrote {out} "
                  f"({result.wall_s:.1f} s)")


def _ablation(steps: list[dict[str, Any]]) -> None:
    from rich import box
    from rich.table import Table

    table = Table(title="ablation (each element tried in turn; out-of-sample figures)",
                  title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for col in ("element", "kept", "val score", "spearman", "mean err", "trust"):
        table.add_column(col, justify="left" if col in ("element", "kept", "trust") else "right")
    for s in steps:
        o = s["out_of_sample"]
        rel = o["mean_wait_rel_error"]
        table.add_row(s["element"], "yes" if s["kept"] else "no",
                      f"{s['objective_validation']:.3f}",
                      "-" if o["spearman"] is None else f"{o['spearman']:.2f}",
                      "-" if rel is None else f"{rel:+.0%}", o["trust"] or "-")
    console.print(table)
