"""valueFormat=confluent-json: Confluent JSON Schema values typed by the subject's latest schema."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from schema_registry_corpus import schema_key, schema_value, wire, write_schemas, write_topic

import storage_core as klog
from storage_core.errors import SchemaRegistryError, UnknownSchemaError, ValueDecodeError
from storage_core.read.json_schema import json_schema_type

ADDRESS = {"type": "object", "properties": {"city": {"type": "string"}, "zip": {"type": ["string", "null"]}}}
ORDER = {
    "$schema": "http://json-schema.org/draft-07/schema#", "title": "Order", "type": "object",
    "properties": {
        "id": {"type": "integer"}, "amount": {"type": "number"}, "paid": {"type": "boolean"},
        "when": {"type": "string", "format": "date-time"}, "tags": {"type": "array", "items": {"type": "string"}},
        "attrs": {"type": "object", "additionalProperties": {"type": "integer"}},
        "ship": {"$ref": "#/definitions/Ship"}, "home": {"$ref": "address.json"},
        "status": {"enum": ["NEW", "PAID"]}, "any": {}, "either": {"oneOf": [{"type": "null"}, {"type": "integer"}]},
        "mixed": {"type": ["integer", "string"]},
    },
    "definitions": {"Ship": {"type": "object", "properties": {"by": {"type": "string"}}}},
}


def test_type_mapping() -> None:
    t = json_schema_type(ORDER, {"address.json": ADDRESS})
    types = {t.field(i).name: t.field(i).type for i in range(t.num_fields)}
    assert types == {
        "id": pa.int64(), "amount": pa.float64(), "paid": pa.bool_(), "when": pa.string(),
        "tags": pa.list_(pa.string()), "attrs": pa.map_(pa.string(), pa.int64()),
        "ship": pa.struct([pa.field("by", pa.string())]),
        "home": pa.struct([pa.field("city", pa.string()), pa.field("zip", pa.string())]),
        "status": pa.string(), "any": pa.string(), "either": pa.int64(), "mixed": pa.string()}


@pytest.fixture
def json_dir(tmp_path: Path) -> Path:
    refs = [{"name": "address.json", "subject": "address", "version": 1}]
    v1 = {"type": "object", "properties": {"id": {"type": "integer"}}}
    write_schemas(tmp_path, [
        (schema_key("address", 1), schema_value("address", 1, 1, json.dumps(ADDRESS), schema_type="JSON")),
        (schema_key("orders-value", 1), schema_value("orders-value", 1, 2, json.dumps(v1), schema_type="JSON")),
        (schema_key("orders-value", 2), schema_value("orders-value", 2, 3, json.dumps(ORDER), schema_type="JSON",
                                                     references=refs)),
        (schema_key("avro-value", 1), schema_value("avro-value", 1, 4, '"string"')),
    ])

    def rec(sid: int, obj: Any) -> bytes:
        return wire(sid, json.dumps(obj).encode())

    write_topic(tmp_path, "orders", [
        (None, rec(2, {"id": 1})),  # written with version 1: the newer fields are null
        (None, rec(3, {"id": 2, "amount": 3, "paid": True, "when": "2024-01-01T00:00:00Z", "tags": ["a", "b"],
                       "attrs": {"x": 1}, "ship": {"by": "sea"}, "home": {"city": "Oslo", "zip": None},
                       "status": "PAID", "any": {"k": [1, 2]}, "either": 5, "mixed": "s", "extra": 1})),
        (None, None),
        (None, rec(3, {"id": "three"})),  # does not fit the schema
        (None, rec(4, {"id": 4})),  # an Avro schema's id
        (None, wire(3, b"{not json")),
    ])
    return tmp_path


def test_decode_and_errors(json_dir: Path) -> None:
    got = klog.read_arrow(json_dir, topics="orders", valueFormat="confluent-json", mode="PERMISSIVE").read_all()
    values = got["value"].to_pylist()
    assert values[0]["id"] == 1 and values[0]["tags"] is None and values[0]["home"] is None
    assert values[1] == {"id": 2, "amount": 3.0, "paid": True, "when": "2024-01-01T00:00:00Z", "tags": ["a", "b"],
                         "attrs": [("x", 1)], "ship": {"by": "sea"}, "home": {"city": "Oslo", "zip": None},
                         "status": "PAID", "any": '{"k":[1,2]}', "either": 5, "mixed": '"s"'}
    assert values[2:] == [None, None, None, None]
    for offset, error, match in ((3, ValueDecodeError, "schema id 3: the value does not fit subject 'orders-value' "
                                                       'version 2: "three" is not a JSON integer'),
                                 (4, UnknownSchemaError, "schema id 4 .* is AVRO, not JSON"),
                                 (5, ValueDecodeError, "schema id 3: the bytes are not JSON")):
        with pytest.raises(error, match=rf"value of topic 'orders' partition 0 offset {offset}: {match}"):
            klog.read_arrow(json_dir, topics="orders", valueFormat="confluent-json",
                            startingOffsets={"orders": {"0": offset}}).read_all()
    with pytest.raises(SchemaRegistryError, match="is AVRO, not JSON"):
        klog.read_arrow(json_dir, topics="orders", valueFormat="confluent-json", valueSubject="avro-value")


def test_dump_confluent_json(json_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from storage_core.tools.cli import main

    assert main(["dump", "--jsonl", "--value-decoder", "confluent-json", str(json_dir / "orders-0")]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert lines[0]["value"] == {"id": 1} and lines[3]["value"] == {"id": "three"}
    assert "is AVRO, not JSON" in lines[4]["value_error"] and "not JSON" in lines[5]["value_error"]


@pytest.mark.spark
def test_confluent_json_through_spark(spark: Any, json_dir: Path) -> None:
    df = (spark.read.format("klog").option("topics", "orders").option("valueFormat", "confluent-json")
          .option("mode", "PERMISSIVE").load(str(json_dir)))
    assert df.schema["value"].dataType.simpleString().startswith("struct<id:bigint,amount:double")
    rows = df.orderBy("offset").select("value.id", "value.home.city", "value.attrs").collect()
    assert [tuple(r) for r in rows[:2]] == [(1, None, None), (2, "Oslo", {"x": 1})]
