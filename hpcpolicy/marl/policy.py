"""The two-agent scheduler as a policy: usable wherever a policy path is accepted.

``hpcpolicy simulate|evaluate|whatif ... --policy runs/NAME/policy`` resolves a two-agent
artifact to :class:`MarlPolicy` (:func:`hpcpolicy.policies.learned.resolve_policy`). Its
:meth:`~MarlPolicy.bind` gives the engine the selector (which job starts) and its
:meth:`~MarlPolicy.bind_placer` the allocator (where its GPUs go); having ``bind_placer``
makes :func:`hpcpolicy.sim.simulate` run the node-level GPU engine. Both follow the decision
rules of :mod:`hpcpolicy.marl.decide`, exactly as in training, and take each agent's best
option by the exported scorers (ONNX or TorchScript).

Example:
    >>> policy = MarlPolicy("runs/marl/policy")                            # doctest: +SKIP
    >>> simulate(workload, cluster, SimConfig(check=True), policy=policy)  # doctest: +SKIP
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from hpcpolicy.gpu.topology import Topology
from hpcpolicy.marl.artifact import load_marl
from hpcpolicy.marl.decide import SELECTOR, AgentPlacer, AgentScorer, Obs
from hpcpolicy.marl.features import AllocatorObserver, SelectorObserver

if TYPE_CHECKING:
    from hpcpolicy.cluster import ClusterSpec
    from hpcpolicy.sim.types import SimConfig
    from hpcpolicy.workload import Workload

__all__ = ["MarlPolicy"]


class MarlPolicy:
    """A two-agent artifact directory as a :class:`~hpcpolicy.policies.base.Policy` that
    also places GPUs (:class:`~hpcpolicy.gpu.placer.PlacerPolicy`).

    Args:
        path: The artifact directory (or its ``manifest.json``).
        backend: ``auto``, ``onnx`` or ``torchscript``.

    Raises:
        ArtifactError: What :func:`~hpcpolicy.marl.artifact.load_marl` raises.
    """

    def __init__(self, path: str | Path, backend: str = "auto") -> None:
        self.artifact = load_marl(path, backend)
        self.name = str(path)

    def bind(self, workload: Workload, cluster: ClusterSpec, cfg: SimConfig) -> AgentScorer:
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
