"""Kafka's message-schema rules (storage_core/record/messages) and the internal topics decoded.

Oracles:
- the fixtures' real ``__consumer_offsets``, ``__cluster_metadata`` and KRaft ``.checkpoint`` files
  decode strictly, with no unknown type or version, and the topic ids of their TopicRecords equal
  the ``partition.metadata`` files the brokers wrote;
- Kafka's own classes (kafka-clients 4.3.0, ``oracle/KafkaMessages.java``) read and rewrite random
  messages of every version of the tables kafka-clients has (the consumer protocol and the KRaft
  control records): Kafka's bytes must equal the test encoder's and klog's decoding the values;
- the other tables (coordinator and metadata records, whose classes are not in kafka-clients) are
  round-tripped in every version through ``message_encoder.py``, a writer built from Kafka's
  encoding rules independently of klog's reader. This checks the reader against the rules; the
  tables themselves are checked by the fixtures for the types and versions the fixtures hold.
"""

from __future__ import annotations

import base64
import random
import re
import struct
import subprocess
from collections import Counter
from pathlib import Path

import pytest
import shared_fixtures as sf
from broker_fixture import JAVA
from message_encoder import encode, random_message, uvarint

from storage_core.errors import KlogError, MessageDecodeError, UnknownMessageTypeError
from storage_core.record.control import ControlRecordType
from storage_core.record.file_records import FileRecords
from storage_core.record.messages import clients, coordinator, metadata
from storage_core.record.messages.codec import read_message
from storage_core.record.messages.decoders import (
    Decoder,
    decode_control_record,
    decode_coordinator_record,
    decode_metadata_record,
    decode_record,
    decoder_for_path,
)
from storage_core.record.messages.schema import MessageSpec

ORACLE = JAVA / "KafkaMessages.java"


def _all_specs() -> list[MessageSpec]:
    specs: dict[str, MessageSpec] = {}
    for table in (coordinator.GROUP_RECORDS, coordinator.TRANSACTION_RECORDS, coordinator.SHARE_STATE_RECORDS):
        for k, v in table.values():
            specs[k.name] = k
            specs[v.name] = v
    for m in metadata.METADATA_RECORDS.values():
        specs[m.name] = m
    for m in (clients.CONSUMER_PROTOCOL_SUBSCRIPTION, clients.CONSUMER_PROTOCOL_ASSIGNMENT,
              clients.LEADER_CHANGE_MESSAGE, clients.SNAPSHOT_HEADER_RECORD, clients.SNAPSHOT_FOOTER_RECORD,
              clients.KRAFT_VERSION_RECORD, clients.VOTERS_RECORD):
        specs[m.name] = m
    return sorted(specs.values(), key=lambda s: s.name)


SPEC_VERSIONS = [(s, v) for s in _all_specs() for v in range(s.valid.low, s.highest + 1)]


@pytest.mark.parametrize(("spec", "version"), SPEC_VERSIONS, ids=[f"{s.name}-v{v}" for s, v in SPEC_VERSIONS])
def test_every_version_round_trips(spec: MessageSpec, version: int) -> None:
    rng = random.Random(f"{spec.name}/{version}")
    for _ in range(25):
        value = random_message(spec, version, rng)
        assert read_message(spec, version, encode(spec, version, value)) == value


# --- Kafka's own classes --------------------------------------------------------------------------

KAFKA_CLASSES = [clients.CONSUMER_PROTOCOL_SUBSCRIPTION, clients.CONSUMER_PROTOCOL_ASSIGNMENT,
                 clients.LEADER_CHANGE_MESSAGE, clients.SNAPSHOT_HEADER_RECORD, clients.SNAPSHOT_FOOTER_RECORD,
                 clients.KRAFT_VERSION_RECORD, clients.VOTERS_RECORD]


def _kafka(requests: list[str]) -> list[str]:
    from kafka_oracle import java_classpath, oracle_available

    reason = oracle_available(ORACLE)
    if reason is not None:
        pytest.skip(reason)
    proc = subprocess.run(["java", "-XX:TieredStopAtLevel=1", "-cp", java_classpath(ORACLE), "KafkaMessages"], input="\n".join(requests) + "\n",
                          capture_output=True, text=True, timeout=300, check=True)
    return proc.stdout.splitlines()


