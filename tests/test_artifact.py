"""Policy artifact: torch and onnxruntime agree; manifest checks; light loading; a folder
that reaches outside itself is refused; a broken model file is one line. (TorchScript is never
loaded: tests/test_artifact_trust.py.)"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("onnxruntime")
pytest.importorskip("jsonschema")

import jsonschema
import torch
from cli_helpers import invoke, one_line_error

from benchmarks.builders.job_tables import job_table, write_job_table
from hpcpolicy import __version__
from hpcpolicy.artifact import load_policy
from hpcpolicy.deploy.marl import load_marl
from hpcpolicy.env.spaces import CLUSTER_FEATURES, JOB_FEATURES
from hpcpolicy.errors import ArtifactError
from hpcpolicy.learn.export import export_policy
from hpcpolicy.learn.networks import ActorCritic, PolicyScorer
from hpcpolicy.marl.artifact import export_marl
from hpcpolicy.marl.config import MarlConfig
from hpcpolicy.marl.networks import TwoAgents
from hpcpolicy.schemas import load as load_schema

ROOT = Path(__file__).resolve().parent.parent
FJ, FC = len(JOB_FEATURES), len(CLUSTER_FEATURES)
CONFIG = {"algo": "ppo", "seed": 5, "hidden": [32, 16, 8], "activation": "tanh"}
Exported = tuple[ActorCritic, Path]
Inputs = tuple[np.ndarray, np.ndarray, np.ndarray]


def _agent(seed: int = 0) -> ActorCritic:
    torch.manual_seed(seed)
    agent = ActorCritic(FJ, FC)
    last = agent.scorer.mlp[-1]
    assert isinstance(last, torch.nn.Linear)
    torch.nn.init.normal_(last.weight, std=1.0)  # spread the scores out
    return agent


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Exported:
    agent = _agent()
    out = export_policy(agent, tmp_path_factory.mktemp("run") / "policy", config=CONFIG, k=16,
                        metrics={"charts/episodic_return": 1.5, "losses/explained_variance":
                                 float("nan")},
                        provenance={"reward": "bsld", "training_data": {"path": "jobs.parquet",
                                    "sha256": "ab" * 32}, "env": {"window": 1024}})
    return agent, out


def _inputs(b: int, k: int, seed: int = 1) -> Inputs:
    rng = np.random.default_rng(seed)
    jobs = rng.random((b, k, FJ), dtype=np.float32)
    cluster = rng.random((b, FC), dtype=np.float32)
    mask = rng.random((b, k)) < 0.5
    mask[:, 0] = True
    return jobs, cluster, mask


@pytest.mark.parametrize(("b", "k"), [(1, 16), (5, 128), (3, 2)])
def test_onnxruntime_agrees_with_torch(exported: Exported, b: int, k: int) -> None:
    agent, out = exported
    jobs, cluster, mask = _inputs(b, k)
    with torch.no_grad():
        expected = PolicyScorer(agent.scorer)(torch.from_numpy(jobs), torch.from_numpy(cluster),
                                              torch.from_numpy(mask)).numpy()
    policy = load_policy(out)
    got = policy.scores(jobs, cluster, mask)
    assert got.dtype == np.float32 and got.shape == (b, k)
    np.testing.assert_array_equal(np.isneginf(got), ~mask)
    np.testing.assert_allclose(got[mask], expected[mask], rtol=1e-5, atol=1e-6)
    assert np.ptp(got[0][mask[0]]) > 0 or mask[0].sum() == 1
    single = policy.scores(jobs[0], cluster[0], mask[0].astype(np.int8))
    np.testing.assert_allclose(single, got[0], rtol=1e-6)
    assert mask[0, policy.choose(jobs[0], cluster[0], mask[0])]


def test_manifest_contents(exported: Exported) -> None:
    _, out = exported
    manifest = json.loads((out / "manifest.json").read_text())
    schema = load_schema("policy_manifest")
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(manifest, schema)
    assert manifest["observation"]["k"] == 16
    assert [f["name"] for f in manifest["observation"]["job_features"]] == \
        [f.name for f in JOB_FEATURES]
    assert manifest["package"]["version"] == __version__
    assert manifest["reward"] == "bsld" and manifest["training_data"]["path"] == "jobs.parquet"
    assert manifest["provenance"] == {"env": {"window": 1024}}
    assert manifest["metrics"] == {"charts/episodic_return": 1.5,
                                   "losses/explained_variance": None}
    assert manifest["config"] == CONFIG
    assert sorted(p.name for p in out.iterdir()) == ["manifest.json", "policy.onnx",
                                                     "policy.torchscript.pt"]


def test_every_path_form_loads(exported: Exported) -> None:
    _, out = exported
    assert load_policy(out / "manifest.json").path == out
    assert load_policy(out / "policy.onnx").path == out
    with pytest.raises(ArtifactError, match=r"policy\.torchscript\.pt: TorchScript is exported "
                                            r"for other tools but never loaded"):
        load_policy(out / "policy.torchscript.pt")


def test_unsupported_files_are_refused(tmp_path: Path) -> None:
    (tmp_path / "policy.pkl").write_bytes(b"\x80\x04")
    with pytest.raises(ArtifactError, match=r"unsupported policy file; supported: a policy "
                                            r"directory with manifest\.json; manifest\.json; "
                                            r"\*\.onnx"):
        load_policy(tmp_path / "policy.pkl")
    (tmp_path / "last.pt").write_bytes(b"x")
    with pytest.raises(ArtifactError, match="is a training checkpoint"):
        load_policy(tmp_path / "last.pt")
    with pytest.raises(ArtifactError, match="no such policy file"):
        load_policy(tmp_path / "absent")
    with pytest.raises(ArtifactError, match=r"no manifest\.json"):
        load_policy(tmp_path)


def _copy(out: Path, dest: Path) -> Path:
    shutil.copytree(out, dest)
    return dest


def _edit_manifest(directory: Path, change: Callable[[dict[str, Any]], Any]) -> None:
    path = directory / "manifest.json"
    manifest = json.loads(path.read_text())
    change(manifest)
    path.write_text(json.dumps(manifest))


def test_changed_model_file_is_detected(exported: Exported, tmp_path: Path) -> None:
    copy = _copy(exported[1], tmp_path / "p")
    data = bytearray((copy / "policy.onnx").read_bytes())
    data[-1] ^= 1
    (copy / "policy.onnx").write_bytes(bytes(data))
    with pytest.raises(ArtifactError, match=r"SHA-256 differs from manifest\.json"):
        load_policy(copy)


def test_versions(exported: Exported, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    major = _copy(exported[1], tmp_path / "major")
    _edit_manifest(major, lambda m: m.update(manifest_version="2.0"))
    with pytest.raises(ArtifactError,
                       match=r"manifest version '2\.0' cannot be read .* \(reads 1\.x\)"):
        load_policy(major)

    minor = _copy(exported[1], tmp_path / "minor")
    _edit_manifest(minor, lambda m: m.update(manifest_version="1.9", future_field=1))
    assert load_policy(minor).k == 16
    assert "manifest version 1.9 is newer than 1.0" in caplog.text

    other = _copy(exported[1], tmp_path / "other")
    _edit_manifest(other, lambda m: m["package"].update(version="9.9.9"))
    load_policy(other)
    assert f"written by hpcpolicy 9.9.9, loaded by {__version__}" in caplog.text


def test_schema_violation_names_the_place(exported: Exported, tmp_path: Path) -> None:
    bad = _copy(exported[1], tmp_path / "bad")
    _edit_manifest(bad, lambda m: m["observation"].update(k=0))
    with pytest.raises(ArtifactError, match=r"schema\.json at observation/k"):
        load_policy(bad)


def test_feature_and_shape_checks(exported: Exported) -> None:
    policy = load_policy(exported[1])
    policy.check_features(tuple(f.name for f in JOB_FEATURES),
                          tuple(f.name for f in CLUSTER_FEATURES))
    with pytest.raises(ArtifactError, match="trained on job features"):
        policy.check_features(("wait_s",), tuple(f.name for f in CLUSTER_FEATURES))
    with pytest.raises(ValueError, match=r"expected jobs \[B, K, 7\]"):
        policy.scores(np.zeros((4, 3)), np.zeros(FC), np.ones(4))


def test_export_replaces_an_older_artifact(tmp_path: Path) -> None:
    out = tmp_path / "policy"
    export_policy(_agent(0), out, config=CONFIG, k=4, metrics={})
    export_policy(_agent(1), out, config=CONFIG, k=4, metrics={})
    jobs, cluster, mask = _inputs(1, 4)
    with torch.no_grad():
        expected = PolicyScorer(_agent(1).scorer)(*map(torch.from_numpy, (jobs, cluster, mask)))
    np.testing.assert_allclose(load_policy(out).scores(jobs, cluster, mask), expected.numpy(),
                               rtol=1e-5)
    assert [p.name for p in tmp_path.iterdir()] == ["policy"]  # no temporary folders left


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, check=False)


def test_loading_needs_neither_torch_nor_training_code(exported: Exported) -> None:
    code = f"""
