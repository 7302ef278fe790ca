"""The windowed protocol on a stand-in engine (strict FCFS on one pool of cores)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from hpcpolicy.cluster import ClusterSpec
from hpcpolicy.errors import ConfigError
from hpcpolicy.sim.metrics import SUMMARY_KEYS
from hpcpolicy.sim.types import RunningJobs, SimConfig, SimResult
from hpcpolicy.sim.windows import WindowConfig, choose_starts, replay, running_at
from hpcpolicy.workload import Workload
from hpcpolicy.world.split import latest_starts, part_range


class FcfsEngine:
    """Strict FCFS without backfilling on ``total_cores``; records what it was asked."""

    def __init__(self) -> None:
        self.calls: list[tuple[list[str], SimConfig, RunningJobs | None]] = []

    def __call__(self, w: Workload, cluster: ClusterSpec, cfg: SimConfig, *,
                 running: RunningJobs | None = None) -> SimResult:
        self.calls.append((w.job_id.tolist(), cfg, running))
        cap = cluster.total_cores
        busy = [] if running is None else list(zip(running.end.tolist(), running.procs.tolist(),
                                                    strict=True))
        start = np.full(len(w), -1, dtype=np.int64)
        t = 0
        for i in range(len(w)):
            if w.procs[i] > cap:
                continue
            t = max(t, int(w.submit[i]))
            while sum(p for e, p in busy if e > t) + w.procs[i] > cap:
                t = min(e for e, _ in busy if e > t)
            start[i] = t
            busy.append((t + int(w.run_time[i]), int(w.procs[i])))
        end = np.where(start >= 0, start + w.run_time, -1)
        return SimResult(start=start, end=end, never_fits=w.procs > cap,
                         killed=np.zeros(len(w), bool), stats={"jobs": len(w)})


def workload(submit: list[int], run: list[int], procs: list[int]) -> Workload:
    n = len(submit)
    i64 = lambda v: np.asarray(v, dtype=np.int64)  # noqa: E731
    return Workload(job_id=np.array([str(i) for i in range(n)], dtype=object),
                    submit=i64(submit), run_time=i64(run), req_walltime=i64(run) * 2,
                    procs=i64(procs), nodes=np.zeros(n, np.int64), gpus=np.zeros(n, np.int64),
                    mem_mib=np.zeros(n, np.int64), user=np.zeros(n, np.int32),
                    partition=np.zeros(n, np.int32), logged_start=np.full(n, -1, np.int64),
                    users=("u",), partitions=("p",))


CLUSTER = ClusterSpec.homogeneous(4)


def test_explicit_starts_are_checked() -> None:
    assert choose_starts(10, WindowConfig(size=4, starts=(6, 0))) == (6, 0)
    with pytest.raises(ConfigError, match=r"\[7\] \+ size 4 run past the workload's 10 jobs"):
        choose_starts(10, WindowConfig(size=4, starts=(7,)))
    with pytest.raises(ConfigError, match="larger than the workload's 3 jobs"):
        choose_starts(3, WindowConfig(size=4))
    with pytest.raises(ConfigError, match="must be >= 0"):
        WindowConfig(starts=(-1,))


def test_latest_starts_end_at_the_cut_side_by_side() -> None:
    cut = part_range(10_007, "train", 0.7)[1]
    starts = latest_starts(10_007, "train", 0.7, size=1024, count=3)
    assert starts[-1] + 1024 == cut
    assert np.diff(starts).tolist() == [1024, 1024]
    # a part with room for fewer windows than asked gives every one it has, oldest first
    assert latest_starts(3000, "train", 0.7, size=1024, count=5) == (52, 1076)
    with pytest.raises(ConfigError, match="count"):
        latest_starts(3000, "train", 0.7, size=1024, count=0)
    with pytest.raises(ConfigError, match="fewer than one window"):
        latest_starts(1000, "train", 0.7, size=1024, count=1)


def test_random_starts_are_seeded_distinct_and_in_range() -> None:
    a = choose_starts(50, WindowConfig(size=10, count=8, seed=3))
    assert a == choose_starts(50, WindowConfig(size=10, count=8, seed=3))
    assert len(set(a)) == 8 and list(a) == sorted(a) and a[0] >= 0 and a[-1] <= 40
    draws = {choose_starts(50, WindowConfig(size=10, count=8, seed=s)) for s in range(5)}
    assert len(draws) > 1
    with pytest.raises(ConfigError, match="do not fit"):
        choose_starts(12, WindowConfig(size=10, count=4))


def test_every_configuration_sees_the_same_cold_windows() -> None:
    w = workload(submit=list(range(0, 80, 10)), run=[15] * 8, procs=[2, 4, 1, 3, 4, 2, 2, 1])
    engine = FcfsEngine()
    cfgs = [SimConfig("fcfs"), SimConfig("sjf", "easy")]
    runs = replay(w, CLUSTER, cfgs, WindowConfig(size=3, starts=(1, 4)), simulate=engine)
    seen = [(ids, cfg.policy, running) for ids, cfg, running in engine.calls]
    assert seen == [(["1", "2", "3"], "fcfs", None), (["4", "5", "6"], "fcfs", None),
                    (["1", "2", "3"], "sjf", None), (["4", "5", "6"], "sjf", None)]
    first = runs[0]
    assert [r.start for r in first.windows] == [1, 4]
    # window @1: job1 [10,25) 4 procs; job2 waits to 25 -> 5; job3 starts 30 -> 0
    assert first.windows[0].outcomes()["wait"].to_list() == [0, 5, 0]
    # the run's summary is the mean over windows, jobs the total
    per = [r.summary for r in first.windows]
    assert first.summary["jobs"] == 6
    assert first.summary["mean_wait_s"] == pytest.approx(
        (per[0]["mean_wait_s"] + per[1]["mean_wait_s"]) / 2)
    assert set(first.summary) == set(SUMMARY_KEYS)
    table = first.outcomes()
    assert table["window"].to_list() == [1, 1, 1, 4, 4, 4]
    assert table["policy"].unique().to_list() == ["fcfs"]


def test_whole_workload_is_one_cold_run() -> None:
    w = workload(submit=[0, 0, 5], run=[10, 10, 10], procs=[4, 4, 1])
    (run,) = replay(w, CLUSTER, [SimConfig()], simulate=FcfsEngine())
    assert [r.start for r in run.windows] == [None]
    # job0 [0,10), job1 [10,20), job2 FCFS behind job1: [20,30)
    assert run.summary["mean_wait_s"] == pytest.approx((0 + 10 + 15) / 3)
    assert run.outcomes()["window"].to_list() == [None, None, None]


def test_warm_start_preloads_what_the_reference_schedule_runs() -> None:
    # jobs 0-1 precede the window @2 (first submit t0 = 20); reference FCFS on 4 cores:
    # job0 [0,100) takes all 4 cores, job1 (2 procs) waits until 100 >= t0: backlog.
    w = workload(submit=[0, 10, 20, 30], run=[100, 50, 10, 10], procs=[4, 2, 1, 1])
    engine = FcfsEngine()
    running, backlog = running_at(w, 2, CLUSTER, WindowConfig(size=2), engine, SimConfig())
    assert (running.procs.tolist(), running.end.tolist(), backlog) == ([4], [100], 1)
    assert running.req_end.tolist() == [200]  # start 0 + requested walltime 200
    assert engine.calls[0][1].backfill == "easy"  # the fixed reference schedule
    runs = replay(w, CLUSTER, [SimConfig("fcfs"), SimConfig("lcfs")],
                  WindowConfig(size=2, starts=(2,), warm=True), simulate=engine)
    # one warm-up replay shared by both configurations
    assert sum(1 for ids, _, _ in engine.calls if ids == ["0", "1"]) == 2  # incl. direct call
    win = runs[0].windows[0]
    assert (win.preloaded, win.backlog) == (1, 1)
    # the window's jobs wait for the pre-loaded job to end at 100
    assert win.outcomes()["start"].to_list() == [100, 100]
    assert runs[1].windows[0].outcomes()["start"].to_list() == [100, 100]


def test_warm_window_at_the_first_job_starts_empty() -> None:
    w = workload(submit=[0, 10], run=[5, 5], procs=[1, 1])
    running, backlog = running_at(w, 0, CLUSTER, WindowConfig(size=1), FcfsEngine(),
                                  SimConfig())
    assert len(running) == 0 and backlog == 0


def test_no_configuration_is_an_error() -> None:
    kwargs: dict[str, Any] = {"simulate": FcfsEngine()}
    with pytest.raises(ConfigError, match="no configuration"):
        replay(workload([0], [1], [1]), CLUSTER, [], **kwargs)


def test_document_validates_against_the_schema() -> None:
    import jsonschema

    from hpcpolicy import schemas
    from hpcpolicy.sim.windows import to_document

    w = workload(submit=[0, 10, 20, 30, 40], run=[100, 50, 10, 10, 5], procs=[4, 2, 1, 9, 1])
    engine = FcfsEngine()
    validator = jsonschema.Draft202012Validator(schemas.load("sim_summary"))
    for wcfg in (None, WindowConfig(size=3, starts=(1, 2), warm=True)):
        runs = replay(w, CLUSTER, [SimConfig("fcfs"), SimConfig("sjf", "easy")], wcfg,
                      simulate=engine)
        doc = to_document(runs, source="jobs.parquet", workload=w, cluster=CLUSTER,
                          windows=wcfg)
        validator.validate(doc)
        assert [r["policy"] for r in doc["runs"]] == ["fcfs", "sjf"]
        # job 3 needs 9 of 4 cores: reported, never started
        assert doc["runs"][0]["never_fits"] == {"jobs": 1, "job_ids": ["3"]}
    assert doc["windows"]["starts"] == [1, 2] and doc["windows"]["seed"] is None
    assert [x["preloaded"] for x in doc["runs"][0]["windows"]] == [1, 1]
