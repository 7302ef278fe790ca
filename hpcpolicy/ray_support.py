"""Ray, an optional dependency (the ``cluster`` extra), imported only when a command asks for it.

``hpcpolicy tune --backend ray`` and ``hpcpolicy sweep --backend ray`` run on a Ray cluster:
the one at ``--ray-address`` (``ray start --head`` on one node, ``ray start --address`` on
the others), or, without an address, a Ray started in this process on this machine. Without
Ray installed either is one line that names the extra to install.

Example:
    >>> RAY_INSTALL
    "pip install 'hpcpolicy[cluster]'"
"""

from __future__ import annotations

import logging
import os
from types import ModuleType

from hpcpolicy.errors import ConfigError

__all__ = ["BACKENDS", "RAY_INSTALL", "check_backend", "connect", "import_ray"]

RAY_INSTALL = "pip install 'hpcpolicy[cluster]'"
"""How to install Ray with hpcpolicy."""

BACKENDS = ("local", "ray")
"""``--backend`` values: this process, one task after another, or a Ray cluster."""


def check_backend(backend: str, address: str | None) -> None:
    """Refuse an unknown backend, and an address without Ray.

    Raises:
        ConfigError: The backend is not one of :data:`BACKENDS`, or an address is given with
            the local backend.
    """
    if backend not in BACKENDS:
        raise ConfigError(f"--backend {backend!r}: choose {' or '.join(BACKENDS)}")
    if address is not None and backend != "ray":
        raise ConfigError(f"--ray-address {address} needs --backend ray")


def import_ray() -> ModuleType:
    """The ``ray`` module.

    Raises:
        ConfigError: Ray is not installed (the message names the extra).
    """
    try:
        import ray
    except ImportError:
        raise ConfigError(f"--backend ray needs Ray, which is not installed: {RAY_INSTALL}"
                          ) from None
    return ray


def connect(address: str | None) -> ModuleType:
    """The ``ray`` module, connected to the cluster at ``address``, or to a Ray started here
    on this machine's cores when ``address`` is None (once per process).

    Raises:
        ConfigError: Ray is missing, or no Ray cluster answers at ``address``.
    """
    ray = import_ray()
    # Ray Tune's own progress tables and tips would interleave with the command's output
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
    os.environ.setdefault("TUNE_WARN_EXCESSIVE_EXPERIMENT_CHECKPOINT_SYNC_THRESHOLD_S", "0")
    # the command reports failures itself, naming the trial folders that hold Ray's logs
    logging.getLogger("ray.tune").setLevel(logging.CRITICAL)
    if ray.is_initialized():
        return ray
    try:
        ray.init(address=address, include_dashboard=False, log_to_driver=False,
                 logging_level=logging.ERROR, configure_logging=True)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(f"--ray-address {address}: no Ray cluster answers there ({first}); "
                          "start one with `ray start --head` (README: Ray on Slurm)") from None
    return ray
