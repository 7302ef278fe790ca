"""The Slurm world: a configuration and a log turned into flat arrays, built once.

:class:`SlurmWorld` holds everything the compiled replay (:mod:`.kernel`) reads: the nodes
and the partitions' node sets, each job's partition, QOS and association, its time limit
after ``DefaultTime``/``MaxTime``, the part of its multifactor priority that does not change
while it waits, the QOS and association limits, the association tree with its shares, and
the scheduler's parameters. It is a frozen dataclass of numpy arrays and scalars, so it
pickles and can be handed to worker processes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = ["NO_LIMIT", "SlurmWorld"]

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]
B = npt.NDArray[np.bool_]

NO_LIMIT = 0
"""A count or core limit of 0 means none (sacctmgr's empty cell, Slurm's INFINITE)."""


@dataclass(frozen=True)
class SlurmWorld:
    """A Slurm configuration applied to one workload (see :func:`~.build.slurm_world`).

    Arrays indexed by job follow the workload's job order; by partition, the workload's
    partition codes; by QOS and association, this world's own numbering (names kept in
    :attr:`qos_names` and :attr:`assoc_names`). A count or core limit of 0 is no limit.
    """

    # the machine
    node_cores: I64
    """Cores (CPUs) of each node, in slurm.conf's order."""
    part_ptr: I64
    """Partition ``p``'s nodes are ``part_nodes[part_ptr[p]:part_ptr[p + 1]]``."""
    part_nodes: I64
    """Node indices of each partition, ascending."""
    part_tier: I64
    """PriorityTier of each partition: a higher tier's jobs sort first."""
    # the jobs
    limit: I64
    """Time limit of each job in seconds: its request, else the partition's DefaultTime
    (else MaxTime); capped at MaxTime where the world caps rather than rejects."""
    run: I64
    """Run time of each job (the logged one, ended at its limit)."""
    rejected: B
    """Jobs Slurm refuses at submit whatever the state: over the partition's MaxTime or
    MaxNodes, over a QOS or association MaxWall, more cores than the partition has."""
    job_qos: I64
    """QOS of each job (index into the QOS arrays)."""
    job_assoc: I64
    """The user association each job is charged to (index into the association arrays)."""
    job_user: I64
    """User code of each job (the workload's)."""
    static_prio: F64
    """The weighted factors that do not change while a job waits: job size, partition,
    QOS and TRES (``priority_multifactor.c: _get_priority_internal``)."""
    # QOS limits (per QOS)
    qos_max_jobs_pu: I64
    """MaxJobsPerUser."""
    qos_max_submit_pu: I64
    """MaxSubmitJobsPerUser."""
    qos_grp_cpus: I64
    """GrpTRES=cpu: cores all running jobs of the QOS may hold."""
    qos_max_cpus_pu: I64
    """MaxTRESPerUser=cpu: cores one user's running jobs of the QOS may hold."""
    # the association tree (index 0 is root; parents come before their children)
    assoc_parent: I64
    """Parent of each association (-1 for root)."""
    assoc_shares: F64
    """Raw shares (Fairshare) of each association."""
    assoc_is_user: B
    """True for a user association (a leaf), False for an account."""
    assoc_max_jobs: I64
    """MaxJobs of each association (its own running jobs)."""
    assoc_max_submit: I64
    """MaxSubmit (MaxSubmitJobs) of each association (its own pending + running jobs)."""
    assoc_grp_cpus: I64
    """GrpTRES=cpu of each association: cores its whole subtree may hold."""
    # priority
    multifactor: bool
    """priority/multifactor; False is priority/basic (first submitted first)."""
    weight_age: float
    weight_fairshare: float
    max_age: int
    """PriorityMaxAge in seconds (the age factor is 1 from there on)."""
    decay_half_life: int
    """PriorityDecayHalfLife in seconds; 0 = no decay."""
    calc_period: int
    """PriorityCalcPeriod in seconds: priorities and fair share are recomputed this often."""
    fair_tree: bool
    """Fair Tree (the default since 19.05) rather than classic fair share."""
    # scheduler
    backfill: bool
    """sched/backfill; False is sched/builtin (the main pass alone)."""
    bf_interval: int
    bf_window: int
    """In seconds."""
    bf_resolution: int
    bf_max_job_test: int
    bf_max_job_user: int
    bf_continue: bool
    default_queue_depth: int
    # names, for messages and reports
    qos_names: tuple[str, ...] = ()
    assoc_names: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    """What was read, what was assumed (e.g. no association dump: every share 1)."""

    @property
    def nodes(self) -> int:
        """How many nodes the machine has."""
        return int(self.node_cores.shape[0])

    @property
    def jobs(self) -> int:
        """How many jobs the world was built for."""
        return int(self.limit.shape[0])
