"""The four training routes behind :func:`hpcpolicy.train`: online PPO / DD-PPO, offline
d3rlpy (with optional PPO fine-tuning), the two-agent scheduler, and GPU-type DQN.

Each checks what the user can fix first (options it does not take, the input, the config,
the run directory), then reports the start and trains.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpcpolicy.errors import ConfigError
from hpcpolicy.training.environment import record_environment
from hpcpolicy.training.hooks import Hooks, Trained, TrainProgress
from hpcpolicy.training.options import MARL, TrainOptions, config_fields, run_dir

if TYPE_CHECKING:
    from hpcpolicy.cluster import ClusterSpec
    from hpcpolicy.env import EnvConfig
    from hpcpolicy.ppo.config import PPOConfig
    from hpcpolicy.ppo.ppo import TrainResult
    from hpcpolicy.workload import Workload

__all__ = ["gpu_dqn", "marl", "offline", "online"]

Config = Mapping[str, Any] | str | Path | None

ONLINE_ONLY = ("workers", "resume", "reward", "backfill", "window_size", "num_envs", "split",
               "train_frac", "val_frac", "warm", "cluster", "procs", "procs_from",
               "walltime_fallback", "compat", "site", "prior", "force")
"""Options that shape the simulated environment; an offline run takes it from the dataset."""
NOT_MARL = ("reward", "num_envs", "warm", "compat", "finetune_steps", "idle_weight", "site",
            "val_frac", "prior", "force")
"""Options the two-agent scheduler does not take (its reward weights are config fields)."""
NOT_GPU_DQN = ("workers", "reward", "k", "visible", "num_envs", "split", "warm", "procs",
               "compat", "finetune_steps", "site", "val_frac", "prior", "force")
"""Options GPU-type DQN does not take (its fields are in hpcpolicy.hetero.config)."""


def _rows(hooks: Hooks, phase: str, unit: str,
          total: int) -> Callable[[Mapping[str, float]], None] | None:
    """A trainer's per-update ``progress(row)`` as :class:`TrainProgress` reports."""
    report = hooks.progress
    if report is None:
        return None
    return lambda row: report(TrainProgress(phase, unit, int(row["global_step"]), total, row))


def _counts(hooks: Hooks, phase: str, unit: str) -> Callable[[int, int], None] | None:
    """A trainer's ``progress(done, total)`` as :class:`TrainProgress` reports."""
    report = hooks.progress
    if report is None:
        return None
    return lambda done, total: report(TrainProgress(phase, unit, done, total))


def offline(source: Path, algo: str, config: Config, out: Path | None, opts: TrainOptions,
            hooks: Hooks) -> Trained:
    """d3rlpy on a replay dataset, exported; then PPO from its weights if
    ``opts.finetune_steps``."""
    from hpcpolicy.offline.config import OfflineConfig
    from hpcpolicy.offline.store import load_dataset
    from hpcpolicy.offline.train import train_offline

    opts.refuse(ONLINE_ONLY, "online options; an offline run takes its environment (K, "
                f"windows, reward, backfilling) from the dataset {source} (rebuild it with "
                "`hpcpolicy dataset build` to change them)")
    cfg = OfflineConfig.from_dict({**config_fields(config, algo), "algo": algo,
                                   "seed": opts.seed,
                                   **({"steps": opts.steps} if opts.steps is not None else {})})
    dataset = load_dataset(source)
    if opts.k is not None and opts.k != dataset.k:
        raise ConfigError(f"--k {opts.k}: the dataset {source} was built with K = {dataset.k}; "
                          f"drop --k, or rebuild the dataset with `hpcpolicy dataset build "
                          f"... --k {opts.k}`")
    run = run_dir(out, False, algo, opts.seed)
    split = dataset.manifest["splits"]["train"]
    hooks.start(run, f"{source}: {split['steps']:,} training decisions in "
                f"{split['episodes']:,} episodes (source {dataset.manifest['source']}, K "
                f"{dataset.k}); {algo}, {cfg.steps:,} gradient steps; run {run}", False)
    result = train_offline(dataset, cfg, run,
                           progress=_counts(hooks, f"training {algo}", "gradient steps"))
    tuned = None
    if opts.finetune_steps is not None:
        from hpcpolicy.offline.finetune import finetune

        tuned = finetune(run, dataset, cfg, steps=opts.finetune_steps, progress=_rows(
            hooks, "fine-tuning with PPO", "PPO steps", opts.finetune_steps))
    table = dataset.manifest["training_data"]["path"]
    backfill = dataset.manifest["environment"]["backfill"]
    return Trained("offline", algo, run, result.policy if tuned is None
                   else tuned.run_dir / "policy", result,
                   f"hpcpolicy evaluate {table} --policy fcfs,sjf,f1,{result.policy} "
                   f"--backfill {backfill}", tuned)


