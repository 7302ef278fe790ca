"""A policy folder is data, never code: a planted TorchScript never runs, whatever command
reads the folder; the ONNX model is checked (hash, external data, shapes) before it runs; the
model card is bound to the model it describes; every refusal is one line."""

from __future__ import annotations

import hashlib
import json
import os
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
pytest.importorskip("onnx")
pytest.importorskip("jsonschema")

import onnx
import torch
from cli_helpers import invoke, one_line_error
from env_jobs import write_table

from hpcpolicy.artifact import load_policy
from hpcpolicy.env.spaces import CLUSTER_FEATURES, JOB_FEATURES
from hpcpolicy.errors import ArtifactError
from hpcpolicy.learn.export import export_policy
from hpcpolicy.learn.networks import ActorCritic, JobScorer, PolicyScorer

FJ, FC = len(JOB_FEATURES), len(CLUSTER_FEATURES)
CONFIG = {"algo": "ppo", "seed": 5, "hidden": [32, 16, 8], "activation": "tanh"}
UNTOUCHED = b"0000"


class _Planted(torch.nn.Module):
    """TorchScript that overwrites ``marker.load`` when opened and ``marker.run`` when run
    (``torch.from_file`` with ``shared=True`` maps the file and writes through)."""

    def __init__(self, marker: str) -> None:
        super().__init__()
        self.marker = marker
        self.seen = torch.zeros(4, dtype=torch.uint8)

    def forward(self, jobs: torch.Tensor, cluster: torch.Tensor,
                mask: torch.Tensor) -> torch.Tensor:
        hit = torch.from_file(self.marker + ".run", True, 4, dtype=torch.uint8).fill_(65)
        return jobs.sum(-1) + hit[0].float() * 0

    @torch.jit.export
    def __getstate__(self) -> list[str]:
        return [self.marker, "x" if self.training else ""]

    @torch.jit.export
    def __setstate__(self, state: list[str]) -> None:
        self.marker = state[0]
        self.training = state[1] != ""
        self.seen = torch.from_file(self.marker + ".load", True, 4, dtype=torch.uint8).fill_(66)


def _edit_manifest(directory: Path, change: Callable[[dict[str, Any]], Any]) -> None:
    path = directory / "manifest.json"
    manifest = json.loads(path.read_text())
    change(manifest)
    path.write_text(json.dumps(manifest))


def _rehash(directory: Path, backend: str) -> None:
    """Make the manifest's hash match the (replaced) model file, as a forger would."""
    name = "policy.onnx" if backend == "onnx" else "policy.torchscript.pt"
    file = directory / name
    digest = hashlib.sha256(file.read_bytes()).hexdigest()
    _edit_manifest(directory, lambda m: m["files"][backend].update(sha256=digest))


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_table(tmp_path_factory.mktemp("jobs") / "jobs.parquet", 300)


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    torch.manual_seed(0)
    return export_policy(ActorCritic(FJ, FC), tmp_path_factory.mktemp("run") / "policy",
                         config=CONFIG, k=8, metrics={})


def _copy(policy: Path, dest: Path) -> Path:
    return Path(shutil.copytree(policy, dest))


# --- TorchScript in a policy folder never runs --------------------------------------------

