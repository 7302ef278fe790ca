"""Configuration grids: a sweep over Slurm knobs (``PriorityWeightAge`` x ``bf_window``), each
combination one configuration candidate compared with the site's slurm.conf.

A spec's ``[grid]`` table maps a slurm.conf key or a SchedulerParameters option to the values
to try; every combination is one candidate, written as ``whatif -c`` takes it
(``PriorityWeightAge=5000 bf_window=2880``), so its cell's report carries the change to apply
like any configuration candidate (:mod:`hpcpolicy.whatif.slurm_section`).

Example:
    >>> axes = read_grid({"PriorityWeightAge": [1000, 5000], "bf_window": [2880]}, "grid.toml")
    >>> grid_candidates(axes)
    ('PriorityWeightAge=1000 bf_window=2880', 'PriorityWeightAge=5000 bf_window=2880')
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping

from hpcpolicy.errors import ConfigError
from hpcpolicy.slurmconf import parse_candidate
from hpcpolicy.slurmconf.changes import GlobalChange, SchedulerChange

__all__ = ["Axes", "grid_candidates", "read_grid"]

Axes = tuple[tuple[str, tuple[str, ...]], ...]
"""The grid: (key, the values to try) per axis, in the spec's order."""


def _value(key: str, value: object, where: str) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ConfigError(f"{where}: key `grid.{key}`: {value!r} is not a value to write "
                          "after the key; give numbers or strings, e.g. [1000, 5000]")
    return str(value)


def read_grid(table: object, where: str) -> Axes:
    """The spec's ``[grid]`` table as axes, each key checked as a change of its own.

    Raises:
        ConfigError: one line naming ``where`` and the key: not a table, an axis with no
            value, or a key that is not a slurm.conf key or SchedulerParameters option
            (QOS, partition and association changes are candidates).
    """
    if not isinstance(table, Mapping):
        raise ConfigError(f"{where}: key `grid` must be a table of KEY = [values], e.g. "
                          "[grid] PriorityWeightAge = [1000, 5000]")
    axes = []
    for key, values in table.items():
        if not isinstance(values, list) or not values:
            raise ConfigError(f"{where}: key `grid.{key}` must list at least one value, e.g. "
                              f"{key} = [1000, 5000]")
        texts = tuple(_value(key, v, where) for v in values)
        for text in texts:
            try:
                changes = parse_candidate(f"{key}={text}")
            except ConfigError as exc:
                raise ConfigError(f"{where}: key `grid.{key}`: {exc}") from None
            if not all(isinstance(c, (GlobalChange, SchedulerChange)) for c in changes):
                raise ConfigError(f"{where}: key `grid.{key}`: a grid takes slurm.conf keys and "
                                  "SchedulerParameters options (PriorityWeightAge, bf_window); "
                                  "give QOS, partition and association changes as candidates")
        if len(set(texts)) != len(texts):
            raise ConfigError(f"{where}: key `grid.{key}` lists a value twice")
        axes.append((str(key), texts))
    return tuple(axes)


def grid_candidates(axes: Axes) -> tuple[str, ...]:
    """Every combination of the axes' values as one candidate, the first axis outermost."""
    if not axes:
        return ()
    keys = [key for key, _ in axes]
    return tuple(" ".join(f"{k}={v}" for k, v in zip(keys, combo, strict=True))
                 for combo in itertools.product(*(values for _, values in axes)))
