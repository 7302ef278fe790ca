"""Replay a workload in a :class:`~.model.SlurmWorld`: Slurm's scheduling on a log, compiled.

What is modelled (each rule read in SchedMD/slurm master; the file and function are named):

* **The machine**: cores on nodes; a job takes ``nodes`` nodes and ``procs`` cores of its
  partition's node set as ``select/cons_tres`` places them (:mod:`.placement`, the rule of
  :func:`hpcpolicy.slurm.replay.place`). A job that names no node count takes one node
  where one holds it, else cores node after node.
* **Priority**: ``priority/basic`` is first submitted first; ``priority/multifactor`` sums
  the weighted age, fair-share, job size, partition, QOS and TRES factors
  (``priority_multifactor.c: _get_priority_internal``; the formulas in :mod:`.priority` and
  :func:`~.build.static_priority`). A job's priority is set at submit and recomputed, with
  the fair-share factors, every PriorityCalcPeriod (``_decay_thread``); between those it
  does not change, as in Slurm. Jobs sort by PriorityTier first (``job_scheduler.c:
  sort_job_queue2``).
* **Limits**: at submit, MaxSubmitJobsPerUser (QOS) and MaxSubmit (association) count the
  user's pending and running jobs; a job over them is refused, as Slurm refuses it
  (``sbatch`` fails): it never starts and is counted in ``stats["rejected_at_submit"]``.
  MaxTime/MaxNodes/MaxWall and jobs larger than their partition are refused too
  (:mod:`.build`). Running limits (QOS MaxJobsPerUser, MaxTRESPerUser=cpu, GrpTRES=cpu;
  association MaxJobs, GrpTRES=cpu up the tree) hold a job back without closing its
  partition or reserving for it, as Slurm's ``acct_policy_job_runnable_*`` checks do.
* **The main pass** (``job_scheduler.c: _schedule``) on every submit and job end: at most
  ``default_queue_depth`` jobs in priority order; one that does not fit closes its
  partition's nodes to the rest of the pass.
* **Backfill** (``backfill.c: _attempt_backfill``) every ``bf_interval``: jobs in priority
  order, at most ``bf_max_job_test`` (and ``bf_max_job_user`` per user), against a per-node
  plan in which running jobs hold their cores until start + limit; a job that fits now for
  its whole limit starts, one that does not gets a reservation of whole nodes at its
  earliest start within ``bf_window``, aligned to ``bf_resolution`` (later jobs plan around
  it); a job with no start within the window gets none.

What a whole-second replay approximates, and how:

* Time is whole seconds; at one second, ends come before submissions, then the main pass,
  then backfill (on multiples of ``bf_interval``). Slurm's sub-second hand-over latencies
  (:func:`hpcpolicy.slurm.replay.start_latencies`) are not modelled: the Slurm flavour of
  :mod:`hpcpolicy.slurm.replay` with both latencies 0 gives the same starts.
* ``bf_continue`` changes nothing: a pass here takes no time, so it never releases its
  locks part-way (``bf_yield_interval``) and never needs to resume; likewise
  ``bf_max_time``. ``bf_resolution`` only aligns reservations; the plan itself is exact.
* A backfill pass is skipped when nothing changed since the last one (no end, no submit,
  no priority update): its outcome would be the same, as time passing only pushes a
  candidate's end later. A pass stops once no remaining job could start now (fewer free
  cores than the smallest remaining request); later reservations could not change it.
* Ties in priority keep submit order (Slurm breaks them by job id, also submit order).
  Fair Tree walks tied accounts one after the other rather than merging their children.
  The eligible time (age) is the submit time. Usage is billed by cores.
"""

from __future__ import annotations

import time

import numpy as np

from hpcpolicy.errors import SimulationError
from hpcpolicy.sim.types import SimResult
from hpcpolicy.workload import Workload
from hpcpolicy.world.slurm.kernel import STATS, run_world
from hpcpolicy.world.slurm.model import SlurmWorld

__all__ = ["replay"]


