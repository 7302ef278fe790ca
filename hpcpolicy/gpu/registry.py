"""Every allocator by name, in one registry: what ``--allocator`` accepts and what each does.

Three kinds of allocator place jobs, each replayed by its own engine:

* ``pooled`` (``first-fit``): a job goes to the first node group whose totals hold it (the
  compiled engines, :mod:`hpcpolicy.sim.allocation`).
* ``node-level`` (:mod:`hpcpolicy.gpu.placement`): whole GPUs placed on the nodes of a pool,
  possibly over several nodes, with GPU speeds and the spread penalty.
* ``sharing`` (:mod:`hpcpolicy.gpu.allocators`, Weng et al., USENIX ATC 2023): every job on
  one node, as Kubernetes places a pod; the node's CPU, memory and each GPU's thousandths
  bind (:mod:`hpcpolicy.gpu.node_sharing`). A folder holding an exported learned allocator
  (:mod:`hpcpolicy.gpu.allocator_artifact`) is a sharing allocator too;
  :func:`hpcpolicy.gpu.sharing_code.sharing_code` resolves a sharing allocator for the
  compiled loop.

``SimConfig`` validation, the ``--allocator`` option's help, the engines, the inflation
experiment and the time-based replay all read this module; no other names the allocators.

Example:
    >>> allocator_kind("fgd"), allocator_kind("best-fit"), allocator_kind("first-fit")
    ('sharing', 'node-level', 'pooled')
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from hpcpolicy.errors import ConfigError

__all__ = ["ALLOCATORS", "BEST_FIT", "ENTRIES", "FIRST_AVAILABLE", "LEARNED", "NODE_LEVEL",
           "N_FEATURES", "POOLED", "SHARING", "SHARING_ALLOCATORS", "TOPOLOGY_AWARE",
           "AllocatorEntry", "allocator_help", "allocator_kind", "allocator_name",
           "check_allocator", "check_sharing", "places_on_nodes"]

POOLED, NODE_LEVEL, SHARING = "pooled", "node-level", "sharing"
_MANIFEST = "manifest.json"

FIRST_AVAILABLE, BEST_FIT, TOPOLOGY_AWARE = "first-available", "best-fit", "topology-aware"
"""The node-level allocators' names (:mod:`hpcpolicy.gpu.placement` implements them)."""

SHARING_ALLOCATORS = ("random", "dotprod", "clustering", "packing", "bestfit", "fgd")
"""The paper's allocators; the index of a name is its code in the compiled loop
(:mod:`hpcpolicy.gpu.allocators`, which this module must not import: it loads numba)."""
LEARNED = "learned"
"""The learned allocator given by its weights in memory (code 6); an exported one is given by
its folder."""
N_FEATURES = 8
"""Features of a (node, pod) placement the learned allocator weighs
(:func:`hpcpolicy.gpu.allocators.features`)."""


@dataclass(frozen=True)
class AllocatorEntry:
    """One allocator: its name, its kind and a few words for ``--help``."""

    name: str
    kind: str
    summary: str


_SHARING_SUMMARY = {
    "random": "a random node that fits",
    "dotprod": "the smallest dot product of free and asked CPU and GPU",
    "clustering": "nodes already running the same GPU shape",
    "packing": "partly used GPUs first",
    "bestfit": "the least CPU and GPU left over",
    "fgd": "Fragmentation Gradient Descent: the least growth of fragmentation",
}

ENTRIES: tuple[AllocatorEntry, ...] = (
    AllocatorEntry("first-fit", POOLED,
                   "the default: node groups by their totals; the compiled engine"),
    AllocatorEntry(FIRST_AVAILABLE, NODE_LEVEL, "the lowest-numbered free GPUs"),
    AllocatorEntry(BEST_FIT, NODE_LEVEL, "the tightest node, else the fewest nodes"),
    AllocatorEntry(TOPOLOGY_AWARE, NODE_LEVEL, "the closest GPUs: one node, else one rack"),
    *(AllocatorEntry(name, SHARING, _SHARING_SUMMARY[name]) for name in SHARING_ALLOCATORS),
)
"""Every named allocator, in the order ``--help`` lists them."""

ALLOCATORS = tuple(e.name for e in ENTRIES)
"""The allocator names (an exported learned allocator is given by its folder instead)."""

_KIND = {e.name: e.kind for e in ENTRIES}


def _is_artifact(name: str) -> bool:
    return name not in _KIND and (Path(name) / _MANIFEST).is_file()


def allocator_kind(name: str) -> str:
    """``pooled``, ``node-level`` or ``sharing`` (a learned allocator's folder is sharing).

    Raises:
        ConfigError: neither a registered name nor a folder with an allocator manifest.
    """
    if name in _KIND:
        return _KIND[name]
    if _is_artifact(name):
        return SHARING
    raise ConfigError(f"allocator {name!r} is not one of {', '.join(ALLOCATORS)}, nor a "
                      f"folder holding an exported allocator ({_MANIFEST}); give one of these")


def allocator_name(text: str) -> str:
    """``text`` as an allocator: a registered name in lower case (``FGD`` is ``fgd``), a
    learned allocator's folder as written."""
    text = text.strip()
    return text.lower() if text.lower() in _KIND else text


def check_allocator(name: str) -> None:
    """Raise :class:`ConfigError` (one line, listing the valid names) unless ``name`` is known."""
    allocator_kind(name)


def places_on_nodes(name: str) -> bool:
    """Whether ``name`` runs on the node-level GPU engine (node-level and sharing kinds)."""
    return allocator_kind(name) != POOLED


def check_sharing(name: str, weights: tuple[float, ...]) -> str | None:
    """What is wrong with a sharing allocator and its in-memory weights, or None.

    ``learned`` takes :data:`~hpcpolicy.gpu.allocators.N_FEATURES` weights; a named sharing
    allocator or a learned allocator's folder takes none.
    """
    if name == LEARNED:
        return (None if len(weights) == N_FEATURES else
                f"learned takes {N_FEATURES} weights, got {len(weights)}")
    if _KIND.get(name) != SHARING and not _is_artifact(name):
        return (f"{name!r} is not a GPU-sharing allocator: give one of "
                f"{', '.join(SHARING_ALLOCATORS)}, a learned allocator's folder, or learned with "
                "weights")
    return None if not weights else f"{name} takes no weights, got {len(weights)}"


def allocator_help() -> str:
    """The ``--allocator`` option's help, from the registry."""
    kinds = {kind: ", ".join(f"{e.name} ({e.summary})" for e in ENTRIES if e.kind == kind)
             for kind in (POOLED, NODE_LEVEL, SHARING)}
    return (f"How jobs are placed: {kinds[POOLED]}; placing GPUs on nodes, with the cluster's "
            f"GPU speeds and spread penalty: {kinds[NODE_LEVEL]}; or sharing GPUs, each job on "
            f"one node whose CPU, memory and GPU thousandths bind: {kinds[SHARING]}, or the "
            "folder of an exported learned allocator. Repeat to compare.")
