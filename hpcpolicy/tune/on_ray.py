"""``hpcpolicy tune --backend ray``: the population as trials of Ray Tune's
``PopulationBasedTraining`` scheduler, on a local Ray or a Ray cluster.

Each member is one trial, holding ``--member-cpus`` cores. A trial continues its member's run
directory (``members/NAME``) one round at a time with the same trainer and environment as
the serial loop (:func:`hpcpolicy.tune.member.train_round`), replays the member's policy on
the validation windows, and reports its mean bounded slowdown as the metric ``val_bsld`` with a
Ray checkpoint: the member's ``last.pt`` and a note naming the member and round. Ray's PBT
runs asynchronously, as Ray runs it by default: when a member reports a round and ranks in
the bottom quantile of the latest scores, it restarts from the checkpoint of a member of the
top quantile, delivered by Ray, takes its model and optimiser state
(:func:`~hpcpolicy.tune.member.copy_weights`) and keeps its own seed, counters, rounds and
episode stream, as in the serial loop. (Synchronous PBT would stop and restart every trial
after every round, and Ray starts a new process for some of them each time, which on a small
machine costs more than the round: see BENCHMARKS.md.) A trial that Ray restarts from its own
checkpoint (a lost process) rewinds its run to that checkpoint.

The driver keeps ``tune.json`` and ``tune.csv`` exactly as the serial loop writes them: a Ray
Tune callback records each round once every member has reported it, with the exploits PBT
decided after it. Ray keeps its own experiment in ``ray/`` inside the tune directory, which
must lie on a file system every Ray node sees (a cluster's shared home or scratch).

Differences from ``--backend local``: members train side by side (as many at once as the
cluster has ``--member-cpus`` slots; a fraction of a core is allowed); exploits are decided as
each member reports, on the latest scores of the others, with Ray's own generator, so the same
``--seed`` repeats members and validation windows but not who copies whom; Ray takes
``ceil(quantile x population)`` members per quantile (the serial loop the floor, at least
one). ``--resume`` starts a new Ray session (``ray/s1`` ...) from every member's checkpoint at
the end of the last round all members completed, with that round's exploits applied.
"""

from __future__ import annotations

import math
import random
import shutil
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ray import tune as ray_tune
from ray.tune.schedulers import PopulationBasedTraining

from hpcpolicy.atomic import write_json
from hpcpolicy.config import read_json_object
from hpcpolicy.errors import ConfigError
from hpcpolicy.learn.runs import RunPaths, load_checkpoint, save_checkpoint
from hpcpolicy.learn.seeding import derive_seed
from hpcpolicy.ppo.config import PPOConfig
from hpcpolicy.tune.config import TuneConfig
from hpcpolicy.tune.member import MemberRound, copy_weights, train_round
from hpcpolicy.tune.pbt import HYPERPARAMETERS, clamp, ranking
from hpcpolicy.tune.record import TunePaths, TuneRecord
from hpcpolicy.tune.runner import RAY_DIR, Progress, TuneEvent, TuneResult, name_best, open_tune

__all__ = ["tune_on_ray"]

_RAY_STREAM = 3
"""Key of the seed of Ray PBT's generator, derived from the tune seed."""
_DISPLAYS: dict[Path, Progress] = {}
"""Progress displays of the tunes running in this driver, by tune directory: Ray pickles its
callbacks with the experiment (to restore them on resume), and a display cannot be pickled."""


@dataclass(frozen=True)
class _Setup:
    """What every trial needs, sent once through Ray's object store."""

    cfg: TuneConfig
    base: PPOConfig
    env: dict[str, Any]
    member_env: dict[str, Any]
    root: Path
    seeds: dict[str, int]
    provenance: dict[str, Any]
    member_cpus: float
    start: int
    """Rounds recorded when this session began (0 for a new tune)."""
    copies: dict[str, str]
    """Exploits of that round, member -> member it copies, applied as the session starts."""


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def _round_file(run: RunPaths, round_: int) -> Path:
    """The member's checkpoint at the end of ``round_``, kept to resume the tune from."""
    return run.checkpoint.parent / f"round_{round_:04d}.pt"


