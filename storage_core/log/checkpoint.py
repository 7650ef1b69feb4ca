"""Kafka's small text files in log dirs and partition dirs, read and written as the broker does.

Checkpoint files (``server-common/.../CheckpointFile.java``), UTF-8, lines ending in ``\\n``::

    <version>\\n               0 for every file below
    <entry count>\\n
    <entry>\\n                 one line per entry, fields separated by one space

    file                               where          entry line                  class
    recovery-point-offset-checkpoint   log dir        <topic> <partition> <offset>  OffsetCheckpointFile
    log-start-offset-checkpoint        log dir        <topic> <partition> <offset>  OffsetCheckpointFile
    replication-offset-checkpoint      log dir        <topic> <partition> <offset>  OffsetCheckpointFile
    cleaner-offset-checkpoint          log dir        <topic> <partition> <offset>  OffsetCheckpointFile
    leader-epoch-checkpoint            partition dir  <leaderEpoch> <startOffset>   LeaderEpochCheckpointFile

Reading follows ``CheckpointReadBuffer.read``: lines end at ``\\n``, ``\\r`` or ``\\r\\n``
(``BufferedReader.readLine``), so a missing final newline is fine; an empty file, or one with only
the version line, is empty; the version must be the expected one; then **every** remaining line
up to the end of the file must be an entry (so an extra blank line is a malformed line, and an
extra entry a count mismatch) and their number must equal the count. Entry fields are split on
Java's ``\\s+`` (ASCII whitespace). On top of Kafka, klog rejects an entry whose topic is not a
legal topic name or whose partition is negative, since those become directory names. Duplicate
topic-partitions are kept as Kafka keeps them: the last one wins.

Kafka writes an offset checkpoint in ``HashMap`` iteration order, which nothing can reproduce;
klog writes entries **sorted by topic, then partition**, so equal maps give equal bytes. Leader
epoch entries are written in the order given, as Kafka does.

The other files::

    partition.metadata     partition dir  "version: 0\\ntopic_id: <22-char url-safe base64 Uuid>"
                                          (no final newline: PartitionMetadata.encode())
    meta.properties        log dir        java.util.Properties: "#" comment lines, key=value lines
                                          (KRaft: version=1, cluster.id, node.id, directory.id;
                                          ZooKeeper era: version=0, broker.id, cluster.id)
    .kafka_cleanshutdown   log dir        {"version":0,"brokerEpoch":N} (no final newline); brokers
                                          before 3.7 (KIP-966) left it empty. Present = clean shutdown

Every write goes to ``<file>.tmp``, is flushed and fsynced, renamed over ``<file>`` with
``os.replace`` (atomic), and then the directory is fsynced, as ``CheckpointFile.write`` with
``Utils.atomicMoveWithFallback(..., needFlushParentDir=true)`` does. Reads never create files.
A malformed file raises :class:`CorruptCheckpointError` naming the file, the line number and the
byte position of that line. The file names themselves are :mod:`storage_core.files`'.
"""

from __future__ import annotations

import base64
import json
import os
import re
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TypeVar

from storage_core.errors import CorruptCheckpointError, InvalidOptionError, InvalidTopicError, storage_error
from storage_core.faults import maybe_crash
from storage_core.files import (
    CLEAN_SHUTDOWN_FILE,
    LEADER_EPOCH_CHECKPOINT,
    META_PROPERTIES_FILE,
    PARTITION_METADATA_FILE,
    TMP_SUFFIX,
)
from storage_core.fs import as_path
from storage_core.limits import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN
from storage_core.log.topic_partition import MAX_PARTITION, TopicPartition, validate_topic_name

__all__ = [
    "CleanShutdownFile",
    "EpochEntry",
    "LeaderEpochCheckpointFile",
    "MetaProperties",
    "OffsetCheckpointFile",
    "PartitionMetadata",
    "PartitionMetadataFile",
    "uuid_from_base64",
    "uuid_to_base64",
]

