"""A policy directory cannot reach outside itself, and a broken model file is one line.

A manifest names its model files (``files.*.path``) and, for the two-agent scheduler, its
agents' directories (``agents.*.path``): each must stay inside the policy directory, whatever
the hashes say. A model file whose hash matches but which the runtime cannot open gives an
``ArtifactError`` of one line, as ``hpcpolicy simulate --policy`` shows.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("onnxruntime")
pytest.importorskip("jsonschema")

from cli_helpers import invoke, one_line_error
from job_tables import job_table, write_job_table

from hpcpolicy.artifact import load_policy
from hpcpolicy.deploy.marl import load_marl
from hpcpolicy.env.spaces import CLUSTER_FEATURES, JOB_FEATURES
from hpcpolicy.errors import ArtifactError
from hpcpolicy.marl.artifact import export_marl
from hpcpolicy.marl.config import MarlConfig
from hpcpolicy.marl.networks import TwoAgents
from hpcpolicy.rl.export import export_policy
from hpcpolicy.rl.networks import ActorCritic

CONFIG = {"algo": "ppo", "seed": 1, "hidden": [32, 16, 8], "activation": "tanh"}
FILES = {"onnx": "policy.onnx", "torchscript": "policy.torchscript.pt"}


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return export_policy(ActorCritic(len(JOB_FEATURES), len(CLUSTER_FEATURES)),
                         tmp_path_factory.mktemp("run") / "policy", config=CONFIG, k=4,
                         metrics={})


def _copy(src: Path, dest: Path) -> Path:
    shutil.copytree(src, dest)
    return dest


def _edit(directory: Path, change: Callable[[dict[str, Any]], Any]) -> None:
    path = directory / "manifest.json"
    manifest = json.loads(path.read_text())
    change(manifest)
    path.write_text(json.dumps(manifest))


def _point(backend: str, path: str, data: bytes) -> Callable[[dict[str, Any]], Any]:
    """Name ``path`` as the backend's file, with the hash of ``data``."""
    return lambda m: m["files"][backend].update(path=path,
                                                sha256=hashlib.sha256(data).hexdigest())


@pytest.mark.parametrize("backend", ["onnx", "torchscript"])
def test_an_absolute_path_elsewhere_is_refused(exported: Path, tmp_path: Path,
                                               backend: str) -> None:
    policy = _copy(exported, tmp_path / "policy")
    outside = tmp_path / "elsewhere" / FILES[backend]
    outside.parent.mkdir()
    shutil.copy(exported / FILES[backend], outside)
    _edit(policy, _point(backend, str(outside), outside.read_bytes()))
    with pytest.raises(ArtifactError, match=rf"files\.{backend}\.path .* outside the policy "
                                            r"directory") as info:
        load_policy(policy, backend=backend)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("name", ["../elsewhere/policy.onnx", "sub/../../elsewhere/policy.onnx"])
def test_a_path_up_and_out_is_refused(exported: Path, tmp_path: Path, name: str) -> None:
    policy = _copy(exported, tmp_path / "policy")
    (tmp_path / "elsewhere").mkdir()
    shutil.copy(exported / "policy.onnx", tmp_path / "elsewhere" / "policy.onnx")
    _edit(policy, _point("onnx", name, (exported / "policy.onnx").read_bytes()))
    with pytest.raises(ArtifactError, match=r"files\.onnx\.path .* outside the policy"):
        load_policy(policy, backend="onnx")


def test_a_symlink_out_is_refused_and_one_inside_is_not(exported: Path, tmp_path: Path) -> None:
    policy = _copy(exported, tmp_path / "policy")
    outside = tmp_path / "policy.onnx"
    (policy / "policy.onnx").rename(outside)
    (policy / "policy.onnx").symlink_to(outside)
    with pytest.raises(ArtifactError, match=r"files\.onnx\.path .* outside the policy"):
        load_policy(policy, backend="onnx")

    inside = _copy(exported, tmp_path / "inside")
    (inside / "policy.onnx").rename(inside / "real.onnx")
    (inside / "policy.onnx").symlink_to("real.onnx")
    assert load_policy(inside, backend="onnx").backend == "onnx"


@pytest.mark.parametrize("backend", ["onnx", "torchscript"])
def test_a_corrupt_model_with_a_matching_hash_is_one_line(exported: Path, tmp_path: Path,
                                                          backend: str) -> None:
    policy = _copy(exported, tmp_path / "policy")
    garbage = b"\x08\x07not a model\x00" * 50
    (policy / FILES[backend]).write_bytes(garbage)
    _edit(policy, _point(backend, FILES[backend], garbage))
    with pytest.raises(ArtifactError, match=rf"{FILES[backend]}: cannot be opened as "
                                            rf"{'ONNX' if backend == 'onnx' else 'TorchScript'}"
                       ) as info:
        load_policy(policy, backend=backend)
    assert "\n" not in str(info.value)


def test_simulate_names_the_corrupt_file_in_one_line(exported: Path, tmp_path: Path) -> None:
    policy = _copy(exported, tmp_path / "policy")
    garbage = b"garbage" * 20
    (policy / "policy.onnx").write_bytes(garbage)
    _edit(policy, _point("onnx", "policy.onnx", garbage))
    jobs = write_job_table(tmp_path / "jobs.parquet", job_table([
        {"submit": 0, "wait": 0, "run_time_s": 10, "req_cpus": 1, "req_walltime_s": 10,
         "user": "ann", "partition": "batch"}]), [{"MaxProcs": 4}])
    line = one_line_error(invoke("simulate", str(jobs), "-p", str(policy)))
    assert "policy.onnx: cannot be opened as ONNX" in line


def test_a_two_agent_manifest_cannot_point_its_agents_outside(tmp_path: Path) -> None:
    cfg = MarlConfig()
    policy = export_marl(TwoAgents(cfg), tmp_path / "run" / "policy", cfg=cfg, k=8,
                         candidates=9, metrics={})
    shutil.copytree(policy / "selector", tmp_path / "selector")
    _edit(policy, lambda m: m["agents"]["selector"].update(path=str(tmp_path / "selector")))
    with pytest.raises(ArtifactError, match=r"agents\.selector\.path .* outside the policy"):
        load_marl(policy)
    _edit(policy, lambda m: m["agents"]["selector"].update(path="../../selector"))
    with pytest.raises(ArtifactError, match=r"agents\.selector\.path .* outside the policy"):
        load_marl(policy)
