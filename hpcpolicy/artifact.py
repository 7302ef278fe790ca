"""The policy artifact contract: what a policy directory holds and how it is read.

A policy directory (``runs/<name>/policy/``) holds:

* ``policy.onnx``: the scorer as an ONNX graph, the only model file hpcpolicy runs;
* ``policy.torchscript.pt``: the same scorer as TorchScript, an export for other tools;
* ``manifest.json``: the contract in ``schemas/policy_manifest.schema.json``: input features
  in order with their normalisation, K, reward, training data hash, config, metrics, package
  version, git commit and the SHA-256 of both model files.

Both files compute ``scores = f(jobs [B, K, Fj], cluster [B, Fc], mask [B, K] bool)`` with
``scores [B, K]`` float32, higher is better, ``-inf`` on invalid slots; B and K may differ from
training (the same MLP scores every slot). Training checkpoints (``checkpoints/last.pt``) are a
different kind of file, for resuming only, and :func:`load_policy` refuses them.

A policy folder is data, never code. Opening a TorchScript file runs code it carries (its
``__setstate__``, then its ``forward``), and a folder that comes from elsewhere may carry any,
so no command loads one: :func:`load_policy` refuses ``*.torchscript.pt`` and every reader
opens the ONNX graph with onnxruntime, which runs only the operators it knows. Weights to train
on from (``train --init-from``) are read from the same graph's tensors
(:mod:`hpcpolicy.ppo.warm_start`). The model file is read once; the bytes whose SHA-256 matched
the manifest are the bytes onnxruntime opens; a graph that keeps tensors in other files
(ONNX "external data", which the manifest's hashes do not cover) is refused; its inputs'
ranks and feature counts, and the shape of what it returns, are checked.

Other kinds of artifact (the two-agent scheduler, the GPU-type chooser) name another
``format`` in their manifest, each with its schema (:data:`FORMATS`); they share this
module's version rule, schema check and model opening (:func:`read_manifest`,
:func:`open_model`). Writers live with their training code (:mod:`hpcpolicy.learn.export`),
readers that turn an artifact into a policy in :mod:`hpcpolicy.deploy`.

:func:`load_policy` never unpickles anything: it reads JSON (bounded: :mod:`hpcpolicy.docload`),
checks it against the schema and the version, checks the file hashes, and opens the model with
onnxruntime. It imports neither hpcpolicy's training code nor torch. A manifest of a newer
minor version may carry fields this version does not know: they are ignored, and one line on
the ``hpcpolicy.artifact`` logger says so.
"""

from __future__ import annotations

import hashlib
import logging
import os
import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from hpcpolicy.docload import read_json
from hpcpolicy.errors import ArtifactError
from hpcpolicy.version import __version__

__all__ = [
    "FORMATS",
    "GPU_TYPE_FORMAT",
    "INSPECTOR_FORMAT",
    "MANIFEST_FILE",
    "MANIFEST_VERSION",
    "MARL_FORMAT",
    "ONNX_FILE",
    "ONNX_OPSET",
    "POLICY_FORMAT",
    "TORCHSCRIPT_FILE",
    "LoadedPolicy",
    "OnnxModel",
    "check_schema",
    "git_commit",
    "load_policy",
    "manifest_format",
    "member",
    "open_model",
    "read_manifest",
    "read_model",
    "validate_manifest",
]

_log = logging.getLogger(__name__)

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
INSPECTOR_FORMAT = "hpcpolicy.inspector"
"""A heuristic under an inspector (:mod:`hpcpolicy.inspector`): a scorer of the heuristic's
proposals."""
FORMATS = {POLICY_FORMAT: "policy_manifest", MARL_FORMAT: "marl_manifest",
           GPU_TYPE_FORMAT: "gpu_type_policy_manifest", INSPECTOR_FORMAT: "inspector_manifest"}
"""Each manifest ``format`` and the schema (``schemas/NAME.schema.json``) it is checked with."""

_SUPPORTED = (f"a policy directory with {MANIFEST_FILE}", MANIFEST_FILE, f"*.onnx ({ONNX_FILE})")
MAX_MODEL_BYTES = 1 << 30
"""Largest model file read (1 GiB): a job scorer's is a few kilobytes."""


