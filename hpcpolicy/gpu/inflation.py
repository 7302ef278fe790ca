"""The inflation experiment of Weng et al. (USENIX ATC 2023, section 6.1): pods arrive, none leave.

The pods of the list arrive in a random order; then pods drawn at random (with replacement)
from the list follow until the next one's GPU thousandths per GPU would take the arrived GPU
request past ``ratio`` times the cluster's GPUs (a list asking for more than that is first cut
down by removing random pods). This is the protocol of the paper's simulator
(``hkust-adsl/kubernetes-scheduler-simulator``, ``TunePodsByNodeTotalResource`` with
``--shuffle-pod=true``). Each pod is placed by the allocator where it fits, or fails; after
each pod the arrived GPU request, the allocated GPU thousandths and the cluster's
fragmentation are recorded.

:func:`inflation_curve` reads the allocated share at each percent of arrived workload as the
paper's analysis does (the mean over the pods whose arrived share rounds to that percent).
"""

from __future__ import annotations

from dataclasses import dataclass

import numba as nb
import numpy as np
import numpy.typing as npt

from hpcpolicy.config import Config
from hpcpolicy.gpu.allocators import N_FEATURES
from hpcpolicy.gpu.cluster_state import apply, choose, new_state
from hpcpolicy.gpu.fragmentation import POPULARITY, TypicalPods, typical_pods
from hpcpolicy.gpu.registry import check_sharing
from hpcpolicy.gpu.sharing import GPU_MILLI, SharingNodes, SharingPods
from hpcpolicy.gpu.sharing_code import sharing_code

__all__ = ["InflationConfig", "InflationRun", "draw_arrivals", "inflation_curve", "pod_shapes",
           "replay_pods", "run_inflation", "typical_tuple"]

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]


@dataclass(frozen=True)
class InflationConfig(Config):
    """One run of the inflation experiment."""

    label = "inflation"

    allocator: str = "fgd"
    """Which sharing allocator places the pods (:mod:`hpcpolicy.gpu.registry`): a name,
    ``learned`` with :attr:`weights`, or a learned allocator's folder."""
    ratio: float = 1.3
    """Stop when the arrived GPU request reaches this multiple of the cluster's GPUs."""
    seed: int = 42
    """Seeds the arrival order, the extra draws and the choice among equal nodes."""
    popularity: float = POPULARITY
    """Share of pods the typical shapes (FGD's target workload) cover."""
    weights: tuple[float, ...] = ()
    """The learned allocator's weights (one per feature); empty for the others."""

    def validate(self) -> None:
        """A sharing allocator, weights exactly for ``learned``, ratio positive, popularity in
        (0, 1]."""
        problem = check_sharing(self.allocator, self.weights)
        self._require(problem is None, "allocator", str(problem))
        self._require(self.ratio > 0, "ratio", f"must be > 0, got {self.ratio}")
        self._require(0 < self.popularity <= 1, "popularity",
                      f"must be in (0, 1], got {self.popularity}")


@dataclass(frozen=True)
class InflationRun:
    """What one run recorded after each arriving pod.

    Attributes:
        arrived: GPU thousandths asked for by the pods arrived so far.
        allocated: GPU thousandths allocated so far.
        fragmentation: the cluster's fragmentation (GPU thousandths).
        node: the node each pod went to, -1 when it failed.
        total_gpus: GPUs in the cluster.
    """

    arrived: I64
    allocated: I64
    fragmentation: F64
    node: I64
    total_gpus: int


def draw_arrivals(pods: SharingPods, total_gpus: int, ratio: float,
                  rng: np.random.Generator) -> I64:
    """Indices of the arriving pods, in order (see the module doc).

    Example:
        >>> import numpy as np
        >>> from hpcpolicy.gpu.sharing import SharingPods
        >>> one = np.ones(2, dtype=np.int64)
        >>> pods = SharingPods(("a", "b"), one, one, one, np.array([500, 1000]),
        ...                    np.ones((2, 1), dtype=bool))
        >>> order = draw_arrivals(pods, 2, 1.0, np.random.default_rng(0))
        >>> sorted(order[:2].tolist()), int(pods.total_milli[order].sum()) <= 2000
        ([0, 1], True)
    """
    order = [int(i) for i in rng.permutation(len(pods.cpu))]
    target = ratio * total_gpus * GPU_MILLI
    milli, total = pods.total_milli, int(pods.total_milli.sum())
    while total > target and order:
        total -= int(milli[order.pop(int(rng.integers(len(order))))])
    while True:
        pick = int(rng.integers(len(pods.cpu)))
        if total + int(pods.gpu_milli[pick]) > target:
            return np.array(order, dtype=np.int64)
        order.append(pick)
        total += int(milli[pick])


def pod_shapes(pods: SharingPods) -> I64:
    """A shape id per pod (same CPU, GPUs, thousandths and models: same id)."""
    keys = np.column_stack([pods.cpu, pods.num_gpu, pods.gpu_milli,
                            pods.allowed.astype(np.int64)])
    return np.unique(keys, axis=0, return_inverse=True)[1].reshape(-1).astype(np.int64)


