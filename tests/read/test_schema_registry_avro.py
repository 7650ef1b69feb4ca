"""valueFormat/keyFormat=confluent-avro: the registry rebuilt from ``_schemas``, decoding checked
against Confluent's own KafkaAvroDeserializer (real broker data and generated corpora), bad input."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import shared_fixtures
from schema_registry_corpus import schema_key, schema_value, wire, write_schemas, write_topic

import storage_core as klog
from storage_core.errors import InvalidOptionError, SchemaRegistryError, UnknownSchemaError, ValueDecodeError
from storage_core.read.options import parse_read_options
from storage_core.read.schema_registry import SchemaRegistry, load_registry, subject_name

FLINK = shared_fixtures.KAFKA_FIXTURES / "rjmfernandes+flink-on-prem" / "43d3daa" / "data"
SPOOLDIR = shared_fixtures.KAFKA_FIXTURES / "mscaldas2012+kafka-connect-spooldir" / "d7b17b0" / "kafka-data"
#: the Avro topics of the fixture with records (customers and products have subjects, no segments)
FLINK_TOPICS = ["orders", "customers_keyed", "products_keyed", "order_customer_product", "loyalty_levels",
                "promotions"]


def need_flink() -> None:
    if not (FLINK / "_schemas-0").is_dir():
        pytest.skip(f"fixture {FLINK} not found ({shared_fixtures.MISSING_REASON})")


@pytest.fixture(scope="module")
def oracle() -> Any:
    import confluent_oracle

    reason = confluent_oracle.available()
    if reason is not None:
        pytest.skip(reason)
    o = confluent_oracle.ConfluentAvro()
    yield o
    o.close()


def normalise_column(column: Any) -> list[Any]:
    from confluent_oracle import normalise_column as n

    return n(column)


# --- the registry model ---------------------------------------------------------------------------

def _reg(*records: tuple[bytes | None, bytes | None]) -> SchemaRegistry:
    reg = SchemaRegistry(where="test")
    for i, (k, v) in enumerate(records):
        reg.apply(i, k, v)
    return reg


def test_registry_latest_soft_delete_tombstone_and_subject_deletes() -> None:
    s = '"string"'
    reg = _reg((b'{"keytype":"NOOP","magic":0}', None),
               (schema_key("a-value", 1), schema_value("a-value", 1, 1, s)),
               (schema_key("a-value", 2), schema_value("a-value", 2, 2, '"int"')),
               (schema_key("a-value", 3), schema_value("a-value", 3, 3, '"long"')),
               (b'{"keytype":"CONFIG","subject":null,"magic":0}', b'{"compatibilityLevel":"NONE"}'),
               (b"not json", b"x"))
    assert reg.latest("a-value").id == 3  # type: ignore[union-attr]
    reg.apply(9, schema_key("a-value", 3), schema_value("a-value", 3, 3, '"long"', deleted=True))
    assert reg.latest("a-value").id == 2  # type: ignore[union-attr]
    assert reg.by_id(3) is not None and reg.by_id(3).deleted  # type: ignore[union-attr]  # still decodes old records
    reg.apply(10, schema_key("a-value", 2), None)  # tombstone: hard delete
    assert reg.by_id(2) is None and reg.latest("a-value").id == 1  # type: ignore[union-attr]
    reg.apply(11, b'{"keytype":"DELETE_SUBJECT","subject":"a-value","magic":0}', b'{"subject":"a-value","version":3}')
    assert reg.latest("a-value") is None and reg.by_id(1) is not None
    with pytest.raises(SchemaRegistryError, match="all its versions are deleted"):
        reg.require_latest("a-value")
    reg.apply(12, b'{"keytype":"CLEAR_SUBJECT","subject":"a-value","magic":0}', b'{"subject":"a-value"}')
    assert reg.by_id(1) is None and reg.by_id(3) is None
    with pytest.raises(SchemaRegistryError, match="no such subject"):
        reg.require_latest("b-value")


def test_subject_name_strategies() -> None:
    assert subject_name("TopicNameStrategy", "t", False, None) == "t-value"
    assert subject_name("TopicNameStrategy", "t", True, None) == "t-key"
    assert subject_name("RecordNameStrategy", "t", False, "com.x.R") == "com.x.R"
    assert subject_name("TopicRecordNameStrategy", "t", False, "com.x.R") == "t-com.x.R"


def test_fixture_registry() -> None:
    need_flink()
    reg = load_registry([FLINK])
    assert sorted((rs.subject, rs.id) for rs in reg)[:2] == [("customers-value", 1), ("customers_keyed-value", 4)]
    assert {f"{t}-value" for t in [*FLINK_TOPICS, "customers", "products"]} == set(reg.subjects())
    if (SPOOLDIR / "_schemas-0").is_dir():
        assert load_registry([SPOOLDIR]).subjects() == []  # only NOOP records


# --- options ------------------------------------------------------------------------------------

@pytest.mark.parametrize(("opts", "match"), [
    ({"valueFormat": "avro"}, "expected one of raw, confluent-avro"),
    ({"mode": "PERMISSIVE"}, "only applies with valueFormat"),
    ({"valueFormat": "confluent-avro", "mode": "DROPMALFORMED"}, "expected FAILFAST"),
    ({"valueFormat": "confluent-avro", "subjectNameStrategy": "Nope"}, "expected one of TopicNameStrategy"),
    ({"valueFormat": "confluent-avro", "subjectNameStrategy": "RecordNameStrategy"}, "needs option recordName"),
])
def test_bad_options(opts: dict[str, str], match: str) -> None:
    with pytest.raises(InvalidOptionError, match=match):
        parse_read_options({"path": "/x", **opts})


def test_options_parse() -> None:
    f = parse_read_options({"path": "/x", "valueformat": "CONFLUENT-AVRO", "mode": "permissive",
                            "subjectnamestrategy": "io.confluent.kafka.serializers.subject.TopicRecordNameStrategy",
                            "recordname": "a.B", "schemaregistrypath": "/y"}).formats
    assert (f.value_format, f.key_format, f.permissive, f.subject_strategy, f.registry_paths) == \
        ("confluent-avro", "raw", True, "TopicRecordNameStrategy", ("/y",))


# --- real data against Confluent's deserializer ---------------------------------------------------

def _java_values(oracle: Any, topic: str, values: list[bytes | None]) -> list[Any]:
    return [None if v is None else oracle.deserialize(topic, v) for v in values]


@pytest.fixture(scope="module")
def flink_truth(oracle: Any) -> dict[str, tuple[list[int], list[Any]]]:
    """Per topic: offsets and Confluent's decoding of every value. Its own JVM: the fixture's schema
    ids (from 1) would collide with those the generated corpus registers in the shared oracle,
    whichever runs first in a test process."""
    import confluent_oracle

    need_flink()
    own = confluent_oracle.ConfluentAvro()
    try:
        own.register_all(load_registry([FLINK]))
        out = {}
        for topic in FLINK_TOPICS:
            raw = klog.read_arrow(FLINK, topics=topic).read_all()
            out[topic] = (raw["offset"].to_pylist(), _java_values(own, topic, raw["value"].to_pylist()))
    finally:
        own.close()
    return out


@pytest.mark.conformance
@pytest.mark.interop
def test_fixture_topics_equal_confluent_deserializer(flink_truth: dict[str, tuple[list[int], list[Any]]]) -> None:
    total = 0
    for topic, (offsets, expected) in flink_truth.items():
        got = klog.read_arrow(FLINK, topics=topic, valueFormat="confluent-avro").read_all()
        assert got["offset"].to_pylist() == offsets
        assert normalise_column(got["value"]) == expected, topic
        total += len(offsets)
    assert total > 100_000
    assert any(v is None for v in flink_truth["promotions"][1])  # tombstones stay null


@pytest.mark.spark
@pytest.mark.conformance
@pytest.mark.interop
def test_fixture_topics_through_spark(spark: Any, flink_truth: dict[str, tuple[list[int], list[Any]]]) -> None:
    for topic in ("orders", "promotions", "order_customer_product"):
        offsets, expected = flink_truth[topic]
        df = spark.read.format("klog").option("topics", topic).option("valueFormat", "confluent-avro").load(str(FLINK))
        assert df.schema["value"].dataType.simpleString().startswith("struct<")
        table = df.orderBy("offset").toArrow()
        assert table["offset"].to_pylist() == offsets
        assert normalise_column(table["value"]) == expected, topic


# --- generated corpora: evolution, every type, references -----------------------------------------

PERSON_V1 = {"type": "record", "name": "Person", "namespace": "gen", "fields": [
    {"name": "name", "type": "string"}, {"name": "age", "type": "int"}]}
PERSON_V2 = {"type": "record", "name": "Person", "namespace": "gen", "fields": [
    {"name": "name", "type": "string"}, {"name": "age", "type": "long"},
    {"name": "email", "type": ["null", "string"], "default": None},
    {"name": "tier", "type": {"type": "enum", "name": "Tier", "symbols": ["GOLD", "SILVER"]}, "default": "SILVER"}]}
ALL_TYPES = {"type": "record", "name": "All", "namespace": "gen", "fields": [
    {"name": "b", "type": "boolean"}, {"name": "i", "type": "int"}, {"name": "l", "type": "long"},
    {"name": "f", "type": "float"}, {"name": "d", "type": "double"}, {"name": "by", "type": "bytes"},
    {"name": "s", "type": "string"},
    {"name": "e", "type": {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN"]}},
    {"name": "fx", "type": {"type": "fixed", "name": "F4", "size": 4}},
    {"name": "dec", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 3}},
    {"name": "decfx", "type": {"type": "fixed", "name": "D8", "size": 8, "logicalType": "decimal",
                               "precision": 18, "scale": 2}},
    {"name": "date", "type": {"type": "int", "logicalType": "date"}},
    {"name": "tmillis", "type": {"type": "int", "logicalType": "time-millis"}},
    {"name": "tmicros", "type": {"type": "long", "logicalType": "time-micros"}},
    {"name": "tsmillis", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "tsmicros", "type": {"type": "long", "logicalType": "timestamp-micros"}},
    {"name": "ltsmillis", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
    {"name": "ltsmicros", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
    {"name": "uuid", "type": {"type": "string", "logicalType": "uuid"}},
    {"name": "arr", "type": {"type": "array", "items": "int"}},
    {"name": "mp", "type": {"type": "map", "values": ["null", "string"]}},
    {"name": "nested", "type": {"type": "record", "name": "Inner", "fields": [
        {"name": "x", "type": "double"}, {"name": "tags", "type": {"type": "array", "items": "string"}}]}},
    {"name": "opt", "type": ["null", "Inner"], "default": None},
    {"name": "il", "type": ["int", "long"]},
    {"name": "multi", "type": ["null", "int", "string", "Inner", "Color"]},
    {"name": "recs", "type": {"type": "array", "items": ["null", "Inner"]}},
]}


def _all_types_datum(n: int) -> dict[str, Any]:
    inner = {"x": n / 3, "tags": [f"t{j}" for j in range(n % 3)]}
    multi: Any = [None, {"int": n}, {"string": f"s{n}"}, {"gen.Inner": inner}, {"gen.Color": "GREEN"}][n % 5]
    return {
        "b": n % 2 == 0, "i": -n * 1000, "l": n * 10**12, "f": n + 0.5, "d": n / 7, "by": "\u0000\u00ff" * n,
        "s": f"héllo {n}", "e": ["RED", "GREEN"][n % 2], "fx": "abcd", "dec": "\u0001\u00e2" if n else "\u0000",
        "decfx": "\u0000" * 7 + chr(n), "date": 19000 + n, "tmillis": 3600_000 + n, "tmicros": 3600_000_000 + n,
        "tsmillis": 1_700_000_000_000 + n, "tsmicros": 1_700_000_000_000_000 + n,
        "ltsmillis": 1_600_000_000_000 + n, "ltsmicros": 1_600_000_000_000_000 + n,
        "uuid": f"123e4567-e89b-12d3-a456-42661417400{n % 10}", "arr": list(range(n)),
        "mp": {"a": {"string": "x"}, "b": None} if n % 2 else {}, "nested": inner,
        "opt": None if n % 2 else {"gen.Inner": inner}, "il": {"long": n} if n % 2 else {"int": n},
        "multi": multi, "recs": [None, {"gen.Inner": inner}] if n % 2 else [],
    }


@pytest.fixture(scope="module")
def generated(oracle: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, list[Any]]]:
    """A log dir of records serialized by KafkaAvroSerializer (evolved schemas, every type), a
    schema with references, and the _schemas records of what was registered; with Confluent's decoding
    of every value resolved to its subject's latest schema (the truth)."""
    root = tmp_path_factory.mktemp("avro-corpus")
    registered: dict[int, tuple[str, int, str]] = {}
    topics: dict[str, list[bytes | None]] = {"evolve": [], "alltypes": []}
    keys: list[bytes | None] = []  # of "evolve": Avro strings, subject evolve-key
    for i in range(6):
        schema = PERSON_V1 if i < 3 else PERSON_V2
        datum: dict[str, Any] = {"name": f"p{i}", "age": i}
        if i >= 3:
            datum.update(email={"string": f"p{i}@x"} if i % 2 else None, tier="GOLD")
        data, sid, version, text = oracle.serialize("evolve", json.dumps(schema), json.dumps(datum))
        registered[sid] = ("evolve-value", version, text)
        topics["evolve"].append(data)
        kdata, ksid, kversion, ktext = oracle.serialize("evolve", '"string"', json.dumps(f"k{i}"), is_key=True)
        registered[ksid] = ("evolve-key", kversion, ktext)
        keys.append(kdata)
    topics["evolve"].append(None)  # a tombstone
    keys.append(None)
    for n in range(12):
        data, sid, version, text = oracle.serialize("alltypes", json.dumps(ALL_TYPES), json.dumps(_all_types_datum(n)))
        registered[sid] = ("alltypes-value", version, text)
        topics["alltypes"].append(data)
    # references: Address under its own subject, Customer using it
    import io

    import fastavro

    address = {"type": "record", "name": "Address", "namespace": "ref", "fields": [{"name": "city", "type": "string"}]}
    customer = {"type": "record", "name": "Customer", "namespace": "ref", "fields": [
        {"name": "name", "type": "string"}, {"name": "home", "type": "ref.Address"},
        {"name": "other", "type": ["null", "ref.Address"], "default": None}]}
    refs = [{"name": "ref.Address", "subject": "address", "version": 1}]
    oracle.register("address", 1, 100, json.dumps(address))
    oracle.register("refs-value", 1, 101, json.dumps(customer), references=refs)
    named: dict[str, Any] = {}
    fastavro.parse_schema(address, named_schemas=named)
    parsed = fastavro.parse_schema(customer, named_schemas=named)
    topics["refs"] = []
    for n in range(3):
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, {"name": f"c{n}", "home": {"city": f"C{n}"},
                                                 "other": {"city": "X"} if n else None})
        topics["refs"].append(wire(101, buf.getvalue()))
    schemas = [(schema_key(s, v), schema_value(s, v, sid, text)) for sid, (s, v, text) in sorted(registered.items())]
    schemas.append((schema_key("address", 1), schema_value("address", 1, 100, json.dumps(address))))
    schemas.append((schema_key("refs-value", 1), schema_value("refs-value", 1, 101, json.dumps(customer),
                                                              references=refs)))
    write_schemas(root, schemas)
    reg = load_registry([root])
    truth = {}
    for topic, values in topics.items():
        write_topic(root, topic, list(zip(keys, values, strict=True)) if topic == "evolve" else [(None, v) for v in values])
        latest = reg.require_latest(f"{topic}-value").id
        truth[topic] = [None if v is None else oracle.deserialize(topic, v, reader_id=latest) for v in values]
        assert not any(isinstance(t, dict) and "error" in t for t in truth[topic]), truth[topic]
    truth["evolve keys"] = [None if k is None else oracle.deserialize("evolve", k, is_key=True) for k in keys]
    return root, truth


