"""The job table's JSON Schema file and the code's declaration agree."""

from __future__ import annotations

import jsonschema

from hpcpolicy import schemas
from hpcpolicy.schema import JOB_COLUMNS, SCHEMA_VERSION, job_table_json_schema, polars_schema


def test_json_schema_file_matches_code_declaration() -> None:
    assert schemas.load("job_table") == job_table_json_schema()


def test_json_schema_is_valid_and_versioned() -> None:
    doc = schemas.load("job_table")
    jsonschema.Draft202012Validator.check_schema(doc)
    assert doc["x-schema-version"] == SCHEMA_VERSION
    assert list(doc["properties"]) == [c.name for c in JOB_COLUMNS]


def test_polars_schema_column_order_and_kinds() -> None:
    schema = polars_schema()
    assert schema.names() == [c.name for c in JOB_COLUMNS]
    kinds = {c.name: c.kind for c in JOB_COLUMNS}
    # requests are known at submit; allocations and times of what happened are outcomes
    assert all(kinds[n] == "submit" for n in schema.names() if n.startswith("req_"))
    assert all(kinds[n] == "outcome" for n in schema.names() if n.startswith("alloc_"))
    assert kinds["start_time"] == kinds["run_time_s"] == kinds["state"] == "outcome"
