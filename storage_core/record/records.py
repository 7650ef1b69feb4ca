"""RecordBatch v2 (``DefaultRecordBatch.java``, ``DefaultRecord.java``): read, validate, build.

Byte layout of a batch (all fixed-width fields big-endian), :data:`BATCH_HEADER`::

    offset  size  field
       0     8    baseOffset            first offset of the batch (kept through compaction)
       8     4    batchLength           bytes after this field; batch size = batchLength + 12
      12     4    partitionLeaderEpoch  outside the CRC: the broker stamps it in place
      16     1    magic                 2
      17     4    crc                   CRC-32C of bytes [21, end)
      21     2    attributes            bits 0-2 codec, 3 timestamp type, 4 transactional,
                                        5 control, 6 delete horizon set
      23     4    lastOffsetDelta       lastOffset = baseOffset + lastOffsetDelta
      27     8    baseTimestamp         or deleteHorizonMs when bit 6 is set
      35     8    maxTimestamp          LogAppendTime batches: every record's timestamp
      43     8    producerId
      51     2    producerEpoch
      53     4    baseSequence
      57     4    recordsCount          never compressed
      61     -    records               raw, or one compressed stream of all of them

A record (varints are zigzag LEB128, see :mod:`storage_core.record.varint`)::

    length varint | attributes int8 | timestampDelta varlong | offsetDelta varint |
    keyLength varint (-1 null) | key | valueLength varint (-1 null) | value |
    headerCount varint | (headerKeyLength varint | key utf-8 | headerValueLength varint (-1 null) | value)*

The classes here are the per-record API (for tests, tools and small uses); bulk decoding into
Arrow lives in :mod:`storage_core.record.columnar`.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import crc32c as _crc32c

from storage_core.errors import CorruptRecordError, InvalidRecordError, KlogError
from storage_core.limits import INT32_MAX
from storage_core.record.compression import CompressionType, compress, decompress
from storage_core.record.control import ControlRecordType, EndTransactionMarker
from storage_core.record.kernel import native_kernel
from storage_core.record.text import java_utf8
from storage_core.record.varint import encode_varint, encode_varlong, read_varint, read_varlong

# --- sizes and offsets (DefaultRecordBatch.java, Records.java) ----------------------------------

#: The whole v2 batch header, field by field as in the table above.
BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")
OFFSET_OFFSET = 0
SIZE_OFFSET = 8
LOG_OVERHEAD = 12  # offset + size: what precedes the size-counted part of every batch
PARTITION_LEADER_EPOCH_OFFSET = 12
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
RECORDS_COUNT_OFFSET = 57
RECORDS_OFFSET = 61
RECORD_BATCH_OVERHEAD = 61
HEADER_SIZE_UP_TO_MAGIC = 17

_BASE_OFFSET = struct.Struct(">q")
_CRC = struct.Struct(">I")
_PARTITION_LEADER_EPOCH = struct.Struct(">i")

MAGIC_VALUE_V0 = 0
MAGIC_VALUE_V1 = 1
MAGIC_VALUE_V2 = 2
CURRENT_MAGIC_VALUE = MAGIC_VALUE_V2

# --- attribute bits ---------------------------------------------------------------------------

COMPRESSION_CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_FLAG_MASK = 0x10
CONTROL_FLAG_MASK = 0x20
DELETE_HORIZON_FLAG_MASK = 0x40

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1
NO_TIMESTAMP = -1


def wrap_int64(value: int) -> int:
    """Java's long arithmetic: wrap to a signed 64-bit value."""
    return ((value + (1 << 63)) & 0xFFFFFFFFFFFFFFFF) - (1 << 63)


class TimestampType(enum.IntEnum):
    """``TimestampType.java``; the id is what Spark's Kafka source puts in ``timestampType``."""

    NO_TIMESTAMP_TYPE = -1
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1

    @property
    def label(self) -> str:
        return {-1: "NoTimestampType", 0: "CreateTime", 1: "LogAppendTime"}[int(self)]

    @classmethod
    def from_name(cls, name: str) -> TimestampType:
        for t in (cls.CREATE_TIME, cls.LOG_APPEND_TIME):
            if name == t.label:
                return t
        raise ValueError(f"Invalid timestamp type {name!r}; expected CreateTime or LogAppendTime")


_KERNEL = native_kernel()
#: the kernel's (three crc32 streams, the GIL released on large buffers) where it is built
_CRC32C = _KERNEL.crc32c if _KERNEL is not None else _crc32c.crc32c


