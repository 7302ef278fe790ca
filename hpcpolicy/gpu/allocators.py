"""The six GPU-sharing allocators of Weng et al. (USENIX ATC 2023, section 6.1), compiled.

Each allocator gives every node that can take the pod a whole-number score (0 to 100, as
Kubernetes scheduler plugins do); the pod goes to the first node (in the node list's order)
of the highest score, as the paper's simulator breaks ties (by the smallest node name, its
nodes being named in list order), and then to GPUs of that node. ``random`` alone draws the
node, uniformly among those that fit. The scores follow the
definitions of the paper's simulator (``hkust-adsl/kubernetes-scheduler-simulator``,
``pkg/simulator/plugin``); the normalisation constants are its largest node, 128 CPUs and
8 GPUs:

* ``random``: every node scores the same; a shared GPU is drawn at random among those that fit.
* ``dotprod``: 100 x (1 - mean of free x request over CPU and GPU, each over its maximum).
* ``clustering``: nodes already running only pods of the same GPU shape first (75-100), then
  mixed nodes holding that shape (50-75), then empty nodes (25-50), then the rest (0-25);
  within a band, fuller nodes first. CPU-only pods: all nodes equal.
* ``packing``: partly used GPUs first (the fuller the better), then nodes whose free GPUs
  the pod would open, then wholly idle nodes (the fewer GPUs the better).
* ``bestfit``: 100 x (1 - mean of what is left of CPU and GPU, each over its maximum).
* ``fgd``: 100 x sigmoid(fragmentation decrease / 1000), the fragmentation being
  :func:`~hpcpolicy.gpu.fragmentation.node_fragmentation`; a shared GPU is the one whose
  choice decreases it most.

Every allocator but ``random`` and ``fgd`` puts a GPU-sharing pod on the fullest GPU that fits
it (best fit, the simulator's default); a pod of whole GPUs takes the first idle GPUs.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np
import numpy.typing as npt

from hpcpolicy.gpu.fragmentation import node_fragmentation
from hpcpolicy.gpu.registry import LEARNED, N_FEATURES
from hpcpolicy.gpu.registry import SHARING_ALLOCATORS as ALLOCATORS
from hpcpolicy.gpu.sharing import GPU_MILLI

__all__ = ["ALLOCATORS", "LEARNED", "N_FEATURES", "features"]

# The codes of the allocators of :data:`ALLOCATORS` (in its order), then the learned one's.
RANDOM, DOTPROD, CLUSTERING, PACKING, BESTFIT, FGD, LEARNED_CODE = range(7)
MEMORY_LEFT = 3
"""The one feature of :func:`features` that depends on the pod's memory (linearly)."""
MAX_CPU = 128_000.0
MAX_GPU = 8_000.0

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]
B = npt.NDArray[np.bool_]


@nb.njit(cache=True)
def fits(j: int, cpu: int, mem: int, num: int, milli: int, cpu_left: I64, mem_left: I64,
         gpu_left: I64, gpus: I64, model: I64, allowed: B) -> bool:
    """Whether node ``j`` can take a pod of this shape now (``allowed``: the pod's models)."""
    if cpu_left[j] < cpu or mem_left[j] < mem:
        return False
    if num == 0:
        return True
    if gpus[j] == 0 or model[j] < 0 or not allowed[model[j]]:
        return False
    enough = 0
    for g in range(gpus[j]):
        if gpu_left[j, g] >= milli:
            enough += 1
    return enough >= num


@nb.njit(cache=True)
def _left(j: int, gpu_left: I64, gpus: I64) -> int:
    total = 0
    for g in range(gpus[j]):
        total += gpu_left[j, g]
    return total


@nb.njit(cache=True)
def best_fit_gpu(j: int, milli: int, gpu_left: I64, gpus: I64) -> int:
    """The fullest GPU of node ``j`` with ``milli`` free (first of equals)."""
    best = -1
    for g in range(gpus[j]):
        if gpu_left[j, g] >= milli and (best < 0 or gpu_left[j, g] < gpu_left[j, best]):
            best = g
    return best


@nb.njit(cache=True)
def random_gpu(j: int, milli: int, gpu_left: I64, gpus: I64, u: float) -> int:
    """A GPU of node ``j`` with ``milli`` free, drawn uniformly with ``u`` in [0, 1)."""
    count = 0
    for g in range(gpus[j]):
        if gpu_left[j, g] >= milli:
            count += 1
    pick = int(u * count)
    for g in range(gpus[j]):
        if gpu_left[j, g] >= milli:
            if pick == 0:
                return g
            pick -= 1
    return -1


