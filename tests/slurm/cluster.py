"""A real single-host Slurm for tests and benchmarks: munged, MariaDB, slurmdbd, slurmctld and
four virtual slurmd nodes ``n[1-4]`` (Debian's build allows several slurmd on one host).

Everything lives in one state directory (default ``/tmp/hpcpolicy-slurm``): configuration,
databases, spool, logs, and a PID file per daemon. ``up`` is idempotent (a daemon whose
recorded PID is alive is left running; a changed configuration takes effect after ``down``);
``down`` stops only the PIDs it recorded, never a process found by name. A stopped daemon may
linger as a zombie when nothing reaps it, so liveness is read from the state letter in
``/proc/PID/stat``, not from ``kill -0``.

Usage (``tests/slurm/up.sh`` and ``down.sh`` call this)::

    python tests/slurm/cluster.py up      # prints the SLURM_CONF to export
    python tests/slurm/cluster.py down
    python tests/slurm/cluster.py status

Needs root and the Debian packages slurmctld slurmd slurmdbd slurm-client munge
mariadb-server (``.ci/run`` installs them).
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["ACCOUNTS", "PACKAGES", "PARTITIONS", "UNPRIVILEGED", "LocalSlurm",
           "missing_requirements", "started", "unprivileged_user"]

PACKAGES = ("slurmctld", "slurmd", "slurmdbd", "slurm-client", "munge", "mariadb-server")
"""Debian packages the cluster runs on."""
_PROGRAMS = ("munged", "mariadbd", "mariadb-install-db", "mariadb", "slurmdbd", "slurmctld",
             "slurmd", "sacctmgr", "setpriv")
ACCOUNTS = ("physics", "biology")
"""Accounts created in slurmdbd; root is a user of both."""
PARTITIONS = {"batch": "n[1-4]", "short": "n[3-4]"}
"""Partition -> nodes (``batch`` is the default; ``short`` allows at most 10 minutes)."""
UNPRIVILEGED = "hpcpolicy-intruder"
"""A Unix user with no Slurm rights and no association: AccountingStorageEnforce is unset, so
Slurm keeps whatever account (``-A``) it types, as an ordinary cluster user's would be."""
CLUSTER = "hpctest"
_DB_PORT, _DBD_PORT, _CTLD_PORT, _SLURMD_PORT = 17306, 17319, 17317, 17001


def missing_requirements() -> str | None:
    """Why this host cannot run the cluster (not root, a program missing), or None."""
    if os.geteuid() != 0:
        return "the test Slurm runs its daemons as root"
    absent = [p for p in _PROGRAMS if shutil.which(p) is None]
    if absent:
        return (f"{', '.join(absent)} not installed (apt-get install --no-install-recommends "
                f"{' '.join(PACKAGES)})")
    return None


def unprivileged_user(name: str = UNPRIVILEGED) -> str:
    """``name``, created as a system user without a home or a shell when missing (root only);
    run its Slurm commands with ``setpriv --reuid=NAME --regid=NAME --clear-groups``."""
    if subprocess.run(["id", "-u", name], capture_output=True, check=False).returncode:
        subprocess.run(["useradd", "--system", "--user-group", "--no-create-home",
                        "--shell", "/usr/sbin/nologin", name], capture_output=True, text=True,
                       check=True)
    return name


