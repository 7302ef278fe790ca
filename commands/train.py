"""``hpcpolicy train``: learn a scheduling policy, online from a job table or offline from a
replay dataset."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from hpcpolicy.commands._console import (
    console,
    err_console,
    fail_cleanly,
    is_quiet,
    with_progress,
)
from hpcpolicy.commands._options import (
    BackfillOpt,
    ClusterOpt,
    CompatOpt,
    NumEnvsOpt,
    ProcsFromOpt,
    ProcsOpt,
    RewardOpt,
    SeedOpt,
    WalltimeFallbackOpt,
    WarmOpt,
    WindowSizeOpt,
    WorkersOpt,
    lower_choice,
    workload_options,
)
from hpcpolicy.commands.evaluate import TrainFracOpt

if TYPE_CHECKING:
    from hpcpolicy.rl.config import PPOConfig
    from hpcpolicy.rl.ppo import TrainResult

__all__ = ["ENV_FILE", "OFFLINE_ALGOS", "config_fields", "main"]

OFFLINE_ALGOS = ("cql", "bcq", "bc", "dqn")
"""Offline algorithms (d3rlpy), trained on a replay dataset (hpcpolicy.offline.config)."""
ONLINE_ONLY = ("--workers", "--resume", "--reward", "--backfill", "--window-size",
               "--num-envs", "--split", "--train-frac", "--warm", "--cluster", "--procs",
               "--procs-from", "--walltime-fallback", "--compat")
"""Options that shape the simulated environment; an offline run takes it from the dataset."""

ENV_FILE = "env.json"
"""In the run directory: the environment factory and its arguments (checked on --resume)."""

SHOWN = (("charts/episodic_return", "return", "{:.4g}".format),
         ("env/bsld", "bsld", "{:.2f}".format),
         ("env/best_heuristic_bsld", "best heuristic", "{:.2f}".format),
         # bsld / best bsld, shown as evaluate's "vs best": a change, negative is better
         ("env/bsld_vs_best", "vs best", lambda ratio: f"{ratio - 1:+.1%}"))
"""Metrics shown while training and in the summary: column, label, formatter."""


def _algo_config(algo: str, config_file: Path | None, overrides: dict[str, Any]) -> PPOConfig:
    """The algorithm's config: its defaults, then ``--config`` fields, then the flags."""
    from hpcpolicy.rl.config import config_from_dict

    given = {k: v for k, v in overrides.items() if v is not None}
    return config_from_dict({**config_fields(config_file, algo), **given, "algo": algo})


def config_fields(config_file: Path | None, algo: str) -> dict[str, Any]:
    """The fields of a ``--config`` JSON file ({} without one)."""
    from hpcpolicy.errors import ConfigError

    if config_file is None:
        return {}
    try:
        fields = json.loads(config_file.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"--config {config_file}: cannot be read as JSON ({exc})") from None
    if not isinstance(fields, dict):
        raise ConfigError(f"--config {config_file}: expected a JSON object of {algo} config "
                          "fields")
    return fields


def _check_input(source: Path, algo: str) -> None:
    """Refuse a job table for an offline algorithm, a dataset for an online one."""
    from hpcpolicy.errors import ConfigError
    from hpcpolicy.rl.config import ALGO_CONFIGS

    if algo not in OFFLINE_ALGOS and algo not in ALGO_CONFIGS and algo != MARL:
        raise ConfigError(f"unknown --algo {algo!r}; valid: online "
                          f"{', '.join(sorted(ALGO_CONFIGS))} (on a job table), offline "
                          f"{', '.join(OFFLINE_ALGOS)} (on a replay dataset), and on a GPU "
                          "partition (a job table with --cluster) marl (job selector + GPU "
                          "allocator) or dqn (choosing GPU types)")
    if not source.exists():
        raise ConfigError(f"{source}: no such file or directory")
    if algo in OFFLINE_ALGOS and not source.is_dir():
        raise ConfigError(f"--algo {algo} learns from a replay dataset directory, and {source} "
                          f"is a file; build one with `hpcpolicy dataset build {source} -o "
                          f"data/NAME`, then run `hpcpolicy train data/NAME --algo {algo}`")
    if algo not in OFFLINE_ALGOS and source.is_dir():
        raise ConfigError(f"{source} is a directory (a replay dataset?); --algo {algo} trains "
                          "in the simulator on a job table (jobs.parquet); datasets are for "
                          f"--algo {', '.join(OFFLINE_ALGOS)}")