def _params(world: SlurmWorld, origin: int) -> tuple[np.ndarray, np.ndarray]:
    """The scalars the kernel reads (see :func:`~.kernel.run_world`)."""
    ints = np.array([int(world.multifactor), world.max_age, world.calc_period,
                     int(world.fair_tree), int(world.backfill), world.bf_interval,
                     world.bf_window, world.bf_resolution, world.bf_max_job_test,
                     world.bf_max_job_user, world.default_queue_depth, origin],
                    dtype=np.int64)
    decay = 1.0 - 0.693 / world.decay_half_life if world.decay_half_life > 0 else 1.0
    floats = np.array([world.weight_age if world.multifactor else 0.0,
                       world.weight_fairshare if world.multifactor else 0.0, decay],
                      dtype=np.float64)
    return ints, floats


def replay(workload: Workload, world: SlurmWorld) -> SimResult:
    """The starts of ``workload``'s jobs as Slurm, configured as ``world`` says, would give
    them (the rules and approximations: this module's docstring).

    Args:
        workload: the jobs (the one ``world`` was built for).
        world: :func:`~hpcpolicy.world.slurm.slurm_world`'s result.

    Returns:
        A :class:`~hpcpolicy.sim.types.SimResult`: jobs refused at submit or never started
        have start -1 and ``never_fits`` True; ``stats`` counts passes, backfilled jobs,
        refusals (``rejected``: by MaxTime, MaxNodes, MaxWall or size; ``rejected_at_submit``:
        by MaxSubmit limits) and the wall time.

    Raises:
        SimulationError: the world was built for another workload.

    Example:
        >>> result = replay(workload, slurm_world(conf, workload))  # doctest: +SKIP
        >>> result.stats["backfilled"]                              # doctest: +SKIP
    """
    if world.jobs != len(workload):
        raise SimulationError(f"slurm world: built for {world.jobs} jobs, the workload has "
                              f"{len(workload)}; build it with slurm_world(conf, workload)")
    began = time.perf_counter()
    n = len(workload)
    procs = np.asarray(workload.procs, dtype=np.int64)
    nodes = np.asarray(workload.nodes, dtype=np.int64)
    part = np.asarray(workload.partition, dtype=np.int64)
    span = np.diff(world.part_ptr)[part]
    pool = np.where(nodes > 0, nodes, np.minimum(procs, span))
    pool_ptr = np.concatenate([[0], np.cumsum(np.maximum(pool, 1))]).astype(np.int64)
    lim_q = np.stack([world.qos_max_jobs_pu, world.qos_max_submit_pu, world.qos_grp_cpus,
                      world.qos_max_cpus_pu]).astype(np.int64)
    lim_a = np.stack([world.assoc_max_jobs, world.assoc_max_submit,
                      world.assoc_grp_cpus]).astype(np.int64)
    ints, floats = _params(world, int(workload.origin))
    start = np.full(n, -1, dtype=np.int64)
    backfilled = np.zeros(n, dtype=bool)
    refused = np.zeros(n, dtype=bool)
    stats = np.zeros(len(STATS), dtype=np.int64)
    users = max(len(workload.users), int(world.job_user.max(initial=-1)) + 1, 1)
    run_world(np.asarray(workload.submit, dtype=np.int64), procs, nodes, world.limit,
              world.run, world.rejected, part, world.job_qos, world.job_user,
              world.job_assoc, world.static_prio, world.part_tier, world.node_cores,
              world.part_ptr, world.part_nodes, lim_q, lim_a, world.assoc_parent,
              world.assoc_shares, world.assoc_is_user, users, pool_ptr, ints, floats,
              start, backfilled, refused, stats)
    started = start >= 0
    counters = {name: int(v) for name, v in zip(STATS, stats, strict=True)}
    return SimResult(
        start=start, end=np.where(started, start + world.run, -1),
        never_fits=~started,
        killed=np.asarray(workload.run_time, dtype=np.int64) > world.limit,
        backfilled=backfilled,
        alloc_cores=np.where(started, procs, 0),
        stats={"engine": "slurm-world", **counters,
               "rejected": int(world.rejected.sum()),
               "wall_s": time.perf_counter() - began})
