"""``hpcpolicy train``: learn a scheduling policy on the training part of a job table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from hpcpolicy.commands._console import console, err_console, fail_cleanly, is_quiet
from hpcpolicy.commands._options import (
    ClusterOpt,
    CompatOpt,
    ProcsFromOpt,
    ProcsOpt,
    SeedOpt,
    WalltimeFallbackOpt,
    workload_options,
)
from hpcpolicy.commands.evaluate import TrainFracOpt

if TYPE_CHECKING:
    from hpcpolicy.rl.config import PPOConfig
    from hpcpolicy.rl.ppo import TrainResult

__all__ = ["ENV_FILE", "OFFLINE_ALGOS", "main"]

OFFLINE_ALGOS = ("cql", "bcq", "bc", "dqn")
"""Offline algorithms (d3rlpy), announced but not available yet."""

ENV_FILE = "env.json"
"""In the run directory: the environment factory and its arguments (checked on --resume)."""

SHOWN = (("charts/episodic_return", "return", "{:.4g}"), ("env/bsld", "bsld", "{:.2f}"),
         ("env/best_heuristic_bsld", "best heuristic", "{:.2f}"),
         ("env/bsld_vs_best", "vs best", "{:.3f}"))
"""Metrics shown while training and in the summary: column, label, format."""


def _algo_config(algo: str, config_file: Path | None, overrides: dict[str, Any]) -> PPOConfig:
    """The algorithm's config: its defaults, then ``--config`` fields, then the flags."""
    from hpcpolicy.errors import ConfigError
    from hpcpolicy.rl.config import ALGO_CONFIGS, config_from_dict

    if algo in OFFLINE_ALGOS:
        raise ConfigError(f"--algo {algo}: offline RL ({', '.join(OFFLINE_ALGOS)}) is not "
                          "available yet; it comes with the offline-RL issue. Online "
                          f"algorithms: {', '.join(sorted(ALGO_CONFIGS))}")
    if algo not in ALGO_CONFIGS:
        raise ConfigError(f"unknown --algo {algo!r}; valid: {', '.join(sorted(ALGO_CONFIGS))} "
                          f"(offline {', '.join(OFFLINE_ALGOS)} come with the offline-RL issue)")
    fields: dict[str, Any] = {}
    if config_file is not None:
        try:
            fields = json.loads(config_file.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise ConfigError(f"--config {config_file}: cannot be read as JSON ({exc})") from None
        if not isinstance(fields, dict):
            raise ConfigError(f"--config {config_file}: expected a JSON object of "
                              f"{algo} config fields")
    given = {k: v for k, v in overrides.items() if v is not None}
    return config_from_dict({**fields, **given, "algo": algo})


def _flat(kwargs: dict[str, Any]) -> dict[str, Any]:
    """``{"env": {"reward": ...}}`` as ``{"env.reward": ...}``, for naming what changed."""
    flat: dict[str, Any] = {}
    for key, value in kwargs.items():
        if isinstance(value, dict):
            flat.update({f"{key}.{k}": v for k, v in value.items()})
        else:
            flat[key] = value
    return flat


def _check_env_file(run: Path, factory: str, kwargs: dict[str, Any], resume: bool) -> None:
    """Record the environment of a fresh run; on --resume, refuse a different one."""
    from hpcpolicy.atomic import write_json
    from hpcpolicy.errors import ConfigError

    path = run / ENV_FILE
    spec = {"factory": factory, "kwargs": kwargs}
    if not resume:
        write_json(path, spec)
        return
    if not path.is_file():
        raise ConfigError(f"{path} not found: {run} was not written by `hpcpolicy train`")
    saved = json.loads(path.read_text(encoding="utf-8"))
    old, new = _flat(saved["kwargs"]), _flat(kwargs)
    changed = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
    if saved["factory"] != factory or changed:
        details = "; ".join(f"{k}: {old.get(k)!r} -> {new.get(k)!r}" for k in changed)
        raise ConfigError(f"cannot resume {run} with a different environment ({details}); "
                          "give the options of the original run")


def _format(row: dict[str, float]) -> str:
    parts = [f"{label} {fmt.format(row[key])}" for key, label, fmt in SHOWN
             if key in row and row[key] == row[key]]
    return "  ".join(parts)


def _train_in_process(cfg: PPOConfig, kwargs: dict[str, Any], run: Path, resume: bool,
                      provenance: dict[str, Any]) -> TrainResult:
    """PPO in this process, with a live progress line on stderr."""
    import functools

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from hpcpolicy.env.factory import make_env
    from hpcpolicy.rl.ppo import train

    make = functools.partial(make_env, **kwargs)
    if is_quiet():
        return train(cfg, make, run, resume=resume, provenance=provenance)
    columns = (TextColumn("training"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
               TextColumn("{task.fields[speed]}"), TextColumn("{task.fields[stats]}"))
    with Progress(*columns, console=err_console, transient=True) as bar:
        task = bar.add_task("train", total=cfg.total_steps, speed="", stats="")

        def progress(row: Any) -> None:
            bar.update(task, completed=int(row["global_step"]),
                       speed=f"{row['sps']:,.0f} steps/s", stats=_format(dict(row)))

        return train(cfg, make, run, resume=resume, provenance=provenance, progress=progress)


def _latest(metrics_csv: Path) -> dict[str, float]:
    """The last value of each metric in a run's metrics.csv (episodes do not end every update)."""
    import csv

    latest: dict[str, float] = {}
    with metrics_csv.open(newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            latest.update({k: float(v) for k, v in row.items() if v != ""})
    return latest


def _summary(result: TrainResult, table: Path, backfill: str) -> None:
    from rich import box
    from rich.table import Table

    out = Table(box=box.SIMPLE_HEAD, show_header=False, pad_edge=False)
    out.add_column(style="bold")
    out.add_column()
    row = _latest(result.run_dir / "metrics.csv")
    out.add_row("run", str(result.run_dir))
    out.add_row("steps", f"{result.global_step:,} in {result.updates:,} updates, "
                         f"{result.wall_time_s:,.1f} s")
    for key, label, fmt in SHOWN:
        if key in row:
            out.add_row(f"last {label}", fmt.format(row[key]))
    out.add_row("policy", str(result.run_dir / "policy"))
    console.print(out)
    if result.interrupted:
        console.print("stopped before the budget was spent; continue with the same command "
                      "and --resume")
    console.print(f"compare it: hpcpolicy evaluate {table} --policy "
                  f"fcfs,sjf,f1,wfp3,unicep,{result.run_dir / 'policy'} --backfill {backfill}")


def main(
    table: Annotated[Path, typer.Argument(help="Job table written by `hpcpolicy ingest`.",
                                          show_default=False, dir_okay=False)],
    algo: Annotated[str, typer.Option(
        "--algo", help="ppo (this process) or ddppo (torchrun workers); offline cql, bcq, bc "
        "and dqn come later.")] = "ppo",
    workers: Annotated[int, typer.Option(
        "--workers", help="DD-PPO worker processes on this machine.")] = 1,
    steps: Annotated[int | None, typer.Option(
        "--steps", help="Environment steps (decisions) budget, all workers together; "
        "default 1,000,000 or --config's total_steps.")] = None,
    out: Annotated[Path | None, typer.Option(
        "--out", "-o", help="Run directory; default runs/train__ALGO__SEED__TIMESTAMP.",
        file_okay=False)] = None,
    seed: SeedOpt = 1,
    resume: Annotated[bool, typer.Option(
        "--resume", help="Continue the run in --out from its last checkpoint.")] = False,
    reward: Annotated[str, typer.Option(
        "--reward", help="bsld, wait, response, utilization, or a mix such as "
        "bsld:1,utilization:50.")] = "bsld",
    backfill: Annotated[str, typer.Option(
        "--backfill", "-b", help="Backfilling after each choice: none, easy or "
        "conservative.")] = "none",
    window_size: Annotated[int, typer.Option(
        "--window-size", help="Consecutive jobs per training episode.")] = 256,
    k: Annotated[int, typer.Option(
        "--k", help="Waiting jobs the policy sees (the oldest).")] = 128,
    num_envs: Annotated[int | None, typer.Option(
        "--num-envs", help="Environments per worker (default 8).")] = None,
    split: Annotated[str, typer.Option(
        "--split", help="Part episodes come from: train (the first --train-frac of the jobs) "
        "or all (RLScheduler's protocol; then no later period is left unseen).")] = "train",
    train_frac: TrainFracOpt = 0.7,
    warm: Annotated[bool, typer.Option(
        "--warm", help="Start episodes with the jobs then running, not an empty machine.")
    ] = False,
    cluster: ClusterOpt = None,
    procs: ProcsOpt = None,
    procs_from: ProcsFromOpt = None,
    walltime_fallback: WalltimeFallbackOpt = None,
    compat: CompatOpt = None,
    config: Annotated[Path | None, typer.Option(
        "--config", help="JSON file of algorithm config fields (learning_rate, num_steps, "
        "gamma, ...; see hpcpolicy.rl.config).", dir_okay=False)] = None,
) -> None:
    """Train a scheduling policy on the earlier part of a job table.

    Episodes are windows of consecutive jobs from the first --train-frac of the trace (the
    rest is left for `hpcpolicy evaluate`); one step picks the job that becomes the queue
    head, then the configured backfilling runs. Writes config.json, env.json, metrics.csv,
    checkpoints/ and the deployable policy/ into the run directory; Ctrl-C stops after the
    current update with a usable checkpoint (continue with --resume).

    Examples:

        hpcpolicy train jobs.parquet --algo ppo --steps 200000 -o runs/sjf-like

        hpcpolicy train jobs.parquet --algo ddppo --workers 2 --steps 5000000 --backfill easy
    """
    from hpcpolicy.env import EnvConfig
    from hpcpolicy.env.factory import ENV_FACTORY, env_kwargs, load, provenance
    from hpcpolicy.env.scheduling import EPISODE_METRICS
    from hpcpolicy.env.split import window_range
    from hpcpolicy.errors import ConfigError
    from hpcpolicy.rl.runs import RunPaths, default_run_name

    with fail_cleanly():
        cfg = _algo_config(algo, config, {"total_steps": steps, "seed": seed,
                                          "num_envs": num_envs,
                                          "episode_metric_names": list(EPISODE_METRICS)})
        if algo != "ddppo" and workers != 1:
            raise ConfigError(f"--workers {workers} needs --algo ddppo; --algo {algo} trains in "
                              "this process")
        if split not in ("train", "all"):
            raise ConfigError(f"--split {split!r}: train on the train part, or on all jobs; "
                              "the test part is for `hpcpolicy evaluate`")
        if resume and out is None:
            raise ConfigError("--resume needs --out: the run directory to continue")
        run = out if out is not None else Path("runs") / default_run_name(algo, seed)
        paths = RunPaths(run)
        if not resume:
            paths.check_new()
        env_cfg = EnvConfig(k=k, window_size=window_size, reward=reward, backfill=backfill,
                            split=split, train_frac=train_frac, warm=warm, compat=compat,
                            exclusive_nodes=compat == "rlscheduler")
        options = workload_options(compat, procs_from, walltime_fallback)
        spec = None if cluster is None else str(cluster)
        workload, machine = load(table, options.to_dict(), spec, procs)
        window_range(len(workload), split, train_frac, window_size)
        kwargs = env_kwargs(table, env_cfg, workload=options, cluster=cluster, procs=procs)
        facts = provenance(table, env_cfg, workload, machine)
        run.mkdir(parents=True, exist_ok=True)
        _check_env_file(run, ENV_FACTORY, kwargs, resume)
        if not is_quiet():
            lo, hi = facts["split"]["jobs"]
            console.print(f"{table}: {len(workload):,} jobs; episodes from jobs {lo:,}..{hi - 1:,}"
                          f" ({split}); machine {machine.name} ({machine.total_cores:,} cores); "
                          f"run {run}")
        if algo == "ddppo":
            from hpcpolicy.rl.ddppo import launch

            result = launch(cfg, ENV_FACTORY, run, workers=workers,  # type: ignore[arg-type]
                            env_kwargs=kwargs, provenance=facts, resume=resume)
        else:
            result = _train_in_process(cfg, kwargs, run, resume, facts)
    if is_quiet():
        console.print(str(result.run_dir / "policy"))
        return
    _summary(result, table, backfill)
