"""The node-level GPU engine: allocators, speeds, the spread penalty, and equality with the
pooled simulator when placement cannot matter."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sim_cases import job_lists, workload

from hpcpolicy.cluster import ClusterSpec, GpuModel, NodeGroup
from hpcpolicy.errors import ConfigError
from hpcpolicy.gpu.placement import BestFit, FirstAvailable, TopologyAware
from hpcpolicy.gpu.topology import Topology
from hpcpolicy.sim import SimConfig, simulate
from hpcpolicy.sim.types import RunningJobs
from hpcpolicy.workload import Workload

NODE_ALLOCATORS = ("first-available", "best-fit", "topology-aware")


def partition(speeds: tuple[float, float] = (1.0, 1.0), penalty: float = 0.0) -> ClusterSpec:
    """Two GPU types; the first spans two racks of 3 nodes, the second one rack of 2 nodes."""
    return ClusterSpec((
        NodeGroup("a-r1", 3, 8, gpus=4, gpu_type="a", gpu_speed=speeds[0], rack="r1"),
        NodeGroup("a-r2", 3, 8, gpus=4, gpu_type="a", gpu_speed=speeds[0], rack="r2"),
        NodeGroup("b-r3", 2, 16, gpus=8, gpu_type="b", gpu_speed=speeds[1], rack="r3"),
        NodeGroup("cpu", 2, 8),
    ), gpu=GpuModel(spread_penalty=penalty))


REPLAYS = {"w": job_lists(max_jobs=25, max_procs=40, gpus=True),
           "scale": st.sampled_from([1, 3, 5]),
           "policy": st.sampled_from(["fcfs", "sjf", "lcfs"]),
           "backfill": st.sampled_from(["none", "easy"]),
           "allocator": st.sampled_from(NODE_ALLOCATORS)}
"""Random replays: small workloads (GPU counts times ``scale``: up to 15, spread over
nodes), a policy, backfilling and a node allocator."""


def pooled(spec: ClusterSpec) -> ClusterSpec:
    """The same machine with one group per GPU type (what the pooled engine sees)."""
    return ClusterSpec((NodeGroup("a", 6, 8, gpus=4, gpu_type="a"),
                        NodeGroup("b", 2, 16, gpus=8, gpu_type="b"),
                        NodeGroup("cpu", 2, 8)))


@settings(max_examples=60, deadline=None)
@given(**REPLAYS)
def test_penalty_off_equals_the_pooled_simulator(w: Workload, scale: int, policy: str,
                                                 backfill: str, allocator: str) -> None:
    w = dataclasses.replace(w, gpus=w.gpus * scale)
    cfg = SimConfig(policy=policy, backfill=backfill)
    base = simulate(w, pooled(partition()), cfg)
    gpu = simulate(w, partition(), dataclasses.replace(cfg, allocator=allocator, check=True))
    assert gpu.start.tolist() == base.start.tolist()
    assert gpu.end.tolist() == base.end.tolist()
    assert gpu.never_fits.tolist() == base.never_fits.tolist()
    assert gpu.stats["engine"] == "gpu"


def test_allocators_choose_different_nodes() -> None:
    free = np.array([4000, 1000, 3000, 4000, 2000, 4000])
    racks = np.array([0, 0, 0, 1, 1, 1])
    assert FirstAvailable().place(free, racks, 3, 1000).tolist() == [
        3000, 0, 0, 0, 0, 0]
    assert BestFit().place(free, racks, 3, 1000).tolist() == [0, 0, 3000, 0, 0, 0]
    # 6 GPUs: best-fit takes the two emptiest nodes anywhere; topology-aware keeps them in a
    # rack, the one that needs the fewest nodes and has the least to spare.
    assert np.count_nonzero(BestFit().place(free, racks, 6, 1000)) == 2
    topo = TopologyAware().place(free, racks, 6, 1000)
    assert len(set(racks[topo > 0].tolist())) == 1
    assert TopologyAware().place(free, racks, 19, 1000) is None
    # A fraction of a GPU stays on one node; first-available takes the first that holds it.
    assert FirstAvailable().place(np.array([300, 800]), racks[:2], 1, 460).tolist() == [0, 460]


def test_topology_aware_beats_first_available_with_the_spread_penalty() -> None:
    # Small jobs fragment the nodes; 8-GPU jobs then spread under first-available.
    jobs = []
    for i in range(60):
        g = 8 if i % 3 == 0 else 1 + i % 3
        jobs.append((i * 20, 600 + 37 * (i % 7), 900, 1, 0, g))
    w = workload(jobs)
    spec = partition(penalty=0.5)
    out = {a: simulate(w, spec, SimConfig(policy="fcfs", allocator=a, check=True))
           for a in ("first-available", "topology-aware")}
    spread = {a: int(r.placement["spread_s"].sum()) for a, r in out.items()}
    assert spread["topology-aware"] < spread["first-available"]
    mean_end = {a: float((r.end - w.submit).mean()) for a, r in out.items()}
    assert mean_end["topology-aware"] < mean_end["first-available"]


def test_speeds_scale_gpu_jobs_only() -> None:
    w = workload([(0, 100, 500, 1, 0, 4), (0, 100, 500, 1, 0, 0)])
    w = dataclasses.replace(w, gpu_type=np.array([0, -1], dtype=np.int32), gpu_types=("b",))
    # Logged on type b (speed 2) and placed on type a (speed 0.5): 4x longer.
    r = simulate(w, partition(speeds=(0.5, 2.0)), SimConfig(allocator="first-available"))
    assert (r.end - r.start).tolist() == [400, 100]
    assert r.placement["speed_factor"].tolist() == [4.0, 1.0]
    # Sensitivity 0 for the job's partition: the GPU does not limit it.
    spec = dataclasses.replace(partition(speeds=(0.5, 2.0)),
                               gpu=GpuModel(partition_sensitivity=(("p", 0.0),)))
    w = dataclasses.replace(w, partitions=("p",))
    r = simulate(w, spec, SimConfig(allocator="first-available"))
    assert (r.end - r.start).tolist() == [100, 100]


def test_kill_at_limit_cuts_slowed_jobs_at_their_request() -> None:
    w = workload([(0, 100, 150, 1, 0, 4)])
    r = simulate(w, partition(speeds=(0.5, 1.0)),
                 SimConfig(allocator="best-fit", kill_at_limit=True))
    assert (r.end - r.start).tolist() == [150]
    assert r.killed.tolist() == [True]


@settings(max_examples=60, deadline=None)
@given(**REPLAYS)
def test_no_replay_without_slowdown_passes_the_utilisation_bound(
        w: Workload, scale: int, policy: str, backfill: str, allocator: str) -> None:
    from hpcpolicy.sim.gpu_metrics import gpu_summary, gpu_utilization_bound

    w = dataclasses.replace(w, gpus=w.gpus * scale)
    cfg = SimConfig(policy=policy, backfill=backfill, allocator=allocator)
    util = gpu_summary(w, simulate(w, partition(), cfg), partition())["gpu_utilization"]
    bound = gpu_utilization_bound(w, partition(), cfg)
    if bound is None:
        assert not util
    else:
        assert util is None or util <= bound + 1e-12


def test_utilisation_bound_is_reached_and_passed_only_by_slowing_jobs() -> None:
    from hpcpolicy.sim.gpu_metrics import gpu_summary, gpu_utilization_bound

    # Both start at once on type a (4 GPUs a node); b's 6 GPUs take two nodes of one rack
    # (topology-aware), so the spread penalty slows b but not a, whose end is the span's.
    w = workload([(0, 1000, 1000, 1, 0, 2), (0, 100, 100, 1, 0, 6)])
    cfg = SimConfig(allocator="topology-aware")
    bound = (2 * 1000 + 6 * 100) / (40 * 1000)
    for penalty, b_run in ((0.0, 100), (0.5, 150)):
        spec = partition(penalty=penalty)
        assert gpu_utilization_bound(w, spec, cfg) == pytest.approx(bound)
        got = gpu_summary(w, simulate(w, spec, cfg), spec)["gpu_utilization"]
        assert got == pytest.approx((2 * 1000 + 6 * b_run) / (40 * 1000))
    assert got > bound


def test_fractional_gpus_share_a_node() -> None:
    w = workload([(0, 100, 100, 1, 0, 1)] * 3)
    w = dataclasses.replace(w, gpu_share=np.array([400, 500, 700]))
    spec = ClusterSpec((NodeGroup("g", 1, 8, gpus=1, gpu_type="t4"),))
    r = simulate(w, spec, SimConfig(allocator="topology-aware"))
    assert r.start.tolist() == [0, 0, 100]   # 0.4 + 0.5 fit on one GPU; 0.7 waits
    assert r.placement["gpu_milli"].tolist() == [400, 500, 700]


def test_metrics_report_fragmentation_and_spread() -> None:
    from hpcpolicy.sim.gpu_metrics import gpu_summary

    w = workload([(0, 100, 100, 1, 0, 1), (0, 100, 100, 1, 0, 6)])
    r = simulate(w, partition(), SimConfig(allocator="first-available"))
    assert r.placement["nodes"].tolist() == [1, 2]
    assert 0 < r.stats["gpu_fragmentation"] < 1
    s = gpu_summary(w, r, partition())
    assert s["effective_gpu_utilization"] == pytest.approx(s["gpu_utilization"])
    # Logged on type b (speed 2), placed on type a (speed 1): it holds 16 of the 40 GPUs for
    # twice its logged time, the whole span. The speed-weighted figure counts a's GPUs at
    # half the weight of b's: 16 x 1 / (24 x 1 + 16 x 2).
    w = dataclasses.replace(workload([(0, 100, 900, 1, 0, 16)]),
                            gpu_type=np.array([0], dtype=np.int32), gpu_types=("b",))
    spec = partition(speeds=(1.0, 2.0))
    s = gpu_summary(w, simulate(w, spec, SimConfig(allocator="best-fit")), spec)
    assert s["gpu_utilization"] == pytest.approx(16 / 40)
    assert s["effective_gpu_utilization"] == pytest.approx(16 / 56)


def test_gpu_engine_refuses_what_it_does_not_model() -> None:
    w = workload([(0, 10, 10, 1, 0, 1)])
    with pytest.raises(ConfigError, match="exclusive"):
        simulate(w, partition(), SimConfig(allocator="best-fit", exclusive_nodes=True))
    running = RunningJobs(end=np.array([5]), req_end=np.array([5]), procs=np.array([1]),
                          nodes=np.array([0]), gpus=np.array([0]))
    with pytest.raises(ConfigError, match="empty machine"):
        simulate(w, partition(), SimConfig(allocator="best-fit"), running=running)
    bad = ClusterSpec((NodeGroup("x", 1, 8, gpus=4, gpu_type="a", gpu_speed=1.0),
                       NodeGroup("y", 1, 8, gpus=4, gpu_type="a", gpu_speed=2.0)))
    with pytest.raises(ConfigError, match="one type has one speed"):
        Topology.from_cluster(bad)


class _Pick:
    """A placer that always takes candidate ``k`` (or the last one, for k = -1)."""

    def __init__(self, k: int) -> None:
        self.k = k
        self.seen = 0

    def choose(self, view: Any) -> int:
        self.seen += 1
        assert view.candidates and all(c.nodes >= 0 for c in view.candidates)
        return self.k if self.k >= 0 else len(view.candidates) - 1


class _Placing:
    """A policy with a placer, as a learned two-agent scheduler is."""

    name = "fcfs-with-placer"

    def __init__(self, placer: _Pick) -> None:
        self.placer = placer

    def bind(self, workload: Workload, cluster: ClusterSpec, cfg: SimConfig) -> Any:
        from hpcpolicy.policies import get_policy

        return get_policy("fcfs").bind(workload, cluster, cfg)

    def bind_placer(self, workload: Workload, cluster: ClusterSpec) -> _Pick:
        return self.placer


def test_a_placer_chooses_among_the_heuristics_candidates() -> None:
    jobs = [(i * 30, 500 + 50 * (i % 4), 900, 1, 0, (1, 2, 4, 8)[i % 4]) for i in range(30)]
    w = workload(jobs)
    spec = partition(speeds=(1.0, 2.0), penalty=0.2)
    # Candidate 0 is the first pool's first-available placement: the allocator's own choice.
    first = _Pick(0)
    a = simulate(w, spec, SimConfig(), policy=_Placing(first))
    b = simulate(w, spec, SimConfig(allocator="first-available"))
    assert first.seen >= len(w)
    assert a.start.tolist() == b.start.tolist() and a.end.tolist() == b.end.tolist()
    # The last candidate is often in the faster pool: the schedule changes.
    c = simulate(w, spec, SimConfig(check=True), policy=_Placing(_Pick(-1)))
    assert c.end.tolist() != b.end.tolist()
    with pytest.raises(ConfigError, match="chose candidate 99"):
        simulate(w, spec, SimConfig(), policy=_Placing(_Pick(99)))