def crc32c(data: bytes | bytearray | memoryview) -> int:
    """CRC-32C (Castagnoli), the checksum of v2 batches."""
    return _CRC32C(data)


# --- values ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Header:
    """A record header: a UTF-8 key (never null) and a value that may be null."""

    key: str
    value: bytes | None


@dataclass(frozen=True, slots=True)
class Record:
    """One record as a consumer sees it: absolute offset and timestamp resolved."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()
    sequence: int = NO_SEQUENCE


@dataclass(frozen=True, slots=True)
class BatchHeader:
    """The fixed-width header of a v2 batch, field for field."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @classmethod
    def parse(cls, buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
        return cls(*BATCH_HEADER.unpack_from(buf, pos))


# --- record decoding (the reference loop) ------------------------------------------------------


def _read_bytes(buf: memoryview, pos: int, size: int, limit: int) -> tuple[bytes | None, int]:
    if size < 0:
        return None, pos  # DefaultRecord: any negative length is null
    if size > limit - pos:
        raise InvalidRecordError("Found invalid record structure: a length of "
                                 f"{size} bytes goes past the end of the record ({limit - pos} left)")
    return bytes(buf[pos:pos + size]), pos + size


def decode_record(
    buf: memoryview,
    pos: int,
    base_offset: int,
    base_timestamp: int,
    base_sequence: int,
    log_append_time: int | None,
) -> tuple[Record, int]:
    """``DefaultRecord.readFrom``: one record at ``pos``; returns it and the next position."""
    body_size, pos = read_varint(buf, pos)
    if body_size < 0 or body_size > len(buf) - pos:
        raise InvalidRecordError(f"Invalid record size: expected {body_size} bytes in record payload, "
                                 f"but instead the buffer has only {len(buf) - pos} remaining bytes.")
    start = pos
    limit = pos + body_size
    pos += 1  # attributes: unused
    ts_delta, pos = read_varlong(buf, pos)
    offset_delta, pos = read_varint(buf, pos)
    key_size, pos = read_varint(buf, pos)
    key, pos = _read_bytes(buf, pos, key_size, limit)
    value_size, pos = read_varint(buf, pos)
    value, pos = _read_bytes(buf, pos, value_size, limit)
    n_headers, pos = read_varint(buf, pos)
    if n_headers < 0:
        raise InvalidRecordError(f"Found invalid number of record headers {n_headers}")
    if n_headers > limit - pos:
        raise InvalidRecordError(f"Found invalid number of record headers. {n_headers} is larger "
                                 "than the remaining size of the buffer")
    headers: list[Header] = []
    for _ in range(n_headers):
        hk_size, pos = read_varint(buf, pos)
        if hk_size < 0:
            raise InvalidRecordError(f"Invalid negative header key size {hk_size}")
        hk, pos = _read_bytes(buf, pos, hk_size, limit)
        assert hk is not None
        hv_size, pos = read_varint(buf, pos)
        hv, pos = _read_bytes(buf, pos, hv_size, limit)
        headers.append(Header(java_utf8(hk), hv))
    if pos != limit:
        raise InvalidRecordError(f"Invalid record size: expected to read {body_size} bytes in record "
                                 f"payload, but instead read {pos - start}")
    timestamp = log_append_time if log_append_time is not None else wrap_int64(base_timestamp + ts_delta)
    if base_sequence >= 0:
        sequence = base_sequence + offset_delta
        if sequence > INT32_MAX:
            sequence -= INT32_MAX + 1
    else:
        sequence = NO_SEQUENCE
    return Record(wrap_int64(base_offset + offset_delta), timestamp, key, value, tuple(headers), sequence), pos


# --- the batch --------------------------------------------------------------------------------


class DefaultRecordBatch:
    """A v2 batch over its bytes (``LOG_OVERHEAD`` included); nothing is decoded until asked.

    ``position`` and ``path`` only serve error messages: where in which file the batch starts.
    """

    __slots__ = ("buffer", "header", "position", "path")

    magic = MAGIC_VALUE_V2

    def __init__(self, buffer: bytes | bytearray | memoryview, position: int = 0, path: str | None = None) -> None:
        self.buffer = memoryview(buffer)
        self.position = position
        self.path = path
        if len(self.buffer) < RECORD_BATCH_OVERHEAD:
            raise CorruptRecordError(
                f"Record batch is corrupt (the size {len(self.buffer)} is smaller than "
                f"the minimum allowed overhead {RECORD_BATCH_OVERHEAD})",
                path=path, position=position)
        self.header = BatchHeader.parse(self.buffer)

    # -- header fields, named as in Kafka's RecordBatch interface
    @property
    def base_offset(self) -> int:
        return self.header.base_offset

    @property
    def last_offset(self) -> int:
        return self.header.base_offset + self.header.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def size_in_bytes(self) -> int:
        return len(self.buffer)

    @property
    def attributes(self) -> int:
        return self.header.attributes

    @property
    def compression(self) -> CompressionType:
        return CompressionType.from_id(self.header.attributes & COMPRESSION_CODEC_MASK)

    @property
    def timestamp_type(self) -> TimestampType:
        if self.header.attributes & TIMESTAMP_TYPE_MASK:
            return TimestampType.LOG_APPEND_TIME
        return TimestampType.CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.header.attributes & TRANSACTIONAL_FLAG_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.header.attributes & CONTROL_FLAG_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.header.attributes & DELETE_HORIZON_FLAG_MASK)

    @property
    def delete_horizon_ms(self) -> int | None:
        return self.header.base_timestamp if self.has_delete_horizon else None

    @property
    def base_timestamp(self) -> int:
        return self.header.base_timestamp

    @property
    def first_timestamp(self) -> int | None:
        """The timestamp a consumer sees on the batch's first record, None for an empty batch.

        Not always the base timestamp: a LogAppendTime batch's records carry its max timestamp
        (the broker's clock), and in a batch the cleaner stamped with a delete horizon (bit 6,
        KIP-534) the base timestamp field holds the horizon, so only the first record's delta
        from it gives the record's time."""
        if self.header.records_count <= 0:
            return None
        if self.timestamp_type == TimestampType.LOG_APPEND_TIME:
            return self.max_timestamp
        if self.has_delete_horizon:
            return self.records()[0].timestamp
        return self.base_timestamp

    @property
    def max_timestamp(self) -> int:
        return self.header.max_timestamp

    @property
    def producer_id(self) -> int:
        return self.header.producer_id

    @property
    def producer_epoch(self) -> int:
        return self.header.producer_epoch

    @property
    def base_sequence(self) -> int:
        return self.header.base_sequence

    @property
    def last_sequence(self) -> int:
        if self.header.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        seq = self.header.base_sequence + self.header.last_offset_delta
        return seq - (INT32_MAX + 1) if seq > INT32_MAX else seq

    @property
    def partition_leader_epoch(self) -> int:
        return self.header.partition_leader_epoch

    @property
    def records_count(self) -> int:
        return self.header.records_count

    @property
    def crc(self) -> int:
        return self.header.crc

    # -- validation
    def compute_checksum(self) -> int:
        return crc32c(self.buffer[ATTRIBUTES_OFFSET:])

    def is_valid(self) -> bool:
        return self.compute_checksum() == self.header.crc

    def ensure_valid(self) -> None:
        """``DefaultRecordBatch.ensureValid``: size and CRC-32C; the records are not parsed."""
        if self.header.magic != MAGIC_VALUE_V2:
            raise CorruptRecordError(f"Invalid magic {self.header.magic} for a v2 record batch; expected 2",
                                     path=self.path, position=self.position)
        computed = self.compute_checksum()
        if computed != self.header.crc:
            raise CorruptRecordError(
                f"Record is corrupt (stored crc = {self.header.crc}, computed crc = {computed})",
                path=self.path, position=self.position)

    # -- records
    def records_payload(self) -> bytes | memoryview:
        """The records area, decompressed."""
        codec = self.compression_or_raise()
        raw = self.buffer[RECORDS_OFFSET:]
        if codec == CompressionType.NONE:
            return raw
        try:
            return decompress(codec, raw)
        except KlogError as exc:
            exc.located(path=self.path, position=self.position)
            raise

    def compression_or_raise(self) -> CompressionType:
        try:
            return self.compression
        except KlogError as exc:
            exc.located(path=self.path, position=self.position)
            raise

    def records(self) -> list[Record]:
        """Every record of the batch (``DefaultRecordBatch.iterator``), all or an error."""
        count = self.header.records_count
        if count < 0:
            raise InvalidRecordError(f"Found invalid record count {count} in magic v2 batch",
                                     path=self.path, position=self.position)
        payload = memoryview(self.records_payload())
        log_append_time = self.max_timestamp if self.timestamp_type == TimestampType.LOG_APPEND_TIME else None
        out: list[Record] = []
        pos = 0
        try:
            if count > len(payload):  # each record takes at least one byte: bound the loop first
                raise InvalidRecordError(f"Found invalid record count {count} in magic v2 batch: only "
                                         f"{len(payload)} bytes of records")
            for _ in range(count):
                rec, pos = decode_record(payload, pos, self.base_offset, self.base_timestamp,
                                         self.base_sequence, log_append_time)
                out.append(rec)
            if pos != len(payload):
                raise InvalidRecordError("Incorrect declared batch size, records still remaining in file")
        except KlogError as exc:
            exc.located(path=self.path, position=self.position)
            raise
        return out

    def __iter__(self) -> Iterator[Record]:
        return iter(self.records())

    def control_type(self, record: Record) -> ControlRecordType:
        return ControlRecordType.parse(record.key)

    def __repr__(self) -> str:
        return (f"DefaultRecordBatch(base_offset={self.base_offset}, last_offset={self.last_offset}, "
                f"count={self.records_count}, compression={self.compression.label}, "
                f"size={self.size_in_bytes}, position={self.position})")


