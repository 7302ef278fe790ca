"""GPU sharing (issue 44): the fragmentation measure and each allocator's choice, by hand."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hpcpolicy.errors import ConfigError, InputFormatError
from hpcpolicy.gpu.fragmentation import TypicalPods, node_fragmentation, typical_pods
from hpcpolicy.gpu.inflation import (
    InflationConfig,
    InflationRun,
    draw_arrivals,
    inflation_curve,
    replay_pods,
)
from hpcpolicy.gpu.inflation_table import fragmentation_curve
from hpcpolicy.gpu.sharing import (
    SharingNodes,
    SharingPods,
    read_nodes,
    read_pod_times,
    read_pods,
)
from hpcpolicy.gpu.timed_replay import TimedConfig, timed_replay


def _nodes(*rows: tuple[int, int, int, int]) -> SharingNodes:
    """Nodes from (cpu milli, memory MiB, GPUs, model index) rows; models m0, m1."""
    a = np.array(rows, dtype=np.int64).reshape(-1, 4)
    return SharingNodes(tuple(f"n{i}" for i in range(len(a))), a[:, 0], a[:, 1], a[:, 2],
                        a[:, 3], ("m0", "m1"))


def _pods(*rows: tuple[int, int, int, int], allowed: list[list[bool]] | None = None
          ) -> SharingPods:
    """Pods from (cpu milli, memory MiB, GPUs, milli per GPU) rows."""
    a = np.array(rows, dtype=np.int64).reshape(-1, 4)
    ok = np.ones((len(a), 2), dtype=bool) if allowed is None else np.array(allowed)
    return SharingPods(tuple(f"p{i}" for i in range(len(a))), a[:, 0], a[:, 1], a[:, 2],
                       a[:, 3], ok)


def _typical(*rows: tuple[int, int, int, float]) -> TypicalPods:
    """Typical shapes from (cpu milli, GPUs, milli per GPU, weight), no model constraint."""
    a = np.array(rows, dtype=np.float64).reshape(-1, 4)
    n = len(a)
    return TypicalPods(a[:, 0].astype(np.int64), a[:, 1].astype(np.int64),
                       a[:, 2].astype(np.int64), np.ones((n, 2), dtype=bool),
                       np.ones(n, dtype=bool), a[:, 3])


def _frag(cpu_left: int, left: list[int], model: int, t: TypicalPods) -> float:
    gpu_left = np.array(left + [0] * (8 - len(left)), dtype=np.int64)
    return node_fragmentation(cpu_left, gpu_left, len(left), model, t.cpu, t.num_gpu,
                              t.gpu_milli, t.allowed, t.unconstrained, t.weight)


def _placed(nodes: SharingNodes, pods: SharingPods, allocator: str,
            typical: TypicalPods | None = None, seed: int = 0) -> InflationRun:
    t = typical if typical is not None else _typical((1000, 1, 1000, 1.0))
    return replay_pods(nodes, pods, allocator, t, np.random.default_rng(seed))


def test_fragmentation_counts_only_gpus_too_full_for_a_task_that_fits() -> None:
    t = _typical((1000, 1, 500, 0.5), (1000, 1, 1000, 0.5))
    # GPU 1 (300 free) is too full for both shapes; GPU 0 takes either: 300 stranded.
    assert _frag(8000, [1000, 300], 0, t) == pytest.approx(300.0)
    # Too little CPU: no task fits, so all 1,300 free thousandths are fragments.
    assert _frag(500, [1000, 300], 0, t) == pytest.approx(1300.0)


def test_fragmentation_counts_everything_for_cpu_only_and_forbidden_tasks() -> None:
    cpu_only = _typical((1000, 0, 0, 1.0))
    assert _frag(8000, [1000, 1000], 0, cpu_only) == pytest.approx(2000.0)
    t = _typical((1000, 1, 500, 1.0))
    only_m1 = TypicalPods(t.cpu, t.num_gpu, t.gpu_milli, np.array([[False, True]]),
                          np.array([False]), t.weight)
    assert _frag(8000, [1000, 1000], 0, only_m1) == pytest.approx(2000.0)
    assert _frag(8000, [1000, 1000], 1, only_m1) == pytest.approx(0.0)


def test_typical_pods_keep_the_most_frequent_shapes_up_to_the_threshold() -> None:
    pods = _pods(*([(1000, 1, 1, 500)] * 6 + [(2000, 1, 1, 1000)] * 3 + [(4000, 1, 0, 0)]))
    t = typical_pods(pods, 0.9)
    assert t.gpu_milli.tolist() == [500, 1000]
    assert t.weight.tolist() == pytest.approx([6 / 9, 3 / 9])


def test_bestfit_and_dotprod_fill_the_smaller_node_first() -> None:
    nodes = _nodes((32000, 100, 4, 0), (96000, 100, 8, 0))
    pods = _pods((4000, 1, 1, 1000))
    assert _placed(nodes, pods, "bestfit").node.tolist() == [0]
    assert _placed(nodes, pods, "dotprod").node.tolist() == [0]


def test_packing_shares_a_used_gpu_before_opening_another() -> None:
    nodes = _nodes((96000, 100, 8, 0), (32000, 100, 4, 0))
    pods = _pods((1000, 1, 1, 500), (1000, 1, 1, 300))
    run = _placed(nodes, pods, "packing")
    # An idle node scores 33 - its GPUs: the 4-GPU node first; then its half-used GPU.
    assert run.node.tolist() == [1, 1]
    assert int(run.allocated[-1]) == 800


def test_clustering_keeps_whole_gpu_pods_off_a_node_of_shared_gpus() -> None:
    nodes = _nodes((32000, 100, 4, 0), (96000, 100, 8, 0))
    pods = _pods((1000, 1, 1, 500), (1000, 1, 1, 1000))
    assert _placed(nodes, pods, "clustering").node.tolist() == [0, 1]
    assert _placed(nodes, pods, "bestfit").node.tolist() == [0, 0]


def test_fgd_leaves_a_gpu_the_typical_task_still_fits() -> None:
    # Node 0: one GPU with 700 free once the first pod is in; node 1: one idle GPU.
    nodes = _nodes((8000, 100, 1, 0), (8000, 100, 1, 0))
    pods = _pods((100, 1, 1, 300), (100, 1, 1, 200))
    typical = _typical((100, 1, 700, 1.0))
    # Best fit puts the 200 on the 700 (leaving 500, too little for a 700 task); FGD does not.
    assert _placed(nodes, pods, "bestfit", typical).node.tolist() == [0, 0]
    assert _placed(nodes, pods, "fgd", typical).node.tolist() == [0, 1]


def test_memory_cpu_and_model_bind() -> None:
    nodes = _nodes((8000, 10, 2, 0), (8000, 1000, 2, 1), (500, 1000, 2, 1))
    pods = _pods((1000, 100, 1, 1000), (1000, 10, 1, 1000),
                 allowed=[[True, True], [False, True]])
    for allocator in ("random", "dotprod", "clustering", "packing", "bestfit", "fgd"):
        # Pod 0 needs 100 MiB (only node 1 has it), pod 1 the model m1 and 1 CPU (node 1).
        assert _placed(nodes, pods, allocator).node.tolist() == [1, 1], allocator


def test_a_pod_that_fits_nowhere_fails_and_is_still_counted_as_arrived() -> None:
    nodes = _nodes((8000, 100, 1, 0))
    run = _placed(nodes, _pods((1000, 1, 2, 1000), (1000, 1, 1, 1000)), "fgd")
    assert run.node.tolist() == [-1, 0]
    assert run.arrived.tolist() == [2000, 3000]
    assert run.allocated.tolist() == [0, 1000]


def test_random_spreads_over_the_nodes_that_fit() -> None:
    nodes = _nodes((8000, 100, 1, 0), (8000, 100, 1, 0), (8000, 100, 0, -1))
    chosen = {int(_placed(nodes, _pods((100, 1, 1, 500)), "random", seed=s).node[0])
              for s in range(20)}
    assert chosen == {0, 1}


def test_draws_reach_the_ratio_without_passing_it() -> None:
    pods = _pods((1, 1, 1, 500), (1, 1, 1, 1000), (1, 1, 0, 0))
    order = draw_arrivals(pods, 10, 1.3, np.random.default_rng(3))
    total = int(pods.total_milli[order].sum())
    assert sorted(order[:3].tolist()) == [0, 1, 2]
    assert 13000 - 1000 < total <= 13000


def test_curve_is_the_mean_allocated_share_at_each_rounded_percent() -> None:
    run = InflationRun(np.array([490, 510, 600]), np.array([400, 500, 500]),
                       np.zeros(3), np.zeros(3, np.int64), 1)
    curve = inflation_curve(run, np.array([49, 51, 60, 70]))
    assert curve[:3].tolist() == pytest.approx([40.0, 50.0, 50.0])
    assert np.isnan(curve[3])


def test_config_and_reader_errors_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="allocator"):
        InflationConfig(allocator="tetris")
    bad = tmp_path / "nodes.csv"
    bad.write_text("sn,cpu_milli,memory_mib,gpu,model\nn0,32000,1024,x,T4\n")
    with pytest.raises(InputFormatError, match=r"line 2: column 'gpu'") as err:
        read_nodes(bad)
    assert "\n" not in str(err.value)
    pods = tmp_path / "pods.csv"
    pods.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\np,1,1,2,500,\n")
    with pytest.raises(InputFormatError, match="line 2: 2 GPUs of 500"):
        read_pods(pods, ("T4",))


def test_fragmentation_curve_reaches_the_last_percent_by_rounding() -> None:
    # 1 GPU: 1,296 thousandths arrived is 129.6 %, which the allocation curve counts as 130 %.
    run = InflationRun(np.array([500, 1296]), np.zeros(2, np.int64), np.array([100.0, 50.0]),
                       np.zeros(2, np.int64), 1)
    assert fragmentation_curve(run, [50, 130]).tolist() == pytest.approx([10.0, 5.0])


def test_timed_replay_lets_a_pod_pass_one_that_cannot_fit_and_frees_on_departure() -> None:
    nodes = _nodes((8000, 100, 2, 0))
    # t=0: a takes both GPUs for 100 s; t=10: b (3 GPUs) never fits, c (half a GPU) waits
    # behind it, not blocked by it, and starts when a leaves at t=100.
    pods = _pods((100, 1, 2, 1000), (100, 1, 3, 1000), (100, 1, 1, 500))
    result = timed_replay(nodes, pods, np.array([0, 10, 10]), np.array([100, 50, 20]),
                          TimedConfig(allocator="bestfit", tail=1.0))
    assert result.start.tolist() == [0, -1, 100]
    assert (result.started, result.never_started) == (2, 1)
    # Window 0..10 s (first to last arrival): both GPUs allocated throughout.
    assert result.allocation_rate == pytest.approx(100.0)
    assert result.mean_bounded_slowdown == pytest.approx((1 + 110 / 20) / 2)


def test_pod_times_run_from_scheduling_or_creation(tmp_path: Path) -> None:
    pods = tmp_path / "pods.csv"
    pods.write_text("name,creation_time,deletion_time,scheduled_time\n"
                    "a,10,110,30\nb,20,50,\nc,5,5,5\n")
    submit, run = read_pod_times(pods)
    assert submit.tolist() == [10, 20, 5]
    assert run.tolist() == [80, 30, 1]


def test_ties_go_to_the_first_node_in_the_list() -> None:
    nodes = _nodes((8000, 100, 2, 0), (8000, 100, 2, 0), (8000, 100, 2, 0))
    pods = _pods((100, 1, 1, 500))
    for allocator in ("dotprod", "clustering", "packing", "bestfit", "fgd"):
        firsts = {int(_placed(nodes, pods, allocator, seed=s).node[0]) for s in range(10)}
        assert firsts == {0}, allocator