def alive(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie (state from /proc/PID/stat)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    state = stat[stat.rindex(")") + 2:].split(" ", 1)[0]  # the name may hold spaces
    return state not in ("Z", "X", "x")


@dataclass
class LocalSlurm:
    """The test cluster rooted at ``root`` (see the module docstring).

    Example:
        >>> slurm = LocalSlurm()                       # doctest: +SKIP
        >>> slurm.up()                                 # doctest: +SKIP
        >>> subprocess.run(["sinfo"], env=slurm.env)   # doctest: +SKIP
    """

    root: Path = Path("/tmp/hpcpolicy-slurm")
    nodes: int = 4
    cpus_per_node: int = 16
    mem_per_node_mib: int = 16000
    host: str = field(default_factory=lambda: socket.gethostname().split(".")[0])
    conf_text: str | None = None
    """A slurm.conf to run instead of the one written here (:meth:`use_conf` sets it);
    None: :meth:`default_conf`."""

    @property
    def conf(self) -> Path:
        """slurm.conf; export it as SLURM_CONF for every Slurm command."""
        return self.root / "etc" / "slurm.conf"

    @property
    def env(self) -> dict[str, str]:
        """The environment Slurm commands need to reach this cluster."""
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    @property
    def node_names(self) -> list[str]:
        """n1, n2, ..."""
        return [f"n{i}" for i in range(1, self.nodes + 1)]

    # --- daemons -------------------------------------------------------------------------

    def _pidfile(self, name: str) -> Path:
        return self.root / "pids" / f"{name}.pid"

    def pid(self, name: str) -> int | None:
        """The recorded PID of daemon ``name`` if that process is alive."""
        try:
            pid = int(self._pidfile(name).read_text())
        except (OSError, ValueError):
            return None
        return pid if alive(pid) else None

    def _daemons(self) -> list[str]:
        return ["munged", "mariadbd", "slurmdbd", "slurmctld",
                *[f"slurmd-{n}" for n in self.node_names]]

    def _spawn(self, name: str, argv: Sequence[str]) -> int:
        """Start ``argv`` in its own session, logging to log/NAME.out; record its PID."""
        if (pid := self.pid(name)) is not None:
            return pid
        log = (self.root / "log" / f"{name}.out").open("ab")
        proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                start_new_session=True, env=self.env)
        log.close()
        self._pidfile(name).write_text(f"{proc.pid}\n")
        return proc.pid

    def _wait(self, what: str, ready: object, timeout: float = 30.0, daemon: str = "") -> None:
        assert callable(ready)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if ready():
                return
            if daemon and self.pid(daemon) is None:
                log = self.root / "log" / f"{daemon}.out"
                tail = log.read_text(errors="replace")[-600:] if log.exists() else ""
                raise RuntimeError(f"{daemon} exited while waiting for {what}; {log}:\n{tail}")
            time.sleep(0.1)
        raise RuntimeError(f"timed out after {timeout:.0f} s waiting for {what} ({self.root}/log)")

    def _run(self, argv: Sequence[str], check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(list(argv), env=self.env, capture_output=True, text=True,
                              check=check, timeout=60)

    def up(self) -> None:
        """Bring the whole cluster up (a no-op for daemons already running); return once every
        node is idle or allocated."""
        for sub in ("etc", "pids", "log", "spool", "munge", "state"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        self._write_configs()
        self._munge()
        self._mariadb()
        self._spawn("slurmdbd", ["slurmdbd", "-D"])
        self._wait("slurmdbd", lambda: self._run(["sacctmgr", "-n", "list", "cluster"],
                                                 check=False).returncode == 0,
                   daemon="slurmdbd")
        self._associations()
        self._spawn("slurmctld", ["slurmctld", "-D", "-i"])
        for node in self.node_names:
            (self.root / "spool" / f"slurmd-{node}").mkdir(exist_ok=True)
            self._spawn(f"slurmd-{node}", ["slurmd", "-D", "-N", node])
        self._wait("all nodes up", self.nodes_ready, daemon="slurmctld")

    def nodes_ready(self) -> bool:
        """Whether slurmctld answers and every node is up (idle, mixed or allocated)."""
        out = self._run(["sinfo", "-h", "-N", "-o", "%N %t"], check=False)
        if out.returncode != 0:
            return False
        states = {}
        for line in out.stdout.split("\n"):
            if line.strip():
                node, state = line.split()
                states[node] = state
        return len(states) == self.nodes and all(
            s.rstrip("*~#!%$@^-") in ("idle", "mix", "alloc") and not s.endswith("*")
            for s in states.values())

    def clear_queue(self, timeout: float = 60.0) -> None:
        """Cancel every job this test cluster still holds (its state survives a restart, so
        jobs left by an interrupted run or a benchmark would otherwise meet the next tests),
        and return once the queue is empty."""
        listed = self._run(["squeue", "-h", "-o", "%i"], check=False)
        ids = sorted({line.split("_")[0].split("+")[0] for line in listed.stdout.split()
                      if line.strip()})
        if ids:
            self._run(["scancel", *ids], check=False)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self._run(["squeue", "-h", "-o", "%i"], check=False).stdout.strip():
                return
            time.sleep(0.2)
        raise RuntimeError(f"the test Slurm's queue did not empty within {timeout:.0f} s")

    def restart_slurmctld(self) -> None:
        """Stop slurmctld and start it again (its state is kept), as an admin's restart."""
        self._stop("slurmctld")
        self._spawn("slurmctld", ["slurmctld", "-D", "-i"])
        self._wait("slurmctld after restart", self.nodes_ready, daemon="slurmctld")

    def use_conf(self, text: str | None) -> None:
        """Run the cluster under slurm.conf ``text`` (None: :meth:`default_conf`): write it
        and restart slurmctld, which reads every key again (a reconfigure cannot change
        PriorityType or AccountingStorageEnforce); jobs and accounting are kept."""
        self.conf_text = text
        self._write_configs()
        self.restart_slurmctld()

    def _stop(self, name: str, timeout: float = 20.0) -> None:
        pid = self.pid(name)
        if pid is not None:
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + timeout
            while alive(pid) and time.monotonic() < deadline:
                time.sleep(0.05)
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
                while alive(pid):
                    time.sleep(0.05)
        self._pidfile(name).unlink(missing_ok=True)

    def down(self) -> None:
        """Stop every recorded daemon, the nodes first; the state directory stays."""
        for name in reversed(self._daemons()):
            self._stop(name)

    def status(self) -> dict[str, int | None]:
        """Daemon name -> live PID (None when not running)."""
        return {name: self.pid(name) for name in self._daemons()}

    # --- pieces ------------------------------------------------------------------------------

    def _munge(self) -> None:
        d = self.root / "munge"
        key = d / "munge.key"
        if not key.exists():
            key.write_bytes(secrets.token_bytes(1024))
        for path in (d, key):
            shutil.chown(path, "munge", "munge")
        key.chmod(0o600)
        d.chmod(0o755)  # every user's Slurm commands reach the socket
        self._spawn("munged", ["setpriv", "--reuid=munge", "--regid=munge", "--init-groups",
                               "munged", "-F", "--force", f"--socket={d}/munge.socket",
                               f"--key-file={key}", f"--pid-file={d}/munged.pid",
                               f"--log-file={d}/munged.log", f"--seed-file={d}/munged.seed"])
        self._wait("munged", (d / "munge.socket").exists, daemon="munged")

    def _mariadb(self) -> None:
        data = self.root / "mysql"
        sock = self.root / "state" / "mysqld.sock"
        if not (data / "mysql").is_dir():
            data.mkdir(exist_ok=True)
            shutil.chown(data, "mysql", "mysql")
            self._run(["mariadb-install-db", "--user=mysql", f"--datadir={data}",
                       "--auth-root-authentication-method=socket", "--skip-test-db"])
        shutil.chown(self.root / "state", "mysql", "mysql")
        self._spawn("mariadbd", [
            "mariadbd", "--no-defaults", "--user=mysql", f"--datadir={data}",
            f"--socket={sock}", f"--pid-file={self.root / 'state' / 'mysqld.pid'}",
            "--bind-address=127.0.0.1", f"--port={_DB_PORT}", "--innodb-buffer-pool-size=1G",
            "--innodb-lock-wait-timeout=900", "--skip-log-bin",
        ])
        sql = ["mariadb", f"--socket={sock}", "-u", "root", "-e"]
        self._wait("mariadbd", lambda: self._run([*sql, "SELECT 1"], check=False).returncode == 0,
                   daemon="mariadbd")
        self._run([*sql, "CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'slurm';"
                   " GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';"])

    def _associations(self) -> None:
        have = self._run(["sacctmgr", "-n", "-P", "list", "cluster", "format=cluster"]).stdout
        if CLUSTER not in have.split():
            self._run(["sacctmgr", "-i", "add", "cluster", CLUSTER])
        accounts = self._run(["sacctmgr", "-n", "-P", "list", "account", "format=account"])
        for acct in ACCOUNTS:
            if acct not in accounts.stdout.split():
                self._run(["sacctmgr", "-i", "add", "account", acct, f"cluster={CLUSTER}"])
                self._run(["sacctmgr", "-i", "add", "user", "root", f"account={acct}",
                           f"cluster={CLUSTER}"])

    def default_conf(self) -> str:
        """The cluster's own slurm.conf (FIFO priority, backfill, accounting without
        enforcement)."""
        r = self.root
        # cred_expire is also how long a requeued job waits before it may start again
        auth = f"AuthInfo=socket={r}/munge/munge.socket,cred_expire=10"
        nodes = self.node_names
        node_line = (f"NodeName=n[1-{self.nodes}] NodeHostname={self.host} NodeAddr=127.0.0.1 "
                     f"Port={_SLURMD_PORT}-{_SLURMD_PORT + self.nodes - 1} "
                     f"CPUs={self.cpus_per_node} RealMemory={self.mem_per_node_mib} State=UNKNOWN")
        assert len(nodes) == self.nodes
        parts = [f"PartitionName=batch Nodes={PARTITIONS['batch']} Default=YES "
                 "MaxTime=INFINITE State=UP",
                 f"PartitionName=short Nodes={PARTITIONS['short']} MaxTime=10 State=UP"]
        return f"""\
# written by tests/slurm/cluster.py; rewritten at every `up`
ClusterName={CLUSTER}
SlurmctldHost={self.host}(127.0.0.1)
SlurmctldPort={_CTLD_PORT}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
{auth}
CredType=cred/munge
StateSaveLocation={r}/spool/ctld
SlurmdSpoolDir={r}/spool/slurmd-%n
SlurmctldPidFile={r}/state/slurmctld.pid
SlurmdPidFile={r}/state/slurmd-%n.pid
SlurmctldLogFile={r}/log/slurmctld.log
SlurmdLogFile={r}/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=1,bf_continue,sched_min_interval=0,default_queue_depth=1000
PriorityType=priority/basic
SlurmdParameters=config_overrides
ReturnToService=2
DefMemPerCPU=100
MinJobAge=30
KillWait=2
OverTimeLimit=0
MpiDefault=none
JobRequeue=1
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort={_DBD_PORT}
# the munge socket for the slurmdbd connection (slurm.conf(5), AccountingStoragePass)
AccountingStoragePass={r}/munge/munge.socket
JobCompType=jobcomp/none
{node_line}
{chr(10).join(parts)}
"""

    def _write_configs(self) -> None:
        r, etc = self.root, self.root / "etc"
        dbd_conf = f"""\
# written by tests/slurm/cluster.py
AuthInfo=socket={r}/munge/munge.socket
AuthType=auth/munge
DbdHost={self.host}
DbdAddr=127.0.0.1
DbdPort={_DBD_PORT}
SlurmUser=root
LogFile={r}/log/slurmdbd.log
PidFile={r}/state/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort={_DB_PORT}
StorageUser=slurm
StoragePass=slurm
StorageLoc=slurm_acct_db
"""
        (etc / "slurm.conf").write_text(self.conf_text or self.default_conf())
        dbd = etc / "slurmdbd.conf"
        dbd.write_text(dbd_conf)
        dbd.chmod(0o600)


def started(root: Path | None = None) -> LocalSlurm:
    """The test cluster, brought up (for scripts); exits with a one-line reason when this
    host cannot run it."""
    if (why := missing_requirements()) is not None:
        raise SystemExit(f"cannot start the test Slurm: {why}")
    slurm = LocalSlurm(root) if root is not None else LocalSlurm()
    slurm.up()
    return slurm


def main(argv: Sequence[str]) -> int:
    """``up``, ``down`` or ``status`` (the root directory as an optional second argument)."""
    if len(argv) not in (1, 2) or argv[0] not in ("up", "down", "status"):
        print("usage: cluster.py up|down|status [STATE_DIR]", file=sys.stderr)
        return 2
    root = Path(argv[1]) if len(argv) == 2 else None
    if argv[0] == "up":
        print(f"export SLURM_CONF={started(root).conf}")
        return 0
    slurm = LocalSlurm(root) if root is not None else LocalSlurm()
    if argv[0] == "down":
        slurm.down()
    else:
        for name, pid in slurm.status().items():
            print(f"{name:14s} {pid if pid is not None else 'down'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
