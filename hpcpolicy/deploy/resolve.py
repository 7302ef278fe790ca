"""A policy by name or path: a heuristic, or any kind of trained artifact.

``--policy`` (``simulate``, ``evaluate``, ``whatif``) takes a heuristic's name (``sjf``) or a
policy directory (``runs/NAME/policy``). A directory is opened by the loader of the
``format`` its manifest names, through one table (:data:`LOADERS`), as ingest picks its
readers; a path without a readable manifest goes to the job-scorer loader, whose errors say
what a policy directory holds. With ``HPCPOLICY_SIGNING_KEY`` set, a directory must carry a
matching signature first (:mod:`hpcpolicy.signature`).

Example:
    >>> resolve_policy("sjf").name
    'sjf'
    >>> sorted(LOADERS)
    ['hpcpolicy.gpu-type-policy', 'hpcpolicy.inspector', 'hpcpolicy.marl', 'hpcpolicy.policy']
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from hpcpolicy.artifact import (
    GPU_TYPE_FORMAT,
    INSPECTOR_FORMAT,
    MARL_FORMAT,
    POLICY_FORMAT,
    manifest_format,
)
from hpcpolicy.deploy.gpu_type import GpuDqnPolicy
from hpcpolicy.deploy.guard import active_guard
from hpcpolicy.deploy.learned import LearnedPolicy
from hpcpolicy.deploy.marl import MarlPolicy
from hpcpolicy.errors import ArtifactError, ConfigError
from hpcpolicy.inspector.artifact import InspectorPolicy
from hpcpolicy.policies.base import Policy
from hpcpolicy.policies.heuristics import HEURISTICS, get_policy
from hpcpolicy.signature import require_signature
from hpcpolicy.sim.engine import simulate

if TYPE_CHECKING:
    from hpcpolicy.cluster import ClusterSpec
    from hpcpolicy.sim.types import RunningJobs, SimConfig, SimResult
    from hpcpolicy.workload import Workload

__all__ = ["LOADERS", "policy_simulator", "resolve_policy"]

LOADERS: dict[str, Callable[[str], Policy]] = {
    POLICY_FORMAT: LearnedPolicy,   # one job scorer: PPO, DD-PPO, offline RL
    MARL_FORMAT: MarlPolicy,        # the two-agent scheduler: selector + GPU allocator
    GPU_TYPE_FORMAT: GpuDqnPolicy,  # online DQN choosing GPU types (FCFS queue order)
    INSPECTOR_FORMAT: InspectorPolicy,  # a heuristic proposes, an inspector accepts
}
"""The policy class of each artifact ``format``; each takes the policy directory."""


def resolve_policy(spec: str, *, guard: bool = True) -> Policy:
    """A heuristic by name (``sjf``), or a trained policy by path (``runs/NAME/policy``),
    opened by the loader of its manifest's format (:data:`LOADERS`); with ``guard``, the
    fallback heuristic of a policy whose guard is active (:mod:`hpcpolicy.deploy.guard`).

    Raises:
        ConfigError: Neither a heuristic nor an existing path; the message lists the heuristics.
        ArtifactError: The path is not a loadable policy, or its format is unknown, or (with
            ``HPCPOLICY_SIGNING_KEY`` set) its signature is missing or does not match.
    """
    if spec.strip().lower() in HEURISTICS:
        return get_policy(spec)
    if not Path(spec).exists():
        raise ConfigError(f"policy {spec!r} is neither a heuristic ({', '.join(HEURISTICS)}) "
                          "nor a trained policy directory (runs/NAME/policy, written by "
                          "`hpcpolicy train`)")
    require_signature(spec if Path(spec).is_dir() else Path(spec).parent)
    fallback = active_guard(spec) if guard else None
    if fallback is not None:
        return get_policy(fallback)
    fmt = manifest_format(spec)
    if fmt is None:  # a model file, or no manifest: the job-scorer loader says what is wrong
        return LearnedPolicy(spec)
    if fmt not in LOADERS:
        raise ArtifactError(f"{spec}: manifest format {fmt!r} is not one of "
                            f"{', '.join(LOADERS)}; it was written by another hpcpolicy "
                            "version, or is not a policy")
    return LOADERS[fmt](spec)


def policy_simulator(policies: Mapping[str, Policy]) -> Callable[..., SimResult]:
    """``simulate`` with the policy objects named by ``cfg.policy`` (for learned policies).

    The returned function has :func:`hpcpolicy.sim.simulate`'s signature, so it can be given
    to :func:`hpcpolicy.sim.windows.replay`; a configuration whose ``policy`` is not a key of
    ``policies`` runs the registered heuristic of that name.
    """

    def run(workload: Workload, cluster: ClusterSpec, cfg: SimConfig, *,
            running: RunningJobs | None = None) -> SimResult:
        return simulate(workload, cluster, cfg, running=running, policy=policies.get(cfg.policy))

    return run
