"""Training an inspector: imitate, on each training window, the heuristic that was best there.

Issue 27's evidence says that picking each test window's best heuristic in hindsight would
gain 5-26 % over the validation-chosen one: a better choice exists at most windows, but no
single heuristic makes it. The inspector learns it by imitation, a well-grounded and cheap
method (no reward shaping, no credit assignment over thousands of decisions):

1. ``windows`` random windows of the fitting part (the first ``fit_frac(train_frac,
   val_frac)`` of the jobs: 0-60 % with the defaults; the validation part after it is never
   read here) replay under every proposing heuristic (:data:`~hpcpolicy.inspector.features.
   RANKERS`); the one of lowest mean bounded slowdown is the window's *teacher*, unless it
   beats the deployed heuristic there by less than ``min_gain`` (a share of the deployed
   heuristic's mean bsld): then the deployed heuristic teaches, so that small, noisy wins do
   not teach the inspector to depart from it.
2. Each window replays once more with the deployed heuristic proposing and the teacher
   accepting: at each decision with a choice, the proposal the teacher ranks first is
   accepted, and the proposals' features with that label are recorded. On windows where the
   deployed heuristic is the teacher, every label is "accept the first proposal".
3. The proposal scorer (:class:`~hpcpolicy.learn.networks.JobScorer`, whose rank bias makes
   the untrained inspector accept the first proposal) is fitted by cross-entropy over the
   proposals of each decision (Adam, full batch).
4. ``dagger_rounds`` further rounds (DAgger: Ross, Gordon and Bagnell, AISTATS 2011) replay
   the windows with the *inspector* accepting and the teacher labelling, so that it also
   learns in the states its own choices lead to; the scorer is refitted on all the labels.

:func:`fit_inspector` returns the trained scorer and what it saw; the artifact is written by
:func:`~hpcpolicy.inspector.artifact.export_inspector` (:func:`train_inspector` does both).
Whether the inspector is deployed is decided on the validation part by the model card's rule,
above this layer (``python -m benchmarks.inspector``).

Example:
    >>> cfg = InspectorConfig(windows=4, window_size=64)
    >>> cfg.k, cfg.backfill
    (8, 'easy')
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from hpcpolicy.config import Config, choice
from hpcpolicy.env.spaces import CLUSTER_FEATURES, JOB_FEATURES
from hpcpolicy.inspector.artifact import export_inspector
from hpcpolicy.inspector.decision import DEFAULT_K, Inspector
from hpcpolicy.inspector.features import CANDIDATE_FEATURES, RANKERS, Candidates
from hpcpolicy.sim.engine import simulate
from hpcpolicy.sim.types import BACKFILL_MODES, SimConfig
from hpcpolicy.sim.windows import WindowConfig, replay
from hpcpolicy.world.protocol import TRAIN_FRAC, VAL_FRAC
from hpcpolicy.world.split import fit_frac, part_range, split_starts

if TYPE_CHECKING:
    from hpcpolicy.cluster import ClusterSpec
    from hpcpolicy.inspector.decision import Chooser
    from hpcpolicy.learn.networks import JobScorer
    from hpcpolicy.policies.base import Policy
    from hpcpolicy.sim.types import RunningJobs, SimResult
    from hpcpolicy.workload import Workload

__all__ = ["InspectorConfig", "Labels", "fit_inspector", "train_inspector"]


@dataclass(frozen=True)
class InspectorConfig(Config):
    """How an inspector is trained."""

    label = "inspector"
    algo: str = "inspector-bc"
    """Recorded in the manifest: behaviour cloning of the per-window best heuristic."""
    heuristic: str = choice("fcfs", RANKERS)
    """The deployed heuristic whose proposals are inspected (the validation-chosen one)."""
    k: int = DEFAULT_K
    """Proposals examined per decision."""
    backfill: str = choice("easy", BACKFILL_MODES)
    """Backfilling the windows replay under (the one the inspector is deployed with)."""
    windows: int = 24
    """Training windows drawn from the fitting part."""
    window_size: int = 256
    """Jobs per window."""
    warm: bool = False
    """Windows start with the jobs then running (RICC needs it: an empty machine never
    queues)."""
    train_frac: float = TRAIN_FRAC
    """The training part (validation included); the test part follows it."""
    val_frac: float = VAL_FRAC
    """The validation part, the last of the training part; never read here."""
    seed: int = 1
    """Seeds the windows drawn and the network's initial weights."""
    hidden: tuple[int, ...] = (32, 16)
    """Widths of the proposal scorer's hidden layers."""
    rank_bias: float = 2.0
    """Initial preference for earlier proposals (the untrained inspector accepts the first)."""
    epochs: int = 300
    """Full-batch Adam steps per fit."""
    lr: float = 3e-3
    """Adam's learning rate."""
    dagger_rounds: int = 1
    """Rounds in which the inspector acts and the teacher labels."""
    min_gain: float = 0.0
    """A window's best heuristic teaches only if its mean bsld there is at least this share
    below the deployed heuristic's; otherwise the deployed heuristic does (labels: accept)."""

    def validate(self) -> None:
        self._at_least(1, "k", "windows", "window_size", "epochs")
        self._at_least(0, "dagger_rounds", "min_gain")
        self._require(self.lr > 0, "lr", f"must be > 0, got {self.lr}")
        self._require(all(h >= 1 for h in self.hidden), "hidden", "widths must be >= 1")
        self._require(0.0 <= self.val_frac < self.train_frac < 1.0, "val_frac",
                      f"need 0 <= val_frac < train_frac < 1, got {self.val_frac}, "
                      f"{self.train_frac}")

    def sim_config(self, policy: str) -> SimConfig:
        """The engine options a window replays with."""
        return SimConfig(policy=policy, backfill=self.backfill)

    def window_config(self, starts: tuple[int, ...]) -> WindowConfig:
        """The windows at ``starts``."""
        return WindowConfig(size=self.window_size, count=len(starts), starts=starts,
                            warm=self.warm)


