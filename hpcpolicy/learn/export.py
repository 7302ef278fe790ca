"""Writing a deployable artifact after training: one staging helper for every kind.

:func:`stage_artifact` builds an artifact directory in a fresh folder beside its target (the
network as ONNX and TorchScript, then the manifest, checked against its format's schema) and
renames it into place, so a reader sees the old artifact or the new one, never half of one.
The job scorer (:func:`export_policy`), the two-agent scheduler
(:func:`hpcpolicy.marl.artifact.export_marl`) and the GPU-type chooser
(:func:`hpcpolicy.hetero.export.export_gpu_policy`) all write through it; the contract they
write is :mod:`hpcpolicy.artifact`'s, and :mod:`hpcpolicy.deploy` reads it back: the ONNX file
only. The TorchScript file is an export for other tools; no hpcpolicy command opens one, since
opening TorchScript runs code it carries.

Importing this module does not import torch.

Example:
    >>> import tempfile
    >>> from hpcpolicy.learn.networks import ActorCritic
    >>> d = export_policy(ActorCritic(7, 7), tempfile.mkdtemp() + "/policy", k=8,
    ...                   config={"algo": "ppo", "seed": 1, "hidden": [32, 16, 8],
    ...                           "activation": "tanh"}, metrics={})
    >>> sorted(p.name for p in d.iterdir())
    ['manifest.json', 'policy.onnx', 'policy.torchscript.pt']
"""

from __future__ import annotations

import copy
import datetime as dt
import math
import os
import shutil
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpcpolicy.artifact import (
    MANIFEST_FILE,
    MANIFEST_VERSION,
    ONNX_FILE,
    ONNX_OPSET,
    POLICY_FORMAT,
    TORCHSCRIPT_FILE,
    git_commit,
    validate_manifest,
)
from hpcpolicy.atomic import build_dir, file_sha256, replace_dir, write_json
from hpcpolicy.version import __version__

if TYPE_CHECKING:
    import torch

    from hpcpolicy.learn.networks import ActorCritic, JobScorer

__all__ = ["Network", "export_policy", "finite_metrics", "run_fields", "stage_artifact"]


@dataclass(frozen=True)
class Network:
    """A network to write as ``policy.onnx`` and ``policy.torchscript.pt``."""

    module: torch.nn.Module
    """The module, on the CPU, in eval mode."""
    example: tuple[torch.Tensor, ...]
    """One example input per argument (the ONNX exporter traces with them)."""
    inputs: tuple[str, ...]
    """Names of the inputs, in order."""
    outputs: tuple[str, ...]
    """Names of the outputs."""
    dynamic_axes: dict[str, dict[int, str]]
    """The axes of each input and output whose size may change (batch, slots)."""

    def write(self, folder: Path) -> dict[str, Any]:
        """Write both files into ``folder``; the manifest's ``files`` entry (with hashes)."""
        import torch

        # Both exporters are deprecated in torch 2.9+ in favour of torch.export; the dynamo
        # ONNX exporter needs the extra package onnxscript. Their output is checked against
        # eager torch by tests/test_artifact.py.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            torch.onnx.export(self.module, self.example, str(folder / ONNX_FILE), dynamo=False,
                              opset_version=ONNX_OPSET, input_names=list(self.inputs),
                              output_names=list(self.outputs), dynamic_axes=self.dynamic_axes)
            torch.jit.script(self.module).save(  # type: ignore[no-untyped-call]
                str(folder / TORCHSCRIPT_FILE))
        return {"onnx": {"path": ONNX_FILE, "sha256": file_sha256(folder / ONNX_FILE),
                         "opset": ONNX_OPSET},
                "torchscript": {"path": TORCHSCRIPT_FILE,
                                "sha256": file_sha256(folder / TORCHSCRIPT_FILE)}}


def stage_artifact(out_dir: str | os.PathLike[str], fmt: str,
                   body: Callable[[Path], Mapping[str, Any]],
                   network: Network | None = None) -> Path:
    """Build an artifact beside ``out_dir`` and rename it into place (replacing an older one).

    In a fresh folder: ``network``'s model files, then ``body(folder)`` (which may write
    further files there) as the manifest, behind the fields every manifest starts with
    (version, format, time, package) and followed by ``files`` when there is a network. The
    manifest is checked against the format's schema before anything is renamed; on any
    failure the folder is removed and ``out_dir`` is left as it was.

    Args:
        out_dir: The artifact directory, usually ``runs/<name>/policy``.
        fmt: The manifest's ``format`` (a key of :data:`hpcpolicy.artifact.FORMATS`).
        body: The format's own manifest fields.
        network: The network to write as ONNX and TorchScript, if the format has one.

    Returns:
        ``out_dir`` as a Path.

    Raises:
        ArtifactError: The manifest breaks its schema (a bug in the exporter).
    """
    out = Path(out_dir)
    build = build_dir(out)  # removes the build folders of interrupted exports first
    build.chmod(0o755)  # mkdtemp makes it private; a policy is meant to be shared
    try:
        files = network.write(build) if network is not None else None
        manifest = {
            "manifest_version": MANIFEST_VERSION,
            "format": fmt,
            "created_utc": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "package": {"name": "hpcpolicy", "version": __version__, "git_commit": git_commit()},
            **body(build),
        }
        if files is not None:
            manifest["files"] = files
        validate_manifest(manifest, build / MANIFEST_FILE, fmt)
        write_json(build / MANIFEST_FILE, manifest)
        replace_dir(build, out)
    except BaseException:
        shutil.rmtree(build, ignore_errors=True)
        raise
    return out


