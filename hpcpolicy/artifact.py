"""The deployable policy artifact: export after training, load anywhere without training code.

A policy directory (``runs/<name>/policy/``) holds:

* ``policy.onnx``: the scorer as an ONNX graph (runs with onnxruntime alone);
* ``policy.torchscript.pt``: the same scorer as TorchScript (runs with torch alone);
* ``manifest.json``: the contract in ``schemas/policy_manifest.schema.json``: input features
  in order with their normalisation, K, reward, training data hash, config, metrics, package
  version, git commit and the SHA-256 of both model files.

Both files compute ``scores = f(jobs [B, K, Fj], cluster [B, Fc], mask [B, K] bool)`` with
``scores [B, K]`` float32, higher is better, ``-inf`` on invalid slots; B and K may differ from
training (the same MLP scores every slot). Training checkpoints (``checkpoints/last.pt``) are a
different kind of file, for resuming only, and :func:`load_policy` refuses them.

:func:`load_policy` never unpickles anything: it reads JSON, checks it against the schema and
the version, checks the file hashes, and opens the model with onnxruntime (preferred) or
``torch.jit.load``. It imports neither hpcpolicy's training code nor torch unless the
TorchScript backend is chosen. A manifest of a newer minor version may carry fields this
version does not know: they are ignored, with a warning.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import math
import os
import shutil
import subprocess
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from hpcpolicy import __version__
from hpcpolicy.atomic import build_dir, file_sha256, replace_dir, write_json
from hpcpolicy.errors import ArtifactError

if TYPE_CHECKING:
    from hpcpolicy.rl.networks import ActorCritic, JobScorer

__all__ = [
    "MANIFEST_VERSION",
    "ONNX_FILE",
    "TORCHSCRIPT_FILE",
    "LoadedPolicy",
    "export_policy",
    "load_policy",
    "manifest_format",
    "read_manifest",
]

MANIFEST_VERSION = "1.0"
"""Version of the manifest contract this code writes and reads (MAJOR.MINOR)."""

MANIFEST_FILE = "manifest.json"
ONNX_FILE = "policy.onnx"
TORCHSCRIPT_FILE = "policy.torchscript.pt"
ONNX_OPSET = 17
_INPUTS = ("jobs", "cluster", "mask")
_SUPPORTED = (f"a policy directory with {MANIFEST_FILE}", MANIFEST_FILE, f"*.onnx ({ONNX_FILE})",
              f"*.torchscript.pt ({TORCHSCRIPT_FILE})")
_BACKENDS = ("auto", "onnx", "torchscript")


def _git_commit() -> str | None:
    """Commit of the source tree hpcpolicy runs from, or None outside a git checkout."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).parent,
                             capture_output=True, text=True, timeout=5, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def _finite(metrics: Mapping[str, float]) -> dict[str, float | None]:
    """Metrics with NaN/inf as None (JSON has no NaN)."""
    return {k: (float(v) if math.isfinite(v) else None) for k, v in metrics.items()}


