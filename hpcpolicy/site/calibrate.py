"""``hpcpolicy calibrate``: fit a site model to the earlier part of a log.

The search keeps the simulator in the loop. Candidates come from the logged schedule
(:mod:`hpcpolicy.site.evidence`: node size, pools, running limits, holds) and from the
scheduler's options (multifactor priority, backfilling off); each is tried in turn and kept
only where it makes the replay of the fitted part closer to the log, with the available
capacity re-fitted for every trial (bisection on the mean wait of the fitted part). Fidelity
is then measured on the part after ``fit_frac``, which the search never looks at, before and
after, with the ablation of each kept element.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from hpcpolicy.cluster import ClusterSpec
from hpcpolicy.errors import ConfigError
from hpcpolicy.site import evidence as ev
from hpcpolicy.site.apply import apply_site
from hpcpolicy.site.fidelity import FidelityConfig, replay_waits, section
from hpcpolicy.site.model import Outage, SiteModel
from hpcpolicy.workload import Workload

__all__ = ["CalibrateConfig", "Calibration", "calibrate", "objective"]

I64 = npt.NDArray[np.int64]

MIN_AVAILABILITY = 0.5
"""Lowest availability the search tries: below it queues (and replay times) explode."""
MAX_OUTAGES = 50
"""Most outage intervals written to site.toml (the longest)."""


@dataclass(frozen=True)
class CalibrateConfig:
    """How to fit a site model."""

    fit_frac: float = 0.7
    """Share of the jobs (submit order) to fit on; the rest measures the result."""
    bisect_steps: int = 6
    """Bisection steps of the availability fit per trial."""
    min_gain: float = 0.01
    """Smallest gain of :func:`objective` on the fitted part for an element to be kept."""

    def __post_init__(self) -> None:
        FidelityConfig(self.fit_frac)
        if self.bisect_steps < 0:
            raise ConfigError("bisect_steps must be >= 0")


@dataclass(frozen=True)
class Calibration:
    """A fitted site model and what it changes."""

    site: SiteModel
    """The model (evidence and out-of-sample fidelity in it)."""
    before: dict[str, Any]
    """Out-of-sample fidelity of the uncalibrated replay (FCFS + EASY)."""
    after: dict[str, Any]
    """Out-of-sample fidelity under the site model."""
    ablation: list[dict[str, Any]]
    """Per step of the search: the element tried, kept or not, fit-part objective and
    out-of-sample figures."""
    wall_s: float
    """Time the calibration took."""


def objective(part: dict[str, Any]) -> float:
    """What the search maximises on the fitted part: Spearman minus |mean-wait error|
    (capped at 1, so that neither swamps the other)."""
    if not part["available"] or part["spearman"] is None:
        return -2.0
    rel = part["mean_wait_rel_error"]
    return float(part["spearman"]) - min(abs(rel) if rel is not None else 1.0, 1.0)


class _Search:
    """Replays under trial models, remembering the figures of each."""

    def __init__(self, w: Workload, cluster: ClusterSpec, split: int, delay: I64 | None,
                 steps: int) -> None:
        self.w, self.cluster, self.split, self.delay, self.steps = w, cluster, split, delay, steps
        self.runs = 0

    def parts(self, site: SiteModel) -> tuple[dict[str, Any], dict[str, Any]]:
        waits = replay_waits(apply_site(site, self.w, self.cluster, delay=self.delay))
        self.runs += 1
        s = self.split
        return (section(waits.logged[:s], waits.simulated[:s]),
                section(waits.logged[s:], waits.simulated[s:]))

    def fit_capacity(self, site: SiteModel) -> tuple[SiteModel, dict[str, Any], dict[str, Any]]:
        """``site`` with the availability that brings the fitted part's mean wait closest to
        the log's (waits grow as capacity shrinks); its (fit, out-of-sample) figures."""
        best = (replace(site, availability=1.0), *self.parts(replace(site, availability=1.0)))
        rel = best[1]["mean_wait_rel_error"]
        if rel is None or rel >= 0:
            return best
        lo, hi = MIN_AVAILABILITY, 1.0
        for _ in range(self.steps):
            mid = (lo + hi) / 2
            trial = replace(site, availability=round(mid, 4))
            fit, oos = self.parts(trial)
            if abs(fit["mean_wait_rel_error"] or 0) < abs(best[1]["mean_wait_rel_error"] or 0):
                best = (trial, fit, oos)
            if (fit["mean_wait_rel_error"] or 0) < 0:
                hi = mid
            else:
                lo = mid
        return best


