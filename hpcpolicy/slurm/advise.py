"""``advise``: rank a live Slurm's pending jobs with a policy and, when asked, set that order
through ``scontrol update JobId=... Priority=...``.

One pass reads the cluster (:func:`~hpcpolicy.slurm.queue.read_snapshot`), ranks the pending
jobs of the named partitions with the policy (a heuristic name or a trained policy folder,
:func:`~hpcpolicy.deploy.resolve.resolve_policy`), predicts each one's start by replaying
that order with EASY backfilling on the partitions' cores (running jobs end at their limits,
pending ones are planned at their limits: what Slurm itself knows), and lists the priority
changes. The new priorities are the jobs' own current values, sorted and handed out in the
policy's order, so the managed jobs keep their band against the other jobs of the cluster
and no value grows from pass to pass.

Safety: only pending jobs of the named partitions are touched, held jobs never (setting a
priority would release them); nothing is cancelled, held or resized; at most
``max_changes`` updates per pass; every update is appended to the audit file (JSONL) before
the next one. Nothing a cluster user types reaches scontrol or the audit: the queue is read
without user-typed fields and every pending job is confirmed by a second reading
(:mod:`hpcpolicy.slurm.queue`), so each "before" in the audit is Slurm's own priority and
each value handed out is one of them. One bad job never stops a pass: a job left out of the
snapshot is named in the audit (``skip``), a failed update is recorded (``advise_failed``,
with scontrol's message) and the pass goes on; only a want of rights, or Slurm itself
failing (unreachable, too slow), stops it.
:func:`restore` sets every job still pending back to the priority it had before advise
first changed it (Slurm's own value under priority/basic; under priority/multifactor, Slurm
stops recomputing a priority once it is set, see scontrol(1)).

Example:
    >>> cfg = AdviseConfig(policy="sjf", partitions=("batch",))  # doctest: +SKIP
    >>> result = advise_pass(cfg)                                # doctest: +SKIP
    >>> [c.command() for c in result.changes][:1]                # doctest: +SKIP
    ['scontrol update JobId=41 Priority=4294901760']
"""

from __future__ import annotations

import json
import os
import pwd
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import ClassVar

import numpy as np

from hpcpolicy.config import Config
from hpcpolicy.docload import loads_json
from hpcpolicy.errors import ConfigError, SlurmError
from hpcpolicy.slurm.command import slurm_command
from hpcpolicy.slurm.queue import Job, Skipped, Snapshot, read_snapshot
from hpcpolicy.workload import Workload

__all__ = ["AdviseConfig", "Change", "Pass", "advise_pass", "apply_changes", "audit_skipped",
           "check_rights", "plan_pass", "restore", "watch"]

_DENIED = ("access/permission denied", "permission denied", "not authorized")


@dataclass(frozen=True)
class AdviseConfig(Config):
    """What one ``advise`` run does."""

    label: ClassVar[str] = "advise"

    policy: str
    """A heuristic name (sjf, f1, fcfs, ...) or a trained policy folder."""
    partitions: tuple[str, ...] = ()
    """Partitions whose pending jobs are ranked and touched; empty: every partition."""
    apply: bool = False
    """Set the priorities (otherwise a dry run that only prints the commands)."""
    max_changes: int = 200
    """At most this many priority updates per pass (the rest wait for the next pass)."""
    audit: str | None = None
    """JSONL file every applied change is appended to (required with ``apply``)."""

    def validate(self) -> None:
        self._at_least(1, "max_changes")
        if self.apply and self.audit is None:
            raise ConfigError("--apply needs --audit FILE: every priority change is recorded "
                              "there (and --restore reads it back)")


@dataclass(frozen=True)
class Change:
    """One priority update."""

    job_id: str
    partition: str
    before: int
    after: int
    rank: int

    def command(self) -> str:
        """The scontrol command line that makes it."""
        return f"scontrol update JobId={self.job_id} Priority={self.after}"


@dataclass(frozen=True)
class Pass:
    """The outcome of one pass."""

    snapshot: Snapshot
    ranked: tuple[Job, ...]
    """Managed pending jobs, best first."""
    predicted_start: tuple[int, ...]
    """Epoch seconds, aligned with :attr:`ranked`."""
    changes: tuple[Change, ...]
    """Updates this pass makes (or would make, in a dry run), at most ``max_changes``."""
    deferred: int = 0
    """Updates left for the next pass by the rate limit."""
    held: int = 0
    """Held pending jobs left alone."""
    failed: tuple[tuple[Change, str], ...] = ()
    """Updates scontrol refused, with its message (the others were made)."""
    timings_s: dict[str, float] = field(default_factory=dict)


