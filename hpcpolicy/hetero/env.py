"""The heterogeneous-GPU assignment task as a Gymnasium environment.

Example:
    Windows of two 4-GPU jobs, on one node of each of two GPU types:

    >>> from hpcpolicy.cluster import NodeGroup
    >>> from hpcpolicy.workload import Workload
    >>> z = np.zeros(4, dtype=np.int64)
    >>> w = Workload(job_id=np.array(list("abcd"), dtype=object), submit=np.arange(4) * 10,
    ...     run_time=np.full(4, 100), req_walltime=np.full(4, 100), procs=np.ones(4, np.int64),
    ...     nodes=z, gpus=np.full(4, 4), mem_mib=z, user=z.astype(np.int32),
    ...     partition=z.astype(np.int32), logged_start=z - 1)
    >>> spec = ClusterSpec((NodeGroup("old", 1, 8, gpus=4, gpu_type="v100"),
    ...                     NodeGroup("new", 1, 8, gpus=4, gpu_type="a100")))
    >>> env = GpuAssignEnv(w, spec, GpuDqnConfig(window_size=2, train_frac=0.5))
    >>> obs, info = env.reset(seed=1)
    >>> info["mask"].tolist()  # either type can take the job
    [True, True]
    >>> obs, reward, terminated, truncated, info = env.step(0)
    >>> terminated  # the other job then fits only on the other type: nothing left to decide
    True
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import numpy.typing as npt

from hpcpolicy.cluster import ClusterSpec
from hpcpolicy.errors import ConfigError
from hpcpolicy.gpu.placer import PlacementView
from hpcpolicy.hetero.config import GpuDqnConfig
from hpcpolicy.hetero.observe import (
    OBS_BOUND,
    PoolObserver,
    action_pools,
    obs_dim,
    only_choice,
    type_specs,
)
from hpcpolicy.hetero.reward import AdlroMeter, AdlroTerms
from hpcpolicy.hetero.stepping import EngineRun
from hpcpolicy.sim.types import SimConfig
from hpcpolicy.workload import Workload
from hpcpolicy.world.split import part_range, window_range

__all__ = ["EPISODE_TRIES", "GpuAssignEnv", "reward_scale"]

F32 = npt.NDArray[np.float32]

EPISODE_TRIES = 100
"""Windows drawn in a row without one real choice before :meth:`GpuAssignEnv.reset` gives up."""


def reward_scale(workload: Workload, cfg: GpuDqnConfig) -> float:
    """``cfg.reward_scale_s``, or the mean logged run time of the training part's jobs."""
    if cfg.reward_scale_s is not None:
        return cfg.reward_scale_s
    _, cut = part_range(len(workload), "train", cfg.train_frac)
    return max(float(np.mean(workload.run_time[:cut])), 1.0)


