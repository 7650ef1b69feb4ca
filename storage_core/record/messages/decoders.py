"""The framing of Kafka's internal topics, and the JSON kafka-dump-log prints for their records.

- Coordinator records (``__consumer_offsets``, ``__transaction_state``, ``__share_group_state``;
  ``CoordinatorRecordSerde``): key = int16 record type + the key message (version 0); value = int16
  version + the value message; a null value is a tombstone. JSON as ``DumpLogSegments``'
  ``CoordinatorRecordMessageParser``: key ``{"type": "<type>", "data": {...}}``, value
  ``{"version": "<version>", "data": {...}}``. In a ``GroupMetadataValue`` of protocolType
  ``consumer``, each member's subscription and assignment bytes are replaced by their decoding
  (an int16 version then the ConsumerProtocol message), kept as bytes when that fails, as Kafka does.
- Metadata records (``__cluster_metadata`` and KRaft snapshots; ``AbstractApiMessageSerde``): value =
  unsigned varint frame version (1) + unsigned varint type + unsigned varint version + the record;
  JSON ``{"type": "TOPIC_RECORD", "version": 0, "data": {...}}``.
- Remote log metadata records (``__remote_log_metadata``, tiered storage; ``RemoteLogMetadataSerde``):
  a null key, the value framed as metadata records are; kafka-dump-log prints the Java object's
  ``toString`` (:mod:`storage_core.record.messages.remote_text`), ``--jsonl`` the JSON of the
  record ``{"type": "REMOTE_LOG_SEGMENT_METADATA_RECORD", "version": 0, "data": {...}}``.
- KRaft control records: the value is the message, whose first field (int16 ``Version``) is the
  version it was written at.

Each ``decode_*`` function has two modes: ``strict=True`` raises
:class:`~storage_core.errors.MessageDecodeError` (``UnknownMessageTypeError`` for a type or
version klog has no schema for); the default returns an "undecodable" JSON object that says what
went wrong and carries the raw bytes (standard base64) instead, so a dump never stops or drops a record.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from enum import Enum
from typing import Any

from storage_core.errors import MessageDecodeError, MessageEncodeError, UnknownMessageTypeError
from storage_core.record.control import ControlRecordType
from storage_core.record.messages import clients, coordinator, metadata, remote
from storage_core.record.messages.codec import Json, Reader, b64, read_message, write_message
from storage_core.record.messages.schema import MessageSpec

#: Frame version of a metadata record (``AbstractApiMessageSerde.DEFAULT_FRAME_VERSION``).
METADATA_FRAME_VERSION = 1
CONSUMER_PROTOCOL_TYPE = "consumer"  # ConsumerProtocol.PROTOCOL_TYPE


class Decoder(Enum):
    """kafka-dump-log's decoders, by the option that chooses each."""

    OFFSETS = "offsets-decoder"  # __consumer_offsets
    TRANSACTION_LOG = "transaction-log-decoder"  # __transaction_state
    CLUSTER_METADATA = "cluster-metadata-decoder"  # __cluster_metadata, KRaft snapshots
    SHARE_GROUP_STATE = "share-group-state-decoder"  # __share_group_state
    REMOTE_LOG_METADATA = "remote-log-metadata-decoder"  # __remote_log_metadata (tiered storage)


#: The internal topic each decoder is for.
TOPIC_DECODERS = {
    "__consumer_offsets": Decoder.OFFSETS,
    "__transaction_state": Decoder.TRANSACTION_LOG,
    "__cluster_metadata": Decoder.CLUSTER_METADATA,
    "__share_group_state": Decoder.SHARE_GROUP_STATE,
    "__remote_log_metadata": Decoder.REMOTE_LOG_METADATA,
}

#: The framed records (metadata and remote log metadata): apiKey -> record, by decoder.
FRAMED_TABLES: dict[Decoder, dict[int, MessageSpec]] = {
    Decoder.CLUSTER_METADATA: metadata.METADATA_RECORDS,
    Decoder.REMOTE_LOG_METADATA: remote.REMOTE_LOG_METADATA_RECORDS,
}

#: Coordinator record tables: record type -> (key, value).
COORDINATOR_TABLES: dict[Decoder, dict[int, tuple[MessageSpec, MessageSpec]]] = {
    Decoder.OFFSETS: coordinator.GROUP_RECORDS,
    Decoder.TRANSACTION_LOG: coordinator.TRANSACTION_RECORDS,
    Decoder.SHARE_GROUP_STATE: coordinator.SHARE_STATE_RECORDS,
}

#: KRaft control records: type -> (message, the label kafka-dump-log prints before its JSON).
CONTROL_MESSAGES: dict[ControlRecordType, tuple[MessageSpec, str]] = {
    ControlRecordType.LEADER_CHANGE: (clients.LEADER_CHANGE_MESSAGE, "LeaderChange:"),
    ControlRecordType.SNAPSHOT_HEADER: (clients.SNAPSHOT_HEADER_RECORD, "SnapshotHeader"),
    ControlRecordType.SNAPSHOT_FOOTER: (clients.SNAPSHOT_FOOTER_RECORD, "SnapshotFooter"),
    ControlRecordType.KRAFT_VERSION: (clients.KRAFT_VERSION_RECORD, "KRaftVersion"),
    ControlRecordType.KRAFT_VOTERS: (clients.VOTERS_RECORD, "KRaftVoters"),
}

