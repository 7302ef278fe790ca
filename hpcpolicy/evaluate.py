"""``hpcpolicy evaluate``: heuristics and trained policies on identical windows of a later period.

Every policy (a heuristic name, or a trained policy directory) runs with every backfilling mode
on the same windows of consecutive jobs, drawn from one part of the chronological split
(:mod:`hpcpolicy.world.split`; by default the *test* part, after every job a policy could have
trained on). Replays, metrics and windows are those of ``hpcpolicy simulate``
(:func:`hpcpolicy.sim.windows.replay`, :mod:`hpcpolicy.sim.metrics`): each metric is computed
per window and averaged over windows; the spread over windows (sample standard deviation, min,
max) says how much one number can be trusted. For every backfilling mode the best heuristic
(lowest mean bounded slowdown) is named, and each trained policy is compared with it.

A trained policy folder runs as deployed, as ``simulate``, ``whatif`` and ``advise`` run it:
when its model card's guard is active (:mod:`hpcpolicy.deploy.guard`), its fallback heuristic
runs in a row of its own, labelled ``DIR (deployed: fallback NAME)``, beside the raw learned
policy (the row labelled ``DIR``), so that a reader sees what the guard gave up or saved
(:meth:`Evaluation.deployed_vs_raw`). With the guard off, or no card, the two are the same
policy and run once. The rows of a folder never count as the best heuristic.
``EvaluateConfig(deployed=False)`` runs the raw policy only: the measurement the model card
records and decides the guard on (:mod:`hpcpolicy.training.card`), whose figures are
therefore the raw row's, and whose fallback heuristic's figures are the deployed row's.

On a GPU partition, ``allocators`` adds the placement heuristics as a third axis: every policy
runs with every allocator, so ``policies=("fcfs", "lcfs", "sjf")`` with
``allocators=GPU_ALLOCATORS`` is the nine-baseline matrix of the two-agent scheduler's paper
(:data:`GPU_BASELINES`). A trained policy that places GPUs itself (it has ``bind_placer``)
runs once, with its own placements. The best baseline is then the best policy + allocator
pair, and trained policies are also compared with the best baseline GPU utilisation.

Example:
    >>> cfg = EvaluateConfig(policies=("fcfs", "sjf"), backfills=("none", "easy"), windows=3,
    ...                      window_size=64)
    >>> cfg.split, cfg.window_config(starts=(0, 10, 20)).size
    ('test', 64)
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from hpcpolicy.compat import COMPAT_NAMES, compat_preset
from hpcpolicy.config import Config, choice
from hpcpolicy.errors import ConfigError
from hpcpolicy.gpu.registry import check_allocator
from hpcpolicy.sim.types import ALLOCATORS, BACKFILL_MODES, SimConfig
from hpcpolicy.sim.windows import Replay, WindowConfig, replay
from hpcpolicy.world.protocol import SPLITS, TRAIN_FRAC
from hpcpolicy.world.split import split_starts

if TYPE_CHECKING:
    from hpcpolicy.cluster import ClusterSpec
    from hpcpolicy.policies.base import Policy
    from hpcpolicy.workload import Workload
    from hpcpolicy.world.site_model import SiteModel

__all__ = ["GPU_ALLOCATORS", "GPU_BASELINES", "SPREAD_KEYS", "Deployment", "EvaluateConfig",
           "Evaluation", "evaluate"]

GPU_ALLOCATORS = ("first-available", "best-fit", "topology-aware")
"""The node-level allocators, in the order the evaluation matrix lists them."""
GPU_BASELINES = ("fcfs", "lcfs", "sjf")
"""Queue policies of the nine-baseline matrix (x :data:`GPU_ALLOCATORS`)."""

SPREAD_KEYS = ("mean_bsld", "mean_wait_s", "mean_response_s", "utilization", "gpu_utilization")
"""Summary metrics whose spread over windows is reported."""


@dataclass(frozen=True)
class EvaluateConfig(Config):
    """What to compare, on which windows.

    Example:
        >>> EvaluateConfig(policies=("sjf", "runs/x/policy")).backfills
        ('none',)
    """

    label: ClassVar[str] = "evaluate"

    policies: tuple[str, ...] = ("fcfs", "sjf", "f1")
    """Heuristic names and/or trained policy directories."""
    backfills: tuple[str, ...] = ("none",)
    """Backfilling modes; every policy runs with each."""
    windows: int = 10
    """Number of random windows (ignored when ``starts`` is given)."""
    window_size: int = 1024
    """Jobs per window."""
    seed: int = 1
    """Seed of the random window starts."""
    split: str = choice("test", SPLITS)
    """Part of the workload the windows lie in: test, train or all."""
    train_frac: float = TRAIN_FRAC
    """Share of the jobs (earliest first) in the training part."""
    starts: tuple[int, ...] | None = None
    """Explicit window starts (0-based job indices into the whole workload)."""
    warm: bool = False
    """Start each window with the jobs running at its first submit."""
    compat: str | None = choice(None, COMPAT_NAMES)
    """Engine semantics of a peer (``rlscheduler``) instead of the project's own."""
    kill_at_limit: bool = False
    """End a job at its requested walltime when its logged run time is longer."""
    exclusive_nodes: bool = False
    """Jobs occupy whole nodes (RLScheduler's machine model)."""
    allocators: tuple[str, ...] = ("first-fit",)
    """Placement rules; every policy runs with each (see the module docstring)."""
    deployed: bool = True
    """Run a trained policy folder as deployed (its card's guard applied) beside the raw
    policy; False runs the raw policy only (what the model card measures)."""

    def validate(self) -> None:
        if not self.policies:
            raise ConfigError("evaluate: give at least one policy")
        if len(set(self.policies)) != len(self.policies):
            raise ConfigError(f"evaluate: a policy is listed twice in {list(self.policies)}")
        bad = [b for b in self.backfills if b not in BACKFILL_MODES]
        if bad or not self.backfills:
            raise ConfigError(f"evaluate: backfill {bad or '(none given)'} must be among "
                              f"{', '.join(BACKFILL_MODES)}")
        if not self.allocators:
            raise ConfigError(f"evaluate: give an allocator, among {', '.join(ALLOCATORS)}")
        for allocator in self.allocators:
            check_allocator(allocator)  # a name of the registry, or a learned allocator's folder
        self.window_config()  # checks the window options
        for backfill in self.backfills:
            self.sim_config("fcfs", backfill)  # checks compat against backfilling

    def window_config(self, starts: tuple[int, ...] | None = None) -> WindowConfig:
        """The windows, with resolved ``starts`` when given."""
        return WindowConfig(size=self.window_size, count=self.windows, seed=self.seed,
                            starts=starts if starts is not None else self.starts, warm=self.warm)

    def sim_config(self, policy: str, backfill: str, allocator: str = "first-fit") -> SimConfig:
        """The engine options of one run."""
        return SimConfig(policy=policy, backfill=backfill, kill_at_limit=self.kill_at_limit,
                         compat=self.compat, exclusive_nodes=self.exclusive_nodes,
                         allocator=allocator)