# --- versions ---------------------------------------------------------------------------------

OFFSET_CHECKPOINT_VERSION = 0  # OffsetCheckpointFile.CURRENT_VERSION
LEADER_EPOCH_CHECKPOINT_VERSION = 0  # LeaderEpochCheckpointFile.CURRENT_VERSION
PARTITION_METADATA_VERSION = 0  # PartitionMetadataFile.CURRENT_VERSION
CLEAN_SHUTDOWN_VERSION = 0  # CleanShutdownFileHandler.CURRENT_VERSION

# --- Java number and text rules ---------------------------------------------------------------

_LINE_BREAK = re.compile(rb"\r\n|\r|\n")  # BufferedReader.readLine
_TEXT_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_JAVA_WHITESPACE = re.compile(r"\s+", re.ASCII)  # Pattern.compile("\\s+"): [ \t\n\x0B\f\r]
_JAVA_INTEGER = re.compile(r"[+-]?[0-9]+", re.ASCII)  # Integer.parseInt / Long.parseLong
_METADATA_SEPARATOR = re.compile(r":\s+", re.ASCII)  # PartitionMetadataReadBuffer
_BASE64_UUID = re.compile(r"[A-Za-z0-9_-]{22}(?:==)?", re.ASCII)  # Uuid.fromString: url-safe base64

OFFSET_ENTRY_FORM = "<topic> <partition> <offset>"
EPOCH_ENTRY_FORM = "<leaderEpoch> <startOffset>"

_T = TypeVar("_T")


# --- values -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class EpochEntry:
    """One ``leader-epoch-checkpoint`` entry: ``epoch`` (int32) began at ``start_offset`` (int64)."""

    epoch: int
    start_offset: int


@dataclass(frozen=True, slots=True)
class PartitionMetadata:
    """The content of ``partition.metadata``: its version and the partition's topic id."""

    version: int
    topic_id: uuid.UUID

    @property
    def topic_id_base64(self) -> str:
        """The topic id as Kafka prints it (``Uuid.toString``): 22 chars of url-safe base64."""
        return uuid_to_base64(self.topic_id)

    def encode(self) -> str:
        """The file's text, as ``PartitionMetadata.encode()``: two lines, no final newline."""
        return f"version: {self.version}\ntopic_id: {self.topic_id_base64}"


def uuid_to_base64(value: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString``: the 16 bytes in url-safe base64 without padding."""
    return base64.urlsafe_b64encode(value.bytes).decode("ascii").rstrip("=")


def uuid_from_base64(text: str) -> uuid.UUID:
    """Kafka's ``Uuid.fromString``; raises ``ValueError`` for anything but 16 bytes of url-safe base64."""
    if _BASE64_UUID.fullmatch(text) is None:
        raise ValueError(f"{text!r} is not a base64-encoded UUID (22 characters of [A-Za-z0-9_-])")
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text[:22] + "=="))


# --- reading helpers --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Line:
    number: int  # 1-based
    position: int  # byte offset of the line's first byte
    text: str


def _read_bytes(path: Path, missing_ok: bool) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        if missing_ok:
            return None
        raise CorruptCheckpointError("No such file", path=path) from None
    except IsADirectoryError:
        raise CorruptCheckpointError("Not a regular file but a directory", path=path) from None


def _java_lines(data: bytes, path: Path, encoding: str = "utf-8") -> list[_Line]:
    """``BufferedReader.readLine`` until ``null``: no empty line after a final line break."""
    spans: list[tuple[int, int]] = []
    start = 0
    for m in _LINE_BREAK.finditer(data):
        spans.append((start, m.start()))
        start = m.end()
    if start < len(data):
        spans.append((start, len(data)))
    lines = []
    for number, (begin, end) in enumerate(spans, 1):
        try:
            text = data[begin:end].decode(encoding)
        except UnicodeDecodeError as e:
            raise CorruptCheckpointError(
                f"Line {number} is not valid {encoding.upper()} ({e.reason})", path=path, position=begin + e.start
            ) from None
        lines.append(_Line(number, begin, text))
    return lines