def test_a_planted_torchscript_never_runs(exported: Path, table: Path, tmp_path: Path) -> None:
    policy = _copy(exported, tmp_path / "policy")
    marker = tmp_path / "marker"
    for end in (".load", ".run"):
        Path(f"{marker}{end}").write_bytes(UNTOUCHED)
    torch.jit.script(_Planted(str(marker))).save(  # type: ignore[no-untyped-call]
        str(policy / "policy.torchscript.pt"))
    _rehash(policy, "torchscript")
    runs = [
        ("simulate", str(table), "-p", str(policy), "--windows", "1", "--window-size", "40"),
        ("evaluate", str(table), "--policy", f"fcfs,{policy}", "--windows", "1",
         "--window-size", "40"),
        ("whatif", str(table), "-c", f"{policy}+easy", "--bootstrap", "20",
         "-o", str(tmp_path / "report")),
        ("train", str(table), "--steps", "64", "--num-envs", "1", "--window-size", "40",
         "--k", "8", "--init-from", str(policy), "-o", str(tmp_path / "run")),
    ]
    for args in runs:
        invoke(*args)  # whether it succeeds is another test's matter: the payload never runs
        assert Path(f"{marker}.load").read_bytes() == UNTOUCHED, args[0]
        assert Path(f"{marker}.run").read_bytes() == UNTOUCHED, args[0]
    line = one_line_error(invoke("simulate", str(table), "-p",
                                 str(policy / "policy.torchscript.pt")))
    assert "policy.torchscript.pt" in line and "never loaded" in line
    with pytest.raises(ArtifactError, match="never loaded"):
        load_policy(policy / "policy.torchscript.pt")
    for end in (".load", ".run"):
        assert Path(f"{marker}{end}").read_bytes() == UNTOUCHED


@pytest.mark.parametrize("rank_bias", [0.0, 0.7])
def test_init_from_reads_the_weights_of_the_onnx_file(exported: Path, tmp_path: Path,
                                                      rank_bias: float) -> None:
    from hpcpolicy.ppo.config import PPOConfig
    from hpcpolicy.ppo.warm_start import policy_weights, scorer_weights

    weights = scorer_weights(exported, PPOConfig())
    scorer = JobScorer(FJ, FC)
    scorer.load_state_dict(weights)
    rng = np.random.default_rng(0)
    jobs, cluster = rng.random((2, 8, FJ), np.float32), rng.random((2, FC), np.float32)
    mask = np.ones((2, 8), bool)
    with torch.no_grad():
        mine = PolicyScorer(scorer)(*map(torch.from_numpy, (jobs, cluster, mask))).numpy()
    np.testing.assert_allclose(mine, load_policy(exported).scores(jobs, cluster, mask),
                               rtol=1e-5, atol=1e-6)
    torch.manual_seed(2)  # a prior's rank bias adds nodes to the graph, not weights
    agent = ActorCritic(FJ, FC, rank_bias=rank_bias)
    out = export_policy(agent, tmp_path / "p", config=CONFIG, k=8, metrics={},
                        slot_order="sjf" if rank_bias else "oldest")
    read = policy_weights(out)
    assert read.keys() == agent.scorer.state_dict().keys()
    for name, value in agent.scorer.state_dict().items():
        torch.testing.assert_close(read[name], value)


# --- the ONNX model is checked before it runs ---------------------------------------------

def test_onnx_external_data_is_refused(exported: Path, table: Path, tmp_path: Path) -> None:
    policy = _copy(exported, tmp_path / "policy")
    model = onnx.load(str(policy / "policy.onnx"))
    onnx.save_model(model, str(policy / "policy.onnx"), save_as_external_data=True,
                    all_tensors_to_one_file=True, location="weights.bin", size_threshold=0)
    _rehash(policy, "onnx")
    line = one_line_error(invoke("simulate", str(table), "-p", str(policy)))
    assert "policy.onnx" in line and "'weights.bin'" in line and "export the policy again" in line


