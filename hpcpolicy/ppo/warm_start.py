"""Start online training from an exported policy (``hpcpolicy train --init-from POLICY``).

Any policy directory hpcpolicy wrote holds the per-slot scorer as ONNX; its weights become the
starting point of the new run's policy network, and the value network starts fresh. Behaviour
cloning of a heuristic's decisions (``hpcpolicy dataset build --source heuristics``, then
``hpcpolicy train --algo bc``) is the usual source: PPO then improves on a policy that already
schedules sensibly instead of on a random one.

The weights are read as data from the ONNX graph's tensors (:func:`policy_weights`), after the
checks every reader makes (:func:`hpcpolicy.artifact.read_model`: the manifest's hash, no
external data): never through pickle, never by opening the TorchScript export, which runs code
it carries. Each linear layer of the exported scorer is a ``MatMul`` by a tensor (the weight,
transposed) followed by an ``Add`` of a tensor the exporter keeps under the layer's name
(``scorer.mlp.N.bias``); the weights read must have the shapes of the run's own network.

Example:
    >>> import tempfile
    >>> from hpcpolicy.learn.export import export_policy
    >>> from hpcpolicy.ppo.config import PPOConfig
    >>> from hpcpolicy.learn.networks import ActorCritic
    >>> from hpcpolicy.env.spaces import CLUSTER_FEATURES, JOB_FEATURES
    >>> d = export_policy(ActorCritic(len(JOB_FEATURES), len(CLUSTER_FEATURES)),
    ...                   tempfile.mkdtemp() + "/p", k=4, metrics={},
    ...                   config={"algo": "bc", "seed": 1, "hidden": [32, 16, 8],
    ...                           "activation": "tanh"})
    >>> sorted(scorer_weights(d, PPOConfig()))[:2]
    ['mlp.0.bias', 'mlp.0.weight']
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpcpolicy.errors import ArtifactError, ConfigError

if TYPE_CHECKING:
    import torch

    from hpcpolicy.artifact import LoadedPolicy
    from hpcpolicy.ppo.config import PPOConfig

__all__ = ["policy_weights", "scorer_weights", "shapes_differ"]

_PREFIX = "scorer."
"""The exported module's name for the scorer (:class:`~hpcpolicy.learn.networks.PolicyScorer`)."""


def _graph_weights(file: Path, data: bytes) -> dict[str, Any]:
    """``{name: numpy array}`` of the scorer's layers in the ONNX graph ``data``."""
    import onnx
    from onnx import numpy_helper

    graph = onnx.load_model_from_string(data).graph
    tensors = {t.name: t for t in graph.initializer}
    made_by = {out: node for node in graph.node for out in node.output}
    weights: dict[str, Any] = {}
    for node in graph.node:
        bias = next((i for i in node.input if i.startswith(_PREFIX) and i.endswith(".bias")
                     and i in tensors), None) if node.op_type == "Add" else None
        if bias is None:
            continue
        other = made_by.get(next((i for i in node.input if i != bias), ""))
        if other is None or other.op_type != "MatMul" or other.input[1] not in tensors:
            raise ArtifactError(f"{file}: the layer of {bias!r} is not a MatMul by a weight "
                                "tensor, so its weights cannot be read; export the policy "
                                "again with this hpcpolicy version")
        layer = bias.removeprefix(_PREFIX).removesuffix(".bias")
        weights[f"{layer}.weight"] = numpy_helper.to_array(tensors[other.input[1]]).T.copy()
        weights[f"{layer}.bias"] = numpy_helper.to_array(tensors[bias]).copy()
    if not weights:
        raise ArtifactError(f"{file}: holds no layer named {_PREFIX}*.bias, so it is not a job "
                            "scorer hpcpolicy exported; export the policy again")
    return weights