def _java_split(text: str) -> list[str]:
    """``Pattern.compile("\\\\s+").split(text)``: a leading empty field stays, trailing ones go."""
    parts = _JAVA_WHITESPACE.split(text)
    if len(parts) > 1:
        while parts and parts[-1] == "":
            parts.pop()
    return parts


def _java_int(text: str, low: int, high: int, what: str) -> int:
    if _JAVA_INTEGER.fullmatch(text) is None:
        raise ValueError(f"{what} {text!r} is not an integer")
    value = int(text)
    if not low <= value <= high:
        raise ValueError(f"{what} {text} is outside [{low}, {high}]")
    return value


def _malformed(path: Path, line: _Line, kind: str, why: str) -> CorruptCheckpointError:
    return CorruptCheckpointError(
        f"Malformed line {line.number} in {kind}: {line.text!r} ({why})", path=path, position=line.position
    )


def _read_checkpoint(
    path: Path, version: int, form: str, parse: Callable[[list[str]], _T], missing_ok: bool
) -> list[_T]:
    """``CheckpointFile.CheckpointReadBuffer.read``, with each failure located."""
    data = _read_bytes(path, missing_ok)
    if data is None:
        return []
    lines = _java_lines(data, path)
    if not lines:
        return []
    kind = "checkpoint file"
    try:
        found = _java_int(lines[0].text, INT32_MIN, INT32_MAX, "the version")
    except ValueError as e:
        raise _malformed(path, lines[0], kind, str(e)) from None
    if found != version:
        raise CorruptCheckpointError(
            f"Unrecognised version {found} in checkpoint file (line 1), expected version {version}",
            path=path,
            position=0,
        )
    if len(lines) < 2:
        return []
    try:
        expected = _java_int(lines[1].text, INT32_MIN, INT32_MAX, "the entry count")
    except ValueError as e:
        raise _malformed(path, lines[1], kind, str(e)) from None
    entries = []
    for line in lines[2:]:
        try:
            entries.append(parse(_java_split(line.text)))
        except ValueError as e:
            raise _malformed(path, line, kind, f"{e}; expected {form!r}") from None
    if len(entries) != expected:
        raise CorruptCheckpointError(
            f"Expected {expected} entries in checkpoint file (count on line 2), but found {len(entries)}",
            path=path,
            position=lines[1].position,
        )
    return entries


def _fields(fields: list[str], n: int) -> list[str]:
    if len(fields) != n:
        raise ValueError(f"{len(fields)} fields instead of {n}")
    return fields


def _parse_offset_entry(fields: list[str]) -> tuple[TopicPartition, int]:
    topic, partition, offset = _fields(fields, 3)
    try:
        validate_topic_name(topic)
    except InvalidTopicError as e:
        raise ValueError(e.detail) from None
    return (
        TopicPartition(topic, _java_int(partition, 0, MAX_PARTITION, "the partition")),
        _java_int(offset, INT64_MIN, INT64_MAX, "the offset"),
    )


def _parse_epoch_entry(fields: list[str]) -> EpochEntry:
    epoch, start_offset = _fields(fields, 2)
    return EpochEntry(
        _java_int(epoch, INT32_MIN, INT32_MAX, "the leader epoch"),
        _java_int(start_offset, INT64_MIN, INT64_MAX, "the start offset"),
    )


# --- writing helpers --------------------------------------------------------------------------


