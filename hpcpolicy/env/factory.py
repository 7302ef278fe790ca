"""Environments built from a job table by name, as training workers build them.

``hpcpolicy train`` hands :data:`ENV_FACTORY` (``module:function``) and JSON-ready keyword
arguments (:func:`env_kwargs`: the table, the episode options and the
:class:`~hpcpolicy.world.open.WorldSpec`) to the trainer; each PPO environment, and each DD-PPO
worker started by torchrun or Ray, calls :func:`make_env` with them and opens the world with
:func:`~hpcpolicy.world.open.open_world` (once per process, cached, however many environments
the process runs). A site model travels inside the spec, so that no worker reads a file other
than the job table. :func:`provenance` is what the policy manifest records about the
environment and its data.

Example:
    >>> kwargs = env_kwargs("jobs.parquet", EnvConfig(window_size=128), WorldSpec(procs=256))
    >>> sorted(kwargs), kwargs["world"]["procs"]
    (['env', 'max_episode_steps', 'table', 'world'], 256)
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpcpolicy.docload import loads_json
from hpcpolicy.env.config import EnvConfig
from hpcpolicy.world.open import WorldSpec, open_world
from hpcpolicy.world.split import part_range

if TYPE_CHECKING:
    import gymnasium as gym

    from hpcpolicy.cluster import ClusterSpec
    from hpcpolicy.workload import Workload
    from hpcpolicy.world.apply import World

__all__ = ["ENV_FACTORY", "env_kwargs", "env_world", "load", "make_env", "provenance"]

ENV_FACTORY = "hpcpolicy.env.factory:make_env"
"""The ``module:function`` reference of :func:`make_env`."""


def env_kwargs(table: str | Path, env: EnvConfig, world: WorldSpec | None = None, *,
               max_episode_steps: int | None = None) -> dict[str, Any]:
    """The JSON-ready keyword arguments of :func:`make_env` (absolute paths)."""
    spec = world or WorldSpec()
    if spec.cluster is not None:
        spec = replace(spec, cluster=str(Path(spec.cluster).resolve()))
    return {"table": str(Path(table).resolve()), "env": env.to_dict(), "world": spec.to_dict(),
            "max_episode_steps": max_episode_steps}


@functools.lru_cache(maxsize=4)
def _world(table: str, spec_json: str) -> World:
    spec = WorldSpec.from_dict(loads_json(spec_json, "the env's world", "world spec"))
    return open_world(table, spec)


def _open(table: str | Path, spec: WorldSpec) -> World:
    """:func:`~hpcpolicy.world.open.open_world`, once per process for a table and spec."""
    return _world(str(table), json.dumps(spec.to_dict(), sort_keys=True))


def env_world(kwargs: Mapping[str, Any]) -> World:
    """The world the environments of :func:`make_env`'s keyword arguments ``kwargs`` replay
    in (opened once per process)."""
    return _open(kwargs["table"], WorldSpec.from_dict(kwargs.get("world") or {}))


def load(table: str | Path, workload: dict[str, Any] | None = None, cluster: str | None = None,
         procs: int | None = None) -> tuple[Workload, ClusterSpec]:
    """The workload and machine of a job table, without a site model (opened once per
    process, then cached).

    Args:
        table: The job table (``jobs.parquet``).
        workload: :class:`~hpcpolicy.workload.WorkloadOptions` as a dict; None for defaults.
        cluster: A cluster spec file; excludes ``procs``.
        procs: A homogeneous machine of this many processors; default: the log's header.

    Raises:
        HpcPolicyError: What :func:`~hpcpolicy.world.open.open_world` raises.
    """
    world = _open(table, WorldSpec.from_dict({"workload": workload, "cluster": cluster,
                                              "procs": procs}))
    return world.workload, world.cluster


def make_env(table: str, env: dict[str, Any] | None = None,
             world: dict[str, Any] | None = None,
             max_episode_steps: int | None = None) -> gym.Env[Any, Any]:
    """One :class:`~hpcpolicy.env.scheduling.SchedulingEnv` on a job table.

    Args:
        table: The job table.
        env: :class:`EnvConfig` as a dict (:meth:`EnvConfig.to_dict`); None for defaults.
        world: :class:`~hpcpolicy.world.open.WorldSpec` as a dict (machine, workload options,
            site model); None for defaults. ``env`` carries the replay options a site model
            sets (:meth:`hpcpolicy.world.apply.World.env_options`).
        max_episode_steps: Wrap the environment in ``TimeLimit`` (truncation) if given.
    """
    import gymnasium as gym

    from hpcpolicy.env.scheduling import SchedulingEnv

    opened = env_world({"table": table, "world": world})
    instance: gym.Env[Any, Any] = SchedulingEnv(opened.workload, opened.cluster,
                                                EnvConfig.from_dict(env or {}))
    if max_episode_steps is not None:
        instance = gym.wrappers.TimeLimit(instance, max_episode_steps=max_episode_steps)
    return instance


def provenance(table: str | Path, env: EnvConfig, workload: Workload,
               cluster: ClusterSpec) -> dict[str, Any]:
    """What a policy's manifest records about its training environment.

    ``reward`` and ``training_data`` (path and SHA-256 of the job table) fill the manifest's
    fields of those names; ``environment``, ``workload_options``, ``cluster`` and ``split``
    (the job range and submit times of the part episodes were drawn from) go under
    ``provenance``.
    """
    from hpcpolicy.atomic import file_sha256

    lo, hi = part_range(len(workload), env.split, env.train_frac)
    return {
        "reward": env.reward,
        "training_data": {"path": str(table), "sha256": file_sha256(table)},
        "environment": env.to_dict(),
        "workload_options": workload.options.to_dict() if workload.options else None,
        "cluster": {"name": cluster.name, "source": cluster.source,
                    "cores": cluster.total_cores, "nodes": cluster.total_nodes,
                    "gpus": cluster.total_gpus},
        "split": {"part": env.split, "train_frac": env.train_frac, "jobs": [lo, hi],
                  "submit_s": [int(workload.origin + workload.submit[lo]),
                               int(workload.origin + workload.submit[hi - 1])]},
    }
