"""``hpcpolicy demo``: the whole flow on a built-in synthetic workload, no download."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from hpcpolicy.commands._console import console, fail_cleanly, is_quiet, note_first_compile
from hpcpolicy.commands._options import SeedOpt, a_folder

__all__ = ["main"]


def main(
    out_dir: Annotated[
        Path, typer.Option("--out", "-o", help="Folder for the demo's files; a rerun replaces "
                           "them.", callback=a_folder)
    ] = Path("demo"),
    jobs: Annotated[int, typer.Option("--jobs", help="Jobs in the generated workload.")] = 5000,
    procs: Annotated[
        int, typer.Option("--procs", help="Processors of the synthetic machine.")
    ] = 256,
    train_steps: Annotated[int, typer.Option(
        "--train-steps", help="Decisions of the demo's PPO training (0 skips training and "
        "leaves the learned policy out of the report).")] = 250_000,
    seed: SeedOpt = 0,
) -> None:
    """Run the whole flow on a synthetic workload, with no data and no network: generate a
    Lublin-model log, ingest it into a job table, profile it, compare FCFS, SJF and F1,
    train a small PPO policy (about a minute), and write a what-if report
    (demo/report/report.html) comparing SJF, F1 and the policy with FCFS+EASY.

    Examples:

        hpcpolicy demo

        hpcpolicy demo -o /tmp/demo --jobs 20000 --seed 7

        hpcpolicy demo --train-steps 0
    """
    from hpcpolicy.commands.simulate import render_runs
    from hpcpolicy.commands.stats import render_profile
    from hpcpolicy.commands.whatif import render_whatif
    from hpcpolicy.demo import DemoConfig, DemoStep, run_demo

    quiet = is_quiet()

    def done(index: int, total: int, step: DemoStep, seconds: float) -> None:
        console.print(f"[green]✓[/] [{index + 1}/{total}] {step.title} [dim]({seconds:.1f} s)[/]")

    with fail_cleanly():
        note_first_compile()
        cfg = DemoConfig(out_dir=out_dir, jobs=jobs, procs=procs, seed=seed,
                         train_steps=train_steps)
        if quiet:
            ctx = run_demo(cfg)
        else:
            with console.status("demo") as status:
                ctx = run_demo(
                    cfg,
                    on_start=lambda i, n, step: status.update(f"[{i + 1}/{n}] {step.title}..."),
                    on_done=done,
                )
    if quiet:
        for path in ctx.files.values():
            console.print(str(path), markup=False, soft_wrap=True)
        return
    render_profile(ctx.results["stats"], console)
    render_runs(ctx.results["compare"], windowed=False)
    report = ctx.results["ingest"]
    console.print(f"ingest: {report.rows_read:,} rows read = {report.jobs_kept:,} jobs kept + "
                  f"{report.rows_rejected:,} rejected + {report.steps_folded:,} steps folded")
    render_whatif(ctx.results["whatif"].doc)
    console.print(f"[bold]files in {escape(str(cfg.out_dir))}/[/]")
    for label, path in ctx.files.items():
        console.print(f"  {label:<14} {escape(str(path))}", soft_wrap=True)
    console.print(f"[bold]open the report:[/] {escape(str(ctx.files['report_html']))}",
                  soft_wrap=True)
