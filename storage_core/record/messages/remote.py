"""The records of ``__remote_log_metadata``: tiered storage's (KIP-405) segment and partition events.

Written from Kafka's definitions in apache/kafka ``storage/src/main/resources/message/`` (each
table names its file). Every record is flexible from version 0, the only version up to Kafka 4.4.0
(the generated classes of 4.1.1 and 4.4.0 agree: ``tests/record/test_message_schemas.py``). On disk a
record has a null key and a value framed as KRaft metadata records are
(``RemoteLogMetadataSerde``, an ``AbstractApiMessageSerde``): an unsigned varint frame version
(1), an unsigned varint apiKey (the table below), an unsigned varint version, then the record.

The states are Kafka's ``RemoteLogSegmentState`` and ``RemotePartitionDeleteState`` ids.
"""

from __future__ import annotations

import base64
from enum import IntEnum
from typing import Any

from storage_core.record.messages.schema import F, FieldSpec, MessageSpec, message

SM = "storage/src/main/resources/message/"


def _record(name: str, api_key: int, fields: tuple[FieldSpec, ...]) -> MessageSpec:
    return message(name, api_key, "0", "0+", fields, source=SM + name + ".json")


class RemoteLogSegmentState(IntEnum):
    """``RemoteLogSegmentState``: a segment's life in remote storage."""

    COPY_SEGMENT_STARTED = 0
    COPY_SEGMENT_FINISHED = 1
    DELETE_SEGMENT_STARTED = 2
    DELETE_SEGMENT_FINISHED = 3


class RemotePartitionDeleteState(IntEnum):
    """``RemotePartitionDeleteState``: a partition's deletion from remote storage."""

    DELETE_PARTITION_MARKED = 0
    DELETE_PARTITION_STARTED = 1
    DELETE_PARTITION_FINISHED = 2


TOPIC_ID_PARTITION = (
    F("Name", "string", "0+", about="Topic name."),
    F("Id", "uuid", "0+", about="Unique identifier of the topic."),
    F("Partition", "int32", "0+", about="Partition number."),
)
SEGMENT_ID = (
    F("TopicIdPartition", "TopicIdPartitionEntry", "0+", fields=TOPIC_ID_PARTITION,
      about="Represents unique topic partition."),
    F("Id", "uuid", "0+", about="Unique identifier of the remote log segment."),
)
SEGMENT_LEADER_EPOCH = (
    F("LeaderEpoch", "int32", "0+", about="Leader epoch."),
    F("Offset", "int64", "0+", about="Start offset for the leader epoch."),
)

#: The fields a segment's metadata record and its snapshot record share, after the segment's id
#: (the same names, types, versions and tags in both definitions).
SEGMENT_FIELDS = (
    F("StartOffset", "int64", "0+", about="Start offset of the segment."),
    F("EndOffset", "int64", "0+", about="End offset of the segment."),
    F("BrokerId", "int32", "0+", about="Broker id from which this event is generated."),
    F("MaxTimestampMs", "int64", "0+", about="Maximum timestamp in milli seconds with in this segment."),
    F("EventTimestampMs", "int64", "0+", about="Epoch time in milli seconds at which this event is generated."),
    F("SegmentLeaderEpochs", "[]SegmentLeaderEpochEntry", "0+", fields=SEGMENT_LEADER_EPOCH,
      about="Leader epoch to start-offset mappings for the records with in this segment."),
    F("SegmentSizeInBytes", "int32", "0+", about="Segment size in bytes."),
    F("CustomMetadata", "bytes", "0+", nullable="0+", about="Custom metadata."),
    F("RemoteLogSegmentState", "int8", "0+", about="RemoteLogSegmentState.id()."),
    F("TxnIndexEmpty", "bool", "0+", tagged="0+", tag=0, about="Whether the transaction index is empty."),
)

#: RemoteLogSegmentMetadataRecord.json: a segment whose copy started.
REMOTE_LOG_SEGMENT_METADATA_RECORD = _record("RemoteLogSegmentMetadataRecord", 0, (
    F("RemoteLogSegmentId", "RemoteLogSegmentIdEntry", "0+", fields=SEGMENT_ID,
      about="Unique representation of the remote log segment."),
    *SEGMENT_FIELDS,
))
#: RemoteLogSegmentMetadataUpdateRecord.json: a segment's new state.
REMOTE_LOG_SEGMENT_METADATA_UPDATE_RECORD = _record("RemoteLogSegmentMetadataUpdateRecord", 1, (
    F("RemoteLogSegmentId", "RemoteLogSegmentIdEntry", "0+", fields=SEGMENT_ID,
      about="Unique representation of the remote log segment."),
    F("BrokerId", "int32", "0+", about="Broker id from which this event is generated."),
    F("EventTimestampMs", "int64", "0+", about="Epoch time in milli seconds at which this event is generated."),
    F("CustomMetadata", "bytes", "0+", nullable="0+", about="Custom metadata."),
    F("RemoteLogSegmentState", "int8", "0+", about="RemoteLogSegmentState.id()."),
))
#: RemotePartitionDeleteMetadataRecord.json: a partition's deletion from remote storage.
REMOTE_PARTITION_DELETE_METADATA_RECORD = _record("RemotePartitionDeleteMetadataRecord", 2, (
    F("TopicIdPartition", "TopicIdPartitionEntry", "0+", fields=TOPIC_ID_PARTITION,
      about="Represents unique topic partition."),
    F("BrokerId", "int32", "0+", about="Broker (controller or leader) id from which this event is created."),
    F("EventTimestampMs", "int64", "0+", about="Epoch time in milli seconds at which this event is generated."),
    F("RemotePartitionDeleteState", "int8", "0+", about="RemotePartitionDeleteState.id()."),
))
#: RemoteLogSegmentMetadataSnapshotRecord.json: a segment's state in a metadata snapshot (its
#: topic partition is the snapshot's).
REMOTE_LOG_SEGMENT_METADATA_SNAPSHOT_RECORD = _record("RemoteLogSegmentMetadataSnapshotRecord", 3, (
    F("SegmentId", "uuid", "0+", about="Unique identifier of the log segment."),
    *SEGMENT_FIELDS,
))

