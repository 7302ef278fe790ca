"""Compiled data structures of the fast engine (numba), each on plain int64 arrays.

* a binary min-heap of (time, job) pairs — finish events by actual end;
* a sorted list of (time, job) pairs — running jobs by requested end, which EASY's shadow
  time and the conservative profile walk in order. Insertion and removal shift the shorter
  side of the list (a few hundred running jobs cost less this way than a heap walked in
  order, which was tried);
* a *rank tree*: a segment tree over the positions of a static policy's order (position =
  the job's rank), holding for each subtree the smallest core demand and the smallest planning
  length of the waiting jobs in it. The best waiting job is the first present leaf, and a
  backfilling scan jumps straight to the next job that could possibly start — it prunes every
  subtree whose jobs all need more cores than are free, or (for EASY) all run past the shadow
  time while needing more than the extra cores. On a trace with ten thousand waiting jobs
  that turns a linear scan per scheduling pass into a few tree descents;
* :func:`borrow`, which drops an array's reference-count handle (see its docstring).

No helper swaps array elements with a tuple assignment: numba compiles that into slow code.
"""

# The kernels are typed by numba when compiled; mypy sees untyped functions.
# mypy: disable-error-code="no-untyped-def, no-untyped-call"

from __future__ import annotations

import numpy as np
from numba import njit, types
from numba.extending import intrinsic
from numba.np.arrayobj import make_array, populate_array

__all__ = ["BIG", "borrow"]

BIG = np.int64(1) << np.int64(62)
"""Stands for +infinity in times, demands and tree minima."""


@intrinsic
def borrow(typingctx, arr):
    """The same array without its reference-count handle (meminfo = NULL).

    numba increments and decrements an array's reference count (an atomic operation) each
    time a function receives or passes it; in an event loop of millions of steps that cost
    more than the scheduling itself. A borrowed view skips it. The engine's entry points
    borrow every array for the duration of one call while the caller's namedtuples keep the
    arrays alive; nothing borrowed outlives the call.
    """
    if not isinstance(arr, types.Array):
        return None

    def codegen(context, builder, sig, args):
        src = make_array(sig.args[0])(context, builder, args[0])
        out = make_array(sig.return_type)(context, builder)
        populate_array(out, data=src.data, shape=src.shape, strides=src.strides,
                       itemsize=src.itemsize, meminfo=None)
        return out._getvalue()

    return arr(arr), codegen


# ---------------------------------------------------------------- (time, job) heap and list
@njit(cache=True, inline="always")
def before(ta, ja, tb, jb):
    """(ta, ja) < (tb, jb) lexicographically."""
    return ta < tb or (ta == tb and ja < jb)


@njit(cache=True, inline="always")
def heap_push(heap, size, t, j):
    """Push (t, j) on the heap stored in heap[0, :size] (times) and heap[1, :size] (jobs)."""
    i = size
    while i > 0:
        p = (i - 1) >> 1
        if not before(t, j, heap[0, p], heap[1, p]):
            break
        heap[0, i] = heap[0, p]
        heap[1, i] = heap[1, p]
        i = p
    heap[0, i] = t
    heap[1, i] = j
    return size + 1


@njit(cache=True, inline="always")
def heap_pop(heap, size):
    """Remove the smallest pair (read it at heap[:, 0] first); the new size."""
    size -= 1
    t, j = heap[0, size], heap[1, size]
    i = 0
    while True:
        c = 2 * i + 1
        if c >= size:
            break
        if c + 1 < size and before(heap[0, c + 1], heap[1, c + 1], heap[0, c], heap[1, c]):
            c += 1
        if not before(heap[0, c], heap[1, c], t, j):
            break
        heap[0, i] = heap[0, c]
        heap[1, i] = heap[1, c]
        i = c
    heap[0, i] = t
    heap[1, i] = j
    return size


@njit(cache=True, inline="always")
def _list_find(lst, lo, hi, t, j):
    while lo < hi:
        mid = (lo + hi) >> 1
        if before(lst[0, mid], lst[1, mid], t, j):
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True, inline="always")
def _move(lst, dst, src):
    lst[0, dst] = lst[0, src]
    lst[1, dst] = lst[1, src]


@njit(cache=True, inline="always")
def list_insert(lst, lo, hi, t, j):
    """Insert (t, j) into the sorted list lst[:, lo:hi]; the new (lo, hi).

    The buffer has room on both sides and the shorter side moves, so inserting (or removing)
    near either end is cheap: the earliest requested ends leave first, the latest arrive."""
    k = _list_find(lst, lo, hi, t, j)
    if k - lo < hi - k:
        for i in range(lo - 1, k - 1):
            _move(lst, i, i + 1)
        lo -= 1
        k -= 1
    else:
        for i in range(hi, k, -1):
            _move(lst, i, i - 1)
        hi += 1
    lst[0, k] = t
    lst[1, k] = j
    return lo, hi


@njit(cache=True, inline="always")
def list_remove(lst, lo, hi, t, j):
    """Remove (t, j) from the sorted list lst[:, lo:hi]; the new (lo, hi)."""
    k = _list_find(lst, lo, hi, t, j)
    if k - lo < hi - 1 - k:
        for i in range(k, lo, -1):
            _move(lst, i, i - 1)
        lo += 1
    else:
        for i in range(k, hi - 1):
            _move(lst, i, i + 1)
        hi -= 1
    return lo, hi


# ---------------------------------------------------------------- rank tree
@njit(cache=True, inline="always")
def tree_set(tree, pos, need, length):
    """Put a job (core demand ``need``, planning ``length``) at leaf ``pos``, or remove it
    (need = length = BIG). ``tree`` is (2, 2P): row 0 min demand, row 1 min length."""
    leaves = tree.shape[1] >> 1
    i = leaves + pos
    tree[0, i] = need
    tree[1, i] = length
    i >>= 1
    while i > 0:
        a, b = 2 * i, 2 * i + 1
        d, n = min(tree[0, a], tree[0, b]), min(tree[1, a], tree[1, b])
        if d == tree[0, i] and n == tree[1, i]:
            break  # the ancestors above are unchanged too
        tree[0, i] = d
        tree[1, i] = n
        i >>= 1


@njit(cache=True, inline="always")
def _candidate(tree, i, free, span, extra):
    d = tree[0, i]
    return d <= free and (tree[1, i] <= span or d <= extra)


@njit(cache=True, inline="always")
def tree_find(tree, lo, free, span, extra):
    """First leaf position >= lo holding a job that needs at most ``free`` cores and either
    runs at most ``span`` seconds or needs at most ``extra`` cores; -1 if none.

    ``tree_find(tree, lo, BIG - 1, BIG, -1)`` is the first waiting job at or after ``lo``.
    """
    leaves = tree.shape[1] >> 1
    if lo >= leaves:
        return -1
    i = leaves + lo
    while True:
        if _candidate(tree, i, free, span, extra):
            if i >= leaves:
                return i - leaves
            i = 2 * i
            continue
        while i & 1:
            i >>= 1
        if i == 0:
            return -1
        i += 1