def fsync_dir(directory: Path) -> None:
    """``Utils.flushDir``: make a rename in ``directory`` durable (skipped on Windows, as Kafka does)."""
    if os.name == "nt":
        return
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _atomic_write(path: Path, data: bytes, sync: bool) -> None:
    """Write ``<path>.tmp``, fsync it, rename it over ``path``, fsync the directory."""
    tmp = path.with_name(path.name + TMP_SUFFIX)
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            if sync:
                os.fsync(f.fileno())
        maybe_crash("checkpoint-tmp-written", file=path.name)
        os.replace(tmp, path)
    except OSError as exc:  # disk full, read-only file system: the old file stays as it was
        _remove_quietly(tmp)
        raise storage_error(exc, f"writing {path.name}", path) from exc
    except BaseException:
        _remove_quietly(tmp)
        raise
    maybe_crash("checkpoint-replaced", file=path.name)
    if sync:
        try:
            fsync_dir(path.parent)
        except OSError as exc:
            raise storage_error(exc, f"syncing the directory of {path.name}", path) from exc


def _remove_quietly(tmp: Path) -> None:
    try:
        tmp.unlink(missing_ok=True)
    except OSError:
        pass  # a read-only file system: the temp file was not created either


def _checkpoint_bytes(version: int, lines: list[str]) -> bytes:
    """``CheckpointWriteBuffer.write``: version, count, entries, each followed by ``\\n``."""
    return "".join(f"{line}\n" for line in [str(version), str(len(lines)), *lines]).encode("utf-8")


def _check_int(value: object, low: int, high: int, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidOptionError(f"{what} must be an int, got {type(value).__name__} {value!r}")
    if not low <= value <= high:
        raise InvalidOptionError(f"{what} {value} is outside [{low}, {high}]")
    return value


class _TextFile:
    """A file at a known path; the base of the classes below."""

    __slots__ = ("path",)

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = as_path(path)

    def exists(self) -> bool:
        return self.path.is_file()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.path)!r})"


# --- the files --------------------------------------------------------------------------------


class OffsetCheckpointFile(_TextFile):
    """One of the four log-dir checkpoints of ``<topic> <partition> <offset>`` (:data:`~storage_core.files.OFFSET_CHECKPOINT_FILES`)."""

    __slots__ = ()

    VERSION = OFFSET_CHECKPOINT_VERSION

    def read(self, *, missing_ok: bool = True) -> dict[TopicPartition, int]:
        """The offsets by topic-partition; ``{}`` for a missing file unless ``missing_ok`` is False."""
        entries = _read_checkpoint(self.path, self.VERSION, OFFSET_ENTRY_FORM, _parse_offset_entry, missing_ok)
        return dict(entries)

    def write(self, offsets: Mapping[TopicPartition, int], *, sync: bool = True) -> None:
        """Replace the file atomically; entries sorted by topic, then partition."""
        for tp in offsets:
            if not isinstance(tp, TopicPartition):
                raise InvalidOptionError(f"checkpoint keys must be TopicPartition, got {type(tp).__name__} {tp!r}")
            validate_topic_name(tp.topic)
        lines = []
        for tp in sorted(offsets):
            partition = _check_int(tp.partition, 0, MAX_PARTITION, f"partition of {tp.topic!r}")
            offset = _check_int(offsets[tp], INT64_MIN, INT64_MAX, f"offset of {tp}")
            lines.append(f"{tp.topic} {partition} {offset}")
        _atomic_write(self.path, _checkpoint_bytes(self.VERSION, lines), sync)


class LeaderEpochCheckpointFile(_TextFile):
    """A partition's ``leader-epoch-checkpoint``: ``<leaderEpoch> <startOffset>`` lines, in file order."""

    __slots__ = ()

    VERSION = LEADER_EPOCH_CHECKPOINT_VERSION
    FILE_NAME = LEADER_EPOCH_CHECKPOINT

    @classmethod
    def in_dir(cls, partition_dir: str | os.PathLike[str]) -> LeaderEpochCheckpointFile:
        return cls(as_path(partition_dir) / cls.FILE_NAME)

    def read(self, *, missing_ok: bool = True) -> list[EpochEntry]:
        """The entries in file order; ``[]`` for a missing file unless ``missing_ok`` is False."""
        return _read_checkpoint(self.path, self.VERSION, EPOCH_ENTRY_FORM, _parse_epoch_entry, missing_ok)

    def write(self, entries: Iterable[EpochEntry], *, sync: bool = True) -> None:
        """Replace the file atomically with ``entries``, in the order given."""
        lines = []
        for entry in entries:
            if not isinstance(entry, EpochEntry):
                raise InvalidOptionError(f"leader epoch entries must be EpochEntry, got {type(entry).__name__}")
            epoch = _check_int(entry.epoch, INT32_MIN, INT32_MAX, "leader epoch")
            start = _check_int(entry.start_offset, INT64_MIN, INT64_MAX, f"start offset of epoch {epoch}")
            lines.append(f"{epoch} {start}")
        _atomic_write(self.path, _checkpoint_bytes(self.VERSION, lines), sync)


