"""The allocator registry, and the sharing allocators in the node-level GPU engine: one node
per job, with the node's CPU, memory and each GPU's thousandths binding."""

from __future__ import annotations

import numpy as np
import pytest

from hpcpolicy.cluster import ClusterSpec, NodeGroup
from hpcpolicy.errors import ConfigError
from hpcpolicy.gpu import allocators
from hpcpolicy.gpu.fragmentation import typical_pods
from hpcpolicy.gpu.inflation import InflationConfig, replay_pods
from hpcpolicy.gpu.node_sharing import NodeSharing
from hpcpolicy.gpu.registry import (
    ALLOCATORS,
    SHARING_ALLOCATORS,
    allocator_help,
    allocator_kind,
)
from hpcpolicy.gpu.sharing_code import sharing_code
from hpcpolicy.sim import SimConfig, simulate
from hpcpolicy.sim.capacity import Outage
from hpcpolicy.workload import Workload


def _workload(procs: list[int], gpus: list[int], share: list[int], submit: list[int],
              run: list[int], nodes: list[int] | None = None) -> Workload:
    n = len(procs)
    z = np.zeros(n, dtype=np.int64)
    return Workload(job_id=np.array([f"j{i}" for i in range(n)], dtype=object),
                    submit=np.array(submit), run_time=np.array(run), req_walltime=np.array(run),
                    procs=np.array(procs), nodes=np.array(nodes or [1] * n), gpus=np.array(gpus),
                    mem_mib=z, user=z.astype(np.int32), partition=z.astype(np.int32),
                    logged_start=z - 1, gpu_share=np.array(share))


def _spec(count: int, cores: int, gpus: int) -> ClusterSpec:
    return ClusterSpec((NodeGroup("g", count, cores, gpus=gpus, gpu_type="t4"),))


def test_the_registry_names_every_allocator_once_with_its_kind() -> None:
    assert len(set(ALLOCATORS)) == len(ALLOCATORS)
    assert [allocator_kind(a) for a in ("first-fit", "topology-aware", "fgd")] == [
        "pooled", "node-level", "sharing"]
    # The compiled loop's codes follow the registry's order.
    assert sharing_code("fgd")[0] == allocators.FGD == SHARING_ALLOCATORS.index("fgd")
    assert all(name in allocator_help() for name in ALLOCATORS)


@pytest.mark.parametrize("make", [lambda: SimConfig(allocator="fdg"),
                                  lambda: InflationConfig(allocator="best-fit")])
def test_every_consumer_refuses_what_the_registry_does_not_know(make: object) -> None:
    with pytest.raises(ConfigError) as err:
        make()  # type: ignore[operator]
    assert "fgd" in str(err.value) and "\n" not in str(err.value)


def test_a_folder_without_an_allocator_is_refused(tmp_path: object) -> None:
    with pytest.raises(ConfigError, match="folder holding an exported allocator"):
        SimConfig(allocator=str(tmp_path))


def test_node_cpu_binds_where_pool_totals_would_not() -> None:
    # Two nodes of 8 cores: 6 + 6 cores taken leave 4 in total but 2 per node, so the third
    # job (4 cores) waits under FGD until one ends; the node-level best-fit counts cores in
    # total and starts it at once.
    w = _workload([6, 6, 4], [1, 1, 1], [500, 500, 500], [0, 0, 1], [100, 100, 100])
    assert simulate(w, _spec(2, 8, 2), SimConfig(allocator="fgd")).start.tolist() == [0, 0, 100]
    assert simulate(w, _spec(2, 8, 2), SimConfig(allocator="best-fit")).start[2] == 1


def test_each_gpu_binds_not_the_node_total() -> None:
    # One node of two GPUs: two pods of 600 take one GPU each; a third waits although the
    # node has 800 thousandths free (400 on each GPU).
    w = _workload([1, 1, 1], [1, 1, 1], [600, 600, 600], [0, 0, 0], [50, 100, 100])
    r = simulate(w, _spec(1, 8, 2), SimConfig(allocator="bestfit"))
    assert r.start.tolist() == [0, 0, 50]


def test_jobs_no_single_node_holds_never_fit() -> None:
    w = _workload([1, 1, 9], [3, 1, 1], [1000, 1000, 1000], [0, 0, 0], [10, 10, 10],
                  nodes=[1, 2, 1])
    r = simulate(w, _spec(2, 8, 2), SimConfig(allocator="fgd"))
    assert r.never_fits.tolist() == [True, True, True]


def test_outages_are_refused() -> None:
    w = _workload([1], [1], [500], [0], [10])
    cfg = SimConfig(allocator="fgd", outages=(Outage(start=5, end=9, group="g", nodes=1),))
    with pytest.raises(ConfigError, match="without outages"):
        simulate(w, _spec(2, 8, 2), cfg)


def test_the_engine_places_as_the_inflation_experiment() -> None:
    # Pods that never leave, arriving one by one on a cluster that holds them all: FGD in the
    # engine must pick the very nodes the inflation experiment's FGD picks.
    rng = np.random.default_rng(3)
    n = 40
    gpus = rng.choice([0, 1, 1, 1, 2], n)
    share = np.where(gpus == 1, rng.choice([250, 500, 1000], n), 1000)
    w = _workload(rng.choice([1, 2, 4], n).tolist(), gpus.tolist(), share.tolist(),
                  list(range(n)), [10_000] * n)
    spec = ClusterSpec((NodeGroup("a", 3, 16, gpus=4, gpu_type="t4"),
                        NodeGroup("b", 4, 32, gpus=8, gpu_type="t4")))
    from hpcpolicy.gpu.topology import Topology

    sharing = NodeSharing(w, spec, Topology.from_cluster(spec), "fgd",
                          np.asarray(w.gpu_share))
    engine_nodes = []
    for j in range(n):
        got = sharing.choose(j, None)
        assert got is not None
        sharing.hold(j, *got)
        engine_nodes.append(got[0])
    run = replay_pods(sharing.nodes, sharing.pods, "fgd", typical_pods(sharing.pods),
                      np.random.default_rng(0))
    assert run.node.tolist() == engine_nodes
    r = simulate(w, spec, SimConfig(allocator="fgd"))
    assert r.start.tolist() == list(range(n))