def _spread(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"std": None, "min": None, "max": None}
    return {"std": statistics.stdev(values) if len(values) > 1 else 0.0,
            "min": min(values), "max": max(values)}


@dataclass(frozen=True)
class Deployment:
    """What a trained policy folder runs as when deployed (:mod:`hpcpolicy.deploy.guard`)."""

    spec: str
    """The policy folder, as given."""
    guard: str
    """``active`` (the fallback runs in its place), ``off`` (the card deploys the policy), or
    ``no card``."""
    fallback: str | None = None
    """The heuristic an active guard deploys."""

    @property
    def label(self) -> str:
        """The policy label of the row that runs the deployed fallback (active guard only)."""
        return f"{self.spec} (deployed: fallback {self.fallback})"

    def row(self, label: str) -> str:
        """Which run the row ``label`` of this folder is: ``deployed`` (the fallback),
        ``raw`` (the policy an active guard replaces), or ``deployed and raw``."""
        if self.guard != "active":
            return "deployed and raw"
        return "deployed" if label == self.label else "raw"


@dataclass
class Evaluation:
    """Every (policy, backfill) replay on the same windows."""

    config: EvaluateConfig
    starts: tuple[int, ...]
    """Index of each window's first job."""
    runs: list[Replay]
    """One replay per (backfill, policy), backfill-major."""
    learned: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Trained policies by spec: algo, reward, k and training data from their manifests."""
    placers: frozenset[str] = frozenset()
    """Trained policies that place GPUs themselves (run once, whatever the allocators)."""
    deployments: dict[str, Deployment] = field(default_factory=dict)
    """How each trained policy folder is deployed, by the policy label of each of its rows."""

    def is_trained(self, run: Replay) -> bool:
        """Whether ``run`` is a row of a trained policy folder (deployed or raw)."""
        return run.config.policy in self.learned or run.config.policy in self.deployments

    def deployed_vs_raw(self, run: Replay, key: str = "mean_bsld") -> float | None:
        """For the deployed fallback's row of a folder whose guard is active, the relative
        change of ``key`` against the raw policy on the same windows and options (mean
        bounded slowdown: positive means the fallback does worse); None for any other row."""
        dep = self.deployments.get(run.config.policy)
        if dep is None or dep.row(run.config.policy) != "deployed":
            return None
        raw = next(r for r in self.runs if r.config.policy == dep.spec
                   and r.config.backfill == run.config.backfill
                   and r.config.allocator == run.config.allocator)
        mine, theirs = run.summary[key], raw.summary[key]
        if mine is None or not theirs:
            return None
        return float(mine) / float(theirs) - 1.0

    def row_note(self, run: Replay) -> str:
        """What a policy folder's row runs, on a line of its own (a table stays narrow):
        ``(deployed: NAME)`` (the fallback), ``(raw)``, ``(guard off)``, or nothing (a
        heuristic, or a folder without a card)."""
        dep = self.deployments.get(run.config.policy)
        if dep is None or dep.guard == "no card":
            return ""
        row = dep.row(run.config.policy)
        return "\n" + {"deployed": f"(deployed: {dep.fallback})", "raw": "(raw)"}.get(
            row, "(guard off)")

    def guard_notes(self) -> list[str]:
        """A line per policy folder whose guard is active and per backfilling mode (and
        allocator): what runs in its place, and whether it does worse than the raw policy."""
        lines = []
        for run in self.runs:
            change = self.deployed_vs_raw(run)
            if change is None:
                continue
            dep, mine = self.deployments[run.config.policy], float(run.summary["mean_bsld"])
            figures = (f"on these windows (mean bsld {mine:.2f} against "
                       f"{mine / (1.0 + change):.2f}, {change:+.1%})")
            how = (f"does worse than the raw policy {figures}: the guard replaced a policy that "
                   "did better here" if change > 0 else
                   f"does no worse than the raw policy {figures}")
            where = run.config.backfill + ("" if len(self.config.allocators) == 1
                                           else f" + {run.config.allocator}")
            lines.append(f"{dep.spec}: its guard is active, so {dep.fallback} runs in its "
                         f"place; under {where} {dep.fallback} {how}")
        return lines

    def _deployment(self, run: Replay) -> dict[str, Any] | None:
        dep = self.deployments.get(run.config.policy)
        if dep is None:
            return None
        return {"policy_dir": dep.spec, "row": dep.row(run.config.policy), "guard": dep.guard,
                "fallback": dep.fallback, "deployed_vs_raw": self.deployed_vs_raw(run)}

    def spread(self, run: Replay) -> dict[str, dict[str, float | None]]:
        """Std (sample), min and max over windows of each of :data:`SPREAD_KEYS`."""
        return {key: _spread([float(w.summary[key]) for w in run.windows
                              if w.summary[key] is not None]) for key in SPREAD_KEYS}

    def label(self, run: Replay) -> str:
        """The run's policy, with its allocator when the evaluation compares allocators."""
        if len(self.config.allocators) == 1 or run.config.policy in self.placers:
            return run.config.policy
        return f"{run.config.policy} + {run.config.allocator}"

    def best_heuristics(self, key: str = "mean_bsld") -> dict[str, tuple[str, float]]:
        """Per backfilling mode, the heuristic (with its allocator) best on ``key``: the
        lowest mean bounded slowdown, or the highest ``gpu_utilization``."""
        sign = -1.0 if key == "gpu_utilization" else 1.0
        best: dict[str, tuple[str, float]] = {}
        for run in self.runs:
            value = run.summary[key]
            backfill = run.config.backfill
            if self.is_trained(run) or value is None:
                continue
            if backfill not in best or sign * value < sign * best[backfill][1]:
                best[backfill] = (self.label(run), float(value))
        return best

    def versus_best(self, run: Replay, key: str = "mean_bsld") -> float | None:
        """Relative change of ``key`` against the best heuristic on it (mean bounded
        slowdown: -0.1 is 10 % lower, i.e. better; GPU utilisation: +0.1 is 10 % higher,
        better); None for a heuristic or without one to compare with."""
        best = self.best_heuristics(key).get(run.config.backfill)
        value = run.summary[key]
        if not self.is_trained(run) or best is None or value is None or not best[1]:
            return None
        return float(value) / best[1] - 1.0

    def to_document(self, *, source: str, workload: Workload,
                    cluster: ClusterSpec) -> dict[str, Any]:
        """The ``--json`` document (``schemas/evaluate.schema.json``; no wall-clock figures:
        the same inputs give the same one)."""
        from hpcpolicy.version import __version__
        from hpcpolicy.world.split import part_range

        lo, hi = part_range(len(workload), self.config.split, self.config.train_frac)
        return {
            "hpcpolicy_version": __version__,
            "input": source,
            "config": self.config.to_dict(),
            "cluster": {"name": cluster.name, "cores": cluster.total_cores,
                        "nodes": cluster.total_nodes, "gpus": cluster.total_gpus},
            "split": {"part": self.config.split, "train_frac": self.config.train_frac,
                      "jobs": [lo, hi], "workload_jobs": len(workload)},
            "windows": {"size": self.config.window_size, "starts": list(self.starts),
                        "warm": self.config.warm},
            "best_heuristic": {b: {"policy": name, "mean_bsld": bsld}
                               for b, (name, bsld) in self.best_heuristics().items()},
            "best_heuristic_gpu_utilization": {
                b: {"policy": name, "gpu_utilization": util}
                for b, (name, util) in self.best_heuristics("gpu_utilization").items()},
            "learned": self.learned,
            "runs": [{
                "policy": run.config.policy,
                "backfill": run.config.backfill,
                "allocator": ("learned" if run.config.policy in self.placers
                              else run.config.allocator),
                "kind": "learned" if self.is_trained(run) else "heuristic",
                "deployment": self._deployment(run),
                "summary": run.summary,
                "gpu": run.gpu,
                "spread": self.spread(run),
                "bsld_vs_best_heuristic": self.versus_best(run),
                "gpu_utilization_vs_best_heuristic": self.versus_best(run, "gpu_utilization"),
                "windows": [{"start": w.start, "preloaded": w.preloaded, "backlog": w.backlog,
                             "summary": w.summary, "gpu": w.gpu} for w in run.windows],
            } for run in self.runs],
        }


