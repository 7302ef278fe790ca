"""A Slurm world opened from files: slurm.conf, optionally a folder of sacctmgr dumps, and a
job table, as a site (or the real-Slurm comparison) has them."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from hpcpolicy.slurmconf import read_slurm_conf, with_accounting
from hpcpolicy.workload import Workload, WorkloadOptions
from hpcpolicy.world.open import open_workload
from hpcpolicy.world.slurm.build import slurm_world
from hpcpolicy.world.slurm.model import SlurmWorld

if TYPE_CHECKING:
    import polars as pl

__all__ = ["open_slurm_world"]


def open_slurm_world(slurm_conf: str | Path, table: str | Path | pl.DataFrame,
                     sacctmgr: str | Path | None = None, *, options: WorkloadOptions | None = None,
                     over_max_time: str = "reject") -> tuple[Workload, SlurmWorld]:
    """The workload of ``table`` and the world it replays in under ``slurm_conf``.

    Args:
        slurm_conf: the site's slurm.conf (its Includes are read too).
        table: a job table (``hpcpolicy ingest``'s parquet, a raw log it recognises, or a
            DataFrame of the canonical columns).
        sacctmgr: a folder with ``qos.txt`` and/or ``assoc.txt`` (``sacctmgr show qos -P``,
            ``sacctmgr show assoc -P``); None: no QOS limits, every share 1.
        options: the workload conventions (walltime fallback, processors).
        over_max_time: ``reject`` or ``cap`` a job over its partition's MaxTime.

    Raises:
        HpcPolicyError: a file cannot be read or Slurm would refuse a value (one line naming
            file:line:key), or a partition of the log is not configured.

    Example:
        >>> w, world = open_slurm_world("slurm.conf", "jobs.parquet", "sacctmgr/")  # doctest: +SKIP
        >>> replay(w, world).start[:3]                                             # doctest: +SKIP
    """
    conf = read_slurm_conf(slurm_conf)
    if sacctmgr is not None:
        conf = with_accounting(conf, sacctmgr)
    workload = open_workload(table, options)
    return workload, slurm_world(conf, workload, over_max_time=over_max_time)