@pytest.mark.interop
def test_generated_corpora_equal_confluent(generated: tuple[Path, dict[str, list[Any]]]) -> None:
    root, truth = generated
    for topic, expected in truth.items():
        if topic == "evolve keys":
            got = klog.read_arrow(root, topics="evolve", keyFormat="confluent-avro").read_all()
            assert got["key"].type == pa.string() and normalise_column(got["key"]) == expected
            continue
        got = klog.read_arrow(root, topics=topic, valueFormat="confluent-avro").read_all()
        assert normalise_column(got["value"]) == expected, topic
    # the evolved subject: v1 records resolved to v2 (defaults filled, int promoted to long)
    first = truth["evolve"][0]
    assert first == {"name": "p0", "age": 0, "email": None, "tier": "SILVER"}


@pytest.mark.interop
def test_generated_types_are_spark_avros(generated: tuple[Path, dict[str, list[Any]]]) -> None:
    root, _ = generated
    t = klog.read_arrow(root, topics="alltypes", valueFormat="confluent-avro").schema.field("value").type
    types = {t.field(i).name: t.field(i).type for i in range(t.num_fields)}
    assert types["dec"] == pa.decimal128(10, 3) and types["decfx"] == pa.decimal128(18, 2)
    assert types["date"] == pa.date32() and types["tmillis"] == pa.int32() and types["tmicros"] == pa.int64()
    assert types["tsmillis"] == pa.timestamp("us", tz="UTC") and types["ltsmicros"] == pa.timestamp("us")
    assert types["uuid"] == pa.string() and types["e"] == pa.string() and types["fx"] == pa.binary()
    assert types["il"] == pa.int64()
    assert [types["multi"].field(i).name for i in range(4)] == ["member0", "member1", "member2", "member3"]
    assert types["mp"] == pa.map_(pa.string(), pa.string())


