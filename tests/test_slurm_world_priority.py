"""Multifactor priority in the Slurm world, factor by factor, with the figures Slurm would
compute (worked out from SchedMD/slurm's src/plugins/priority/multifactor/ in the comments),
and scenarios where each factor decides who starts first."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from hpcpolicy.slurmconf import SlurmConfig, read_slurm_conf
from hpcpolicy.slurmconf.sacctmgr import loads_assoc, loads_qos
from hpcpolicy.workload import Workload
from hpcpolicy.world.slurm import replay, slurm_world
from hpcpolicy.world.slurm.priority import (
    age_factor,
    classic_fairshare,
    decay_usage,
    fair_tree,
    job_priority,
    level_shares,
)

MACHINE = """NodeName=n[0-1] CPUs=4
PartitionName=batch Nodes=n[0-1] Default=YES PriorityJobFactor=10
PartitionName=low Nodes=n[0-1] PriorityJobFactor=5
PartitionName=high Nodes=n[0-1] PriorityTier=2
"""
SCHED = "SchedulerParameters=bf_interval=1\n"


def conf(tmp: Path, text: str, qos: str = "", assoc: str = "") -> SlurmConfig:
    """slurm.conf ``text`` over the 2 x 4-core machine, with optional sacctmgr dumps."""
    path = tmp / "slurm.conf"
    path.write_text(SCHED + text + MACHINE)  # a key written twice: the last holds
    c = read_slurm_conf(path)
    return dataclasses.replace(c, qos=loads_qos(qos, "qos.txt") if qos else {},
                               associations=loads_assoc(assoc, "assoc.txt") if assoc else ())


def jobs(rows: list[tuple[int, int, int, int, int]], *, nodes: int = 0,
         parts: list[int] | None = None, accounts: list[int] | None = None,
         qos: list[int] | None = None) -> Workload:
    """(submit, run, limit, cores, user) rows, no node count (``-N`` not given) unless
    ``nodes``; partitions batch, low, high; accounts A, B; QOS normal, high."""
    cols = np.array(rows, dtype=np.int64).reshape(len(rows), 5).T
    n = len(rows)
    z = np.zeros(n, dtype=np.int64)
    return Workload(
        job_id=np.array([chr(97 + i) for i in range(n)], dtype=object), submit=cols[0],
        run_time=cols[1], req_walltime=cols[2], procs=cols[3], nodes=z + nodes, gpus=z,
        mem_mib=z, user=cols[4].astype(np.int32),
        partition=np.array(parts or [0] * n, dtype=np.int32), logged_start=z - 1,
        account=None if accounts is None else np.array(accounts, dtype=np.int32),
        qos=None if qos is None else np.array(qos, dtype=np.int32),
        users=("u0", "u1", "u2"), partitions=("batch", "low", "high"),
        accounts=("A", "B") if accounts is not None else (),
        qos_names=("normal", "high") if qos is not None else ())


def static(tmp: Path, text: str, w: Workload, qos: str = "") -> list[float]:
    return slurm_world(conf(tmp, text, qos), w).static_prio.tolist()


# ------------------------------------------------------------------------------ the factors
def test_age_factor_is_capped_at_max_age() -> None:
    # set_priority_factors: diff / max_age, 1.0 from max_age on
    assert age_factor(300, 600) == 0.5
    assert age_factor(900, 600) == 1.0
    # _get_priority_internal: weighted sum, at least 1, cut to an integer
    assert job_priority(0.0, 1000.0, 300, 600, 0.0, 0.0) == 500
    assert job_priority(0.0, 1000.0, 1000, 600, 0.0, 0.0) == 1000
    assert job_priority(0.2, 0.0, 0, 600, 0.0, 0.0) == 1  # "Priority 0 is reserved"
    assert job_priority(10.7, 1000.0, 1, 600, 0.0, 0.0) == 12  # 10.7 + 1.67 = 12.37


def test_job_size_factor_with_and_without_favor_small(tmp_path: Path) -> None:
    # 2 nodes, 8 cpus; a 1-node, 2-cpu job with limit 600 s (10 min), PriorityWeightJobSize=1000
    w = jobs([(0, 10, 600, 2, 0)], nodes=1)
    big = "PriorityWeightJobSize=1000\n"
    # favour large: (min_nodes / nodes + cpus / cluster_cpus) / 2 = (1/2 + 2/8) / 2 = 0.375
    assert static(tmp_path, big, w) == [375.0]
    # favour small: ((nodes - min_nodes) / nodes + (cluster_cpus - cpus) / cluster_cpus) / 2
    #             = (1/2 + 6/8) / 2 = 0.625
    assert static(tmp_path, big + "PriorityFavorSmall=YES\n", w) == [625.0]
    # SMALL_RELATIVE_TO_TIME: max(min_nodes * cluster_cpus / nodes, cpus) / minutes / cpus
    #                       = max(4, 2) / 10 / 8 = 0.05, favour small: 1 - 0.05
    rel = big + "PriorityFlags=SMALL_RELATIVE_TO_TIME\n"
    assert static(tmp_path, rel, w) == pytest.approx([50.0])
    assert static(tmp_path, rel + "PriorityFavorSmall=YES\n", w) == pytest.approx([950.0])


def test_partition_qos_and_tres_factors(tmp_path: Path) -> None:
    w = jobs([(0, 10, 600, 2, 0), (0, 10, 600, 2, 0)], nodes=1, parts=[0, 1], qos=[0, 1])
    # partition: PriorityJobFactor / the largest (10): batch 1.0, low 0.5
    assert static(tmp_path, "PriorityWeightPartition=1000\n", w) == [1000.0, 500.0]
    # QOS: priority / the largest QOS priority (100): normal 0.5, high 1.0
    qos = "Name|Priority\nnormal|50\nhigh|100\n"
    assert static(tmp_path, "PriorityWeightQOS=1000\n", w, qos) == [500.0, 1000.0]
    # TRES: cpus / the partition's cpus * weight = 2 / 8 * 1000
    assert static(tmp_path, "PriorityWeightTRES=CPU=1000\n", w) == [250.0, 250.0]


TREE = "Account|User|Share\nA||1\nB||1\nA|u0|1\nB|u1|1\n"
"""root -> accounts A and B (one share each) -> users u0 (in A) and u1 (in B)."""


def _tree_arrays() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    parent = np.array([-1, 0, 0, 1, 2])  # root, A, B, A/u0, B/u1
    shares = np.ones(5)
    users = np.array([False, False, False, True, True])
    return parent, shares, level_shares(shares, parent), users


def test_classic_fair_share() -> None:
    parent, shares, level, _ = _tree_arrays()
    usage = np.array([100.0, 100.0, 0.0, 100.0, 0.0])  # A's user used everything
    fs = np.zeros(5)
    classic_fairshare(usage, shares, level, parent, fs)
    # A: U_norm 1, UE = 1 + (UE_root 1 - 1) * 1/2 = 1, shares_norm 1/2: 2^(-2) = 0.25
    # u0: UE = 1 + (1 - 1) * 1 = 1, shares_norm 1/2: 0.25
    # B: UE = 0 + (1 - 0) * 1/2 = 0.5: 2^(-1) = 0.5; u1: UE = 0 + 0.5 * 1 = 0.5: 0.5
    assert fs[1:].tolist() == [0.25, 0.5, 0.25, 0.5]


def test_fair_tree_ranks_users() -> None:
    parent, shares, level, users = _tree_arrays()
    fs = np.zeros(5)
    # level_fs: A = S/U = 0.5 / 1 = 0.5, B = 0.5 / 0 = inf: B's users rank first.
    # Two users: u1 gets rank 2 -> 2/2 = 1.0, u0 rank 1 -> 0.5
    fair_tree(np.array([100.0, 100.0, 0.0, 100.0, 0.0]), shares, level, parent, users, fs)
    assert fs[3:].tolist() == [0.5, 1.0]
    # no usage at all: every level_fs infinite, all tied: both users share rank 2 -> 1.0
    fair_tree(np.zeros(5), shares, level, parent, users, fs)
    assert fs[3:].tolist() == [1.0, 1.0]


def test_usage_decays_by_half_life() -> None:
    # decay_factor = 1 - 0.693 / half_life per second; after one half-life about a half
    parent = np.array([-1, 0])
    usage, new = np.array([0.0, 100.0]), np.array([0.0, 0.0])
    usage[0] = 100.0
    decay_usage(usage, new, parent, (1 - 0.693 / 3600) ** 3600)
    assert usage[1] == pytest.approx(50.0, abs=0.01)
    # new usage reaches every association above
    new[1] = 10.0
    decay_usage(usage, new, parent, 1.0)
    assert usage.tolist() == pytest.approx([60.0, 60.0], abs=0.01)


# ---------------------------------------------------------------------------- the scenarios
FILL = (0, 1000, 1000, 8, 2)
"""A job of u2 that fills the machine for 1000 s."""


def test_fair_share_decides_who_starts_first(tmp_path: Path) -> None:
    # u0 (account A) ran 8 cores for 600 s before; at 1000 s u0 and u1 both wait for the
    # whole machine; u0 submitted first, but u1's fair share is higher (Fair Tree: 1.0 vs
    # 0.5), so with PriorityWeightFairshare u1 goes first; without it, u0 (submit order).
    rows = [(0, 600, 600, 8, 0), (600, 400, 400, 8, 2), (700, 10, 60, 8, 0),
            (710, 10, 60, 8, 1)]
    w = jobs(rows, accounts=[0, 0, 0, 1])
    text = "PriorityWeightFairshare=10000\nPriorityCalcPeriod=1\nPriorityDecayHalfLife=0\n"
    fair = replay(w, slurm_world(conf(tmp_path, text, assoc=TREE), w))
    assert fair.start.tolist() == [0, 600, 1010, 1000]
    plain = replay(w, slurm_world(conf(tmp_path, "PriorityCalcPeriod=1\n", assoc=TREE), w))
    assert plain.start.tolist() == [0, 600, 1000, 1010]


def test_age_then_size_order(tmp_path: Path) -> None:
    # behind a machine-filling job: b (1 core, submitted 0) and c (8 cores, submitted 500);
    # only age: b first (the older); only size (favour large): c first; at 1000 s the age
    # factor is b: 1000/1000, c: 500/1000, so Age=1000 beats JobSize=100 (c 100, b 56)
    rows = [FILL, (0, 10, 60, 8, 0), (500, 10, 60, 8, 1)]
    rows[1] = (0, 10, 60, 1, 0)
    w = jobs(rows)
    base = "PriorityCalcPeriod=1\nPriorityMaxAge=00:16:40\n"
    aged = replay(w, slurm_world(conf(tmp_path, base + "PriorityWeightAge=1000\n"), w))
    assert aged.start.tolist() == [0, 1000, 1010]
    sized = replay(w, slurm_world(conf(tmp_path, base + "PriorityWeightJobSize=100\n"), w))
    assert sized.start.tolist() == [0, 1010, 1000]


def test_priority_tier_sorts_first(tmp_path: Path) -> None:
    # b (batch, PriorityJobFactor 10) outweighs c (high) on the partition factor, but high's
    # PriorityTier 2 sorts c first
    rows = [FILL, (1, 10, 60, 8, 0), (2, 10, 60, 8, 1)]
    w = jobs(rows, parts=[0, 0, 2])
    res = replay(w, slurm_world(conf(tmp_path, "PriorityWeightPartition=1000\n"), w))
    assert res.start.tolist() == [0, 1010, 1000]
