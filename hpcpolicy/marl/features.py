"""What each agent sees: the selector's job slots and the allocator's candidate placements.

**Selector.** The single-agent observation of :mod:`hpcpolicy.env.spaces`, built by the same
code (:class:`hpcpolicy.env.observe.Observer`): ``k`` waiting jobs (7 features each) and 7
cluster features, with GPUs counted in whole GPUs (the GPU engine counts thousandths). Which
jobs fill the slots, and which of them may be chosen, is the ``visible`` rule
(:data:`VISIBLE`):

* ``oldest``: the oldest ``k`` waiting jobs. Only those that fit on the free resources now
  may be chosen, so the chosen job starts at once; when none of them fits there is nothing to
  start and no choice to make (see :class:`SelectorObserver`).
* ``fitting``: the oldest ``k`` of the jobs that fit now, any of which may be chosen.
* ``shortest``: the ``k`` waiting jobs with the shortest requested walltimes, any of which
  may be chosen, as in the single-agent environment: a chosen job that does not fit becomes
  the head and waits for room (backfilling, if any, runs around it). So the selector can hold
  the machine for a short job, as SJF does, which the other two rules cannot express.
* ``extremes``: as ``shortest``, but the last slot shows the waiting job with the longest
  requested walltime (the oldest of equals) instead of the ``k``-th shortest. The longest job
  sets when a busy window ends, and with it the window's GPU utilisation; under ``shortest``
  the selector never sees it.

**Allocator.** One row per candidate placement of the job about to start
(:meth:`hpcpolicy.sim.gpu_engine.GpuEngine.candidates`: every pool whose totals hold the job x
each node-level heuristic's placement there) with :data:`CANDIDATE_FEATURES`, and one
context vector, :data:`CONTEXT_FEATURES`, about the job and the cluster. Every candidate is
valid. Declared with :class:`~hpcpolicy.env.spaces.Feature` and normalised by
:func:`~hpcpolicy.env.spaces.normalise`, so the policy manifest records them the same way.

Only submit-time facts, the clock and the cluster's state are read, never a run time.

Example:
    >>> [f.name for f in CANDIDATE_FEATURES][:3]
    ['run_factor', 'est_run_s', 'pool_speed']
"""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from hpcpolicy.env.observe import Observer
from hpcpolicy.env.spaces import OBS_KEYS, Feature, normalise
from hpcpolicy.gpu.placement import NODE_ALLOCATORS
from hpcpolicy.gpu.topology import MILLI

if TYPE_CHECKING:
    from hpcpolicy.gpu.placer import PlacementView
    from hpcpolicy.gpu.topology import Topology
    from hpcpolicy.policies.base import QueueView
    from hpcpolicy.workload import Workload

__all__ = ["CANDIDATE_FEATURES", "CONTEXT_FEATURES", "VISIBLE", "AllocatorObserver",
           "SelectorObserver", "allocator_spec", "max_candidates"]

Obs = dict[str, npt.NDArray[Any]]
I64 = npt.NDArray[np.int64]

_DAY = 86_400.0

VISIBLE = {
    "oldest": "the oldest k waiting jobs; when none of them fits, nothing starts ahead of "
              "the oldest",
    "fitting": "the oldest k of the waiting jobs that fit now; any job that fits can start",
    "shortest": "the k waiting jobs with the shortest requested walltimes; a chosen job that "
                "does not fit waits for room, and nothing starts ahead of it",
    "extremes": "the k-1 waiting jobs with the shortest requested walltimes and the one with "
                "the longest; chosen as under shortest",
}
"""Which waiting jobs the selector's slots show, by rule name (the module docstring says
which of them may be chosen)."""

_ANY_CHOSEN = ("shortest", "extremes")
"""The rules under which any shown job may be chosen, whether it fits now or not."""

