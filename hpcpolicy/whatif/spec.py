"""What a what-if compares: ``POLICY[+BACKFILL][@ALLOCATOR]`` specs for the baseline and the
candidates.

A spec names a policy (a heuristic such as ``sjf``, or a trained policy directory such as
``runs/x/policy``) and, after a ``+``, a backfilling mode (``none``, ``easy``,
``conservative``). Without a ``+`` the mode is :data:`DEFAULT_BACKFILL`, because EASY is what
most production schedulers run (Slurm's ``sched/backfill`` is EASY-like). After an ``@``, an
allocator (:data:`~hpcpolicy.sim.types.ALLOCATORS`): on a GPU partition, ``@topology-aware``
places GPUs on nodes, with the cluster's GPU speeds and spread penalty; without one, the
pooled ``first-fit``.

Example:
    >>> parse_run_spec("sjf+easy")
    RunSpec(text='sjf+easy', policy='sjf', backfill='easy', allocator='first-fit')
    >>> parse_run_spec("runs/a/policy").backfill
    'easy'
    >>> parse_run_spec("fcfs@best-fit").text
    'fcfs+easy@best-fit'
"""

from __future__ import annotations

from dataclasses import dataclass

from hpcpolicy.errors import ConfigError
from hpcpolicy.sim.types import ALLOCATORS, BACKFILL_MODES

__all__ = ["DEFAULT_BACKFILL", "RunSpec", "parse_run_spec"]

DEFAULT_BACKFILL = "easy"
"""Backfilling of a spec that names none."""


@dataclass(frozen=True)
class RunSpec:
    """A policy and a backfilling mode, as the user wrote them."""

    text: str
    """The spec in its normal form, ``policy+backfill`` and ``@allocator`` unless it is
    ``first-fit`` (used in run ids and reports)."""
    policy: str
    """Heuristic name (lower case) or path of a trained policy."""
    backfill: str
    """none, easy or conservative."""
    allocator: str = "first-fit"
    """How jobs are placed (:data:`~hpcpolicy.sim.types.ALLOCATORS`)."""


def parse_run_spec(text: str) -> RunSpec:
    """Split ``POLICY[+BACKFILL][@ALLOCATOR]``; the policy is resolved when the run starts.

    Raises:
        ConfigError: an empty spec, or an unknown backfilling mode or allocator.
    """
    raw, at, allocator = text.strip().rpartition("@")
    if not at:
        raw, allocator = allocator, "first-fit"
    allocator = allocator.strip().lower()
    if allocator not in ALLOCATORS:
        raise ConfigError(f"policy spec {text!r}: allocator {allocator!r} is not one of "
                          f"{', '.join(ALLOCATORS)} (write e.g. fcfs+easy@topology-aware)")
    policy, plus, mode = raw.rpartition("+")
    if not plus:
        policy, mode = raw, DEFAULT_BACKFILL
    policy, mode = policy.strip(), mode.strip().lower()
    if not policy:
        raise ConfigError(f"policy spec {text!r} names no policy; write e.g. sjf+easy")
    if mode not in BACKFILL_MODES:
        raise ConfigError(f"policy spec {text!r}: backfilling {mode!r} is not one of "
                          f"{', '.join(BACKFILL_MODES)} (write e.g. sjf+easy)")
    if "/" not in policy and "\\" not in policy:
        policy = policy.lower()
    suffix = "" if allocator == "first-fit" else f"@{allocator}"
    return RunSpec(text=f"{policy}+{mode}{suffix}", policy=policy, backfill=mode,
                   allocator=allocator)
