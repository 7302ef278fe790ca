"""Configurations of offline RL: how a replay dataset is built, and how a policy learns from it.

Both are frozen, validated dataclasses that serialise to JSON (written next to every output):
:class:`DatasetConfig` (``hpcpolicy dataset build``) and :class:`OfflineConfig`
(``hpcpolicy train DATASET --algo cql|bcq|bc|dqn``).

Example:
    >>> cfg = DatasetConfig(source="mix", k=16)
    >>> cfg.env_config().k, cfg.sources(logged=True)[:3]
    (16, ('logged', 'fcfs', 'sjf'))
    >>> OfflineConfig(algo="cql").to_dict()["algo"]
    'cql'
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from hpcpolicy.config import Config, choice
from hpcpolicy.env.config import EnvConfig
from hpcpolicy.env.rewards import parse_reward
from hpcpolicy.offline.logged import LOGGED, LOGGED_ACTIONS
from hpcpolicy.offline.rollouts import EPSILON_SUFFIX, RANDOM, ROLLOUT_HEURISTICS
from hpcpolicy.sim.types import BACKFILL_MODES
from hpcpolicy.world.protocol import TRAIN_FRAC, VAL_FRAC

__all__ = ["OFFLINE_ALGOS", "SOURCES", "DatasetConfig", "OfflineConfig"]

SOURCES = ("logged", "heuristics", "random", "mix")
"""Values of :attr:`DatasetConfig.source`."""

OFFLINE_ALGOS: dict[str, str] = {
    "cql": "discrete conservative Q-learning (d3rlpy DiscreteCQL)",
    "bcq": "discrete batch-constrained Q-learning (d3rlpy DiscreteBCQ)",
    "bc": "behaviour cloning (d3rlpy DiscreteBC)",
    "dqn": "double DQN on the fixed dataset (d3rlpy DoubleDQN)",
}
"""Offline algorithms by ``--algo`` name."""

_ACTIVATIONS = ("tanh", "relu")


@dataclass(frozen=True)
class DatasetConfig(Config):
    """What a replay dataset holds and how it is cut into train, validation and test."""

    label: ClassVar[str] = "dataset"

    source: str = choice("mix", SOURCES)
    """logged (the real scheduler's decisions), heuristics (rollouts of :attr:`heuristics`,
    greedy and epsilon-random), random (uniform valid slots), or mix (all of these)."""
    k: int = 32
    """Job slots of each observation (the environment's ``k``)."""
    window_size: int = 256
    """Consecutive jobs per episode."""
    reward: str = "bsld"
    """The environment's reward (see :mod:`hpcpolicy.env.rewards`)."""
    backfill: str = choice("easy", BACKFILL_MODES)
    """Backfilling of the rollouts (and of the environment the policy is meant for)."""
    train_frac: float = TRAIN_FRAC
    """Share of the jobs (earliest first) whose windows are for training and validation;
    the windows of the rest are the test split, as in ``hpcpolicy evaluate``."""
    val_frac: float = VAL_FRAC
    """Share of the training part's windows (the latest) kept for validation."""
    heuristics: tuple[str, ...] = ("fcfs", "sjf", "f1")
    """Heuristics rolled out by the heuristics and mix sources."""
    epsilon: float = 0.2
    """Chance of a random slot in the epsilon-random variants (0: no such variants)."""
    logged_action: str = choice("started", LOGGED_ACTIONS)
    """How a logged start becomes an action: ``started`` (the slot of the job that started)
    or ``head`` (a start while the oldest waiting job did not fit is backfilling around it,
    and the action is the oldest job's slot; see :mod:`hpcpolicy.offline.logged`)."""
    max_windows: int | None = None
    """At most this many windows per part, evenly spread over it (None: every window)."""
    seed: int = 0
    """Seed of the random choices."""
    world: dict[str, Any] = field(default_factory=dict)
    """Environment options a site model sets (``--site``: running limits, pools, whole
    nodes; :meth:`hpcpolicy.world.apply.World.env_options`)."""

    def validate(self) -> None:
        self._at_least(1, "k", "window_size", "max_windows")
        self._at_least(0, "seed")
        parse_reward(self.reward)
        self._require(0.0 < self.train_frac < 1.0, "train_frac",
                      f"must be in (0, 1), got {self.train_frac}")
        self._require(0.0 <= self.val_frac < 1.0, "val_frac",
                      f"must be in [0, 1), got {self.val_frac}")
        bad = [h for h in self.heuristics if h not in ROLLOUT_HEURISTICS]
        self._require(not bad, "heuristics", f"{bad} cannot be rolled out; valid: "
                      f"{', '.join(ROLLOUT_HEURISTICS)}")
        self._require(bool(self.heuristics) or self.source in ("logged", "random"), "heuristics",
                      f"source {self.source} needs at least one heuristic")
        self._require(0.0 <= self.epsilon <= 1.0, "epsilon",
                      f"must be in [0, 1], got {self.epsilon}")

    def env_config(self) -> EnvConfig:
        """The environment whose observations, actions and rewards the dataset holds."""
        return EnvConfig.from_dict({
            "k": self.k, "window_size": self.window_size, "reward": self.reward,
            "backfill": self.backfill, "split": "all", "train_frac": self.train_frac,
            "baselines": (), **self.world})  # from_dict: the site's pools may be JSON lists

    def sources(self, logged: bool) -> tuple[str, ...]:
        """The episode sources of each window, in build order; ``logged``: whether the log
        records start times (mix leaves the logged episodes out when it does not)."""
        greedy = tuple(self.heuristics)
        noisy = tuple(h + EPSILON_SUFFIX for h in greedy) if self.epsilon > 0 else ()
        return {"logged": (LOGGED,), "heuristics": greedy + noisy, "random": (RANDOM,),
                "mix": ((LOGGED,) if logged else ()) + greedy + noisy + (RANDOM,)}[self.source]


@dataclass(frozen=True)
class OfflineConfig(Config):
    """An offline RL run: the d3rlpy algorithm, its budget and the scoring network.

    The network is the environment's per-slot scorer (:class:`~hpcpolicy.learn.networks.
    JobScorer`: the same MLP scores every slot from ``[job features ‖ cluster features]``),
    so the result exports to the same policy artifact as online training.
    """

    label: ClassVar[str] = "offline"

    algo: str = choice("cql", OFFLINE_ALGOS)
    """cql, bcq, bc or dqn (:data:`OFFLINE_ALGOS`)."""
    seed: int = 1
    """Seed of the weights and of minibatch sampling (``d3rlpy.seed``)."""
    steps: int = 20_000
    """Gradient steps (``--steps``)."""
    steps_per_epoch: int = 2_000
    """Gradient steps between two rows of metrics (and validation checks); ``steps`` is
    rounded down to a multiple of it (d3rlpy trains whole epochs)."""
    batch_size: int = 256
    """Transitions per gradient step."""
    learning_rate: float = 3e-4
    """Adam learning rate."""
    gamma: float = 0.99
    """Discount factor of the Q-learning algorithms."""
    alpha: float = 1.0
    """Weight of CQL's conservative term."""
    bcq_threshold: float = 0.3
    """BCQ: slots whose imitation probability is below this share of the best are excluded."""
    target_update_interval: int = 1_000
    """Gradient steps between target-network copies (cql, bcq, dqn)."""
    reward_scale: float = 1.0
    """Rewards are multiplied by this before learning (returns of bsld rewards can be in the
    hundreds on loaded machines)."""
    hidden: tuple[int, ...] = (32, 16, 8)
    """Hidden widths of the per-slot scorer (the online PPO default, so --online-finetune can
    start from the same shapes)."""
    activation: str = choice("tanh", _ACTIVATIONS)
    """tanh or relu."""
    dueling_hidden: tuple[int, ...] = ()
    """Q-learning algorithms: hidden widths of a state-value stream added to the per-slot
    scores (a dueling head, see :class:`hpcpolicy.offline.networks.SlotScores`); () for
    none. bc does not use it (a softmax ignores a per-state shift)."""
    torch_threads: int = 1
    """Intra-op threads."""

    def validate(self) -> None:
        self._at_least(1, "steps", "steps_per_epoch", "batch_size", "target_update_interval",
                       "torch_threads")
        self._at_least(0, "seed", "alpha")
        for name in ("learning_rate", "reward_scale"):
            value = getattr(self, name)
            self._require(value > 0, name, f"must be > 0, got {value}")
        self._require(0.0 <= self.gamma <= 1.0, "gamma", f"must be in [0, 1], got {self.gamma}")
        self._require(0.0 < self.bcq_threshold < 1.0, "bcq_threshold",
                      f"must be in (0, 1), got {self.bcq_threshold}")
        self._require(len(self.hidden) >= 1 and min(self.hidden) >= 1, "hidden",
                      f"must be one or more positive integers, got {list(self.hidden)}")
        self._require(all(w >= 1 for w in self.dueling_hidden), "dueling_hidden",
                      f"must be positive integers (or empty), got {list(self.dueling_hidden)}")

    # -- computed at runtime ---------------------------------------------------------------
    @property
    def epoch_steps(self) -> int:
        """Gradient steps per epoch: ``steps_per_epoch``, or ``steps`` when fewer."""
        return min(self.steps_per_epoch, self.steps)

    @property
    def epochs(self) -> int:
        """Epochs (rows of metrics): ``steps // epoch_steps``."""
        return self.steps // self.epoch_steps
