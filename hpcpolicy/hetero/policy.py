"""Policies that choose GPU types: the rules the trained DQN is compared with, and the base
it is deployed on.

Each is an ordinary :class:`~hpcpolicy.policies.base.Policy` whose queue order is FCFS
(``bind``), plus a placer (``bind_placer``, :class:`~hpcpolicy.gpu.placer.PlacerPolicy`), so
``simulate(..., policy=P)`` runs it on the node-level GPU engine. At every start the placer
takes the job's only possible type without asking (:func:`~hpcpolicy.hetero.observe.
only_choice`), else the type its rule picks, and inside that type the most compact candidate
placement, exactly as in the training environment.

* :class:`hpcpolicy.deploy.gpu_type.GpuDqnPolicy`: the exported DQN, greedy in Q over the
  valid types;
* ``rule_policy("first")``: the first type in spec order that can hold the job now (the
  engine's own choice without a placer);
* ``rule_policy("fastest")``: the type where the job would run shortest (speed factor and
  spread penalty), the first of equals.

Example:
    >>> rule_policy("fastest").name
    'gpu-fastest'
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from hpcpolicy.cluster import ClusterSpec
from hpcpolicy.errors import ArtifactError, ConfigError
from hpcpolicy.gpu.placer import PlacementView
from hpcpolicy.hetero.observe import PoolObserver, only_choice
from hpcpolicy.policies.base import Scorer
from hpcpolicy.policies.heuristics import get_policy
from hpcpolicy.policies.settings import RunSettings
from hpcpolicy.workload import Workload

__all__ = ["RULES", "TypePlacer", "TypePolicy", "rule_policy"]

Rule = Callable[[PlacementView, list[int | None], PoolObserver], int]
"""``rule(view, choices, observer) -> action``: a GPU type whose choice is not None."""


def first_type(view: PlacementView, choices: list[int | None], observer: PoolObserver) -> int:
    """The first valid type in spec order."""
    return next(a for a, k in enumerate(choices) if k is not None)


def fastest_type(view: PlacementView, choices: list[int | None], observer: PoolObserver) -> int:
    """The valid type with the smallest run-time factor (the first of equals)."""
    factors = [np.inf if k is None else observer.runtime_factor(view.candidates[k])
               for k in choices]
    return int(np.argmin(factors))


RULES: dict[str, Rule] = {"first": first_type, "fastest": fastest_type}
"""Rule-based GPU-type choosers, by name."""


class TypePlacer:
    """One run's placer: the job's only type, else ``rule``'s; the most compact candidate."""

    def __init__(self, observer: PoolObserver, rule: Rule) -> None:
        self.observer = observer
        self.rule = rule

    def choose(self, view: PlacementView) -> int:
        """Index into ``view.candidates`` (the placer protocol)."""
        choices = self.observer.choices(view)
        k = only_choice(view, choices)
        if k is None:
            a = self.rule(view, choices, self.observer)
            k = choices[a] if 0 <= a < len(choices) else None
            if k is None:
                raise ArtifactError(f"the GPU-type chooser picked type {a}, which cannot hold "
                                    f"job {view.workload.job_id[view.job]} now")
        self.observer.queue.place(view.job)
        return k


class TypePolicy:
    """FCFS queue order, GPU types by ``rule``.

    Args:
        name: Shown in reports.
        rule: The chooser among several possible types.
    """

    def __init__(self, name: str, rule: Rule) -> None:
        self._name = name
        self.rule = rule

    @property
    def name(self) -> str:
        """Shown in reports."""
        return self._name

    def bind(self, workload: Workload, cluster: ClusterSpec, cfg: RunSettings) -> Scorer:
        """FCFS's scorer."""
        return get_policy("fcfs").bind(workload, cluster, cfg)

    def bind_placer(self, workload: Workload, cluster: ClusterSpec) -> TypePlacer:
        """A placer for one run.

        Raises:
            ConfigError: The cluster has fewer than two GPU types.
        """
        return TypePlacer(PoolObserver(workload, cluster), self.rule)


def rule_policy(name: str) -> TypePolicy:
    """The rule-based policy ``gpu-NAME`` (``first`` or ``fastest``).

    Raises:
        ConfigError: Unknown rule (the message lists them).
    """
    if name not in RULES:
        raise ConfigError(f"GPU-type rule {name!r} is not one of {', '.join(RULES)}")
    return TypePolicy(f"gpu-{name}", RULES[name])
