"""The floor of the engine (issue 45, item 1): how fast can FCFS + EASY go on this machine?

A benchmark-only replay loop, compiled with numba, with nothing but the work FCFS + EASY must
do: no policy hooks, no counters, no invariant checks, no fair share or limits, and 32-bit
state (times as offsets in seconds from the first submit, cores, job indices). It reads the
arrays the engine reads (:func:`hpcpolicy.sim.prepare.prepare`: submits, run lengths, planning
lengths, demands, jobs that never fit) and keeps the engine's data structures and rules, so
that it does the same work, only leaner:

* finish events in a min-heap, running jobs' requested ends in a sorted list, each entry one
  64-bit key ``time << 32 | job`` (one comparison per step, same order as the engine's
  (time, job) pairs);
* the waiting jobs in a segment tree over submit order holding the smallest core demand and
  planning length of each subtree (the engine's rank tree, in int32), so a backfilling scan
  jumps from one job that could start to the next;
* EASY's shadow time and extra cores kept while the head and the running jobs stay the same.

It supports what FCFS + EASY needs on a pooled machine: one node group, jobs that demand
cores only, no jobs running at the start, no outages, and logs shorter than 68 years (32-bit
times); anything else is refused with one line. Its start times must equal the engine's job
for job (``hpcpolicy.sim.simulate`` with ``policy="fcfs", backfill="easy"``): the benchmark
checks that on every workload it times, and the floor's figure means nothing without it.

What is measured, in one process, each the best of ``--runs`` alternated runs after a
warm-up (JIT) call, in CPU seconds of the process (``time.process_time``; every part runs on
one thread): on a shared machine wall time also counts the others' work.

* ``floor_s``: the floor's loop alone (its int32 arrays built beforehand, ``floor_arrays_s``);
* ``engine_s``: the engine's compiled run as ``simulate`` calls it
  (:func:`hpcpolicy.sim.compiled.run_compiled` on the prepared arrays: its state arrays, the
  loop and the raw outcome), and ``simulate_s``: the whole ``simulate`` call (checks,
  demands, the loop, the result);

as nanoseconds per job per replay, and the ratios ``engine / floor`` (the bar of issue 45:
<= 2) and ``simulate / floor``. Workloads: HPC2N (202,871 jobs), HPC2N x ``--repeat`` (each
pass's submits after the last pass's span, as ``benchmarks/whatif_10m.py`` builds its log)
and a generated Lublin log (``--lublin`` jobs on 256 processors). Output: JSON (default
``benchmarks/results/engine_floor.json``) and one line of text.

Usage:
    python -m benchmarks.engine_floor [--repeat 5] [--runs 3] [--lublin 100000] [--out FILE]
"""

# The kernels are typed by numba when compiled; mypy sees untyped functions.
# mypy: disable-error-code="no-untyped-def, no-untyped-call"

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from numba import njit

from benchmarks._common import RESULTS
from hpcpolicy.cluster import ClusterSpec
from hpcpolicy.errors import ConfigError
from hpcpolicy.sim.prepare import prepare
from hpcpolicy.sim.types import SimConfig
from hpcpolicy.workload import Workload
from hpcpolicy.world.open import open_workload

CFG = SimConfig(policy="fcfs", backfill="easy")
"""The engine's configuration the floor reproduces."""

BIG32 = np.int64(2**31 - 1)
"""+infinity in int32 times, demands and tree minima; also the first time the floor cannot
hold."""
NO_TIME = np.int64(1) << np.int64(62)
"""+infinity for the next event time (a local, never stored)."""
LOW32 = np.int64(2**32 - 1)
I32 = npt.NDArray[np.int32]


# ---------------------------------------------------------------- 64-bit keys (time << 32 | job)
@njit(cache=True, inline="always")
def _push(heap, size, key):
    """Push ``key`` on the min-heap heap[:size]; the new size."""
    i = size
    while i > 0:
        parent = (i - 1) >> 1
        if heap[parent] <= key:
            break
        heap[i] = heap[parent]
        i = parent
    heap[i] = key
    return size + 1


