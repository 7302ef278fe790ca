"""``--compat NAME``: the conventions of a peer whose published figures we reproduce, decided once.

Each peer is one frozen :class:`CompatPreset` that names its behaviours: how its workload is
read from the log, whether its own engine replaces the project's (RLScheduler's fixed head
and backfilling, :mod:`hpcpolicy.sim.compat`), its machine model, and how it measures
utilisation. Code that behaves differently for a peer asks the preset for that one
behaviour, never compares the peer's name. ``None`` is the project's own conventions.

Example:
    >>> preset = compat_preset("rlscheduler")
    >>> preset.peer_engine, preset.exclusive_nodes, preset.utilization_end
    (True, True, 'last_start')
    >>> compat_preset(None).utilization_end
    'last_end'
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from hpcpolicy.errors import ConfigError

__all__ = ["COMPAT_NAMES", "SLURM_FLAVOUR", "CompatPreset", "compat_preset"]


@dataclass(frozen=True)
class CompatPreset:
    """The behaviours that differ between a peer's conventions and the project's."""

    name: str | None
    """The ``--compat`` name; None for the project's own conventions."""
    workload: Mapping[str, Any] = field(default_factory=dict)
    """:class:`~hpcpolicy.workload.WorkloadOptions` fields that read the log as the peer
    does (empty: the options' defaults)."""
    peer_engine: bool = False
    """The peer's engine (:mod:`hpcpolicy.sim.compat`, compiled only) replaces the project's
    fast and reference engines: a head fixed while it waits, and the peer's backfilling."""
    conservative_backfill: bool = True
    """Whether conservative backfilling exists under these conventions."""
    exclusive_nodes: bool = False
    """Jobs occupy whole nodes by default (the peer's machine model)."""
    utilization_end: str = "last_end"
    """Where the utilisation's span ends: ``last_end`` (the last job's end) or
    ``last_start`` (the last job's start, as the peer computes it)."""


_PRESETS: dict[str | None, CompatPreset] = {
    None: CompatPreset(None),
    # DIR-LAB/deep-batch-scheduler job.py: processors = max(allocated, requested); run time 0
    # dropped; run time -1 read as 10 s; requested time -1 replaced by the run time.
    "rlscheduler": CompatPreset(
        "rlscheduler",
        workload={"procs_from": "max", "walltime_fallback": "runtime",
                  "drop_zero_runtime": True, "unknown_run_time_s": 10,
                  "drop_unlogged_start": False},
        peer_engine=True, conservative_backfill=False, exclusive_nodes=True,
        utilization_end="last_start"),
    # ErenAri/HPC-workload-optimizer: processors = requested, else allocated; a record is
    # dropped only when submit, wait, run time or processors is missing; a missing requested
    # time is planned with the actual run time. Its strict FCFS is the project's engine.
    "hpcopt": CompatPreset(
        "hpcopt",
        workload={"procs_from": "requested", "walltime_fallback": "runtime",
                  "drop_zero_runtime": False, "unknown_run_time_s": None,
                  "drop_unlogged_start": True}),
}

COMPAT_NAMES: tuple[str, ...] = tuple(name for name in _PRESETS if name is not None)
"""Values of ``--compat``: the peers whose conventions can be selected."""


SLURM_FLAVOUR = "slurm"
"""``--compat slurm``: not a peer's conventions but Slurm's own scheduling, replayed by
:mod:`hpcpolicy.slurm.replay` on a node layout (:mod:`hpcpolicy.slurm.layout`). It replaces
the engine and needs that layout, so only ``simulate`` and ``fidelity`` offer it, which ask
for it by name; it has no preset."""


def compat_preset(name: str | None) -> CompatPreset:
    """The preset of ``--compat name`` (None: the project's own conventions).

    Raises:
        ConfigError: an unknown name; the message lists the known ones (and says where
            ``slurm`` is offered).
    """
    if name == SLURM_FLAVOUR:
        raise ConfigError("--compat slurm is a replay of Slurm itself, offered by `hpcpolicy "
                          "simulate` and `hpcpolicy fidelity` only; here use "
                          f"{' or '.join(COMPAT_NAMES)}, or drop --compat")
    try:
        return _PRESETS[name]
    except KeyError:
        raise ConfigError(f"compat {name!r} is not one of {', '.join(COMPAT_NAMES)}") \
            from None
