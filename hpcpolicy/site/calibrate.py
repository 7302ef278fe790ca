"""``hpcpolicy calibrate``: fit a site model to the earlier part of a log.

The search keeps the simulator in the loop. Candidates come from the logged schedule
(:mod:`hpcpolicy.site.evidence`: node size and machine size, pools, running limits, holds, and
outages, the idle cores beside waiting jobs, dated and merged), from the order in which it
started jobs that waited together (:mod:`hpcpolicy.site.order`: multifactor weights) and from
the scheduler's options (backfilling off). The fitted part is cut in two by time. Each trial's
availability (the capacity the outages do not explain) is bisected on the earlier share's mean
wait, then refined on the later share's; an element is kept only where the replay of that later
share, the *validation* slice, is closer to the log than the model without it on both figures
an admin reads (:func:`better_fit`: a smaller |mean-wait error| and a Spearman of waits no
lower beyond :data:`SPEARMAN_SLACK`). So an element that fits the early months but not the
following ones is dropped, as it would be out of sample, and none is kept that buys a better
order with a worse mean wait. The outages trial knows only the outages begun in the earlier
share, so that the validation slice is replayed as the months after the fit will be: without
knowing its own outages. Kept, the model holds those it was tried with (holding those of the
validation slice too overshot the out-of-sample mean wait of a built log: -1 % without the
outages, +18 % with them).

The search replays only the jobs its figures need (:class:`_Search`): the earlier share for its
bisection, the fitted part for the validation slice, each with the jobs submitted before their
last start. Fidelity is measured on the part after ``fit_frac``, which the search never looks
at, for the plain replay, the fitted model, and the fitted model without each of its elements
(:func:`~hpcpolicy.site.fidelity.without_each`).
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
from hpcpolicy.site.fidelity import FidelityConfig, brief, replay_waits, section
from hpcpolicy.site.fidelity import without_each as _without_each
from hpcpolicy.site.measure import RELATIVE_ONLY, records_no_starts
from hpcpolicy.site.order import find_priority
from hpcpolicy.workload import Workload
from hpcpolicy.world.apply import apply_site
from hpcpolicy.world.protocol import TRAIN_FRAC
from hpcpolicy.world.site_model import SiteModel

__all__ = ["CalibrateConfig", "Calibration", "better_fit", "calibrate", "objective"]

I64 = npt.NDArray[np.int64]

MIN_AVAILABILITY = 0.5
"""Lowest availability the search tries: below it queues (and replay times) explode."""
REFINE = 0.125
"""Half-width of the availability interval the validation slice refines the fit in."""
SPEARMAN_SLACK = 0.02
"""How much lower the validation slice's Spearman of waits may be under a kept element (whose
|mean-wait error| must be smaller). A strict rise refuses the capacity a log lost evenly: on a
built log scheduled with 80 % of its cores, the fitted availability moves the validation
slice from Spearman 0.937 and a mean-wait error of -41 % to 0.922 and +5 % (out of sample:
-43 % to -1 %), and the strict rule kept the full machine
(``tests/test_site_elements.py::test_calibrate_finds_the_missing_capacity``)."""
MARGIN = 0.02
"""Share of the log's jobs a search replay takes beyond those it must (see :class:`_Search`),
so that it seldom has to be run again longer."""


@dataclass(frozen=True)
class CalibrateConfig:
    """How to fit a site model."""

    fit_frac: float = TRAIN_FRAC
    """Share of the jobs (submit order) to fit on; the rest measures the result."""
    val_frac: float = 0.3
    """Share of the fitted part, its latest jobs, that chooses the elements (validation)."""
    bisect_steps: int = 6
    """Bisection steps of the availability fit per trial."""
    min_gain: float = 0.01
    """Smallest gain of :func:`objective` on the validation slice for an element to be
    kept (besides :func:`better_fit`)."""

    def __post_init__(self) -> None:
        FidelityConfig(self.fit_frac)
        if not 0.0 < self.val_frac < 1.0:
            raise ConfigError(f"val_frac must be in (0, 1), not {self.val_frac}")
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
    """Per step of the search: the element tried, kept or not, the validation objective and
    figures, and the out-of-sample figures of the model it left (kept steps only)."""
    without: dict[str, dict[str, Any]]
    """Per kept element: the out-of-sample figures of the fitted model without it (against
    :attr:`after`, what the element adds out of sample)."""
    wall_s: float
    """Time the calibration took."""


def better_fit(trial: dict[str, Any], without: dict[str, Any]) -> bool:
    """The rule that keeps an element: on the validation slice, ``trial`` (the model with
    it) has a smaller |mean-wait error| than ``without`` (the model without it), and a
    Spearman of waits no more than :data:`SPEARMAN_SLACK` lower. So no kept element makes the
    mean wait worse to buy a better order, and none trades the order away for a closer mean.

    Example:
        >>> better_fit({"spearman": 0.35, "mean_wait_rel_error": 0.80},
        ...            {"spearman": 0.23, "mean_wait_rel_error": -0.76})
        False
        >>> better_fit({"spearman": 0.922, "mean_wait_rel_error": 0.05},
        ...            {"spearman": 0.937, "mean_wait_rel_error": -0.41})
        True
        >>> better_fit({"spearman": 0.90, "mean_wait_rel_error": 0.05},
        ...            {"spearman": 0.937, "mean_wait_rel_error": -0.41})
        False
    """
    if trial["spearman"] is None or trial["mean_wait_rel_error"] is None:
        return False
    if without["spearman"] is None or without["mean_wait_rel_error"] is None:
        return True
    return bool(trial["spearman"] >= without["spearman"] - SPEARMAN_SLACK
                and abs(trial["mean_wait_rel_error"]) < abs(without["mean_wait_rel_error"]))


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
    """Replays under trial models, remembering the figures of each.

    A replay measures the earlier share (``"train"``), the fitted part (``"fit"``: train and
    validation) or the whole log (``"all"``: and oos), and runs only the jobs submitted
    before the last of the measured jobs started: the engines decide at each time from the
    jobs submitted until then, so jobs submitted later cannot change those starts, and the
    figures are those of a replay of the whole log. Where the replay proves too short (a
    measured job started after the first job left out was submitted), it is run again,
    longer.
    """

    def __init__(self, w: Workload, cluster: ClusterSpec, cuts: tuple[int, int],
                 delay: I64 | None, steps: int) -> None:
        self.w, self.cluster, self.delay, self.steps = w, cluster, delay, steps
        val, split = cuts
        self.slices = {"train": slice(0, val), "validation": slice(val, split),
                       "fit": slice(0, split), "oos": slice(split, None)}
        self.names = {"train": ("train",), "fit": ("train", "validation", "fit"),
                      "all": tuple(self.slices)}
        self.measured = {"train": val, "fit": split, "all": len(w)}
        logged = w.logged_start.astype(np.int64)
        self.reach = {k: self._covering(int(logged[:m].max(initial=0)))
                      for k, m in self.measured.items()}
        self.runs = 0

    def _covering(self, t: int) -> int:
        """How many jobs (submit order) to replay to cover the jobs submitted until ``t``,
        with :data:`MARGIN` more."""
        n = int(np.searchsorted(self.w.submit, t, side="right"))
        return min(n + int(len(self.w) * MARGIN), len(self.w))

    def parts(self, site: SiteModel, upto: str = "fit") -> Parts:
        m, total = self.measured[upto], len(self.w)
        n = total if upto == "all" else self.reach[upto]
        while True:
            w = self.w if n == total else self.w.take(np.arange(n))
            delay = None if self.delay is None else self.delay[:n]
            waits = replay_waits(apply_site(site, w, self.cluster, delay=delay))
            self.runs += 1
            started = waits.simulated[:m] + self.w.submit[:m]
            last = int(np.nanmax(started)) if np.isfinite(started).any() else -1
            if n == total or last < self.w.submit[n]:
                break
            n = self.reach[upto] = max(self._covering(last), n + 1)
        return {name: section(waits.logged[self.slices[name]], waits.simulated[self.slices[name]])
                for name in self.names[upto]}

    def _bisect(self, site: SiteModel, part: str, lo: float, hi: float, steps: int,
                tried: list[tuple[SiteModel, Parts]]) -> None:
        """Bisect the availability in [lo, hi] on ``part``'s mean wait (waits grow as capacity
        shrinks), adding each replay to ``tried``."""
        for _ in range(steps):
            mid = (lo + hi) / 2
            trial = replace(site, availability=round(mid, 4))
            tried.append((trial, self.parts(trial, "train" if part == "train" else "fit")))
            if (tried[-1][1][part]["mean_wait_rel_error"] or 0) < 0:
                hi = mid
            else:
                lo = mid

    def fit_capacity(self, site: SiteModel) -> tuple[SiteModel, Parts]:
        """``site`` with an availability fitted to the log, and its figures.

        Bisection on the earlier share's mean wait (replaying that share only) finds the
        availability that matches it; a shorter one around that point then follows the
        validation slice's mean wait (near saturation a small change of capacity multiplies
        the waits, and the later slice says which side of that cliff carries over to later
        months). Of the availabilities the validation slice was replayed at (and the full
        machine), the one whose replay of it scores best is returned.
        """
        full = replace(site, availability=1.0)
        tried = [(full, self.parts(full))]
        if (tried[0][1]["train"]["mean_wait_rel_error"] or 0) < 0:
            early: list[tuple[SiteModel, Parts]] = []
            self._bisect(site, "train", MIN_AVAILABILITY, 1.0, self.steps, early)
            near = early[-1][0].availability if early else 1.0
            self._bisect(site, "validation", max(near - REFINE, MIN_AVAILABILITY),
                         min(near + REFINE, 1.0), -(-self.steps // 2), tried)
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
    base = search.parts(SiteModel(), "all")
    before = base["oos"]
    if not all(base[k]["available"] for k in ("train", "validation", "oos")):
        raise ConfigError("calibrate needs logged start times in the fitted part (both its "
                          "earlier share and its validation slice) and in the out-of-sample "
                          "part; this log has too few")
    evidence: dict[str, str] = {}
    site, figures = SiteModel(), base
    steps: list[dict[str, Any]] = []
    # Outages come after the elements that also leave cores idle beside waiting jobs (limits,
    # pools, holds): they are kept only for what those do not explain.
    found = ev.dated_outages(workload, split, cluster.total_cores)
    early = tuple(o for o in found if o.start_s - workload.origin < workload.submit[cuts[0]])
    outages = [("outages", [ev.Candidate(
        {"outages": early}, f"{len(found)} intervals of an hour or more with idle cores beside a "
        f"waiting job that fitted them (merged, dated, the largest), {len(early)} of them "
        "begun before the validation slice (those replayed; the slice is replayed, as later "
        "months will be, without knowing its own)")])]
    trials = [("capacity", [ev.Candidate({}, "lost capacity tried against the full machine")]),
              *_candidates(workload, cluster, cuts, delay), *(outages if early else [])]
    for name, alternatives in trials:
        tried = [(c, *search.fit_capacity(replace(site, **c.values))) for c in alternatives]
        cand, trial_site, tfig = max(tried, key=lambda t: objective(t[2]["validation"]))
        if len(tried) > 1:
            cand = replace(cand, evidence=f"{cand.evidence} (the replay of the validation "
                           f"slice preferred it to {len(tried) - 1} other profile(s) the "
                           "order supports)")
        gain = objective(tfig["validation"]) - objective(figures["validation"])
        kept = (gain >= cfg.min_gain and better_fit(tfig["validation"], figures["validation"])
                and (name != "capacity" or trial_site.availability < 1.0))
        steps.append({"element": name, "kept": kept,
                      "objective_validation": objective(tfig["validation"]),
                      "validation": brief(tfig["validation"]),
                      "out_of_sample": brief({})})
        if kept:
            site, figures = trial_site, tfig
            evidence[name] = (f"{cand.evidence}; kept: on the validation slice it made the "
                              "|mean-wait error| smaller without losing Spearman "
                              f"(score {gain:+.3f})")
        elif name != "capacity":
            evidence[name] = (f"{cand.evidence}; not kept: on the validation slice it did not "
                              "make the |mean-wait error| smaller without losing Spearman "
                              f"(score {gain:+.3f})")
    final = search.parts(site, "all")
    oos = final["oos"]
    for step in steps:
        if step["kept"]:
            step["out_of_sample"] = brief(oos)
    evidence["capacity"] = (
        f"{evidence.pop('outages', f'{len(found)} outages found, none kept')}. Availability "
        f"{site.availability:.3f} for what the outages do not explain: of those that bring "
        "the earlier fitted jobs' mean wait near the log's, the one whose replay of the later "
        "fitted jobs scored best (1.0: lost capacity did not bring them closer)")
    for name in ("pools", "limits", "holds", "nodes"):
        evidence.setdefault(name, "no evidence in the fitted part of the log")
    evidence.setdefault("priority", "FCFS: no multifactor order explains the logged start "
                        "order of jobs that waited together (validation slice) clearly better "
                        "than FCFS, or too few such jobs")
    evidence.setdefault("cadence", "backfilling kept as EASY; the scheduling interval is not "
                        "fitted")
    without = _without_each(workload, cluster, site, split, delay)
    provenance = {"source": source, "fit_frac": cfg.fit_frac, "jobs": len(workload),
                  "replays": search.runs + len(without),
                  "oos_spearman_before": before["spearman"],
                  "oos_spearman_after": oos["spearman"],
                  "oos_mean_wait_rel_error_before": before["mean_wait_rel_error"],
                  "oos_mean_wait_rel_error_after": oos["mean_wait_rel_error"],
                  "oos_trust_before": before["trust"], "oos_trust_after": oos["trust"]}
    site = replace(site, evidence=evidence,
                   provenance={k: v for k, v in provenance.items() if v is not None})
    return Calibration(site=site, before=before, after=oos, ablation=steps, without=without,
                       wall_s=time.perf_counter() - tic)
