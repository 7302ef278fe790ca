"""Raw features of one decision, normalised into the observation of :mod:`hpcpolicy.env.spaces`.

Shared by the environment and by the learned-policy adapter
(:mod:`hpcpolicy.deploy.learned`), so a policy sees in ``simulate`` exactly the inputs it was
trained on. The raw values, by the names :mod:`hpcpolicy.env.spaces` declares:

* per waiting job: ``wait_s = now - submit``; ``req_walltime_s`` the requested walltime the
  workload plans with; ``req_cores_frac`` processors / the cluster's cores;
  ``req_nodes_frac``, ``req_gpus_frac``, ``req_mem_frac`` the requests over the cluster's
  nodes, GPUs and memory (0 where the cluster has none of that resource); ``fits_now`` 1 if
  the job could start on the free resources now (in some node group);
* cluster: free cores, GPUs and memory over the totals; ``queue_length`` every waiting job,
  the invisible ones included; over the running jobs (warm-start ones included), the mean and
  the largest remaining *requested* time (requested end - now, 0 for a job already past its
  request; 0 when nothing runs) and the cores of those whose requested end is within one hour,
  over the cluster's cores.

Visible jobs: the first ``k`` waiting jobs in submit order, i.e. the ``k`` that have waited
longest; when more wait, the later arrivals are not shown (they count in ``queue_length``, can
still be backfilled, and become visible as older jobs start). With a prior heuristic
(:mod:`hpcpolicy.env.prior`) the caller passes the waiting jobs in that heuristic's order
instead, and its best ``k`` are shown.

Only submit-time facts, the clock and the machine's state are read: never a job's actual run
time or end.

Example:
    >>> import numpy as np
    >>> from hpcpolicy.workload import Workload
    >>> z = np.zeros(2, dtype=np.int64)
    >>> w = Workload(job_id=np.array(["a", "b"], dtype=object), submit=np.array([0, 30]),
    ...     run_time=np.array([60, 60]), req_walltime=np.array([3600, 60]),
    ...     procs=np.array([2, 4]), nodes=z, gpus=z, mem_mib=z,
    ...     user=z.astype(np.int32), partition=z.astype(np.int32), logged_start=z - 1)
    >>> capacity = np.array([[4, 0, 0, 4]])
    >>> obs = Observer(w, capacity, k=3).observe(
    ...     60, np.array([0, 1]), np.array([True, False]), capacity,
    ...     np.zeros(0, np.int64), np.zeros(0, np.int64))
    >>> obs["mask"].tolist(), obs["jobs"][:2, 2].tolist()          # req_cores_frac
    ([1, 1, 0], [0.5, 1.0])
"""

# The kernels are typed by numba when compiled; mypy sees untyped functions.
# mypy: disable-error-code="no-untyped-def, no-untyped-call"

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
from numba import njit

from hpcpolicy.env.spaces import CLUSTER_FEATURES, DEFAULT_K, JOB_FEATURES, normalise

if TYPE_CHECKING:
    from hpcpolicy.workload import Workload

__all__ = ["RELEASE_HORIZON_S", "Observer", "fill"]

I64 = npt.NDArray[np.int64]
Obs = dict[str, npt.NDArray[Any]]

RELEASE_HORIZON_S = 3600
"""Horizon of ``cores_released_1h_frac``: requested ends within this many seconds."""

_J = {f.name: i for i, f in enumerate(JOB_FEATURES)}
_C = {f.name: i for i, f in enumerate(CLUSTER_FEATURES)}
_WAIT, _FITS = _J["wait_s"], _J["fits_now"]
_CORES, _GPUS, _MEM, _NODES = range(4)  # the resource axis of capacity/free
_CLUSTER_COLS = np.array([_C[name] for name in (
    "free_cores_frac", "free_gpus_frac", "free_mem_frac", "queue_length", "run_remaining_mean_s",
    "run_remaining_max_s", "cores_released_1h_frac")])
_HORIZON = RELEASE_HORIZON_S


def _share(values: npt.NDArray[Any], total: float) -> npt.NDArray[np.float64]:
    """``values / total``, or zeros when the cluster has none of the resource."""
    v = np.asarray(values, dtype=np.float64)
    return v / total if total > 0 else np.zeros_like(v)


def _transforms(features: tuple[Any, ...]) -> tuple[npt.NDArray[np.bool_],
                                                    npt.NDArray[np.float64]]:
    """Per feature: whether it is log1p-scaled, and the divisor that maps its scale to 1."""
    log = np.array([f.transform == "log1p" for f in features])
    div = np.array([math.log1p(f.scale) if f.transform == "log1p" else f.scale
                    for f in features])
    return log, div


_JOB_LOG, _JOB_DIV = _transforms(JOB_FEATURES)
_CLUSTER_LOG, _CLUSTER_DIV = _transforms(CLUSTER_FEATURES)


@njit(cache=True)
def _norm(x, log, div):
    """:func:`hpcpolicy.env.spaces.normalise` of one value (tests keep both equal)."""
    x = max(x, 0.0)
    y = math.log1p(x) / div if log else x / div
    return min(max(y, 0.0), 1.0)


