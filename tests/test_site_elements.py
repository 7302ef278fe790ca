"""calibrate on logs built to have one element each (the priority order, holds, the node
size): replay a generated workload in a known world, read the starts back as the log's, and
check that the fit finds that world. Limits, partitions, an outage, a larger machine and
backfilling off are in test_site.py."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from test_site import _as_logged, _workload

from hpcpolicy.cluster import ClusterSpec
from hpcpolicy.policies.settings import FairshareConfig
from hpcpolicy.sim.engine import simulate
from hpcpolicy.sim.types import SimConfig
from hpcpolicy.site.calibrate import CalibrateConfig, calibrate
from hpcpolicy.site.order import concordance, find_priority, order_pairs
from hpcpolicy.workload import Workload
from hpcpolicy.world import SiteModel, apply_site

CUTS = (int(3000 * 0.7 * 0.7), int(3000 * 0.7))
"""Validation slice of a 3000-job log under calibrate's default split."""
WEEK = 7 * 86400


def _multifactor(fairshare: float, size: float) -> SimConfig:
    return SimConfig(policy="fairshare", backfill="easy",
                     fairshare=FairshareConfig(weight_fairshare=fairshare, weight_age=1000.0,
                                               weight_size=size))


def test_the_start_order_gives_multifactor_weights() -> None:
    """A log scheduled with fair share: the weights fitted to its start order explain the
    held-out order about as well as the true weights, and far better than FCFS; calibrate
    keeps a multifactor order."""
    logged = _as_logged(_workload(), ClusterSpec.homogeneous(64), _multifactor(30000, 0))
    profiles = find_priority(logged, CUTS, 64)
    assert profiles and all(p.values["priority"] == "fairshare" for p in profiles)
    found = profiles[0]  # the weights fitted to the order
    held = order_pairs(logged, *CUTS, 64, WEEK, WEEK)
    fitted = tuple(found.values[k] for k in ("weight_fairshare", "weight_age", "weight_size"))
    truth = concordance(held, (30000.0, 1000.0, 0.0))
    assert concordance(held, fitted) >= truth - 0.02
    assert truth - concordance(held, (0.0, 1000.0, 0.0)) > 0.3
    assert "FCFS" in found.evidence
    fit = calibrate(logged, ClusterSpec.homogeneous(64), CalibrateConfig(bisect_steps=2))
    assert fit.site.elements() == ["priority"]
    assert fit.after["spearman"] > fit.before["spearman"]


def test_an_fcfs_log_gives_no_priority_element() -> None:
    logged = _as_logged(_workload(), ClusterSpec.homogeneous(64), SimConfig(backfill="easy"))
    assert find_priority(logged, CUTS, 64) == []
    fit = calibrate(logged, ClusterSpec.homogeneous(64), CalibrateConfig(bisect_steps=1))
    assert fit.site.priority == "fcfs"
    assert fit.site.evidence["priority"].startswith("FCFS: no multifactor order")


def test_calibrate_finds_holds_from_eligible_times() -> None:
    """A fifth of the jobs held 1-4 hours after submit (sacct Eligible): the replay from the
    eligible time is kept, and reproduces the log."""
    w = _workload()
    cluster = ClusterSpec.homogeneous(64)
    rng = np.random.default_rng(5)
    delay = np.where(rng.random(len(w)) < 0.2, rng.integers(3600, 4 * 3600, len(w)), 0)
    world = apply_site(SiteModel(use_eligible=True), w, cluster, delay=delay)
    start = np.empty(len(w), dtype=np.int64)
    start[world.order] = simulate(world.workload, world.cluster, world.cfg).start
    fit = calibrate(replace(w, logged_start=start), cluster, CalibrateConfig(bisect_steps=2),
                    delay=delay.astype(np.int64))
    assert fit.site.use_eligible and fit.site.elements() == ["holds"]
    assert fit.after["spearman"] > 0.99 > fit.before["spearman"]


def test_calibrate_finds_the_node_size_from_job_sizes() -> None:
    """Every job holds whole 8-core nodes: the node size is found (and listed with its
    evidence) though the header describes 1-core nodes."""
    w = _workload()
    w = replace(w, procs=np.minimum(w.procs * 8, 64))
    whole = ClusterSpec.homogeneous(64, nodes=8)
    logged: Workload = _as_logged(w, whole, SimConfig(backfill="easy", exclusive_nodes=True))
    fit = calibrate(logged, ClusterSpec.homogeneous(64), CalibrateConfig(bisect_steps=1))
    assert "multiple of 8 cores" in fit.site.evidence["nodes"]


def test_calibrate_finds_the_missing_capacity() -> None:
    """A log scheduled with only 80 % (or 70 %) of the machine there on average: the fitted
    availability is within 0.05 of it, and the replay's mean wait comes close to the log's."""
    w = _workload()
    cluster = ClusterSpec.homogeneous(64)
    for share in (0.8, 0.7):
        world = apply_site(SiteModel(availability=share), w, cluster)
        start = simulate(world.workload, world.cluster, world.cfg).start
        fit = calibrate(replace(w, logged_start=start), cluster, CalibrateConfig(bisect_steps=3))
        # the idle cores beside waiting jobs may be kept as outages where they fit the
        # validation slice better; the availability stands for the rest
        assert set(fit.site.elements()) <= {"capacity", "outages"}
        assert share - 0.05 <= fit.site.availability < 1.0
        assert abs(fit.after["mean_wait_rel_error"]) < 0.1 < abs(fit.before["mean_wait_rel_error"])