# --- building ----------------------------------------------------------------------------------


def encode_record(offset_delta: int, timestamp_delta: int, key: bytes | None, value: bytes | None,
                  headers: Sequence[Header] = ()) -> bytes:
    """``DefaultRecord.writeTo``: one record, length prefix included."""
    parts = [b"\x00", encode_varlong(timestamp_delta), encode_varint(offset_delta)]
    if key is None:
        parts.append(b"\x01")  # zigzag(-1)
    else:
        parts += (encode_varint(len(key)), key)
    if value is None:
        parts.append(b"\x01")
    else:
        parts += (encode_varint(len(value)), value)
    parts.append(encode_varint(len(headers)))
    for h in headers:
        if h.key is None:
            raise ValueError("Invalid null header key found in headers")
        hk = h.key.encode("utf-8")
        parts += (encode_varint(len(hk)), hk)
        if h.value is None:
            parts.append(b"\x01")
        else:
            parts += (encode_varint(len(h.value)), h.value)
    body = b"".join(parts)
    return encode_varint(len(body)) + body


def write_batch_header(
    buf: bytearray,
    *,
    base_offset: int,
    partition_leader_epoch: int,
    attributes: int,
    last_offset_delta: int,
    base_timestamp: int,
    max_timestamp: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    records_count: int,
) -> None:
    """Fill the 61-byte header at the start of ``buf`` (records already after it) and its CRC."""
    BATCH_HEADER.pack_into(buf, 0, base_offset, len(buf) - LOG_OVERHEAD, partition_leader_epoch,
                           MAGIC_VALUE_V2, 0, attributes, last_offset_delta, base_timestamp,
                           max_timestamp, producer_id, producer_epoch, base_sequence, records_count)
    _CRC.pack_into(buf, CRC_OFFSET, crc32c(memoryview(buf)[ATTRIBUTES_OFFSET:]))


