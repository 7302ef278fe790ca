"""The two agents' networks: one :class:`~hpcpolicy.learn.networks.ActorCritic` each.

Both agents score a variable set of options with one small MLP shared by every option, as the
single-agent policy does (:mod:`hpcpolicy.learn.networks`), and have their own value network:

* the **selector** scores each visible job slot from ``[job features ‖ cluster features]``
  (:data:`~hpcpolicy.env.spaces.JOB_FEATURES`, :data:`~hpcpolicy.env.spaces.CLUSTER_FEATURES`);
* the **allocator** scores each candidate placement from ``[candidate features ‖ job and
  cluster context]`` (:data:`~hpcpolicy.marl.features.CANDIDATE_FEATURES`,
  :data:`~hpcpolicy.marl.features.CONTEXT_FEATURES`).

Their cost depends on the number of options (K slots, at most pools x 3 candidates), never on
the cluster's size.

Example:
    >>> from hpcpolicy.marl.config import MarlConfig
    >>> nets = TwoAgents(MarlConfig())
    >>> [name for name, _ in nets.named_children()]
    ['selector', 'allocator']
"""

from __future__ import annotations

from torch import nn

from hpcpolicy.env.spaces import CLUSTER_FEATURES, JOB_FEATURES
from hpcpolicy.learn.networks import ActorCritic
from hpcpolicy.marl.config import MarlConfig
from hpcpolicy.marl.features import CANDIDATE_FEATURES, CONTEXT_FEATURES

__all__ = ["AGENTS", "TwoAgents"]

AGENTS = ("selector", "allocator")
"""The agents, in the order their decisions are numbered (0 selects, 1 allocates)."""


class TwoAgents(nn.Module):
    """The selector and the allocator, trained together (one state dict, one checkpoint)."""

    def __init__(self, cfg: MarlConfig) -> None:
        super().__init__()
        self.selector = ActorCritic(len(JOB_FEATURES), len(CLUSTER_FEATURES), cfg.hidden,
                                    cfg.value_hidden, cfg.activation)
        self.allocator = ActorCritic(len(CANDIDATE_FEATURES), len(CONTEXT_FEATURES),
                                     cfg.allocator_hidden, cfg.value_hidden, cfg.activation)

    def agent(self, index: int) -> ActorCritic:
        """Agent ``index`` of :data:`AGENTS`."""
        net: ActorCritic = getattr(self, AGENTS[index])
        return net