@pytest.mark.spark
@pytest.mark.interop
def test_generated_through_spark_batch_and_stream(spark: Any, generated: tuple[Path, dict[str, list[Any]]],
                                                  tmp_path: Path) -> None:
    root, truth = generated
    df = spark.read.format("klog").option("topics", "alltypes").option("valueFormat", "confluent-avro").load(str(root))
    assert normalise_column(df.orderBy("offset").toArrow()["value"]) == truth["alltypes"]
    q = (spark.readStream.format("klog").option("topics", "evolve").option("valueFormat", "confluent-avro")
         .option("startingOffsets", "earliest").load(str(root))
         .writeStream.format("memory").queryName("klog_avro_stream").trigger(availableNow=True).start())
    q.awaitTermination(120)
    rows = spark.sql("SELECT offset, value FROM klog_avro_stream ORDER BY offset").toArrow()
    assert normalise_column(rows["value"]) == truth["evolve"]


# --- bad input ------------------------------------------------------------------------------------

@pytest.fixture
def bad_dir(tmp_path: Path) -> Path:
    s = json.dumps({"type": "record", "name": "R", "fields": [{"name": "a", "type": "long"}]})
    write_schemas(tmp_path, [(schema_key("t-value", 1), schema_value("t-value", 1, 7, s)),
                             (schema_key("broken-value", 1), schema_value("broken-value", 1, 8, '{"type": "recor')),
                             (schema_key("proto-value", 1), schema_value("proto-value", 1, 9, "syntax = \"proto3\";",
                                                                         schema_type="PROTOBUF"))])
    # records: good, unknown id, short, bad magic, truncated datum, id of a schema that does not parse
    write_topic(tmp_path, "t", [(None, wire(7, b"\x02")), (None, wire(42, b"\x02")), (None, b"\x00\x00"),
                                (None, b"\x01" + (7).to_bytes(4, "big") + b"\x02"), (None, wire(7, b"")),
                                (None, wire(8, b"\x02")), (None, wire(9, b"\x02"))])
    write_topic(tmp_path, "broken", [(None, wire(8, b"\x02"))])
    write_topic(tmp_path, "proto", [(None, wire(9, b"\x02"))])
    return tmp_path


