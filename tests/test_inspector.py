"""The inspector over a heuristic (issue 43 item 2): the decision point, what it sees, its
artifact, and a tiny training run."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from hpcpolicy.cluster import ClusterSpec
from hpcpolicy.errors import ArtifactError, ConfigError, SimulationError
from hpcpolicy.inspector import Inspector, accept_first
from hpcpolicy.inspector.features import CANDIDATE_FEATURES, RANKERS, Candidates
from hpcpolicy.sim.engine import simulate
from hpcpolicy.sim.types import SimConfig
from hpcpolicy.workload import Workload


def busy(n: int = 160, seed: int = 3) -> Workload:
    """A queue that builds: ``n`` jobs of 1-16 cores on a 32-core machine."""
    rng = np.random.default_rng(seed)
    z = np.zeros(n, dtype=np.int64)
    run = rng.integers(60, 4000, n)
    return Workload(job_id=np.array([str(i) for i in range(n)], dtype=object),
                    submit=np.sort(rng.integers(0, 20 * n, n)), run_time=run,
                    req_walltime=run * rng.integers(1, 4, n), procs=rng.integers(1, 17, n),
                    nodes=z, gpus=z, mem_mib=z, user=rng.integers(0, 5, n).astype(np.int32),
                    partition=z.astype(np.int32), logged_start=z - 1)


MACHINE = ClusterSpec.homogeneous(32)


@pytest.mark.parametrize("heuristic", ["sjf", "wfp3", "f1", "lcfs"])
@pytest.mark.parametrize("backfill", ["none", "easy"])
def test_accepting_every_first_proposal_is_the_bare_heuristic(heuristic: str,
                                                              backfill: str) -> None:
    w = busy()
    bare = simulate(w, MACHINE, SimConfig(policy=heuristic, backfill=backfill))
    inspected = simulate(w, MACHINE, SimConfig(backfill=backfill),
                         policy=Inspector(heuristic, accept_first, k=4))
    assert np.array_equal(bare.start, inspected.start)
    assert (bare.start[1:] != bare.start[:-1]).any()  # a real schedule, not all at once


def test_rejecting_the_first_proposal_starts_the_next() -> None:
    z = np.zeros(3, dtype=np.int64)
    w = Workload(job_id=np.array(["a", "b", "c"], dtype=object), submit=z,
                 run_time=np.array([10, 10, 10]), req_walltime=np.array([30, 10, 20]),
                 procs=np.array([2, 2, 2]), nodes=z, gpus=z, mem_mib=z,
                 user=z.astype(np.int32), partition=z.astype(np.int32), logged_start=z - 1)
    seen: list[Candidates] = []

    def reject_first(c: Candidates) -> int:
        seen.append(c)
        return 1 if c.count > 1 else 0

    start = simulate(w, ClusterSpec.homogeneous(2), SimConfig(),
                     policy=Inspector("sjf", reject_first, k=8)).start
    # sjf proposes b (10 s), c (20 s), a (30 s): c is accepted first, then a over b
    assert start.tolist() == [10, 20, 0]
    assert seen[0].order.tolist() == [1, 2, 0] and seen[0].count == 3


def test_a_proposal_out_of_range_is_one_line() -> None:
    with pytest.raises(SimulationError, match="accepted proposal 5 of"):
        simulate(busy(), MACHINE, SimConfig(), policy=Inspector("sjf", lambda c: 5, k=4))


def test_what_the_inspector_sees() -> None:
    views: list[Candidates] = []

    def look(c: Candidates) -> int:
        views.append(c)
        return 0

    simulate(busy(), MACHINE, SimConfig(), policy=Inspector("sjf", look, k=4))
    crowded = next(c for c in views if c.order.shape[0] > 4)
    assert crowded.jobs.shape == (4, len(CANDIDATE_FEATURES)) and crowded.count == 4
    ranks = crowded.jobs[:, len(CANDIDATE_FEATURES) - len(RANKERS):]
    sjf = ranks[:, RANKERS.index("sjf")]
    assert sjf[0] == 0.0 and (np.diff(sjf) > 0).all()   # its own proposals, best first
    assert ((ranks >= 0) & (ranks <= 1)).all() and (crowded.cluster <= 1).all()
    few = next(c for c in views if c.order.shape[0] == 1)
    assert few.count == 1 and not few.jobs[1:].any()


def test_a_heuristic_that_cannot_propose_is_refused() -> None:
    with pytest.raises(ConfigError, match="'fairshare' cannot propose jobs; valid: fcfs"):
        Inspector("fairshare", accept_first)
    with pytest.raises(ConfigError, match="k 0: must be >= 1"):
        Inspector("sjf", accept_first, k=0)


@pytest.fixture(scope="module")
def untrained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An untrained inspector over sjf: its rank bias accepts the first proposal."""
    pytest.importorskip("torch")
    from hpcpolicy.env.spaces import CLUSTER_FEATURES
    from hpcpolicy.inspector.artifact import export_inspector
    from hpcpolicy.learn.networks import JobScorer

    net = JobScorer(len(CANDIDATE_FEATURES), len(CLUSTER_FEATURES), (8,), rank_bias=5.0)
    return export_inspector(net, tmp_path_factory.mktemp("insp") / "policy", heuristic="sjf",
                            k=4, config={"algo": "inspector-bc", "seed": 1}, metrics={})