def _rewind(checkpoint: Any, name: str, run: RunPaths, setup: _Setup) -> int:
    """Put the run at the start of its next round; returns the rounds it holds.

    Within a session the state comes from a Ray checkpoint: the member's own (Ray restarted
    a lost trial) or another member's (an exploit). A session's first start takes the
    member's own end of the last recorded round, and the weights that round's exploit chose.
    """
    if checkpoint is None:
        if setup.start == 0:
            return 0
        save_checkpoint(run.checkpoint, load_checkpoint(_round_file(run, setup.start)))
        if name in setup.copies:
            source = RunPaths(TunePaths(setup.root).member(setup.copies[name]))
            copy_weights(_round_file(source, setup.start), run.root)
        return setup.start
    with checkpoint.as_directory() as folder:
        note = read_json_object(Path(folder) / "member.json")
        saved = Path(folder) / "last.pt"
        if note["member"] == name:
            save_checkpoint(run.checkpoint, load_checkpoint(saved))
        else:
            copy_weights(saved, run.root)  # the member goes on from its own round
            return _rounds_done(run, setup.cfg)
        return int(note["round"])


def _rounds_done(run: RunPaths, cfg: TuneConfig) -> int:
    """The rounds a member's own checkpoint has trained."""
    steps = int(load_checkpoint(run.checkpoint)["counters"]["global_step"])
    return max((r for r in range(1, cfg.rounds + 1) if cfg.round_steps(r) <= steps), default=0)


def _member(config: dict[str, Any], setup: _Setup) -> None:
    """One trial: the member ``config["member"]``, from its checkpoint to the last round."""
    import torch

    from hpcpolicy.env.config import EnvConfig
    from hpcpolicy.env.factory import env_world
    from hpcpolicy.tune.validation import carve

    torch.set_num_threads(max(1, int(setup.member_cpus)))
    name = config["member"]
    run = RunPaths(TunePaths(setup.root).member(name))
    done = _rewind(ray_tune.get_checkpoint(), name, run, setup)
    env = setup.env
    world = env_world(env)
    workload, cluster = world.workload, world.cluster
    validation = carve(len(workload), EnvConfig.from_dict(env["env"]), setup.cfg)
    hypers = {key: float(config[key]) for key in HYPERPARAMETERS}
    for round_ in range(done + 1, setup.cfg.rounds + 1):
        spec = MemberRound(setup.root, run.root, name, setup.seeds[name], hypers, round_,
                           setup.cfg.round_steps(round_), setup.cfg.workers, validation.jobs)
        if train_round(setup.base, spec, setup.member_env, setup.provenance):
            return  # stopped by a signal: Ray resumes it from its last checkpoint
        score = validation.score(workload, cluster, [str(run.root / "policy")])[0]
        shutil.copy2(run.checkpoint, _round_file(run, round_))
        with tempfile.TemporaryDirectory() as folder:
            shutil.copy2(run.checkpoint, Path(folder) / "last.pt")
            write_json(Path(folder) / "member.json", {"member": name, "round": round_})
            ray_tune.report({"val_bsld": score if math.isfinite(score) else math.inf,
                             "round": round_, "steps": spec.steps, "member": name,
                             "trained_with": hypers},
                            checkpoint=ray_tune.Checkpoint.from_directory(folder))


class _Initial:
    """A member's first value of one hyperparameter (Ray's ``sample_from``)."""

    def __init__(self, first: Mapping[str, Mapping[str, float]], key: str) -> None:
        self.first, self.key = first, key

    def __call__(self, config: Any) -> float:
        return float(self.first[config["member"]][self.key])


