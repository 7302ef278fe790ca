"""``hpcpolicy fidelity``: how closely a replay of the log as it was reproduces its waits.

The log is replayed under the site's priority order and backfilling (FCFS + EASY without a
site model) and each job's replayed wait is set beside its logged one, with the figures of
:mod:`hpcpolicy.site.measure` (Spearman and Pearson on the waits, the relative error of
the mean wait, median absolute error, Wasserstein distance, the trust level). They are given
on the whole log, on the part after ``fit_frac`` (the out-of-sample part a calibration never
saw), by calendar month, by partition and by job-size class.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from hpcpolicy.cluster import ClusterSpec
from hpcpolicy.errors import ConfigError
from hpcpolicy.sim.engine import simulate
from hpcpolicy.sim.windows import Simulate
from hpcpolicy.site.measure import (
    MIN_JOBS,
    RELATIVE_ONLY,
    records_no_starts,
    trust,
    wait_figures,
)
from hpcpolicy.workload import Workload
from hpcpolicy.world.apply import World, apply_site
from hpcpolicy.world.protocol import TRAIN_FRAC
from hpcpolicy.world.site_model import SiteModel

__all__ = ["SIZE_CLASSES", "SIZE_NAMES", "FidelityConfig", "Waits", "brief", "fidelity_report",
           "replay_waits", "section", "unchecked", "without_each"]

F64 = npt.NDArray[np.float64]

SIZE_CLASSES = ((1, 1), (2, 4), (5, 16), (17, 64), (65, 256), (257, 1 << 62))
"""Job-size classes (cores, inclusive bounds) of the by-size breakdown."""


@dataclass(frozen=True)
class FidelityConfig:
    """How to measure fidelity."""

    fit_frac: float = TRAIN_FRAC
    """Share of the jobs (in submit order) a calibration may fit on; the rest is out of
    sample."""

    def __post_init__(self) -> None:
        if not 0.0 < self.fit_frac < 1.0:
            raise ConfigError(f"--fit-frac must be between 0 and 1 (exclusive), not "
                              f"{self.fit_frac}")


@dataclass(frozen=True)
class Waits:
    """Replayed against logged waits, per job of the workload as logged."""

    logged: F64
    """Logged wait (s); NaN where the log has no start."""
    simulated: F64
    """Replayed wait from the real submit (s); NaN where the job never started."""
    wall_s: float
    """Engine time of the replay."""
    never_fits: list[str] = field(default_factory=list)
    """Ids of the jobs that need more than the machine has (never started)."""


def replay_waits(world: World, policy: str | None = None, *,
                 engine: Simulate | None = None) -> Waits:
    """Replay ``world`` under its baseline policy (or ``policy``) with ``engine`` (default
    the project's :func:`~hpcpolicy.sim.engine.simulate`) and align the waits with the
    workload as logged (:attr:`World.order`)."""
    w = world.workload
    cfg = replace(world.cfg, policy=policy or world.baseline_policy)
    t0 = time.perf_counter()
    result = (engine or simulate)(w, world.cluster, cfg)
    wall = float(result.stats.get("wall_s", time.perf_counter() - t0))
    n = len(w)
    sim = np.full(n, np.nan)
    logged = np.full(n, np.nan)
    started = result.start >= 0
    real_submit = w.submit - world.shift
    sim[world.order[started]] = (result.start - real_submit)[started]
    has_log = w.logged_start >= 0
    logged[world.order[has_log]] = (w.logged_start - real_submit)[has_log]
    return Waits(logged=logged, simulated=sim, wall_s=wall,
                 never_fits=[str(x) for x in w.job_id[result.never_fits]])


def section(logged: F64, simulated: F64) -> dict[str, Any]:
    """The figures of one part of the log (jobs with both waits); ``available`` False when
    fewer than :data:`~hpcpolicy.site.measure.MIN_JOBS` jobs have both."""
    both = ~(np.isnan(logged) | np.isnan(simulated))
    if both.sum() < MIN_JOBS:
        return {"available": False, "jobs": int(both.sum()), "spearman": None, "pearson": None,
                "mean_wait_rel_error": None, "median_abs_error_s": None, "wasserstein_s": None,
                "trust": None}
    fig = wait_figures(logged[both], simulated[both])
    lm, sm = fig["logged_mean_wait_s"], fig["simulated_mean_wait_s"]
    return {"available": True, **fig,
            "mean_wait_rel_error": (sm - lm) / lm if lm > 0 else None,
            "trust": trust(fig["spearman"], lm, sm)}


def brief(part: dict[str, Any]) -> dict[str, Any]:
    """The figures an admin reads first of a :func:`section` (None where it has none)."""
    return {k: part.get(k) for k in ("spearman", "mean_wait_rel_error", "trust")}


def without_each(workload: Workload, cluster: ClusterSpec, site: SiteModel, split: int,
                 delay: npt.NDArray[np.int64] | None = None, *,
                 engine: Simulate | None = None) -> dict[str, dict[str, Any]]:
    """Per element of ``site``: the :func:`brief` figures, on the jobs from ``split`` on (out
    of sample), of a replay (with ``engine``, see :func:`replay_waits`) under ``site``
    without that element (one replay each)."""
    out = {}
    for name in site.elements():
        waits = replay_waits(apply_site(site.without(name), workload, cluster, delay=delay),
                             engine=engine)
        out[name] = brief(section(waits.logged[split:], waits.simulated[split:]))
    return out


def _groups(labels: npt.NDArray[Any], waits: Waits,
            order: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """The figures of each group of jobs, in ``order`` (default: the labels sorted)."""
    rows = []
    for label in np.unique(labels) if order is None else order:
        sel = labels == label
        part = section(waits.logged[sel], waits.simulated[sel])
        if part["available"]:
            rows.append({"group": str(label), **{k: part[k] for k in (
                "jobs", "logged_mean_wait_s", "simulated_mean_wait_s", "spearman",
                "mean_wait_rel_error", "trust")}})
    return rows


def _size_name(lo: int, hi: int) -> str:
    return str(lo) if lo == hi else f"{lo}-{hi}" if hi < 1 << 62 else f">={lo}"


SIZE_NAMES = tuple(_size_name(lo, hi) for lo, hi in SIZE_CLASSES)
"""The size classes' names, smallest first: the by-size breakdown's order."""


def _size_labels(procs: npt.NDArray[np.int64]) -> npt.NDArray[np.str_]:
    labels = np.empty(len(procs), dtype=object)
    for (lo, hi), name in zip(SIZE_CLASSES, SIZE_NAMES, strict=True):
        labels[(procs >= lo) & (procs <= hi)] = name
    return labels.astype(str)


def unchecked(workload: Workload) -> str | None:
    """Why the log cannot be checked at all (it records no start), with what that means for
    the what-if; None when it records starts."""
    return RELATIVE_ONLY if records_no_starts(workload.logged_start) else None


def fidelity_report(workload: Workload, cluster: ClusterSpec, site: SiteModel | None = None,
                    config: FidelityConfig | None = None, *,
                    delay: npt.NDArray[np.int64] | None = None,
                    engine: tuple[Simulate, str, str] | None = None) -> dict[str, Any]:
    """Fidelity of the replay of the log as it was (the ``fidelity.schema.json`` document).

    Args:
        workload: the jobs as logged (with logged starts).
        cluster: the machine.
        site: the site model; None replays FCFS + EASY as the log header describes it.
        config: the out-of-sample split.
        delay: eligible delays, when ``site.use_eligible``.
        engine: another engine in place of the project's, with the priority order and the
            backfilling the report names for it (``--compat slurm``: the layout's
            :meth:`~hpcpolicy.slurm.layout.SlurmLayout.simulator`).

    Raises:
        ConfigError: the log has too few logged starts to compare (:func:`unchecked` first
            says whether it has none at all).
    """
    cfg = config or FidelityConfig()
    tic = time.perf_counter()
    world = apply_site(site or SiteModel(), workload, cluster, delay=delay)
    waits = replay_waits(world, engine=engine[0] if engine else None)
    policy, backfill = engine[1:] if engine else (world.baseline_policy, world.cfg.backfill)
    n = len(workload)
    split = int(n * cfg.fit_frac)
    whole = section(waits.logged, waits.simulated)
    if not whole["available"]:
        raise ConfigError(f"only {whole['jobs']} jobs have both a logged and a replayed start; "
                          f"fidelity needs at least {MIN_JOBS} (does the log record start "
                          "times?)")
    months = (workload.submit + workload.origin).astype("datetime64[s]").astype(
        "datetime64[M]").astype(str)
    names = np.array(workload.partitions or ("-",), dtype=object)
    parts = names[np.clip(workload.partition, 0, len(names) - 1)].astype(str)
    return {
        "schema_version": 1,
        "site": None if site is None else {"elements": site.elements(),
                                           "evidence": dict(site.evidence)},
        "machine": {"name": world.cluster.name, "cores": world.cluster.total_cores},
        "policy": policy, "backfill": backfill,
        "fit_frac": cfg.fit_frac, "jobs": n, "split_job": split,
        "whole": whole,
        "fit": section(waits.logged[:split], waits.simulated[:split]),
        "out_of_sample": section(waits.logged[split:], waits.simulated[split:]),
        "by_month": _groups(months, waits),
        "by_partition": _groups(parts, waits),
        "by_size": _groups(_size_labels(workload.procs), waits, SIZE_NAMES),
        "without": {} if site is None else without_each(
            workload, cluster, site, split, delay, engine=engine[0] if engine else None),
        "never_fits": {"jobs": len(waits.never_fits), "job_ids": waits.never_fits[:20]},
        "engine_s": waits.wall_s,
        "wall_s": time.perf_counter() - tic,
    }
