"""``hpcpolicy calibrate``: fit a site model to the earlier part of a log.

The search keeps the simulator in the loop. Candidates come from the logged schedule
(:mod:`hpcpolicy.site.evidence`: node size and machine size, pools, running limits, holds),
from the order in which it started jobs that waited together (:mod:`hpcpolicy.site.order`:
multifactor weights) and from the scheduler's options (backfilling off). The fitted part is
cut in two by time. Each trial's availability is bisected on the earlier share's mean wait,
then refined on the later share's; an element is kept only where it makes the replay of that
later share, the *validation* slice, closer to the log than the simpler model without it. So
an element that fits the early months but not the following ones is dropped, as it would be
out of sample. The priority order is the exception: its evidence is the start order itself,
held out on the validation slice, so the replay there picks among the weight profiles that
order supports and may veto the element only by :attr:`CalibrateConfig.order_tolerance`.
Fidelity is measured on the part after ``fit_frac``, which the search never looks at, before
and after, with the ablation of each element tried.
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
from hpcpolicy.site.fidelity import FidelityConfig, replay_waits, section
from hpcpolicy.site.measure import RELATIVE_ONLY, records_no_starts
from hpcpolicy.site.order import find_priority
from hpcpolicy.workload import Workload
from hpcpolicy.world.apply import apply_site
from hpcpolicy.world.site_model import Outage, SiteModel

__all__ = ["CalibrateConfig", "Calibration", "calibrate", "objective"]

I64 = npt.NDArray[np.int64]

MIN_AVAILABILITY = 0.5
"""Lowest availability the search tries: below it queues (and replay times) explode."""
REFINE = 0.125
"""Half-width of the availability interval the validation slice refines the fit in."""
MAX_OUTAGES = 50
"""Most outage intervals written to site.toml (the longest)."""


@dataclass(frozen=True)
class CalibrateConfig:
    """How to fit a site model."""

    fit_frac: float = 0.7
    """Share of the jobs (submit order) to fit on; the rest measures the result."""
    val_frac: float = 0.3
    """Share of the fitted part, its latest jobs, that chooses the elements (validation)."""
    bisect_steps: int = 6
    """Bisection steps of the availability fit per trial."""
    min_gain: float = 0.01
    """Smallest gain of :func:`objective` on the validation slice for an element to be
    kept."""
    order_tolerance: float = 0.05
    """How much lower the validation slice's score may be with a priority order that the
    log's own start order supports (:mod:`hpcpolicy.site.order`, held out) for it to be kept:
    the score's standard deviation between nearby availabilities near saturation is larger
    (0.06 on KTH-SP2 over 0.825-0.86, 0.08 on CTC-SP2 over 0.94-0.96), while the order rests
    on thousands of pairs."""

    def __post_init__(self) -> None:
        FidelityConfig(self.fit_frac)
        if not 0.0 < self.val_frac < 1.0:
            raise ConfigError(f"val_frac must be in (0, 1), not {self.val_frac}")
        if self.bisect_steps < 0:
            raise ConfigError("bisect_steps must be >= 0")
        if self.order_tolerance < 0:
            raise ConfigError(f"order_tolerance must be >= 0, not {self.order_tolerance}")


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
    """Per step of the search: the element tried, kept or not, validation objective and
    out-of-sample figures."""
    wall_s: float
    """Time the calibration took."""


def objective(part: dict[str, Any]) -> float:
    """What the search maximises on the validation slice: Spearman minus |mean-wait error|
    (capped at 1, so that neither swamps the other)."""
    if not part["available"] or part["spearman"] is None:
        return -2.0
    rel = part["mean_wait_rel_error"]
    return float(part["spearman"]) - min(abs(rel) if rel is not None else 1.0, 1.0)


Parts = dict[str, dict[str, Any]]
"""Fidelity figures of one replay by part: train, validation, fit (both) and oos."""


class _Search:
    """Replays under trial models, remembering the figures of each."""

    def __init__(self, w: Workload, cluster: ClusterSpec, cuts: tuple[int, int],
                 delay: I64 | None, steps: int) -> None:
        self.w, self.cluster, self.delay, self.steps = w, cluster, delay, steps
        val, split = cuts
        self.slices = {"train": slice(0, val), "validation": slice(val, split),
                       "fit": slice(0, split), "oos": slice(split, None)}
        self.runs = 0

    def parts(self, site: SiteModel) -> Parts:
        waits = replay_waits(apply_site(site, self.w, self.cluster, delay=self.delay))
        self.runs += 1
        return {name: section(waits.logged[cut], waits.simulated[cut])
                for name, cut in self.slices.items()}

    def _bisect(self, site: SiteModel, part: str, lo: float, hi: float, steps: int,
                tried: list[tuple[SiteModel, Parts]]) -> None:
        """Bisect the availability in [lo, hi] on ``part``'s mean wait (waits grow as capacity
        shrinks), adding each replay to ``tried``."""
        for _ in range(steps):
            mid = (lo + hi) / 2
            trial = replace(site, availability=round(mid, 4))
            tried.append((trial, self.parts(trial)))
            if (tried[-1][1][part]["mean_wait_rel_error"] or 0) < 0:
                hi = mid
            else:
                lo = mid

    def fit_capacity(self, site: SiteModel) -> tuple[SiteModel, Parts]:
        """``site`` with an availability fitted to the log, and its figures.

        Bisection on the earlier share's mean wait finds the availability that matches it;
        a shorter one around that point then follows the validation slice's mean wait (near
        saturation a small change of capacity multiplies the waits, and the later slice says
        which side of that cliff carries over to later months). Of every availability visited
        (and the full machine), the one whose replay of the validation slice scores best is
        returned.
        """
        full = replace(site, availability=1.0)
        tried = [(full, self.parts(full))]
        if (tried[0][1]["train"]["mean_wait_rel_error"] or 0) < 0:
            self._bisect(site, "train", MIN_AVAILABILITY, 1.0, self.steps, tried)
            near = tried[-1][0].availability
            self._bisect(site, "validation", max(near - REFINE, MIN_AVAILABILITY),
                         min(near + REFINE, 1.0), self.steps // 2, tried)
        return max(tried, key=lambda t: objective(t[1]["validation"]))


def _candidates(w: Workload, cluster: ClusterSpec, cuts: tuple[int, int],
                delay: I64 | None) -> list[tuple[str, list[ev.Candidate]]]:
    """Per element, its alternatives (the replay keeps at most one)."""
    split = cuts[1]
    header = cluster.groups[0].cores if len(cluster.groups) == 1 else 0
    nodes = _nodes(ev.find_node_size(w, cluster.total_cores, header),
                   ev.find_machine_size(w, split, cluster.total_cores)
                   if header and not cluster.total_gpus else None)
    # free cores of the logged schedule are counted on the machine the log ran on
    ran_on = max(nodes.values.get("machine_cores", 0) if nodes else 0, cluster.total_cores)
    found: list[tuple[str, list[ev.Candidate]]] = [
        ("nodes", _one(nodes)),
        ("pools", _one(ev.find_pools(w, split, cluster.total_cores))),
        ("limits", _one(ev.find_limits(w, split, cluster.total_cores))),
        ("priority", find_priority(w, cuts, ran_on)),
        ("cadence", [ev.Candidate({"backfill": "none"}, "no backfilling tried against EASY")]),
    ]
    if delay is not None and (delay[:split] > 0).mean() >= 0.01:
        share = float((delay[:split] > 0).mean())
        found.append(("holds", [ev.Candidate({"use_eligible": True}, f"{share:.1%} of jobs "
                                             "became eligible after their submit (holds, "
                                             "dependencies)")]))
    return [(name, alternatives) for name, alternatives in found if alternatives]


def _one(candidate: ev.Candidate | None) -> list[ev.Candidate]:
    return [] if candidate is None else [candidate]


def _nodes(size: ev.Candidate | None, machine: ev.Candidate | None) -> ev.Candidate | None:
    """The node size and the machine's size as one element (a larger machine is rounded up
    to whole nodes)."""
    if size is None or machine is None:
        return size or machine
    k = size.values["cores_per_node"]
    cores = -(-machine.values["machine_cores"] // k) * k
    return ev.Candidate({**size.values, "machine_cores": cores},
                        f"{size.evidence}; {machine.evidence}")


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
        ConfigError: no logged start at all, or too few in either part.
    """
    if records_no_starts(workload.logged_start):
        raise ConfigError(f"calibrate: {RELATIVE_ONLY[0].lower()}{RELATIVE_ONLY[1:]}; skip "
                          "calibrate and fidelity for this log, and run whatif without --site")
    cfg = config or CalibrateConfig()
    tic = time.perf_counter()
    split = int(len(workload) * cfg.fit_frac)
    cuts = (int(split * (1 - cfg.val_frac)), split)
    search = _Search(workload, cluster, cuts, delay, cfg.bisect_steps)
    base = search.parts(SiteModel())
    before = base["oos"]
    if not all(base[k]["available"] for k in ("train", "validation", "oos")):
        raise ConfigError("calibrate needs logged start times in the fitted part (both its "
                          "earlier share and its validation slice) and in the out-of-sample "
                          "part; this log has too few")
    evidence: dict[str, str] = {}
    site, figures = SiteModel(), base
    steps: list[dict[str, Any]] = []
    trials = [("capacity", [ev.Candidate({}, "lost capacity tried against the full machine")])]
    for name, alternatives in trials + _candidates(workload, cluster, cuts, delay):
        tried = [(c, *search.fit_capacity(replace(site, **c.values))) for c in alternatives]
        cand, trial_site, tfig = max(tried, key=lambda t: objective(t[2]["validation"]))
        if len(tried) > 1:
            cand = replace(cand, evidence=f"{cand.evidence} (the replay of the validation "
                           f"slice preferred it to {len(tried) - 1} other profile(s) the "
                           "order supports)")
        gain = objective(tfig["validation"]) - objective(figures["validation"])
        # the start order is direct evidence for the priority: the replay may only veto it
        need = -cfg.order_tolerance if name == "priority" else cfg.min_gain
        kept = (gain >= need and tfig["validation"]["spearman"] is not None
                and (name != "capacity" or trial_site.availability < 1.0))
        steps.append({"element": name, "kept": kept,
                      "objective_validation": objective(tfig["validation"]),
                      "out_of_sample": _brief(tfig["oos"])})
        if kept:
            site, figures = trial_site, tfig
            evidence[name] = f"{cand.evidence}; kept: " + (
                f"the validation slice's score rose by {gain:.3f}" if gain >= 0 else
                f"the validation slice's score changed by {gain:+.3f}, within the "
                f"{cfg.order_tolerance} by which the replay may veto an order the log shows")
        elif name != "capacity":
            evidence[name] = (f"{cand.evidence}; not kept: the validation slice's score "
                              f"changed by {gain:+.3f}")
    oos = figures["oos"]
    outages = sorted(ev.find_outages(workload, split, cluster.total_cores),
                     key=lambda o: o[0] - o[1])[:MAX_OUTAGES]
    evidence["capacity"] = (
        f"availability {site.availability:.3f}: of those that bring the earlier fitted jobs' "
        "mean wait near the log's, the one whose replay of the later fitted jobs scored best "
        "(1.0: lost capacity did not bring them closer); "
        f"{len(outages)} intervals of an hour or more with idle cores beside a "
        "waiting job that fitted them are listed (the longest; the replay uses the "
        "availability)")
    for name in ("pools", "limits", "holds", "nodes"):
        evidence.setdefault(name, "no evidence in the fitted part of the log")
    evidence.setdefault("priority", "FCFS: no multifactor order explains the logged start "
                        "order of jobs that waited together (validation slice) clearly better "
                        "than FCFS, or too few such jobs")
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
