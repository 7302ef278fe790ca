"""``hpcpolicy simulate``: replay a job table under one or more policies and compare them."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from hpcpolicy.commands._console import (
    console,
    fail_cleanly,
    is_quiet,
    note_first_compile,
    plain,
    print_note,
    with_progress,
)
from hpcpolicy.commands._options import (
    AllocatorOpt,
    BackfillsOpt,
    ClusterOpt,
    JsonOutOpt,
    OverwriteOpt,
    PoliciesOpt,
    ProcsFromOpt,
    ProcsOpt,
    SeedOpt,
    SiteOpt,
    SlurmCompatHelp,
    SpreadPenaltyOpt,
    TableArg,
    UnknownRunTimeOpt,
    WalltimeFallbackOpt,
    a_file,
    listed,
    lower_choice,
    refuse_existing,
)
from hpcpolicy.commands._simulate_show import render_runs
from hpcpolicy.commands._world import slurm_layout_of, window_config, world_spec

if TYPE_CHECKING:
    from hpcpolicy.sim.windows import Replay

__all__ = ["main", "render_runs"]  # render_runs: the demo prints the same table


def main(
    table: TableArg,
    policy: PoliciesOpt = None,
    backfill: BackfillsOpt = None,
    cluster: ClusterOpt = None,
    allocator: AllocatorOpt = None,
    spread_penalty: SpreadPenaltyOpt = None,
    procs: ProcsOpt = None,
    procs_from: ProcsFromOpt = None,
    walltime_fallback: WalltimeFallbackOpt = None,
    unknown_run_time: UnknownRunTimeOpt = None,
    drop_zero_runtime: Annotated[bool | None, typer.Option(
        "--drop-zero-runtime/--keep-zero-runtime", help="Drop jobs whose logged run time is "
        "0; default keep.", show_default=False)] = None,
    compat: Annotated[str | None, typer.Option(
        "--compat", help="A peer's conventions, all at once: rlscheduler or hpcopt (explicit "
        "options override; see docs/reference/simulator.md); or " + SlurmCompatHelp,
        callback=lower_choice)] = None,
    site: SiteOpt = None,
    windows: Annotated[int | None, typer.Option(
        "--windows", help="Replay N random windows of consecutive jobs instead of the whole "
        "workload (RLScheduler protocol).")] = None,
    window_size: Annotated[int | None, typer.Option(
        "--window-size", help="Jobs per window; default 1024.")] = None,
    window_starts: Annotated[str | None, typer.Option(
        "--window-starts", help="Explicit 0-based index of each window's first job, "
        "comma-separated (e.g. 1981,2714).")] = None,
    seed: SeedOpt = 1,
    warm: Annotated[bool, typer.Option(
        "--warm", help="Start each window with the jobs then running (from a reference "
        "FCFS+EASY replay of the preceding jobs) instead of an empty machine.")] = False,
    kill_at_limit: Annotated[bool, typer.Option(
        "--kill-at-limit", help="End jobs at their requested walltime.")] = False,
    check: Annotated[bool, typer.Option(
        "--check", help="Check the engine's invariants while running (slower).")] = False,
    engine: Annotated[str, typer.Option(
        "--engine", help="fast (compiled) or reference (plain Python).",
        callback=lower_choice)] = "fast",
    json_out: JsonOutOpt = None,
    out: Annotated[Path | None, typer.Option(
        "--out", "-o", help="Write the per-job outcomes of every run to this Parquet file.",
        callback=a_file)] = None,
    overwrite: OverwriteOpt = False,
) -> None:
    """Replay a job table on a simulated machine and report waits, slowdowns and utilisation.

    Several --policy and --backfill values give a comparison table, every combination on the
    same jobs (and the same windows). Metrics are defined in docs/reference/simulator.md
    (bounded slowdown uses a 10 s threshold).

    Examples:

        hpcpolicy simulate jobs.parquet --policy sjf --backfill easy

        hpcpolicy simulate jobs.parquet -p fcfs -p sjf -p f1 -b none -b easy --windows 10

        hpcpolicy simulate lublin.parquet --compat rlscheduler --window-starts 1981,2714

        hpcpolicy simulate sacct.parquet --compat slurm --cluster examples/slurm-test.toml

        hpcpolicy simulate gpu.parquet --cluster examples/gpu-partition.toml
            --allocator topology-aware --spread-penalty 0.2
    """
    from hpcpolicy.compat import SLURM_FLAVOUR, compat_preset
    from hpcpolicy.deploy.guard import guard_note
    from hpcpolicy.deploy.resolve import policy_simulator, resolve_policy
    from hpcpolicy.policies.heuristics import HEURISTICS
    from hpcpolicy.sim.windows import replay
    from hpcpolicy.world import open_world

    with fail_cleanly():
        note_first_compile()
        resolved = {spec: resolve_policy(spec) for spec in listed(policy, ["fcfs"])}
        for note in filter(None, map(guard_note, resolved)):
            print_note(note)
        # a heuristic runs under its registry name, a trained policy under its path, also
        # when its guard runs a heuristic in its place
        policies = {p.name if spec.strip().lower() in HEURISTICS else spec: p
                    for spec, p in resolved.items()}
        refuse_existing(json_out, out, overwrite=overwrite)
        wcfg = window_config(windows, window_size, window_starts, seed, warm)
        slurm = compat == SLURM_FLAVOUR
        peer_name = None if slurm else compat
        allocators = listed(allocator, ["first-fit"])
        spec = world_spec(cluster, procs, None if slurm else site, compat=peer_name,
                          procs_from=procs_from, walltime_fallback=walltime_fallback,
                          drop_zero_runtime=drop_zero_runtime, unknown_run_time=unknown_run_time,
                          spread_penalty=spread_penalty, allocators=allocators,
                          kill_at_limit=kill_at_limit)
        options, peer = spec.workload, compat_preset(peer_name)
        if slurm:
            workload, machine, engine_of, configs = _slurm_setup(table, options, cluster, procs, {
                "--policy": policy, "--backfill": backfill, "--allocator": allocator,
                "--spread-penalty": spread_penalty is not None, "--site": site, "--warm": warm,
                "--check": check, "--engine reference": engine != "fast"})
        else:
            world = open_world(table, spec)
            workload, machine = world.workload, world.cluster
            configs = [replace(world.run(p, b, a), check=check, engine=engine)
                       for p in policies for b in listed(backfill, [world.cfg.backfill])
                       for a in allocators]
            engine_of = policy_simulator(policies)
        if not is_quiet():
            _describe(table, workload, machine)
        runs = with_progress(lambda step: replay(workload, machine, configs, wcfg,
                                                  utilization_end=peer.utilization_end,
                                                  on_step=step, simulate=engine_of),
                             "simulating")
        _write(runs, table, (workload, machine, options), wcfg, json_out, out)
    if is_quiet():
        for path in (p for p in (json_out, out) if p is not None):
            console.print(plain(path), soft_wrap=True)
        return
    render_runs(runs, wcfg is not None)
    _report(runs, wcfg, check, backfill_notes=compat != SLURM_FLAVOUR)


def _slurm_setup(table: Path, options: Any, cluster: Path | None, procs: int | None,
                 unused: dict[str, Any]) -> tuple[Any, Any, Any, list[Any]]:
    """``--compat slurm``: the workload, its layout's machine and engine, and the one
    configuration the run is labelled with (priority/basic is FCFS; Slurm's backfill
    reserves for every blocked job, as conservative backfilling does)."""
    from hpcpolicy.sim.types import SimConfig
    from hpcpolicy.world import open_workload

    workload = open_workload(table, options)
    layout = slurm_layout_of(table, workload, cluster, procs, **unused)
    return (workload, layout.cluster(), layout.simulator(),
            [SimConfig(policy="fcfs", backfill="conservative", kill_at_limit=True)])


def _write(runs: list[Replay], table: Path, world: tuple[Any, Any, Any], wcfg: Any,
           json_out: Path | None, out: Path | None) -> None:
    """The --json document and the --out per-job outcomes, each written atomically;
    ``world`` is the replayed workload, machine and workload options."""
    workload, machine, options = world
    import polars as pl

    from hpcpolicy.atomic import write_json
    from hpcpolicy.sim.metrics import write_outcomes
    from hpcpolicy.sim.windows import to_document

    if json_out is not None:
        write_json(json_out, to_document(runs, source=str(table), workload=workload,
                                         cluster=machine, windows=wcfg))
    if out is not None:
        write_outcomes(pl.concat([r.outcomes() for r in runs]), out, {
            "hpcpolicy.origin": str(workload.origin), "hpcpolicy.input": str(table),
            "hpcpolicy.workload_options": json.dumps(options.to_dict())})


def _report(runs: list[Replay], wcfg: Any, check: bool, *, backfill_notes: bool) -> None:
    """Notes after the table; ``backfill_notes``: the project engine's note on a backfilling
    that started nothing (not said of the Slurm flavour, whose main pass is not FCFS's)."""
    from hpcpolicy.sim.windows import backfill_note, never_fits_note

    never = never_fits_note(runs[0].never_fits())
    if never:
        print_note(never)
    for note in filter(None, map(backfill_note, runs if backfill_notes else [])):
        print_note(note)
    if wcfg is not None:
        kind = "warm (pre-loaded)" if wcfg.warm else "cold (empty machine)"
        console.print(f"windows of {wcfg.size} jobs, {kind}, starting at job "
                      f"{','.join(str(w.start) for w in runs[0].windows)}")
    if check:
        console.print("invariants checked: no violation")


def _describe(table: Path, workload: Any, machine: Any) -> None:
    dropped = sum(len(ids) for ids in workload.dropped.values())
    console.print(plain(f"{table}: {len(workload):,} jobs"
                  + (f" ({dropped:,} dropped)" if dropped else "")
                  + f"; machine {machine.name}: {machine.total_cores:,} cores, "
                  f"{machine.total_nodes:,} nodes"
                  + (f", {machine.total_gpus:,} GPUs" if machine.total_gpus else "")
                  + f" (from {machine.source})"), soft_wrap=True)
    for note in (*workload.notes, *machine.notes):
        print_note(note)