class GpuAssignEnv(gym.Env[F32, np.int64]):
    """Give each starting job a GPU type; FCFS decides which job starts.

    ## Description

    An episode replays a window of ``window_size`` consecutive jobs from the training part
    (the first ``train_frac`` of the workload) on the node-level GPU engine
    (:class:`~hpcpolicy.sim.gpu_engine.GpuEngine`), FCFS with the configured backfilling. Whenever
    a job is about to start and more than one GPU type can hold it now, the agent picks the
    type; inside it, the most compact candidate placement is taken
    (:func:`~hpcpolicy.hetero.observe.pool_candidate`). Starts with a single possible type
    (and CPU jobs) are placed the same way without asking. The job then runs for its logged
    time scaled by the engine's speed factor (logged type / chosen type) and spread penalty.

    ## Action Space

    ``Discrete(P)``: the cluster's GPU types in spec order. ``info["mask"]`` tells which can
    hold the job now (also the observation's ``valid`` entries). There is no "wait" action:
    the engine's placer protocol must pick one of the candidates. An action whose type cannot
    hold the job is taken as the first valid type, and ``info["invalid_action"]`` is set.

    ## Observation Space

    ``Box(6 + 5 P)`` float32, described in :mod:`hpcpolicy.hetero.observe`.

    ## Rewards

    ADLRO, ``-(job completion time + lambda * idle GPU time) / scale`` per step, each term as
    measured in :mod:`hpcpolicy.hetero.reward`.

    ## Episode End

    Terminated when every job of the window has started (the next observation is zeros);
    never truncated. A window without any real choice is skipped at reset.

    ## Arguments

    * ``workload``: the jobs (sorted by submit time, as :class:`Workload` keeps them).
    * ``cluster``: the machine; at least two GPU types.
    * ``cfg``: window size, train fraction, backfilling, ``idle_weight`` (lambda) and
      ``reward_scale_s``.

    ``info`` at the end of an episode: ``episode_jct_s`` (mean completion time of the jobs
    placed from the first decision on), ``episode_idle_gpu_h``, ``episode_decisions``,
    ``episode_jobs``.
    """

    def __init__(self, workload: Workload, cluster: ClusterSpec, cfg: GpuDqnConfig) -> None:
        self.workload, self.cluster, self.cfg = workload, cluster, cfg
        topo, pools = action_pools(cluster)
        self.sim_cfg = SimConfig(policy="fcfs", backfill=cfg.backfill)
        self.first, self.last = window_range(len(workload), "train", cfg.train_frac,
                                             cfg.window_size)
        self.types = type_specs(topo, pools)
        """(GPU type, speed) of each action."""
        self.scale_s = reward_scale(workload, cfg)
        self._dim = obs_dim(len(pools))
        self.action_space = gym.spaces.Discrete(len(pools))
        self.observation_space = gym.spaces.Box(-OBS_BOUND, OBS_BOUND, shape=(self._dim,),
                                                dtype=np.float32)
        self._run: EngineRun | None = None
        self._obs: PoolObserver | None = None
        self._meter: AdlroMeter | None = None
        self._view: PlacementView | None = None
        self._choices: list[int | None] = []
        self._episode = AdlroTerms()
        self._decisions = 0

    # -- gymnasium API ------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[F32, dict[str, Any]]:
        """Start a new window; run its starts without a choice up to the first real one."""
        super().reset(seed=seed)
        for _ in range(EPISODE_TRIES):
            start = int(self.np_random.integers(self.first, self.last + 1))
            self._begin(self.workload.take(np.arange(start, start + self.cfg.window_size)))
            if self._advance():
                self._meter_take()  # placed before the first choice: no step's doing
                self._episode, self._decisions = AdlroTerms(), 0
                return self._observation(), self._info()
        raise ConfigError(f"{EPISODE_TRIES} windows of {self.cfg.window_size} jobs in a row "
                          "offered no choice of GPU type (each start fit one type only); use "
                          "a busier workload, larger windows, or a cluster whose GPU types "
                          "can hold the same jobs")

    def step(self, action: np.int64 | int) -> tuple[F32, float, bool, bool, dict[str, Any]]:
        """Place the current job on GPU type ``action``; run to the next real choice."""
        assert self._view is not None, "call reset() first"
        a = int(action)
        invalid = not (0 <= a < len(self._choices) and self._choices[a] is not None)
        if invalid:
            a = next(i for i, k in enumerate(self._choices) if k is not None)
        k = self._choices[a]
        assert k is not None
        self._place(self._view, k)
        self._decisions += 1
        more = self._advance()
        terms = self._meter_take()
        self._episode.add(terms)
        reward = terms.reward(self.cfg.idle_weight, self.scale_s)
        if more:
            return self._observation(), reward, False, False, {**self._info(),
                                                               "invalid_action": invalid}
        ep = self._episode
        info = {"mask": np.zeros(len(self.types), dtype=bool), "invalid_action": invalid,
                "episode_jct_s": ep.jct_s / max(ep.jobs, 1),
                "episode_idle_gpu_h": ep.idle_gpu_s / 3600.0,
                "episode_decisions": self._decisions, "episode_jobs": ep.jobs}
        return np.zeros(self._dim, dtype=np.float32), reward, True, False, info

    def close(self) -> None:
        """End the engine thread of the current window."""
        if self._run is not None:
            self._run.close()
            self._run = None

    # -- helpers ------------------------------------------------------------------------------
    def _begin(self, window: Workload) -> None:
        self.close()
        self._obs = PoolObserver(window, self.cluster)
        capacity = int(self._obs.topo.pool_capacity[:, 1].sum())
        self._meter = AdlroMeter(window, self._obs.queue, capacity)
        self._run = EngineRun(window, self.cluster, self.sim_cfg)

    def _place(self, view: PlacementView, k: int) -> None:
        assert self._run is not None and self._obs is not None and self._meter is not None
        self._obs.queue.place(view.job)
        self._meter.place(view.job, view.now)
        self._run.answer(k)

    def _advance(self) -> bool:
        """Run to the next decision with a real choice (True), or to the end (False)."""
        assert self._run is not None and self._obs is not None and self._meter is not None
        while True:
            view = self._run.next()
            dur = self._run.engine.dur
            if view is None:
                self._meter.settle(dur)
                self._view = None
                return False
            self._meter.advance(view.now, dur)
            choices = self._obs.choices(view)
            only = only_choice(view, choices)
            if only is None:
                self._view, self._choices = view, choices
                return True
            self._place(view, only)

    def _meter_take(self) -> AdlroTerms:
        assert self._meter is not None
        return self._meter.take()

    def _observation(self) -> F32:
        assert self._obs is not None and self._view is not None
        return self._obs.observe(self._view, self._choices)

    def _info(self) -> dict[str, Any]:
        return {"mask": np.array([k is not None for k in self._choices], dtype=bool)}

