"""``valueFormat``/``keyFormat=confluent-protobuf``: records made by Confluent's own
KafkaProtobufSerializer (``oracle/ConfluentProtobuf.java``), the ``_schemas`` topic holding what it
registered (its own ``.proto`` text, references and all), read by ``read_arrow``, Spark and
``klog dump`` against the rows the generator knows (:mod:`protobuf_gen`)."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import protobuf_gen as gen
import pytest
from schema_registry_corpus import schema_key, schema_value, wire, write_schemas, write_topic

from storage_core import read_arrow
from storage_core.errors import SchemaRegistryError, UnknownSchemaError, ValueDecodeError

pytest.importorskip("grpc_tools", reason="valueFormat=confluent-protobuf needs klog[protobuf] (grpcio-tools)")

SEED = int(os.environ.get("KLOG_PROTOBUF_SEED", random.randrange(2**32)))
N = 160
PB = {"valueFormat": "confluent-protobuf"}


def _canon(v: Any) -> Any:
    """JSON-comparable: map keys as strings, NaN as "NaN" (both sides go through this)."""
    return json.loads(json.dumps(v, default=str))


@pytest.fixture(scope="module")
def oracle() -> Any:
    import confluent_oracle

    reason = confluent_oracle.protobuf_available()
    if reason is not None:
        import broker_fixture

        if broker_fixture.required():  # CI: a Maven jar that cannot be had fails the run, as the broker's does
            pytest.fail(f"{broker_fixture.REQUIRE_ENV}=1 but {reason}")
        pytest.skip(reason)
    o = confluent_oracle.ConfluentProtobuf()
    yield o
    o.close()


@pytest.fixture(scope="module")
def corpus(oracle: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A log dir: topic ``orders`` (Order values, OrderKey keys, a tombstone), ``others`` (Other
    values: message index [1]), ``lines`` (Order.Line: [0, 0]) and ``evolving`` (Order v1, then a v2
    that drops ``i32`` and adds ``note``), all serialized by Confluent."""
    root = tmp_path_factory.mktemp("protobuf")
    g = gen.Gen(SEED)
    orders, truth = [], []
    for i in range(N):
        kj, krow = g.key()
        vj, vrow = g.order()
        k = oracle.serialize("orders", {gen.KEYS: gen.KEYS_PROTO}, gen.KEYS, gen.ORDER_KEY, gen.dumps(kj), is_key=True)
        v = oracle.serialize("orders", gen.FILES, gen.ROOT, gen.ORDER, gen.dumps(vj))
        orders.append((k, v))
        truth.append((krow, vrow))
        if i == 7:
            orders.append((k, None))
            truth.append((krow, None))
    others = [oracle.serialize("others", gen.FILES, gen.ROOT, gen.OTHER, gen.dumps({"x": f"x{i}"})) for i in range(5)]
    lines = [g.line() for _ in range(5)]
    line_bytes = [oracle.serialize("lines", gen.FILES, gen.ROOT, gen.LINE, gen.dumps(j)) for j, _ in lines]
    v2_text = gen.ORDERS_PROTO.replace("  int32 i32 = 1;\n", "  reserved 1;\n  string note = 37;\n")
    v2_files = {**gen.FILES, gen.ROOT: v2_text}
    evolving, evolving_truth = [], []
    for i in range(10):
        vj, vrow = g.order()
        if i < 5:
            evolving.append(oracle.serialize("evolving", gen.FILES, gen.ROOT, gen.ORDER, gen.dumps(vj)))
            vrow = {**{k: x for k, x in vrow.items() if k != "i32"}, "note": None}
        else:
            vj = {**{k: x for k, x in vj.items() if k != "i32"}, "note": f"n{i}"}
            evolving.append(oracle.serialize("evolving", v2_files, gen.ROOT, gen.ORDER, gen.dumps(vj)))
            vrow = {**{k: x for k, x in vrow.items() if k != "i32"}, "note": f"n{i}"}
        evolving_truth.append(vrow)
    registered = sorted(oracle.registered(), key=lambda s: s["id"])
    write_schemas(root, [(schema_key(s["subject"], s["version"]),
                          schema_value(s["subject"], s["version"], s["id"], s["schema"], schema_type=s["schemaType"],
                                       references=s["references"])) for s in registered])
    write_topic(root, "orders", orders)
    write_topic(root, "others", [(None, v) for v in others])
    write_topic(root, "lines", [(None, v) for v in line_bytes])
    write_topic(root, "evolving", [(None, v) for v in evolving])
    return {"root": root, "truth": truth, "orders": orders, "registered": registered,
            "lines": [row for _, row in lines], "evolving": evolving_truth}


def _rows(root: Path, topic: str, **options: str) -> Any:
    from confluent_oracle import normalise_column

    t = read_arrow(str(root), topics=topic, **options).read_all()
    return t, {c: _canon(normalise_column(t.column(c))) for c in ("key", "value")}