_PARTITION_DIR = re.compile(r"^(.+)-(\d+)$")
_SNAKE = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def decoder_for_topic(topic: str) -> Decoder | None:
    """The decoder kafka-dump-log would be asked for, for a topic's records (None: plain data)."""
    return TOPIC_DECODERS.get(topic)


def decoder_for_path(path: str) -> Decoder | None:
    """The decoder for a record-set file, from its partition dir's name (``__consumer_offsets-7``);
    KRaft snapshot files (``.checkpoint``) are cluster metadata wherever they are."""
    import os

    if path.endswith(".checkpoint"):
        return Decoder.CLUSTER_METADATA
    parent = os.path.basename(os.path.dirname(os.path.abspath(path)))
    m = _PARTITION_DIR.match(parent)
    return decoder_for_topic(m.group(1)) if m else None


def metadata_type_name(spec: MessageSpec) -> str:
    """``MetadataRecordType``'s constant for a record: ``TopicRecord`` -> ``TOPIC_RECORD``."""
    return _SNAKE.sub("_", spec.name).upper()


@dataclass(frozen=True)
class DecodedRecord:
    """One record of an internal topic, decoded: the JSON kafka-dump-log prints for it."""

    key: Json | None  # None: the topic has no keys (metadata) or the record has none
    value: Json | None  # None: a tombstone
    error: str | None = None  # what could not be decoded (the JSON then carries the raw bytes)

    @property
    def tombstone(self) -> bool:
        return self.value is None


def _int16(data: bytes, what: str) -> int:
    if len(data) < 2:
        raise MessageDecodeError(f"{what} of {len(data)} bytes is shorter than its int16 type/version")
    return int(struct.unpack_from(">h", data)[0])


# --- coordinator records -------------------------------------------------------------------------


def decode_coordinator_record(decoder: Decoder, key: bytes | None, value: bytes | None, *,
                              strict: bool = False) -> DecodedRecord:
    """A ``__consumer_offsets`` / ``__transaction_state`` / ``__share_group_state`` record."""
    table = COORDINATOR_TABLES[decoder]
    record_type: int | None = None
    try:
        if key is None:
            raise MessageDecodeError("the record has no key; coordinator records always have one")
        record_type = _int16(key, "the key")
        specs = table.get(record_type)
        if specs is None:
            raise UnknownMessageTypeError(f"unknown record type {record_type} in a {decoder.value} key "
                                          f"(klog knows types {sorted(table)})")
        key_spec, value_spec = specs
        key_json: Json = {"type": str(record_type), "data": read_message(key_spec, 0, key[2:])}
    except MessageDecodeError as e:
        if strict:
            raise
        return DecodedRecord({"type": None if record_type is None else str(record_type), "error": str(e),
                              "raw": None if key is None else b64(key)},
                             None if value is None else {"version": None, "raw": b64(value)}, str(e))
    if value is None:
        return DecodedRecord(key_json, None)
    version: int | None = None
    try:
        version = _int16(value, "the value")
        data = read_message(value_spec, version, value[2:])
        if value_spec is coordinator.GROUP_METADATA_VALUE:
            _decode_consumer_protocol(data)
        elif value_spec is coordinator.TRANSACTION_LOG_VALUE:
            _name_transaction_status(data)
        return DecodedRecord(key_json, {"version": str(version), "data": data})
    except MessageDecodeError as e:
        if strict:
            raise
        return DecodedRecord(key_json, {"version": None if version is None else str(version), "error": str(e),
                                        "raw": b64(value)}, str(e))


def encode_coordinator_record(decoder: Decoder, record_type: int, key: Json, version: int | None = None,
                              value: Json | None = None) -> tuple[bytes, bytes | None]:
    """The key and value bytes of a coordinator record (``CoordinatorRecordSerde.serializeKey/Value``):
    the inverse of :func:`decode_coordinator_record` for one record of type ``record_type``, its key's
    fields ``key`` and its value's fields ``value`` at ``version`` (None: a tombstone)."""
    key_spec, value_spec = COORDINATOR_TABLES[decoder][record_type]
    key_bytes = struct.pack(">h", record_type) + write_message(key_spec, 0, key)
    if value is None:
        return key_bytes, None
    if version is None:
        raise MessageEncodeError(f"a {value_spec.name} needs the version to write it at")
    return key_bytes, struct.pack(">h", version) + write_message(value_spec, version, value)


#: ``TransactionState.stateName()`` by id (transaction-coordinator's ``TransactionState``, Kafka 4.4).
TRANSACTION_STATE_NAMES = {0: "Empty", 1: "Ongoing", 2: "PrepareCommit", 3: "PrepareAbort", 4: "CompleteCommit",
                           5: "CompleteAbort", 6: "Dead", 7: "PrepareEpochFence"}


