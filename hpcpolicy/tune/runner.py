"""The tune loop: synchronous rounds of training, validation, exploit and explore.

Round ``r`` (1-based) of a population of ``P`` members:

1. every member trains until ``min(r * interval, total_steps)`` environment steps, continuing
   its own run directory with the ordinary resume machinery (:func:`hpcpolicy.ppo.ppo.train`,
   or :func:`hpcpolicy.ppo.ddppo.launch` with ``workers`` processes), with its current
   learning rate, entropy and clip coefficients (their change on resume is allowed in a tune
   member's directory, see :meth:`hpcpolicy.learn.runs.RunPaths.resumable_changes`);
2. every member's exported policy is replayed on the validation windows
   (:mod:`hpcpolicy.tune.validation`) and scored by mean bounded slowdown;
3. except after the last round, :func:`~hpcpolicy.tune.pbt.exploit_explore` decides who
   copies whom; the decisions are recorded, then each copying member's checkpoint gets the
   model and optimiser state of the member it copies (:func:`copy_weights`).

At the end the best member of the last round is named and its policy copied to ``policy/``.
Every random draw derives from the tune seed; training, scoring and decisions are
deterministic, so a tune stopped at any point (Ctrl-C, a kill) and resumed ends with the same
record and policy as one run in a single go.

Example:
    >>> from hpcpolicy.env import EnvConfig
    >>> from hpcpolicy.env.factory import env_kwargs
    >>> from hpcpolicy.ppo.config import PPOConfig
    >>> result = tune(TuneConfig(population=4, total_steps=100_000, interval=10_000),
    ...               PPOConfig(anneal_lr=False), env_kwargs("jobs.parquet", EnvConfig()),
    ...               "runs/tune-x")  # doctest: +SKIP
    >>> result.record.best["member"]  # doctest: +SKIP
    'm2'
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from hpcpolicy.errors import ConfigError
from hpcpolicy.learn.runs import RunPaths, StopOnSignal
from hpcpolicy.learn.seeding import derive_seed
from hpcpolicy.ppo.config import DDPPOConfig, PPOConfig
from hpcpolicy.tune.config import TuneConfig
from hpcpolicy.tune.member import MemberRound, copy_weights, train_round
from hpcpolicy.tune.pbt import (
    check_hyperparameters,
    exploit_explore,
    initial_hyperparameters,
    ranking,
)
from hpcpolicy.tune.record import TunePaths, TuneRecord
from hpcpolicy.tune.validation import Validation, carve

if TYPE_CHECKING:
    from hpcpolicy.cluster import ClusterSpec
    from hpcpolicy.workload import Workload

__all__ = ["RAY_DIR", "OpenedTune", "TuneEvent", "TuneResult", "name_best", "open_tune", "tune"]

_MEMBER_STREAM, _DECISION_STREAM = 0, 1
"""Keys of the seeds derived from the tune seed (validation windows use 2)."""


@dataclass(frozen=True)
class TuneEvent:
    """What the tune is doing, for a progress display."""

    phase: str
    """train (after each PPO update, or once per DD-PPO member), score, exploit or done."""
    round: int
    """The round (1-based)."""
    rounds: int
    """Rounds in all."""
    member: str | None = None
    """The member concerned, if one."""
    steps: int = 0
    """The member's environment steps so far (train)."""
    best: tuple[str, float | None] | None = None
    """Best member and its score in the last scored round."""


@dataclass(frozen=True)
class TuneResult:
    """Where a tune ended."""

    root: Path
    """The tune directory."""
    record: TuneRecord
    """Its record (tune.json)."""
    interrupted: bool
    """True when stopped by a signal before the last round (continue with --resume)."""


Progress = Callable[[TuneEvent], None]


def _check_base(cfg: TuneConfig, base: PPOConfig) -> None:
    """Refuse a base config the tune cannot run."""
    if base.anneal_lr:
        raise ConfigError("config field `anneal_lr` is true; a tune sets each member's learning "
                          "rate itself, so set it false in --config")
    if cfg.workers > 1 and not isinstance(base, DDPPOConfig):
        raise ConfigError(f"--workers {cfg.workers} needs --algo ddppo; --algo {base.algo} "
                          "trains each member in this process")
    update = base.batch_size * cfg.workers
    if cfg.interval < update:
        raise ConfigError(f"--interval {cfg.interval} is shorter than one update ({base.num_envs}"
                          f" environments x {base.num_steps} steps x {cfg.workers} worker(s) = "
                          f"{update} steps); give at least {update}")
    check_hyperparameters(base.to_dict())


def _copy_policy(source: Path, target: Path) -> None:
    """Copy a policy directory to ``target``, built beside it and renamed into place."""
    from hpcpolicy.atomic import build_dir, replace_dir

    build = build_dir(target)
    shutil.copytree(source, build, dirs_exist_ok=True)
    replace_dir(build, target)