@njit(cache=True, inline="always")
def _pop(heap, size):
    """Drop the smallest key (heap[0]); the new size."""
    size -= 1
    key = heap[size]
    i = 0
    while True:
        c = 2 * i + 1
        if c >= size:
            break
        if c + 1 < size and heap[c + 1] < heap[c]:
            c += 1
        if key <= heap[c]:
            break
        heap[i] = heap[c]
        i = c
    heap[i] = key
    return size


@njit(cache=True, inline="always")
def _lower(keys, size, key):
    lo, hi = 0, size
    while lo < hi:
        mid = (lo + hi) >> 1
        if keys[mid] < key:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True, inline="always")
def _insert(keys, size, key):
    """Insert ``key`` in the sorted keys[:size]; the new size."""
    k = _lower(keys, size, key)
    for i in range(size, k, -1):
        keys[i] = keys[i - 1]
    keys[k] = key
    return size + 1


@njit(cache=True, inline="always")
def _remove(keys, size, key):
    """Remove ``key`` from the sorted keys[:size]; the new size."""
    for i in range(_lower(keys, size, key), size - 1):
        keys[i] = keys[i + 1]
    return size - 1


# ---------------------------------------------------------------- the waiting jobs
@njit(cache=True, inline="always")
def _tree_set(tc, tl, pos, cores, length):
    """Leaf ``pos`` holds a job (its cores and planning length), or none (BIG32, BIG32)."""
    i = (tc.shape[0] >> 1) + pos
    tc[i] = cores
    tl[i] = length
    i >>= 1
    while i > 0:
        c = min(tc[2 * i], tc[2 * i + 1])
        ln = min(tl[2 * i], tl[2 * i + 1])
        if c == tc[i] and ln == tl[i]:
            break
        tc[i] = c
        tl[i] = ln
        i >>= 1


@njit(cache=True, inline="always")
def _tree_find(tc, tl, lo, free, span, extra):
    """First leaf >= lo whose job needs <= free cores and runs <= span seconds or needs
    <= extra cores; -1 if none."""
    leaves = tc.shape[0] >> 1
    if lo >= leaves:
        return -1
    i = leaves + lo
    while True:
        if tc[i] <= free and (tl[i] <= span or tc[i] <= extra):
            if i >= leaves:
                return i - leaves
            i = 2 * i
            continue
        while i & 1:
            i >>= 1
        if i == 0:
            return -1
        i += 1


# ---------------------------------------------------------------- the loop
@njit(cache=True)
def _replay(sub, dur, lng, cor, never, total, start, heap, plan, tc, tl):
    """FCFS + EASY over int32 arrays; fills ``start`` (-1: never started). False if a time
    passed 2**31 - 1 seconds (the run is then void)."""
    n = sub.shape[0]
    free = total
    nxt = 0
    hlen = 0
    plen = 0
    nwait = 0
    first = n
    finishes = 0
    sh_head = -1
    sh_fin = -1
    sh_t = NO_TIME
    sh_extra = 0
    while True:
        while nxt < n and never[nxt]:
            nxt += 1
        now = np.int64(sub[nxt]) if nxt < n else NO_TIME
        if hlen > 0 and (heap[0] >> 32) < now:
            now = heap[0] >> 32
        if now == NO_TIME:
            return True
        while hlen > 0 and (heap[0] >> 32) == now:
            j = heap[0] & LOW32
            hlen = _pop(heap, hlen)
            free += cor[j]
            plen = _remove(plan, plen, ((start[j] + np.int64(lng[j])) << 32) | j)
            finishes += 1
        while nxt < n and sub[nxt] == now:
            if not never[nxt]:
                _tree_set(tc, tl, nxt, cor[nxt], lng[nxt])
                first = min(first, nxt)
                nwait += 1
            nxt += 1
        while nwait > 0:
            head = _tree_find(tc, tl, first, BIG32 - 1, BIG32, -1)
            first = head
            backfill = cor[head] > free
            if backfill and not (sh_head == head and sh_fin == finishes
                                 and (plen == 0 or (plan[0] >> 32) > now)):
                # EASY's shadow: the earliest requested end (no sooner than now + 1) at
                # which the head fits, and the cores it leaves over then.
                have = free
                i = 0
                sh_t = NO_TIME
                while i < plen and have < cor[head]:
                    t = max(plan[i] >> 32, now + 1)
                    while i < plen and max(plan[i] >> 32, now + 1) == t:
                        have += cor[plan[i] & LOW32]
                        i += 1
                    if have >= cor[head]:
                        sh_t = t
                        sh_extra = have - cor[head]
                sh_head = head
                sh_fin = finishes
            p = head
            while p >= 0:
                if backfill:  # the next job that could start without delaying the head
                    span = sh_t - now if sh_t != NO_TIME else BIG32
                    p = _tree_find(tc, tl, p + 1, free, span, sh_extra)
                    if p < 0:
                        break
                    if now + lng[p] > sh_t:
                        if cor[p] > sh_extra:
                            continue
                        sh_extra -= cor[p]
                else:
                    sh_head = -1  # the head outlives no promise: compute the shadow anew
                end, planned = now + dur[p], now + lng[p]
                if max(end, planned) >= BIG32:
                    return False
                start[p] = now
                free -= cor[p]
                hlen = _push(heap, hlen, (end << 32) | p)
                plen = _insert(plan, plen, (planned << 32) | p)
                _tree_set(tc, tl, p, BIG32, BIG32)
                nwait -= 1
                if not backfill:
                    break
            if backfill:
                break


