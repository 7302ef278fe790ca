"""``hpcpolicy sweep``: a grid of what-if comparisons, one report per cell and one table."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from hpcpolicy.commands._console import (
    console,
    fail_cleanly,
    is_quiet,
    note_first_compile,
    with_progress,
)
from hpcpolicy.commands._options import BackendOpt, RayAddressOpt, a_file, a_folder
from hpcpolicy.textfmt import visible

if TYPE_CHECKING:
    from hpcpolicy.sweep import SweepResult

__all__ = ["main"]


def _summary(result: SweepResult) -> None:
    from rich import box
    from rich.table import Table
    from rich.text import Text

    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, title_justify="left",
                  title=f"sweep: {result.rows[0]['metric']}, candidate against the baseline")
    for col in ("log", "candidate", "scenario", "seed", "change", "CI", "verdict"):
        table.add_column(col, justify="right" if col in ("seed", "change", "CI") else "left",
                         no_wrap=col in ("change", "CI"))
    for r in result.rows:
        change = "-" if r["rel_diff"] is None else f"{r['rel_diff']:+.1%}"
        ci = "-" if r["rel_ci_low"] is None or r["rel_ci_high"] is None else \
            f"{r['rel_ci_low']:+.1%} .. {r['rel_ci_high']:+.1%}"
        table.add_row(Text(visible(Path(r["log"]).name)), Text(visible(r["candidate"])),
                      Text(visible(r["scenario"])), str(r["seed"]), change, ci, r["verdict"])
    console.print(table)
    console.print(f"{result.ran} cell(s) compared, {result.skipped} already done; table: "
                  f"{visible(result.paths['markdown'], longest=None)} (and sweep.parquet)",
                  markup=False, soft_wrap=True)


def main(
    spec: Annotated[Path, typer.Argument(
        help="The grid, a TOML file: logs, candidates, scenarios, seeds and the shared "
        "settings (baseline, period_s, metric, bootstrap, confidence, procs, "
        "walltime_fallback; slurm_conf, sacctmgr and a [grid] of Slurm knobs).",
        callback=a_file, show_default=False)],
    out: Annotated[Path | None, typer.Option(
        "--out", "-o", help="Sweep folder; default sweeps/SPEC-NAME.", callback=a_folder,
        show_default=False)] = None,
    backend: BackendOpt = "local",
    ray_address: RayAddressOpt = None,
    cell_cpus: Annotated[int, typer.Option(
        "--cell-cpus", help="With --backend ray: cores each cell's task holds.")] = 1,
) -> None:
    """Run a grid of what-if comparisons: logs x candidates x scenarios x seeds.

    Each cell compares one candidate with the baseline on one log, under the log as it was
    and under one scenario (as-logged: none), with one bootstrap seed; its folder holds the
    report `hpcpolicy whatif LOG -c CANDIDATE [-s SCENARIO] --seed SEED` writes. The sweep
    folder gets sweep.parquet and sweep.md: one row per cell with the primary metric under
    the cell's scenario, its interval and the verdict. A rerun skips the cells whose report is
    there, so a stopped sweep continues where it stopped.

    --backend ray runs the cells as Ray tasks side by side: on a Ray started here, or on the
    cluster at --ray-address (on Slurm: `ray start --head` on the first node, `ray start
    --address HEAD:PORT` on the others; see docs/guides/clusters.md). The sweep folder must
    then be on a file system every node sees.

    Example spec (grid.toml; paths relative to it):

        logs = ["kth.parquet", "ctc.parquet"]
        candidates = ["sjf+easy", "f1+easy"]
        scenarios = ["as-logged", "nodes=+10%"]
        seeds = [0]

    With slurm_conf = "slurm.conf" the baseline is the site's configuration (as whatif
    --slurm-conf), a candidate may be a change to it, and a [grid] table of slurm.conf keys
    and SchedulerParameters options (PriorityWeightAge = [1000, 5000], bf_window = [1440,
    2880]) adds every combination as a candidate, each cell's report saying what to apply.

    Examples:

        hpcpolicy sweep grid.toml -o sweeps/grid

        hpcpolicy sweep grid.toml -o sweeps/grid --backend ray --ray-address 10.0.0.1:6379
    """
    from hpcpolicy.sweep import load_spec, sweep

    with fail_cleanly():
        note_first_compile()
        grid = load_spec(spec)
        root = out if out is not None else Path("sweeps") / spec.stem
        result = with_progress(
            lambda step: sweep(grid, root, backend=backend, address=ray_address,
                               cell_cpus=cell_cpus,
                               on_cell=None if step is None else
                               lambda cell, done, total: step(cell.folder, done, total)),
            "comparing")
    if is_quiet():
        console.print(visible(result.paths["markdown"], longest=None), markup=False,
                      soft_wrap=True)
        return
    _summary(result)
