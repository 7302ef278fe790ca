"""Verdict rules (issue 29 item 6): better is better even when some group loses, mixed only when
another metric is clearly worse, and an unclear primary metric whose resamples mostly land on
the bad side is called *likely worse*; the headline stays short."""

from __future__ import annotations

from typing import Any

from hpcpolicy.whatif.compare import METRICS
from hpcpolicy.whatif.verdicts import comparison_verdict, headline, verdict_phrase


def _row(key: str, verdict: str, share_better: float | None = None,
         rel: float = -0.2) -> dict[str, Any]:
    better = share_better if share_better is not None else \
        {"better": 1.0, "worse": 0.0}.get(verdict, 0.5)
    return {"key": key, "baseline": 10.0, "candidate": 10.0 * (1 + rel), "diff": 10.0 * rel,
            "rel_diff": rel, "ci_low": -1.0, "ci_high": 1.0, "rel_ci_low": rel - 0.1,
            "rel_ci_high": rel + 0.1, "rel_note": None, "verdict": verdict,
            "share_better": better, "share_worse": 1 - better, "share_tied": 0.0,
            "windows_better": 0}


def _rows(primary: dict[str, Any], other: str = "better") -> list[dict[str, Any]]:
    return [primary, *(_row(m.key, other) for m in METRICS[1:])]


def test_better_on_every_metric_is_better_even_with_losing_groups() -> None:
    assert comparison_verdict(METRICS, _rows(_row("mean_bsld", "better")), "mean_bsld") \
        == "better"


def test_better_on_the_primary_but_clearly_worse_elsewhere_is_mixed() -> None:
    rows = _rows(_row("mean_bsld", "better"))
    rows[2] = _row("p95_wait_s", "worse", rel=0.3)
    assert comparison_verdict(METRICS, rows, "mean_bsld") == "mixed"


def test_an_unclear_primary_mostly_on_the_bad_side_is_likely_worse() -> None:
    # the case: +100 % mean bsld, interval -23 % .. +317 %
    primary = _row("mean_bsld", "no clear difference", share_better=0.08, rel=1.0)
    rows = _rows(primary, other="no clear difference")
    assert comparison_verdict(METRICS, rows, "mean_bsld") == "likely worse"
    assert "most likely worse" in verdict_phrase("likely worse", primary)
    assert "92%" in verdict_phrase("likely worse", primary)


def test_an_even_split_is_no_clear_difference() -> None:
    rows = _rows(_row("mean_bsld", "no clear difference", share_better=0.55),
                 other="no clear difference")
    assert comparison_verdict(METRICS, rows, "mean_bsld") == "no clear difference"


def test_mostly_good_side_is_likely_better() -> None:
    rows = _rows(_row("mean_bsld", "no clear difference", share_better=0.9),
                 other="no clear difference")
    assert comparison_verdict(METRICS, rows, "mean_bsld") == "likely better"


def test_worse_on_the_primary_is_worse() -> None:
    rows = _rows(_row("mean_bsld", "worse", rel=0.4), other="no clear difference")
    assert comparison_verdict(METRICS, rows, "mean_bsld") == "worse"


def test_the_headline_is_short() -> None:
    results = [("as-logged", "sjf+easy", "better", _row("mean_bsld", "better", rel=-0.52)),
               ("as-logged", "f1+easy", "likely worse",
                _row("mean_bsld", "no clear difference", 0.1, 1.0))]
    text = headline("fcfs+easy", METRICS[0], {"as-logged": "as logged"}, results,
                    confidence=0.95)["sentence"]
    assert text == ("Against fcfs+easy on mean bounded slowdown. As logged: best sjf+easy, "
                    "better (-52%, 95% CI -62% .. -42%); f1+easy likely worse (+100%).")


def test_one_more_loser_reads_in_the_singular() -> None:
    from hpcpolicy.whatif.verdicts import SHOWN_LOSERS, tradeoffs

    group = {"jobs": 40, "baseline_mean_wait_s": 3600.0, "candidate_mean_wait_s": 7200.0,
             "diff_mean_wait_s": 3600.0}
    losers = [{**group, "name": f"u{i}"} for i in range(SHOWN_LOSERS + 1)]
    found = tradeoffs(METRICS, [_row(m.key, "better") for m in METRICS], "mean_bsld",
                      {"user": losers}, 0.95)
    assert found[-1] == "1 more user also waits materially longer"
