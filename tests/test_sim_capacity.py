"""Capacity over time (hpcpolicy.sim.capacity): hand-built outages on every engine."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import pytest
from sim_cases import workload

from hpcpolicy.cluster import ClusterSpec, NodeGroup
from hpcpolicy.errors import ConfigError
from hpcpolicy.sim import SimConfig, simulate
from hpcpolicy.sim.backfill import (
    NO_RESERVATION,
    Profile,
    RunningSlot,
    conservative_backfill,
    easy_backfill,
    shadow_time,
)
from hpcpolicy.sim.capacity import Outage
from hpcpolicy.slurm.replay import SlurmReplayConfig, slurm_replay
from hpcpolicy.workload import Workload

ENGINES = ("fast", "reference")


def starts(jobs: Sequence[Sequence[int]], cores: int, outages: tuple[Outage, ...],
           **kw: object) -> dict[str, list[int]]:
    """Start times on each engine (with the invariant checks on)."""
    w = workload(jobs)
    cfg = SimConfig(outages=outages, check=True, **kw)  # type: ignore[arg-type]
    return {e: simulate(w, ClusterSpec.homogeneous(cores),
                        dataclasses.replace(cfg, engine=e)).start.tolist() for e in ENGINES}


@pytest.mark.parametrize("backfill", ["none", "easy", "conservative"])
def test_running_jobs_finish_and_the_debt_is_paid_before_new_starts(backfill: str) -> None:
    # 4 cores; 2 go at t=10 while job a holds all 4 until t=50: free is -2 until a ends.
    # b (2 cores, submitted at 20) starts at 50 when a pays the debt back, not at 20;
    # c (3 cores) needs the outage's cores back: t=100.
    jobs = [(0, 50, 50, 4), (20, 10, 10, 2), (55, 10, 10, 3)]
    got = starts(jobs, 4, (Outage(start=10, end=100, cores=2),), backfill=backfill)
    assert got == {e: [0, 50, 100] for e in ENGINES}


def test_without_an_outage_the_same_jobs_run_as_before() -> None:
    jobs = [(0, 50, 50, 4), (20, 10, 10, 2), (55, 10, 10, 3)]
    assert starts(jobs, 4, ()) == {e: [0, 50, 60] for e in ENGINES}


def test_the_end_of_an_outage_alone_starts_waiting_jobs() -> None:
    # Nothing runs; the whole machine is out from 0 to 30: the job starts at 30 exactly.
    assert starts([(5, 10, 10, 4)], 4, (Outage(start=0, end=30, cores=4),)) == {
        e: [30] for e in ENGINES}


def test_easy_plans_without_the_outage_it_cannot_know() -> None:
    # 4 cores, 3 out from 0 to 1000. Head a needs 2: no reservation is possible, so EASY
    # lets b (1 core, long) start at once rather than hold the core for a head that
    # cannot run before the outage ends.
    jobs = [(0, 10, 10, 2), (1, 500, 500, 1)]
    got = starts(jobs, 4, (Outage(start=0, end=1000, cores=3),), backfill="easy")
    assert got == {e: [1000, 1] for e in ENGINES}


def test_an_outage_of_whole_nodes_takes_their_cores_in_its_group() -> None:
    cluster = ClusterSpec((NodeGroup("a", 2, 4), NodeGroup("b", 2, 4)))
    w = workload([(0, 100, 100, 8), (0, 10, 10, 8)])  # b waits for group b to be whole
    cfg = SimConfig(outages=(Outage(start=0, end=40, nodes=1, group="b"),), check=True)
    for e in ENGINES:
        r = simulate(w, cluster, dataclasses.replace(cfg, engine=e))
        assert r.start.tolist() == [0, 40] and r.group.tolist() == [0, 1]


@pytest.mark.parametrize("outage, message", [
    (dict(start=5, end=5, cores=1), "`end`: must be after start"),
    (dict(start=0, end=5), "`cores`: an outage takes at least one core or node"),
    (dict(start=0, end=5, cores=-1), "`cores`: must be >= 0"),
])
def test_a_malformed_outage_is_refused_naming_the_field(outage: dict[str, int],
                                                        message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Outage(**outage)  # type: ignore[arg-type]


def test_an_outage_on_an_unknown_group_or_too_large_is_refused() -> None:
    w = workload([(0, 10, 10, 1)])
    with pytest.raises(ConfigError, match=r"names node group 'gpu', which cluster .* lacks"):
        simulate(w, ClusterSpec.homogeneous(4),
                 SimConfig(outages=(Outage(start=0, end=5, cores=1, group="gpu"),)))
    with pytest.raises(ConfigError, match=r"takes 5 cores and 0 nodes .* shrink the outage"):
        simulate(w, ClusterSpec.homogeneous(4),
                 SimConfig(outages=(Outage(start=0, end=5, cores=5),)))


def test_the_rlscheduler_semantics_refuse_outages() -> None:
    with pytest.raises(ConfigError, match="`outages`: compat 'rlscheduler' replays a machine"):
        SimConfig(compat="rlscheduler", outages=(Outage(start=0, end=5, cores=1),))


def test_outages_read_from_a_dict_as_a_site_model_gives_them() -> None:
    cfg = SimConfig.from_dict({"outages": [{"start": 0, "end": 9, "nodes": 2}]})
    assert cfg.outages == (Outage(start=0, end=9, nodes=2),)
    assert SimConfig.from_dict(cfg.to_dict()) == cfg


# ---------------------------------------------------------------- node-level engines
def test_the_gpu_engine_takes_whole_nodes_and_places_nothing_on_them() -> None:
    # 2 nodes x 4 GPUs; the last node is out from 10 to 200. a (4 GPUs) runs 0-100 on
    # node 0; b (4 GPUs) must wait for node 0 (without the outage it runs on node 1 at 20);
    # c wants both nodes: when b ends and the node comes back, at 200 (else at 120).
    spec = ClusterSpec((NodeGroup("g", 2, 8, gpus=4, gpu_type="a100"),))
    w = workload([(0, 100, 100, 1, 0, 4), (20, 100, 100, 1, 0, 4), (30, 10, 10, 2, 0, 8)])
    down = (Outage(start=10, end=200, nodes=1, group="g"),)
    for alloc in ("first-available", "best-fit", "topology-aware"):
        cfg = SimConfig(allocator=alloc, check=True)
        assert simulate(w, spec, cfg).start.tolist() == [0, 20, 120]
        got = simulate(w, spec, dataclasses.replace(cfg, outages=down))
        assert got.start.tolist() == [0, 100, 200], alloc


def test_the_gpu_engine_refuses_an_outage_of_single_cores() -> None:
    spec = ClusterSpec((NodeGroup("g", 2, 8, gpus=4, gpu_type="a100"),))
    cfg = SimConfig(allocator="first-available",
                    outages=(Outage(start=0, end=5, cores=3, group="g"),))
    with pytest.raises(ConfigError, match="replays whole-node outages only"):
        simulate(workload([(0, 10, 10, 1, 0, 1)]), spec, cfg)


def _slurm_jobs(rows: list[tuple[int, int, int, int]]) -> Workload:
    w = workload(rows)
    return dataclasses.replace(w, nodes=np.ones(len(rows), dtype=np.int64),
                               partitions=("batch",))


SLURM = SlurmReplayConfig(cores_per_node=4, nodes=2, submit_latency=0.0, end_latency=0.0)


def test_the_slurm_flavour_takes_the_last_nodes_and_gives_them_back() -> None:
    # a takes node 0, b (at 1) node 1; node 1 goes at 5 while b runs there: b finishes at
    # 31 (left to finish) but nothing else is placed on node 1 until it is back at 100.
    # c (at 10) gets node 0 when a ends at 50, d (at 20) when c ends at 80 (at 60 it would
    # have had node 1 if the second, overlapping outage's end had given it back).
    w = _slurm_jobs([(0, 50, 60, 4), (1, 30, 60, 4), (10, 30, 60, 4), (20, 10, 60, 4)])
    parts = {"batch": (0, 1)}
    assert slurm_replay(w, SLURM, parts).start.tolist() == [0, 1, 31, 50]
    down = (Outage(start=5, end=100, nodes=1), Outage(start=40, end=60, nodes=1))
    assert slurm_replay(w, SLURM, parts, down).start.tolist() == [0, 1, 50, 80]


def test_the_slurm_flavour_refuses_single_cores() -> None:
    with pytest.raises(ConfigError, match="takes 2 single cores and 0 nodes of 2"):
        slurm_replay(_slurm_jobs([(0, 10, 60, 1)]), SLURM, {"batch": (0, 1)},
                     (Outage(start=0, end=5, cores=2),))


def test_backfilling_functions_make_no_reservation_where_an_outage_holds_the_cores() -> None:
    # 4 cores, 1 out of service, 2 held by a job until 100: 1 core is free now and 3 are
    # once it ends. A head of 4 cores gets no reservation; a job of 1 core starts now.
    slot = RunningSlot(100, 0, np.array([2, 0, 0, 0]))
    free = np.array([[1, 0, 0, 0]])
    assert shadow_time(0, np.array([[4, 0, 0, 0]]), free, [slot])[:2] == (NO_RESERVATION, -1)
    need = np.array([[[4, 0, 0, 0]], [[1, 0, 0, 0]]])
    assert Profile(0, free, [slot]).earliest(need[0], 10) is None
    starts, res = conservative_backfill(0, [0, 1], need, np.array([10, 500]), free, [slot])
    assert starts == [(1, 0)] and res == {1: (0, 0)}
    plan = easy_backfill(0, [0, 1], need, np.array([10, 500]), free, [slot])
    assert plan.starts == [(1, 0)] and plan.shadow == NO_RESERVATION
