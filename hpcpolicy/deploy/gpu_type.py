"""A trained GPU-type chooser (format ``hpcpolicy.gpu-type-policy``) as a policy.

The artifact (written by :func:`hpcpolicy.hetero.export.export_gpu_policy`) is read without
d3rlpy, training code or pickle: the manifest is checked against its schema and version
(:func:`hpcpolicy.artifact.read_manifest`), the model file against its hash, and the
Q-network opened with onnxruntime (:func:`hpcpolicy.artifact.open_model`).
:class:`GpuDqnPolicy` then starts jobs in FCFS order and, when a job can start on several GPU
types, takes the type of highest Q-value (:mod:`hpcpolicy.hetero.policy`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from hpcpolicy.artifact import GPU_TYPE_FORMAT, OnnxModel, open_model, read_manifest
from hpcpolicy.cluster import ClusterSpec
from hpcpolicy.errors import ArtifactError
from hpcpolicy.gpu.placer import PlacementView
from hpcpolicy.hetero.observe import PoolObserver
from hpcpolicy.hetero.policy import TypePlacer, TypePolicy
from hpcpolicy.workload import Workload

__all__ = ["GpuDqnPolicy", "GpuPolicyModel", "load_gpu_policy"]

class GpuPolicyModel:
    """A loaded GPU-type policy: its manifest and a Q-function over observations.

    Attributes:
        path: The policy directory.
        manifest: The parsed manifest.
        pools: (name, speed) of each GPU type, in action order.
    """

    def __init__(self, path: Path, manifest: dict[str, Any], model: OnnxModel) -> None:
        self.path, self.manifest, self._model = path, manifest, model
        self.pools = tuple((str(p["name"]), float(p["speed"])) for p in manifest["pools"])

    def q(self, obs: npt.ArrayLike) -> npt.NDArray[np.float32]:
        """Q-values ``[P]`` of one observation ``[D]`` (``-inf`` on invalid types).

        Raises:
            ArtifactError: The model cannot run on it, or returns another shape.
        """
        x = np.asarray(obs, dtype=np.float32)[None]
        return np.asarray(self._model.run({"obs": x}, (1, len(self.pools)))[0], np.float32)


def load_gpu_policy(path: str | os.PathLike[str]) -> GpuPolicyModel:
    """Open a GPU-type policy without training code, d3rlpy or pickle (its ONNX model, with
    onnxruntime).

    Args:
        path: The policy directory or its manifest.json.

    Raises:
        ArtifactError: Not such a policy, another major manifest version, a manifest that
            breaks its schema, a model file whose hash differs or that keeps tensors
            elsewhere, a model of other inputs, or a missing runtime.
    """
    directory, manifest = read_manifest(
        path, GPU_TYPE_FORMAT, "write one with `hpcpolicy train TABLE --algo dqn --cluster SPEC`")
    model = open_model(directory, manifest, {"obs": (None, manifest["observation"]["dim"])})
    return GpuPolicyModel(directory, manifest, model)


class GpuDqnPolicy(TypePolicy):
    """A trained GPU-type policy directory (``runs/NAME/policy``), greedy in its Q-values.

    Args:
        path: The policy directory or its manifest.json.

    Raises:
        ArtifactError: What :func:`load_gpu_policy` raises.

    Example:
        >>> policy = GpuDqnPolicy("runs/NAME/policy")                        # doctest: +SKIP
        >>> simulate(workload, cluster, SimConfig(), policy=policy)          # doctest: +SKIP
    """

    def __init__(self, path: str | Path) -> None:
        self.artifact = load_gpu_policy(path)
        """The loaded artifact (manifest, Q-function)."""
        super().__init__(str(path), self._greedy)

    def _greedy(self, view: PlacementView, choices: list[int | None],
                observer: PoolObserver) -> int:
        return int(np.argmax(self.artifact.q(observer.observe(view, choices))))

    def bind_placer(self, workload: Workload, cluster: ClusterSpec) -> TypePlacer:
        """A placer for one run.

        Raises:
            ArtifactError: The cluster's GPU types (names and speeds, in order) are not the
                ones the policy was trained for.
        """
        observer = PoolObserver(workload, cluster)
        mine = observer.types
        if mine != self.artifact.pools:
            def show(pools: tuple[tuple[str, float], ...]) -> str:
                return ", ".join(f"{n} (speed {s:g})" for n, s in pools)

            raise ArtifactError(f"{self.artifact.path}: trained for GPU types "
                                f"{show(self.artifact.pools)}; cluster {cluster.name!r} has "
                                f"{show(mine)}; train a policy for this cluster")
        return TypePlacer(observer, self.rule)
