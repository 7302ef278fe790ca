"""One member's round of training, shared by both backends of ``hpcpolicy tune``.

A member is an ordinary run directory (:mod:`hpcpolicy.learn.runs`) marked with
``tune_member.json``, which lets its learning rate, entropy and clip coefficients change when
it resumes. Each round continues it to the round's step budget with the hyperparameters that
population-based training chose for it, with :func:`hpcpolicy.ppo.ppo.train` in this process
or :func:`hpcpolicy.ppo.ddppo.launch` with ``workers`` torchrun processes. The serial loop
(:mod:`hpcpolicy.tune.runner`) and each Ray trial (:mod:`hpcpolicy.tune.on_ray`) call
:func:`train_round`, so a member learns the same way under either backend.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpcpolicy.atomic import write_json
from hpcpolicy.learn.runs import RunPaths, load_checkpoint, save_checkpoint
from hpcpolicy.ppo.config import DDPPOConfig, PPOConfig

__all__ = ["MemberRound", "copy_weights", "train_round"]


@dataclass(frozen=True)
class MemberRound:
    """What one member trains in one round."""

    tune_root: Path
    """The tune directory (recorded in the member's marker and its policy's provenance)."""
    run: Path
    """The member's run directory (``members/NAME``)."""
    name: str
    """The member's name (``m0`` ...)."""
    seed: int
    """The member's own seed (kept when it copies another member)."""
    hyperparameters: Mapping[str, Any]
    """Its learning rate, entropy and clip coefficients for this round."""
    round: int
    """The round (1-based)."""
    steps: int
    """Environment steps it has trained at the end of the round."""
    workers: int
    """DD-PPO worker processes (1 with PPO)."""
    validation_jobs: tuple[int, int]
    """The validation part's job indices, recorded in the policy's provenance."""


def copy_weights(source: Path, target: Path) -> None:
    """Exploit: give the run in ``target`` the model and optimiser state of the checkpoint
    ``source`` (a ``last.pt``), keeping its own config, counters, random generators and
    environments.

    Applying it twice gives the same checkpoint as once (as long as ``source`` is unchanged).
    """
    src = load_checkpoint(source)
    path = RunPaths(target).checkpoint
    save_checkpoint(path, {**load_checkpoint(path), "model": src["model"],
                           "optimizer": src["optimizer"]})


def train_round(base: PPOConfig, member: MemberRound, env: Mapping[str, Any],
                provenance: Mapping[str, Any],
                on_update: Callable[[int], None] | None = None) -> bool:
    """Train ``member`` to the end of its round; True if a signal interrupted it.

    Args:
        base: The config every member derives its own from (a DDPPOConfig trains with DD-PPO).
        member: The member, its hyperparameters and its budget for the round.
        env: Keyword arguments of :func:`hpcpolicy.env.factory.make_env` (the members' cut).
        provenance: The run's provenance (:func:`hpcpolicy.env.factory.provenance`).
        on_update: Called with the member's environment steps after each PPO update (once per
            round with DD-PPO).
    """
    cfg = dataclasses.replace(base, seed=member.seed, total_steps=member.steps,
                              **member.hyperparameters)
    run = RunPaths(member.run)
    resume = run.checkpoint.is_file()
    write_json(run.tune_member, {"tune": str(member.tune_root), "member": member.name})
    if resume:
        run.write_config(cfg)  # the hyperparameters of this round
    facts = {**provenance, "tune": {"dir": str(member.tune_root), "member": member.name,
                                    "round": member.round,
                                    "validation_jobs": list(member.validation_jobs)}}
    if isinstance(cfg, DDPPOConfig):
        from hpcpolicy.env.factory import ENV_FACTORY
        from hpcpolicy.ppo.ddppo import launch

        result = launch(cfg, ENV_FACTORY, run.root, workers=member.workers, env_kwargs=env,
                        provenance=facts, resume=resume)
        if on_update is not None:
            on_update(result.global_step)
        return result.interrupted
    from hpcpolicy.env.factory import make_env
    from hpcpolicy.ppo.ppo import train

    report = None if on_update is None else (lambda row: on_update(int(row["global_step"])))
    return train(cfg, functools.partial(make_env, **env), run.root, resume=resume,
                 provenance=facts, progress=report).interrupted
