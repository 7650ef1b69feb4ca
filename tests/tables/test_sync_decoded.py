"""``klog sync`` with ``valueFormat``: the value's fields as typed columns beside the Kafka columns,
and the table's schema following the subject's as it evolves.

The truth is the generator's: it decided every datum, wrote it in Confluent's wire format with
fastavro under the schema it registered in ``_schemas``, and knows what each record reads as under
the subject's latest schema (Avro's resolution: a field added takes its default, an int read as a
long). The tables are read back by pyiceberg and delta-rs."""

from __future__ import annotations

import io
import json
import random
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
import pytest
from schema_registry_corpus import T0, schema_key, schema_value, wire
from test_sync import FORMATS, SEED, Table, _seeded

from storage_core.errors import InvalidOptionError, SyncError
from storage_core.log.config import LogConfig
from storage_core.log.manager import LogManager
from storage_core.log.topic_partition import TopicPartition
from storage_core.record.records import Record, build_batch
from storage_core.tables import sync

TOPIC = "people"
PARTITIONS = 2
ADDRESS = {"type": "record", "name": "Address", "fields": [{"name": "city", "type": "string"}]}
ADDRESS_V2 = {"type": "record", "name": "Address", "fields": [
    {"name": "city", "type": "string"}, {"name": "zip", "type": ["null", "int"], "default": None}]}


def person(age: str, address: dict[str, Any], *extra: dict[str, Any]) -> dict[str, Any]:
    return {"type": "record", "name": "Person", "namespace": "gen", "fields": [
        {"name": "name", "type": "string"}, {"name": "age", "type": age},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "address", "type": ["null", address], "default": None}, *extra]}


V1 = person("int", ADDRESS)
#: compatible: a new optional field, a nested field added
V2 = person("int", ADDRESS_V2, {"name": "email", "type": ["null", "string"], "default": None})
#: compatible for Avro and Iceberg (int widens to long); Delta cannot widen a column
V3 = person("long", ADDRESS_V2, {"name": "email", "type": ["null", "string"], "default": None})
#: incompatible: name becomes an int
BAD = person("long", ADDRESS_V2, {"name": "email", "type": ["null", "string"], "default": None})
BAD["fields"][0] = {"name": "name", "type": "int"}


