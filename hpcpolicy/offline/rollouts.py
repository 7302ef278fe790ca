"""Rollouts of heuristics and random choices in the simulator, for state-action coverage.

Each rollout schedules one window of jobs as an environment episode would (cold start, the
dataset's backfilling, ``k`` visible slots), driven by the compiled engine through
:class:`~hpcpolicy.env.driver.EngineDriver`, with the environment's own observation
(:class:`~hpcpolicy.env.observe.Observer`) and reward (:class:`~hpcpolicy.env.rewards.
RewardMeter`) code; ``tests/test_offline_rollouts.py`` checks that the steps equal
:class:`~hpcpolicy.env.scheduling.SchedulingEnv`'s for the same actions.

Choosers:

* a heuristic (``fcfs``, ``sjf``, ``f1``, ...): the visible job with the best score of that
  heuristic (ties to the oldest), i.e. the heuristic restricted to the ``k`` slots the
  policy sees;
* ``NAME+eps``: the same, but with probability ``epsilon`` a uniformly drawn valid slot;
* ``random``: a uniformly drawn valid slot.

Random draws come from a generator seeded by (seed, window start, source), so an episode
does not depend on which others are built.

Example:
    >>> import numpy as np
    >>> from hpcpolicy.cluster import ClusterSpec
    >>> from hpcpolicy.env.config import EnvConfig
    >>> from hpcpolicy.workload import Workload
    >>> z = np.zeros(3, dtype=np.int64)
    >>> w = Workload(job_id=np.array(["a", "b", "c"], dtype=object), submit=z,
    ...     run_time=np.array([30, 10, 20]), req_walltime=np.array([30, 10, 20]),
    ...     procs=np.array([4, 4, 4]), nodes=z, gpus=z, mem_mib=z,
    ...     user=z.astype(np.int32), partition=z.astype(np.int32), logged_start=z - 1)
    >>> roll = Rollouts(w, ClusterSpec.homogeneous(4), EnvConfig(k=4, window_size=3), seed=0)
    >>> roll.episode(0, "sjf").actions.tolist()   # b starts; c waits for b, then a for c
    [1, 1, 1, 0, 0]
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from hpcpolicy.env.driver import EngineDriver
from hpcpolicy.env.observe import Observer
from hpcpolicy.env.rewards import RewardMeter
from hpcpolicy.env.spaces import JOB_FEATURES
from hpcpolicy.errors import ConfigError
from hpcpolicy.learn.seeding import derive_seed
from hpcpolicy.offline.layout import Episode, EpisodeRecorder, Obs
from hpcpolicy.policies.base import QueueView, ScoreKernel
from hpcpolicy.policies.heuristics import get_policy, policy_names

if TYPE_CHECKING:
    from hpcpolicy.cluster import ClusterSpec
    from hpcpolicy.env.config import EnvConfig
    from hpcpolicy.workload import Workload

__all__ = ["EPSILON_SUFFIX", "RANDOM", "ROLLOUT_HEURISTICS", "Rollouts", "parse_source"]

RANDOM = "random"
"""Source name of uniformly random rollouts."""
EPSILON_SUFFIX = "+eps"
"""Suffix of a heuristic's epsilon-random variant (``sjf+eps``)."""
ROLLOUT_HEURISTICS = tuple(name for name in policy_names() if name != "fairshare")
"""Heuristics a rollout can follow (fairshare needs the usage history of every user, which
a rollout restricted to the visible slots does not keep)."""

I64 = npt.NDArray[np.int64]
Chooser = Callable[[I64, Obs, np.random.Generator], int]
"""``choose(visible jobs, their observation, generator) -> slot``."""
_FITS_COL = [f.name for f in JOB_FEATURES].index("fits_now")
# the rollout heuristics read no fair-share table and no running jobs: shared empty arrays
_NO_SHARES, _NO_JOBS = np.zeros(0), np.zeros(0, np.int64)