CANDIDATE_FEATURES: tuple[Feature, ...] = (
    Feature("run_factor", "fraction", "linear", 4.0,
            "Run-time factor of the job in this pool from GPU speeds (1 = as fast as logged)."),
    Feature("est_run_s", "s", "log1p", 30 * _DAY,
            "Requested walltime times the run-time factor."),
    Feature("pool_speed", "fraction", "linear", 1.0,
            "Speed of the pool's GPU type over the fastest type of the cluster."),
    Feature("pool_gpus_free_after", "fraction", "linear", 1.0,
            "Free GPUs of the pool after this placement / the pool's GPUs."),
    Feature("pool_cores_free_after", "fraction", "linear", 1.0,
            "Free cores of the pool after this placement / the pool's cores."),
    Feature("nodes", "count", "log1p", 64.0, "Nodes the job's GPUs would be on."),
    Feature("racks", "count", "log1p", 16.0, "Racks those nodes are in."),
    Feature("distance", "fraction", "linear", 1.0,
            "Largest distance between two of its GPUs / the cross-rack distance."),
    Feature("nodes_left_free", "fraction", "linear", 1.0,
            "GPUs left free on those nodes after the placement / their GPUs (0 = packed)."),
    Feature("nodes_broken", "fraction", "linear", 1.0,
            "Share of those nodes that were wholly free before (whole nodes it breaks up)."),
    *(Feature(f"by_{name.replace('-', '_')}", "bool", "linear", 1.0,
              f"1 if the {name} heuristic proposed this placement (the first to, when "
              "several did).") for name in NODE_ALLOCATORS),
)
"""Per-candidate features, in column order of the allocator's ``jobs`` input."""

CONTEXT_FEATURES: tuple[Feature, ...] = (
    Feature("wait_s", "s", "log1p", 10 * _DAY, "Time the job has waited so far."),
    Feature("req_walltime_s", "s", "log1p", 30 * _DAY, "The job's requested walltime."),
    Feature("gpus", "count", "log1p", 64.0, "GPUs the job uses."),
    Feature("gpu_share", "fraction", "linear", 1.0,
            "Share of each GPU the job uses (1 = whole GPUs)."),
    Feature("cores_frac", "fraction", "linear", 1.0, "The job's cores / the cluster's cores."),
    Feature("free_gpus_frac", "fraction", "linear", 1.0, "Free GPUs / the cluster's GPUs."),
    Feature("free_cores_frac", "fraction", "linear", 1.0, "Free cores / the cluster's cores."),
    Feature("pools_offered", "fraction", "linear", 1.0,
            "Pools among the candidates / pools of the cluster."),
)
"""Features of the job and the cluster, in order of the allocator's ``cluster`` input."""

_HEURISTIC_COLUMN = {name: [f.name for f in CANDIDATE_FEATURES].index(
    f"by_{name.replace('-', '_')}") for name in NODE_ALLOCATORS}


def max_candidates(topology: Topology) -> int:
    """Most candidates one job can have: pools x node-level heuristics."""
    return len(topology.pool_names) * len(NODE_ALLOCATORS)


def allocator_spec(k: int) -> dict[str, Any]:
    """The allocator's observation contract as recorded in its manifest (``k``: the most
    candidates it was trained with; it scores any number).

    Example:
        >>> allocator_spec(9)["job_features"][0]["name"]
        'run_factor'
    """
    return {"k": k, "inputs": list(OBS_KEYS),
            "job_features": [asdict(f) for f in CANDIDATE_FEATURES],
            "cluster_features": [asdict(f) for f in CONTEXT_FEATURES]}


