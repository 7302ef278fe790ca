"""Environments built from a job table by name, as training workers build them.

``hpcpolicy train`` hands :data:`ENV_FACTORY` (``module:function``) and JSON-ready keyword
arguments (:func:`env_kwargs`) to the trainer; each PPO environment, and each DD-PPO worker
started by torchrun, calls :func:`make_env` with them. The job table is read once per process
(cached), however many environments the process runs. :func:`provenance` is what the policy
manifest records about the environment and its data.

Example:
    >>> kwargs = env_kwargs("jobs.parquet", EnvConfig(window_size=128), procs=256)
    >>> sorted(kwargs)
    ['cluster', 'env', 'max_episode_steps', 'procs', 'table', 'workload']
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpcpolicy.docload import loads_json
from hpcpolicy.env.config import EnvConfig
from hpcpolicy.world.split import part_range

if TYPE_CHECKING:
    import gymnasium as gym

    from hpcpolicy.cluster import ClusterSpec
    from hpcpolicy.workload import Workload, WorkloadOptions

__all__ = ["ENV_FACTORY", "env_kwargs", "load", "make_env", "provenance"]

ENV_FACTORY = "hpcpolicy.env.factory:make_env"
"""The ``module:function`` reference of :func:`make_env`."""


def env_kwargs(table: str | Path, env: EnvConfig, *, workload: WorkloadOptions | None = None,
               cluster: str | Path | None = None, procs: int | None = None,
               max_episode_steps: int | None = None,
               site: str | Path | None = None) -> dict[str, Any]:
    """The JSON-ready keyword arguments of :func:`make_env` (absolute paths); ``site`` only
    when a site model is given, so that runs without one record what they always did."""
    extra = {} if site is None else {"site": str(Path(site).resolve())}
    return {
        "table": str(Path(table).resolve()),
        "env": env.to_dict(),
        "workload": None if workload is None else workload.to_dict(),
        "cluster": None if cluster is None else str(Path(cluster).resolve()),
        "procs": procs,
        "max_episode_steps": max_episode_steps,
        **extra,
    }


@functools.lru_cache(maxsize=4)
def _load(table: str, workload_json: str, cluster: str | None, procs: int | None,
          site: str | None) -> tuple[Workload, ClusterSpec]:
    from hpcpolicy.cluster_io import resolve_cluster
    from hpcpolicy.workload import Workload, WorkloadOptions

    options = (WorkloadOptions.from_dict(loads_json(workload_json, "the env's workload",
                                                    "workload options"))
               if workload_json != "null" else None)
    machine = resolve_cluster(spec=cluster, procs=procs, table=table)
    jobs = Workload.from_table(table, options=options)
    if site is None:
        return jobs, machine
    from hpcpolicy.world.apply import load_world

    world = load_world(site, table, jobs, machine)
    return world.workload, world.cluster


def load(table: str | Path, workload: dict[str, Any] | None = None, cluster: str | None = None,
         procs: int | None = None, site: str | None = None) -> tuple[Workload, ClusterSpec]:
    """The workload and machine of a job table (read once per process, then cached), in the
    world of the site model ``site`` when given (its capacity, cadence and holds move the
    jobs; its nodes and pools shape the machine).

    Args:
        table: The job table (``jobs.parquet``).
        workload: :class:`~hpcpolicy.workload.WorkloadOptions` as a dict; None for defaults.
        cluster: A cluster spec file; excludes ``procs``.
        procs: A homogeneous machine of this many processors; default: the log's header.
        site: A site model (site.toml).

    Raises:
        HpcPolicyError: What :meth:`Workload.from_table`,
            :func:`~hpcpolicy.cluster_io.resolve_cluster` and the site model's reader raise.
    """
    return _load(str(table), json.dumps(workload, sort_keys=True), cluster, procs, site)


def make_env(table: str, env: dict[str, Any] | None = None,
             workload: dict[str, Any] | None = None, cluster: str | None = None,
             procs: int | None = None, max_episode_steps: int | None = None,
             site: str | None = None) -> gym.Env[Any, Any]:
    """One :class:`~hpcpolicy.env.scheduling.SchedulingEnv` on a job table.

    Args:
        table: The job table.
        env: :class:`EnvConfig` as a dict (:meth:`EnvConfig.to_dict`); None for defaults.
        workload: Workload options as a dict; None for defaults.
        cluster: A cluster spec file.
        procs: A machine of this many processors.
        max_episode_steps: Wrap the environment in ``TimeLimit`` (truncation) if given.
        site: A site model: the episodes replay in its world (``env`` carries its replay
            options, :func:`hpcpolicy.world.apply.env_options`).
    """
    import gymnasium as gym

    from hpcpolicy.env.scheduling import SchedulingEnv

    jobs, machine = load(table, workload, cluster, procs, site)
    instance: gym.Env[Any, Any] = SchedulingEnv(jobs, machine, EnvConfig.from_dict(env or {}))
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
