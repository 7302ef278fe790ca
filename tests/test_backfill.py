"""The pure backfilling functions, on hand-built snapshots whose answers were worked out by hand.

Snapshot notation: one node group of 4 cores unless said otherwise; demands are (cores, 0, 0, 0).
"""

from __future__ import annotations

import numpy as np
import pytest

from hpcpolicy.sim.backfill import (
    Profile,
    RunningSlot,
    conservative_backfill,
    easy_backfill,
    planned_end,
    shadow_time,
)


def cores(*per_job: int | list[int]) -> np.ndarray:
    """need[job, group, :] from core counts (a list per job for several groups, -1 = cannot)."""
    rows = [[c] if isinstance(c, int) else c for c in per_job]
    need = np.zeros((len(rows), len(rows[0]), 4), dtype=np.int64)
    for j, row in enumerate(rows):
        for g, c in enumerate(row):
            need[j, g] = (c, 0, 0, 0) if c >= 0 else (-1, -1, -1, -1)
    return need


def free(*per_group: int) -> np.ndarray:
    return np.array([[c, 0, 0, 0] for c in per_group], dtype=np.int64)


def slot(req_end: int, n: int, group: int = 0) -> RunningSlot:
    return RunningSlot(req_end, group, np.array([n, 0, 0, 0], dtype=np.int64))


def test_planned_end_of_a_job_past_its_request_is_one_second_from_now() -> None:
    assert planned_end(slot(50, 1), now=10) == 50
    assert planned_end(slot(50, 1), now=50) == 51
    assert planned_end(slot(50, 1), now=80) == 81


def test_shadow_time_counts_every_job_ending_at_the_shadow_time() -> None:
    # Free 1; two jobs of 1 and 2 cores both end at 30: the head (3) fits at 30 with 1 extra.
    t, g, extra = shadow_time(0, cores(3)[0], free(1), [slot(30, 1), slot(30, 2), slot(90, 1)])
    assert (t, g, extra.tolist()) == (30, 0, [1, 0, 0, 0])


def test_shadow_time_picks_the_group_where_the_head_fits_first() -> None:
    # The head can use either group; group 1 frees enough at 20, group 0 only at 40.
    head = cores([2, 2])[0]
    t, g, extra = shadow_time(0, head, free(0, 1), [slot(40, 4, 0), slot(20, 1, 1)])
    assert (t, g, extra[0]) == (20, 1, 0)


def test_easy_starts_a_job_that_ends_by_the_shadow_time() -> None:
    # Head 0 needs 4, 2 free until 100. Job 1 (2 cores, 100 s) ends exactly at the shadow.
    plan = easy_backfill(0, [0, 1], cores(4, 2), np.array([10, 100]), free(2), [slot(100, 2)])
    assert plan.starts == [(1, 0)] and plan.shadow == 100


def test_easy_refuses_a_job_that_would_delay_the_head() -> None:
    # Same, but job 1 runs 101 s and there is no extra core at the shadow time.
    plan = easy_backfill(0, [0, 1], cores(4, 2), np.array([10, 101]), free(2), [slot(100, 2)])
    assert plan.starts == []


def test_easy_extra_resources_rule() -> None:
    # Head 0 needs 3; 2 free now, 2 more at 100: shadow 100 with 1 extra core.
    # Job 1 (1 core, 500 s) runs past the shadow but fits in the extra core: it starts.
    # Job 2 (1 core, 500 s) would need a second extra core: it waits.
    # Job 3 (2 cores, 5 s) would end in time but does not fit in the one free core left.
    need = cores(3, 1, 1, 2)
    length = np.array([10, 500, 500, 5])
    plan = easy_backfill(0, [0, 1, 2, 3], need, length, free(2), [slot(100, 2)])
    assert plan.starts == [(1, 0)]
    assert plan.extra[0] == 0


def test_easy_extra_resources_are_not_spent_by_jobs_ending_in_time() -> None:
    # 2 free, head needs 3 at 100 (extra 1). Job 1 ends by 100 (1 core), job 2 runs long
    # (1 core): both start, the short one does not use up the extra core.
    need = cores(3, 1, 1)
    plan = easy_backfill(0, [0, 1, 2], need, np.array([10, 50, 500]), free(2), [slot(100, 2)])
    assert plan.starts == [(1, 0), (2, 0)]


def test_easy_lets_a_job_run_in_another_group_than_the_head() -> None:
    # Head 0 only fits group 0 (reserved at 100); job 1 can use group 1 for as long as it likes.
    need = cores([4, -1], [2, 2])
    plan = easy_backfill(0, [0, 1], need, np.array([10, 1000]), free(0, 2),
                         [slot(100, 4, 0)])
    assert (plan.group, plan.starts) == (0, [(1, 1)])


def test_easy_scans_in_queue_order() -> None:
    # Two equally good candidates for the only free core: the earlier in the queue wins.
    need = cores(4, 1, 1)
    plan = easy_backfill(0, [0, 2, 1], need, np.array([5, 10, 10]), free(1), [slot(50, 3)])
    assert plan.starts == [(2, 0)]


def test_profile_steps_and_reservations() -> None:
    p = Profile(0, free(1), [slot(20, 2), slot(50, 1)])
    assert p.times.tolist() == [0, 20, 50]
    assert p.free[:, 0, 0].tolist() == [1, 3, 4]
    assert p.earliest(cores(3)[0], 10) == (20, 0)
    p.reserve(20, 10, 0, cores(3)[0][0])
    assert p.times.tolist() == [0, 20, 30, 50]
    assert p.free[:, 0, 0].tolist() == [1, 0, 3, 4]
    # A 2-core job of 25 s cannot start at 30 (it would need [30, 55)): 30 -> 3 free, ok;
    # 50 -> 4 free, ok: it fits at 30.
    assert p.earliest(cores(2)[0], 25) == (30, 0)
    # A 4-core job must wait for the end of everything: 50.
    assert p.earliest(cores(4)[0], 1) == (50, 0)


def test_conservative_protects_every_queued_job() -> None:
    # 1 free until 100 (3 cores end then). Head 0 (3 cores, 50 s) -> [100, 150).
    # Job 1 (4 cores) -> [150, 160). Job 2 (1 core, 200 s) would overlap job 1's
    # reservation, so it does not start now, although EASY (protecting only the head)
    # lets it use the head's extra core.
    need = cores(3, 4, 1)
    length = np.array([50, 10, 200])
    starts, res = conservative_backfill(0, [0, 1, 2], need, length, free(1), [slot(100, 3)])
    assert starts == []
    assert res == {0: (100, 0), 1: (150, 0), 2: (160, 0)}
    assert easy_backfill(0, [0, 1, 2], need, length, free(1), [slot(100, 3)]).starts == [(2, 0)]


def test_conservative_starts_jobs_that_fit_in_holes() -> None:
    # Job 1 (1 core, 90 s) fits before the head's reservation at 100.
    need = cores(3, 1)
    starts, res = conservative_backfill(0, [0, 1], need, np.array([50, 90]), free(1),
                                        [slot(100, 3)])
    assert starts == [(1, 0)]
    assert res[0] == (100, 0)


@pytest.mark.parametrize("fn", [easy_backfill, conservative_backfill])
def test_backfilling_does_not_modify_its_inputs(fn: object) -> None:
    f = free(2)
    need = cores(4, 1)
    fn(0, [0, 1], need, np.array([10, 10]), f, [slot(100, 2)])  # type: ignore[operator]
    assert f.tolist() == free(2).tolist() and need.tolist() == cores(4, 1).tolist()