class People:
    """A topic of Avro people, the _schemas records registering each version, and the truth: every
    record's fields as the latest registered schema reads them."""

    def __init__(self, root: Path, seed: int) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.rng = random.Random(seed)
        self.versions: list[dict[str, Any]] = []
        self.records: dict[int, list[tuple[bytes | None, dict[str, Any] | None, int]]] = {
            p: [] for p in range(PARTITIONS)}  # (key, datum as written, schema version)
        self.config = LogConfig.from_properties({})

    def register(self, schema: dict[str, Any]) -> None:
        self.versions.append(schema)
        v = len(self.versions)
        self._write("_schemas", 0, [(schema_key(f"{TOPIC}-value", v),
                                     schema_value(f"{TOPIC}-value", v, v, json.dumps(schema)))])

    def _write(self, topic: str, partition: int, kvs: list[tuple[bytes | None, bytes | None]]) -> None:
        with LogManager([self.root], writable=True, config=self.config) as lm:
            tp = TopicPartition(topic, partition)
            lg = lm.get_log(tp) or lm.create_log(tp)
            start = lg.log_end_offset
            lg.append(build_batch([Record(i, T0 + start + i, k, v) for i, (k, v) in enumerate(kvs)]))
            lm.checkpoint()

    def _datum(self, n: int) -> dict[str, Any]:
        fields = {f["name"] for f in self.versions[-1]["fields"]}
        d: dict[str, Any] = {"name": f"n{n}-{self.rng.randrange(1000)}", "age": self.rng.randrange(100),
                             "tags": [f"t{self.rng.randrange(9)}" for _ in range(self.rng.randrange(3))],
                             "address": None if self.rng.random() < 0.3 else {"city": f"c{self.rng.randrange(50)}"}}
        if "email" in fields:
            d["email"] = None if self.rng.random() < 0.5 else f"e{n}@x"
            if d["address"] is not None and self.rng.random() < 0.5:
                d["address"]["zip"] = self.rng.randrange(10**5)
        if self.versions[-1]["fields"][1]["type"] == "long" and self.rng.random() < 0.5:
            d["age"] = self.rng.randrange(1 << 40)
        return d

    def produce(self, count: int) -> None:
        """``count`` records under the latest schema, spread over the partitions; some tombstones."""
        v = len(self.versions)
        parsed = fastavro.parse_schema(self.versions[-1])
        for p in range(PARTITIONS):
            kvs: list[tuple[bytes | None, bytes | None]] = []
            for _ in range(count // PARTITIONS):
                n = sum(len(r) for r in self.records.values())
                key = f"k{self.rng.randrange(20)}".encode()
                datum = None if self.rng.random() < 0.1 else self._datum(n)
                if datum is None:
                    kvs.append((key, None))
                else:
                    buf = io.BytesIO()
                    fastavro.schemaless_writer(buf, parsed, datum)
                    kvs.append((key, wire(v, buf.getvalue())))
                self.records[p].append((key, datum, v))
            self._write(TOPIC, p, kvs)

    def expected(self, schema: pa.Schema) -> list[dict[str, Any]]:
        """Every record's row as a table of columns ``schema`` holds it, in (partition, offset)
        order: a field the writer's schema lacked takes its default (null in these schemas), a
        tombstone's fields are all null."""
        out = []
        for p in range(PARTITIONS):
            for o, (key, datum, _) in enumerate(self.records[p]):
                row: dict[str, Any] = {"key": key, "topic": TOPIC, "partition": p, "offset": o, "timestamp": T0 + o,
                                       "timestampType": 0}
                for f in schema:
                    if f.name not in row:
                        row[f.name] = _filled(None if datum is None else datum.get(f.name), f.type)
                out.append(row)
        return out


def _filled(value: Any, t: pa.DataType) -> Any:
    """``value`` with the fields of ``t`` it lacks as null."""
    if value is None:
        return None
    if pa.types.is_struct(t):
        return {f.name: _filled(value.get(f.name), f.type) for f in t}
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return [_filled(v, t.value_type) for v in value]
    return value


def read_rows(table: Table) -> tuple[pa.Schema, list[dict[str, Any]]]:
    """The table's schema and rows, ordered by partition and offset, the timestamp in epoch ms."""
    got = table.read()
    ms = got.column("timestamp").cast(pa.timestamp("ms", tz="UTC")).cast(pa.int64())
    got = got.set_column(got.schema.get_field_index("timestamp"), "timestamp", ms)
    return got.schema, got.to_pylist()


KAFKA = ["key", "topic", "partition", "offset", "timestamp", "timestampType"]


def check(table: Table, people: People, columns: list[str]) -> pa.Schema:
    schema, rows = read_rows(table)
    assert schema.names == KAFKA + columns, _seeded(f"columns {schema.names}")
    want = people.expected(schema)
    assert len(rows) == len(want), _seeded(f"{len(rows)} rows; expected {len(want)}")
    for got, exp in zip(rows, want, strict=True):
        assert got == exp, _seeded(f"partition {exp['partition']} offset {exp['offset']}: {got} != {exp}")
    return schema


@pytest.mark.parametrize("fmt", FORMATS)
def test_decoded_columns_follow_the_subjects_evolution(fmt: str, tmp_path: Path) -> None:
    people = People(tmp_path / "logs", SEED)
    table = Table(fmt, tmp_path)
    opts = {**table.kwargs(), "valueFormat": "confluent-avro", "topics": TOPIC}
    people.register(V1)
    people.produce(40)
    s = sync(people.root, table.to, **opts)
    assert s.records == 40
    schema = check(table, people, ["name", "age", "tags", "address"])
    assert pa.types.is_int32(schema.field("age").type)
    # compatible evolution: a new optional field, a nested one; old rows hold null there
    people.register(V2)
    people.produce(40)
    assert sync(people.root, table.to, **opts).records == 40
    schema = check(table, people, ["name", "age", "tags", "address", "email"])
    assert [f.name for f in schema.field("address").type] == ["city", "zip"]
    # int widened to long: Iceberg promotes the column; Delta cannot, and says so before writing
    people.register(V3)
    people.produce(20)
    if fmt == "iceberg":
        assert sync(people.root, table.to, **opts).records == 20
        schema = check(table, people, ["name", "age", "tags", "address", "email"])
        assert pa.types.is_int64(schema.field("age").type)
    else:
        before = table.version()
        with pytest.raises(SyncError, match=r"column age is int32 in the table; the latest schema of subject "
                                            r"people-value gives int64: the table format cannot widen"):
            sync(people.root, table.to, **opts)
        assert table.version() == before
    # incompatible: a one-line error naming the field, the table unchanged
    people.register(BAD)
    before = table.version()
    with pytest.raises(SyncError, match=r"column name is string in the table; the latest schema of subject "
                                        r"people-value gives int32: not a compatible change") as err:
        sync(people.root, table.to, **opts)
    assert "\n" not in str(err.value)
    assert table.version() == before


@pytest.mark.parametrize("fmt", FORMATS)
def test_decoded_mode_refusals(fmt: str, tmp_path: Path) -> None:
    people = People(tmp_path / "logs", SEED)
    table = Table(fmt, tmp_path)
    people.register(V1)
    people.produce(10)
    # a table made by a raw sync takes no decoded records, and the other way round
    sync(people.root, table.to, **table.kwargs(), topics=TOPIC)
    with pytest.raises(SyncError, match="this sync writes no column value"):
        sync(people.root, table.to, **table.kwargs(), topics=TOPIC, valueFormat="confluent-avro")
    # a value field named after a Kafka column
    clash = person("int", ADDRESS, {"name": "offset", "type": "long", "default": 0})
    people.register(clash)
    other = Table(fmt, tmp_path / "other")
    with pytest.raises(SyncError, match="the value's field offset would be a column beside the Kafka column"):
        sync(people.root, other.to, **other.kwargs(), topics=TOPIC, valueFormat="confluent-avro")
    with pytest.raises(InvalidOptionError, match="topic _schemas holds the Schema Registry's schemas"):
        sync(people.root, other.to, **other.kwargs(), valueFormat="confluent-avro")
    assert not other.exists() or other.version() is None
