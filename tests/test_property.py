"""Property tests: round trips of arbitrary records, and fuzzing the readers with arbitrary bytes.

Round trips: records -> ``build_batch`` (every codec, CreateTime or LogAppendTime, transactional or
not) -> the per-record path (``DefaultRecordBatch.records()``) and the columnar path
(``decode_batches`` with the kernel's builder and with the pure-Python builder); Arrow rows ->
``encode_arrow`` (kernel and Python encoders) -> the same decoders.

Fuzzing: arbitrary bytes, mutated valid files and forged batches (random records area, correct CRC)
go through ``FileRecords``/``iter_batches``, ``ensure_valid``, ``records``, ``decode_batches`` and
``dump_jsonl``; only ``KlogError``s may come out, and the readers must agree with each other.
"""

from __future__ import annotations

import io
import json
import struct
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from storage_core.errors import KlogError
from storage_core.record.columnar import HEADER_TYPE, ArrowDecoder, decode_batches, encode_arrow, kafka_schema
from storage_core.record.compression import CompressionType, compress
from storage_core.record.control import ControlRecordType, EndTransactionMarker
from storage_core.record.file_records import READ_CHUNK_BYTES, AnyBatch, BatchWalk, FileRecords, iter_batches
from storage_core.record.records import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    RECORD_BATCH_OVERHEAD,
    RECORDS_COUNT_OFFSET,
    SIZE_OFFSET,
    DefaultRecordBatch,
    Header,
    Record,
    TimestampType,
    build_batch,
    build_end_txn_marker,
    crc32c,
    encode_record,
)
from storage_core.record.scan import decode_file_range
from storage_core.record.text import java_utf8
from storage_core.record.varint import encode_varint, encode_varlong
from storage_core.tools.dump import dump_jsonl

INT32_MAX = (1 << 31) - 1
INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1
#: The widest millisecond timestamp that still fits Arrow's timestamp[us] (an int64 of microseconds).
MAX_MS_AS_US = INT64_MAX // 1000
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)

TS_MIN, TS_MAX = -(2**40), 2**45
BASE_TIMESTAMP_OFFSET = 27  # in a v2 batch header; maxTimestamp follows at 35