def parse_source(source: str) -> tuple[str | None, bool]:
    """``(heuristic or None for random, epsilon variant?)`` of a rollout source name.

    Raises:
        ConfigError: Not ``random``, a rollout heuristic, or one with ``+eps``.
    """
    if source == RANDOM:
        return None, False
    name = source.removesuffix(EPSILON_SUFFIX)
    if name not in ROLLOUT_HEURISTICS:
        raise ConfigError(f"rollout source {source!r}: use random, or one of "
                          f"{', '.join(ROLLOUT_HEURISTICS)} (optionally with {EPSILON_SUFFIX})")
    return name, source != name


def _source_key(source: str) -> int:
    """A stable number for a source name (seeds its random stream)."""
    return int.from_bytes(source.encode()[:8].ljust(8, b"\0"), "little") & (2**62 - 1)


class Rollouts:
    """Rollouts of choosers on windows of one workload.

    Args:
        workload: The whole workload.
        cluster: The machine.
        env: ``k``, ``window_size``, ``reward`` and the engine options (backfilling).
        seed: Seed of every random draw.
        epsilon: Chance of a random slot in the ``+eps`` variants.
    """

    def __init__(self, workload: Workload, cluster: ClusterSpec, env: EnvConfig, *,
                 seed: int, epsilon: float = 0.2) -> None:
        if not 0.0 <= epsilon <= 1.0:
            raise ConfigError(f"epsilon must be in [0, 1], not {epsilon}")
        self.workload, self.cluster, self.env = workload, cluster, env
        self.seed, self.epsilon = seed, epsilon
        self._sim = env.sim_config()
        self._weights = env.reward_weights

    def _chooser(self, source: str, window: Workload, driver: EngineDriver) -> Chooser:
        name, eps = parse_source(source)
        if name is None:
            return lambda visible, obs, rng: int(rng.integers(visible.shape[0]))
        kernel: ScoreKernel = get_policy(name).bind(window, self.cluster, self._sim)
        epsilon = self.epsilon if eps else 0.0

        def choose(visible: I64, obs: Obs, rng: np.random.Generator) -> int:
            if epsilon and rng.random() < epsilon:
                return int(rng.integers(visible.shape[0]))
            fits = obs["jobs"][:visible.shape[0], _FITS_COL] > 0  # the observation's fit flags
            view = QueueView(now=driver.now, jobs=visible, workload=window, free=driver.free,
                             capacity=driver.capacity, fits_now=fits, user_share=_NO_SHARES,
                             running_cores=_NO_JOBS, running_req_end=_NO_JOBS)
            return int(kernel.scores(view).argmin())  # the first of equal scores: oldest

        return choose

    def episode(self, window_start: int, source: str) -> Episode | None:
        """One rollout of ``source`` on the window starting at job ``window_start``; None
        when no job of the window fits on the machine."""
        k, size = self.env.k, self.env.window_size
        window = self.workload.take(np.arange(window_start, window_start + size))
        rng = np.random.default_rng(derive_seed(self.seed, window_start, _source_key(source)))
        driver = EngineDriver(window, self.cluster, self._sim)
        choose = self._chooser(source, window, driver)
        if driver.advance() == 0:
            return None
        observer = Observer(window, driver.capacity, k)
        meter = RewardMeter(self._weights, driver.prep, self.cluster.total_cores)
        meter.start(driver.now, driver.starts(), driver.groups())
        rec = EpisodeRecorder(k, size)
        while True:
            obs = rec.next_observation()
            driver.observe(observer, obs)
            slot = choose(driver.queue()[:k], obs, rng)
            rec.add(slot)
            driver.choose(slot)
            if driver.advance() == 0:
                rec.reward(meter.finish(driver.starts(), driver.groups()))
                return rec.finish(source, window_start, True)
            rec.reward(meter.step(driver.now, driver.starts(), driver.groups()))
