"""The compiled engine driven one head choice at a time, on the environment's hot path.

:class:`~hpcpolicy.sim.compiled.Stepper` builds a full :class:`~hpcpolicy.policies.base.QueueView`
at each decision (the fit test of every waiting job, the fair-share table), which costs more
than the compiled step itself. :class:`EngineDriver` wraps a Stepper and reads what the
environment needs straight from its arrays, read-only: the waiting queue, the clock, the free
resources, start times, and the running jobs' cores and *requested* ends. It advances the run
with the same compiled entry points the Stepper uses, so the schedule is the Stepper's (a test
keeps both paths identical). Nothing here reads a job's actual end or run time.

:meth:`EngineDriver.observe` builds a decision's whole observation in one compiled call
(:func:`_observe`), with the very feature code of :class:`~hpcpolicy.env.observe.Observer`;
this costs a quarter of building it from Python, and makes most of an environment step.

This is the one module that knows the compiled engine's array layout
(:mod:`hpcpolicy.sim.fast`).

Example:
    >>> import numpy as np
    >>> from hpcpolicy.cluster import ClusterSpec
    >>> from hpcpolicy.sim.types import SimConfig
    >>> from hpcpolicy.workload import Workload
    >>> z = np.zeros(3, dtype=np.int64)
    >>> w = Workload(job_id=np.array(["a", "b", "c"], dtype=object), submit=z,
    ...     run_time=np.array([10, 10, 10]), req_walltime=np.array([10, 10, 10]),
    ...     procs=np.array([2, 2, 2]), nodes=z, gpus=z, mem_mib=z,
    ...     user=z.astype(np.int32), partition=z.astype(np.int32), logged_start=z - 1)
    >>> d = EngineDriver(w, ClusterSpec.homogeneous(4), SimConfig())
    >>> while d.advance():
    ...     d.choose(len(d.queue()) - 1)                 # always the latest arrival
    >>> d.result().start.tolist()
    [10, 0, 0]
"""

# The kernels are typed by numba when compiled; mypy sees untyped functions.
# mypy: disable-error-code="no-untyped-def, no-untyped-call"

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
from numba import njit

from hpcpolicy.env.observe import fill
from hpcpolicy.env.prior import slot_order
from hpcpolicy.sim import fast
from hpcpolicy.sim.compiled import Stepper, bind
from hpcpolicy.sim.fast import fit_group  # the engine's own fit test

if TYPE_CHECKING:
    from hpcpolicy.cluster import ClusterSpec
    from hpcpolicy.env.observe import Obs, Observer
    from hpcpolicy.policies.base import ScoreKernel
    from hpcpolicy.sim.types import RunningJobs, SimConfig, SimResult
    from hpcpolicy.workload import Workload

__all__ = ["EngineDriver", "head_scores"]

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]


def head_scores(waiting: int, slot: int, out: F64 | None = None,
                order: I64 | None = None) -> F64:
    """Scores that make the job in ``slot`` the head and keep the others in slot order.

    The engine starts the lowest score first and backfills in score order, so this is "the
    chosen job first, then first come, first served" (RLScheduler's backfilling order too), or,
    with a prior's ``order`` (:mod:`hpcpolicy.env.prior`), the chosen job first, then the
    prior's order.

    Args:
        waiting: Number of waiting jobs.
        slot: Index of the chosen job among them, in slot order.
        out: Where to write the scores (its first ``waiting`` entries); a new array if None.
        order: Positions of the waiting jobs in slot order (:func:`~hpcpolicy.env.prior.
            slot_order`); None: submit order.

    Example:
        >>> head_scores(4, 2).tolist()
        [0.0, 1.0, -1.0, 3.0]
        >>> head_scores(4, 0, order=np.array([3, 1, 0, 2])).tolist()
        [2.0, 1.0, 3.0, -1.0]
    """
    scores = np.empty(waiting) if out is None else out[:waiting]
    if order is None:
        scores[:] = np.arange(waiting, dtype=np.float64)
        scores[slot] = -1.0
    else:
        scores[order[:waiting]] = np.arange(waiting, dtype=np.float64)
        scores[order[slot]] = -1.0
    return scores


@njit(cache=True)
def _fits_now(jobs, need, free, out):
    for i in range(jobs.shape[0]):
        out[i] = fit_group(need, free, jobs[i]) >= 0


@njit(cache=True)
def _running(ids, need, grp, pend, cores, req_end):
    for i in range(ids.shape[0]):
        j = ids[i]
        cores[i] = need[j, grp[j], 0]
        req_end[i] = pend[j]


