"""``SchedulingEnv``: the simulator as a Gymnasium environment (``hpcpolicy/Scheduling-v0``)."""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np
import numpy.typing as npt

from hpcpolicy.cluster import ClusterSpec
from hpcpolicy.env.config import EnvConfig
from hpcpolicy.env.driver import EngineDriver
from hpcpolicy.env.observe import Observer
from hpcpolicy.env.prior import OLDEST, prior_kernel
from hpcpolicy.env.registration import register
from hpcpolicy.env.rewards import RewardMeter
from hpcpolicy.env.spaces import action_space, observation_space
from hpcpolicy.errors import ConfigError, SimulationError
from hpcpolicy.sim.metrics import outcome_table, summarize
from hpcpolicy.sim.types import RunningJobs, SimResult
from hpcpolicy.sim.windows import WindowConfig, running_at
from hpcpolicy.workload import Workload
from hpcpolicy.world.split import window_range

__all__ = ["EPISODE_METRICS", "INVALID_ACTION_REWARD", "SchedulingEnv"]

Obs = dict[str, npt.NDArray[Any]]

INVALID_ACTION_REWARD = -1.0
"""Reward of an action on an empty slot: nothing happens, the same decision is asked again."""

EPISODE_METRICS = ("bsld", "wait_s", "response_s", "utilization", "best_heuristic_bsld",
                   "bsld_vs_best", "decisions", "invalid_actions")
"""Keys of ``info["episode_metrics"]`` at the end of an episode (the last two need baselines)."""


