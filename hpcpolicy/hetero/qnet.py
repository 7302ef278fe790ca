"""The Q-network of the GPU-type chooser, in plain torch (no d3rlpy): trained inside d3rlpy
(:mod:`hpcpolicy.hetero.networks`) and exported as it is (:mod:`hpcpolicy.hetero.export`).

An MLP maps the observation (:mod:`hpcpolicy.hetero.observe`) to one Q-value per GPU type.
The action mask is read from the observation's ``valid`` entries: in training an invalid
type gets :data:`~hpcpolicy.learn.networks.MASKED_LOGIT` (-1e9), so d3rlpy's greedy action, the
max (DQN) and the argmax (double DQN) of its TD targets only ever consider types that can
hold the job; a terminal step's all-zero next observation has no valid type, and d3rlpy
multiplies its value by 0. The deployed model puts ``-inf`` there instead.

Example:
    >>> net = PoolQ(n_pools=2, hidden=(8,), activation="relu")
    >>> obs = torch.zeros(1, net.dim)
    >>> obs[0, mask_index(2)[1]] = 1.0                # only the second type is valid
    >>> DeployedQ(net)(obs)[0, 0].item()
    -inf
"""

from __future__ import annotations

import torch
from torch import nn

from hpcpolicy.hetero.observe import POOL_FEATURES, mask_index, obs_dim
from hpcpolicy.learn.networks import MASKED_LOGIT

__all__ = ["DeployedQ", "PoolQ"]

_ACTIVATIONS: dict[str, type[nn.Module]] = {"relu": nn.ReLU, "tanh": nn.Tanh}


class PoolQ(nn.Module):
    """Observation ``[B, 6 + 5 P]`` -> Q-values ``[B, P]``, -1e9 on types that cannot hold
    the job.

    Args:
        n_pools: GPU types (actions).
        hidden: Hidden widths.
        activation: ``relu`` or ``tanh``.
    """

    def __init__(self, n_pools: int, hidden: tuple[int, ...], activation: str) -> None:
        super().__init__()
        self.n_pools = n_pools
        self.dim = obs_dim(n_pools)
        layers: list[nn.Module] = []
        width = self.dim
        for h in hidden:
            layers += [nn.Linear(width, h), _ACTIVATIONS[activation]()]
            width = h
        layers.append(nn.Linear(width, n_pools))
        self.mlp = nn.Sequential(*layers)
        self.first_mask = mask_index(n_pools)[0]
        self.stride = len(POOL_FEATURES)
        self.masked = MASKED_LOGIT

    def valid(self, obs: torch.Tensor) -> torch.Tensor:
        """``[B, P]`` bool: the types that can hold the job (every ``stride``-th entry from
        the first pool's ``valid``)."""
        return obs[:, self.first_mask:self.dim:self.stride] > 0.5

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        q = self.mlp(obs)
        return torch.where(self.valid(obs), q, torch.full_like(q, self.masked))


class DeployedQ(nn.Module):
    """:class:`PoolQ` as exported: ``-inf`` on the types that cannot hold the job."""

    def __init__(self, net: PoolQ) -> None:
        super().__init__()
        self.net = net

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        q = self.net.mlp(obs)
        return torch.where(self.net.valid(obs), q, torch.full_like(q, float("-inf")))
