"""The Slurm flavour of the replay on hand-built cases: cores placed on nodes, partitions as
overlapping node sets, the main pass, and backfill on its tick with a reservation per
blocked job."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from sim_cases import workload

from hpcpolicy.errors import ConfigError
from hpcpolicy.slurm.replay import SlurmReplayConfig, place, slurm_replay
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
