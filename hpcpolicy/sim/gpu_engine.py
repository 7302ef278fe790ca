"""The node-level GPU engine: the reference engine's event loop, with GPUs placed on nodes.

The queue, the policy, backfilling and every tie rule are the reference engine's
(:mod:`hpcpolicy.sim.reference`); what changes is *placement*:

1. A job runs in a pool (:class:`~hpcpolicy.gpu.topology.Topology`): the first pool, in the
   spec's order, whose free totals hold it and where its GPUs can be placed now. Every
   allocator shares this rule, so the pool (the GPU type) a job gets does not depend on the
   allocator.
2. The allocator (:mod:`hpcpolicy.gpu.placement`) picks the nodes of that pool its GPUs are
   on.
3. The job then runs for its logged run time times ``(speed of its logged GPU type / speed of
   the pool's type) ** sensitivity`` times ``1 + spread_penalty * D``, ``D`` being the largest
   distance between two of its GPUs (:class:`~hpcpolicy.cluster.GpuModel`), rounded up to
   whole seconds and cut at its request under ``kill_at_limit``. Planning (backfilling's
   reservations) still sees only requested walltimes.

With the penalty off and one speed, run times are the logged ones and every allocator gives
the pooled engines' schedule on the spec with one group per GPU type.

A *sharing* allocator (``fgd``, ``bestfit``, ..., or a learned allocator's folder; see
:mod:`hpcpolicy.gpu.registry`) replaces steps 1 and 2: the job goes on one node, chosen
among all nodes (or, for a job backfilling picked for a pool, among that pool's nodes), whose
CPU, memory and every GPU's thousandths bind (:class:`~hpcpolicy.gpu.node_sharing.NodeSharing`:
the documented choices are there). Its pool is that node's. One node means no spread.
Backfilling still plans on the pools' totals, so EASY's reservation for the head is a
promise about totals only: a backfilled job may take the node the head would have used, and
``check`` does not hold the engine to that promise. Sharing allocators start from the whole
machine: they refuse outages.

Outages (:mod:`hpcpolicy.sim.capacity`) are replayed for whole nodes: an outage of ``nodes``
nodes takes the last ``nodes`` nodes of its group (in spec order) out of its pool's totals and
their GPUs off the nodes, with the pooled engines' semantics (jobs on them finish; nothing new
is placed there until the outage ends). An outage of single cores is refused.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import numpy.typing as npt

from hpcpolicy.cluster import ClusterSpec
from hpcpolicy.errors import ConfigError
from hpcpolicy.gpu.node_sharing import NodeSharing
from hpcpolicy.gpu.placement import NODE_ALLOCATORS, NodeAllocator, get_node_allocator
from hpcpolicy.gpu.placer import Candidate, PlacementView, Placer
from hpcpolicy.gpu.registry import SHARING, allocator_kind
from hpcpolicy.gpu.topology import MILLI, Topology
from hpcpolicy.policies.base import Scorer
from hpcpolicy.sim.capacity import G, T, changes
from hpcpolicy.sim.prepare import Prepared, prepare
from hpcpolicy.sim.reference import ReferenceEngine
from hpcpolicy.sim.types import SimConfig
from hpcpolicy.workload import Workload

__all__ = ["GpuEngine", "gpu_prepare", "job_shares"]

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]

_HEURISTICS: dict[str, NodeAllocator] = {name: cls() for name, cls in NODE_ALLOCATORS.items()}


def job_shares(workload: Workload) -> I64:
    """(jobs,) thousandths of each GPU every job uses (1000 for whole GPUs and CPU jobs)."""
    if workload.gpu_share is None:
        return np.full(len(workload), MILLI, dtype=np.int64)
    return np.asarray(workload.gpu_share, dtype=np.int64)


def gpu_prepare(workload: Workload, cluster: ClusterSpec, cfg: SimConfig,
                topo: Topology) -> Prepared:
    """The engines' inputs with one "group" per pool and GPUs counted in thousandths.

    Raises:
        ConfigError: what :func:`~hpcpolicy.sim.prepare.prepare` raises.
    """
    prep = prepare(workload, cluster, dataclasses.replace(cfg, allocator="first-fit"))
    n = prep.n
    procs, gpus = np.asarray(workload.procs, np.int64), np.asarray(workload.gpus, np.int64)
    mem, share = np.asarray(workload.mem_mib, np.int64), job_shares(workload)
    cap = topo.pool_capacity
    need = np.empty((n, len(topo.pool_names), 4), dtype=np.int64)
    for p in range(len(topo.pool_names)):
        g_need = gpus * share
        cols = (procs, g_need, mem if cap[p, 2] else np.zeros(n, np.int64),
                np.zeros(n, np.int64))
        need[:, p, :] = np.stack(cols, axis=1)
        node_cap = topo.node_gpu_milli[topo.pool_nodes(p)]
        possible = (procs <= cap[p, 0]) & (g_need <= cap[p, 1]) & (cols[2] <= cap[p, 2])
        # A fractional job needs one node that can hold it.
        possible &= (share >= MILLI) | (g_need <= node_cap.max(initial=0))
        need[~possible, p, :] = -1
    never = np.asarray(~(need[:, :, 0] >= 0).any(axis=1))
    return dataclasses.replace(prep, need=need, capacity=cap.copy(), never_fits=never,
                               free0=cap.copy(), cap=_pool_changes(prep.cap, cluster, topo))


def _pool_changes(changes: I64, cluster: ClusterSpec, topo: Topology) -> I64:
    """Capacity changes by node group made changes by pool, GPUs in thousandths.

    Raises:
        ConfigError: an outage takes single cores rather than whole nodes.
    """
    out = changes.copy()
    for c in range(changes.shape[1]):
        grp = cluster.groups[int(changes[G, c])]
        nodes = int(changes[G + 4, c])
        if int(changes[G + 1, c]) != nodes * grp.cores:
            raise ConfigError(f"outage at t={int(changes[T, c])} s takes single cores of group "
                              f"{grp.name!r}; allocator node-level placement replays whole-node "
                              "outages only: give it nodes instead of cores")
        out[G, c] = topo.node_pool[np.flatnonzero(topo.node_group == changes[G, c])[0]]
        out[G + 2, c] = changes[G + 2, c] * MILLI
    return out


class GpuEngine(ReferenceEngine):
    """One replay with GPUs placed on nodes by a node-level allocator.

    Example:
        >>> from hpcpolicy.cluster import NodeGroup
        >>> from hpcpolicy.policies import get_policy
        >>> z = np.zeros(2, dtype=np.int64)
        >>> w = Workload(job_id=np.array(["a", "b"], dtype=object), submit=z,
        ...     run_time=np.array([100, 100]), req_walltime=np.array([100, 100]),
        ...     procs=np.array([1, 1]), nodes=z, gpus=np.array([2, 4]), mem_mib=z,
        ...     user=z.astype(np.int32), partition=z.astype(np.int32), logged_start=z - 1)
        >>> spec = ClusterSpec((NodeGroup("g", 2, 8, gpus=4, gpu_type="a100"),))
        >>> cfg = SimConfig(allocator="first-available")
        >>> eng = GpuEngine(w, spec, cfg, get_policy("fcfs").bind(w, spec, cfg))
        >>> out = eng.run()
        >>> out["start"].tolist(), out["placement"]["nodes"].tolist()
        ([0, 0], [1, 2])
    """

    def __init__(self, workload: Workload, cluster: ClusterSpec, cfg: SimConfig,
                 scorer: Scorer, placer: Placer | None = None) -> None:
        if cfg.exclusive_nodes:
            raise ConfigError(f"allocator {cfg.allocator!r} places GPUs on shared nodes; "
                              "drop --exclusive-nodes, or use --allocator first-fit with it")
        if cfg.preset.peer_engine:
            raise ConfigError(f"allocator {cfg.allocator!r} follows the project's own "
                              f"semantics; drop --compat {cfg.compat} or use --allocator "
                              "first-fit")
        self.topo = Topology.from_cluster(cluster)
        prep = gpu_prepare(workload, cluster, cfg, self.topo)
        self.sharing = self._sharing(workload, cluster, cfg, placer)
        if self.sharing is not None:
            one_node = np.asarray(workload.nodes) <= 1
            prep = dataclasses.replace(
                prep, never_fits=prep.never_fits | self.sharing.never_fits(one_node))
        super().__init__(prep, dataclasses.replace(cfg, allocator="first-fit"), scorer,
                         workload)
        self.cfg = cfg
        self.placer = placer
        self.node_alloc = (get_node_allocator(cfg.allocator) if cfg.allocator in NODE_ALLOCATORS
                           else None)
        if placer is None and self.node_alloc is None and self.sharing is None:
            raise ConfigError(f"allocator {cfg.allocator!r} does not place GPUs on nodes; use "
                              f"one of {', '.join(NODE_ALLOCATORS)}")
        self._chosen: dict[int, I64] = {}
        self._shared: dict[int, tuple[int, int]] = {}
        self.share = job_shares(workload)
        self.speed = self._speed_factors(workload)
        self.node_free = self.topo.node_gpu_milli.copy()
        self.pool_nodes = [self.topo.pool_nodes(p) for p in range(len(self.topo.pool_names))]
        self.held: dict[int, tuple[I64, I64]] = {}
        n = prep.n
        self.dur = prep.dur.copy()
        self.killed = prep.killed.copy()
        self.nodes_used = np.zeros(n, dtype=np.int64)
        self.racks_used = np.zeros(n, dtype=np.int64)
        self.distance = np.zeros(n, dtype=np.float64)
        self.spread_s = np.zeros(n, dtype=np.int64)
        self._frag = _Fragmentation(self.topo.node_gpu_milli)
        self._now = 0
        by_group = changes(cluster, cfg.outages)
        self._down = [np.flatnonzero(self.topo.node_group == g)[::-1][:abs(int(k))]
                      for g, k in zip(by_group[G], by_group[G + 4], strict=True)]
        """The nodes of each capacity change: the last ones of its group."""

    def _sharing(self, workload: Workload, cluster: ClusterSpec, cfg: SimConfig,
                 placer: Placer | None) -> NodeSharing | None:
        """The sharing allocator's state, None for the other allocators or with a placer.

        Raises:
            ConfigError: outages with a sharing allocator.
        """
        if placer is not None or allocator_kind(cfg.allocator) != SHARING:
            return None
        if cfg.outages:
            raise ConfigError(f"allocator {cfg.allocator!r} shares GPUs on a machine without "
                              "outages; drop the site model's outages or use a node-level "
                              "allocator (best-fit, ...)")
        return NodeSharing(workload, cluster, self.topo, cfg.allocator, job_shares(workload))

    def _speed_factors(self, w: Workload) -> F64:
        """(jobs, pools) run-time factor of each GPU job in each pool from GPU speeds."""
        topo, model = self.topo, self.topo.model
        known = {name.lower(): float(topo.pool_speed[p])
                 for p, name in enumerate(topo.pool_names)}
        logged = np.ones(len(w), dtype=np.float64)
        if w.gpu_type is not None:
            type_speed = np.array([known.get(t.lower(), 1.0) for t in w.gpu_types] + [1.0])
            logged = type_speed[np.asarray(w.gpu_type, dtype=np.int64)]  # -1 -> the last: 1.0
        sens_of = np.array([model.sensitivity_of(name) for name in w.partitions]
                           or [model.sensitivity], dtype=np.float64)
        sens = sens_of[np.asarray(w.partition, dtype=np.int64)] if w.partitions else (
            np.full(len(w), model.sensitivity))
        factor = (logged[:, None] / topo.pool_speed[None, :]) ** sens[:, None]
        factor[np.asarray(w.gpus) == 0] = 1.0
        return factor

    # ------------------------------------------------------------------ placement hooks
    def _pool_fits(self, j: int, g: int) -> bool:
        """Whether pool ``g``'s free totals hold job ``j`` now."""
        return bool(self.p.need[j, g, 0] >= 0 and (self.p.need[j, g] <= self.free[g]).all())

    def _where(self, j: int, g: int) -> I64 | None:
        """Where job ``j`` would go in pool ``g`` now (thousandths per node), or None."""
        return self._place(j, g) if self._pool_fits(j, g) else None

    def _place(self, j: int, g: int, allocator: NodeAllocator | None = None) -> I64 | None:
        nodes = self.pool_nodes[g]
        if self.p.need[j, g, 1] == 0:
            return np.zeros(len(nodes), dtype=np.int64)
        alloc = allocator or self.node_alloc
        assert alloc is not None
        return alloc.place(self.node_free[nodes], self.topo.node_rack[nodes],
                           int(self.p.need[j, g, 1] // self.share[j]), int(self.share[j]))

    def candidates(self, j: int, pools: range | list[int]) -> list[Candidate]:
        """Every distinct placement the heuristics propose for job ``j`` in ``pools`` now."""
        out: list[Candidate] = []
        for g in pools:
            if not self._pool_fits(j, g):
                continue
            seen: list[I64] = []
            for name, alloc in _HEURISTICS.items():
                take = self._place(j, g, alloc)
                if take is None or any(np.array_equal(take, t) for t in seen):
                    continue
                seen.append(take)
                nodes = self.pool_nodes[g][take > 0]
                out.append(Candidate(
                    pool=g, take=take, allocator=name, nodes=len(nodes),
                    racks=len(np.unique(self.topo.node_rack[nodes])),
                    distance=self.topo.spread_distance(nodes),
                    speed_factor=float(self.speed[j, g])))
        return out

    def _choose(self, j: int, pools: range | list[int]) -> int:
        """The learned placer's pool for job ``j`` (its nodes kept for ``_hold``), or -1."""
        assert self.placer is not None
        cands = self.candidates(j, pools)
        if not cands:
            return -1
        view = PlacementView(now=self._now, job=j, workload=self.workload,
                             candidates=tuple(cands), node_free=self.node_free.copy(),
                             pool_free=self.free.copy(), topology=self.topo)
        k = int(self.placer.choose(view))
        if not 0 <= k < len(cands):
            raise ConfigError(f"the placer chose candidate {k} of {len(cands)} for job "
                              f"{self.workload.job_id[j]}")
        self._chosen[j] = cands[k].take
        return cands[k].pool

    def _share(self, j: int, pool: int | None) -> int:
        """The sharing allocator's pool for job ``j`` (its node kept for ``_hold``), or -1."""
        assert self.sharing is not None
        got = self.sharing.choose(j, pool)
        if got is None:
            return -1
        self._shared[j] = got
        return int(self.topo.node_pool[got[0]])

    def _pick(self, j: int) -> int:
        if self.sharing is not None:
            return self._share(j, None)
        if self.placer is not None:
            return self._choose(j, range(len(self.pool_nodes)))
        for g in range(len(self.pool_nodes)):
            if self._where(j, g) is not None:
                return g
        return -1

    def _placeable(self, j: int, g: int) -> bool:
        if self.sharing is not None:
            return self._share(j, g) >= 0
        if self.placer is not None:
            return self._choose(j, [g]) >= 0
        return self._where(j, g) is not None

    def _pass(self, now: int) -> None:
        self._now = now
        super()._pass(now)

    def _hold(self, j: int, g: int, now: int) -> int:
        # The pool's totals are already taken by the caller.
        take: I64 | None
        if self.sharing is not None:
            take = self._shared_take(j, g)
        elif self.placer is not None:
            take = self._chosen.pop(j)
        else:
            take = self._place(j, g)
        assert take is not None, "the engine starts only jobs that were placeable"
        nodes = self.pool_nodes[g][take > 0]
        self.node_free[nodes] -= take[take > 0]
        self._frag.change(now, self.node_free)
        self.held[j] = (nodes, take[take > 0])
        d = self.topo.spread_distance(nodes)
        self.nodes_used[j] = len(nodes)
        self.racks_used[j] = len(np.unique(self.topo.node_rack[nodes]))
        self.distance[j] = d
        run = int(self.workload.run_time[j])
        fast = math.ceil(run * float(self.speed[j, g]))
        slow = math.ceil(run * float(self.speed[j, g]) * (1.0 + self.topo.model.spread_penalty * d))
        self.spread_s[j] = slow - fast
        req = int(self.p.req[j])
        self.killed[j] = self.cfg.kill_at_limit and slow > req
        self.dur[j] = min(slow, req) if self.killed[j] else slow
        return int(self.dur[j])

    def _shared_take(self, j: int, g: int) -> I64:
        """Hold job ``j`` on the node the sharing allocator chose; thousandths per pool node."""
        assert self.sharing is not None
        node, mask = self._shared.pop(j)
        self.sharing.hold(j, node, mask)
        take = np.zeros(len(self.pool_nodes[g]), dtype=np.int64)
        take[int(np.searchsorted(self.pool_nodes[g], node))] = self.sharing.gpu_milli(j)
        return take

    def _trusted(self, now: int) -> bool:
        # EASY planned on pool totals; a sharing allocator's nodes can delay the head.
        return self.sharing is None and super()._trusted(now)

    def _change(self, c: int) -> None:
        super()._change(c)  # the pool's totals
        nodes = self._down[c]
        sign = 1 if self.p.cap[G + 4, c] > 0 else -1
        self.node_free[nodes] += sign * self.topo.node_gpu_milli[nodes]

    def _release(self, j: int, now: int) -> None:
        if self.sharing is not None and j in self.sharing.held:
            self.sharing.release(j)
        if j not in self.held:
            return
        nodes, take = self.held.pop(j)
        self.node_free[nodes] += take
        self._frag.change(now, self.node_free)

    # ------------------------------------------------------------------ the run
    def run(self) -> dict[str, Any]:
        """Replay every event; the reference engine's outcome plus placement facts."""
        out = super().run()
        gpus = np.asarray(self.workload.gpus, dtype=np.int64)
        out.update(
            dur=self.dur, killed=self.killed, alloc_gpus=gpus,
            placement={"nodes": self.nodes_used, "racks": self.racks_used,
                       "distance": self.distance, "spread_s": self.spread_s,
                       "speed_factor": self.speed[np.arange(len(self.dur)),
                                                  np.maximum(self.group, 0)],
                       "gpu_milli": gpus * self.share},
        )
        out["stats"]["gpu_fragmentation"] = self._frag.mean()
        return out


class _Fragmentation:
    """Time average of the free whole GPUs stranded on nodes that are partly in use, as a
    share of all GPUs: GPUs that a job wanting whole nodes can no longer get."""

    def __init__(self, capacity: I64) -> None:
        self.capacity = capacity
        self.total = float(capacity.sum())
        self.first: int | None = None
        self.last = 0
        self.area = 0.0
        self.value = 0.0

    def change(self, now: int, free: I64) -> None:
        """Account for the time since the last change; ``free`` is the state from now on."""
        if self.first is None:
            self.first = self.last = now
        self.area += self.value * (now - self.last)
        partly = (free > 0) & (free < self.capacity)
        self.value = float((free[partly] // MILLI).sum()) / self.total if self.total else 0.0
        self.last = now

    def mean(self) -> float | None:
        """The time average, None before any GPU was placed."""
        if self.first is None or self.last <= self.first:
            return None
        return self.area / (self.last - self.first)
