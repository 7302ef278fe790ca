"""A time-based replay of a GPU-sharing trace: pods arrive at their logged times, run for
their logged lengths, and wait when nothing fits.

At each event time, finished pods leave first, then arrivals join the queue, then the queue is
scanned in arrival order and every pod that fits somewhere is placed by the allocator (the
Kubernetes way: a pod that does not fit does not hold back the pods behind it). Within one
scan, once a pod shape has not fitted, later pods of that shape are not tried again (the free
resources only shrink during a scan); when nothing has left since the last scan, only the new
arrivals are tried.

Measured on the last part of the trace (by arrival, :attr:`TimedConfig.tail`): the GPU
allocation rate (allocated GPU thousandths averaged over time, from the first arrival of the
part to the last arrival of the trace, over the cluster's) and the bounded slowdown
``max((wait + run) / max(run, 10 s), 1)`` of the part's pods that started.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

import numba as nb
import numpy as np
import numpy.typing as npt

from hpcpolicy.config import Config
from hpcpolicy.gpu.allocators import N_FEATURES
from hpcpolicy.gpu.cluster_state import apply, choose, new_state
from hpcpolicy.gpu.fragmentation import POPULARITY, typical_pods
from hpcpolicy.gpu.inflation import pod_shapes, typical_tuple
from hpcpolicy.gpu.registry import check_sharing
from hpcpolicy.gpu.sharing import GPU_MILLI, SharingNodes, SharingPods
from hpcpolicy.gpu.sharing_code import sharing_code

__all__ = ["TimedConfig", "TimedResult", "timed_replay"]

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]


@dataclass(frozen=True)
class TimedConfig(Config):
    """One time-based replay."""

    label = "timed replay"

    allocator: str = "fgd"
    """Which sharing allocator places the pods (:mod:`hpcpolicy.gpu.registry`): a name,
    ``learned`` with :attr:`weights`, or a learned allocator's folder."""
    tail: float = 0.3
    """The share of the trace (last arrivals) that is measured."""
    seed: int = 0
    """Seeds the ``random`` allocator's draws."""
    weights: tuple[float, ...] = ()
    """The learned allocator's weights; empty for the others."""

    def validate(self) -> None:
        """Tail in (0, 1]; a sharing allocator, weights exactly for ``learned``."""
        self._require(0 < self.tail <= 1, "tail", f"must be in (0, 1], got {self.tail}")
        problem = check_sharing(self.allocator, self.weights)
        self._require(problem is None, "allocator", str(problem))


@dataclass(frozen=True)
class TimedResult:
    """What a time-based replay measured on the trace's tail.

    Attributes:
        allocation_rate: allocated GPU share (%), averaged over the tail's time.
        mean_bounded_slowdown: over the tail's pods that started.
        started: the tail's pods that started.
        never_started: the tail's pods that never found room.
        start: each pod's start time (-1: never), in the given order.
    """

    allocation_rate: float
    mean_bounded_slowdown: float
    started: int
    never_started: int
    start: I64


