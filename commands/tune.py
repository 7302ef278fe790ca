"""``hpcpolicy tune``: population-based training of PPO / DD-PPO runs on a job table."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from hpcpolicy.commands._console import (
    console,
    err_console,
    fail_cleanly,
    is_quiet,
    note_first_compile,
    plain,
)
from hpcpolicy.commands._options import (
    BackendOpt,
    BackfillOpt,
    ClusterOpt,
    CompatOpt,
    NumEnvsOpt,
    ProcsFromOpt,
    ProcsOpt,
    RayAddressOpt,
    RewardOpt,
    SeedOpt,
    TableArg,
    WalltimeFallbackOpt,
    WarmOpt,
    WindowSizeOpt,
    WorkersOpt,
    a_file,
    a_folder,
)
from hpcpolicy.commands._world import world_spec
from hpcpolicy.commands.evaluate import TRAIN_FRAC, TrainFracOpt

if TYPE_CHECKING:
    from hpcpolicy.ppo.config import PPOConfig
    from hpcpolicy.tune import TuneConfig, TuneResult

__all__ = ["main"]


def _base_config(algo: str, config: Path | None, overrides: dict[str, Any]) -> PPOConfig:
    """The members' base config: defaults (learning rate not annealed), --config, flags."""
    from hpcpolicy.errors import ConfigError
    from hpcpolicy.ppo.config import ALGO_CONFIGS, config_from_dict
    from hpcpolicy.training import config_fields

    if algo not in ALGO_CONFIGS:
        raise ConfigError(f"unknown --algo {algo!r}; a tune trains online: "
                          f"{', '.join(sorted(ALGO_CONFIGS))}")
    given = {k: v for k, v in overrides.items() if v is not None}
    return config_from_dict({"anneal_lr": False, **config_fields(config, algo), **given,
                             "algo": algo})