def test_artifact_round_trip_and_resolve(untrained: Path) -> None:
    from hpcpolicy.deploy.resolve import resolve_policy
    from hpcpolicy.inspector.artifact import InspectorPolicy

    manifest = json.loads((untrained / "manifest.json").read_text())
    assert manifest["format"] == "hpcpolicy.inspector"
    assert manifest["observation"]["slot_order"] == "sjf" and manifest["observation"]["k"] == 4
    policy = resolve_policy(str(untrained))
    assert isinstance(policy, InspectorPolicy) and policy.heuristic == "sjf"
    w = busy()
    for backfill in ("none", "easy"):
        bare = simulate(w, MACHINE, SimConfig(policy="sjf", backfill=backfill))
        run = simulate(w, MACHINE, SimConfig(backfill=backfill), policy=policy)
        assert np.array_equal(bare.start, run.start)


def test_an_inspector_folder_is_not_a_job_scorer(untrained: Path, tmp_path: Path) -> None:
    from hpcpolicy.deploy.learned import LearnedPolicy
    from hpcpolicy.inspector.artifact import InspectorPolicy

    with pytest.raises(ArtifactError, match=r"does not match policy_manifest\.schema\.json"):
        LearnedPolicy(untrained)
    with pytest.raises(ArtifactError, match=r"not a hpcpolicy\.inspector artifact"):
        InspectorPolicy(tmp_path)


def test_a_tiny_training_run(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from hpcpolicy.deploy.resolve import resolve_policy
    from hpcpolicy.inspector.train import InspectorConfig, train_inspector

    w = busy(600, seed=5)
    cfg = InspectorConfig(heuristic="fcfs", k=4, windows=3, window_size=64, epochs=20,
                          backfill="none", dagger_rounds=1)
    path, seen = train_inspector(w, MACHINE, cfg, tmp_path / "policy",
                                 training_data={"path": "busy", "sha256": "0" * 64})
    fit_lo, fit_hi = seen["fit_jobs"]
    assert (fit_lo, fit_hi) == (0, 360)  # 0-60 %: the validation and test parts unread
    assert all(x["start"] + 64 <= fit_hi for x in seen["windows"])
    assert all(x["teacher"] == x["best"] == min(x["bsld"], key=x["bsld"].get)
               for x in seen["windows"])
    assert seen["decisions"] > 0 and 0.0 <= seen["accept_share"] <= 1.0
    manifest = json.loads((path / "manifest.json").read_text())
    assert manifest["provenance"]["split"]["jobs"] == [0, 360]
    assert manifest["provenance"]["teachers"] == [x["teacher"] for x in seen["windows"]]
    simulate(w, MACHINE, SimConfig(), policy=resolve_policy(str(path)))


def test_small_wins_do_not_teach() -> None:
    from hpcpolicy.inspector.train import InspectorConfig, teachers

    w = busy(600, seed=5)
    starts = (0, 100, 200)
    picky = InspectorConfig(heuristic="fcfs", window_size=64, min_gain=0.99)
    plain = InspectorConfig(heuristic="fcfs", window_size=64)
    assert [x["teacher"] for x in teachers(w, MACHINE, picky, starts)] == ["fcfs"] * 3
    assert [x["teacher"] for x in teachers(w, MACHINE, plain, starts)] != ["fcfs"] * 3


def test_the_config_names_the_field() -> None:
    from hpcpolicy.inspector.train import InspectorConfig

    with pytest.raises(ConfigError, match="inspector config field `windows`: must be >= 1"):
        InspectorConfig(windows=0)


def test_advise_ranks_the_live_queue_with_an_inspector(untrained: Path) -> None:
    from hpcpolicy.slurm.advise import AdviseConfig, plan_pass
    from hpcpolicy.slurm.queue import parse_snapshot

    sinfo = "\n".join(f"n{i}|16|0/16/0/16|batch*|idle" for i in range(1, 5))
    squeue = "\n".join(f"{n}|PENDING|batch|ann|{1000 + n}|N/A|4|1|{limit}|{100 - n}|Priority"
                       for n, limit in ((1, "30:00"), (2, "10:00"), (3, "20:00")))
    snap = parse_snapshot(squeue + "\n", sinfo, now=2000)
    ranked = plan_pass(AdviseConfig(policy=str(untrained)), snap).ranked
    assert [j.job_id for j in ranked] == ["2", "3", "1"]  # it accepts sjf's proposals


def test_an_active_guard_deploys_the_heuristic(untrained: Path, tmp_path: Path) -> None:
    import shutil

    from hpcpolicy.deploy.resolve import resolve_policy
    from hpcpolicy.inspector.artifact import InspectorPolicy
    from hpcpolicy.training.card import CARD_FORMAT, CARD_VERSION, GUARD_RULE, write_card

    folder = tmp_path / "policy"
    shutil.copytree(untrained, folder)
    period = {"part": "train", "jobs": [0, 10], "from": "2020-01-01", "to": "2020-01-02"}
    card = {"format": CARD_FORMAT, "card_version": CARD_VERSION, "algo": "inspector-bc",
            "prior": "sjf", "training_data": {"path": "t", "sha256": "0" * 64},
            "period": period, "validation": None, "test": None, "skipped": None,
            "warning": None, "guard": {"fallback": "sjf", "rule": GUARD_RULE, "active": True}}
    write_card(folder, card)
    assert resolve_policy(str(folder)).name == "sjf"
    assert isinstance(resolve_policy(str(folder), guard=False), InspectorPolicy)
    write_card(folder, {**card, "guard": {**card["guard"], "active": False}})
    assert isinstance(resolve_policy(str(folder)), InspectorPolicy)


def test_the_inspector_manifest_has_a_schema_of_its_own() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    from hpcpolicy.artifact import FORMATS, INSPECTOR_FORMAT
    from hpcpolicy.schemas import load

    schema = load(FORMATS[INSPECTOR_FORMAT])
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["properties"]["format"]["const"] == INSPECTOR_FORMAT
    assert load("policy_manifest")["properties"]["format"]["const"] == "hpcpolicy.policy"
