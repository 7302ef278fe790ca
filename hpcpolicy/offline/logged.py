"""The real scheduler's decisions, rebuilt from the log as the environment would show them.

A window of consecutive jobs (as an environment episode) is replayed *as logged*: every job
starts at its logged start time and runs for its logged run time. Each distinct start time of
the window's jobs is a decision point; jobs that started at the same moment become
consecutive steps, in submit order. At each step the observation is built by the
environment's own feature code (:class:`~hpcpolicy.env.observe.Observer`) from the log alone:

* waiting: the window's jobs submitted by then that have not started yet (the oldest ``k``
  are visible, as in the environment);
* free resources and running jobs: every job of the *whole log* running at that moment
  (jobs of earlier windows still hold their cores), placed in the first node group that
  fits them, as the engine places jobs; the same-moment starts already taken count too;
* the action (``action="started"``, the default): the slot of the job that actually
  started;
* the reward: the environment's reward (:class:`~hpcpolicy.env.rewards.RewardMeter`) between
  consecutive decisions.

With ``action="head"`` the action is the job the real scheduler is taken to have put at the
head of its queue, as the environment's action does under backfilling: a job that started
while the oldest waiting job did not fit (in this model of the machine) is read as backfilled
around that oldest job, which the scheduler is taken to have reserved for. That start is
kept as dynamics (counted as ``backfilled``), and the decision at that moment is the oldest
job's slot, 0: once per moment and reserved job (counted as ``reserved``). Any other start is
labelled as under ``started``. This reads the log as a first-come-first-served scheduler with
backfilling would have written it; the real scheduler's priorities are not in the log.

A logged start whose job is not among the ``k`` visible slots (it started while more than
``k`` older jobs waited: backfilling by the real scheduler) is not a decision the policy
could have taken: it is kept as part of the dynamics, like a backfilled job in the
environment (the job leaves the queue and takes its resources before the next decision), and
counted as ``outside``. Windows with a job the log has no start time for are skipped.

Example:
    >>> import numpy as np
    >>> from hpcpolicy.cluster import ClusterSpec
    >>> from hpcpolicy.env.config import EnvConfig
    >>> from hpcpolicy.workload import Workload
    >>> z = np.zeros(3, dtype=np.int64)
    >>> w = Workload(job_id=np.array(["a", "b", "c"], dtype=object), submit=z,
    ...     run_time=np.array([10, 10, 10]), req_walltime=np.array([10, 10, 10]),
    ...     procs=np.array([4, 4, 4]), nodes=z, gpus=z, mem_mib=z,
    ...     user=z.astype(np.int32), partition=z.astype(np.int32),
    ...     logged_start=np.array([20, 0, 10]))
    >>> log = LoggedDecisions(w, ClusterSpec.homogeneous(4), EnvConfig(k=2, window_size=3))
    >>> ep = log.episode(0)
    >>> ep.actions.tolist(), ep.facts["outside"]           # b (slot 1), then c (slot 1), a
    ([1, 1, 0], 0.0)
"""

# The kernel is typed by numba when compiled; mypy sees an untyped function.
# mypy: disable-error-code="no-untyped-def, no-untyped-call"

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
from numba import njit

from hpcpolicy.env.observe import Observer
from hpcpolicy.env.rewards import RewardMeter
from hpcpolicy.errors import ConfigError
from hpcpolicy.offline.layout import Episode, obs_dim, pack
from hpcpolicy.sim.fast import fit_group  # the engine's own fit test, as the environment uses it
from hpcpolicy.sim.prepare import prepare

if TYPE_CHECKING:
    from hpcpolicy.cluster import ClusterSpec
    from hpcpolicy.env.config import EnvConfig
    from hpcpolicy.workload import Workload

__all__ = ["LOGGED", "LOGGED_ACTIONS", "LoggedDecisions"]

LOGGED = "logged"
"""Source name of logged episodes."""
LOGGED_ACTIONS = ("started", "head")
"""How a logged start becomes an action (see the module docstring)."""

I64 = npt.NDArray[np.int64]


@njit(cache=True)
def _place(need, free, j):
    """The group job ``j`` runs in: the first that fits now, else the first that can hold it
    at all (a logged start need not fit our model of the machine), else -1."""
    g = fit_group(need, free, j)
    if g >= 0:
        return g
    for h in range(need.shape[1]):
        if need[j, h, 0] >= 0:
            return h
    return -1


@njit(cache=True)
def _hold(need, j, end_t, req_end_t, free, run_end, run_req, run_grp, run_need, nrun):
    """Job ``j`` starts holding its resources until ``end_t`` (planned ``req_end_t``) in the
    group :func:`_place` gives, appended to the running jobs; returns their new count (the
    same when no group can hold it)."""
    g = _place(need, free, j)
    if g < 0:
        return nrun
    run_end[nrun], run_req[nrun], run_grp[nrun] = end_t, req_end_t, g
    for r in range(4):
        run_need[nrun, r] = need[j, g, r]
        free[g, r] -= need[j, g, r]
    return nrun + 1