def export_policy(agent: ActorCritic | JobScorer, out_dir: str | os.PathLike[str], *,
                  config: Mapping[str, Any], metrics: Mapping[str, float], k: int,
                  provenance: Mapping[str, Any] | None = None,
                  observation: Mapping[str, Any] | None = None) -> Path:
    """Write ``policy.onnx``, ``policy.torchscript.pt`` and ``manifest.json`` to ``out_dir``.

    The directory is built beside ``out_dir`` and renamed into place, replacing an older one.

    Args:
        agent: A trained :class:`~hpcpolicy.rl.networks.ActorCritic` (its ``scorer`` is
            exported) or a :class:`~hpcpolicy.rl.networks.JobScorer`.
        out_dir: The policy directory, usually ``runs/<name>/policy``.
        config: The training config's ``to_dict()`` (must name ``algo`` and ``seed``).
        metrics: Final training metrics.
        k: Slots the policy was trained with.
        provenance: ``reward``, ``training_data`` (``{"path", "sha256"}``) and further
            JSON-ready keys, recorded under ``provenance``.
        observation: The inputs' contract to record, for a scorer of other slots than
            waiting jobs (the two-agent scheduler's allocator scores candidate placements);
            default :func:`~hpcpolicy.env.spaces.feature_spec` of ``k``.

    Returns:
        ``out_dir`` as a Path.

    Example:
        >>> import tempfile
        >>> from hpcpolicy.rl.networks import ActorCritic
        >>> d = export_policy(ActorCritic(7, 7), tempfile.mkdtemp() + "/policy", k=8,
        ...                   config={"algo": "ppo", "seed": 1, "hidden": [32, 16, 8],
        ...                           "activation": "tanh"}, metrics={})
        >>> sorted(p.name for p in d.iterdir())
        ['manifest.json', 'policy.onnx', 'policy.torchscript.pt']
    """
    import torch

    from hpcpolicy.env.spaces import feature_spec
    from hpcpolicy.rl.networks import JobScorer, PolicyScorer

    scorer_net = agent if isinstance(agent, JobScorer) else agent.scorer
    scorer = PolicyScorer(copy.deepcopy(scorer_net).cpu()).eval()
    spec = dict(observation) if observation is not None else feature_spec(k)
    n_job, n_cluster = len(spec["job_features"]), len(spec["cluster_features"])
    example = (torch.zeros(1, k, n_job), torch.zeros(1, n_cluster),
               torch.ones(1, k, dtype=torch.bool))
    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    build = build_dir(out_dir)
    build.chmod(0o755)  # mkdtemp makes it private; a policy is meant to be shared
    try:
        # Both exporters are deprecated in torch 2.9+ in favour of torch.export; the dynamo
        # ONNX exporter needs the extra package onnxscript. Their output is checked against
        # eager torch by tests/test_artifact.py.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            torch.onnx.export(
                scorer, example, str(build / ONNX_FILE), dynamo=False, opset_version=ONNX_OPSET,
                input_names=list(_INPUTS), output_names=["scores"],
                dynamic_axes={"jobs": {0: "batch", 1: "k"}, "cluster": {0: "batch"},
                              "mask": {0: "batch", 1: "k"}, "scores": {0: "batch", 1: "k"}})
            torch.jit.script(scorer).save(  # type: ignore[no-untyped-call]
                str(build / TORCHSCRIPT_FILE))
        manifest = {
            "manifest_version": MANIFEST_VERSION,
            "format": "hpcpolicy.policy",
            "created_utc": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "package": {"name": "hpcpolicy", "version": __version__, "git_commit": _git_commit()},
            "algo": str(config["algo"]),
            "observation": spec,
            "network": {"kind": "job_scorer_mlp", "hidden": list(config.get("hidden", [])),
                        "activation": str(config.get("activation", "")),
                        "parameters": sum(p.numel() for p in scorer.parameters())},
            "outputs": {"scores": "float32 [B, K]; higher is better; -inf on invalid slots"},
            "reward": (provenance or {}).get("reward"),
            "training_data": (provenance or {}).get("training_data"),
            "config": dict(config),
            "metrics": _finite(metrics),
            "files": {
                "onnx": {"path": ONNX_FILE, "sha256": file_sha256(build / ONNX_FILE),
                         "opset": ONNX_OPSET},
                "torchscript": {"path": TORCHSCRIPT_FILE,
                                "sha256": file_sha256(build / TORCHSCRIPT_FILE)},
            },
            "provenance": {key: value for key, value in (provenance or {}).items()
                           if key not in ("reward", "training_data")},
        }
        _validate(manifest, build / MANIFEST_FILE)
        write_json(build / MANIFEST_FILE, manifest)
        replace_dir(build, out_dir)
    except BaseException:
        shutil.rmtree(build, ignore_errors=True)
        raise
    return out_dir


