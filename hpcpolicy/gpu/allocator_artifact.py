"""The learned allocator as an artifact: an ONNX scorer and a JSON manifest, no pickles.

A folder holds ``allocator.onnx``, a graph ``scores[N] = features[N, F] @ weights[F]`` (float32;
the features of :func:`hpcpolicy.gpu.allocators.features`, one row per node that fits), and
``manifest.json``: ``format`` (``hpcpolicy-gpu-allocator``), ``version``, the feature names,
the SHA-256 of the model file, and how it was trained. :func:`load_allocator` checks the
manifest (read with a size and nesting cap), the hash and the graph's shape, and returns the
weights that the compiled replay uses; :func:`onnx_scorer` opens the same bytes with
onnxruntime for any other consumer.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import onnx
from onnx import TensorProto, helper, numpy_helper

from hpcpolicy.atomic import atomic_path
from hpcpolicy.docload import read_json
from hpcpolicy.errors import ArtifactError
from hpcpolicy.gpu.allocators import N_FEATURES

__all__ = ["FEATURE_NAMES", "FORMAT", "export_allocator", "load_allocator", "onnx_scorer"]

FORMAT = "hpcpolicy-gpu-allocator"
VERSION = 1
MODEL = "allocator.onnx"
MANIFEST = "manifest.json"
FEATURE_NAMES = ("fgd_score", "frag_decrease_gpus", "cpu_left_share", "mem_left_share",
                 "gpu_left_share", "node_unused", "bestfit_remainder", "node_position")
"""The features, in the order of :func:`hpcpolicy.gpu.allocators.features`."""


def _graph(weights: tuple[float, ...]) -> bytes:
    w = numpy_helper.from_array(np.asarray(weights, dtype=np.float32), name="weights")
    node = helper.make_node("MatMul", ["features", "weights"], ["scores"])
    graph = helper.make_graph(
        [node], "gpu_allocator",
        [helper.make_tensor_value_info("features", TensorProto.FLOAT, ["nodes", N_FEATURES])],
        [helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["nodes"])],
        initializer=[w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return bytes(model.SerializeToString())


def export_allocator(weights: tuple[float, ...], directory: Path,
                     trained: Mapping[str, Any]) -> Path:
    """Write the allocator folder; returns the manifest's path.

    Args:
        weights: one weight per feature.
        directory: created if absent; its two files are replaced.
        trained: how the weights were found (seeds, returns, config), kept in the manifest.

    Raises:
        ArtifactError: not one weight per feature.
    """
    if len(weights) != N_FEATURES:
        raise ArtifactError(f"{directory}: {len(weights)} weights for {N_FEATURES} features; "
                            "give one weight per feature")
    data = _graph(weights)
    directory.mkdir(parents=True, exist_ok=True)
    manifest = {"format": FORMAT, "version": VERSION, "features": list(FEATURE_NAMES),
                "model": MODEL, "model_sha256": hashlib.sha256(data).hexdigest(),
                "weights": list(weights), "trained": dict(trained)}
    with atomic_path(directory / MODEL) as tmp:
        tmp.write_bytes(data)
    with atomic_path(directory / MANIFEST) as tmp:
        tmp.write_text(json.dumps(manifest, indent=2) + "\n")
    return directory / MANIFEST


def _model_bytes(directory: Path) -> tuple[dict[str, Any], bytes]:
    manifest = read_json(directory / MANIFEST, "allocator manifest", ArtifactError)
    where = directory / MANIFEST
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise ArtifactError(f"{where}: not a GPU allocator manifest (format must be "
                            f"{FORMAT!r}); export one with export_allocator")
    if manifest.get("version") != VERSION or manifest.get("features") != list(FEATURE_NAMES):
        raise ArtifactError(f"{where}: version {manifest.get('version')!r} or its feature list "
                            f"differs from this hpcpolicy's ({VERSION}); export it again")
    try:
        data = (directory / MODEL).read_bytes()
    except OSError as exc:
        raise ArtifactError(f"{directory / MODEL}: cannot read ({exc.strerror}); export the "
                            "allocator again") from None
    if hashlib.sha256(data).hexdigest() != manifest.get("model_sha256"):
        raise ArtifactError(f"{directory / MODEL}: SHA-256 differs from the manifest's; the "
                            "file was changed after export, so export it again")
    return manifest, data


def load_allocator(directory: Path) -> tuple[float, ...]:
    """The weights of an exported allocator (checked: manifest, hash, graph).

    Raises:
        ArtifactError: a missing or changed file, another format or version, or a graph that
            is not one weight per feature.
    """
    _, data = _model_bytes(directory)
    graph = onnx.load_from_string(data).graph
    inits = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    weights = inits.get("weights")
    if (weights is None or weights.shape != (N_FEATURES,) or len(graph.node) != 1
            or graph.node[0].op_type != "MatMul"):
        raise ArtifactError(f"{directory / MODEL}: not a linear scorer of {N_FEATURES} "
                            "features; export the allocator again")
    return tuple(float(x) for x in weights)


def onnx_scorer(directory: Path) -> Callable[[npt.NDArray[np.float32]], npt.NDArray[np.float32]]:
    """The exported scorer run by onnxruntime: ``features [N, F]`` float32 to ``scores [N]``."""
    import onnxruntime as ort

    _, data = _model_bytes(directory)
    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])

    def score(features: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        out: npt.NDArray[np.float32] = session.run(["scores"], {"features": features})[0]
        return out

    return score