class _PBT(PopulationBasedTraining):
    """Ray's PBT, keeping each trial's member name and noting each exploit in its config."""

    def _get_new_config(self, trial: Any, trial_to_clone: Any) -> tuple[dict[str, Any], Any]:
        new, operations = super()._get_new_config(trial, trial_to_clone)
        after = {key: clamp(key, float(new[key])) for key in HYPERPARAMETERS}
        mine: dict[str, Any] = self._trial_state[trial].last_result or {}
        theirs: dict[str, Any] = self._trial_state[trial_to_clone].last_result or {}
        exploit = {"round": mine["round"], "member": trial.config["member"],
                   "copied": trial_to_clone.config["member"],
                   "member_score": _finite(mine["val_bsld"]),
                   "source_score": _finite(theirs["val_bsld"]),
                   "before": {key: trial.config[key] for key in HYPERPARAMETERS},
                   "after": after}
        return {**new, **after, "member": trial.config["member"], "exploit": exploit}, operations


class _Recorder(ray_tune.Callback):
    """Writes tune.json and tune.csv as rounds complete (in the driver)."""

    def __init__(self, root: Path, population: int) -> None:
        self.paths, self.population = TunePaths(root), population
        self.pending: dict[int, dict[str, Any]] = {}
        self.exploits: dict[int, dict[str, Any]] = {}

    def on_trial_result(self, iteration: int, trials: list[Any], trial: Any,
                        result: dict[str, Any], **info: Any) -> None:
        record = TuneRecord.load(self.paths)
        round_, name = int(result["round"]), str(result["member"])
        reports = self.pending.setdefault(round_, {})
        reports[name] = {"score": _finite(float(result["val_bsld"])), "steps": result["steps"],
                         "hyperparameters": result["trained_with"]}
        record.trained = sorted(reports)
        for other in trials:  # PBT decided before this callback; a later exploit replaces it
            exploit = other.config.get("exploit")
            if exploit is not None:
                self.exploits.setdefault(exploit["round"], {})[exploit["member"]] = exploit
        if len(reports) == self.population and round_ == len(record.rounds) + 1:
            _add_round(record, round_, reports, list(self.exploits.pop(round_, {}).values()))
            del self.pending[round_]
        record.save(self.paths)
        progress = _DISPLAYS.get(self.paths.root)
        if progress is not None:
            best = None
            if record.rounds:
                last = record.rounds[-1]
                best = (last["ranking"][0], last["scores"][last["ranking"][0]])
            total = math.ceil(record.config["total_steps"] / record.config["interval"])
            progress(TuneEvent("train", round_, total, name, int(result["steps"]), best))


def _add_round(record: TuneRecord, round_: int, reports: Mapping[str, Mapping[str, Any]],
               exploits: list[dict[str, Any]]) -> None:
    """Append a complete round to ``record``, as the serial loop records it."""
    names = record.names
    scores = [math.nan if reports[n]["score"] is None else reports[n]["score"] for n in names]
    events = sorted(exploits, key=lambda e: names.index(e["member"]))
    record.rounds.append({
        "round": round_, "steps": reports[names[0]]["steps"],
        "scores": {n: reports[n]["score"] for n in names},
        "ranking": [names[i] for i in ranking(scores)],
        "hyperparameters": {n: dict(reports[n]["hyperparameters"]) for n in names},
        "exploits": [{k: v for k, v in e.items() if k != "round"} for e in events],
        "applied": True})
    following = {e["member"]: e["after"] for e in events}
    for member in record.members:
        member["hyperparameters"] = following.get(member["name"],
                                                  reports[member["name"]]["hyperparameters"])
    record.trained = []