def _running(snap: Snapshot, partitions: tuple[str, ...]) -> list[Job]:
    """Running jobs on the nodes of ``partitions`` (of any partition sharing those nodes)."""
    if not partitions:
        return list(snap.running)
    near = {p for n in snap.nodes if set(n.partitions) & set(partitions) for p in n.partitions}
    return [j for j in snap.running if j.partition in near]


def _scores(jobs: list[Job], snap: Snapshot, policy_spec: str,
            partitions: tuple[str, ...]) -> np.ndarray:
    """One score per job, lowest first, from the policy on a workload of the pending jobs."""
    from hpcpolicy.cluster import ClusterSpec
    from hpcpolicy.deploy.resolve import resolve_policy
    from hpcpolicy.policies.base import QueueView, ScoreKernel
    from hpcpolicy.sim.types import SimConfig

    policy = resolve_policy(policy_spec)
    origin = min(j.submit for j in jobs)
    work = _workload(jobs, origin, np.array([j.submit - origin for j in jobs]))
    cores = max(snap.total_cores(partitions), 1)
    cluster = ClusterSpec.homogeneous(cores, snap.node_count(partitions) or None)
    scorer = policy.bind(work, cluster, SimConfig())
    n = len(jobs)
    free = max(cores - sum(j.cpus for j in _running(snap, partitions)), 0)
    capacity = np.array([[cores, 0, 0, max(snap.node_count(partitions), 1)]], dtype=np.int64)
    view = QueueView(now=snap.now - origin, jobs=np.arange(n, dtype=np.int64), workload=work,
                     free=np.array([[free, 0, 0, 0]], dtype=np.int64), capacity=capacity,
                     fits_now=np.array([j.cpus <= free for j in jobs]),
                     user_share=np.zeros(len(work.users) or 1))
    if isinstance(scorer, ScoreKernel):
        return scorer.scores(view)
    # a learned policy chooses one head at a time: rank by repeated choices
    order: list[int] = []
    left = np.arange(n, dtype=np.int64)
    while left.size:
        sub = QueueView(now=view.now, jobs=left, workload=work, free=view.free,
                        capacity=capacity, fits_now=view.fits_now[left],
                        user_share=view.user_share)
        pick = int(np.argmin(scorer.scores(sub)))
        order.append(int(left[pick]))
        left = np.delete(left, pick)
    scores = np.empty(n)
    scores[np.array(order)] = np.arange(n, dtype=np.float64)
    return scores


def _workload(jobs: list[Job], origin: int, submit: np.ndarray) -> Workload:
    n = len(jobs)
    users = sorted({j.user for j in jobs})
    code = {u: i for i, u in enumerate(users)}
    limit = np.array([j.limit_s for j in jobs], dtype=np.int64)
    zero = np.zeros(n, dtype=np.int64)
    return Workload(
        job_id=np.array([j.job_id for j in jobs], dtype=object), submit=submit.astype(np.int64),
        run_time=limit, req_walltime=limit, procs=np.array([j.cpus for j in jobs]),
        nodes=zero, gpus=zero, mem_mib=zero,
        user=np.array([code[j.user] for j in jobs], dtype=np.int32),
        partition=np.zeros(n, dtype=np.int32), logged_start=zero - 1, users=tuple(users),
        origin=origin)


def _predict(ranked: list[Job], snap: Snapshot, partitions: tuple[str, ...]) -> list[int]:
    """Predicted start (epoch s) of each ranked job: the order replayed with EASY backfilling
    on the partitions' cores, every job running to its limit."""
    from hpcpolicy.cluster import ClusterSpec
    from hpcpolicy.sim.engine import simulate
    from hpcpolicy.sim.types import RunningJobs, SimConfig

    cores = max(snap.total_cores(partitions), 1)
    n = len(ranked)
    # all submitted "now", so FCFS keeps the workload's (= the ranked) order
    work = _workload(ranked, snap.now, np.zeros(n, dtype=np.int64))
    fits = [j for j in _running(snap, partitions) if j.cpus <= cores]
    ends = np.array([max(j.start + j.limit_s - snap.now, 1) for j in fits], dtype=np.int64)
    zero = np.zeros(len(fits), dtype=np.int64)
    running = RunningJobs(procs=np.array([j.cpus for j in fits], dtype=np.int64), nodes=zero,
                          gpus=zero, end=ends, req_end=ends)
    result = simulate(work, ClusterSpec.homogeneous(cores), SimConfig(backfill="easy"),
                      running=running)
    return [snap.now + int(s) if s >= 0 else -1 for s in result.start]


