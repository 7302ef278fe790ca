"""Run a what-if: every candidate and the baseline under every scenario, then compare.

Each scenario (the log as it was first) is replayed under the baseline and every candidate
with :func:`hpcpolicy.sim.windows.replay`, the same code path as ``hpcpolicy simulate``, so a
what-if's whole-run figures are exactly what ``simulate`` prints for the same jobs. Each
candidate is then compared with the baseline of its own scenario (:mod:`.compare`,
:mod:`.breakdowns`, :mod:`.verdicts`), the baseline's as-logged replay is held against the
logged waits (:mod:`.fidelity`), and everything is gathered in the report document
(``report.json``, ``schemas/whatif.schema.json``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from hpcpolicy.config import Config
from hpcpolicy.errors import ConfigError, SimulationError
from hpcpolicy.site.measure import RELATIVE_ONLY, fidelity, records_no_starts
from hpcpolicy.site.report import with_site, world_sentence
from hpcpolicy.whatif import breakdowns, compare, verdicts
from hpcpolicy.whatif.scenarios import AS_LOGGED, Scenario, apply_scenario, parse_scenario
from hpcpolicy.whatif.slurm_candidates import (
    SlurmSite,
    check_slurm_scenarios,
    open_slurm_site,
    slurm_config,
    slurm_simulator,
)
from hpcpolicy.whatif.slurm_section import slurm_section
from hpcpolicy.whatif.spec import RunSpec, parse_specs
from hpcpolicy.whatif.store import OutcomeStore
from hpcpolicy.whatif.timeseries import bin_width, binned_mean
from hpcpolicy.whatif.training import training_notes

if TYPE_CHECKING:
    import polars as pl

    from hpcpolicy.cluster import ClusterSpec
    from hpcpolicy.policies.base import Policy
    from hpcpolicy.workload import Workload
    from hpcpolicy.world.apply import World
    from hpcpolicy.world.site_model import SiteModel

__all__ = ["SCHEMA_VERSION", "WhatifConfig", "WhatifResult", "WhatifRun", "offered_load",
           "run_whatif"]

SCHEMA_VERSION = "1.2"
"""Version of ``schemas/whatif.schema.json`` that :func:`run_whatif` writes."""

MAX_WINDOWS = 20_000
"""Most comparison windows: each holds a histogram per metric (1024 bins of 8 bytes), so more
would not fit in memory (one job running 10^12 s asks for 1.6 M weekly windows, 139 GiB)."""

Step = Callable[[str, int, int], None]


@dataclass(frozen=True)
class WhatifConfig(Config):
    """What to compare, under which scenarios, and how to measure the uncertainty."""

    label: ClassVar[str] = "whatif"

    baseline: str = "fcfs+easy"
    """Today's policy as best known, ``POLICY[+BACKFILL]``."""
    candidates: tuple[str, ...] = ("sjf+easy",)
    """Policies to compare with the baseline (heuristics or trained policy directories)."""
    scenarios: tuple[str, ...] = ()
    """Scenarios besides the log as it was (:mod:`hpcpolicy.whatif.scenarios`)."""
    period_s: int = 7 * 86400
    """Window length of the paired comparison (default one week)."""
    metric: str = "mean_bsld"
    """The primary metric, which decides each verdict."""
    bootstrap: int = 2000
    """Bootstrap replicates."""
    confidence: float = 0.95
    """Confidence level of the intervals."""
    seed: int = 0
    """Seed of the bootstrap; the same seed gives the same report."""
    max_bins: int = 400
    """Most bins of the utilisation and queue-length time series."""
    slurm_conf: str | None = None
    """The site's slurm.conf: the baseline is it, replayed in the Slurm world, and a
    candidate may change it (:mod:`hpcpolicy.whatif.slurm_candidates`)."""
    sacctmgr: str | None = None
    """With ``slurm_conf``: the folder of its ``sacctmgr show qos/assoc -P`` dumps."""

    def validate(self) -> None:
        if not self.candidates:
            raise ConfigError("give at least one --candidate to compare with the baseline")
        if self.period_s < 3600:
            raise ConfigError(f"--period must be at least 1 hour, not {self.period_s} s")
        compare.get_metric(self.metric)
        if self.max_bins < 10:
            raise ConfigError(f"max_bins must be at least 10, not {self.max_bins}")

    def run_specs(self) -> tuple[RunSpec, list[RunSpec]]:
        """The parsed baseline and candidates (a candidate equal to the baseline is refused)."""
        base, cands = parse_specs(self.baseline, self.candidates, self.slurm_conf)
        for c in cands:
            if c.text == base.text:
                raise ConfigError(f"candidate {c.text} is the baseline itself; compare it with "
                                  "another policy or backfilling")
        if len({c.text for c in cands}) != len(cands):
            raise ConfigError("a candidate is given twice")
        return base, cands

    def scenario_list(self) -> list[Scenario]:
        """The as-logged scenario, then the others, each once."""
        found = [AS_LOGGED]
        for text in self.scenarios:
            s = parse_scenario(text)
            if s.id in {x.id for x in found}:
                raise ConfigError(f"scenario {text!r} is given twice (or is the log as it was)")
            found.append(s)
        return check_slurm_scenarios(found, self.slurm_conf)

    def to_dict(self) -> dict[str, Any]:
        """The config as the report records it."""
        base, cands = parse_specs(self.baseline, self.candidates, self.slurm_conf)
        return {"baseline": base.text, "candidates": [c.text for c in cands],
                "scenarios": [s.id for s in self.scenario_list()[1:]],
                "period_s": self.period_s, "metric": self.metric, "bootstrap": self.bootstrap,
                "confidence": self.confidence, "seed": self.seed,
                **slurm_config(self.slurm_conf, self.sacctmgr)}


