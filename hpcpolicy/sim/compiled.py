"""Python side of the compiled engines: array set-up, stepping, results.

:class:`Stepper` runs the compiled engine one decision at a time. A built-in heuristic never
needs it (its formula is evaluated inside the compiled loop, see :func:`run_compiled`); a
learned policy or the RL environment does::

    stepper = Stepper(workload, cluster, cfg)
    while (view := stepper.next_decision()) is not None:
        stepper.decide(my_scores(view))       # one float per waiting job, lowest first
    result = stepper.result()

Each decision is one call into compiled code that runs until the next decision is due, so the
Python cost is per decision, not per event. With the project's semantics a decision is taken
at every scheduling pass and again after each start; with ``compat="rlscheduler"`` it picks
the job that becomes the (fixed) head.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from numba import typeof

from hpcpolicy.cluster import ClusterSpec
from hpcpolicy.errors import ConfigError, SimulationError
from hpcpolicy.policies.base import QueueView, ScoreKernel, running_order
from hpcpolicy.sim import compat, fast
from hpcpolicy.sim.nbstruct import BIG, heap_push, list_insert
from hpcpolicy.sim.prepare import Prepared, prepare
from hpcpolicy.sim.result import assemble
from hpcpolicy.sim.types import BACKFILL_MODES, RunningJobs, SimConfig
from hpcpolicy.workload import JobIds, Workload

__all__ = ["Stepper", "bind", "build", "engine_compiled", "raw_outcome", "run_compiled"]

I64 = npt.NDArray[np.int64]

_VIOLATIONS = {
    fast.VIOL_RESERVATION_LATER: "EASY moved the reservation of head job {job} later (at t={t} "
    "s) although no job ran past its requested walltime",
    fast.VIOL_HEAD_LATE: "EASY started head job {job} at t={t} s, after its reservation at "
    "t={res} s, although no job ran past its requested walltime",
}


def build(prep: Prepared, cfg: SimConfig, kernel: ScoreKernel | None) -> tuple[Any, Any]:
    """The (Jobs, State) arrays of a run; ``kernel`` None means scores come from Python."""
    n, m = prep.n, prep.m
    big = int(BIG)
    ngroups = prep.capacity.shape[0]
    kind = kernel.code if kernel is not None else fast.EXTERNAL
    a = np.ascontiguousarray(kernel.a, dtype=np.float64) if kernel else np.zeros(n)
    # Static policies: the stable order of the scores, rank = position in it.
    by_rank = np.arange(n, dtype=np.int64)
    if kind == fast.STATIC and (np.diff(a) < 0).any():
        by_rank = np.argsort(a, kind="stable").astype(np.int64)
    rank = np.empty(n, dtype=np.int64)
    rank[by_rank] = np.arange(n, dtype=np.int64)
    cores = prep.need[:n, :, 0]
    mincores = np.where(cores >= 0, cores, big).min(axis=1)
    ji = np.stack([prep.submit, prep.dur, prep.length, prep.user, rank, prep.never_fits,
                   mincores, by_rank], dtype=np.int64)
    minc = np.where(cores >= 0, cores, big).min(axis=0).astype(np.int64)
    fs = cfg.fairshare
    ip = np.array([kind, BACKFILL_MODES.index(cfg.backfill), int(cfg.check), n, m,
                   fs.half_life_s, fs.max_age_s, cfg.limits.user_jobs, cfg.limits.user_cores],
                  dtype=np.int64)
    fp = np.array([fs.weight_fairshare, fs.weight_age, float(prep.n_users)])
    jobs = fast.Jobs(ji=ji, need=prep.need, a=a, minc=minc, ip=ip, fp=fp, cap=prep.cap)

    # Arrays a run does not use are allocated with one element.
    total = n + m
    rls = cfg.preset.peer_engine
    static = kind == fast.STATIC and not rls
    by_heap = static and cfg.backfill == "none" and not cfg.limits.active  # fast._by_heap
    leaves = 1 << max(n - 1, 0).bit_length() if static and not by_heap else 1
    waiting = n if by_heap else 1
    listed = 1 if static else n  # the submit-order queue
    plan = total if rls else 2 * total + 1 if cfg.backfill != "none" else 1
    conservative = cfg.backfill == "conservative"
    prof = total + n + 2 if conservative else 1
    sc = np.zeros(fast.N_SCALARS, dtype=np.int64)
    sc[fast.RES_HEAD] = -1
    sc[fast.SH_HEAD] = -1
    sc[fast.FIRST] = n
    sc[fast.PLO] = sc[fast.PHI] = total  # the sorted list grows both ways from the middle
    js = np.zeros((5, total), dtype=np.int64)
    js[fast.START] = -1
    js[fast.GRP] = -1
    state = fast.State(
        sc=sc, js=js, heap=np.zeros((2, 1 if rls else total), np.int64),
        plan=np.zeros((2, plan), np.int64),
        tree=np.full((2, 2 * leaves), big, np.int64), wheap=np.zeros((2, waiting), np.int64),
        queue=np.zeros(listed, np.int64), order=np.zeros(listed, np.int64),
        scores=np.zeros(listed),
        free=prep.free0.copy(), tmp=np.zeros((ngroups + 1, 4), np.int64),
        prof_t=np.zeros(prof, np.int64), prof_f=np.zeros((prof, ngroups, 4), np.int64),
        smin=np.zeros((n + 1 if conservative else 1, ngroups), np.int64),
        fs=np.zeros(prep.n_users + 1),
        urun=np.zeros((2, prep.n_users if cfg.limits.active else 1), np.int64))
    # Jobs running at the start: a finish event each, and their planned ends.
    for i in range(m):
        j = n + i
        js[fast.START, j] = 0
        js[fast.FIN, j] = prep.pre_end[i]
        js[fast.PEND, j] = prep.pre_req_end[i]
        js[fast.GRP, j] = prep.pre_group[i]
        if rls:
            state.plan[1, sc[fast.RLEN]] = j
            sc[fast.RLEN] += 1
            continue
        sc[fast.HLEN] = heap_push(state.heap, sc[fast.HLEN], js[fast.FIN, j], j)
        if cfg.backfill != "none":
            sc[fast.PLO], sc[fast.PHI] = list_insert(state.plan, sc[fast.PLO], sc[fast.PHI],
                                                     js[fast.PEND, j], j)
    return jobs, state


def _functions(cfg: SimConfig) -> tuple[Callable[..., Any], Callable[..., Any],
                                        Callable[..., Any]]:
    """(run_to_end, next_decision, decide) of the engine ``cfg`` selects. The RLScheduler
    engine has one implementation (compiled), used whatever ``cfg.engine`` says."""
    mod: Any = compat if cfg.preset.peer_engine else fast
    return mod.run_to_end, mod.next_decision, mod.decide


def engine_compiled() -> bool:
    """Whether numba has already compiled the engine on this machine (its on-disk cache
    holds the main loop), so a run starts at once; the first run compiles it, for about a
    minute on two cores, and says so (``hpcpolicy.commands._console.note_first_compile``)."""
    cache = getattr(fast.run_to_end, "_cache", None)  # numba's own cache, not a public API
    index = getattr(getattr(cache, "_cache_file", None), "_index_path", None)
    return index is None or Path(index).exists()


def bind(dispatcher: Any, *args: Any) -> Callable[..., Any]:
    """The compiled function of numba ``dispatcher`` for the types of ``args``, to call on
    every decision with arguments of exactly those types (the same objects, usually).

    It skips the dispatcher's per-call type resolution of every argument (for the engine's
    entry points, the two namedtuples' 21 arrays), which costs several microseconds, a large
    share of a short decision. The compiled function does not check its arguments, so it
    must never see others.
    """
    types = tuple(typeof(a) for a in args)  # type: ignore[no-untyped-call]
    compiled: Callable[..., Any] = dispatcher.compile(types)
    return compiled


def raw_outcome(prep: Prepared, state: Any,
                job_ids: npt.NDArray[np.object_] | JobIds) -> dict[str, Any]:
    """Per-job arrays and counters of a finished compiled run.

    Raises:
        SimulationError: the run broke an invariant (under ``check``).
    """
    n = prep.n
    sc = state.sc
    if sc[fast.VIOL]:
        msg = _VIOLATIONS[int(sc[fast.VIOL])].format(job=job_ids[int(sc[fast.VIOL_J])],
                                                     t=int(sc[fast.VIOL_T]),
                                                     res=int(sc[fast.RES_T]))
        raise SimulationError(f"invariant violated: {msg}")
    return {
        "start": state.js[fast.START, :n].copy(), "group": state.js[fast.GRP, :n].copy(),
        "backfilled": state.js[fast.BF, :n].astype(bool),
        "stats": {"events": int(sc[fast.EVENTS]), "passes": int(sc[fast.PASSES]),
                  "decisions": int(sc[fast.DECISIONS]), "started": int(sc[fast.STARTED]),
                  "backfilled": int(sc[fast.BACKFILLED])},
    }


def run_compiled(prep: Prepared, cfg: SimConfig, kernel: ScoreKernel,
                 job_ids: npt.NDArray[np.object_] | JobIds) -> dict[str, Any]:
    """Run a built-in policy to the end inside compiled code."""
    jobs, state = build(prep, cfg, kernel)
    _functions(cfg)[0](jobs, state)
    return raw_outcome(prep, state, job_ids)


class Stepper:
    """The compiled engine, one decision at a time (see the module docstring).

    Example:
        >>> import numpy as np
        >>> from hpcpolicy.cluster import ClusterSpec
        >>> z = np.zeros(3, dtype=np.int64)
        >>> w = Workload(job_id=np.array(["a", "b", "c"], dtype=object), submit=z,
        ...     run_time=np.array([10, 10, 10]), req_walltime=np.array([10, 10, 10]),
        ...     procs=np.array([2, 2, 2]), nodes=z, gpus=z, mem_mib=z,
        ...     user=z.astype(np.int32), partition=z.astype(np.int32), logged_start=z - 1)
        >>> st = Stepper(w, ClusterSpec.homogeneous(4), SimConfig())
        >>> while (view := st.next_decision()) is not None:
        ...     st.decide(-view.jobs.astype(float))          # latest submitted first
        >>> st.result().start.tolist()
        [10, 0, 0]
    """

    def __init__(self, workload: Workload, cluster: ClusterSpec, cfg: SimConfig, *,
                 running: RunningJobs | None = None) -> None:
        self.workload = workload
        self.cfg = cfg
        self.prep = prepare(workload, cluster, cfg, running)
        self.jobs, self.state = build(self.prep, cfg, None)
        _, next_decision, decide = _functions(cfg)
        self.next_raw = bind(next_decision, self.jobs, self.state)
        """``next_raw(jobs, state)``: run to the next decision; the number of waiting jobs."""
        self.decide_raw = bind(decide, self.jobs, self.state)
        """``decide_raw(jobs, state)``: apply the scores in ``state.scores``."""
        self._q = 0

    def next_decision(self) -> QueueView | None:
        """Run to the next decision; its view, or None when every job has run."""
        self._q = int(self.next_raw(self.jobs, self.state))
        if self._q == 0:
            return None
        st = self.state
        jobs = st.queue[st.sc[fast.QH]:st.sc[fast.QT]].copy()
        need = self.prep.need[jobs]
        fits = ((need[:, :, 0] >= 0) & (need <= st.free[None]).all(axis=2)).any(axis=1)
        usage, total = st.fs[:-1], st.fs[-1]
        share = usage / total if total > 0 else np.zeros_like(usage)
        if self.cfg.preset.peer_engine:
            ids = st.plan[1, :st.sc[fast.RLEN]]
        else:
            ids = st.heap[1, :st.sc[fast.HLEN]]
        cores, req_end = running_order(self.prep.need[ids, st.js[fast.GRP, ids], 0],
                                       st.js[fast.PEND, ids])
        return QueueView(now=int(st.sc[fast.NOW]), jobs=jobs, workload=self.workload,
                         free=st.free.copy(), capacity=self.prep.capacity, fits_now=fits,
                         user_share=share, running_cores=cores, running_req_end=req_end)

    def decide(self, scores: npt.ArrayLike) -> None:
        """Apply one float per waiting job of the last view (lowest first)."""
        s = np.asarray(scores, dtype=np.float64)
        if s.shape != (self._q,):
            raise ConfigError(f"a policy returned {s.size} scores for {self._q} waiting jobs")
        if np.isnan(s).any():
            raise ConfigError("a policy returned NaN scores; every waiting job needs a number")
        self.state.scores[:self._q] = s
        self.decide_raw(self.jobs, self.state)

    def outcome(self) -> dict[str, Any]:
        """Raw per-job arrays (see :func:`raw_outcome`)."""
        return raw_outcome(self.prep, self.state, self.workload.job_id)

    def result(self) -> Any:
        """The :class:`~hpcpolicy.sim.types.SimResult` of the finished run."""
        return assemble(self.prep, self.workload, self.outcome(), "fast-stepped")
