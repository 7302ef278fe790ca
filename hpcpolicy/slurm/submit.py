"""Submit a scaled trace window to a real Slurm: each job sleeps for its scaled run time,
with its scaled size and time limit, at its scaled submit time.

A :class:`Plan` is a list of jobs (:class:`JobSpec`) and of admin actions on them
(:class:`Control`: cancel, requeue, release), each at a time in seconds from the start;
:func:`scale_window` builds one from a :class:`~hpcpolicy.workload.Workload`, and
:func:`submit_plan` carries it out in real time through ``sbatch``, ``scancel`` and
``scontrol``. Besides plain jobs a spec can be an array with a throttle (``0-3%2``), a
heterogeneous job (extra components), a job with dependencies, a held job, or a job that exits
non-zero.

Example:
    >>> plan = scale_window(workload, ScaleConfig(time_factor=0.01))  # doctest: +SKIP
    >>> ids = submit_plan(plan, Path("/tmp/work"))                   # doctest: +SKIP
    >>> ids["j0"]                                                     # doctest: +SKIP
    '41'
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from hpcpolicy.config import Config
from hpcpolicy.errors import ConfigError, SlurmError
from hpcpolicy.slurm.command import slurm_command

if TYPE_CHECKING:
    from hpcpolicy.workload import Workload

__all__ = ["CONTROL_VERBS", "Control", "JobSpec", "Plan", "ScaleConfig", "export_sacct",
           "scale_window", "submit_plan", "wait_finished"]

CONTROL_VERBS = ("cancel", "requeue", "release")
"""What a :class:`Control` may do to a job."""

_SCRIPT = """#!/bin/sh
# hpcpolicy scaled trace job: sleep for the scaled run time, then exit with the given code
sleep "$1"
exit "$2"
"""


@dataclass(frozen=True)
class JobSpec:
    """One ``sbatch`` submission (sizes in cores and nodes, times in seconds)."""

    name: str
    """Unique name in the plan; also the Slurm job name."""
    run_s: int
    """How long the job sleeps."""
    limit_min: int
    """Time limit in whole minutes (Slurm's unit)."""
    cpus: int
    """Tasks (one core each), ``--ntasks``."""
    nodes: int
    """Nodes, ``--nodes``."""
    partition: str
    account: str
    submit_s: float = 0.0
    """When to submit, seconds from the start of the plan."""
    exit_code: int = 0
    """The job's exit code after sleeping (non-zero: a failed job)."""
    array: str | None = None
    """``--array`` ranges with an optional throttle, e.g. ``0-3%2``."""
    after: tuple[str, ...] = ()
    """Names of earlier jobs this one depends on (``--dependency=afterok:...``)."""
    hold: bool = False
    """Submitted held (``--hold``); a ``release`` control lets it run."""
    het: tuple[tuple[int, int], ...] = ()
    """Further components of a heterogeneous job as (cpus, nodes)."""
    user: str | None = None
    """The Unix user it is submitted as (``setpriv``, so the submitter must be root); None:
    the submitter."""


@dataclass(frozen=True)
class Control:
    """An admin action on a submitted job at a given time."""

    at_s: float
    """Seconds from the start of the plan."""
    verb: str
    """One of :data:`CONTROL_VERBS` (``requeue`` waits until the job runs, at most 60 s)."""
    name: str
    """The :class:`JobSpec` name it acts on."""

    def __post_init__(self) -> None:
        if self.verb not in CONTROL_VERBS:
            raise ConfigError(f"Control.verb {self.verb!r}: use one of {', '.join(CONTROL_VERBS)}")


@dataclass(frozen=True)
class Plan:
    """Jobs and controls, each at its time."""

    jobs: tuple[JobSpec, ...]
    controls: tuple[Control, ...] = ()

    def __post_init__(self) -> None:
        names = [j.name for j in self.jobs]
        if len(set(names)) != len(names):
            raise ConfigError("Plan.jobs: job names must be unique")
        known = set(names)
        for j in self.jobs:
            if unknown := [a for a in j.after if a not in known]:
                raise ConfigError(f"Plan.jobs: {j.name} depends on unknown job {unknown[0]}")
        for c in self.controls:
            if c.name not in known:
                raise ConfigError(f"Plan.controls: {c.verb} names unknown job {c.name}")

    @property
    def span_s(self) -> float:
        """Time of the last submission or control."""
        times = [j.submit_s for j in self.jobs] + [c.at_s for c in self.controls]
        return max(times, default=0.0)


@dataclass(frozen=True)
class ScaleConfig(Config):
    """How a trace window becomes a workload for a small test cluster."""

    label: ClassVar[str] = "scale"

    time_factor: float = 0.01
    """Trace seconds -> real seconds, for run times and limits."""
    arrival_factor: float | None = None
    """Trace seconds -> real seconds for the gaps between submissions; None: time_factor."""
    arrivals_s: float | None = None
    """Spread the window's submissions over this many seconds instead (sets the factor from
    the window's own span)."""
    min_run_s: int = 1
    """Shortest scaled run (a job of the trace never sleeps less)."""
    max_run_s: int = 5
    """Longest scaled run."""
    cores_per_node: int = 16
    nodes: int = 4
    trace_procs: int = 0
    """Processors of the traced machine (sizes scale by cores / trace_procs); 0: the largest
    job of the window."""
    partitions: tuple[str, ...] = ("batch", "short")
    """Jobs go round-robin by user to these partitions."""
    short_nodes: int = 2
    """Nodes of the second partition (a job sent there fits in them)."""
    accounts: tuple[str, ...] = ("physics", "biology")
    """Jobs go to these accounts by user."""
    users: tuple[str, ...] = ()
    """Unix users the trace's users map to (trace user modulo their count; each keeps one
    account when their count is a multiple of the accounts'); empty: the submitter."""
    name_prefix: str = "j"

    def validate(self) -> None:
        self._require(self.time_factor > 0, "time_factor", "must be > 0")
        self._require(self.arrival_factor is None or self.arrival_factor >= 0,
                      "arrival_factor", "must be >= 0")
        self._require(self.arrivals_s is None or self.arrivals_s >= 0,
                      "arrivals_s", "must be >= 0")
        self._require(self.arrivals_s is None or self.arrival_factor is None, "arrivals_s",
                      "give arrivals_s or arrival_factor, not both")
        self._require(1 <= self.min_run_s <= self.max_run_s, "min_run_s",
                      "need 1 <= min_run_s <= max_run_s")
        self._at_least(1, "cores_per_node", "nodes", "short_nodes")
        self._at_least(0, "trace_procs")
        self._require(not self.users or len(self.users) % len(self.accounts) == 0, "users",
                      "give a multiple of len(accounts) users, so each keeps one account")


def scale_window(workload: Workload, cfg: ScaleConfig) -> Plan:
    """A plan of the whole ``workload`` (take a window first with ``Workload.take``).

    Run time ``run * time_factor`` clipped to [min_run_s, max_run_s]; the limit is the scaled
    requested walltime in whole minutes, raised where needed to hold the run with a minute to
    spare (limits stay above runs: no job of a scaled window times out); cores scale by
    ``cores / trace_procs`` (at least 1); nodes are the fewest that hold them; submit times
    keep their scaled gaps from the first job.
    """
    n = len(workload)
    if n == 0:
        raise ConfigError("scale_window: the workload window is empty")
    total = cfg.cores_per_node * cfg.nodes
    trace_procs = cfg.trace_procs or int(workload.procs.max())
    t0 = int(workload.submit[0])
    arrivals = cfg.time_factor if cfg.arrival_factor is None else cfg.arrival_factor
    if cfg.arrivals_s is not None:
        arrivals = cfg.arrivals_s / (int(workload.submit[-1]) - t0 or 1)
    jobs = []
    for i in range(n):
        run = int(np.clip(round(int(workload.run_time[i]) * cfg.time_factor),
                          cfg.min_run_s, cfg.max_run_s))
        limit = max(math.ceil(int(workload.req_walltime[i]) * cfg.time_factor / 60),
                    math.ceil(run / 60) + 1)
        cpus = int(np.clip(math.ceil(int(workload.procs[i]) * total / trace_procs), 1, total))
        user = int(workload.user[i])
        part = cfg.partitions[user % len(cfg.partitions)]
        if part != cfg.partitions[0]:
            cpus = min(cpus, cfg.short_nodes * cfg.cores_per_node)
        jobs.append(JobSpec(
            name=f"{cfg.name_prefix}{i}", run_s=run, limit_min=limit, cpus=cpus,
            nodes=math.ceil(cpus / cfg.cores_per_node), partition=part,
            account=cfg.accounts[user % len(cfg.accounts)],
            submit_s=(int(workload.submit[i]) - t0) * arrivals,
            user=cfg.users[user % len(cfg.users)] if cfg.users else None))
    return Plan(tuple(jobs))


@dataclass
class _Run:
    script: Path
    out_dir: Path
    env: Mapping[str, str] | None
    ids: dict[str, str] = field(default_factory=dict)


def _sbatch(run: _Run, job: JobSpec) -> str:
    args = [] if job.user is None else ["setpriv", f"--reuid={job.user}",
                                        f"--regid={job.user}", "--clear-groups"]
    args += ["sbatch", "--parsable", f"--job-name={job.name}", f"--partition={job.partition}",
            f"--account={job.account}", f"--output={run.out_dir}/%x-%j.out"]
    if job.array:
        args.append(f"--array={job.array}")
    if job.after:
        args.append("--dependency=afterok:" + ":".join(run.ids[a] for a in job.after))
    if job.hold:
        args.append("--hold")
    args += [f"--ntasks={job.cpus}", f"--nodes={job.nodes}", f"--time={job.limit_min}"]
    for cpus, nodes in job.het:
        args += [":", f"--ntasks={cpus}", f"--nodes={nodes}", f"--time={job.limit_min}"]
    args += [str(run.script), str(job.run_s), str(job.exit_code)]
    out = slurm_command(args, run.env)
    return out.strip().split(";")[0]


def _control(run: _Run, c: Control) -> None:
    job_id = run.ids[c.name]
    if c.verb == "cancel":
        slurm_command(["scancel", job_id], run.env)
    elif c.verb == "release":
        slurm_command(["scontrol", "release", job_id], run.env)
    else:  # once it runs; pending again, eligible after AuthInfo's cred_expire (120 s default)
        deadline = time.monotonic() + 60
        while slurm_command(["squeue", "-h", "-o", "%t", "-j", job_id], run.env).strip() != "R":
            if time.monotonic() > deadline:
                raise SlurmError(f"job {job_id} ({c.name}) did not start within 60 s of its "
                                 "requeue time; nothing to requeue")
            time.sleep(0.1)
        slurm_command(["scontrol", "requeue", job_id], run.env)


def submit_plan(plan: Plan, work_dir: Path, env: Mapping[str, str] | None = None
                ) -> dict[str, str]:
    """Carry out ``plan`` in real time; return each job name's Slurm job id (for an array or
    a heterogeneous job, its leading id).

    Args:
        plan: the jobs and controls.
        work_dir: where the job script and the jobs' output files go (must be writable; made
            writable by everyone, sticky, when a job is submitted as another user).
        env: environment for the Slurm commands (e.g. with ``SLURM_CONF``); None: this one.

    Raises:
        SlurmError: a Slurm command failed (the message names it).
    """
    work_dir.mkdir(parents=True, exist_ok=True)
    script = work_dir / "hpcpolicy-sleep.sh"
    script.write_text(_SCRIPT)
    script.chmod(0o755)
    if any(j.user is not None for j in plan.jobs):  # other users' jobs write their output here
        work_dir.chmod(0o1777)
    run = _Run(script, work_dir, env)
    events: list[tuple[float, int, JobSpec | Control]] = [
        (j.submit_s, i, j) for i, j in enumerate(plan.jobs)]
    events += [(c.at_s, len(plan.jobs) + i, c) for i, c in enumerate(plan.controls)]
    events.sort(key=lambda e: (e[0], e[1]))
    start = time.monotonic()
    for at, _, what in events:
        delay = at - (time.monotonic() - start)
        if delay > 0:
            time.sleep(delay)
        if isinstance(what, JobSpec):
            run.ids[what.name] = _sbatch(run, what)
        else:
            _control(run, what)
    return run.ids


def wait_finished(job_ids: Iterable[str], env: Mapping[str, str] | None = None,
                  timeout_s: float = 600.0, poll_s: float = 1.0) -> None:
    """Return once none of ``job_ids`` (and none of their array tasks or components) is
    pending or running.

    Raises:
        SlurmError: a Slurm command failed, or the jobs are still queued after ``timeout_s``.
    """
    ids = ",".join(job_ids)
    deadline = time.monotonic() + timeout_s
    while True:
        left = slurm_command(["squeue", "-h", "-o", "%i", "-j", ids], env).split()
        if not left:
            return
        if time.monotonic() > deadline:
            raise SlurmError(f"jobs {', '.join(left[:5])} still queued after {timeout_s:.0f} s")
        time.sleep(poll_s)


def export_sacct(job_ids: Iterable[str], out: Path, env: Mapping[str, str] | None = None) -> Path:
    """Write ``sacct --parsable2 --duplicates`` of ``job_ids`` (steps included) with the
    columns the sacct reader recommends to ``out`` (atomically); return ``out``. Times are
    printed in UTC (``TZ=UTC``), so ingest it with ``--tz UTC``, the default."""
    from hpcpolicy.atomic import write_text
    from hpcpolicy.ingest.sacct.layout import RECOMMENDED_FORMAT

    text = slurm_command(["sacct", "--parsable2", "--duplicates", "--allusers",
                          f"--format={RECOMMENDED_FORMAT}", "-j", ",".join(job_ids)],
                         {**(os.environ if env is None else env), "TZ": "UTC"})
    write_text(out, text)
    return out
