"""What the two-agent scheduler trains on, as JSON-ready data.

:class:`TrainingData` names the job table, workload options, cluster spec and episode
options, so that DD-PPO workers (:mod:`hpcpolicy.marl.distributed`) rebuild the same
training data from ``launch.json`` and a resumed run can be checked against it
(:func:`hpcpolicy.marl.session.train_table`).

Example:
    >>> data = TrainingData("jobs.parquet", MarlEnvConfig(window_size=128),
    ...                     cluster="examples/gpu-partition.toml")
    >>> again = TrainingData.from_dict(data.to_dict())
    >>> again.env == data.env, Path(again.table).is_absolute()
    (True, True)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpcpolicy.errors import ConfigError
from hpcpolicy.marl.config import MarlEnvConfig

if TYPE_CHECKING:
    from hpcpolicy.cluster import ClusterSpec
    from hpcpolicy.workload import Workload

__all__ = ["TrainingData"]


@dataclass(frozen=True)
class TrainingData:
    """The job table, machine and episodes the agents learn from."""

    table: str
    """The job table (``jobs.parquet``)."""
    env: MarlEnvConfig = field(default_factory=MarlEnvConfig)
    """Episode options."""
    workload: dict[str, Any] | None = None
    """:class:`~hpcpolicy.workload.WorkloadOptions` as a dict; None for the defaults."""
    cluster: str | None = None
    """The cluster spec file (a GPU partition)."""
    procs: int | None = None
    """A machine of this many processors instead (it has no GPUs: refused at load)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (absolute paths)."""
        return {"table": str(Path(self.table).resolve()), "env": self.env.to_dict(),
                "workload": self.workload,
                "cluster": None if self.cluster is None else str(Path(self.cluster).resolve()),
                "procs": self.procs}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainingData:
        """Rebuild from :meth:`to_dict` output."""
        return cls(**{**data, "env": MarlEnvConfig.from_dict(data["env"])})

    def load(self) -> tuple[Workload, ClusterSpec]:
        """The workload and the machine, checked for training.

        Raises:
            ConfigError: A machine without GPUs, the test split, or too few jobs for a window;
                and what :func:`hpcpolicy.env.factory.load` raises.
        """
        from hpcpolicy.env.factory import load
        from hpcpolicy.world.split import window_range

        if self.env.split == "test":
            raise ConfigError("--split test: train on the train part, or on all jobs; the test "
                              "part is for `hpcpolicy evaluate`")
        workload, machine = load(self.table, self.workload, self.cluster, self.procs)
        if machine.total_gpus == 0:
            raise ConfigError(f"cluster {machine.name!r} has no GPUs: the two-agent scheduler "
                              "places GPU jobs on GPU nodes; give a GPU partition with "
                              "--cluster (e.g. examples/gpu-partition.toml)")
        window_range(len(workload), self.env.split, self.env.train_frac, self.env.window_size)
        return workload, machine

    def provenance(self, workload: Workload, machine: ClusterSpec) -> dict[str, Any]:
        """What the artifact's manifest records: training data (path, SHA-256), episode
        options, workload options, machine and split (as :func:`hpcpolicy.env.factory
        .provenance` records them for a single-agent policy)."""
        from hpcpolicy.env.config import EnvConfig
        from hpcpolicy.env.factory import provenance

        env = self.env
        facts = provenance(self.table, EnvConfig(window_size=env.window_size, split=env.split,
                                                 train_frac=env.train_frac),
                           workload, machine)
        facts.pop("reward")
        facts["environment"] = env.to_dict()
        return facts