def _offline(source: Path, algo: str, *, steps: int | None, seed: int, k: int | None,
             out: Path | None, config: Path | None, finetune_steps: int | None,
             given: list[str]) -> None:
    """``hpcpolicy train DATASET --algo cql|bcq|bc|dqn``: d3rlpy, export, optional PPO."""
    from hpcpolicy.errors import ConfigError
    from hpcpolicy.offline.config import OfflineConfig
    from hpcpolicy.offline.store import load_dataset
    from hpcpolicy.offline.train import train_offline
    from hpcpolicy.rl.runs import default_run_name

    if given:
        raise ConfigError(f"{', '.join(given)}: online options; an offline run takes its "
                          f"environment (K, windows, reward, backfilling) from the dataset "
                          f"{source} (rebuild it with `hpcpolicy dataset build` to change them)")
    cfg = OfflineConfig.from_dict({**config_fields(config, algo), "algo": algo, "seed": seed,
                                   **({"steps": steps} if steps is not None else {})})
    dataset = load_dataset(source)
    if k is not None and k != dataset.k:
        raise ConfigError(f"--k {k}: the dataset {source} was built with K = {dataset.k}; "
                          f"drop --k, or rebuild the dataset with `hpcpolicy dataset build "
                          f"... --k {k}`")
    run = out if out is not None else Path("runs") / default_run_name(algo, seed)
    if not is_quiet():
        train = dataset.manifest["splits"]["train"]
        console.print(f"{source}: {train['steps']:,} training decisions in {train['episodes']:,}"
                      f" episodes (source {dataset.manifest['source']}, K {dataset.k}); "
                      f"{algo}, {cfg.steps:,} gradient steps; run {run}")
    result = with_progress(lambda step: train_offline(
        dataset, cfg, run, progress=None if step is None else
        lambda done, total: step("gradient steps", done, total)), f"training {algo}")
    tuned = None
    if finetune_steps is not None:
        from hpcpolicy.offline.finetune import finetune

        tuned = with_progress(lambda step: finetune(
            run, dataset, cfg, steps=finetune_steps, progress=None if step is None else
            lambda row: step("PPO steps", int(row["global_step"]), finetune_steps)),
            "fine-tuning with PPO")
    if is_quiet():
        console.print(str(result.policy if tuned is None else tuned.run_dir / "policy"))
        return
    metrics = result.last_metrics
    shown = "; ".join(f"{name} {metrics[key]:.3f}" for key, name in (
        ("val_action_match", "validation action match"),
        ("test_action_match", "test action match")) if key in metrics)
    console.print(f"{result.steps:,} steps in {result.wall_time_s:,.1f} s; {shown}")
    console.print(f"policy: {result.policy}")
    if tuned is not None:
        console.print(f"fine-tuned with PPO ({tuned.global_step:,} steps): "
                      f"{tuned.run_dir / 'policy'}")
    table = dataset.manifest["training_data"]["path"]
    backfill = dataset.manifest["environment"]["backfill"]
    console.print(f"compare it: hpcpolicy evaluate {table} --policy fcfs,sjf,f1,"
                  f"{result.policy} --backfill {backfill}")


def _flat(kwargs: dict[str, Any]) -> dict[str, Any]:
    """``{"env": {"reward": ...}}`` as ``{"env.reward": ...}``, for naming what changed."""
    flat: dict[str, Any] = {}
    for key, value in kwargs.items():
        if isinstance(value, dict):
            flat.update({f"{key}.{k}": v for k, v in value.items()})
        else:
            flat[key] = value
    return flat