def marl(table: Path, config: Config, out: Path | None, opts: TrainOptions,
         hooks: Hooks) -> Trained:
    """The two-agent scheduler on a job table (DD-PPO with ``opts.workers`` > 1)."""
    from hpcpolicy.learn.runs import RunPaths
    from hpcpolicy.marl.config import MarlConfig, MarlEnvConfig
    from hpcpolicy.marl.session import TrainingData, train_table

    opts.refuse(NOT_MARL, "not an option of --algo marl (its reward weights are the config "
                "fields bsld_weight and gpu_util_weight; set them with --config)")
    if not table.is_file():
        raise ConfigError(f"{table}: no such job table; --algo marl trains on a job table "
                          "written by `hpcpolicy ingest` (jobs.parquet)")
    flags = {"total_steps": opts.steps, "seed": opts.seed}
    cfg = MarlConfig.from_dict({**config_fields(config, MARL),
                                **{k: v for k, v in flags.items() if v is not None}})
    run = run_dir(out, opts.resume, MARL, cfg.seed)
    if not opts.resume:
        RunPaths(run).check_new()
    env: dict[str, Any] = {"k": opts.k, "visible": opts.visible,
                           "window_size": opts.window_size, "backfill": opts.backfill,
                           "split": opts.split, "train_frac": opts.train_frac}
    data = TrainingData(str(table), MarlEnvConfig(**{k: v for k, v in env.items()
                                                     if v is not None}),
                        workload=opts.workload().to_dict(),
                        cluster=None if opts.cluster is None else str(opts.cluster),
                        procs=opts.procs)
    workload, machine = data.load()
    run.mkdir(parents=True, exist_ok=True)
    record_environment(run, f"hpcpolicy.{MARL}", data.to_dict(), opts.resume)
    hooks.start(run, f"{table}: {len(workload):,} jobs on {machine.name} "
                f"({machine.total_gpus:,} GPUs); two agents, {cfg.total_steps:,} decisions; "
                f"run {run}", True)
    result = train_table(data, cfg, run, workers=opts.workers, resume=opts.resume,
                         progress=_rows(hooks, "training marl", "decisions", cfg.total_steps))
    policy = result.run_dir / "policy"
    machine_option = f" --cluster {opts.cluster}" if opts.cluster is not None else ""
    return Trained("marl", MARL, result.run_dir, policy, result,
                   f"hpcpolicy evaluate {table}{machine_option} --gpu-baselines -p {policy} "
                   f"--backfill {data.env.backfill}")


def gpu_dqn(table: Path, config: Config, out: Path | None, opts: TrainOptions,
            hooks: Hooks) -> Trained:
    """Online DQN choosing the GPU type each job starts on (a job table and a cluster spec)."""
    from hpcpolicy.atomic import file_sha256
    from hpcpolicy.env.factory import load
    from hpcpolicy.hetero import ALGO, GpuDqnConfig
    from hpcpolicy.hetero.train import train_gpu_dqn

    opts.refuse(NOT_GPU_DQN, "not an option of --algo dqn on a job table (online DQN choosing "
                "GPU types; its fields are in hpcpolicy.hetero.config, set them with --config)")
    if not table.is_file():
        raise ConfigError(f"{table}: no such file or directory; --algo dqn trains on a job "
                          "table with --cluster (GPU types), or offline on a replay dataset "
                          "directory")
    if opts.cluster is None:
        raise ConfigError("--algo dqn on a job table learns which GPU type each job starts on; "
                          "give --cluster with at least 2 GPU types (e.g. "
                          "examples/gpu-partition.toml), or give a replay dataset directory "
                          "for offline DQN")
    given = {name: getattr(opts, name) for name in ("backfill", "window_size", "train_frac")
             if opts.given((name,))}
    flags = {"steps": opts.steps, "seed": opts.seed, "idle_weight": opts.idle_weight}
    cfg = GpuDqnConfig.from_dict({**config_fields(config, ALGO), **given,
                                  **{k: v for k, v in flags.items() if v is not None}})
    run = run_dir(out, opts.resume, ALGO, cfg.seed)
    workload, machine = load(table, opts.workload().to_dict(), str(opts.cluster), None)
    hooks.start(run, f"{table}: {len(workload):,} jobs on {machine.name} "
                f"({machine.total_gpus:,} GPUs); {cfg.steps:,} GPU-type decisions, lambda "
                f"{cfg.idle_weight:g}; run {run}", False)
    result = train_gpu_dqn(workload, machine, cfg, run, resume=opts.resume,
                           training_data={"path": str(table), "sha256": file_sha256(table)},
                           progress=_counts(hooks, "training dqn-gpu", "steps"))
    return Trained("gpu", "dqn", run, result.policy, result,
                   f"hpcpolicy evaluate {table} --cluster {opts.cluster} --gpu-baselines "
                   f"-p {result.policy} --backfill {cfg.backfill}")


