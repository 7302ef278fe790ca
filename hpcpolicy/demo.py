"""The demo: the whole flow on a built-in synthetic workload, with no download.

The demo is a list of :class:`DemoStep` run in order over a shared :class:`DemoContext`; each
step reads the files earlier steps recorded and records its own: generate -> ingest -> stats
-> compare heuristics -> train a small PPO policy -> what-if report. Every output goes to one
folder, and a rerun replaces its own outputs.

Files written in ``out_dir``: ``workload.swf`` (the generated log), ``jobs.parquet``,
``jobs.rejects.parquet``, ``jobs.ingest.json`` (the ingest), ``stats.json`` (the profile),
``compare.json`` (heuristics replayed on the workload, :data:`COMPARE_POLICIES` x
:data:`COMPARE_BACKFILLS`), ``run/`` (the training run: its deployable policy in
``run/policy``, with the model card ``hpcpolicy train`` writes), ``report/`` (the what-if
report: ``report.html``, ``report.json``, ``report.md``, ``outcomes.parquet``) and
``demo.json`` (config, steps run and files).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from hpcpolicy.atomic import write_json
from hpcpolicy.errors import ConfigError
from hpcpolicy.workload import WorkloadOptions

# The Lublin model has no requested times: plan with the real ones ("perfect estimates").
_OPTIONS = WorkloadOptions(walltime_fallback="runtime")

__all__ = [
    "COMPARE_BACKFILLS",
    "COMPARE_POLICIES",
    "DEMO_STEPS",
    "DemoConfig",
    "DemoContext",
    "DemoStep",
    "run_demo",
]

COMPARE_POLICIES = ("fcfs", "sjf", "f1")
"""Heuristics the demo compares."""
COMPARE_BACKFILLS = ("none", "easy")
"""Backfilling modes the demo compares."""
TRAIN_K = 32
"""Waiting jobs the demo's policy sees."""
TRAIN_WINDOW = 256
"""Jobs per training episode (a quarter of the jobs for a small demo)."""
WHATIF_PERIOD_S = 86400
"""Window of the demo's what-if comparison: a day (the synthetic log spans weeks)."""


@dataclass(frozen=True)
class DemoConfig:
    """What the demo generates and where it writes."""

    out_dir: Path = Path("demo")
    """Folder for every demo output; created if absent, its demo files replaced on rerun."""
    jobs: int = 5000
    """Number of jobs in the generated workload."""
    procs: int = 256
    """Processors of the synthetic machine."""
    seed: int = 0
    """Seed of the workload generator (and of later steps); same seed, same files."""
    model: str = "lublin"
    """Workload model of the generator."""
    train_steps: int = 250_000
    """Environment steps of the demo's PPO training (0: skip training)."""

    def __post_init__(self) -> None:
        from hpcpolicy.generate import GenerateConfig

        object.__setattr__(self, "out_dir", Path(self.out_dir))
        # model, jobs, procs and seed mean what they mean to the generator: checked there.
        GenerateConfig(model=self.model, jobs=self.jobs, procs=self.procs, seed=self.seed)
        if self.train_steps < 0:
            raise ConfigError(f"train_steps must be >= 0 (0 skips training), not "
                              f"{self.train_steps}")
        if self.out_dir.exists() and not self.out_dir.is_dir():
            raise ConfigError(f"out_dir {self.out_dir} is a file; give a folder for the demo")

    def to_dict(self) -> dict[str, Any]:
        """The config as a JSON-ready dict."""
        return {**asdict(self), "out_dir": str(self.out_dir)}


@dataclass
class DemoContext:
    """What the steps share: the config, the files written so far and each step's result."""

    cfg: DemoConfig
    """The demo's config."""
    files: dict[str, Path] = field(default_factory=dict)
    """Label -> path of every file written, in the order written."""
    results: dict[str, Any] = field(default_factory=dict)
    """Step name -> what the step returned (an ingest report, a profile, ...)."""
    seconds: dict[str, float] = field(default_factory=dict)
    """Step name -> wall time of the step, for progress output (not written to disk)."""


@dataclass(frozen=True)
class DemoStep:
    """One step of the demo."""

    name: str
    """Short name, the key of the step's result in :attr:`DemoContext.results`."""
    title: str
    """What the step does, in a few words, for progress output."""
    run: Callable[[DemoContext], Any]
    """Does the work, records the files it wrote in the context and returns its result."""


def _generate(ctx: DemoContext) -> Path:
    from hpcpolicy.generate import generate_swf

    cfg = ctx.cfg
    path = generate_swf(cfg.out_dir / "workload.swf", model=cfg.model, jobs=cfg.jobs,
                        procs=cfg.procs, seed=cfg.seed)
    ctx.files["workload"] = Path(path)
    return Path(path)


def _ingest(ctx: DemoContext) -> Any:
    from hpcpolicy.ingest import IngestConfig, ingest, output_paths

    out = ctx.cfg.out_dir / "jobs.parquet"
    report = ingest([ctx.files["workload"]], out, IngestConfig(format="swf", overwrite=True))
    paths = output_paths(out)
    ctx.files.update({"jobs": paths["jobs"], "rejects": paths["rejects"],
                      "ingest_report": paths["report"]})
    return report


def _stats(ctx: DemoContext) -> dict[str, Any]:
    from hpcpolicy.stats import profile, save_profile

    result = profile(ctx.files["jobs"])  # the machine size comes from the log's header
    ctx.files["stats"] = save_profile(result, ctx.cfg.out_dir / "stats.json")
    return result


