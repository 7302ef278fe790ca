"""Rewards of the scheduling environment: per-decision shares of a window's metrics.

Each reward term is the change, over one decision, of a *potential*: a running total that
starts at 0 and, when the window is fully scheduled, equals the window's metric as
:mod:`hpcpolicy.sim.metrics` defines it. The rewards of an episode therefore add up to exactly
that metric (with the sign that makes "more" better), while each decision is charged at once
for what it costs, instead of one reward at the very end:

* ``bsld`` (default): ``-(mean bounded slowdown)``. A waiting job adds ``elapsed /
  max(run, 10 s)`` for each second it waits; when it starts, its term becomes its bounded
  slowdown ``max((wait + run) / max(run, 10 s), 1)``. Summed over the jobs, divided by their
  number.
* ``wait``: ``-(mean wait in hours)``: every waiting job adds its elapsed waiting time.
* ``response``: ``-(mean response time in hours)``: the wait as it accrues, plus the run time
  when the job starts.
* ``utilization``: the core utilisation so far, core-seconds used by the window's jobs /
  (cluster cores x time since the first submit); at the last end it is the window's
  ``utilization`` (makespan span).

The potentials read each job's logged run time (when it starts, or to know how long it has
run): rewards may use what happened, observations never do. Terms mix with weights:
``"bsld"``, ``"wait:2"``, ``"bsld:1,utilization:50"`` (``name[:weight]``, comma-separated).

Example:
    >>> parse_reward("bsld:1, utilization:50")
    {'bsld': 1.0, 'utilization': 50.0}
"""

# The kernels are typed by numba when compiled; mypy sees untyped functions.
# mypy: disable-error-code="no-untyped-def, no-untyped-call"

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
from numba import njit

from hpcpolicy.errors import ConfigError
from hpcpolicy.sim.compiled import bind
from hpcpolicy.sim.metrics import TAU_S

if TYPE_CHECKING:
    from hpcpolicy.sim.prepare import Prepared

__all__ = ["REWARD_TERMS", "RewardMeter", "format_reward", "parse_reward", "sums_at"]

I64 = npt.NDArray[np.int64]

REWARD_TERMS: dict[str, str] = {
    "bsld": "minus the mean bounded slowdown (tau = 10 s) of the window's jobs",
    "wait": "minus the mean wait of the window's jobs, in hours",
    "response": "minus the mean response time (wait + run) of the window's jobs, in hours",
    "utilization": "core utilisation of the window (core-seconds / (cores x makespan))",
}
"""Reward terms by name, with the episode total each adds up to."""

_HOUR = 3600.0


def parse_reward(spec: str) -> dict[str, float]:
    """Weights of ``name[:weight]`` terms, comma-separated (weight 1 when left out).

    Raises:
        ConfigError: Unknown term (the message lists the valid ones), a weight that is not a
            finite number, a term given twice, or no term with a non-zero weight.
    """
    weights: dict[str, float] = {}
    for part in (p.strip() for p in spec.split(",")):
        name, _, value = part.partition(":")
        name = name.strip().lower()
        if name not in REWARD_TERMS:
            raise ConfigError(f"reward {spec!r}: unknown term {name!r}; valid terms: "
                              f"{', '.join(REWARD_TERMS)} (mix them as 'bsld:1,utilization:50')")
        try:
            weight = float(value) if value.strip() else 1.0
        except ValueError:
            raise ConfigError(f"reward {spec!r}: weight {value.strip()!r} of {name!r} is not a "
                              "number") from None
        if not math.isfinite(weight):
            raise ConfigError(f"reward {spec!r}: weight of {name!r} must be finite")
        if name in weights:
            raise ConfigError(f"reward {spec!r}: term {name!r} is given twice")
        weights[name] = weight
    if not any(weights.values()):
        raise ConfigError(f"reward {spec!r}: every weight is 0, so every decision would be worth "
                          "the same; give a term a non-zero weight")
    return weights


def format_reward(weights: dict[str, float]) -> str:
    """The canonical spec of ``weights`` (``bsld`` alone for the default).

    Example:
        >>> format_reward({"bsld": 1.0}), format_reward({"wait": 2.0, "bsld": 1.0})
        ('bsld', 'wait:2,bsld:1')
    """
    if list(weights.items()) == [("bsld", 1.0)]:
        return "bsld"
    return ",".join(f"{name}:{weight:g}" for name, weight in weights.items())