@dataclass
class WhatifRun:
    """One replay: a policy spec under a scenario. Its outcome table is kept on disk
    (:mod:`.store`); :attr:`outcomes` reads all of it, :meth:`columns` only what is asked."""

    id: str
    scenario: Scenario
    spec: RunSpec
    role: str
    part: Path
    """The outcome table's own columns, a file in :attr:`store`."""
    identity: Path
    """Its text columns (job id, user, partition), shared by the scenario's runs."""
    store: OutcomeStore
    summary: dict[str, Any]
    never_fits: int
    cores: int
    span: tuple[int, int]
    """The first submit, and the last submit or end."""

    @property
    def outcomes(self) -> pl.DataFrame:
        """The per-job outcome table (:func:`hpcpolicy.sim.metrics.outcome_table`)."""
        return self.scan().collect()

    def columns(self, *names: str) -> pl.DataFrame:
        """Only these columns of the outcome table."""
        return self.scan().select(names).collect()

    def scan(self) -> pl.LazyFrame:
        """The outcome table as a query (only the columns selected are read)."""
        from hpcpolicy.sim.metrics import OUTCOME_COLUMNS

        return self.store.scan(self.identity, self.part).select(OUTCOME_COLUMNS)


@dataclass
class WhatifResult:
    """The report document and every replay behind it."""

    doc: dict[str, Any]
    runs: list[WhatifRun] = field(default_factory=list)

    def outcomes(self) -> pl.DataFrame:
        """Every run's per-job outcomes, a ``run`` id column first (run time as ``run_s``);
        all in memory at once (:meth:`lazy_outcomes` for a large log)."""
        return self.lazy_outcomes().collect()

    def lazy_outcomes(self) -> pl.LazyFrame:
        """:meth:`outcomes` as a query, read run by run when it is collected or sunk."""
        import polars as pl

        return pl.concat([r.scan().rename({"run": "run_s"}).select(
            pl.lit(r.id).alias("run"), pl.all()) for r in self.runs])

    def run_outcomes(self) -> dict[str, pl.LazyFrame]:
        """Run id -> that run's outcome table as a query (``run`` is the run time there)."""
        return {r.id: r.scan() for r in self.runs}


