"""Which GPUs of a pool a job gets: first-available, best-fit and topology-aware.

Every allocator sees the free GPU thousandths of the pool's nodes and returns how much it
takes from each, or None when the job cannot be placed now. The rules they share:

* a job using whole GPUs takes whole GPUs (a node with 2,540 free thousandths offers 2) and
  may spread over any nodes of the pool;
* a job using a fraction of a GPU (``share < 1000``) takes ``gpus * share`` on one node.

So a whole-GPU job can be placed exactly when the pool has enough whole free GPUs in total,
whatever the allocator: the allocators decide *where*, never *whether*. With the spread
penalty off and equal speeds, every allocator therefore gives the pooled simulator's
schedule (a test checks this); with it on, where the GPUs are changes how long jobs run.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
import numpy.typing as npt

from hpcpolicy.errors import ConfigError
from hpcpolicy.gpu.registry import BEST_FIT, FIRST_AVAILABLE, TOPOLOGY_AWARE
from hpcpolicy.gpu.topology import MILLI

__all__ = ["NODE_ALLOCATORS", "BestFit", "FirstAvailable", "NodeAllocator", "TopologyAware",
           "get_node_allocator"]

I64 = npt.NDArray[np.int64]


class NodeAllocator(Protocol):
    """Chooses the nodes (and how much of each) a job's GPUs are on."""

    @property
    def name(self) -> str:
        """Registry name."""
        ...

    def place(self, free: I64, racks: I64, gpus: int, share: int) -> I64 | None:
        """Thousandths taken from each node (same length as ``free``), or None.

        Args:
            free: free GPU thousandths of each node of the pool, in spec order.
            racks: rack code of each of those nodes.
            gpus: GPUs the job uses (> 0).
            share: thousandths of each GPU it uses (1000 = whole GPUs).
        """
        ...


def _fractional(free: I64, need: int, pick_tightest: bool) -> I64 | None:
    """One node holding ``need`` thousandths: the first such node, or the tightest."""
    fits = np.flatnonzero(free >= need)
    if fits.size == 0:
        return None
    node = int(fits[np.argmin(free[fits])]) if pick_tightest else int(fits[0])
    take = np.zeros_like(free)
    take[node] = need
    return take


def _fill(units: I64, k: int, order: I64) -> I64:
    """Whole GPUs taken node by node in ``order`` until ``k`` are taken (units has enough)."""
    take = np.zeros_like(units)
    left = k
    for node in order.tolist():
        got = min(int(units[node]), left)
        take[node] = got
        left -= got
        if left == 0:
            break
    return take


def _fewest_nodes(units: I64, k: int, among: I64) -> I64:
    """Whole GPUs on as few of the nodes ``among`` as possible, the last one chosen as tight
    as it can be (the classic best-fit for a request over several bins)."""
    order = among[np.argsort(-units[among], kind="stable")]
    take = np.zeros_like(units)
    left = k
    for i, node in enumerate(order.tolist()):
        if units[node] >= left:
            rest = order[i:]
            ok = rest[units[rest] >= left]
            last = int(ok[np.argmin(units[ok])])  # tightest node that finishes the job
            take[last] = left
            return take
        take[node] = units[node]
        left -= int(units[node])
    raise AssertionError("caller checked that the nodes hold k GPUs")


class _Rule:
    """What every allocator does alike: a fractional job goes on one node, a whole-GPU job
    only when the pool has enough whole free GPUs; :meth:`whole` says where."""

    name = ""
    tightest_node = True
    """Whether a fractional job goes on the tightest node that holds it (else the first)."""

    def place(self, free: I64, racks: I64, gpus: int, share: int) -> I64 | None:
        """See :class:`NodeAllocator`."""
        if share < MILLI:
            return _fractional(free, gpus * share, self.tightest_node)
        units = free // MILLI
        if int(units.sum()) < gpus:
            return None
        return self.whole(units, racks, gpus) * MILLI

    def whole(self, units: I64, racks: I64, gpus: int) -> I64:
        """Whole GPUs taken from each node; ``units`` (free whole GPUs) holds ``gpus``."""
        raise NotImplementedError


class FirstAvailable(_Rule):
    """GPUs in node order: the lowest-numbered free GPUs, as a plain node list would give."""

    name = FIRST_AVAILABLE
    tightest_node = False

    def whole(self, units: I64, racks: I64, gpus: int) -> I64:
        """See :meth:`_Rule.whole`."""
        return _fill(units, gpus, np.arange(len(units)))


class BestFit(_Rule):
    """The tightest single node that holds the job; else as few nodes as possible."""

    name = BEST_FIT

    def whole(self, units: I64, racks: I64, gpus: int) -> I64:
        """See :meth:`_Rule.whole`."""
        return _fewest_nodes(units, gpus, np.arange(len(units)))


class TopologyAware(_Rule):
    """The GPUs closest together: one node if any holds the job (the tightest), else one rack
    (the rack needing the fewest nodes, then the fullest), else as few racks as possible,
    filling the emptiest racks first."""

    name = TOPOLOGY_AWARE

    def whole(self, units: I64, racks: I64, gpus: int) -> I64:
        """See :meth:`_Rule.whole`."""
        best: tuple[int, int, int] | None = None
        for r in np.unique(racks).tolist():
            nodes = np.flatnonzero(racks == r)
            total = int(units[nodes].sum())
            if total < gpus:
                continue
            used = int(np.count_nonzero(_fewest_nodes(units, gpus, nodes)))
            key = (used, total, r)
            if best is None or key < best:
                best = key
        if best is not None:
            return _fewest_nodes(units, gpus, np.flatnonzero(racks == best[2]))
        rack_total = np.bincount(racks, weights=units).astype(np.int64)
        # Emptiest rack first, and inside a rack the emptiest node first.
        return _fill(units, gpus, np.lexsort((-units, -rack_total[racks])))


NODE_ALLOCATORS: dict[str, type[_Rule]] = {
    rule.name: rule for rule in (FirstAvailable, BestFit, TopologyAware)}
"""The node-level allocators by name (listed with the others in :mod:`hpcpolicy.gpu.registry`)."""


def get_node_allocator(name: str) -> NodeAllocator:
    """The node-level allocator called ``name``.

    Raises:
        ConfigError: unknown name (the message lists the valid ones).
    """
    try:
        return NODE_ALLOCATORS[name]()
    except KeyError:
        raise ConfigError(f"allocator {name!r} is not one of "
                          f"{', '.join(NODE_ALLOCATORS)}") from None