def _validate(manifest: dict[str, Any], where: Path, allow_unknown: bool = False) -> None:
    """Check ``manifest`` against schemas/policy_manifest.schema.json.

    ``allow_unknown`` tolerates fields the schema does not name (a newer minor version).

    Raises:
        ArtifactError: jsonschema is missing, or the manifest breaks the schema (first error).
    """
    try:
        import jsonschema
    except ImportError as exc:
        raise ArtifactError("checking a policy manifest needs jsonschema; install it with "
                            "`pip install 'hpcpolicy[rl]'`") from exc
    from hpcpolicy.schemas import load

    errors = jsonschema.Draft202012Validator(load("policy_manifest")).iter_errors(manifest)
    error = jsonschema.exceptions.best_match(
        e for e in errors if not (allow_unknown and e.validator == "additionalProperties"))
    if error is not None:
        at = "/".join(str(p) for p in error.absolute_path) or "(top level)"
        raise ArtifactError(f"{where}: manifest does not match policy_manifest.schema.json at "
                            f"{at}: {error.message}")


class LoadedPolicy:
    """A deployable policy opened by :func:`load_policy`.

    Attributes:
        path: The policy directory.
        manifest: The parsed, validated manifest.
        backend: ``onnx`` or ``torchscript``.
        k: Slots the policy was trained with (it scores any number).
        job_features: Names of the job features, in input order.
        cluster_features: Names of the cluster features, in input order.
    """

    def __init__(self, path: Path, manifest: dict[str, Any], backend: str, model: Any) -> None:
        self.path, self.manifest, self.backend, self._model = path, manifest, backend, model
        obs = manifest["observation"]
        self.k: int = obs["k"]
        self.job_features = tuple(f["name"] for f in obs["job_features"])
        self.cluster_features = tuple(f["name"] for f in obs["cluster_features"])

    def scores(self, jobs: npt.ArrayLike, cluster: npt.ArrayLike,
               mask: npt.ArrayLike) -> npt.NDArray[np.float32]:
        """Score each slot: higher is better, ``-inf`` where ``mask`` is false.

        Args:
            jobs: Normalised job features ``[K, Fj]`` (or ``[B, K, Fj]``).
            cluster: Normalised cluster features ``[Fc]`` (or ``[B, Fc]``).
            mask: Valid slots ``[K]`` (or ``[B, K]``), bool or 0/1.

        Returns:
            float32 scores ``[K]`` (or ``[B, K]``).

        Raises:
            ValueError: Shapes do not match each other or the manifest's feature counts.
        """
        j = np.asarray(jobs, dtype=np.float32)
        c = np.asarray(cluster, dtype=np.float32)
        m = np.asarray(mask, dtype=np.bool_)
        single = j.ndim == 2
        if single:
            j, c, m = j[None], c[None], m[None]
        if j.ndim != 3 or j.shape[2] != len(self.job_features) or c.shape != (j.shape[0],
                len(self.cluster_features)) or m.shape != j.shape[:2]:
            raise ValueError(
                f"expected jobs [B, K, {len(self.job_features)}], cluster "
                f"[B, {len(self.cluster_features)}], mask [B, K] (or without B); got "
                f"{np.shape(jobs)}, {np.shape(cluster)}, {np.shape(mask)}")
        if self.backend == "onnx":
            out = self._model.run(None, {"jobs": j, "cluster": c, "mask": m})[0]
        else:
            import torch

            with torch.inference_mode():
                out = self._model(torch.from_numpy(j), torch.from_numpy(c),
                                  torch.from_numpy(m)).numpy()
        return out[0] if single else out  # type: ignore[no-any-return]

    def choose(self, jobs: npt.ArrayLike, cluster: npt.ArrayLike, mask: npt.ArrayLike) -> int:
        """The slot with the best score (one observation, unbatched)."""
        return int(np.argmax(self.scores(jobs, cluster, mask)))

    def scorer_state_dict(self) -> dict[str, Any]:
        """The weights of the :class:`~hpcpolicy.rl.networks.JobScorer` inside (copies), for
        training on from them (TorchScript backend only).

        Raises:
            ArtifactError: The policy was opened with onnxruntime.
        """
        if self.backend != "torchscript":
            raise ArtifactError(f"{self.path}: weights are read from TorchScript; open the "
                                "policy with backend='torchscript'")
        return {name.removeprefix("scorer."): value.detach().clone()
                for name, value in self._model.state_dict().items()}

    def check_features(self, job_features: tuple[str, ...],
                       cluster_features: tuple[str, ...]) -> None:
        """Check that an environment builds the inputs this policy was trained on.

        Raises:
            ArtifactError: The feature lists differ; the message shows both.
        """
        for what, mine, theirs in (("job", self.job_features, job_features),
                                   ("cluster", self.cluster_features, cluster_features)):
            if tuple(theirs) != mine:
                raise ArtifactError(f"{self.path}: the policy was trained on {what} features "
                                    f"{list(mine)}, the environment gives {list(theirs)}; "
                                    "retrain the policy or use a matching hpcpolicy version")


