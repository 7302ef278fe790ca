"""GPU sharing as the Alibaba "openb" trace models it: nodes and pods in thousandths of a GPU.

A node has CPU thousandths, memory (MiB), a number of GPUs of one model, and each GPU has
1,000 GPU thousandths ("milli"). A pod asks for CPU thousandths, memory, ``num_gpu`` GPUs of
``gpu_milli`` thousandths each (``num_gpu == 1`` and ``gpu_milli < 1000`` is a GPU-sharing
pod, which takes part of one GPU; otherwise every GPU it takes is whole), and optionally a set
of GPU models it may run on. Nothing is overcommitted: a pod fits a node when its CPU,
memory and GPUs all fit what is left (Weng et al., "Beware of Fragmentation", USENIX ATC 2023,
section 2; the trace's README in ``alibaba/clusterdata`` ``cluster-trace-gpu-v2023``).

:func:`read_nodes` and :func:`read_pods` read the trace's two CSV files into
:class:`SharingNodes` and :class:`SharingPods`, plain NumPy arrays that the compiled
allocators (:mod:`hpcpolicy.gpu.allocators`) work on.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
import polars as pl

from hpcpolicy.errors import InputFormatError
from hpcpolicy.ingest.text_chunks import read_bounded

__all__ = ["GPU_MILLI", "MAX_GPUS", "SharingNodes", "SharingPods", "read_nodes", "read_pod_times",
           "read_pods"]

GPU_MILLI = 1000
"""GPU thousandths in one GPU."""
MAX_GPUS = 8
"""The most GPUs a node holds (the width of the per-GPU arrays)."""

I64 = npt.NDArray[np.int64]
B = npt.NDArray[np.bool_]

_NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
_POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec")


@dataclass(frozen=True)
class SharingNodes:
    """The nodes of a GPU-sharing cluster, one array entry per node.

    Attributes:
        names: node names, as in the node list.
        cpu: CPU thousandths of each node.
        mem: memory of each node, MiB.
        gpus: GPUs of each node (0 to :data:`MAX_GPUS`).
        model: index into ``models`` of each node's GPU model, -1 for a node without GPUs.
        models: the GPU model names, sorted.
    """

    names: tuple[str, ...]
    cpu: I64
    mem: I64
    gpus: I64
    model: I64
    models: tuple[str, ...]

    @property
    def total_gpus(self) -> int:
        """GPUs in the cluster."""
        return int(self.gpus.sum())


@dataclass(frozen=True)
class SharingPods:
    """Pods of a GPU-sharing workload, one array entry per pod.

    Attributes:
        names: pod names, as in the pod list.
        cpu: CPU thousandths asked for.
        mem: memory asked for, MiB.
        num_gpu: GPUs asked for.
        gpu_milli: thousandths of each GPU asked for (0 for a CPU-only pod).
        allowed: ``allowed[i, m]`` is true when pod ``i`` may run on GPU model ``m`` of the
            nodes' ``models`` (all true for a pod without a model constraint).
    """

    names: tuple[str, ...]
    cpu: I64
    mem: I64
    num_gpu: I64
    gpu_milli: I64
    allowed: B

    @property
    def total_milli(self) -> I64:
        """GPU thousandths each pod takes in all (``num_gpu * gpu_milli``)."""
        return self.num_gpu * self.gpu_milli

    def take(self, index: I64) -> SharingPods:
        """The pods at ``index``, in that order (repeats allowed)."""
        return SharingPods(tuple(self.names[i] for i in index), self.cpu[index],
                           self.mem[index], self.num_gpu[index], self.gpu_milli[index],
                           self.allowed[index])


def _frame(path: Path, columns: tuple[str, ...], what: str) -> pl.DataFrame:
    try:
        frame = pl.read_csv(read_bounded(path, f"the {what}"), infer_schema=False)
    except (OSError, pl.exceptions.PolarsError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise InputFormatError(f"{path}: cannot read the {what} ({first}); give the trace's "
                               f"CSV with columns {', '.join(columns)}") from None
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise InputFormatError(f"{path}: column(s) {', '.join(missing)} missing from the "
                               f"{what}; expected {', '.join(columns)}")
    return frame.with_row_index("_line", offset=2)


def _whole(path: Path, frame: pl.DataFrame, column: str, high: int | None = None) -> I64:
    """``column`` as whole numbers in [0, high]; raises naming the first bad line."""
    value = pl.col(column).str.strip_chars().cast(pl.Int64, strict=False)
    bad = value.is_null() | (value < 0)
    if high is not None:
        bad = bad | (value > high)
    hit = frame.filter(bad).head(1)
    if hit.height:
        limit = f" and <= {high}" if high is not None else ""
        raise InputFormatError(f"{path}: line {hit['_line'][0]}: column {column!r} holds "
                               f"{hit[column][0]!r}, not a whole number >= 0{limit}; correct "
                               "that row")
    return frame.select(value).to_series().to_numpy().astype(np.int64)


def _text(frame: pl.DataFrame, column: str) -> list[str]:
    return [s.strip() for s in frame[column].fill_null("").to_list()]


def read_nodes(path: Path, gpu_only: bool = True) -> SharingNodes:
    """The nodes of ``openb_node_list_*.csv``.

    Args:
        path: the node list (columns ``sn, cpu_milli, memory_mib, gpu, model``).
        gpu_only: keep only nodes with GPUs, as the simulator of Weng et al. does
            (its ``openb_node_list_gpu_node.csv`` is this subset).

    Returns:
        The nodes, in file order.

    Raises:
        InputFormatError: the file is unreadable, a column is missing, a count is not a
            whole number, a node has GPUs but no model, or no node is left.
    """
    frame = _frame(path, _NODE_COLUMNS, "node list")
    cpu, mem = _whole(path, frame, "cpu_milli"), _whole(path, frame, "memory_mib")
    gpus = _whole(path, frame, "gpu", MAX_GPUS)
    model_text = _text(frame, "model")
    for i, (count, name) in enumerate(zip(gpus, model_text, strict=True)):
        if count > 0 and not name:
            raise InputFormatError(f"{path}: line {i + 2}: a node with {count} GPUs has no "
                                   "'model'; fill in its GPU model")
    keep = gpus > 0 if gpu_only else np.ones(len(gpus), dtype=bool)
    if not keep.any():
        raise InputFormatError(f"{path}: no node with GPUs; give a node list with GPU nodes")
    models = tuple(sorted({m for m, k in zip(model_text, keep, strict=True) if m and k}))
    index = {m: i for i, m in enumerate(models)}
    model = np.array([index.get(m, -1) for m in model_text], dtype=np.int64)
    names = tuple(n for n, k in zip(_text(frame, "sn"), keep, strict=True) if k)
    return SharingNodes(names, cpu[keep], mem[keep], gpus[keep], model[keep], models)


def read_pods(path: Path, models: tuple[str, ...]) -> SharingPods:
    """The pods of ``openb_pod_list_*.csv``, every row whatever its phase or times.

    Args:
        path: the pod list (columns ``name, cpu_milli, memory_mib, num_gpu, gpu_milli,
            gpu_spec``; ``gpu_spec`` is empty or models joined by ``|``).
        models: the cluster's GPU models (:attr:`SharingNodes.models`).

    Returns:
        The pods, in file order. A ``gpu_milli`` of 0 with GPUs asked for makes a CPU-only
        pod, as in the trace's simulator (it only counts GPUs with a positive share).

    Raises:
        InputFormatError: the file is unreadable, a column is missing, a value is not a
            whole number in range, or a pod shares a GPU across several GPUs.
    """
    frame = _frame(path, _POD_COLUMNS, "pod list")
    cpu, mem = _whole(path, frame, "cpu_milli"), _whole(path, frame, "memory_mib")
    num_gpu = _whole(path, frame, "num_gpu", MAX_GPUS)
    gpu_milli = _whole(path, frame, "gpu_milli", GPU_MILLI)
    split = np.flatnonzero((num_gpu > 1) & (gpu_milli < GPU_MILLI) & (gpu_milli > 0))
    if split.size:
        raise InputFormatError(f"{path}: line {split[0] + 2}: {num_gpu[split[0]]} GPUs of "
                               f"{gpu_milli[split[0]]} thousandths each; a shared GPU is one "
                               "GPU (num_gpu 1), so correct that row")
    num_gpu = np.where(gpu_milli > 0, num_gpu, 0)
    gpu_milli = np.where(num_gpu > 0, gpu_milli, 0)
    allowed = np.ones((len(cpu), len(models)), dtype=bool)
    for i, spec in enumerate(_text(frame, "gpu_spec")):
        wanted = {s for s in spec.split("|") if s}
        if wanted:
            allowed[i] = [m in wanted for m in models]
    return SharingPods(tuple(_text(frame, "name")), cpu, mem, num_gpu, gpu_milli, allowed)


def read_pod_times(path: Path) -> tuple[I64, I64]:
    """Each pod's submit time and run time (seconds), in the pod list's order.

    The submit time is ``creation_time``; the run time is ``deletion_time`` less
    ``scheduled_time`` (less ``creation_time`` for a pod never scheduled, whose log gives no
    other length), at least 1 s. Pods still running at the trace's end have their deletion
    cut at its end (the trace's README), so their run times are lower bounds.

    Raises:
        InputFormatError: a time column missing or not a whole number >= 0.
    """
    frame = _frame(path, ("creation_time", "deletion_time"), "pod list")
    submit = _whole(path, frame, "creation_time")
    end = _whole(path, frame, "deletion_time")
    started = submit.copy()
    if "scheduled_time" in frame.columns:
        text = frame["scheduled_time"].fill_null("").str.strip_chars()
        given = (text != "").to_numpy()
        if given.any():
            started[given] = _whole(path, frame.filter(pl.Series(given)), "scheduled_time")
    return submit, np.maximum(end - started, 1)
