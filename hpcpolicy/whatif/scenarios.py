"""Scenarios: changes to the world (machine, load, estimates, period), never to the policy.

A scenario is a comma-separated list of ``key=value`` changes, applied in this order:

* ``range=START..END`` -- only the jobs submitted from START (inclusive) to END (exclusive),
  dates or times in UTC (``2002-01-01..2002-07-01``, ``2002-03-01T08:00..``); either end may be
  left open.
* ``cluster=PATH`` -- another machine, from a cluster spec file (TOML or JSON).
* ``nodes=+10%`` / ``nodes=-25%`` -- every node group scaled (rounded, at least one node);
  ``nodes=+8`` / ``nodes=136`` -- nodes added to / set on a one-group machine.
* ``load=1.2`` -- inter-arrival times divided by 1.2 (20 % more jobs per hour; the jobs
  themselves are unchanged). Logged start times no longer apply and are dropped.
* ``estimates=actual`` -- planning sees every job's real run time instead of its request
  ("perfect estimates"); ``estimates=requested`` keeps the requests (the default).

The scenario :data:`AS_LOGGED` (no change) is always replayed first; every other scenario is
compared with the baseline replayed under the same scenario, on the same jobs.

Example:
    >>> parse_scenario("nodes=+10%, load=1.2").changes
    {'nodes': '+10%', 'load': '1.2'}
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

import numpy as np

from hpcpolicy.cluster import ClusterSpec
from hpcpolicy.errors import ConfigError
from hpcpolicy.workload import Workload

__all__ = ["AS_LOGGED", "SCENARIO_KEYS", "Scenario", "apply_scenario", "parse_scenario"]

SCENARIO_KEYS = ("range", "cluster", "nodes", "load", "estimates")
"""Keys a scenario may change, in the order they are applied."""

_NODES = re.compile(r"^(?P<sign>[+-])?(?P<value>\d+(\.\d+)?)(?P<pct>%)?$")


@dataclass(frozen=True)
class Scenario:
    """Changes to the replayed world; ``id`` is the normal form of the text."""

    id: str
    changes: dict[str, str] = field(default_factory=dict)

    @property
    def label(self) -> str:
        """A short human label."""
        return "as logged" if not self.changes else ", ".join(
            f"{k} {v}" for k, v in self.changes.items())


AS_LOGGED = Scenario("as-logged")
"""The log replayed on its own machine, with its own load and estimates."""


def parse_scenario(text: str) -> Scenario:
    """Parse ``key=value[,key=value...]``; values are checked here, files when applied.

    Raises:
        ConfigError: an unknown key, a repeated key, or a malformed value.
    """
    changes: dict[str, str] = {}
    for part in (p.strip() for p in text.split(",")):
        key, eq, value = part.partition("=")
        key, value = key.strip().lower(), value.strip()
        if not eq or not value:
            raise ConfigError(f"scenario {text!r}: {part!r} is not key=value (keys: "
                              f"{', '.join(SCENARIO_KEYS)}; e.g. nodes=+10%)")
        if key not in SCENARIO_KEYS:
            raise ConfigError(f"scenario {text!r}: unknown key {key!r}; use one of "
                              f"{', '.join(SCENARIO_KEYS)}")
        if key in changes:
            raise ConfigError(f"scenario {text!r} changes {key} twice")
        changes[key] = value
    for key, value in changes.items():
        _CHECKS[key](text, value)
    ordered = {k: changes[k] for k in SCENARIO_KEYS if k in changes}
    if not ordered:
        return AS_LOGGED
    return Scenario(",".join(f"{k}={v}" for k, v in ordered.items()), ordered)


def apply_scenario(scenario: Scenario, workload: Workload,
                   cluster: ClusterSpec) -> tuple[Workload, ClusterSpec]:
    """The workload and machine of ``scenario``.

    Raises:
        ConfigError: a range with no job, a cluster file that cannot be read, a node change
            that is ambiguous on a machine of several node groups.
    """
    c = scenario.changes
    if "range" in c:
        workload = _in_range(workload, c["range"])
    if "cluster" in c:
        from hpcpolicy.cluster_io import load_cluster

        cluster = load_cluster(c["cluster"])
    if "nodes" in c:
        cluster = _scale_nodes(cluster, c["nodes"])
    if "load" in c:
        workload = _compress(workload, float(c["load"]))
    if c.get("estimates") == "actual":
        workload = replace(workload, req_walltime=workload.run_time.copy())
    return workload, cluster


def _check_range(text: str, value: str) -> None:
    lo, hi = _range_bounds(text, value)
    if lo is not None and hi is not None and hi <= lo:
        raise ConfigError(f"scenario {text!r}: the range ends before it starts")


def _range_bounds(text: str, value: str) -> tuple[int | None, int | None]:
    start, dots, end = value.partition("..")
    if not dots:
        raise ConfigError(f"scenario {text!r}: write the range as START..END "
                          "(e.g. range=2002-01-01..2002-07-01; either end may be empty)")
    return _epoch(text, start), _epoch(text, end)


def _epoch(text: str, value: str) -> int | None:
    value = value.strip()
    if not value:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise ConfigError(f"scenario {text!r}: {value!r} is not a date or time "
                          "(YYYY-MM-DD or YYYY-MM-DDTHH:MM, UTC)") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp())


def _check_nodes(text: str, value: str) -> None:
    match = _NODES.match(value)
    if match is None:
        raise ConfigError(f"scenario {text!r}: nodes={value} is not a change such as +10%, "
                          "-25%, +8 or 136")
    if match["pct"] and not match["sign"]:
        raise ConfigError(f"scenario {text!r}: write a relative change with its sign "
                          f"(nodes=+{value} or nodes=-{value})")
    if match["pct"] and match["sign"] == "-" and float(match["value"]) >= 100:
        raise ConfigError(f"scenario {text!r}: nodes={value} leaves no machine")
    if not match["pct"] and match["value"] != str(int(float(match["value"]))):
        raise ConfigError(f"scenario {text!r}: a node count is a whole number, not {value}")


def _check_load(text: str, value: str) -> None:
    try:
        factor = float(value)
    except ValueError:
        factor = math.nan
    if not (math.isfinite(factor) and factor > 0):
        raise ConfigError(f"scenario {text!r}: load={value} must be a positive factor "
                          "(1.2 = inter-arrival times divided by 1.2)")


def _check_estimates(text: str, value: str) -> None:
    if value not in ("actual", "requested"):
        raise ConfigError(f"scenario {text!r}: estimates={value} must be actual or requested")


def _check_cluster(text: str, value: str) -> None:
    del text, value  # the file is read (and its errors reported) when the scenario is applied


_CHECKS = {"range": _check_range, "cluster": _check_cluster, "nodes": _check_nodes,
           "load": _check_load, "estimates": _check_estimates}


def _in_range(workload: Workload, value: str) -> Workload:
    lo, hi = _range_bounds(f"range={value}", value)
    epoch = workload.submit + workload.origin
    keep = np.ones(len(workload), dtype=bool)
    if lo is not None:
        keep &= epoch >= lo
    if hi is not None:
        keep &= epoch < hi
    if not keep.any():
        raise ConfigError(f"scenario range={value}: no job of the log was submitted then")
    return workload.take(np.flatnonzero(keep))


def _scale_nodes(cluster: ClusterSpec, value: str) -> ClusterSpec:
    match = _NODES.match(value)
    assert match is not None  # checked when parsed
    amount = float(match["value"]) * (-1 if match["sign"] == "-" else 1)
    if match["pct"]:
        groups = tuple(replace(g, count=max(1, round(g.count * (1 + amount / 100))))
                       for g in cluster.groups)
    else:
        if len(cluster.groups) != 1:
            raise ConfigError(f"nodes={value}: the machine has {len(cluster.groups)} node "
                              "groups, so a node count is ambiguous; use a percentage "
                              "(nodes=+10%) or a cluster spec file (cluster=PATH)")
        (group,) = cluster.groups
        count = group.count + int(amount) if match["sign"] else int(amount)
        if count < 1:
            raise ConfigError(f"nodes={value} leaves {count} nodes; the machine needs at least 1")
        groups = (replace(group, count=count),)
    scaled = ClusterSpec(groups, name=cluster.name, source=cluster.source, notes=cluster.notes)
    return replace(scaled, name=f"{cluster.name}, nodes {value}")


def _compress(workload: Workload, factor: float) -> Workload:
    first = int(workload.submit[0])
    submit = first + np.floor((workload.submit - first) / factor).astype(np.int64)
    return replace(workload, submit=submit,
                   logged_start=np.full(len(workload), -1, dtype=np.int64))