def git_commit() -> str | None:
    """Commit of the source tree hpcpolicy runs from, or None outside a git checkout."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).parent,
                             capture_output=True, text=True, timeout=5, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def check_schema(document: dict[str, Any], schema: str, where: Path, what: str,
                 allow_unknown: bool = False, fix: str = "") -> None:
    """Check ``document`` against ``schemas/<schema>.schema.json``.

    Args:
        document: The parsed document.
        schema: The schema's name.
        where: Its file, named in the error.
        what: What it is ("manifest", "model card"), for the message.
        allow_unknown: Tolerate fields the schema does not name (a newer minor version).
        fix: How to make a valid one, ending the message.

    Raises:
        ArtifactError: jsonschema is missing, or the document breaks the schema (first error).
    """
    try:
        import jsonschema
    except ImportError as exc:
        raise ArtifactError(f"checking a {what} needs jsonschema; install it with "
                            "`pip install 'hpcpolicy[rl]'`") from exc
    from hpcpolicy.schemas import load

    errors = jsonschema.Draft202012Validator(load(schema)).iter_errors(document)
    error = jsonschema.exceptions.best_match(
        e for e in errors if not (allow_unknown and e.validator == "additionalProperties"))
    if error is not None:
        at = "/".join(str(p) for p in error.absolute_path) or "(top level)"
        raise ArtifactError(f"{where}: {what} does not match {schema}.schema.json at "
                            f"{at}: {error.message[:200]}" + (f"; {fix}" if fix else ""))


def validate_manifest(manifest: dict[str, Any], where: Path, fmt: str,
                      allow_unknown: bool = False) -> None:
    """Check ``manifest`` against the schema of artifact format ``fmt`` (:data:`FORMATS`).

    Raises:
        ArtifactError: What :func:`check_schema` raises.
    """
    check_schema(manifest, FORMATS[fmt], where, "manifest", allow_unknown,
                 fix="export the policy again, or copy its whole folder again")


class OnnxModel:
    """An ONNX graph opened by onnxruntime (:func:`open_model`), run with one-line errors.

    Attributes:
        file: The model file.
    """

    def __init__(self, file: Path, session: Any) -> None:
        self.file, self._session = file, session

    def run(self, feeds: Mapping[str, npt.NDArray[Any]],
            shape: tuple[int, ...]) -> npt.NDArray[np.float32]:
        """The first output for ``feeds``, which must have ``shape``.

        Raises:
            ArtifactError: onnxruntime refused to run the graph on these inputs, or the graph
                returned another shape.
        """
        try:
            out = np.asarray(self._session.run(None, dict(feeds))[0], dtype=np.float32)
        except Exception as exc:  # onnxruntime's own errors (Fail, InvalidArgument...)
            raise ArtifactError(f"{self.file}: onnxruntime cannot run the model on inputs of "
                                f"shapes {[list(v.shape) for v in feeds.values()]} "
                                f"({_first_line(exc)}); export the policy again") from exc
        if out.shape != shape:
            raise ArtifactError(f"{self.file}: the model returned shape {list(out.shape)}, "
                                f"this kind of policy needs {list(shape)}; export the policy "
                                "again")
        return out


class LoadedPolicy:
    """A deployable policy opened by :func:`load_policy`.

    Attributes:
        path: The policy directory.
        manifest: The parsed, validated manifest.
        k: Slots the policy was trained with (it scores any number).
        job_features: Names of the job features, in input order.
        cluster_features: Names of the cluster features, in input order.
        slot_order: What filled the slots in training: ``oldest`` or a prior heuristic.
    """

    def __init__(self, path: Path, manifest: dict[str, Any], model: OnnxModel) -> None:
        self.path, self.manifest, self._model = path, manifest, model
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
            ArtifactError: The model cannot run on them, or returns another shape.
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
        out = self._model.run({"jobs": j, "cluster": c, "mask": m}, j.shape[:2])
        return out[0] if single else out

    def choose(self, jobs: npt.ArrayLike, cluster: npt.ArrayLike, mask: npt.ArrayLike) -> int:
        """The slot with the best score (one observation, unbatched)."""
        return int(np.argmax(self.scores(jobs, cluster, mask)))

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


def _first_line(exc: BaseException) -> str:
    """The first line of an exception's message (a runtime's can run to pages), cut short."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]


def _resolve(path: Path) -> Path:
    """The policy directory for ``path``."""
    if path.is_dir():
        return path
    name = path.name
    if name == MANIFEST_FILE or name.endswith(".onnx"):
        return path.parent
    if name.endswith(".torchscript.pt"):
        raise ArtifactError(f"{path}: TorchScript is exported for other tools but never loaded "
                            "by hpcpolicy (opening it runs code it carries); give the policy "
                            f"directory, whose {ONNX_FILE} is run with onnxruntime")
    hint = (" (a .pt/.pth file is a training checkpoint, used only by `hpcpolicy train --resume`"
            "; export its policy directory instead)" if path.suffix in (".pt", ".pth") else "")
    raise ArtifactError(f"{path}: unsupported policy file{hint}; supported: "
                        f"{'; '.join(_SUPPORTED)}")


