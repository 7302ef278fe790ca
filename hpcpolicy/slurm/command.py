"""Run one Slurm command and turn its failures into one-line :class:`SlurmError` messages.

Example:
    >>> slurm_command(["squeue", "--version"])  # doctest: +SKIP
    'slurm-wlm 22.05.8'
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence

from hpcpolicy.errors import SlurmError

__all__ = ["slurm_command"]

_UNREACHABLE = ("unable to contact slurm controller", "connection refused",
                "zero bytes were transmitted", "socket timed out", "communication connection")


def _first_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().split("\n") if ln.strip()]
    return lines[0] if lines else "no message"


def slurm_command(argv: Sequence[str], env: Mapping[str, str] | None = None,
                  timeout: float = 60.0) -> str:
    """Run ``argv`` and return its standard output.

    Raises:
        SlurmError: the program is not on PATH; slurmctld cannot be reached; the command
            timed out or exited non-zero (the message quotes its first error line).
    """
    shown = " ".join(argv[:3])
    try:
        done = subprocess.run(list(argv), env=None if env is None else dict(env),
                              capture_output=True, text=True, timeout=timeout, check=False)
    except FileNotFoundError:
        raise SlurmError(f"`{argv[0]}` not found on PATH: run this where Slurm's client commands "
                         "are installed (Debian: slurm-client)") from None
    except subprocess.TimeoutExpired:
        raise SlurmError(f"`{shown}` did not answer in {timeout:.0f} s: is slurmctld "
                         "overloaded or down? (check with `scontrol ping`)") from None
    if done.returncode != 0:
        err = _first_line(done.stderr or done.stdout)
        if any(mark in err.lower() for mark in _UNREACHABLE):
            raise SlurmError(f"Slurm is not reachable: `{shown}` said {err!r}; start slurmctld "
                             "or point SLURM_CONF at the cluster's slurm.conf")
        raise SlurmError(f"`{shown}` failed (exit {done.returncode}): {err}")
    return done.stdout
