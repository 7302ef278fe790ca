"""What the benchmarks share: where things are, the shared traces, the protocol's split.

The table of shared traces (file, machine size, walltime fallback, warm windows) is stated
here once; a benchmark names the traces it studies and reads everything else from it.
"""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpcpolicy.training.options import TrainOptions
from hpcpolicy.world.split import fit_frac

__all__ = ["DATA", "FIT_FRAC", "OPENB_NODES", "OPENB_PODS", "RESULTS", "ROOT", "TOOLS", "TRACES",
           "TRAIN_FRAC", "VAL_FRAC", "SharedTrace", "cpu_model", "ingest_trace", "procs_options",
           "slurm_env"]

ROOT = Path(__file__).resolve().parent.parent
"""The repository."""
DATA = Path(os.environ.get("HPCPOLICY_SHARED_DATA", ROOT.parent / "shared" / "data"))
"""The shared traces (read-only), beside the repository unless HPCPOLICY_SHARED_DATA says."""
TOOLS = DATA.parent / "tools"
"""The shared tools (``swf2sacct.py``)."""
RESULTS = ROOT / "benchmarks" / "results"
"""Where a benchmark writes its JSON by default."""

TRAIN_FRAC = TrainOptions().train_frac
"""``hpcpolicy train``'s training part (the first share of the jobs, earliest first)."""
VAL_FRAC = TrainOptions().val_frac
"""``hpcpolicy train``'s validation part, at the end of the training part."""
FIT_FRAC = fit_frac(TRAIN_FRAC, VAL_FRAC)
"""The share of the jobs training learns on: the training part less the validation part."""


@dataclass(frozen=True)
class SharedTrace:
    """One trace of ``../shared/data`` and what replaying it needs beyond its file."""

    file: str
    """File name under :data:`DATA`."""
    procs: int | None = None
    """Processors of the machine when the log's header does not give them."""
    walltime_fallback: str | None = None
    """What stands in for a missing requested walltime (None: the library's default)."""
    warm: bool = False
    """Windows start warm, with the jobs then running (else no policy ever queues)."""

    @property
    def workload(self) -> dict[str, Any]:
        """The :class:`~hpcpolicy.workload.WorkloadOptions` fields this trace replays with."""
        return {} if self.walltime_fallback is None else {
            "walltime_fallback": self.walltime_fallback}


TRACES: dict[str, SharedTrace] = {
    # the Lublin model records no requested walltime: a job's run time stands in for it
    "lublin_256": SharedTrace("lublin_256.swf", walltime_fallback="runtime"),
    "CTC-SP2": SharedTrace("CTC-SP2-1996-3.1-cln.swf.gz"),
    "HPC2N": SharedTrace("HPC2N-2002-2.2-cln.swf.gz"),
    "KTH-SP2": SharedTrace("KTH-SP2-1996-2.1-cln.swf.gz"),
    # no header (the Parallel Workloads Archive gives 8,192 processors); on windows that start
    # from an empty machine no policy ever queues (every heuristic scores a mean bsld of 1.00)
    "RICC": SharedTrace("RICC-2010-2.swf.gz", procs=8192, warm=True),
    "Genomique": SharedTrace("genomique-2026-sacct-format-all.csv"),
    "Kabre": SharedTrace("kabre-2024-sacct.csv"),
}
"""The shared traces the benchmarks replay, by name."""
OPENB_PODS, OPENB_NODES = "openb_pod_list_default.csv", "openb_node_list_all_node.csv"
"""The Alibaba GPU-sharing trace (2023) under :data:`DATA`: its pods and its nodes."""


def ingest_trace(name: str, cache: Path) -> Path:
    """The job table of the shared trace ``name`` (a key of :data:`TRACES`), ingested once
    into ``cache`` (with the trace's machine size where its log has no header); exits in one
    line when the trace is absent."""
    from hpcpolicy.ingest import IngestConfig, ingest

    table = cache / f"{name}.parquet"
    if not table.exists():
        source = DATA / TRACES[name].file
        if not source.exists():
            raise SystemExit(f"{source} is absent: the benchmark needs ../shared/data")
        cache.mkdir(parents=True, exist_ok=True)
        ingest([source], table, IngestConfig(procs=TRACES[name].procs, overwrite=True))
    return table


def procs_options(name: str) -> list[str]:
    """The command-line flags that give the shared trace ``name``'s machine size where its
    log does not (``--procs N``), else none."""
    procs = TRACES[name].procs
    return [] if procs is None else ["--procs", str(procs)]


def cpu_model() -> str:
    """The CPU's model name as /proc/cpuinfo gives it (else what :mod:`platform` knows)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def slurm_env() -> dict[str, str]:
    """The environment Slurm commands need to reach the Slurm a benchmark runs on: this
    process's, whose SLURM_CONF names that Slurm's ``slurm.conf``; exits in one line when it
    is unset.

    The benchmarks run on any Slurm; the test Slurm is brought up by ``tests/slurm/up.sh``
    (which prints the ``export SLURM_CONF=...`` line) and stopped by ``tests/slurm/down.sh``.
    """
    if not os.environ.get("SLURM_CONF"):
        raise SystemExit("SLURM_CONF is not set: start the test Slurm with tests/slurm/up.sh "
                         "and export the SLURM_CONF line it prints (or name another Slurm's "
                         "slurm.conf)")
    return dict(os.environ)
