"""Property tests over random workloads: the engines agree, the invariants hold, the checks
catch broken schedules."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sim_cases import clusters, job_lists, running_jobs, workload
from test_sim_scenarios import AsPython

from hpcpolicy.cluster import ClusterSpec
from hpcpolicy.errors import SimulationError
from hpcpolicy.policies import policy_names
from hpcpolicy.sim import SimConfig, SimResult, simulate
from hpcpolicy.sim import reference as reference_module
from hpcpolicy.sim.backfill import easy_backfill
from hpcpolicy.sim.capacity import Outage
from hpcpolicy.sim.checks import check_schedule
from hpcpolicy.sim.prepare import prepare
from hpcpolicy.workload import Workload

MODES = ("none", "easy", "conservative")
FAST = settings(max_examples=30, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def schedule(r: SimResult) -> dict[str, list[Any]]:
    return {k: getattr(r, k).tolist() for k in ("start", "end", "group", "backfilled",
                                                "killed", "never_fits", "alloc_cores")}


@FAST
@given(data=st.data(), cluster=clusters(), kill=st.booleans(), exclusive=st.booleans())
def test_compiled_and_reference_engines_give_identical_schedules(
        data: st.DataObject, cluster: ClusterSpec, kill: bool, exclusive: bool) -> None:
    w = data.draw(job_lists(gpus=len(cluster.groups) > 1))
    running = data.draw(running_jobs(cluster, exclusive))
    for policy in policy_names():
        for mode in MODES:
            cfg = SimConfig(policy=policy, backfill=mode, kill_at_limit=kill,
                            exclusive_nodes=exclusive, check=True)
            fast = simulate(w, cluster, cfg, running=running)
            ref = simulate(w, cluster, dataclasses.replace(cfg, engine="reference"),
                           running=running)
            assert schedule(fast) == schedule(ref), (policy, mode)


@FAST
@given(w=job_lists(), cluster=clusters(), policy=st.sampled_from(policy_names()),
       mode=st.sampled_from(MODES))
def test_a_python_policy_steps_to_the_same_schedule(w: Workload, cluster: ClusterSpec,
                                                     policy: str, mode: str) -> None:
    cfg = SimConfig(policy=policy, backfill=mode, check=True)
    inside = simulate(w, cluster, cfg)
    stepped = simulate(w, cluster, cfg, policy=AsPython(policy))
    assert stepped.stats["engine"] == "fast-stepped"
    assert schedule(inside) == schedule(stepped)


@FAST
@given(w=job_lists(), cores=st.integers(1, 8), policy=st.sampled_from(policy_names()),
       mode=st.sampled_from(["none", "easy"]))
def test_rlscheduler_engine_keeps_the_invariants_and_steps(w: Workload, cores: int,
                                                            policy: str, mode: str) -> None:
    cluster = ClusterSpec.homogeneous(cores)
    cfg = SimConfig(policy=policy, backfill=mode, compat="rlscheduler", check=True)
    inside = simulate(w, cluster, cfg)
    stepped = simulate(w, cluster, cfg, policy=AsPython(policy))
    assert schedule(inside) == schedule(stepped)
    assert stepped.stats["engine"] == "rlscheduler-stepped"


@FAST
@given(w=job_lists(), cluster=clusters(), mode=st.sampled_from(MODES))
def test_same_inputs_same_outputs(w: Workload, cluster: ClusterSpec, mode: str) -> None:
    cfg = SimConfig(policy="fairshare", backfill=mode)
    a, b = simulate(w, cluster, cfg), simulate(w, cluster, cfg)
    assert schedule(a) == schedule(b)
    drop = {"wall_s"}
    assert {k: v for k, v in a.stats.items() if k not in drop} == {
        k: v for k, v in b.stats.items() if k not in drop}


@FAST
@given(w=job_lists(), cores=st.integers(1, 8))
def test_fcfs_without_backfilling_is_in_submit_order(w: Workload, cores: int) -> None:
    r = simulate(w, ClusterSpec.homogeneous(cores))
    started = r.start[r.start >= 0]
    assert (np.diff(started) >= 0).all()


def test_the_easy_check_catches_a_backfill_that_delays_the_head(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # A broken EASY that starts every job that fits now. In B1 of test_sim_scenarios, it
    # starts j3 at t=3 on the head's extra core already taken by j2, which pushes the head's
    # reservation from 100 to 202: the reference engine's check must say so.
    def greedy(now: int, queue: list[int], need: Any, length: Any, free: Any,
               running: Any) -> Any:
        plan = easy_backfill(now, queue[:1], need, length, free, running)
        left = free.copy()
        starts = []
        for j in queue[1:]:
            if (need[j, 0] <= left[0]).all():
                left[0] -= need[j, 0]
                starts.append((j, 0))
        return dataclasses.replace(plan, starts=starts)

    monkeypatch.setattr(reference_module, "easy_backfill", greedy)
    w = workload([(0, 100, 100, 2), (1, 50, 50, 3), (2, 200, 200, 1), (3, 200, 200, 1),
                  (4, 50, 50, 1)])
    cfg = SimConfig(backfill="easy", engine="reference", check=True)
    with pytest.raises(SimulationError, match="EASY moved the reservation of head job b later"):
        simulate(w, ClusterSpec.homogeneous(4), cfg)


@pytest.mark.parametrize("tamper, message", [
    (lambda r: r.start.__setitem__(1, 5), "holds 6 cores, more than its 4"),
    (lambda r: r.start.__setitem__(1, -1), "job b .* never started although it fits"),
    (lambda r: r.start.__setitem__(2, 0), "starts at t=0 s, before its submit at t=1 s"),
    (lambda r: (r.start.__setitem__(2, 5), r.end.__setitem__(2, 6)),
     "FCFS without backfilling started job c at t=5 s, before job b"),
])
def test_check_schedule_catches_tampered_results(tamper: Any, message: str) -> None:
    w = workload([(0, 10, 10, 3), (0, 10, 10, 3), (1, 1, 1, 1)])
    cluster, cfg = ClusterSpec.homogeneous(4), SimConfig()
    r = simulate(w, cluster, cfg)
    assert r.start.tolist() == [0, 10, 10]
    r.end = r.end.copy()
    tamper(r)
    with pytest.raises(SimulationError, match=message):
        check_schedule(prepare(w, cluster, cfg), w, cluster, cfg, r)


class Recorder:
    """A Python policy (a heuristic underneath) that records every view it is shown."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.views: list[tuple[Any, ...]] = []

    def bind(self, w: Workload, cluster: ClusterSpec, cfg: SimConfig) -> Any:
        inner = AsPython(self.name).bind(w, cluster, cfg)
        views = self.views

        class Scorer:
            def scores(self, v: Any) -> Any:
                views.append((v.now, v.jobs.tolist(), v.free.tolist(), v.fits_now.tolist(),
                              v.running_cores.tolist(), v.running_req_end.tolist(),
                              v.user_share.tolist()))
                return inner.scores(v)

        return Scorer()


