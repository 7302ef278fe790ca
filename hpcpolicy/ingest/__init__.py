"""Read real job logs (SWF, Slurm sacct, GPU-cluster traces) into the canonical job table."""

from __future__ import annotations

from hpcpolicy.ingest.config import FORMATS, IngestConfig
from hpcpolicy.ingest.detect import detect_format
from hpcpolicy.ingest.pipeline import IngestReport, cluster_path, ingest, output_paths
from hpcpolicy.ingest.plan import STEP_FOLDED, ReaderPlan

__all__ = [
    "FORMATS",
    "STEP_FOLDED",
    "IngestConfig",
    "IngestReport",
    "ReaderPlan",
    "cluster_path",
    "detect_format",
    "ingest",
    "output_paths",
]
