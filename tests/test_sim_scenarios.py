"""Hand-built scenarios whose schedules were worked out by hand, for every policy and
backfilling mode, on every engine: compiled, reference, and compiled-stepped with the policy
called from Python.

Jobs are (submit, run, requested walltime, processors[, user]); machines have one core per
node. The derivations are in the comments: "t=100: j4 starts (free 1)" means that at t=100
job j4 starts and 1 core stays free.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from sim_cases import workload

from hpcpolicy.cluster import ClusterSpec
from hpcpolicy.policies import QueueView, ScoreKernel, get_policy, policy_names
from hpcpolicy.sim import RunningJobs, SimConfig, SimResult, simulate
from hpcpolicy.workload import Workload

ENGINES = ("fast", "reference", "stepped")
MODES = ("none", "easy", "conservative")


class AsPython:
    """A heuristic dressed as an arbitrary Python policy, which forces the stepped path."""

    def __init__(self, name: str) -> None:
        self.name = name

    def bind(self, w: Workload, cluster: ClusterSpec, cfg: SimConfig) -> Any:
        kernel = get_policy(self.name).bind(w, cluster, cfg)

        class Scorer:
            def scores(self, view: QueueView) -> np.ndarray:
                return ScoreKernel.scores(kernel, view)

        return Scorer()


def run(w: Workload, cores: int, engine: str, **cfg: Any) -> SimResult:
    cluster = ClusterSpec.homogeneous(cores)
    if engine == "stepped":
        config = SimConfig(check=True, **cfg)
        return simulate(w, cluster, config, policy=AsPython(config.policy))
    return simulate(w, cluster, SimConfig(engine=engine, check=True, **cfg))


# ---------------------------------------------------------------- every policy x mode
# S1, 4 cores. j0 holds the machine until t=100; j1..j4 arrive meanwhile and all wait.
S1 = [(0, 100, 100, 4), (10, 30, 40, 1), (20, 10, 20, 4), (30, 20, 60, 2), (40, 5, 10, 3)]
# At t=100 each policy orders j1..j4 (scores from the formulas in heuristics.py):
#   fcfs j1 j2 j3 j4 | lcfs j4 j3 j2 j1 | sjf (req 40 20 60 10) j4 j2 j1 j3
#   ljf j3 j1 j2 j4 | smallest (procs 1 4 2 3) j1 j3 j4 j2 | largest j2 j4 j3 j1
#   f1..f4: the 870*log10(s)-like term dominates at these small submit times -> fcfs order
#   wfp3 (w/r)^3*n = 11.4, 256, 3.2, 648 -> j4 j2 j1 j3, and still j2 j1 j3 at t=105
#   unicep w/(log2(max(n,2))*r) = 2.25, 2.0, 1.17, 3.79 -> j4 j1 j2 j3; at t=105 j2 before j3
#   fairshare with one user: the size term (1000*n/4) dominates the age term -> largest order
FCFS_S1 = {
    # none: t=100 j1 (free 3), j2 blocked; t=130 j2; t=140 j3; t=160 j4.
    "none": [0, 100, 130, 140, 160],
    # easy: t=100 j1; head j2 reserved at 140 (j1's request ends), extra 0; j3 runs past 140;
    # j4 (3 cores, 10 s) ends by 140: backfilled at 100. t=130 j2, t=140 j3.
    "easy": [0, 100, 130, 140, 100],
    # conservative: j2 -> [140,160), j3 -> [160,220), j4 fits [100,110) now; t=105 nothing
    # new; t=130 j1 ends, j2 starts, j3 re-planned at 150; t=140 j2 ends, j3 starts.
    "conservative": [0, 100, 130, 140, 100],
}
LARGEST_S1 = {
    # none: t=100 j2 (free 0); t=110 j4 (free 1), j3 blocked; t=115 j3, j1.
    "none": [0, 115, 100, 115, 110],
    # easy: t=110 j4 starts; head j3 reserved at 120 with 2 extra: j1 (1 core, 40 s) uses
    # one; t=115 j3 starts.
    "easy": [0, 110, 100, 115, 110],
    # conservative: t=110 j4 [110,120), j3 -> [120,180), j1 fits [110,150) beside both.
    "conservative": [0, 110, 100, 115, 110],
}
EXPECTED_S1: dict[str, dict[str, list[int]]] = {
    "fcfs": FCFS_S1,
    "lcfs": {
        # none: t=100 j4 (free 1); t=105 j3 (free 2), j2 blocked; t=125 j2; t=135 j1.
        "none": [0, 135, 125, 105, 100],
        # easy: t=100 j4; head j3 reserved at 110 with 2 extra: j1 (1 core) takes one.
        # t=105 j3; t=130 j1 ends, j2 starts.
        "easy": [0, 100, 130, 105, 100],
        # conservative: j3 -> [110,170), j2 -> [170,190), j1 fits [100,140) now.
        "conservative": [0, 100, 130, 105, 100],
    },
    # t=100 j4 (free 1), head j2 reserved at 110 (extra 0): j1 would run past it. t=105 j2
    # (free 0); t=115 j1 and j3. Conservative plans the same: j2 [110,130), j1 and j3 130.
    "sjf": {mode: [0, 115, 105, 115, 100] for mode in MODES},
    "ljf": {
        # none: t=100 j3 (free 2), j1 (free 1), j2 blocked; t=130 j2; t=140 j4.
        "none": [0, 100, 130, 100, 140],
        # easy: t=120 j3 ends (free 3); head j2 reserved at 140; j4 (3 cores, 10 s) fits
        # and ends by 140: backfilled at 120. Conservative: j4 fits [120,130) too.
        "easy": [0, 100, 130, 100, 120],
        "conservative": [0, 100, 130, 100, 120],
    },
    # t=100 j1, j3 (free 1), j4 blocked (reserved at 160 with 1 extra; j2 does not fit);
    # t=120 j4 (free 0); t=130 j2. Conservative: j4 [160,170) then re-planned to 120.
    "smallest": {mode: [0, 100, 130, 100, 120] for mode in MODES},
    "largest": LARGEST_S1,
    "f1": FCFS_S1,
    "f2": FCFS_S1,
    "f3": FCFS_S1,
    "f4": FCFS_S1,
    # Same decisions as sjf at every pass (see the scores above).
    "wfp3": {mode: [0, 115, 105, 115, 100] for mode in MODES},
    # t=100 j4, j1 (free 0), head j2 reserved at 140 (extra 0); t=105 j3 fits but runs past
    # 140; t=130 j2 (scores at 130: j2 2.75, j3 1.67); t=140 j3.
    "unicep": {mode: [0, 100, 130, 140, 100] for mode in MODES},
    "fairshare": LARGEST_S1,
}


def test_every_policy_has_a_hand_built_case() -> None:
    assert set(EXPECTED_S1) == set(policy_names())


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("policy", sorted(EXPECTED_S1))
def test_policy_orders_s1(policy: str, mode: str, engine: str) -> None:
    r = run(workload(S1), 4, engine, policy=policy, backfill=mode)
    assert r.start.tolist() == EXPECTED_S1[policy][mode]


# S2: S1 shifted to t = 100000, where the submit-time terms of F1-F4 grow by only ~0.04 (f1),
# 1.1 (f2), 298 (f3) and 23 (f4) per 10 s, so the r-and-n terms decide:
#   f1 log10(r)*n + 870*log10(s): j1 1.60, j2 5.20+0.08, j3 3.56+0.11, j4 3.00+0.15 -> j1 j4 j3 j2
#   f2 sqrt(r)*n: 6.3+1.1, 17.9+2.2, 15.5+3.3, 9.5+4.4 -> j1 j4 j3 j2
#   f3 r*n: 40+298, 80+596, 120+893, 30+1191 -> j1 j2 j3 j4 (fcfs)
#   f4 r*sqrt(n): 40+23, 40+46, 84.9+69, 17.3+92 -> j1 j2 j4 j3
# (test_policies.py checks these orders against the formulas independently.)
S2 = [(s + 100000, run, req, p) for s, run, req, p in S1]
ORDER_J1_J4_J3_J2 = {
    # none: t=100 j1 (free 3), j4 (free 0), j3 blocked; t=105 j3; t=130 j2.
    # easy: j3 reserved at 110 (j4's end) with 1 extra, nothing else fits; same schedule.
    # conservative: j3 [110,170) then 105; j2 after j1 and j3: 130.
    mode: [0, 100, 130, 105, 100] for mode in MODES
}
EXPECTED_S2 = {
    "f1": ORDER_J1_J4_J3_J2,
    "f2": ORDER_J1_J4_J3_J2,
    "f3": FCFS_S1,
    "f4": {
        # none: t=100 j1, j2 blocked; t=130 j2; t=140 j4 (free 1), j3 blocked; t=145 j3.
        "none": [0, 100, 130, 145, 140],
        # easy: head j2 reserved at 140; j4 ends by then: backfilled at 100; j3 does not.
        "easy": [0, 100, 130, 140, 100],
        # conservative: j2 [140,160), j4 [100,110) now, j3 after j2.
        "conservative": [0, 100, 130, 140, 100],
    },
}


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("policy", sorted(EXPECTED_S2))
def test_f_policies_s2(policy: str, mode: str, engine: str) -> None:
    r = run(workload(S2), 4, engine, policy=policy, backfill=mode)
    assert (r.start - 100000 * (r.start > 0)).tolist() == EXPECTED_S2[policy][mode]


# ---------------------------------------------------------------- backfilling rules (FCFS)
# B1, 4 cores: j0 2 cores to 100; j1 (3 cores) waits for it: shadow 100, 1 extra core.
B1 = [(0, 100, 100, 2), (1, 50, 50, 3), (2, 200, 200, 1), (3, 200, 200, 1), (4, 50, 50, 1)]
EXPECTED_B1 = {
    # none: t=100 j1 (free 1), j2 (free 0); t=150 j3, j4.
    "none": ([0, 100, 100, 150, 150], [False] * 5),
    # easy: t=2 j2 runs past 100 but takes the extra core; t=3 j3 would need a second extra
    # core: waits; t=4 j4 ends by 100: backfilled. t=100 j1; t=150 j3.
    "easy": ([0, 100, 2, 150, 4], [False, False, True, False, True]),
    # conservative: j1 -> [100,150); j2 fits [2,202) beside it; j3 -> [150,350); j4 fits
    # [4,54).
    "conservative": ([0, 100, 2, 150, 4], [False, False, True, False, True]),
}


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("mode", MODES)
def test_easy_extra_resources_rule(mode: str, engine: str) -> None:
    r = run(workload(B1), 4, engine, backfill=mode)
    assert (r.start.tolist(), r.backfilled.tolist()) == EXPECTED_B1[mode]


# B2, 4 cores: j0 3 cores to 100; head j1 (2 cores) reserved at 100 with 2 extra; j2 needs
# the whole machine; j3 (1 core, 200 s) arrives at 3.
B2 = [(0, 100, 100, 3), (1, 50, 50, 2), (2, 10, 10, 4), (3, 200, 200, 1)]
EXPECTED_B2 = {
    # none: t=100 j1; t=150 j2; t=160 j3.
    "none": [0, 100, 150, 160],
    # easy protects only the head: j3 takes an extra core at t=3 and runs to 203, so j2
    # (4 cores) waits until 203.
    "easy": [0, 100, 203, 3],
    # conservative also protects j2's reservation [150,160): j3 waits until 160.
    "conservative": [0, 100, 150, 160],
}


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("mode", MODES)
def test_conservative_protects_the_second_job(mode: str, engine: str) -> None:
    assert run(workload(B2), 4, engine, backfill=mode).start.tolist() == EXPECTED_B2[mode]


# B3, 4 cores, equal timestamps: j0 ends at 10 when j1 and j2 arrive; j3 (0 s) at 15 when j1
# ends; j4 at 20 when j2 ends.
B3 = [(0, 10, 10, 4), (10, 5, 5, 4), (10, 5, 5, 1), (15, 0, 1, 4), (20, 5, 5, 4)]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("mode", MODES)
def test_equal_timestamps_fcfs(mode: str, engine: str) -> None:
    # t=10: j0's end frees the machine before j1, j2 are submitted: j1 starts at 10.
    # t=15: j1 ends: j2 (free 3); j3 blocked. t=20: j2 ends: j3 starts and ends at 20,
    # then a second pass at 20 starts j4.
    r = run(workload(B3), 4, engine, backfill=mode)
    assert r.start.tolist() == [0, 10, 15, 20, 20]
    assert r.end.tolist() == [10, 15, 20, 20, 25]


@pytest.mark.parametrize("engine", ENGINES)
def test_equal_timestamps_lcfs_breaks_ties_by_arrival(engine: str) -> None:
    # t=10: j1, j2 submitted together; j2 is the later arrival: it starts (free 3), j1 waits.
    # t=15: j2 ends; j3 arrives and goes first (0 s, ends at 15); second pass: j1 starts.
    # t=20: j1 ends, j4 arrives and starts.
    r = run(workload(B3), 4, engine, policy="lcfs")
    assert r.start.tolist() == [0, 15, 10, 15, 20]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("mode", MODES)
def test_a_job_that_never_fits_is_reported_and_blocks_nobody(mode: str, engine: str) -> None:
    # j0 wants 5 of 4 cores: never started; j1 starts at 1; j2 waits for j1 (t=11).
    w = workload([(0, 10, 10, 5), (1, 10, 10, 4), (2, 10, 10, 1)])
    r = run(w, 4, engine, backfill=mode)
    assert r.start.tolist() == [-1, 1, 11]
    assert r.end.tolist() == [-1, 11, 21]
    assert r.never_fits.tolist() == [True, False, False]
    assert (r.stats["never_fits"], r.stats["never_fits_ids"]) == (1, ["a"])


# B5, 4 cores: j2 requests 50 s but runs 150 s.
B5 = [(0, 100, 100, 2), (1, 10, 10, 4), (2, 150, 50, 2)]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("mode", ["easy", "conservative"])
def test_requested_shorter_than_actual_runtime(mode: str, engine: str) -> None:
    # Planning believes j2 ends at 52, before the head's reservation at 100, so j2 is
    # backfilled at 2; it really runs to 152 and delays the head j1 to 152. That is not an
    # invariant violation (check=True is on): the job ran past its requested walltime.
    r = run(workload(B5), 4, engine, backfill=mode)
    assert r.start.tolist() == [0, 152, 2]
    assert r.killed.tolist() == [False] * 3


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("mode", ["easy", "conservative"])
def test_kill_at_limit(mode: str, engine: str) -> None:
    # j2 is ended at its limit (t=52); the head j1 keeps its reservation at 100.
    r = run(workload(B5), 4, engine, backfill=mode, kill_at_limit=True)
    assert r.start.tolist() == [0, 100, 2]
    assert r.end.tolist() == [100, 110, 52]
    assert r.killed.tolist() == [False, False, True]


@pytest.mark.parametrize("engine", ENGINES)
def test_without_backfilling_the_underestimate_changes_nothing(engine: str) -> None:
    r = run(workload(B5), 4, engine)
    assert (r.start.tolist(), r.end.tolist()) == ([0, 100, 110], [100, 110, 260])


# ---------------------------------------------------------------- fair share, warm starts
@pytest.mark.parametrize("engine", ENGINES)
def test_fairshare_favours_the_user_with_less_past_usage(engine: str) -> None:
    # One core. User 0's j0 runs to 100; at t=100 user 0 holds all past usage: shares
    # (1, 0) with two users, fair-share factors 2^(-2*1) = 0.25 and 1. Priorities:
    # j1 (user 0) 10000*0.25 + age + 1000 = ~3500, j2 (user 1) 10000 + age + 1000 = ~11000:
    # j2 goes first although submitted later. FCFS would run j1 first.
    w = workload([(0, 100, 100, 1, 0), (1, 10, 10, 1, 0), (2, 10, 10, 1, 1)], n_users=2)
    assert run(w, 1, engine, policy="fairshare").start.tolist() == [0, 110, 100]
    assert run(w, 1, engine, policy="fcfs").start.tolist() == [0, 100, 110]


@pytest.mark.parametrize("engine", ["fast", "reference"])
def test_warm_start_with_a_job_past_its_request(engine: str) -> None:
    # 2 cores; a running job holds 1 core until 80 but requested only until 40. Head j0
    # (2 cores) is reserved at 40; j1 (1 core, 30 s) ends by then: backfilled at 0. The
    # running job overruns, so j0 starts at 80 — later than its reservation, which check=True
    # accepts because a job ran past its request.
    one = np.array([1])
    running = RunningJobs(procs=one, nodes=one * 0, gpus=one * 0, end=np.array([80]),
                          req_end=np.array([40]))
    w = workload([(0, 10, 10, 2), (0, 30, 30, 1)])
    r = simulate(w, ClusterSpec.homogeneous(2),
                 SimConfig(backfill="easy", engine=engine, check=True), running=running)
    assert r.start.tolist() == [80, 0]
    assert r.backfilled.tolist() == [False, True]