def test_kafka_reads_and_writes_the_same_bytes() -> None:
    """Kafka's generated classes read the encoder's bytes of random messages of every version, write
    them back byte for byte, and name the fields klog's JSON names."""
    cases = []
    for spec in KAFKA_CLASSES:
        for version in range(spec.valid.low, spec.highest + 1):
            rng = random.Random(f"kafka/{spec.name}/{version}")
            for _ in range(20):
                value = random_message(spec, version, rng)
                cases.append((spec, version, value, encode(spec, version, value)))
    answers = _kafka([f"{s.name} {v} {base64.b64encode(b).decode()}" for s, v, _, b in cases])
    assert len(answers) == len(cases)
    for (spec, version, value, raw), answer in zip(cases, answers, strict=True):
        assert answer.startswith("OK "), f"{spec.name} v{version}: Kafka could not read it: {answer}"
        _, kafka_b64, left, text = answer.split(" ", 3)
        assert left == "0", f"{spec.name} v{version}: Kafka left {left} bytes unread"
        assert base64.b64decode(kafka_b64) == raw, f"{spec.name} v{version}: Kafka writes other bytes"
        assert read_message(spec, version, raw) == value
        for name in value:
            assert re.search(rf"\b{name}=", text), f"{spec.name}: Kafka's toString has no field {name}: {text}"


# --- fixtures ---------------------------------------------------------------------------------------


def _internal_files() -> list[Path]:
    if not sf.available():
        return []
    return [p for p in sf.record_set_files()
            if p.name.endswith(".checkpoint") or p.parent.name.startswith(("__consumer_offsets-", "__cluster_metadata-"))]


@pytest.mark.parametrize("path", sf.params(_internal_files(), "internal-topic record-set files"), ids=sf.fixture_id
                         if sf.available() else None)
def test_fixture_decodes_strictly(path: Path) -> None:
    decoder = decoder_for_path(str(path))
    assert decoder in (Decoder.OFFSETS, Decoder.CLUSTER_METADATA)
    types: Counter[str] = Counter()
    for batch in FileRecords(path).batches():
        for r in batch.records():
            if batch.is_control:
                d = decode_control_record(ControlRecordType.parse(r.key), r.value, strict=True)
                if d is not None:
                    assert d.value is not None
                    types[d.value["type"]] += 1
                continue
            d = decode_record(decoder, r.key, r.value, strict=True)
            types[d.value["type"] if decoder is Decoder.CLUSTER_METADATA else d.key["type"]] += 1  # type: ignore[index]
    assert types or path.stat().st_size == 0


def _kraft_dirs() -> list[Path]:
    if not sf.available():
        return []
    return sorted({p.parent.parent for p in sf.KAFKA_FIXTURES.rglob("__cluster_metadata-0/*.log")})


@pytest.mark.parametrize("logdir", sf.params(_kraft_dirs(), "KRaft log dirs"))
def test_topic_ids_match_partition_metadata(logdir: Path) -> None:
    """Every topic id of the log dir's TopicRecords (log and snapshots) is the one its broker wrote in
    each of the topic's partition.metadata files, and every topic dir has a TopicRecord."""
    ids: dict[str, str] = {}
    for f in sorted((logdir / "__cluster_metadata-0").iterdir()):
        if not f.name.endswith((".log", ".checkpoint")):
            continue
        for batch in FileRecords(f).batches():
            if batch.is_control:
                continue
            for r in batch.records():
                v = decode_metadata_record(r.value, strict=True).value
                assert v is not None
                if v["type"] == "TOPIC_RECORD":
                    ids[v["data"]["name"]] = v["data"]["topicId"]
    checked = 0
    for pm in sorted(logdir.glob("*/partition.metadata")):
        topic = pm.parent.name.rsplit("-", 1)[0]
        if topic == "__cluster_metadata":
            continue
        written = dict(line.split(": ", 1) for line in pm.read_text().splitlines() if ": " in line)
        assert topic in ids, f"no TopicRecord for {topic} in {logdir}"
        assert ids[topic] == written["topic_id"], f"{pm}: {written['topic_id']} != TopicRecord's {ids[topic]}"
        checked += 1
    assert checked


# --- bad input ---------------------------------------------------------------------------------------


def _offset_commit_key() -> bytes:
    return struct.pack(">h", 1) + encode(coordinator.OFFSET_COMMIT_KEY, 0, {"group": "g", "topic": "t", "partition": 3})


def test_truncated_value_is_undecodable_with_its_bytes() -> None:
    value = struct.pack(">h", 3) + struct.pack(">q", 42)  # offset, then nothing
    d = decode_coordinator_record(Decoder.OFFSETS, _offset_commit_key(), value)
    assert d.key == {"type": "1", "data": {"group": "g", "topic": "t", "partition": 3}}
    assert d.value is not None and d.value["raw"] == base64.b64encode(value).decode()
    assert d.error is not None and "OffsetCommitValue v3" in d.error and "leaderEpoch" in d.error
    with pytest.raises(MessageDecodeError, match="OffsetCommitValue v3: field leaderEpoch needs 4 bytes"):
        decode_coordinator_record(Decoder.OFFSETS, _offset_commit_key(), value, strict=True)