def _swap_onnx(policy: Path, module: torch.nn.Module, example: tuple[torch.Tensor, ...]) -> None:
    """Replace the policy's ONNX model by ``module``'s, the hash recomputed."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, example, str(policy / "policy.onnx"), dynamo=False,
                          input_names=["jobs", "cluster", "mask"], output_names=["scores"],
                          dynamic_axes={"jobs": {0: "b", 1: "k"}, "cluster": {0: "b"},
                                        "mask": {0: "b", 1: "k"}})
    _rehash(policy, "onnx")


class _OneScore(torch.nn.Module):
    """Scores [B] instead of [B, K]: the output shape a job scorer never has."""

    def forward(self, jobs: torch.Tensor, cluster: torch.Tensor,
                mask: torch.Tensor) -> torch.Tensor:
        return jobs.sum((1, 2)) + cluster.sum(1) + mask.float().sum(1)


def test_an_onnx_input_shape_mismatch_is_one_line(exported: Path, table: Path,
                                                  tmp_path: Path) -> None:
    policy = _copy(exported, tmp_path / "policy")
    wide = PolicyScorer(JobScorer(FJ + 2, FC)).eval()
    _swap_onnx(policy, wide, (torch.zeros(1, 8, FJ + 2), torch.zeros(1, FC),
                              torch.ones(1, 8, dtype=torch.bool)))
    line = one_line_error(invoke("simulate", str(table), "-p", str(policy)))
    assert "policy.onnx" in line and "jobs" in line and "export the policy again" in line


def test_an_onnx_output_shape_mismatch_is_one_line(exported: Path, table: Path,
                                                   tmp_path: Path) -> None:
    policy = _copy(exported, tmp_path / "policy")
    _swap_onnx(policy, _OneScore(), (torch.zeros(1, 8, FJ), torch.zeros(1, FC),
                                     torch.ones(1, 8, dtype=torch.bool)))
    line = one_line_error(invoke("simulate", str(table), "-p", str(policy)))
    assert "policy.onnx" in line and "shape" in line and "export the policy again" in line


def test_a_huge_k_is_one_line(exported: Path, table: Path, tmp_path: Path) -> None:
    policy = _copy(exported, tmp_path / "policy")
    _edit_manifest(policy, lambda m: m["observation"].update(k=2**62))
    line = one_line_error(invoke("simulate", str(table), "-p", str(policy)))
    assert "manifest.json" in line and "observation/k" in line


@pytest.mark.parametrize("name", ["manifest.json", "card.json"])
def test_a_deeply_nested_document_is_one_line(exported: Path, table: Path, tmp_path: Path,
                                              name: str) -> None:
    policy = _copy(exported, tmp_path / "policy")
    (policy / name).write_text('{"a": ' + "[" * 100_000 + "]" * 100_000 + "}")
    line = one_line_error(invoke("simulate", str(table), "-p", str(policy)))
    assert f"{policy / name}: nested more than" in line


def test_init_from_with_weights_unlike_its_manifest_is_one_line(table: Path,
                                                                tmp_path: Path) -> None:
    torch.manual_seed(0)
    liar = export_policy(ActorCritic(FJ, FC, hidden=(16,)), tmp_path / "liar", config=CONFIG,
                         k=8, metrics={})  # the manifest says hidden [32, 16, 8]
    line = one_line_error(invoke("train", str(table), "--steps", "64", "--num-envs", "1",
                                 "--window-size", "40", "--k", "8", "--init-from", str(liar),
                                 "-o", str(tmp_path / "run")))
    assert str(liar) in line and "export" in line


def test_a_newer_minor_manifest_is_one_clean_line(exported: Path, table: Path,
                                                  tmp_path: Path) -> None:
    policy = _copy(exported, tmp_path / "policy")
    _edit_manifest(policy, lambda m: m.update(manifest_version="1.9", future_field=1))
    result = subprocess.run(  # the real command: what the terminal shows
        [sys.executable, "-c", "from hpcpolicy.commands import main; main()", "simulate",
         str(table), "-p", str(policy), "--windows", "1", "--window-size", "40"],
        capture_output=True, text=True, check=False, timeout=300)
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "manifest version 1.9 is newer than 1.0" in lines[0], lines
    assert "Warning" not in result.stderr


# --- the card is bound to the model -------------------------------------------------------

def _card(fallback: str = "sjf", active: Any = True) -> dict[str, Any]:
    """A minimal card of the current version (no comparison recorded)."""
    return {"format": "hpcpolicy.model-card", "card_version": 3, "algo": "ppo", "prior": None,
            "training_data": {"path": "jobs.parquet", "sha256": "ab" * 32},
            "period": {"part": "train", "jobs": [0, 100], "from": "2020-01-01",
                       "to": "2020-02-01"},
            "validation": None, "test": None, "skipped": "no test part", "warning": None,
            "guard": {"fallback": fallback, "rule": "beats-best-on-validation",
                      "active": active}}


@pytest.fixture()
def carded(exported: Path, tmp_path: Path) -> Path:
    from hpcpolicy.training.card import write_card

    policy = _copy(exported, tmp_path / "carded")
    write_card(policy, _card())
    return policy


def test_a_bound_card_deploys_its_guard(carded: Path) -> None:
    from hpcpolicy.deploy.resolve import resolve_policy

    assert resolve_policy(str(carded)).name == "sjf"


def _edit_card(policy: Path, change: Callable[[dict[str, Any]], Any]) -> None:
    path = policy / "card.json"
    card = json.loads(path.read_text())
    change(card)
    path.write_text(json.dumps(card))


def test_an_edited_card_is_refused(carded: Path, table: Path) -> None:
    _edit_card(carded, lambda c: c["guard"].update(active=False))
    line = one_line_error(invoke("simulate", str(table), "-p", str(carded)))
    assert f"{carded / 'card.json'}" in line and "changed" in line
    line = one_line_error(invoke("whatif", str(table), "-c", f"{carded}+easy", "--bootstrap",
                                 "20", "-o", str(carded.parent / "rep")))
    assert "card.json" in line


def test_a_guard_flag_of_the_wrong_type_is_refused(exported: Path, table: Path,
                                                   tmp_path: Path) -> None:
    from hpcpolicy.deploy.binding import bind

    policy = _copy(exported, tmp_path / "policy")  # bound, as a forger would: the type is wrong
    (policy / "card.json").write_text(json.dumps(bind(_card(active="true"), policy)))
    line = one_line_error(invoke("simulate", str(table), "-p", str(policy)))
    assert "card.json" in line and "guard/active" in line


def test_a_card_of_another_model_is_refused(carded: Path, table: Path, tmp_path: Path) -> None:
    torch.manual_seed(1)
    other = export_policy(ActorCritic(FJ, FC), tmp_path / "other", config=CONFIG, k=8,
                          metrics={})
    for name in ("policy.onnx", "policy.torchscript.pt", "manifest.json"):
        shutil.copy(other / name, carded / name)
    line = one_line_error(invoke("simulate", str(table), "-p", str(carded)))
    assert "card.json" in line and "another model" in line


def test_an_unbound_card_is_refused(exported: Path, table: Path, tmp_path: Path) -> None:
    policy = _copy(exported, tmp_path / "policy")
    (policy / "card.json").write_text(json.dumps({**_card(), "card_version": 2}))
    line = one_line_error(invoke("simulate", str(table), "-p", str(policy)))
    assert "card.json" in line and "not bound" in line


# --- a signature with a key kept elsewhere: what a forger cannot recompute -----------------

@pytest.fixture()
def key(tmp_path: Path) -> Path:
    path = tmp_path / "keys" / "site.key"
    path.parent.mkdir()
    path.write_bytes(bytes(range(32)))
    return path


def test_sign_then_verify(carded: Path, key: Path) -> None:
    assert invoke("sign", str(carded), "--key", str(key)).exit_code == 0
    result = invoke("verify", str(carded), "--key", str(key))
    assert result.exit_code == 0 and "as signed" in result.output


def test_a_forged_card_with_recomputed_hashes_fails_the_signature(
        carded: Path, key: Path, table: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hpcpolicy.training.card import write_card

    assert invoke("sign", str(carded), "--key", str(key)).exit_code == 0
    card = json.loads((carded / "card.json").read_text())
    write_card(carded, {**card, "guard": {**card["guard"], "active": False}})  # rebound
    line = one_line_error(invoke("verify", str(carded), "--key", str(key)))
    assert "changed since it was signed (card.json)" in line
    monkeypatch.setenv("HPCPOLICY_SIGNING_KEY", str(key))
    line = one_line_error(invoke("simulate", str(table), "-p", str(carded)))
    assert "changed since it was signed (card.json)" in line


def test_with_a_site_key_set_unsigned_folders_are_refused(
        exported: Path, key: Path, table: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    policy = _copy(exported, tmp_path / "policy")
    monkeypatch.setenv("HPCPOLICY_SIGNING_KEY", str(key))
    for args in (("simulate", str(table), "-p", str(policy)),
                 ("evaluate", str(table), "--policy", f"fcfs,{policy}"),
                 ("whatif", str(table), "-c", f"{policy}+easy", "-o", str(tmp_path / "rep")),
                 ("train", str(table), "--steps", "64", "--num-envs", "1", "--window-size",
                  "40", "--k", "8", "--init-from", str(policy), "-o", str(tmp_path / "run"))):
        line = one_line_error(invoke(*args))
        assert f"{policy}: not signed" in line, args[0]
    assert invoke("sign", str(policy)).exit_code == 0  # the key from the environment
    result = invoke("simulate", str(table), "-p", str(policy), "--windows", "1",
                    "--window-size", "40")
    assert result.exit_code == 0, result.output


def test_keys_that_protect_nothing_are_refused(carded: Path, key: Path, tmp_path: Path) -> None:
    inside = carded / "site.key"
    inside.write_bytes(bytes(32))
    assert "inside the policy folder" in one_line_error(
        invoke("sign", str(carded), "--key", str(inside)))
    inside.unlink()
    short = tmp_path / "short.key"
    short.write_bytes(b"secret")
    assert "too short" in one_line_error(invoke("sign", str(carded), "--key", str(short)))
    other = tmp_path / "other.key"
    other.write_bytes(bytes(range(1, 33)))
    assert invoke("sign", str(carded), "--key", str(key)).exit_code == 0
    assert "signed with another key" in one_line_error(
        invoke("verify", str(carded), "--key", str(other)))


def test_a_deeply_nested_dataset_manifest_is_one_line(tmp_path: Path) -> None:
    from hpcpolicy.offline.store import load_dataset

    (tmp_path / "manifest.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ArtifactError, match=r"manifest\.json: nested more than") as info:
        load_dataset(tmp_path)
    assert "\n" not in str(info.value)


class _Call:
    """Pickles as a call of ``os.getcwd``: what ``weights_only`` refuses to run."""

    def __reduce__(self) -> tuple[Any, tuple[()]]:
        return (os.getcwd, ())


def test_a_checkpoint_that_would_run_code_is_one_line(tmp_path: Path) -> None:
    from hpcpolicy.learn.runs import load_checkpoint

    path = tmp_path / "last.pt"
    torch.save({"format": "hpcpolicy.rl.checkpoint/1", "call": _Call()}, path)
    with pytest.raises(ArtifactError) as info:
        load_checkpoint(path)
    message = str(info.value)
    assert "\n" not in message and "last.pt" in message and "getcwd" in message
    assert "weights_only" not in message  # torch's advice to load it with code on


def test_a_gpu_type_checkpoint_that_would_run_code_is_one_line(tmp_path: Path) -> None:
    pytest.importorskip("d3rlpy")
    from hpcpolicy.errors import ConfigError
    from hpcpolicy.hetero.networks import load_checkpoint

    path = tmp_path / "model.d3"
    torch.save({"call": _Call()}, path)
    with pytest.raises(ConfigError) as info:
        load_checkpoint(None, path)
    message = str(info.value)
    assert "\n" not in message and "getcwd" in message and "weights_only" not in message


@pytest.mark.parametrize("content", ["call", "other shapes"])
def test_online_finetune_reads_only_scorer_weights_of_its_shape(tmp_path: Path, table: Path,
                                                               content: str) -> None:
    from hpcpolicy.atomic import file_sha256
    from hpcpolicy.offline.config import OfflineConfig
    from hpcpolicy.offline.finetune import finetune
    from hpcpolicy.offline.store import StoredDataset

    weights: Any = {"call": _Call()} if content == "call" else \
        JobScorer(FJ, FC, hidden=(16,)).state_dict()
    torch.save(weights, tmp_path / "scorer.pt")
    dataset = StoredDataset(tmp_path, {
        "training_data": {"path": str(table), "sha256": file_sha256(table)},
        "environment": {}, "workload_options": None})
    with pytest.raises(ArtifactError) as info:
        finetune(tmp_path, dataset, OfflineConfig(), steps=64)
    message = str(info.value)
    assert "\n" not in message and "scorer.pt" in message and "weights_only" not in message
