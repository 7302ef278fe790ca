"""The observation contract between the scheduling environment and the learned policy.

One decision picks which waiting job becomes the queue head. The environment shows the policy a
window of ``K`` job slots (default :data:`DEFAULT_K` = 128) and a few cluster-wide numbers:

* ``obs["jobs"]``: ``float32 [K, len(JOB_FEATURES)]``, one row per slot, normalised to [0, 1];
* ``obs["cluster"]``: ``float32 [len(CLUSTER_FEATURES)]``, normalised to [0, 1];
* ``obs["mask"]``: ``int8 [K]`` (``MultiBinary(K)``), 1 where the slot holds a job the policy
  may pick; the same array is in ``info["action_mask"]`` so that
  ``env.action_space.sample(mask=info["action_mask"])`` draws a legal action.

The action space is ``Discrete(K)``: the slot index of the chosen job.

What the environment must guarantee:

* Slots are filled with waiting jobs in submit order (oldest first; the environment documents
  which jobs it shows when more than ``K`` wait). Empty slots are all-zero rows with mask 0.
* Every observation on which an action is asked for (after ``reset`` and after a non-final
  ``step``) has at least one valid slot. The final observation of an episode may have none.
* ``step`` accepts any action of ``Discrete(K)``, as Gymnasium requires; an empty slot is a
  wasted decision with a documented penalty. The trainer never sends one.
* Features describe only what the scheduler knew at submit time, plus the job's waiting time
  and whether it fits on the free resources now; never the actual run time.
* ``reset(seed=s)`` followed by the same actions gives the same observations and rewards: the
  trainer restores environments after a resume by replaying their actions.

Every feature is declared once below, with its unit and normalisation. The environment (and
the adapter that runs a learned policy inside the simulator) build observations with
:func:`encode_observation` from raw values keyed by feature name, so both produce the same
columns in the same order; the policy manifest records :func:`feature_spec`, so a scheduler
outside hpcpolicy can build the same inputs from raw values.

Example:
    >>> import numpy as np
    >>> raw = np.array([[3600.0, 7200.0, 0.5, 0.25, 0.0, 0.0, 1.0]])
    >>> normalise(raw, JOB_FEATURES).astype(float).round(3).tolist()
    [[0.599, 0.601, 0.5, 0.25, 0.0, 0.0, 1.0]]
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    import gymnasium as gym

__all__ = [
    "CLUSTER_FEATURES",
    "DEFAULT_K",
    "JOB_FEATURES",
    "OBS_KEYS",
    "Feature",
    "action_space",
    "encode_observation",
    "feature_spec",
    "normalise",
    "observation_space",
]

DEFAULT_K = 128
"""Number of job slots the policy sees at each decision."""

OBS_KEYS = ("jobs", "cluster", "mask")
"""Keys of the observation dict, in the order the exported scorer takes them as inputs."""

Transform = Literal["linear", "log1p"]


@dataclass(frozen=True)
class Feature:
    """One input feature: a raw quantity and how it maps to [0, 1]."""

    name: str
    """Name in the manifest and the docs."""
    unit: str
    """Unit of the raw value: s, fraction, count or bool."""
    transform: Transform
    """``linear``: raw / scale; ``log1p``: log(1 + raw) / log(1 + scale)."""
    scale: float
    """Raw value that maps to 1.0; larger values are clipped to 1.0."""
    description: str
    """One sentence: what the raw value is."""

    def __post_init__(self) -> None:
        if self.scale <= 0:
            raise ValueError(f"feature {self.name!r}: scale must be > 0, got {self.scale}")


_DAY = 86_400.0

JOB_FEATURES: tuple[Feature, ...] = (
    Feature("wait_s", "s", "log1p", 10 * _DAY,
            "Time the job has waited so far (now minus submit time)."),
    Feature("req_walltime_s", "s", "log1p", 30 * _DAY, "Requested walltime."),
    Feature("req_cores_frac", "fraction", "linear", 1.0,
            "Requested cores divided by the cluster's total cores."),
    Feature("req_nodes_frac", "fraction", "linear", 1.0,
            "Requested nodes divided by the cluster's total nodes (0 = any placement)."),
    Feature("req_gpus_frac", "fraction", "linear", 1.0,
            "Requested GPUs divided by the cluster's total GPUs (0 on a CPU-only cluster)."),
    Feature("req_mem_frac", "fraction", "linear", 1.0,
            "Requested memory divided by the cluster's total memory (0 = not modelled)."),
    Feature("fits_now", "bool", "linear", 1.0,
            "1 if the job's request fits on the resources free now, else 0."),
)
"""Per-slot features, in column order of ``obs["jobs"]``."""

CLUSTER_FEATURES: tuple[Feature, ...] = (
    Feature("free_cores_frac", "fraction", "linear", 1.0, "Free cores / total cores."),
    Feature("free_gpus_frac", "fraction", "linear", 1.0,
            "Free GPUs / total GPUs (0 on a CPU-only cluster)."),
    Feature("free_mem_frac", "fraction", "linear", 1.0,
            "Free memory / total memory (0 = not modelled)."),
    Feature("queue_length", "count", "log1p", 4096.0,
            "Number of waiting jobs, including those beyond the K visible slots."),
    Feature("run_remaining_mean_s", "s", "log1p", 30 * _DAY,
            "Mean over running jobs of their requested end time minus now (0 if none)."),
    Feature("run_remaining_max_s", "s", "log1p", 30 * _DAY,
            "Largest requested end time minus now over running jobs (0 if none)."),
    Feature("cores_released_1h_frac", "fraction", "linear", 1.0,
            "Cores of running jobs whose requested end is within one hour / total cores."),
)
"""Cluster features, in order of ``obs["cluster"]``."""


def normalise(raw: npt.ArrayLike, features: tuple[Feature, ...]) -> npt.NDArray[np.float32]:
    """Map raw values (last axis = ``features``) to float32 in [0, 1].

    Args:
        raw: Array whose last axis has one column per feature, in declared order.
        features: :data:`JOB_FEATURES` or :data:`CLUSTER_FEATURES`.

    Returns:
        float32 array of the same shape; negative inputs map to 0, above-scale inputs to 1.

    Raises:
        ValueError: The last axis does not have one column per feature.
    """
    x = np.asarray(raw, dtype=np.float64)
    if x.shape[-1] != len(features):
        raise ValueError(f"expected {len(features)} feature columns, got {x.shape[-1]}")
    out = np.empty_like(x)
    for i, f in enumerate(features):
        col = np.maximum(x[..., i], 0.0)
        out[..., i] = np.log1p(col) / math.log1p(f.scale) if f.transform == "log1p" \
            else col / f.scale
    return np.clip(out, 0.0, 1.0).astype(np.float32)


def encode_observation(jobs: Mapping[str, npt.ArrayLike], cluster: Mapping[str, float],
                       k: int = DEFAULT_K) -> dict[str, npt.NDArray[Any]]:
    """Build one observation from raw values keyed by feature name.

    Args:
        jobs: For each name in :data:`JOB_FEATURES`, the raw values of the waiting jobs to
            show, in slot order (the first ``k`` are shown).
        cluster: For each name in :data:`CLUSTER_FEATURES`, its raw value.
        k: Number of slots.

    Returns:
        ``{"jobs": float32 [k, Fj], "cluster": float32 [Fc], "mask": int8 [k]}``.

    Raises:
        KeyError: A feature is missing; the message lists the expected names.

    Example:
        >>> raw = {f.name: [0.0, 60.0] for f in JOB_FEATURES}
        >>> obs = encode_observation(raw, {f.name: 0.0 for f in CLUSTER_FEATURES}, k=4)
        >>> obs["mask"].tolist(), obs["jobs"].shape
        ([1, 1, 0, 0], (4, 7))
    """
    for given, features in ((jobs, JOB_FEATURES), (cluster, CLUSTER_FEATURES)):
        missing = [f.name for f in features if f.name not in given]
        if missing:
            raise KeyError(f"missing feature(s) {missing}; expected {[f.name for f in features]}")
    columns = np.stack([np.asarray(jobs[f.name], np.float64)[:k] for f in JOB_FEATURES], axis=-1)
    n = columns.shape[0]
    out_jobs = np.zeros((k, len(JOB_FEATURES)), np.float32)
    out_jobs[:n] = normalise(columns, JOB_FEATURES)
    mask = np.zeros(k, np.int8)
    mask[:n] = 1
    out_cluster = normalise([cluster[f.name] for f in CLUSTER_FEATURES], CLUSTER_FEATURES)
    return {"jobs": out_jobs, "cluster": out_cluster, "mask": mask}


def observation_space(k: int = DEFAULT_K) -> gym.spaces.Dict:
    """The Gymnasium observation space for ``k`` slots (gymnasium imported here, not at load).

    Example:
        >>> observation_space(4)["jobs"].shape
        (4, 7)
    """
    from gymnasium import spaces

    return spaces.Dict({
        "jobs": spaces.Box(0.0, 1.0, (k, len(JOB_FEATURES)), np.float32),
        "cluster": spaces.Box(0.0, 1.0, (len(CLUSTER_FEATURES),), np.float32),
        "mask": spaces.MultiBinary(k),
    })


def action_space(k: int = DEFAULT_K) -> gym.spaces.Discrete:
    """``Discrete(k)``: the slot of the job that becomes the queue head."""
    from gymnasium import spaces

    return spaces.Discrete(k)


def feature_spec(k: int = DEFAULT_K, slot_order: str = "oldest") -> dict[str, Any]:
    """The contract as JSON-ready data, recorded in the policy manifest (``slot_order``: what
    fills the slots, ``oldest`` or a prior heuristic, see :mod:`hpcpolicy.env.prior`).

    Example:
        >>> feature_spec(8)["job_features"][0]["name"]
        'wait_s'
    """
    return {
        "k": k,
        "slot_order": slot_order,
        "inputs": list(OBS_KEYS),
        "job_features": [asdict(f) for f in JOB_FEATURES],
        "cluster_features": [asdict(f) for f in CLUSTER_FEATURES],
    }
