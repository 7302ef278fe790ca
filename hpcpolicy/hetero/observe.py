"""What the GPU-type chooser sees when a job is about to start, and how a type becomes a
placement.

The engine (:class:`~hpcpolicy.sim.gpu_engine.GpuEngine`) offers a job's candidate placements:
every pool (GPU type) whose free totals hold it, times the node-level heuristics. The
chooser picks a *type*; inside the type it always takes the most compact candidate
(:func:`pool_candidate`), so learning is about the type alone. Actions are the cluster's GPU
pools in spec order (the CPU pool, if any, is not an action: a CPU job has no choice).

The observation is one float32 vector, built here for training and for the deployed policy
alike, from :class:`~hpcpolicy.gpu.placer.PlacementView` only (what the engine gives a
placer), in the order of :func:`feature_names`:

* job (what the scheduler knew, and how long it has waited):
  ``req_walltime`` log1p(requested walltime s) / log1p(10 days); ``wait`` the same of
  now - submit; ``gpus`` log2(1 + GPUs used, fractions counted) / log2(1 + GPUs of the
  largest pool); ``cores`` log2(1 + cores) / log2(1 + cores of the largest pool);
* queue: ``waiting_jobs`` log1p(other jobs waiting) / log1p(1000); ``waiting_gpus``
  log1p(their GPUs / the cluster's GPUs). :class:`~hpcpolicy.gpu.placer.PlacementView` has
  no queue, so :class:`QueueTracker` counts it: jobs submitted by now, minus the jobs
  already placed (every start passes through the placer), minus jobs that never fit;
* per pool ``p`` (one block per action): ``valid`` 1 if the job can start there now (the
  action mask; the network reads it from here); ``free_gpus`` and ``free_cores`` free shares
  of the pool; ``job_share`` min(1, the job's GPUs / the pool's GPUs); ``runtime_factor``
  log2 of the run-time factor the job would get there: the candidate's speed factor times
  ``1 + spread_penalty * distance`` (0 where not valid).

Example:
    >>> feature_names(("a100", "v100"))[:6]
    ('req_walltime', 'wait', 'gpus', 'cores', 'waiting_jobs', 'waiting_gpus')
    >>> len(feature_names(("a100", "v100")))
    16
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from hpcpolicy.cluster import ClusterSpec
from hpcpolicy.errors import ConfigError
from hpcpolicy.gpu.placer import Candidate, PlacementView
from hpcpolicy.gpu.topology import MILLI, Topology
from hpcpolicy.sim.gpu_engine import gpu_prepare, job_shares
from hpcpolicy.sim.types import SimConfig
from hpcpolicy.workload import Workload

__all__ = ["HEAD", "JOB_FEATURES", "OBS_BOUND", "POOL_FEATURES", "QUEUE_FEATURES", "PoolObserver",
           "QueueTracker", "action_pools", "feature_names", "mask_index", "n_pools_of",
           "obs_dim", "only_choice", "pool_candidate", "type_specs"]

F32 = npt.NDArray[np.float32]
I64 = npt.NDArray[np.int64]
B = npt.NDArray[np.bool_]

JOB_FEATURES = ("req_walltime", "wait", "gpus", "cores")
QUEUE_FEATURES = ("waiting_jobs", "waiting_gpus")
POOL_FEATURES = ("valid", "free_gpus", "free_cores", "job_share", "runtime_factor")
HEAD = len(JOB_FEATURES) + len(QUEUE_FEATURES)
"""Features before the per-pool blocks."""
OBS_BOUND = 16.0
"""Every entry is clipped to [-OBS_BOUND, OBS_BOUND] (only a pathological log would reach it)."""

_LOG_TIME = math.log1p(864_000.0)
_LOG_QUEUE = math.log1p(1000.0)


def feature_names(pools: tuple[str, ...]) -> tuple[str, ...]:
    """Names of the observation's entries for GPU pools ``pools``, in order."""
    return (*JOB_FEATURES, *QUEUE_FEATURES,
            *(f"{name}/{f}" for name in pools for f in POOL_FEATURES))