def _iso(epoch: int) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _resolve_policies(specs: list[RunSpec]) -> dict[str, Policy]:
    from hpcpolicy.deploy.resolve import resolve_policy
    from hpcpolicy.sim.engine import check_one_engine

    specs = [s for s in specs if s.change is None]  # the others replay in the Slurm world
    policies = {s.policy: resolve_policy(s.policy) for s in specs}
    check_one_engine([(s.text, policies[s.policy], s.allocator) for s in specs])
    return policies


def _replay_scenario(scenario: Scenario, workload: Workload, cluster: ClusterSpec,
                     specs: list[RunSpec], policies: dict[str, Policy], store: OutcomeStore,
                     step: Step, site: SiteModel | None = None, slurm: SlurmSite | None = None,
                     ) -> tuple[list[WhatifRun], Workload, ClusterSpec, list[str]]:
    import polars as pl

    from hpcpolicy.deploy.resolve import policy_simulator
    from hpcpolicy.sim.metrics import identity_columns
    from hpcpolicy.sim.types import SimConfig
    from hpcpolicy.sim.windows import backfill_note, never_fits_note, replay
    from hpcpolicy.world.apply import site_config

    w, c = apply_scenario(scenario, workload, cluster)
    configs = [SimConfig(policy=s.policy, backfill=s.backfill, allocator=s.allocator)
               for s in specs]
    if site is not None:  # every run in the same calibrated world; only the policy differs
        configs = [site_config(site, cfg) for cfg in configs]
    runs: list[WhatifRun] = []
    notes: list[str | None] = []
    # the text columns once per scenario, to disk before the replays need the memory
    identity = store.put(pl.DataFrame(identity_columns(w)))
    # one replay at a time, its outcome table straight to disk: memory holds one run
    for i, (spec, config) in enumerate(zip(specs, configs, strict=True)):
        rep = replay(w, c, [config], None,
                     simulate=slurm_simulator(slurm, spec, policy_simulator(policies)),
                     on_step=lambda label, _d, _t: step(f"{scenario.id}: {label}", 0, 0),
                     keep_tables=True)[0]
        ids = rep.never_fits()
        never = len(ids)
        if i == 0 and len(w) and never == len(w):
            raise SimulationError(_nothing_fits(scenario, w, c))
        note = never_fits_note(ids) if i == 0 else None
        if note is not None:  # the same jobs under every policy: said once, as a warning,
            # for they are left out of every figure
            where = "" if scenario is AS_LOGGED else f"under scenario {scenario.id}, "
            notes.append(f"warning: {where}{note}")
        outcomes = rep.windows[0].table
        assert outcomes is not None  # keep_tables
        last = max(_extreme(outcomes["end"]) or 0, _extreme(outcomes["submit"]) or 0)
        runs.append(WhatifRun(
            id=f"{scenario.id}/{spec.text}", scenario=scenario, spec=spec,
            role="baseline" if i == 0 else "candidate", part=store.put(outcomes),
            identity=identity, store=store, summary=rep.summary, never_fits=never,
            cores=c.total_cores,
            span=(_extreme(outcomes["submit"], largest=False) or 0, last)))
        if scenario is AS_LOGGED:  # said of the log as it was only, not once a scenario
            notes.append(backfill_note(rep))
        del rep, outcomes
    return runs, w, c, [n for n in notes if n is not None]


def _nothing_fits(scenario: Scenario, w: Workload, c: ClusterSpec) -> str:
    """The error when no job of a scenario fits its machine (nothing to compare)."""
    where = "" if scenario is AS_LOGGED else f" under scenario {scenario.id}"
    smallest = int(w.procs.min())
    return (f"none of the {len(w):,} jobs fits the machine{where} ({c.total_cores:,} cores; "
            f"the smallest job asks for {smallest:,}), so there is nothing to compare; give "
            "the machine the log ran on with --cluster or --procs")


def _extreme(series: pl.Series, largest: bool = True) -> int | None:
    """The largest (or smallest) value of an integer column, None if all null."""
    value = series.max() if largest else series.min()
    return None if value is None else int(value)  # type: ignore[arg-type]


def _span(runs: list[WhatifRun]) -> tuple[int, int]:
    """The first submit and the last submit or end over ``runs``."""
    return min(r.span[0] for r in runs), max(r.span[1] for r in runs)