@dataclass
class Labels:
    """What the teachers said: one row per decision with a choice."""

    jobs: list[npt.NDArray[np.float32]]
    cluster: list[npt.NDArray[np.float32]]
    mask: list[npt.NDArray[np.int8]]
    label: list[int]

    def record(self, c: Candidates, label: int) -> None:
        """Keep one decision and the proposal the teacher accepts."""
        self.jobs.append(c.jobs)
        self.cluster.append(c.cluster)
        self.mask.append(c.mask)
        self.label.append(label)

    @property
    def accept_share(self) -> float:
        """Share of decisions whose label is the first proposal."""
        return float(np.mean(np.asarray(self.label) == 0)) if self.label else 1.0


_FIRST_RANK = len(JOB_FEATURES)  # where the rank columns start in a proposal's features


def teacher(name: str) -> Chooser:
    """Accept the proposal that heuristic ``name`` ranks first among the proposals (its
    rank column's smallest value; ties: the earlier proposal)."""
    col = _FIRST_RANK + RANKERS.index(name)

    def choose(c: Candidates) -> int:
        ranks = np.where(c.mask > 0, c.jobs[:, col], np.inf)
        return int(np.argmin(ranks))

    return choose


def _with(policy: Policy) -> Any:
    def run(workload: Workload, cluster: ClusterSpec, cfg: SimConfig, *,
            running: RunningJobs | None = None) -> SimResult:
        return simulate(workload, cluster, cfg, running=running, policy=policy)
    return run


def teachers(workload: Workload, machine: ClusterSpec, cfg: InspectorConfig,
             starts: tuple[int, ...]) -> list[dict[str, Any]]:
    """Every proposing heuristic's mean bsld on each window at ``starts``, the best, and the
    teacher (the best, or the deployed heuristic where the best gains less than
    ``cfg.min_gain``)."""
    runs = replay(workload, machine, [cfg.sim_config(h) for h in RANKERS],
                  cfg.window_config(starts))
    out = []
    for i, start in enumerate(starts):
        bsld = {run.config.policy: float(run.windows[i].summary["mean_bsld"]) for run in runs}
        best = min(bsld, key=lambda h: bsld[h])
        gains = bsld[best] <= (1.0 - cfg.min_gain) * bsld[cfg.heuristic]
        out.append({"start": start, "best": best, "teacher": best if gains else cfg.heuristic,
                    "bsld": bsld})
    return out


def _collect(workload: Workload, machine: ClusterSpec, cfg: InspectorConfig,
             windows: list[dict[str, Any]], labels: Labels, actor: Chooser | None) -> None:
    """Replay each window with the teacher labelling and ``actor`` (None: the teacher)
    accepting."""
    for window in windows:
        label = teacher(window["teacher"])

        def choose(c: Candidates, label: Chooser = label) -> int:
            said = label(c)
            if c.count > 1:
                labels.record(c, said)
            return said if actor is None else actor(c)

        policy = Inspector(cfg.heuristic, choose, k=cfg.k)
        replay(workload, machine, [cfg.sim_config(policy.name)],
               cfg.window_config((window["start"],)), simulate=_with(policy))


