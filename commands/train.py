"""``hpcpolicy train``: learn a scheduling policy, online from a job table or offline from a
replay dataset (:func:`hpcpolicy.train`); this module parses the options and prints."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from hpcpolicy.commands._console import (
    console,
    err_console,
    fail_cleanly,
    is_quiet,
    note_first_compile,
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
    SiteOpt,
    WalltimeFallbackOpt,
    WarmOpt,
    WindowSizeOpt,
    WorkersOpt,
    a_file,
    a_folder,
    lower_choice,
)
from hpcpolicy.commands._train_show import SUMMARIES, ProgressLine, show_card
from hpcpolicy.commands.evaluate import TrainFracOpt
from hpcpolicy.training.options import TrainOptions

if TYPE_CHECKING:
    from hpcpolicy.training import Trained, TrainStart

__all__ = ["main"]

_D = TrainOptions()
"""The library's defaults, shown as the options' defaults."""


def _train(source: Path, algo: str, config: Path | None, out: Path | None,
           options: TrainOptions) -> Trained:
    """:func:`hpcpolicy.train` with the start line and a progress line (none under --quiet).

    The first Ctrl-C stops training after the update, with a checkpoint and a policy; a second
    one stops it at once: then say what is left and exit with 130.
    """
    from hpcpolicy.training import Hooks, train

    started: list[TrainStart] = []

    def start(event: TrainStart) -> None:
        started.append(event)
        if not is_quiet():
            console.print(event.description, markup=False)

    with ProgressLine(enabled=not is_quiet()) as line:
        try:
            return train(source, algo=algo, config=config, out=out, options=options,
                         hooks=Hooks(on_start=start, progress=line.update))
        except KeyboardInterrupt:
            if not started or not started[0].resumable:
                raise
            err_console.print(f"stopped at once by a second Ctrl-C; {started[0].run} keeps its "
                              "last checkpoint: continue with the same command and --resume",
                              markup=False)
            raise typer.Exit(130) from None


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
    workers: WorkersOpt = _D.workers,
    steps: Annotated[int | None, typer.Option(
        "--steps", help="Online: environment steps (decisions), all workers together; "
        "default 1,000,000. Offline: gradient steps; default 20,000. Or --config's.")] = None,
    out: Annotated[Path | None, typer.Option(
        "--out", "-o", help="Run directory; default runs/train__ALGO__SEED__TIMESTAMP.",
        callback=a_folder)] = None,
    seed: SeedOpt = _D.seed,
    resume: Annotated[bool, typer.Option(
        "--resume", help="Continue the run in --out from its last checkpoint.")] = _D.resume,
    reward: RewardOpt = _D.reward,
    backfill: BackfillOpt = _D.backfill,
    window_size: WindowSizeOpt = _D.window_size,
    k: Annotated[int | None, typer.Option(
        "--k", help="Waiting jobs the policy sees (the oldest, or --prior's best; marl: see "
        "--visible); default "
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
        callback=lower_choice)] = _D.split,
    train_frac: TrainFracOpt = _D.train_frac,
    val_frac: Annotated[float, typer.Option(
        "--val-frac", help="ppo, ddppo: share of all jobs, just before the test part, kept "
        "out of training; the model card decides there whether the policy or the best "
        "heuristic is deployed (0: no validation, no guard).")] = _D.val_frac,
    warm: WarmOpt = _D.warm,
    prior: Annotated[str, typer.Option(
        "--prior", help="ppo, ddppo: a heuristic for the policy to start from and re-rank "
        "(a residual policy): the slots show that heuristic's best --k waiting jobs, best "
        "first, the jobs after the chosen one follow its order, and the untrained policy "
        "schedules exactly as it does. auto: the heuristic the guard would fall "
        "back to (the best on the validation part); none: the oldest --k in submit order, "
        "from scratch. "
        "Any heuristic of `hpcpolicy simulate --help` but fairshare.",
        callback=lower_choice)] = _D.prior,
    cluster: ClusterOpt = None,
    procs: ProcsOpt = None,
    procs_from: ProcsFromOpt = None,
    walltime_fallback: WalltimeFallbackOpt = None,
    compat: CompatOpt = None,
    site: SiteOpt = None,
    config: Annotated[Path | None, typer.Option(
        "--config", help="JSON file of algorithm config fields (learning_rate, num_steps, "
        "gamma, ...; see hpcpolicy.ppo.config, offline hpcpolicy.offline.config).",
        callback=a_file)] = None,
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
    force: Annotated[bool, typer.Option(
        "--force", help="Train even where the heuristics tie on the validation part and on "
        "the jobs before it (--prior auto compares them first; a tie there leaves nothing to "
        "learn, and train stops saying what to change).")] = _D.force,
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

        hpcpolicy train jobs.parquet --algo ppo --site site.toml -o runs/calibrated

        hpcpolicy train gpu.parquet --algo marl --cluster examples/gpu-partition.toml -o runs/m

        hpcpolicy train gpu.parquet --algo dqn --cluster examples/gpu-partition.toml
            --lambda 0.5 --steps 50000 -o runs/dqn-gpu
    """
    options = TrainOptions(
        steps=steps, seed=seed, workers=workers, resume=resume, reward=reward,
        backfill=backfill, window_size=window_size, k=k, visible=visible, num_envs=num_envs,
        split=split, train_frac=train_frac, val_frac=val_frac, warm=warm, prior=prior,
        cluster=cluster,
        procs=procs, procs_from=procs_from, walltime_fallback=walltime_fallback, compat=compat,
        site=site,
        finetune_steps=finetune_steps if online_finetune else None, init_from=init_from,
        idle_weight=idle_weight, force=force)
    with fail_cleanly():
        note_first_compile()
        trained = _train(table, algo, config, out, options)
    if is_quiet():
        console.print(str(trained.policy), markup=False)
        return
    SUMMARIES[trained.route](trained)
    if trained.card is not None:
        show_card(trained.card)
