"""What-if answers about Slurm configuration changes, set against real runs (issue 40).

A proof folder holds one folder per configuration (``baseline`` and each candidate), each
with ``change.txt`` (a candidate's change as written for ``whatif -c``) and run folders
``run0``, ``run1`` ... of the same scaled workload on a real Slurm, each with its
``sacct.txt``, ``slurm.conf`` and ``sacctmgr`` dumps (``qos.txt``, ``assoc.txt``);
``tests/slurm/proof.py`` writes them.

* :func:`measured` reads every run's mean wait and mean bounded slowdown (the project's
  definitions, :func:`hpcpolicy.sim.metrics.outcome_table`);
* :func:`predicted` is the what-if's answer: the Slurm world's replay of one baseline log
  under the baseline configuration and under the candidate, and the change between them;
* :func:`judge` applies the bars: where the measured mean change lies outside the spread of
  the real runs (every candidate run beyond every baseline run on one side), the prediction
  has its sign; always, |predicted - measured mean| <= 2 x the standard deviation of the
  changes measured round by round (run k of the candidate minus run k of the baseline);
* :func:`world_start_errors` and :func:`real_start_errors` are the multifactor bar: the
  world's median |start error| on each baseline log, and the real Slurm's own, run against
  run (jobs matched by name).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl

from hpcpolicy.ingest import IngestConfig, ingest
from hpcpolicy.sim.metrics import outcome_table
from hpcpolicy.sim.types import SimResult
from hpcpolicy.slurmconf import SlurmConfig, apply_candidate, read_slurm_conf, with_accounting
from hpcpolicy.workload import Workload
from hpcpolicy.world.open import open_workload
from hpcpolicy.world.slurm import replay, slurm_world

__all__ = ["BASELINE", "METRICS", "Judged", "judge", "logged_result", "measured",
           "predicted", "read_run", "real_start_errors", "run_conf", "run_folders",
           "world_start_errors"]

BASELINE = "baseline"
"""The baseline configuration's folder."""
METRICS = ("mean_wait_s", "mean_bsld")
"""The figures compared."""


def run_folders(setup: Path) -> list[Path]:
    """``setup``'s run folders that hold a log, in run order."""
    runs = [p for p in setup.glob("run*") if (p / "sacct.txt").exists()]
    return sorted(runs, key=lambda p: int(p.name[3:]))


def read_run(run: Path) -> tuple[Workload, list[str]]:
    """A run's jobs (its ``sacct.txt`` ingested to ``jobs.parquet`` beside it) and each
    job's name, the plan's, the same in every run."""
    table = run / "jobs.parquet"
    ingest([run / "sacct.txt"], table, IngestConfig(overwrite=True))
    names = pl.read_parquet(table, columns=["job_id", "job_name"])
    name = dict(zip(names["job_id"].to_list(), names["job_name"].to_list(), strict=True))
    w = open_workload(table)
    return w, [name[str(w.job_id[k])] for k in range(len(w))]


def logged_result(w: Workload) -> SimResult:
    """The log's own schedule as a result (its starts and runs)."""
    n = len(w)
    start = np.asarray(w.logged_start, dtype=np.int64)
    return SimResult(start=start, end=start + np.asarray(w.run_time, dtype=np.int64),
                     never_fits=np.zeros(n, dtype=bool), killed=np.zeros(n, dtype=bool))


def _figures(w: Workload, result: SimResult) -> dict[str, float]:
    jobs = outcome_table(w, result)
    return {"mean_wait_s": float(jobs["wait"].mean()),  # type: ignore[arg-type]
            "mean_bsld": float(jobs["bsld"].mean())}  # type: ignore[arg-type]


def measured(folder: Path, names: Sequence[str]) -> dict[str, list[dict[str, float]]]:
    """Configuration name -> each of its real runs' figures (:data:`METRICS`)."""
    return {name: [_figures(w, logged_result(w)) for w, _ in map(read_run,
                                                                 run_folders(folder / name))]
            for name in names}


