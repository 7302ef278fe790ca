"""What ``hpcpolicy simulate`` shows: the comparison table of its runs (and the GPU placement
table of node-level runs); the demo prints the same table."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hpcpolicy.commands._console import console, duration, short_names, whole_values

if TYPE_CHECKING:
    from hpcpolicy.sim.windows import Replay

__all__ = ["render_runs"]


def _fmt(value: Any, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _wait(value: Any) -> str:
    return "-" if value is None else duration(value)


def _bsld(value: Any) -> str:
    return _fmt(value, 2 if value is None or value < 1000 else 0)


def render_runs(runs: list[Replay], windowed: bool) -> None:
    """The comparison table of ``runs`` (one row per policy x backfill), and engine time."""
    from rich import box
    from rich.table import Table

    title = "mean over windows" if windowed else "whole workload"
    table = Table(title=f"simulate ({title})", title_justify="left",
                  box=box.SIMPLE_HEAD, pad_edge=False)
    gpu = any(run.gpu is not None for run in runs)
    cols = ["policy", "backfill", "jobs", "mean wait", "p95 wait", "mean bsld", "p95 bsld",
            "util"]
    if gpu:
        cols[1:1] = ["allocator"]
    for col in cols:
        text = col in ("policy", "backfill", "allocator")
        table.add_column(col, justify="left" if text else "right")
    labels, legend = short_names([run.config.policy for run in runs])
    rows = []
    for run in runs:
        s = run.summary
        row = [labels[run.config.policy], run.config.backfill, f"{s['jobs']:,}",
               _wait(s["mean_wait_s"]), _wait(s["p95_wait_s"]), _bsld(s["mean_bsld"]),
               _bsld(s["p95_bsld"]), _fmt(s["utilization"], 3)]
        if gpu:
            row[1:1] = [run.config.allocator]
        rows.append(row)
    whole_values(table, rows)
    console.print(table)
    for line in legend:
        console.print(line, markup=False, soft_wrap=True)
    if gpu:
        _render_gpu(runs, box)
    engine_s = sum(w.wall_s for run in runs for w in run.windows)
    console.print(f"{len(runs)} run(s) x {len(runs[0].windows)} window(s); engine time "
                  f"{engine_s:.2f} s")


def _render_gpu(runs: list[Replay], box: Any) -> None:
    """The GPU placement table of the node-level runs (hpcpolicy/sim/gpu_metrics.py)."""
    from rich.table import Table

    table = Table(title="GPU placement", title_justify="left", box=box.SIMPLE_HEAD,
                  pad_edge=False)
    for col in ("policy", "allocator", "GPU util", "GPU frag", "spread", "cross-rack",
                "penalty GPU-h", "speed x"):
        text = col in ("policy", "allocator")
        table.add_column(col, justify="left" if text else "right", no_wrap=text)
    for run in runs:
        g = run.gpu
        if g is None:
            continue
        table.add_row(run.config.policy, run.config.allocator, _fmt(g["gpu_utilization"], 3),
                      _fmt(g["gpu_fragmentation"], 3), f"{g['spread_jobs']:,}",
                      f"{g['cross_rack_jobs']:,}", _fmt(g["spread_penalty_gpu_hours"], 1),
                      _fmt(g["mean_speed_factor"], 2))
    console.print(table)
    console.print("spread: GPU jobs on several nodes; penalty GPU-h: GPU time the spread "
                  "penalty added; speed x: mean run-time factor from GPU speeds")