@pytest.mark.parametrize(("offset", "error", "match"), [
    (1, UnknownSchemaError, "schema id 42 is not in"),
    (2, ValueDecodeError, "2 bytes is shorter than the Confluent wire header"),
    (3, ValueDecodeError, "magic byte 1"),
    (4, ValueDecodeError, "schema id 7: the bytes do not parse"),
    (5, UnknownSchemaError, "schema id 8 .* does not parse as Avro"),
    (6, UnknownSchemaError, "schema id 9 .* is PROTOBUF, not AVRO"),
])
def test_bad_records_fail_naming_topic_partition_offset(bad_dir: Path, offset: int, error: type[Exception],
                                                       match: str) -> None:
    with pytest.raises(error, match=rf"value of topic 't' partition 0 offset {offset}: {match}"):
        klog.read_arrow(bad_dir, topics="t", valueFormat="confluent-avro",
                        startingOffsets={"t": {"0": offset}}).read_all()


def test_latest_schema_not_avro_or_not_parsing(bad_dir: Path) -> None:
    with pytest.raises(SchemaRegistryError, match="is PROTOBUF, not AVRO"):
        klog.read_arrow(bad_dir, topics="proto", valueFormat="confluent-avro")
    with pytest.raises(SchemaRegistryError, match="schema id 8 .* does not parse as Avro"):
        klog.read_arrow(bad_dir, topics="broken", valueFormat="confluent-avro")


