"""The test Slurm under a given configuration: the same scaled workload run under a baseline
slurm.conf and under candidate changes of it, for proving the what-if's answers (issue 40).

* :data:`MULTIFACTOR` is the baseline: ``priority/multifactor`` with age, fair share and job
  size, limits enforced, priorities recalculated every minute (Slurm's shortest period).
* :func:`prepare` writes the baseline and, per candidate, the configuration the project's
  own answer makes of it: :func:`hpcpolicy.slurmconf.change_advice`'s diff applied with
  ``patch`` and its ``sacctmgr`` commands (so the proof applies the answer as an admin would).
* :func:`run_setup` runs one configuration once: the queue emptied, the QOS back to the
  baseline, the candidate's commands run, slurm.conf written and slurmctld restarted with
  its record of the last priority recalculation removed (so the once-a-minute
  recalculations start with slurmctld, a few seconds before the first submission, in every
  run, instead of keeping the previous slurmctld's phase), fair-share usage reset, the
  plan submitted by :data:`USERS` (two per account), and the jobs' sacct log, the
  configuration and the ``sacctmgr`` dumps kept in the run's folder.

The cluster is :class:`slurm.cluster.LocalSlurm`; only one process may use it at a time.
:func:`restored` puts its own configuration back afterwards for the other Slurm tests.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from slurm.cluster import ACCOUNTS, CLUSTER, LocalSlurm, unprivileged_user

from hpcpolicy.slurm.command import slurm_command
from hpcpolicy.slurm.config_proof import BASELINE
from hpcpolicy.slurm.submit import Plan, export_sacct, submit_plan, wait_finished
from hpcpolicy.slurmconf import apply_candidate, change_advice, read_slurm_conf

__all__ = ["MULTIFACTOR", "USERS", "Setup", "add_users", "prepare", "restored",
           "run_setup"]

USERS = ("hpcpolicy-u0", "hpcpolicy-u1", "hpcpolicy-u2", "hpcpolicy-u3")
"""Unix users the workload is submitted as; user k is in account ``ACCOUNTS[k % 2]``."""
MULTIFACTOR = {
    "PriorityType": "priority/multifactor",
    "PriorityWeightAge": "1000",
    "PriorityWeightFairshare": "1000",
    "PriorityWeightJobSize": "1000",
    "PriorityMaxAge": "2",
    "PriorityDecayHalfLife": "10",
    "PriorityCalcPeriod": "1",
    "AccountingStorageEnforce": "associations,limits,qos",
}
"""The baseline's keys over the cluster's own slurm.conf (durations in minutes, as Slurm
reads a bare number there): a job's age factor is full after 2 minutes, usage halves in 10,
and every factor is recalculated once a minute."""
_QOS_RESET = ("sacctmgr", "-i", "modify", "qos", "where", "name=normal", "set",
              "MaxJobsPerUser=-1")


@dataclass(frozen=True)
class Setup:
    """One configuration of the test cluster."""

    name: str
    folder: Path
    """Holds ``slurm.conf``; for a candidate also ``change.diff`` and ``sacctmgr.sh``."""
    sacctmgr: tuple[str, ...] = ()
    """The candidate's ``sacctmgr -i modify ...`` commands."""

    @property
    def conf(self) -> Path:
        """This setup's slurm.conf."""
        return self.folder / "slurm.conf"


def _with_keys(text: str, keys: dict[str, str]) -> str:
    """``text`` with each key's line replaced (or added at the end when absent)."""
    lines = text.splitlines()
    left = dict(keys)
    for n, line in enumerate(lines):
        key = line.partition("=")[0].strip()
        if key in left:
            lines[n] = f"{key}={left.pop(key)}"
    return "\n".join([*lines, *(f"{k}={v}" for k, v in left.items())]) + "\n"


