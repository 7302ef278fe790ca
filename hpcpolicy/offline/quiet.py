"""d3rlpy, imported on demand and quietly.

Importing d3rlpy imports the old ``gym`` package, which prints an unmaintained-package notice
on stderr, and d3rlpy logs every fit through structlog on stdout. hpcpolicy imports d3rlpy
only inside the functions that need it, through :func:`d3rlpy_module`, which swallows the
notice and keeps only the errors among d3rlpy's own log lines (its metrics still go to
the run directory's files).
"""

from __future__ import annotations

import contextlib
import functools
import io
import logging
from types import ModuleType

from hpcpolicy.errors import ConfigError

__all__ = ["d3rlpy_module"]


@functools.cache
def d3rlpy_module() -> ModuleType:
    """The ``d3rlpy`` module (imported once, quietly).

    Raises:
        ConfigError: d3rlpy is not installed.
    """
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            import d3rlpy
    except ImportError as exc:
        raise ConfigError("offline RL needs d3rlpy; install it with "
                          "`pip install 'hpcpolicy[rl]'`") from exc
    import structlog

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR))
    return d3rlpy  # type: ignore[no-any-return]
