"""RLScheduler's published figures (Zhang et al., SC20; DIR-LAB/deep-batch-scheduler), replayed.

Their protocol: windows of 1,024 consecutive jobs starting at the 0-based indices below
(lublin_256; the same indices into HPC2N's first 10,000 jobs), an empty machine at each
window's start, bsld with tau = 10 s averaged per window and then over windows; their
workload conventions are the ``rlscheduler`` preset of :class:`WorkloadOptions` (processors
= max(allocated, requested), run time 0 dropped, run time -1 read as 10 s, requested time -1
replaced by the run time), their machine the SWF header's (256 and 240 processors).

Strict FCFS must match to 0.01 %, both under the project's semantics and under theirs (they
coincide without backfilling). The other figures need their engine semantics
(``compat="rlscheduler"``: a fixed head, their backfilling) and must match to 0.1 %.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import shared_file

from hpcpolicy.cluster import ClusterSpec
from hpcpolicy.cluster_io import resolve_cluster
from hpcpolicy.ingest import ingest
from hpcpolicy.sim import SimConfig
from hpcpolicy.sim.windows import WindowConfig, replay
from hpcpolicy.workload import Workload, WorkloadOptions

STARTS = (1981, 2714, 2756, 3316, 4022, 4299, 5228, 7085, 7762, 8850)
WINDOWS = WindowConfig(size=1024, starts=STARTS)


def _load(name: str, tmp: Path) -> tuple[Workload, ClusterSpec]:
    table = tmp / f"{Path(name).name.split('.')[0]}.parquet"
    ingest([shared_file(name)], table)
    options = WorkloadOptions.preset("rlscheduler")
    return Workload.from_table(table, options=options), resolve_cluster(table=table)


@pytest.fixture(scope="module")
def lublin(tmp_path_factory: pytest.TempPathFactory) -> tuple[Workload, ClusterSpec]:
    return _load("lublin_256.swf", tmp_path_factory.mktemp("lublin"))


@pytest.fixture(scope="module")
def hpc2n(tmp_path_factory: pytest.TempPathFactory) -> tuple[Workload, ClusterSpec]:
    w, cluster = _load("HPC2N-2002-2.2-cln.swf.gz", tmp_path_factory.mktemp("hpc2n"))
    return w.take(np.arange(10_000)), cluster


def _windows(data: tuple[Workload, ClusterSpec], configs: list[SimConfig]) -> list[dict]:
    w, cluster = data
    return [r.summary for r in replay(w, cluster, configs, WINDOWS,
                                      utilization_end="last_start")]


@pytest.mark.parametrize("compat", [None, "rlscheduler"])
def test_strict_fcfs_lublin_windows(lublin: tuple[Workload, ClusterSpec],
                                    compat: str | None) -> None:
    w, cluster = lublin
    assert (len(w), cluster.total_cores) == (10_000, 256)
    [s] = _windows(lublin, [SimConfig(policy="fcfs", compat=compat)])
    assert s["mean_bsld"] == pytest.approx(7273.77, rel=1e-4)
    assert s["mean_wait_s"] == pytest.approx(258203.4, rel=1e-4)


def test_strict_fcfs_whole_lublin_trace(lublin: tuple[Workload, ClusterSpec]) -> None:
    w, cluster = lublin
    [run] = replay(w, cluster, [SimConfig(policy="fcfs")])
    assert run.summary["mean_wait_s"] == pytest.approx(2388443.76, rel=1e-4)
    assert run.summary["mean_bsld"] == pytest.approx(66502.48, rel=1e-4)


@pytest.mark.parametrize("compat", [None, "rlscheduler"])
def test_strict_fcfs_hpc2n_windows(hpc2n: tuple[Workload, ClusterSpec],
                                   compat: str | None) -> None:
    assert hpc2n[1].total_cores == 240
    [s] = _windows(hpc2n, [SimConfig(policy="fcfs", compat=compat)])
    assert s["mean_bsld"] == pytest.approx(297.18, rel=1e-4)
    assert s["mean_wait_s"] == pytest.approx(17101.3, rel=1e-4)


# Their Table (avg bounded slowdown), with their engine semantics.
PUBLISHED = {
    "lublin": {("none", "sjf"): 277.35, ("none", "f1"): 258.37, ("easy", "fcfs"): 235.82,
               ("easy", "sjf"): 73.31, ("easy", "f1"): 75.07},
    "hpc2n": {("none", "sjf"): 157.71, ("none", "f1"): 118.01, ("easy", "fcfs"): 127.38,
              ("easy", "sjf"): 122.04, ("easy", "f1"): 71.95},
}


@pytest.mark.parametrize("trace", sorted(PUBLISHED))
def test_rlscheduler_semantics_reproduce_the_published_table(
        trace: str, request: pytest.FixtureRequest) -> None:
    data = request.getfixturevalue(trace)
    cells = sorted(PUBLISHED[trace])
    configs = [SimConfig(policy=p, backfill=b, compat="rlscheduler") for b, p in cells]
    got = {cell: s["mean_bsld"] for cell, s in zip(cells, _windows(data, configs),
                                                   strict=True)}
    expected = {cell: pytest.approx(PUBLISHED[trace][cell], rel=1e-3) for cell in cells}
    assert got == expected