def _compare(ctx: DemoContext) -> list[Any]:
    from hpcpolicy.sim.windows import replay, to_document
    from hpcpolicy.world import WorldSpec, open_world

    table = ctx.files["jobs"]
    world = open_world(table, WorldSpec(workload=_OPTIONS))
    workload, cluster = world.workload, world.cluster
    configs = [world.run(p, b) for p in COMPARE_POLICIES for b in COMPARE_BACKFILLS]
    runs = replay(workload, cluster, configs)
    doc = to_document(runs, source=str(table), workload=workload, cluster=cluster, windows=None)
    path = ctx.cfg.out_dir / "compare.json"
    write_json(path, doc)
    ctx.files["compare"] = path
    return runs


def _train(ctx: DemoContext) -> Any:
    import importlib.util

    if ctx.cfg.train_steps == 0:
        return None
    if importlib.util.find_spec("torch") is None:
        raise ConfigError("the demo's training step needs the rl extra: pip install "
                          "torch==2.13.0 && pip install -e '.[rl]' (or skip it with "
                          "--train-steps 0)")
    from hpcpolicy.training import TrainOptions, train

    cfg = ctx.cfg
    run = cfg.out_dir / "run"
    if run.exists():  # a rerun replaces the demo's own run
        import shutil

        shutil.rmtree(run)
    # force: the demo shows the whole flow on any generated load; where the heuristics tie
    # (nothing to learn: `hpcpolicy train` would stop), the card's guard deploys the heuristic
    trained = train(ctx.files["jobs"], algo="ppo", out=run, options=TrainOptions(
        steps=cfg.train_steps, seed=cfg.seed, k=TRAIN_K, backfill="easy",
        window_size=min(TRAIN_WINDOW, max(8, cfg.jobs // 4)),
        walltime_fallback=str(_OPTIONS.walltime_fallback), force=True))
    ctx.files["policy"] = trained.policy
    return trained.result


def _whatif(ctx: DemoContext) -> Any:
    from hpcpolicy.whatif import WhatifConfig, run_whatif, write_report
    from hpcpolicy.world import WorldSpec, open_world

    table = ctx.files["jobs"]
    world = open_world(table, WorldSpec(workload=_OPTIONS))
    workload, cluster = world.workload, world.cluster
    candidates = ("sjf+easy", "f1+easy", *(
        [f"{ctx.files['policy']}+easy"] if "policy" in ctx.files else []))
    result = run_whatif(workload, cluster, WhatifConfig(
        candidates=candidates, scenarios=("nodes=+10%",), period_s=WHATIF_PERIOD_S,
        seed=ctx.cfg.seed), source=str(table), source_format="swf")
    paths = write_report(result, ctx.cfg.out_dir / "report", overwrite=True, outcomes=True)
    ctx.files.update({f"report_{k}": v for k, v in paths.items()})
    return result


DEMO_STEPS: tuple[DemoStep, ...] = (
    DemoStep("generate", "generate a synthetic workload", _generate),
    DemoStep("ingest", "ingest it into a job table", _ingest),
    DemoStep("stats", "profile the workload", _stats),
    DemoStep("compare", "replay it under FCFS, SJF and F1, with and without EASY", _compare),
    DemoStep("train", "train a small PPO policy on the first 70% of the jobs", _train),
    DemoStep("whatif", "write a what-if report: SJF, F1 and the policy vs FCFS+EASY", _whatif),
)
"""The demo's steps, in order."""


def run_demo(
    cfg: DemoConfig | None = None,
    steps: Sequence[DemoStep] = DEMO_STEPS,
    on_start: Callable[[int, int, DemoStep], None] | None = None,
    on_done: Callable[[int, int, DemoStep, float], None] | None = None,
) -> DemoContext:
    """Run the demo's steps in order and write ``demo.json``.

    Args:
        cfg: options; defaults to :class:`DemoConfig()` (``demo/``, 5000 jobs, seed 0).
        steps: the steps to run, default :data:`DEMO_STEPS`.
        on_start: called with (index, number of steps, step) before each step.
        on_done: called with (index, number of steps, step, seconds) after each step.

    Returns:
        The context: files written and each step's result.

    Raises:
        HpcPolicyError: from the step that failed; files of earlier steps stay.

    Example:
        >>> ctx = run_demo(DemoConfig(out_dir="demo", jobs=500))  # doctest: +SKIP
        >>> sorted(ctx.files)  # doctest: +SKIP
        ['ingest_report', 'jobs', 'rejects', 'stats', 'workload']
    """
    cfg = cfg or DemoConfig()
    cfg.out_dir.mkdir(parents=True, exist_ok=True)
    ctx = DemoContext(cfg=cfg)
    for index, step in enumerate(steps):
        if on_start:
            on_start(index, len(steps), step)
        t0 = time.perf_counter()
        ctx.results[step.name] = step.run(ctx)
        ctx.seconds[step.name] = time.perf_counter() - t0
        if on_done:
            on_done(index, len(steps), step, ctx.seconds[step.name])
    record = cfg.out_dir / "demo.json"
    write_json(record, {
        "config": cfg.to_dict(),
        "steps": [s.name for s in steps],
        "files": {k: str(v) for k, v in ctx.files.items()},
    })
    ctx.files["record"] = record
    return ctx
