"""The Lublin-Feitelson workload model of rigid parallel jobs (sizes, runtimes, arrivals).

U. Lublin and D. G. Feitelson, "The workload on parallel supercomputers: modeling the
characteristics of rigid jobs", J. Parallel & Distributed Computing 63(11), pp. 1105-1122,
Nov 2003. The parameter values below are the published ones, as stated by the authors'
program on the Parallel Workloads Archive model page (``m_lublin99.c``,
https://www.cs.huji.ac.il/labs/parallel/workload/models.html); this module implements the
model from that description, with numpy.

The model, per job:

* **Size** (processors). Serial (1) with probability ``serial_prob``. Otherwise ``x`` is drawn
  from a two-stage uniform on log2(size): uniform on [ulow, umed] with probability ``uprob``,
  else uniform on [umed, uhi]. With probability ``pow2_prob`` (of all jobs) ``x`` is rounded
  to a whole number first, making a power of two. The size is round(2^x), at most the
  machine size. The fits were made for 128 nodes (uhi = 7); for another machine uhi and umed
  keep their distance below log2(machine size) (:func:`size_range`), so that the archive's
  ``lublin_256.swf`` (uhi = 8) is reproduced.
* **Runtime** (seconds): exp(h), h from a hyper-gamma: gamma(a1, b1) with probability
  p = pa * size + pb (clipped to [0, 1]), else gamma(a2, b2); pa < 0, so bigger jobs run longer.
  Draws with h > 12 (about 45 hours) are drawn again. Gammas are (shape, scale). p is linear
  in the size itself, not in log2(size), as the authors' program computes it; their
  ``lublin_256.swf`` bears it out: the share of jobs longer than 666 s rises from 0.31 for
  serial jobs to 1.0 at 256 processors, where a log2 slope would hold it near 0.34.
* **Arrivals**: the day has 48 half-hour buckets; bucket b gets weight
  G(i + 0.5) - G(i - 0.5), G the gamma(anum, bnum) CDF and i = b + 1, where buckets before
  the 11th are moved one day on (i = b + 49), so that the cycle wraps past midnight; weights
  are scaled to mean 1. Inter-arrival "points" are exp(g) / 1800, g from gamma(aarr * arar,
  barr) drawn again above 13; a bucket of weight w takes w points to pass, so arrivals are
  frequent where weights are high (the working day). The log starts at midnight.

Two parameter sets are given: the whole-sample fit (:meth:`LublinParams` defaults, used by
``--model lublin`` and the archive's ``lublin_256.swf``, all jobs of one type), and separate
batch and interactive fits (:meth:`LublinParams.batch`, :meth:`LublinParams.interactive`),
merged as two arrival streams by ``--model lublin-split``.

The model has no requested time, user, wait or memory: those stay unknown. Times are whole
seconds, rounded down (the authors' program truncates too).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, fields

import numpy as np
import numpy.typing as npt

from hpcpolicy.errors import ConfigError

__all__ = ["MAX_LOG_RUNTIME", "LublinParams", "LublinSample", "day_weights", "sample",
           "sample_split", "size_range"]

MAX_LOG_RUNTIME = 12.0
"""Runtimes are below exp(12) s (162,754 s, about 45 hours)."""
MAX_LOG_INTERARRIVAL = 13.0
"""Inter-arrival draws are below exp(13) s (about 5 days)."""
BUCKETS = 48
BUCKET_S = 86400 // BUCKETS
_CYCLE_START = 11
_QUEUE_INTERACTIVE, _QUEUE_BATCH, _QUEUE_NONE = 0, 1, -1

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]


@dataclass(frozen=True)
class LublinParams:
    """Parameters of the model; the defaults are the published whole-sample fit."""

    serial_prob: float = 0.244
    """Share of serial (1-processor) jobs."""
    pow2_prob: float = 0.576
    """Share of jobs (of all jobs) whose size is a power of two."""
    ulow: float = 0.8
    """log2 of the smallest parallel size (the lower end of the two-stage uniform)."""
    uhi_below: float = 0.0
    """How far uhi, the upper end of the two-stage uniform, lies below log2(machine size)."""
    umed_below: float = 2.5
    """How far umed, where the two stages meet, lies below uhi."""
    uprob: float = 0.86
    """Probability of the lower stage [ulow, umed] of the two-stage uniform."""
    a1: float = 4.2
    """Shape of the short-runtime gamma (of log runtime)."""
    b1: float = 0.94
    """Scale of the short-runtime gamma."""
    a2: float = 312.0
    """Shape of the long-runtime gamma."""
    b2: float = 0.03
    """Scale of the long-runtime gamma."""
    pa: float = -0.0054
    """Slope of the short-gamma probability in the job size (p = pa * size + pb)."""
    pb: float = 0.78
    """Intercept of the short-gamma probability."""
    aarr: float = 10.2303
    """Shape of the gamma of log inter-arrival time at rush hours."""
    barr: float = 0.4871
    """Scale of the gamma of log inter-arrival time."""
    arar: float = 1.0225
    """Rush-to-all-day ratio that multiplies ``aarr``."""
    anum: float = 8.1737
    """Shape of the gamma that shapes the daily cycle (in half hours)."""
    bnum: float = 3.9631
    """Scale of the gamma that shapes the daily cycle."""

    def __post_init__(self) -> None:
        for name in ("serial_prob", "pow2_prob", "uprob"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ConfigError(f"{name} must lie in [0, 1], not {getattr(self, name)}")
        if self.serial_prob + self.pow2_prob > 1.0:
            raise ConfigError("serial_prob + pow2_prob must not exceed 1")
        for name in ("a1", "b1", "a2", "b2", "aarr", "barr", "arar", "anum", "bnum"):
            if not getattr(self, name) > 0.0:
                raise ConfigError(f"{name} must be > 0, not {getattr(self, name)}")
        for name in ("ulow", "uhi_below", "umed_below"):
            if getattr(self, name) < 0.0:
                raise ConfigError(f"{name} must be >= 0, not {getattr(self, name)}")

    @classmethod
    def batch(cls) -> LublinParams:
        """The published fit of batch jobs."""
        return cls(serial_prob=0.2927, pow2_prob=0.6686, ulow=1.2, umed_below=2.0,
                   uprob=0.875, a1=6.57,
                   b1=0.823, a2=639.1, b2=0.0156, pa=-0.003, pb=0.6986, aarr=6.0415,
                   barr=0.8531, arar=1.0519, anum=6.1271, bnum=5.2740)

    @classmethod
    def interactive(cls) -> LublinParams:
        """The published fit of interactive jobs."""
        return cls(serial_prob=0.1541, pow2_prob=0.625, ulow=1.0, uhi_below=1.5,
                   umed_below=2.5, uprob=0.705, a1=3.8351,
                   b1=0.6605, a2=7.073, b2=0.6856, pa=-0.0118, pb=0.9156, aarr=6.5510,
                   barr=0.6621, arar=0.9797, anum=8.9186, bnum=3.6680)

    def describe(self) -> str:
        """``name=value`` pairs of every parameter, for the SWF header."""
        return " ".join(f"{f.name}={getattr(self, f.name):g}" for f in fields(self))


@dataclass(frozen=True)
class LublinSample:
    """Jobs drawn from the model, sorted by submit time."""

    submit: I64
    """Submit time, whole seconds from midnight of the first day."""
    run: I64
    """Runtime, whole seconds."""
    size: I64
    """Processors."""
    queue: I64
    """SWF queue number: 1 batch, 0 interactive (SWF convention), -1 for one-type models."""


def size_range(procs: int, p: LublinParams) -> tuple[float, float]:
    """(umed, uhi) of the two-stage uniform on a machine of ``procs`` processors.

    uhi = log2(procs) - uhi_below, and umed = uhi - umed_below as fitted; where that would
    not lie above ulow (small machines), umed = uhi - 1.5, else the middle of [ulow, uhi].
    """
    uhi = max(math.log2(procs) - p.uhi_below, min(p.ulow, math.log2(procs)))
    for umed in (uhi - p.umed_below, uhi - 1.5):
        if umed > p.ulow:
            return umed, uhi
    return (p.ulow + uhi) / 2, uhi


def _sizes(n: int, procs: int, p: LublinParams, rng: np.random.Generator) -> I64:
    umed, uhi = size_range(procs, p)
    u, stage, pos = rng.random(n), rng.random(n), rng.random(n)
    lower = stage <= p.uprob
    x = np.where(lower, p.ulow + pos * (umed - p.ulow), umed + pos * (uhi - umed))
    x = np.where(u <= p.serial_prob + p.pow2_prob, np.floor(x + 0.5), x)
    size = np.minimum(np.floor(2.0 ** x + 0.5), procs)
    return np.where(u <= p.serial_prob, 1, np.maximum(size, 1)).astype(np.int64)


def _truncated(draw: Callable[[int], F64], n: int, limit: float) -> F64:
    """``draw(k)`` values, each drawn again while above ``limit``."""
    values = draw(n)
    high = np.flatnonzero(values > limit)
    while high.size:
        values[high] = draw(high.size)
        high = high[values[high] > limit]
    return values


def _runtimes(size: I64, p: LublinParams, rng: np.random.Generator) -> I64:
    short = np.clip(p.pa * size + p.pb, 0.0, 1.0)
    result = np.empty(size.shape[0])
    pending = np.arange(size.shape[0])
    while pending.size:  # a draw above MAX_LOG_RUNTIME is drawn again, mixture choice included
        first = rng.random(pending.size) <= short[pending]
        shape = np.where(first, p.a1, p.a2)
        scale = np.where(first, p.b1, p.b2)
        h = rng.gamma(shape, scale)
        ok = h <= MAX_LOG_RUNTIME
        result[pending[ok]] = h[ok]
        pending = pending[~ok]
    return np.floor(np.exp(result)).astype(np.int64)


def _gamma_mass(a: float, b: float, lo: F64, hi: F64) -> F64:
    """P(lo < X < hi) for X ~ gamma(shape a, scale b), by 64-point Gauss-Legendre per interval."""
    nodes, weights = np.polynomial.legendre.leggauss(64)
    half = (hi - lo)[:, None] / 2
    x = (lo + hi)[:, None] / 2 + half * nodes[None, :]
    log_pdf = (a - 1) * np.log(x) - x / b - math.lgamma(a) - a * math.log(b)
    mass: F64 = (half[:, 0] * (np.exp(log_pdf) @ weights))
    return mass


def day_weights(p: LublinParams) -> F64:
    """Arrival weight of each half-hour bucket of the day (0 = 00:00-00:30), mean 1."""
    i = ((np.arange(BUCKETS) + 1 - _CYCLE_START) % BUCKETS + _CYCLE_START).astype(np.float64)
    w = _gamma_mass(p.anum, p.bnum, i - 0.5, i + 0.5)
    weights: F64 = w / w.mean()
    return weights


def _arrivals(n: int, p: LublinParams, rng: np.random.Generator) -> F64:
    """Arrival times (s from midnight of day 0) of ``n`` jobs."""
    g = _truncated(lambda k: rng.gamma(p.aarr * p.arar, p.barr, k), n, MAX_LOG_INTERARRIVAL)
    points = np.cumsum(np.exp(g) / BUCKET_S)
    w = day_weights(p)
    edges = np.concatenate(([0.0], np.cumsum(w)))
    day, rest = np.divmod(points, edges[-1])
    bucket = np.clip(np.searchsorted(edges, rest, side="right") - 1, 0, BUCKETS - 1)
    into = (rest - edges[bucket]) / w[bucket]
    times: F64 = day * 86400.0 + (bucket + into) * BUCKET_S
    return times


def sample(n: int, procs: int, rng: np.random.Generator,
           params: LublinParams | None = None, queue: int = _QUEUE_NONE) -> LublinSample:
    """Draw ``n`` jobs for a machine of ``procs`` processors from one parameter set.

    Example:
        >>> from numpy.random import Generator, PCG64
        >>> jobs = sample(1000, 128, Generator(PCG64(1)))
        >>> bool(jobs.size.max() <= 128 and (jobs.submit[1:] >= jobs.submit[:-1]).all())
        True
    """
    if n < 0 or procs < 1:
        raise ConfigError(f"need n >= 0 jobs and procs >= 1, not n={n}, procs={procs}")
    p = params or LublinParams()
    submit = np.floor(_arrivals(n, p, rng)).astype(np.int64)
    size = _sizes(n, procs, p, rng)
    run = _runtimes(size, p, rng)
    return LublinSample(submit, run, size, np.full(n, queue, dtype=np.int64))


def sample_split(n: int, procs: int, rng: np.random.Generator) -> LublinSample:
    """Draw ``n`` jobs as two merged arrival streams: batch and interactive jobs.

    Each stream draws ``n`` jobs; the ``n`` earliest of both are kept (every one of them is
    among the first ``n`` of its own stream, so nothing is cut short).
    """
    both = [sample(n, procs, rng, LublinParams.batch(), _QUEUE_BATCH),
            sample(n, procs, rng, LublinParams.interactive(), _QUEUE_INTERACTIVE)]
    cols = {name: np.concatenate([getattr(s, name) for s in both])
            for name in ("submit", "run", "size", "queue")}
    keep = np.argsort(cols["submit"], kind="stable")[:n]
    return LublinSample(**{name: col[keep] for name, col in cols.items()})
