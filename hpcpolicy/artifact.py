"""The policy artifact contract: what a policy directory holds and how it is read.

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

Other kinds of artifact (the two-agent scheduler, the GPU-type chooser) name another
``format`` in their manifest, each with its schema (:data:`FORMATS`); they share this
module's version rule, schema check and model opening (:func:`read_manifest`,
:func:`open_model`). Writers live with their training code (:mod:`hpcpolicy.rl.export`),
readers that turn an artifact into a policy in :mod:`hpcpolicy.deploy`.

:func:`load_policy` never unpickles anything: it reads JSON, checks it against the schema and
the version, checks the file hashes, and opens the model with onnxruntime (preferred) or
``torch.jit.load``. It imports neither hpcpolicy's training code nor torch unless the
TorchScript backend is chosen. A manifest of a newer minor version may carry fields this
version does not know: they are ignored, with a warning.
"""

from __future__ import annotations

import json
import os
import subprocess
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from hpcpolicy.atomic import file_sha256
from hpcpolicy.errors import ArtifactError
from hpcpolicy.version import __version__

__all__ = [
    "FORMATS",
    "GPU_TYPE_FORMAT",
    "MANIFEST_FILE",
    "MANIFEST_VERSION",
    "MARL_FORMAT",
    "ONNX_FILE",
    "ONNX_OPSET",
    "POLICY_FORMAT",
    "TORCHSCRIPT_FILE",
    "LoadedPolicy",
    "check_backend",
    "git_commit",
    "load_policy",
    "manifest_format",
    "member",
    "open_model",
    "read_manifest",
    "validate_manifest",
]

MANIFEST_VERSION = "1.0"
"""Version of the manifest contract this code writes and reads (MAJOR.MINOR)."""

MANIFEST_FILE = "manifest.json"
ONNX_FILE = "policy.onnx"
TORCHSCRIPT_FILE = "policy.torchscript.pt"
ONNX_OPSET = 17

POLICY_FORMAT = "hpcpolicy.policy"
"""One job scorer (PPO, DD-PPO, offline RL): this module's :func:`load_policy`."""
MARL_FORMAT = "hpcpolicy.marl"
"""The two-agent scheduler: a selector and an allocator, each a ``hpcpolicy.policy``."""
GPU_TYPE_FORMAT = "hpcpolicy.gpu-type-policy"
"""The GPU-type chooser: one Q-network over the GPU types."""
FORMATS = {POLICY_FORMAT: "policy_manifest", MARL_FORMAT: "marl_manifest",
           GPU_TYPE_FORMAT: "gpu_type_policy_manifest"}
"""Each manifest ``format`` and the schema (``schemas/NAME.schema.json``) it is checked with."""

_SUPPORTED = (f"a policy directory with {MANIFEST_FILE}", MANIFEST_FILE, f"*.onnx ({ONNX_FILE})",
              f"*.torchscript.pt ({TORCHSCRIPT_FILE})")
_BACKENDS = ("auto", "onnx", "torchscript")


def git_commit() -> str | None:
    """Commit of the source tree hpcpolicy runs from, or None outside a git checkout."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).parent,
                             capture_output=True, text=True, timeout=5, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def validate_manifest(manifest: dict[str, Any], where: Path, fmt: str,
                      allow_unknown: bool = False) -> None:
    """Check ``manifest`` against the schema of artifact format ``fmt`` (:data:`FORMATS`).

    Args:
        manifest: The parsed manifest.
        where: Its file, named in the error.
        fmt: The format it must have.
        allow_unknown: Tolerate fields the schema does not name (a newer minor version).

    Raises:
        ArtifactError: jsonschema is missing, or the manifest breaks the schema (first error).
    """
    try:
        import jsonschema
    except ImportError as exc:
        raise ArtifactError("checking a policy manifest needs jsonschema; install it with "
                            "`pip install 'hpcpolicy[rl]'`") from exc
    from hpcpolicy.schemas import load

    schema = FORMATS[fmt]
    errors = jsonschema.Draft202012Validator(load(schema)).iter_errors(manifest)
    error = jsonschema.exceptions.best_match(
        e for e in errors if not (allow_unknown and e.validator == "additionalProperties"))
    if error is not None:
        at = "/".join(str(p) for p in error.absolute_path) or "(top level)"
        raise ArtifactError(f"{where}: manifest does not match {schema}.schema.json at "
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
        slot_order: What filled the slots in training: ``oldest`` or a prior heuristic.
    """

    def __init__(self, path: Path, manifest: dict[str, Any], backend: str, model: Any) -> None:
        self.path, self.manifest, self.backend, self._model = path, manifest, backend, model
        obs = manifest["observation"]
        self.k: int = obs["k"]
        self.slot_order: str = obs.get("slot_order", "oldest")
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
    package = manifest.get("package")  # checked by the schema after this
    written_by = package.get("version") if isinstance(package, dict) else None
    if written_by != __version__:
        warnings.warn(f"{where}: policy written by hpcpolicy {written_by}, loaded by "
                      f"{__version__}", stacklevel=3)
    return newer