@FAST
@given(data=st.data(), cluster=clusters(), policy=st.sampled_from(policy_names()),
       mode=st.sampled_from(MODES))
def test_a_python_policy_sees_the_same_views_on_both_engines(
        data: st.DataObject, cluster: ClusterSpec, policy: str, mode: str) -> None:
    w = data.draw(job_lists(gpus=len(cluster.groups) > 1))
    running = data.draw(running_jobs(cluster))
    seen = []
    for engine in ("fast", "reference"):
        rec = Recorder(policy)
        simulate(w, cluster, SimConfig(policy=policy, backfill=mode, engine=engine),
                 running=running, policy=rec)
        seen.append(rec.views)
    assert seen[0] == seen[1]
    assert all(len(v[4]) == len(v[5]) for v in seen[0])


@st.composite
def outage_lists(draw: st.DrawFn, cluster: ClusterSpec) -> tuple[Outage, ...]:
    """0-3 random outages (cores or whole nodes of a random group), overlapping at times,
    some starting before the first submit, some while jobs hold everything."""
    out = []
    for _ in range(draw(st.integers(0, 3))):
        grp = draw(st.sampled_from(cluster.groups))
        start = draw(st.integers(0, 150))
        end = start + draw(st.integers(1, 100))
        if draw(st.booleans()):
            out.append(Outage(start=start, end=end, nodes=draw(st.integers(1, grp.count)),
                              group=grp.name))
        else:
            out.append(Outage(start=start, end=end,
                              cores=draw(st.integers(1, grp.count * grp.cores)),
                              group=grp.name))
    return tuple(out)


def _held_within_capacity(w: Workload, cluster: ClusterSpec, cfg: SimConfig,
                          running: Any, r: SimResult) -> None:
    """At every start, the cores held in its group plus the cores out of service there fit
    in the group: no job starts into an outage's debt."""
    prep = prepare(w, cluster, cfg, running)
    pre = prep.n + np.arange(prep.m)
    start = np.concatenate([r.start, np.zeros(prep.m, dtype=np.int64)])
    end = np.concatenate([r.end, prep.pre_end])
    group = np.concatenate([r.group, prep.pre_group])
    cores = np.concatenate([r.alloc_cores, prep.need[pre, prep.pre_group, 0]])
    names = [x.name for x in cluster.groups]
    for j in np.flatnonzero(r.start >= 0):
        t, g = int(r.start[j]), int(r.group[j])
        grp = cluster.groups[g]
        held = cores[(group == g) & (start >= 0) & (start <= t) & (end > t)].sum()
        out = sum(o.cores + o.nodes * grp.cores for o in cfg.outages
                  if names.index(o.group) == g and o.start <= t < o.end)
        assert held + out <= grp.count * grp.cores, (w.job_id[j], t, g)


@FAST
@given(data=st.data(), cluster=clusters(), kill=st.booleans(), exclusive=st.booleans())
def test_with_random_outages_the_engines_agree_and_never_start_into_a_debt(
        data: st.DataObject, cluster: ClusterSpec, kill: bool, exclusive: bool) -> None:
    w = data.draw(job_lists(gpus=len(cluster.groups) > 1))
    running = data.draw(running_jobs(cluster, exclusive))
    outages = data.draw(outage_lists(cluster))
    for policy in policy_names():
        for mode in MODES:
            cfg = SimConfig(policy=policy, backfill=mode, kill_at_limit=kill,
                            exclusive_nodes=exclusive, check=True, outages=outages)
            fast = simulate(w, cluster, cfg, running=running)
            ref = simulate(w, cluster, dataclasses.replace(cfg, engine="reference"),
                           running=running)
            stepped = simulate(w, cluster, cfg, running=running, policy=AsPython(policy))
            assert schedule(fast) == schedule(ref) == schedule(stepped), (policy, mode)
            _held_within_capacity(w, cluster, cfg, running, fast)
