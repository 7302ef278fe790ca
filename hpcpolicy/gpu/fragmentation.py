"""GPU fragmentation as Weng et al. measure it (USENIX ATC 2023, section 3).

The *target workload* is the distribution of task shapes: the most frequent pod shapes
(CPU, GPU thousandths per GPU, GPU count, model constraint) that together make up 95 % of the
pods, each weighted by its share of them (:func:`typical_pods`; 95 % is the threshold of the
paper's simulator, ``podPopularityThreshold``).

A node's *fragmentation* is the expected GPU amount that a task drawn from that distribution
could not use: for each typical task, all the node's free GPU thousandths count when the task
cannot run there at all (too little CPU, too few GPUs with enough free, wrong model, or a
CPU-only task), and when it can, only the free thousandths of GPUs too full for it count
(:func:`node_fragmentation`). The cluster's fragmentation is the sum over nodes; FGD places
each pod where that sum grows least.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numba as nb
import numpy as np
import numpy.typing as npt

from hpcpolicy.gpu.sharing import SharingPods

__all__ = ["POPULARITY", "TypicalPods", "node_fragmentation", "typical_pods"]

POPULARITY = 0.95
"""The share of pods the typical shapes cover."""

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]
B = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class TypicalPods:
    """The target workload: pod shapes and their weights (summing to 1).

    Attributes:
        cpu: CPU thousandths of each shape.
        num_gpu: GPUs of each shape.
        gpu_milli: thousandths per GPU of each shape (0: CPU-only).
        allowed: ``allowed[t, m]``: shape ``t`` may run on GPU model ``m``.
        unconstrained: shape ``t`` has no model constraint (it may also use model-less nodes).
        weight: the share of each shape among the typical pods.
    """

    cpu: I64
    num_gpu: I64
    gpu_milli: I64
    allowed: B
    unconstrained: B
    weight: F64


def typical_pods(pods: SharingPods, popularity: float = POPULARITY) -> TypicalPods:
    """The most frequent pod shapes covering ``popularity`` of the pods, reweighted to sum 1.

    Shapes are ordered by count, then (as the paper's simulator breaks ties) by larger CPU,
    GPU thousandths, GPU count; the fewest leading shapes whose counts reach
    ``popularity`` of all pods are kept.

    Example:
        >>> import numpy as np
        >>> from hpcpolicy.gpu.sharing import SharingPods
        >>> one = np.ones(3, dtype=np.int64)
        >>> pods = SharingPods(("a", "b", "c"), np.array([1, 1, 2]), one, one,
        ...                    np.array([500, 500, 1000]), np.ones((3, 1), dtype=bool))
        >>> typical_pods(pods, 0.5).weight.tolist()
        [1.0]
    """
    keys = [(int(c), int(m), int(g), tuple(bool(x) for x in a))
            for c, m, g, a in zip(pods.cpu, pods.gpu_milli, pods.num_gpu, pods.allowed,
                                  strict=True)]
    counts = Counter(keys)
    ranked = sorted(counts.items(), key=lambda kv: (kv[1], kv[0][0], kv[0][1], kv[0][2]),
                    reverse=True)
    need, total, kept = popularity * len(keys), 0, []
    for key, count in ranked:
        if total >= need:
            break
        kept.append((key, count))
        total += count
    allowed = np.array([k[3] for k, _ in kept], dtype=bool).reshape(len(kept), -1)
    return TypicalPods(
        cpu=np.array([k[0] for k, _ in kept], dtype=np.int64),
        num_gpu=np.array([k[2] for k, _ in kept], dtype=np.int64),
        gpu_milli=np.array([k[1] for k, _ in kept], dtype=np.int64),
        allowed=allowed, unconstrained=np.asarray(allowed.all(axis=1), dtype=bool),
        weight=np.array([c for _, c in kept], dtype=np.float64) / total)


@nb.njit(cache=True)
def node_fragmentation(cpu_left: int, gpu_left: I64, gpus: int, model: int, t_cpu: I64,
                       t_num: I64, t_milli: I64, t_allowed: B, t_free: B,
                       t_weight: F64) -> float:
    """Expected free GPU thousandths of one node that a typical task could not use.

    Args:
        cpu_left: the node's free CPU thousandths.
        gpu_left: free thousandths of each GPU (only the first ``gpus`` count).
        gpus: the node's GPU count.
        model: the node's GPU model index, -1 for none.
        t_cpu, t_num, t_milli, t_allowed, t_free, t_weight: the fields of
            :class:`TypicalPods`.

    Returns:
        The fragmentation, in GPU thousandths.
    """
    total = 0
    for g in range(gpus):
        total += gpu_left[g]
    frag = 0.0
    for t in range(t_weight.shape[0]):
        milli = t_milli[t]
        if milli == 0:
            frag += t_weight[t] * total
            continue
        ok = t_free[t] if model < 0 else t_allowed[t, model]
        if not ok:
            frag += t_weight[t] * total
            continue
        fits, stranded = 0, 0
        for g in range(gpus):
            if gpu_left[g] >= milli:
                fits += 1
            else:
                stranded += gpu_left[g]
        if fits >= t_num[t] and cpu_left >= t_cpu[t]:
            frag += t_weight[t] * stranded
        else:
            frag += t_weight[t] * total
    return frag