def _resolve(path: Path) -> tuple[Path, str | None]:
    """The policy directory for ``path`` and the backend its file name implies."""
    if path.is_dir():
        return path, None
    name = path.name
    if name == MANIFEST_FILE:
        return path.parent, None
    if name.endswith(".onnx"):
        return path.parent, "onnx"
    if name.endswith(".torchscript.pt"):
        return path.parent, "torchscript"
    hint = (" (a .pt/.pth file is a training checkpoint, used only by `hpcpolicy train --resume`"
            "; export its policy directory instead)" if path.suffix in (".pt", ".pth") else "")
    raise ArtifactError(f"{path}: unsupported policy file{hint}; supported: "
                        f"{'; '.join(_SUPPORTED)}")


def _check_version(manifest: dict[str, Any], where: Path) -> bool:
    """Refuse another major manifest version; warn on a newer minor or another package.

    Returns:
        Whether the manifest is of a newer minor version (unknown fields allowed).
    """
    version = str(manifest.get("manifest_version", ""))
    mine = MANIFEST_VERSION.split(".")
    theirs = version.split(".")
    if len(theirs) != 2 or theirs[0] != mine[0]:
        raise ArtifactError(f"{where}: manifest version {version!r} cannot be read by hpcpolicy "
                            f"{__version__} (reads {mine[0]}.x); re-export the policy with this "
                            "version or install the one that wrote it")
    newer = theirs[1].isdigit() and int(theirs[1]) > int(mine[1])
    if newer:
        warnings.warn(f"{where}: manifest version {version} is newer than {MANIFEST_VERSION}; "
                      "fields this version does not know are ignored", stacklevel=3)
    written_by = manifest.get("package", {}).get("version")
    if written_by != __version__:
        warnings.warn(f"{where}: policy written by hpcpolicy {written_by}, loaded by "
                      f"{__version__}", stacklevel=3)
    return newer


def _open_model(directory: Path, manifest: dict[str, Any], backend: str) -> tuple[str, Any]:
    """Check the model file's hash and open it with the chosen (or first available) backend."""
    if backend == "auto":
        try:
            import onnxruntime  # noqa: F401
            backend = "onnx"
        except ImportError:
            backend = "torchscript"
    entry = manifest["files"][backend]
    file = directory / entry["path"]
    if not file.is_file():
        raise ArtifactError(f"{file}: missing; the policy directory is incomplete, export it again")
    if file_sha256(file) != entry["sha256"]:
        raise ArtifactError(f"{file}: SHA-256 differs from {MANIFEST_FILE}; the file was changed "
                            "or only partly copied, export or copy the policy directory again")
    try:
        if backend == "onnx":
            import onnxruntime as ort

            options = ort.SessionOptions()
            options.intra_op_num_threads = 1
            options.inter_op_num_threads = 1
            return backend, ort.InferenceSession(str(file), options,
                                                 providers=["CPUExecutionProvider"])
        import torch

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            module = torch.jit.load(str(file), map_location="cpu")  # type: ignore[no-untyped-call]
            return backend, module.eval()
    except ImportError as exc:
        runtime = "onnxruntime" if backend == "onnx" else "torch"
        raise ArtifactError(f"loading {file} needs {runtime}; install it with "
                            "`pip install 'hpcpolicy[rl]'`") from exc


