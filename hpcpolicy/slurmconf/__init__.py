"""A site's Slurm configuration: read slurm.conf and sacctmgr dumps, change it, say the change.

* :func:`read_slurm_conf` reads slurm.conf (Includes, continuations, DEFAULT lines, host
  ranges) into a typed :class:`SlurmConfig`, every value with its file and line;
  :func:`with_accounting` adds the QOS and associations of ``sacctmgr show ... -P`` dumps;
* :func:`parse_candidate` reads a change written as text (``PriorityWeightAge=5000``,
  ``partition batch MaxTime=2-0``, ``qos normal MaxJobsPerUser=50``, ``conf:new.conf`` ...)
  and :func:`apply_candidate` applies it, giving a new, checked configuration;
* :func:`change_advice` says the change in Slurm's terms: a slurm.conf diff that ``patch``
  applies, ``sacctmgr`` commands, ``scontrol reconfigure`` or a restart, and what to watch.

The replay engines read this model; nothing here needs the simulator.
"""

from __future__ import annotations

from hpcpolicy.slurmconf.advice import ChangeAdvice, change_advice, changed_keys
from hpcpolicy.slurmconf.apply import apply_candidate, apply_changes
from hpcpolicy.slurmconf.build import read_slurm_conf
from hpcpolicy.slurmconf.changes import Change, parse_candidate
from hpcpolicy.slurmconf.diff import conf_diff
from hpcpolicy.slurmconf.model import (
    Association,
    NodeGroup,
    NodeIndex,
    Partition,
    PriorityParameters,
    Qos,
    SchedulerParameters,
    Setting,
    SlurmConfig,
    Source,
)
from hpcpolicy.slurmconf.sacctmgr import read_sacctmgr_dir, with_accounting

__all__ = ["Association", "Change", "ChangeAdvice", "NodeGroup", "NodeIndex", "Partition",
           "PriorityParameters", "Qos", "SchedulerParameters", "Setting", "SlurmConfig",
           "Source", "apply_candidate", "apply_changes", "change_advice", "changed_keys",
           "conf_diff", "parse_candidate", "read_sacctmgr_dir", "read_slurm_conf",
           "with_accounting"]
