"""Log dirs of Confluent-Avro records for the tests: ``_schemas`` records and topics, written with
klog's log API; the bytes and the registered schemas come from Confluent's KafkaAvroSerializer
(:mod:`confluent_oracle`) where the generator asks for them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from storage_core.log.config import LogConfig
from storage_core.log.manager import LogManager
from storage_core.log.topic_partition import TopicPartition
from storage_core.record.records import Record, build_batch

T0 = 1_700_000_000_000
CFG = LogConfig.from_properties({})


def schema_key(subject: str, version: int) -> bytes:
    return json.dumps({"keytype": "SCHEMA", "subject": subject, "version": version, "magic": 1}).encode()


def schema_value(subject: str, version: int, schema_id: int, schema: str, *, deleted: bool = False,
                 schema_type: str | None = None, references: list[dict[str, Any]] | None = None) -> bytes:
    v: dict[str, Any] = {"subject": subject, "version": version, "id": schema_id, "schema": schema}
    if schema_type is not None:
        v["schemaType"] = schema_type
    if references:
        v["references"] = references
    v["deleted"] = deleted
    return json.dumps(v).encode()


def wire(schema_id: int, payload: bytes) -> bytes:
    return b"\x00" + schema_id.to_bytes(4, "big") + payload


def write_topic(root: Path, topic: str, records: list[tuple[bytes | None, bytes | None]], partition: int = 0) -> None:
    with LogManager([root], writable=True, config=CFG) as lm:
        lg = lm.get_log(TopicPartition(topic, partition)) or lm.create_log(TopicPartition(topic, partition))
        if records:
            lg.append(build_batch([Record(i, T0 + i, k, v) for i, (k, v) in enumerate(records)]))
        lm.checkpoint()


def write_schemas(root: Path, records: list[tuple[bytes | None, bytes | None]]) -> None:
    write_topic(root, "_schemas", [(b'{"keytype":"NOOP","magic":0}', None), *records])
