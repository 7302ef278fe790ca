"""Online DQN on GPU types: a short run, its artifact in ``simulate``, determinism and resume."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from benchmarks.builders.gpu_jobs import GPU_PARTITION, write_gpu_table
from hpcpolicy.cluster import ClusterSpec
from hpcpolicy.cluster_io import load_cluster
from hpcpolicy.deploy.gpu_type import GpuDqnPolicy, load_gpu_policy
from hpcpolicy.deploy.resolve import resolve_policy
from hpcpolicy.errors import ArtifactError, ConfigError
from hpcpolicy.hetero.config import GpuDqnConfig
from hpcpolicy.hetero.observe import obs_dim
from hpcpolicy.hetero.train import train_gpu_dqn
from hpcpolicy.sim import SimConfig, simulate
from hpcpolicy.workload import Workload

TINY = GpuDqnConfig(steps=300, window_size=64, update_start=50, steps_per_epoch=150,
                    epsilon_steps=200, target_update_interval=50, hidden=(16,))


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> tuple[Workload, ClusterSpec]:
    table = write_gpu_table(tmp_path_factory.mktemp("hetero") / "gpu.parquet", n=300)
    return Workload.from_table(table), load_cluster(GPU_PARTITION)


@pytest.fixture(scope="module")
def trained(data: tuple[Workload, ClusterSpec], tmp_path_factory: pytest.TempPathFactory) -> Path:
    w, spec = data
    run = tmp_path_factory.mktemp("runs") / "a"
    seen: list[int] = []
    result = train_gpu_dqn(w, spec, TINY, run, progress=lambda done, total: seen.append(done))
    assert result.steps == 300 and seen[-1] == 300
    return run


def _probe(policy_dir: Path) -> list[list[float]]:
    """Q-values of the exported model on a few fixed observations (all types valid)."""
    model = load_gpu_policy(policy_dir)
    rng = np.random.default_rng(0)
    obs = rng.random((4, obs_dim(3))).astype(np.float32)
    obs[:, [6, 11, 16]] = 1.0
    return [model.q(o).tolist() for o in obs]


def test_a_short_run_exports_a_policy_that_simulate_runs(
        trained: Path, data: tuple[Workload, ClusterSpec]) -> None:
    w, spec = data
    files = sorted(p.name for p in trained.iterdir())
    for name in ("checkpoints", "config.json", "d3rlpy", "episodes.csv", "policy",
                 "result.json"):
        assert name in files
    manifest = json.loads((trained / "policy" / "manifest.json").read_text())
    assert manifest["algo"] == "dqn-gpu" and manifest["queue_policy"] == "fcfs"
    assert [p["name"] for p in manifest["pools"]] == ["a100", "v100", "h100"]
    assert manifest["reward"]["idle_weight"] == 1.0 and manifest["reward"]["scale_s"] > 0
    policy = resolve_policy(str(trained / "policy"))
    assert isinstance(policy, GpuDqnPolicy)
    result = simulate(w, spec, SimConfig(check=True), policy=policy)
    assert (result.start >= 0).all() and result.stats["engine"] == "gpu"
    # invalid types get -inf.
    onnx = load_gpu_policy(trained / "policy")
    obs = np.zeros(obs_dim(3), np.float32)
    obs[11] = 1.0  # only v100 can hold the job
    q = onnx.q(obs)
    assert np.isneginf(q[[0, 2]]).all() and np.isfinite(q[1])


def test_the_same_seed_gives_the_same_run(trained: Path, data: tuple[Workload, ClusterSpec],
                                          tmp_path: Path) -> None:
    w, spec = data
    train_gpu_dqn(w, spec, TINY, tmp_path / "b")
    assert (tmp_path / "b" / "episodes.csv").read_text() == (
        trained / "episodes.csv").read_text()
    assert _probe(tmp_path / "b" / "policy") == _probe(trained / "policy")


def test_resume_continues_from_the_checkpoint(trained: Path, data: tuple[Workload, ClusterSpec],
                                              tmp_path: Path) -> None:
    w, spec = data
    run = tmp_path / "c"
    train_gpu_dqn(w, spec, dataclasses.replace(TINY, steps=150), run)
    with pytest.raises(ConfigError, match="already holds a run"):
        train_gpu_dqn(w, spec, TINY, run)
    with pytest.raises(ConfigError, match=r"only --steps may change"):
        train_gpu_dqn(w, spec, dataclasses.replace(TINY, seed=2), run, resume=True)
    result = train_gpu_dqn(w, spec, TINY, run, resume=True)
    assert result.steps == 300
    assert json.loads((run / "checkpoints" / "last.json").read_text()) == {"step": 300}
    assert (run / "d3rlpy-resumed-at-150").is_dir()
    # The first 150 steps are the uninterrupted run's.
    first = [r for r in (trained / "episodes.csv").read_text().splitlines()[1:]
             if float(r.split(",")[0]) <= 150]
    assert (run / "episodes.csv").read_text().splitlines()[1:len(first) + 1] == first
    # a damaged record is a one-line refusal, not a traceback (issue 28)
    config, mark = run / "config.json", run / "checkpoints" / "last.json"
    good = config.read_text()
    config.write_text("{not json")
    with pytest.raises(ConfigError, match=r"config.json: cannot be read as JSON"):
        train_gpu_dqn(w, spec, TINY, run, resume=True)
    config.write_text(good)
    mark.write_text('{"step": "many"}')
    with pytest.raises(ConfigError, match=r"last.json: expected the `step` count"):
        train_gpu_dqn(w, spec, TINY, run, resume=True)


def test_a_policy_refuses_other_gpu_types(trained: Path, data: tuple[Workload, ClusterSpec]
                                          ) -> None:
    w, spec = data
    groups = tuple(g for g in spec.groups if g.gpu_type != "v100")
    other = ClusterSpec(groups, name="no-v100")
    with pytest.raises(ArtifactError, match=r"trained for GPU types a100 \(speed 1\), v100 "
                                            r"\(speed 0.5\), h100 \(speed 2\); cluster "
                                            "'no-v100' has a100"):
        simulate(w, other, SimConfig(), policy=GpuDqnPolicy(trained / "policy"))


class _Planted:
    """Unpickling this object would write a file: what a hostile checkpoint does."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str, str]]:
        return (Path.write_text, (str(self.marker), "ran"))  # type: ignore[return-value]


