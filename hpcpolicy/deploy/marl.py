"""The two-agent scheduler (format ``hpcpolicy.marl``) as a policy: usable wherever a
policy path is accepted.

:func:`load_marl` opens the artifact written by :func:`hpcpolicy.marl.artifact.export_marl`:
the top-level manifest (schema and version checked by :func:`hpcpolicy.artifact.read_manifest`)
and each agent's scorer (:func:`hpcpolicy.artifact.load_policy`: hashes, ONNX with onnxruntime,
no pickle, no TorchScript, no training code), each checked against the features this version builds.

``hpcpolicy simulate|evaluate|whatif ... --policy runs/NAME/policy`` resolves such an artifact
to :class:`MarlPolicy` (:func:`hpcpolicy.deploy.resolve.resolve_policy`). Its
:meth:`~MarlPolicy.bind` gives the engine the selector (which job starts) and its
:meth:`~MarlPolicy.bind_placer` the allocator (where its GPUs go); having ``bind_placer``
makes :func:`hpcpolicy.sim.simulate` run the node-level GPU engine. Both follow the decision
rules of :mod:`hpcpolicy.marl.decide`, exactly as in training, and take each agent's best
option by the exported scorers.

Example:
    >>> policy = MarlPolicy("runs/marl/policy")                            # doctest: +SKIP
    >>> simulate(workload, cluster, SimConfig(check=True), policy=policy)  # doctest: +SKIP
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpcpolicy.artifact import (
    MANIFEST_FILE,
    MARL_FORMAT,
    LoadedPolicy,
    load_policy,
    member,
    read_manifest,
)
from hpcpolicy.env.spaces import CLUSTER_FEATURES, JOB_FEATURES
from hpcpolicy.errors import ArtifactError
from hpcpolicy.gpu.topology import Topology
from hpcpolicy.marl.decide import SELECTOR, AgentPlacer, AgentScorer, Obs
from hpcpolicy.marl.features import (
    CANDIDATE_FEATURES,
    CONTEXT_FEATURES,
    VISIBLE,
    AllocatorObserver,
    SelectorObserver,
)

if TYPE_CHECKING:
    from hpcpolicy.cluster import ClusterSpec
    from hpcpolicy.policies.settings import RunSettings
    from hpcpolicy.workload import Workload

__all__ = ["MarlArtifact", "MarlPolicy", "load_marl"]


@dataclass(frozen=True)
class MarlArtifact:
    """A two-agent artifact opened by :func:`load_marl`."""

    path: Path
    """The artifact directory."""
    manifest: dict[str, Any]
    """The top-level manifest."""
    selector: LoadedPolicy
    """The selector's scorer."""
    allocator: LoadedPolicy
    """The allocator's scorer."""

    @property
    def k(self) -> int:
        """Job slots the selector sees."""
        return int(self.manifest["agents"]["selector"]["k"])

    @property
    def visible(self) -> str:
        """Which waiting jobs the selector sees (artifacts written before the choice existed
        showed the oldest)."""
        return str(self.manifest["agents"]["selector"].get("visible", "oldest"))


def load_marl(path: str | os.PathLike[str]) -> MarlArtifact:
    """Open both agents' scorers, without training code and without pickle.

    Args:
        path: The artifact directory or its ``manifest.json``.

    Raises:
        ArtifactError: Not a two-agent artifact, another major manifest version, a manifest
            that breaks its schema, or what :func:`~hpcpolicy.artifact.load_policy` raises for
            either agent.
    """
    directory, manifest = read_manifest(path, MARL_FORMAT,
                                        "write one with `hpcpolicy train --algo marl`")
    file = directory / MANIFEST_FILE
    agents = manifest["agents"]
    visible = agents["selector"].get("visible", "oldest")
    if visible not in VISIBLE:
        raise ArtifactError(f"{file}: agents.selector.visible {visible!r} is not one of "
                            f"{', '.join(VISIBLE)}; the artifact is from a newer hpcpolicy")
    selector = load_policy(member(directory, agents["selector"]["path"],
                                  "agents.selector.path"))
    selector.check_features(tuple(f.name for f in JOB_FEATURES),
                            tuple(f.name for f in CLUSTER_FEATURES))
    allocator = load_policy(member(directory, agents["allocator"]["path"],
                                   "agents.allocator.path"))
    allocator.check_features(tuple(f.name for f in CANDIDATE_FEATURES),
                             tuple(f.name for f in CONTEXT_FEATURES))
    return MarlArtifact(directory, manifest, selector, allocator)


class MarlPolicy:
    """A two-agent artifact directory as a :class:`~hpcpolicy.policies.base.Policy` that
    also places GPUs (:class:`~hpcpolicy.gpu.placer.PlacerPolicy`).

    Args:
        path: The artifact directory (or its ``manifest.json``).

    Raises:
        ArtifactError: What :func:`load_marl` raises.
    """

    def __init__(self, path: str | Path) -> None:
        self.artifact = load_marl(path)
        self.name = str(path)

    def bind(self, workload: Workload, cluster: ClusterSpec, cfg: RunSettings) -> AgentScorer:
        """The selector for one run of ``workload`` on ``cluster``."""
        topology = Topology.from_cluster(cluster)
        return AgentScorer(SelectorObserver(workload, topology, self.artifact.k,
                                            self.artifact.visible), self.choose)

    def bind_placer(self, workload: Workload, cluster: ClusterSpec) -> AgentPlacer:
        """The allocator for the same run."""
        return AgentPlacer(AllocatorObserver(workload, Topology.from_cluster(cluster)),
                           self.choose)

    def choose(self, agent: int, obs: Obs, now: int) -> int:
        """The best-scored valid option of ``agent`` (0 selector, 1 allocator)."""
        scorer = self.artifact.selector if agent == SELECTOR else self.artifact.allocator
        return scorer.choose(obs["jobs"], obs["cluster"], obs["mask"])
