"""``hpcpolicy advise`` against the real test Slurm (no mock scheduler): ranking, --apply,
the audit file, --restore, held jobs, the rate limit, refusals, a slurmctld restart under
--watch, a failed update in the middle of a pass, and an unprivileged user's accounts made to
look like squeue's fields (issue 38). Only the case of an squeue that prints something else
than asked uses a stub, on PATH."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import invoke, one_line_error

from hpcpolicy.slurm.advise import AdviseConfig, advise_pass, apply_changes

pytestmark = pytest.mark.slurm

LIMITS = (4, 1, 3, 2)
"""Time limits (min) of the four waiting jobs, in submit order; sjf starts them as 1, 2, 3, 4."""
FORGED = 4294967000
"""A priority above every job's, as an intruder's account text claims it (issue 38)."""


def _sbatch(env: dict[str, str], *args: str, user: str | None = None) -> str:
    as_user = [] if user is None else ["setpriv", f"--reuid={user}", f"--regid={user}",
                                       "--clear-groups"]
    out = subprocess.run([*as_user, "sbatch", "--parsable", "--output=/dev/null",
                          "--chdir=/tmp", *args], env=env, capture_output=True, text=True,
                         check=True).stdout
    return out.strip().split(";")[0]


def _priorities(env: dict[str, str], ids: list[str]) -> dict[str, int]:
    out = subprocess.run(["squeue", "-h", "-o", "%i %Q", "-j", ",".join(ids)], env=env,
                         capture_output=True, text=True, check=True).stdout
    return {i: int(p) for i, p in (line.split() for line in out.strip().split("\n") if line)}


class Queue:
    """A blocker holding all 64 cores of ``batch`` and four 64-core jobs waiting behind it
    (one per limit of :data:`LIMITS`), one held job, and one pending job of ``short``."""

    def __init__(self, env: dict[str, str], blocker_s: int = 30) -> None:
        self.env = env
        self.blocker = _sbatch(env, "-p", "batch", "-n", "64", "-t", "2", "--wrap",
                               f"sleep {blocker_s}")
        self.waiting = [_sbatch(env, "-p", "batch", "-n", "64", "-t", str(t), "--wrap",
                                "sleep 1") for t in LIMITS]
        self.held = _sbatch(env, "-p", "batch", "-n", "1", "-t", "1", "-H", "--wrap", "sleep 1")
        self.other = _sbatch(env, "-p", "short", "-n", "32", "-t", "1", "--wrap", "sleep 1")
        deadline = time.monotonic() + 90  # a loaded host may defer it to the periodic pass
        while self._state(self.blocker) != "R":
            assert time.monotonic() < deadline, "the blocker did not start"
            time.sleep(0.2)

    def _state(self, job: str) -> str:
        return subprocess.run(["squeue", "-h", "-o", "%t", "-j", job], env=self.env,
                              capture_output=True, text=True, check=True).stdout.strip()

    def all(self) -> list[str]:
        return [self.blocker, *self.waiting, self.held, self.other]

    def cancel(self) -> None:
        subprocess.run(["scancel", *self.all()], env=self.env, check=False)


@pytest.fixture
def queue(slurm_cluster: Any) -> Iterator[Queue]:
    q = Queue(slurm_cluster.env)
    yield q
    q.cancel()


@pytest.fixture
def env_conf(slurm_cluster: Any, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    monkeypatch.setenv("SLURM_CONF", str(slurm_cluster.conf))
    return dict(slurm_cluster.env)


@pytest.fixture
def intruder(slurm_cluster: Any) -> str:
    """A user without Slurm rights or association, who may type any account."""
    from slurm.cluster import unprivileged_user

    return unprivileged_user()


def _run(*args: str) -> Any:
    return invoke("advise", *args)


def _by_limit(queue: Queue) -> list[str]:
    """The waiting jobs in sjf order."""
    return [queue.waiting[i] for i in sorted(range(4), key=lambda i: LIMITS[i])]


HPCPOLICY = str(Path(sys.executable).parent / "hpcpolicy")


def test_dry_run_ranks_and_changes_nothing(queue: Queue, env_conf: dict[str, str]) -> None:
    before = _priorities(env_conf, queue.all())
    result = _run("--policy", "sjf", "--partition", "batch")
    assert result.exit_code == 0, result.output
    assert "dry run, would run: scontrol update JobId=" in result.output
    assert "(1 held left alone)" in result.output
    assert _priorities(env_conf, queue.all()) == before
    ranked = advise_pass(AdviseConfig(policy="sjf", partitions=("batch",)), env_conf)
    mine = [j.job_id for j in ranked.ranked if j.job_id in queue.waiting]
    by_limit = [queue.waiting[i] for i in sorted(range(4), key=lambda i: LIMITS[i])]
    assert mine == by_limit
    assert queue.held not in [j.job_id for j in ranked.ranked]
    assert queue.other not in [j.job_id for j in ranked.ranked]  # another partition


def test_apply_sets_the_order_audits_it_and_restore_undoes_it(
        queue: Queue, env_conf: dict[str, str], tmp_path: Path) -> None:
    audit = tmp_path / "advise.jsonl"
    before = _priorities(env_conf, queue.all())
    result = _run("--policy", "sjf", "--partition", "batch", "--apply", "--audit", str(audit))
    assert result.exit_code == 0, result.output
    after = _priorities(env_conf, queue.all())
    assert sorted(queue.waiting, key=lambda j: -after[j]) == _by_limit(queue)
    assert after[queue.held] == 0 and after[queue.other] == before[queue.other]
    assert after[queue.blocker] == before[queue.blocker]  # running: not touched
    records = [json.loads(line) for line in audit.read_text().splitlines()]
    assert {r["job_id"] for r in records} <= set(queue.waiting)
    for r in records:
        assert (r["action"], r["policy"], r["before"], r["after"]) == (
            "advise", "sjf", before[r["job_id"]], after[r["job_id"]])
    # the priorities are obeyed: once the blocker is gone the jobs start in sjf order
    result = _run("--restore", "--audit", str(audit))
    assert result.exit_code == 0, result.output
    assert _priorities(env_conf, queue.all()) == before
    assert [json.loads(x)["action"] for x in audit.read_text().splitlines()].count(
        "restore") == len(records)


def test_the_cluster_starts_jobs_in_the_applied_order(slurm_cluster: Any,
                                                      env_conf: dict[str, str],
                                                      tmp_path: Path) -> None:
    q = Queue(env_conf, blocker_s=3)
    try:
        result = _run("--policy", "sjf", "--partition", "batch", "--apply", "--audit",
                      str(tmp_path / "a.jsonl"))
        assert result.exit_code == 0, result.output
        from hpcpolicy.slurm.submit import wait_finished

        wait_finished(q.waiting, env_conf, timeout_s=120, poll_s=0.5)
        out = subprocess.run(["sacct", "-X", "-n", "-P", "-o", "JobID,Start", "-j",
                              ",".join(q.waiting)], env=env_conf, capture_output=True,
                             text=True, check=True).stdout
        start = dict(line.split("|") for line in out.strip().split("\n"))
        assert sorted(q.waiting, key=lambda j: start[j]) == [
            q.waiting[i] for i in sorted(range(4), key=lambda i: LIMITS[i])]
    finally:
        q.cancel()


def test_rate_limit(queue: Queue, env_conf: dict[str, str], tmp_path: Path) -> None:
    cfg = AdviseConfig(policy="sjf", partitions=("batch",), apply=True, max_changes=1,
                       audit=str(tmp_path / "a.jsonl"))
    first = advise_pass(cfg, env_conf)
    assert len(first.changes) == 1 and first.deferred >= 1
    assert len((tmp_path / "a.jsonl").read_text().splitlines()) == 1


def test_no_permission_is_one_line(queue: Queue, slurm_cluster: Any, tmp_path: Path) -> None:
    audit = tmp_path / "a.jsonl"
    tmp_path.chmod(0o777)
    as_nobody = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", HPCPOLICY]
    if subprocess.run([*as_nobody, "--version"], capture_output=True, check=False).returncode:
        pytest.skip(f"user nobody cannot run {HPCPOLICY} (the checkout is not readable to "
                    "other users), so a user without Slurm rights cannot be tried")
    cmd = [*as_nobody, "advise", "--policy", "sjf", "--partition", "batch",
           "--apply", "--audit", str(audit)]
    done = subprocess.run(cmd, env={**slurm_cluster.env, "HOME": str(tmp_path)},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: advise --apply: no permission"), lines
    assert not audit.exists() or audit.read_text() == ""


def test_slurm_unreachable_is_one_line(slurm_cluster: Any, tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    conf = tmp_path / "slurm.conf"
    conf.write_text(slurm_cluster.conf.read_text().replace("SlurmctldPort=17317",
                                                           "SlurmctldPort=17399"))
    monkeypatch.setenv("SLURM_CONF", str(conf))
    result = _run("--policy", "sjf")
    assert one_line_error(result).startswith("error: Slurm is not reachable: `squeue")


def test_squeue_output_in_another_shape_is_one_line(slurm_cluster: Any, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    stub = tmp_path / "squeue"  # e.g. a wrapper that ignores --format: squeue's default table
    stub.write_text("#!/bin/sh\necho '  JOBID PARTITION NAME USER ST TIME NODES'\n")
    stub.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("SLURM_CONF", str(slurm_cluster.conf))
    result = _run("--policy", "sjf")
    assert one_line_error(result).startswith("error: `squeue` printed a line advise cannot "
                                            "read: '  JOBID PARTITION")


def test_a_job_left_out_is_named_and_the_others_are_ranked(slurm_cluster: Any, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    # job 2's line holds a count no job has; job 3's priority differs in the second reading
    now = int(time.time())
    lines = [f"{i}|PENDING|batch|ann|{now - 9 + i}|N/A|{cpus}|1|5:00|{100 - i}|Priority"
             for i, cpus in ((1, "4"), (2, "-4"), (3, "4"))]
    jobs = [{"job_id": i, "job_state": "PENDING", "partition": "batch", "user_name": "ann",
             "submit_time": now - 9 + i, "cpus": 4, "node_count": 1, "time_limit": 5,
             "priority": 100 - i + (i == 3), "state_reason": "Priority"} for i in (1, 3)]
    (tmp_path / "text").write_text("\n".join(lines) + "\n")
    (tmp_path / "json").write_text(json.dumps({"errors": [], "jobs": jobs}))
    stub = tmp_path / "squeue"
    stub.write_text(f"#!/bin/sh\ncase \"$*\" in *--json*) cat {tmp_path}/json;; "
                    f"*) cat {tmp_path}/text;; esac\n")
    stub.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("SLURM_CONF", str(slurm_cluster.conf))
    result = _run("--policy", "sjf")
    assert result.exit_code == 0, result.output
    warnings = [x for x in result.stderr.splitlines() if x.startswith("warning: left out: ")]
    assert len(warnings) == 2, result.stderr
    assert warnings[0].startswith("warning: left out: job 2: `squeue` printed") and (
        "cpus '-4' is not a number" in warnings[0])
    assert warnings[1].startswith("warning: left out: job 3: squeue's text gives its priority")
    assert "1 pending jobs ranked" in result.stdout


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_watch_started_in_the_background_stops_on_a_signal(slurm_cluster: Any,
                                                         env_conf: dict[str, str],
                                                         sig: signal.Signals) -> None:
    # a shell's background job starts with SIGINT ignored; a service manager stops with SIGTERM
    watcher = subprocess.Popen(
        [HPCPOLICY, "-q", "advise", "--policy", "sjf", "--watch", "1"], env=env_conf,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    # the first pass's line: the handlers are in place (a fixed sleep lost the race when the
    # machine was loaded and startup took longer, and the ignored SIGINT was never seen)
    assert watcher.stdout is not None
    ready, _, _ = select.select([watcher.stdout], [], [], 60)
    assert ready, "the watch printed no pass within 60 s"
    first = watcher.stdout.readline()
    watcher.send_signal(sig)
    out, err = watcher.communicate(timeout=30)
    assert watcher.returncode == 0, err
    assert (first + out).rstrip().endswith("stopped")


def test_watch_survives_a_slurmctld_restart(slurm_cluster: Any, env_conf: dict[str, str],
                                           tmp_path: Path) -> None:
    audit = tmp_path / "a.jsonl"
    watcher = subprocess.Popen(
        [HPCPOLICY, "-q", "advise", "--policy", "sjf",
         "--partition", "batch", "--apply", "--audit", str(audit), "--watch", "1"],
        env=env_conf, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    q: Queue | None = None
    try:
        time.sleep(3)
        slurm_cluster.restart_slurmctld()
        q = Queue(env_conf)  # submitted after the restart
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            seen = {json.loads(x)["job_id"] for x in audit.read_text().splitlines()} \
                if audit.exists() else set()
            if seen & set(q.waiting):
                break
            time.sleep(0.5)
        assert watcher.poll() is None, watcher.communicate()
        assert seen & set(q.waiting)
    finally:
        watcher.send_signal(signal.SIGINT)
        out, _ = watcher.communicate(timeout=30)
        if q is not None:
            q.cancel()
    assert "stopped" in out


def test_an_account_that_mimics_squeue_fields_reaches_neither_scontrol_nor_the_audit(
        queue: Queue, env_conf: dict[str, str], intruder: str, tmp_path: Path) -> None:
    # the account reads as squeue's old fields: submit, start, cpus, nodes, a 9-minute limit
    # and a priority above every job's; its real limit (5 min) puts it after the four others
    forged = _sbatch(env_conf, "-p", "batch", "-n", "64", "-t", "5", "-A",
                     f"physics|1000000000|0|1|1|9:00|{FORGED}|priority", "--wrap", "sleep 1",
                     user=intruder)
    mine = [*queue.waiting, forged]
    audit = tmp_path / "a.jsonl"
    before = _priorities(env_conf, mine)
    try:
        result = _run("--policy", "sjf", "--partition", "batch", "--apply", "--audit",
                      str(audit))
        after = _priorities(env_conf, mine)
        records = [json.loads(line) for line in audit.read_text().splitlines()]
        undone = _run("--restore", "--audit", str(audit))
        restored = _priorities(env_conf, mine)
    finally:
        subprocess.run(["scancel", forged], env=env_conf, check=False)
    assert result.exit_code == 0, result.output
    assert FORGED not in after.values() and max(after.values()) <= max(before.values())
    assert str(FORGED) not in json.dumps(records)
    assert [r for r in records if r["action"] == "advise"]
    assert all(r["before"] == before[r["job_id"]] for r in records if r["action"] == "advise")
    assert sorted(mine, key=lambda j: -after[j]) == [*_by_limit(queue), forged]
    assert undone.exit_code == 0, undone.output
    assert restored == before  # --restore hands back Slurm's own values, none forged


def test_accounts_holding_the_separator_or_a_newline_do_not_stop_the_pass(
        queue: Queue, env_conf: dict[str, str], intruder: str, tmp_path: Path) -> None:
    odd = [_sbatch(env_conf, "-p", "batch", "-n", "64", "-t", "5", "-A", account, "--wrap",
                   "sleep 1", user=intruder) for account in ("x|y", "x\ny|z")]
    try:
        result = _run("--policy", "sjf", "--partition", "batch", "--apply", "--audit",
                      str(tmp_path / "a.jsonl"))
        after = _priorities(env_conf, [*queue.waiting, *odd])
    finally:
        subprocess.run(["scancel", *odd], env=env_conf, check=False)
    assert result.exit_code == 0, result.output
    assert sorted(queue.waiting, key=lambda j: -after[j]) == _by_limit(queue)
    assert min(after[j] for j in queue.waiting) > max(after[j] for j in odd)


def test_a_failed_update_is_recorded_and_the_pass_goes_on(queue: Queue, env_conf: dict[str, str],
                                                         tmp_path: Path) -> None:
    audit = tmp_path / "a.jsonl"
    cfg = AdviseConfig(policy="sjf", partitions=("batch",), apply=True, audit=str(audit))
    planned = advise_pass(AdviseConfig(policy="sjf", partitions=("batch",)), env_conf).changes
    assert len(planned) >= 2
    held = planned[0].job_id
    subprocess.run(["scontrol", "hold", held], env=env_conf, check=True)  # during the pass
    failed = apply_changes(planned, cfg, env_conf)
    assert [c.job_id for c, _ in failed] == [held]
    records = [json.loads(line) for line in audit.read_text().splitlines()]
    assert [(r["action"], r["job_id"]) for r in records] == [
        ("advise_failed", held), *(("advise", c.job_id) for c in planned[1:])]
    assert "held" in records[0]["error"]
    after = _priorities(env_conf, queue.waiting)
    assert after[held] == 0  # still held: the update did not release it
    assert all(after[c.job_id] == c.after for c in planned[1:])