def mask_index(n_pools: int) -> list[int]:
    """Positions of the ``valid`` feature of each pool in the observation."""
    return [HEAD + p * len(POOL_FEATURES) for p in range(n_pools)]


def n_pools_of(dim: int) -> int:
    """Pools of an observation of ``dim`` entries.

    Raises:
        ValueError: No whole number of pools gives ``dim``.
    """
    pools, rest = divmod(dim - HEAD, len(POOL_FEATURES))
    if rest or pools < 1:
        raise ValueError(f"an observation of {dim} entries is not {HEAD} + pools x "
                         f"{len(POOL_FEATURES)}")
    return pools


def action_pools(cluster: ClusterSpec) -> tuple[Topology, tuple[int, ...]]:
    """The cluster's topology and its pools with GPUs (the actions), in spec order.

    Raises:
        ConfigError: The cluster has fewer than two GPU types.
    """
    topo = Topology.from_cluster(cluster)
    pools = tuple(p for p in range(len(topo.pool_names)) if topo.pool_capacity[p, 1] > 0)
    if len(pools) < 2:
        names = [topo.pool_names[p] for p in pools]
        raise ConfigError(f"cluster {cluster.name!r} has {len(names)} GPU type(s) {names}; "
                          "assigning jobs to GPU types needs at least 2 (e.g. "
                          "examples/gpu-partition.toml)")
    return topo, pools


def type_specs(topo: Topology, pools: tuple[int, ...]) -> tuple[tuple[str, float], ...]:
    """(GPU type, speed) of each of ``pools``: what a trained policy is tied to."""
    return tuple((topo.pool_names[p], float(topo.pool_speed[p])) for p in pools)


def obs_dim(n_pools: int) -> int:
    """Entries of an observation for ``n_pools`` GPU pools."""
    return HEAD + n_pools * len(POOL_FEATURES)


def only_choice(view: PlacementView, choices: list[int | None]) -> int | None:
    """The candidate to take without asking when the job has no real choice of GPU type:
    the one valid type's (see :func:`pool_candidate`), or, when no action applies (a CPU
    job), the most compact candidate of the first pool offered; None when several types
    can hold the job."""
    valid = [k for k in choices if k is not None]
    if len(valid) > 1:
        return None
    if valid:
        return valid[0]
    k = pool_candidate(view.candidates, view.candidates[0].pool)
    assert k is not None
    return k


def pool_candidate(candidates: tuple[Candidate, ...] | list[Candidate], pool: int) -> int | None:
    """Index of the most compact candidate in ``pool`` (smallest GPU distance, then fewest
    nodes, then racks, then list order), or None when the pool has none."""
    best: tuple[float, int, int, int] | None = None
    for i, c in enumerate(candidates):
        if c.pool == pool and (best is None or (c.distance, c.nodes, c.racks, i) < best):
            best = (c.distance, c.nodes, c.racks, i)
    return None if best is None else best[3]


class QueueTracker:
    """The jobs waiting at a decision, counted from the decisions themselves.

    Every job the engine starts passes through the placer once, so the waiting jobs at
    ``now`` are those submitted by ``now`` (that can ever fit) and not yet placed.
    """

    def __init__(self, workload: Workload, placeable: B) -> None:
        self.submit = np.asarray(workload.submit, dtype=np.int64)
        gpus = np.asarray(workload.gpus, dtype=np.float64) * job_shares(workload) / MILLI
        self.gpus = gpus
        self._jobs = np.concatenate([[0], np.cumsum(placeable)]).astype(np.int64)
        self._gpus = np.concatenate([[0.0], np.cumsum(np.where(placeable, gpus, 0.0))])
        self.placed_jobs = 0
        self.placed_gpus = 0.0

    def arrived(self, t: int) -> int:
        """Placeable jobs submitted at or before ``t``."""
        return int(self._jobs[np.searchsorted(self.submit, t, side="right")])

    def arrivals_between(self, a: int, b: int) -> I64:
        """Submit times in ``(a, b)`` of all jobs (each once), sorted."""
        lo, hi = np.searchsorted(self.submit, [a, b], side="right")
        return self.submit[lo:hi][self.submit[lo:hi] < b]

    def waiting(self, now: int, job: int) -> tuple[int, float]:
        """Jobs (and their GPUs) waiting at ``now`` besides ``job``, which is being placed."""
        i = np.searchsorted(self.submit, now, side="right")
        return (int(self._jobs[i]) - self.placed_jobs - 1,
                float(self._gpus[i]) - self.placed_gpus - float(self.gpus[job]))

    def place(self, job: int) -> None:
        """``job`` starts now."""
        self.placed_jobs += 1
        self.placed_gpus += float(self.gpus[job])


