"""The decision point: the heuristic proposes, the inspector accepts or passes, the engine runs.

The inspector plugs into every engine through the :class:`~hpcpolicy.policies.base.Policy`
protocol, as a learned job scorer does (:mod:`hpcpolicy.deploy.learned`), rather than through
an engine of its own: at each decision the engine asks the bound scorer for the waiting jobs'
scores, so the inspector runs unchanged in ``simulate``, ``evaluate``, ``whatif`` and
``advise``, under any backfilling, warm starts and compatibility presets, and costs one call
per decision. The deployed heuristic orders the queue; its first ``k`` jobs are the
proposals (:mod:`hpcpolicy.inspector.features`), and the inspector examines them best first:
it accepts one and rejects those before it (SchedInspector's accept/reject, over the top
``k`` of the heuristic's order). The accepted job becomes the head and every other job
follows in the heuristic's order (:func:`~hpcpolicy.env.driver.head_scores`), so backfilling
runs in the heuristic's order too. Accepting the first proposal at every decision schedules
exactly as the bare heuristic does.

Who chooses is a :data:`Chooser`: the trained network of an artifact
(:mod:`hpcpolicy.inspector.artifact`), a teacher while training
(:mod:`hpcpolicy.inspector.train`), or :func:`accept_first`.

Example:
    >>> import numpy as np
    >>> from hpcpolicy.cluster import ClusterSpec
    >>> from hpcpolicy.sim.engine import simulate
    >>> from hpcpolicy.sim.types import SimConfig
    >>> from hpcpolicy.workload import Workload
    >>> z = np.zeros(3, dtype=np.int64)
    >>> w = Workload(job_id=np.array(["a", "b", "c"], dtype=object), submit=z,
    ...     run_time=np.array([10, 10, 10]), req_walltime=np.array([30, 10, 20]),
    ...     procs=np.array([2, 2, 2]), nodes=z, gpus=z, mem_mib=z,
    ...     user=z.astype(np.int32), partition=z.astype(np.int32), logged_start=z - 1)
    >>> run = lambda policy: simulate(w, ClusterSpec.homogeneous(2), SimConfig(),
    ...                               policy=policy).start.tolist()
    >>> run(Inspector("sjf", accept_first, k=2))           # sjf: b, c, a
    [20, 0, 10]
    >>> reject_first = lambda c: min(1, c.count - 1)      # pass on the first proposal
    >>> run(Inspector("sjf", reject_first, k=2))
    [10, 20, 0]
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from hpcpolicy.env.driver import head_scores
from hpcpolicy.errors import ConfigError, SimulationError
from hpcpolicy.inspector.features import RANKERS, Candidates, Featurizer
from hpcpolicy.sim.prepare import prepare
from hpcpolicy.sim.types import SimConfig

if TYPE_CHECKING:
    from hpcpolicy.cluster import ClusterSpec
    from hpcpolicy.policies.base import QueueView
    from hpcpolicy.policies.settings import RunSettings
    from hpcpolicy.workload import Workload

__all__ = ["DEFAULT_K", "Chooser", "Inspector", "InspectorScorer", "accept_first"]

F64 = npt.NDArray[np.float64]

DEFAULT_K = 8
"""Proposals the inspector examines per decision."""

Chooser = Callable[[Candidates], int]
"""Which proposal to accept (its slot: 0 is the heuristic's first choice), from what the
inspector sees of them."""


def accept_first(candidates: Candidates) -> int:
    """Accept the heuristic's first proposal: the bare heuristic."""
    return 0


class InspectorScorer:
    """An :class:`Inspector` bound to one run: one accepted proposal per decision."""

    def __init__(self, featurizer: Featurizer, chooser: Chooser, name: str) -> None:
        self.featurizer, self._chooser, self._name = featurizer, chooser, name

    def scores(self, view: QueueView) -> F64:
        """The accepted proposal first (score -1), the other jobs in the heuristic's order.

        Raises:
            SimulationError: The chooser named a slot that holds no proposal.
        """
        candidates = self.featurizer.candidates(view)
        slot = int(self._chooser(candidates))
        if not 0 <= slot < candidates.count:
            raise SimulationError(f"{self._name}: at t={view.now} s the inspector accepted "
                                  f"proposal {slot} of {candidates.count}; its model is broken, "
                                  "export it again")
        return head_scores(view.jobs.shape[0], slot, order=candidates.order)


class Inspector:
    """A heuristic under an inspector, usable wherever a heuristic is.

    Args:
        heuristic: The deployed heuristic (one of :data:`~hpcpolicy.inspector.features.RANKERS`).
        chooser: Which proposal to accept at each decision.
        k: Proposals examined per decision.
        name: Name shown in reports (default ``inspector(HEURISTIC)``).

    Raises:
        ConfigError: ``heuristic`` cannot propose (fair share, or no heuristic), or ``k`` < 1.
    """

    def __init__(self, heuristic: str, chooser: Chooser, *, k: int = DEFAULT_K,
                 name: str | None = None) -> None:
        if heuristic not in RANKERS:
            raise ConfigError(f"inspector heuristic {heuristic!r} cannot propose jobs; valid: "
                              f"{', '.join(RANKERS)}")
        if k < 1:
            raise ConfigError(f"inspector k {k}: must be >= 1 (proposals per decision)")
        self.heuristic, self.chooser, self.k = heuristic, chooser, k
        self.name = name or f"inspector({heuristic})"

    def bind(self, workload: Workload, cluster: ClusterSpec,
             cfg: RunSettings) -> InspectorScorer:
        """A scorer for one run; ``cfg`` is the simulator's configuration (the proposals'
        features see the machine as the engine prepares it)."""
        if not isinstance(cfg, SimConfig):
            raise TypeError(f"an inspector is bound by the simulator, with a SimConfig, "
                            f"not {type(cfg).__name__}")
        capacity = prepare(workload, cluster, cfg).capacity
        featurizer = Featurizer(self.heuristic, workload, cluster, cfg, capacity, self.k)
        return InspectorScorer(featurizer, self.chooser, self.name)
