"""site.toml: read and write a :class:`~hpcpolicy.world.site_model.SiteModel`.

The file is meant for an admin to read and edit: one table per element, each preceded by
comments stating the evidence the log gave for it. Reading is strict: an unknown table or
key, or a value of the wrong type, is a one-line error naming the key.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hpcpolicy.atomic import write_text
from hpcpolicy.docload import loads_toml, read_toml
from hpcpolicy.errors import ConfigError
from hpcpolicy.world.site_model import Outage, Pool, SiteModel

__all__ = ["dumps", "load_site", "loads", "save_site"]

# table -> key -> (SiteModel field, accepted type)
_SCHEMA: dict[str, dict[str, tuple[str, type | tuple[type, ...]]]] = {
    "nodes": {"cores_per_node": ("cores_per_node", int), "whole_node": ("whole_node", bool),
              "machine_cores": ("machine_cores", int)},
    "limits": {"user_jobs": ("user_jobs", int), "user_cores": ("user_cores", int)},
    "capacity": {"availability": ("availability", (int, float)), "outages": ("outages", list)},
    "holds": {"use_eligible": ("use_eligible", bool)},
    "priority": {"policy": ("priority", str), "weight_age": ("weight_age", (int, float)),
                 "weight_size": ("weight_size", (int, float)),
                 "weight_fairshare": ("weight_fairshare", (int, float)),
                 "half_life_s": ("half_life_s", int)},
    "cadence": {"interval_s": ("interval_s", int), "backfill": ("backfill", str)},
}
_OUTAGE_KEYS = {"start", "end", "cores"}
_OUTAGE_FORM = "{ start = 2002-07-28T10:00:00Z, end = 2002-07-28T18:00:00Z, cores = 64 }"
"""An outage as site.toml writes it (UTC dates), named in errors as the form to use."""
_EVIDENCE_ORDER = ("nodes", "pools", "limits", "capacity", "holds", "priority", "cadence")


def _typed(where: str, value: Any, kind: type | tuple[type, ...]) -> Any:
    # bool is an int in Python; TOML keeps them apart, so must we
    if isinstance(value, bool) and kind is not bool:
        raise ConfigError(f"{where}: expected {_kind_name(kind)}, got a boolean")
    if not isinstance(value, kind):
        raise ConfigError(f"{where}: expected {_kind_name(kind)}, got {type(value).__name__} "
                          f"{value!r}")
    return float(value) if kind == (int, float) else value  # type: ignore[arg-type]


def _kind_name(kind: type | tuple[type, ...]) -> str:
    if isinstance(kind, tuple):
        return "a number"
    return {int: "a whole number", bool: "true or false", str: "a string",
            list: "a list"}[kind]


def _when(where: str, value: Any) -> int:
    """Unix seconds of a TOML date and time (UTC where it names no offset)."""
    if not isinstance(value, datetime):
        raise ConfigError(f"{where}: expected a date and time (UTC) such as "
                          f"2002-07-28T10:00:00Z, got {value!r}")
    return int((value if value.tzinfo else value.replace(tzinfo=UTC)).timestamp())


def _date(unix: int) -> str:
    """A TOML date and time (UTC) of Unix seconds."""
    return datetime.fromtimestamp(unix, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _outages(where: str, items: list[Any]) -> tuple[Outage, ...]:
    out = []
    for i, item in enumerate(items):
        at = f"{where}[{i}]"
        if not isinstance(item, dict):
            raise ConfigError(f"{at}: expected a table such as {_OUTAGE_FORM}")
        if {"start_s", "end_s"} & set(item):
            raise ConfigError(f"{at}: start_s/end_s (seconds since the log's first submit) are "
                              f"no longer read; write dates, {_OUTAGE_FORM}, or rerun "
                              "`hpcpolicy calibrate` to write them")
        unknown = sorted(set(item) - _OUTAGE_KEYS)
        missing = sorted(_OUTAGE_KEYS - set(item))
        if unknown or missing:
            raise ConfigError(f"{at}: " + (f"unknown key {unknown[0]!r}" if unknown else
                                           f"missing key {missing[0]!r}")
                              + f"; an outage is {_OUTAGE_FORM}")
        out.append(Outage(_when(f"{at}.start", item["start"]), _when(f"{at}.end", item["end"]),
                          _typed(f"{at}.cores", item["cores"], int)))
    return tuple(out)


def loads(text: str, label: str = "site.toml") -> SiteModel:
    """A site model from TOML text.

    Raises:
        ConfigError: bad TOML, an unknown table or key, a wrong type or value (naming it).

    Example:
        >>> loads('[limits]\\nuser_jobs = 8\\n').user_jobs
        8
    """
    return _from_doc(loads_toml(text, label, "site model"), text, label)


def _from_doc(doc: dict[str, Any], text: str, label: str) -> SiteModel:
    """A site model from a parsed site.toml document and its text (``label`` names it in
    errors)."""
    values: dict[str, Any] = {}
    for table, body in doc.items():
        if table == "provenance":
            values["provenance"] = dict(body) if isinstance(body, dict) else {}
            continue
        if table == "pools":
            values["pools"] = tuple(Pool(str(name), _typed(f"{label}: pools.{name}", cores, int))
                                    for name, cores in _table(label, table, body).items())
            continue
        keys = _SCHEMA.get(table)
        if keys is None:
            raise ConfigError(f"{label}: unknown table [{table}]; known: provenance, pools, "
                              f"{', '.join(_SCHEMA)}")
        for key, value in _table(label, table, body).items():
            if key not in keys:
                raise ConfigError(f"{label}: unknown key {table}.{key}; known: "
                                  f"{', '.join(keys)}")
            name, kind = keys[key]
            where = f"{label}: {table}.{key}"
            typed = _typed(where, value, kind)
            values[name] = _outages(where, typed) if name == "outages" else typed
    values["evidence"] = _evidence(text)
    try:
        return SiteModel(**values)
    except ConfigError as exc:
        raise ConfigError(f"{label}: {exc}") from None


def _evidence(text: str) -> dict[str, str]:
    """The ``# evidence:`` comment block above each element's table (as :func:`dumps`
    writes it), so that a model read back still states why each element is there."""
    found: dict[str, str] = {}
    block: list[str] | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("# evidence:"):
            block = [line[len("# evidence:"):].strip()]
        elif block is not None and line.startswith("#"):
            block.append(line[1:].strip())
        elif block is not None and line.startswith("[") and line.endswith("]"):
            found[line[1:-1].strip()] = " ".join(block)
            block = None
        else:
            block = None
    return found


def _table(label: str, table: str, body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise ConfigError(f"{label}: {table} must be a table ([{table}])")
    return body


def load_site(path: str | Path) -> SiteModel:
    """Read ``path`` (see :func:`loads`).

    Raises:
        ConfigError: the file is missing or bad (naming the key).
    """
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"{p}: no such site model; write one with `hpcpolicy calibrate "
                          "jobs.parquet -o site.toml`")
    doc = read_toml(p, "site model")  # its size checked before the text is read again
    return _from_doc(doc, p.read_text(encoding="utf-8", errors="replace"), str(p))


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(round(v, 6))
    if isinstance(v, int):
        return str(v)
    return json.dumps(str(v))  # a TOML basic string is a JSON string


def _comment(text: str) -> list[str]:
    lines, line = [], "#"
    for word in text.split():
        if len(line) + len(word) > 95:
            lines.append(line)
            line = "#"
        line += " " + word
    return [*lines, line]


def dumps(site: SiteModel) -> str:
    """TOML text of ``site``, each element with its evidence as comments."""
    out = ["# hpcpolicy site model: the world the log was scheduled in, as fitted by",
           "# `hpcpolicy calibrate`. Edit freely; `hpcpolicy fidelity --site` measures the",
           "# result. An element set to its 'off' value (0, false, fcfs, 1.0) changes nothing.",
           ""]
    if site.provenance:
        out.append("[provenance]")
        out += [f"{k} = {_value(v)}" for k, v in site.provenance.items()
                if isinstance(v, bool | int | float | str)]
        out.append("")
    tables: dict[str, list[tuple[str, Any]]] = {
        "nodes": [("cores_per_node", site.cores_per_node), ("whole_node", site.whole_node),
                  ("machine_cores", site.machine_cores)],
        "pools": [(p.partition if p.partition.isidentifier() else json.dumps(p.partition),
                   p.cores) for p in site.pools],
        "limits": [("user_jobs", site.user_jobs), ("user_cores", site.user_cores)],
        "capacity": [("availability", site.availability)],
        "holds": [("use_eligible", site.use_eligible)],
        "priority": [("policy", site.priority), ("weight_age", site.weight_age),
                     ("weight_size", site.weight_size),
                     ("weight_fairshare", site.weight_fairshare),
                     ("half_life_s", site.half_life_s)],
        "cadence": [("interval_s", site.interval_s), ("backfill", site.backfill)],
    }
    for table in _EVIDENCE_ORDER:
        if table in site.evidence:
            out += _comment(f"evidence: {site.evidence[table]}")
        out.append(f"[{table}]")
        out += [f"{k} = {_value(v)}" for k, v in tables[table]]
        if table == "capacity":
            out.append("outages = [" + "".join(
                f"\n  {{ start = {_date(o.start_s)}, end = {_date(o.end_s)}, cores = {o.cores} }},"
                for o in site.outages) + ("\n]" if site.outages else "]"))
        out.append("")
    return "\n".join(out)


def save_site(site: SiteModel, path: str | Path) -> None:
    """Write ``site`` to ``path`` atomically."""
    write_text(Path(path), dumps(site))