@njit(cache=True)
def _room(a, used, more):
    """``a``, or a copy twice as large (or more) when ``used + more`` entries do not fit."""
    if used + more <= a.shape[0]:
        return a
    b = np.empty(max(2 * a.shape[0], used + more), a.dtype)
    b[:used] = a[:used]
    return b


@njit(cache=True)
def _sweep(k, order, submit, start, end, req_end, need, bg_start, bg_end, bg_req_end,
           bg_need, capacity):
    """Replay a window as logged; the state before each of its starts.

    Window jobs (local indices) start in ``order``; background jobs (the rest of the log,
    sorted by start) hold resources from start to end. Returns, per start in ``order``:
    its slot among the waiting jobs, the free resources, the fit flags of the first ``k``
    waiting jobs, and the waiting jobs and running jobs (cores, requested end) as flat
    arrays with offsets.
    """
    w = order.shape[0]
    groups = capacity.shape[0]
    free = capacity.copy()
    run_end = np.empty(w + bg_start.shape[0], np.int64)
    run_req = np.empty_like(run_end)
    run_grp = np.empty_like(run_end)
    run_need = np.empty((run_end.shape[0], 4), np.int64)
    nrun = 0
    started = np.zeros(w, np.bool_)
    slot = np.empty(w, np.int64)
    frees = np.empty((w, groups, 4), np.int64)
    fits = np.zeros((w, k), np.bool_)
    q_off = np.zeros(w + 1, np.int64)
    r_off = np.zeros(w + 1, np.int64)
    queue = np.empty(4 * w, np.int64)
    r_cores = np.empty(4 * w, np.int64)
    r_req = np.empty_like(r_cores)
    b = 0
    for step in range(w):
        j = order[step]
        t = start[j]
        # ends up to t free their resources (a finish comes before a start at equal times)
        i = 0
        while i < nrun:
            if run_end[i] <= t:
                for r in range(4):
                    free[run_grp[i], r] += run_need[i, r]
                nrun -= 1
                run_end[i], run_req[i], run_grp[i] = run_end[nrun], run_req[nrun], run_grp[nrun]
                for r in range(4):
                    run_need[i, r] = run_need[nrun, r]
            else:
                i += 1
        # background starts up to t (those already over by t leave no trace)
        while b < bg_start.shape[0] and bg_start[b] <= t:
            if bg_end[b] > t:
                nrun = _hold(bg_need, b, bg_end[b], bg_req_end[b], free, run_end, run_req,
                             run_grp, run_need, nrun)
            b += 1
        # the state before this start
        q = q_off[step]
        queue = _room(queue, q, w)
        s = -1
        for i in range(w):
            if not started[i] and submit[i] <= t:
                if i == j:
                    s = q - q_off[step]
                if q - q_off[step] < k:
                    fits[step, q - q_off[step]] = fit_group(need, free, i) >= 0
                queue[q] = i
                q += 1
        q_off[step + 1] = q
        slot[step] = s
        frees[step] = free
        ro = r_off[step]
        r_cores = _room(r_cores, ro, nrun)
        r_req = _room(r_req, ro, nrun)
        for i in range(nrun):
            r_cores[ro + i] = run_need[i, 0]
            r_req[ro + i] = run_req[i]
        r_off[step + 1] = ro + nrun
        # the start itself
        started[j] = True
        if end[j] > t:
            nrun = _hold(need, j, end[j], req_end[j], free, run_end, run_req, run_grp, run_need,
                         nrun)
    return slot, frees, fits, queue, q_off, r_cores, r_req, r_off


def _head_decisions(slot: I64, oldest_fits: npt.NDArray[np.bool_], oldest: I64, t: I64,
                    k: int) -> tuple[I64, I64, int, int]:
    """Under ``action="head"``: the steps that are decisions, their actions, how many
    starts were read as backfilled around a reserved oldest job, and how many decisions
    reserve one.

    Per start (in order): its slot, whether the oldest waiting job fitted then, that job
    and the time."""
    steps: list[int] = []
    actions: list[int] = []
    backfilled = reservations = 0
    last = (-1, -1)  # (time, job) of the last reservation
    for step in range(slot.shape[0]):
        if slot[step] > 0 and not oldest_fits[step]:
            backfilled += 1
            if last != (t[step], oldest[step]):
                last = (int(t[step]), int(oldest[step]))
                reservations += 1
                steps.append(step)
                actions.append(0)
        elif slot[step] < k:
            steps.append(step)
            actions.append(int(slot[step]))
    return np.array(steps, np.int64), np.array(actions, np.int64), backfilled, reservations