# numba caches this loop with cluster_state's functions compiled into it, keyed on this file
# alone: when cluster_state.py (or allocators.py) changes, change this file too, or a stale
# cache runs the old state layout (a crash).
@nb.njit(cache=True)
def _replay(code: int, cpu_cap: I64, mem_cap: I64, gpus: I64, model: I64, p_cpu: I64,
            p_mem: I64, p_num: I64, p_milli: I64, p_allowed: npt.NDArray[np.bool_],
            p_spec: I64, ties: F64, typical: tuple,  # type: ignore[type-arg]
            weights: F64) -> tuple[I64, I64, F64, I64]:
    count = p_cpu.shape[0]
    state = new_state(cpu_cap, mem_cap, gpus, model, typical, p_spec.max() + 1 if count else 1)
    usable = np.ones(cpu_cap.shape[0], dtype=np.bool_)
    arrived, allocated = np.zeros(count, np.int64), np.zeros(count, np.int64)
    frag_total, node_of = np.zeros(count), np.full(count, -1, np.int64)
    arr, alloc, frag_sum = 0, 0, state[4].sum()
    for i in range(count):
        cpu, mem, num, milli = p_cpu[i], p_mem[i], p_num[i], p_milli[i]
        arr += num * milli
        j, mask = choose(code, state, cpu_cap, mem_cap, gpus, model, typical, weights, cpu,
                         mem, num, milli, p_allowed[i], usable, p_spec[i], ties[i, 0],
                         ties[i, 1])
        if j >= 0:
            frag_sum += apply(state, gpus, model, typical, j, cpu, mem, num, milli, mask, 1)
            alloc += num * milli
            node_of[i] = j
        arrived[i], allocated[i], frag_total[i] = arr, alloc, frag_sum
    return arrived, allocated, frag_total, node_of


def typical_tuple(t: TypicalPods) -> tuple:  # type: ignore[type-arg]
    """The typical shapes as the compiled loops take them."""
    return (t.cpu, t.num_gpu, t.gpu_milli, t.allowed, t.unconstrained, t.weight)


def replay_pods(nodes: SharingNodes, arrivals: SharingPods, allocator: str,
                typical: TypicalPods, rng: np.random.Generator,
                weights: tuple[float, ...] = ()) -> InflationRun:
    """Place ``arrivals`` in order on an empty cluster with ``allocator``; nothing leaves.

    Args:
        nodes: the cluster.
        arrivals: the pods, in arrival order.
        allocator: a sharing allocator (:mod:`hpcpolicy.gpu.registry`).
        typical: FGD's target workload (and the fragmentation measure's).
        rng: draws the ``random`` allocator's nodes and GPUs.
        weights: the learned allocator's weights over
            :func:`~hpcpolicy.gpu.allocators.features` (``learned`` only).

    Returns:
        What was recorded after each pod.
    """
    code, weights = sharing_code(allocator, weights)
    ties = rng.random((len(arrivals.cpu), 2))
    w = np.asarray(weights if weights else (0.0,) * N_FEATURES, dtype=np.float64)
    arrived, allocated, frag, node = _replay(
        code, nodes.cpu, nodes.mem, nodes.gpus, nodes.model,
        arrivals.cpu, arrivals.mem, arrivals.num_gpu, arrivals.gpu_milli, arrivals.allowed,
        pod_shapes(arrivals), ties, typical_tuple(typical), w)
    return InflationRun(arrived, allocated, frag, node, nodes.total_gpus)


def run_inflation(nodes: SharingNodes, pods: SharingPods, cfg: InflationConfig) -> InflationRun:
    """One run of the inflation experiment (deterministic for a given ``cfg.seed``).

    Args:
        nodes: the cluster.
        pods: the pod list; the arrivals are drawn from it and the typical shapes are its own.
        cfg: the allocator, the ratio and the seed.

    Returns:
        What was recorded after each arriving pod.

    Example:
        >>> import numpy as np
        >>> from hpcpolicy.gpu.sharing import SharingNodes, SharingPods
        >>> nodes = SharingNodes(("n",), np.array([8000]), np.array([64]), np.array([2]),
        ...                      np.array([0]), ("T4",))
        >>> one = np.ones(1, dtype=np.int64)
        >>> pods = SharingPods(("p",), one, one, one, np.array([500]), np.ones((1, 1), bool))
        >>> run = run_inflation(nodes, pods, InflationConfig(allocator="fgd", ratio=1.0))
        >>> int(run.allocated[-1])
        2000
    """
    rng = np.random.default_rng(cfg.seed)
    arrivals = pods.take(draw_arrivals(pods, nodes.total_gpus, cfg.ratio, rng))
    return replay_pods(nodes, arrivals, cfg.allocator, typical_pods(pods, cfg.popularity), rng,
                       cfg.weights)


def inflation_curve(run: InflationRun, percents: I64) -> F64:
    """The allocated GPU share (%) at each of ``percents`` of arrived workload.

    As the paper's analysis: the mean over the pods whose arrived share, rounded to a whole
    percent, equals it (or lies within one percent of it when none does); NaN if none.
    """
    scale = run.total_gpus * GPU_MILLI / 100.0
    arrived = np.round(run.arrived / scale)
    allocated = np.round(run.allocated / scale, 2)
    out = np.full(len(percents), np.nan)
    for k, p in enumerate(percents):
        hit = arrived == p
        if not hit.any():
            hit = np.abs(arrived - p) <= 1
        if hit.any():
            out[k] = allocated[hit].mean()
    return out
