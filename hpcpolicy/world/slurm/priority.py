"""Multifactor priority's changing parts, compiled (numba): age, decayed usage, fair share.

Facts from SchedMD/slurm master, ``src/plugins/priority/multifactor/``:

* **Priority** (``priority_multifactor.c: _get_priority_internal``): the weighted factors
  summed, at least 1 (0 is kept for held jobs), cut to a 32-bit unsigned integer. Jobs sort
  by partition PriorityTier first, then by that integer (``job_scheduler.c:
  sort_job_queue2``); equal priorities keep submit order here.
* **Age** (``set_priority_factors``): (now - eligible time) / PriorityMaxAge, 1 from there
  on. The eligible time is the submit time here (no dependencies, no holds in a log).
* **Usage** (``_decay_thread``, ``_apply_new_usage``): every PriorityCalcPeriod, all usage
  is multiplied by ``decay_factor ** dt`` with ``decay_factor = 1 - 0.693 / half_life``
  (the source's own first-order approximation of 2^(-1/half_life)), and each running job
  adds ``cores * run * decay_factor ** run`` for the ``run`` seconds it ran in the period,
  to its association and every one above it. Billing is by cores (no TRESBillingWeights).
* **Classic fair share** (``_set_usage_efctv``, ``_set_assoc_fs_factor``,
  ``assoc_mgr.c: _normalize_assoc_shares_traditional``): usage_norm = usage / root's;
  effective usage ``UE = U + (UE_parent - U) * S / S_siblings`` with root's UE 1; shares_norm
  the product of S / S_siblings down the path; factor ``2 ** (-UE / shares_norm)``
  (FairShareDampeningFactor 1), 0 where shares_norm is 0.
* **Fair Tree** (``fair_tree.c: _calc_assoc_fs``, ``_calc_tree_fs``): at each level,
  ``level_fs = S / U`` with S = shares / siblings' shares and U = usage / parent's usage
  (infinite when U is 0, 0 when S is 0); siblings sorted by level_fs, highest first, users
  before accounts on ties; a depth-first walk ranks users from the number of users down,
  tied users sharing a rank; a user's factor is rank / users. (Slurm also merges the
  children of tied accounts before descending; here tied accounts are walked one after the
  other, keeping the tie for their first child.)
"""

# The kernels are typed by numba when compiled; mypy sees untyped functions.
# mypy: disable-error-code="no-untyped-def, no-untyped-call"

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["age_factor", "classic_fairshare", "decay_usage", "fair_tree", "job_priority",
           "level_shares"]

MAX_PRIORITY = 4294967295.0
"""The largest priority Slurm stores (2^32 - 1)."""


@njit(cache=True)
def age_factor(waited, max_age):
    """The age factor of a job that has waited ``waited`` seconds."""
    if max_age <= 0 or waited >= max_age:
        return 1.0
    return max(waited, 0) / max_age


@njit(cache=True)
def job_priority(static, w_age, waited, max_age, w_fs, fs):
    """The integer priority: the weighted factors summed, at least 1, at most 2^32 - 1."""
    p = static + w_age * age_factor(waited, max_age) + w_fs * fs
    if p < 1.0:
        p = 1.0
    if p > MAX_PRIORITY:
        p = MAX_PRIORITY
    return np.floor(p)


@njit(cache=True)
def decay_usage(usage, new, parent, factor):
    """Decay ``usage`` by ``factor`` and add ``new`` usage (already decayed), each
    association's own usage reaching every association above it; ``new`` is cleared.
    Parents come before their children in the arrays."""
    for a in range(usage.shape[0] - 1, 0, -1):
        new[parent[a]] += new[a]
    for a in range(usage.shape[0]):
        usage[a] = usage[a] * factor + new[a]
        new[a] = 0.0


@njit(cache=True)
def level_shares(shares, parent):
    """Each association's shares summed with its siblings' (``level_shares``)."""
    total = np.zeros(shares.shape[0], dtype=np.float64)
    for a in range(1, shares.shape[0]):
        total[parent[a]] += shares[a]
    out = np.zeros(shares.shape[0], dtype=np.float64)
    for a in range(1, shares.shape[0]):
        out[a] = total[parent[a]]
    return out


@njit(cache=True)
def classic_fairshare(usage, shares, level, parent, out):
    """Classic fair-share factors of every association into ``out``."""
    n = usage.shape[0]
    ue = np.empty(n, dtype=np.float64)
    norm = np.empty(n, dtype=np.float64)
    ue[0] = 1.0
    norm[0] = 1.0
    root = usage[0]
    for a in range(1, n):
        p = parent[a]
        un = min(usage[a] / root, 1.0) if root > 0 else 0.0
        if level[a] > 0:
            ue[a] = un + (ue[p] - un) * (shares[a] / level[a])
            norm[a] = norm[p] * shares[a] / level[a]
        else:
            ue[a] = ue[p]
            norm[a] = 0.0
        out[a] = 2.0 ** (-ue[a] / norm[a]) if norm[a] > 0 else 0.0


@njit(cache=True)
def fair_tree(usage, shares, level, parent, is_user, out):
    """Fair Tree factors of every user association into ``out`` (accounts get 0)."""
    n = usage.shape[0]
    lfs = np.zeros(n, dtype=np.float64)
    users = 0
    for a in range(1, n):
        users += 1 if is_user[a] else 0
        s = shares[a] / level[a] if level[a] > 0 else 0.0
        pu = usage[parent[a]]
        u = usage[a] / pu if pu > 0 else 0.0
        lfs[a] = 0.0 if s == 0 else (np.inf if u == 0 else s / u)
    # siblings sorted: by parent, then level_fs high to low, then users first
    order = np.argsort(np.where(is_user, 0, 1), kind="mergesort")
    order = order[np.argsort(-lfs[order], kind="mergesort")]
    order = order[np.argsort(parent[order], kind="mergesort")]
    first = np.full(n + 1, n, dtype=np.int64)  # children of a: order[first[a]:first[a+1]]
    count = np.zeros(n + 1, dtype=np.int64)
    for a in range(1, n):
        count[parent[a]] += 1
    pos = 1  # order[0] is root (parent -1 sorts first)
    for a in range(n):
        first[a] = pos
        pos += count[a]
    first[n] = pos
    tied = np.zeros(n, dtype=np.bool_)
    stack = np.empty(n + 1, dtype=np.int64)
    top = 0
    stack[0] = 0
    top = 1
    rank = users
    left = users
    while top > 0:
        top -= 1
        a = stack[top]
        if a > 0 and is_user[a]:
            if not tied[a]:
                rank = left
            out[a] = rank / users if users else 0.0
            left -= 1
            continue
        lo, hi = first[a], first[a] + count[a]
        for i in range(lo, hi):
            c = order[i]
            tied[c] = (tied[a] and a > 0) if i == lo else lfs[order[i - 1]] == lfs[c]
        for i in range(hi - 1, lo - 1, -1):  # pushed backwards: walked in sorted order
            stack[top] = order[i]
            top += 1
