"""The two-agent scheduler: observations and masks, the shared reward, training and resuming,
the artifact, and the policy in ``simulate``."""

from __future__ import annotations

import csv
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from marl_case import load_case  # noqa: E402

from hpcpolicy.cluster import ClusterSpec, NodeGroup  # noqa: E402
from hpcpolicy.deploy.marl import MarlPolicy, load_marl  # noqa: E402
from hpcpolicy.deploy.resolve import resolve_policy  # noqa: E402
from hpcpolicy.errors import ArtifactError, ConfigError  # noqa: E402
from hpcpolicy.gpu.placer import PlacementView  # noqa: E402
from hpcpolicy.gpu.topology import Topology  # noqa: E402
from hpcpolicy.learn.runs import load_checkpoint  # noqa: E402
from hpcpolicy.marl.artifact import export_marl  # noqa: E402
from hpcpolicy.marl.config import MarlConfig, MarlEnvConfig  # noqa: E402
from hpcpolicy.marl.decide import AgentPlacer, AgentScorer, Obs  # noqa: E402
from hpcpolicy.marl.episode import WindowSource  # noqa: E402
from hpcpolicy.marl.features import (  # noqa: E402
    CANDIDATE_FEATURES,
    CONTEXT_FEATURES,
    AllocatorObserver,
    SelectorObserver,
)
from hpcpolicy.marl.networks import TwoAgents  # noqa: E402
from hpcpolicy.marl.reward import SharedReward  # noqa: E402
from hpcpolicy.marl.train import train  # noqa: E402
from hpcpolicy.marl.warm_start import clone_heuristic  # noqa: E402
from hpcpolicy.policies import get_policy  # noqa: E402
from hpcpolicy.policies.base import QueueView  # noqa: E402
from hpcpolicy.ppo.ppo import SingleProcess  # noqa: E402
from hpcpolicy.sim import SimConfig, simulate  # noqa: E402
from hpcpolicy.sim.gpu_engine import GpuEngine  # noqa: E402
from hpcpolicy.sim.gpu_metrics import gpu_summary  # noqa: E402
from hpcpolicy.sim.metrics import outcome_table, summarize  # noqa: E402
from hpcpolicy.workload import Workload  # noqa: E402

ENV = MarlEnvConfig(k=8, window_size=48)
CFG = MarlConfig(total_steps=400, num_steps=200, update_epochs=2, checkpoint_every=1, seed=3)


@pytest.fixture(scope="module")
def case(tmp_path_factory: pytest.TempPathFactory) -> tuple[Workload, ClusterSpec]:
    workload, cluster, _, _ = load_case(tmp_path_factory.mktemp("marl"))
    return workload, cluster