def _tuner(setup: _Setup, record: TuneRecord) -> Any:
    """A Ray Tuner for this session of the tune: a new Ray experiment in ``ray/sN``."""
    from ray.tune import FailureConfig, RunConfig, TuneConfig, Tuner

    trainable = ray_tune.with_resources(ray_tune.with_parameters(_member, setup=setup),
                                        {"cpu": setup.member_cpus})
    sessions = setup.root / RAY_DIR
    name = f"s{len(list(sessions.glob('s*')))}"
    first = {m["name"]: m["hyperparameters"] for m in record.members}
    space: dict[str, Any] = {"member": ray_tune.grid_search(record.names), "exploit": None,
                             **{k: ray_tune.sample_from(_Initial(first, k))
                                for k in HYPERPARAMETERS}}
    cfg = setup.cfg
    scheduler = _PBT(time_attr="round", perturbation_interval=1, quantile_fraction=cfg.quantile,
                     resample_probability=0.0, perturbation_factors=cfg.factors, synch=False,
                     hyperparam_mutations={k: ray_tune.uniform(lo, hi)
                                           for k, (lo, hi) in HYPERPARAMETERS.items()})
    run = RunConfig(name=name, storage_path=str(sessions), verbose=0,
                    stop={"round": cfg.rounds},
                    callbacks=[_Recorder(setup.root, cfg.population)],
                    failure_config=FailureConfig(max_failures=3))
    tune_cfg = TuneConfig(metric="val_bsld", mode="min", scheduler=scheduler,
                          reuse_actors=True)
    return Tuner(trainable, param_space=space, tune_config=tune_cfg, run_config=run)


def tune_on_ray(cfg: TuneConfig, base: PPOConfig, env: Mapping[str, Any],
                out_dir: str | Path, *, resume: bool = False, address: str | None = None,
                member_cpus: float = 1.0, progress: Progress | None = None) -> TuneResult:
    """Population-based training on Ray Tune; arguments and result as
    :func:`hpcpolicy.tune.tune`, plus:

    Args:
        address: A Ray cluster's address (``HOST:PORT`` of ``ray start --head``); None starts
            Ray here, on this machine's cores.
        member_cpus: Cores each member's trial holds (its torch threads).

    Raises:
        ConfigError: As :func:`~hpcpolicy.tune.tune`; no Ray cluster at ``address``; a
            member that failed more often than Ray retries it.
    """
    from hpcpolicy.ray_support import connect

    if not member_cpus > 0:
        raise ConfigError(f"--member-cpus {member_cpus}: must be > 0")
    if cfg.workers > 1 and member_cpus < cfg.workers:
        raise ConfigError(f"--member-cpus {member_cpus} is fewer than --workers {cfg.workers}: "
                          "each DD-PPO worker of a member needs a core")
    opened = open_tune(cfg, base, env, out_dir, resume=resume, backend="ray")
    root = opened.paths.root.resolve()
    record = opened.record
    (root / RAY_DIR).mkdir(exist_ok=True)
    record.save(opened.paths)
    connect(address)
    copies = {e["member"]: e["copied"] for e in record.rounds[-1]["exploits"]} \
        if record.rounds else {}
    setup = _Setup(cfg, base, dict(env), {**env, "env": opened.validation.env.to_dict()}, root,
                   {m["name"]: m["seed"] for m in record.members}, opened.provenance,
                   member_cpus, len(record.rounds), copies)
    random.seed(derive_seed(cfg.seed, _RAY_STREAM))  # Ray's PBT draws from `random`
    start = time.perf_counter()
    if progress is not None:
        _DISPLAYS[root] = progress
    try:
        results = _tuner(setup, record).fit()
    finally:
        _DISPLAYS.pop(root, None)
    record = TuneRecord.load(opened.paths)
    record.wall_time_s = opened.record.wall_time_s + time.perf_counter() - start
    if results.errors and len(record.rounds) < cfg.rounds:
        first = str(results.errors[0]).strip().splitlines()[-1]
        raise ConfigError(f"a member failed on Ray more often than it is retried ({first}); "
                          f"see the trial folders in {root / RAY_DIR}, then --resume")
    interrupted = len(record.rounds) < cfg.rounds
    if interrupted:
        record.status = "interrupted"
    else:
        name_best(record, opened.paths)
    record.save(opened.paths)
    return TuneResult(opened.paths.root, record, interrupted)