@njit(cache=True)
def _fill(now, visible, static, submit, fits, wait_col, fits_col, jlog, jdiv, jobs, mask):
    """Rows of the visible jobs: the precomputed columns, their waiting time and fit flag."""
    for i in range(visible.shape[0]):
        j = visible[i]
        for c in range(static.shape[1]):
            jobs[i, c] = static[j, c]
        jobs[i, wait_col] = _norm(float(now - submit[j]), jlog[wait_col], jdiv[wait_col])
        jobs[i, fits_col] = 1.0 if fits[i] else 0.0
        mask[i] = 1


@njit(cache=True)
def _cluster(now, queue_length, free, total, run_cores, run_req_end, cols, clog, cdiv, out):
    """Every cluster feature, normalised into ``out``; ``cols`` gives each one's position."""
    free_sum = free.sum(axis=0)
    left_sum = 0.0
    longest = 0.0
    soon = 0.0
    n = run_cores.shape[0]
    for i in range(n):
        left = max(run_req_end[i] - now, 0)
        left_sum += left
        longest = max(longest, float(left))
        if left <= _HORIZON:
            soon += run_cores[i]
    raw = np.zeros(out.shape[0])
    raw[cols[0]] = free_sum[_CORES] / total[_CORES]
    raw[cols[1]] = free_sum[_GPUS] / total[_GPUS] if total[_GPUS] > 0 else 0.0
    raw[cols[2]] = free_sum[_MEM] / total[_MEM] if total[_MEM] > 0 else 0.0
    raw[cols[3]] = queue_length
    raw[cols[4]] = left_sum / n if n > 0 else 0.0
    raw[cols[5]] = longest
    raw[cols[6]] = soon / total[_CORES]
    for c in range(out.shape[0]):
        out[c] = _norm(raw[c], clog[c], cdiv[c])


@njit(cache=True)
def fill(now, visible, queued, fits, free, run_cores, run_req_end, static, submit, total,
         wait_col, fits_col, jlog, jdiv, cols, clog, cdiv, jobs, cluster, mask):
    """The whole observation into ``jobs``, ``cluster`` and ``mask`` (zeros beforehand).

    The arguments from ``static`` to ``cdiv`` are :attr:`Observer.tables`; the compiled
    engine driver calls this straight from its own kernel (:mod:`hpcpolicy.env.driver`).
    """
    _fill(now, visible, static, submit, fits, wait_col, fits_col, jlog, jdiv, jobs, mask)
    _cluster(now, queued, free, total, run_cores, run_req_end, cols, clog, cdiv, cluster)


class Observer:
    """Builds the observation of each decision for one workload on one machine.

    The submit-time columns of every job are normalised once, here; each decision then only
    fills in the visible jobs' waiting times and fit flags and the cluster features.

    Args:
        workload: The jobs.
        capacity: ``(groups, 4)`` cluster totals (cores, GPUs, MiB, nodes), as the engine
            counts them.
        k: Number of slots.
    """

    def __init__(self, workload: Workload, capacity: I64, k: int = DEFAULT_K) -> None:
        total = np.asarray(capacity, dtype=np.float64).sum(axis=0)
        self.k = k
        raw = np.zeros((len(workload), len(JOB_FEATURES)))
        raw[:, _J["req_walltime_s"]] = workload.req_walltime
        raw[:, _J["req_cores_frac"]] = _share(workload.procs, total[_CORES])
        raw[:, _J["req_nodes_frac"]] = _share(workload.nodes, total[_NODES])
        raw[:, _J["req_gpus_frac"]] = _share(workload.gpus, total[_GPUS])
        raw[:, _J["req_mem_frac"]] = _share(workload.mem_mib, total[_MEM])
        static = normalise(raw, JOB_FEATURES)  # wait_s and fits_now filled per decision
        self.tables = (static, np.asarray(workload.submit, dtype=np.int64), total, _WAIT,
                       _FITS, _JOB_LOG, _JOB_DIV, _CLUSTER_COLS, _CLUSTER_LOG, _CLUSTER_DIV)
        """What :func:`fill` needs besides the decision's own state, in its order."""

    def observe(self, now: int, waiting: I64, fits: npt.NDArray[np.bool_], free: I64,
                running_cores: I64, running_req_end: I64, queued: int | None = None) -> Obs:
        """The observation of one decision.

        Args:
            now: Simulated time.
            waiting: The waiting jobs to show (workload indices), in slot order: usually
                every waiting job in submit order, of which the first ``k`` are shown.
            fits: Whether each of the first ``k`` waiting jobs fits now (at least that many).
            free: ``(groups, 4)`` free resources now.
            running_cores: Cores held by each running job.
            running_req_end: Requested end of each running job (s).
            queued: Jobs waiting in all, when ``waiting`` lists only some of them (default:
                ``len(waiting)``).

        Returns:
            ``{"jobs": float32 [k, Fj], "cluster": float32 [Fc], "mask": int8 [k]}``.
        """
        obs = self.empty()
        fill(now, waiting[:self.k], waiting.shape[0] if queued is None else queued, fits, free,
             running_cores, running_req_end, *self.tables, obs["jobs"], obs["cluster"],
             obs["mask"])
        return obs

    def empty(self) -> Obs:
        """An observation of zeros (no visible job), the arrays :func:`fill` writes into."""
        return {"jobs": np.zeros((self.k, len(JOB_FEATURES)), np.float32),
                "cluster": np.zeros(len(CLUSTER_FEATURES), np.float32),
                "mask": np.zeros(self.k, np.int8)}
