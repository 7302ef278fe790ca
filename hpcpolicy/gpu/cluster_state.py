"""The free resources of a GPU-sharing cluster while pods come and go, compiled.

The state is a tuple of arrays (numba-friendly): free CPU, memory and GPU thousandths per
node and GPU, the count of pods of each GPU shape per node (for GPU clustering), each node's
fragmentation, and FGD's scores (and the learned allocator's) per (pod shape, node), kept
until the node changes.
:func:`choose` asks an allocator where a pod goes; :func:`apply` places it there or takes it
away again. The inflation experiment (:mod:`hpcpolicy.gpu.inflation`) and the time-based
replay (:mod:`hpcpolicy.gpu.timed_replay`) are both loops over these two.
"""

from __future__ import annotations

import numba as nb
import numpy as np
import numpy.typing as npt

from hpcpolicy.gpu.allocators import (
    FGD,
    LEARNED_CODE,
    MEMORY_LEFT,
    N_FEATURES,
    RANDOM,
    best_fit_gpu,
    features,
    fgd_choice,
    fits,
    heuristic_score,
    random_gpu,
)
from hpcpolicy.gpu.fragmentation import node_fragmentation
from hpcpolicy.gpu.sharing import GPU_MILLI, MAX_GPUS

__all__ = ["apply", "choose", "new_state"]

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]


@nb.njit(cache=True)
def new_state(cpu_cap: I64, mem_cap: I64, gpus: I64, model: I64, typical: tuple,  # type: ignore[type-arg]
              n_specs: int) -> tuple:  # type: ignore[type-arg]
    """An empty cluster's state for pods of ``n_specs`` shapes."""
    t_cpu, t_num, t_milli, t_allowed, t_free, t_weight = typical
    n = cpu_cap.shape[0]
    gpu_left = np.zeros((n, MAX_GPUS), dtype=np.int64)
    frag = np.zeros(n)
    for j in range(n):
        gpu_left[j, :gpus[j]] = GPU_MILLI
        frag[j] = node_fragmentation(cpu_cap[j], gpu_left[j], gpus[j], model[j], t_cpu,
                                     t_num, t_milli, t_allowed, t_free, t_weight)
    return (cpu_cap.copy(), mem_cap.copy(), gpu_left,
            np.zeros((n, MAX_GPUS + 1), dtype=np.int64), frag,
            np.full((n_specs, n), np.nan), np.zeros((n_specs, n)),
            np.full((n_specs, n), -1, dtype=np.int64), np.zeros((n_specs, n)))


@nb.njit(cache=True)
def choose(code: int, state: tuple, cpu_cap: I64, mem_cap: I64, gpus: I64,  # type: ignore[type-arg]
           model: I64, typical: tuple, weights: F64, cpu: int, mem: int,  # type: ignore[type-arg]
           num: int, milli: int, allowed: npt.NDArray[np.bool_], usable: npt.NDArray[np.bool_],
           spec: int, u_node: float, u_gpu: float) -> tuple[int, int]:
    """Where allocator ``code`` puts the pod: (node, bit mask of its GPUs), node -1 if none.

    Only nodes marked ``usable`` are considered. Ties go to the first node of the best score
    (``random``: ``u_node`` in [0, 1) draws among the nodes that fit, ``u_gpu`` the shared
    GPU).
    """
    cpu_left, mem_left, gpu_left, shapes, _, cached, cached_decrease, cached_gpu, learned = state
    n = cpu_cap.shape[0]
    share = num == 1 and milli < GPU_MILLI
    shape = 0 if share else num
    uses_fgd = code in (FGD, LEARNED_CODE)
    view = np.zeros(N_FEATURES)
    score = np.full(n, -np.inf)
    best, ties, first = -np.inf, 0, -1
    for j in range(n):
        if not usable[j] or not fits(j, cpu, mem, num, milli, cpu_left, mem_left, gpu_left,
                                     gpus, model, allowed):
            continue
        if uses_fgd and np.isnan(cached[spec, j]):
            cached[spec, j], cached_decrease[spec, j], cached_gpu[spec, j] = fgd_choice(
                j, cpu, num, milli, cpu_left, gpu_left, gpus, model, typical)
            if code == LEARNED_CODE:  # node j's score, like FGD's, holds till it changes,
                # but for the pod's memory, which the shape leaves out (feature 3, below)
                features(j, cpu, 0, num, milli, cached[spec, j], cached_decrease[spec, j],
                         cpu_left, mem_left, gpu_left, cpu_cap, mem_cap, gpus, view)
                value = 0.0
                for f in range(N_FEATURES):  # a loop: np.dot on 8 numbers costs a BLAS call
                    value += weights[f] * view[f]
                learned[spec, j] = value
        if code == FGD:
            score[j] = cached[spec, j]
        elif code == LEARNED_CODE:
            score[j] = learned[spec, j] - weights[MEMORY_LEFT] * mem / mem_cap[j]
        else:
            score[j] = heuristic_score(code, j, cpu, num, milli, shape, cpu_left, gpu_left,
                                       gpus, shapes)
        if score[j] > best:
            best, ties, first = score[j], 1, j
        elif score[j] == best:
            ties += 1
    if ties == 0:
        return -1, 0
    chosen = first
    if code == RANDOM:  # the draw among the nodes that fit (all score the same)
        pick = int(u_node * ties)
        for j in range(n):
            if score[j] == best:
                if pick == 0:
                    chosen = j
                    break
                pick -= 1
    if share:
        if code == RANDOM:
            g = random_gpu(chosen, milli, gpu_left, gpus, u_gpu)
        elif uses_fgd:
            g = cached_gpu[spec, chosen]
        else:
            g = best_fit_gpu(chosen, milli, gpu_left, gpus)
        return chosen, 1 << g
    mask, taken = 0, 0
    for g in range(gpus[chosen]):
        if taken < num and gpu_left[chosen, g] == GPU_MILLI:
            mask |= 1 << g
            taken += 1
    return chosen, mask


@nb.njit(cache=True)
def apply(state: tuple, gpus: I64, model: I64, typical: tuple, j: int,  # type: ignore[type-arg]
          cpu: int, mem: int, num: int, milli: int, mask: int, sign: int) -> float:
    """Place (``sign`` 1) or remove (-1) a pod on node ``j``'s GPUs ``mask``; returns the
    change of the cluster's fragmentation."""
    cpu_left, mem_left, gpu_left, shapes, frag, cached, _, _, _ = state
    t_cpu, t_num, t_milli, t_allowed, t_free, t_weight = typical
    cpu_left[j] -= sign * cpu
    mem_left[j] -= sign * mem
    for g in range(gpus[j]):
        if mask & (1 << g):
            gpu_left[j, g] -= sign * milli
    if num > 0:
        shapes[j, 0 if (num == 1 and milli < GPU_MILLI) else num] += sign
    cached[:, j] = np.nan
    new = node_fragmentation(cpu_left[j], gpu_left[j], gpus[j], model[j], t_cpu, t_num,
                             t_milli, t_allowed, t_free, t_weight)
    change = new - frag[j]
    frag[j] = new
    return float(change)
