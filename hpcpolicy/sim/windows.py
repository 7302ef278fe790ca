"""Replay a workload under several configurations: whole, or in the RLScheduler windowed protocol.

The windowed protocol (Zhang et al., SC20, "RLScheduler") measures a policy on windows of
``size`` consecutive jobs rather than on a whole trace. Every configuration runs on the same
windows: random ones drawn once from ``seed``, or explicit ``starts`` (0-based job indices, as
printed in the ``--json`` output, so any run can be replayed exactly). Each window's metrics
are computed separately and then averaged over windows (:func:`hpcpolicy.sim.metrics.aggregate`).

Starts:

* **cold** (the default, RLScheduler's): the machine is empty at the window's first submit,
  where the clock starts.
* **warm**: the machine is pre-loaded with the jobs running at the window's first submit
  ``t0``. What is running is found by replaying the ``warmup_jobs`` jobs that precede the
  window on the same machine under one fixed reference schedule, FCFS with EASY backfilling
  (the same for every compared configuration, so all of them see the identical pre-load):
  a job that started before ``t0`` and ends after it is running, and keeps its cores until its
  replayed end (planning sees its requested end). Warm-up jobs still waiting at ``t0`` (the
  backlog) are left out and counted. The logged start times are not used: they may not fit
  the machine being simulated, and model traces have none. The pre-loaded jobs are not
  measured; utilisation counts only the window's own jobs.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from hpcpolicy.config import Config
from hpcpolicy.errors import ConfigError
from hpcpolicy.sim import metrics
from hpcpolicy.sim.types import RunningJobs, SimConfig, SimResult

if TYPE_CHECKING:
    import polars as pl

    from hpcpolicy.cluster import ClusterSpec
    from hpcpolicy.workload import Workload

__all__ = [
    "Replay",
    "WindowConfig",
    "WindowRun",
    "backfill_note",
    "choose_starts",
    "never_fits_note",
    "replay",
    "running_at",
    "to_document",
]

Simulate = Callable[..., SimResult]
"""``simulate(workload, cluster, cfg, *, running=None) -> SimResult`` (the engine's signature)."""

WARMUP_CONFIG = SimConfig(policy="fcfs", backfill="easy")
"""The reference schedule that decides which jobs are running at a warm window's start."""


@dataclass(frozen=True)
class WindowConfig(Config):
    """Which windows to replay, and from which machine state.

    Example:
        >>> WindowConfig(size=4, starts=(2, 0)).starts
        (2, 0)
    """

    label: ClassVar[str] = "window"

    size: int = 1024
    """Jobs per window."""
    count: int = 10
    """Number of random windows (ignored when ``starts`` is given)."""
    seed: int = 1
    """Seed of the random window starts; the same seed gives the same windows."""
    starts: tuple[int, ...] | None = None
    """Explicit 0-based index of each window's first job (in the workload's submit order)."""
    warm: bool = False
    """Pre-load the machine with the jobs running at each window's first submit."""
    warmup_jobs: int | None = None
    """Jobs before the window replayed to find what is running (warm only); default ``size``."""

    def validate(self) -> None:
        if self.size < 1:
            raise ConfigError(f"--window-size: window size must be >= 1 job, not {self.size}")
        if self.count < 1:
            raise ConfigError(f"--windows: window count must be >= 1, not {self.count}")
        if self.starts is not None:
            if not self.starts:
                raise ConfigError("window starts: give at least one index")
            bad = [s for s in self.starts if s < 0]
            if bad:
                raise ConfigError(f"window starts must be >= 0 (0-based job indices), not {bad}")
        if self.warmup_jobs is not None and self.warmup_jobs < 0:
            raise ConfigError(f"warmup_jobs must be >= 0, not {self.warmup_jobs}")

    @property
    def warmup(self) -> int:
        """Jobs replayed before a warm window."""
        return self.size if self.warmup_jobs is None else self.warmup_jobs


def choose_starts(n_jobs: int, cfg: WindowConfig) -> tuple[int, ...]:
    """Each window's first job index: ``cfg.starts`` checked, or ``cfg.count`` random ones.

    Random starts are distinct, drawn uniformly from ``0 .. n_jobs - size`` with
    ``numpy.random.default_rng(seed)``, and sorted. (numpy does not promise the same draws
    across its versions; the ``--json`` output records the starts, so replay those.)

    Example:
        >>> choose_starts(100, WindowConfig(size=10, count=3, seed=1)) == choose_starts(
        ...     100, WindowConfig(size=10, count=3, seed=1))
        True
    """
    if cfg.size > n_jobs:
        raise ConfigError(f"window size {cfg.size} is larger than the workload's {n_jobs} jobs")
    last = n_jobs - cfg.size
    if cfg.starts is not None:
        late = [s for s in cfg.starts if s > last]
        if late:
            raise ConfigError(f"window start(s) {late} + size {cfg.size} run past the "
                              f"workload's {n_jobs} jobs (last possible start: {last})")
        return tuple(int(s) for s in cfg.starts)
    if cfg.count > last + 1:
        raise ConfigError(f"{cfg.count} distinct windows of {cfg.size} jobs do not fit in "
                          f"{n_jobs} jobs; ask for fewer or smaller windows")
    rng = np.random.default_rng(cfg.seed)
    return tuple(int(s) for s in np.sort(rng.choice(last + 1, size=cfg.count, replace=False)))


def running_at(
    workload: Workload,
    start: int,
    cluster: ClusterSpec,
    cfg: WindowConfig,
    simulate: Simulate,
    base: SimConfig,
) -> tuple[RunningJobs, int]:
    """Jobs running when job ``start`` is submitted, and the warm-up backlog left out.

    Replays the ``cfg.warmup`` jobs before ``start`` under :data:`WARMUP_CONFIG` (keeping
    ``base``'s kill-at-limit, exclusive-node and engine settings); see the module docstring.
    """
    first = max(0, start - cfg.warmup)
    if first == start:
        return RunningJobs.empty(), 0
    t0 = int(workload.submit[start])
    before = workload.take(np.arange(first, start))
    ref = replace(WARMUP_CONFIG, kill_at_limit=base.kill_at_limit,
                  exclusive_nodes=base.exclusive_nodes, engine=base.engine)
    res = simulate(before, cluster, ref)
    started = res.start >= 0
    running = started & (res.start < t0) & (res.end > t0)
    backlog = int(np.count_nonzero(~res.never_fits & ~(started & (res.start < t0))))
    return RunningJobs(
        procs=before.procs[running],
        nodes=before.nodes[running],
        gpus=before.gpus[running],
        end=res.end[running],
        req_end=res.start[running] + before.req_walltime[running],
        mem_mib=before.mem_mib[running],
    ), backlog


@dataclass
class WindowRun:
    """One configuration on one window (or on the whole workload)."""

    start: int | None
    """Index of the window's first job; None for the whole workload."""
    jobs: Workload
    """The window's jobs."""
    result: SimResult
    """What the engine did with them (``result.stats``: its counters)."""
    summary: dict[str, Any]
    """Summary of the window (:func:`hpcpolicy.sim.metrics.summarize`)."""
    preloaded: int
    """Jobs running on the machine at the window's first submit (warm starts)."""
    backlog: int
    """Warm-up jobs still waiting at the window's first submit, left out."""
    wall_s: float
    """Wall-clock seconds the engine took (for progress output only; never in results)."""
    gpu: dict[str, Any] | None = None
    """GPU metrics of a node-level replay (:func:`hpcpolicy.sim.gpu_metrics.gpu_summary`); None
    under the pooled ``first-fit`` allocator."""
    table: pl.DataFrame | None = None
    """The outcome table without its text columns (``outcome_table(..., identity=False)``)
    that :attr:`summary` was made from; kept only under ``replay(..., keep_tables=True)``."""

    def outcomes(self) -> pl.DataFrame:
        """The window's outcome table (:func:`hpcpolicy.sim.metrics.outcome_table`)."""
        return metrics.outcome_table(self.jobs, self.result)


def never_fits_note(ids: Sequence[str], jobs: int | None = None) -> str | None:
    """The note on jobs that need more than the machine has (never started, so left out of
    every figure), naming a few of ``ids``; ``jobs``: how many there are, where ``ids`` holds
    only the first few. None when there are none."""
    count = len(ids) if jobs is None else jobs
    if not count:
        return None
    return (f"{count:,} jobs need more than the machine has and never started "
            f"(e.g. {', '.join(ids[:5])})")


def backfill_note(run: Replay) -> str | None:
    """A note when a run with backfilling started no job by backfilling; None otherwise.

    Backfilling acts only when the head of the queue does not fit: it plans the head's start
    and starts later jobs around it. A policy that only ever makes a job that fits the head
    (as a trained policy learns to: it sees which jobs fit now) leaves it nothing to do, and
    the run is the same, job for job, as without backfilling.
    """
    cfg = run.config
    if cfg.backfill == "none" or any(w.result.stats.get("backfilled", 0) for w in run.windows):
        return None
    name = cfg.policy
    return (f"{name}+{cfg.backfill}: backfilling started no job, because the head of the "
            "queue always fitted when it was chosen (a trained policy learns to choose among "
            "the jobs that fit now, which is backfilling of its own): this run is the same "
            f"as {name}+none")


@dataclass
class Replay:
    """One configuration on every window."""

    config: SimConfig
    windows: list[WindowRun]
    summary: dict[str, Any]
    """The whole workload's summary, or the mean over windows."""
    gpu: dict[str, Any] | None = None
    """GPU metrics (whole workload, or over windows); None under ``first-fit``."""

    def never_fits(self) -> list[str]:
        """Ids of the jobs that need more than the machine has (never started), each once."""
        ids: dict[str, None] = {}
        for w in self.windows:
            ids.update(dict.fromkeys(str(w.jobs.job_id[i])
                                     for i in np.flatnonzero(w.result.never_fits)))
        return list(ids)

    def outcomes(self) -> pl.DataFrame:
        """All windows' outcome tables, with ``policy``, ``backfill`` and ``window`` first
        (``window``: index of the window's first job; null for the whole workload)."""
        import polars as pl

        return pl.concat([
            w.outcomes().select(
                pl.lit(self.config.policy).alias("policy"),
                pl.lit(self.config.backfill).alias("backfill"),
                pl.lit(w.start, dtype=pl.Int64).alias("window"),
                pl.all(),
            )
            for w in self.windows
        ])


def replay(
    workload: Workload,
    cluster: ClusterSpec,
    configs: Sequence[SimConfig],
    windows: WindowConfig | None = None,
    *,
    utilization_end: str = "last_end",
    simulate: Simulate | None = None,
    on_step: Callable[[str, int, int], None] | None = None,
    keep_tables: bool = False,
) -> list[Replay]:
    """Replay ``workload`` under each of ``configs``, whole or on identical windows.

    Args:
        workload: the jobs.
        cluster: the machine.
        configs: one replay per configuration, in order.
        windows: the windowed protocol, or None for one replay of the whole workload.
        utilization_end: see :func:`hpcpolicy.sim.metrics.summarize`.
        simulate: the engine (default :func:`hpcpolicy.sim.simulate`); tests pass their own.
        on_step: called as ``on_step(label, done, total)`` before each simulation, for
            progress output (a warm-up replay reports without advancing ``done``).
        keep_tables: keep each window's outcome table (:attr:`WindowRun.table`), for a
            caller that needs it besides the summary (it is made for the summary anyway).

    Returns:
        One :class:`Replay` per configuration.

    Example:
        Two windows, each a long and a short job submitted together on a one-job machine:

        >>> import numpy as np
        >>> from hpcpolicy.cluster import ClusterSpec
        >>> from hpcpolicy.workload import Workload
        >>> i = lambda *v: np.array(v, dtype=np.int64)
        >>> z = np.zeros(4, dtype=np.int64)
        >>> w = Workload(job_id=np.array(list("abcd"), dtype=object), submit=i(0, 0, 10, 10),
        ...     run_time=i(100, 10, 100, 10), req_walltime=i(100, 10, 100, 10),
        ...     procs=i(4, 4, 4, 4), nodes=z, gpus=z, mem_mib=z, user=z.astype(np.int32),
        ...     partition=z.astype(np.int32), logged_start=z - 1)
        >>> runs = replay(w, ClusterSpec.homogeneous(4), [SimConfig("fcfs"), SimConfig("sjf")],
        ...               WindowConfig(size=2, starts=(0, 2)))
        >>> [r.summary["mean_bsld"] for r in runs]
        [6.0, 1.05]
    """
    if not configs:
        raise ConfigError("no configuration to replay")
    starts: Sequence[int | None] = (
        [None] if windows is None else choose_starts(len(workload), windows)
    )
    if simulate is None:
        from hpcpolicy.sim import simulate as engine

        simulate = engine
    step = on_step or (lambda _label, _done, _total: None)
    total = len(configs) * len(starts)
    preload: dict[tuple[int, bool, bool], tuple[RunningJobs, int]] = {}
    out: list[Replay] = []
    for cfg in configs:
        runs: list[WindowRun] = []
        for start in starts:
            label = f"{cfg.policy}/{cfg.backfill}" + ("" if start is None else f" @{start}")
            running: RunningJobs | None = None
            backlog = 0
            if windows is None or start is None:
                jobs = workload
            else:
                jobs = workload.take(np.arange(start, start + windows.size))
                if windows.warm:
                    key = (start, cfg.kill_at_limit, cfg.exclusive_nodes)
                    if key not in preload:
                        step(f"warm-up before window @{start}", len(out) * len(starts)
                             + len(runs), total)
                        preload[key] = running_at(workload, start, cluster, windows,
                                                  simulate, cfg)
                    running, backlog = preload[key]
            step(label, len(out) * len(starts) + len(runs), total)
            runs.append(_measured_run(jobs, cluster, cfg, simulate, start=start, running=running,
                                      backlog=backlog, utilization_end=utilization_end,
                                      keep_table=keep_tables))
        out.append(_combine(cfg, runs, windowed=windows is not None))
    return out


def _measured_run(
    jobs: Workload,
    cluster: ClusterSpec,
    cfg: SimConfig,
    simulate: Simulate,
    *,
    start: int | None,
    running: RunningJobs | None,
    backlog: int,
    utilization_end: str,
    keep_table: bool,
) -> WindowRun:
    """Simulate one window (or the whole workload) and summarize what happened."""
    t0 = time.perf_counter()
    res = simulate(jobs, cluster, cfg, running=running)
    wall = time.perf_counter() - t0
    table = metrics.outcome_table(jobs, res, identity=False)
    summary = metrics.summarize(table, cluster, utilization_end=utilization_end)
    gpu = None
    if res.placement:
        from hpcpolicy.sim.gpu_metrics import gpu_summary

        gpu = gpu_summary(jobs, res, cluster)
        summary["gpu_utilization"] = gpu["gpu_utilization"]  # fractions of GPUs too
    return WindowRun(
        start=start,
        jobs=jobs,
        result=res,
        summary=summary,
        preloaded=0 if running is None else len(running),
        backlog=backlog,
        wall_s=wall,
        gpu=gpu,
        table=table if keep_table else None,
    )


def _combine(cfg: SimConfig, runs: list[WindowRun], *, windowed: bool) -> Replay:
    """One configuration's replay from its windows (or its one whole-workload run)."""
    if not windowed:
        return Replay(config=cfg, windows=runs, summary=runs[0].summary, gpu=runs[0].gpu)
    gpus = [r.gpu for r in runs if r.gpu is not None]
    gpu = None
    if gpus:
        from hpcpolicy.sim.gpu_metrics import mean_gpu_summary

        gpu = mean_gpu_summary(gpus)
    return Replay(config=cfg, windows=runs, summary=metrics.aggregate([r.summary for r in runs]),
                  gpu=gpu)


def _breakdown_rows(outcomes: pl.DataFrame, by: str) -> list[dict[str, Any]]:
    table = metrics.breakdown(outcomes, by).rename({by: "name"})
    return [dict(row) for row in table.iter_rows(named=True)]


def to_document(
    runs: Sequence[Replay],
    *,
    source: str,
    workload: Workload,
    cluster: ClusterSpec,
    windows: WindowConfig | None,
    max_ids: int = 20,
) -> dict[str, Any]:
    """The ``hpcpolicy simulate --json`` document (``schemas/sim_summary.schema.json``).

    Deterministic: the same replay gives the same document (no wall-clock figures in it).
    Per-user and per-partition breakdowns pool the jobs of all windows.
    """
    import polars as pl

    from hpcpolicy.version import __version__

    def run_doc(run: Replay) -> dict[str, Any]:
        table = pl.concat([w.outcomes() for w in run.windows])
        never = run.never_fits()
        return {
            "policy": run.config.policy,
            "backfill": run.config.backfill,
            "config": run.config.to_dict(),
            "summary": run.summary,
            "gpu": run.gpu,
            "never_fits": {"jobs": len(never), "job_ids": never[:max_ids]},
            "killed": int(table["killed"].sum()),
            "by_partition": _breakdown_rows(table, "partition"),
            "by_user": _breakdown_rows(table, "user"),
            "windows": [] if windows is None else [
                {"start": w.start, "preloaded": w.preloaded, "backlog": w.backlog,
                 "summary": w.summary, "gpu": w.gpu}
                for w in run.windows
            ],
        }

    return {
        "hpcpolicy_version": __version__,
        "input": source,
        "workload": {
            "jobs": len(workload),
            "options": workload.options.to_dict() if workload.options else {},
            "dropped": {reason: len(ids) for reason, ids in workload.dropped.items()},
            "notes": list(workload.notes),
        },
        "cluster": {
            "name": cluster.name,
            "source": cluster.source,
            "cores": cluster.total_cores,
            "nodes": cluster.total_nodes,
            "gpus": cluster.total_gpus,
            "notes": list(cluster.notes),
        },
        "windows": None if windows is None else {
            "size": windows.size,
            "starts": [w.start for w in runs[0].windows],
            "seed": None if windows.starts is not None else windows.seed,
            "warm": windows.warm,
            "warmup_jobs": windows.warmup if windows.warm else 0,
        },
        "runs": [run_doc(r) for r in runs],
    }
