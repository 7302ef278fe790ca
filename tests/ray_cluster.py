"""A Ray cluster of two nodes on 127.0.0.1 for the tests: a head and a worker, each started
with ``ray start --block`` in its own process group on free ports, and stopped (with every
process under it) when the test ends. Never ``ray stop``, which would stop every Ray on the
machine."""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

_RAY = [sys.executable, "-c", "import sys; from ray.scripts.scripts import main; "
        "sys.argv[0] = 'ray'; sys.exit(main())"]
_PORT_OPTIONS = ("--node-manager-port", "--object-manager-port", "--metrics-export-port",
                 "--runtime-env-agent-port", "--dashboard-agent-listen-port",
                 "--dashboard-agent-grpc-port")


def free_port() -> int:
    """A TCP port nobody listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start(args: list[str], log: Path, env: dict[str, str],
           taken: set[int]) -> subprocess.Popen[bytes]:
    """``ray start`` with its component ports and worker range apart from each other and from
    ``taken`` (the ports of the nodes started before, which this adds to): Ray refuses a
    component port inside the worker range, and free ports drawn one by one can land there
    or on each other."""
    low = free_port()
    while taken & set(range(low, low + 61)):
        low = free_port()
    taken.update(range(low, low + 61))
    ports = []
    for option in _PORT_OPTIONS:
        port = free_port()
        while port in taken:
            port = free_port()
        taken.add(port)
        ports += [option, str(port)]
    with log.open("wb") as out:
        return subprocess.Popen(
            [*_RAY, "start", "--block", "--node-ip-address", "127.0.0.1", "--num-cpus", "1",
             "--disable-usage-stats", *ports, "--min-worker-port", str(low),
             "--max-worker-port", str(low + 60), *args],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env=env)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    with suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        with suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _wait_for_nodes(address: str, nodes: int, timeout: float, env: dict[str, str]) -> None:
    script = ("import ray, sys, time\n"
              f"ray.init(address={address!r}, log_to_driver=False)\n"
              f"end = time.time() + {timeout}\n"
              f"while sum(n['Alive'] for n in ray.nodes()) < {nodes}:\n"
              "    if time.time() > end: sys.exit('the Ray worker did not join')\n"
              "    time.sleep(0.5)\n")
    subprocess.run([sys.executable, "-c", script], check=True, timeout=timeout + 30,
                   capture_output=True, env=env)


@contextmanager
def two_node_cluster() -> Iterator[tuple[str, dict[str, str]]]:
    """Start the cluster; yield the head's address and the environment a driver needs (the
    cluster's own authentication token); stop both nodes at the end."""
    temp = Path(tempfile.mkdtemp(prefix="hpray", dir="/tmp"))  # short: Ray's socket paths
    token = temp / "auth_token"
    token.write_text(secrets.token_hex(32))
    env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token)}
    port = free_port()
    address = f"127.0.0.1:{port}"
    taken = {port}
    procs = [_start(["--head", "--port", str(port), "--include-dashboard", "false",
                     "--temp-dir", str(temp)], temp / "head.log", env, taken)]
    try:
        deadline = time.time() + 60
        while True:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if time.time() > deadline or procs[0].poll() is not None:
                raise RuntimeError((temp / "head.log").read_text(errors="replace")[-2000:])
            time.sleep(0.5)
        procs.append(_start(["--address", address], temp / "worker.log", env, taken))
        _wait_for_nodes(address, 2, 60, env)
        yield address, env
    finally:
        for proc in reversed(procs):
            _stop(proc)
        shutil.rmtree(temp, ignore_errors=True)