def name_best(record: TuneRecord, paths: TunePaths) -> None:
    """Name the best member of the last round in ``record`` (status done) and copy its
    policy to ``policy/``; the caller saves the record."""
    last = record.rounds[-1]
    name = last["ranking"][0]
    _copy_policy(paths.member(name) / "policy", paths.policy)
    member = record.members[record.names.index(name)]
    record.best = {"member": name, "val_bsld": last["scores"][name], "round": last["round"],
                   "seed": member["seed"], "hyperparameters": last["hyperparameters"][name]}
    record.status = "done"


class _Tune:
    """One session of a tune: the loaded workload, the record and the member runs."""

    def __init__(self, cfg: TuneConfig, base: PPOConfig, env: Mapping[str, Any],
                 paths: TunePaths, workload: Workload, cluster: ClusterSpec,
                 validation: Validation, record: TuneRecord, progress: Progress | None) -> None:
        self.cfg, self.base, self.paths = cfg, base, paths
        self.workload, self.cluster, self.validation = workload, cluster, validation
        self.record, self.progress = record, progress
        self.member_env = {**env, "env": validation.env.to_dict()}
        self._wall_before, self._start = record.wall_time_s, time.perf_counter()

    def emit(self, phase: str, round_: int, member: str | None = None, steps: int = 0) -> None:
        if self.progress is None:
            return
        best = None
        if self.record.rounds:
            last = self.record.rounds[-1]
            best = (last["ranking"][0], last["scores"][last["ranking"][0]])
        self.progress(TuneEvent(phase, round_, self.cfg.rounds, member, steps, best))

    def save(self) -> None:
        self.record.wall_time_s = self._wall_before + time.perf_counter() - self._start
        self.record.save(self.paths)

    def train_member(self, index: int, round_: int, provenance: Mapping[str, Any]) -> bool:
        """Train member ``index`` to the end of ``round_``; True if it was interrupted."""
        member = self.record.members[index]
        name = member["name"]
        spec = MemberRound(self.paths.root, self.paths.member(name), name, member["seed"],
                           member["hyperparameters"], round_, self.cfg.round_steps(round_),
                           self.cfg.workers, self.validation.jobs)
        return train_round(self.base, spec, self.member_env, provenance,
                           lambda steps: self.emit("train", round_, name, steps))

    def score(self, round_: int) -> None:
        """Score every member, decide exploits (but after the last round) and record them."""
        names = self.record.names
        self.emit("score", round_)
        scores = self.validation.score(self.workload, self.cluster,
                                       [str(self.paths.member(n) / "policy") for n in names])
        used = [m["hyperparameters"] for m in self.record.members]
        if round_ < self.cfg.rounds:
            rng = np.random.default_rng(derive_seed(self.cfg.seed, _DECISION_STREAM, round_))
            following, events = exploit_explore(scores, used, rng, quantile=self.cfg.quantile,
                                                factors=self.cfg.factors)
        else:
            following, events = used, []
        finite = [None if np.isnan(s) else s for s in scores]
        self.record.rounds.append({
            "round": round_, "steps": self.cfg.round_steps(round_),
            "scores": dict(zip(names, finite, strict=True)),
            "ranking": [names[i] for i in ranking(scores)],
            "hyperparameters": dict(zip(names, used, strict=True)),
            "exploits": [e.to_dict(names) for e in events], "applied": not events})
        for member, hypers in zip(self.record.members, following, strict=True):
            member["hyperparameters"] = hypers
        self.record.trained = []
        self.save()

    def apply_exploits(self) -> None:
        """Copy the weights the last round's exploits decided (again, if resumed midway)."""
        last = self.record.rounds[-1]
        for event in last["exploits"]:
            self.emit("exploit", last["round"], event["member"])
            copy_weights(RunPaths(self.paths.member(event["copied"])).checkpoint,
                         self.paths.member(event["member"]))
        last["applied"] = True
        self.save()

    def finish(self) -> None:
        """Name the best member of the last round and copy its policy to ``policy/``."""
        name_best(self.record, self.paths)
        self.save()
        self.emit("done", self.record.rounds[-1]["round"])

    def run(self, provenance: Mapping[str, Any]) -> bool:
        """Continue the tune to its end; True if a signal stopped it first."""
        with StopOnSignal() as stop:
            if self.record.rounds and not self.record.rounds[-1]["applied"]:
                self.apply_exploits()
            for round_ in range(len(self.record.rounds) + 1, self.cfg.rounds + 1):
                for index, name in enumerate(self.record.names):
                    if name in self.record.trained:
                        continue
                    interrupted = self.train_member(index, round_, provenance)
                    if not interrupted:
                        self.record.trained.append(name)
                    if interrupted or stop.requested:
                        self.record.status = "interrupted"
                        self.save()
                        return True
                    self.save()
                self.score(round_)
                self.apply_exploits()
                if stop.requested and round_ < self.cfg.rounds:
                    self.record.status = "interrupted"
                    self.save()
                    return True
        self.finish()
        return False