class PoolObserver:
    """Observations of one run's decisions (training environment and deployed policy).

    Args:
        workload: The jobs of the run.
        cluster: The machine; it needs at least two GPU types.

    Raises:
        ConfigError: The cluster has fewer than two GPU types (:func:`action_pools`).
    """

    def __init__(self, workload: Workload, cluster: ClusterSpec) -> None:
        topo, self.pools = action_pools(cluster)
        self.topo = topo
        prep = gpu_prepare(workload, cluster, SimConfig(), topo)
        self.queue = QueueTracker(workload, ~prep.never_fits)
        self.workload = workload
        cap = topo.pool_capacity
        self._cap = cap[list(self.pools)].astype(np.float64)
        self._log_gpus = math.log2(1.0 + float(self._cap[:, 1].max()) / MILLI)
        self._log_cores = math.log2(1.0 + float(self._cap[:, 0].max()))
        self._total_gpus = float(self._cap[:, 1].sum()) / MILLI
        self._penalty = topo.model.spread_penalty

    @property
    def types(self) -> tuple[tuple[str, float], ...]:
        """(GPU type, speed) of each action."""
        return type_specs(self.topo, self.pools)

    @property
    def dim(self) -> int:
        """Entries of an observation."""
        return obs_dim(len(self.pools))

    def runtime_factor(self, c: Candidate) -> float:
        """How many times its logged run time a job runs as candidate ``c``: the speed
        factor times the spread penalty's ``1 + spread_penalty * distance``."""
        return c.speed_factor * (1.0 + self._penalty * c.distance)

    def choices(self, view: PlacementView) -> list[int | None]:
        """For each action, the candidate it stands for (None: the type cannot hold the job)."""
        return [pool_candidate(view.candidates, p) for p in self.pools]

    def observe(self, view: PlacementView, choices: list[int | None]) -> F32:
        """The observation of ``view`` (``choices`` from :meth:`choices`)."""
        w, j = self.workload, view.job
        n_wait, gpus_wait = self.queue.waiting(view.now, j)
        job_gpus = float(self.queue.gpus[j])
        head = [math.log1p(float(w.req_walltime[j])) / _LOG_TIME,
                math.log1p(float(max(view.now - int(w.submit[j]), 0))) / _LOG_TIME,
                math.log2(1.0 + job_gpus) / self._log_gpus,
                math.log2(1.0 + float(w.procs[j])) / self._log_cores,
                math.log1p(max(n_wait, 0)) / _LOG_QUEUE,
                math.log1p(max(gpus_wait, 0.0) / self._total_gpus)]
        out = np.zeros(self.dim, dtype=np.float32)
        out[:HEAD] = head
        free = view.pool_free[list(self.pools)].astype(np.float64)
        for a, k in enumerate(choices):
            base = HEAD + a * len(POOL_FEATURES)
            cap = self._cap[a]
            factor = 0.0 if k is None else math.log2(self.runtime_factor(view.candidates[k]))
            out[base:base + len(POOL_FEATURES)] = (
                float(k is not None), free[a, 1] / cap[1], free[a, 0] / cap[0],
                min(1.0, job_gpus * MILLI / cap[1]), factor)
        return np.clip(out, -OBS_BOUND, OBS_BOUND)
