"""Classic scheduling heuristics, each a formula over what the scheduler knew at submit time.

Notation: ``r`` requested walltime (s, at least 1), ``n`` processors, ``s`` submit time (s since
the workload's origin, at least 1), ``w = now - submit`` the time a job has waited so far.
Lower scores start first; ties go to the earlier submit, then the earlier job in the workload.

* ``fcfs`` first come first served (``s``); ``lcfs`` the latest arrival first.
* ``sjf`` / ``ljf`` shortest / longest requested walltime first.
* ``smallest`` / ``largest`` fewest / most processors first.
* ``f1`` to ``f4`` the functions Carastan-Santos & de Camargo obtained by regression (SC17,
  "Obtaining dynamic scheduling policies with simulation and machine learning"):
  f1 = log10(r)·n + 870·log10(s), f2 = sqrt(r)·n + 25600·log10(s),
  f3 = r·n + 6860000·log10(s), f4 = r·sqrt(n) + 530000·log10(s).
* ``wfp3`` largest (w / r)^3 · n first (Tang et al., 2009).
* ``unicep`` largest w / (log2(n) · r) first (Tang et al., 2009); log2(1) = 0 would divide by
  zero, so one-processor jobs count as two (log2(max(n, 2))). Both use the intended
  ``w = now - submit`` (RLScheduler's code takes ``-1 - submit`` for queued jobs; not copied).
* ``fairshare`` Slurm-style multifactor priority (fair share with decayed usage, age, size);
  the parameters and their defaults are in :class:`hpcpolicy.sim.types.FairshareConfig`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from hpcpolicy.errors import ConfigError
from hpcpolicy.policies.base import ScoreKernel

if TYPE_CHECKING:
    from hpcpolicy.cluster import ClusterSpec
    from hpcpolicy.policies.settings import RunSettings
    from hpcpolicy.workload import Workload

__all__ = ["HEURISTICS", "Heuristic", "get_policy", "policy_names"]

F64 = npt.NDArray[np.float64]


def _r(w: Workload) -> F64:
    return np.maximum(w.req_walltime, 1).astype(np.float64)


def _n(w: Workload) -> F64:
    return w.procs.astype(np.float64)


def _log_s(w: Workload) -> F64:
    return np.log10(np.maximum(w.submit, 1).astype(np.float64))


_STATIC: dict[str, Callable[[Workload], F64]] = {
    "fcfs": lambda w: w.submit.astype(np.float64),
    "lcfs": lambda w: -np.arange(len(w), dtype=np.float64),
    "sjf": lambda w: w.req_walltime.astype(np.float64),
    "ljf": lambda w: -w.req_walltime.astype(np.float64),
    "smallest": _n,
    "largest": lambda w: -_n(w),
    "f1": lambda w: np.log10(_r(w)) * _n(w) + 870.0 * _log_s(w),
    "f2": lambda w: np.sqrt(_r(w)) * _n(w) + 25600.0 * _log_s(w),
    "f3": lambda w: _r(w) * _n(w) + 6860000.0 * _log_s(w),
    "f4": lambda w: _r(w) * np.sqrt(_n(w)) + 530000.0 * _log_s(w),
}

_DESCRIPTIONS = {
    "fcfs": "first come, first served",
    "lcfs": "last come, first served",
    "sjf": "shortest requested walltime first",
    "ljf": "longest requested walltime first",
    "smallest": "fewest processors first",
    "largest": "most processors first",
    "f1": "log10(r)*n + 870*log10(s) (Carastan-Santos & de Camargo, SC17)",
    "f2": "sqrt(r)*n + 25600*log10(s) (SC17)",
    "f3": "r*n + 6860000*log10(s) (SC17)",
    "f4": "r*sqrt(n) + 530000*log10(s) (SC17)",
    "wfp3": "largest (wait/r)^3 * n first",
    "unicep": "largest wait / (log2(n) * r) first",
    "fairshare": "Slurm-style multifactor: fair share (decayed usage), age, size",
}


@dataclass(frozen=True)
class Heuristic:
    """A named heuristic; binds to a :class:`ScoreKernel`.

    Example:
        >>> import numpy as np
        >>> from hpcpolicy.cluster import ClusterSpec
        >>> from hpcpolicy.sim.types import SimConfig
        >>> from hpcpolicy.workload import Workload
        >>> z = np.zeros(2, dtype=np.int64)
        >>> w = Workload(job_id=np.array(["a", "b"], dtype=object), submit=z,
        ...              run_time=np.array([50, 5]), req_walltime=np.array([60, 10]),
        ...              procs=np.array([1, 1]), nodes=z, gpus=z, mem_mib=z,
        ...              user=z.astype(np.int32), partition=z.astype(np.int32), logged_start=z - 1)
        >>> get_policy("sjf").bind(w, ClusterSpec.homogeneous(4), SimConfig()).a.tolist()
        [60.0, 10.0]
    """

    name: str
    """Registry name."""
    description: str
    """One line for help texts."""

    def bind(self, workload: Workload, cluster: ClusterSpec, cfg: RunSettings) -> ScoreKernel:
        """Per-job coefficients of this heuristic's formula for ``workload``."""
        users = np.asarray(workload.user, dtype=np.int64)
        submit = np.asarray(workload.submit, dtype=np.int64)
        if self.name in _STATIC:
            return ScoreKernel("static", _STATIC[self.name](workload), submit, users,
                               name=self.name)
        r, n = _r(workload), _n(workload)
        if self.name == "wfp3":
            return ScoreKernel("wfp3", n / (r * r * r), submit, users, name=self.name)
        if self.name == "unicep":
            return ScoreKernel("unicep", np.log2(np.maximum(n, 2.0)) * r, submit, users,
                               name=self.name)
        fs = cfg.fairshare
        n_users = max(len(workload.users), int(users.max(initial=-1)) + 1, 1)
        return ScoreKernel("fairshare", fs.weight_size * n / float(cluster.total_cores), submit,
                           users, fairshare=fs, n_users=n_users, name=self.name)


HEURISTICS: dict[str, Heuristic] = {
    name: Heuristic(name, text) for name, text in _DESCRIPTIONS.items()
}
"""Every registered heuristic by name."""


def policy_names() -> tuple[str, ...]:
    """Names :func:`get_policy` accepts."""
    return tuple(HEURISTICS)


def get_policy(name: str) -> Heuristic:
    """The heuristic registered as ``name`` (case-insensitive).

    Raises:
        ConfigError: unknown name; the message lists the valid ones.

    Example:
        >>> get_policy("FCFS").name
        'fcfs'
    """
    try:
        return HEURISTICS[name.strip().lower()]
    except KeyError:
        raise ConfigError(f"policy {name!r} does not exist; valid policies: "
                          f"{', '.join(HEURISTICS)}") from None