def _new_record(cfg: TuneConfig, base: PPOConfig, env: Mapping[str, Any],
                data: dict[str, Any], validation: Validation,
                baselines: dict[str, float | None]) -> TuneRecord:
    """The record of a tune about to start: members with their seeds and hyperparameters."""
    rng = np.random.default_rng(derive_seed(cfg.seed, _DECISION_STREAM, 0))
    first = initial_hyperparameters(check_hyperparameters(base.to_dict()), cfg.population,
                                    rng, cfg.init_spread)
    members = [{"name": f"m{i}", "seed": derive_seed(cfg.seed, _MEMBER_STREAM, i),
                "hyperparameters": hypers} for i, hypers in enumerate(first)]
    return TuneRecord(config=cfg.to_dict(), base=base.to_dict(), env=dict(env), data=data,
                      validation=validation.to_dict(), baselines=baselines, members=members)


def tune(cfg: TuneConfig, base: PPOConfig, env: Mapping[str, Any], out_dir: str | Path, *,
         resume: bool = False, progress: Progress | None = None) -> TuneResult:
    """Population-based training of PPO / DD-PPO runs on a job table.

    Args:
        cfg: Population, budget, rounds, selection rule, validation windows and seed.
        base: The config every member starts from (``anneal_lr`` false; a
            :class:`~hpcpolicy.ppo.config.DDPPOConfig` trains members with DD-PPO). Each member
            gets its own seed, budget and explored hyperparameters.
        env: Keyword arguments of :func:`hpcpolicy.env.factory.make_env`
            (:func:`~hpcpolicy.env.factory.env_kwargs`), split ``train``; its ``train_frac``
            is where the test part starts, and the validation part is cut before it.
        out_dir: The tune directory (``runs/tune-NAME``).
        resume: Continue the tune in ``out_dir`` (with the same arguments).
        progress: Called with a :class:`TuneEvent` as the tune goes.

    Returns:
        The record; Ctrl-C (SIGINT) or SIGTERM stops the tune after the current PPO update
        (DD-PPO: after the current member's round), resumable with ``resume``.

    Raises:
        ConfigError: Invalid combinations, a fresh tune over an existing one, a resume with
            other arguments, or a validation part too small for its windows.
    """
    opened = open_tune(cfg, base, env, out_dir, resume=resume, backend="local")
    session = _Tune(cfg, base, env, opened.paths, opened.workload, opened.cluster,
                    opened.validation, opened.record, progress)
    interrupted = session.run(opened.provenance)
    return TuneResult(opened.paths.root, opened.record, interrupted)


@dataclass(frozen=True)
class OpenedTune:
    """A tune ready to run: its files, data, validation windows and record."""

    paths: TunePaths
    """The tune directory."""
    workload: Workload
    """The job table's jobs."""
    cluster: ClusterSpec
    """The machine."""
    validation: Validation
    """The validation part and windows."""
    provenance: dict[str, Any]
    """The members' provenance (:func:`hpcpolicy.env.factory.provenance`)."""
    record: TuneRecord
    """The record: new (and saved), or the one resumed."""


RAY_DIR = "ray"
"""Folder of a tune directory where Ray Tune keeps its experiment (``--backend ray``)."""


def open_tune(cfg: TuneConfig, base: PPOConfig, env: Mapping[str, Any], out_dir: str | Path,
              *, resume: bool, backend: str) -> OpenedTune:
    """Check the arguments, load the job table, cut the validation part and start (or load,
    to resume) the record; shared by both backends.

    Raises:
        ConfigError: As :func:`tune` says, and a resume with the other backend.
    """
    from hpcpolicy.env.config import EnvConfig
    from hpcpolicy.env.factory import env_world, provenance
    from hpcpolicy.world.split import window_range

    _check_base(cfg, base)
    paths = TunePaths(out_dir)
    if not resume and paths.record.exists():
        raise ConfigError(f"{paths.root} already holds a tune ({paths.record}); continue it with "
                          "--resume, or choose another output directory")
    saved = TuneRecord.load(paths) if resume else None
    on_ray = (paths.root / RAY_DIR).is_dir()
    if saved is not None and on_ray != (backend == "ray"):
        raise ConfigError(f"the tune in {paths.root} ran with --backend "
                          f"{'ray' if on_ray else 'local'}; resume it with that backend")
    env_cfg = EnvConfig.from_dict(env["env"])
    world = env_world(env)
    workload, cluster = world.workload, world.cluster
    validation = carve(len(workload), env_cfg, cfg)
    window_range(len(workload), "train", validation.train_frac, env_cfg.window_size)
    facts = provenance(env["table"], validation.env, workload, cluster)
    if saved is None:
        names = env_cfg.baselines
        scores = validation.score(workload, cluster, names) if names else []
        baselines = {n: None if np.isnan(s) else s for n, s in zip(names, scores, strict=True)}
        record = _new_record(cfg, base, env, facts["training_data"], validation, baselines)
        record.save(paths)
    else:
        saved.check_continues({"config": cfg.to_dict(), "base": base.to_dict(),
                               "env": dict(env), "data": facts["training_data"]}, paths.root)
        record = saved
        record.status = "running"
    return OpenedTune(paths, workload, cluster, validation, facts, record)
