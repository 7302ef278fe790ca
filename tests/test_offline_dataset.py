"""Replay datasets: chronological splits, the stored format, reproducible bytes, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("d3rlpy")
pytest.importorskip("jsonschema")

from env_jobs import CLUSTER
from offline_jobs import logged_workload

from hpcpolicy.atomic import file_sha256
from hpcpolicy.errors import ArtifactError, ConfigError
from hpcpolicy.offline.config import DatasetConfig
from hpcpolicy.offline.dataset import build_dataset, dataset_windows
from hpcpolicy.offline.layout import obs_dim
from hpcpolicy.offline.store import load_dataset, save_dataset

CFG = DatasetConfig(source="mix", k=8, window_size=40, heuristics=("fcfs", "sjf"), seed=3)
PROVENANCE = {"training_data": {"path": "jobs.parquet", "sha256": "0" * 64}}


def _save(path: Path, cfg: DatasetConfig = CFG, workers: int = 1) -> Path:
    built = build_dataset(logged_workload(300, seed=0, backfill="easy"), CLUSTER, cfg,
                          workers=workers)
    return save_dataset(built, path, provenance=PROVENANCE)


def test_windows_are_chronological_and_the_test_part_is_apart() -> None:
    windows = dataset_windows(300, CFG)
    assert windows == {"train": (0, 40, 80, 120), "validation": (160,), "test": (210, 250)}
    assert dataset_windows(300, DatasetConfig(window_size=40, max_windows=2))["train"] == \
        (0,) and max(windows["validation"]) + 40 <= 210  # 0.7 * 300: the cut
    with pytest.raises(ConfigError, match="the test part holds 90 jobs"):
        dataset_windows(300, DatasetConfig(window_size=100))


def test_a_stored_dataset_loads_as_d3rlpy_buffers_with_its_manifest(tmp_path: Path) -> None:
    stored = load_dataset(_save(tmp_path / "d"))
    m = stored.manifest
    assert m["sources"] == ["logged", "fcfs", "sjf", "fcfs+eps", "sjf+eps", "random"]
    assert m["splits"]["train"]["episodes"] == 4 * 6 and stored.k == 8
    buffer = stored.mdp("train")
    assert buffer.transition_count == m["splits"]["train"]["steps"]
    assert buffer.dataset_info.observation_signature.shape[0] == (obs_dim(8),)
    assert sum(m["splits"]["train"]["actions"]) == m["splits"]["train"]["steps"]
    cov = m["logged_coverage"]
    assert cov["starts"] == cov["inside"] + cov["outside"] == 7 * 40


def test_the_same_inputs_and_seed_give_the_same_bytes_with_any_workers(tmp_path: Path) -> None:
    a, b = _save(tmp_path / "a"), _save(tmp_path / "b", workers=2)
    c = _save(tmp_path / "c", DatasetConfig(**{**CFG.to_dict(), "seed": 4,
                                               "heuristics": ("fcfs", "sjf")}))
    files = sorted(p.name for p in a.iterdir())
    assert files == ["manifest.json", "test.h5", "train.h5", "validation.h5"]
    assert [file_sha256(a / f) for f in files] == [file_sha256(b / f) for f in files]
    assert file_sha256(a / "train.h5") != file_sha256(c / "train.h5")


def test_bad_datasets_are_refused_with_the_fix(tmp_path: Path) -> None:
    path = _save(tmp_path / "d", DatasetConfig(**{**CFG.to_dict(), "val_frac": 0.0,
                                                  "heuristics": ("fcfs",)}))
    with pytest.raises(ConfigError, match="the validation split is empty"):
        load_dataset(path).mdp("validation")
    with pytest.raises(ConfigError, match="already holds a dataset"):
        _save(path)
    manifest = json.loads((path / "manifest.json").read_text())
    (path / "manifest.json").write_text(json.dumps({**manifest, "dataset_version": "2.0"}))
    with pytest.raises(ArtifactError, match=r"dataset version '2\.0'.*rebuild it"):
        load_dataset(path)
    (path / "manifest.json").write_text(json.dumps(manifest))
    (path / "train.h5").write_bytes(b"changed")
    with pytest.raises(ArtifactError, match="SHA-256 differs"):
        load_dataset(path).mdp("train")
    with pytest.raises(ArtifactError, match=r"no manifest\.json"):
        load_dataset(tmp_path)