def current_leader_epoch(partition_dir: str | os.PathLike[str], registered: int | None = None) -> int:
    """The leader epoch klog's writer stamps on the batches it appends to a partition, as a broker's
    leader stamps its appends with its epoch (``UnifiedLog.appendAsLeader`` -> ``LogValidator``'s
    ``partitionLeaderEpoch``): the epoch the partition's ``leader-epoch-checkpoint`` ends with
    (``LeaderEpochFileCache.latestEpoch``); without one, ``registered``, the partition's leader epoch
    by the KRaft metadata (``PartitionRecord``/``PartitionChangeRecord``), when known; else -1
    (``RecordBatch.NO_PARTITION_LEADER_EPOCH``). The commit then records the epoch in every replica's
    checkpoint that lacks it (:func:`assign_leader_epoch`), so the checkpoint stays true of every batch."""
    entries = LeaderEpochCheckpointFile.in_dir(partition_dir).read()
    if entries:
        return entries[-1].epoch
    return registered if registered is not None and registered >= 0 else -1


def assign_leader_epoch(partition_dir: str | os.PathLike[str], epoch: int, start_offset: int) -> bool:
    """``LeaderEpochFileCache.assign(epoch, startOffset)``, which a broker's log calls for each v2
    batch it appends (``UnifiedLog.append``: ``maybeAssignEpochStartOffset(batch.partitionLeaderEpoch,
    batch.baseOffset)``), leader or follower: unless the checkpoint already ends with ``epoch`` from
    ``start_offset`` or earlier, the entries at or above ``epoch`` or starting at or after
    ``start_offset`` are removed (``maybeTruncateNonMonotonicEntries``) and ``(epoch, start_offset)``
    appended; the file is written (fsynced) only when it changed. An epoch of -1 (a batch without
    one) assigns nothing. Returns whether the file changed."""
    if epoch < 0:
        return False
    if start_offset < 0:
        raise InvalidOptionError(f"leader epoch {epoch} cannot start at offset {start_offset}: expected an offset >= 0")
    cp = LeaderEpochCheckpointFile.in_dir(partition_dir)
    entries = cp.read()
    if entries and entries[-1].epoch == epoch and entries[-1].start_offset <= start_offset:
        return False  # isUpdateNeeded: false
    while entries and (entries[-1].epoch >= epoch or entries[-1].start_offset >= start_offset):
        entries.pop()
    entries.append(EpochEntry(epoch, start_offset))
    cp.write(entries)
    return True


