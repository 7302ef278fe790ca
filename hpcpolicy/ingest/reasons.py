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
    "duplicate_superseded": "an earlier record of a job id that appears again later in the "
    "log (requeue, sacct --duplicates, a job repeated in an SWF or GPU log, a file given "
    "twice, SWF and sacct of one machine); the last record is kept",
    "orphan_step": "a step row whose job row is not in the file",
    "non_utf8": "the row holds bytes that are not valid UTF-8",
    "control_chars": "the row holds nearly every ASCII control character (binary data, not a "
    "line of text)",
    "swf_bad_status": "the SWF status field is not a whole number from -1 to 5",
    "swf_fractional_id": "an SWF id field (user, group, executable, queue, partition, "
    "preceding job) is not a whole number",
    "swf_long_id": "an SWF user, group, executable, queue or partition id has more than 18 "
    "digits (ids of up to 18 digits are kept exact)",
    "bad_state": "the state, status or phase field is empty or a word the format does not "
    "define",
    "bad_gpu_share": "gpu_milli is outside 0..1000, 0 for a pod that requests GPUs, or above "
    "0 for one that requests none",
}

REPAIR_RULES: dict[str, str] = {
    "swf_fraction_rounded": "a fractional SWF time or processor count was rounded to the "
    "nearest whole number (ties to even)",
    "swf_zero_request": "an SWF request of 0 processors or 0 seconds was read as unknown",
    "swf_mem_by_alloc": "SWF memory per processor was multiplied by the allocated processors, "
    "the requested count being unknown",
    "sacct_name_rejoined": "a |-separated row had more fields than the header, and the "
    "export's one free-text column (JobName, ...) comes after the job id: the extra fields "
    "were joined back into that text, its | kept",
    "sacct_array_grouped": "a pending job array printed as one row (123_[5-9%2]) is kept as "
    "one job; its tasks are not expanded",
    "sacct_walltime_unset": "Timelimit UNLIMITED, Partition_Limit, INVALID or 0: "
    "req_walltime_s left null",
    "sacct_mem_whole_node": "ReqMem 0n/0c (all the memory of each node, a size the log does "
    "not give): req_mem_mib left null",
    "sacct_zero_request": "ReqCPUS or ReqNodes of 0 (Slurm's 'not set') stored as null",
    "sacct_state_unrecognised": "an empty or unknown State word stored as state 'unknown'",
    "sacct_ambiguous_local_time": "a local time in the repeated hour of a clock change was "
    "read as the earlier of the two instants",
    "sacct_run_time_estimated": "no Start/End/Elapsed: run_time_s estimated as "
    "CPUTimeRAW / ReqCPUS",
    "sacct_wait_time_estimated": "no Start: wait_time_s estimated as ResvCPURAW / ReqCPUS "
    "(counted from eligibility)",
    "sacct_run_time_over_limit": "CPUTimeRAW / ReqCPUS exceeds the time limit (more CPUs "
    "were allocated than requested): run_time_s is the limit for TIMEOUT jobs, else null",
    "gpu_zero_request": "a GPU trace's request of 0 CPUs or 0 nodes (not set) stored as null",
    "gpu_ambiguous_local_time": "a GPU trace's local time in the repeated hour of a clock "
    "change was read as the earlier of the two instants",
    "gpu_running_at_end": "a Helios or Philly job with a start time and no end: stored as "
    "running (it had not ended when the log was taken); run_time_s null",
    "alibaba_cpus_rounded_up": "cpu_milli is not a whole number of CPUs: req_cpus is it "
    "rounded up (3152 milli-CPUs -> 4 CPUs)",
}


def describe(code: str) -> str:
    """The documented meaning of a reject or repair code (the code itself if unknown)."""
    return REJECT_REASONS.get(code) or REPAIR_RULES.get(code) or code