class SchedulingEnv(gym.Env[Obs, int]):
    """Schedule a window of a real workload, choosing one queue head per step.

    ## Description

    An episode replays ``window_size`` consecutive jobs of the workload on the cluster, with
    the simulator of :mod:`hpcpolicy.sim` (its semantics, backfilling and engine options, see
    :class:`~hpcpolicy.env.config.EnvConfig`). Whenever the scheduler must choose, the agent
    picks which waiting job becomes the queue head; the engine starts it if it fits (and asks
    again), or else runs the configured backfilling around it (the others in submit order)
    and moves on to the next event. This is the decision a policy takes in ``hpcpolicy
    simulate``: a trained policy replays there exactly as here.

    Windows are drawn uniformly, with ``np_random``, from the configured part of the workload
    (chronological split, :mod:`hpcpolicy.world.split`); ``reset(options={"window_start": i})``
    replays the window starting at job ``i`` instead.

    ## Action Space

    ``Discrete(k)``: the slot of the job that becomes the head. Slots hold the oldest ``k``
    waiting jobs in submit order (:mod:`hpcpolicy.env.observe`: later arrivals are not shown
    while more than ``k`` wait), or with ``config.prior`` the prior heuristic's best ``k`` in
    its order (:mod:`hpcpolicy.env.prior`). An empty slot is accepted, changes nothing and is
    rewarded :data:`INVALID_ACTION_REWARD`; mask it out with ``info["action_mask"]``.

    ## Observation Space

    ``Dict(jobs=Box(0, 1, (k, 7)), cluster=Box(0, 1, (7,)), mask=MultiBinary(k))`` as declared
    in :mod:`hpcpolicy.env.spaces` (features, units and normalisation there, raw values in
    :mod:`hpcpolicy.env.observe`). ``mask`` (also ``info["action_mask"]``) is 1 on the slots
    holding a job; every observation on which an action is asked has at least one.

    ## Rewards

    Per-decision shares of the window's metrics (:mod:`hpcpolicy.env.rewards`): by default
    ``bsld``, whose rewards add up to minus the window's mean bounded slowdown; also ``wait``,
    ``response`` (hours), ``utilization`` and weighted mixes.

    ## Episode End

    *Terminated* when every job of the window has run (the final observation has no valid
    slot). Never truncated by the environment itself; wrap it in ``TimeLimit`` for that.
    ``info["episode_metrics"]`` then holds :data:`EPISODE_METRICS`: the window's mean bounded
    slowdown, wait and response (s), utilisation, the best baseline heuristic's bounded
    slowdown on the same window and the ratio (below 1: better than the best heuristic),
    the number of decisions and of invalid actions.

    ## Arguments

    * ``workload``: the jobs (:class:`~hpcpolicy.workload.Workload`), sorted by submit time.
    * ``cluster``: the machine (:class:`~hpcpolicy.cluster.ClusterSpec`).
    * ``config``: :class:`~hpcpolicy.env.config.EnvConfig` (window size, k, reward, backfilling,
      split, warm starts, baselines).

    Example:
        >>> import numpy as np
        >>> z = np.zeros(4, dtype=np.int64)
        >>> w = Workload(job_id=np.array(list("abcd"), dtype=object),
        ...     submit=np.array([0, 0, 0, 0]), run_time=np.array([100, 10, 10, 10]),
        ...     req_walltime=np.array([100, 10, 10, 10]), procs=np.array([4, 4, 4, 4]),
        ...     nodes=z, gpus=z, mem_mib=z, user=z.astype(np.int32),
        ...     partition=z.astype(np.int32), logged_start=z - 1)
        >>> env = SchedulingEnv(w, ClusterSpec.homogeneous(4),
        ...                     EnvConfig(k=4, window_size=4, split="all", baselines=("fcfs",)))
        >>> obs, info = env.reset(seed=0)
        >>> done = False
        >>> while not done:                      # shortest job first: the last valid slot
        ...     slot = int(np.flatnonzero(info["action_mask"])[-1])
        ...     obs, reward, done, _, info = env.step(slot)
        >>> info["episode_metrics"]["bsld"], info["episode_metrics"]["best_heuristic_bsld"]
        (1.825, 9.25)
    """

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012 (Gymnasium's convention)

    def __init__(self, workload: Workload, cluster: ClusterSpec,
                 config: EnvConfig | None = None) -> None:
        self.config = config if config is not None else EnvConfig()
        self.slot_order = self.config.prior or OLDEST
        """What fills the slots: ``oldest`` or the prior heuristic's name (recorded in the
        exported policy's manifest)."""
        self.workload, self.cluster = workload, cluster
        self.observation_space = observation_space(self.config.k)
        self.action_space = action_space(self.config.k)  # type: ignore[assignment]
        self._first, self._last = window_range(len(workload), self.config.split,
                                               self.config.train_frac, self.config.window_size)
        self._sim = self.config.sim_config()
        self._weights = self.config.reward_weights
        self._preload: dict[int, RunningJobs | None] = {}
        self._best: dict[int, float] = {}
        self._start = -1
        self._window = workload
        self._driver: EngineDriver | None = None
        self._observer: Observer | None = None
        self._meter: RewardMeter | None = None
        self._obs: Obs = {}
        self._decisions = 0
        self._invalid = 0

    # -- Gymnasium API ----------------------------------------------------------------------
    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[Obs, dict[str, Any]]:
        """Start an episode on a random window of the configured part (or ``window_start``)."""
        super().reset(seed=seed)
        start = (options or {}).get("window_start")
        if start is None:
            start = int(self.np_random.integers(self._first, self._last + 1))
        elif not self._first <= int(start) <= self._last:
            raise ConfigError(f"window_start {start} is outside the {self.config.split} part "
                              f"(windows start at {self._first}..{self._last})")
        self._start = start = int(start)
        self._window = self.workload.take(np.arange(start, start + self.config.window_size))
        driver = EngineDriver(self._window, self.cluster, self._sim, running=self._running(start),
                              prior=prior_kernel(self.config.prior, self._window, self.cluster,
                                                 self._sim))
        if driver.advance() == 0:
            raise SimulationError(f"the window of {self.config.window_size} jobs at job {start} "
                                  "has no job that fits on the cluster: nothing to decide")
        self._driver = driver
        self._observer = Observer(self._window, driver.capacity, self.config.k)
        self._meter = RewardMeter(self._weights, driver.prep, self.cluster.total_cores)
        self._meter.start(driver.now, driver.starts(), driver.groups())
        self._decisions = self._invalid = 0
        self._obs = self._observe()
        return self._obs, {"action_mask": self._obs["mask"].copy(), "window_start": start}

    def step(self, action: int) -> tuple[Obs, float, bool, bool, dict[str, Any]]:
        """Make the job in slot ``action`` the head; run to the next decision."""
        driver, meter = self._driver, self._meter
        if driver is None or meter is None:
            raise SimulationError("step() with no episode in progress (before reset(), or after "
                                  "the episode ended): call reset() to start one")
        slot = int(action)
        if not (0 <= slot < self.config.k and self._obs["mask"][slot]):
            self._invalid += 1
            obs = {key: value.copy() for key, value in self._obs.items()}
            return obs, INVALID_ACTION_REWARD, False, False, {
                "action_mask": obs["mask"].copy(), "invalid_action": True}
        self._decisions += 1
        driver.choose(slot)
        if driver.advance() == 0:
            reward = meter.finish(driver.starts(), driver.groups())
            assert self._observer is not None
            self._obs = self._observer.empty()
            info = {"action_mask": self._obs["mask"].copy(),
                    "episode_metrics": self._episode_metrics(driver.result())}
            self._driver = None
            return self._obs, reward, True, False, info
        reward = meter.step(driver.now, driver.starts(), driver.groups())
        self._obs = self._observe()
        return self._obs, reward, False, False, {"action_mask": self._obs["mask"].copy()}

    # -- helpers ----------------------------------------------------------------------------
    def _observe(self) -> Obs:
        driver, observer = self._driver, self._observer
        assert driver is not None and observer is not None
        obs = observer.empty()
        driver.observe(observer, obs)
        return obs

    def _running(self, start: int) -> RunningJobs | None:
        """Jobs running at the window's first submit (warm starts), cached per window."""
        if not self.config.warm:
            return None
        if start not in self._preload:
            from hpcpolicy.sim.engine import simulate

            windows = WindowConfig(size=self.config.window_size, warm=True,
                                   warmup_jobs=self.config.warmup_jobs)
            self._preload[start] = running_at(self.workload, start, self.cluster, windows,
                                              simulate, self._sim)[0]
        return self._preload[start]

    def _summary(self, result: SimResult) -> dict[str, Any]:
        return summarize(outcome_table(self._window, result, identity=False), self.cluster)

    def _best_heuristic(self) -> float:
        """The lowest mean bounded slowdown of the baselines on this window (cached)."""
        if self._start not in self._best:
            from hpcpolicy.sim.engine import simulate

            running = self._running(self._start)
            self._best[self._start] = min(
                self._summary(simulate(self._window, self.cluster, self.config.sim_config(name),
                                       running=running))["mean_bsld"]
                for name in self.config.baselines)
        return self._best[self._start]

    def _episode_metrics(self, result: SimResult) -> dict[str, float]:
        summary = self._summary(result)

        def number(value: Any) -> float:
            return math.nan if value is None else float(value)

        metrics = {"bsld": number(summary["mean_bsld"]), "wait_s": number(summary["mean_wait_s"]),
                   "response_s": number(summary["mean_response_s"]),
                   "utilization": number(summary["utilization"]),
                   "decisions": float(self._decisions), "invalid_actions": float(self._invalid)}
        if self.config.baselines:
            best = self._best_heuristic()
            metrics["best_heuristic_bsld"] = best
            metrics["bsld_vs_best"] = metrics["bsld"] / best
        return metrics


register()