class PartitionMetadataFile(_TextFile):
    """A partition's ``partition.metadata``: format version and topic id (``PartitionMetadataReadBuffer``)."""

    __slots__ = ()

    VERSION = PARTITION_METADATA_VERSION
    FILE_NAME = PARTITION_METADATA_FILE

    @classmethod
    def in_dir(cls, partition_dir: str | os.PathLike[str]) -> PartitionMetadataFile:
        return cls(as_path(partition_dir) / cls.FILE_NAME)

    def read(self, *, missing_ok: bool = True) -> PartitionMetadata | None:
        """The metadata; ``None`` for a missing file unless ``missing_ok`` is False.

        As Kafka: line 1 ``version: <int >= 0>``, line 2 ``topic_id: <Uuid>``, keys and values
        separated by ``:`` and whitespace, the zero Uuid refused. Kafka ignores what follows line 2;
        klog allows only empty lines there.
        """
        data = _read_bytes(self.path, missing_ok)
        if data is None:
            return None
        lines = _java_lines(data, self.path)
        kind = "partition metadata file"
        if len(lines) < 2:
            raise CorruptCheckpointError(
                f"Partition metadata file has {len(lines)} line(s), expected 'version: 0' and 'topic_id: <id>'",
                path=self.path,
                position=len(data),
            )
        version_line, topic_line = lines[0], lines[1]
        try:
            version = _java_int(self._value(version_line, "version"), INT32_MIN, INT32_MAX, "the version")
        except ValueError as e:
            raise _malformed(self.path, version_line, kind, str(e)) from None
        if version < self.VERSION:
            raise CorruptCheckpointError(
                f"Unrecognized version {version} of partition metadata file (line 1), expected >= {self.VERSION}",
                path=self.path,
                position=0,
            )
        try:
            topic_id = uuid_from_base64(self._value(topic_line, "topic_id"))
        except ValueError as e:
            raise _malformed(self.path, topic_line, kind, str(e)) from None
        if topic_id.int == 0:
            raise _malformed(self.path, topic_line, kind, "the zero topic id is not a valid topic id")
        for extra in lines[2:]:
            if extra.text:
                raise _malformed(self.path, extra, kind, "nothing may follow the topic_id line")
        return PartitionMetadata(version, topic_id)

    @staticmethod
    def _value(line: _Line, key: str) -> str:
        parts = _METADATA_SEPARATOR.split(line.text, maxsplit=1)
        if len(parts) != 2 or parts[0] != key:
            raise ValueError(f"expected '{key}: <value>'")
        return parts[1]

    def write(self, topic_id: uuid.UUID, *, sync: bool = True) -> None:
        """Replace the file atomically with the current version and ``topic_id`` (no final newline, as Kafka)."""
        if not isinstance(topic_id, uuid.UUID):
            raise InvalidOptionError(f"topic_id must be a uuid.UUID, got {type(topic_id).__name__} {topic_id!r}")
        if topic_id.int == 0:
            raise InvalidOptionError("topic_id must not be the zero UUID (Kafka's Uuid.ZERO_UUID is not a topic id)")
        data = PartitionMetadata(self.VERSION, topic_id).encode().encode("utf-8")
        _atomic_write(self.path, data, sync)

    def delete(self) -> None:
        """Remove the file if it is there."""
        self.path.unlink(missing_ok=True)