@nb.njit(cache=True)
def packing_score(j: int, num: int, milli: int, gpu_left: I64, gpus: I64) -> int:
    """The GPU-packing score of node ``j`` for a GPU pod."""
    idle = 0
    for g in range(gpus[j]):
        if gpu_left[j, g] == GPU_MILLI:
            idle += 1
    if idle == gpus[j]:
        return max(100 // 3 - idle, idle)
    if milli == GPU_MILLI:  # whole GPUs: the pod opens ``num`` idle ones
        return max(100 // 2 - num, 100 // 3)
    g = best_fit_gpu(j, milli, gpu_left, gpus)  # the fullest GPU that fits the shared pod
    if gpu_left[j, g] == GPU_MILLI:
        return max(100 // 2 - 1, 100 // 3)
    return max(100 - int(gpu_left[j, g] * 100 // GPU_MILLI) // 10, 100 // 2)


@nb.njit(cache=True)
def clustering_score(j: int, shape: int, gpu_left: I64, gpus: I64, shapes: I64) -> int:
    """The GPU-clustering score of node ``j`` for a pod of GPU ``shape`` (see module doc).

    ``shapes[j, s]`` counts the pods of shape ``s`` on node ``j`` (0: a shared GPU, k: k
    whole GPUs).
    """
    fill = 25 * (8000 - _left(j, gpu_left, gpus)) // 8000
    others = 0
    for s in range(shapes.shape[1]):
        if s != shape and shapes[j, s] > 0:
            others += 1
    if shapes[j, shape] > 0:
        return fill + (75 if others == 0 else 50)
    return fill + (25 if others == 0 else 0)


@nb.njit(cache=True)
def _fgd_score(before: float, after: float) -> float:
    """FGD's whole-number score for a fragmentation going from ``before`` to ``after``."""
    return float(int(100.0 / (1.0 + math.exp(-(before - after) / 1000.0))))


@nb.njit(cache=True)
def fgd_choice(j: int, cpu: int, num: int, milli: int, cpu_left: I64, gpu_left: I64,
               gpus: I64, model: I64, typical: tuple  # type: ignore[type-arg]
               ) -> tuple[float, float, int]:
    """FGD's score of node ``j``, the fragmentation decrease (GPUs) behind it, and for a
    GPU-sharing pod the GPU it picks (the first of the best score; -1 for other pods)."""
    t_cpu, t_num, t_milli, t_allowed, t_free, t_weight = typical
    row = gpu_left[j].copy()
    before = node_fragmentation(cpu_left[j], row, gpus[j], model[j], t_cpu, t_num, t_milli,
                                t_allowed, t_free, t_weight)
    if num == 1 and milli < GPU_MILLI:
        score, decrease, pick = 0.0, 0.0, -1
        for g in range(gpus[j]):
            if row[g] >= milli:
                row[g] -= milli
                after = node_fragmentation(cpu_left[j] - cpu, row, gpus[j], model[j], t_cpu,
                                           t_num, t_milli, t_allowed, t_free, t_weight)
                row[g] += milli
                value = _fgd_score(before, after)
                if pick < 0 or value > score:
                    score, decrease, pick = value, (before - after) / 1000.0, g
        return score, decrease, pick
    taken = 0
    for g in range(gpus[j]):
        if taken < num and row[g] == GPU_MILLI:
            row[g] = 0
            taken += 1
    after = node_fragmentation(cpu_left[j] - cpu, row, gpus[j], model[j], t_cpu, t_num,
                               t_milli, t_allowed, t_free, t_weight)
    return _fgd_score(before, after), (before - after) / 1000.0, -1


@nb.njit(cache=True)
def features(j: int, cpu: int, mem: int, num: int, milli: int, fgd: float, decrease: float,
             cpu_left: I64, mem_left: I64, gpu_left: I64, cpu_cap: I64, mem_cap: I64,
             gpus: I64, out: F64) -> None:
    """The learned allocator's view of placing the pod on node ``j``, written to ``out``.

    0: FGD's score / 100; 1: the fragmentation decrease (GPUs); 2: CPU left after, share of
    the node's; 3: memory left after, share; 4: GPUs left after, share of the node's; 5: 1
    when the node is unused before; 6: the best-fit remainder (mean of CPU and GPU left after,
    each over the largest node's); 7: the node's position in the list, over the node count.
    Weights (1, 0, ..., 0, -1e-6) make FGD itself (its ties go to the first node).
    """
    free_gpu = _left(j, gpu_left, gpus)
    gpu_after = free_gpu - num * milli
    out[0] = fgd / 100.0
    out[1] = decrease
    out[2] = (cpu_left[j] - cpu) / cpu_cap[j]
    out[3] = (mem_left[j] - mem) / mem_cap[j]
    out[4] = gpu_after / (GPU_MILLI * gpus[j]) if gpus[j] > 0 else 0.0
    out[5] = 1.0 if (cpu_left[j] == cpu_cap[j] and free_gpu == GPU_MILLI * gpus[j]) else 0.0
    out[6] = 0.5 * (cpu_left[j] - cpu) / MAX_CPU + 0.5 * gpu_after / MAX_GPU
    out[7] = j / cpu_cap.shape[0]


@nb.njit(cache=True)
def heuristic_score(code: int, j: int, cpu: int, num: int, milli: int, shape: int,
                    cpu_left: I64, gpu_left: I64, gpus: I64, shapes: I64) -> int:
    """The score of node ``j`` under allocator ``code`` (all but FGD)."""
    if code == RANDOM:
        return 0
    request = num * milli
    free_cpu, free_gpu = cpu_left[j], _left(j, gpu_left, gpus)
    if code == DOTPROD:
        dot = (free_cpu / MAX_CPU) * (cpu / MAX_CPU) + (free_gpu / MAX_GPU) * (request / MAX_GPU)
        return int(100.0 * (1.0 - dot / 2.0))
    if code == BESTFIT:
        rest = 0.5 * (free_cpu - cpu) / MAX_CPU + 0.5 * (free_gpu - request) / MAX_GPU
        return int((1.0 - rest) * 100.0)
    if num == 0:
        return 0
    if code == PACKING:
        return packing_score(j, num, milli, gpu_left, gpus)
    return clustering_score(j, shape, gpu_left, gpus, shapes)
