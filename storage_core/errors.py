"""klog's exceptions: one root, :class:`KlogError`, and a subclass per kind of failure.

Every error raised for data that came from outside (a file, an option, a column) is a
``KlogError``. Messages name what was wrong and what was expected; errors about bytes in a
file carry the file and the byte position, so ``str(err)`` reads like
``Record is corrupt (stored crc = 1, computed crc = 2) [file 000.log, position 4096]``.

For ``klog dump --jsonl`` each error also knows the name of the exception Kafka's own reader
raises in the same situation (:attr:`KlogError.kafka_exception`) and the message without the
location (:attr:`KlogError.detail`), so the output can be compared with Kafka's.
"""

from __future__ import annotations

import re as _re
from os import PathLike

__all__ = [
    "KlogError",
    "CorruptRecordError",
    "DataLossError",
    "RemoteSegmentMissingError",
    "ReplicaMissingError",
    "RemoteSegmentUnreadableError",
    "RemoteManifestError",
    "RemoteKeyError",
    "RemoteChunkError",
    "InvalidRecordError",
    "CompressionError",
    "UnsupportedCodecError",
    "CorruptIndexError",
    "OffsetOutOfRangeError",
    "RecordTooLargeError",
    "InvalidTimestampError",
    "LogConfigError",
    "InvalidOptionError",
    "CorruptCheckpointError",
    "InvalidTopicError",
    "PendingCommitError",
    "CommitError",
    "LogDirLockedError",
    "CorruptTopicConfigsError",
    "SegmentGoneError",
    "StorageError",
    "UnsafePathError",
    "NotALogDirError",
    "MixedClustersError",
    "ReplicatedWriteError",
    "SnapshotError",
    "MessageDecodeError",
    "UnknownMessageTypeError",
    "SchemaRegistryError",
    "UnknownSchemaError",
    "ValueDecodeError",
    "RestoreError",
    "OffsetOverlapError",
    "USER_NAME_SCHEMES",
    "redact_uris",
]

