"""What a cluster user can type cannot steer ``advise`` (issue 38), without Slurm: squeue's
text read field by field with checks, hostile lines left out and named, every pending job
confirmed by a second reading (``squeue --json``), and the jobs left out named in the audit.
The same attacks on the real test Slurm are in test_slurm_advise.py."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from hpcpolicy.errors import SlurmError
from hpcpolicy.slurm.advise import AdviseConfig, Change, apply_changes, audit_skipped, plan_pass
from hpcpolicy.slurm.queue import (
    MAX_PRIORITY,
    SINFO_FORMAT,
    SQUEUE_FORMAT,
    Snapshot,
    cross_check,
    parse_snapshot,
)
from hpcpolicy.slurm.squeue_json import parse_squeue_json

NOW = 1_795_880_000
FORGED = 4294967000
SINFO = "\n".join(f"n{i}|16|0/16/0/16|batch*|idle" for i in range(1, 5))


def _line(job_id: int, limit: str = "10:00", priority: int | None = None, **over: str) -> str:
    """One squeue line in SQUEUE_FORMAT; ``over`` replaces fields by name."""
    fields = {"id": str(job_id), "state": "PENDING", "partition": "batch", "user": "ann",
              "submit": str(NOW - 100 + job_id), "start": "N/A", "cpus": "4", "nodes": "1",
              "limit": limit, "priority": str(1000 - job_id if priority is None else priority),
              "reason": "Priority"}
    fields.update(over)
    return "|".join(fields.values())


def _record(n: int, limit_min: int | None = 10, priority: Any = None,
            **over: Any) -> dict[str, Any]:
    """Job ``n`` as ``squeue --json`` gives it (with the fields a user types)."""
    rec = {"job_id": n, "job_state": "PENDING", "partition": "batch", "user_name": "ann",
           "submit_time": NOW - 100 + n, "cpus": 4, "node_count": 1,
           "time_limit": limit_min, "priority": 1000 - n if priority is None else priority,
           "state_reason": "Priority", "array_job_id": 0, "array_task_id": None,
           "array_task_string": "", "het_job_id": 0, "het_job_offset": 0,
           "account": f"physics|{NOW}|0|1|1|0:02|{FORGED}|priority", "name": "x\n1|PENDING"}
    rec.update(over)
    return rec


def _json(*records: dict[str, Any]) -> str:
    return json.dumps({"meta": {}, "errors": [], "jobs": list(records)})


def _snap(*lines: str) -> Snapshot:
    return parse_snapshot("\n".join(lines) + "\n", SINFO, now=NOW)


def test_the_formats_ask_for_no_field_a_user_types() -> None:
    typed = {"%a", "%j", "%k", "%o", "%Z", "%w", "%E", "%f", "%y"}  # account, name, comment...
    for fmt in (SQUEUE_FORMAT, SINFO_FORMAT):
        assert not set(re.findall(r"%[A-Za-z]", fmt)) & typed, fmt


def test_a_line_with_forged_fields_is_left_out_named_and_the_rest_is_read() -> None:
    # what an account of 'physics|<epoch>|0|1|1|0:02|4294967000|priority' would print if the
    # format held it, and a newline in a typed field forging a second line for job 1
    shifted = _line(2).replace("|ann|", f"|ann|physics|{NOW}|0|1|1|0:02|{FORGED}|priority|")
    snap = _snap(_line(1), shifted, _line(3), _line(1, priority=FORGED))
    assert [j.job_id for j in snap.pending] == ["3"]
    assert {s.job_id: s.why for s in snap.skipped}.keys() == {"1", "2"}
    assert "19 fields where squeue prints 11" in snap.skipped[0].why
    assert "several lines" in snap.skipped[1].why
    assert FORGED not in [j.priority for j in snap.pending]


@pytest.mark.parametrize(("field", "value", "named"), [
    ("id", "12;rm", "job id"), ("state", "PWNED", "state"), ("partition", "batch x", "partition"),
    ("user", "ann bob", "user"), ("submit", str(NOW + 10 * 86400), "submit time"),
    ("submit", "0", "submit time"), ("submit", "-5", "submit time"),
    ("cpus", "-4", "cpus"), ("cpus", "4e9", "cpus"), ("nodes", "99999999", "nodes"),
    ("limit", "soon", "time limit"), ("priority", str(MAX_PRIORITY + 1), "priority"),
    ("priority", "٣", "priority"), ("priority", "9" * 5000, "priority"),
    ("reason", "\x1b[31mPriority", "reason"),
    ("start", "yesterday", "expected start time"),
])
def test_each_field_out_of_its_type_or_range_leaves_that_job_out(field: str, value: str,
                                                                  named: str) -> None:
    hostile: dict[str, Any] = {field: value}
    snap = _snap(_line(1), _line(2, **hostile))
    assert [j.job_id for j in snap.pending] == ["1"]
    (skipped,) = snap.skipped
    assert skipped.job_id == (None if field == "id" else "2")
    assert f": {named} " in skipped.why and skipped.why.endswith("left out")
    assert "\n" not in skipped.describe()


def test_a_running_job_needs_a_start_time() -> None:
    snap = _snap(_line(1), _line(2, state="RUNNING", start="N/A"))
    assert [s.job_id for s in snap.skipped] == ["2"] and not snap.running


def test_the_second_reading_refuses_a_job_whose_fields_differ() -> None:
    # job 2's text claims a forged priority and 2-second limit; Slurm's JSON says otherwise
    snap = _snap(_line(1), _line(2, limit="0:02", priority=FORGED), _line(3))
    confirmed = cross_check(snap, parse_squeue_json(_json(_record(1), _record(2), _record(3))))
    assert [j.job_id for j in confirmed.pending] == ["1", "3"]
    (refused,) = confirmed.skipped
    assert refused.job_id == "2" and "time limit (s) as 2, `squeue --json` as 600" in refused.why
    plan = plan_pass(AdviseConfig(policy="sjf"), confirmed)
    assert FORGED not in [c.after for c in plan.changes] + [c.before for c in plan.changes]


@pytest.mark.parametrize(("records", "why"), [
    ([_record(1)], "does not list it"),
    ([_record(1), _record(2, priority="high")], "gives priority 'high', not a count"),
    ([_record(1), _record(2, cpus=True)], "gives cpus 'True', not a count"),
    ([_record(1), {k: v for k, v in _record(2).items() if k != "submit_time"}],
     "gives no submit_time"),
    ([_record(1), _record(2), _record(2)], "lists it twice"),
    ([_record(1), _record(2, priority=0, state_reason="JobHeldUser")], "priority as 998"),
    ([_record(1), _record(2, job_state="RUNNING")], "state as 'PENDING'"),
])
def test_only_the_job_the_second_reading_does_not_confirm_is_refused(
        records: list[dict[str, Any]], why: str) -> None:
    snap = cross_check(_snap(_line(1), _line(2)), parse_squeue_json(_json(*records)))
    assert [j.job_id for j in snap.pending] == ["1"]
    assert [s.job_id for s in snap.skipped] == ["2"] and why in snap.skipped[0].why


def test_ids_of_arrays_and_heterogeneous_jobs_match_between_the_readings() -> None:
    snap = _snap(_line(5, id="5_[0-3%2]"), _line(6, id="6_1"), _line(7, id="7+1"))
    facts = parse_squeue_json(_json(
        _record(5, array_job_id=5, array_task_string="0-3%2"),
        _record(6, job_id=61, array_job_id=6, array_task_id=1),
        _record(7, job_id=71, het_job_id=7, het_job_offset=1)))
    assert [j.job_id for j in cross_check(snap, facts).pending] == ["5_[0-3]", "6_1", "7+1"]


def test_json_that_is_not_squeue_s_is_one_line() -> None:
    with pytest.raises(SlurmError, match=r"^`squeue --json` printed something else"):
        parse_squeue_json("squeue: unrecognized option '--json'")
    with pytest.raises(SlurmError, match=r"^Slurm is not reachable: `squeue --json` reported"):
        parse_squeue_json(json.dumps({"errors": [{"description": "timeout"}], "jobs": []}))


def test_the_jobs_left_out_are_named_in_the_audit(tmp_path: Path) -> None:
    audit = tmp_path / "a.jsonl"
    snap = _snap(_line(1), _line(2, cpus="-4"))
    audit_skipped(AdviseConfig(policy="sjf", apply=True, audit=str(audit)), snap.skipped)
    (record,) = [json.loads(line) for line in audit.read_text().splitlines()]
    assert (record["action"], record["job_id"], record["policy"]) == ("skip", "2", "sjf")
    assert "cpus '-4'" in record["why"]


def test_a_failure_that_is_not_the_job_s_stops_the_updates(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    # one job's refusal is recorded and the pass goes on; scontrol missing (as Slurm
    # unreachable or too slow) would fail every job alike, so it ends the pass, unrecorded
    audit = tmp_path / "a.jsonl"
    monkeypatch.setenv("PATH", str(tmp_path))
    changes = (Change("1", "batch", 5, 6, 0), Change("2", "batch", 6, 5, 1))
    with pytest.raises(SlurmError, match=r"^`scontrol` not found on PATH"):
        apply_changes(changes, AdviseConfig(policy="sjf", apply=True, audit=str(audit)))
    assert not audit.exists()


def test_later_slurm_json_with_wrapped_numbers_and_state_lists_is_read_the_same() -> None:
    def wrapped(n: int | None) -> dict[str, Any]:
        return {"set": n is not None, "infinite": False, "number": n or 0}

    later = _record(2, job_state=["PENDING"], priority=wrapped(998), cpus=wrapped(4),
                    submit_time=wrapped(NOW - 98), node_count=wrapped(1),
                    limit_min=None, time_limit={"set": True, "infinite": True, "number": 0})
    unset = _record(3, priority=wrapped(None))
    snap = _snap(_line(2, limit="UNLIMITED"), _line(3))
    checked = cross_check(snap, parse_squeue_json(_json(later, unset)))
    assert [j.job_id for j in checked.pending] == ["2"]
    (refused,) = checked.skipped
    assert refused.job_id == "3" and "gives priority 'None', not a count" in refused.why