def _check_version(manifest: dict[str, Any], where: Path) -> bool:
    """Refuse another major manifest version; log a line on a newer minor or another package.

    Returns:
        Whether the manifest is of a newer minor version (unknown fields allowed).
    """
    version = str(manifest.get("manifest_version", ""))
    mine = MANIFEST_VERSION.split(".")
    theirs = version.split(".")
    if len(theirs) != 2 or theirs[0] != mine[0]:
        raise ArtifactError(f"{where}: manifest version {version[:40]!r} cannot be read by "
                            f"hpcpolicy {__version__} (reads {mine[0]}.x); re-export the policy "
                            "with this version or install the one that wrote it")
    newer = theirs[1].isdigit() and int(theirs[1]) > int(mine[1])
    if newer:
        _log.warning("%s: manifest version %s is newer than %s; fields this version does not "
                     "know are ignored", where, version, MANIFEST_VERSION)
    package = manifest.get("package")  # checked by the schema after this
    written_by = package.get("version") if isinstance(package, dict) else None
    if written_by != __version__:
        _log.warning("%s: policy written by hpcpolicy %s, loaded by %s", where,
                     str(written_by)[:40], __version__)
    return newer


def _tensors(graph: Any) -> Iterator[Any]:
    """Every tensor an ONNX graph holds: initializers and attribute values, subgraphs too."""
    yield from graph.initializer
    for sparse in graph.sparse_initializer:
        yield from (sparse.values, sparse.indices)
    for node in graph.node:
        for attr in node.attribute:
            if attr.HasField("t"):
                yield attr.t
            yield from attr.tensors
            if attr.HasField("g"):
                yield from _tensors(attr.g)
            for sub in attr.graphs:
                yield from _tensors(sub)


def _check_no_external_data(file: Path, data: bytes) -> None:
    """Refuse a graph that keeps tensors in other files (the manifest hashes only this one)."""
    try:
        import onnx
        from onnx.external_data_helper import ExternalDataInfo, uses_external_data
    except ImportError as exc:
        raise ArtifactError(f"checking {file} needs onnx; install it with "
                            "`pip install 'hpcpolicy[rl]'`") from exc
    try:
        model = onnx.load_model_from_string(data)
    except Exception as exc:  # protobuf's DecodeError, or a graph nested past its limit
        raise ArtifactError(f"{file}: cannot be opened as ONNX ({_first_line(exc)}); its hash "
                            f"matches {MANIFEST_FILE}, so it was written broken: export the "
                            "policy again") from exc
    graphs = [model.graph, *(g for f in model.functions for n in f.node
                             for a in n.attribute for g in (a.g, *a.graphs))]
    for tensor in (t for g in graphs for t in _tensors(g)):
        if uses_external_data(tensor):
            location = ExternalDataInfo(tensor).location
            raise ArtifactError(f"{file}: keeps tensor {tensor.name[:80]!r} in the file "
                                f"{location[:120]!r}, which the hashes of {MANIFEST_FILE} do "
                                "not cover; a policy's weights live inside its .onnx file: "
                                "export the policy again")


def read_model(directory: Path, manifest: dict[str, Any]) -> tuple[Path, bytes]:
    """The ONNX model file a manifest names (``files.onnx``) and its bytes, checked: inside
    ``directory``, of the manifest's SHA-256, and holding all its tensors.

    Raises:
        ArtifactError: The path leads outside ``directory``, the file is missing or too
            large, its hash differs, or it keeps tensors in other files.
    """
    entry = manifest["files"]["onnx"]
    file = member(directory, entry["path"], "files.onnx.path")
    if not file.is_file():
        raise ArtifactError(f"{file}: missing; the policy directory is incomplete, export it again")
    if file.stat().st_size > MAX_MODEL_BYTES:
        raise ArtifactError(f"{file}: larger than {MAX_MODEL_BYTES >> 20} MiB, far more than a "
                            "policy's model; is it the right file? export the policy again")
    data = file.read_bytes()
    if hashlib.sha256(data).hexdigest() != entry["sha256"]:
        raise ArtifactError(f"{file}: SHA-256 differs from {MANIFEST_FILE}; the file was changed "
                            "or only partly copied, export or copy the policy directory again")
    _check_no_external_data(file, data)
    return file, data


