"""Policies: the registry, each heuristic's formula, and the fair-share usage."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sim_cases import workload

from hpcpolicy.cluster import ClusterSpec
from hpcpolicy.errors import ConfigError
from hpcpolicy.policies import HEURISTICS, Policy, QueueView, ScoreKernel, get_policy, policy_names
from hpcpolicy.policies.settings import FairshareConfig
from hpcpolicy.sim.fairshare import DecayedUsage
from hpcpolicy.sim.types import SimConfig

CLUSTER = ClusterSpec.homogeneous(4)
# (submit, run, req, procs): the S2 jobs of test_sim_scenarios.py without j0.
JOBS = [(100010, 30, 40, 1), (100020, 10, 20, 4), (100030, 20, 60, 2), (100040, 5, 10, 3)]


def view(w: object, now: int, share: list[float] | None = None) -> QueueView:
    n = len(w)  # type: ignore[arg-type]
    return QueueView(now=now, jobs=np.arange(n), workload=w,  # type: ignore[arg-type]
                     free=np.zeros((1, 4), np.int64), capacity=np.array([[4, 0, 0, 4]]),
                     fits_now=np.zeros(n, bool),
                     user_share=np.array(share if share is not None else [0.0]))


def order(name: str, jobs: list[tuple[int, ...]], now: int = 0, **kw: object) -> list[int]:
    w = workload(jobs, **kw)  # type: ignore[arg-type]
    scores = get_policy(name).bind(w, CLUSTER, SimConfig()).scores(view(w, now))
    return np.argsort(scores, kind="stable").tolist()


def test_registry_lists_every_heuristic() -> None:
    assert policy_names() == tuple(HEURISTICS)
    assert {"fcfs", "lcfs", "sjf", "ljf", "smallest", "largest", "f1", "f2", "f3", "f4",
            "wfp3", "unicep", "fairshare"} == set(policy_names())
    assert all(isinstance(get_policy(n), Policy) for n in policy_names())


def test_unknown_policy_lists_the_valid_names() -> None:
    with pytest.raises(ConfigError) as err:
        get_policy("sjff")
    msg = str(err.value)
    assert "'sjff'" in msg and all(n in msg for n in policy_names())


def test_names_are_case_insensitive() -> None:
    assert get_policy(" SJF ").name == "sjf"


def _f(name: str, r: float, n: float, s: float) -> float:
    """Carastan-Santos & de Camargo (SC17), written out independently of heuristics.py."""
    lg = math.log10(s)
    return {"f1": math.log10(r) * n + 870 * lg, "f2": math.sqrt(r) * n + 25600 * lg,
            "f3": r * n + 6860000 * lg, "f4": r * math.sqrt(n) + 530000 * lg}[name]


@pytest.mark.parametrize("name, expected", [("f1", [0, 3, 2, 1]), ("f2", [0, 3, 2, 1]),
                                            ("f3", [0, 1, 2, 3]), ("f4", [0, 1, 3, 2])])
def test_f_functions(name: str, expected: list[int]) -> None:
    w = workload(JOBS)
    k = get_policy(name).bind(w, CLUSTER, SimConfig())
    by_hand = [_f(name, req, n, s) for s, _, req, n in JOBS]
    assert k.kind == "static"
    assert np.allclose(k.a, by_hand, rtol=1e-12)
    assert order(name, JOBS) == expected  # the orders test_sim_scenarios.py relies on


def test_f_functions_treat_zero_walltime_and_submit_as_one_second() -> None:
    w = workload([(0, 5, 0, 2)])
    assert get_policy("f1").bind(w, CLUSTER, SimConfig()).a.tolist() == [0.0]


@pytest.mark.parametrize("name, expected", [
    ("fcfs", [0, 1, 2, 3]), ("lcfs", [3, 2, 1, 0]), ("sjf", [3, 1, 0, 2]),
    ("ljf", [2, 0, 1, 3]), ("smallest", [0, 2, 3, 1]), ("largest", [1, 3, 2, 0]),
])
def test_simple_orders(name: str, expected: list[int]) -> None:
    assert order(name, JOBS) == expected


def test_ties_keep_submit_order() -> None:
    same = [(0, 10, 10, 1), (0, 10, 10, 1), (5, 10, 10, 1)]
    for name in ("fcfs", "sjf", "smallest", "f1", "wfp3", "unicep", "fairshare"):
        assert order(name, same, now=10) == [0, 1, 2], name
    assert order("lcfs", same) == [2, 1, 0]


def test_wfp3_uses_the_time_waited_so_far() -> None:
    # At now = 100: w = 90, 80 with r = 40, 20 and n = 1, 4: (90/40)^3 = 11.4 and
    # (80/20)^3 * 4 = 256 -> the second job first. At now = 20: w = 10 and 0 -> the first.
    jobs = [(10, 30, 40, 1), (20, 10, 20, 4)]
    assert order("wfp3", jobs, now=100) == [1, 0]
    assert order("wfp3", jobs, now=20) == [0, 1]
    w = workload(jobs)
    s = get_policy("wfp3").bind(w, CLUSTER, SimConfig()).scores(view(w, 100))
    assert s == pytest.approx([-(90 / 40) ** 3 * 1, -(80 / 20) ** 3 * 4])


def test_unicep_counts_one_processor_jobs_as_two() -> None:
    w = workload([(0, 30, 40, 1), (0, 10, 20, 4), (0, 5, 10, 3)])
    s = get_policy("unicep").bind(w, CLUSTER, SimConfig()).scores(view(w, 60))
    assert s == pytest.approx([-60 / (1 * 40), -60 / (2 * 20), -60 / (math.log2(3) * 10)])


def test_fairshare_priority_by_hand() -> None:
    fs = FairshareConfig()
    w = workload([(0, 10, 10, 1, 0), (0, 10, 10, 4, 1)], n_users=2)
    k = get_policy("fairshare").bind(w, CLUSTER, SimConfig(fairshare=fs))
    assert isinstance(k, ScoreKernel) and k.kind == "fairshare"
    s = k.scores(view(w, 3600, share=[0.75, 0.25]))
    age = 3600 / fs.max_age_s
    p0 = fs.weight_fairshare * 2 ** (-2 * 0.75) + fs.weight_age * age + fs.weight_size * 1 / 4
    p1 = fs.weight_fairshare * 2 ** (-2 * 0.25) + fs.weight_age * age + fs.weight_size * 4 / 4
    assert s == pytest.approx([-p0, -p1])


def test_decayed_usage_halves_every_half_life() -> None:
    # One core-second charged at t in [0, 1), another in [h, h + 1): the later one counts
    # twice as much, so the shares are 1/3 and 2/3.
    h = 1000
    u = DecayedUsage(n_users=2, half_life_s=h)
    u.add(user=0, cores=1, start=0, end=1)
    u.add(user=1, cores=1, start=h, end=h + 1)
    assert u.shares() == pytest.approx([1 / 3, 2 / 3], rel=1e-9)


def test_decayed_usage_survives_centuries_of_half_lives() -> None:
    # 2000 half-lives would overflow 2^t; the rescaling keeps the shares exact.
    h = 10
    u = DecayedUsage(n_users=2, half_life_s=h)
    u.add(user=0, cores=1, start=0, end=1)
    u.add(user=1, cores=3, start=20000, end=20001)
    u.add(user=0, cores=1, start=20000, end=20001)
    assert u.shares() == pytest.approx([0.25, 0.75], rel=1e-9)


def test_fairshare_config_is_validated() -> None:
    with pytest.raises(ConfigError, match="half_life_s"):
        FairshareConfig(half_life_s=0)
    with pytest.raises(ConfigError, match="weight_age"):
        FairshareConfig(weight_age=-1)