def run_conf(run: Path) -> SlurmConfig:
    """The configuration a run ran under: its slurm.conf and sacctmgr dumps."""
    return with_accounting(read_slurm_conf(run / "slurm.conf"), run)


def predicted(folder: Path, names: Sequence[str]) -> dict[str, dict[str, float]]:
    """Candidate name -> the what-if's change of each figure (candidate minus baseline), both
    replayed in the Slurm world on the first baseline log, the candidate being the baseline
    with ``change.txt`` applied."""
    run = run_folders(folder / BASELINE)[0]
    w, _ = read_run(run)
    base = run_conf(run)
    before = _figures(w, replay(w, slurm_world(base, w)))
    out = {}
    for name in names:
        change = (folder / name / "change.txt").read_text().strip()
        conf = apply_candidate(base, change)
        after = _figures(w, replay(w, slurm_world(conf, w)))
        out[name] = {m: after[m] - before[m] for m in METRICS}
    return out


@dataclass(frozen=True)
class Judged:
    """One candidate and figure against the bars."""

    candidate: str
    metric: str
    measured_mean: float
    """Mean of the changes measured round by round (candidate run k minus baseline run k,
    taken one after the other under the same load of the host)."""
    measured_std: float
    """Standard deviation (ddof 1) of those changes: the real runs' noise, the baseline's
    included."""
    outside_spread: bool
    """Every candidate run beyond every baseline run, on one side."""
    predicted: float | None
    sign_ok: bool | None
    """The predicted sign matches (None where the change is inside the spread or there is
    no prediction)."""
    within_2std: bool | None

    def row(self) -> dict[str, Any]:
        """As a JSON object."""
        return asdict(self)


def judge(runs: Mapping[str, list[dict[str, float]]],
          prediction: Mapping[str, Mapping[str, float]] | None) -> list[Judged]:
    """Every candidate of ``runs`` (all but the baseline) and figure against the bars."""
    out = []
    base = runs[BASELINE]
    for name, figures in runs.items():
        if name == BASELINE:
            continue
        for m in METRICS:
            b = np.array([f[m] for f in base])
            a = np.array([f[m] for f in figures])
            k = min(len(a), len(b))
            c = a[:k] - b[:k]  # the change each round measured
            mean, std = float(c.mean()), float(c.std(ddof=1)) if k > 1 else 0.0
            outside = bool(a.min() > b.max() or a.max() < b.min())
            pred = None if prediction is None else prediction[name][m]
            out.append(Judged(
                name, m, mean, std, outside, pred,
                None if pred is None or not outside else bool(np.sign(pred) == np.sign(mean)),
                None if pred is None else abs(pred - mean) <= 2 * std))
    return out


def _offsets(w: Workload, names: Sequence[str]) -> dict[str, int]:
    """Job name -> start on the run's own clock (seconds from its first submission)."""
    t0 = int(w.submit.min())
    return {n: int(w.logged_start[k]) - t0 for k, n in enumerate(names)}


def _median_error(a: Mapping[str, int], b: Mapping[str, int]) -> float:
    common = sorted(set(a) & set(b))
    return float(np.median(np.abs(np.array([a[n] - b[n] for n in common]))))


def real_start_errors(folder: Path) -> list[float]:
    """The real Slurm's own median |start error|, run against run: every pair of the
    baseline's runs, jobs matched by name, each run's clock from its first submission."""
    real = [_offsets(*read_run(r)) for r in run_folders(folder / BASELINE)]
    return [_median_error(real[i], real[j])
            for i in range(len(real)) for j in range(i + 1, len(real))]


def world_start_errors(folder: Path, name: str = BASELINE) -> list[float]:
    """The world's median |start error| on each log of configuration ``name``, replayed
    under the configuration that run ran under (its slurm.conf and sacctmgr dumps)."""
    out = []
    for run in run_folders(folder / name):
        w, _ = read_run(run)
        start: npt.NDArray[np.int64] = replay(w, slurm_world(run_conf(run), w)).start
        out.append(float(np.median(np.abs(start - np.asarray(w.logged_start)))))
    return out
