"""One cell of a sweep: the what-if report ``hpcpolicy whatif`` writes for it, and its row.

:func:`run_cell` loads the cell's log as ``whatif`` loads it, compares the baseline and the
candidate with :func:`hpcpolicy.whatif.run_whatif` and writes the report folder with
:func:`hpcpolicy.whatif.write_report`, so a cell's folder holds exactly what
``hpcpolicy whatif LOG -c CANDIDATE [-s SCENARIO] --seed SEED`` writes. A folder that already
holds the cell's report is finished (:func:`finished`); :func:`cell_row` reads its figures
back for the combined table.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpcpolicy.atomic import finish_commit, journal_for
from hpcpolicy.config import read_json_object
from hpcpolicy.errors import ConfigError
from hpcpolicy.sweep.spec import Cell, SweepSpec
from hpcpolicy.whatif.scenarios import AS_LOGGED

if TYPE_CHECKING:
    from hpcpolicy.cluster import ClusterSpec
    from hpcpolicy.workload import Workload

__all__ = ["cell_row", "finished", "run_cell"]


@functools.lru_cache(maxsize=2)
def _load(log: str, procs: int | None, walltime_fallback: str | None,
          slurm_conf: str | None = None) -> tuple[Workload, ClusterSpec, str | None]:
    """A log's jobs, machine (slurm.conf's nodes when given) and source format, once per
    process (cells share logs)."""
    from hpcpolicy.table import open_job_table
    from hpcpolicy.whatif.slurm_candidates import slurm_machine
    from hpcpolicy.workload import workload_options
    from hpcpolicy.world import WorldSpec, open_workload, open_world

    options = workload_options(None, None, walltime_fallback)
    if slurm_conf:
        jobs, machine = open_workload(log, options), slurm_machine(slurm_conf)
    else:
        world = open_world(log, WorldSpec(workload=options, procs=procs))
        jobs, machine = world.workload, world.cluster
    return jobs, machine, open_job_table(log).metadata.get("source_format")


def run_cell(spec: SweepSpec, cell: Cell, root: str | Path) -> str:
    """Compare the cell's candidate with the baseline and write its report folder under
    ``root``; returns the folder (relative to ``root``)."""
    from hpcpolicy.whatif import run_whatif, write_report

    workload, machine, source_format = _load(cell.log, spec.procs, spec.walltime_fallback,
                                             spec.slurm_conf)
    result = run_whatif(workload, machine, spec.whatif(cell), source=cell.log,
                        source_format=source_format)
    write_report(result, Path(root) / cell.folder)
    return cell.folder


def _report(root: Path, cell: Cell) -> Path:
    return root / cell.folder / "report.json"


def finished(spec: SweepSpec, cell: Cell, root: Path) -> bool:
    """Whether the cell's folder holds its report (a commit a kill left half done is finished
    first).

    Raises:
        ConfigError: The folder holds a report made with other settings.
    """
    path = _report(root, cell)
    if journal_for(path).exists():
        finish_commit(journal_for(path))
    if not path.is_file():
        return False
    saved = read_json_object(path).get("config")
    wanted = spec.whatif(cell).to_dict()
    if saved != wanted:
        changed = sorted(k for k in wanted if (saved or {}).get(k) != wanted[k])
        raise ConfigError(f"{path.parent} holds a report made with other settings "
                          f"({', '.join(changed)}); remove that folder or give another -o")
    return True


def cell_row(spec: SweepSpec, cell: Cell, root: Path) -> dict[str, Any]:
    """The cell's row of the combined table, read from its report: the primary metric under
    the cell's scenario, and the comparison's verdict."""
    doc = read_json_object(_report(root, cell))
    scenario = AS_LOGGED.id if cell.scenario == AS_LOGGED.id \
        else spec.whatif(cell).scenario_list()[-1].id
    comparison = next(c for c in doc["comparisons"] if c["scenario"] == scenario)
    row = next(m for m in comparison["metrics"] if m["key"] == spec.metric)
    return {"log": cell.log, "candidate": cell.candidate, "scenario": scenario,
            "seed": cell.seed, "baseline_policy": doc["config"]["baseline"],
            "metric": spec.metric, "baseline": row["baseline"], "candidate_value":
            row["candidate"], "diff": row["diff"], "ci_low": row["ci_low"],
            "ci_high": row["ci_high"], "rel_diff": row["rel_diff"],
            "rel_ci_low": row["rel_ci_low"], "rel_ci_high": row["rel_ci_high"],
            "windows": comparison["windows"], "verdict": comparison["verdict"],
            "report": cell.folder}
