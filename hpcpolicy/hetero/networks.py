"""d3rlpy pieces of the online GPU-type DQN: the Q-network as an encoder, and an explorer
that only tries GPU types that can hold the job.

* :class:`PoolQEncoderFactory` makes d3rlpy's encoder a :class:`~hpcpolicy.hetero.qnet.PoolQ`
  (already one masked Q per type); with the offline package's
  :class:`~hpcpolicy.offline.networks.SlotQFunctionFactory` the Q-function *is* that output,
  no layer after it.
* :class:`MaskedEpsilonGreedy` is d3rlpy's linear-decay epsilon-greedy, except that a random
  action is drawn among the valid types (read from the observation) and that its schedule can
  start part-way (a resumed run). Like d3rlpy's explorers it draws from numpy's global
  generator, which ``d3rlpy.seed`` seeds.
* :func:`load_checkpoint` is d3rlpy's ``load_model`` read with ``weights_only=True``, so a
  resumed run never unpickles objects, whatever torch's default.

This module imports d3rlpy (quietly); import it only inside functions that train.
"""

from __future__ import annotations

import contextlib
import dataclasses
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import torch

from hpcpolicy.errors import ConfigError
from hpcpolicy.hetero.config import GpuDqnConfig
from hpcpolicy.hetero.observe import mask_index, n_pools_of
from hpcpolicy.hetero.qnet import PoolQ
from hpcpolicy.learn.runs import load_refusal
from hpcpolicy.offline.quiet import d3rlpy_module

__all__ = ["MaskedEpsilonGreedy", "PoolQEncoder", "PoolQEncoderFactory", "dqn_algo",
           "load_checkpoint", "pool_q"]

_d3 = d3rlpy_module()
_Encoder: Any = _d3.models.torch.Encoder
_EncoderFactory: Any = _d3.models.EncoderFactory
_Explorer: Any = _d3.algos.qlearning.explorers.Explorer


class PoolQEncoder(_Encoder):  # type: ignore[misc]
    """d3rlpy encoder holding a :class:`PoolQ`."""

    def __init__(self, net: PoolQ) -> None:
        super().__init__()
        self.net = net

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)  # type: ignore[no-any-return]


@dataclasses.dataclass()
class PoolQEncoderFactory(_EncoderFactory):  # type: ignore[misc]
    """d3rlpy encoder factory of :class:`PoolQEncoder` (the pools from the observation size)."""

    hidden: list[int] = dataclasses.field(default_factory=lambda: [64, 64])
    activation: str = "relu"

    def create(self, observation_shape: Any) -> PoolQEncoder:
        pools = n_pools_of(int(observation_shape[0]))
        return PoolQEncoder(PoolQ(pools, tuple(self.hidden), self.activation))

    @staticmethod
    def get_type() -> str:
        return "hpcpolicy_pool_q"


with contextlib.suppress(AssertionError):  # registered already (a reloaded module)
    _d3.models.encoders.register_encoder_factory(PoolQEncoderFactory)


def dqn_algo(cfg: GpuDqnConfig) -> Any:
    """d3rlpy's DoubleDQN (or DQN) of ``cfg``, on CPU, its Q-function the masked
    :class:`PoolQ` with no layer after it."""
    from hpcpolicy.offline.networks import SlotQFunctionFactory

    algo = _d3.algos.DoubleDQNConfig if cfg.double else _d3.algos.DQNConfig
    return algo(batch_size=cfg.batch_size, learning_rate=cfg.learning_rate, gamma=cfg.gamma,
                target_update_interval=cfg.target_update_interval,
                encoder_factory=PoolQEncoderFactory(hidden=list(cfg.hidden),
                                                    activation=cfg.activation),
                q_func_factory=SlotQFunctionFactory()).create(device=False)


def pool_q(modules: Any) -> PoolQ:
    """The trained network of a d3rlpy (double) DQN's modules (its first Q-function)."""
    encoder: PoolQEncoder = modules.q_funcs[0].encoder
    return encoder.net


def load_checkpoint(algo: Any, path: Path) -> None:
    """Load the weights and optimiser state ``algo.save_model`` wrote to ``path``.

    d3rlpy's own ``load_model`` calls ``torch.load`` without ``weights_only``, which unpickles
    anything under torch < 2.6; here the file is read as tensors and plain containers only,
    then each module takes its state as ``load_model`` would give it.

    Raises:
        ConfigError: The file is not such a checkpoint (the message says to start a new run).
    """
    try:
        states = torch.load(path, map_location="cpu", weights_only=True)
        for name, module in algo.impl.modules.create_checkpointer("cpu").modules.items():
            module.load_state_dict(states[name])
    except (pickle.UnpicklingError, RuntimeError, KeyError, TypeError, ValueError,
            OSError) as exc:
        raise ConfigError(f"{path}: not a checkpoint of weights that this run can load "
                          f"({load_refusal(exc)}); start a new run in another directory") from exc


class MaskedEpsilonGreedy(_Explorer):  # type: ignore[misc]
    """Epsilon-greedy over the valid types, epsilon decaying linearly.

    Args:
        start: Epsilon at step 0.
        end: Epsilon from ``duration`` on.
        duration: Steps of the decay.
        offset: Steps already taken before this session (a resumed run).
    """

    def __init__(self, start: float, end: float, duration: int, offset: int = 0) -> None:
        self.start, self.end, self.duration, self.offset = start, end, duration, offset

    def epsilon(self, step: int) -> float:
        """Epsilon at this session's ``step``."""
        done = min((self.offset + step) / self.duration, 1.0)
        return self.start + (self.end - self.start) * done

    def sample(self, algo: Any, x: Any, step: int) -> Any:
        """One action per observation in ``x`` (``[B, dim]``)."""
        greedy = np.asarray(algo.predict(x))
        valid = np.asarray(x)[:, mask_index(n_pools_of(x.shape[1]))] > 0.5
        out = greedy.copy()
        for b in range(x.shape[0]):
            if np.random.random() < self.epsilon(step):
                out[b] = np.random.choice(np.flatnonzero(valid[b]))
        return out