def _check(got: list[Any], want: list[Any], what: str) -> None:
    for i, (g, w) in enumerate(zip(got, _canon(want), strict=True)):
        assert g == w, f"{what} offset {i} (seed {SEED}): klog {g} != truth {w}"


def test_registry_holds_confluents_own_text(corpus: dict[str, Any]) -> None:
    subjects = {s["subject"]: s for s in corpus["registered"]}
    assert set(subjects) == {"orders-key", "orders-value", "common.proto", "others-value", "lines-value",
                             "evolving-value"}, subjects.keys()
    assert subjects["orders-value"]["references"] == [{"name": "common.proto", "subject": "common.proto",
                                                       "version": 1}]
    # Confluent prints a map as an explicit map-entry message, which protoc itself refuses
    assert "option map_entry = true;" in subjects["orders-value"]["schema"]


def test_read_arrow_equals_the_generators_rows(corpus: dict[str, Any]) -> None:
    t, cols = _rows(corpus["root"], "orders", valueFormat="confluent-protobuf", keyFormat="confluent-protobuf")
    _check(cols["key"], [k for k, _ in corpus["truth"]], "key")
    _check(cols["value"], [v for _, v in corpus["truth"]], "value")
    vt = t.schema.field("value").type
    assert str(vt.field("u64").type) == "int64" and str(vt.field("u32").type) == "int32"
    assert str(vt.field("ts").type) == "timestamp[us, tz=UTC]" and str(vt.field("dur").type) == "duration[us]"
    assert str(vt.field("counts").type) == "map<string, int32>"
    assert str(vt.field("by_id").type).startswith("map<int64, struct<sku: string, qty: int32, inner: struct<")
    assert "nothing" not in [f.name for f in vt]  # google.protobuf.Empty: no fields, no column, as Spark


def test_confluents_deserializer_reads_the_same_messages(oracle: Any, corpus: dict[str, Any]) -> None:
    for k, v in corpus["orders"][:20]:
        assert oracle.deserialize("orders", k, is_key=True)[0] == gen.ORDER_KEY
        if v is not None:
            assert oracle.deserialize("orders", v)[0] == gen.ORDER


def test_spark_reads_the_same_rows(spark: Any, corpus: dict[str, Any]) -> None:
    from confluent_oracle import normalise_column

    df = (spark.read.format("klog").option("valueFormat", "confluent-protobuf")
          .option("keyFormat", "confluent-protobuf").option("topics", "orders").load(str(corpus["root"])))
    t = df.orderBy("offset").toArrow()
    _check(_canon(normalise_column(t.column("key"))), [k for k, _ in corpus["truth"]], "Spark key")
    _check(_canon(normalise_column(t.column("value"))), [v for _, v in corpus["truth"]], "Spark value")
    fields = {f.name: f.dataType.simpleString() for f in df.schema["value"].dataType.fields}
    assert fields["ts"] == "timestamp" and fields["dur"] == "interval day to second"
    assert fields["status"] == "string" and fields["u32"] == "int" and fields["by"] == "binary"


def test_dump_decodes_by_writer_schema(corpus: dict[str, Any]) -> None:
    seg = next((corpus["root"] / "orders-0").glob("*.log"))
    proc = subprocess.run([sys.executable, "-m", "storage_core.tools.cli", "dump", "--jsonl", "--value-decoder",
                           "confluent-protobuf", "--key-decoder", "confluent-protobuf", str(seg)],
                          capture_output=True, text=True, check=True)
    lines = [json.loads(x) for x in proc.stdout.splitlines()]
    assert len(lines) == len(corpus["truth"])
    for line, (krow, vrow) in zip(lines, corpus["truth"], strict=True):
        assert "value_error" not in line and "key_error" not in line, line
        assert _canon(line["key"]) == _canon(krow)
        assert _canon(line["value"]) == _canon(vrow), f"offset {line['offset']} (seed {SEED})"


def test_message_indexes_pick_the_message(corpus: dict[str, Any]) -> None:
    root = corpus["root"]
    with pytest.raises(ValueDecodeError, match=r"offset 0: schema id \d+: the record is a klog.test.Other, not the "
                                               r"column's klog.test.Order"):
        read_arrow(str(root), topics="others", **PB).read_all()
    t = read_arrow(str(root), topics="others", recordName=gen.OTHER, **PB).read_all()
    assert t.column("value").to_pylist() == [{"x": f"x{i}"} for i in range(5)]
    assert read_arrow(str(root), topics="others", mode="PERMISSIVE", **PB).read_all().column("value").null_count == 5
    _, cols = _rows(root, "lines", recordName=gen.LINE, **PB)  # message indexes [0, 0]
    _check(cols["value"], corpus["lines"], "Order.Line")


def test_evolution_reads_old_records_as_the_latest_schema(corpus: dict[str, Any]) -> None:
    t, cols = _rows(corpus["root"], "evolving", **PB)
    names = [f.name for f in t.schema.field("value").type]
    assert "i32" not in names and "note" in names
    _check(cols["value"], corpus["evolving"], "evolving")


# --- schemas and records that do not decode -----------------------------------------------------