def _name_transaction_status(value: Json) -> None:
    """``transactionStatus`` as ``DumpLogSegments.TransactionLogMessageParser`` (Kafka 4.4) writes it:
    the state's name, or the id as a string when ``TransactionState.fromId`` knows none. (4.1.1's
    tool printed the number; tests/tools/test_broker_tools.py names that difference.)"""
    status = value.get("transactionStatus")
    if isinstance(status, int):
        value["transactionStatus"] = TRANSACTION_STATE_NAMES.get(status, str(status))


def _decode_consumer_protocol(group: Json) -> None:
    """Replace the members' subscription and assignment of a consumer group by their JSON
    (``DumpLogSegments.prepareGroupMetadataValue``); bytes that do not decode stay bytes."""
    import base64

    if group.get("protocolType") != CONSUMER_PROTOCOL_TYPE:
        return
    for member in group.get("members") or ():
        for name, spec in (("subscription", clients.CONSUMER_PROTOCOL_SUBSCRIPTION),
                           ("assignment", clients.CONSUMER_PROTOCOL_ASSIGNMENT)):
            raw = member.get(name)
            if raw is None:
                continue
            data = base64.b64decode(raw)
            try:
                member[name] = read_message(spec, _int16(data, name), data[2:])
            except MessageDecodeError:
                pass  # Kafka keeps the original bytes


# --- metadata records ----------------------------------------------------------------------------


def decode_metadata_record(value: bytes | None, *, strict: bool = False) -> DecodedRecord:
    """A ``__cluster_metadata`` (or KRaft snapshot) data record: its value, framed."""
    return decode_framed_record(Decoder.CLUSTER_METADATA, value, strict=strict)


def decode_framed_record(decoder: Decoder, value: bytes | None, *, strict: bool = False) -> DecodedRecord:
    """A record whose value is framed by ``AbstractApiMessageSerde`` (frame version, apiKey,
    version, the record): ``__cluster_metadata`` and KRaft snapshots, ``__remote_log_metadata``."""
    table = FRAMED_TABLES[decoder]
    what = "remote log metadata" if decoder is Decoder.REMOTE_LOG_METADATA else "metadata"
    record_type: int | None = None
    version: int | None = None
    try:
        if value is None:
            raise MessageDecodeError(f"a {what} record has a null value")
        r = Reader(bytes(value), f"{what} record frame")
        frame = r.unsigned_varint("frame version")
        if frame != METADATA_FRAME_VERSION:
            raise UnknownMessageTypeError(f"{what} record frame version {frame}, expected "
                                          f"{METADATA_FRAME_VERSION}")
        record_type = r.unsigned_varint("record type")
        version = r.unsigned_varint("record version")
        spec = table.get(record_type)
        if spec is None:
            raise UnknownMessageTypeError(f"unknown {what} record type {record_type} (klog knows types "
                                          f"{sorted(table)})")
        data = read_message(spec, version, value[r.pos :])
        return DecodedRecord(None, {"type": metadata_type_name(spec), "version": version, "data": data})
    except MessageDecodeError as e:
        if strict:
            raise
        spec_or_none = table.get(record_type) if record_type is not None else None
        name: Any = metadata_type_name(spec_or_none) if spec_or_none is not None else record_type
        return DecodedRecord(None, {"type": name, "version": version, "error": str(e),
                                    "raw": None if value is None else b64(value)}, str(e))


# --- KRaft control records -----------------------------------------------------------------------


def decode_control_record(control_type: ControlRecordType, value: bytes | None, *,
                          strict: bool = False) -> DecodedRecord | None:
    """A KRaft control record's value (None for the types that are not KRaft's: ABORT, COMMIT)."""
    entry = CONTROL_MESSAGES.get(control_type)
    if entry is None:
        return None
    spec = entry[0]
    version: int | None = None
    try:
        if value is None:
            raise MessageDecodeError(f"a {control_type.name} control record has a null value")
        version = _int16(value, f"the {control_type.name} value")
        data = read_message(spec, version, value)
        return DecodedRecord(None, {"type": control_type.name, "version": version, "data": data})
    except MessageDecodeError as e:
        if strict:
            raise
        return DecodedRecord(None, {"type": control_type.name, "version": version, "error": str(e),
                                    "raw": None if value is None else b64(value)}, str(e))


def control_label(control_type: ControlRecordType) -> str | None:
    """What kafka-dump-log prints before a KRaft control record's JSON (``LeaderChange:``, ...)."""
    entry = CONTROL_MESSAGES.get(control_type)
    return None if entry is None else entry[1]


def decode_record(decoder: Decoder, key: bytes | None, value: bytes | None, *, strict: bool = False) -> DecodedRecord:
    """A data record of a topic read with ``decoder``."""
    if decoder in FRAMED_TABLES:
        return decode_framed_record(decoder, value, strict=strict)
    return decode_coordinator_record(decoder, key, value, strict=strict)