def open_model(directory: Path, manifest: dict[str, Any], backend: str,
               inputs: tuple[str, ...]) -> tuple[str, Any]:
    """Check a model file's hash, open it with the chosen (or first available) backend, and
    check that it takes the inputs its format feeds it.

    Args:
        directory: The artifact directory.
        manifest: Its validated manifest; ``files`` names a file per backend.
        backend: ``auto`` (onnxruntime if installed, else TorchScript), ``onnx`` or
            ``torchscript``.
        inputs: The names of the model's inputs, in order.

    Returns:
        The backend used, and an onnxruntime session or a TorchScript module.

    Raises:
        ArtifactError: The path leads outside ``directory``, the file is missing, its hash
            differs, the runtime is missing, the runtime cannot open the file, or the model
            takes other inputs.
    """
    if backend == "auto":
        try:
            import onnxruntime  # noqa: F401
            backend = "onnx"
        except ImportError:
            backend = "torchscript"
    entry = manifest["files"][backend]
    file = member(directory, entry["path"], f"files.{backend}.path")
    if not file.is_file():
        raise ArtifactError(f"{file}: missing; the policy directory is incomplete, export it again")
    if file_sha256(file) != entry["sha256"]:
        raise ArtifactError(f"{file}: SHA-256 differs from {MANIFEST_FILE}; the file was changed "
                            "or only partly copied, export or copy the policy directory again")
    kind = "ONNX" if backend == "onnx" else "TorchScript"
    try:
        if backend == "onnx":
            import onnxruntime as ort

            options = ort.SessionOptions()
            options.intra_op_num_threads = 1
            options.inter_op_num_threads = 1
            model: Any = ort.InferenceSession(str(file), options,
                                              providers=["CPUExecutionProvider"])
            takes = [i.name for i in model.get_inputs()]
        else:
            import torch

            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                model = torch.jit.load(str(file), map_location="cpu").eval()  # type: ignore[no-untyped-call]
            takes = [a.name for a in model.forward.schema.arguments][1:]  # after self
    except ImportError as exc:
        runtime = "onnxruntime" if backend == "onnx" else "torch"
        raise ArtifactError(f"loading {file} needs {runtime}; install it with "
                            "`pip install 'hpcpolicy[rl]'`") from exc
    except Exception as exc:  # the runtime's own parse errors (InvalidProtobuf, zip reader)
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ArtifactError(f"{file}: cannot be opened as {kind} ({reason[:200]}); its hash "
                            f"matches {MANIFEST_FILE}, so it was written broken: export the "
                            "policy again") from exc
    if tuple(takes) != inputs:
        raise ArtifactError(f"{file}: the {kind} model takes inputs {takes}, this kind of policy "
                            f"feeds it {list(inputs)}; export the policy again")
    return backend, model


def member(directory: Path, name: str, field: str) -> Path:
    """``directory / name`` for a path a manifest names, refused unless it stays inside
    ``directory``: no absolute path, no ``..``, no symbolic link that leads out.

    Args:
        directory: The artifact directory.
        name: The path as the manifest gives it.
        field: Where the manifest gives it (``files.onnx.path``), for the message.

    Raises:
        ArtifactError: The path leads outside ``directory``.

    Example:
        >>> member(Path("runs/p"), "policy.onnx", "files.onnx.path").as_posix()
        'runs/p/policy.onnx'
    """
    path = directory / name
    try:
        inside = not Path(name).is_absolute() and ".." not in Path(name).parts and \
            path.resolve().is_relative_to(directory.resolve())
    except (OSError, ValueError):  # a NUL byte, a link loop
        inside = False
    if not inside:
        raise ArtifactError(f"{directory / MANIFEST_FILE}: {field} {name!r} leads outside the "
                            "policy directory; a manifest names files inside its own folder "
                            "(export the policy again, or copy the whole folder)")
    return path


def check_backend(backend: str) -> None:
    """Refuse a backend :func:`open_model` does not know (the message lists them)."""
    if backend not in _BACKENDS:
        raise ArtifactError(f"unknown backend {backend!r}; valid: {', '.join(_BACKENDS)}")


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
        >>> from hpcpolicy.rl.export import export_policy
        >>> from hpcpolicy.rl.networks import ActorCritic
        >>> d = export_policy(ActorCritic(7, 7), tempfile.mkdtemp() + "/p", k=4, metrics={},
        ...                   config={"algo": "ppo", "seed": 1})
        >>> policy = load_policy(d)
        >>> policy.scores(np.zeros((4, 7)), np.zeros(7), [1, 1, 0, 0])[2:].tolist()
        [-inf, -inf]
    """
    check_backend(backend)
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
    validate_manifest(manifest, manifest_path, POLICY_FORMAT,
                      allow_unknown=_check_version(manifest, manifest_path))
    if implied is not None and backend not in ("auto", implied):
        raise ArtifactError(f"{path} is a {implied} file but backend={backend!r} was asked for")
    chosen, model = open_model(directory, manifest, implied or backend,
                               tuple(manifest["observation"]["inputs"]))
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
    """The directory and manifest of an artifact of format ``fmt``, checked as
    :func:`load_policy` checks its own: the version rule and the format's schema. For the
    kinds of artifact other than one job scorer; their model files open with
    :func:`open_model`, or their scorers with :func:`load_policy`.

    Args:
        path: The artifact directory, or its ``manifest.json``.
        fmt: The format its manifest must name (a key of :data:`FORMATS`).
        hint: How to make such an artifact; ends the error message.

    Raises:
        ArtifactError: No manifest of that format, another major manifest version, or a
            manifest that breaks the format's schema.
    """
    file = _manifest_file(Path(path))
    if manifest_format(file) != fmt:
        raise ArtifactError(f"{path}: not a {fmt} artifact (a directory whose {MANIFEST_FILE} "
                            f"has format {fmt!r}); {hint}")
    manifest: dict[str, Any] = json.loads(file.read_text(encoding="utf-8"))
    validate_manifest(manifest, file, fmt, allow_unknown=_check_version(manifest, file))
    return file.parent, manifest