def plan_pass(cfg: AdviseConfig, snap: Snapshot) -> Pass:
    """Rank ``snap``'s pending jobs and list the changes (nothing is run).

    Raises:
        ConfigError: an unknown policy, or a named partition the cluster does not have.
    """
    tic = time.perf_counter()
    known = {p for n in snap.nodes for p in n.partitions}
    if unknown := [p for p in cfg.partitions if p not in known]:
        raise ConfigError(f"--partition {unknown[0]}: no such partition (this cluster has "
                          f"{', '.join(sorted(known))})")
    mine = [j for j in snap.pending if not cfg.partitions or j.partition in cfg.partitions]
    jobs = [j for j in mine if not j.held]
    if not jobs:
        return Pass(snap, (), (), (), held=len(mine))
    scores = _scores(jobs, snap, cfg.policy, cfg.partitions)
    submits = np.array([j.submit for j in jobs], dtype=np.int64)
    order = np.lexsort((np.arange(len(jobs)), submits, scores))
    ranked = [jobs[i] for i in order]
    toc = time.perf_counter()
    starts = _predict(ranked, snap, cfg.partitions)
    # the jobs' own priorities, best first, made strictly decreasing and never 0 (a hold)
    values = sorted((j.priority for j in ranked), reverse=True)
    for i in range(1, len(values)):
        values[i] = min(values[i], values[i - 1] - 1)
    floor = 1 - values[-1] if values[-1] < 1 else 0
    changes = [Change(j.job_id, j.partition, j.priority, v + floor, r)
               for r, (j, v) in enumerate(zip(ranked, values, strict=True))
               if j.priority != v + floor]
    return Pass(snap, tuple(ranked), tuple(starts), tuple(changes[:cfg.max_changes]),
                deferred=max(len(changes) - cfg.max_changes, 0), held=len(mine) - len(jobs),
                timings_s={"rank": toc - tic, "predict": time.perf_counter() - toc})


def _audit(cfg: AdviseConfig, action: str, job_id: str | None, **fields: object) -> None:
    assert cfg.audit is not None
    record = {"time": datetime.now(UTC).isoformat(timespec="seconds"), "action": action,
              "policy": cfg.policy, "job_id": job_id, **fields}
    with Path(cfg.audit).open("a", encoding="utf-8") as f:
        f.write(json.dumps(record, sort_keys=True) + "\n")
        f.flush()


def _update(job_id: str, priority: int, env: Mapping[str, str] | None) -> str | None:
    """Set one priority; scontrol's message when it refuses this job, None when done.

    Raises:
        SlurmError: no permission at all (every update would fail), or Slurm unreachable
            (or too slow to answer).
    """
    try:
        slurm_command(["scontrol", "update", f"JobId={job_id}", f"Priority={priority}"], env)
    except SlurmError as exc:
        text = str(exc)
        if any(mark in text.lower() for mark in _DENIED):
            raise _no_permission(f"scontrol update JobId={job_id} was refused") from None
        if "` failed (exit " not in text:  # unreachable, timed out, not installed: not the job
            raise
        return text
    return None


def apply_changes(changes: tuple[Change, ...], cfg: AdviseConfig,
                  env: Mapping[str, str] | None = None,
                  action: str = "advise") -> list[tuple[Change, str]]:
    """Make ``changes`` with scontrol, appending each to the audit file, and return the ones
    scontrol refused (e.g. a job held or ended since the snapshot) with its message; those
    are audited as ``<action>_failed`` and the others are made all the same.

    Raises:
        SlurmError: no permission (at the first change: nothing is made), or Slurm
            unreachable.
    """
    failed = []
    for c in changes:
        fields = {"partition": c.partition, "rank": c.rank, "before": c.before,
                  "after": c.after}
        if (error := _update(c.job_id, c.after, env)) is None:
            _audit(cfg, action, c.job_id, **fields)
        else:
            _audit(cfg, f"{action}_failed", c.job_id, error=error, **fields)
            failed.append((c, error))
    return failed


def audit_skipped(cfg: AdviseConfig, skipped: tuple[Skipped, ...]) -> None:
    """Name each job (or line) a pass left out in the audit file, with why (``skip``)."""
    for s in skipped:
        _audit(cfg, "skip", s.job_id, why=s.why)


def _no_permission(why: str) -> SlurmError:
    return SlurmError(f"advise --apply: no permission to set job priorities ({why}); run it as "
                      "root, SlurmUser or a Slurm operator (sacctmgr modify user NAME set "
                      "adminlevel=operator)")


