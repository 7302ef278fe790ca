"""Load a :class:`~hpcpolicy.cluster.ClusterSpec` from a file, or find the default for a table.

Cluster files are TOML (``.toml``) or JSON (``.json``) documents checked against
``schemas/cluster.schema.json`` (see ``examples/``). The check runs here, with no dependency
beyond the standard library, over the small part of JSON Schema that file uses (type,
properties, required, additionalProperties, minItems, minimum, exclusiveMinimum, maximum,
minLength, items, local ``$ref``); a test checks that it agrees with the ``jsonschema``
package. Beyond the schema, a number must be finite (TOML and Python's JSON reader accept
``inf`` and ``nan``).

Without a file, the machine comes from ``--procs N`` or from the SWF header facts that
``hpcpolicy ingest`` stores in the job table's Parquet metadata (``MaxProcs``, ``MaxNodes``).
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpcpolicy.cluster import ClusterSpec, GpuModel, NodeGroup
from hpcpolicy.docload import read_json, read_toml
from hpcpolicy.errors import ConfigError
from hpcpolicy.hostlist import expand_hostlist
from hpcpolicy.limits import check_cluster_bytes, check_cluster_size

if TYPE_CHECKING:
    from hpcpolicy.table import JobTable

__all__ = ["cluster_from_dict", "header_facts", "load_cluster", "resolve_cluster",
           "with_spread_penalty"]

_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "number": (int, float),
    "integer": (int,),
}


def _schema() -> dict[str, Any]:
    from hpcpolicy.schemas import load

    schema: dict[str, Any] = load("cluster")
    return schema


def _type_ok(value: Any, kind: str) -> bool:
    if isinstance(value, bool):  # bool is an int in Python, never a number in JSON
        return False
    if kind == "integer" and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, _JSON_TYPES[kind])


def _check(value: Any, schema: dict[str, Any], root: dict[str, Any], where: str) -> None:
    """Raise ConfigError (without the file name) at the first place ``value`` breaks ``schema``."""
    if "$ref" in schema:
        name = schema["$ref"].removeprefix("#/$defs/")
        schema = root["$defs"][name]
    kind = schema.get("type")
    at = f"{where}: " if where else ""
    if kind and not _type_ok(value, kind):
        article = "an" if kind[0] in "aeiou" else "a"
        raise ConfigError(f"{where or 'the document'} must be {article} {kind}, not {value!r}")
    if isinstance(value, dict):
        props = schema.get("properties", {})
        for key in value:
            if key not in props and schema.get("additionalProperties") is False:
                close = difflib.get_close_matches(key, list(props), n=1, cutoff=0.6)
                hint = f"; did you mean {close[0]!r}?" if close else (
                    f"; allowed keys: {', '.join(props)}")
                raise ConfigError(f"{at}unknown key {key!r}{hint}")
        for key in schema.get("required", []):
            if key not in value:
                raise ConfigError(f"{at}required key {key!r} is missing")
        extra = schema.get("additionalProperties")
        for key, sub in value.items():
            rule = props.get(key, extra if isinstance(extra, dict) else {})
            _check(sub, rule, root, f"{where}.{key}" if where else key)
    elif isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            raise ConfigError(f"{where} needs at least {schema['minItems']} item(s)")
        for i, item in enumerate(value):
            _check(item, schema.get("items", {}), root, f"{where}[{i}]")
    elif isinstance(value, str):
        if len(value) < schema.get("minLength", 0):
            raise ConfigError(f"{where} must not be empty")
    elif isinstance(value, int | float):
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(f"{where} must be a finite number, not {value}")
        if "maximum" in schema and value > schema["maximum"]:
            raise ConfigError(f"{where} must be <= {schema['maximum']}, not {value}")
        if "minimum" in schema and value < schema["minimum"]:
            raise ConfigError(f"{where} must be >= {schema['minimum']}, not {value}")
        if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
            raise ConfigError(f"{where} must be > {schema['exclusiveMinimum']}, not {value}")


def cluster_from_dict(doc: Any, *, source: str = "explicit") -> ClusterSpec:
    """A cluster spec from a parsed document, validated against ``cluster.schema.json``.

    Args:
        doc: the parsed TOML/JSON document.
        source: where it came from (a file path), recorded in :attr:`ClusterSpec.source`.

    Raises:
        ConfigError: the document breaks the schema or a rule the schema cannot state
            (unique group names, ``gpu_type`` exactly when ``gpus > 0``; at most
            :data:`~hpcpolicy.limits.MAX_GROUPS` groups and
            :data:`~hpcpolicy.limits.MAX_NODES` nodes); the message names the key.

    Example:
        >>> spec = cluster_from_dict({"groups": [{"name": "cpu", "count": 4, "cores": 8}]})
        >>> spec.total_cores
        32
    """
    if isinstance(doc, dict) and isinstance(doc.get("groups"), list):
        counts = [g.get("count") for g in doc["groups"] if isinstance(g, dict)]
        check_cluster_size(len(doc["groups"]),
                           sum(c for c in counts if isinstance(c, int) and c > 0))
    root = _schema()
    _check(doc, root, root, "")
    groups = []
    seen: set[str] = set()
    for i, raw in enumerate(doc["groups"]):
        where = f"groups[{i}] ({raw['name']})"
        if raw["name"] in seen:
            raise ConfigError(f"{where}: group name {raw['name']!r} is used twice")
        seen.add(raw["name"])
        if raw.get("gpus", 0) > 0 and "gpu_type" not in raw:
            raise ConfigError(f"{where}: gpu_type is required when gpus > 0")
        if raw.get("gpus", 0) == 0 and "gpu_type" in raw:
            raise ConfigError(f"{where}: gpu_type {raw['gpu_type']!r} given but gpus is 0")
        if "nodes" in raw and len(names := expand_hostlist(raw["nodes"])) != raw["count"]:
            raise ConfigError(f"{where}: nodes {raw['nodes']!r} names {len(names)} nodes, "
                              f"count is {raw['count']}")
        ints = {k: int(v) for k, v in raw.items() if k in ("count", "cores", "mem_mib", "gpus")}
        groups.append(NodeGroup(**{**raw, **ints}))
    gpu = dict(doc.get("gpu", {}))
    parts = tuple(sorted(gpu.pop("partitions", {}).items()))
    members = tuple((name, tuple(expand_hostlist(value)))
                    for name, value in doc.get("partitions", {}).items())
    return ClusterSpec(tuple(groups), name=doc.get("name", "cluster"), source=source,
                       notes=tuple(doc.get("notes", ())),
                       gpu=GpuModel(**gpu, partition_sensitivity=parts), partitions=members)


def load_cluster(path: str | Path) -> ClusterSpec:
    """Read and validate a cluster spec file (``.toml`` or ``.json``).

    Raises:
        ConfigError: unreadable file, unknown extension, syntax error, or a schema violation;
            the message starts with the file name and names the key (with a "did you mean"
            for a misspelt one).

    Example:
        >>> load_cluster("examples/sp2-256.toml").total_cores  # doctest: +SKIP
        256
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".toml", ".json"):
        raise ConfigError(f"{path}: a cluster spec must be a .toml or .json file")
    if path.is_file():  # else reading it says what is wrong
        check_cluster_bytes(str(path), path.stat().st_size)
    doc = (read_toml if suffix == ".toml" else read_json)(path, "cluster spec")
    try:
        return cluster_from_dict(doc, source=str(path))
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None