def test_unknown_type_and_version_are_shown_not_dropped() -> None:
    key = struct.pack(">h", 99) + b"\x00\x01g"
    d = decode_coordinator_record(Decoder.OFFSETS, key, b"\x00\x00")
    assert d.key is not None and d.key["type"] == "99" and d.key["raw"] == base64.b64encode(key).decode()
    with pytest.raises(UnknownMessageTypeError, match="unknown record type 99"):
        decode_coordinator_record(Decoder.OFFSETS, key, None, strict=True)
    d = decode_coordinator_record(Decoder.OFFSETS, _offset_commit_key(), struct.pack(">h", 9) + b"xx")
    assert d.value is not None and d.value["version"] == "9" and "no version 9" in (d.error or "")
    frame = uvarint(1) + uvarint(200) + uvarint(0) + b"abc"
    m = decode_metadata_record(frame)
    assert m.value is not None and m.value["type"] == 200 and m.value["raw"] == base64.b64encode(frame).decode()
    with pytest.raises(KlogError, match="frame version 7"):
        decode_metadata_record(uvarint(7) + b"\x02\x00", strict=True)


def test_tombstone_and_garbage() -> None:
    d = decode_coordinator_record(Decoder.OFFSETS, _offset_commit_key(), None)
    assert d.tombstone and d.error is None
    d = decode_coordinator_record(Decoder.OFFSETS, b"\x01", b"\x00")
    assert d.error is not None and d.key is not None and d.key["raw"] == "AQ=="
    d = decode_coordinator_record(Decoder.OFFSETS, None, b"\x00")
    assert d.error is not None and "no key" in d.error


def test_group_metadata_decodes_the_consumer_protocol() -> None:
    sub = struct.pack(">h", 1) + encode(clients.CONSUMER_PROTOCOL_SUBSCRIPTION, 1, {
        "topics": ["orders"], "userData": None, "ownedPartitions": [{"topic": "orders", "partitions": [0, 1]}]})
    member = {"memberId": "m", "groupInstanceId": None, "clientId": "c", "clientHost": "/h", "rebalanceTimeout": 1,
              "sessionTimeout": 2, "subscription": base64.b64encode(sub).decode(), "assignment": "AAAB"}
    value = struct.pack(">h", 3) + encode(coordinator.GROUP_METADATA_VALUE, 3, {
        "protocolType": "consumer", "generation": 5, "protocol": "range", "leader": "m",
        "currentStateTimestamp": 7, "members": [member]})
    key = struct.pack(">h", 2) + encode(coordinator.GROUP_METADATA_KEY, 0, {"group": "g"})
    d = decode_coordinator_record(Decoder.OFFSETS, key, value, strict=True)
    assert d.value is not None
    got = d.value["data"]["members"][0]
    assert got["subscription"] == {"topics": ["orders"], "userData": None,
                                   "ownedPartitions": [{"topic": "orders", "partitions": [0, 1]}]}
    assert got["assignment"] == "AAAB"  # 3 bytes: not an assignment; Kafka keeps the bytes too


def test_transaction_log_tagged_fields() -> None:
    spec = coordinator.TRANSACTION_LOG_VALUE
    value = {"producerId": 5, "nextProducerId": 6, "producerEpoch": 1, "transactionTimeoutMs": 60000,
             "transactionStatus": 2, "transactionPartitions": [{"topic": "t", "partitionIds": [0]}],
             "transactionLastUpdateTimestampMs": 9, "transactionStartTimestampMs": 8, "clientTransactionVersion": 2}
    raw = struct.pack(">h", 1) + encode(spec, 1, value)
    key = struct.pack(">h", 0) + encode(coordinator.TRANSACTION_LOG_KEY, 0, {"transactionalId": "tx"})
    d = decode_coordinator_record(Decoder.TRANSACTION_LOG, key, raw, strict=True)
    assert d.key == {"type": "0", "data": {"transactionalId": "tx"}}
    # previousProducerId at its default -1: left out; the status named as Kafka 4.4's DumpLogSegments names it
    assert d.value == {"version": "1", "data": {**value, "transactionStatus": "PrepareCommit"}}


def test_unknown_tags_are_kept() -> None:
    raw = encode(metadata.TOPIC_RECORD, 0, {"name": "t", "topicId": "AAAAAAAAAAAAAAAAAAAAAA"})
    raw = raw[:-1] + uvarint(1) + uvarint(9) + uvarint(2) + b"hi"
    got = read_message(metadata.TOPIC_RECORD, 0, raw)
    assert got["_unknownTaggedFields"] == [{"tag": 9, "data": "aGk="}]