def test_resume_reads_the_checkpoint_as_weights_only(data: tuple[Workload, ClusterSpec],
                                                     tmp_path: Path) -> None:
    import torch

    w, spec = data
    run = tmp_path / "d"
    train_gpu_dqn(w, spec, dataclasses.replace(TINY, steps=150), run)
    marker = tmp_path / "marker"
    torch.save({"q_funcs": _Planted(marker)}, run / "checkpoints" / "last.d3")
    with pytest.raises(ConfigError, match=r"last\.d3: not a checkpoint of weights") as info:
        train_gpu_dqn(w, spec, TINY, run, resume=True)
    assert "\n" not in str(info.value)
    assert not marker.exists()


def test_the_checkpoint_loads_as_d3rlpys_own_loader_loads_it(
        trained: Path, data: tuple[Workload, ClusterSpec]) -> None:
    import torch

    from hpcpolicy.hetero.env import GpuAssignEnv
    from hpcpolicy.hetero.networks import dqn_algo, load_checkpoint

    w, spec = data
    algos = []
    for load in (lambda a, p: a.load_model(str(p)), load_checkpoint):
        algo = dqn_algo(TINY)
        algo.build_with_env(GpuAssignEnv(w, spec, TINY))
        load(algo, trained / "checkpoints" / "last.d3")
        algos.append(algo.impl.modules.create_checkpointer("cpu").modules)
    theirs, mine = algos
    assert set(theirs) == set(mine) and len(mine) >= 2
    for name in mine:
        a, b = theirs[name].state_dict(), mine[name].state_dict()
        flat_a = [v for v in torch.utils._pytree.tree_leaves(a) if isinstance(v, torch.Tensor)]
        flat_b = [v for v in torch.utils._pytree.tree_leaves(b) if isinstance(v, torch.Tensor)]
        assert len(flat_a) == len(flat_b) > 0
        assert all(torch.equal(x, y) for x, y in zip(flat_a, flat_b, strict=True))