# ---------------------------------------------------------------- Python side
def floor_arrays(workload: Workload, cluster: ClusterSpec) -> dict[str, Any]:
    """The floor's int32 inputs, from the engine's own :func:`prepare`.

    Raises:
        ConfigError: a case the floor does not support (several node groups, demands other
            than cores, a log of 68 years or more).
    """
    prep = prepare(workload, cluster, CFG)
    if prep.capacity.shape[0] != 1 or (prep.need[~prep.never_fits, :, 1:] != 0).any():
        raise ConfigError(f"cluster {cluster.name!r}: the floor replays one node group and "
                          "jobs that demand cores only; use a homogeneous CPU cluster")
    t0 = int(prep.submit[0])
    longest = int(max(prep.dur.max(), prep.length.max()))
    if int(prep.submit[-1]) - t0 + longest >= BIG32:
        raise ConfigError(f"the workload spans {(int(prep.submit[-1]) - t0) / 3.156e7:.0f} "
                          "years: the floor's 32-bit times hold 68; replay fewer passes")
    n = prep.n
    leaves = 1 << max(n - 1, 0).bit_length()
    smallest = int(prep.need[~prep.never_fits, 0, 0].min(initial=1))
    running = min(n, int(prep.capacity[0, 0]) // max(smallest, 1)) + 1
    return {
        "sub": (prep.submit - t0).astype(np.int32), "dur": prep.dur.astype(np.int32),
        "lng": prep.length.astype(np.int32), "cor": prep.need[:, 0, 0].astype(np.int32),
        "never": prep.never_fits.copy(), "total": int(prep.capacity[0, 0]),
        "start": np.full(n, -1, dtype=np.int32), "heap": np.zeros(n, dtype=np.int64),
        "plan": np.zeros(running, dtype=np.int64),
        "tc": np.full(2 * leaves, BIG32, dtype=np.int32),
        "tl": np.full(2 * leaves, BIG32, dtype=np.int32), "t0": t0,
    }


def run_floor(arrays: dict[str, Any]) -> npt.NDArray[np.int64]:
    """Replay the floor once over ``arrays`` (reset first); absolute starts, -1 for none.

    Raises:
        ConfigError: a time passed the 32-bit range during the replay.
    """
    a = arrays
    a["start"].fill(-1)
    a["tc"].fill(BIG32)
    a["tl"].fill(BIG32)
    if not _replay(a["sub"], a["dur"], a["lng"], a["cor"], a["never"], a["total"], a["start"],
                   a["heap"], a["plan"], a["tc"], a["tl"]):
        raise ConfigError("a job ended past the floor's 32-bit times; replay fewer passes")
    return np.where(a["start"] >= 0, a["start"].astype(np.int64) + a["t0"], -1)


def floor_starts(workload: Workload, cluster: ClusterSpec) -> npt.NDArray[np.int64]:
    """The floor's start time of each job (-1: never fits), to compare with the engine's.

    Example:
        >>> z = np.zeros(3, dtype=np.int64)
        >>> w = Workload(job_id=np.array(["a", "b", "c"], dtype=object),
        ...     submit=np.array([0, 1, 2]), run_time=np.array([100, 100, 10]),
        ...     req_walltime=np.array([100, 100, 10]), procs=np.array([3, 2, 1]), nodes=z,
        ...     gpus=z, mem_mib=z, user=z.astype(np.int32), partition=z.astype(np.int32),
        ...     logged_start=z - 1)
        >>> floor_starts(w, ClusterSpec.homogeneous(4)).tolist()
        [0, 100, 2]
    """
    return run_floor(floor_arrays(workload, cluster))


def mismatch(floor: npt.NDArray[np.int64], engine: npt.NDArray[np.int64]) -> str | None:
    """None when the two schedules agree job for job, else where they first differ."""
    diff = np.flatnonzero(floor != engine)
    if len(diff) == 0:
        return None
    i = int(diff[0])
    return f"{len(diff)} jobs differ, the first job {i}: floor {floor[i]}, engine {engine[i]}"


# ---------------------------------------------------------------- the benchmark
def _repeated(table: Path, k: int) -> Workload:
    """The table's jobs ``k`` times, each pass's submits (and logged times) after the last
    pass's span and its job ids after the last pass's, as ``build_swf`` writes the log."""
    import polars as pl

    df = pl.read_parquet(table)
    times = [c for c, t in df.schema.items() if isinstance(t, pl.Datetime)]
    span = df["submit_time"].max() - df["submit_time"].min() + pl.duration(seconds=1)  # type: ignore[operator]
    top = int(df["job_id_raw"].max())  # type: ignore[arg-type]
    passes = [df.with_columns(*(pl.col(c) + span * k_ for c in times),
                              (pl.col("job_id_raw") + k_ * top).alias("job_id_raw"))
              .with_columns(pl.col("job_id_raw").cast(pl.String).alias("job_id"))
              for k_ in range(k)]
    return open_workload(pl.concat(passes))


def lublin(work: Path, jobs: int, procs: int = 256, seed: int = 1) -> tuple[Workload,
                                                                        ClusterSpec]:
    """A generated Lublin log (written and ingested in ``work``) and its machine.

    The model draws no requested walltimes, so each job requests its run time times a factor
    drawn from [0.7, 4) (seeded), rounded up to whole quarter hours as users round theirs:
    most overestimate, some run past their request, as in real logs, and EASY's planning
    differs from what happens.
    """
    from hpcpolicy.generate import generate_swf
    from hpcpolicy.ingest import IngestConfig, ingest
    from hpcpolicy.workload import WorkloadOptions
    from hpcpolicy.world import WorldSpec, open_world

    swf = generate_swf(work / f"lublin{seed}.swf", jobs=jobs, procs=procs, seed=seed)
    table = work / f"lublin{seed}.parquet"
    ingest([swf], table, IngestConfig(overwrite=True))
    world = open_world(table, WorldSpec(workload=WorkloadOptions(walltime_fallback="runtime")))
    w = world.workload
    factor = np.random.Generator(np.random.PCG64(seed)).uniform(0.7, 4.0, len(w))
    req = (np.ceil(w.run_time * factor / 900) * 900).astype(np.int64)
    return replace(w, req_walltime=req), world.cluster


def measure(name: str, w: Workload, cluster: ClusterSpec, runs: int) -> dict[str, Any]:
    """Check the floor against the engine on ``w``, then time both (best of ``runs``)."""
    from hpcpolicy.policies.heuristics import get_policy
    from hpcpolicy.sim import simulate
    from hpcpolicy.sim.compiled import run_compiled

    t = time.process_time()
    arrays = floor_arrays(w, cluster)
    arrays_s = time.process_time() - t
    prep, kernel = prepare(w, cluster, CFG), get_policy(CFG.policy).bind(w, cluster, CFG)
    spent: dict[str, list[float]] = {"floor": [], "engine": [], "simulate": []}
    for _ in range(runs):
        t = time.process_time()
        starts = run_floor(arrays)
        spent["floor"].append(time.process_time() - t)
        t = time.process_time()
        run_compiled(prep, CFG, kernel, w.job_id)
        spent["engine"].append(time.process_time() - t)
        t = time.process_time()
        r = simulate(w, cluster, CFG)
        spent["simulate"].append(time.process_time() - t)
        differ = mismatch(starts, r.start)
        if differ is not None:
            raise SystemExit(f"engine_floor: {name}: the floor's schedule is not the engine's "
                             f"({differ}); its time would mean nothing")
    n = len(w)
    best = {k: min(v) for k, v in spent.items()}
    return {
        "jobs": n, "identical_starts": True, "floor_arrays_s": round(arrays_s, 3),
        **{f"{k}_s": round(v, 4) for k, v in best.items()},
        **{f"{k}_ns_per_job": round(v / n * 1e9, 1) for k, v in best.items()},
        "engine_over_floor": round(best["engine"] / best["floor"], 2),
        "simulate_over_floor": round(best["simulate"] / best["floor"], 2),
    }


def main(argv: list[str] | None = None) -> None:
    """Build the workloads, check and time the floor and the engine, write JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="HPC2N passes (5: 1.01 M jobs)")
    parser.add_argument("--runs", type=int, default=3, help="timed runs of each, best kept")
    parser.add_argument("--lublin", type=int, default=100_000, help="jobs of the Lublin log")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) /
                        "hpcpolicy-bench")
    parser.add_argument("--out", type=Path, default=RESULTS / "engine_floor.json")
    args = parser.parse_args(argv)
    from benchmarks.simulate import ingest_traces
    from hpcpolicy.atomic import write_json
    from hpcpolicy.sim import simulate
    from hpcpolicy.world import open_world

    args.cache.mkdir(parents=True, exist_ok=True)
    hpc2n = ingest_traces(args.cache)["HPC2N"]["full"]
    world = open_world(hpc2n)
    cluster, base = world.cluster, world.workload
    warm = base.take(np.arange(2000))
    floor_starts(warm, cluster)  # compile both first
    simulate(warm, cluster, CFG)
    with tempfile.TemporaryDirectory(dir=args.cache) as tmp:
        generated, generated_cluster = lublin(Path(tmp), args.lublin)
    cases = {"HPC2N": measure("HPC2N", base, cluster, args.runs),
             f"HPC2N x{args.repeat}": measure(f"HPC2N x{args.repeat}",
                                              _repeated(hpc2n, args.repeat), cluster, args.runs),
             f"Lublin {args.lublin}": measure("Lublin", generated, generated_cluster,
                                                  args.runs)}
    given = sys.argv[1:] if argv is None else argv
    doc = {"command": " ".join(["python -m benchmarks.engine_floor", *given]),
           "config": "fcfs + easy", "bar_engine_over_floor": 2.0, "cases": cases,
           "cpus": os.cpu_count(), "load_avg_1m": os.getloadavg()[0]}
    write_json(args.out, doc)
    big = cases[f"HPC2N x{args.repeat}"]
    print(f"HPC2N x{args.repeat} ({big['jobs']:,} jobs): floor {big['floor_ns_per_job']} ns, "
          f"engine {big['engine_ns_per_job']} ns, simulate {big['simulate_ns_per_job']} ns per "
          f"job per replay; engine / floor {big['engine_over_floor']} (bar 2), schedules "
          f"identical on every case -> {args.out}")


if __name__ == "__main__":
    main()