class LoggedDecisions:
    """The logged decisions of a workload's windows (see the module docstring).

    Args:
        workload: The whole workload (its ``logged_start`` column is read).
        cluster: The machine.
        env: The environment the dataset is for: ``k``, ``window_size``, ``reward`` and the
            engine options (``kill_at_limit``, ``exclusive_nodes``) that shape the demands.
        action: How a start becomes an action: ``started`` or ``head`` (see the module
            docstring).

    Raises:
        ConfigError: The log records no start time at all; an unknown ``action``.
    """

    def __init__(self, workload: Workload, cluster: ClusterSpec, env: EnvConfig,
                 action: str = "started") -> None:
        if action not in LOGGED_ACTIONS:
            raise ConfigError(f"logged action {action!r}: use one of {', '.join(LOGGED_ACTIONS)}")
        self.action = action
        logged = workload.logged_start >= 0
        if not logged.any():
            raise ConfigError("the job table records no start times (start_time / wait_time_s "
                              "are empty), so the real scheduler's decisions cannot be rebuilt; "
                              "use --source heuristics or random")
        self.workload, self.cluster, self.env = workload, cluster, env
        self._sim = env.sim_config()
        prep = prepare(workload, cluster, self._sim)
        self._need = prep.need[:prep.n]
        self._capacity = prep.capacity
        self._start = np.where(logged, np.maximum(workload.logged_start, workload.submit), -1)
        self._end = np.where(logged, self._start + prep.dur, -1)
        self._req_end = self._start + prep.length
        self._by_start = np.flatnonzero(logged)[np.argsort(self._start[logged], kind="stable")]
        self._sorted = self._start[self._by_start]
        self._longest = int(prep.dur.max(initial=0))
        self._weights = env.reward_weights

    def episode(self, window_start: int) -> Episode | None:
        """The logged episode of the window starting at job ``window_start``; None when a job
        of the window has no logged start.

        ``facts``: ``starts`` (window jobs), ``inside`` (started from a visible slot: a
        decision, unless backfilled), ``outside`` (started from beyond the ``k`` visible
        slots), and under ``action="head"`` ``backfilled`` (starts read as backfilling, kept
        as dynamics) and ``reserved`` (decisions that reserve the oldest job).
        """
        k, size = self.env.k, self.env.window_size
        idx = np.arange(window_start, window_start + size)
        start = self._start[idx]
        if (start < 0).any():
            return None
        order = np.lexsort((idx, start)).astype(np.int64)
        lo = np.searchsorted(self._sorted, start.min() - self._longest, side="left")
        hi = np.searchsorted(self._sorted, start.max(), side="right")
        bg = self._by_start[lo:hi]
        bg = bg[((bg < window_start) | (bg >= window_start + size))
                & (self._end[bg] > start.min())]
        sub = self.workload.submit[idx]
        slot, frees, fits, queue, q_off, r_cores, r_req, r_off = _sweep(
            k, order, sub, start, self._end[idx], self._req_end[idx], self._need[idx],
            self._start[bg], self._end[bg], self._req_end[bg], self._need[bg], self._capacity)
        window = self.workload.take(idx)
        prep = prepare(window, self.cluster, self._sim)
        observer = Observer(window, prep.capacity, k)
        meter = RewardMeter(self._weights, prep, self.cluster.total_cores)
        starts = np.full(size, -1, np.int64)
        groups = np.full(size, -1, np.int64)
        placed = np.argmax(prep.need[:size, :, 0] >= 0, axis=1)  # for the utilisation term
        facts = {"starts": float(size), "inside": float((slot < k).sum()),
                 "outside": float((slot >= k).sum())}
        if self.action == "head":
            oldest = queue[q_off[:-1]]
            decided, actions, backfilled, reserved = _head_decisions(
                slot, fits[:, 0], oldest, start[order], k)
            facts["backfilled"], facts["reserved"] = float(backfilled), float(reserved)
        else:
            decided = np.flatnonzero(slot < k)
            actions = slot[decided]
        observations = np.empty((decided.shape[0], obs_dim(k)), np.float32)
        rewards = np.empty(decided.shape[0], np.float32)
        applied = 0  # starts (in ``order``) already in ``starts``
        for i, step in enumerate(decided):
            before = order[applied:step]  # starts since the last decision (hidden ones too)
            starts[before], groups[before] = start[before], placed[before]
            applied = int(step)
            t = int(start[order[step]])
            if i == 0:
                meter.start(t, starts, groups)
            else:
                rewards[i - 1] = meter.step(t, starts, groups)
            waiting = queue[q_off[step]:q_off[step + 1]]
            obs = observer.observe(t, waiting, fits[step, :min(k, waiting.shape[0])],
                                   frees[step], r_cores[r_off[step]:r_off[step + 1]],
                                   r_req[r_off[step]:r_off[step + 1]])
            pack(obs, observations[i])
        rest = order[applied:]
        starts[rest], groups[rest] = start[rest], placed[rest]
        if decided.shape[0]:
            rewards[-1] = meter.finish(starts, groups)
        return Episode(LOGGED, window_start, observations, actions, rewards, True, facts)
