"""``hpcpolicy.train``: one entry point for the five ways the project learns a policy.

The input and ``algo`` choose the route (:mod:`hpcpolicy.training.routes`):

* ``ppo`` / ``ddppo`` on a job table: PPO in the simulator, in this process or in torchrun
  workers;
* ``cql``, ``bcq``, ``bc``, ``dqn`` on a replay dataset directory: offline RL (d3rlpy), then
  optionally PPO fine-tuning;
* ``marl`` on a job table: the two-agent job selector and GPU allocator;
* ``dqn`` on a job table with a cluster of several GPU types: online GPU-type assignment.

Each route refuses the options it does not take (:meth:`TrainOptions.refuse`), checks what the
user can fix before any work, and returns a :class:`~hpcpolicy.training.hooks.Trained`.

An online run is all of training, whoever calls it (the command, the demo, a benchmark, a
script): ``--prior auto`` is resolved on the validation part before training
(:mod:`hpcpolicy.training.prior`, which stops a run where the heuristics tie), the run exports
its snapshots, and at the end the best of them on the validation part is deployed in
``policy/`` (:mod:`hpcpolicy.training.snapshots`) and the model card with its guard is written
beside it (:mod:`hpcpolicy.training.card`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from hpcpolicy.errors import ConfigError
from hpcpolicy.training.card import model_card
from hpcpolicy.training.hooks import CARD_PHASE, Hooks, Trained, TrainProgress
from hpcpolicy.training.options import MARL, TrainOptions
from hpcpolicy.training.validation import Step

__all__ = ["train"]


def train(source: str | Path, *, algo: str = "ppo",
          config: Mapping[str, Any] | str | Path | None = None, out: str | Path | None = None,
          options: TrainOptions | None = None, hooks: Hooks | None = None) -> Trained:
    """Train a scheduling policy on a job table or a replay dataset.

    Args:
        source: A job table written by ``hpcpolicy ingest`` (online, marl, dqn with a cluster of
            GPU types) or a replay dataset directory (offline: cql, bcq, bc, dqn).
        algo: ppo, ddppo, cql, bcq, bc, dqn or marl.
        config: Algorithm config fields (:mod:`hpcpolicy.ppo.config`,
            :mod:`hpcpolicy.offline.config`, ...), as a mapping or a JSON file.
        out: The run directory; default ``runs/train__ALGO__SEED__TIMESTAMP``.
        options: Run and environment options (:class:`TrainOptions`).
        hooks: Start and progress callbacks.

    Returns:
        Where the run ended, its deployable policy and, online, its model card (``card``, as
        written to ``policy/card.json``).

    Raises:
        ConfigError: An unknown algorithm, an input of the wrong kind, an option the route does
            not take, or a config, environment or resume that does not hold.
        KeyboardInterrupt: A second Ctrl-C (the first stops after the update, with a policy).

    Example:
        >>> trained = train("jobs.parquet", algo="ppo", out="runs/small",
        ...                 options=TrainOptions(steps=20_000, backfill="easy"))  # doctest: +SKIP
        >>> trained.policy  # doctest: +SKIP
        PosixPath('runs/small/policy')
    """
    opts, hooks = options or TrainOptions(), hooks or Hooks()
    path = Path(source)
    trained = _route(path, algo, config, None if out is None else Path(out), opts, hooks)
    if trained.route != "online":
        return trained
    return replace(trained, card=model_card(trained, path, opts, _card_steps(hooks)))


def _card_steps(hooks: Hooks) -> Step | None:
    """The model card's replays reported as :class:`TrainProgress` (phase
    :data:`~hpcpolicy.training.hooks.CARD_PHASE`)."""
    report = hooks.progress
    if report is None:
        return None
    return lambda label, done, total: report(TrainProgress(CARD_PHASE, label, done, total))


def _route(path: Path, algo: str, config: Mapping[str, Any] | str | Path | None,
           run: Path | None, opts: TrainOptions, hooks: Hooks) -> Trained:
    """The training route of ``algo`` and ``path`` (:mod:`hpcpolicy.training.routes`), run."""
    from hpcpolicy.offline.config import OFFLINE_ALGOS
    from hpcpolicy.ppo.config import ALGO_CONFIGS
    from hpcpolicy.training import routes

    if opts.init_from is not None and (algo not in ALGO_CONFIGS or opts.resume):
        raise ConfigError(
            "--init-from starts a new --algo ppo or ddppo run from a policy; "
            + ("--resume continues from the run's checkpoint instead" if opts.resume else
               f"--algo {algo} does not take it (offline: --online-finetune)"))
    if algo == MARL:
        return routes.marl(path, config, run, opts, hooks)
    if algo == "dqn" and not path.is_dir():  # a job table: online, GPU types
        return routes.gpu_dqn(path, config, run, opts, hooks)
    if opts.idle_weight is not None:
        raise ConfigError("--lambda weighs idle GPU time for --algo dqn on a job table "
                          f"(GPU types); --algo {algo} does not use it")
    if opts.visible is not None:
        raise ConfigError(f"--visible chooses the jobs the two-agent selector sees (--algo "
                          f"marl); --algo {algo} shows the oldest --k")
    _check_input(path, algo)
    if algo in OFFLINE_ALGOS:
        return routes.offline(path, algo, config, run, opts, hooks)
    return routes.online(path, algo, config, run, opts, hooks)


def _check_input(source: Path, algo: str) -> None:
    """Refuse a job table for an offline algorithm, a dataset for an online one."""
    from hpcpolicy.offline.config import OFFLINE_ALGOS
    from hpcpolicy.ppo.config import ALGO_CONFIGS

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