def finite_metrics(metrics: Mapping[str, float]) -> dict[str, float | None]:
    """Metrics with NaN/inf as None (JSON has no NaN)."""
    return {k: (float(v) if math.isfinite(v) else None) for k, v in metrics.items()}


def export_policy(agent: ActorCritic | JobScorer, out_dir: str | os.PathLike[str], *,
                  config: Mapping[str, Any], metrics: Mapping[str, float], k: int,
                  provenance: Mapping[str, Any] | None = None,
                  observation: Mapping[str, Any] | None = None,
                  slot_order: str = "oldest") -> Path:
    """Write ``policy.onnx``, ``policy.torchscript.pt`` and ``manifest.json`` to ``out_dir``
    (format ``hpcpolicy.policy``, through :func:`stage_artifact`).

    Args:
        agent: A trained :class:`~hpcpolicy.learn.networks.ActorCritic` (its ``scorer`` is
            exported) or a :class:`~hpcpolicy.learn.networks.JobScorer`.
        out_dir: The policy directory, usually ``runs/<name>/policy``.
        config: The training config's ``to_dict()`` (must name ``algo`` and ``seed``).
        metrics: Final training metrics.
        k: Slots the policy was trained with.
        provenance: ``reward``, ``training_data`` (``{"path", "sha256"}``) and further
            JSON-ready keys, recorded under ``provenance``.
        observation: The inputs' contract to record, for a scorer of other slots than
            waiting jobs (the two-agent scheduler's allocator scores candidate placements);
            default :func:`~hpcpolicy.env.spaces.feature_spec` of ``k`` and ``slot_order``.
        slot_order: What filled the slots in training: ``oldest`` or the prior heuristic
            (:mod:`hpcpolicy.env.prior`).

    Returns:
        ``out_dir`` as a Path.
    """
    import torch

    from hpcpolicy.env.spaces import feature_spec
    from hpcpolicy.learn.networks import JobScorer, PolicyScorer

    scorer_net = agent if isinstance(agent, JobScorer) else agent.scorer
    scorer = PolicyScorer(copy.deepcopy(scorer_net).cpu()).eval()
    spec = dict(observation) if observation is not None else feature_spec(k, slot_order)
    n_job, n_cluster = len(spec["job_features"]), len(spec["cluster_features"])
    network = Network(scorer, (torch.zeros(1, k, n_job), torch.zeros(1, n_cluster),
                               torch.ones(1, k, dtype=torch.bool)),
                      inputs=("jobs", "cluster", "mask"), outputs=("scores",),
                      dynamic_axes={"jobs": {0: "batch", 1: "k"}, "cluster": {0: "batch"},
                                    "mask": {0: "batch", 1: "k"}, "scores": {0: "batch", 1: "k"}})
    facts = dict(provenance or {})
    return stage_artifact(out_dir, POLICY_FORMAT, lambda _: {
        "algo": str(config["algo"]),
        "observation": spec,
        "network": {"kind": "job_scorer_mlp", "hidden": list(config.get("hidden", [])),
                    "activation": str(config.get("activation", "")),
                    "parameters": sum(p.numel() for p in scorer.parameters())},
        "outputs": {"scores": "float32 [B, K]; higher is better; -inf on invalid slots"},
        **run_fields(config, metrics, facts),
    }, network)


def run_fields(config: Mapping[str, Any], metrics: Mapping[str, Any],
               facts: Mapping[str, Any]) -> dict[str, Any]:
    """The manifest fields every trained artifact carries about its run: reward, training
    data, config, finite metrics, and the rest of ``facts`` as provenance."""
    return {"reward": facts.get("reward"), "training_data": facts.get("training_data"),
            "config": dict(config), "metrics": finite_metrics(metrics),
            "provenance": {key: value for key, value in facts.items()
                           if key not in ("reward", "training_data")}}
