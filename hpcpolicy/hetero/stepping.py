"""The GPU engine, paused at every placement decision: the environment's view of a replay.

:class:`~hpcpolicy.sim.gpu_engine.GpuEngine` calls its placer from deep inside its event loop
and has no stepping interface, so :class:`EngineRun` runs the unchanged engine in a worker
thread whose placer hands each :class:`~hpcpolicy.gpu.placer.PlacementView` to the caller
and waits for the answer. Exactly one of the two threads runs at any time (a strict
hand-over through two one-slot queues), so a replay is as deterministic as a plain
``simulate``: same choices, same schedule.

Example:
    Two 4-GPU jobs on one node of each of two GPU types, each placed on its first candidate:

    >>> import numpy as np
    >>> from hpcpolicy.cluster import NodeGroup
    >>> z = np.zeros(2, dtype=np.int64)
    >>> w = Workload(job_id=np.array(["a", "b"], dtype=object), submit=z,
    ...     run_time=np.array([100, 100]), req_walltime=np.array([100, 100]),
    ...     procs=np.array([1, 1]), nodes=z, gpus=np.array([4, 4]), mem_mib=z,
    ...     user=z.astype(np.int32), partition=z.astype(np.int32), logged_start=z - 1)
    >>> spec = ClusterSpec((NodeGroup("old", 1, 8, gpus=4, gpu_type="v100"),
    ...                     NodeGroup("new", 1, 8, gpus=4, gpu_type="a100")))
    >>> run = EngineRun(w, spec, SimConfig(allocator="first-available"))
    >>> while (view := run.next()) is not None:
    ...     run.answer(0)
    >>> run.outcome["start"].tolist()
    [0, 0]
"""

from __future__ import annotations

import queue
import threading
from dataclasses import dataclass
from typing import Any

from hpcpolicy.cluster import ClusterSpec
from hpcpolicy.gpu.placer import PlacementView
from hpcpolicy.policies.heuristics import get_policy
from hpcpolicy.sim.gpu_engine import GpuEngine
from hpcpolicy.sim.types import SimConfig
from hpcpolicy.workload import Workload

__all__ = ["EngineRun"]


class _Stop(Exception):
    """Raised inside the engine thread to abandon a replay."""


@dataclass(frozen=True)
class _Ended:
    outcome: dict[str, Any] | None
    error: BaseException | None


class EngineRun:
    """One FCFS replay on the node-level GPU engine whose placements the caller decides.

    Args:
        workload: The jobs.
        cluster: The machine.
        cfg: Backfilling and the other engine options (the queue policy is FCFS).
    """

    def __init__(self, workload: Workload, cluster: ClusterSpec, cfg: SimConfig) -> None:
        scorer = get_policy("fcfs").bind(workload, cluster, cfg)
        self.engine = GpuEngine(workload, cluster, cfg, scorer, placer=self)
        self.outcome: dict[str, Any] | None = None
        self._views: queue.Queue[PlacementView | _Ended] = queue.Queue(maxsize=1)
        self._answers: queue.Queue[int | None] = queue.Queue(maxsize=1)
        self._thread = threading.Thread(target=self._replay, name="hpcpolicy-gpu-engine",
                                        daemon=True)
        self._thread.start()

    # -- engine thread ------------------------------------------------------------------------
    def choose(self, view: PlacementView) -> int:
        """The placer protocol: hand ``view`` over and wait for the caller's answer."""
        self._views.put(view)
        answer = self._answers.get()
        if answer is None:
            raise _Stop
        return answer

    def _replay(self) -> None:
        try:
            outcome = self.engine.run()
        except _Stop:
            return
        except BaseException as exc:  # handed to the caller's thread, re-raised there
            self._views.put(_Ended(None, exc))
            return
        self._views.put(_Ended(outcome, None))

    # -- caller's thread ----------------------------------------------------------------------
    def next(self) -> PlacementView | None:
        """The next decision, or None when the replay has ended (then :attr:`outcome` is set).

        Raises:
            Exception: What the engine raised.
        """
        item = self._views.get()
        if isinstance(item, PlacementView):
            return item
        self._thread.join()
        if item.error is not None:
            raise item.error
        self.outcome = item.outcome
        return None

    def answer(self, k: int) -> None:
        """Place the job of the last decision as its candidate ``k``."""
        self._answers.put(k)

    def close(self) -> None:
        """Abandon the replay (if it is still waiting for an answer) and end the thread."""
        if self._thread.is_alive():
            self._answers.put(None)
            self._thread.join()
