"""QOS, association and partition limits in the Slurm world, the main pass's queue depth,
and properties that hold on any log (hypothesis): no limit exceeded, never more cores
than the machine, and age alone is first come first served."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_slurm_world_priority import FILL, conf, jobs

from hpcpolicy.sim.types import SimResult
from hpcpolicy.workload import Workload
from hpcpolicy.world.slurm import replay, slurm_world

EIGHT_ONES = [(0, 100, 100, 1, 0)] * 3
"""Three 1-core jobs of u0 submitted together on the empty 8-core machine."""


def starts(tmp: Path, w: Workload, text: str = "", qos: str = "",
           assoc: str = "", **kw: str) -> SimResult:
    return replay(w, slurm_world(conf(tmp, text, qos, assoc), w, **kw))


def test_qos_max_jobs_per_user(tmp_path: Path) -> None:
    w = jobs(EIGHT_ONES)
    assert starts(tmp_path, w).start.tolist() == [0, 0, 0]
    res = starts(tmp_path, w, qos="Name|Priority|MaxJobsPU\nnormal|0|1\n")
    assert res.start.tolist() == [0, 100, 200]


def test_max_submit_refuses_at_submit(tmp_path: Path) -> None:
    # the third job finds two of u0's jobs pending or running: sbatch would fail
    res = starts(tmp_path, jobs(EIGHT_ONES), qos="Name|Priority|MaxSubmitPU\nnormal|0|2\n")
    assert res.start.tolist() == [0, 0, -1]
    assert res.stats["rejected_at_submit"] == 1 and res.never_fits.tolist() == [0, 0, 1]
    # association MaxSubmit the same, from the user's account (inherited)
    assoc = "Account|User|Share|MaxSubmit\nA||1|2\nA|u0|1|\n"
    res = starts(tmp_path, jobs(EIGHT_ONES, accounts=[0, 0, 0]), assoc=assoc)
    assert res.start.tolist() == [0, 0, -1]


def test_core_limits(tmp_path: Path) -> None:
    w = jobs([(0, 100, 100, 3, 0), (0, 100, 100, 3, 1), (0, 100, 100, 1, 0)])
    # GrpTRES=cpu=4: 3 + 3 > 4, so b waits for a; c (1 core) fits beside a
    grp = starts(tmp_path, w, qos="Name|Priority|GrpTRES\nnormal|0|cpu=4\n")
    assert grp.start.tolist() == [0, 100, 0]
    # MaxTRESPerUser=cpu=3: u0's c waits for a, u1's b runs at once
    per = starts(tmp_path, w, qos="Name|Priority|MaxTRESPU\nnormal|0|cpu=3\n")
    assert per.start.tolist() == [0, 0, 100]
    # association GrpTRES=cpu=4 on account A holds all its users' jobs together
    assoc = "Account|User|Share|GrpTRES\nA||1|cpu=4\nA|u0|1|\nA|u1|1|\n"
    tree = starts(tmp_path, jobs([(0, 100, 100, 3, 0), (0, 100, 100, 3, 1), (0, 100, 100, 1, 0)],
                                 accounts=[0, 0, 0]), assoc=assoc)
    assert tree.start.tolist() == [0, 100, 0]
    # association MaxJobs=1 (per user association)
    one = starts(tmp_path, jobs(EIGHT_ONES, accounts=[0, 0, 0]),
                 assoc="Account|User|Share|MaxJobs\nA||1|\nA|u0|1|1\n")
    assert one.start.tolist() == [0, 100, 200]


def test_max_wall_max_time_default_time_max_nodes(tmp_path: Path) -> None:
    w = jobs([(0, 100, 180, 1, 0), (0, 100, 0, 1, 0), (0, 10, 60, 8, 0)], nodes=0)
    # QOS MaxWall=00:01:00: a (limit 180 s) refused; b has no limit and gets MaxWall's
    # 60 s (ended there); c (the whole machine) waits for it
    res = starts(tmp_path, w, qos="Name|Priority|MaxWall\nnormal|0|00:01:00\n")
    assert res.start.tolist() == [-1, 0, 60] and res.stats["rejected"] == 1
    # slurm.conf durations are minutes: MaxTime 120 s refuses a (180 s) or caps it; b gets
    # DefaultTime 60 s; c (8 cores, MaxNodes=1 of 4-core nodes) can never be placed
    text = "PartitionName=DEFAULT MaxTime=2 DefaultTime=1 MaxNodes=1\n"
    world = slurm_world(conf(tmp_path, text), w)
    assert world.limit[1] == 60 and world.rejected.tolist() == [True, False, True]
    capped = slurm_world(conf(tmp_path, text), w, over_max_time="cap")
    assert capped.limit[0] == 120 and capped.rejected.tolist() == [False, False, True]
    assert replay(w, capped).start.tolist() == [0, 0, -1]


def test_default_queue_depth(tmp_path: Path) -> None:
    # b (u0) is held by MaxJobsPerUser=1 while a runs: the main pass skips it (a limit does
    # not close the partition) and starts c at once, unless default_queue_depth=1 stops the
    # pass at b; then c waits for backfill, every 10 s here
    w = jobs([(0, 100, 100, 2, 0), (1, 10, 50, 1, 0), (1, 10, 50, 1, 1)])
    text = "SchedulerParameters=bf_interval=10,default_queue_depth={}\n"
    qos = "Name|Priority|MaxJobsPU\nnormal|0|1\n"
    assert starts(tmp_path, w, text.format(100), qos).start.tolist() == [0, 100, 1]
    assert starts(tmp_path, w, text.format(1), qos).start.tolist() == [0, 100, 10]


# ------------------------------------------------------------------------------ properties
QOS = "Name|Priority|MaxJobsPU|MaxTRESPU|GrpTRES\nnormal|0|2|cpu=5|cpu=7\n"


@st.composite
def logs(draw: st.DrawFn) -> Workload:
    n = draw(st.integers(1, 30))
    rows, t = [], 0
    for _ in range(n):
        t += draw(st.sampled_from([0, 0, 2, 9, 40]))
        run = draw(st.integers(0, 120))
        rows.append((t, run, run + draw(st.sampled_from([0, 60])) or 60,
                     draw(st.integers(1, 5)), draw(st.integers(0, 2))))
    return jobs(rows, nodes=draw(st.sampled_from([0, 1])))


def _peak(res: SimResult, mask: np.ndarray, weight: np.ndarray) -> int:
    """The most ``weight`` held at once by the started jobs of ``mask``."""
    on = mask & (res.start >= 0) & (res.end > res.start)
    events = sorted([(int(t), 1, int(x)) for t, x in zip(res.start[on], weight[on],
                                                          strict=True)]
                    + [(int(t), 0, -int(x)) for t, x in zip(res.end[on], weight[on],
                                                            strict=True)])
    level = peak = 0
    for _, _, x in events:
        level += x
        peak = max(peak, level)
    return peak


@settings(max_examples=40, deadline=None)
@given(w=logs(), bf=st.sampled_from([1, 5]))
def test_no_limit_exceeded_nor_the_machine(w: Workload, bf: int,
                                           tmp_path_factory: pytest.TempPathFactory) -> None:
    text = ("PriorityWeightAge=1000\nPriorityWeightJobSize=500\nPriorityCalcPeriod=1\n"
            f"SchedulerParameters=bf_interval={bf}\n")
    res = starts(tmp_path_factory.mktemp("conf"), w, text, qos=QOS)
    procs = np.asarray(w.procs)
    ones = np.ones(len(w), dtype=np.int64)
    assert _peak(res, ones.astype(bool), procs) <= 8  # the machine's cores
    assert _peak(res, ones.astype(bool), procs) <= 7  # GrpTRES=cpu=7
    for u in range(3):
        mine = np.asarray(w.user) == u
        assert _peak(res, mine, ones) <= 2  # MaxJobsPerUser=2
        assert _peak(res, mine, procs) <= 5  # MaxTRESPerUser=cpu=5
    assert ((res.start < 0) | (res.start >= w.submit)).all()


@settings(max_examples=40, deadline=None)
@given(w=logs())
def test_age_alone_is_first_come_first_served(
        w: Workload, tmp_path_factory: pytest.TempPathFactory) -> None:
    tmp = tmp_path_factory.mktemp("conf")
    basic = starts(tmp, w, "PriorityType=priority/basic\n")
    aged = starts(tmp, w, "PriorityWeightAge=1000\nPriorityCalcPeriod=1\n")
    assert aged.start.tolist() == basic.start.tolist()


def test_fill_holds_the_machine(tmp_path: Path) -> None:
    res = starts(tmp_path, jobs([FILL, (1, 10, 60, 1, 0)]))
    assert res.start.tolist() == [0, 1000]


# ------------------------------------------------------------------------ backfill knobs
def test_bf_window_max_job_test_and_max_job_user(tmp_path: Path) -> None:
    # a holds 6 of 8 cores until 1000; b (8 cores) is blocked and reserved at 1000; c
    # (1 core, 60 s) ends before that and is backfilled at once, unless backfill tests only
    # one job (bf_max_job_test=1) or one job of each user (bf_max_job_user=1, c is b's user)
    rows = [(0, 1000, 1000, 6, 0), (1, 10, 60, 8, 0), (2, 10, 60, 1, 0)]
    w = jobs(rows)
    bf = "SchedulerParameters=bf_interval=1{}\n"
    assert starts(tmp_path, w, bf.format("")).start.tolist() == [0, 1000, 2]
    assert starts(tmp_path, w, bf.format(",bf_max_job_test=1")).start.tolist() == [0, 1000, 1010]
    assert starts(tmp_path, w, bf.format(",bf_max_job_user=1")).start.tolist() == [0, 1000, 1010]
    other = jobs([*rows[:2], (2, 10, 60, 1, 1)])
    assert starts(tmp_path, other, bf.format(",bf_max_job_user=1")).start.tolist() == [0, 1000, 2]
    # c for 1500 s would run past b's reservation: it waits; with a 10-minute bf_window b's
    # start (1000 s away) is beyond the plan, b gets no reservation and c starts, delaying b
    long = jobs([*rows[:2], (2, 1500, 1500, 1, 0)])
    assert starts(tmp_path, long, bf.format("")).start.tolist() == [0, 1000, 1010]
    assert starts(tmp_path, long, bf.format(",bf_window=10")).start.tolist() == [0, 1502, 2]
