"""The deployable GPU-type policy: export after training, load without d3rlpy or training code.

A policy directory (``runs/NAME/policy/``) holds:

* ``policy.onnx`` and ``policy.torchscript.pt``: ``q = f(obs)``, ``obs [B, D]`` float32 as
  built by :mod:`hpcpolicy.hetero.observe`, ``q [B, P]`` float32, one value per GPU type in
  the manifest's ``pools`` order, higher is better, ``-inf`` where the type cannot hold the
  job;
* ``manifest.json``: ``format`` :data:`FORMAT`, ``algo`` ``dqn-gpu``, the pools (name,
  speed) the policy was trained for, the observation's feature names, the queue policy
  (FCFS), the reward (ADLRO: lambda, scale), the training data's hash, config, metrics,
  package version and the SHA-256 of both model files.

This is another contract than the job-scorer artifact of :mod:`hpcpolicy.artifact`
(``scores = f(jobs, cluster, mask)``), hence its own ``format``; the model files are opened
and hash-checked by the same code.

Example:
    >>> import tempfile
    >>> net = PoolQ(2, (8,), "relu")
    >>> d = export_gpu_policy(net, tempfile.mkdtemp() + "/policy", pools=(("a", 1.0),
    ...     ("b", 2.0)), config={"seed": 1}, reward={}, metrics={})
    >>> load_gpu_policy(d).q(np.zeros(16, np.float32)).tolist()   # no type can hold the job
    [-inf, -inf]
"""

from __future__ import annotations

import datetime as dt
import json
import math
import shutil
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from hpcpolicy import __version__
from hpcpolicy.artifact import MANIFEST_FILE, ONNX_FILE, ONNX_OPSET, TORCHSCRIPT_FILE
from hpcpolicy.atomic import build_dir, file_sha256, replace_dir, write_json
from hpcpolicy.errors import ArtifactError
from hpcpolicy.hetero.config import ALGO
from hpcpolicy.hetero.observe import feature_names
from hpcpolicy.hetero.qnet import DeployedQ, PoolQ

__all__ = ["FORMAT", "MANIFEST_VERSION", "GpuPolicyModel", "export_gpu_policy",
           "is_gpu_policy", "load_gpu_policy"]

FORMAT = "hpcpolicy.gpu-type-policy"
"""The manifest's ``format``."""
MANIFEST_VERSION = "1.0"
"""Version of this manifest contract (MAJOR.MINOR); another major version is refused."""
_BACKENDS = ("auto", "onnx", "torchscript")


def export_gpu_policy(net: PoolQ, out_dir: str | Path, *, pools: tuple[tuple[str, float], ...],
                      config: Mapping[str, Any], reward: Mapping[str, Any],
                      metrics: Mapping[str, float],
                      training_data: Mapping[str, Any] | None = None) -> Path:
    """Write ``policy.onnx``, ``policy.torchscript.pt`` and ``manifest.json`` to ``out_dir``
    (built beside it and renamed into place, replacing an older one).

    Args:
        net: The trained Q-network.
        out_dir: The policy directory, usually ``runs/NAME/policy``.
        pools: (name, speed) of each GPU type, in action order.
        config: The run's config (``to_dict()``).
        reward: The reward's definition and constants.
        metrics: Final training metrics (NaN/inf written as null).
        training_data: ``{"path", "sha256"}`` of the job table.

    Returns:
        ``out_dir`` as a Path.
    """
    import copy

    import torch

    from hpcpolicy.artifact import _git_commit

    model = DeployedQ(copy.deepcopy(net).cpu()).eval()
    example = torch.zeros(1, net.dim)
    out = Path(out_dir)
    out.parent.mkdir(parents=True, exist_ok=True)
    build = build_dir(out)
    build.chmod(0o755)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            torch.onnx.export(model, (example,), str(build / ONNX_FILE), dynamo=False,
                              opset_version=ONNX_OPSET, input_names=["obs"],
                              output_names=["q"],
                              dynamic_axes={"obs": {0: "batch"}, "q": {0: "batch"}})
            torch.jit.script(model).save(str(build / TORCHSCRIPT_FILE))  # type: ignore[no-untyped-call]
        names = tuple(name for name, _ in pools)
        write_json(build / MANIFEST_FILE, {
            "manifest_version": MANIFEST_VERSION,
            "format": FORMAT,
            "algo": ALGO,
            "created_utc": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "package": {"name": "hpcpolicy", "version": __version__,
                        "git_commit": _git_commit()},
            "pools": [{"name": name, "speed": speed} for name, speed in pools],
            "queue_policy": "fcfs",
            "observation": {"dim": net.dim, "features": list(feature_names(names)),
                            "defined_in": "hpcpolicy.hetero.observe"},
            "outputs": {"q": "float32 [B, P]; one value per pool, higher is better; -inf "
                             "where the pool cannot hold the job"},
            "network": {"kind": "pool_q_mlp",
                        "parameters": sum(p.numel() for p in net.parameters())},
            "reward": dict(reward),
            "training_data": dict(training_data) if training_data else None,
            "config": dict(config),
            "metrics": {k: (float(v) if math.isfinite(v) else None) for k, v in metrics.items()},
            "files": {
                "onnx": {"path": ONNX_FILE, "sha256": file_sha256(build / ONNX_FILE),
                         "opset": ONNX_OPSET},
                "torchscript": {"path": TORCHSCRIPT_FILE,
                                "sha256": file_sha256(build / TORCHSCRIPT_FILE)},
            },
        })
        replace_dir(build, out)
    except BaseException:
        shutil.rmtree(build, ignore_errors=True)
        raise
    return out


