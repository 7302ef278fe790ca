"""What the Slurm what-if tests share: a small site's slurm.conf, and the Slurm world's
replay or, while hpcpolicy.world.slurm's is a skeleton, the tiniest stand-in for it."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import pytest

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


def slurm_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Slurm world's replay as it is; while it is a skeleton, a stand-in that reads one
    knob (a job-size weight makes the queue shortest-first) on the pooled engine."""
    import hpcpolicy.world.slurm as world_slurm

    if "skeleton" not in inspect.getsource(world_slurm.replay):
        return
    from hpcpolicy.sim import simulate
    from hpcpolicy.sim.types import SimConfig
    from hpcpolicy.whatif.slurm_candidates import conf_machine

    def replay(workload: Any, world: Any) -> Any:
        policy = "sjf" if world.priority.weights.get("JobSize") else "fcfs"
        return simulate(workload, conf_machine(world), SimConfig(policy, "easy"))

    monkeypatch.setattr(world_slurm, "slurm_world", lambda conf, w: conf)
    monkeypatch.setattr(world_slurm, "replay", replay)
