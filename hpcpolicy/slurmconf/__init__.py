"""A site's Slurm configuration: read slurm.conf and sacctmgr dumps, change it, say the change.

* :func:`read_slurm_conf` reads slurm.conf (Includes, continuations, DEFAULT lines, host
  ranges) into a typed :class:`SlurmConfig`;
"""

from __future__ import annotations

from hpcpolicy.slurmconf.build import read_slurm_conf
from hpcpolicy.slurmconf.model import (
    Association,
    NodeGroup,
    Partition,
    PriorityParameters,
    Qos,
    SchedulerParameters,
    Setting,
    SlurmConfig,
    Source,
)

__all__ = ["Association", "NodeGroup", "Partition", "PriorityParameters", "Qos",
           "SchedulerParameters", "Setting", "SlurmConfig", "Source", "read_slurm_conf"]
