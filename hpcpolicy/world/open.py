"""``open_world``: a job table opened into the world it is replayed in, the one place that does.

Every command, the training environment's workers, the comparisons and the benchmarks open a
log here: the workload (:meth:`~hpcpolicy.workload.Workload.from_table` with the workload
options), the machine (``--cluster``/``--procs``/the log header, with ``--spread-penalty``),
the site model of ``--site`` applied to both, the base replay configuration (``--compat``,
backfilling, allocator, ``--kill-at-limit``, and the site model's whole nodes, running limits,
pools and priority weights; its backfilling is the site model's ``[cadence] backfill``, else
none, for the runs that name none) and the train / validation / test
:class:`~hpcpolicy.world.split.Split`.

A :class:`WorldSpec` says all of that in data: frozen, JSON-ready (:meth:`WorldSpec.to_dict`)
and picklable, so that a DD-PPO worker started by torchrun or a Ray actor opens the same world
from it, the site model travelling as its content rather than as a file to read again.

Example:
    >>> import polars as pl
    >>> from datetime import datetime, timezone
    >>> t0 = datetime(2024, 1, 1, tzinfo=timezone.utc)
    >>> table = pl.DataFrame({"job_id": ["1", "2"], "submit_time": [t0, t0],
    ...     "run_time_s": [30, 30], "req_cpus": [4, 8], "req_walltime_s": [60, 60]})
    >>> spec = WorldSpec(procs=16).with_site(SiteModel(backfill="conservative"))
    >>> world = open_world(table, spec)
    >>> len(world.workload), world.cluster.total_cores, world.cfg.backfill
    (2, 16, 'conservative')
    >>> world.split.train_frac
    0.7
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from hpcpolicy.cluster_io import resolve_cluster, with_spread_penalty
from hpcpolicy.compat import COMPAT_NAMES, compat_preset
from hpcpolicy.config import Config, choice
from hpcpolicy.sim.types import SimConfig
from hpcpolicy.workload import Workload, WorkloadOptions
from hpcpolicy.world.apply import World, apply_site, eligible_delay
from hpcpolicy.world.site_model import SiteModel
from hpcpolicy.world.site_toml import dumps, load_site, loads
from hpcpolicy.world.split import Split

if TYPE_CHECKING:
    import polars as pl


__all__ = ["WorldSpec", "open_workload", "open_world"]


@dataclass(frozen=True)
class WorldSpec(Config):
    """What a world is opened with, besides the job table: every option that shapes the
    replay of a log, whichever command gives it.

    Example:
        >>> spec = WorldSpec(procs=256, allocators=("best-fit",))
        >>> WorldSpec.from_dict(spec.to_dict()) == spec
        True
    """

    label: ClassVar[str] = "world"

    workload: WorkloadOptions | None = None
    """How the job table becomes a workload (``--compat``'s conventions, ``--procs-from``,
    ``--walltime-fallback``, ...); None: the defaults."""
    cluster: str | None = None
    """A cluster spec file (``--cluster``); excludes :attr:`procs`."""
    procs: int | None = None
    """A homogeneous machine of this many processors (``--procs``); default: the log header."""
    spread_penalty: float | None = None
    """GPU spread penalty of a node-level allocator (``--spread-penalty``); None: the spec's."""
    allocators: tuple[str, ...] = ("first-fit",)
    """Placement rules the runs compare (``--allocator``); the first is the base one's."""
    compat: str | None = choice(None, COMPAT_NAMES)
    """A peer's engine conventions (``--compat``), which also set whole-node allocation."""
    kill_at_limit: bool = False
    """End jobs at their requested walltime (``--kill-at-limit``)."""
    site: str | None = None
    """The site model (``--site``) as site.toml text (:meth:`with_site` reads the file once);
    None: no site model."""
    split: Split = field(default_factory=Split)
    """The train / validation / test parts."""

    def validate(self) -> None:
        self._at_least(1, "procs")
        self._at_least(0, "spread_penalty")
        # each name is checked where it becomes a SimConfig (the allocators' registry)
        self._require(bool(self.allocators), "allocators", "give at least one")

    def with_site(self, site: str | Path | SiteModel | None) -> WorldSpec:
        """This spec with the site model ``site``: a site.toml path (``--site``; checked and
        read here, once, its text kept as written) or a model (:func:`~hpcpolicy.world
        .site_toml.dumps`); None keeps the spec as it is.

        Raises:
            ConfigError: the file is missing or is not a site model (one line naming it).
        """
        if site is None:
            return self
        if isinstance(site, SiteModel):
            return replace(self, site=dumps(site))
        load_site(site)  # refuses a bad file in one line that names it
        return replace(self, site=Path(site).read_text(encoding="utf-8", errors="replace"))

    def site_model(self) -> SiteModel | None:
        """The site model, or None."""
        return None if self.site is None else _site(self.site)


@functools.lru_cache(maxsize=4)
def _site(text: str) -> SiteModel:
    return loads(text, "the world's site model")


def open_workload(table: str | Path | pl.DataFrame,
                  options: WorkloadOptions | None = None) -> Workload:
    """The jobs of a job table alone, as :func:`open_world` reads them: for the replays that
    build their machine from the log itself (``--compat slurm``) or check the log before
    choosing one.

    Raises:
        HpcPolicyError: what :meth:`~hpcpolicy.workload.Workload.from_table` raises.
    """
    return Workload.from_table(table, options=options)


def open_world(table: str | Path | pl.DataFrame, spec: WorldSpec | None = None, *,
               jobs: Workload | None = None) -> World:
    """The world of a job table: its workload, machine, site model, base replay configuration
    and split, as ``spec`` gives them.

    The machine is resolved first (``--cluster``, ``--procs``, else the table's header), then
    the workload read; the site model, when given, moves the jobs (holds, cadence, capacity)
    and shapes the machine and the replay options (:func:`~hpcpolicy.world.apply.apply_site`).

    Args:
        table: The job table (``jobs.parquet``, written by ``hpcpolicy ingest``), or one
            already read.
        spec: The options; None: the defaults (the log header's machine, no site model).
        jobs: The table's jobs when already read with ``spec.workload``
            (:func:`open_workload`), so that they are not read twice.

    Raises:
        HpcPolicyError: what :func:`~hpcpolicy.cluster_io.resolve_cluster`,
            :meth:`~hpcpolicy.workload.Workload.from_table` and
            :func:`~hpcpolicy.world.apply.apply_site` raise, each in one line.
    """
    spec = spec or WorldSpec()
    machine = with_spread_penalty(
        resolve_cluster(spec=spec.cluster, procs=spec.procs,
                        table=table if isinstance(table, (str, Path)) else None),
        spec.spread_penalty, spec.allocators)
    workload = jobs if jobs is not None else open_workload(table, spec.workload)
    site = spec.site_model()
    base = SimConfig(backfill=site.backfill if site else "none",
                     kill_at_limit=spec.kill_at_limit, compat=spec.compat,
                     exclusive_nodes=compat_preset(spec.compat).exclusive_nodes,
                     allocator=spec.allocators[0])
    if site is None:
        n = len(workload)
        return World(site=None, workload=workload, cluster=machine, cfg=base,
                     baseline_policy="fcfs", shift=np.zeros(n, dtype=np.int64),
                     order=np.arange(n, dtype=np.int64), split=spec.split)
    delay = eligible_delay(table, workload) if site.use_eligible else None
    return replace(apply_site(site, workload, machine, base, delay=delay), split=spec.split)
