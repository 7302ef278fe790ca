"""Options shared by several commands, defined once so they mean the same everywhere."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from hpcpolicy.gpu.registry import allocator_help, allocator_name

if TYPE_CHECKING:
    from hpcpolicy.workload import WorkloadOptions

__all__ = [
    "BackfillOpt",
    "BackfillsOpt",
    "ClusterOpt",
    "CompatOpt",
    "JsonOutOpt",
    "NumEnvsOpt",
    "OverwriteOpt",
    "PoliciesOpt",
    "PolicyOpt",
    "ProcsFromOpt",
    "ProcsOpt",
    "RewardOpt",
    "SeedOpt",
    "SiteBackfillOpt",
    "SiteOpt",
    "SlurmCompatHelp",
    "UnknownRunTimeOpt",
    "WalltimeFallbackOpt",
    "WarmOpt",
    "WindowSizeOpt",
    "WorkersOpt",
    "a_file",
    "a_folder",
    "listed",
    "lower_choice",
    "policy_choice",
    "workload_options",
]

def lower_choice(value: str | list[str] | None) -> str | list[str] | None:
    """Typer callback: a named choice in lower case, so ``-b EASY`` means ``-b easy``.

    Only for options whose every value is a name; a path (a trained policy folder) keeps its
    case, which is why ``--policy`` and the what-if specs lower-case names themselves.
    """
    if isinstance(value, list):
        return [v.lower() for v in value]
    return value.lower() if isinstance(value, str) else value


def policy_choice(value: str | list[str] | None) -> str | list[str] | None:
    """Typer callback: heuristic names in lower case (``-p SJF`` is sjf), in comma-joined
    lists too; policy folders keep their case."""
    if value is None:
        return None
    from hpcpolicy.policies.heuristics import HEURISTICS

    def named(item: str) -> str:
        return ",".join(part.strip().lower() if part.strip().lower() in HEURISTICS else part
                        for part in item.split(","))

    return named(value) if isinstance(value, str) else [named(item) for item in value]


def listed(values: list[str] | None, default: list[str]) -> tuple[str, ...]:
    """Repeated and/or comma-separated option values, in order (``default`` when none)."""
    items = [part.strip() for value in (values or default) for part in value.split(",")]
    return tuple(item for item in items if item)


SeedOpt = Annotated[
    int, typer.Option("--seed", help="Random seed; the same inputs and seed give the same output.")
]
OverwriteOpt = Annotated[
    bool, typer.Option("--overwrite", help="Replace output files that already exist.")
]
BackendOpt = Annotated[str, typer.Option(
    "--backend", help="local (one after another in this process) or ray (side by side on a "
    "Ray cluster; needs the cluster extra: pip install 'hpcpolicy[cluster]').",
    callback=lower_choice)]
RayAddressOpt = Annotated[str | None, typer.Option(
    "--ray-address", help="With --backend ray: HOST:PORT of a running Ray cluster (`ray start "
    "--head` prints it); without it Ray starts here on this machine's cores.",
    show_default=False)]


def _refuse(message: str) -> None:
    """The one-line error and exit 1 of every command (Typer's own path checks would print
    a usage box and exit 2)."""
    from hpcpolicy.commands._console import fail_cleanly
    from hpcpolicy.errors import ConfigError

    with fail_cleanly():
        raise ConfigError(message)


def a_file(value: Path | None) -> Path | None:
    """Option callback: ``value`` names a file (or nothing yet), not a folder."""
    # os.path answers False where the path cannot be looked at (a parent folder the user
    # may not enter), and the command's own open then says what is wrong in one line
    if value is not None and os.path.isdir(value):
        _refuse(f"{value} is a folder; give the name of a file")
    return value


def a_folder(value: Path | None) -> Path | None:
    """Option callback: ``value`` names a folder (or nothing yet), not a file."""
    if value is not None and os.path.exists(value) and not os.path.isdir(value):
        _refuse(f"{value} is a file; give the name of a folder")
    return value


def refuse_existing(*paths: Path | None, overwrite: bool) -> None:
    """Claim the outputs ``paths`` for this run, then raise the one-line ConfigError for the
    first that exists, unless ``overwrite`` (None paths are options not given); see
    :func:`hpcpolicy.atomic.claim_outputs`."""
    from hpcpolicy.atomic import claim_outputs

    claim_outputs(*paths, overwrite=overwrite)


TableArg = Annotated[Path, typer.Argument(
    help="Job table written by `hpcpolicy ingest`.", show_default=False, callback=a_file)]

JsonOutOpt = Annotated[
    Path | None,
    typer.Option("--json", help="Also write the result as JSON to this file.", callback=a_file),
]

# Workload and machine options, spelled the same in simulate, evaluate and train.
ClusterOpt = Annotated[Path | None, typer.Option(
    "--cluster", help="Cluster spec (TOML/JSON, see examples/); default: the log header's "
    "MaxProcs/MaxNodes.", callback=a_file)]
ProcsOpt = Annotated[int | None, typer.Option(
    "--procs", help="Replay on a machine of N processors instead.")]
ProcsFromOpt = Annotated[str | None, typer.Option(
    "--procs-from", help="Job size from requested, allocated or max (of the two) processors; "
    "default requested.",
    callback=lower_choice)]
WalltimeFallbackOpt = Annotated[str | None, typer.Option(
    "--walltime-fallback", help="Planning time of jobs without a requested walltime: runtime "
    "(perfect estimates), max (longest request in the partition), error, or a length (12h, "
    "43200, 12:00:00); default "
    "auto: max, or an error when no job has a request.",
    callback=lower_choice)]
UnknownRunTimeOpt = Annotated[int | None, typer.Option(
    "--unknown-run-time", help="Replay jobs whose log has no run time (never started, or "
    "still running) with this many SECONDS; default: drop them, counted.", min=0)]
AllocatorOpt = Annotated[list[str] | None, typer.Option(
    "--allocator", help=allocator_help(), callback=lambda values: values and [
        allocator_name(v) for v in values])]  # a learned allocator's folder keeps its case
SpreadPenaltyOpt = Annotated[float | None, typer.Option(
    "--spread-penalty", help="With a node-level --allocator: a job whose GPUs are on several "
    "nodes runs 1 + P x D times longer (D: 1 within a rack, 2 across racks, unless the "
    "cluster spec says otherwise); default the spec's value, else 0 (off).", min=0)]
SiteOpt = Annotated[Path | None, typer.Option(
    "--site", help="Site model (site.toml from `hpcpolicy calibrate`): replay in the world the "
    "log was scheduled in (nodes, pools, running limits, capacity, holds, cadence).",
    callback=a_file)]
CompatOpt = Annotated[str | None, typer.Option(
    "--compat", help="A peer's conventions, all at once: rlscheduler or hpcopt (explicit "
    "options override; see README).",
    callback=lower_choice)]

SlurmCompatHelp = (
    "slurm, which replays the log as Slurm schedules it (select/cons_tres cores on nodes, "
    "partitions as node sets, priority/basic, the main pass and sched/backfill on its 1 s "
    "tick, hand-over latencies fitted from the log). Its nodes and partitions come from "
    "--cluster when its spec has [partitions] (examples/slurm-test.toml), else from the "
    "log's NodeList and Partition: each partition gets the nodes its jobs ran on, and the "
    "cores per node are --cluster's, --procs over the nodes, or the largest share of a job "
    "on one node.")

# Training options, spelled the same in train and tune.
WorkersOpt = Annotated[int, typer.Option(
    "--workers", help="DD-PPO worker processes on this machine.")]
RewardOpt = Annotated[str, typer.Option(
    "--reward", help="bsld, wait, response, utilization, or a mix such as "
    "bsld:1,utilization:50.",
    callback=lower_choice)]


def _backfill_option(what: str) -> Any:
    """The one declaration of ``--backfill``/``-b``; ``what`` ends its help."""
    return typer.Option("--backfill", "-b", help=f"Backfilling: none, easy or conservative; "
                        f"{what}", callback=lower_choice)


def _policy_option(what: str) -> Any:
    """The one declaration of ``--policy``/``-p`` (heuristic names lower-cased, folders kept
    as written: :func:`policy_choice`); ``what`` ends its help."""
    return typer.Option("--policy", "-p", help=f"A heuristic (fcfs, sjf, f1, wfp3, ...) or a "
                        f"trained policy folder (runs/NAME/policy); {what}",
                        callback=policy_choice, show_default=False)


BackfillOpt = Annotated[str, _backfill_option("run after each choice.")]
BackfillsOpt = Annotated[list[str] | None, _backfill_option(
    "repeat or comma-separate to compare (every policy x backfill combination runs on the "
    "same jobs); default: the site model's [cadence] backfill with --site, else none.")]
SiteBackfillOpt = Annotated[str | None, _backfill_option(
    "default: the site model's [cadence] backfill with --site, else easy.")]
PolicyOpt = Annotated[str | None, _policy_option("required unless --restore.")]
PoliciesOpt = Annotated[list[str] | None, _policy_option(
    "repeat or comma-separate to compare (e.g. fcfs,sjf,f1,runs/x/policy).")]
WindowSizeOpt = Annotated[int, typer.Option(
    "--window-size", help="Consecutive jobs per training episode.")]
NumEnvsOpt = Annotated[int | None, typer.Option(
    "--num-envs", help="Environments per worker (default 8).")]
WarmOpt = Annotated[bool, typer.Option(
    "--warm", help="Start episodes with the jobs then running, not an empty machine.")]


def workload_options(compat: str | None, procs_from: str | None, walltime_fallback: str | None,
                     drop_zero_runtime: bool | None = None,
                     unknown_run_time: int | None = None) -> WorkloadOptions:
    """The workload conventions the options above select (see
    :func:`hpcpolicy.workload.workload_options`)."""
    from hpcpolicy.workload import workload_options as select

    return select(compat, procs_from, walltime_fallback, drop_zero_runtime, unknown_run_time)
