"""d3rlpy models built around the environment's per-slot scorer, with the action mask inside.

d3rlpy has no action masks, and its discrete heads are a linear layer from an encoder's
features to the actions. Here the encoder *is* the policy network of online training
(:class:`~hpcpolicy.learn.networks.JobScorer`: one MLP scores every slot from ``[job ‖
cluster]``), applied to the flat observation (:mod:`hpcpolicy.offline.layout`), and it
returns one value per slot with :data:`~hpcpolicy.learn.networks.MASKED_LOGIT` (-1e9) on the
empty slots, read from the mask carried in the observation. On top of it:

* Q-functions (cql, bcq, dqn) use :class:`SlotQFunctionFactory`: Q(s, ·) *is* the encoder's
  output, no extra layer;
* categorical policies (bc, bcq's imitator) are built by d3rlpy with a linear head, which
  :func:`freeze_heads` fixes to the identity, so the logits are the scorer's.

So an empty slot has Q = logit = -1e9 in every training target: the max over next actions
in the TD targets (dqn, bcq, cql) and the argmax of double DQN skip it, CQL's log-sum-exp over
actions sums exactly over the valid slots (exp(-1e9) = 0), and the imitation softmax gives it
probability 0. A terminal step's next observation has no valid slot (all -1e9), and d3rlpy
multiplies its value by (1 - terminal) = 0. The constant carries no gradient. The learned
scorer then exports unchanged to the policy artifact, where empty slots get -inf.

This module imports d3rlpy (quietly, :mod:`hpcpolicy.offline.quiet`); import it only inside
functions that train.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any

import torch

from hpcpolicy.learn.networks import MASKED_LOGIT, JobScorer, ValueNet
from hpcpolicy.offline.layout import FC, FJ, k_of, unpack
from hpcpolicy.offline.quiet import d3rlpy_module

__all__ = ["SlotQFunctionFactory", "SlotScorerFactory", "SlotScores", "exported_scorer",
           "freeze_heads"]

_d3 = d3rlpy_module()
_Encoder: Any = _d3.models.torch.Encoder
_DiscreteQFunction: Any = _d3.models.torch.DiscreteQFunction
_QFunctionOutput: Any = _d3.models.torch.QFunctionOutput
_Forwarder: Any = _d3.models.torch.DiscreteMeanQFunctionForwarder
_CategoricalPolicy: Any = _d3.models.torch.CategoricalPolicy
_EncoderFactory: Any = _d3.models.EncoderFactory
_QFunctionFactory: Any = _d3.models.QFunctionFactory


class SlotScores(_Encoder):  # type: ignore[misc]
    """Flat observation ``[B, obs_dim(k)]`` -> masked per-slot scores ``[B, k]``.

    With ``value_hidden``, a dueling head: ``V(s) + A(s, a) - mean over valid slots of A``,
    where A is the per-slot scorer and V the online critic's network
    (:class:`~hpcpolicy.learn.networks.ValueNet`: slot embeddings pooled over the valid slots).
    The state's value, which depends on the whole queue, then need not be rebuilt from each
    slot's features alone; the argmax over valid slots is A's, so A is what is exported.
    """

    def __init__(self, k: int, hidden: tuple[int, ...], activation: str,
                 value_hidden: tuple[int, ...] = ()) -> None:
        super().__init__()
        self.k = k
        self.scorer = JobScorer(FJ, FC, hidden, activation)
        self.value = ValueNet(FJ, FC, value_hidden, activation) if value_hidden else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        jobs, cluster, mask = unpack(x, self.k)
        scores = self.scorer(jobs, cluster)
        if self.value is not None:
            valid = mask.to(scores.dtype)
            mean = (scores * valid).sum(-1, keepdim=True) / valid.sum(-1, keepdim=True).clamp(
                min=1.0)
            scores = self.value(jobs, cluster, mask).unsqueeze(-1) + scores - mean
        return torch.where(mask, scores, torch.full_like(scores, MASKED_LOGIT))


@dataclasses.dataclass()
class SlotScorerFactory(_EncoderFactory):  # type: ignore[misc]
    """d3rlpy encoder factory of :class:`SlotScores`."""

    hidden: list[int] = dataclasses.field(default_factory=lambda: [32, 16, 8])
    activation: str = "tanh"
    value_hidden: list[int] = dataclasses.field(default_factory=list)

    def create(self, observation_shape: Any) -> SlotScores:
        return SlotScores(k_of(int(observation_shape[0])), tuple(self.hidden), self.activation,
                          tuple(self.value_hidden))

    @staticmethod
    def get_type() -> str:
        return "hpcpolicy_slot_scorer"


class SlotQFunction(_DiscreteQFunction):  # type: ignore[misc]
    """Q(s, ·) = the encoder's masked per-slot scores."""

    def __init__(self, encoder: SlotScores) -> None:
        super().__init__()
        self._encoder = encoder

    def forward(self, x: torch.Tensor) -> Any:
        return _QFunctionOutput(q_value=self._encoder(x), quantiles=None, taus=None)

    @property
    def encoder(self) -> SlotScores:
        return self._encoder


@dataclasses.dataclass()
class SlotQFunctionFactory(_QFunctionFactory):  # type: ignore[misc]
    """d3rlpy Q-function factory of :class:`SlotQFunction` (no layer after the encoder)."""

    def create_discrete(self, encoder: SlotScores, hidden_size: int,
                        action_size: int) -> tuple[SlotQFunction, Any]:
        q_func = SlotQFunction(encoder)
        return q_func, _Forwarder(q_func, action_size)

    @staticmethod
    def get_type() -> str:
        return "hpcpolicy_slot_q"


for _register, _cls in ((_d3.models.encoders.register_encoder_factory, SlotScorerFactory),
                        (_d3.models.q_functions.register_q_func_factory,
                         SlotQFunctionFactory)):
    with contextlib.suppress(AssertionError):  # registered already (a reloaded module)
        _register(_cls)


def freeze_heads(modules: torch.nn.Module | Any) -> int:
    """Fix the linear head of every categorical policy in ``modules`` to the identity.

    Returns:
        How many heads were fixed.
    """
    fixed = 0
    for module in _modules(modules):
        if isinstance(module, _CategoricalPolicy):
            fc = module._fc
            with torch.no_grad():
                fc.weight.copy_(torch.eye(fc.weight.shape[0], fc.weight.shape[1]))
                fc.bias.zero_()
            fc.requires_grad_(False)
            fixed += 1
    return fixed


def _modules(modules: Any) -> list[torch.nn.Module]:
    """Every torch module held by a d3rlpy ``Modules`` dataclass."""
    found: list[torch.nn.Module] = []
    for f in dataclasses.fields(modules):
        value = getattr(modules, f.name)
        if isinstance(value, torch.nn.Module):
            found.extend(value.modules())
    return found


def exported_scorer(algo: str, modules: Any) -> JobScorer:
    """The scorer that decides: the imitator's for bc, the (first) Q-function's otherwise."""
    owner = modules.imitator if algo == "bc" else modules.q_funcs[0]
    encoder: SlotScores = owner._encoder if algo == "bc" else owner.encoder
    return encoder.scorer