@pytest.fixture(scope="module")
def trained(case: tuple[Workload, ClusterSpec],
            tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("run") / "run"
    train(CFG, ENV, *case, run)
    return run


def _rows(run: Path) -> list[dict[str, str]]:
    with open(run / "metrics.csv", newline="") as f:
        return [{k: v for k, v in r.items() if k not in ("wall_time_s", "sps")}
                for r in csv.DictReader(f)]


class _Spy:
    """The engine's scorer and placer: checks every observation, then picks at random."""

    def __init__(self, workload: Workload, cluster: ClusterSpec, k: int,
                 visible: str = "oldest") -> None:
        topo = Topology.from_cluster(cluster)
        self.rng = np.random.default_rng(0)
        self.calls = [0, 0]
        self.visible = visible
        self.scorer = AgentScorer(SelectorObserver(workload, topo, k, visible), self.pick)
        self.placer = AgentPlacer(AllocatorObserver(workload, topo), self.pick)
        self.k = k
        self.skipped = 0
        self.beyond_oldest = 0  # jobs started from behind the oldest k that did not fit
        self.held = 0  # heads chosen that did not fit (the machine waits for them)
        self.longest_shown = 0  # extremes: decisions with more than k waiting, the longest last
        self.req = np.asarray(workload.req_walltime)

    def pick(self, agent: int, obs: Obs, now: int) -> int:
        self.calls[agent] += 1
        assert obs["mask"].sum() >= 2  # single options are never asked
        for key in ("jobs", "cluster"):
            assert obs[key].dtype == np.float32 and 0 <= obs[key].min() <= obs[key].max() <= 1
        return int(self.rng.choice(np.flatnonzero(obs["mask"])))

    def scores(self, view: QueueView) -> Any:
        # The jobs the rule shows, and whether each fits: worked out here independently.
        if self.visible == "oldest":
            shown = view.jobs[:self.k]
            fits = view.fits_now[:self.k]
        elif self.visible == "fitting":
            shown = view.jobs[view.fits_now][:self.k]
            fits = np.ones(shown.shape[0], bool)
        else:  # every shown job may be chosen, whether it fits or not
            by_req = view.jobs[np.argsort(self.req[view.jobs], kind="stable")]
            shown = by_req[:self.k]
            if self.visible == "extremes" and by_req.shape[0] > self.k:
                longest = self.req[view.jobs].max()  # the oldest of the longest, last
                oldest_longest = view.jobs[self.req[view.jobs] == longest][0]
                shown = np.append(by_req[:self.k - 1], oldest_longest)
                self.longest_shown += 1
            fits = np.ones(shown.shape[0], bool)
        seen = self.scorer._observer.observe(view)
        if seen is None:
            assert not fits.any()
            self.skipped += view.fits_now.any()  # something fits, but not among the shown
            return self.scorer.scores(view)
        obs, slots = seen
        assert view.jobs[slots].tolist() == shown.tolist()
        assert obs["mask"].shape == (self.k,)
        assert obs["mask"][:fits.shape[0]].tolist() == fits.tolist()
        assert not obs["mask"][fits.shape[0]:].any()
        scores = self.scorer.scores(view)
        head = view.jobs[int(np.argmin(scores))]
        head_fits = view.fits_now[np.flatnonzero(view.jobs == head)[0]]
        assert head_fits or self.visible in ("shortest", "extremes")  # else the head fits
        self.held += int(not head_fits)
        self.beyond_oldest += int(head not in view.jobs[:self.k])
        return scores

    def choose(self, view: PlacementView) -> int:
        obs = self.placer._observer.observe(view)
        assert obs["jobs"].shape == (len(view.candidates), len(CANDIDATE_FEATURES))
        assert obs["cluster"].shape == (len(CONTEXT_FEATURES),) and obs["mask"].all()
        return self.placer.choose(view)


@pytest.mark.parametrize("visible", ["oldest", "fitting", "shortest", "extremes"])
def test_masks_hold_exactly_the_options_that_can_be_taken(
        case: tuple[Workload, ClusterSpec], visible: str) -> None:
    workload, cluster = case
    w = workload.take(np.arange(100))
    spy = _Spy(w, cluster, k=4, visible=visible)
    result = GpuEngine(w, cluster, SimConfig(), spy, spy).run()
    assert (result["start"] >= 0).all()
    assert spy.calls[0] > 10 and spy.calls[1] > 10
    if visible == "oldest":  # held up behind the oldest jobs at times, never past them
        assert spy.skipped > 0 and spy.beyond_oldest == 0 and spy.held == 0
    elif visible == "fitting":  # never held up while some job fits; reaches past the oldest k
        assert spy.skipped == 0 and spy.beyond_oldest > 0 and spy.held == 0
    else:  # always asked; holds the machine for a chosen job at times
        assert spy.skipped == 0 and spy.beyond_oldest > 0 and spy.held > 0
        assert (spy.longest_shown > 0) == (visible == "extremes")


def test_the_first_of_the_shortest_on_the_first_candidate_is_sjf_first_available(
        case: tuple[Workload, ClusterSpec]) -> None:
    workload, cluster = case
    w = workload.take(np.arange(150))
    topo = Topology.from_cluster(cluster)
    first: Any = lambda agent, obs, now: 0  # noqa: E731
    mine = GpuEngine(w, cluster, SimConfig(), AgentScorer(
        SelectorObserver(w, topo, 4, "shortest"), first),
        AgentPlacer(AllocatorObserver(w, topo), first)).run()
    sjf = simulate(w, cluster, SimConfig(policy="sjf", allocator="first-available"))
    assert mine["start"].tolist() == sjf.start.tolist()
    assert mine["placement"]["nodes"].tolist() == sjf.placement["nodes"].tolist()


@pytest.mark.parametrize("util_span", ["started", "queue"])
def test_shared_reward_adds_up_to_the_window_metrics(case: tuple[Workload, ClusterSpec],
                                                     util_span: str) -> None:
    workload, cluster = case
    w = workload.take(np.arange(80))
    cfg = SimConfig(policy="sjf", allocator="topology-aware")
    engine = GpuEngine(w, cluster, cfg, get_policy("sjf").bind(w, cluster, cfg))
    meter = SharedReward(engine, 1.0, 10.0, util_span)
    engine.run()
    result = simulate(w, cluster, cfg)  # the same schedule
    bsld, util = meter.terms(meter.last_end())
    assert bsld == pytest.approx(summarize(outcome_table(w, result), cluster)["mean_bsld"])
    assert util == pytest.approx(gpu_summary(w, result, cluster)["gpu_utilization"])
    assert meter.potential(meter.last_end()) == pytest.approx(10.0 * util - bsld)


class _Terms:
    """FCFS that records the shared reward's terms at every decision."""

    def __init__(self, meters: list[SharedReward]) -> None:
        self.meters = meters
        self.seen: list[tuple[int, list[float]]] = []

    def scores(self, view: QueueView) -> Any:
        self.seen.append((view.now, [m.terms(view.now)[1] for m in self.meters]))
        return np.arange(view.jobs.shape[0], dtype=np.float64)


def test_a_queue_span_charges_a_long_job_while_it_waits() -> None:
    # a (100 s) holds the 4 GPUs; b (1,000 s) waits for them; c arrives at 50 s, a decision
    w = Workload(job_id=np.array(["a", "b", "c"], dtype=object), submit=np.array([0, 0, 50]),
                 run_time=np.array([100, 1000, 10]), req_walltime=np.array([100, 1000, 10]),
                 procs=np.ones(3, np.int64), nodes=np.zeros(3, np.int64),
                 gpus=np.array([4, 4, 4]), mem_mib=np.zeros(3, np.int64),
                 user=np.zeros(3, np.int32), partition=np.zeros(3, np.int32),
                 logged_start=np.full(3, -1))
    spec = ClusterSpec((NodeGroup("g", 1, 8, gpus=4, gpu_type="a100"),))
    spy = _Terms([])
    engine = GpuEngine(w, spec, SimConfig(allocator="first-available"), spy)
    spy.meters = [SharedReward(engine, 1.0, 1.0, span) for span in ("started", "queue")]
    engine.run()
    started, queue = dict(spy.seen)[50]
    assert started == pytest.approx(1.0)  # a's 100 s over a span that ends with a
    assert queue == pytest.approx(100 / (50 + 1000))  # the span reaches to b's end if it began now
    end = [m.terms(m.last_end())[1] for m in spy.meters]
    assert end[0] == end[1] == pytest.approx(1.0)  # busy from 0 to 1,110 s, either way


def test_training_resumes_to_identical_results(case: tuple[Workload, ClusterSpec],
                                               trained: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    first = train(MarlConfig.from_dict({**CFG.to_dict(), "total_steps": 200}), ENV, *case, run)
    assert first.updates == 1
    resumed = train(CFG, ENV, *case, run, resume=True)
    straight = load_checkpoint(trained / "checkpoints" / "last.pt")
    again = load_checkpoint(run / "checkpoints" / "last.pt")
    assert resumed.updates == 2 and resumed.global_step == straight["counters"]["global_step"]
    assert all(torch.equal(straight["model"][k], again["model"][k]) for k in straight["model"])
    assert _rows(run) == _rows(trained)
    with pytest.raises(ConfigError, match="different config"):
        train(MarlConfig.from_dict({**CFG.to_dict(), "seed": 4}), ENV, *case, run, resume=True)


@pytest.mark.parametrize(("visible", "least"), [("shortest", 0.95), ("oldest", 0.9)])
def test_the_warm_start_fits_the_selector_to_the_heuristic(
        case: tuple[Workload, ClusterSpec], visible: str, least: float) -> None:
    env = MarlEnvConfig(k=8, window_size=48, visible=visible)
    cfg = MarlConfig(warm_start="sjf", warm_start_decisions=600, seed=3)
    torch.manual_seed(3)
    nets = TwoAgents(cfg)
    source = WindowSource(*case, env, 3)
    gen = torch.Generator().manual_seed(3)
    untrained = clone_heuristic(nets, source, replace(cfg, warm_start_steps=1), SingleProcess(),
                                gen, torch.device("cpu"))
    fit = clone_heuristic(nets, source, cfg, SingleProcess(), gen, torch.device("cpu"))
    assert fit["decisions"] >= 600 and fit["agreement"] > untrained["agreement"]
    assert fit["agreement"] >= least  # under "shortest", SJF's choice is always slot 0


def test_a_warm_started_run_records_its_fit(case: tuple[Workload, ClusterSpec],
                                            tmp_path: Path) -> None:
    cfg = MarlConfig.from_dict({**CFG.to_dict(), "total_steps": 200, "warm_start": "sjf",
                                "warm_start_decisions": 100, "warm_start_steps": 50})
    train(cfg, ENV, *case, tmp_path / "run")
    fit = json.loads((tmp_path / "run" / "warm_start.json").read_text())
    assert fit["heuristic"] == "sjf" and fit["decisions"] >= 100 and 0 <= fit["agreement"] <= 1


def test_training_logs_both_agents(trained: Path) -> None:
    row = _rows(trained)[-1]
    for key in ("selector/policy_loss", "allocator/approx_kl", "env/bsld",
                "env/gpu_utilization", "env/best_heuristic_bsld", "charts/episodic_return"):
        assert row[key] != "", key
    manifest = json.loads((trained / "policy" / "manifest.json").read_text())
    assert manifest["algo"] == "marl" and manifest["format"] == "hpcpolicy.marl"
    assert manifest["reward"] == {"bsld": 1.0, "gpu_utilization": 10.0}
    assert manifest["agents"]["selector"]["k"] == 8


def test_the_artifact_agrees_with_torch(tmp_path: Path) -> None:
    nets = TwoAgents(CFG)
    for p in nets.parameters():  # away from the near-zero initial output layer
        torch.nn.init.normal_(p, std=0.5)
    path = export_marl(nets, tmp_path / "policy", cfg=CFG, k=8, candidates=9, metrics={})
    onnx = load_marl(path)
    rng = np.random.default_rng(1)
    for agent, (net, n, dims) in enumerate(((nets.selector, 8, (7, 7)),
                                            (nets.allocator, 5, (13, 8)))):
        jobs = rng.random((3, n, dims[0]), dtype=np.float32)
        cluster = rng.random((3, dims[1]), dtype=np.float32)
        mask = rng.random((3, n)) < 0.7
        mask[:, 0] = True
        a = (onnx.selector if agent == 0 else onnx.allocator).scores(jobs, cluster, mask)
        with torch.no_grad():
            eager = net.scorer(torch.as_tensor(jobs), torch.as_tensor(cluster)).numpy()
        assert np.array_equal(np.isinf(a), ~mask)
        np.testing.assert_allclose(a[mask], eager[mask], rtol=1e-5, atol=1e-6)
        assert a[mask].std() > 1e-3


def test_the_artifact_is_a_policy_in_simulate(case: tuple[Workload, ClusterSpec],
                                              trained: Path) -> None:
    workload, cluster = case
    policy = resolve_policy(str(trained / "policy"))
    assert isinstance(policy, MarlPolicy) and policy.artifact.k == 8
    result = simulate(workload, cluster, SimConfig(check=True, backfill="easy"), policy=policy)
    assert result.stats["engine"] == "gpu" and (result.start >= 0).all()
    again = simulate(workload, cluster, SimConfig(), policy=MarlPolicy(trained / "policy"))
    assert again.start.tolist() == simulate(workload, cluster, SimConfig(),
                                            policy=policy).start.tolist()


def test_the_single_agent_loader_refuses_the_two_agent_manifest(trained: Path) -> None:
    from hpcpolicy.artifact import load_policy

    with pytest.raises(ArtifactError, match="manifest does not match"):
        load_policy(trained / "policy")
    with pytest.raises(ArtifactError, match=r"not a hpcpolicy\.marl artifact"):
        load_marl(trained / "policy" / "selector")


@pytest.mark.parametrize(("fields", "message"), [
    ({"num_envs": 2}, "`num_envs`"),
    ({"sync_frac": 0.6}, "`sync_frac`"),
    ({"bsld_weight": 0.0, "gpu_util_weight": 0.0}, "both 0"),
    ({"allocator_hidden": ()}, "`allocator_hidden`"),
    ({"algo": "ppo"}, "needs 'marl'"),
    ({"gamma_typo": 1}, "unknown field"),
    ({"warm_start": "shortest"}, "`warm_start`: 'shortest' is not a heuristic; valid: fcfs"),
    ({"warm_start_steps": 0}, "`warm_start_steps`"),
    ({"util_span": "all"}, "util_span 'all' is not one of started, queue"),
])
def test_config_errors_name_the_field(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        MarlConfig.from_dict(fields)


def test_the_visible_rule_is_checked_and_recorded(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="visible 'all' is not one of oldest, fitting"):
        MarlEnvConfig(visible="all")
    with pytest.raises(ConfigError, match=r"'extremes' .* k must be >= 2, not 1"):
        MarlEnvConfig(visible="extremes", k=1)
    path = export_marl(TwoAgents(CFG), tmp_path / "policy", cfg=CFG, k=8, candidates=9,
                       metrics={}, visible="fitting")
    art = load_marl(path)
    assert art.visible == "fitting" and "oldest k of the waiting jobs that fit now" in (
        art.manifest["decision"])
    manifest = json.loads((path / "manifest.json").read_text())
    del manifest["agents"]["selector"]["visible"]  # written before the rule could be chosen
    (path / "manifest.json").write_text(json.dumps(manifest))
    assert load_marl(path).visible == "oldest"
    manifest["agents"]["selector"]["visible"] = "newest"
    (path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ArtifactError, match="visible 'newest' is not one of"):
        load_marl(path)