def prepare(slurm: LocalSlurm, folder: Path, candidates: dict[str, str]) -> list[Setup]:
    """The baseline (``folder/baseline``) and each candidate (``folder/NAME``): the change
    text read by :func:`~hpcpolicy.slurmconf.parse_candidate`, its diff applied to a copy of
    the baseline with ``patch``, its sacctmgr commands kept."""
    base = Setup(BASELINE, folder / BASELINE)
    base.folder.mkdir(parents=True, exist_ok=True)
    base.conf.write_text(_with_keys(slurm.default_conf(), MULTIFACTOR))
    old = read_slurm_conf(base.conf)
    setups = [base]
    for name, change in candidates.items():
        advice = change_advice(old, apply_candidate(old, change))
        setup = Setup(name, folder / name, advice.sacctmgr)
        setup.folder.mkdir(exist_ok=True)
        shutil.copy(base.conf, setup.conf)
        (setup.folder / "change.txt").write_text(change + "\n")
        (setup.folder / "change.diff").write_text(advice.diff)
        (setup.folder / "sacctmgr.sh").write_text("".join(c + "\n" for c in advice.sacctmgr))
        if advice.diff:
            subprocess.run(["patch", "-s", "-p1", "-d", str(setup.folder),
                            "-i", str(setup.folder / "change.diff")], check=True)
        setups.append(setup)
    return setups


def add_users(slurm: LocalSlurm) -> None:
    """Create :data:`USERS` (Unix users, no home or shell) and their associations."""
    have = slurm_command(["sacctmgr", "-n", "-P", "list", "assoc", "format=user,account"],
                         slurm.env).split()
    for k, user in enumerate(USERS):
        unprivileged_user(user)
        account = ACCOUNTS[k % len(ACCOUNTS)]
        if f"{user}|{account}" not in have:
            slurm_command(["sacctmgr", "-i", "add", "user", user, f"account={account}",
                           f"cluster={CLUSTER}"], slurm.env)


def _reset_usage(slurm: LocalSlurm) -> None:
    """Every association's fair-share usage back to zero (the runs start alike)."""
    slurm_command(["sacctmgr", "-i", "modify", "account", "where",
                   f"name={','.join(ACCOUNTS)}", "set", "RawUsage=0"], slurm.env)
    for k, user in enumerate(USERS):
        slurm_command(["sacctmgr", "-i", "modify", "user", "where", f"name={user}",
                       f"account={ACCOUNTS[k % len(ACCOUNTS)]}", "set", "RawUsage=0"],
                      slurm.env)


def _dump(slurm: LocalSlurm, out: Path) -> None:
    """``sacctmgr show qos -P`` and ``show assoc -P`` into ``out`` (the --sacctmgr form)."""
    for what, name in (("qos", "qos.txt"), ("assoc", "assoc.txt")):
        (out / name).write_text(slurm_command(["sacctmgr", "show", what, "-P"], slurm.env))


def run_setup(slurm: LocalSlurm, setup: Setup, plan: Plan, out: Path,
              timeout_s: float = 1200) -> Path:
    """Run ``plan`` once under ``setup``; return ``out``, which then holds ``sacct.txt``,
    ``slurm.conf``, ``qos.txt`` and ``assoc.txt``."""
    out.mkdir(parents=True, exist_ok=True)
    slurm.clear_queue()
    slurm_command(list(_QOS_RESET), slurm.env)
    for command in setup.sacctmgr:
        slurm_command(shlex.split(command), slurm.env)
    for name in ("priority_last_decay_ran", "priority_last_decay_ran.old"):
        (slurm.root / "spool" / "ctld" / name).unlink(missing_ok=True)
    slurm.use_conf(setup.conf.read_text())
    _reset_usage(slurm)
    shutil.copy(setup.conf, out / "slurm.conf")
    _dump(slurm, out)
    with tempfile.TemporaryDirectory(prefix="slurm-proof-") as work:
        ids = submit_plan(plan, Path(work), slurm.env)
        wait_finished(ids.values(), slurm.env, timeout_s=timeout_s)
    export_sacct(ids.values(), out / "sacct.txt", slurm.env)
    return out


@contextmanager
def restored(slurm: LocalSlurm) -> Iterator[LocalSlurm]:
    """``slurm`` for the proof's runs; afterwards its queue is emptied, the QOS and its own
    slurm.conf are back."""
    try:
        yield slurm
    finally:
        slurm.clear_queue()
        slurm_command(list(_QOS_RESET), slurm.env)
        slurm.use_conf(None)