def online(table: Path, algo: str, config: Config, out: Path | None, opts: TrainOptions,
           hooks: Hooks) -> Trained:
    """PPO in the simulator on a job table: in this process, or in torchrun workers (ddppo)."""
    from hpcpolicy.env.factory import ENV_FACTORY
    from hpcpolicy.env.scheduling import EPISODE_METRICS
    from hpcpolicy.learn.runs import RunPaths
    from hpcpolicy.offline.config import OFFLINE_ALGOS
    from hpcpolicy.ppo.config import config_from_dict

    if opts.finetune_steps is not None:
        raise ConfigError(f"--online-finetune continues an offline run; --algo {algo} "
                          f"is online already (offline: {', '.join(OFFLINE_ALGOS)})")
    flags = {"total_steps": opts.steps, "seed": opts.seed, "num_envs": opts.num_envs,
             "episode_metric_names": list(EPISODE_METRICS)}
    given = config_fields(config, algo)
    cfg = config_from_dict({**given, **{k: v for k, v in flags.items() if v is not None},
                            "algo": algo})
    if "snapshot_every" not in given and opts.split == "train" and opts.val_frac > 0:
        from hpcpolicy.learn.runs import default_snapshot_every

        # snapshots to choose among on validation (training.snapshots.select_snapshot)
        cfg = config_from_dict({**cfg.to_dict(), "snapshot_every": default_snapshot_every(
            cfg.total_steps, cfg.batch_size * opts.workers)})
    if algo != "ddppo" and opts.workers != 1:
        raise ConfigError(f"--workers {opts.workers} needs --algo ddppo; --algo {algo} trains "
                          "in this process")
    if opts.split not in ("train", "all"):
        raise ConfigError(f"--split {opts.split!r}: train on the train part, or on all jobs; "
                          "the test part is for `hpcpolicy evaluate`")
    run = run_dir(out, opts.resume, algo, opts.seed)
    if not opts.resume:
        RunPaths(run).check_new()
    kwargs, facts, describe = _environment(table, opts)
    initial = None
    if opts.init_from is not None:
        from hpcpolicy.ppo.warm_start import scorer_weights

        initial = scorer_weights(opts.init_from, cfg)
        facts["initialised_from"] = str(opts.init_from.resolve())
    run.mkdir(parents=True, exist_ok=True)
    record_environment(run, ENV_FACTORY, kwargs, opts.resume)
    hooks.start(run, f"{describe}; run {run}", True)
    if algo == "ddppo":
        from hpcpolicy.ppo.ddppo import launch

        result = launch(cfg, ENV_FACTORY, run, workers=opts.workers,  # type: ignore[arg-type]
                        env_kwargs=kwargs, provenance=facts, resume=opts.resume,
                        initial_policy=opts.init_from)
    else:
        result = _in_process(cfg, kwargs, run, opts.resume, facts, initial, hooks)
    policy = result.run_dir / "policy"
    return Trained("online", algo, result.run_dir, policy, result,
                   f"hpcpolicy evaluate {table} --policy fcfs,sjf,f1,wfp3,unicep,{policy} "
                   f"--backfill {opts.backfill}")