@njit(cache=True)
def _observe(sc, queue, k, need, free, run_ids, run_len, js, ordered, order, static, submit,
             total, wait_col, fits_col, jlog, jdiv, cols, clog, cdiv, jobs, cluster, mask):
    """:func:`~hpcpolicy.env.observe.fill` of the decision the engine state stands at: the
    visible jobs (the first ``k`` waiting, or in a prior's ``order`` when ``ordered``), their
    fit test and the running jobs read from the state's own arrays."""
    waiting = queue[sc[fast.QH]:sc[fast.QT]]
    visible = waiting[order[:min(k, waiting.shape[0])]] if ordered else waiting[:k]
    fits = np.empty(visible.shape[0], np.bool_)
    _fits_now(visible, need, free, fits)
    ids = run_ids[:sc[run_len]]
    cores, req_end = np.empty(ids.shape[0], np.int64), np.empty(ids.shape[0], np.int64)
    _running(ids, need, js[fast.GRP], js[fast.PEND], cores, req_end)
    fill(sc[fast.NOW], visible, waiting.shape[0], fits, free, cores, req_end, static, submit,
         total, wait_col, fits_col, jlog, jdiv, cols, clog, cdiv, jobs, cluster, mask)


class EngineDriver:
    """A :class:`~hpcpolicy.sim.compiled.Stepper` advanced without building QueueViews.

    Args:
        workload: The jobs (a window, usually).
        cluster: The machine.
        cfg: Backfilling, compat and the other engine options (``cfg.policy`` is ignored:
            the caller chooses every head).
        running: Jobs occupying the machine at the start (warm start).
        prior: The bound formula of the heuristic whose order fills the slots
            (:func:`~hpcpolicy.env.prior.prior_kernel`); None: submit order.
    """

    def __init__(self, workload: Workload, cluster: ClusterSpec, cfg: SimConfig, *,
                 running: RunningJobs | None = None, prior: ScoreKernel | None = None) -> None:
        self.stepper = Stepper(workload, cluster, cfg, running=running)
        self.prep = self.stepper.prep
        self._prior = prior
        self._order = np.arange(len(workload), dtype=np.int64)  # slot -> queue position
        # running jobs: the finish heap (fast) or the running list (compat), ids in row 1
        peer = cfg.preset.peer_engine
        self._running_ids = self.stepper.state.plan[1] if peer else self.stepper.state.heap[1]
        self._running_len = fast.RLEN if peer else fast.HLEN
        self._q = 0
        self._observe: Callable[..., None] | None = None

    # -- advancing ------------------------------------------------------------------------
    def advance(self) -> int:
        """Run to the next decision; the number of waiting jobs, or 0 when every job has run."""
        self._q = int(self.stepper.next_raw(self.stepper.jobs, self.stepper.state))
        if self._prior is not None and self._q:
            self._order[:self._q] = slot_order(self._prior, self.now, self.queue())
        return self._q

    def choose(self, slot: int) -> None:
        """Make the waiting job in ``slot`` the head (:func:`head_scores`): the index into
        :meth:`queue`, or into the prior's order of it."""
        head_scores(self._q, slot, self.stepper.state.scores,
                    None if self._prior is None else self._order)
        self.stepper.decide_raw(self.stepper.jobs, self.stepper.state)

    def observe(self, observer: Observer, obs: Obs) -> None:
        """Write the observation of the current decision into ``obs`` (zeros beforehand,
        e.g. :meth:`~hpcpolicy.env.observe.Observer.empty`): what ``observer.observe`` gives
        for the waiting queue, their fit test, the free resources and the running jobs' cores
        and requested ends, in one compiled call. ``observer`` and the types of ``obs`` stay
        the same in an episode."""
        if self._observe is None:
            st = self.stepper.state
            fixed = (st.sc, st.queue, observer.k, self.prep.need, st.free, self._running_ids,
                     self._running_len, st.js, self._prior is not None, self._order,
                     *observer.tables)
            fn = bind(_observe, *fixed, obs["jobs"], obs["cluster"], obs["mask"])
            self._observe = functools.partial(fn, *fixed)
        self._observe(obs["jobs"], obs["cluster"], obs["mask"])

    # -- what a scheduler knows -----------------------------------------------------------
    @property
    def now(self) -> int:
        """Simulated time of the current decision (s since the workload's origin)."""
        return int(self.stepper.state.sc[fast.NOW])

    def queue(self) -> I64:
        """Waiting jobs (workload indices) in submit order; a view, valid until the next step."""
        sc = self.stepper.state.sc
        return self.stepper.state.queue[sc[fast.QH]:sc[fast.QT]]  # type: ignore[no-any-return]

    @property
    def free(self) -> I64:
        """(groups, 4) free cores, GPUs, MiB and nodes now; a view."""
        return self.stepper.state.free  # type: ignore[no-any-return]

    @property
    def capacity(self) -> I64:
        """(groups, 4) totals of the cluster."""
        return self.prep.capacity

    def starts(self) -> I64:
        """Start time of every workload job so far (-1 while waiting); a view."""
        return self.stepper.state.js[fast.START, :self.prep.n]  # type: ignore[no-any-return]

    def groups(self) -> I64:
        """Node group of every workload job so far (-1 while waiting); a view."""
        return self.stepper.state.js[fast.GRP, :self.prep.n]  # type: ignore[no-any-return]

    def result(self) -> SimResult:
        """The :class:`~hpcpolicy.sim.types.SimResult` of the finished run."""
        return self.stepper.result()  # type: ignore[no-any-return]