def _manifest_path(path: Path) -> Path:
    return path / MANIFEST_FILE if path.is_dir() else path


def is_gpu_policy(path: str | Path) -> bool:
    """Whether ``path`` (a directory or its manifest.json) is a GPU-type policy."""
    file = _manifest_path(Path(path))
    if file.name != MANIFEST_FILE or not file.is_file():
        return False
    try:
        manifest = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(manifest, dict) and manifest.get("format") == FORMAT


class GpuPolicyModel:
    """A loaded GPU-type policy: its manifest and a Q-function over observations.

    Attributes:
        path: The policy directory.
        manifest: The parsed manifest.
        backend: ``onnx`` or ``torchscript``.
        pools: (name, speed) of each GPU type, in action order.
    """

    def __init__(self, path: Path, manifest: dict[str, Any], backend: str, model: Any) -> None:
        self.path, self.manifest, self.backend, self._model = path, manifest, backend, model
        self.pools = tuple((str(p["name"]), float(p["speed"])) for p in manifest["pools"])

    def q(self, obs: npt.ArrayLike) -> npt.NDArray[np.float32]:
        """Q-values ``[P]`` of one observation ``[D]`` (``-inf`` on invalid types)."""
        x = np.asarray(obs, dtype=np.float32)[None]
        if self.backend == "onnx":
            out = self._model.run(None, {"obs": x})[0]
        else:
            import torch

            with torch.inference_mode():
                out = self._model(torch.from_numpy(x)).numpy()
        return np.asarray(out[0], dtype=np.float32)


def load_gpu_policy(path: str | Path, backend: str = "auto") -> GpuPolicyModel:
    """Open a GPU-type policy without training code, d3rlpy or pickle.

    Args:
        path: The policy directory or its manifest.json.
        backend: ``auto`` (onnxruntime if installed, else TorchScript), ``onnx`` or
            ``torchscript``.

    Raises:
        ArtifactError: Not such a policy, another major manifest version, a model file whose
            hash differs, or a missing runtime.
    """
    from hpcpolicy.artifact import _open_model

    if backend not in _BACKENDS:
        raise ArtifactError(f"unknown backend {backend!r}; valid: {', '.join(_BACKENDS)}")
    file = _manifest_path(Path(path))
    if not is_gpu_policy(file):
        raise ArtifactError(f"{path}: not a GPU-type policy (a directory whose {MANIFEST_FILE} "
                            f"has format {FORMAT!r}, written by `hpcpolicy train TABLE --algo "
                            "dqn --cluster SPEC`)")
    manifest = json.loads(file.read_text(encoding="utf-8"))
    version = str(manifest.get("manifest_version", ""))
    if version.split(".")[0] != MANIFEST_VERSION.split(".")[0]:
        raise ArtifactError(f"{file}: manifest version {version!r} cannot be read by hpcpolicy "
                            f"{__version__} (reads {MANIFEST_VERSION}); export the policy again")
    chosen, model = _open_model(file.parent, manifest, backend)
    return GpuPolicyModel(file.parent, manifest, chosen, model)