class CleanShutdownFile(_TextFile):
    """A log dir's ``.kafka_cleanshutdown`` (``CleanShutdownFileHandler``); its presence means a clean shutdown."""

    __slots__ = ()

    VERSION = CLEAN_SHUTDOWN_VERSION
    FILE_NAME = CLEAN_SHUTDOWN_FILE

    @classmethod
    def in_dir(cls, log_dir: str | os.PathLike[str]) -> CleanShutdownFile:
        return cls(as_path(log_dir) / cls.FILE_NAME)

    def read(self, *, missing_ok: bool = True) -> int | None:
        """The broker epoch recorded at shutdown, or ``None``.

        ``None`` for a missing file (unless ``missing_ok`` is False), for an empty one (brokers
        before 3.7 wrote it empty) and for JSON without ``brokerEpoch`` (Kafka's ``read`` is
        empty then too). Kafka logs and ignores content that is not JSON; klog raises
        :class:`CorruptCheckpointError` for it. Like Kafka, the version is not checked.
        """
        data = _read_bytes(self.path, missing_ok)
        if data is None or not data.strip():
            return None
        try:
            content = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            raise CorruptCheckpointError(f"Clean shutdown file is not JSON ({e})", path=self.path) from None
        if not isinstance(content, dict):
            raise CorruptCheckpointError(
                f"Clean shutdown file holds {type(content).__name__} JSON, expected an object like"
                ' {"version":0,"brokerEpoch":N}',
                path=self.path,
            )
        version = content.get("version")
        if version is not None and (not isinstance(version, int) or isinstance(version, bool)):
            raise CorruptCheckpointError(f"Clean shutdown file version {version!r} is not an integer", path=self.path)
        epoch = content.get("brokerEpoch")
        if epoch is None:
            return None
        if not isinstance(epoch, int) or isinstance(epoch, bool) or not INT64_MIN <= epoch <= INT64_MAX:
            raise CorruptCheckpointError(
                f"Clean shutdown file brokerEpoch {epoch!r} is not a 64-bit integer", path=self.path
            )
        return epoch

    def write(self, broker_epoch: int | None, *, sync: bool = True) -> None:
        """Mark a clean shutdown: ``{"version":0,"brokerEpoch":N}``, or an empty file (pre-3.7) for ``None``."""
        if broker_epoch is None:
            data = b""
        else:
            epoch = _check_int(broker_epoch, INT64_MIN, INT64_MAX, "broker epoch")
            data = json.dumps({"version": self.VERSION, "brokerEpoch": epoch}, separators=(",", ":")).encode("utf-8")
        _atomic_write(self.path, data, sync)

    def delete(self) -> None:
        """Remove the marker if it is there (``Files.deleteIfExists``)."""
        self.path.unlink(missing_ok=True)

    def kept_epoch(self) -> int | None:
        """The broker epoch to write back when klog marks the dir clean again after working on it
        (a commit, a recovery, retention, compaction): the one the broker recorded, or None (no
        marker, an empty or unreadable one). A marker rewritten without it reads to the broker as an
        unclean shutdown: the broker registers with no previous broker epoch, and the controller
        then drops it from the eligible leader replicas of every partition (KIP-966,
        ``ReplicationControlManager``), which after a clean shutdown of every broker leaves
        partitions with no leader to elect."""
        try:
            return self.read()
        except CorruptCheckpointError:
            return None


# --- meta.properties (java.util.Properties) ---------------------------------------------------

_PROPERTY_WHITESPACE = " \t\f"
_PROPERTY_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_PROPERTY_ESCAPED = {"\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f", "=": "\\=", ":": "\\:", "#": "\\#", "!": "\\!"}
_JAVA_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_JAVA_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


class MetaProperties(_TextFile):
    """A log dir's ``meta.properties``, as ``java.util.Properties`` text (``PropertiesUtils``).

    Read as ``Properties.load(InputStream)`` does: ISO-8859-1, ``#``/``!`` comment lines, blank
    lines skipped, ``key=value``/``key:value``/``key value``, backslash line continuation and
    escapes (``\\t \\n \\r \\f \\uXXXX``). Written as ``Properties.store(writer, "")`` does: a ``#``
    line, a ``#<date>`` line (Java's ``Date.toString``, in UTC), then ``key=value`` lines in the
    mapping's order, escaped; non-ASCII characters are written as ``\\uXXXX`` so any reader gets
    them back. No validation of the keys (``MetaProperties.java`` does that).
    """

    __slots__ = ()

    FILE_NAME = META_PROPERTIES_FILE

    @classmethod
    def in_dir(cls, log_dir: str | os.PathLike[str]) -> MetaProperties:
        return cls(as_path(log_dir) / cls.FILE_NAME)

    def read(self, *, missing_ok: bool = True) -> dict[str, str]:
        """The properties in file order; ``{}`` for a missing file unless ``missing_ok`` is False."""
        data = _read_bytes(self.path, missing_ok)
        if data is None:
            return {}
        lines = _java_lines(data, self.path, "latin-1")
        props: dict[str, str] = {}
        i = 0
        while i < len(lines):
            first = lines[i]
            i += 1
            logical = first.text.lstrip(_PROPERTY_WHITESPACE)
            if not logical or logical[0] in "#!":
                continue
            while _odd_trailing_backslashes(logical):
                logical = logical[:-1]
                if i >= len(lines):
                    break
                logical += lines[i].text.lstrip(_PROPERTY_WHITESPACE)
                i += 1
            key, value = _split_property(logical)
            try:
                props[_unescape_property(key)] = _unescape_property(value)
            except ValueError as e:
                raise _malformed(self.path, first, "properties file", str(e)) from None
        return props

    @staticmethod
    def node_of(props: Mapping[str, str]) -> str | None:
        """The broker (or controller) id of a log dir's properties: ``node.id`` (KRaft), else
        ``broker.id`` (the ZooKeeper era), else None."""
        return props.get("node.id") or props.get("broker.id")

    def write(self, props: Mapping[str, str], *, sync: bool = True, now: datetime | None = None) -> None:
        """Replace the file atomically; ``now`` (default: the current time) goes into the date comment."""
        when = (now or datetime.now(timezone.utc)).astimezone(timezone.utc)
        date = (
            f"{_JAVA_DAYS[when.weekday()]} {_JAVA_MONTHS[when.month - 1]} {when.day:02d}"
            f" {when.hour:02d}:{when.minute:02d}:{when.second:02d} UTC {when.year}"
        )
        out = ["#", f"#{date}"]
        for key, value in props.items():
            if not isinstance(key, str) or not isinstance(value, str):
                raise InvalidOptionError(f"properties must map str to str, got {key!r}: {value!r}")
            out.append(f"{_escape_property(key, is_key=True)}={_escape_property(value, is_key=False)}")
        _atomic_write(self.path, "".join(f"{line}\n" for line in out).encode("ascii"), sync)