#: ``scheme://user[:password]@`` in any text: the user info of a URI, which may hold a secret.
_URI_USERINFO = _re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)(://)([^/@\s?#'\"]*)@")
#: schemes whose user info without a password is a name, not a credential: HDFS's user, Azure's
#: container (``abfs://container@account.dfs.core.windows.net``)
USER_NAME_SCHEMES = frozenset({"hdfs", "viewfs", "abfs", "abfss", "az", "wasb", "wasbs"})


def _redacted(m: _re.Match[str]) -> str:
    scheme, sep, userinfo = m.group(1), m.group(2), m.group(3)
    if scheme.lower() in USER_NAME_SCHEMES and ":" not in userinfo:
        return m.group(0)
    return f"{scheme}{sep}***@"


def redact_uris(text: str) -> str:
    """``text`` with the user info of every URI in it (``s3://KEY:SECRET@bucket``) replaced by
    ``***`` (``s3://***@bucket``): every message klog prints or raises goes through this, so a
    credential typed into a path never reaches a terminal, a log or Spark's error. A user name
    without a password where a scheme uses one as a name (``hdfs://alice@nn``,
    ``abfs://container@account...``) stays."""
    return _URI_USERINFO.sub(_redacted, text)


class KlogError(Exception):
    """Root of every error klog raises on purpose."""

    kafka_exception: str = "KafkaException"

    def __init__(
        self,
        detail: str,
        *,
        path: str | PathLike[str] | None = None,
        position: int | None = None,
    ) -> None:
        self.detail = redact_uris(detail)
        self.path = None if path is None else str(path)
        self.position = position
        super().__init__(self._render())

    def _render(self) -> str:
        where = []
        if self.path is not None:
            where.append(f"file {self.path}")
        if self.position is not None:
            where.append(f"position {self.position}")
        text = f"{self.detail} [{', '.join(where)}]" if where else self.detail
        return redact_uris(text)

    def located(self, *, path: str | PathLike[str] | None = None, position: int | None = None) -> KlogError:
        """Fill in the file and position where they are not known yet; returns self."""
        if self.path is None and path is not None:
            self.path = str(path)
        if self.position is None and position is not None:
            self.position = position
        self.args = (self._render(),)
        return self

    def __str__(self) -> str:
        return self._render()


class CorruptRecordError(KlogError):
    """Bytes that should be a record batch are not one: bad size, bad CRC, bad magic."""

    kafka_exception = "CorruptRecordException"


class DataLossError(CorruptRecordError):
    """Records the log dir's own evidence says should be there cannot be read: a batch cut short or
    corrupt, index entries past the end of a ``.log``, a segment whose records end before the next
    segment's base offset, a recovery point or producer snapshot above what the segments hold, a
    partition whose ``.log`` files are gone. The message names the file, the lost offsets and the
    bytes; ``offsets`` holds the lost ranges as ``(first, last)`` pairs (inclusive). Raised under
    ``failOnDataLoss=true`` (the default); with ``false`` the same is a warning naming the offsets."""

    kafka_exception = "CorruptRecordException"

    def __init__(self, detail: str, *, offsets: tuple[tuple[int, int], ...] = (),
                 path: str | PathLike[str] | None = None, position: int | None = None) -> None:
        self.offsets = offsets
        super().__init__(detail, path=path, position=position)


class RemoteSegmentMissingError(DataLossError):
    """A segment ``__remote_log_metadata`` lists as copied is not in the remote storage a read
    names (tiered storage, :mod:`storage_core.log.tiered`): the message names the object key and the
    offsets it held (``offsets``). With ``failOnDataLoss=false`` the same is a warning and a gap."""


class RemoteSegmentUnreadableError(RemoteSegmentMissingError):
    """A remote segment's objects are there but cannot be read as the layout says (Aiven's
    ``RemoteStorageManager``, :mod:`storage_core.log.aiven`): the message names the segment, the object
    and what was expected. Raised before any row of the segment; with ``failOnDataLoss=false`` the
    segment is skipped with a warning naming it. Keys never appear in the message."""


class RemoteManifestError(RemoteSegmentUnreadableError):
    """A segment manifest that is not the plugin's, or does not match its segment or its objects
    (another segment's manifest, a ``.log`` object of another size, a chunk count that is not
    ``ceil(originalFileSize / originalChunkSize)``)."""


class RemoteKeyError(RemoteSegmentUnreadableError):
    """An encrypted segment whose data key the configured key ring cannot unwrap: the pair it names is
    not in the ring, its private key file is missing, or the key is another pair's."""


class RemoteChunkError(RemoteSegmentUnreadableError):
    """A chunk of a remote segment that does not undo its transform: an AES-GCM authentication tag
    that fails, a zstd frame that does not decompress to the chunk's size."""


class ReplicaMissingError(DataLossError):
    """The log dirs of a replicated partition hold no replica that has every record the cluster
    committed (:mod:`storage_core.log.replicas`): none of its in-sync replicas is among them, or
    none of its replicas at all. The message names the partition and the brokers that hold it.
    With ``failOnDataLoss=false`` the best replica present is read, with a warning saying so."""


class InvalidRecordError(CorruptRecordError):
    """A batch whose CRC is right but whose records do not parse (Kafka's InvalidRecordException)."""

    kafka_exception = "InvalidRecordException"


class CompressionError(CorruptRecordError):
    """A compressed payload that its codec cannot decompress."""

    kafka_exception = "KafkaException"


class UnsupportedCodecError(CorruptRecordError):
    """A compression id that is not one of Kafka's (0 none .. 4 zstd), or not legal for the magic."""

    kafka_exception = "IllegalArgumentException"


class CorruptIndexError(KlogError):
    """An ``.index``/``.timeindex``/``.txnindex`` file that fails its sanity checks."""

    kafka_exception = "CorruptIndexException"


class OffsetOutOfRangeError(KlogError):
    """An offset outside ``[log start offset, log end offset]``."""

    kafka_exception = "OffsetOutOfRangeException"


class RecordTooLargeError(KlogError):
    """A batch larger than ``max.message.bytes`` or than a segment."""

    kafka_exception = "RecordTooLargeException"


class InvalidTimestampError(KlogError, ValueError):
    """A record whose CreateTime timestamp lies outside what the topic's
    ``message.timestamp.before.max.ms`` / ``message.timestamp.after.max.ms`` allow (Kafka's
    ``LogValidator`` refuses the append)."""

    kafka_exception = "InvalidTimestampException"


class LogConfigError(KlogError, ValueError):
    """A topic config value that Kafka's ConfigDef would reject."""

    kafka_exception = "ConfigException"


class InvalidOptionError(KlogError, ValueError):
    """A reader/writer/CLI option that is unknown or has a wrong value."""

    kafka_exception = "IllegalArgumentException"


class CorruptCheckpointError(KlogError):
    """A checkpoint text file (``*-checkpoint``, ``partition.metadata``, ``meta.properties``, ...) that does not parse."""

    kafka_exception = "IOException"


class InvalidTopicError(KlogError, ValueError):
    """A topic name Kafka's ``Topic.validate`` would reject, or a directory name that is not ``<topic>-<partition>``."""

    kafka_exception = "InvalidTopicException"


class PendingCommitError(KlogError):
    """A partition whose only data belongs to a commit that has not completed (not visible yet)."""

    kafka_exception = "KafkaException"


class CommitError(KlogError):
    """A commit that cannot proceed (lock held too long, a staged file missing or damaged)."""


class LogDirLockedError(KlogError):
    """Another process holds the log dir's ``.lock`` (a broker, or another klog writer)."""


class CorruptTopicConfigsError(KlogError):
    """``klog-topic-configs.json`` is not JSON of the expected shape, or holds an invalid config."""

    kafka_exception = "ConfigException"


class SegmentGoneError(KlogError):
    """A read-only open's segment was deleted or replaced by a writer since the log was opened
    (and ``file.delete.delay.ms`` has passed): reopen the log."""

    kafka_exception = "KafkaStorageException"


class StorageError(KlogError):
    """A write to the file system failed (``ENOSPC`` disk full, ``EDQUOT``, ``EROFS`` read-only
    file system, an I/O error). The failed write is undone where klog can (an append is cut back
    to where it started), is never acknowledged, and what was written before it stays valid."""

    kafka_exception = "KafkaStorageException"

    def __init__(self, detail: str, *, errno: int | None = None, path: str | PathLike[str] | None = None,
                 position: int | None = None) -> None:
        self.errno = errno
        super().__init__(detail, path=path, position=position)


def storage_error(exc: OSError, doing: str, path: str | PathLike[str] | None = None) -> StorageError:
    """A :class:`StorageError` for ``exc``, raised while ``doing`` (``"appending to segment"``)."""
    import errno as _errno

    why = {_errno.ENOSPC: "the file system is full (no space left on device)",
           _errno.EDQUOT: "the disk quota is exceeded",
           _errno.EROFS: "the file system is read-only",
           _errno.EMFILE: "too many open files (the OS limit of this process: ulimit -n)",
           _errno.ENFILE: "too many open files (the system-wide limit: fs.file-max)"}.get(exc.errno or 0, exc.strerror or str(exc))
    return StorageError(f"{doing} failed: {why}; nothing of this write was kept", errno=exc.errno,
                        path=path if path is not None else exc.filename)


class UnsafePathError(KlogError):
    """A writable open of a partition dir that is, or holds, a symlink leading out of it: recovery,
    retention and compaction truncate and delete files, so klog never writes through one (read-only
    opens follow symlinks, as a broker does)."""

    kafka_exception = "KafkaStorageException"


class NotALogDirError(KlogError, ValueError):
    """A path given to read as a Kafka log dir (or partition dir) holds no topic-partition
    directories: the message says what it does hold, and which child looks like a log dir."""


class ReplicatedWriteError(KlogError, ValueError):
    """A write into a replicated partition cannot give every in-sync replica the same batches at
    the same offsets (:func:`storage_core.log.replicas.write_targets`): a replica's dir is missing,
    or the replicas end at different offsets. Raised before anything is written."""


class MixedClustersError(NotALogDirError):
    """Log dirs given together belong to different Kafka clusters (their ``meta.properties`` name
    different ``cluster.id`` values): the message names a dir of each and both ids."""


class SnapshotError(KlogError, ValueError):
    """``klog snapshot SRC DST`` refused its destination before copying anything: DST inside SRC (or
    SRC inside DST), DST a log dir that is not a klog snapshot (a live broker's or klog writer's dir,
    or any other data), or a snapshot of another source."""


class MessageDecodeError(KlogError):
    """Bytes that should be one of Kafka's generated messages (a ``__consumer_offsets`` key or value,
    a ``__cluster_metadata`` record, a KRaft control record) do not parse by the message's schema:
    truncated, a length out of range, null where the schema allows none. The message names the
    message, its version and the field being read."""

    kafka_exception = "RuntimeException"


class GroupRestoreError(KlogError, ValueError):
    """A restore of consumer groups (``klog restore --groups``) refused before writing anything: a
    target without ``__consumer_offsets``, a group's topic or partition the target lacks, a committed
    offset no restored record maps to (under ``unmapped="fail"``), a source that is not groups."""


class MessageEncodeError(KlogError, ValueError):
    """A value that does not fit the message it is to be written as (a field the version lacks, a
    null where none is allowed, a number out of its type's range)."""


class UnknownMessageTypeError(MessageDecodeError):
    """A record type (apiKey) or version that klog has no schema for."""

    kafka_exception = "UnsupportedVersionException"


class SchemaRegistryError(KlogError):
    """A Schema Registry's ``_schemas`` topic, or a schema in it, that klog cannot use: a subject
    with no live version, a schema that does not parse, a reference to a schema that is not there,
    a schema type klog does not decode. The message names the subject, version and schema id."""

    kafka_exception = "SerializationException"


class ValueDecodeError(KlogError):
    """A record's key or value that does not decode by its format (``valueFormat``/``keyFormat``):
    shorter than the wire header, a magic byte other than 0, bytes that do not parse by the writer
    schema. The message names topic, partition, offset and the schema id; ``mode=PERMISSIVE`` gives
    null instead."""

    kafka_exception = "SerializationException"


class UnknownSchemaError(ValueDecodeError):
    """A record whose wire header names a schema id the ``_schemas`` topic does not hold (or whose
    schema does not parse, or is of another format)."""


class SyncError(KlogError, ValueError):
    """``klog sync`` refused a table before writing anything: an unknown catalog or format, a table
    that holds another topic's records or offsets, columns that do not fit the table's."""


class SyncConflictError(SyncError):
    """Another sync of the same table committed first, from the same offsets: this one's commit was
    refused (nothing of it is in the table) and a rerun continues from the offsets that one recorded."""


class RestoreError(KlogError, ValueError):
    """A restore's source that cannot be put back at its original offsets (``klog restore``,
    :func:`storage_core.restore`): a file without the ``offset`` (or ``partition``, ``topic``) column
    a ``klog export`` writes, offsets that do not increase within a partition, a source that is
    neither a log dir nor Parquet. Raised before anything is written; the message names the source
    and what was expected."""


class OffsetOverlapError(RestoreError):
    """Records to be written at their own offsets (a restore) into a partition that already holds
    those offsets or later ones: the partition must end at or below the first offset written. The
    message names the partition, its end and the first offset. Nothing is written."""
