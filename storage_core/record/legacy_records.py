"""Legacy message sets, magic v0 and v1 (``LegacyRecord.java``, ``AbstractLegacyRecordBatch.java``).

Read-only: Kafka 4 no longer writes them, but old segments and old fetch captures hold them.
Each log entry is one "shallow" message (:data:`LEGACY_HEADER_V0` / :data:`LEGACY_HEADER_V1`)::

    offset int64 | size int32 | crc uint32 | magic int8 | attributes int8 |
    [timestamp int64, v1 only] | keyLength int32 (-1 null) | key | valueLength int32 (-1 null) | value

The CRC is plain CRC-32 (``zlib.crc32``) of the message from ``magic`` to its end. Attribute bits
0-2 are the codec (0..3: zstd is illegal before v2), bit 3 the timestamp type (v1).

A compressed message is a *wrapper*: null key, and a value that is the compressed inner message
set. Its offset is the absolute offset of its *last* inner message. v1 inner offsets are relative
(absolute = wrapper offset - last inner offset + inner offset; a wrapper offset of 0 means base 0,
for some librdkafka versions); v0 inner offsets are absolute. With LogAppendTime the v1 wrapper's
timestamp replaces every inner timestamp.
"""

from __future__ import annotations

import struct
import zlib

from storage_core.errors import CorruptRecordError, InvalidRecordError, KlogError, UnsupportedCodecError
from storage_core.record.compression import CompressionType, decompress
from storage_core.record.records import (
    LOG_OVERHEAD,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    Record,
    TimestampType,
)

#: offset int64, size int32, crc uint32, magic int8, attributes int8
LEGACY_HEADER_V0 = struct.Struct(">qiIbb")
#: ... then timestamp int64 (v1)
LEGACY_HEADER_V1 = struct.Struct(">qiIbbq")
_LENGTH = struct.Struct(">i")

CRC_OFFSET = LOG_OVERHEAD          # within a log entry
MAGIC_OFFSET = LOG_OVERHEAD + 4
RECORD_OVERHEAD_V0 = 14  # crc 4 + magic 1 + attributes 1 + key length 4 + value length 4
RECORD_OVERHEAD_V1 = 22  # ... + timestamp 8
LEGACY_CODEC_MASK = 0x07
LEGACY_TIMESTAMP_TYPE_MASK = 0x08


