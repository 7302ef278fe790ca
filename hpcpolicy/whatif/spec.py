"""What a what-if compares: ``POLICY[+BACKFILL]`` specs for the baseline and the candidates.

A spec names a policy (a heuristic such as ``sjf``, or a trained policy directory such as
``runs/x/policy``) and, after a ``+``, a backfilling mode (``none``, ``easy``,
``conservative``). Without a ``+`` the mode is :data:`DEFAULT_BACKFILL`, because EASY is what
most production schedulers run (Slurm's ``sched/backfill`` is EASY-like).

Example:
    >>> parse_run_spec("sjf+easy")
    RunSpec(text='sjf+easy', policy='sjf', backfill='easy')
    >>> parse_run_spec("runs/a/policy").backfill
    'easy'
"""

from __future__ import annotations

from dataclasses import dataclass

from hpcpolicy.errors import ConfigError
from hpcpolicy.sim.types import BACKFILL_MODES

__all__ = ["DEFAULT_BACKFILL", "RunSpec", "parse_run_spec"]

DEFAULT_BACKFILL = "easy"
"""Backfilling of a spec that names none."""


@dataclass(frozen=True)
class RunSpec:
    """A policy and a backfilling mode, as the user wrote them."""

    text: str
    """The spec in its normal form, ``policy+backfill`` (used in run ids and reports)."""
    policy: str
    """Heuristic name (lower case) or path of a trained policy."""
    backfill: str
    """none, easy or conservative."""


def parse_run_spec(text: str) -> RunSpec:
    """Split ``POLICY[+BACKFILL]``; the policy itself is resolved when the run starts.

    Raises:
        ConfigError: an empty spec, or an unknown backfilling mode after the ``+``.
    """
    raw = text.strip()
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
    return RunSpec(text=f"{policy}+{mode}", policy=policy, backfill=mode)
