"""The shared workload, machine, site and window options turned into what the library takes:
a :class:`~hpcpolicy.world.open.WorldSpec` (:func:`world_spec`), the windows of a replay
(:func:`window_config`) and the node layout of ``--compat slurm`` (:func:`slurm_layout_of`).
The options themselves are declared in :mod:`hpcpolicy.commands._options`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pathlib import Path

    from hpcpolicy.sim.windows import WindowConfig
    from hpcpolicy.slurm.layout import SlurmLayout
    from hpcpolicy.workload import Workload
    from hpcpolicy.world.open import WorldSpec

__all__ = ["parse_window_starts", "slurm_layout_of", "window_config", "world_spec"]


def world_spec(cluster: Path | None, procs: int | None, site: Path | None = None, *,
               compat: str | None = None, procs_from: str | None = None,
               walltime_fallback: str | None = None, drop_zero_runtime: bool | None = None,
               unknown_run_time: int | None = None, **replay: Any) -> WorldSpec:
    """The world ``--cluster``, ``--procs``, ``--site``, ``--compat`` and the workload options
    ask for (None: not given); ``replay``: the other :class:`~hpcpolicy.world.open.WorldSpec`
    fields a command sets (``allocators``, ``spread_penalty``, ``kill_at_limit``).

    Raises:
        ConfigError: a site model that cannot be read, or options out of range.
    """
    from hpcpolicy.workload import workload_options
    from hpcpolicy.world.open import WorldSpec

    return WorldSpec(workload=workload_options(compat, procs_from, walltime_fallback,
                                               drop_zero_runtime, unknown_run_time),
                     cluster=None if cluster is None else str(cluster), procs=procs,
                     compat=compat, **replay).with_site(site)


def slurm_layout_of(table: Path, workload: Workload, cluster: Path | None,
                    procs: int | None, **unused: object) -> SlurmLayout:
    """The node layout of ``--compat slurm`` (:func:`hpcpolicy.slurm.layout.slurm_layout`),
    after refusing in one line the options given in ``unused`` (name -> value; None, False
    and empty mean not given), which that replay has no use for."""
    from hpcpolicy.cluster_io import load_cluster
    from hpcpolicy.errors import ConfigError
    from hpcpolicy.slurm.layout import slurm_layout

    given = [name for name, value in unused.items() if value]
    if given:
        raise ConfigError(f"--compat slurm replays Slurm's own order and backfilling on its "
                          f"own engine; drop {', '.join(given)}")
    spec = load_cluster(cluster) if cluster is not None else None
    return slurm_layout(table, workload, spec, procs)


def parse_window_starts(text: str | None) -> tuple[int, ...] | None:
    """``--window-starts`` (comma-separated 0-based job indices) as a tuple, or None."""
    from hpcpolicy.errors import ConfigError

    if text is None:
        return None
    try:
        return tuple(int(part) for part in text.replace(" ", "").split(",") if part)
    except ValueError:
        raise ConfigError(f"--window-starts {text!r}: give 0-based job indices separated by "
                          "commas, e.g. 1981,2714,2756") from None


def window_config(windows: int | None, size: int | None, starts_text: str | None,
                   seed: int, warm: bool) -> WindowConfig | None:
    """The windowed protocol ``--windows``, ``--window-size``, ``--window-starts``,
    ``--seed`` and ``--warm`` ask for, or None for the whole workload."""
    from hpcpolicy.errors import ConfigError
    from hpcpolicy.sim.windows import WindowConfig

    starts = parse_window_starts(starts_text)
    if windows is None and starts is None:
        if size is not None or warm:
            raise ConfigError("--window-size and --warm need --windows N or --window-starts")
        return None
    return WindowConfig(size=1024 if size is None else size,
                        count=10 if windows is None else windows, seed=seed, starts=starts,
                        warm=warm)
