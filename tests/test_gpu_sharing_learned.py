"""The learned GPU-sharing allocator (issue 44): weights over placement features."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hpcpolicy.errors import ArtifactError, ConfigError
from hpcpolicy.gpu.allocator_artifact import export_allocator, load_allocator, onnx_scorer
from hpcpolicy.gpu.fragmentation import typical_pods
from hpcpolicy.gpu.inflation import InflationConfig, draw_arrivals, replay_pods
from hpcpolicy.gpu.learned_allocator import FGD_WEIGHTS, SearchConfig
from hpcpolicy.gpu.sharing import SharingNodes, SharingPods


def _cluster() -> tuple[SharingNodes, SharingPods]:
    rng = np.random.default_rng(7)
    n = 12
    nodes = SharingNodes(tuple(f"n{i}" for i in range(n)), rng.choice([32000, 96000], n),
                         np.full(n, 400_000), rng.choice([1, 2, 4, 8], n), np.zeros(n, np.int64),
                         ("T4",))
    k = 60
    num = rng.choice([0, 1, 1, 1, 2, 8], k)
    milli = np.where(num == 1, rng.choice([250, 500, 1000], k), np.where(num > 0, 1000, 0))
    pods = SharingPods(tuple(f"p{i}" for i in range(k)), rng.choice([2000, 8000, 16000], k),
                       np.full(k, 1000), num, milli, np.ones((k, 1), dtype=bool))
    return nodes, pods


def _placements(allocator: str, weights: tuple[float, ...] = ()) -> list[int]:
    nodes, pods = _cluster()
    rng = np.random.default_rng(1)
    arrivals = pods.take(draw_arrivals(pods, nodes.total_gpus, 1.3, rng))
    run = replay_pods(nodes, arrivals, allocator, typical_pods(pods), rng, weights)
    return [int(j) for j in run.node]


def test_fgd_weights_make_the_learned_allocator_fgd() -> None:
    assert _placements("learned", FGD_WEIGHTS) == _placements("fgd")


def test_other_weights_change_the_placements() -> None:
    spread = (*FGD_WEIGHTS[:7], 1.0)  # prefer the last nodes of the list
    assert _placements("learned", spread) != _placements("fgd")


def test_weights_are_checked() -> None:
    with pytest.raises(ConfigError, match="weights"):
        InflationConfig(allocator="learned")
    with pytest.raises(ConfigError, match="weights"):
        InflationConfig(allocator="fgd", weights=FGD_WEIGHTS)
    with pytest.raises(ConfigError, match="elite"):
        SearchConfig(population=2, elite=3)


def test_the_artifact_round_trips_and_onnx_scores_as_the_weights(tmp_path: Path) -> None:
    weights = (1.0, 0.1, -0.02, 0.0, 0.03, -0.01, 0.0, -1e-6)
    export_allocator(weights, tmp_path, {"train_seeds": [0, 1]})
    assert load_allocator(tmp_path) == pytest.approx(weights)
    x = np.random.default_rng(0).random((5, len(weights))).astype(np.float32)
    assert onnx_scorer(tmp_path)(x) == pytest.approx(x @ np.array(weights), rel=1e-5)


def test_a_changed_model_file_is_refused_in_one_line(tmp_path: Path) -> None:
    export_allocator(FGD_WEIGHTS, tmp_path, {})
    model = tmp_path / "allocator.onnx"
    model.write_bytes(model.read_bytes() + b"\0")
    with pytest.raises(ArtifactError, match="SHA-256 differs") as err:
        load_allocator(tmp_path)
    assert "\n" not in str(err.value)