def _run(cfg: TuneConfig, base: PPOConfig, env: dict[str, Any], out: Path,
         resume: bool, ray: tuple[str, str | None, float]) -> TuneResult:
    """The tune on its backend, with a live progress line on stderr (none under --quiet)."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from hpcpolicy.tune import TuneEvent, tune

    backend, address, member_cpus = ray
    if backend == "ray":
        from hpcpolicy.tune.on_ray import tune_on_ray

        tune = functools.partial(tune_on_ray, address=address, member_cpus=member_cpus)
    if is_quiet():
        return tune(cfg, base, env, out, resume=resume)
    steps: dict[str, int] = {}
    columns = (TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(),
               TextColumn("{task.fields[best]}"))
    with Progress(*columns, console=err_console, transient=True) as bar:
        task = bar.add_task("tune", total=cfg.population * cfg.total_steps, best="")

        def progress(event: TuneEvent) -> None:
            if event.member is not None and event.phase == "train":
                steps[event.member] = min(event.steps, cfg.total_steps)
            who = f" {event.member}" if event.member else ""
            best = "" if event.best is None or event.best[1] is None else \
                f"best val bsld {event.best[1]:.2f} ({event.best[0]})"
            bar.update(task, completed=sum(steps.values()), best=best,
                       description=f"round {event.round}/{event.rounds}{who} {event.phase}")

        return tune(cfg, base, env, out, resume=resume, progress=progress)


def _summary(result: TuneResult, cfg: TuneConfig, table: Path, backfill: str) -> None:
    from rich import box
    from rich.table import Table

    record = result.record
    rounds = record.rounds
    out = Table(title=f"tune: validation mean bsld (jobs {record.validation['jobs'][0]:,}.."
                      f"{record.validation['jobs'][1] - 1:,}), lower is better",
                title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for col in ("member", "round 1", "last round", "copies", "learning rate", "entropy",
                "clip"):
        out.add_column(col, justify="left" if col == "member" else "right")
    for member in record.members:
        name = member["name"]
        first = rounds[0]["scores"][name] if rounds else None
        last = rounds[-1]["scores"][name] if rounds else None
        copies = sum(e["member"] == name for r in rounds for e in r["exploits"])
        hypers = rounds[-1]["hyperparameters"][name] if rounds else member["hyperparameters"]
        mark = " *" if record.best is not None and record.best["member"] == name else ""
        out.add_row(name + mark, "-" if first is None else f"{first:.2f}",
                    "-" if last is None else f"{last:.2f}", str(copies),
                    f"{hypers['learning_rate']:.3g}", f"{hypers['ent_coef']:.3g}",
                    f"{hypers['clip_coef']:.3g}")
    console.print(out)
    heuristics = ", ".join(f"{n} {s:.2f}" for n, s in record.baselines.items() if s is not None)
    console.print(f"{len(rounds)} of {cfg.rounds} round(s) in {record.wall_time_s:,.1f} s; "
                  f"heuristics on the same windows: {heuristics}")
    if result.interrupted or record.best is None:
        console.print("stopped before the last round; continue with the same command and "
                      "--resume")
        return
    console.print(f"best: {record.best['member']} (*), policy {result.root / 'policy'}")
    console.print(f"compare it: hpcpolicy evaluate {table} --policy fcfs,sjf,f1,"
                  f"{result.root / 'policy'} --backfill {backfill}")


def main(
    table: TableArg,
    population: Annotated[int, typer.Option(
        "--population", help="Members trained side by side (at least 2).")] = 4,
    steps: Annotated[int, typer.Option(
        "--steps", help="Environment steps (decisions) of each member, all its workers "
        "together.")] = 200_000,
    interval: Annotated[int, typer.Option(
        "--interval", help="Steps each member trains between two exploit/explore steps.")
    ] = 20_000,
    algo: Annotated[str, typer.Option(
        "--algo", help="ppo (members train in this process) or ddppo (torchrun workers).")
    ] = "ppo",
    workers: WorkersOpt = 1,
    out: Annotated[Path | None, typer.Option(
        "--out", "-o", help="Tune directory; default runs/tune__ALGO__SEED__TIMESTAMP.",
        callback=a_folder)] = None,
    seed: SeedOpt = 1,
    resume: Annotated[bool, typer.Option(
        "--resume", help="Continue the tune in --out where it stopped.")] = False,
    val_frac: Annotated[float, typer.Option(
        "--val-frac", help="Share of the training part, at its end, held out to score the "
        "members; they train on the jobs before it.")] = 0.2,
    val_windows: Annotated[int, typer.Option(
        "--val-windows", help="Validation windows, the same every round.")] = 5,
    val_window_size: Annotated[int | None, typer.Option(
        "--val-window-size", help="Jobs per validation window (default: --window-size).",
        show_default=False)] = None,
    reward: RewardOpt = "bsld",
    backfill: BackfillOpt = "none",
    window_size: WindowSizeOpt = 256,
    k: Annotated[int, typer.Option("--k", help="Waiting jobs the policy sees (the oldest).")
                 ] = 128,
    num_envs: NumEnvsOpt = None,
    train_frac: TrainFracOpt = TRAIN_FRAC,
    warm: WarmOpt = False,
    cluster: ClusterOpt = None,
    procs: ProcsOpt = None,
    procs_from: ProcsFromOpt = None,
    walltime_fallback: WalltimeFallbackOpt = None,
    compat: CompatOpt = None,
    config: Annotated[Path | None, typer.Option(
        "--config", help="JSON file of PPO / DD-PPO config fields every member starts from "
        "(see hpcpolicy.ppo.config; anneal_lr must stay false).", callback=a_file)] = None,
    backend: BackendOpt = "local",
    ray_address: RayAddressOpt = None,
    member_cpus: Annotated[float, typer.Option(
        "--member-cpus", help="With --backend ray: cores each member's trial holds (a "
        "fraction lets more members share a core; its torch threads: the whole cores, at "
        "least 1; at least --workers).")] = 1,
) -> None:
    """Tune a policy by population-based training (PBT) of PPO or DD-PPO runs.

    A population of runs trains in rounds of --interval steps. After each round every
    member's policy is scored (mean bounded slowdown, with --backfill) on fixed windows of a
    validation part: the last --val-frac of the training part, which members do not train on.
    The worst quarter then takes over the weights and optimiser state of a random member of
    the best quarter and multiplies its learning rate, entropy and clip coefficients by 0.8
    or 1.25. The test part (after --train-frac) stays unseen for `hpcpolicy evaluate`.

    Writes tune.json and tune.csv (scores, hyperparameters, who copied whom), members/m0..
    (ordinary run directories) and, at the end, the best member's policy/ into the tune
    directory. --seed reproduces the whole tune; Ctrl-C stops it with a resumable state
    (continue with --resume).

    --backend ray runs the members side by side as trials of Ray Tune's PBT scheduler (the
    cluster extra): on a Ray started here, or on the cluster at --ray-address. On Slurm,
    `ray start --head --port 6379 --block` on the first node and `ray start --address
    HEAD:6379 --block` on the others, then --ray-address HEAD:6379; the tune directory must be
    on a shared file system (docs/guides/clusters.md). --backend local (the default) needs no
    Ray and is bit-reproducible.

    Examples:

        hpcpolicy tune jobs.parquet --population 4 --steps 200000 --interval 20000 -o runs/tune-a

        hpcpolicy tune jobs.parquet --algo ddppo --workers 2 --backfill easy -o runs/tune-b

        hpcpolicy tune jobs.parquet --backend ray --ray-address node01:6379 -o runs/tune-c
    """
    from hpcpolicy.ray_support import check_backend, import_ray

    with fail_cleanly():  # the extra named first, before modules that need Ray or [rl]
        check_backend(backend, ray_address)
        if backend == "ray":
            import_ray()
    from hpcpolicy.compat import compat_preset
    from hpcpolicy.env import EnvConfig
    from hpcpolicy.env.factory import env_kwargs
    from hpcpolicy.env.scheduling import EPISODE_METRICS
    from hpcpolicy.errors import ConfigError
    from hpcpolicy.learn.runs import default_run_name
    from hpcpolicy.tune import TuneConfig

    with fail_cleanly():
        note_first_compile()
        cfg = TuneConfig(population=population, total_steps=steps, interval=interval,
                         seed=seed, workers=workers, val_frac=val_frac, val_windows=val_windows,
                         val_window_size=window_size if val_window_size is None
                         else val_window_size)
        base = _base_config(algo, config, {"num_envs": num_envs,
                                           "episode_metric_names": list(EPISODE_METRICS)})
        if resume and out is None:
            raise ConfigError("--resume needs --out: the tune directory to continue")
        if not table.is_file():
            raise ConfigError(f"{table}: no such file")
        run = out if out is not None else Path("runs") / default_run_name(algo, seed, "tune")
        env_cfg = EnvConfig(k=k, window_size=window_size, reward=reward, backfill=backfill,
                            split="train", train_frac=train_frac, warm=warm, compat=compat,
                            exclusive_nodes=compat_preset(compat).exclusive_nodes)
        env = env_kwargs(table, env_cfg, world_spec(cluster, procs, compat=compat,
                         procs_from=procs_from, walltime_fallback=walltime_fallback))
        if not is_quiet():
            console.print(plain(f"{table}: tune of {population} {algo} members, {steps:,} "
                                f"steps each in {cfg.rounds} round(s); {run}"), soft_wrap=True)
        result = _run(cfg, base, env, run, resume, (backend, ray_address, member_cpus))
    if is_quiet():
        console.print(plain(result.root / ("tune.json" if result.interrupted else "policy")),
                      soft_wrap=True)
        return
    _summary(result, cfg, table, backfill)