def batch_attributes(compression: CompressionType, timestamp_type: TimestampType, is_transactional: bool,
                     is_control: bool, has_delete_horizon: bool = False) -> int:
    attrs = int(compression) & COMPRESSION_CODEC_MASK
    if timestamp_type == TimestampType.LOG_APPEND_TIME:
        attrs |= TIMESTAMP_TYPE_MASK
    if is_transactional:
        attrs |= TRANSACTIONAL_FLAG_MASK
    if is_control:
        attrs |= CONTROL_FLAG_MASK
    if has_delete_horizon:
        attrs |= DELETE_HORIZON_FLAG_MASK
    return attrs


def build_batch(
    records: Iterable[Record],
    *,
    base_offset: int | None = None,
    compression: CompressionType = CompressionType.NONE,
    compression_level: int | None = None,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    log_append_time: int | None = None,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    is_transactional: bool = False,
    is_control: bool = False,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    delete_horizon_ms: int | None = None,
    last_offset: int | None = None,
) -> bytes:
    """Build one v2 batch as ``MemoryRecordsBuilder`` does; records keep their own offsets.

    ``base_offset`` defaults to the first record's offset; ``last_offset`` (the cleaner's
    ``overrideLastOffset``) defaults to the last record's. With ``delete_horizon_ms`` the base
    timestamp is the horizon and attribute bit 6 is set (KIP-534). With LogAppendTime,
    ``log_append_time`` is the batch's max timestamp.
    """
    recs = list(records)
    if base_offset is None:
        if not recs:
            raise ValueError("an empty batch needs an explicit base_offset")
        base_offset = recs[0].offset
    if recs:
        first_ts = recs[0].timestamp
        base_ts = delete_horizon_ms if delete_horizon_ms is not None else first_ts
        max_ts = max(r.timestamp for r in recs)
        last = recs[-1].offset if last_offset is None else last_offset
    else:
        base_ts = delete_horizon_ms if delete_horizon_ms is not None else NO_TIMESTAMP
        max_ts = NO_TIMESTAMP
        last = base_offset if last_offset is None else last_offset
    if timestamp_type == TimestampType.LOG_APPEND_TIME:
        if log_append_time is None:
            raise ValueError("a LogAppendTime batch needs log_append_time")
        max_ts = log_append_time
    prev = None
    body = bytearray()
    for r in recs:
        if prev is not None and r.offset <= prev:
            raise ValueError(f"record offsets must increase within a batch: {r.offset} after {prev}")
        prev = r.offset
        delta = r.offset - base_offset
        if not 0 <= delta <= INT32_MAX:
            raise ValueError(f"offset {r.offset} does not fit a batch based at {base_offset}")
        body += encode_record(delta, wrap_int64(r.timestamp - base_ts), r.key, r.value, r.headers)
    return batch_of_area(body, len(recs), base_offset=base_offset, last_offset=last, base_timestamp=base_ts,
                         max_timestamp=max_ts, compression=compression, compression_level=compression_level,
                         timestamp_type=timestamp_type, producer_id=producer_id, producer_epoch=producer_epoch,
                         base_sequence=base_sequence, is_transactional=is_transactional, is_control=is_control,
                         partition_leader_epoch=partition_leader_epoch,
                         has_delete_horizon=delete_horizon_ms is not None)


