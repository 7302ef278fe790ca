"""The inspector's artifact (format ``hpcpolicy.inspector``): the heuristic and the inspector.

A policy directory like a job scorer's (:mod:`hpcpolicy.artifact`: ``policy.onnx``,
``policy.torchscript.pt``, ``manifest.json``), whose manifest (``schemas/inspector_manifest``:
the job scorer's contract under format ``hpcpolicy.inspector``) says what runs:
``observation.slot_order`` is the deployed heuristic,
``observation.k`` the proposals it examines, and ``observation.job_features`` the proposals'
features (:data:`~hpcpolicy.inspector.features.CANDIDATE_FEATURES`). The model scores the
proposals (``scores = f(jobs [B, K, F], cluster [B, Fc], mask [B, K])``, higher is better) and
the best one is accepted. Reading it needs neither torch nor training code: the manifest is
checked against its schema and version, the model against its hash, and the graph is run with
onnxruntime (:func:`~hpcpolicy.artifact.read_manifest`, :func:`~hpcpolicy.artifact.open_model`).
A ``card.json`` beside it carries the guard (:mod:`hpcpolicy.deploy.guard`), which
:func:`hpcpolicy.deploy.resolve.resolve_policy` applies as it does for every policy folder.

Example:
    >>> import tempfile
    >>> from hpcpolicy.learn.networks import JobScorer
    >>> net = JobScorer(len(CANDIDATE_FEATURES), len(CLUSTER_FEATURES), (8,), rank_bias=1.0)
    >>> d = export_inspector(net, tempfile.mkdtemp() + "/policy", heuristic="sjf", k=4,
    ...                      config={"algo": "inspector-bc", "seed": 1}, metrics={})
    >>> policy = InspectorPolicy(d)
    >>> policy.heuristic, policy.k
    ('sjf', 4)
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpcpolicy.artifact import INSPECTOR_FORMAT, LoadedPolicy, open_model, read_manifest
from hpcpolicy.env.spaces import CLUSTER_FEATURES
from hpcpolicy.errors import ArtifactError, ConfigError
from hpcpolicy.inspector.decision import Inspector
from hpcpolicy.inspector.features import CANDIDATE_FEATURES, Candidates, inspector_spec
from hpcpolicy.learn.export import Network, run_fields, stage_artifact

if TYPE_CHECKING:
    from hpcpolicy.learn.networks import JobScorer

__all__ = ["InspectorPolicy", "export_inspector", "load_inspector"]


def export_inspector(net: JobScorer, out_dir: str | os.PathLike[str], *, heuristic: str,
                     k: int, config: Mapping[str, Any], metrics: Mapping[str, float],
                     provenance: Mapping[str, Any] | None = None) -> Path:
    """Write the inspector over ``heuristic`` to ``out_dir`` (through
    :func:`~hpcpolicy.learn.export.stage_artifact`: complete or not at all).

    Args:
        net: The trained proposal scorer (inputs :data:`CANDIDATE_FEATURES` and the cluster
            features).
        out_dir: The policy directory.
        heuristic: The deployed heuristic whose proposals it inspects.
        k: Proposals per decision.
        config: The training config's ``to_dict()`` (names ``algo`` and ``seed``).
        metrics: Training metrics.
        provenance: ``training_data`` (``{"path", "sha256"}``), ``split`` and further
            JSON-ready facts.

    Returns:
        ``out_dir`` as a Path.
    """
    import torch

    from hpcpolicy.learn.networks import PolicyScorer

    scorer = PolicyScorer(copy.deepcopy(net).cpu()).eval()
    n_job, n_cluster = len(CANDIDATE_FEATURES), len(CLUSTER_FEATURES)
    network = Network(scorer, (torch.zeros(1, k, n_job), torch.zeros(1, n_cluster),
                               torch.ones(1, k, dtype=torch.bool)),
                      inputs=("jobs", "cluster", "mask"), outputs=("scores",),
                      dynamic_axes={"jobs": {0: "batch", 1: "k"}, "cluster": {0: "batch"},
                                    "mask": {0: "batch", 1: "k"}, "scores": {0: "batch", 1: "k"}})
    facts = dict(provenance or {})
    hidden = [m.out_features for m in net.mlp if isinstance(m, torch.nn.Linear)][:-1]
    return stage_artifact(out_dir, INSPECTOR_FORMAT, lambda _: {
        "algo": str(config["algo"]),
        "observation": inspector_spec(k, heuristic),
        "network": {"kind": "proposal_scorer_mlp", "hidden": hidden,
                    "activation": str(config.get("activation", "tanh")),
                    "parameters": sum(p.numel() for p in scorer.parameters())},
        "outputs": {"scores": "float32 [B, K]; higher is better; the best proposal is "
                              "accepted; -inf on empty slots"},
        **run_fields(config, metrics, facts),
    }, network)


def load_inspector(path: str | os.PathLike[str]) -> LoadedPolicy:
    """Open an inspector's model without training code, torch or pickle.

    Raises:
        ArtifactError: Not an inspector artifact, another major manifest version, a manifest
            that breaks its schema, a model file whose hash differs or that keeps tensors
            elsewhere, a model of other inputs, a missing runtime, or features other than this
            version builds.
    """
    directory, manifest = read_manifest(path, INSPECTOR_FORMAT,
                                        "write one with `python -m benchmarks.inspector`")
    obs = manifest["observation"]
    model = open_model(directory, manifest, {"jobs": (None, None, len(obs["job_features"])),
                                             "cluster": (None, len(obs["cluster_features"])),
                                             "mask": (None, None)})
    loaded = LoadedPolicy(directory, manifest, model)
    loaded.check_features(tuple(f.name for f in CANDIDATE_FEATURES),
                          tuple(f.name for f in CLUSTER_FEATURES))
    return loaded


class InspectorPolicy(Inspector):
    """An inspector directory (``runs/NAME/policy``) usable wherever a heuristic is: its
    heuristic proposes, its model accepts the proposal it scores highest.

    Args:
        path: The policy directory or its ``manifest.json``.

    Raises:
        ArtifactError: What :func:`load_inspector` raises, or a heuristic that cannot propose.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.artifact = load_inspector(path)
        """The loaded model and manifest."""
        heuristic = self.artifact.slot_order
        try:
            super().__init__(heuristic, self._accept, k=self.artifact.k, name=str(path))
        except ConfigError as exc:  # a heuristic that cannot propose: a bad manifest
            raise ArtifactError(f"{self.artifact.path}: {exc}; export the inspector again") \
                from exc

    def _accept(self, candidates: Candidates) -> int:
        return self.artifact.choose(candidates.jobs, candidates.cluster, candidates.mask)
