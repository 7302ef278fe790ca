"""``simulate()``: replay a workload on a cluster under a policy and a backfilling mode.

The semantics (DESIGN.md, README): a job runs for its logged run time (cut at its request
under ``kill_at_limit``); planning sees only requested walltimes; at equal times finishes free
resources before submits, before the scheduling pass; ties between equally scored jobs go to
the earlier submit, then the earlier job of the workload. Times are seconds since the
workload's origin; the clock starts at the first event (the first submit, or the first end of
a job running at a warm start). No wall clock, no random numbers: the same inputs give the
same schedule on every engine and every run.

Three engines give the project's semantics identically: ``fast`` (compiled, a built-in policy
runs entirely inside compiled code), ``fast`` with a Python policy (compiled, stepped one
decision at a time, :class:`~hpcpolicy.sim.compiled.Stepper`) and ``reference`` (plain
Python, :mod:`hpcpolicy.sim.reference`). ``compat="rlscheduler"`` selects RLScheduler's
semantics instead (:mod:`hpcpolicy.sim.compat`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from hpcpolicy.cluster import ClusterSpec
from hpcpolicy.errors import ConfigError
from hpcpolicy.gpu.registry import places_on_nodes
from hpcpolicy.policies.base import Policy, ScoreKernel
from hpcpolicy.policies.heuristics import get_policy
from hpcpolicy.sim.checks import check_schedule
from hpcpolicy.sim.compiled import Stepper, run_compiled
from hpcpolicy.sim.prepare import prepare
from hpcpolicy.sim.reference import ReferenceEngine
from hpcpolicy.sim.result import assemble
from hpcpolicy.sim.types import RunningJobs, SimConfig, SimResult
from hpcpolicy.workload import Workload

__all__ = ["check_one_engine", "simulate"]

def simulate(workload: Workload, cluster: ClusterSpec, cfg: SimConfig | None = None, *,
             running: RunningJobs | None = None, policy: Policy | None = None) -> SimResult:
    """Replay ``workload`` on ``cluster``.

    Args:
        workload: the jobs, sorted by submit time.
        cluster: the machine.
        cfg: policy name, backfilling mode, engine, options; defaults to FCFS without
            backfilling on the fast engine.
        running: jobs occupying the machine at the start (warm start); None for an empty one.
        policy: a policy object (e.g. a learned one) used instead of ``cfg.policy``.

    Returns:
        Per-job start/end (-1 for jobs that never fit), flags and engine counters
        (``stats``: events, passes, decisions, started, backfilled, never_fits,
        never_fits_ids, engine, wall_s).

    Raises:
        ConfigError: bad options, an empty or inconsistent workload, an unknown policy.
        SimulationError: an invariant is violated (with ``cfg.check``).

    Example:
        >>> import numpy as np
        >>> z = np.zeros(3, dtype=np.int64)
        >>> w = Workload(job_id=np.array(["a", "b", "c"], dtype=object),
        ...     submit=np.array([0, 1, 2]), run_time=np.array([100, 100, 10]),
        ...     req_walltime=np.array([100, 100, 10]), procs=np.array([3, 2, 1]), nodes=z,
        ...     gpus=z, mem_mib=z, user=z.astype(np.int32), partition=z.astype(np.int32),
        ...     logged_start=z - 1)
        >>> r = simulate(w, ClusterSpec.homogeneous(4), SimConfig(backfill="easy"))
        >>> r.start.tolist(), r.backfilled.tolist()
        ([0, 100, 2], [False, False, True])
    """
    cfg = cfg if cfg is not None else SimConfig()
    pol: Policy = policy if policy is not None else get_policy(cfg.policy)
    scorer = pol.bind(workload, cluster, cfg)
    bind_placer = getattr(pol, "bind_placer", None)
    if places_on_nodes(cfg.allocator) or bind_placer is not None:
        placer = bind_placer(workload, cluster) if bind_placer is not None else None
        return _simulate_gpu(workload, cluster, cfg, scorer, placer, running)
    prep = prepare(workload, cluster, cfg, running)
    tic = time.perf_counter()
    peer = cfg.preset
    if cfg.engine == "reference" and not peer.peer_engine:
        outcome = ReferenceEngine(prep, cfg, scorer, workload).run()
        name = "reference"
    elif isinstance(scorer, ScoreKernel):
        outcome = run_compiled(prep, cfg, scorer, workload.job_id)
        name = str(peer.name) if peer.peer_engine else cfg.engine
    else:
        stepper = Stepper(workload, cluster, cfg, running=running)
        while (view := stepper.next_decision()) is not None:
            stepper.decide(scorer.scores(view))
        outcome = stepper.outcome()
        name = f"{peer.name}-stepped" if peer.peer_engine else "fast-stepped"
    outcome["stats"]["wall_s"] = time.perf_counter() - tic
    result = assemble(prep, workload, outcome, name)
    if cfg.check:
        check_schedule(prep, workload, cluster, cfg, result)
    return result


def check_one_engine(runs: Sequence[tuple[str, Any, str]]) -> None:
    """Refuse to compare runs that would not all place GPUs on nodes, or all not.

    ``runs`` are (label, policy object, allocator). A policy that places GPUs itself (it has
    ``bind_placer``) or a node-level allocator runs the GPU engine, which applies GPU speeds
    and the spread penalty; the pooled ``first-fit`` does not, so the two do not compare.

    Raises:
        ConfigError: both kinds are present; the message names the pooled runs.
    """
    node = [hasattr(p, "bind_placer") or places_on_nodes(a) for _, p, a in runs]
    if any(node) and not all(node):
        pooled = ", ".join(label for (label, _, _), n in zip(runs, node, strict=True) if not n)
        raise ConfigError(f"{pooled} would run on the pooled first-fit allocator beside runs "
                          "that place GPUs on nodes (with GPU speeds and the spread penalty); "
                          "give them a node-level allocator (first-available, best-fit or "
                          "topology-aware) so that all runs are replayed alike")


def _simulate_gpu(workload: Workload, cluster: ClusterSpec, cfg: SimConfig, scorer: Any,
                  placer: Any, running: RunningJobs | None) -> SimResult:
    from hpcpolicy.sim.gpu_engine import GpuEngine

    if running is not None and len(running):
        raise ConfigError(f"allocator {cfg.allocator!r} starts from an empty machine; a warm "
                          "start needs --allocator first-fit")
    tic = time.perf_counter()
    engine = GpuEngine(workload, cluster, cfg, scorer, placer)
    outcome = engine.run()
    outcome["stats"]["wall_s"] = time.perf_counter() - tic
    result = assemble(engine.p, workload, outcome, "gpu")
    if cfg.check:
        check_schedule(engine.p, workload, cluster, cfg, result)
    return result