def _odd_trailing_backslashes(text: str) -> bool:
    return (len(text) - len(text.rstrip("\\"))) % 2 == 1


def _split_property(line: str) -> tuple[str, str]:
    """``Properties.load0``: the key ends at the first unescaped ``=``, ``:`` or whitespace."""
    key_end = len(line)
    value_start = len(line)
    has_separator = False
    backslash = False
    for j, c in enumerate(line):
        if c in "=:" and not backslash:
            key_end, value_start, has_separator = j, j + 1, True
            break
        if c in _PROPERTY_WHITESPACE and not backslash:
            key_end, value_start = j, j + 1
            break
        backslash = (not backslash) if c == "\\" else False
    while value_start < len(line):
        c = line[value_start]
        if c not in _PROPERTY_WHITESPACE:
            if not has_separator and c in "=:":
                has_separator = True
            else:
                break
        value_start += 1
    return line[:key_end], line[value_start:]


def _unescape_property(text: str) -> str:
    """``Properties.loadConvert``."""
    if "\\" not in text:
        return text
    out = []
    j = 0
    while j < len(text):
        c = text[j]
        j += 1
        if c != "\\":
            out.append(c)
            continue
        if j >= len(text):
            break
        c = text[j]
        j += 1
        if c == "u":
            digits = text[j : j + 4]
            if len(digits) != 4 or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise ValueError(f"malformed \\uxxxx encoding: \\u{digits}")
            out.append(chr(int(digits, 16)))
            j += 4
        else:
            out.append(_PROPERTY_ESCAPES.get(c, c))
    # \\uXXXX pairs may spell a surrogate pair; join them as Java's UTF-16 string would.
    return "".join(out).encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


def _escape_property(text: str, *, is_key: bool) -> str:
    """``Properties.saveConvert`` with non-ASCII escaped as ``\\uXXXX`` (UTF-16 units)."""
    out = []
    for j, c in enumerate(text):
        if c == "\\":
            out.append("\\\\")
        elif c == " ":
            out.append("\\ " if is_key or j == 0 else " ")
        elif c in _PROPERTY_ESCAPED:
            out.append(_PROPERTY_ESCAPED[c])
        elif c < " " or c > "~":
            units = c.encode("utf-16-be", "surrogatepass")
            out.extend(f"\\u{int.from_bytes(units[k : k + 2], 'big'):04X}" for k in range(0, len(units), 2))
        else:
            out.append(c)
    return "".join(out)
