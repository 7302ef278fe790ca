"""Scheduling policies: the :class:`Policy` protocol and the registered heuristics.

Example:
    >>> from hpcpolicy.policies import get_policy, policy_names
    >>> "sjf" in policy_names(), get_policy("sjf").name
    (True, 'sjf')
"""

from __future__ import annotations

from hpcpolicy.policies.base import KERNEL_KINDS, Policy, QueueView, ScoreKernel, Scorer
from hpcpolicy.policies.heuristics import HEURISTICS, Heuristic, get_policy, policy_names

__all__ = [
    "HEURISTICS",
    "KERNEL_KINDS",
    "Heuristic",
    "Policy",
    "QueueView",
    "ScoreKernel",
    "Scorer",
    "get_policy",
    "policy_names",
]
