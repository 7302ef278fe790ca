"""``SweepSpec``: the grid of a sweep, read from a TOML file, and its cells.

A spec file names the grid and the settings every cell shares::

    logs = ["kth.parquet", "ctc.parquet"]     # job tables, relative to the spec file
    candidates = ["sjf+easy", "f1+easy"]      # each compared with the baseline on its own
    scenarios = ["as-logged", "nodes=+10%"]   # as-logged: the log as it was
    seeds = [0, 1]                            # bootstrap seeds
    baseline = "fcfs+easy"
    period_s = 604800
    bootstrap = 2000

Each cell is the comparison ``hpcpolicy whatif LOG -c CANDIDATE [-s SCENARIO] --seed SEED``
would make: the baseline and the candidate, replayed under the log as it was and under the
scenario. A cell's verdict is the comparison under its own scenario.

With the site's slurm.conf, the baseline is that configuration in the Slurm world, a
candidate may be a change to it, and a ``[grid]`` of slurm.conf keys and SchedulerParameters
options adds every combination as a candidate (:mod:`hpcpolicy.sweep.slurm_grid`)::

    logs = ["jobs.parquet"]
    slurm_conf = "slurm.conf"                 # relative to the spec file; sacctmgr = "dumps/"
    candidates = ["qos normal MaxJobsPerUser=50"]   # optional beside a grid
    [grid]
    PriorityWeightAge = [1000, 5000]
    bf_window = [1440, 2880]

Example:
    >>> spec = SweepSpec(logs=("a.parquet",), candidates=("sjf+easy", "f1+easy"),
    ...                  scenarios=("as-logged", "nodes=+10%"), seeds=(0,))
    >>> [c.folder for c in spec.cells()][:2]
    ['a/sjf+easy/as-logged/seed0', 'a/sjf+easy/nodes=+10_/seed0']
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from hpcpolicy.config import Config
from hpcpolicy.docload import read_toml
from hpcpolicy.errors import ConfigError
from hpcpolicy.sweep.slurm_grid import Axes, grid_candidates, read_grid
from hpcpolicy.whatif import WhatifConfig
from hpcpolicy.whatif.scenarios import AS_LOGGED

__all__ = ["Cell", "SweepSpec", "load_spec"]

_UNSAFE = re.compile(r"[^A-Za-z0-9+=.,-]")


def _slug(text: str) -> str:
    """A folder name for ``text``: path separators and other odd characters as ``_``."""
    return _UNSAFE.sub("_", text).strip(".") or "_"


@dataclass(frozen=True)
class Cell:
    """One comparison of the grid."""

    log: str
    """The job table."""
    candidate: str
    """The candidate: a policy, ``POLICY[+BACKFILL]``, or a change to slurm.conf."""
    scenario: str
    """``as-logged`` or a scenario (``nodes=+10%``)."""
    seed: int
    """The bootstrap seed."""
    folder: str
    """The cell's report folder, relative to the sweep folder."""


