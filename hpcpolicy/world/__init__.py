"""The world a log is replayed in, and the protocol it is measured by: one owner for both.

A world is the workload, the machine, the site model fitted to the log (site.toml), the base
replay configuration (``--compat``, backfilling, allocator, and what the site model sets) and
the train / validation / test split. :func:`open_world` opens one from a job table and a
:class:`WorldSpec`; every command, the training environment (whose workers receive the
``WorldSpec``, never a file to read again), the comparisons and the benchmarks open logs
there, and nowhere else (``tests/test_world_owner.py`` keeps it so).

The protocol: the jobs, in submit order, are cut once. The first ``train_frac`` of them
(:data:`~hpcpolicy.world.protocol.TRAIN_FRAC`, 0.7, unless ``--train-frac`` says otherwise)
are the training part, of which the last ``val_frac`` of all the jobs
(:data:`~hpcpolicy.world.protocol.VAL_FRAC`) is kept for validation (choosing and guarding the
deployed policy); the rest is the test part, where ``evaluate`` draws its windows and which
no training episode reaches. ``calibrate`` fits a site model on the same first share and
``fidelity`` measures it out of sample after it. Backfilling not given on the command line is
the site model's ``[cadence] backfill``, else none.

Modules:

* :mod:`~hpcpolicy.world.open`: ``WorldSpec``, ``open_world`` and ``open_workload``;
* :mod:`~hpcpolicy.world.protocol`: the split's default fractions (imports nothing);
* :mod:`~hpcpolicy.world.split`: ``Split``, the train / validation / test parts of a log;
* :mod:`~hpcpolicy.world.site_model`: ``SiteModel``, what ``calibrate`` fits;
* :mod:`~hpcpolicy.world.site_toml`: site.toml read and written;
* :mod:`~hpcpolicy.world.apply`: ``World``, and a site model applied to a workload and replay
  options.

The names below load their module when first used, so that importing
:mod:`hpcpolicy.world.protocol` (as the commands' ``--help`` does) loads nothing heavy.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hpcpolicy.world.apply import World, apply_site, eligible_delay
    from hpcpolicy.world.open import WorldSpec, open_workload, open_world
    from hpcpolicy.world.protocol import TRAIN_FRAC, VAL_FRAC
    from hpcpolicy.world.site_model import Outage, Pool, SiteModel
    from hpcpolicy.world.site_toml import dumps, load_site, loads, save_site
    from hpcpolicy.world.split import Split

_HOMES = {
    "World": "apply", "apply_site": "apply", "eligible_delay": "apply",
    "WorldSpec": "open", "open_workload": "open", "open_world": "open",
    "TRAIN_FRAC": "protocol", "VAL_FRAC": "protocol",
    "Outage": "site_model", "Pool": "site_model", "SiteModel": "site_model",
    "dumps": "site_toml", "load_site": "site_toml", "loads": "site_toml",
    "save_site": "site_toml", "Split": "split",
}

__all__ = ["TRAIN_FRAC", "VAL_FRAC", "Outage", "Pool", "SiteModel", "Split", "World",
           "WorldSpec", "apply_site", "dumps", "eligible_delay", "load_site", "loads",
           "open_workload", "open_world", "save_site"]


def __getattr__(name: str) -> Any:
    """The exported ``name``, from its module (loaded on first use)."""
    if name not in _HOMES:
        raise AttributeError(f"module 'hpcpolicy.world' has no attribute {name!r}")
    return getattr(importlib.import_module(f"hpcpolicy.world.{_HOMES[name]}"), name)
