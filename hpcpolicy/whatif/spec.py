"""What a what-if compares: ``POLICY[+BACKFILL][@ALLOCATOR]`` specs for the baseline and the
candidates, and, with the site's slurm.conf, Slurm configuration changes.

A spec names a policy (a heuristic such as ``sjf``, or a trained policy directory such as
``runs/x/policy``) and, after a ``+``, a backfilling mode (``none``, ``easy``,
``conservative``). Without a ``+`` the mode is :data:`DEFAULT_BACKFILL`, because EASY is what
most production schedulers run (Slurm's ``sched/backfill`` is EASY-like). After an ``@``, an
allocator (:data:`~hpcpolicy.sim.types.ALLOCATORS`): on a GPU partition, ``@topology-aware``
places GPUs on nodes, with the cluster's GPU speeds and spread penalty; without one, the
pooled ``first-fit``.

With the site's slurm.conf (``whatif --slurm-conf``), the baseline is that configuration
replayed in the Slurm world (:func:`slurm_baseline`) and a candidate may be a change to it
written as :func:`hpcpolicy.slurmconf.parse_candidate` reads it (``PriorityWeightAge=5000``,
``qos normal MaxJobsPerUser=50``, ``conf:new-slurm.conf``); :func:`parse_candidate_spec`
tells the two kinds of candidate apart.

Example:
    >>> parse_run_spec("sjf+easy")
    RunSpec(text='sjf+easy', policy='sjf', backfill='easy', allocator='first-fit', change=None)
    >>> parse_run_spec("runs/a/policy").backfill
    'easy'
    >>> parse_run_spec("fcfs@best-fit").text
    'fcfs+easy@best-fit'
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from hpcpolicy.errors import ConfigError
from hpcpolicy.gpu.registry import allocator_name, check_allocator
from hpcpolicy.policies.heuristics import HEURISTICS
from hpcpolicy.sim.types import BACKFILL_MODES
from hpcpolicy.slurmconf import parse_candidate

__all__ = ["DEFAULT_BACKFILL", "SLURM_POLICY", "RunSpec", "parse_candidate_spec",
           "parse_run_spec", "parse_specs", "slurm_baseline"]

DEFAULT_BACKFILL = "easy"
"""Backfilling of a spec that names none."""
SLURM_POLICY = "slurm"
"""The policy of a run in the Slurm world: Slurm's own scheduler as its configuration sets
it (priority/multifactor, limits, the main and backfill passes)."""
SLURM_BACKFILL = "conservative"
"""The backfilling a Slurm-world run is labelled with: sched/backfill plans a reservation for
every higher-priority job it tests (up to bf_max_job_test), not only the first."""
_CHANGE_HEADS = ("conf:", "qos ", "partition ", "partitionname=", "assoc ",
                 "schedulerparameters:")
_CHANGE_HINT = ("PriorityWeightAge=5000, 'qos normal MaxJobsPerUser=50', "
                "'partition batch MaxTime=2-0', conf:FILE")


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
    change: str | None = None
    """None for a policy; for a run in the Slurm world, the configuration change it replays
    (as written, :func:`hpcpolicy.slurmconf.parse_candidate`), ``""`` for the site's
    configuration as given."""


def parse_run_spec(text: str) -> RunSpec:
    """Split ``POLICY[+BACKFILL][@ALLOCATOR]``; the policy is resolved when the run starts.

    Raises:
        ConfigError: an empty spec, or an unknown backfilling mode or allocator.
    """
    raw, at, allocator = text.strip().rpartition("@")
    if not at:
        raw, allocator = allocator, "first-fit"
    allocator = allocator_name(allocator)  # a learned allocator's folder keeps its case
    try:
        check_allocator(allocator)
    except ConfigError as exc:
        raise ConfigError(f"policy spec {text!r}: {exc} (write e.g. "
                          "fcfs+easy@topology-aware)") from None
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


def slurm_baseline(slurm_conf: str) -> RunSpec:
    """The baseline of a what-if with the site's slurm.conf: that configuration as given.

    Example:
        >>> slurm_baseline("/etc/slurm/slurm.conf").text
        'slurm.conf'
    """
    return RunSpec(text=Path(slurm_conf).name, policy=SLURM_POLICY, backfill=SLURM_BACKFILL,
                   change="")


def _looks_like_change(text: str) -> bool:
    """Whether ``text`` is written as a configuration change rather than a policy."""
    low = text.lower()
    return "=" in low or low.startswith(_CHANGE_HEADS)


def parse_candidate_spec(text: str, slurm_conf: str | None = None) -> RunSpec:
    """A candidate: a policy (:func:`parse_run_spec`), or a change to the site's slurm.conf.

    A text written as a change (a ``Key=Value``, or one of the heads ``conf:``, ``qos``,
    ``partition``, ``assoc``, ``SchedulerParameters:``) is read as one; anything else is a
    policy: a heuristic's name or an existing trained policy folder.

    Raises:
        ConfigError: one line naming the fix: a change that does not parse, a change without
            ``slurm_conf``, or a text that is neither a policy nor a change.

    Example:
        >>> parse_candidate_spec("PriorityWeightAge=5000", "slurm.conf").change
        'PriorityWeightAge=5000'
        >>> parse_candidate_spec("sjf", "slurm.conf").text
        'sjf+easy'
    """
    stripped = " ".join(text.split())
    if _looks_like_change(stripped):
        parse_candidate(stripped)  # its own one-line error for a change that does not parse
        if slurm_conf is None:
            raise ConfigError(f"candidate {stripped!r} is a Slurm configuration change: give "
                              "the site's slurm.conf it changes with --slurm-conf FILE")
        return RunSpec(text=stripped, policy=SLURM_POLICY, backfill=SLURM_BACKFILL,
                       change=stripped)
    spec = parse_run_spec(text)
    if spec.policy in HEURISTICS or Path(spec.policy).exists():
        return spec
    raise ConfigError(f"candidate {text!r} is neither a heuristic ({', '.join(HEURISTICS)}), "
                      "a trained policy folder (runs/NAME/policy) nor a Slurm configuration "
                      f"change ({_CHANGE_HINT}, with --slurm-conf FILE)")


def parse_specs(baseline: str, candidates: Sequence[str],
                slurm_conf: str | None = None) -> tuple[RunSpec, list[RunSpec]]:
    """The baseline (slurm.conf as given when ``slurm_conf`` is set, else ``baseline``) and
    the candidates (:func:`parse_candidate_spec`).

    Raises:
        ConfigError: a spec or change that does not parse (one line naming the fix).
    """
    base = parse_run_spec(baseline) if slurm_conf is None else slurm_baseline(slurm_conf)
    return base, [parse_candidate_spec(c, slurm_conf) for c in candidates]