import sys, numpy as np
from hpcpolicy.artifact import load_policy
p = load_policy({str(exported[1])!r})
s = p.scores(np.zeros((16, 7)), np.zeros(7), np.arange(16) < 2)
assert np.isneginf(s[2:]).all()
print(sorted(m for m in sys.modules
             if m == "torch" or m.startswith(("hpcpolicy.learn", "hpcpolicy.ppo"))))
"""
    result = _python(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_light_imports_do_not_import_torch() -> None:
    result = _python("import sys, hpcpolicy, hpcpolicy.artifact, hpcpolicy.learn, hpcpolicy.ppo, "
                     "hpcpolicy.env.spaces, hpcpolicy.ppo.config, hpcpolicy.learn.runs; "
                     "print('torch' in sys.modules, 'gymnasium' in sys.modules)")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["False", "False"]


def test_example_scores_a_queue_with_onnxruntime_alone(exported: Exported, tmp_path: Path) -> None:
    queue: dict[str, Any] = {"cluster": {"free_cores_frac": 0.5},
             "jobs": [{"id": "a", "req_walltime_s": 60}, {"id": "b", "req_walltime_s": 6000},
                      {"id": "c", "wait_s": 100}]}
    (tmp_path / "queue.json").write_text(json.dumps(queue))
    script = ROOT / "examples" / "score_queue_onnx.py"
    code = f"""