def _fit(net: JobScorer, labels: Labels, cfg: InspectorConfig) -> float:
    """Fit ``net`` to the labels by cross-entropy over each decision's proposals; the final
    loss."""
    import torch

    jobs = torch.as_tensor(np.stack(labels.jobs))
    cluster = torch.as_tensor(np.stack(labels.cluster))
    mask = torch.as_tensor(np.stack(labels.mask)).bool()
    target = torch.as_tensor(labels.label, dtype=torch.int64)
    opt = torch.optim.Adam(net.parameters(), lr=cfg.lr)
    loss = torch.zeros(())
    for _ in range(cfg.epochs):
        logits = net(jobs, cluster).masked_fill(~mask, -1e9)
        loss = torch.nn.functional.cross_entropy(logits, target)
        opt.zero_grad()
        loss.backward()  # type: ignore[no-untyped-call]
        opt.step()
    return float(loss.detach())


def _acting(net: JobScorer) -> Chooser:
    import torch

    def choose(c: Candidates) -> int:
        with torch.no_grad():
            scores = net(torch.as_tensor(c.jobs)[None], torch.as_tensor(c.cluster)[None])[0]
        return int(torch.argmax(scores.masked_fill(~torch.as_tensor(c.mask > 0), -1e9)))

    return choose


def fit_inspector(workload: Workload, machine: ClusterSpec,
                  cfg: InspectorConfig) -> tuple[JobScorer, dict[str, Any]]:
    """Train an inspector over ``cfg.heuristic`` on the fitting part of ``workload``.

    Returns:
        The proposal scorer, and what training saw: the windows with their teachers, the
        share of "accept the first proposal" labels, the decisions labelled, the final loss,
        the fitting part's job range and the wall time.

    Raises:
        ConfigError: The fitting part holds fewer jobs than one window.
    """
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # small tensors, one decision at a time: threads only contend
    try:
        return _fit_inspector(workload, machine, cfg)
    finally:
        torch.set_num_threads(threads)


def _fit_inspector(workload: Workload, machine: ClusterSpec,
                   cfg: InspectorConfig) -> tuple[JobScorer, dict[str, Any]]:
    from hpcpolicy.learn.networks import JobScorer
    from hpcpolicy.learn.seeding import seed_everything

    began = time.perf_counter()
    seed_everything(cfg.seed)
    end = fit_frac(cfg.train_frac, cfg.val_frac)
    starts = split_starts(len(workload), "train", end,
                          WindowConfig(size=cfg.window_size, count=cfg.windows, seed=cfg.seed))
    windows = teachers(workload, machine, cfg, starts)
    net = JobScorer(len(CANDIDATE_FEATURES), len(CLUSTER_FEATURES), cfg.hidden,
                    rank_bias=cfg.rank_bias)
    labels = Labels([], [], [], [])
    loss = float("nan")
    for round_ in range(cfg.dagger_rounds + 1):
        _collect(workload, machine, cfg, windows, labels, None if round_ == 0 else _acting(net))
        if labels.label:
            loss = _fit(net, labels, cfg)
    net.eval()
    return net, {"windows": windows, "decisions": len(labels.label),
                 "accept_share": labels.accept_share, "loss": loss,
                 "fit_jobs": list(part_range(len(workload), "train", end)),
                 "wall_s": time.perf_counter() - began}


def train_inspector(workload: Workload, machine: ClusterSpec, cfg: InspectorConfig,
                    out_dir: str | os.PathLike[str], *,
                    training_data: dict[str, Any] | None = None) -> tuple[Path, dict[str, Any]]:
    """:func:`fit_inspector`, then its artifact in ``out_dir`` (format ``hpcpolicy.inspector``).

    Args:
        workload: The whole log (training reads only its fitting part).
        machine: The machine.
        cfg: How to train.
        out_dir: The policy directory to write.
        training_data: ``{"path", "sha256"}`` of the job table, recorded in the manifest.

    Returns:
        The policy directory and what :func:`fit_inspector` returned about training.
    """
    net, seen = fit_inspector(workload, machine, cfg)
    lo, hi = seen["fit_jobs"]
    split = {"part": "train", "jobs": [lo, hi],
             "submit_s": [int(workload.submit[lo]) + workload.origin,
                          int(workload.submit[hi - 1]) + workload.origin]}
    path = export_inspector(net, out_dir, heuristic=cfg.heuristic, k=cfg.k,
                            config=cfg.to_dict(),
                            metrics={"loss": seen["loss"], "accept_share": seen["accept_share"],
                                     "decisions": float(seen["decisions"])},
                            provenance={"training_data": training_data, "split": split,
                                        "teachers": [w["teacher"] for w in seen["windows"]]})
    return path, seen