def _environment(table: Path, opts: TrainOptions) -> tuple[dict[str, Any], dict[str, Any], str]:
    """The scheduling environment of an online run: the factory's keyword arguments, the
    provenance facts and a description of the data."""
    from hpcpolicy.compat import compat_preset
    from hpcpolicy.env import EnvConfig
    from hpcpolicy.env.factory import env_kwargs, env_world, provenance
    from hpcpolicy.env.prior import PRIORS
    from hpcpolicy.env.spaces import DEFAULT_K
    from hpcpolicy.world.open import WorldSpec
    from hpcpolicy.world.split import fit_frac, validation_range, window_range

    if opts.prior not in ("none", "auto", *PRIORS):
        raise ConfigError(f"--prior {opts.prior!r} is not a heuristic a policy can start from; "
                          f"valid: none, auto, {', '.join(PRIORS)}")
    # episodes stop short of the validation part, kept for the model card's guard
    frac = opts.train_frac if opts.split == "all" else fit_frac(opts.train_frac, opts.val_frac)
    env = EnvConfig(k=DEFAULT_K if opts.k is None else opts.k, window_size=opts.window_size,
                    reward=opts.reward, backfill=opts.backfill, split=opts.split,
                    train_frac=frac, warm=opts.warm, compat=opts.compat,
                    exclusive_nodes=compat_preset(opts.compat).exclusive_nodes)
    spec = WorldSpec(workload=opts.workload(), procs=opts.procs, compat=opts.compat,
                     cluster=None if opts.cluster is None else str(opts.cluster)
                     ).with_site(opts.site)
    world = env_world({"table": str(table), "world": spec.to_dict()})
    workload, machine = world.workload, world.cluster
    if opts.site is not None:  # the episodes replay in the site model's world
        env = replace(env, **world.env_options())
    try:
        window_range(len(workload), opts.split, frac, opts.window_size)
    except ConfigError as exc:
        held = f" ({opts.val_frac:g} of the jobs kept for validation: --val-frac)" \
            if frac != opts.train_frac else ""
        raise ConfigError(f"{exc}{held}") from None
    env, started = _with_prior(env, opts, workload, machine)
    kwargs = env_kwargs(table, env, spec)
    facts = provenance(table, env, workload, machine)
    lo, hi = facts["split"]["jobs"]
    part = opts.split
    if frac != opts.train_frac:
        val_end = validation_range(len(workload), opts.train_frac, opts.val_frac)[1]
        part = f"train; {hi:,}..{val_end - 1:,} validate"
    if opts.site is not None:
        facts["site"] = str(opts.site.resolve())
    return kwargs, facts, (f"{table}: {len(workload):,} jobs; episodes from jobs {lo:,}.."
                           f"{hi - 1:,} ({part}); machine {machine.name} "
                           f"({machine.total_cores:,} cores){started}")


def _with_prior(env: EnvConfig, opts: TrainOptions, workload: Workload,
                machine: ClusterSpec) -> tuple[EnvConfig, str]:
    """``env`` with the heuristic of ``--prior`` (``auto`` resolved on the validation part, or
    the slot order of ``--init-from``'s policy) and a phrase saying which, for the run's
    description."""
    if opts.init_from is not None:
        return _prior_of_init(env, opts)
    if opts.prior == "none":
        return env, ""
    if opts.prior != "auto":
        return replace(env, prior=opts.prior), f"; starts from {opts.prior}"
    from hpcpolicy.training.prior import prior_for

    name = prior_for(workload, machine, opts)
    if name is None:
        return env, "; no prior (--prior auto: the validation part holds no window)"
    return replace(env, prior=name), f"; starts from {name} (--prior auto: best on validation)"


def _prior_of_init(env: EnvConfig, opts: TrainOptions) -> tuple[EnvConfig, str]:
    """A run that starts from ``--init-from`` keeps the slot order that policy learned on."""
    from hpcpolicy.artifact import load_policy
    from hpcpolicy.env.prior import OLDEST

    assert opts.init_from is not None
    theirs = load_policy(opts.init_from).slot_order
    if opts.prior not in ("auto", "none" if theirs == OLDEST else theirs):
        raise ConfigError(f"--init-from {opts.init_from} learned on slots in {theirs} order; "
                          f"--prior {opts.prior} would show it others: leave --prior out")
    if theirs == OLDEST:
        return env, ""
    return replace(env, prior=theirs), f"; starts from {theirs} (as --init-from's policy)"


def _in_process(cfg: PPOConfig, kwargs: dict[str, Any], run: Path, resume: bool,
                facts: dict[str, Any], initial: Mapping[str, Any] | None,
                hooks: Hooks) -> TrainResult:
    """PPO in this process, from the scorer weights ``initial`` if given."""
    from hpcpolicy.env.factory import make_env
    from hpcpolicy.ppo.ppo import train

    return train(cfg, functools.partial(make_env, **kwargs), run, resume=resume,
                 provenance=facts, initial_scorer=initial,
                 progress=_rows(hooks, "training", "steps", cfg.total_steps))