import runpy, sys
sys.argv = ["score_queue_onnx.py", {str(exported[1])!r}, {str(tmp_path / 'queue.json')!r}]
try:
    runpy.run_path({str(script)!r}, run_name="__main__")
except SystemExit as e:
    assert e.code == 0, e.code
assert "hpcpolicy" not in sys.modules and "torch" not in sys.modules
"""
    result = _python(code)
    assert result.returncode == 0, result.stderr
    # the example's choice is the policy's choice on the same (normalised) inputs
    from hpcpolicy.env.spaces import normalise
    policy = load_policy(exported[1])
    jobs = np.zeros((16, FJ), np.float32)
    for i, job in enumerate(queue["jobs"]):
        jobs[i] = normalise([[job.get(f.name, 0) for f in JOB_FEATURES]], JOB_FEATURES)
    cluster = normalise([[queue["cluster"].get(f.name, 0) for f in CLUSTER_FEATURES]],
                        CLUSTER_FEATURES)[0]
    best = policy.choose(jobs, cluster, np.arange(16) < 3)
    assert result.stdout.strip().splitlines()[-1] == f"next job: {queue['jobs'][best]['id']}"


# --- a policy directory cannot reach outside itself; a broken model file is one line ---

def _point(kind: str, path: str, data: bytes) -> Callable[[dict[str, Any]], Any]:
    """Name ``path`` as the ``kind`` model file, with the hash of ``data``."""
    return lambda m: m["files"][kind].update(path=path,
                                                sha256=hashlib.sha256(data).hexdigest())


def test_an_absolute_path_elsewhere_is_refused(exported: Exported, tmp_path: Path) -> None:
    policy = _copy(exported[1], tmp_path / "policy")
    outside = tmp_path / "elsewhere" / "policy.onnx"
    outside.parent.mkdir()
    shutil.copy(exported[1] / "policy.onnx", outside)
    _edit_manifest(policy, _point("onnx", str(outside), outside.read_bytes()))
    with pytest.raises(ArtifactError, match=r"files\.onnx\.path .* outside the policy "
                                            r"directory") as info:
        load_policy(policy)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("name", ["../elsewhere/policy.onnx", "sub/../../elsewhere/policy.onnx"])
def test_a_path_up_and_out_is_refused(exported: Exported, tmp_path: Path, name: str) -> None:
    policy = _copy(exported[1], tmp_path / "policy")
    (tmp_path / "elsewhere").mkdir()
    shutil.copy(exported[1] / "policy.onnx", tmp_path / "elsewhere" / "policy.onnx")
    _edit_manifest(policy, _point("onnx", name, (exported[1] / "policy.onnx").read_bytes()))
    with pytest.raises(ArtifactError, match=r"files\.onnx\.path .* outside the policy"):
        load_policy(policy)


def test_a_symlink_out_is_refused_and_one_inside_is_not(exported: Exported, tmp_path: Path) -> None:
    policy = _copy(exported[1], tmp_path / "policy")
    outside = tmp_path / "policy.onnx"
    (policy / "policy.onnx").rename(outside)
    (policy / "policy.onnx").symlink_to(outside)
    with pytest.raises(ArtifactError, match=r"files\.onnx\.path .* outside the policy"):
        load_policy(policy)

    inside = _copy(exported[1], tmp_path / "inside")
    (inside / "policy.onnx").rename(inside / "real.onnx")
    (inside / "policy.onnx").symlink_to("real.onnx")
    assert load_policy(inside).path == inside


def test_a_corrupt_model_with_a_matching_hash_is_one_line(exported: Exported,
                                                          tmp_path: Path) -> None:
    policy = _copy(exported[1], tmp_path / "policy")
    garbage = b"\x08\x07not a model\x00" * 50
    (policy / "policy.onnx").write_bytes(garbage)
    _edit_manifest(policy, _point("onnx", "policy.onnx", garbage))
    with pytest.raises(ArtifactError, match=r"policy\.onnx: cannot be opened as ONNX") as info:
        load_policy(policy)
    assert "\n" not in str(info.value)


def test_simulate_names_the_corrupt_file_in_one_line(exported: Exported, tmp_path: Path) -> None:
    policy = _copy(exported[1], tmp_path / "policy")
    garbage = b"garbage" * 20
    (policy / "policy.onnx").write_bytes(garbage)
    _edit_manifest(policy, _point("onnx", "policy.onnx", garbage))
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
    outside = str(tmp_path / "selector")
    _edit_manifest(policy, lambda m: m["agents"]["selector"].update(path=outside))
    with pytest.raises(ArtifactError, match=r"agents\.selector\.path .* outside the policy"):
        load_marl(policy)
    _edit_manifest(policy, lambda m: m["agents"]["selector"].update(path="../../selector"))
    with pytest.raises(ArtifactError, match=r"agents\.selector\.path .* outside the policy"):
        load_marl(policy)


@pytest.mark.parametrize("fmt", ["hpcpolicy.policy", "hpcpolicy.marl",
                                 "hpcpolicy.gpu-type-policy"])
def test_each_format_has_a_valid_schema_of_its_own(fmt: str) -> None:
    from hpcpolicy.artifact import FORMATS

    schema = load_schema(FORMATS[fmt])
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["properties"]["format"]["const"] == fmt
    assert {"manifest_version", "format", "package"} <= set(schema["required"])


def test_resolve_dispatches_on_the_format_and_names_an_unknown_one(exported: Exported,
                                                                   tmp_path: Path) -> None:
    from hpcpolicy.deploy.learned import LearnedPolicy
    from hpcpolicy.deploy.resolve import resolve_policy

    assert isinstance(resolve_policy(str(exported[1])), LearnedPolicy)
    future = _copy(exported[1], tmp_path / "future")
    _edit_manifest(future, lambda m: m.update(format="hpcpolicy.future"))
    with pytest.raises(ArtifactError, match=r"manifest format 'hpcpolicy\.future' is not one "
                                            r"of hpcpolicy\.policy, hpcpolicy\.marl"):
        resolve_policy(str(future))


def test_a_model_of_another_kind_with_a_matching_hash_is_one_line(
        exported: Exported, tmp_path: Path) -> None:
    from hpcpolicy.hetero.export import export_gpu_policy
    from hpcpolicy.hetero.qnet import PoolQ

    other = export_gpu_policy(PoolQ(2, (8,), "relu"), tmp_path / "gpu", pools=(("a", 1.0),
                              ("b", 2.0)), config={"seed": 1}, reward={}, metrics={})
    policy = _copy(exported[1], tmp_path / "policy")
    shutil.copy(other / "policy.onnx", policy / "policy.onnx")
    _edit_manifest(policy, _point("onnx", "policy.onnx", (other / "policy.onnx").read_bytes()))
    with pytest.raises(ArtifactError, match=r"model takes inputs \['obs'\], this kind of policy "
                                            r"feeds it \['jobs', 'cluster', 'mask'\]"):
        load_policy(policy)
