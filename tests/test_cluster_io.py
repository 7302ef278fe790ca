"""Cluster spec files (TOML/JSON, schema-checked) and the default machine of a job table."""

from __future__ import annotations

import dataclasses
import json
import tomllib
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from conftest import ROOT

from benchmarks.builders.job_tables import job_table, write_job_table
from hpcpolicy import schemas
from hpcpolicy.cluster import ClusterSpec, NodeGroup
from hpcpolicy.cluster_io import cluster_from_dict, header_facts, load_cluster, resolve_cluster
from hpcpolicy.errors import ConfigError

EXAMPLES = ROOT / "examples"
GOOD = {"name": "tiny", "groups": [{"name": "cpu", "count": 2, "cores": 4}]}


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_sp2_example() -> None:
    spec = load_cluster(EXAMPLES / "sp2-256.toml")
    assert (spec.total_cores, spec.total_nodes, spec.total_gpus) == (256, 256, 0)
    assert spec.source.endswith("sp2-256.toml") and spec.name == "sp2-256"


def test_gpu_partition_example() -> None:
    spec = load_cluster(EXAMPLES / "gpu-partition.toml")
    assert spec.total_nodes == 30
    assert spec.total_cores == 16 * 64 + 8 * 40 + 6 * 96
    assert spec.total_gpus == 16 * 4 + 8 * 4 + 6 * 8
    per_rack: dict[str | None, int] = {}
    for g in spec.groups:
        per_rack[g.rack] = per_rack.get(g.rack, 0) + g.count
    assert max(per_rack.values()) == 8 and None not in per_rack
    assert {g.gpu_type for g in spec.groups} == {"a100", "v100", "h100"}


def test_json_and_toml_give_the_same_spec(tmp_path: Path) -> None:
    doc = tomllib.loads((EXAMPLES / "gpu-partition.toml").read_text())
    spec = load_cluster(write(tmp_path, "gpu.json", json.dumps(doc)))
    assert spec.groups == load_cluster(EXAMPLES / "gpu-partition.toml").groups


@pytest.mark.parametrize(("text", "message"), [
    ('[[groups]]\nname = "cpu"\ncount = 4\ncors = 8\n',
     "groups[0]: unknown key 'cors'; did you mean 'cores'?"),
    ('[[gropus]]\nname = "cpu"\ncount = 4\ncores = 8\n',
     "unknown key 'gropus'; did you mean 'groups'?"),
    ('[[groups]]\nname = "cpu"\ncount = "four"\ncores = 8\n',
     "groups[0].count must be an integer, not 'four'"),
    ('[[groups]]\nname = "cpu"\ncount = 0\ncores = 8\n', "groups[0].count must be >= 1, not 0"),
    ('[[groups]]\nname = "cpu"\ncores = 8\n', "groups[0]: required key 'count' is missing"),
    ('name = "x"\ngroups = []\n', "groups needs at least 1 item(s)"),
    ('[[groups]]\nname = "g"\ncount = 1\ncores = 8\ngpus = 4\n',
     "groups[0] (g): gpu_type is required when gpus > 0"),
    ('[[groups]]\nname = "g"\ncount = 1\ncores = 8\ngpu_type = "a100"\n',
     "groups[0] (g): gpu_type 'a100' given but gpus is 0"),
    ('[[groups]]\nname = "g"\ncount = 1\ncores = 8\ngpu_speed = 0\n',
     "groups[0].gpu_speed must be > 0, not 0"),
    ('[[groups]]\nname = "g"\ncount = 1\ncores = 8\n[[groups]]\nname = "g"\ncount = 1\n'
     'cores = 2\n', "groups[1] (g): group name 'g' is used twice"),
    ('[[groups]]\nname = "g"\ncount = 1\ncores = true\n',
     "groups[0].cores must be an integer, not True"),
])
def test_bad_specs_name_file_and_key(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, "spec.toml", text)
    with pytest.raises(ConfigError) as err:
        load_cluster(path)
    assert str(err.value) == f"{path}: {message}"