def batch_of_area(
    area: bytes | bytearray | memoryview,
    count: int,
    *,
    base_offset: int,
    last_offset: int,
    base_timestamp: int,
    max_timestamp: int,
    compression: CompressionType,
    compression_level: int | None = None,
    timestamp_type: TimestampType,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    is_transactional: bool,
    is_control: bool,
    partition_leader_epoch: int,
    has_delete_horizon: bool,
) -> bytes:
    """A v2 batch around ``count`` records already encoded in ``area`` (relative to
    ``base_offset`` and ``base_timestamp``): compressed with ``compression``, header and CRC
    written (the end of ``MemoryRecordsBuilder.build``; :func:`build_batch` and the cleaner's
    rebuilt batches both end here)."""
    payload = compress(compression, bytes(area), compression_level) if compression != CompressionType.NONE else area
    buf = bytearray(RECORD_BATCH_OVERHEAD) + payload
    write_batch_header(
        buf,
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
        attributes=batch_attributes(compression, timestamp_type, is_transactional, is_control, has_delete_horizon),
        last_offset_delta=last_offset - base_offset,
        base_timestamp=base_timestamp,
        max_timestamp=max_timestamp,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        records_count=count,
    )
    return bytes(buf)


def build_end_txn_marker(
    offset: int,
    timestamp: int,
    partition_leader_epoch: int,
    producer_id: int,
    producer_epoch: int,
    marker: EndTransactionMarker,
) -> bytes:
    """``MemoryRecords.withEndTransactionMarker``: a transactional control batch of one record."""
    rec = Record(offset, timestamp, marker.type.key_bytes(), marker.value_bytes())
    return build_batch([rec], base_offset=offset, producer_id=producer_id, producer_epoch=producer_epoch,
                       is_transactional=True, is_control=True, partition_leader_epoch=partition_leader_epoch)


def set_base_offset(batch: bytearray | memoryview, base_offset: int) -> None:
    """Patch a batch's base offset in place: it lies outside the CRC, by Kafka's design."""
    _BASE_OFFSET.pack_into(batch, OFFSET_OFFSET, base_offset)


def set_partition_leader_epoch(batch: bytearray | memoryview, epoch: int) -> None:
    """Stamp the partition leader epoch in place (also outside the CRC)."""
    _PARTITION_LEADER_EPOCH.pack_into(batch, PARTITION_LEADER_EPOCH_OFFSET, epoch)