@contextlib.contextmanager
def _second_ctrl_c(run: Path) -> Iterator[None]:
    """The first Ctrl-C stops training after the update, with a checkpoint and a policy; a
    second one stops it at once. Then say what is left and exit with 130."""
    try:
        yield
    except KeyboardInterrupt:
        err_console.print(f"stopped at once by a second Ctrl-C; {run} keeps its last checkpoint: "
                          "continue with the same command and --resume")
        raise typer.Exit(130) from None


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
    parts = [f"{label} {fmt(row[key])}" for key, label, fmt in SHOWN
             if key in row and row[key] == row[key]]
    return "  ".join(parts)


def _train_in_process(cfg: PPOConfig, kwargs: dict[str, Any], run: Path, resume: bool,
                      provenance: dict[str, Any],
                      initial: dict[str, Any] | None) -> TrainResult:
    """PPO in this process (from the scorer weights ``initial``, if given), with a live
    progress line on stderr."""
    import functools

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from hpcpolicy.env.factory import make_env
    from hpcpolicy.rl.ppo import train

    make = functools.partial(make_env, **kwargs)
    if is_quiet():
        return train(cfg, make, run, resume=resume, provenance=provenance,
                     initial_scorer=initial)
    columns = (TextColumn("training"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
               TextColumn("{task.fields[speed]}"), TextColumn("{task.fields[stats]}"))
    with Progress(*columns, console=err_console, transient=True) as bar:
        task = bar.add_task("train", total=cfg.total_steps, speed="", stats="")

        def progress(row: Any) -> None:
            bar.update(task, completed=int(row["global_step"]),
                       speed=f"{row['sps']:,.0f} steps/s", stats=_format(dict(row)))

        return train(cfg, make, run, resume=resume, provenance=provenance, progress=progress,
                     initial_scorer=initial)


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
            out.add_row(f"last {label}", fmt(row[key]))
    out.add_row("policy", str(result.run_dir / "policy"))
    console.print(out)
    if result.interrupted:
        console.print("stopped before the budget was spent; continue with the same command "
                      "and --resume")
    console.print(f"compare it: hpcpolicy evaluate {table} --policy "
                  f"fcfs,sjf,f1,wfp3,unicep,{result.run_dir / 'policy'} --backfill {backfill}")


MARL = "marl"
"""The two-agent scheduler (hpcpolicy.marl): a job selector and a GPU allocator."""


def _run_dir(out: Path | None, resume: bool, algo: str, seed: int) -> Path:
    """The run directory: ``--out``, else a new name under runs/ (``--resume`` needs one)."""
    from hpcpolicy.errors import ConfigError
    from hpcpolicy.rl.runs import default_run_name

    if resume and out is None:
        raise ConfigError("--resume needs --out: the run directory to continue")
    return out if out is not None else Path("runs") / default_run_name(algo, seed)


def _marl(table: Path, *, overrides: dict[str, Any], config: Path | None, env: dict[str, Any],
          workers: int, resume: bool, out: Path | None, cluster: Path | None,
          procs: int | None, options: Any, given: list[str]) -> None:
    """``hpcpolicy train TABLE --algo marl``: train, then print where the artifact is."""
    from hpcpolicy.errors import ConfigError
    from hpcpolicy.marl.config import MarlConfig, MarlEnvConfig
    from hpcpolicy.marl.session import TrainingData, train_table
    from hpcpolicy.rl.runs import RunPaths

    if given:
        raise ConfigError(f"{', '.join(given)}: not an option of --algo marl (its reward "
                          "weights are the config fields bsld_weight and gpu_util_weight; "
                          "set them with --config)")
    if not table.is_file():
        raise ConfigError(f"{table}: no such job table; --algo marl trains on a job table "
                          "written by `hpcpolicy ingest` (jobs.parquet)")
    fields = {k: v for k, v in overrides.items() if v is not None}
    cfg = MarlConfig.from_dict({**config_fields(config, MARL), **fields})
    run = _run_dir(out, resume, MARL, cfg.seed)
    if not resume:
        RunPaths(run).check_new()
    data = TrainingData(str(table), MarlEnvConfig(**{k: v for k, v in env.items()
                                                     if v is not None}),
                        workload=options.to_dict(),
                        cluster=None if cluster is None else str(cluster), procs=procs)
    workload, machine = data.load()
    run.mkdir(parents=True, exist_ok=True)
    _check_env_file(run, f"hpcpolicy.{MARL}", data.to_dict(), resume)
    if not is_quiet():
        console.print(f"{table}: {len(workload):,} jobs on {machine.name} "
                      f"({machine.total_gpus:,} GPUs); two agents, {cfg.total_steps:,} "
                      f"decisions; run {run}")
    with _second_ctrl_c(run):
        result = with_progress(lambda step: train_table(
            data, cfg, run, workers=workers, resume=resume, progress=None if step is None else
            lambda row: step(_format(dict(row)), int(row["global_step"]), cfg.total_steps)),
            "training marl")
    policy = result.run_dir / "policy"
    if is_quiet():
        console.print(str(policy))
        return
    console.print(f"{result.global_step:,} decisions in {result.updates:,} updates, "
                  f"{result.wall_time_s:,.1f} s; last {_format(result.last_metrics)}")
    if result.interrupted:
        console.print("stopped before the budget was spent; continue with the same command "
                      "and --resume")
    console.print(f"policy: {policy}")
    machine_option = f" --cluster {cluster}" if cluster is not None else ""
    console.print(f"compare it: hpcpolicy evaluate {table}{machine_option} --gpu-baselines "
                  f"-p {policy} --backfill {data.env.backfill}")


def _gpu_dqn(table: Path, *, overrides: dict[str, Any], config: Path | None, resume: bool,
             out: Path | None, cluster: Path | None, options: Any, given: list[str]) -> None:
    """``hpcpolicy train TABLE --algo dqn --cluster SPEC``: online DQN choosing GPU types."""
    from hpcpolicy.atomic import file_sha256
    from hpcpolicy.env.factory import load
    from hpcpolicy.errors import ConfigError
    from hpcpolicy.hetero import ALGO, GpuDqnConfig
    from hpcpolicy.hetero.train import train_gpu_dqn

    if given:
        raise ConfigError(f"{', '.join(given)}: not an option of --algo dqn on a job table "
                          "(online DQN choosing GPU types; its fields are in "
                          "hpcpolicy.hetero.config, set them with --config)")
    if not table.is_file():
        raise ConfigError(f"{table}: no such file or directory; --algo dqn trains on a job "
                          "table with --cluster (GPU types), or offline on a replay dataset "
                          "directory")
    if cluster is None:
        raise ConfigError("--algo dqn on a job table learns which GPU type each job starts on; "
                          "give --cluster with at least 2 GPU types (e.g. "
                          "examples/gpu-partition.toml), or give a replay dataset directory "
                          "for offline DQN")
    cfg = GpuDqnConfig.from_dict({**config_fields(config, ALGO),
                                  **{k: v for k, v in overrides.items() if v is not None}})
    run = _run_dir(out, resume, ALGO, cfg.seed)
    workload, machine = load(table, options.to_dict(), str(cluster), None)
    if not is_quiet():
        console.print(f"{table}: {len(workload):,} jobs on {machine.name} "
                      f"({machine.total_gpus:,} GPUs); {cfg.steps:,} GPU-type decisions, "
                      f"lambda {cfg.idle_weight:g}; run {run}")
    result = with_progress(lambda step: train_gpu_dqn(
        workload, machine, cfg, run, resume=resume,
        training_data={"path": str(table), "sha256": file_sha256(table)},
        progress=None if step is None else lambda done, total: step("steps", done, total)),
        "training dqn-gpu")
    if is_quiet():
        console.print(str(result.policy))
        return
    shown = ", ".join(f"{k} {v:,.4g}" for k, v in result.last_metrics.items())
    console.print(f"{result.steps:,} steps, {result.wall_time_s:,.1f} s; last 10 episodes: "
                  f"{shown}")
    console.print(f"policy: {result.policy}")
    console.print(f"compare it: hpcpolicy evaluate {table} --cluster {cluster} --gpu-baselines "
                  f"-p {result.policy} --backfill {cfg.backfill}")


def main(
    table: Annotated[Path, typer.Argument(
        metavar="INPUT", help="Online (ppo, ddppo): a job table written by `hpcpolicy ingest`. "
        "Offline (cql, bcq, bc, dqn): a replay dataset directory written by `hpcpolicy "
        "dataset build`. dqn on a job table (with --cluster): online, choosing GPU types.",
        show_default=False)],
    algo: Annotated[str, typer.Option(
        "--algo", help="Online: ppo (this process) or ddppo (torchrun workers). Offline "
        "(d3rlpy): cql, bcq, bc or dqn. On a GPU partition (a job table with --cluster): marl, "
        "the two-agent job selector + GPU allocator (PPO; --workers N for DD-PPO), or dqn, "
        "online GPU-type assignment (d3rlpy double DQN) on several GPU types.",
        callback=lower_choice)] = "ppo",
    workers: WorkersOpt = 1,
    steps: Annotated[int | None, typer.Option(
        "--steps", help="Online: environment steps (decisions), all workers together; "
        "default 1,000,000. Offline: gradient steps; default 20,000. Or --config's.")] = None,
    out: Annotated[Path | None, typer.Option(
        "--out", "-o", help="Run directory; default runs/train__ALGO__SEED__TIMESTAMP.",
        file_okay=False)] = None,
    seed: SeedOpt = 1,
    resume: Annotated[bool, typer.Option(
        "--resume", help="Continue the run in --out from its last checkpoint.")] = False,
    reward: RewardOpt = "bsld",
    backfill: BackfillOpt = "none",
    window_size: WindowSizeOpt = 256,
    k: Annotated[int | None, typer.Option(
        "--k", help="Waiting jobs the policy sees (the oldest; marl: see --visible); default "
        "128 (offline: the dataset's; marl: 32).", show_default=False)] = None,
    visible: Annotated[str | None, typer.Option(
        "--visible", help="marl: which waiting jobs the selector sees: the oldest --k "
        "(oldest), the oldest --k of those that fit now (fitting: it can start any job "
        "that fits, never held up behind jobs that do not), or the --k with the shortest "
        "requested walltimes (shortest: it may also choose one that does not fit yet and "
        "hold the machine for it, as SJF does), or the --k - 1 shortest and the longest "
        "(extremes: as shortest, and it can start the job that sets when the window "
        "ends). Default oldest.",
        show_default=False)] = None,
    num_envs: NumEnvsOpt = None,
    split: Annotated[str, typer.Option(
        "--split", help="Part episodes come from: train (the first --train-frac of the jobs) "
        "or all (RLScheduler's protocol; then no later period is left unseen).",
        callback=lower_choice)] = "train",
    train_frac: TrainFracOpt = 0.7,
    warm: WarmOpt = False,
    cluster: ClusterOpt = None,
    procs: ProcsOpt = None,
    procs_from: ProcsFromOpt = None,
    walltime_fallback: WalltimeFallbackOpt = None,
    compat: CompatOpt = None,
    config: Annotated[Path | None, typer.Option(
        "--config", help="JSON file of algorithm config fields (learning_rate, num_steps, "
        "gamma, ...; see hpcpolicy.rl.config, offline hpcpolicy.offline.config).",
        dir_okay=False)] = None,
    online_finetune: Annotated[bool, typer.Option(
        "--online-finetune", help="Offline only: then continue with PPO in the simulator "
        "from the offline weights (the run's finetune/ directory).")] = False,
    finetune_steps: Annotated[int, typer.Option(
        "--finetune-steps", help="Environment steps of --online-finetune.")] = 100_000,
    init_from: Annotated[Path | None, typer.Option(
        "--init-from", help="ppo, ddppo: start the policy network from this policy directory "
        "(for instance a --algo bc run's policy/, cloned from a heuristic's decisions); the "
        "value network starts fresh. Same network shape and features needed.",
        show_default=False)] = None,
    idle_weight: Annotated[float | None, typer.Option(
        "--lambda", help="dqn on a job table: weight of idle GPU time in the ADLRO reward "
        "-(job completion time + lambda x idle GPU time); default 1.",
        show_default=False)] = None,
) -> None:
    """Train a scheduling policy: online in the simulator, or offline from a replay dataset.

    Online (ppo, ddppo), episodes are windows of consecutive jobs from the first
    --train-frac of the trace (the rest is left for `hpcpolicy evaluate`); one step picks
    the job that becomes the queue head, then the configured backfilling runs. Writes
    config.json, env.json, metrics.csv, checkpoints/ and the deployable policy/ into the run
    directory; Ctrl-C stops after the current update with a usable checkpoint (continue with
    --resume).

    Offline (cql, bcq, bc, dqn), d3rlpy learns from the train split of a replay dataset
    (`hpcpolicy dataset build`); the run gets config.json, metrics.csv, d3rlpy/ (its logs
    and checkpoint) and the same deployable policy/.

    dqn on a job table with --cluster (several GPU types) learns online which GPU type each
    job starts on (FCFS order; reward -(job completion time + lambda x idle GPU time)); the
    run gets config.json, episodes.csv, d3rlpy/, checkpoints/ and policy/
    (hpcpolicy.hetero.train).

    Examples:

        hpcpolicy train jobs.parquet --algo ppo --steps 200000 -o runs/sjf-like

        hpcpolicy train jobs.parquet --algo ddppo --workers 2 --steps 5000000 --backfill easy

        hpcpolicy train data/mix --algo cql --steps 20000 -o runs/cql

        hpcpolicy train data/logged --algo bc --online-finetune -o runs/bc-ppo

        hpcpolicy train jobs.parquet --algo ddppo --workers 2 --init-from runs/bc-f1/policy

        hpcpolicy train gpu.parquet --algo marl --cluster examples/gpu-partition.toml -o runs/m

        hpcpolicy train gpu.parquet --algo dqn --cluster examples/gpu-partition.toml
            --lambda 0.5 --steps 50000 -o runs/dqn-gpu
    """
    from hpcpolicy.env import EnvConfig
    from hpcpolicy.env.factory import ENV_FACTORY, env_kwargs, load, provenance
    from hpcpolicy.env.scheduling import EPISODE_METRICS
    from hpcpolicy.env.spaces import DEFAULT_K
    from hpcpolicy.env.split import window_range
    from hpcpolicy.errors import ConfigError
    from hpcpolicy.rl.runs import RunPaths

    with fail_cleanly():
        if init_from is not None and (algo not in ("ppo", "ddppo") or resume):
            raise ConfigError(
                "--init-from starts a new --algo ppo or ddppo run from a policy; "
                + ("--resume continues from the run's checkpoint instead" if resume else
                   f"--algo {algo} does not take it (offline: --online-finetune)"))
        if algo == MARL:
            not_marl = {"--reward": (reward, "bsld"), "--num-envs": (num_envs, None),
                         "--warm": (warm, False), "--compat": (compat, None),
                         "--online-finetune": (online_finetune, False),
                         "--lambda": (idle_weight, None)}
            _marl(table, overrides={"total_steps": steps, "seed": seed}, config=config,
                  env={"k": k, "visible": visible, "window_size": window_size,
                       "backfill": backfill, "split": split, "train_frac": train_frac},
                  workers=workers, resume=resume, out=out, cluster=cluster, procs=procs,
                  options=workload_options(compat, procs_from, walltime_fallback),
                  given=[name for name, (value, default) in not_marl.items()
                         if value != default])
            return
        if algo == "dqn" and not table.is_dir():  # a job table: online, GPU types
            not_taken = {"--workers": (workers, 1), "--reward": (reward, "bsld"),
                         "--k": (k, None), "--visible": (visible, None),
                         "--num-envs": (num_envs, None),
                         "--split": (split, "train"), "--warm": (warm, False),
                         "--procs": (procs, None), "--compat": (compat, None),
                         "--online-finetune": (online_finetune, False)}
            _gpu_dqn(table, overrides={"steps": steps, "seed": seed, "idle_weight": idle_weight,
                                       "backfill": None if backfill == "none" else backfill,
                                       "window_size": None if window_size == 256 else window_size,
                                       "train_frac": None if train_frac == 0.7 else train_frac},
                     config=config, resume=resume, out=out, cluster=cluster,
                     options=workload_options(compat, procs_from, walltime_fallback),
                     given=[name for name, (value, default) in not_taken.items()
                            if value != default])
            return
        if idle_weight is not None:
            raise ConfigError("--lambda weighs idle GPU time for --algo dqn on a job table "
                              f"(GPU types); --algo {algo} does not use it")
        if visible is not None:
            raise ConfigError(f"--visible chooses the jobs the two-agent selector sees (--algo "
                              f"marl); --algo {algo} shows the oldest --k")
        _check_input(table, algo)
        if algo in OFFLINE_ALGOS:
            defaults = {"--workers": 1, "--resume": False, "--reward": "bsld",
                        "--backfill": "none", "--window-size": 256, "--num-envs": None,
                        "--split": "train", "--train-frac": 0.7, "--warm": False,
                        "--cluster": None, "--procs": None, "--procs-from": None,
                        "--walltime-fallback": None, "--compat": None}
            values = (workers, resume, reward, backfill, window_size, num_envs, split,
                      train_frac, warm, cluster, procs, procs_from, walltime_fallback, compat)
            given = [name for name, value in zip(ONLINE_ONLY, values, strict=True)
                     if value != defaults[name]]
            _offline(table, algo, steps=steps, seed=seed, k=k, out=out, config=config,
                     finetune_steps=finetune_steps if online_finetune else None, given=given)
            return
        if online_finetune:
            raise ConfigError(f"--online-finetune continues an offline run; --algo {algo} "
                              f"is online already (offline: {', '.join(OFFLINE_ALGOS)})")
        cfg = _algo_config(algo, config, {"total_steps": steps, "seed": seed,
                                          "num_envs": num_envs,
                                          "episode_metric_names": list(EPISODE_METRICS)})
        if algo != "ddppo" and workers != 1:
            raise ConfigError(f"--workers {workers} needs --algo ddppo; --algo {algo} trains in "
                              "this process")
        if split not in ("train", "all"):
            raise ConfigError(f"--split {split!r}: train on the train part, or on all jobs; "
                              "the test part is for `hpcpolicy evaluate`")
        run = _run_dir(out, resume, algo, seed)
        paths = RunPaths(run)
        if not resume:
            paths.check_new()
        env_cfg = EnvConfig(k=DEFAULT_K if k is None else k, window_size=window_size,
                            reward=reward, backfill=backfill,
                            split=split, train_frac=train_frac, warm=warm, compat=compat,
                            exclusive_nodes=compat == "rlscheduler")
        options = workload_options(compat, procs_from, walltime_fallback)
        spec = None if cluster is None else str(cluster)
        workload, machine = load(table, options.to_dict(), spec, procs)
        window_range(len(workload), split, train_frac, window_size)
        kwargs = env_kwargs(table, env_cfg, workload=options, cluster=cluster, procs=procs)
        facts = provenance(table, env_cfg, workload, machine)
        initial = None
        if init_from is not None:
            from hpcpolicy.rl.warm_start import scorer_weights

            initial = scorer_weights(init_from, cfg)
            facts["initialised_from"] = str(init_from.resolve())
        run.mkdir(parents=True, exist_ok=True)
        _check_env_file(run, ENV_FACTORY, kwargs, resume)
        if not is_quiet():
            lo, hi = facts["split"]["jobs"]
            console.print(f"{table}: {len(workload):,} jobs; episodes from jobs {lo:,}..{hi - 1:,}"
                          f" ({split}); machine {machine.name} ({machine.total_cores:,} cores); "
                          f"run {run}")
        with _second_ctrl_c(run):
            if algo == "ddppo":
                from hpcpolicy.rl.ddppo import launch

                result = launch(cfg, ENV_FACTORY, run, workers=workers,  # type: ignore[arg-type]
                                env_kwargs=kwargs, provenance=facts, resume=resume,
                                initial_policy=init_from)
            else:
                result = _train_in_process(cfg, kwargs, run, resume, facts, initial)
    if is_quiet():
        console.print(str(result.run_dir / "policy"))
        return
    _summary(result, table, backfill)