def load_policy(path: str | os.PathLike[str], backend: str = "auto") -> LoadedPolicy:
    """Open a policy artifact for scoring, without training code and without pickle.

    Args:
        path: The policy directory, its ``manifest.json``, or one of its model files
            (which also selects the backend).
        backend: ``auto`` (onnxruntime if installed, else TorchScript), ``onnx`` or
            ``torchscript``.

    Returns:
        A :class:`LoadedPolicy`.

    Raises:
        ArtifactError: Unsupported file (the message lists the supported ones), missing or
            invalid manifest, another major manifest version, a model file whose hash differs,
            or a missing runtime.

    Example:
        >>> import tempfile
        >>> from hpcpolicy.rl.networks import ActorCritic
        >>> d = export_policy(ActorCritic(7, 7), tempfile.mkdtemp() + "/p", k=4, metrics={},
        ...                   config={"algo": "ppo", "seed": 1})
        >>> policy = load_policy(d)
        >>> policy.scores(np.zeros((4, 7)), np.zeros(7), [1, 1, 0, 0])[2:].tolist()
        [-inf, -inf]
    """
    if backend not in _BACKENDS:
        raise ArtifactError(f"unknown backend {backend!r}; valid: {', '.join(_BACKENDS)}")
    path = Path(path)
    if not path.exists():
        raise ArtifactError(f"{path}: no such policy file or directory")
    directory, implied = _resolve(path)
    manifest_path = directory / MANIFEST_FILE
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ArtifactError(f"{directory}: no {MANIFEST_FILE}; a policy directory holds "
                            f"{MANIFEST_FILE}, {ONNX_FILE} and {TORCHSCRIPT_FILE}") from None
    except json.JSONDecodeError as exc:
        raise ArtifactError(f"{manifest_path}: not valid JSON ({exc})") from exc
    if not isinstance(manifest, dict):
        raise ArtifactError(f"{manifest_path}: expected a JSON object")
    _validate(manifest, manifest_path, allow_unknown=_check_version(manifest, manifest_path))
    if implied is not None and backend not in ("auto", implied):
        raise ArtifactError(f"{path} is a {implied} file but backend={backend!r} was asked for")
    chosen, model = _open_model(directory, manifest, implied or backend)
    return LoadedPolicy(directory, manifest, chosen, model)


def _manifest_file(path: Path) -> Path:
    return path if path.name == MANIFEST_FILE else path / MANIFEST_FILE


def manifest_format(path: str | os.PathLike[str]) -> str | None:
    """The ``format`` of the manifest of a policy directory (or of that ``manifest.json``),
    None when there is none to read: how a caller tells the kinds of artifact apart (a
    single scorer's ``hpcpolicy.policy``, others') before opening one.

    Example:
        >>> manifest_format("no/such/policy") is None
        True
    """
    try:
        text = _manifest_file(Path(path)).read_text(encoding="utf-8")
        fmt = json.loads(text).get("format")
    except (OSError, ValueError, AttributeError):
        return None
    return fmt if isinstance(fmt, str) else None


def read_manifest(path: str | os.PathLike[str], fmt: str,
                  hint: str) -> tuple[Path, dict[str, Any]]:
    """The directory and manifest of an artifact of format ``fmt`` whose major version this
    code reads: the top-level check of artifact kinds that bundle other files than one scorer
    (their scorers load with :func:`load_policy`).

    Args:
        path: The artifact directory, or its ``manifest.json``.
        fmt: The format its manifest must name.
        hint: How to make such an artifact; ends the error message.

    Raises:
        ArtifactError: No manifest of that format, or another major manifest version.
    """
    file = _manifest_file(Path(path))
    if manifest_format(file) != fmt:
        raise ArtifactError(f"{path}: not a {fmt} artifact (a directory whose {MANIFEST_FILE} "
                            f"has format {fmt!r}); {hint}")
    manifest: dict[str, Any] = json.loads(file.read_text(encoding="utf-8"))
    version = str(manifest.get("manifest_version", ""))
    major = MANIFEST_VERSION.split(".")[0]
    if version.split(".")[0] != major:
        raise ArtifactError(f"{file}: manifest version {version!r} cannot be read by hpcpolicy "
                            f"{__version__} (reads {major}.x); export the policy again")
    return file.parent, manifest
