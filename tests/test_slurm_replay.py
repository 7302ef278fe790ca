"""The Slurm flavour of the replay on hand-built cases: cores placed on nodes as cons_tres
places them, partitions as overlapping node sets, the main pass, backfill on its tick with a
reservation per blocked job, and the hand-over latencies within the second."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from sim_cases import workload

from hpcpolicy.errors import ConfigError
from hpcpolicy.slurm.replay import SlurmReplayConfig, place, slurm_replay, start_latencies
from hpcpolicy.workload import Workload

TWO_NODES = SlurmReplayConfig(cores_per_node=4, nodes=2)


def _jobs(rows: list[tuple[int, int, int, int]], parts: list[int] | None = None,
          nodes: list[int] | None = None) -> Workload:
    w = workload(rows)
    n = len(rows)
    return dataclasses.replace(
        w, nodes=np.array(nodes or [1] * n, dtype=np.int64),
        partition=np.array(parts or [0] * n, dtype=np.int32), partitions=("batch", "short"))


PARTS = {"batch": (0, 1), "short": (1,)}


def test_place_best_fit_and_spread() -> None:
    free = np.array([4, 2, 3], dtype=np.int64)
    assert place(free, (0, 1, 2), 2, 1) == {1: 2}          # the fullest node that holds it
    assert place(free, (0, 1, 2), 5, 1) is None             # no node has 5 free
    assert place(free, (0, 2), 6, 2) == {0: 4, 2: 2}         # one core each, then in order
    assert place(free, (1,), 2, 2) is None                  # two nodes asked, one allowed


def test_place_takes_the_tightest_run_of_consecutive_nodes() -> None:
    # nodes 0-1 and node 3 are two runs (node 2 is full). A 12-core job fits in both; the
    # run with fewer free cores (node 3, 14) wins over the fuller node 0 (13 free), which
    # a plain best fit over nodes would take.
    free = np.array([13, 16, 0, 14], dtype=np.int64)
    assert place(free, (0, 1, 2, 3), 12, 1) == {3: 12}
    # a job that no single run holds takes the biggest run first, then the rest elsewhere
    assert place(free, (0, 1, 2, 3), 32, 3) == {0: 13, 1: 16, 3: 3}


def test_place_several_nodes_in_index_order() -> None:
    # Seen in both logs of the test Slurm: 26 cores on 2 nodes with free (10, 16, 14, 15)
    # went to n[1-2] (10 + 16), not to the two roomiest nodes (16 + 15).
    free = np.array([10, 16, 14, 15], dtype=np.int64)
    assert place(free, (0, 1, 2, 3), 26, 2) == {0: 10, 1: 16}
    # each node takes what it has, leaving one core per node still to come; 21 cores on
    # two empty nodes are 16 + 5 (the logs' next job then fits the 11 left on the second)
    assert place(np.array([16, 16], dtype=np.int64), (0, 1), 21, 2) == {0: 16, 1: 5}
    # the last node is the first one that holds the rest: node 1 (3 free) is skipped
    assert place(np.array([10, 3, 16], dtype=np.int64), (0, 1, 2), 20, 2) == {0: 10, 2: 10}


def _logged(rows: list[tuple[int, int, int, int]], starts: list[int]) -> Workload:
    return dataclasses.replace(_jobs(rows), logged_start=np.array(starts, dtype=np.int64))


def test_start_latencies_from_the_log() -> None:
    # a, b, c start at once or a second after their submit (nothing ended in between):
    # submit latency 1/3. d waited and started 1 s after c's end (12 + 5 = 17); e waited
    # and started in the second of a's end (0 + 20 = 20): end latency (1 + 0) / 2.
    rows = [(0, 20, 60, 4), (10, 5, 60, 4), (12, 5, 60, 4), (13, 5, 60, 4), (14, 5, 60, 4)]
    sub_lat, end_lat = start_latencies(_logged(rows, [0, 11, 12, 18, 20]))
    assert sub_lat == pytest.approx(1 / 3)
    assert end_lat == pytest.approx(0.5)
    # no logged starts: no latency
    assert start_latencies(_jobs(rows)) == (0.0, 0.0)


def test_hand_over_latency_accumulates_within_the_second() -> None:
    # a, b, c each fill node 0 (the short partition) for 10 s, back to back. Each ended job
    # keeps its cores for end_latency: with 0.4 s the second hand-over crosses a second
    # (10.9 -> 21.3), so c starts at 21 where whole-second replays say 20.
    rows = [(0, 10, 60, 4), (0, 10, 60, 4), (0, 10, 60, 4)]
    parts = {"batch": (0, 1), "short": (0,)}
    chain = _jobs(rows, parts=[1, 1, 1])
    lagged = dataclasses.replace(TWO_NODES, end_latency=0.4)
    assert slurm_replay(chain, lagged, parts).start.tolist() == [0, 10, 21]
    assert slurm_replay(chain, TWO_NODES, parts).start.tolist() == [0, 10, 20]
    # a submission is taken in the middle of its second: 0.6 s of submit latency is the
    # next second, 0.4 s the same one
    late = dataclasses.replace(TWO_NODES, submit_latency=0.6)
    early = dataclasses.replace(TWO_NODES, submit_latency=0.4)
    assert slurm_replay(_jobs(rows[:1]), late, PARTS).start.tolist() == [1]
    assert slurm_replay(_jobs(rows[:1]), early, PARTS).start.tolist() == [0]


def test_an_end_and_a_submission_at_the_same_instant() -> None:
    # a fills node 0 until 10.5 s; b, submitted at 10 s, is seen at 10.5 s too: the freed
    # cores and the new job are both in place before the pass, so b starts in that second
    rows = [(0, 10, 60, 4), (10, 5, 60, 4)]
    parts = {"batch": (0, 1), "short": (0,)}
    res = slurm_replay(_jobs(rows, parts=[1, 1]), TWO_NODES, parts)
    assert res.start.tolist() == [0, 10]


def test_latencies_default_to_the_fitted_ones() -> None:
    # the log says every start came a second after its submit: the replay does the same
    rows = [(0, 10, 60, 1), (5, 10, 60, 1)]
    res = slurm_replay(_logged(rows, [1, 6]), TWO_NODES, PARTS)
    assert res.start.tolist() == [1, 6]
    assert res.stats["submit_latency_s"] == 1.0
    with pytest.raises(ConfigError, match="end_latency"):
        dataclasses.replace(TWO_NODES, end_latency=1.5)


def test_cores_on_nodes_and_backfill_reservations() -> None:
    # (submit, run, limit, cores): a and b fill 3 of 4 cores on each node; c (2 cores, one
    # node) cannot start on the 1+1 cores left, although a pooled machine has 2 free.
    rows = [(0, 100, 120, 3), (0, 50, 120, 3), (1, 10, 120, 2),
            (2, 10, 60, 1),     # d ends before c's reservation: backfilled at once
            (3, 10, 600, 1)]    # e runs past it, on the node c's reservation does not use
    res = slurm_replay(_jobs(rows), TWO_NODES, PARTS)
    assert res.start.tolist() == [0, 0, 50, 2, 3]
    assert res.backfilled.tolist() == [False, False, False, True, True]
    # on a 5 s tick the backfilled jobs wait for the next pass (t = 5); c still starts when
    # b ends, in the main pass
    slow = slurm_replay(_jobs(rows), dataclasses.replace(TWO_NODES, bf_interval=5), PARTS)
    assert slow.start.tolist() == [0, 0, 50, 5, 5]


def test_backfill_never_delays_a_reservation() -> None:
    # c (8 cores on both nodes) is planned at 120 (the limits of a and b). d asks 1 core for
    # 600 s: any node it takes is one c's reservation needs, so it waits until c has run;
    # e asks 1 core for 60 s, ends before 120 and is backfilled at once.
    rows = [(0, 100, 120, 3), (0, 100, 120, 3), (1, 10, 120, 8), (2, 10, 600, 1),
            (3, 10, 60, 1)]
    res = slurm_replay(_jobs(rows, nodes=[1, 1, 2, 1, 1]), TWO_NODES, PARTS)
    assert res.start.tolist() == [0, 0, 100, 110, 3]
    assert res.backfilled.tolist() == [False, False, False, False, True]


def test_blocked_partition_closes_only_its_nodes() -> None:
    # a fills node 1 (the short partition); b in short waits; c in batch, submitted after b,
    # still starts on node 0 in the main pass.
    rows = [(0, 50, 60, 4), (1, 10, 60, 2), (2, 10, 60, 4)]
    res = slurm_replay(_jobs(rows, parts=[1, 1, 0]), TWO_NODES, PARTS)
    assert res.start.tolist() == [0, 50, 2]
    assert not res.backfilled[2]


def test_multi_node_job_and_unknown_partition() -> None:
    res = slurm_replay(_jobs([(0, 10, 60, 6)], nodes=[2]), TWO_NODES, PARTS)
    assert res.start.tolist() == [0]
    with pytest.raises(ConfigError, match="partition 'short'"):
        slurm_replay(_jobs([(0, 10, 60, 1)]), TWO_NODES, {"batch": (0, 1)})


def test_reservation_holds_whole_nodes() -> None:
    # a leaves 1 core free on node 0; b fills node 1 for long. c (2 cores) is planned on
    # node 0 at 120. d (1 core, 600 s) would fit beside c on node 0 core by core, but
    # Slurm's backfill map holds c's node whole from 120, so d waits for the main pass.
    rows = [(0, 100, 120, 3), (0, 100, 600, 4), (1, 10, 120, 2), (2, 10, 600, 1)]
    res = slurm_replay(_jobs(rows), TWO_NODES, PARTS)
    assert res.start.tolist() == [0, 0, 100, 100]
