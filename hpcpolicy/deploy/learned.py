"""A trained job scorer (format ``hpcpolicy.policy``) as an ordinary
:class:`~hpcpolicy.policies.base.Policy`.

``hpcpolicy simulate jobs.parquet --policy runs/NAME/policy`` and ``hpcpolicy evaluate`` load
the deployable artifact (:func:`hpcpolicy.artifact.load_policy`: ONNX plus ``manifest.json``,
never a pickle nor TorchScript, no training code) and let it choose, at every decision, the
job that becomes the queue head, exactly as in the training environment: it sees the oldest
``k`` waiting jobs (k from the manifest), or the best ``k`` of the prior heuristic it was
trained from (the manifest's ``slot_order``, :mod:`hpcpolicy.env.prior`), built by the
environment's own feature code (:mod:`hpcpolicy.env.observe`); the chosen job goes first, the
others follow in submit order, or the prior's (:func:`hpcpolicy.env.driver.head_scores`), and
the configured backfilling runs around it.

Running jobs: the cluster features read the running jobs' cores and requested ends from
:class:`~hpcpolicy.policies.base.QueueView`, which the engine fills at every decision (warm-start
jobs included), so the policy sees in ``simulate`` what it saw in training.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from hpcpolicy.artifact import LoadedPolicy, load_policy
from hpcpolicy.env.driver import head_scores
from hpcpolicy.env.observe import Observer
from hpcpolicy.env.prior import prior_kernel, slot_order
from hpcpolicy.env.spaces import CLUSTER_FEATURES, JOB_FEATURES
from hpcpolicy.errors import ArtifactError
from hpcpolicy.policies.base import QueueView
from hpcpolicy.sim.prepare import prepare
from hpcpolicy.sim.types import SimConfig

if TYPE_CHECKING:
    from hpcpolicy.cluster import ClusterSpec
    from hpcpolicy.policies.base import ScoreKernel
    from hpcpolicy.policies.settings import RunSettings
    from hpcpolicy.workload import Workload

__all__ = ["LearnedPolicy", "LearnedScorer"]

F64 = npt.NDArray[np.float64]


class LearnedScorer:
    """A :class:`LearnedPolicy` bound to one run: one head choice per decision."""

    def __init__(self, artifact: LoadedPolicy, observer: Observer,
                 prior: ScoreKernel | None = None) -> None:
        self._artifact = artifact
        self._observer = observer
        self._prior = prior

    def scores(self, view: QueueView) -> F64:
        """The chosen job first (score -1), the others in submit order (or the prior's)."""
        k = self._observer.k
        order = None if self._prior is None else slot_order(self._prior, view.now, view.jobs)
        shown = view.jobs if order is None else view.jobs[order]
        fits = view.fits_now[:k] if order is None else view.fits_now[order[:k]]
        obs = self._observer.observe(view.now, shown, fits, view.free,
                                     view.running_cores, view.running_req_end)
        slot = self._artifact.choose(obs["jobs"], obs["cluster"], obs["mask"])
        if not obs["mask"][slot]:
            raise ArtifactError(f"{self._artifact.path}: the policy scored no waiting job above "
                                "-inf or NaN; the model file is broken, export it again")
        return head_scores(view.jobs.shape[0], slot, order=order)


class LearnedPolicy:
    """A policy directory (``runs/NAME/policy``) usable wherever a heuristic is.

    Args:
        path: The policy directory, its ``manifest.json``, or its ONNX file.

    Raises:
        ArtifactError: What :func:`~hpcpolicy.artifact.load_policy` raises, or a policy trained
            on other features than this version's environment builds.

    Example:
        >>> policy = LearnedPolicy("runs/NAME/policy")                  # doctest: +SKIP
        >>> simulate(workload, cluster, SimConfig(backfill="easy"), policy=policy)  # doctest: +SKIP
    """

    def __init__(self, path: str | Path) -> None:
        self.artifact = load_policy(path)
        self.artifact.check_features(tuple(f.name for f in JOB_FEATURES),
                                     tuple(f.name for f in CLUSTER_FEATURES))
        self.name = str(path)

    @property
    def k(self) -> int:
        """Slots the policy sees (from its manifest)."""
        return self.artifact.k

    def bind(self, workload: Workload, cluster: ClusterSpec, cfg: RunSettings) -> LearnedScorer:
        """A scorer for one run of ``workload`` on ``cluster``; ``cfg`` is the simulator's
        configuration (a learned policy observes the machine as the engine prepares it)."""
        if not isinstance(cfg, SimConfig):
            raise TypeError(f"a learned policy is bound by the simulator, with a SimConfig, "
                            f"not {type(cfg).__name__}")
        prep = prepare(workload, cluster, cfg)
        return LearnedScorer(self.artifact, Observer(workload, prep.capacity, self.k),
                             prior_kernel(self.artifact.slot_order, workload, cluster, cfg))
