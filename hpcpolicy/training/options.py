"""What a training run is asked for: the algorithm, its ``--config`` fields and the run options.

Light (no torch, no Polars): the command line reads its defaults from :class:`TrainOptions`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpcpolicy.docload import read_json
from hpcpolicy.errors import ConfigError
from hpcpolicy.world.protocol import TRAIN_FRAC, VAL_FRAC

if TYPE_CHECKING:
    from hpcpolicy.workload import WorkloadOptions

__all__ = ["MARL", "TrainOptions", "config_fields", "run_dir"]

MARL = "marl"
"""The two-agent scheduler (hpcpolicy.marl): a job selector and a GPU allocator."""

_FLAGS = {"idle_weight": "--lambda", "finetune_steps": "--online-finetune"}
"""Options whose command-line flag is not ``--`` and the field name with dashes."""


@dataclass(frozen=True)
class TrainOptions:
    """The run and environment options of :func:`hpcpolicy.train` (the command's flags).

    A field left at its default counts as not given: an algorithm that does not take an option
    refuses it only when it is given.

    Example:
        >>> TrainOptions(backfill="easy", k=64).given(("backfill", "reward", "k"))
        ['--backfill', '--k']
    """

    steps: int | None = None
    """Budget: environment steps (online, all workers together) or gradient steps (offline);
    default the algorithm config's."""
    seed: int = 1
    """Seed of the run (overrides the config's)."""
    workers: int = 1
    """DD-PPO worker processes (ddppo; marl with more than 1)."""
    resume: bool = False
    """Continue the run in ``out`` from its last checkpoint."""
    reward: str = "bsld"
    """Reward terms of the scheduling environment (:mod:`hpcpolicy.env.rewards`)."""
    backfill: str = "none"
    """Backfilling after each choice: none, easy or conservative."""
    window_size: int = 256
    """Consecutive jobs per training episode."""
    k: int | None = None
    """Waiting jobs the policy sees; default 128 (offline: the dataset's; marl: 32)."""
    visible: str | None = None
    """marl: which waiting jobs the selector sees (oldest, fitting, shortest, extremes)."""
    num_envs: int | None = None
    """Environments per worker; default the config's."""
    split: str = "train"
    """Part episodes come from: train (the first ``train_frac`` of the jobs) or all."""
    train_frac: float = TRAIN_FRAC
    """Share of the jobs, earliest first, in the training part."""
    val_frac: float = VAL_FRAC
    """ppo, ddppo: share of all jobs, at the end of the training part, kept out of episodes;
    the model card decides the policy's guard on it (0: no validation, no guard)."""
    prior: str = "auto"
    """ppo, ddppo: the heuristic the policy starts from and re-ranks (:mod:`hpcpolicy.env.prior`):
    ``none``, a heuristic's name, or ``auto``, the one the guard would fall back to (the best
    on the validation part: :func:`hpcpolicy.training.prior.prior_for`)."""
    force: bool = False
    """ppo, ddppo with ``--prior auto``: train even where the heuristics tie on the validation
    part and on the jobs before it (without it, such a run stops before training: there is
    nothing to learn)."""
    warm: bool = False
    """Start episodes with the jobs then running, not an empty machine."""
    cluster: Path | None = None
    """Cluster spec (TOML/JSON); default the log header's machine."""
    procs: int | None = None
    """Train on a machine of this many processors instead."""
    procs_from: str | None = None
    """Job size from requested, allocated or max processors."""
    walltime_fallback: str | None = None
    """Planning time of jobs without a requested walltime (runtime, max, error, SECONDS)."""
    compat: str | None = None
    """A peer's conventions, all at once (rlscheduler, hpcopt)."""
    site: Path | None = None
    """Online: train in the world of this site model (site.toml from ``calibrate``)."""
    finetune_steps: int | None = None
    """Offline only: then this many environment steps of PPO from the offline weights."""
    init_from: Path | None = None
    """ppo, ddppo: start the policy network from this policy directory."""
    idle_weight: float | None = None
    """dqn on a job table: weight of idle GPU time in the reward; default 1."""

    def __post_init__(self) -> None:
        for name in ("cluster", "init_from", "site"):  # a path given as text
            value = getattr(self, name)
            if value is not None and not isinstance(value, Path):
                object.__setattr__(self, name, Path(value))

    def given(self, names: tuple[str, ...]) -> list[str]:
        """The flags of the fields among ``names`` that differ from their defaults, in order."""
        defaults = {f.name: f.default for f in fields(self)}
        return [_FLAGS.get(name, "--" + name.replace("_", "-")) for name in names
                if getattr(self, name) != defaults[name]]

    def refuse(self, names: tuple[str, ...], why: str) -> None:
        """Raise when an option among ``names`` is given: ``FLAGS: why``.

        Raises:
            ConfigError: Some of them are given.
        """
        given = self.given(names)
        if given:
            raise ConfigError(f"{', '.join(given)}: {why}")

    def workload(self) -> WorkloadOptions:
        """The :class:`~hpcpolicy.workload.WorkloadOptions` these options select."""
        from hpcpolicy.workload import workload_options

        return workload_options(self.compat, self.procs_from, self.walltime_fallback)


def config_fields(config: Mapping[str, Any] | str | Path | None, algo: str) -> dict[str, Any]:
    """The algorithm config fields: ``config`` itself, or those of a ``--config`` JSON file
    ({} without one).

    Raises:
        ConfigError: The file cannot be read, or does not hold a JSON object.
    """
    if config is None:
        return {}
    if isinstance(config, Mapping):
        return dict(config)
    try:
        fields_ = read_json(config, "config file")
    except ConfigError as exc:
        raise ConfigError(f"--config {config}: cannot be read as JSON ({exc})") from None
    if not isinstance(fields_, dict):
        raise ConfigError(f"--config {config}: expected a JSON object of {algo} config fields")
    return fields_


def run_dir(out: Path | None, resume: bool, algo: str, seed: int) -> Path:
    """The run directory: ``out``, else a new name under runs/ (``resume`` needs one).

    Raises:
        ConfigError: ``resume`` without ``out``.
    """
    from hpcpolicy.learn.runs import default_run_name

    if resume and out is None:
        raise ConfigError("--resume needs --out: the run directory to continue")
    return out if out is not None else Path("runs") / default_run_name(algo, seed)