GOOD = 'syntax = "proto3";\npackage p;\nmessage A { int64 n = 1; }\n'


def _dir(tmp_path: Path, schemas: list[tuple[str, int, str, str, list[dict[str, Any]]]],
         values: list[bytes | None]) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    write_schemas(tmp_path, [(schema_key(subj, i), schema_value(subj, i, i, text, schema_type=kind, references=refs))
                             for subj, i, kind, text, refs in schemas])
    write_topic(tmp_path, "t", [(None, v) for v in values])
    return tmp_path


def test_schema_problems_fail_before_reading(tmp_path: Path) -> None:
    recursive = 'syntax = "proto3";\nmessage Node { string v = 1; Node next = 2; }\n'
    d = _dir(tmp_path / "rec", [("t-value", 1, "PROTOBUF", recursive, [])], [])
    with pytest.raises(SchemaRegistryError, match="message Node is recursive"):
        read_arrow(str(d), topics="t", **PB)
    missing = 'syntax = "proto3";\nimport "dep.proto";\nmessage A { Dep d = 1; }\n'
    d = _dir(tmp_path / "imp", [("t-value", 1, "PROTOBUF", missing, [])], [])
    with pytest.raises(SchemaRegistryError, match="does not compile as Protobuf: .*dep.proto"):
        read_arrow(str(d), topics="t", **PB)
    d = _dir(tmp_path / "avro", [("t-value", 1, "AVRO", '"string"', [])], [])
    with pytest.raises(SchemaRegistryError, match="is AVRO, not PROTOBUF"):
        read_arrow(str(d), topics="t", **PB)
    d = _dir(tmp_path / "ref", [("dep.proto", 1, "PROTOBUF", 'syntax = "proto3";\nmessage Dep { int32 x = 1; }\n',
                                 []),
                                ("t-value", 2, "PROTOBUF", missing, [{"name": "dep.proto", "subject": "dep.proto",
                                                                      "version": 1}])],
             [wire(2, b"\x00" + bytes([0x0A, 0x02, 0x08, 0x05]))])
    assert read_arrow(str(d), topics="t", **PB).read_all().column("value").to_pylist() == [{"d": {"x": 5}}]


@pytest.mark.parametrize(("value", "match", "error"), [
    (wire(1, b"\x02\x02"), r"point past the 1 top-level messages", ValueDecodeError),  # indexes [1]
    (wire(1, b"\x02"), "the message indexes run past the end", ValueDecodeError),
    (wire(1, b"\x01"), r"-1 message indexes \(expected 0", ValueDecodeError),
    (wire(1, b"\xff\xff\xff\xff\xff\x01"), "hold a varint longer than 5 bytes", ValueDecodeError),
    (wire(1, b"\x00\x08"), "do not parse as p.A", ValueDecodeError),  # a varint cut short
    (wire(9, b"\x00"), "schema id 9 is not in", UnknownSchemaError),
    (b"\x01\x00\x00\x00\x01\x00", "magic byte 1", ValueDecodeError),
])
def test_bad_records_name_topic_partition_offset(tmp_path: Path, value: bytes, match: str, error: type) -> None:
    d = _dir(tmp_path, [("t-value", 1, "PROTOBUF", GOOD, [])], [wire(1, b"\x00\x08\x05"), value])
    with pytest.raises(error, match=f"value of topic 't' partition 0 offset 1: .*{match}"):
        read_arrow(str(d), topics="t", **PB).read_all()
    got = read_arrow(str(d), topics="t", mode="PERMISSIVE", **PB).read_all().column("value").to_pylist()
    assert got == [{"n": 5}, None]


# --- klog sync: the message's fields as table columns --------------------------------------------

@pytest.mark.parametrize("fmt", ["iceberg", "delta"])
def test_sync_tables_hold_the_generators_rows(corpus: dict[str, Any], fmt: str, tmp_path: Path) -> None:
    """The Order's fields become columns (a Duration as its microseconds: no table format has an
    interval type); read back by pyiceberg / delta-rs they equal the generator's rows."""
    pytest.importorskip("pyiceberg" if fmt == "iceberg" else "deltalake")
    from confluent_oracle import normalise
    from test_sync import Table

    from storage_core.tables import sync

    table = Table(fmt, tmp_path)
    summary = sync(corpus["root"], table.to, **table.kwargs(), topics="orders", **PB)
    assert summary.records == len(corpus["truth"])
    got = table.read()
    assert str(got.schema.field("dur").type) == "int64"
    fields = [f for f in got.schema.names if f not in ("key", "topic", "partition", "offset", "timestamp",
                                                       "timestampType")]
    assert set(fields) == set(corpus["truth"][0][1]), fields
    rows = got.select(fields).to_pylist()
    for i, (row, (_k, want)) in enumerate(zip(rows, corpus["truth"], strict=True)):
        have = _canon({f: normalise(row[f], got.schema.field(f).type) for f in fields})
        assert have == _canon(want if want is not None else dict.fromkeys(fields)), \
            f"{fmt} offset {i} (seed {SEED}): {have} != {want}"
