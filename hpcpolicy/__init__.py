"""hpcpolicy: turn a cluster's real job logs into scheduling answers an administrator can act on.

Ingest Slurm and SWF logs into one canonical job table, replay them in a scheduling simulator,
learn policies, and compare a candidate with today's policy.
"""

from __future__ import annotations

__version__ = "0.1.0"
__all__ = ["__version__"]