def _leading_int(value: Any) -> int | None:
    """338 from ``338``, ``"338"`` or ``"338 (batch partition; 512 total)"``; else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    match = re.match(r"\s*(\d+)", str(value)) if isinstance(value, str) else None
    return int(match.group(1)) if match else None


def header_facts(table: str | Path | JobTable) -> dict[str, int]:
    """``MaxProcs`` / ``MaxNodes`` stated by the logs behind a job table (Parquet metadata).

    Only positive values the headers state are returned; inputs whose headers disagree raise.
    """
    from hpcpolicy.table import open_job_table  # checks file, schema version and columns

    headers = open_job_table(table).headers
    facts: dict[str, int] = {}
    for header in headers:
        lowered = {str(k).lower(): v for k, v in header.items()}
        for key in ("MaxProcs", "MaxNodes"):
            value = _leading_int(lowered.get(key.lower()))
            if value is None or value < 1:
                continue
            if facts.setdefault(key, value) != value:
                raise ConfigError(f"{table}: its inputs' headers disagree on {key} "
                                  f"({facts[key]} vs {value}); pass --procs N or --cluster")
    return facts


def _partial_machine(table: str | Path | JobTable) -> list[str]:
    """A warning for each header size that says it counts only part of the machine
    (``MaxNodes: 338 (batch partition; 512 total)``): the jobs of the other partitions ran on
    nodes the replay does not have."""
    from hpcpolicy.table import open_job_table

    found = []
    for header in open_job_table(table).headers:
        for key in ("MaxNodes", "MaxProcs"):
            text = header.get(f"{key}_text")
            if isinstance(text, str) and re.search(r"partition|total|of\s+\d", text, re.I):
                found.append(f"warning: the log header says {key}: {text}; the replay "
                             "has only that part, so any job that ran on nodes outside it "
                             "(another partition) competes for it here; describe the whole "
                             "machine with --cluster FILE")
    return found


def resolve_cluster(
    *,
    spec: str | Path | None = None,
    procs: int | None = None,
    table: str | Path | JobTable | None = None,
) -> ClusterSpec:
    """The machine to replay on: a spec file, ``--procs N``, or the table's SWF header.

    Args:
        spec: cluster spec file (TOML/JSON); excludes ``procs``.
        procs: a homogeneous machine of this many processors (one per node).
        table: the job table (or one already opened), whose header facts give the default:
            ``MaxProcs`` processors
            (on ``MaxNodes`` equal nodes when that divides evenly); with ``MaxNodes`` alone,
            one processor per node, as the Lublin model traces mean it.

    Raises:
        ConfigError: both ``spec`` and ``procs`` given, or none of the three says how big
            the machine is.

    Example:
        >>> resolve_cluster(procs=512).total_cores
        512
    """
    if spec is not None and procs is not None:
        raise ConfigError("--cluster and --procs both describe the machine; give only one")
    if spec is not None:
        return load_cluster(spec)
    if procs is not None:
        if procs < 1:
            raise ConfigError(f"--procs must be a positive number of processors, not {procs}")
        return ClusterSpec.homogeneous(procs, source="--procs", name=f"{procs} processors")
    if table is not None:
        facts = header_facts(table)
        if "MaxProcs" in facts:
            n = facts["MaxProcs"]
            machine = ClusterSpec.homogeneous(n, facts.get("MaxNodes"), source="swf-header",
                                              name=f"{n} processors (log header)")
            return dataclasses.replace(machine, notes=(*machine.notes, *_partial_machine(table)))
        if "MaxNodes" in facts:
            n = facts["MaxNodes"]
            return ClusterSpec(
                ClusterSpec.homogeneous(n).groups, name=f"{n} processors (log header)",
                source="swf-header",
                notes=("the header gives MaxNodes but no MaxProcs: one processor per node",),
            )
    where = f"{getattr(table, 'path', table)}: " if table is not None else ""
    raise ConfigError(f"{where}the machine size is unknown (no MaxProcs/MaxNodes in the log "
                      "header); pass --procs N or --cluster spec.toml")


def with_spread_penalty(spec: ClusterSpec, penalty: float | None,
                        allocators: Sequence[str]) -> ClusterSpec:
    """``spec`` with its GPU spread penalty set to ``penalty`` (None keeps the spec's).

    Raises:
        ConfigError: a penalty with only the pooled ``first-fit`` allocator, which does not
            place GPUs on nodes and so cannot charge for spreading them.
    """
    if penalty is None:
        return spec
    if all(a == "first-fit" for a in allocators):
        raise ConfigError("--spread-penalty needs a node-level --allocator (first-available, "
                          "best-fit or topology-aware); first-fit does not place GPUs on nodes")
    return dataclasses.replace(spec, gpu=dataclasses.replace(spec.gpu, spread_penalty=penalty))
