"""Training episodes: the GPU engine run with both agents sampling from their networks.

**Why callbacks, not a steppable environment.** The GPU engine
(:class:`~hpcpolicy.sim.gpu_engine.GpuEngine`) is a plain-Python event loop that calls its scorer
and placer whenever a decision is due. An episode therefore runs the engine *once*, from the
first submit to the last end, with callbacks (:mod:`hpcpolicy.marl.decide`) that build each
agent's observation, sample an action from that agent's current network and record the
transition in a :class:`Trajectory`. Nothing is suspended or replayed between decisions, so
one decision costs one network forward pass plus the engine's own work; and since a worker's
rollout is always made of whole episodes, a checkpoint needs no environment state at all
(only the generator that draws the windows), which makes resuming exact.

The two agents' decisions form one sequence, in the order the engine asks for them (a
selector choice, the allocator's placement of that job, the next selector choice, ...). The
shared reward (:mod:`hpcpolicy.marl.reward`) earned between two consecutive decisions is
credited to the first, and an episode's last decision gets everything up to the window's last
end and ends the episode. :mod:`hpcpolicy.marl.train` computes advantages over that sequence.

Example:
    See :func:`play`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import torch

from hpcpolicy.gpu.topology import Topology
from hpcpolicy.marl.config import MarlConfig, MarlEnvConfig
from hpcpolicy.marl.decide import AgentPlacer, AgentScorer
from hpcpolicy.marl.features import AllocatorObserver, SelectorObserver
from hpcpolicy.marl.reward import SharedReward
from hpcpolicy.ppo.vector import EpisodeStats
from hpcpolicy.sim.gpu_engine import GpuEngine
from hpcpolicy.world.split import window_range

if TYPE_CHECKING:
    from hpcpolicy.cluster import ClusterSpec
    from hpcpolicy.marl.networks import TwoAgents
    from hpcpolicy.workload import Workload

__all__ = ["EMPTY_WINDOWS", "EPISODE_METRICS", "Trajectory", "WindowSource", "play"]

Obs = dict[str, npt.NDArray[Any]]

EPISODE_METRICS = ("bsld", "gpu_utilization", "best_heuristic_bsld", "bsld_vs_best",
                   "selector_decisions", "allocator_decisions")
"""Metrics of a finished episode (the best heuristic's only with baselines)."""

EMPTY_WINDOWS = 20
"""Windows in a row without a single decision to make, after which a loop over
:meth:`WindowSource.next` gives up (the workload leaves the agents no choice)."""


@dataclass
class Trajectory:
    """Transitions of whole episodes, both agents interleaved in decision order."""

    agent: list[int] = field(default_factory=list)
    """Agent of each decision (0 selector, 1 allocator)."""
    rewards: list[float] = field(default_factory=list)
    """Shared reward credited to each decision."""
    dones: list[bool] = field(default_factory=list)
    """True at the last decision of an episode."""
    values: list[float] = field(default_factory=list)
    """The acting agent's value estimate at each decision."""
    obs: tuple[list[Obs], list[Obs]] = field(default_factory=lambda: ([], []))
    """Each agent's observations, in its own order."""
    actions: tuple[list[int], list[int]] = field(default_factory=lambda: ([], []))
    logprobs: tuple[list[float], list[float]] = field(default_factory=lambda: ([], []))

    def __len__(self) -> int:
        return len(self.agent)

    def add(self, agent: int, obs: Obs, action: int, logprob: float, value: float) -> None:
        """Record one decision (its reward follows)."""
        self.agent.append(agent)
        self.rewards.append(0.0)
        self.dones.append(False)
        self.values.append(value)
        self.obs[agent].append(obs)
        self.actions[agent].append(action)
        self.logprobs[agent].append(logprob)


class WindowSource:
    """The episodes' windows: uniform over the configured part of the workload.

    Args:
        workload: The jobs.
        cluster: The machine.
        env: Episode options.
        seed: Seeds the generator that draws window starts (its state is checkpointed).
    """

    def __init__(self, workload: Workload, cluster: ClusterSpec, env: MarlEnvConfig,
                 seed: int) -> None:
        self.workload, self.cluster, self.env = workload, cluster, env
        self.topology = Topology.from_cluster(cluster)
        self.first, self.last = window_range(len(workload), env.split, env.train_frac,
                                             env.window_size)
        self.rng = np.random.default_rng(seed)

    def next(self) -> Workload:
        """The next episode's window."""
        start = int(self.rng.integers(self.first, self.last + 1))
        return self.workload.take(np.arange(start, start + self.env.window_size))

    def state_dict(self) -> dict[str, Any]:
        """The generator's state (plain data)."""
        return {"rng": self.rng.bit_generator.state}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from :meth:`state_dict`'s state."""
        self.rng.bit_generator.state = state["rng"]


class _Sampler:
    """The training :data:`~hpcpolicy.marl.decide.Choose`: sample, record, credit rewards."""

    def __init__(self, nets: TwoAgents, gen: torch.Generator, traj: Trajectory,
                 device: torch.device) -> None:
        self.nets, self.gen, self.traj, self.device = nets, gen, traj, device
        self.reward: SharedReward | None = None
        self.decisions = [0, 0]

    def __call__(self, agent: int, obs: Obs, now: int) -> int:
        assert self.reward is not None
        earned = self.reward.mark(now)
        if earned is not None:  # since this episode's previous decision
            self.traj.rewards[-1] += earned
        jobs, cluster, mask = (torch.as_tensor(obs[key], device=self.device)[None]
                               for key in ("jobs", "cluster", "mask"))
        with torch.no_grad():
            action, logprob, _, value = self.nets.agent(agent).get_action_and_value(
                jobs, cluster, mask, generator=self.gen)
        choice = int(action[0])
        self.traj.add(agent, obs, choice, float(logprob[0]), float(value[0]))
        self.decisions[agent] += 1
        return choice


def play(window: Workload, source: WindowSource, cfg: MarlConfig, nets: TwoAgents,
         gen: torch.Generator, traj: Trajectory, device: torch.device) -> EpisodeStats:
    """Run one episode on ``window``, appending its decisions to ``traj``.

    Returns:
        The episode's return, decisions and :data:`EPISODE_METRICS`.
    """
    env, topo = source.env, source.topology
    sampler = _Sampler(nets, gen, traj, device)
    engine = GpuEngine(window, source.cluster, env.sim_config(),
                       AgentScorer(SelectorObserver(window, topo, env.k, env.visible), sampler),
                       AgentPlacer(AllocatorObserver(window, topo), sampler))
    first = len(traj)
    sampler.reward = reward = SharedReward(engine, cfg.bsld_weight, cfg.gpu_util_weight,
                                           cfg.util_span)
    engine.run()
    end = reward.last_end()
    earned = reward.mark(end)
    if len(traj) > first:
        traj.rewards[-1] += earned or 0.0
        traj.dones[-1] = True
    bsld, util = reward.terms(end)
    metrics = {"bsld": bsld, "gpu_utilization": util,
               "selector_decisions": float(sampler.decisions[0]),
               "allocator_decisions": float(sampler.decisions[1])}
    if env.baselines:
        best = _best_heuristic(window, source)
        metrics.update(best_heuristic_bsld=best, bsld_vs_best=bsld / best)
    return EpisodeStats(sum(traj.rewards[first:]), len(traj) - first, metrics)


def _best_heuristic(window: Workload, source: WindowSource) -> float:
    """The lowest mean bounded slowdown of the baselines (first-available) on ``window``."""
    from hpcpolicy.sim.engine import simulate
    from hpcpolicy.sim.metrics import outcome_table, summarize

    return min(float(summarize(outcome_table(window, simulate(
        window, source.cluster, source.env.sim_config(name)), identity=False),
        source.cluster)["mean_bsld"]) for name in source.env.baselines)