class LegacyRecordBatch:
    """One shallow v0/v1 message over its bytes: a single record, or a compressed wrapper."""

    __slots__ = ("buffer", "position", "path", "offset", "size", "crc", "magic", "attributes",
                 "wrapper_timestamp", "_inner")

    def __init__(self, buffer: bytes | bytearray | memoryview, position: int = 0, path: str | None = None) -> None:
        self.buffer = memoryview(buffer)
        self.position = position
        self.path = path
        if len(self.buffer) < LOG_OVERHEAD + RECORD_OVERHEAD_V0:
            raise CorruptRecordError(
                "Record is corrupt (crc could not be retrieved as the record is too small, "
                f"size = {len(self.buffer) - LOG_OVERHEAD})", path=path, position=position)
        fields = LEGACY_HEADER_V0.unpack_from(self.buffer)
        self.offset: int = fields[0]
        self.size: int = fields[1]
        self.crc: int = fields[2]
        self.magic: int = fields[3]
        self.attributes: int = fields[4]
        self.wrapper_timestamp: int
        if self.magic not in (0, 1):
            raise CorruptRecordError(f"Invalid magic {self.magic} for a legacy message; expected 0 or 1",
                                     path=path, position=position)
        if self.magic == 1:
            if len(self.buffer) < LOG_OVERHEAD + RECORD_OVERHEAD_V1:
                raise CorruptRecordError(
                    f"Record is corrupt (size {len(self.buffer) - LOG_OVERHEAD} is smaller than the v1 "
                    f"overhead {RECORD_OVERHEAD_V1})", path=path, position=position)
            self.wrapper_timestamp = int(LEGACY_HEADER_V1.unpack_from(self.buffer)[5])
        else:
            self.wrapper_timestamp = NO_TIMESTAMP
        self._inner: list[Record] | None = None

    # -- the RecordBatch interface, as AbstractLegacyRecordBatch answers it
    @property
    def last_offset(self) -> int:
        return self.offset

    @property
    def next_offset(self) -> int:
        return self.offset + 1

    @property
    def base_offset(self) -> int:
        if self.compression == CompressionType.NONE:
            return self.offset
        return self.records()[0].offset

    @property
    def size_in_bytes(self) -> int:
        return len(self.buffer)

    @property
    def compression(self) -> CompressionType:
        codec_id = self.attributes & LEGACY_CODEC_MASK
        try:
            return CompressionType.from_id(codec_id)
        except KlogError as exc:
            exc.located(path=self.path, position=self.position)
            raise

    @property
    def timestamp_type(self) -> TimestampType:
        if self.magic == 0:
            return TimestampType.NO_TIMESTAMP_TYPE
        if self.attributes & LEGACY_TIMESTAMP_TYPE_MASK:
            return TimestampType.LOG_APPEND_TIME
        return TimestampType.CREATE_TIME

    @property
    def max_timestamp(self) -> int:
        return self.wrapper_timestamp

    is_transactional = False
    is_control = False
    has_delete_horizon = False
    producer_id = NO_PRODUCER_ID
    producer_epoch = NO_PRODUCER_EPOCH
    base_sequence = NO_SEQUENCE
    last_sequence = NO_SEQUENCE
    partition_leader_epoch = NO_PARTITION_LEADER_EPOCH

    def compute_checksum(self) -> int:
        return int(zlib.crc32(self.buffer[MAGIC_OFFSET:])) & 0xFFFFFFFF

    def is_valid(self) -> bool:
        return self.compute_checksum() == self.crc

    def ensure_valid(self) -> None:
        computed = self.compute_checksum()
        if computed != self.crc:
            raise CorruptRecordError(f"Record is corrupt (stored crc = {self.crc}, computed crc = {computed})",
                                     path=self.path, position=self.position)

    def records(self) -> list[Record]:
        """The message itself, or a wrapper's inner messages with absolute offsets."""
        if self._inner is None:
            try:
                self._inner = self._decode()
            except KlogError as exc:
                exc.located(path=self.path, position=self.position)
                raise
        return self._inner

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self.records())

    # -- decoding
    def _key_value(self, msg: memoryview, magic: int) -> tuple[bytes | None, bytes | None]:
        pos = (RECORD_OVERHEAD_V1 if magic == 1 else RECORD_OVERHEAD_V0) - 8  # after attributes/timestamp
        out: list[bytes | None] = []
        for what in ("key", "value"):
            if len(msg) - pos < 4:
                raise InvalidRecordError(f"Found invalid record structure: no room for the {what} length")
            (n,) = _LENGTH.unpack_from(msg, pos)
            pos += 4
            if n < 0:
                out.append(None)
                continue
            if n > len(msg) - pos:
                raise InvalidRecordError(f"Found invalid record structure: {what} length {n} exceeds the "
                                         f"{len(msg) - pos} bytes left in the message")
            out.append(bytes(msg[pos:pos + n]))
            pos += n
        return out[0], out[1]

    def _decode(self) -> list[Record]:
        msg = self.buffer[LOG_OVERHEAD:]
        key, value = self._key_value(msg, self.magic)
        codec = self.compression
        if codec == CompressionType.NONE:
            ts = self.wrapper_timestamp if self.magic == 1 else NO_TIMESTAMP
            return [Record(self.offset, ts, key, value)]
        if codec == CompressionType.ZSTD:
            raise UnsupportedCodecError("zstd compression is not allowed for magic v0/v1 messages")
        if value is None:
            raise InvalidRecordError("Found invalid compressed record set with null value")
        inner = memoryview(decompress(codec, value, self.magic))
        entries: list[tuple[int, int, int, bytes | None, bytes | None]] = []
        pos = 0
        while len(inner) - pos >= LOG_OVERHEAD:
            off, size = struct.unpack_from(">qi", inner, pos)
            if size < RECORD_OVERHEAD_V0:
                raise CorruptRecordError(f"Record size {size} is less than the minimum record overhead "
                                         f"({RECORD_OVERHEAD_V0})")
            if len(inner) - pos - LOG_OVERHEAD < size:
                break  # a partial inner message ends the set, as in DataLogInputStream
            m = inner[pos + LOG_OVERHEAD:pos + LOG_OVERHEAD + size]
            magic, attrs = m[4], m[5]
            if magic != self.magic:
                raise InvalidRecordError(f"Compressed message magic {magic} does not match wrapper magic "
                                         f"{self.magic}")
            if attrs & LEGACY_CODEC_MASK:
                raise InvalidRecordError("Inner messages must not be compressed")
            if magic == 1 and size < RECORD_OVERHEAD_V1:
                raise CorruptRecordError(f"Record size {size} is less than the v1 overhead {RECORD_OVERHEAD_V1}")
            ts = struct.unpack_from(">q", m, 6)[0] if magic == 1 else NO_TIMESTAMP
            k, v = self._key_value(m, magic)
            entries.append((off, ts, attrs, k, v))
            pos += LOG_OVERHEAD + size
        if not entries:
            raise InvalidRecordError("Found invalid compressed record set with no inner records")
        base = -1
        if self.magic > 0:
            if self.offset == 0:
                base = 0
            else:
                last_inner = entries[-1][0]
                if self.offset < last_inner:
                    raise InvalidRecordError(
                        f"Found invalid wrapper offset in compressed v1 message set, wrapper offset "
                        f"'{self.offset}' is less than the last inner message offset '{last_inner}' and it "
                        "is not zero.")
                base = self.offset - last_inner
        log_append = self.magic == 1 and self.timestamp_type == TimestampType.LOG_APPEND_TIME
        return [
            Record(off if base < 0 else base + off,
                   self.wrapper_timestamp if log_append else ts, k, v)
            for off, ts, _attrs, k, v in entries
        ]

    def __repr__(self) -> str:
        return (f"LegacyRecordBatch(magic={self.magic}, offset={self.offset}, "
                f"compression={self.attributes & LEGACY_CODEC_MASK}, position={self.position})")