@njit(cache=True)
def sums_at(t, submit, never, start, dur, slow_div, grp, cores, out):
    """Sums at time t over the jobs submitted by then: bounded-slowdown potential, wait,
    response, core-seconds used. ``slow_div`` is max(run, tau) per job."""
    bsld = 0.0
    wait = 0.0
    resp = 0.0
    busy = 0.0
    for j in range(submit.shape[0]):
        if submit[j] > t:
            break  # the workload is sorted by submit time
        if never[j]:
            continue
        s = start[j]
        if s < 0:
            w = float(t - submit[j])
            bsld += w / slow_div[j]
            wait += w
            resp += w
        else:
            w = float(s - submit[j])
            r = float(dur[j])
            bsld += max((w + r) / slow_div[j], 1.0)
            wait += w
            resp += w + r
            busy += float(cores[j, grp[j]]) * float(min(t, s + dur[j]) - s)
    out[0] = bsld
    out[1] = wait
    out[2] = resp
    out[3] = busy


@njit(cache=True)
def _potentials(t, submit, never, start, dur, slow_div, grp, cores, jobs, t0, total_cores, out):
    """Each term's potential at time t (in :data:`REWARD_TERMS` order) into ``out``, over the
    ``jobs`` runnable jobs; ``t0`` is the first submit (the utilisation span starts there)."""
    sums_at(t, submit, never, start, dur, slow_div, grp, cores, out)
    span = t - t0
    out[3] = out[3] / (total_cores * span) if span > 0 else 0.0
    out[0] = -out[0] / jobs
    out[1] = -out[1] / (jobs * _HOUR)
    out[2] = -out[2] / (jobs * _HOUR)


@njit(cache=True)
def _reward(t, submit, never, start, dur, slow_div, grp, cores, jobs, t0, total_cores, weights,
            last):
    """The weighted change of the potentials from ``last`` to time t; ``last`` becomes the
    potentials at t."""
    now = np.empty(last.shape[0])
    _potentials(t, submit, never, start, dur, slow_div, grp, cores, jobs, t0, total_cores, now)
    reward = 0.0
    for i in range(now.shape[0]):
        reward += weights[i] * (now[i] - last[i])
        last[i] = now[i]
    return reward


class RewardMeter:
    """Potentials of one episode and the reward of each decision.

    Args:
        weights: From :func:`parse_reward`.
        prep: The engine inputs of the episode's window (:func:`hpcpolicy.sim.prepare.prepare`).
        total_cores: Cores of the cluster (the utilisation denominator).
    """

    def __init__(self, weights: dict[str, float], prep: Prepared, total_cores: int) -> None:
        n = prep.n
        self._w = np.array([weights.get(name, 0.0) for name in REWARD_TERMS])
        self._submit = prep.submit
        self._never = prep.never_fits
        self._dur = prep.dur
        self._slow_div = np.maximum(prep.dur, TAU_S).astype(np.float64)
        self._cores = np.ascontiguousarray(prep.need[:n, :, 0])
        runnable = ~prep.never_fits
        self._jobs = max(int(runnable.sum()), 1)
        self._t0 = int(prep.submit[runnable].min()) if runnable.any() else 0
        self._total_cores = float(total_cores)
        self._last = np.zeros(len(REWARD_TERMS))
        self._reward: Callable[..., float] | None = None

    def potentials(self, t: int, starts: I64, groups: I64) -> npt.NDArray[np.float64]:
        """Each term's potential at time ``t`` (in :data:`REWARD_TERMS` order)."""
        out = np.empty(len(REWARD_TERMS))
        _potentials(t, self._submit, self._never, starts, self._dur, self._slow_div, groups,
                    self._cores, self._jobs, self._t0, self._total_cores, out)
        return out

    def start(self, t: int, starts: I64, groups: I64) -> None:
        """Record the potentials at the episode's first decision. ``starts`` and ``groups``
        are one-dimensional int64 arrays, of the same kind in every later call."""
        self._last = self.potentials(t, starts, groups)
        self._reward = bind(_reward, *self._args(t, starts, groups))

    def step(self, t: int, starts: I64, groups: I64) -> float:
        """The reward of the decisions since the last call, now at time ``t``."""
        if self._reward is None:
            raise RuntimeError("RewardMeter.step() before start()")
        return float(self._reward(*self._args(t, starts, groups)))

    def _args(self, t: int, starts: I64, groups: I64) -> tuple[Any, ...]:
        """The arguments of :func:`_reward`."""
        return (t, self._submit, self._never, starts, self._dur, self._slow_div, groups,
                self._cores, self._jobs, self._t0, self._total_cores, self._w, self._last)

    def finish(self, starts: I64, groups: I64) -> float:
        """The last reward, at the window's last end (every job has run)."""
        started = starts >= 0
        last_end = int((starts + self._dur)[started].max()) if started.any() else self._t0
        return self.step(last_end, starts, groups)