def _manifest_facts(policy: Any) -> dict[str, Any]:
    """What a trained policy's manifest says (its ``artifact``: a loaded policy directory)."""
    manifest = policy.artifact.manifest
    return {"path": str(policy.artifact.path), "algo": manifest["algo"],
            "reward": manifest.get("reward"), "k": manifest.get("observation", {}).get("k"),
            "training_data": manifest.get("training_data"),
            "backend": "onnx"}  # the one runtime a policy runs with (hpcpolicy.artifact)


def _deployment(spec: str) -> Deployment:
    """How the trained policy folder ``spec`` is deployed, from its model card."""
    from hpcpolicy.deploy.guard import guard_state

    return Deployment(spec, *guard_state(spec))


def evaluate(workload: Workload, cluster: ClusterSpec, cfg: EvaluateConfig, *,
             on_step: Callable[[str, int, int], None] | None = None,
             site: SiteModel | None = None) -> Evaluation:
    """Run every policy with every backfilling mode on the same windows.

    Args:
        workload: The jobs.
        cluster: The machine.
        cfg: Policies, backfilling modes, windows and split.
        on_step: Progress callback of :func:`hpcpolicy.sim.windows.replay`.
        site: A site model whose replay options (limits, pools, whole nodes) every run
            takes; ``workload`` and ``cluster`` are then its world's
            (:func:`hpcpolicy.world.open.open_world`).

    Returns:
        The replays, the windows and what the trained policies' manifests say.

    Raises:
        ConfigError: An unknown policy, windows that do not fit in the chosen part.
        ArtifactError: A trained policy that cannot be loaded.

    Example:
        >>> ev = evaluate(workload, cluster, EvaluateConfig(
        ...     policies=("sjf", "runs/x/policy"), backfills=("easy",)))  # doctest: +SKIP
        >>> ev.versus_best(ev.runs[1])  # doctest: +SKIP
        -0.12
    """
    from hpcpolicy.deploy.resolve import policy_simulator, resolve_policy
    from hpcpolicy.policies.heuristics import Heuristic, get_policy
    from hpcpolicy.sim.engine import check_one_engine

    raw = {spec: resolve_policy(spec, guard=False) for spec in cfg.policies}
    deployments = {spec: _deployment(spec) for spec, p in raw.items()
                   if cfg.deployed and not isinstance(p, Heuristic)}
    policies: dict[str, Policy] = {}
    for spec, p in raw.items():
        dep = deployments.get(spec)
        if dep is not None and dep.fallback is not None:  # the fallback's row, then the raw
            policies[dep.label] = get_policy(dep.fallback)
            deployments[dep.label] = dep
        policies[spec] = p
    labels = {spec: p.name if spec in raw and isinstance(p, Heuristic) else spec
              for spec, p in policies.items()}
    starts = split_starts(len(workload), cfg.split, cfg.train_frac, cfg.window_config())
    placers = frozenset(spec for spec, p in policies.items() if hasattr(p, "bind_placer"))
    pairs = [(spec, allocator) for allocator in cfg.allocators for spec in policies
             if spec not in placers or allocator == cfg.allocators[0]]
    check_one_engine([(f"{spec} (allocator {a})", policies[spec], a) for spec, a in pairs])
    configs = [cfg.sim_config(labels[spec], backfill, allocator)
               for backfill in cfg.backfills for spec, allocator in pairs]
    if site is not None:
        from hpcpolicy.world.apply import site_config

        configs = [site_config(site, c) for c in configs]
    runs = replay(workload, cluster, configs, cfg.window_config(starts),
                  utilization_end=compat_preset(cfg.compat).utilization_end,
                  simulate=policy_simulator({labels[s]: p for s, p in policies.items()}),
                  on_step=on_step)
    learned = {spec: _manifest_facts(p) for spec, p in raw.items()
               if not isinstance(p, Heuristic)}
    return Evaluation(config=cfg, starts=starts, runs=runs, learned=learned,
                      placers=frozenset(labels[s] for s in placers), deployments=deployments)
