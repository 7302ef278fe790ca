"""The Slurm world (hpcpolicy.world.slurm) under priority/basic against the Python Slurm
flavour (hpcpolicy.slurm.replay) it must reproduce: the hand cases of test_slurm_replay.py
and random workloads, both replays with no hand-over latency."""

from __future__ import annotations

import dataclasses
from datetime import UTC
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sim_cases import workload

from hpcpolicy.slurm.replay import SlurmReplayConfig, slurm_replay
from hpcpolicy.slurmconf import SlurmConfig, read_slurm_conf
from hpcpolicy.workload import Workload
from hpcpolicy.world.slurm import replay, slurm_world

BASIC = """PriorityType=priority/basic
SchedulerType=sched/backfill
SchedulerParameters=bf_interval={bf},bf_window=43200,bf_max_job_test=100000,default_queue_depth=100000
NodeName=n[0-1] CPUs=4
PartitionName=batch Nodes=n[0-1] Default=YES MaxTime=INFINITE
PartitionName=short Nodes={short} MaxTime=INFINITE
"""


def conf_of(text: str, tmp: Path) -> SlurmConfig:
    """The configuration written in ``text``."""
    path = tmp / "slurm.conf"
    path.write_text(text)
    return read_slurm_conf(path)


def jobs(rows: list[tuple[int, int, int, int]], parts: list[int] | None = None,
         nodes: list[int] | None = None) -> Workload:
    """(submit, run, limit, cores) jobs on partitions batch (0) and short (1)."""
    w = workload(rows)
    n = len(rows)
    return dataclasses.replace(
        w, nodes=np.array(nodes or [1] * n, dtype=np.int64),
        partition=np.array(parts or [0] * n, dtype=np.int32), partitions=("batch", "short"))


def both(w: Workload, tmp: Path, short: str = "n1", bf: int = 1) -> tuple[list[int], list[int]]:
    """The starts of the Python Slurm flavour (latencies 0) and of the world."""
    cfg = SlurmReplayConfig(cores_per_node=4, nodes=2, bf_interval=bf, submit_latency=0.0,
                            end_latency=0.0)
    sets = {"batch": (0, 1), "short": (0,) if short == "n0" else (1,)}
    old = slurm_replay(w, cfg, sets).start.tolist()
    new = replay(w, slurm_world(conf_of(BASIC.format(bf=bf, short=short), tmp), w))
    return old, new.start.tolist()


CASES = [
    # test_slurm_replay's hand cases: (rows, parts, nodes, short partition's node, bf)
    ([(0, 10, 60, 4), (0, 10, 60, 4), (0, 10, 60, 4)], [1, 1, 1], None, "n0", 1),
    ([(0, 10, 60, 4), (10, 5, 60, 4)], [1, 1], None, "n0", 1),
    ([(0, 100, 120, 3), (0, 50, 120, 3), (1, 10, 120, 2), (2, 10, 60, 1), (3, 10, 600, 1)],
     None, None, "n1", 1),
    ([(0, 100, 120, 3), (0, 50, 120, 3), (1, 10, 120, 2), (2, 10, 60, 1), (3, 10, 600, 1)],
     None, None, "n1", 5),
    ([(0, 100, 120, 3), (0, 100, 120, 3), (1, 10, 120, 8), (2, 10, 600, 1), (3, 10, 60, 1)],
     None, [1, 1, 2, 1, 1], "n1", 1),
    ([(0, 50, 60, 4), (1, 10, 60, 2), (2, 10, 60, 4)], [1, 1, 0], None, "n1", 1),
    ([(0, 10, 60, 6)], None, [2], "n1", 1),
    ([(0, 100, 120, 3), (0, 100, 600, 4), (1, 10, 120, 2), (2, 10, 600, 1)], None, None,
     "n1", 1),
]


