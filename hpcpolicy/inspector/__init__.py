"""An inspector over the deployed heuristic (issue 43, item 2; SchedInspector's shape).

The heuristic proposes its best ``k`` waiting jobs; a small learned inspector accepts one of
them (rejecting those before it) from the proposals' job features, the heuristics' own order
of them, and the machine and queue state. :mod:`~hpcpolicy.inspector.decision` is the decision
point (a :class:`~hpcpolicy.policies.base.Policy`), :mod:`~hpcpolicy.inspector.features` what
the inspector sees, :mod:`~hpcpolicy.inspector.train` how it learns (imitating, on each
training window, the heuristic that was best there), and :mod:`~hpcpolicy.inspector.artifact`
the artifact that carries the heuristic and the inspector (format ``hpcpolicy.inspector``).
"""

from __future__ import annotations

from hpcpolicy.inspector.decision import DEFAULT_K, Chooser, Inspector, accept_first

__all__ = ["DEFAULT_K", "Chooser", "Inspector", "accept_first"]
