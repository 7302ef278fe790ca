"""What the Slurm what-if tests share: a small site's slurm.conf."""

from __future__ import annotations

from pathlib import Path

CONF = """\
# a small test site
ClusterName=t
SlurmctldHost=head
PriorityType=priority/multifactor
PriorityWeightAge=1000   # one day's wait is worth this much
PriorityWeightJobSize=0
PriorityMaxAge=7-0
SchedulerType=sched/backfill
SchedulerParameters=bf_window=1440,bf_continue
NodeName=n[1-16] CPUs=4 State=UNKNOWN
PartitionName=batch Nodes=ALL Default=YES MaxTime=7-0 State=UP
"""


def write_conf(folder: Path) -> Path:
    """:data:`CONF` as ``folder/etc/slurm.conf``, alone in its folder."""
    path = folder / "etc" / "slurm.conf"
    path.parent.mkdir(parents=True)
    path.write_text(CONF)
    return path