@dataclass(frozen=True)
class SweepSpec(Config):
    """A grid of what-if comparisons (``hpcpolicy sweep SPEC.toml``)."""

    label: ClassVar[str] = "sweep"

    logs: tuple[str, ...] = ()
    """Job tables (``ingest``'s Parquet files); relative paths start at the spec file."""
    candidates: tuple[str, ...] = ()
    """Candidate policies, each compared with the baseline in its own cells."""
    scenarios: tuple[str, ...] = (AS_LOGGED.id,)
    """``as-logged`` (the log as it was) and scenarios as ``whatif --scenario`` takes them."""
    seeds: tuple[int, ...] = (0,)
    """Bootstrap seeds."""
    baseline: str = "fcfs+easy"
    """Today's policy as best known."""
    period_s: int = 7 * 86400
    """Window length of the paired comparison, in seconds."""
    metric: str = "mean_bsld"
    """The primary metric, which decides each verdict."""
    bootstrap: int = 2000
    """Bootstrap replicates."""
    confidence: float = 0.95
    """Confidence level of the intervals."""
    procs: int | None = None
    """A machine of this many processors instead of the log header's (``whatif --procs``)."""
    walltime_fallback: str | None = None
    """Planning time of jobs without a requested time (``whatif --walltime-fallback``)."""
    slurm_conf: str | None = None
    """The site's slurm.conf (``whatif --slurm-conf``): the baseline, and what a
    configuration candidate or the grid changes."""
    sacctmgr: str | None = None
    """With ``slurm_conf``: the folder of its sacctmgr dumps (``whatif --sacctmgr``)."""
    grid: Axes = ()
    """slurm.conf keys and SchedulerParameters options -> values; every combination is a
    candidate (:mod:`hpcpolicy.sweep.slurm_grid`)."""

    def validate(self) -> None:
        self._require(bool(self.candidates or self.grid), "candidates",
                      "must list at least one value (or give a [grid])")
        self._require(not self.grid or self.slurm_conf is not None, "grid",
                      "changes a slurm.conf: name it with slurm_conf = FILE")
        for name in ("logs", "candidates", "scenarios", "seeds"):
            values = getattr(self, name)
            self._require(bool(values) or name == "candidates", name,
                          "must list at least one value")
            self._require(len(set(values)) == len(values), name, "lists a value twice")
        self._require(all(s >= 0 for s in self.seeds), "seeds", "must be >= 0")
        self._require(self.procs is None or self.procs >= 1, "procs", "must be >= 1")
        for cell in self.cells():
            cfg = self.whatif(cell)
            for name, check in (("candidates", cfg.run_specs), ("scenarios", cfg.scenario_list)):
                try:
                    check()
                except ConfigError as exc:
                    raise self._error(name, str(exc)) from None
        folders = [c.folder for c in self.cells()]
        clash = sorted({f for f in folders if folders.count(f) > 1})
        self._require(not clash, "logs", f"two cells would share the folder {clash[:1]}; "
                      "give the logs or candidates names that differ in letters and digits")

    def whatif(self, cell: Cell) -> WhatifConfig:
        """The what-if config of ``cell``, as ``hpcpolicy whatif`` builds it."""
        scenarios = () if cell.scenario == AS_LOGGED.id else (cell.scenario,)
        return WhatifConfig(baseline=self.baseline, candidates=(cell.candidate,),
                            scenarios=scenarios, period_s=self.period_s, metric=self.metric,
                            bootstrap=self.bootstrap, confidence=self.confidence,
                            seed=cell.seed, slurm_conf=self.slurm_conf, sacctmgr=self.sacctmgr)

    def cells(self) -> list[Cell]:
        """Every cell, logs outermost, seeds innermost."""
        return [Cell(log, cand, scen, seed,
                     f"{_slug(Path(log).stem)}/{_slug(cand)}/{_slug(scen)}/seed{seed}")
                for log in self.logs for cand in (*self.candidates, *grid_candidates(self.grid))
                for scen in self.scenarios for seed in self.seeds]


def _conf_near(item: object, here: Path) -> object:
    """A ``conf:FILE`` candidate with a relative FILE taken from the spec file's folder."""
    if isinstance(item, str) and item.lower().startswith("conf:"):
        name = item[5:].strip()
        return item if Path(name).is_absolute() else f"conf:{here / name}"
    return item


def load_spec(path: str | Path) -> SweepSpec:
    """Read a spec file; relative log paths (and policy folders among the candidates) are
    taken from the spec file's folder.

    Raises:
        ConfigError: One line naming the file and the key: unreadable TOML, an unknown key,
            a wrong type or value, a log that is not there.
    """
    path = Path(path)
    data = read_toml(path, "sweep spec")
    here = path.parent

    def near(item: object) -> object:
        return str(here / item) if isinstance(item, str) and not Path(item).is_absolute() \
            else item

    if isinstance(data.get("logs"), list):
        data["logs"] = [near(x) for x in data["logs"]]
    if isinstance(data.get("candidates"), list):  # a policy folder or a conf: beside the spec
        data["candidates"] = [near(x) if isinstance(x, str) and (here / x.split("+")[0])
                              .is_dir() else _conf_near(x, here) for x in data["candidates"]]
    for key in ("slurm_conf", "sacctmgr"):
        if isinstance(data.get(key), str):
            data[key] = near(data[key])
    if "grid" in data:
        data["grid"] = read_grid(data["grid"], str(path))
    try:
        spec = SweepSpec.from_dict(data)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    missing = [log for log in spec.logs if not Path(log).is_file()]
    if missing:
        raise ConfigError(f"{path}: key `logs`: {missing[0]} is not a file; give job tables "
                          "written by `hpcpolicy ingest`, relative to the spec file")
    return spec
