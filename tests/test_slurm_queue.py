"""Reading squeue/sinfo (hpcpolicy.slurm.queue) and the ranking arithmetic of advise, on
hand-written lines in the formats advise asks Slurm 22.05 for (no Slurm needed)."""

from __future__ import annotations

import pytest

from hpcpolicy.errors import SlurmError
from hpcpolicy.slurm.advise import AdviseConfig, plan_pass
from hpcpolicy.slurm.queue import NO_LIMIT_S, Snapshot, limit_seconds, parse_snapshot


def _job(job_id: int | str, state: str = "PENDING", limit: str = "10:00",
         priority: int | None = None, reason: str = "Priority") -> str:
    """One line of squeue --format=SQUEUE_FORMAT (id|state|partition|user|submit|start|cpus|
    nodes|limit|priority|reason)."""
    n = int(str(job_id).split("_")[0].split("+")[0])
    start = 990 if state == "RUNNING" else "N/A"
    prio = 100 - n if priority is None else priority
    return f"{job_id}|{state}|batch|ann|{1000 + n}|{start}|4|1|{limit}|{prio}|{reason}"


SINFO = "\n".join(f"n{i}|16|0/16/0/16|batch*|idle" for i in range(1, 5))


def _snap(*jobs: str) -> Snapshot:
    return parse_snapshot("\n".join(jobs) + "\n", SINFO, now=2000)


def test_pending_and_running_are_picked_out_and_ids_written_as_scontrol_takes_them() -> None:
    snap = _snap(_job(1), _job(2, "RUNNING"), _job("4_2"), _job("5+1"), _job("6_[3-9%2]"),
                 _job(7, limit="UNLIMITED"))
    assert [j.job_id for j in snap.pending] == ["1", "4_2", "5+1", "6_[3-9]", "7"]
    assert [j.job_id for j in snap.running] == ["2"]
    assert snap.running[0].start == 990 and snap.pending[0].start == 0
    assert snap.pending[0].limit_s == 600 and snap.pending[-1].limit_s == NO_LIMIT_S
    assert snap.total_cores(("batch",)) == 64


def test_time_limits_in_every_form_squeue_prints() -> None:
    assert [limit_seconds(t) for t in ("1:00", "59:00", "1:01:00", "1-00:00:00", "UNLIMITED")
            ] == [60, 3540, 3660, 86400, NO_LIMIT_S]


def test_a_node_in_two_partitions_is_one_node() -> None:
    sinfo = "n1|16|4/12/0/16|batch*|mixed\nn2|16|0/16/0/16|batch*|idle\nn2|16|0/16/0/16|short|idle"
    snap = parse_snapshot("", sinfo, now=0)
    assert [(n.name, n.partitions, n.alloc_cpus) for n in snap.nodes] == [
        ("n1", ("batch",), 4), ("n2", ("batch", "short"), 0)]
    assert snap.total_cores(("short",)) == 16 and snap.total_cores(()) == 32


def test_output_in_another_format_is_one_error_quoting_the_line() -> None:
    with pytest.raises(SlurmError, match="`squeue` printed a line advise cannot read: 'JOBID"):
        parse_snapshot("JOBID PARTITION NAME\n", SINFO, now=0)
    with pytest.raises(SlurmError, match="`sinfo` printed a line"):
        parse_snapshot(_job(1), "n1 16 idle", now=0)


def test_plan_hands_out_the_jobs_own_priorities_in_policy_order() -> None:
    # limits 30, 10, 20 min; priorities 99, 98, 97 (FIFO): sjf hands 99 to job 2, 98 to 3
    snap = _snap(_job(1, limit="30:00"), _job(2, limit="10:00"), _job(3, limit="20:00"),
                 _job(8, priority=0, reason="JobHeldUser"))
    result = plan_pass(AdviseConfig(policy="sjf"), snap)
    assert [j.job_id for j in result.ranked] == ["2", "3", "1"]
    assert {c.job_id: c.after for c in result.changes} == {"2": 99, "3": 98, "1": 97}
    assert result.held == 1
    assert all(s >= 2000 for s in result.predicted_start)


def test_equal_priorities_become_distinct_and_never_zero() -> None:
    snap = _snap(_job(1, limit="30:00", priority=1), _job(2, limit="10:00", priority=1))
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

    from hpcpolicy.learn.export import export_policy
    from hpcpolicy.learn.networks import ActorCritic

    torch.manual_seed(0)
    folder = export_policy(ActorCritic(7, 7), Path(str(tmp_path)) / "policy", k=4, metrics={},
                           config={"algo": "ppo", "seed": 0, "hidden": [16],
                                   "activation": "tanh"},
                           provenance={"reward": "bsld", "training_data": None})
    # squeue lists by priority, here the reverse of submit order
    snap = _snap(*[_job(i, limit=f"{5 * (i % 4 + 1)}:00") for i in range(10, 0, -1)])
    assert [j.job_id for j in snap.pending] == [str(i) for i in range(1, 11)]
    first = plan_pass(AdviseConfig(policy=str(folder)), snap)
    again = plan_pass(AdviseConfig(policy=str(folder)), snap)
    assert sorted(j.job_id for j in first.ranked) == sorted(str(i) for i in range(1, 11))
    assert [j.job_id for j in first.ranked] == [j.job_id for j in again.ranked]


def test_advise_config_checks_its_fields() -> None:
    with pytest.raises(Exception, match="max_changes"):
        AdviseConfig(policy="sjf", max_changes=0)
    with pytest.raises(Exception, match="--apply needs --audit FILE"):
        AdviseConfig(policy="sjf", apply=True)