class SelectorObserver:
    """The selector's observation at one scheduling decision of the GPU engine.

    Args:
        workload: The jobs.
        topology: The cluster's pools (their totals are the engine's capacity).
        k: Slots.
        visible: Which waiting jobs fill the slots (a key of :data:`VISIBLE`).
    """

    def __init__(self, workload: Workload, topology: Topology, k: int,
                 visible: str = "oldest") -> None:
        if visible not in VISIBLE:
            raise ValueError(f"visible rule {visible!r} is not one of {', '.join(VISIBLE)}")
        self.k = k
        self.visible = visible
        self._observer = Observer(workload, self._whole_gpus(topology.pool_capacity), k)
        self._req = np.asarray(workload.req_walltime, np.float64)

    @staticmethod
    def _whole_gpus(resources: I64) -> I64:
        """(pools, 4) totals or free resources with GPUs in whole GPUs, not thousandths."""
        out = resources.copy()
        out[:, 1] //= MILLI
        return out

    def _shortest(self, jobs: I64) -> I64:
        """Positions in ``jobs`` of the shown jobs, shortest request first (under
        ``extremes`` the last slot is the longest request's)."""
        order = np.argsort(self._req[jobs], kind="stable")
        if self.visible == "shortest" or order.shape[0] <= self.k:
            return order[:self.k]
        req = self._req[jobs[order]]
        longest = max(self.k - 1, int(np.searchsorted(req, req[-1])))  # the oldest of equals
        return np.concatenate([order[:self.k - 1], order[longest:longest + 1]])

    def observe(self, view: QueueView) -> tuple[Obs, I64] | None:
        """The observation (mask = the shown jobs that may be chosen) and each slot's
        position in ``view.jobs``; None when none may be."""
        if self.visible == "fitting":
            shown = np.flatnonzero(view.fits_now)[:self.k]
        elif self.visible in _ANY_CHOSEN:
            shown = self._shortest(view.jobs)
        else:
            shown = np.arange(min(self.k, view.jobs.shape[0]))
        fits = view.fits_now[shown]
        choosable = np.ones_like(fits) if self.visible in _ANY_CHOSEN else fits
        if not choosable.any():
            return None
        obs = self._observer.observe(view.now, view.jobs[shown], fits,
                                     self._whole_gpus(view.free), view.running_cores,
                                     view.running_req_end, queued=view.jobs.shape[0])
        mask = np.zeros(self.k, np.bool_)
        mask[:shown.shape[0]] = choosable
        obs["mask"] = mask
        return obs, shown


class AllocatorObserver:
    """The allocator's observation when one job is about to start.

    Args:
        workload: The jobs.
        topology: The cluster's nodes, racks and pools.
    """

    def __init__(self, workload: Workload, topology: Topology) -> None:
        self._topo = topology
        self._submit = np.asarray(workload.submit, np.int64)
        self._req = np.asarray(workload.req_walltime, np.float64)
        self._procs = np.asarray(workload.procs, np.float64)
        self._gpus = np.asarray(workload.gpus, np.float64)
        self._share = (np.full(len(workload), 1.0) if workload.gpu_share is None
                       else np.asarray(workload.gpu_share, np.float64) / MILLI)
        cap = topology.pool_capacity.astype(np.float64)
        self._pool_cap = cap
        self._total = cap.sum(axis=0)
        self._speed = topology.pool_speed / float(topology.pool_speed.max())
        self._cross = float(topology.model.cross_rack)

    def observe(self, view: PlacementView) -> Obs:
        """``{"jobs": [C, Fa], "cluster": [Fx], "mask": [C]}`` for ``view``'s candidates."""
        j, topo = view.job, self._topo
        cands = view.candidates
        raw = np.zeros((len(cands), len(CANDIDATE_FEATURES)))
        pools = set()
        for i, c in enumerate(cands):
            p = c.pool
            pools.add(p)
            used = c.take > 0
            nodes = topo.pool_nodes(p)[used]
            before = view.node_free[nodes]
            capacity = topo.node_gpu_milli[nodes]
            row = raw[i]
            row[0] = c.speed_factor
            row[1] = self._req[j] * c.speed_factor
            row[2] = self._speed[p]
            row[3] = _share(view.pool_free[p, 1] - c.take.sum(), self._pool_cap[p, 1])
            row[4] = _share(view.pool_free[p, 0] - self._procs[j], self._pool_cap[p, 0])
            row[5] = c.nodes
            row[6] = c.racks
            row[7] = c.distance / self._cross if self._cross > 0 else 0.0
            if c.nodes:
                row[8] = float((before - c.take[used]).sum()) / float(capacity.sum())
                row[9] = float((before == capacity).sum()) / c.nodes
            row[_HEURISTIC_COLUMN[c.allocator]] = 1.0
        free = view.pool_free.sum(axis=0).astype(np.float64)
        context = np.array([
            view.now - self._submit[j], self._req[j], self._gpus[j], self._share[j],
            _share(self._procs[j], self._total[0]), _share(free[1], self._total[1]),
            _share(free[0], self._total[0]), len(pools) / len(topo.pool_names)])
        return {"jobs": normalise(raw, CANDIDATE_FEATURES),
                "cluster": normalise(context, CONTEXT_FEATURES),
                "mask": np.ones(len(cands), np.bool_)}


def _share(value: float, total: float) -> float:
    """``value / total``, 0 when the cluster has none of the resource."""
    return float(value) / total if total > 0 else 0.0