def test_permissive_gives_null(bad_dir: Path) -> None:
    got = klog.read_arrow(bad_dir, topics="t", valueFormat="confluent-avro", mode="PERMISSIVE").read_all()
    assert got["value"].to_pylist() == [{"a": 1}, None, None, None, None, None, None]


def test_no_schemas_topic(tmp_path: Path) -> None:
    write_topic(tmp_path, "t", [(None, b"x")])
    with pytest.raises(SchemaRegistryError, match="no _schemas topic .* schemaRegistryPath"):
        klog.read_arrow(tmp_path, topics="t", valueFormat="confluent-avro")


def test_schema_registry_path_option(bad_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    other = tmp_path_factory.mktemp("data-only")
    write_topic(other, "t", [(None, wire(7, b"\x04"))])
    got = klog.read_arrow(other, topics="t", valueFormat="confluent-avro", schemaRegistryPath=str(bad_dir)).read_all()
    assert got["value"].to_pylist() == [{"a": 2}]


# --- klog dump --value-decoder confluent-avro -----------------------------------------------------

def _dump_jsonl(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[dict[str, Any]]]:
    from storage_core.tools.cli import main

    code = main(["dump", "--jsonl", "--quiet", *args])
    return code, [json.loads(line) for line in capsys.readouterr().out.splitlines()]


@pytest.mark.conformance
@pytest.mark.interop
def test_dump_equals_confluent_deserializer(flink_truth: dict[str, tuple[list[int], list[Any]]],
                                            capsys: pytest.CaptureFixture[str]) -> None:
    for topic, (offsets, expected) in flink_truth.items():
        code, lines = _dump_jsonl(capsys, "--value-decoder", "confluent-avro", str(FLINK / f"{topic}-0"))
        assert code == 0
        assert [ln["offset"] for ln in lines] == offsets
        assert [ln["value"] for ln in lines] == expected, topic


@pytest.mark.interop
def test_dump_generated_writer_schemas(oracle: Any, generated: tuple[Path, dict[str, list[Any]]],
                                       capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    root, _ = generated
    for topic in ("evolve", "alltypes", "refs"):
        code, lines = _dump_jsonl(capsys, "--value-decoder", "confluent-avro", str(root / f"{topic}-0"))
        assert code == 0
        raw = [None if ln["value_b64"] is None else base64.b64decode(ln["value_b64"]) for ln in lines]
        assert [ln["value"] for ln in lines] == [None if v is None else oracle.deserialize(topic, v) for v in raw]


def test_dump_bad_values_say_why(bad_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from storage_core.tools.cli import main

    code, lines = _dump_jsonl(capsys, "--value-decoder", "confluent-avro", str(bad_dir / "t-0"))
    assert code == 0 and lines[0]["value"] == {"a": 1}
    assert "schema id 42 is not in" in lines[1]["value_error"] and lines[1]["value"] is None
    assert "shorter than the Confluent wire header" in lines[2]["value_error"]
    assert main(["dump", "--print-data-log", "--value-decoder", "confluent-avro", str(bad_dir / "t-0")]) == 0
    text = capsys.readouterr().out
    assert 'payload: {"a":1}' in text and "(offset 1: schema id 42 is not in" in text
    assert main(["dump", "--value-decoder", "confluent-avro", "--offsets-decoder", str(bad_dir / "t-0")]) != 0


# --- keys, subject-name strategies, Spark errors --------------------------------------------------

@pytest.fixture
def keyed_dir(tmp_path: Path) -> Path:
    key_schema = json.dumps({"type": "record", "name": "Key", "namespace": "com.x", "fields": [
        {"name": "id", "type": "int"}]})
    val_schema = json.dumps({"type": "record", "name": "Val", "namespace": "com.x", "fields": [
        {"name": "s", "type": "string"}]})
    write_schemas(tmp_path, [(schema_key("k-key", 1), schema_value("k-key", 1, 1, key_schema)),
                             (schema_key("com.x.Val", 1), schema_value("com.x.Val", 1, 2, val_schema)),
                             (schema_key("k-com.x.Val", 1), schema_value("k-com.x.Val", 1, 3, val_schema))])
    write_topic(tmp_path, "k", [(wire(1, b"\x02"), wire(2, b"\x02a")), (wire(1, b"\x04"), wire(3, b"\x02b")),
                                (None, None)])
    return tmp_path


def test_key_format_and_record_name_strategies(keyed_dir: Path) -> None:
    for strategy in ("RecordNameStrategy", "TopicRecordNameStrategy"):
        got = klog.read_arrow(keyed_dir, topics="k", keyFormat="confluent-avro", valueFormat="confluent-avro",
                              subjectNameStrategy=strategy, recordName="com.x.Val", keySubject="k-key").read_all()
        assert got["key"].to_pylist() == [{"id": 1}, {"id": 2}, None]
        assert got["value"].to_pylist() == [{"s": "a"}, {"s": "b"}, None]
    got = klog.read_arrow(keyed_dir, topics="k", keyFormat="confluent-avro").read_all()
    assert got["key"].to_pylist() == [{"id": 1}, {"id": 2}, None] and got["value"].type == pa.binary()
    with pytest.raises(SchemaRegistryError, match=r"subject .k-value. .* \(no such subject\); subjects found: "
                                                  "com.x.Val, k-com.x.Val, k-key"):
        klog.read_arrow(keyed_dir, topics="k", valueFormat="confluent-avro")


@pytest.mark.spark
def test_spark_errors_name_the_record(spark: Any, bad_dir: Path) -> None:
    df = spark.read.format("klog").option("topics", "t").option("valueFormat", "confluent-avro").load(str(bad_dir))
    with pytest.raises(Exception, match=r"UnknownSchemaError: value of topic 't' partition 0 offset 1: schema id 42"):
        df.collect()
    rows = (spark.read.format("klog").option("topics", "t").option("valueFormat", "confluent-avro")
            .option("mode", "PERMISSIVE").load(str(bad_dir)).orderBy("offset").collect())
    assert [r.value.a if r.value else None for r in rows] == [1, None, None, None, None, None, None]
    with pytest.raises(Exception, match="InvalidOptionError: option mode='x'"):
        spark.read.format("klog").option("valueFormat", "confluent-avro").option("mode", "x").load(str(bad_dir))


def test_avro_types_refused_or_collapsed() -> None:
    from storage_core.read.avro import avro_arrow_type

    linked = {"type": "record", "name": "Node", "fields": [{"name": "next", "type": ["null", "Node"]}]}
    with pytest.raises(SchemaRegistryError, match="recursive Avro type 'Node'"):
        avro_arrow_type(linked)
    with pytest.raises(SchemaRegistryError, match=r"decimal\(40, 2\) has no Spark type"):
        avro_arrow_type({"type": "bytes", "logicalType": "decimal", "precision": 40, "scale": 2})
    assert avro_arrow_type(["null", "int", "long"]).final == pa.int64()
    assert avro_arrow_type(["double", "float"]).final == pa.float64()
    assert avro_arrow_type(["null", "string"]).nullable
    assert avro_arrow_type({"type": "string", "logicalType": "uuid"}).final == pa.string()
    assert avro_arrow_type(["int", "string"]).final == pa.struct([pa.field("member0", pa.int32()),
                                                                   pa.field("member1", pa.string())])
