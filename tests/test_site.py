"""Site models: the engine's limits and pools, site.toml, and calibrate on logs built to have
each element (replay a generated workload under a known limit / outage / partitions, read the
result back as a log, and fit)."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from benchmarks.builders.job_tables import job_table, write_job_table
from hpcpolicy.cluster import ClusterSpec, NodeGroup
from hpcpolicy.errors import ConfigError
from hpcpolicy.policies.base import QueueView
from hpcpolicy.sim.compiled import Stepper
from hpcpolicy.sim.engine import simulate
from hpcpolicy.sim.types import RunLimits, SimConfig
from hpcpolicy.site import evidence as ev
from hpcpolicy.site.calibrate import CalibrateConfig, calibrate
from hpcpolicy.site.fidelity import fidelity_report
from hpcpolicy.workload import Workload
from hpcpolicy.world import Pool, SiteModel, apply_site, dumps, loads


def _workload(n: int = 3000, users: int = 12, seed: int = 3, cores: int = 64,
              partitions: tuple[str, ...] = ()) -> Workload:
    rng = np.random.default_rng(seed)
    submit = np.sort(rng.integers(0, n * 60, n)).astype(np.int64)
    run = rng.integers(60, 1800, n).astype(np.int64)
    procs = np.minimum(2 ** rng.integers(0, 5, n), cores).astype(np.int64)
    z = np.zeros(n, dtype=np.int64)
    # a few heavy users submit most jobs, so that a limit binds
    user = np.minimum(rng.geometric(0.3, n) - 1, users - 1).astype(np.int32)
    part = (rng.integers(0, len(partitions), n) if partitions else z).astype(np.int32)
    return Workload(job_id=np.array([str(i) for i in range(n)], dtype=object), submit=submit,
                    run_time=run, req_walltime=run * 2, procs=procs, nodes=z, gpus=z,
                    mem_mib=z, user=user, partition=part, logged_start=z - 1,
                    users=tuple(f"u{i}" for i in range(users)), partitions=partitions)


def _as_logged(w: Workload, cluster: ClusterSpec, cfg: SimConfig) -> Workload:
    """The workload with the replay's starts recorded as the log's."""
    r = simulate(w, cluster, cfg)
    assert (r.start >= 0).all()
    return replace(w, logged_start=r.start)


def _user_peaks(w: Workload, start: np.ndarray) -> np.ndarray:
    peak, _ = ev.running_peaks(w.user.astype(np.int64), start, start + w.run_time,
                               np.ones(len(w), dtype=np.int64))
    return peak


@pytest.mark.parametrize("policy,backfill", [("fcfs", "easy"), ("fcfs", "none"),
                                             ("sjf", "conservative"), ("fairshare", "easy")])
def test_limits_hold_in_every_path(policy: str, backfill: str) -> None:
    w = _workload(800)
    cfg = SimConfig(policy=policy, backfill=backfill, limits=RunLimits(user_jobs=3))
    r = simulate(w, ClusterSpec.homogeneous(64), cfg)
    assert (r.start >= 0).all()
    assert _user_peaks(w, r.start).max() == 3
    free = simulate(w, ClusterSpec.homogeneous(64), replace(cfg, limits=RunLimits()))
    assert _user_peaks(w, free.start).max() > 3  # the limit binds on this workload


def test_limits_hold_for_a_python_policy() -> None:
    w = _workload(500)
    st = Stepper(w, ClusterSpec.homogeneous(64), SimConfig(backfill="easy",
                                                          limits=RunLimits(user_cores=8)))
    view: QueueView | None
    while (view := st.next_decision()) is not None:
        st.decide(view.jobs.astype(float))
    r = st.result()
    peak, _ = ev.running_peaks(w.user.astype(np.int64), r.start, r.start + w.run_time,
                               w.procs.astype(np.int64))
    over = peak > 8  # only a single job larger than the limit, started alone
    assert (r.start >= 0).all() and (peak[over] <= w.procs.max()).all()
    alone = np.isin(w.user, np.flatnonzero(over))
    assert (w.procs[alone] > 8).any() or not over.any()


def test_limits_refuse_the_reference_engine() -> None:
    with pytest.raises(ConfigError, match="fast engine"):
        SimConfig(engine="reference", limits=RunLimits(user_jobs=2))


def test_calibrate_finds_a_user_limit_within_ten_percent() -> None:
    w = _workload()
    cluster = ClusterSpec.homogeneous(64)
    logged = _as_logged(w, cluster, SimConfig(backfill="easy", limits=RunLimits(user_jobs=5)))
    fit = calibrate(logged, cluster, CalibrateConfig(bisect_steps=3))
    assert abs(fit.site.user_jobs - 5) <= 0.5
    assert "limits" in fit.site.elements()
    assert fit.after["spearman"] > fit.before["spearman"]


def test_calibrate_finds_partitions_exactly() -> None:
    w = _workload(partitions=("a", "b"))
    cluster = ClusterSpec((NodeGroup("pool:a", 16, 1), NodeGroup("pool:b", 48, 1)))
    cfg = SimConfig(backfill="easy", pools=(("a", ("pool:a",)), ("b", ("pool:b",))))
    logged = _as_logged(w, cluster, cfg)
    found = ev.find_pools(logged, int(len(w) * 0.7), 64)
    assert found is not None
    assert found.values["pools"] == (Pool("a", 16), Pool("b", 48))
    fit = calibrate(logged, ClusterSpec.homogeneous(64), CalibrateConfig(bisect_steps=2))
    assert fit.site.pools == (Pool("a", 16), Pool("b", 48))


def test_calibrate_finds_an_outage_within_an_hour() -> None:
    w = _workload(2000)
    cluster = ClusterSpec.homogeneous(64)
    # the outage: a whole-machine job (dropped from the log afterwards) that runs 6 hours
    at = int(w.submit[700])
    z = np.zeros(1, dtype=np.int64)
    down = Workload(job_id=np.array(["down"], dtype=object), submit=np.array([at]),
                    run_time=np.array([6 * 3600]), req_walltime=np.array([6 * 3600]),
                    procs=np.array([64]), nodes=z, gpus=z, mem_mib=z,
                    user=np.zeros(1, np.int32), partition=np.zeros(1, np.int32),
                    logged_start=z - 1)
    both = np.concatenate([np.arange(701), [len(w)], np.arange(701, len(w))])
    merged = Workload(**{k: np.concatenate([getattr(w, k), getattr(down, k)])[both] for k in (
        "job_id", "submit", "run_time", "req_walltime", "procs", "nodes", "gpus", "mem_mib",
        "user", "partition", "logged_start")}, users=w.users)
    r = simulate(merged, cluster, SimConfig(backfill="easy"))
    i = int(np.flatnonzero(merged.job_id == "down")[0])
    lo, hi = int(r.start[i]), int(r.end[i])
    logged = replace(w, logged_start=np.delete(r.start, i))
    near = [o for o in ev.dated_outages(logged, int(len(w) * 0.7), 64)
            if abs(o.start_s - w.origin - lo) <= 3600 and abs(o.end_s - w.origin - hi) <= 3600]
    assert near, (lo, hi)


def test_site_toml_round_trip_and_evidence_comments() -> None:
    site = SiteModel(cores_per_node=4, whole_node=True, machine_cores=96,
                     pools=(Pool("gpu q", 8),),
                     user_jobs=7, availability=0.8, priority="fairshare", interval_s=30,
                     evidence={"limits": "5 users peaked at 7 running jobs"})
    text = dumps(site)
    assert "# evidence: 5 users peaked at 7 running jobs" in text
    back = loads(text)
    assert back == site


@pytest.mark.parametrize("text,message", [
    ("[limits]\nuser_job = 3\n", "unknown key limits.user_job"),
    ("[limit]\nuser_jobs = 3\n", "unknown table [limit]"),
    ("[limits]\nuser_jobs = \"3\"\n", "limits.user_jobs: expected a whole number"),
    ("[nodes]\nwhole_node = 1\n", "nodes.whole_node: expected true or false"),
    ("[capacity]\navailability = 2.0\n", "capacity.availability must be in"),
    ("[capacity]\noutages = [{ start = 2002-07-28T10:00:00Z, end = 2002-07-28T18:00:00Z }]\n",
     "missing key 'cores'"),
])
def test_bad_site_toml_names_the_key(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        loads(text)


def test_pools_larger_than_the_machine_are_refused() -> None:
    site = loads("[pools]\na = 40\nb = 40\n")
    with pytest.raises(ConfigError, match="pools: 80 cores in pools"):
        apply_site(site, _workload(10, partitions=("a", "b")), ClusterSpec.homogeneous(64))


def test_cadence_and_holds_move_only_what_the_scheduler_sees() -> None:
    w = _workload(200)
    delay = np.where(np.arange(200) % 10 == 0, 3600, 0).astype(np.int64)
    world = apply_site(SiteModel(use_eligible=True, interval_s=60), w,
                       ClusterSpec.homogeneous(64), delay=delay)
    real = world.workload.submit - world.shift
    assert sorted(real.tolist()) == sorted(w.submit.tolist())
    assert (world.workload.submit % 60 == 0).all()
    assert (np.diff(world.workload.submit) >= 0).all()


def test_fidelity_cli_json_follows_the_schema(tmp_path: Path) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    from hpcpolicy.commands import app
    from schemas import load

    w = _workload(600)
    logged = _as_logged(w, ClusterSpec.homogeneous(64), SimConfig(backfill="easy",
                                                                  limits=RunLimits(user_jobs=4)))
    table = write_job_table(tmp_path / "jobs.parquet", job_table([
        {"submit": int(logged.submit[i]), "wait": int(logged.logged_start[i] - logged.submit[i]),
         "user": f"u{logged.user[i]}", "run_time_s": int(logged.run_time[i]),
         "req_cpus": int(logged.procs[i]), "req_walltime_s": int(logged.req_walltime[i])}
        for i in range(len(logged))]))
    runner = CliRunner()
    out = tmp_path / "f.json"
    res = runner.invoke(app, ["fidelity", str(table), "--procs", "64", "--json", str(out)])
    assert res.exit_code == 0, res.output
    doc = json.loads(out.read_text())
    jsonschema.validate(doc, load("fidelity"))
    site = tmp_path / "site.toml"
    res = runner.invoke(app, ["calibrate", str(table), "--procs", "64", "-o", str(site)])
    assert res.exit_code == 0, res.output
    assert "user_jobs = 4" in site.read_text()
    res = runner.invoke(app, ["fidelity", str(table), "--procs", "64", "--site", str(site)])
    assert res.exit_code == 0 and "out of" in res.output
    res = runner.invoke(app, ["simulate", str(table), "--procs", "64", "--site", str(site),
                              "-b", "easy", "--json", str(tmp_path / "s.json")])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["evaluate", str(table), "--procs", "64", "--site", str(site),
                              "-p", "fcfs,sjf", "-b", "easy", "--windows", "2",
                              "--window-size", "100"])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["whatif", str(table), "--procs", "64", "--site", str(site),
                              "-c", "sjf+easy", "--bootstrap", "100", "-o", str(tmp_path / "r")])
    assert res.exit_code == 0, res.output
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert f"site model {site}" in report["verdict"]
    assert "Evidence from the log: limits:" in report["fidelity"]["explanation"]
    bad = tmp_path / "bad.toml"
    bad.write_text("[limits]\nusers = 3\n")
    res = runner.invoke(app, ["fidelity", str(table), "--procs", "64", "--site", str(bad)])
    assert res.exit_code == 1 and "unknown key limits.users" in res.output


def test_fidelity_report_parts() -> None:
    w = _workload(600)
    logged = _as_logged(w, ClusterSpec.homogeneous(64), SimConfig(backfill="easy"))
    doc = fidelity_report(logged, ClusterSpec.homogeneous(64))
    # FCFS + EASY replaying its own schedule reproduces it
    assert doc["whole"]["mean_wait_rel_error"] == pytest.approx(0.0, abs=1e-9)
    assert doc["fit"]["jobs"] + doc["out_of_sample"]["jobs"] == 600


def test_fidelity_by_size_is_in_size_order() -> None:
    w = _workload(1200)
    w = dataclasses.replace(w, procs=np.array([(1, 3, 12, 40)[i % 4] for i in range(len(w))],
                                              dtype=np.int64))
    logged = _as_logged(w, ClusterSpec.homogeneous(64), SimConfig(backfill="easy"))
    doc = fidelity_report(logged, ClusterSpec.homogeneous(64))
    assert [row["group"] for row in doc["by_size"]] == ["1", "2-4", "5-16", "17-64"]


def test_calibrate_finds_a_larger_machine_than_the_header() -> None:
    """A log scheduled on 128 cores, replayed on the 64 its header claims: the nodes element
    raises the machine, with the time the log ran more cores than 64 as its evidence."""
    w = _workload()
    logged = _as_logged(w, ClusterSpec.homogeneous(128), SimConfig(backfill="easy"))
    header = ClusterSpec.homogeneous(64)
    found = ev.find_machine_size(logged, int(len(w) * 0.7), 64)
    assert found is not None and 64 < found.values["machine_cores"] <= 128
    assert "more than the machine's 64 cores" in found.evidence
    fit = calibrate(logged, header, CalibrateConfig(bisect_steps=2))
    assert "nodes" in fit.site.elements()
    assert abs(fit.site.machine_cores - 128) <= 12.8
    assert abs(fit.after["mean_wait_rel_error"]) < abs(fit.before["mean_wait_rel_error"])
    assert apply_site(fit.site, logged, header).cluster.total_cores == fit.site.machine_cores
    assert ev.find_machine_size(logged, int(len(w) * 0.7), 128) is None


def test_calibrate_drops_an_element_the_later_fitted_jobs_contradict() -> None:
    """Backfilling off over the earliest jobs only: it fits them, but the validation slice
    (the latest fitted jobs, scheduled with EASY) shows that it does not carry over."""
    w = _workload()
    cluster = ClusterSpec.homogeneous(64)
    plain = simulate(w, cluster, SimConfig(backfill="none"))
    easy = simulate(w, cluster, SimConfig(backfill="easy"))
    cut = int(len(w) * 0.4)
    logged = replace(w, logged_start=np.concatenate((plain.start[:cut], easy.start[cut:])))
    fit = calibrate(logged, cluster, CalibrateConfig(bisect_steps=2))
    cadence = next(s for s in fit.ablation if s["element"] == "cadence")
    assert not cadence["kept"] and fit.site.backfill == "easy"
    early = calibrate(replace(w, logged_start=plain.start), cluster,
                      CalibrateConfig(bisect_steps=2))
    assert early.site.backfill == "none"  # where the log never backfilled, it is kept


def test_machine_cores_refuses_a_machine_of_several_groups() -> None:
    cluster = ClusterSpec((NodeGroup("a", 8, 4), NodeGroup("b", 8, 4)))
    with pytest.raises(ConfigError, match=r"nodes\.machine_cores resizes"):
        apply_site(loads("[nodes]\nmachine_cores = 96\n"), _workload(10), cluster)


def test_fidelity_and_calibrate_take_a_walltime_fallback(tmp_path: Path) -> None:
    """A sacct log without time limits: the one-line error names --walltime-fallback, which
    both commands accept."""
    from hpcpolicy.commands import app

    logged = _as_logged(_workload(300), ClusterSpec.homogeneous(64), SimConfig(backfill="easy"))
    table = write_job_table(tmp_path / "jobs.parquet", job_table([
        {"submit": int(logged.submit[i]), "wait": int(logged.logged_start[i] - logged.submit[i]),
         "user": f"u{logged.user[i]}", "run_time_s": int(logged.run_time[i]),
         "req_cpus": int(logged.procs[i]), "req_walltime_s": None}
        for i in range(len(logged))]))
    runner = CliRunner()
    res = runner.invoke(app, ["fidelity", str(table), "--procs", "64"])
    assert res.exit_code == 1 and "--walltime-fallback" in res.output
    for command in (["fidelity"], ["calibrate", "-o", str(tmp_path / "s.toml")]):
        res = runner.invoke(app, [*command, str(table), "--procs", "64",
                                  "--walltime-fallback", "runtime"])
        assert res.exit_code == 0, res.output
