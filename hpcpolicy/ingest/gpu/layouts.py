"""The CSV layouts of the GPU-cluster traces hpcpolicy reads, declared once.

Each layout names the columns a file must have (``required``) and the others it may have
(``optional``); other columns are ignored. The readers (:mod:`hpcpolicy.ingest.gpu.alibaba`,
:mod:`hpcpolicy.ingest.gpu.jobs`), format detection (:mod:`hpcpolicy.ingest.detect`) and the
error messages all read these declarations. Column names are matched without regard to case.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ALIBABA_NODES", "ALIBABA_PODS", "GPU_LAYOUTS", "HELIOS", "PHILLY", "CsvLayout"]


@dataclass(frozen=True)
class CsvLayout:
    """The columns of one comma-separated trace file with a header line."""

    name: str
    """Format name, as given to ``--format``."""
    title: str
    """What the file is, for messages (e.g. "Helios job log")."""
    required: tuple[str, ...]
    """Columns the file must have."""
    optional: tuple[str, ...] = ()
    """Columns read when present."""

    @property
    def columns(self) -> tuple[str, ...]:
        """Every column the layout reads, required first."""
        return self.required + self.optional


ALIBABA_PODS = CsvLayout(
    "alibaba", "Alibaba GPU-trace pod list (openb_pod_list_*.csv)",
    required=("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "pod_phase",
              "creation_time", "deletion_time", "scheduled_time"),
    optional=("gpu_spec", "qos"),
)
"""Alibaba Cluster Trace GPU v2023: one Kubernetes pod per row."""

ALIBABA_NODES = CsvLayout(
    "alibaba-nodes", "Alibaba GPU-trace node list (openb_node_list_*.csv)",
    required=("sn", "cpu_milli", "memory_mib", "gpu", "model"),
)
"""The node list of the same trace: one machine per row."""

HELIOS = CsvLayout(
    "helios", "Helios job log (cluster_log.csv)",
    required=("job_id", "submit_time", "state"),
    optional=("user", "vc", "jobname", "gpu_num", "cpu_num", "node_num", "start_time",
              "end_time", "duration", "queue"),
)
"""SenseTime Helios traces (HeliosData): one Slurm job per row."""

PHILLY = CsvLayout(
    "philly", "Philly job log (cluster_job_log flattened to CSV)",
    required=("jobid", "submitted_time", "status"),
    optional=("user", "vc", "gpus", "start_time", "end_time"),
)
"""Microsoft Philly traces (msr-fiddle/philly-traces): the keys of ``cluster_job_log``, one
job per row, its attempts summed up as the first start, the last end and the GPU count."""

GPU_LAYOUTS: tuple[CsvLayout, ...] = (ALIBABA_PODS, HELIOS, PHILLY)
"""The job-log layouts ``--format auto`` recognises (the node list is not a job log)."""
