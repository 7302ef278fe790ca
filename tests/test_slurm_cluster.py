"""The test Slurm itself (tests/slurm/cluster.py): idempotent ``up``, liveness from /proc."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from slurm.cluster import PARTITIONS, alive

pytestmark = pytest.mark.slurm


def test_up_is_idempotent_and_every_daemon_is_alive(slurm_cluster: Any) -> None:
    before = slurm_cluster.status()
    assert all(pid is not None for pid in before.values()), before
    slurm_cluster.up()
    assert slurm_cluster.status() == before  # nothing restarted


def test_four_nodes_in_two_partitions(slurm_cluster: Any) -> None:
    out = subprocess.run(["sinfo", "-h", "-o", "%P %D %N"], env=slurm_cluster.env,
                         capture_output=True, text=True, check=True).stdout.split("\n")
    rows = {line.split()[0].rstrip("*"): line.split()[2] for line in out if line.strip()}
    assert rows == PARTITIONS


def test_a_zombie_is_not_alive() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    while True:  # exited but not yet reaped: a zombie, which kill -0 would call alive
        try:
            stat = Path(f"/proc/{child.pid}/stat").read_text()
        except OSError:
            break
        if stat.rsplit(")", 1)[1].split()[0] == "Z":
            break
    assert not alive(child.pid)
    child.wait()
    assert not alive(child.pid)
