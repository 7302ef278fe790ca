"""``hpcpolicy evaluate``: heuristics and trained policies on the same windows of a later period."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from hpcpolicy.commands._console import (
    console,
    duration,
    fail_cleanly,
    is_quiet,
    note_first_compile,
    plain,
    print_note,
    short_names,
    whole_values,
    with_progress,
)
from hpcpolicy.commands._options import (
    AllocatorOpt,
    BackfillsOpt,
    ClusterOpt,
    CompatOpt,
    JsonOutOpt,
    OverwriteOpt,
    PoliciesOpt,
    ProcsFromOpt,
    ProcsOpt,
    SeedOpt,
    SiteOpt,
    SpreadPenaltyOpt,
    TableArg,
    UnknownRunTimeOpt,
    WalltimeFallbackOpt,
    listed,
    lower_choice,
    refuse_existing,
)
from hpcpolicy.commands._world import parse_window_starts, world_spec
from hpcpolicy.world.protocol import TRAIN_FRAC

if TYPE_CHECKING:
    from hpcpolicy.evaluate import Evaluation
    from hpcpolicy.sim.windows import Replay

__all__ = ["TRAIN_FRAC", "SplitOpt", "TrainFracOpt", "main"]

SplitOpt = Annotated[str, typer.Option(
    "--split", help="Part of the chronological split: test (the later jobs), train (the "
    "earlier train-frac), or all.", callback=lower_choice)]
TrainFracOpt = Annotated[float, typer.Option(
    "--train-frac", help="Share of the jobs, earliest first, in the training part.")]


def _cell(value: Any, spread: dict[str, Any], digits: int | None) -> str:
    """The mean, and under it ``±std`` over windows; ``digits`` None: a duration (3.4h)."""
    if value is None:
        return "-"
    std = spread.get("std")

    def shown(x: float) -> str:
        return duration(x) if digits is None else f"{x:,.{digits}f}"

    return shown(value) + ("" if std is None else f"\n[dim]±{shown(std)}[/]")


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:+.1%}"


def _folder(ev: Evaluation, run: Replay) -> str:
    """The run's policy, or the policy folder of a deployed fallback's row."""
    dep = ev.deployments.get(run.config.policy)
    return run.config.policy if dep is None else dep.spec


def _print(ev: Evaluation) -> None:
    from rich import box
    from rich.table import Table
    from rich.text import Text

    gpu = any(run.gpu is not None for run in ev.runs)
    table = Table(title="evaluate: mean over windows, ±std across windows", title_justify="left",
                  box=box.SIMPLE_HEAD, pad_edge=False)
    cols = (["policy", "allocator", "backfill", "bsld", "wait", "GPU util", "GPU frag",
             "vs best", "vs best GPU util"] if gpu else
            ["policy", "backfill", "bsld", "wait", "response", "util", "vs best"])
    for col in cols:
        text = col in ("policy", "allocator", "backfill")
        table.add_column(col, justify="left" if text else "right")
    labels, legend = short_names([_folder(ev, run) for run in ev.runs])
    best = ev.best_heuristics()
    best_util = ev.best_heuristics("gpu_utilization")
    rows: list[list[str | Text]] = []
    for run in ev.runs:
        s, spread = run.summary, ev.spread(run)
        label, backfill = ev.label(run), run.config.backfill
        marks = ("*" if best.get(backfill, ("",))[0] == label else "") + (
            "†" if gpu and best_util.get(backfill, ("",))[0] == label else "")
        name = Text(labels[_folder(ev, run)] + (f" {marks}" if marks else "")
                    + ev.row_note(run))
        bsld = _cell(s["mean_bsld"], spread["mean_bsld"], 2)
        wait = _cell(s["mean_wait_s"], spread["mean_wait_s"], None)
        if not gpu:
            rows.append([name, backfill, bsld, wait,
                         _cell(s["mean_response_s"], spread["mean_response_s"], None),
                         _cell(s["utilization"], spread["utilization"], 2),
                         _ratio(ev.versus_best(run))])
            continue
        frag = (run.gpu or {}).get("gpu_fragmentation")
        rows.append([name, "learned" if run.config.policy in ev.placers
                     else run.config.allocator, backfill, bsld, wait,
                     _cell(s["gpu_utilization"], spread["gpu_utilization"], 3),
                     "-" if frag is None else f"{frag:.3f}", _ratio(ev.versus_best(run)),
                     _ratio(ev.versus_best(run, "gpu_utilization"))])
    whole_values(table, rows)
    console.print(table)
    for line in legend:
        console.print(line, markup=False, soft_wrap=True)
    for line in ev.guard_notes():
        console.print(line, markup=False, soft_wrap=True)
    if gpu:
        console.print("† best heuristic GPU utilisation; vs best GPU util: change against it "
                      "(positive is better)")
    cfg = ev.config
    console.print(f"{len(ev.starts)} window(s) of {cfg.window_size} jobs from the {cfg.split} "
                  f"part (train_frac {cfg.train_frac}), {'warm' if cfg.warm else 'cold'} "
                  f"starts at job {','.join(map(str, ev.starts))}. * best heuristic; vs best: "
                  "change of mean bsld against it (negative is better); min/max per window "
                  "in --json")


def main(
    table: TableArg,
    policy: PoliciesOpt = None,
    backfill: BackfillsOpt = None,
    windows: Annotated[int, typer.Option(
        "--windows", help="Number of random windows.")] = 10,
    window_size: Annotated[int, typer.Option(
        "--window-size", help="Jobs per window.")] = 1024,
    window_starts: Annotated[str | None, typer.Option(
        "--window-starts", help="Explicit 0-based index of each window's first job, "
        "comma-separated (must lie in the chosen split).")] = None,
    seed: SeedOpt = 1,
    split: SplitOpt = "test",
    train_frac: TrainFracOpt = TRAIN_FRAC,
    warm: Annotated[bool, typer.Option(
        "--warm", help="Start each window with the jobs then running instead of an empty "
        "machine.")] = False,
    cluster: ClusterOpt = None,
    procs: ProcsOpt = None,
    procs_from: ProcsFromOpt = None,
    walltime_fallback: WalltimeFallbackOpt = None,
    unknown_run_time: UnknownRunTimeOpt = None,
    compat: CompatOpt = None,
    site: SiteOpt = None,
    allocator: AllocatorOpt = None,
    spread_penalty: SpreadPenaltyOpt = None,
    gpu_baselines: Annotated[bool, typer.Option(
        "--gpu-baselines", help="Add the nine baselines of a GPU partition: fcfs, lcfs and sjf "
        "x first-available, best-fit and topology-aware allocation (trained policies that "
        "place GPUs themselves run once).")] = False,
    kill_at_limit: Annotated[bool, typer.Option(
        "--kill-at-limit", help="End jobs at their requested walltime.")] = False,
    json_out: JsonOutOpt = None,
    overwrite: OverwriteOpt = False,
) -> None:
    """Compare heuristics and trained policies on the same windows of the test period.

    Each policy runs with each backfilling mode on identical windows of consecutive jobs,
    drawn from the later part of the trace (after the jobs training used). The table gives
    the mean over windows and its spread for bounded slowdown, wait, response time and
    utilisation, and each trained policy's change against the best heuristic. A policy folder
    whose model card's guard is active runs as deployed (its fallback heuristic, as simulate,
    whatif and advise run it) beside the raw learned policy.

    Examples:

        hpcpolicy evaluate jobs.parquet --policy fcfs,sjf,f1,runs/x/policy --backfill none,easy

        hpcpolicy evaluate jobs.parquet -p sjf -p wfp3 --windows 20 --window-size 512 --json e.json

        hpcpolicy evaluate gpu.parquet --cluster examples/gpu-partition.toml --gpu-baselines
            -p runs/marl/policy
    """

    from hpcpolicy.atomic import write_json
    from hpcpolicy.compat import compat_preset
    from hpcpolicy.evaluate import GPU_ALLOCATORS, GPU_BASELINES, EvaluateConfig, evaluate
    from hpcpolicy.world import open_world

    with fail_cleanly():
        note_first_compile()
        refuse_existing(json_out, overwrite=overwrite)
        policies = listed(policy, [] if gpu_baselines else ["fcfs,sjf,f1"])
        allocators = listed(allocator, ["first-fit"])
        if gpu_baselines:
            policies = (*GPU_BASELINES, *(p for p in policies if p not in GPU_BASELINES))
            allocators = (*GPU_ALLOCATORS, *(a for a in allocators
                                             if a not in GPU_ALLOCATORS and a != "first-fit"))
        world = open_world(table, world_spec(
            cluster, procs, site, compat=compat, procs_from=procs_from,
            walltime_fallback=walltime_fallback, unknown_run_time=unknown_run_time,
            spread_penalty=spread_penalty, allocators=allocators, kill_at_limit=kill_at_limit))
        workload, machine = world.workload, world.cluster
        cfg = EvaluateConfig(
            policies=policies, backfills=listed(backfill, [world.cfg.backfill]),
            allocators=allocators, windows=windows, window_size=window_size, seed=seed,
            split=split, train_frac=train_frac, starts=parse_window_starts(window_starts),
            warm=warm, compat=compat, kill_at_limit=kill_at_limit,
            exclusive_nodes=compat_preset(compat).exclusive_nodes)
        ev = with_progress(lambda step: evaluate(workload, machine, cfg, on_step=step,
                                                 site=world.site), "evaluating")
        if json_out is not None:
            write_json(json_out, ev.to_document(source=str(table), workload=workload,
                                                cluster=machine))
    if is_quiet():
        if json_out is not None:
            console.print(plain(json_out), soft_wrap=True)
        return
    for note in workload.notes:
        print_note(note)
    _print(ev)
    from hpcpolicy.sim.windows import backfill_note

    # the note explains a trained policy's choices; a heuristic's run needs none
    learned = [run for run in ev.runs if run.config.policy in ev.learned]
    for note in filter(None, map(backfill_note, learned)):
        print_note(note)
