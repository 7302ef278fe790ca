"""Reason codes for rejected and repaired rows, documented in one place.

Every row the ingest pipeline does not keep as a job is either a folded step
(:data:`hpcpolicy.ingest.plan.STEP_FOLDED`) or a reject with one of the codes below; every
repaired row is counted under a repair code. ``hpcpolicy ingest --help`` and the README list
them from here.
"""

from __future__ import annotations

__all__ = ["REJECT_REASONS", "REPAIR_RULES", "describe"]

REJECT_REASONS: dict[str, str] = {
    "field_count": "the row has a different number of fields than the header/format says",
    "bad_number": "a numeric field does not parse as a number",
    "bad_timestamp": "a timestamp does not parse",
    "bad_duration": "a duration does not parse ([D-]HH:MM:SS, MM:SS, UNLIMITED, ...)",
    "no_submit_time": "the submit time is missing, so the job cannot be placed in time",
    "end_before_start": "the end time is before the start time",
    "start_before_submit": "the start time is before the submit time",
    "absurd_value": "a value is outside any plausible range (e.g. negative or > 10^12)",
    "no_job_id": "the job id is missing or malformed",
    "duplicate_superseded": "an earlier record of a job that appears again later (requeue, "
    "sacct --duplicates); the last record is kept",
    "orphan_step": "a step row whose job row is not in the file",
    "non_utf8": "the row holds bytes that are not valid UTF-8",
    "swf_bad_status": "the SWF status field is not a whole number from -1 to 5",
    "swf_fractional_id": "an SWF id field (user, group, executable, queue, partition, "
    "preceding job) is not a whole number",
}

REPAIR_RULES: dict[str, str] = {
    "swf_fraction_rounded": "a fractional SWF time or processor count was rounded to the "
    "nearest whole number (ties to even)",
    "swf_zero_request": "an SWF request of 0 processors or 0 seconds was read as unknown",
    "swf_mem_by_alloc": "SWF memory per processor was multiplied by the allocated processors, "
    "the requested count being unknown",
}


def describe(code: str) -> str:
    """The documented meaning of a reject or repair code (the code itself if unknown)."""
    return REJECT_REASONS.get(code) or REPAIR_RULES.get(code) or code
