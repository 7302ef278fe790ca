"""The Slurm world: a log replayed under a site's own Slurm configuration, compiled.

:func:`open_slurm_world` opens one from slurm.conf, a folder of sacctmgr dumps and a job
table.

:func:`slurm_world` turns a :class:`~hpcpolicy.slurmconf.SlurmConfig` (slurm.conf and,
optionally, sacctmgr dumps) and a :class:`~hpcpolicy.workload.Workload` into a
:class:`SlurmWorld` of arrays, once; :func:`replay` replays the workload in it and returns the
:class:`~hpcpolicy.sim.types.SimResult` every metric, window and what-if reads. What it models
and what it approximates: :mod:`.replay`'s docstring and docs/guides/slurm-configuration.md.

Example:
    >>> from hpcpolicy.slurmconf import read_slurm_conf, with_accounting  # doctest: +SKIP
    >>> conf = with_accounting(read_slurm_conf("slurm.conf"), "sacctmgr/")  # doctest: +SKIP
    >>> result = replay(workload, slurm_world(conf, workload))  # doctest: +SKIP
"""

from __future__ import annotations

from hpcpolicy.world.slurm.build import slurm_world
from hpcpolicy.world.slurm.files import open_slurm_world
from hpcpolicy.world.slurm.model import SlurmWorld
from hpcpolicy.world.slurm.replay import replay

__all__ = ["SlurmWorld", "open_slurm_world", "replay", "slurm_world"]
