"""storage_core: Apache Kafka's log storage format, read and written in Python. No Spark in here.

Packages and modules, bottom up (each imports only what is below it; see ARCHITECTURE.md):

- :mod:`~storage_core.errors`, :mod:`~storage_core.limits`, :mod:`~storage_core.files`,
  :mod:`~storage_core.faults`: the base every layer uses: klog's exceptions, Java's integer
  limits, every file and directory name of a log dir, fault injection for the crash tests.
- :mod:`storage_core.record`: record formats: batches, records, codecs, walking a ``.log``,
  batches to and from Arrow (the hot path, with its native kernel).
- :mod:`storage_core.log`: the log: indexes, segments, opening and recovering a partition, the
  log itself, producer state, checkpoints, configs, log dirs and their lock, staged writes and
  the journaled commit.
- :mod:`storage_core.cleaner`: log compaction on top of the log.
- :mod:`storage_core.read`: the one read path (planner, piece reader) and the Python read API.
- :mod:`storage_core.tables`: topics kept as Iceberg and Delta tables, exactly once (``klog sync``).
- :mod:`storage_core.tools`: the ``klog`` command line and its commands.

This package hands on the names most callers need: the exceptions, :class:`CompressionType`,
:class:`Record`, :class:`Header` and :class:`TimestampType`, and the read API (imported on first
use, as it pulls in the log layer)::

    import storage_core as klog

    klog.describe("/mnt/kafka-copy")                        # pyarrow.Table: one row per topic-partition
    klog.read_arrow("/mnt/kafka-copy", topics="orders")     # pyarrow.RecordBatchReader of the records
    klog.plan("/mnt/kafka-copy", startingTimestamp=...)     # each partition's resolved range, no reading
    klog.committed_offsets("/mnt/kafka-copy", group="billing")  # pyarrow.Table: a group's offsets and lag
    klog.sync("/mnt/kafka-copy", "kafka.orders", format="iceberg", warehouse="lake", topics="orders")

``describe(path, **selection)`` takes ``topics``/``topicPattern``/``assign``; ``read_arrow`` and
``plan`` take every option of ``spark.read.format("klog")`` by the same names.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from storage_core.errors import (
    CommitError,
    CompressionError,
    CorruptCheckpointError,
    CorruptIndexError,
    CorruptRecordError,
    CorruptTopicConfigsError,
    DataLossError,
    GroupRestoreError,
    InvalidOptionError,
    InvalidRecordError,
    InvalidTimestampError,
    InvalidTopicError,
    KlogError,
    LogConfigError,
    LogDirLockedError,
    MessageDecodeError,
    MessageEncodeError,
    MixedClustersError,
    NotALogDirError,
    OffsetOutOfRangeError,
    OffsetOverlapError,
    PendingCommitError,
    RecordTooLargeError,
    RemoteChunkError,
    RemoteKeyError,
    RemoteManifestError,
    RemoteSegmentMissingError,
    RemoteSegmentUnreadableError,
    ReplicaMissingError,
    ReplicatedWriteError,
    RestoreError,
    SchemaRegistryError,
    SegmentGoneError,
    SnapshotError,
    StorageError,
    SyncConflictError,
    SyncError,
    UnknownMessageTypeError,
    UnknownSchemaError,
    UnsafePathError,
    UnsupportedCodecError,
    ValueDecodeError,
)
from storage_core.python_env import use_this_python as _use_this_python

_use_this_python()  # Spark's Python workers: this interpreter, where PATH's python3 is another (python_env.py)

if TYPE_CHECKING:  # the real signatures for type checkers; at run time __getattr__ imports them
    from storage_core.fs import ObjectStoreError, ObjectStoreReadOnlyError
    from storage_core.read.api import plan, read_arrow
    from storage_core.read.describe import describe
    from storage_core.read.groups import committed_offsets
    from storage_core.record.compression import CompressionType
    from storage_core.record.records import Header, Record, TimestampType
    from storage_core.tables.run import SyncSummary, sync
    from storage_core.tools.restore import RestoreSummary, restore
    from storage_core.tools.snapshot import snapshot

__version__ = "0.1.0"

#: Names imported on first use (what they pull in, the codecs, numpy and pyarrow, is slow to
#: import: a Spark worker that only asks the source for its schema never needs it).
_LAZY = {
    "CompressionType": "storage_core.record.compression",
    "Header": "storage_core.record.records",
    "ObjectStoreError": "storage_core.fs",
    "ObjectStoreReadOnlyError": "storage_core.fs",
    "Record": "storage_core.record.records",
    "TimestampType": "storage_core.record.records",
    "committed_offsets": "storage_core.read.groups",
    "describe": "storage_core.read.describe",
    "plan": "storage_core.read.api",
    "read_arrow": "storage_core.read.api",
    "restore": "storage_core.tools.restore",
    "RestoreSummary": "storage_core.tools.restore",
    "snapshot": "storage_core.tools.snapshot",
    "sync": "storage_core.tables.run",
    "SyncSummary": "storage_core.tables.run",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "CommitError",
    "CompressionError",
    "CompressionType",
    "CorruptCheckpointError",
    "CorruptIndexError",
    "CorruptRecordError",
    "CorruptTopicConfigsError",
    "DataLossError",
    "GroupRestoreError",
    "Header",
    "InvalidOptionError",
    "InvalidRecordError",
    "InvalidTimestampError",
    "InvalidTopicError",
    "KlogError",
    "LogConfigError",
    "LogDirLockedError",
    "MessageDecodeError",
    "MessageEncodeError",
    "MixedClustersError",
    "NotALogDirError",
    "ObjectStoreError",
    "ObjectStoreReadOnlyError",
    "OffsetOverlapError",
    "OffsetOutOfRangeError",
    "PendingCommitError",
    "Record",
    "RecordTooLargeError",
    "RemoteChunkError",
    "RemoteKeyError",
    "RemoteManifestError",
    "RemoteSegmentMissingError",
    "ReplicaMissingError",
    "ReplicatedWriteError",
    "RemoteSegmentUnreadableError",
    "RestoreError",
    "RestoreSummary",
    "SchemaRegistryError",
    "SegmentGoneError",
    "SnapshotError",
    "StorageError",
    "SyncConflictError",
    "SyncError",
    "SyncSummary",
    "TimestampType",
    "UnknownMessageTypeError",
    "UnknownSchemaError",
    "UnsafePathError",
    "UnsupportedCodecError",
    "ValueDecodeError",
    "committed_offsets",
    "describe",
    "plan",
    "read_arrow",
    "restore",
    "snapshot",
    "sync",
]
