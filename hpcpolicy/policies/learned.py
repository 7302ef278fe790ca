"""A trained policy artifact as an ordinary :class:`~hpcpolicy.policies.base.Policy`.

``hpcpolicy simulate jobs.parquet --policy runs/NAME/policy`` and ``hpcpolicy evaluate`` load
the deployable artifact (:func:`hpcpolicy.artifact.load_policy`: ONNX or TorchScript plus
``manifest.json``, never a pickle, no training code) and let it choose, at every decision, the
job that becomes the queue head, exactly as in the training environment: it sees the oldest
``k`` waiting jobs (k from the manifest), built by the environment's own feature code
(:mod:`hpcpolicy.env.observe`); the chosen job goes first, the others follow in submit order
(:func:`hpcpolicy.env.driver.head_scores`), and the configured backfilling runs around it.

Running jobs: the cluster features read the running jobs' cores and requested ends from
:class:`~hpcpolicy.policies.base.QueueView`, which the engine fills at every decision (warm-start
jobs included), so the policy sees in ``simulate`` what it saw in training.

Example:
    >>> from hpcpolicy.policies.learned import resolve_policy
    >>> resolve_policy("sjf").name
    'sjf'
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from hpcpolicy.env.driver import head_scores
from hpcpolicy.env.observe import Observer
from hpcpolicy.errors import ArtifactError, ConfigError
from hpcpolicy.policies.base import Policy, QueueView

if TYPE_CHECKING:
    from hpcpolicy.artifact import LoadedPolicy
    from hpcpolicy.cluster import ClusterSpec
    from hpcpolicy.sim.types import RunningJobs, SimConfig, SimResult
    from hpcpolicy.workload import Workload

__all__ = ["LearnedPolicy", "LearnedScorer", "policy_simulator", "resolve_policy"]

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]


class LearnedScorer:
    """A :class:`LearnedPolicy` bound to one run: one head choice per decision."""

    def __init__(self, artifact: LoadedPolicy, observer: Observer) -> None:
        self._artifact = artifact
        self._observer = observer

    def scores(self, view: QueueView) -> F64:
        """The chosen job first (score -1), the others in submit order."""
        k = self._observer.k
        obs = self._observer.observe(view.now, view.jobs, view.fits_now[:k], view.free,
                                     view.running_cores, view.running_req_end)
        slot = self._artifact.choose(obs["jobs"], obs["cluster"], obs["mask"])
        if not obs["mask"][slot]:
            raise ArtifactError(f"{self._artifact.path}: the policy scored no waiting job above "
                                "-inf or NaN; the model file is broken, export it again")
        return head_scores(view.jobs.shape[0], slot)


class LearnedPolicy:
    """A policy directory (``runs/NAME/policy``) usable wherever a heuristic is.

    Args:
        path: The policy directory, its ``manifest.json``, or one of its model files.
        backend: ``auto``, ``onnx`` or ``torchscript`` (see :func:`hpcpolicy.artifact.load_policy`).

    Raises:
        ArtifactError: What :func:`~hpcpolicy.artifact.load_policy` raises, or a policy trained
            on other features than this version's environment builds.

    Example:
        >>> policy = LearnedPolicy("runs/NAME/policy")                  # doctest: +SKIP
        >>> simulate(workload, cluster, SimConfig(backfill="easy"), policy=policy)  # doctest: +SKIP
    """

    def __init__(self, path: str | Path, backend: str = "auto") -> None:
        from hpcpolicy.artifact import load_policy
        from hpcpolicy.env.spaces import CLUSTER_FEATURES, JOB_FEATURES

        self.artifact = load_policy(path, backend)
        self.artifact.check_features(tuple(f.name for f in JOB_FEATURES),
                                     tuple(f.name for f in CLUSTER_FEATURES))
        self.name = str(path)

    @property
    def k(self) -> int:
        """Slots the policy sees (from its manifest)."""
        return self.artifact.k

    def bind(self, workload: Workload, cluster: ClusterSpec, cfg: SimConfig) -> LearnedScorer:
        """A scorer for one run of ``workload`` on ``cluster``."""
        from hpcpolicy.sim.prepare import prepare

        prep = prepare(workload, cluster, cfg)
        return LearnedScorer(self.artifact, Observer(workload, prep.capacity, self.k))


def resolve_policy(spec: str) -> Policy:
    """A heuristic by name (``sjf``), or a learned policy by path (``runs/NAME/policy``): a
    single-agent policy, a two-agent one (:class:`hpcpolicy.marl.policy.MarlPolicy`), or a
    GPU-type chooser (:class:`hpcpolicy.hetero.policy.GpuDqnPolicy`).

    Raises:
        ConfigError: Neither a heuristic nor an existing path; the message lists the heuristics.
        ArtifactError: The path is not a loadable policy.
    """
    from hpcpolicy.policies.heuristics import HEURISTICS, get_policy

    if spec.strip().lower() in HEURISTICS:
        return get_policy(spec)
    if Path(spec).exists():
        from hpcpolicy.marl.artifact import is_marl_artifact

        if is_marl_artifact(spec):  # the two-agent scheduler: selector + GPU allocator
            from hpcpolicy.marl.policy import MarlPolicy

            return MarlPolicy(spec)
        from hpcpolicy.hetero.export import is_gpu_policy

        if is_gpu_policy(spec):  # online DQN choosing GPU types (FCFS queue order)
            from hpcpolicy.hetero.policy import GpuDqnPolicy

            return GpuDqnPolicy(spec)
        return LearnedPolicy(spec)
    raise ConfigError(f"policy {spec!r} is neither a heuristic ({', '.join(HEURISTICS)}) nor a "
                      "trained policy directory (runs/NAME/policy, written by `hpcpolicy train`)")


def policy_simulator(policies: Mapping[str, Policy]) -> Callable[..., SimResult]:
    """``simulate`` with the policy objects named by ``cfg.policy`` (for learned policies).

    The returned function has :func:`hpcpolicy.sim.simulate`'s signature, so it can be given
    to :func:`hpcpolicy.sim.windows.replay`; a configuration whose ``policy`` is not a key of
    ``policies`` runs the registered heuristic of that name.
    """
    from hpcpolicy.sim.engine import simulate

    def run(workload: Workload, cluster: ClusterSpec, cfg: SimConfig, *,
            running: RunningJobs | None = None) -> SimResult:
        return simulate(workload, cluster, cfg, running=running, policy=policies.get(cfg.policy))

    return run
