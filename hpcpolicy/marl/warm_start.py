"""Start the two-agent scheduler from a heuristic's choices (``warm_start`` in the config).

PPO from random weights spends much of a short budget learning what a classic rule already
knows. With ``warm_start = "sjf"`` (any heuristic of :mod:`hpcpolicy.policies.heuristics`),
each worker first replays ``warm_start_decisions`` selector decisions on training windows in
which the heuristic chooses: at every decision the selector would be asked, the shown job
the heuristic ranks first among those the selector may choose. Jobs are placed by the
first-available allocator meanwhile. The selector's scorer is then fitted to those choices
by cross-entropy (``warm_start_steps`` Adam steps at ``warm_start_lr`` on minibatches of
``warm_start_batch``, gradients averaged over the DD-PPO workers), and PPO continues from
there. The allocator and both value networks start as usual.

How close the clone comes is reported: the share of the recorded decisions on which the
fitted selector's best-scored job is the heuristic's (``agreement`` in
``warm_start.json``). Under ``visible = "shortest"`` or ``"extremes"`` the SJF choice is
always the first slot, so the selector can copy SJF exactly; under the other rules it copies
SJF among the jobs it is shown.

Example:
    >>> from hpcpolicy.marl.config import MarlConfig
    >>> MarlConfig(warm_start="sjf").warm_start
    'sjf'
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
import torch

from hpcpolicy.marl.decide import AgentScorer, Obs
from hpcpolicy.marl.episode import EMPTY_WINDOWS
from hpcpolicy.marl.features import SelectorObserver
from hpcpolicy.policies.heuristics import get_policy
from hpcpolicy.sim.gpu_engine import GpuEngine

if TYPE_CHECKING:
    from hpcpolicy.marl.config import MarlConfig
    from hpcpolicy.marl.episode import WindowSource
    from hpcpolicy.marl.networks import TwoAgents
    from hpcpolicy.policies.base import QueueView, Scorer
    from hpcpolicy.ppo.ppo import Comm

__all__ = ["clone_heuristic"]

I64 = npt.NDArray[np.int64]


class _HeuristicSelector(AgentScorer):
    """The selector's decision rules with the heuristic choosing; records each choice that
    had more than one option."""

    def __init__(self, observer: SelectorObserver, heuristic: Scorer,
                 record: list[tuple[Obs, int]]) -> None:
        super().__init__(observer, lambda agent, obs, now: 0)
        self._heuristic = heuristic
        self._record = record

    def slot(self, view: QueueView, obs: Obs, shown: I64) -> int:
        valid = np.flatnonzero(obs["mask"])
        ranks = np.asarray(self._heuristic.scores(view), np.float64)[shown[valid]]
        choice = int(valid[int(np.argmin(ranks))])  # the first of equals: earlier slot
        if valid.shape[0] > 1:
            self._record.append((obs, choice))
        return choice


def _decisions(source: WindowSource, cfg: MarlConfig) -> list[tuple[Obs, int]]:
    """At least ``cfg.warm_start_decisions`` of the heuristic's selections (whole episodes)."""
    env, record = source.env, list[tuple[Obs, int]]()
    heuristic = get_policy(cfg.warm_start)
    ranking, placing = env.sim_config(heuristic.name), env.sim_config(allocator="first-available")
    empty = 0
    while len(record) < cfg.warm_start_decisions:
        before = len(record)
        window = source.next()
        GpuEngine(window, source.cluster, placing,
                  _HeuristicSelector(SelectorObserver(window, source.topology, env.k,
                                                      env.visible),
                                     heuristic.bind(window, source.cluster, ranking),
                                     record)).run()
        empty = empty + 1 if len(record) == before else 0
        if empty == EMPTY_WINDOWS:
            break  # the windows leave the selector no choice; PPO's own check reports it
    return record


def clone_heuristic(nets: TwoAgents, source: WindowSource, cfg: MarlConfig, comm: Comm,
                    gen: torch.Generator, device: torch.device) -> dict[str, float]:
    """Fit the selector to ``cfg.warm_start``'s choices on training windows (every worker
    collects its own and the gradients are averaged); the facts of the fit.

    Returns:
        ``decisions`` (over all workers), ``agreement`` (share of them on which the fitted
        selector's best option is the heuristic's), ``loss`` (mean cross-entropy of the last
        step) and ``seconds``.
    """
    start = time.perf_counter()
    record = _decisions(source, cfg)
    selector = nets.selector
    params = list(selector.scorer.parameters())
    optimizer = torch.optim.Adam(params, lr=cfg.warm_start_lr, eps=1e-5)
    n = len(record)
    jobs, cluster, mask = (torch.as_tensor(np.stack([o[key] for o, _ in record]), device=device)
                           if n else torch.zeros(0) for key in ("jobs", "cluster", "mask"))
    actions = torch.as_tensor([a for _, a in record], dtype=torch.int64, device=device)
    loss = torch.zeros((), device=device)
    for _ in range(cfg.warm_start_steps):
        optimizer.zero_grad()
        if n:  # a worker without decisions still joins the others' average
            rows = torch.randint(n, (min(cfg.warm_start_batch, n),), generator=gen,
                                 device=device)
            logits = selector.masked_logits(jobs[rows], cluster[rows], mask[rows])
            loss = torch.nn.functional.cross_entropy(logits, actions[rows])
            loss.backward()  # type: ignore[no-untyped-call]
        comm.average_gradients(params, 1.0 / comm.world_size)
        optimizer.step()
    agree = 0.0
    if n:
        with torch.no_grad():
            best = selector.masked_logits(jobs, cluster, mask).argmax(-1)
        agree = float((best == actions).sum())
    total = comm.all_sum(torch.tensor([n, agree, float(loss.detach())],
                                      dtype=torch.float64)).tolist()
    return {"decisions": total[0], "agreement": total[1] / max(total[0], 1.0),
            "loss": total[2] / comm.world_size, "seconds": time.perf_counter() - start}
