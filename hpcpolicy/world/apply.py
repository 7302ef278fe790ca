"""Put a workload, a machine and a replay configuration into a site model's world.

Elements are applied where they are exact and cheapest:

* nodes and pools change the machine (node groups; pooled partitions may use only their
  group, the others share the rest);
* outages (dated intervals of missing cores) are replayed as unplanned outages of the
  group the partitions without a pool share (:mod:`hpcpolicy.sim.capacity`);
* missing capacity the outages leave (``availability`` a < 1) runs every job 1/a times
  longer, requests included: the load of a machine with a share a of its cores, spread
  evenly over time,
  without stranding jobs as large as the whole machine (which a smaller machine would never
  start). Waits compare as they are; run times, responses and slowdowns are stretched alike
  for every policy;
* holds and the scheduler's cadence change when a job becomes visible to the scheduler: its
  submit moves to its eligible time, then up to the next scheduling tick (a workload
  transform: the simulator is unchanged, waits are still measured from the real submit with
  :attr:`World.shift`);
* whole-node allocation, running limits and backfilling are replay options
  (:class:`~hpcpolicy.sim.types.SimConfig`); the priority order is the baseline's policy.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from hpcpolicy.cluster import ClusterSpec, NodeGroup
from hpcpolicy.errors import ConfigError
from hpcpolicy.policies.settings import FairshareConfig
from hpcpolicy.sim.prepare import OTHERS
from hpcpolicy.sim.types import RunLimits, SimConfig
from hpcpolicy.workload import Workload
from hpcpolicy.world.site_model import SiteModel, engine_outages
from hpcpolicy.world.split import Split

if TYPE_CHECKING:
    import polars as pl

__all__ = ["SHARED", "World", "apply_site", "eligible_delay", "logged_delay", "site_config"]

I64 = npt.NDArray[np.int64]

SHARED = "shared"
"""Name of the node group that partitions without a pool of their own share."""


@dataclass(frozen=True)
class World:
    """A workload, its machine, the replay options and the split, under a site model or none
    (:func:`hpcpolicy.world.open.open_world` opens one from a job table)."""

    site: SiteModel | None
    """The site model applied; None: the log header's (or the spec's) machine as it is."""
    workload: Workload
    """The jobs, with submits moved by holds and cadence (re-sorted)."""
    cluster: ClusterSpec
    """The machine: node size, pools and availability applied."""
    cfg: SimConfig
    """The base replay configuration: whole nodes, running limits, pools, backfilling,
    priority weights, ``--compat`` and the allocator; a run changes only its policy (and, in
    a comparison, its backfilling or allocator)."""
    baseline_policy: str
    """The policy that replays the log as it was (the site's priority order)."""
    shift: I64
    """Per job of :attr:`workload`: how far its submit moved (add it to a replayed wait to
    measure from the real submit)."""
    order: I64
    """Per job of :attr:`workload`: its index in the workload before the site model."""
    split: Split = field(default_factory=Split)
    """The train / validation / test parts of the workload."""

    def run(self, policy: str, backfill: str | None = None,
            allocator: str | None = None) -> SimConfig:
        """The replay configuration of one run: :attr:`cfg` with ``policy`` (and
        ``backfill``, ``allocator`` when given)."""
        return replace(self.cfg, policy=policy,
                       backfill=self.cfg.backfill if backfill is None else backfill,
                       allocator=self.cfg.allocator if allocator is None else allocator)

    def env_options(self) -> dict[str, Any]:
        """The :class:`~hpcpolicy.env.config.EnvConfig` options the world sets (the RL
        environment takes replay options as its own fields)."""
        return {"exclusive_nodes": self.cfg.exclusive_nodes,
                "user_jobs": self.cfg.limits.user_jobs, "user_cores": self.cfg.limits.user_cores,
                "pools": self.cfg.pools}


def eligible_delay(table: str | Path | pl.DataFrame, workload: Workload) -> I64:
    """Seconds from submit to eligible time of each job of ``workload`` (0 where unknown).

    Raises:
        ConfigError: the table has no ``eligible_time`` column.
    """
    import polars as pl

    frame = pl.read_parquet(table) if not isinstance(table, pl.DataFrame) else table
    if "eligible_time" not in frame.columns:
        raise ConfigError("holds.use_eligible needs the job table's eligible_time column "
                          "(sacct Eligible); set it to false for this log")
    d = frame.select(pl.col("job_id").cast(pl.Utf8),
                     (pl.col("eligible_time") - pl.col("submit_time")).dt.total_seconds()
                     .fill_null(0).clip(lower_bound=0).alias("d"))
    delay = dict(zip(d["job_id"].to_list(), d["d"].to_list(), strict=True))
    ids = np.asarray(workload.job_id, dtype=object)
    return np.array([int(delay.get(str(i), 0)) for i in ids], dtype=np.int64)


def _machine(site: SiteModel, cluster: ClusterSpec, w: Workload) -> ClusterSpec:
    if site.machine_cores and (len(cluster.groups) > 1 or cluster.total_gpus):
        raise ConfigError("nodes.machine_cores resizes a machine of one node group without "
                          f"GPUs; {cluster.name} has {len(cluster.groups)} groups and "
                          f"{cluster.total_gpus} GPUs: set it to 0 and give --cluster")
    total = site.machine_cores or cluster.total_cores
    site.check_machine(total)
    k = site.cores_per_node or 0
    if k < 1 and not site.pools and total == cluster.total_cores:
        return cluster
    k = max(k, 1)
    if site.cores_per_node and total % k:
        raise ConfigError(f"nodes.cores_per_node {k} does not divide the machine's {total:,} "
                          "cores; fix the value, nodes.machine_cores or the machine "
                          "(--cluster/--procs)")
    shared = max(total - sum(p.cores for p in site.pools), k)
    groups = [NodeGroup(f"pool:{p.partition}", max(p.cores // k, 1), k) for p in site.pools]
    groups.append(NodeGroup(SHARED, max(shared // k, 1), k))
    return ClusterSpec(tuple(groups), name=f"{cluster.name} (site model)",
                       source=f"{cluster.source} + site model")


def _pools(site: SiteModel) -> tuple[tuple[str, tuple[str, ...]], ...]:
    if not site.pools:
        return ()
    return (*((p.partition, (f"pool:{p.partition}",)) for p in site.pools), (OTHERS, (SHARED,)))


def apply_site(site: SiteModel, workload: Workload, cluster: ClusterSpec,
               cfg: SimConfig | None = None, *, delay: I64 | None = None) -> World:
    """``workload``, ``cluster`` and ``cfg`` in the world ``site`` describes.

    Args:
        site: the site model.
        workload: the jobs as logged.
        cluster: the machine as the log header (or a spec) gives it.
        cfg: replay options to extend; None = the site's own backfilling and FCFS.
        delay: per job, seconds from submit to eligible (:func:`eligible_delay`); needed
            when ``site.use_eligible``.

    Raises:
        ConfigError: pools larger than the machine, a node size that does not divide it, or
            holds without eligible times.

    Example:
        >>> import numpy as np
        >>> z = np.zeros(2, dtype=np.int64)
        >>> w = Workload(job_id=np.array(["a", "b"], dtype=object), submit=np.array([0, 5]),
        ...     run_time=z + 9, req_walltime=z + 9, procs=z + 1, nodes=z, gpus=z, mem_mib=z,
        ...     user=z.astype(np.int32), partition=z.astype(np.int32), logged_start=z - 1)
        >>> world = apply_site(SiteModel(interval_s=60), w, ClusterSpec.homogeneous(4))
        >>> world.workload.submit.tolist(), world.shift.tolist()
        ([0, 60], [0, 55])
    """
    base = cfg if cfg is not None else SimConfig(backfill=site.backfill)
    seen = workload.submit.astype(np.int64)
    if site.use_eligible:
        if delay is None:
            raise ConfigError("holds.use_eligible needs the eligible times of the jobs")
        seen = seen + delay
    if site.interval_s > 0:
        seen = -(-seen // site.interval_s) * site.interval_s
    order = np.argsort(seen, kind="stable").astype(np.int64)
    moved = workload if (seen == workload.submit).all() else replace(
        workload.take(order), submit=seen[order])
    if site.availability < 1.0:
        stretch = 1.0 / site.availability
        moved = replace(moved, run_time=np.ceil(moved.run_time * stretch).astype(np.int64),
                        req_walltime=np.ceil(moved.req_walltime * stretch).astype(np.int64))
    if (seen == workload.submit).all():
        order = np.arange(len(workload), dtype=np.int64)
    shift = (seen - workload.submit)[order]
    machine = _machine(site, cluster, workload)
    sim = site_config(site, base)
    if site.outages and not sim.outages:  # dated outages, replayed as unplanned ones
        sim = replace(sim, outages=engine_outages(site.outages, workload.origin, machine,
                                                  SHARED if site.pools else ""))
    return World(site=site, workload=moved, cluster=machine,
                 cfg=sim, baseline_policy=site.priority,
                 shift=shift, order=order)


def site_config(site: SiteModel, cfg: SimConfig) -> SimConfig:
    """``cfg`` with the site's whole nodes, running limits, pools and priority weights; its
    policy and backfilling stay (a candidate changes only the policy)."""
    return replace(cfg,
                   exclusive_nodes=cfg.exclusive_nodes or site.whole_node,
                   limits=cfg.limits if cfg.limits.active
                   else RunLimits(site.user_jobs, site.user_cores),
                   pools=cfg.pools or _pools(site),
                   fairshare=FairshareConfig(half_life_s=site.half_life_s,
                                             weight_fairshare=site.weight_fairshare,
                                             weight_age=site.weight_age,
                                             weight_size=site.weight_size)
                   if site.priority == "fairshare" else cfg.fairshare)


def logged_delay(table: str | Path | pl.DataFrame, workload: Workload) -> I64 | None:
    """The eligible delays of ``workload`` when the table records eligible times, else None."""
    import polars as pl

    frame = pl.read_parquet(table) if not isinstance(table, pl.DataFrame) else table
    if "eligible_time" not in frame.columns or frame["eligible_time"].null_count() == len(frame):
        return None
    return eligible_delay(frame, workload)