def test_syntax_errors_and_extensions(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"not valid TOML: .*line 2"):
        load_cluster(write(tmp_path, "a.toml", 'name = "x"\ncount 4\n'))
    with pytest.raises(ConfigError, match=r"a\.json:1:2: the cluster spec is not valid JSON: "):
        load_cluster(write(tmp_path, "a.json", "{groups: 1}"))
    with pytest.raises(ConfigError, match=r"must be a \.toml or \.json file"):
        load_cluster(write(tmp_path, "a.yaml", "groups: []"))
    with pytest.raises(ConfigError, match="cannot read the cluster spec"):
        load_cluster(tmp_path / "absent.toml")


BAD_DOCS: list[Any] = [
    [],
    {"groups": "cpu"},
    {"groups": [{"name": "c", "count": 1.5, "cores": 1}]},
    {"groups": [{"name": "", "count": 1, "cores": 1}]},
    {"groups": [{"name": "c", "count": 1, "cores": 1, "mem_mib": -1}]},
    {"groups": [{"name": "c", "count": 1, "cores": 1}], "racks": 2},
    {"name": 3, "groups": [{"name": "c", "count": 1, "cores": 1}]},
    {"notes": [1], "groups": [{"name": "c", "count": 1, "cores": 1}]},
]


def test_own_check_agrees_with_jsonschema() -> None:
    schema = schemas.load("cluster")
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    for path in EXAMPLES.glob("*.toml"):
        doc = tomllib.loads(path.read_text())
        validator.validate(doc)
        cluster_from_dict(doc)
    for doc in BAD_DOCS:
        assert list(validator.iter_errors(doc)), doc
        with pytest.raises(ConfigError):
            cluster_from_dict(doc)


def test_schema_keys_are_the_dataclass_fields() -> None:
    schema = schemas.load("cluster")
    group_keys = set(schema["$defs"]["group"]["properties"])
    assert group_keys == {f.name for f in dataclasses.fields(NodeGroup)}
    spec_fields = {f.name for f in dataclasses.fields(ClusterSpec)} - {"source"}
    assert set(schema["properties"]) == spec_fields


def table_with_header(tmp_path: Path, header: list[dict[str, Any]]) -> Path:
    return write_job_table(tmp_path / "jobs.parquet", job_table([]), header)


def test_default_machine_from_the_log_header(tmp_path: Path) -> None:
    spec = resolve_cluster(table=table_with_header(tmp_path, [{"MaxProcs": 240,
                                                               "MaxNodes": 120}]))
    assert (spec.total_cores, spec.total_nodes, spec.source) == (240, 120, "swf-header")
    spec = resolve_cluster(table=table_with_header(tmp_path, [{"MaxNodes": "256"}]))
    assert (spec.total_cores, spec.total_nodes) == (256, 256)
    assert "one processor per node" in spec.notes[0]
    path = table_with_header(tmp_path, [{"MaxNodes": "338 (batch partition; 512 total)",
                                         "MaxProcs": "338"}])
    assert header_facts(path) == {"MaxNodes": 338, "MaxProcs": 338}
    assert resolve_cluster(table=path).total_cores == 338


def test_explicit_machine_wins_and_conflicts_are_refused(tmp_path: Path) -> None:
    path = table_with_header(tmp_path, [{"MaxProcs": 338}])
    assert resolve_cluster(procs=512, table=path).total_cores == 512
    assert resolve_cluster(spec=EXAMPLES / "sp2-256.toml", table=path).total_cores == 256
    with pytest.raises(ConfigError, match="give only one"):
        resolve_cluster(spec=EXAMPLES / "sp2-256.toml", procs=8)
    with pytest.raises(ConfigError, match="--procs must be a positive"):
        resolve_cluster(procs=0)


def test_unknown_machine_size_says_what_to_pass(tmp_path: Path) -> None:
    path = table_with_header(tmp_path, [{"Version": "2.2"}])
    with pytest.raises(ConfigError, match=r"machine size is unknown.*pass --procs N or "
                                          r"--cluster spec.toml"):
        resolve_cluster(table=path)
    with pytest.raises(ConfigError, match="disagree on MaxProcs"):
        resolve_cluster(table=table_with_header(tmp_path, [{"MaxProcs": 8}, {"MaxProcs": 9}]))
    with pytest.raises(ConfigError, match="machine size is unknown"):
        resolve_cluster()