def _grid(runs: list[WhatifRun], period_s: int) -> tuple[int, int]:
    """Start and number of the comparison windows covering every submit and end.

    Raises:
        SimulationError: more than :data:`MAX_WINDOWS` windows (a run time of centuries).
    """
    t0, t1 = _span(runs)
    n = max(1, math.ceil((t1 - t0 + 1) / period_s))
    if n > MAX_WINDOWS:

        job = runs[0].outcomes.sort("run", descending=True, nulls_last=True).row(0, named=True)
        raise SimulationError(
            f"the replay spans {(t1 - t0) / 86400 / 365.25:,.1f} years (job {job['job_id']} "
            f"runs {job['run']:,} s): at --period {period_s:,} s that is {n:,} windows, more "
            f"than {MAX_WINDOWS:,}; check that job's run time in the log, or give a longer "
            "--period")
    return t0, n


_STATS_COLUMNS = ("submit", "start", "end", "alloc_cores", "wait", "bsld", "response")
"""The outcome columns :func:`hpcpolicy.whatif.compare.run_windows` reads."""


def _compare_scenario(runs: list[WhatifRun], cfg: WhatifConfig,
                      origin: int) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Each candidate of a scenario (``runs[1:]``) against its baseline (``runs[0]``): the
    comparison's document and its primary metric's row.

    The baseline's per-window figures are made once, on a grid long enough for every
    comparison (each is per window, so cutting that grid to a comparison's own gives the
    same bits as making them on it).
    """
    base, cands = runs[0], runs[1:]
    grids = [_grid([base, cand], cfg.period_s) for cand in cands]
    t0 = grids[0][0]  # the runs of a scenario replay the same jobs: one first submit
    base_windows = _run_windows(base, t0, max(n for _, n in grids), cfg.period_s)
    return [_compare(base, cand, base_windows, _run_windows(cand, t0, n, cfg.period_s), t0, n,
                     cfg, origin) for cand, (_, n) in zip(cands, grids, strict=True)]


def _run_windows(run: WhatifRun, t0: int, n: int, period_s: int) -> compare.RunWindows:
    """A run's per-window figures on ``n`` windows from ``t0``, utilisation until its last
    submit (the last of every run of its scenario: they replay the same jobs)."""
    table = run.columns(*_STATS_COLUMNS)
    return compare.run_windows(table, run.cores, t0, period_s, n, _extreme(table["submit"]) or 0)


def _utilization(run: WhatifRun, period_s: int) -> float | None:
    """A run's utilisation as every comparison measures it: until its last submit, all
    windows pooled (so the runs table and the comparisons show one figure)."""
    t0, n = _grid([run], period_s)
    return _run_windows(run, t0, n, period_s).stats.utilization()


def _compare(base: WhatifRun, cand: WhatifRun, base_windows: compare.RunWindows,
             cand_windows: compare.RunWindows, t0: int, n: int, cfg: WhatifConfig,
             origin: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """One comparison's document, and its primary metric's row (the runs' per-window
    figures from :func:`_run_windows`, on a grid of ``n`` windows from ``t0`` or longer)."""
    # first, while the histograms below do not take memory yet
    groups = breakdowns.group_changes(base.columns(*breakdowns.COLUMNS),
                                      cand.columns(*breakdowns.CANDIDATE_COLUMNS))
    top = {col: max(base_windows.tops[col], cand_windows.tops[col])
           for col in base_windows.tops}
    stats = [compare.with_histograms(w, top, n) for w in (base_windows, cand_windows)]
    metrics = list(compare.METRICS)
    # utilisation while jobs arrive, on the windows' own grid (compare's docstring says why)
    whole = [{**r.summary, "utilization": st.utilization()}
             for r, st in zip((base, cand), stats, strict=True)]
    rows = compare.compare_runs(stats[0], stats[1], whole[0], whole[1], metrics,
                                bootstrap=cfg.bootstrap, confidence=cfg.confidence,
                                seed=cfg.seed, hist_top=top)
    primary = next(i for i, m in enumerate(metrics) if m.key == cfg.metric)
    found = verdicts.tradeoffs(metrics, rows, cfg.metric, groups, cfg.confidence)
    verdict = verdicts.comparison_verdict(
        metrics, rows, cfg.metric,
        identical=base.columns("start", "end").equals(cand.columns("start", "end")))
    primary_text = verdicts.metric_sentence(metrics[primary], rows[primary], cfg.confidence)
    per_window = []
    for k in range(n):
        if stats[0].jobs[k] == 0 and stats[1].jobs[k] == 0:
            continue
        per_window.append({
            "start": _iso(origin + t0 + k * cfg.period_s), "jobs": int(stats[0].jobs[k]),
            "baseline": {m.key: _finite(stats[0].values[m.key][k]) for m in metrics},
            "candidate": {m.key: _finite(stats[1].values[m.key][k]) for m in metrics},
        })
    doc = {
        "scenario": base.scenario.id, "baseline_run": base.id, "candidate_run": cand.id,
        "windows": len(per_window), "verdict": verdict,
        "summary": f"{cand.spec.text} vs {base.spec.text} ({base.scenario.label}): "
                   f"{primary_text}: "
                   f"{verdicts.verdict_phrase(verdict, rows[primary])}.",
        "tradeoffs": found, "metrics": rows, "per_window": per_window, "groups": groups,
    }
    return doc, rows[primary]


def _finite(value: float) -> float | None:
    return float(value) if np.isfinite(value) else None


def _timeseries(runs: list[WhatifRun], max_bins: int) -> dict[str, Any]:
    import polars as pl

    t0, t1 = _span(runs)
    width = bin_width(max(t1 - t0, 1), max_bins)
    edges = t0 + width * np.arange(math.ceil(max(t1 - t0, 1) / width) + 1, dtype=np.float64)
    series = {}
    for r in runs:
        done = r.columns("submit", "start", "end", "alloc_cores").filter(
            pl.col("start").is_not_null())
        start, end = done["start"].to_numpy(), done["end"].to_numpy()
        busy = binned_mean(start, end, done["alloc_cores"].to_numpy(), edges) / r.cores
        queue = binned_mean(done["submit"].to_numpy(), start, np.ones(done.height), edges)
        series[r.id] = {"utilization": [round(float(x), 6) for x in busy],
                        "queue_length": [round(float(x), 4) for x in queue]}
    return {"bin_s": width, "t0": t0, "runs": series}


def offered_load(workload: Workload, cluster: ClusterSpec) -> float | None:
    """The work the jobs bring (core-seconds) over what the machine offers between the first
    and the last submit; above 1 no policy can keep up. None for a zero span or machine."""
    span = int(workload.submit[-1] - workload.submit[0]) if len(workload) else 0
    if span <= 0 or cluster.total_cores <= 0:
        return None
    work = float(np.dot(workload.procs.astype(np.float64), workload.run_time))
    return work / (cluster.total_cores * span)


def _cluster_doc(cluster: ClusterSpec) -> dict[str, Any]:
    return {"name": cluster.name, "cores": cluster.total_cores, "nodes": cluster.total_nodes,
            "gpus": cluster.total_gpus, "source": cluster.source}


def run_whatif(workload: Workload, cluster: ClusterSpec, cfg: WhatifConfig, *, source: str,
               source_format: str | None = None, on_step: Step | None = None,
               site: World | None = None, site_path: str | None = None) -> WhatifResult:
    """Replay and compare; the returned document is ``report.json``.

    Args:
        workload: the log's jobs (:meth:`hpcpolicy.workload.Workload.from_table`).
        cluster: the machine the log ran on (scenarios may change it).
        cfg: baseline, candidates, scenarios and statistics.
        source: the job table's path, as the report names it.
        source_format: the log's format (from the table's metadata), if known.
        on_step: ``on_step(label, done, total)`` before each replay, for progress output.
        site: the site model's world (:func:`hpcpolicy.world.open.open_world`): baseline and
            candidates are replayed in it, scenarios change it; None replays the log header's
            machine as it is.
        site_path: the site model's file, as the report names it.

    Raises:
        ConfigError: bad specs or scenarios; ArtifactError: a candidate policy that cannot
            be loaded; SimulationError: no job fits the machine of a scenario, or the jobs
            span more than :data:`MAX_WINDOWS` periods.
    """
    base_spec, cand_specs = cfg.run_specs()
    scenarios = cfg.scenario_list()
    specs = [base_spec, *cand_specs]
    policies = _resolve_policies(specs)
    total = len(scenarios) * len(specs)
    done = 0

    def step(label: str, _d: int, _t: int) -> None:
        nonlocal done
        if on_step:
            on_step(label, done, total)
        done += 1

    runs: list[WhatifRun] = []
    store = OutcomeStore()
    scenario_docs, comparisons, results = [], [], []
    overloads: list[str] = training_notes(cand_specs, policies, source)
    model = None
    if site is not None:
        workload, cluster, model = site.workload, site.cluster, site.site
    slurm = None if cfg.slurm_conf is None else open_slurm_site(
        cfg.slurm_conf, cfg.sacctmgr, [s.change for s in cand_specs if s.change])
    if slurm is not None:  # the machine is slurm.conf's nodes
        cluster = slurm.machine
    for scenario in scenarios:
        s_runs, w, c, said = _replay_scenario(scenario, workload, cluster, specs, policies,
                                              store, step, model, slurm)
        runs += s_runs
        overloads += said
        load = offered_load(w, c)
        scenario_docs.append({"id": scenario.id, "label": scenario.label,
                              "changes": dict(scenario.changes), "jobs": len(w),
                              "cluster": _cluster_doc(c), "offered_load": load})
        if load is not None and load > 1:
            who = "the log as it was" if scenario is AS_LOGGED else f"scenario {scenario.id}"
            overloads.append(f"warning: {who} offers {load:.1%} of the machine's "
                             "capacity over the submit span, past 100 %: the queue grows "
                             "until the last submit whatever the policy, so waits there "
                             "measure the log's length as much as the policy")
        for cand, (doc, row) in zip(s_runs[1:], _compare_scenario(s_runs, cfg,
                                                                  workload.origin), strict=True):
            comparisons.append(doc)
            results.append((scenario.id, cand.spec.text, doc["verdict"], row))
    if on_step:
        on_step("done", total, total)
    top = verdicts.headline(base_spec.text, compare.get_metric(cfg.metric),
                            {s.id: s.label for s in scenarios}, results,
                            confidence=cfg.confidence)
    first = int(workload.submit[0]) + workload.origin
    last = int(workload.submit[-1]) + workload.origin
    doc = {
        "schema_version": SCHEMA_VERSION,
        "kind": "hpcpolicy.whatif",
        "title": f"What-if: {source.replace(chr(92), '/').rsplit('/', 1)[-1]}",
        "verdict": top["sentence"] + world_sentence(model, site_path)
        + (f" {RELATIVE_ONLY}." if records_no_starts(workload.logged_start) else ""),
        "headline": {k: top[k] for k in ("badge", "class", "best", "ranked")},
        "input": {"path": source, "jobs": len(workload), "origin": workload.origin,
                  "first_submit": _iso(first), "last_submit": _iso(last),
                  "source_format": source_format},
        "config": cfg.to_dict(),
        "scenarios": scenario_docs,
        "runs": [{"id": r.id, "scenario": r.scenario.id, "spec": r.spec.text,
                  "policy": r.spec.policy, "backfill": r.spec.backfill, "role": r.role,
                  "summary": {**r.summary, "utilization": _utilization(r, cfg.period_s)},
                  "never_fits": r.never_fits} for r in runs],
        "metrics": [m.to_dict() for m in compare.METRICS],
        "comparisons": comparisons,
        "timeseries": _timeseries(runs, cfg.max_bins),
        "fidelity": with_site(fidelity(runs[0].columns("logged_start", "start", "submit",
                                                        "wait"), workload.origin, runs[0].id),
                              model, site_path),
        "notes": [*overloads, *workload.notes, *cluster.notes],
        **slurm_section(slurm, runs),
    }
    return WhatifResult(doc=doc, runs=runs)