@pytest.mark.parametrize(("rows", "parts", "nodes", "short", "bf"), CASES)
def test_basic_priority_reproduces_the_python_flavour_on_its_cases(
        rows: list[tuple[int, int, int, int]], parts: list[int] | None,
        nodes: list[int] | None, short: str, bf: int, tmp_path: Path) -> None:
    old, new = both(jobs(rows, parts, nodes), tmp_path, short, bf)
    assert new == old


@st.composite
def slurm_jobs(draw: st.DrawFn) -> Workload:
    """Up to 25 jobs on the two 4-core nodes: bursts, 1-2 nodes, both partitions (short
    runs: the Python flavour passes every second)."""
    n = draw(st.integers(1, 25))
    rows, parts, nodes = [], [], []
    t = 0
    for _ in range(n):
        t += draw(st.sampled_from([0, 0, 1, 3, 17, 60]))
        run = draw(st.integers(0, 90))
        limit = max(60, run + draw(st.sampled_from([0, 30, 200])))
        k = draw(st.integers(1, 2))
        rows.append((t, run, limit, draw(st.integers(k, 4 * k))))
        parts.append(draw(st.integers(0, 1)) if k == 1 else 0)
        nodes.append(k)
    return jobs(rows, parts, nodes)


@pytest.mark.slow  # over the ten-minute budget of the default suite; run with -m slow
@settings(max_examples=25, deadline=None)
@given(w=slurm_jobs(), bf=st.sampled_from([1, 7]))
def test_basic_priority_reproduces_the_python_flavour_on_random_logs(
        w: Workload, bf: int, tmp_path_factory: pytest.TempPathFactory) -> None:
    old, new = both(w, tmp_path_factory.mktemp("conf"), "n1", bf)
    assert new == old


def test_open_from_files_reads_accounts_and_qos(tmp_path: Path) -> None:
    from datetime import datetime

    import polars as pl

    from hpcpolicy.world.slurm import open_slurm_world

    (tmp_path / "slurm.conf").write_text(BASIC.format(bf=1, short="n1").replace(
        "priority/basic", "priority/multifactor"))
    dumps = tmp_path / "sacctmgr"
    dumps.mkdir()
    (dumps / "qos.txt").write_text("Name|Priority|MaxJobsPU\nnormal|0|\nlong|10|1\n")
    (dumps / "assoc.txt").write_text("Account|User|Share\nphys||3\nchem||1\nphys|ann|1\n"
                                     "chem|bob|1\n")
    t0 = datetime(2024, 1, 1, tzinfo=UTC)
    table = pl.DataFrame({"job_id": ["1", "2", "3"], "submit_time": [t0] * 3,
                          "run_time_s": [60] * 3, "req_cpus": [1] * 3,
                          "req_walltime_s": [120] * 3, "user": ["ann", "ann", "bob"],
                          "account": ["phys", "phys", "chem"],
                          "qos": ["long", "long", "normal"]})
    w, world = open_slurm_world(tmp_path / "slurm.conf", table, dumps)
    assert [world.assoc_names[a] for a in world.job_assoc] == ["phys/ann", "phys/ann",
                                                                "chem/bob"]
    assert [world.qos_names[q] for q in world.job_qos] == ["long", "long", "normal"]
    # QOS long's MaxJobsPerUser=1 holds ann's second job until her first ends
    assert replay(w, world).start.tolist() == [0, 60, 0]


def test_workload_keeps_account_and_qos_codes_through_take() -> None:
    w = dataclasses.replace(jobs([(0, 1, 60, 1)] * 3),
                            account=np.array([0, 1, 1], dtype=np.int32), accounts=("A", "B"),
                            qos=np.array([1, 0, 1], dtype=np.int32), qos_names=("lo", "hi"))
    part = w.take(np.array([1, 2]))
    assert part.account is not None and part.qos is not None
    assert part.account.tolist() == [1, 1] and part.qos.tolist() == [0, 1]
    assert (part.accounts, part.qos_names) == (("A", "B"), ("lo", "hi"))