def open_model(directory: Path, manifest: dict[str, Any],
               inputs: Mapping[str, tuple[int | None, ...]]) -> OnnxModel:
    """Check a model file (:func:`read_model`), open those very bytes with onnxruntime, and
    check that the graph takes the inputs its format feeds it.

    Args:
        directory: The artifact directory.
        manifest: Its validated manifest; ``files.onnx`` names the model file.
        inputs: The model's inputs in order, each with its shape (None: any size).

    Returns:
        The opened model.

    Raises:
        ArtifactError: What :func:`read_model` raises, onnxruntime is missing or cannot open
            the file, or the graph takes other inputs (names, ranks or feature counts).
    """
    file, data = read_model(directory, manifest)
    try:
        import onnxruntime as ort
    except ImportError as exc:
        raise ArtifactError(f"loading {file} needs onnxruntime; install it with "
                            "`pip install 'hpcpolicy[rl]'`") from exc
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    try:
        session = ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # the runtime's own parse errors (InvalidProtobuf, Fail)
        raise ArtifactError(f"{file}: cannot be opened as ONNX ({_first_line(exc)}); its hash "
                            f"matches {MANIFEST_FILE}, so it was written broken: export the "
                            "policy again") from exc
    takes = [i.name for i in session.get_inputs()]
    if takes != list(inputs):
        raise ArtifactError(f"{file}: the ONNX model takes inputs {takes}, this kind of policy "
                            f"feeds it {list(inputs)}; export the policy again")
    for arg in session.get_inputs():
        want = inputs[arg.name]
        shape = list(arg.shape)
        fixed_differ = len(shape) == len(want) and any(
            isinstance(have, int) and need is not None and have != need
            for have, need in zip(shape, want, strict=True))
        if len(shape) != len(want) or fixed_differ:
            show = ["any" if need is None else need for need in want]
            raise ArtifactError(f"{file}: the ONNX model's input {arg.name!r} has shape "
                                f"{shape}, this policy's manifest feeds it {show}; export the "
                                "policy again")
    return OnnxModel(file, session)


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
        raise ArtifactError(f"{directory / MANIFEST_FILE}: {field} {name[:200]!r} leads outside "
                            "the policy directory; a manifest names files inside its own folder "
                            "(export the policy again, or copy the whole folder)")
    return path


def _read_document(file: Path) -> dict[str, Any]:
    """A manifest's JSON object (bounded in size and depth: :func:`hpcpolicy.docload.read_json`)."""
    doc = read_json(file, "policy manifest", ArtifactError)
    if not isinstance(doc, dict):
        raise ArtifactError(f"{file}: expected a JSON object; is it a policy manifest?")
    return doc


def load_policy(path: str | os.PathLike[str]) -> LoadedPolicy:
    """Open a policy artifact for scoring, without training code and without pickle.

    Args:
        path: The policy directory, its ``manifest.json``, or its ONNX file.

    Returns:
        A :class:`LoadedPolicy`.

    Raises:
        ArtifactError: Unsupported file (the message lists the supported ones; a TorchScript
            file is never loaded), missing or invalid manifest, another major manifest
            version, a model file whose hash differs or that keeps tensors elsewhere, a model
            of other inputs, or a missing runtime.

    Example:
        >>> import tempfile
        >>> from hpcpolicy.learn.export import export_policy
        >>> from hpcpolicy.learn.networks import ActorCritic
        >>> d = export_policy(ActorCritic(7, 7), tempfile.mkdtemp() + "/p", k=4, metrics={},
        ...                   config={"algo": "ppo", "seed": 1})
        >>> policy = load_policy(d)
        >>> policy.scores(np.zeros((4, 7)), np.zeros(7), [1, 1, 0, 0])[2:].tolist()
        [-inf, -inf]
    """
    path = Path(path)
    if not path.exists():
        raise ArtifactError(f"{path}: no such policy file or directory")
    directory = _resolve(path)
    manifest_path = directory / MANIFEST_FILE
    if not manifest_path.is_file():
        raise ArtifactError(f"{directory}: no {MANIFEST_FILE}; a policy directory holds "
                            f"{MANIFEST_FILE}, {ONNX_FILE} and {TORCHSCRIPT_FILE}")
    manifest = _read_document(manifest_path)
    validate_manifest(manifest, manifest_path, POLICY_FORMAT,
                      allow_unknown=_check_version(manifest, manifest_path))
    obs = manifest["observation"]
    model = open_model(directory, manifest, {"jobs": (None, None, len(obs["job_features"])),
                                             "cluster": (None, len(obs["cluster_features"])),
                                             "mask": (None, None)})
    return LoadedPolicy(directory, manifest, model)


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
    file = _manifest_file(Path(path))
    if not file.is_file():
        return None
    try:
        fmt = _read_document(file).get("format")
    except ArtifactError:
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
    manifest = _read_document(file)
    validate_manifest(manifest, file, fmt, allow_unknown=_check_version(manifest, file))
    return file.parent, manifest