def check_rights(env: Mapping[str, str] | None = None) -> None:
    """Refuse at once unless this user may set any job's priority: root, the SlurmUser, or
    a Slurm operator or administrator.

    Raises:
        SlurmError: none of these (one line), or Slurm unreachable.
    """
    if os.geteuid() == 0:
        return
    user = pwd.getpwuid(os.geteuid()).pw_name
    config = slurm_command(["scontrol", "show", "config"], env)
    for line in config.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "SlurmUser" and value.strip().split("(")[0] == user:
            return
    level = slurm_command(["sacctmgr", "-n", "-P", "show", "user", user, "format=adminlevel"],
                         env).strip()
    if level not in ("Operator", "Administrator"):
        raise _no_permission(f"user {user} is not root, SlurmUser or an operator")


def advise_pass(cfg: AdviseConfig, env: Mapping[str, str] | None = None) -> Pass:
    """Read the cluster, rank, and (with ``cfg.apply``) set the priorities.

    Raises:
        SlurmError: Slurm unreachable, output advise cannot read, or no permission to update.
        ConfigError: unknown policy or partition.
    """
    tic = time.perf_counter()
    if cfg.apply:
        check_rights(env)
    snap = read_snapshot(env)
    read_s = time.perf_counter() - tic
    result = plan_pass(cfg, snap)
    result.timings_s["read"] = read_s
    if cfg.apply:
        audit_skipped(cfg, snap.skipped)
        result = replace(result, failed=tuple(apply_changes(result.changes, cfg, env)))
    result.timings_s["total"] = time.perf_counter() - tic
    return result


def watch(cfg: AdviseConfig, every_s: float, report: Callable[[Pass | SlurmError], None],
          env: Mapping[str, str] | None = None, passes: int | None = None) -> None:
    """Run a pass every ``every_s`` seconds until Ctrl-C or SIGTERM (or ``passes`` passes).

    The signals are caught as training catches them (:class:`~hpcpolicy.learn.runs.StopOnSignal`,
    installed explicitly, so that a watch started in the background, where the shell leaves
    SIGINT ignored, or stopped by a service manager, with SIGTERM, stops all the same): the
    pass under way finishes, then the function returns; a second Ctrl-C does not wait. A
    pass that finds Slurm unreachable (e.g. slurmctld restarting) is reported and the watch
    goes on; a refusal (no permission) ends it.

    Raises:
        KeyboardInterrupt: a second Ctrl-C during a pass.
    """
    from hpcpolicy.learn.runs import StopOnSignal

    count = 0
    with StopOnSignal() as stop:
        while (passes is None or count < passes) and not stop.requested:
            tic = time.monotonic()
            try:
                report(advise_pass(cfg, env))
            except SlurmError as exc:
                if "no permission" in str(exc):
                    raise
                report(exc)
            count += 1
            while not stop.requested and (left := tic + every_s - time.monotonic()) > 0:
                time.sleep(min(left, 0.2))  # a signal is seen within 0.2 s


def restore(audit: Path, env: Mapping[str, str] | None = None,
            partitions: tuple[str, ...] = ()) -> tuple[list[Change], list[tuple[Change, str]]]:
    """Hand the order back to Slurm: every job of ``audit`` that is still pending (in
    ``partitions``, when named) gets the priority it had before advise first changed it.
    Each reset is appended to the audit file as ``restore`` (``restore_failed`` when
    scontrol refuses it; the others are made all the same).

    Returns:
        The resets made, and those refused with scontrol's message.

    Raises:
        ConfigError: the audit file is missing or not advise's JSONL.
        SlurmError: Slurm unreachable, or no permission.
    """
    if not audit.exists():
        raise ConfigError(f"{audit}: no such audit file; --restore reads the --audit file of "
                          "the advise --apply run it undoes")
    first: dict[str, int] = {}
    for lineno, line in enumerate(audit.read_text(encoding="utf-8").splitlines(), 1):
        rec = loads_json(line, f"{audit}:{lineno}", "advise audit record")
        try:
            if rec["action"] == "advise":
                first.setdefault(str(rec["job_id"]), int(rec["before"]))
        except (ValueError, KeyError, TypeError):
            raise ConfigError(f"{audit}:{lineno}: not an advise audit record (JSON with "
                              "action, job_id, before)") from None
    check_rights(env)
    snap = read_snapshot(env)
    changes = tuple(
        Change(j.job_id, j.partition, j.priority, first[j.job_id], -1) for j in snap.pending
        if j.job_id in first and not j.held and j.priority != first[j.job_id]
        and (not partitions or j.partition in partitions))
    cfg = AdviseConfig(policy="restore", apply=True, audit=str(audit), max_changes=10**9)
    failed = apply_changes(changes, cfg, env, action="restore")
    refused = {c.job_id for c, _ in failed}
    return [c for c in changes if c.job_id not in refused], failed
