"""The safe-policy-improvement rule that decides a trained policy's guard."""

from __future__ import annotations

import pytest

from hpcpolicy.deploy.improvement import decide

FALLBACK = [4.0, 9.0, 2.5, 30.0, 6.0, 3.0, 12.0, 5.0]


def test_a_policy_better_on_every_window_is_deployed() -> None:
    d = decide([b * 0.8 for b in FALLBACK], FALLBACK)
    assert d["deploy"] and d["windows"] == 8 and d["upper_bound"] < 0 < -d["mean_difference"]


def test_a_policy_worse_on_validation_keeps_the_heuristic() -> None:
    assert not decide([b * 1.2 for b in FALLBACK], FALLBACK)["deploy"]


def test_a_gain_carried_by_one_window_is_not_confident() -> None:
    # a lower mean overall, but only thanks to one window; worse on all the others
    policy = [b + 0.5 for b in FALLBACK]
    policy[3] = 10.0
    d = decide(policy, FALLBACK)
    assert d["mean_difference"] < 0 and not d["deploy"]


def test_a_tie_or_a_single_window_keeps_the_heuristic() -> None:
    assert not decide(FALLBACK, FALLBACK)["deploy"]
    assert decide([1.0], [9.0]) == {"deploy": False, "windows": 1, "mean_difference": -8.0,
                                     "upper_bound": None, "confidence": 0.95}


def test_unpaired_windows_are_refused() -> None:
    with pytest.raises(ValueError, match="3 policy windows against 2"):
        decide([1.0, 2.0, 3.0], [1.0, 2.0])
