"""Reading squeue/sinfo --json (hpcpolicy.slurm.queue) and the ranking arithmetic of advise,
on hand-written documents in the shape Slurm 22.05 prints (no Slurm needed)."""

from __future__ import annotations

import json

import pytest

from hpcpolicy.errors import SlurmError
from hpcpolicy.slurm.advise import AdviseConfig, plan_pass
from hpcpolicy.slurm.queue import NO_LIMIT_S, parse_snapshot


def _job(job_id: int, state: str = "PENDING", limit: int | None = 10, **extra: object) -> dict:
    return {"job_id": job_id, "job_state": state, "partition": "batch", "user_name": "ann",
            "account": "physics", "submit_time": 1000 + job_id, "cpus": 4, "node_count": 1,
            "time_limit": limit, "priority": 100 - job_id, "state_reason": "Priority",
            "start_time": 990 if state == "RUNNING" else 0, "array_job_id": 0,
            "array_task_id": None, "het_job_id": 0, **extra}


SINFO = json.dumps({"errors": [], "nodes": [
    {"name": f"n{i}", "cpus": 16, "alloc_cpus": 0, "partitions": ["batch"], "state": "idle"}
    for i in range(1, 5)]})


def _snap(*jobs: dict) -> object:
    return parse_snapshot(json.dumps({"errors": [], "jobs": list(jobs)}), SINFO, now=2000)


def test_pending_and_running_are_picked_out_and_ids_written_as_scontrol_takes_them() -> None:
    snap = _snap(_job(1), _job(2, "RUNNING"), _job(3, "COMPLETED"),
                 _job(4, array_job_id=4, array_task_id=2), _job(5, het_job_id=5,
                                                             het_job_offset=1),
                 _job(6, array_job_id=6, array_task_string="3-9%2"), _job(7, limit=None))
    assert [j.job_id for j in snap.pending] == ["1", "4_2", "5+1", "6_[3-9]", "7"]
    assert [j.job_id for j in snap.running] == ["2"]
    assert snap.pending[0].limit_s == 600 and snap.pending[-1].limit_s == NO_LIMIT_S
    assert snap.total_cores(("batch",)) == 64


def test_a_failed_load_is_reported_not_read_as_an_empty_queue() -> None:
    bad = json.dumps({"errors": [{"description": "Failed while looking for jobs",
                                  "source": "slurm_load_jobs"}], "jobs": []})
    with pytest.raises(SlurmError, match="Slurm is not reachable: `squeue --json` reported"):
        parse_snapshot(bad, SINFO, now=0)
    with pytest.raises(SlurmError, match="not supported"):
        parse_snapshot("squeue: error", SINFO, now=0)


def test_plan_hands_out_the_jobs_own_priorities_in_policy_order() -> None:
    # limits 30, 10, 20 min; priorities 99, 98, 97 (FIFO): sjf hands 99 to job 2, 98 to 3
    snap = _snap(_job(1, limit=30), _job(2, limit=10), _job(3, limit=20),
                 _job(8, priority=0, state_reason="JobHeldUser"))
    result = plan_pass(AdviseConfig(policy="sjf"), snap)
    assert [j.job_id for j in result.ranked] == ["2", "3", "1"]
    assert {c.job_id: c.after for c in result.changes} == {"2": 99, "3": 98, "1": 97}
    assert result.held == 1
    assert all(s >= 2000 for s in result.predicted_start)


def test_equal_priorities_become_distinct_and_never_zero() -> None:
    snap = _snap(_job(1, limit=30, priority=1), _job(2, limit=10, priority=1))
    result = plan_pass(AdviseConfig(policy="sjf"), snap)
    after = {c.job_id: c.after for c in result.changes}
    prios = {j.job_id: after.get(j.job_id, j.priority) for j in result.ranked}
    assert prios["2"] > prios["1"] >= 1


def test_unknown_partition_names_the_ones_there_are() -> None:
    with pytest.raises(Exception, match="--partition gpu: no such partition"):
        plan_pass(AdviseConfig(policy="sjf", partitions=("gpu",)), _snap(_job(1)))


def test_a_trained_policy_folder_ranks_the_whole_queue(tmp_path: object) -> None:
    torch = pytest.importorskip("torch")
    pytest.importorskip("onnxruntime")
    from pathlib import Path

    from hpcpolicy.artifact import export_policy
    from hpcpolicy.rl.networks import ActorCritic

    torch.manual_seed(0)
    folder = export_policy(ActorCritic(7, 7), Path(str(tmp_path)) / "policy", k=4, metrics={},
                           config={"algo": "ppo", "seed": 0, "hidden": [16],
                                   "activation": "tanh"},
                           provenance={"reward": "bsld", "training_data": None})
    snap = _snap(*[_job(i, limit=5 * (i % 4 + 1)) for i in range(1, 11)])
    first = plan_pass(AdviseConfig(policy=str(folder)), snap)
    again = plan_pass(AdviseConfig(policy=str(folder)), snap)
    assert sorted(j.job_id for j in first.ranked) == sorted(str(i) for i in range(1, 11))
    assert [j.job_id for j in first.ranked] == [j.job_id for j in again.ranked]


def test_advise_config_checks_its_fields() -> None:
    with pytest.raises(Exception, match="max_changes"):
        AdviseConfig(policy="sjf", max_changes=0)
    with pytest.raises(Exception, match="--apply needs --audit FILE"):
        AdviseConfig(policy="sjf", apply=True)
