"""The shared reward of the selector and the allocator.

Both agents get the same reward: the change, between two consecutive decisions (of either
agent), of a *potential* that at the window's last end equals

    ``gpu_util_weight x GPU utilisation - bsld_weight x mean bounded slowdown``

of the window, with the metrics as :mod:`hpcpolicy.sim.metrics` and
:func:`hpcpolicy.sim.gpu_metrics.gpu_summary` define them. The terms are the single-agent
environment's potentials (:mod:`hpcpolicy.env.rewards`, computed by the same kernel), read
from the GPU engine's state:

* bounded slowdown: a waiting job adds ``elapsed / max(run, 10 s)`` for each second it
  waits (``run`` its logged run time); when it starts, its term becomes its bounded slowdown
  with the run time it gets where it is placed (faster or slower GPUs, spread penalty).
  Divided by the window's jobs.
* GPU utilisation, as projected from the jobs started so far: their GPU-thousandth-seconds
  (each for its whole run where it was placed) / (the cluster's GPU thousandths x (their
  latest end, or now if later, minus the first submit)); at the last end it is the window's
  ``gpu_utilization``. Projecting, rather than counting the time held so far, charges a
  placement at once for both of its effects on the metric: the GPU time it holds, and how
  far its end pushes out the span (a long job on slow GPUs ends the window late).

  With ``util_span = "queue"`` the projected span also reaches to now plus the logged run
  time of each job that waits. The window cannot end sooner, so a long job that waits lowers
  the potential for every second it waits, and starting it is charged only for what its
  placement changes (GPU speed, spreading). With the default ``"started"``, the span grows
  only when the long job starts: a choice that ends the window sooner then looks like a large
  loss, and discounting makes putting it off look better still.

So each decision is charged at once for what it costs (a job started, a placement's run
time), and an episode's rewards add up to the weighted metrics minus their value at the
first decision (0 unless decisions with a single option, which are not asked, came first).

Example:
    See :class:`SharedReward`.
"""

# mypy: disable-error-code="no-untyped-call"
# (the kernel is typed by numba when compiled; mypy sees an untyped function)

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from hpcpolicy.env.rewards import sums_at  # the single-agent reward's kernel, reused as is
from hpcpolicy.sim.metrics import TAU_S

if TYPE_CHECKING:
    from hpcpolicy.sim.gpu_engine import GpuEngine

__all__ = ["SharedReward"]


class SharedReward:
    """Potentials of one episode, read from a running :class:`GpuEngine`.

    Args:
        engine: The episode's engine (its start, duration and pool arrays are read live).
        bsld_weight: Weight of minus the mean bounded slowdown.
        gpu_util_weight: Weight of the GPU utilisation.
        util_span: ``"started"`` or ``"queue"``: which jobs' ends the projected span reaches
            to (see the module docstring).

    Example:
        >>> import numpy as np
        >>> from hpcpolicy.cluster import ClusterSpec, NodeGroup
        >>> from hpcpolicy.policies import get_policy
        >>> from hpcpolicy.sim import SimConfig
        >>> from hpcpolicy.sim.gpu_engine import GpuEngine
        >>> from hpcpolicy.workload import Workload
        >>> z = np.zeros(2, dtype=np.int64)
        >>> w = Workload(job_id=np.array(["a", "b"], dtype=object), submit=z,
        ...     run_time=np.array([100, 100]), req_walltime=np.array([100, 100]),
        ...     procs=np.array([1, 1]), nodes=z, gpus=np.array([4, 4]), mem_mib=z,
        ...     user=z.astype(np.int32), partition=z.astype(np.int32), logged_start=z - 1)
        >>> spec = ClusterSpec((NodeGroup("g", 1, 8, gpus=4, gpu_type="a100"),))
        >>> cfg = SimConfig(allocator="first-available")
        >>> eng = GpuEngine(w, spec, cfg, get_policy("fcfs").bind(w, spec, cfg))
        >>> meter = SharedReward(eng, 1.0, 1.0)
        >>> _ = eng.run()
        >>> meter.terms(meter.last_end())        # mean bsld 1.5, GPUs busy all 200 s
        (1.5, 1.0)
    """

    def __init__(self, engine: GpuEngine, bsld_weight: float, gpu_util_weight: float,
                 util_span: str = "started") -> None:
        p = engine.p
        self._engine = engine
        self._weights = (bsld_weight, gpu_util_weight)
        self._gpu = np.ascontiguousarray(p.need[:p.n, :, 1])  # GPU thousandths in each pool
        runnable = ~p.never_fits
        self._queued = runnable if util_span == "queue" else None
        self._jobs = max(int(runnable.sum()), 1)
        self._t0 = int(p.submit[runnable].min()) if runnable.any() else 0
        self._capacity = float(engine.topo.pool_capacity[:, 1].sum())
        self._sum = np.zeros(4)
        self._last: float | None = None

    def terms(self, t: int) -> tuple[float, float]:
        """(mean bounded slowdown so far, projected GPU utilisation) at time ``t``."""
        e, p = self._engine, self._engine.p
        slow_div = np.maximum(e.dur, TAU_S).astype(np.float64)
        sums_at(t, p.submit, p.never_fits, e.start, e.dur, slow_div, e.group, self._gpu, self._sum)
        started = np.flatnonzero(e.start >= 0)
        held = float((self._gpu[started, e.group[started]] * e.dur[started]).sum())
        end = max(t, int((e.start + e.dur)[started].max(initial=t)))
        if self._queued is not None:  # a waiting job's dur is still its logged run time
            waiting = self._queued & (e.start < 0) & (p.submit <= t)
            end = max(end, t + int(e.dur[waiting].max(initial=0)))
        span = end - self._t0
        util = held / (self._capacity * span) if span > 0 and self._capacity else 0.0
        return float(self._sum[0]) / self._jobs, util

    def potential(self, t: int) -> float:
        """The weighted potential at time ``t``."""
        bsld, util = self.terms(t)
        return self._weights[1] * util - self._weights[0] * bsld

    def mark(self, t: int) -> float | None:
        """The reward earned since the previous mark (None at the first), now at ``t``."""
        now = self.potential(t)
        reward = None if self._last is None else now - self._last
        self._last = now
        return reward

    def last_end(self) -> int:
        """The last end of the finished run (where the potentials equal the metrics)."""
        e = self._engine
        started = e.start >= 0
        return int((e.start + e.dur)[started].max()) if started.any() else self._t0