#: apiKey -> record.
REMOTE_LOG_METADATA_RECORDS: dict[int, MessageSpec] = {
    spec.api_key: spec for spec in (REMOTE_LOG_SEGMENT_METADATA_RECORD, REMOTE_LOG_SEGMENT_METADATA_UPDATE_RECORD,
                                    REMOTE_PARTITION_DELETE_METADATA_RECORD,
                                    REMOTE_LOG_SEGMENT_METADATA_SNAPSHOT_RECORD) if spec.api_key is not None
}


# --- kafka-dump-log's text ---------------------------------------------------------------------------


def _tip(t: dict[str, Any]) -> str:
    """``TopicIdPartition.toString()``: ``<topic id>:<topic>-<partition>``."""
    return f"{t['id']}:{t['name']}-{t['partition']}"


def _segment_id(s: dict[str, Any]) -> str:
    return f"RemoteLogSegmentId{{topicIdPartition={_tip(s['topicIdPartition'])}, id={s['id']}}}"


def _custom(b64: str | None) -> str:
    """``Optional<CustomMetadata>``: ``Optional.empty`` or ``Optional[CustomMetadata{N bytes}]``."""
    return "Optional.empty" if b64 is None else f"Optional[CustomMetadata{{{len(base64.b64decode(b64))} bytes}}]"


def _epochs(entries: list[dict[str, Any]]) -> str:
    """The segment's leader epochs as the ``TreeMap`` Kafka holds them prints: ``{0=10, 2=40}``."""
    by_epoch = {e["leaderEpoch"]: e["offset"] for e in entries}  # a later entry of an epoch wins, as in a map
    return "{" + ", ".join(f"{k}={by_epoch[k]}" for k in sorted(by_epoch)) + "}"


def _state(enum: type[IntEnum], value: int) -> str:
    try:
        return enum(value).name
    except ValueError:
        return f"<unknown state {value}>"


def java_text(decoded: dict[str, Any]) -> str:
    """A decoded record as kafka-dump-log's ``--remote-log-metadata-decoder`` prints it: the
    ``toString()`` of the object ``RemoteLogMetadataSerde`` makes of it (Kafka 4.1)."""
    d = decoded["data"]
    kind = decoded["type"]
    if kind == "REMOTE_LOG_SEGMENT_METADATA_RECORD":
        return (f"RemoteLogSegmentMetadata{{remoteLogSegmentId={_segment_id(d['remoteLogSegmentId'])}, "
                f"startOffset={d['startOffset']}, endOffset={d['endOffset']}, brokerId={d['brokerId']}, "
                f"maxTimestampMs={d['maxTimestampMs']}, eventTimestampMs={d['eventTimestampMs']}, "
                f"segmentLeaderEpochs={_epochs(d['segmentLeaderEpochs'])}, "
                f"segmentSizeInBytes={d['segmentSizeInBytes']}, customMetadata={_custom(d['customMetadata'])}, "
                f"state={_state(RemoteLogSegmentState, d['remoteLogSegmentState'])}, "
                f"txnIdxEmpty={str(d.get('txnIndexEmpty', False)).lower()}}}")
    if kind == "REMOTE_LOG_SEGMENT_METADATA_UPDATE_RECORD":
        return (f"RemoteLogSegmentMetadataUpdate{{remoteLogSegmentId={_segment_id(d['remoteLogSegmentId'])}, "
                f"customMetadata={_custom(d['customMetadata'])}, "
                f"state={_state(RemoteLogSegmentState, d['remoteLogSegmentState'])}, "
                f"eventTimestampMs={d['eventTimestampMs']}, brokerId={d['brokerId']}}}")
    if kind == "REMOTE_PARTITION_DELETE_METADATA_RECORD":
        return (f"RemotePartitionDeleteMetadata{{topicPartition={_tip(d['topicIdPartition'])}, "
                f"state={_state(RemotePartitionDeleteState, d['remotePartitionDeleteState'])}, "
                f"eventTimestampMs={d['eventTimestampMs']}, brokerId={d['brokerId']}}}")
    return (f"RemoteLogSegmentMetadataSnapshot{{segmentId={d['segmentId']}, startOffset={d['startOffset']}, "
            f"endOffset={d['endOffset']}, maxTimestampMs={d['maxTimestampMs']}, "
            f"segmentLeaderEpochs={_epochs(d['segmentLeaderEpochs'])}, segmentSizeInBytes={d['segmentSizeInBytes']}, "
            f"customMetadata={_custom(d['customMetadata'])}, "
            f"state={_state(RemoteLogSegmentState, d['remoteLogSegmentState'])}, "
            f"txnIdxEmpty={str(d.get('txnIndexEmpty', False)).lower()}}}")