def policy_weights(path: str | os.PathLike[str]) -> dict[str, torch.Tensor]:
    """The :class:`~hpcpolicy.learn.networks.JobScorer` weights (its ``state_dict``) held by the
    ONNX model of the policy at ``path``, read as data.

    Raises:
        ArtifactError: Not a readable policy (:func:`hpcpolicy.artifact.load_policy`), or a
            graph whose layers are not the exported scorer's.
    """
    from hpcpolicy.artifact import load_policy

    return _weights_of(load_policy(path))


def _weights_of(policy: LoadedPolicy) -> dict[str, torch.Tensor]:
    import torch

    from hpcpolicy.artifact import read_model

    file, data = read_model(policy.path, policy.manifest)
    return {name: torch.from_numpy(array) for name, array in _graph_weights(file, data).items()}


def scorer_weights(path: str | os.PathLike[str], cfg: PPOConfig) -> dict[str, torch.Tensor]:
    """The :class:`~hpcpolicy.learn.networks.JobScorer` weights of the policy at ``path``, checked
    against the network of the run they start.

    Args:
        path: A policy directory (or its manifest or ONNX file).
        cfg: The config of the run it starts; its network must have the same shape.

    Raises:
        ArtifactError: Not a readable policy, trained on other features, weights of other
            shapes than its manifest's network, or (with ``HPCPOLICY_SIGNING_KEY`` set) a
            missing or mismatched signature.
        ConfigError: The policy's network differs from ``cfg``'s (the message says which
            ``--config`` fields make them match).
    """
    from hpcpolicy.artifact import load_policy
    from hpcpolicy.env.spaces import CLUSTER_FEATURES, JOB_FEATURES
    from hpcpolicy.signature import require_signature

    policy = load_policy(path)
    require_signature(policy.path)
    policy.check_features(tuple(f.name for f in JOB_FEATURES),
                          tuple(f.name for f in CLUSTER_FEATURES))
    net = policy.manifest["network"]
    theirs = (net.get("kind"), list(net.get("hidden", [])), net.get("activation"))
    mine = ("job_scorer_mlp", list(cfg.hidden), cfg.activation)
    if theirs != mine:
        raise ConfigError(
            f"--init-from {path}: its network is a {theirs[0]} with hidden {theirs[1]} and "
            f"activation {theirs[2]!r}; this run's is hidden {mine[1]}, {mine[2]!r}. Give "
            f'--config {{"hidden": {theirs[1]}, "activation": "{theirs[2]}"}} to match it')
    weights = _weights_of(policy)
    differ = shapes_differ(weights, cfg.hidden, cfg.activation)
    if differ:
        raise ArtifactError(f"--init-from {path}: its ONNX weights {differ}, not those of the "
                            f"hidden {theirs[1]} network its manifest names; the folder was "
                            "changed after export: export the policy again")
    return weights


def shapes_differ(weights: Mapping[str, Any], hidden: Sequence[int],
                  activation: str) -> str | None:
    """How ``weights`` differ from a :class:`~hpcpolicy.learn.networks.JobScorer` state dict of
    this version's features and ``hidden`` widths (``"have shapes {...}"``), or None when they
    match: names, tensors and shapes.

    Example:
        >>> from hpcpolicy.learn.networks import JobScorer
        >>> shapes_differ(JobScorer(7, 7, (8,)).state_dict(), (8,), "tanh") is None
        True
        >>> shapes_differ({"mlp.0.weight": "x"}, (8,), "tanh")
        "have shapes {'mlp.0.weight': 'not a tensor'}"
    """
    import torch

    from hpcpolicy.env.spaces import CLUSTER_FEATURES, JOB_FEATURES
    from hpcpolicy.learn.networks import JobScorer

    wanted = {k: list(v.shape) for k, v in JobScorer(
        len(JOB_FEATURES), len(CLUSTER_FEATURES), tuple(hidden), activation).state_dict().items()}
    shapes = {str(k)[:40]: list(v.shape) if isinstance(v, torch.Tensor) else "not a tensor"
              for k, v in list(weights.items())[:20]}
    return None if shapes == wanted else f"have shapes {shapes}"