def _candidates(w: Workload, cluster: ClusterSpec, split: int,
                delay: I64 | None) -> list[tuple[str, ev.Candidate]]:
    header = cluster.groups[0].cores if len(cluster.groups) == 1 else 0
    found: list[tuple[str, ev.Candidate | None]] = [
        ("nodes", ev.find_node_size(w, cluster.total_cores, header)),
        ("pools", ev.find_pools(w, split, cluster.total_cores)),
        ("limits", ev.find_limits(w, split, cluster.total_cores)),
        ("priority", ev.Candidate({"priority": "fairshare"}, "multifactor priority (age, "
                                  "size, fair share with a 7-day half-life) tried against "
                                  "FCFS")),
        ("cadence", ev.Candidate({"backfill": "none"}, "no backfilling tried against EASY")),
    ]
    if delay is not None and (delay[:split] > 0).mean() >= 0.01:
        share = float((delay[:split] > 0).mean())
        found.append(("holds", ev.Candidate({"use_eligible": True}, f"{share:.1%} of jobs "
                                            "became eligible after their submit (holds, "
                                            "dependencies)")))
    return [(name, c) for name, c in found if c is not None]


def calibrate(workload: Workload, cluster: ClusterSpec, config: CalibrateConfig | None = None,
              *, delay: I64 | None = None, source: str = "") -> Calibration:
    """Fit a site model on the first ``fit_frac`` of ``workload``.

    Args:
        workload: the jobs as logged (logged starts are required).
        cluster: the machine as the log header or a spec gives it.
        config: split and search options.
        delay: eligible delays per job (sacct Eligible), or None when the log has none.
        source: the log's path, recorded in the model.

    Raises:
        ConfigError: too few logged starts in either part.
    """
    cfg = config or CalibrateConfig()
    tic = time.perf_counter()
    split = int(len(workload) * cfg.fit_frac)
    search = _Search(workload, cluster, split, delay, cfg.bisect_steps)
    before_fit, before = search.parts(SiteModel())
    if not (before_fit["available"] and before["available"]):
        raise ConfigError("calibrate needs logged start times in both the fitted part and the "
                          "out-of-sample part; this log has too few")
    evidence: dict[str, str] = {}
    site, fit, oos = search.fit_capacity(SiteModel())
    steps = [{"element": "capacity", "kept": site.availability < 1.0,
              "objective_fit": objective(fit), "out_of_sample": _brief(oos)}]
    for name, cand in _candidates(workload, cluster, split, delay):
        trial_site, tfit, toos = search.fit_capacity(replace(site, **cand.values))
        gain = objective(tfit) - objective(fit)
        kept = gain >= cfg.min_gain
        steps.append({"element": name, "kept": kept, "objective_fit": objective(tfit),
                      "out_of_sample": _brief(toos)})
        if kept:
            site, fit, oos = trial_site, tfit, toos
            evidence[name] = f"{cand.evidence}; kept: the fitted part's score rose by {gain:.3f}"
        elif name not in evidence or "kept:" not in evidence[name]:
            evidence[name] = (f"{cand.evidence}; not kept: the fitted part's score changed by "
                              f"{gain:+.3f}")
    outages = sorted(ev.find_outages(workload, split, cluster.total_cores),
                     key=lambda o: o[0] - o[1])[:MAX_OUTAGES]
    evidence["capacity"] = (
        f"availability {site.availability:.3f} brings the fitted part's mean wait closest to "
        f"the log's; {len(outages)} intervals of an hour or more with idle cores beside a "
        "waiting job that fitted them are listed (the longest; the replay uses the "
        "availability)")
    for name in ("pools", "limits", "holds", "nodes"):
        evidence.setdefault(name, "no evidence in the fitted part of the log")
    evidence.setdefault("cadence", "backfilling kept as EASY; the scheduling interval is not "
                        "fitted")
    provenance = {"source": source, "fit_frac": cfg.fit_frac, "jobs": len(workload),
                  "replays": search.runs,
                  "oos_spearman_before": before["spearman"],
                  "oos_spearman_after": oos["spearman"],
                  "oos_mean_wait_rel_error_before": before["mean_wait_rel_error"],
                  "oos_mean_wait_rel_error_after": oos["mean_wait_rel_error"],
                  "oos_trust_before": before["trust"], "oos_trust_after": oos["trust"]}
    site = replace(site, evidence=evidence, outages=tuple(Outage(*o) for o in outages),
                   provenance={k: v for k, v in provenance.items() if v is not None})
    return Calibration(site=site, before=before, after=oos, ablation=steps,
                       wall_s=time.perf_counter() - tic)


def _brief(part: dict[str, Any]) -> dict[str, Any]:
    return {k: part.get(k) for k in ("spearman", "mean_wait_rel_error", "trust")}