# numba caches this loop with cluster_state's functions compiled into it, keyed on this file
# alone: when cluster_state.py (or allocators.py) changes, change this file too, or a stale
# cache runs the old state layout (a crash).
@nb.njit(cache=True)
def _timed(code: int, cpu_cap: I64, mem_cap: I64, gpus: I64, model: I64, p_cpu: I64,
           p_mem: I64, p_num: I64, p_milli: I64, p_allowed: npt.NDArray[np.bool_],
           p_spec: I64, submit: I64, run: I64, ties: F64, typical: tuple,  # type: ignore[type-arg]
           weights: F64, window: tuple[int, int]) -> tuple[I64, float]:
    count, n_specs = p_cpu.shape[0], p_spec.max() + 1
    state = new_state(cpu_cap, mem_cap, gpus, model, typical, n_specs)
    usable = np.ones(cpu_cap.shape[0], dtype=np.bool_)
    start = np.full(count, -1, dtype=np.int64)
    node_of, mask_of = np.full(count, -1, dtype=np.int64), np.zeros(count, dtype=np.int64)
    heap = [(np.int64(0), np.int64(0))]
    heap.pop()
    queue, queued = np.empty(count, dtype=np.int64), 0
    arrived, now, alloc, integral = 0, 0, 0, 0.0
    never: int = np.iinfo(np.int64).max
    while arrived < count or len(heap) > 0:
        next_arrival = int(submit[arrived]) if arrived < count else never
        next_end = int(heap[0][0]) if len(heap) > 0 else never
        t = min(next_arrival, next_end)
        low, high = max(now, window[0]), min(t, window[1])
        if high > low:
            integral += alloc * (high - low)
        now = t
        freed = False
        while len(heap) > 0 and heap[0][0] == t:
            i = heapq.heappop(heap)[1]
            apply(state, gpus, model, typical, node_of[i], p_cpu[i], p_mem[i], p_num[i],
                  p_milli[i], mask_of[i], -1)
            alloc -= p_num[i] * p_milli[i]
            freed = True
        first = 0 if freed else queued
        while arrived < count and submit[arrived] == t:
            queue[queued] = arrived
            queued += 1
            arrived += 1
        failed = np.zeros(n_specs, dtype=np.bool_)
        kept = first
        for q in range(first, queued):
            i = queue[q]
            if not failed[p_spec[i]]:
                j, mask = choose(code, state, cpu_cap, mem_cap, gpus, model, typical, weights,
                                 p_cpu[i], p_mem[i], p_num[i], p_milli[i], p_allowed[i],
                                 usable, p_spec[i], ties[i, 0], ties[i, 1])
                if j >= 0:
                    apply(state, gpus, model, typical, j, p_cpu[i], p_mem[i], p_num[i],
                          p_milli[i], mask, 1)
                    alloc += p_num[i] * p_milli[i]
                    start[i], node_of[i], mask_of[i] = t, j, mask
                    heapq.heappush(heap, (t + run[i], i))
                    continue
                failed[p_spec[i]] = True
            queue[kept] = i
            kept += 1
        queued = kept
    return start, integral


def timed_replay(nodes: SharingNodes, pods: SharingPods, submit: I64, run: I64,
                 cfg: TimedConfig) -> TimedResult:
    """Replay ``pods`` at their ``submit`` times for ``run`` seconds each (see module doc).

    Args:
        nodes: the cluster.
        pods: the pods; their typical shapes are FGD's target workload.
        submit: each pod's arrival time (s).
        run: each pod's run time (s, > 0).
        cfg: the allocator, the measured tail and the seed.

    Returns:
        The tail's allocation rate and bounded slowdown, and every pod's start.

    Example:
        >>> import numpy as np
        >>> from hpcpolicy.gpu.sharing import SharingNodes, SharingPods
        >>> nodes = SharingNodes(("n",), np.array([8000]), np.array([64]), np.array([1]),
        ...                      np.array([0]), ("T4",))
        >>> one = np.ones(2, dtype=np.int64)
        >>> pods = SharingPods(("a", "b"), one, one, one, np.array([1000, 1000]),
        ...                    np.ones((2, 1), bool))
        >>> r = timed_replay(nodes, pods, np.array([0, 0]), np.array([100, 100]),
        ...                  TimedConfig(tail=0.5))
        >>> r.start.tolist(), r.mean_bounded_slowdown
        ([0, 100], 2.0)
    """
    order = np.argsort(submit, kind="stable")
    arrivals = pods.take(order)
    sub, length = submit[order].astype(np.int64), run[order].astype(np.int64)
    first = min(math.floor(len(sub) * (1 - cfg.tail)), len(sub) - 1)
    window = (int(sub[first]), int(sub[-1]))
    code, weights = sharing_code(cfg.allocator, cfg.weights)
    ties = np.random.default_rng(cfg.seed).random((len(sub), 2))
    w = np.asarray(weights if weights else (0.0,) * N_FEATURES, dtype=np.float64)
    start, integral = _timed(
        code, nodes.cpu, nodes.mem, nodes.gpus, nodes.model,
        arrivals.cpu, arrivals.mem, arrivals.num_gpu, arrivals.gpu_milli, arrivals.allowed,
        pod_shapes(arrivals), sub, length, ties, typical_tuple(typical_pods(pods, POPULARITY)),
        w, window)
    tail = np.arange(len(sub)) >= first
    ran = tail & (start >= 0)
    slowdown = np.maximum((start[ran] - sub[ran] + length[ran]) / np.maximum(length[ran], 10),
                          1.0)
    span = max(window[1] - window[0], 1)
    back = np.empty_like(start)
    back[order] = start
    return TimedResult(100.0 * integral / (span * nodes.total_gpus * GPU_MILLI),
                       float(slowdown.mean()) if ran.any() else math.nan, int(ran.sum()),
                       int((tail & (start < 0)).sum()), back)