ROUND_TRIP = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FUZZ = settings(max_examples=200, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def as_datetime(ms: int) -> datetime:
    return EPOCH + timedelta(milliseconds=ms)


def headers_cell(headers: Sequence[Header]) -> list[dict[str, Any]] | None:
    """The ``headers`` column of a record: null when it has none (Spark's Kafka source)."""
    return [{"key": h.key, "value": h.value} for h in headers] if headers else None


def wrap_sequence(base_sequence: int, delta: int) -> int:
    if base_sequence < 0:
        return -1
    seq = base_sequence + delta
    return seq - (1 << 31) if seq > INT32_MAX else seq


# --- strategies: records ---------------------------------------------------------------------------

header_keys = st.text(st.characters(exclude_categories=("Cs",)), max_size=10)
nullable_bytes = st.none() | st.binary(max_size=40)
headers_st = st.lists(st.builds(Header, header_keys, nullable_bytes), max_size=4).map(tuple)
timestamps = st.integers(TS_MIN, TS_MAX)


@dataclass(frozen=True)
class BatchSpec:
    records: tuple[Record, ...]
    base_offset: int
    log_append_time: int | None
    transactional: bool
    producer_id: int
    producer_epoch: int
    base_sequence: int
    partition_leader_epoch: int
    delete_horizon_ms: int | None

    def build(self, codec: CompressionType) -> bytes:
        return build_batch(
            self.records, base_offset=self.base_offset, compression=codec,
            timestamp_type=TimestampType.CREATE_TIME if self.log_append_time is None else TimestampType.LOG_APPEND_TIME,
            log_append_time=self.log_append_time, producer_id=self.producer_id, producer_epoch=self.producer_epoch,
            base_sequence=self.base_sequence, is_transactional=self.transactional,
            partition_leader_epoch=self.partition_leader_epoch, delete_horizon_ms=self.delete_horizon_ms)

    @property
    def last_offset(self) -> int:
        return self.records[-1].offset if self.records else self.base_offset

    def expected_records(self) -> list[Record]:
        return [Record(r.offset, r.timestamp if self.log_append_time is None else self.log_append_time,
                       r.key, r.value, r.headers, wrap_sequence(self.base_sequence, r.offset - self.base_offset))
                for r in self.records]


@st.composite
def batch_specs(draw: st.DrawFn, ts: st.SearchStrategy[int] = timestamps, max_records: int = 12) -> BatchSpec:
    base = draw(st.integers(0, 2**62))
    offset = base + draw(st.integers(0, 3))
    records = []
    for _ in range(draw(st.integers(0, max_records))):
        records.append(Record(offset, draw(ts), draw(nullable_bytes), draw(nullable_bytes), draw(headers_st)))
        offset += draw(st.sampled_from([1, 1, 1, 2]) | st.integers(1, 2**27))
    return BatchSpec(
        records=tuple(records),
        base_offset=base,
        log_append_time=draw(st.none() | ts),
        transactional=draw(st.booleans()),
        producer_id=draw(st.just(-1) | st.integers(0, INT64_MAX)),
        producer_epoch=draw(st.integers(-1, 32767)),
        base_sequence=draw(st.just(-1) | st.integers(0, INT32_MAX)),
        partition_leader_epoch=draw(st.integers(-1, INT32_MAX)),
        delete_horizon_ms=draw(st.none() | ts),
    )


# --- round trips through build_batch ---------------------------------------------------------------


def expected_rows(spec: BatchSpec, codec: CompressionType, topic: str, partition: int) -> list[dict[str, Any]]:
    ts_type = 0 if spec.log_append_time is None else 1
    return [
        {
            "key": r.key, "value": r.value, "topic": topic, "partition": partition, "offset": r.offset,
            "timestamp": as_datetime(r.timestamp), "timestampType": ts_type, "headers": headers_cell(r.headers),
            "batchBaseOffset": spec.base_offset, "batchLastOffset": spec.last_offset,
            "leaderEpoch": spec.partition_leader_epoch, "producerId": spec.producer_id,
            "producerEpoch": spec.producer_epoch, "sequence": r.sequence, "isTransactional": spec.transactional,
            "compression": codec.label, "magic": 2,
        }
        for r in spec.expected_records()
    ]


@pytest.mark.parametrize("codec", list(CompressionType), ids=lambda c: c.label)
@ROUND_TRIP
@given(spec=batch_specs())
def test_build_batch_round_trips(codec: CompressionType, spec: BatchSpec) -> None:
    raw = spec.build(codec)

    # (a) the per-record path
    batch = DefaultRecordBatch(raw)
    batch.ensure_valid()
    assert batch.compression == codec
    assert batch.is_transactional == spec.transactional
    assert batch.timestamp_type == (TimestampType.CREATE_TIME if spec.log_append_time is None
                                    else TimestampType.LOG_APPEND_TIME)
    assert batch.records_count == len(spec.records)
    assert (batch.base_offset, batch.last_offset) == (spec.base_offset, spec.last_offset)
    assert batch.delete_horizon_ms == spec.delete_horizon_ms
    assert batch.records() == spec.expected_records()
    assert [b.position for b in iter_batches(raw)] == [0]

    # (b) the columnar path, both builders
    rows = {}
    for native in (True, False):
        rb = decode_batches([DefaultRecordBatch(raw)], "topic", 7, include_headers=True, include_metadata=True,
                            native=native)
        rb.validate(full=True)
        assert rb.schema == kafka_schema(include_headers=True, include_metadata=True)
        rows[native] = rb.to_pylist()
        assert all(row["timestamp"].tzinfo is not None for row in rows[native])
    assert rows[True] == rows[False]
    assert rows[True] == expected_rows(spec, codec, "topic", 7)


@ROUND_TRIP
@given(spec=batch_specs(ts=st.just(-1) | st.integers(0, INT64_MAX), max_records=4),
       codec=st.sampled_from(list(CompressionType)))
@example(spec=BatchSpec((Record(0, -1, None, None), Record(1, INT64_MAX, None, None)), 0, None, False, -1, 0, -1, 0,
                        None), codec=CompressionType.NONE)
def test_build_batch_round_trips_any_kafka_timestamp(spec: BatchSpec, codec: CompressionType) -> None:
    """Every timestamp Java's MemoryRecordsBuilder accepts (-1 or >= 0) survives a round trip: Java
    writes ``timestamp - baseTimestamp`` with long wrap-around and DefaultRecord adds it back the same way."""
    raw = spec.build(codec)
    assert DefaultRecordBatch(raw).records() == spec.expected_records()


@ROUND_TRIP
@given(ts=st.one_of(st.integers(INT64_MIN, -MAX_MS_AS_US - 1), st.integers(MAX_MS_AS_US + 1, INT64_MAX)),
       native=st.booleans())
@example(ts=2**62, native=True)  # 2**62 ms * 1000 wraps to exactly 0: 1970-01-01
def test_columnar_timestamp_outside_microsecond_range_is_not_silently_wrong(ts: int, native: bool) -> None:
    """A millisecond timestamp whose microseconds overflow int64 cannot be a timestamp[us]: the decoder
    must raise a KlogError (Spark's ``millisToMicros`` throws), not wrap it to another instant."""
    raw = build_batch([Record(0, ts, None, b"v")])
    assert DefaultRecordBatch(raw).records()[0].timestamp == ts
    try:
        rb = decode_batches([DefaultRecordBatch(raw)], native=native)
    except KlogError:
        return
    got = rb.column("timestamp").cast(pa.int64())[0].as_py()
    pytest.fail(f"timestamp {ts} ms decoded as {got} us ({got // 1000} ms) without an error")


# --- header keys that are not UTF-8 ----------------------------------------------------------------


def raw_record(offset_delta: int, key: bytes | None, value: bytes | None,
               headers: Sequence[tuple[bytes, bytes | None]]) -> bytes:
    """A record whose header keys are raw bytes (encode_record only takes str keys)."""
    def blob(b: bytes | None) -> bytes:
        return b"\x01" if b is None else encode_varint(len(b)) + b

    body = (b"\x00" + encode_varlong(0) + encode_varint(offset_delta) + blob(key) + blob(value)
            + encode_varint(len(headers)) + b"".join(encode_varint(len(k)) + k + blob(v) for k, v in headers))
    return encode_varint(len(body)) + body


def v2_with_area(area: bytes, count: int, attributes: int = 0, base_offset: int = 0, base_timestamp: int = 0,
                 max_timestamp: int = 0) -> bytes:
    """A v2 batch around a raw records area, with correct sizes and CRC-32C."""
    buf = bytearray(build_batch([], base_offset=base_offset)[:RECORD_BATCH_OVERHEAD]) + area
    struct.pack_into(">i", buf, SIZE_OFFSET, len(buf) - LOG_OVERHEAD)
    struct.pack_into(">h", buf, ATTRIBUTES_OFFSET, attributes)
    struct.pack_into(">qq", buf, BASE_TIMESTAMP_OFFSET, base_timestamp, max_timestamp)  # and max timestamp
    struct.pack_into(">i", buf, RECORDS_COUNT_OFFSET, count)
    return bytes(fix_v2_crc(buf))


RawRecord = tuple[bytes | None, bytes | None, list[tuple[bytes, bytes | None]]]


@ROUND_TRIP
@given(records=st.lists(st.tuples(nullable_bytes, nullable_bytes,
                                  st.lists(st.tuples(st.binary(max_size=6), nullable_bytes), max_size=3)),
                        min_size=1, max_size=5),
       codec=st.sampled_from(list(CompressionType)))
@example(records=[(None, None, [(b"\x80", None)])], codec=CompressionType.NONE)
@example(records=[(None, None, [(b"\xed\xa0\x80k", None), (b"\xed\xa0", None)])], codec=CompressionType.NONE)
def test_header_keys_that_are_not_utf8(records: list[RawRecord], codec: CompressionType) -> None:
    """Kafka decodes a header key with ``new String(bytes, UTF_8)`` (malformed input replaced); both
    columnar builders must give that string and a valid Arrow string column, as the per-record path does."""
    area = b"".join(raw_record(i, k, v, hs) for i, (k, v, hs) in enumerate(records))
    raw = v2_with_area(compress(codec, area), len(records), attributes=int(codec))
    # Java's replacement, not Python's: an encoded surrogate (ED A0 80) is one U+FFFD in Java, three in Python
    expected = [[{"key": java_utf8(k), "value": v} for k, v in hs] or None for _, _, hs in records]
    per_record = DefaultRecordBatch(raw).records()
    assert [headers_cell(r.headers) for r in per_record] == expected
    for native in (True, False):
        rb = decode_batches([DefaultRecordBatch(raw)], include_headers=True, native=native)
        rb.validate(full=True)
        assert rb.column("headers").to_pylist() == expected, f"native={native}"


# --- encode_arrow ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    key: bytes | None
    value: bytes | None
    headers: list[dict[str, Any]] | None
    timestamp: int


rows_st = st.lists(st.builds(Row, nullable_bytes, nullable_bytes,
                             st.none() | st.lists(st.fixed_dictionaries({"key": header_keys, "value": nullable_bytes}),
                                                  max_size=3),
                             timestamps), max_size=30)


def arrow_table(rows: Sequence[Row], ts_type: pa.DataType) -> pa.Table:
    ts = pa.array([r.timestamp for r in rows], pa.int64())
    return pa.table({
        "key": pa.array([r.key for r in rows], pa.binary()),
        "value": pa.array([r.value for r in rows], pa.binary()),
        "headers": pa.array([r.headers for r in rows], HEADER_TYPE),
        "timestamp": ts if ts_type == pa.int64() else ts.cast(ts_type),
    })


def decode_raw(raw: Sequence[bytes], native: bool) -> pa.RecordBatch:
    rb = decode_batches([b for r in raw for b in iter_batches(r)], include_headers=True, native=native)
    rb.validate(full=True)
    return rb


@ROUND_TRIP
@given(rows=rows_st, base_offset=st.integers(0, 2**60), codec=st.sampled_from(list(CompressionType)),
       max_batch_bytes=st.integers(1, 3000),
       ts_type=st.sampled_from([pa.int64(), pa.timestamp("ms", tz="UTC"), pa.timestamp("ms")]))
def test_encode_arrow_round_trips(rows: list[Row], base_offset: int, codec: CompressionType, max_batch_bytes: int,
                                  ts_type: pa.DataType) -> None:
    table = arrow_table(rows, ts_type)
    kw: dict[str, Any] = {"base_offset": base_offset, "compression": codec, "max_batch_bytes": max_batch_bytes}
    raw = encode_arrow(table, native=True, **kw)
    assert encode_arrow(table, native=False, **kw) == raw
    assert sum(DefaultRecordBatch(b).records_count for b in raw) == len(rows)
    expected = [
        {"key": r.key, "value": r.value, "topic": "", "partition": 0, "offset": base_offset + i,
         "timestamp": as_datetime(r.timestamp), "timestampType": 0, "headers": r.headers or None}
        for i, r in enumerate(rows)
    ]
    for native in (True, False):
        assert decode_raw(raw, native).to_pylist() == expected, f"native={native}"
    for b in raw:
        batch = DefaultRecordBatch(b)
        batch.ensure_valid()
        assert batch.compression == codec
        if batch.records_count > 1:  # a batch is cut before the record that would pass the bound
            assert RECORD_BATCH_OVERHEAD + len(batch.records_payload()) <= max_batch_bytes


@ROUND_TRIP
@given(ts=st.lists(st.integers(INT64_MIN, INT64_MAX), min_size=1, max_size=4))
@example(ts=[1, INT64_MIN])
def test_encode_arrow_any_int64_timestamp(ts: list[int]) -> None:
    """Both encoders agree on any int64 millisecond column, and what they write decodes back
    (Java Kafka writes timestamp deltas with long wrap-around)."""
    table = pa.table({"value": pa.array([b"v"] * len(ts)), "timestamp": pa.array(ts, pa.int64())})
    outcomes: dict[bool, Any] = {}
    for native in (True, False):
        try:
            outcomes[native] = encode_arrow(table, native=native)
        except KlogError as exc:
            outcomes[native] = type(exc)
    assert outcomes[True] == outcomes[False]
    if isinstance(outcomes[True], list):
        assert [r.timestamp for b in outcomes[True] for r in DefaultRecordBatch(b).records()] == ts


@ROUND_TRIP
@given(us=st.lists(st.integers(TS_MIN * 1000, TS_MAX * 1000), min_size=1, max_size=5), native=st.booleans())
@example(us=[-1], native=True)
def test_encode_arrow_sub_millisecond_timestamps(us: list[int], native: bool) -> None:
    """timestamp[us] with sub-millisecond parts: encoded as Spark's ``microsToMillis`` does
    (``Math.floorDiv``), so that an instant is never moved later; or refused with a KlogError."""
    table = pa.table({"value": pa.array([b"v"] * len(us)),
                      "timestamp": pa.array(us, pa.int64()).cast(pa.timestamp("us", tz="UTC"))})
    try:
        raw = encode_arrow(table, native=native)
    except KlogError:
        return
    got = [r.timestamp for b in raw for r in DefaultRecordBatch(b).records()]
    assert got == [u // 1000 for u in us]


# --- fuzzing the readers ---------------------------------------------------------------------------


def fix_v2_crc(buf: bytearray) -> bytearray:
    if len(buf) >= ATTRIBUTES_OFFSET:
        struct.pack_into(">I", buf, CRC_OFFSET, crc32c(bytes(buf[ATTRIBUTES_OFFSET:])))
    return buf


def fix_legacy_crc(buf: bytearray) -> bytearray:
    if len(buf) >= MAGIC_OFFSET:
        struct.pack_into(">I", buf, LOG_OVERHEAD, zlib.crc32(bytes(buf[MAGIC_OFFSET:])) & 0xFFFFFFFF)
    return buf


def fix_crc(buf: bytearray) -> bytearray:
    """Make a batch's checksum right again (whatever its magic byte now says)."""
    if len(buf) > MAGIC_OFFSET and buf[MAGIC_OFFSET] < 2:
        return fix_legacy_crc(buf)
    return fix_v2_crc(buf)


def legacy_entry(offset: int, magic: int, attributes: int, key: bytes | None, value: bytes | None,
                 timestamp: int) -> bytes:
    msg = struct.pack(">bb", magic, attributes) + (struct.pack(">q", timestamp) if magic == 1 else b"")
    for field in (key, value):
        msg += struct.pack(">i", -1) if field is None else struct.pack(">i", len(field)) + field
    return bytes(fix_legacy_crc(bytearray(struct.pack(">qiI", offset, 4 + len(msg), 0) + msg)))


small_bytes = st.none() | st.binary(max_size=12)
small_ts = st.integers(-1, 2**42)


@st.composite
def legacy_batches(draw: st.DrawFn) -> bytes:
    magic = draw(st.sampled_from([0, 1]))
    ts_flag = draw(st.sampled_from([0, 8])) if magic == 1 else 0
    codec = draw(st.sampled_from([CompressionType.NONE, CompressionType.GZIP, CompressionType.SNAPPY,
                                  CompressionType.LZ4]))
    if codec == CompressionType.NONE:
        return legacy_entry(draw(st.integers(0, 2**40)), magic, ts_flag, draw(small_bytes), draw(small_bytes),
                            draw(small_ts))
    n = draw(st.integers(1, 4))
    inner = b"".join(legacy_entry(i, magic, 0, draw(small_bytes), draw(small_bytes), draw(small_ts)) for i in range(n))
    return legacy_entry(draw(st.integers(n - 1, 2**40)), magic, int(codec) | ts_flag, None,
                        compress(codec, inner), draw(small_ts))


@st.composite
def v2_batches(draw: st.DrawFn) -> bytes:
    if draw(st.integers(0, 9)) == 0:
        marker = EndTransactionMarker(draw(st.sampled_from([ControlRecordType.ABORT, ControlRecordType.COMMIT])), 3)
        return build_end_txn_marker(draw(st.integers(0, 2**40)), draw(small_ts), 0, 7, 0, marker)
    spec = draw(batch_specs(max_records=4))
    return spec.build(draw(st.sampled_from(list(CompressionType))))


valid_batches = st.one_of(v2_batches(), legacy_batches())


@st.composite
def mutated_files(draw: st.DrawFn) -> bytes:
    """Valid batches with a few bytes changed (checksums made right again or not), maybe truncated."""
    batches = [bytearray(b) for b in draw(st.lists(valid_batches, min_size=1, max_size=3))]
    for _ in range(draw(st.integers(0, 4))):
        target = batches[draw(st.integers(0, len(batches) - 1))]
        target[draw(st.integers(0, len(target) - 1))] = draw(st.integers(0, 255))
    if draw(st.booleans()):
        batches = [fix_crc(b) for b in batches]
    data = b"".join(batches)
    if draw(st.booleans()):
        data = data[:draw(st.integers(0, len(data)))]
    return data


LONG_VARINT = b"\xff\xff\xff\xff\xff\x01"
tokens = st.one_of(
    st.integers(-(2**31), INT32_MAX).map(encode_varint),
    st.integers(-3, 40).map(encode_varint),
    st.integers(INT64_MIN, INT64_MAX).map(encode_varlong),
    st.binary(max_size=6),
    st.just(LONG_VARINT),
)


@st.composite
def record_like(draw: st.DrawFn) -> bytes:
    kind = draw(st.integers(0, 3))
    if kind == 0:  # a well-formed record
        return encode_record(draw(st.integers(0, 100)), draw(st.integers(-(2**40), 2**40)), draw(small_bytes),
                             draw(small_bytes), draw(st.lists(st.builds(Header, st.text(max_size=4), small_bytes),
                                                              max_size=2)))
    if kind == 1:  # well-formed but for header keys of arbitrary bytes
        return raw_record(draw(st.integers(0, 100)), draw(small_bytes), draw(small_bytes),
                          draw(st.lists(st.tuples(st.binary(max_size=4), small_bytes), max_size=2)))
    body = b"".join(draw(st.lists(tokens, max_size=10)))
    if kind == 2:  # a length prefix that matches a body of random fields
        return encode_varint(len(body)) + body
    return body


@st.composite
def forged_batches(draw: st.DrawFn) -> bytes:
    """A v2 header with right sizes and CRC around a records area of random (mostly record-like) bytes."""
    records = draw(st.lists(record_like(), max_size=5))
    codec = draw(st.sampled_from(list(CompressionType)))
    attributes = draw(st.integers(0, 0x7F).map(lambda a: (a & ~7) | int(codec)) | st.integers(-(2**15), 2**15 - 1))
    area = b"".join(records)
    if 0 <= attributes & 7 <= 4:
        area = compress(CompressionType(attributes & 7), area)
    count = len(records) + draw(st.sampled_from([0, 0, 0, -1, 1]) | st.integers(-(2**31), INT32_MAX))
    count = max(-(2**31), min(INT32_MAX, count))
    return v2_with_area(area, count, attributes, draw(st.integers(0, 2**40)), draw(st.integers(-1, 2**42)),
                        draw(st.integers(-1, 2**42)))


fuzz_files = st.one_of(
    st.binary(max_size=300),
    mutated_files(),
    st.lists(forged_batches(), min_size=1, max_size=3).map(b"".join),
    st.tuples(valid_batches, forged_batches(), valid_batches).map(b"".join),
)


# -- running the readers, recording outcomes


@dataclass(frozen=True)
class Failure:
    kind: type[KlogError]
    position: int | None


def failure(exc: KlogError) -> Failure:
    return Failure(type(exc), exc.position)


def only_klog_errors(fn: Callable[[], Any]) -> Any:
    """``fn()``, or a Failure for a KlogError; any other exception fails the test."""
    try:
        return fn()
    except KlogError as exc:
        return failure(exc)
    except Exception as exc:  # noqa: BLE001 - the property: nothing but a KlogError escapes
        pytest.fail(f"raised {type(exc).__module__}.{type(exc).__qualname__}, not a KlogError: {exc!r}")


@dataclass
class Walked:
    batches: list[AnyBatch]
    error: Failure | None
    valid_bytes: int
    partial_tail: Any

    def shape(self) -> tuple[Any, ...]:
        return ([(b.position, bytes(b.buffer)) for b in self.batches], self.error, self.valid_bytes,
                self.partial_tail)


def walk_all(walk: BatchWalk) -> Walked:
    batches: list[AnyBatch] = []

    def run() -> None:
        for b in walk:
            batches.append(b)

    outcome = only_klog_errors(run)
    return Walked(batches, outcome if isinstance(outcome, Failure) else None, walk.valid_bytes, walk.partial_tail)


RowKey = tuple[Any, ...]


def comparable_ts(ms: int) -> int | None:
    """Microseconds, or None where they do not fit an int64 (such a row cannot be a timestamp[us])."""
    return ms * 1000 if -MAX_MS_AS_US <= ms <= MAX_MS_AS_US else None


def per_record_rows(batch: AnyBatch) -> list[RowKey] | Failure:
    """The per-record path on one batch, as rows comparable with the columnar output (which checks
    the CRC of a control batch but skips its records, as consumers do)."""
    def run() -> list[RowKey]:
        batch.ensure_valid()
        if batch.is_control:
            return []
        ts_type = int(batch.timestamp_type)
        return [(r.offset, comparable_ts(r.timestamp), r.key, r.value, headers_cell(r.headers), ts_type)
                for r in batch.records()]

    outcome: list[RowKey] | Failure = only_klog_errors(run)
    return outcome


def unrepresentable(rows: list[RowKey] | Failure) -> bool:
    """Rows the per-record path reads but that the columnar path must refuse (timestamp out of range)."""
    return isinstance(rows, list) and any(row[1] is None for row in rows)


def columnar_rows(rb: pa.RecordBatch) -> list[RowKey]:
    names = ("offset", "timestamp", "key", "value", "headers", "timestampType")
    cols = [rb.column(n).cast(pa.int64()) if n == "timestamp" else rb.column(n) for n in names]
    return list(zip(*(c.to_pylist() for c in cols), strict=True))


SENTINEL = build_batch([Record(1000, 5, b"sk", b"sv", (Header("h", None),)), Record(1001, 6, None, None)])


def decoded(rb: pa.RecordBatch) -> list[RowKey]:
    rb.validate(full=True)
    return columnar_rows(rb)


@pytest.fixture(scope="module")
def fuzz_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz") / "00000000000000000000.log"


def bulk_decoded(path: Path, chunk_bytes: int) -> Any:
    def run() -> list[RowKey]:
        dec = ArrowDecoder("", 0, include_headers=True, native=True)
        parts = list(decode_file_range(FileRecords(path), 0, None, dec, flush_rows=1, chunk_bytes=chunk_bytes))
        return [row for rb in [*parts, dec.finish()] for row in decoded(rb)]

    return only_klog_errors(run)


def check_decode_batches(path: Path, chunk_bytes: int, per_batch: list[list[RowKey] | Failure],
                         walk_error: Failure | None) -> None:
    """decode_batches is all or nothing; both builders agree with each other and with the per-record path."""
    whole: dict[bool, Any] = {}
    for native in (True, False):
        whole[native] = only_klog_errors(lambda native=native: decoded(decode_batches(
            FileRecords(path).batches(chunk_bytes=chunk_bytes), include_headers=True, native=native)))
    assert whole[True] == whole[False]
    # the bulk path (decode_file_range: the kernel's runs, the object path for the rest) gives the
    # same rows, or the same error at the same position
    assert bulk_decoded(path, chunk_bytes) == whole[True]
    columnar_ok = walk_error is None and not any(
        isinstance(rows, Failure) or unrepresentable(rows) for rows in per_batch)
    assert columnar_ok == (not isinstance(whole[True], Failure))
    if columnar_ok:
        assert whole[True] == [row for rows in per_batch if isinstance(rows, list) for row in rows]


def check_arrow_decoder(batches: list[AnyBatch], per_batch: list[list[RowKey] | Failure]) -> None:
    """ArrowDecoder batch by batch: a failing batch adds nothing, and decoding goes on after it.

    A batch with a timestamp that no timestamp[us] can hold may be refused by ``add`` or make
    ``finish`` fail; either way it is an error, never a wrong value."""
    kept: dict[bool, Any] = {}
    for native in (True, False):
        decoder = ArrowDecoder("t", 0, include_headers=True, native=native)
        outcomes = [only_klog_errors(lambda b=b, decoder=decoder: decoder.add(b)) for b in batches]
        decoder.add(DefaultRecordBatch(SENTINEL))
        kept[native] = (outcomes, only_klog_errors(lambda decoder=decoder: decoded(decoder.finish())))
    assert kept[True] == kept[False]
    outcomes, rows = kept[True]
    expected: list[RowKey] = []
    finish_must_fail = False
    for outcome, record_rows in zip(outcomes, per_batch, strict=True):
        if unrepresentable(record_rows):
            finish_must_fail |= not isinstance(outcome, Failure)
            continue
        assert isinstance(outcome, Failure) == isinstance(record_rows, Failure)
        if isinstance(record_rows, list):
            expected += record_rows
    if finish_must_fail:
        assert isinstance(rows, Failure)
        return
    sentinel_rows = per_record_rows(DefaultRecordBatch(SENTINEL))
    assert isinstance(sentinel_rows, list)
    assert rows == expected + sentinel_rows


def check_dump(path: Path, batches: list[AnyBatch], per_batch: list[list[RowKey] | Failure],
               walk_error: Failure | None) -> None:
    """dump_jsonl never raises; it ends with an error line exactly where the per-record path (which
    for the dump includes the records and types of control batches) fails, at that position."""
    def dump_fails(batch: AnyBatch) -> bool:
        if not batch.is_control:
            return False
        return isinstance(only_klog_errors(lambda: [ControlRecordType.parse(r.key) for r in batch.records()]),
                          Failure)

    first_failure = next((b.position for b, rows in zip(batches, per_batch, strict=True)
                          if isinstance(rows, Failure) or dump_fails(b)), None)
    if first_failure is None and walk_error is not None:
        first_failure = walk_error.position
    out = io.StringIO()
    summary = only_klog_errors(lambda: dump_jsonl(path, out))
    assert not isinstance(summary, Failure), summary
    lines = out.getvalue().splitlines()
    last = json.loads(lines[-1]) if lines else {}
    if first_failure is None:
        assert summary.error is None
        assert "error" not in last
    else:
        assert summary.error is not None
        assert last == {"error": f"{summary.error.kafka_exception}: {summary.error.detail}",
                        "position": first_failure}


#: Found by this test: a v2 batch whose one record has a header key b"\x80" (not UTF-8).
NON_UTF8_HEADER_KEY = v2_with_area(raw_record(0, None, None, [(b"\x80", None)]), 1)
#: Found by this test: a size of 0 in a header cut by the chunk's end (the bulk path read on for the
#: rest of a batch that no size below the record overhead can make; the walk calls it corrupt).
ZERO_SIZE_AT_CHUNK_END = b"\x00" * 16 + b"\x02\x00"


@FUZZ
@given(data=fuzz_files, chunk_bytes=st.sampled_from([17, 61, 100, 4096, READ_CHUNK_BYTES]))
@example(data=NON_UTF8_HEADER_KEY, chunk_bytes=17)
@example(data=ZERO_SIZE_AT_CHUNK_END, chunk_bytes=17)
def test_readers_only_raise_klog_errors_and_agree(fuzz_path: Path, data: bytes, chunk_bytes: int) -> None:
    fuzz_path.write_bytes(data)
    # the walk: in memory and from the file (read in chunks of any size) find the same batches
    mem = walk_all(iter_batches(data, path=str(fuzz_path)))
    file = walk_all(FileRecords(fuzz_path).batches(chunk_bytes=chunk_bytes))
    assert file.shape() == mem.shape()

    per_batch = [per_record_rows(b) for b in file.batches]
    check_decode_batches(fuzz_path, chunk_bytes, per_batch, file.error)
    check_arrow_decoder(file.batches, per_batch)
    check_dump(fuzz_path, file.batches, per_batch, file.error)


@ROUND_TRIP
@given(rows=rows_st, data=st.data(), max_bytes=st.integers(-5, 3000),
       header=st.none() | st.tuples(st.integers(-(2**62), 2**62), st.integers(-(2**31), 2**31 - 1),
                                    st.integers(0, 2**15 - 1)))
def test_encode_v2_batches_kernel_is_its_python_twin(rows: list[Row], data: st.DataObject, max_bytes: int,
                                                     header: tuple[int, int, int] | None) -> None:
    """``_kernel.encode_v2_batches`` and ``_py_encode_v2_batches`` agree on any rows, row range,
    bound and header fields: same bytes, same (end row, first, max timestamp) per batch."""
    from storage_core.record import columnar as col

    cols = col.prepare_columns(arrow_table(rows, pa.int64()))
    start = data.draw(st.integers(0, len(rows)))
    stop = data.draw(st.integers(start, len(rows)))
    a, ma = col.encode_v2_batches(cols, start, stop, max_bytes, header, native=True)
    b, mb = col.encode_v2_batches(cols, start, stop, max_bytes, header, native=False)
    assert a == b and ma.tolist() == mb.tolist()
    if header is not None:
        for raw in a:
            DefaultRecordBatch(raw).ensure_valid()
