"""Bad bytes on disk: every kind of damage ends in one exact, located ``KlogError``.

Each case is one bad batch written to a real file between two good batches (so that the error
position is not 0 and the reader must stop at the bad batch, not at the end of the file). The file
is then read five ways:

* ``records``: ``FileRecords(path).batches()``, then ``ensure_valid()`` and ``records()`` per batch;
* ``columnar-native`` / ``columnar-python``: ``decode_batches(...)`` with the C kernel's builder and
  with its pure-Python twin;
* ``columnar-bulk``: ``decode_file_range``, the kernel's bulk path every Spark read takes (it hands
  each batch it cannot take to the object path, which must raise the same error);
* ``dump``: ``dump_jsonl``, which must end its output with ``{"error": ..., "position": N}``.

Each way must raise (or, for dump, report) the exact error class of the case, located at the file
and the byte position of the bad batch; nothing else may escape (no bare ``struct.error``,
``IndexError``, ``ValueError``, ...), and absurd sizes and counts must fail fast without allocating.

v2 batches are corrupted past byte 21 and then get a correct CRC-32C again, so that the record
parser is what is exercised, not the CRC check; legacy messages likewise get a correct CRC-32.
"""

from __future__ import annotations

import io
import json
import struct
import time
import tracemalloc
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import pytest

from storage_core.errors import (
    CompressionError,
    CorruptRecordError,
    InvalidRecordError,
    KlogError,
    UnsupportedCodecError,
)
from storage_core.record.columnar import ArrowDecoder, decode_batches
from storage_core.record.compression import LZ4_FRAME_MAGIC, XERIAL_MAGIC, CompressionType, compress
from storage_core.record.file_records import BatchWalk, FileRecords, iter_batches
from storage_core.record.records import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    RECORD_BATCH_OVERHEAD,
    RECORDS_COUNT_OFFSET,
    SIZE_OFFSET,
    Header,
    Record,
    build_batch,
    crc32c,
)
from storage_core.record.scan import decode_file_range
from storage_core.record.varint import encode_varint
from storage_core.tools.dump import DumpSummary, dump_jsonl

T0 = 1_700_000_000_000
INT32_MAX = (1 << 31) - 1
INT32_MIN = -(1 << 31)

#: Bounds for "fails fast": wall-clock seconds and bytes of Python-allocator peak per read.
MAX_SECONDS = 60.0  # a hang guard, not a speed test: CI on a loaded 2-core machine took 5.6 s once
MAX_PEAK_BYTES = 32 << 20

# --- building good and bad bytes -------------------------------------------------------------


def good_records(base: int, n: int) -> list[Record]:
    return [
        Record(base + i, T0 + i, f"k{base + i}".encode(), f"value-{base + i}".encode(),
               (Header("h", b"hv"), Header("n", None)) if i % 2 == 0 else ())
        for i in range(n)
    ]


#: The good batch in front of every bad one (its size is the bad batch's position).
PREFIX = build_batch(good_records(0, 3))
PREFIX_RECORDS = 3
#: A good batch after the bad one: a reader must not get to it.
SUFFIX = build_batch(good_records(100, 2))


def fix_crc(buf: bytearray) -> bytearray:
    """Recompute a v2 batch's CRC-32C (bytes 21..end, stored big-endian at 17)."""
    struct.pack_into(">I", buf, CRC_OFFSET, crc32c(bytes(buf[ATTRIBUTES_OFFSET:])))
    return buf


def fix_legacy_crc(buf: bytearray) -> bytearray:
    """Recompute a legacy entry's CRC-32 (message bytes from magic to end, stored at entry offset 12)."""
    struct.pack_into(">I", buf, LOG_OVERHEAD, zlib.crc32(bytes(buf[MAGIC_OFFSET:])) & 0xFFFFFFFF)
    return buf


def valid_v2(codec: CompressionType = CompressionType.NONE, n: int = 2) -> bytearray:
    return bytearray(build_batch(good_records(10, n), compression=codec))


def v2_with_area(area: bytes, count: int, *, codec_id: int = 0) -> bytes:
    """A v2 batch (offset 10) whose records area is ``area`` as given, with a correct CRC."""
    buf = bytearray(valid_v2()[:RECORD_BATCH_OVERHEAD]) + area
    struct.pack_into(">i", buf, SIZE_OFFSET, len(buf) - LOG_OVERHEAD)
    struct.pack_into(">h", buf, ATTRIBUTES_OFFSET, codec_id)
    struct.pack_into(">i", buf, RECORDS_COUNT_OFFSET, count)
    return bytes(fix_crc(buf))


def patched_v2(fmt: str, at: int, value: int, *, crc: bool = True, batch: bytearray | None = None) -> bytes:
    buf = valid_v2() if batch is None else batch
    struct.pack_into(fmt, buf, at, value)
    return bytes(fix_crc(buf) if crc else buf)


def vi(n: int) -> bytes:
    return encode_varint(n)


def rec(body: bytes, length: int | None = None) -> bytes:
    """A record: length varint (the body's real length unless given) and body."""
    return vi(len(body) if length is None else length) + body


def body(*, ts: bytes = b"\x00", off: bytes = b"\x00", key: bytes = b"\x01", value: bytes = b"\x02v",
         headers: bytes = b"\x00") -> bytes:
    """A record body from raw pieces; defaults: delta 0, null key, value b"v", no headers."""
    return b"\x00" + ts + off + key + value + headers


#: A varint with the continuation bit set in all of its first five bytes (Kafka: "too long").
LONG_VARINT = b"\xff\xff\xff\xff\xff\x01"
#: The same for a varlong: ten bytes with the continuation bit.
LONG_VARLONG = b"\xff" * 10 + b"\x01"

GOOD_BODY = body()


def legacy(offset: int, magic: int, attributes: int, key: bytes | None, value: bytes | None,
           timestamp: int = T0) -> bytes:
    """One v0/v1 log entry with a correct CRC-32."""
    msg = struct.pack(">bb", magic, attributes)
    if magic == 1:
        msg += struct.pack(">q", timestamp)
    for field in (key, value):
        msg += struct.pack(">i", -1) if field is None else struct.pack(">i", len(field)) + field
    entry = bytearray(struct.pack(">qiI", offset, 4 + len(msg), 0) + msg)
    return bytes(fix_legacy_crc(entry))


def wrapper(magic: int, codec: CompressionType, inner: bytes, offset: int = 12,
            codec_id: int | None = None) -> bytes:
    """A compressed v0/v1 wrapper around ``inner``; ``codec_id`` overrides the codec bits."""
    return legacy(offset, magic, int(codec) if codec_id is None else codec_id, None, compress(codec, inner))


def inner_set(magic: int, n: int = 3, attributes: int = 0) -> bytes:
    return b"".join(legacy(i, magic, attributes, b"k", f"v{i}".encode()) for i in range(n))


def corrupt_byte(entry: bytes, at: int) -> bytes:
    buf = bytearray(entry)
    buf[at] ^= 0x5A
    return bytes(buf)


def truncated_payload(codec: CompressionType) -> bytes:
    full = valid_v2(codec, n=20)
    return v2_with_area(bytes(full[RECORD_BATCH_OVERHEAD:-7]), 20, codec_id=int(codec))


# --- the cases -------------------------------------------------------------------------------


READERS = ("records", "columnar-native", "columnar-python", "columnar-bulk", "dump")


@dataclass(frozen=True)
class Case:
    id: str
    bad: bytes
    expected: type[KlogError]
    readers: tuple[str, ...] = READERS  # the readers that interpret the bad part
    exact: bool = True  # the error is exactly ``expected``, not a subclass


GARBAGE = b"this is not a compressed payload, not at all" * 3


def cases() -> list[Case]:
    out: list[Case] = []

    def add(id_: str, bad: bytes, expected: type[KlogError], readers: tuple[str, ...] = READERS,
            exact: bool = True) -> None:
        out.append(Case(id_, bad, expected, readers, exact))

    # -- the walk: size field
    for size in (13, 0, -1, INT32_MIN):
        add(f"size-{size}", patched_v2(">i", SIZE_OFFSET, size, crc=False), CorruptRecordError)
    # sizes that the walk accepts but that are too small for the magic's header
    small = bytearray(valid_v2()[:LOG_OVERHEAD + 40])
    struct.pack_into(">i", small, SIZE_OFFSET, 40)
    add("v2-size-40-below-overhead", bytes(small), CorruptRecordError)
    v1_short = bytearray(legacy(5, 1, 0, None, b"v")[:LOG_OVERHEAD + 18])
    struct.pack_into(">i", v1_short, SIZE_OFFSET, 18)
    add("v1-size-18-below-overhead", bytes(v1_short), CorruptRecordError)

    # -- checksums
    add("v2-wrong-crc", corrupt_byte(bytes(valid_v2()), len(valid_v2()) - 3), CorruptRecordError)
    add("v2-wrong-crc-field", patched_v2(">I", CRC_OFFSET, 1, crc=False), CorruptRecordError)
    for magic in (0, 1):
        entry = legacy(7, magic, 0, b"key", b"value")
        add(f"v{magic}-wrong-crc", corrupt_byte(entry, len(entry) - 2), CorruptRecordError)

    # -- magic (outside the v2 CRC)
    for magic in (3, 7, -1):
        add(f"magic-{magic}", patched_v2(">b", MAGIC_OFFSET, magic, crc=False), CorruptRecordError)

    # -- record count
    add("count-minus-1", patched_v2(">i", RECORDS_COUNT_OFFSET, -1), InvalidRecordError)
    add("count-int32-min", patched_v2(">i", RECORDS_COUNT_OFFSET, INT32_MIN), InvalidRecordError)
    add("count-int32-max", patched_v2(">i", RECORDS_COUNT_OFFSET, INT32_MAX), InvalidRecordError)
    add("count-one-too-many", patched_v2(">i", RECORDS_COUNT_OFFSET, 3), InvalidRecordError)
    add("count-int32-max-gzip", patched_v2(">i", RECORDS_COUNT_OFFSET, INT32_MAX, batch=valid_v2(CompressionType.GZIP)),
        InvalidRecordError)
    add("records-remaining-after-count", patched_v2(">i", RECORDS_COUNT_OFFSET, 1), InvalidRecordError)
    add("trailing-byte-after-records", v2_with_area(rec(GOOD_BODY) + b"\x00", 1), InvalidRecordError)

    # -- record length
    add("record-length-minus-1", v2_with_area(rec(GOOD_BODY, -1) + GOOD_BODY, 1), InvalidRecordError)
    add("record-length-int32-min", v2_with_area(rec(GOOD_BODY, INT32_MIN) + GOOD_BODY, 1), InvalidRecordError)
    add("record-length-int32-max", v2_with_area(rec(GOOD_BODY, INT32_MAX) + GOOD_BODY, 1), InvalidRecordError)
    add("record-length-past-area", v2_with_area(rec(GOOD_BODY, len(GOOD_BODY) + 1) + GOOD_BODY, 1),
        InvalidRecordError)
    add("record-length-longer-than-fields", v2_with_area(rec(GOOD_BODY + b"\x00"), 1), InvalidRecordError)
    add("record-length-shorter-than-fields", v2_with_area(rec(GOOD_BODY, len(GOOD_BODY) - 1) + b"\x00", 1),
        InvalidRecordError)
    add("record-length-zero", v2_with_area(rec(b"", 0), 1), InvalidRecordError)
    add("record-area-ends-in-varint", v2_with_area(b"\x80", 1), InvalidRecordError)

    # -- key / value lengths
    add("key-length-past-record", v2_with_area(rec(body(key=vi(100) + b"abc")), 1), InvalidRecordError)
    add("key-length-int32-max", v2_with_area(rec(body(key=vi(INT32_MAX) + b"abc")), 1), InvalidRecordError)
    add("value-length-past-record", v2_with_area(rec(body(value=vi(50) + b"v")), 1), InvalidRecordError)
    add("value-length-int32-max", v2_with_area(rec(body(value=vi(INT32_MAX) + b"v")), 1), InvalidRecordError)
    add("value-length-one-past-record", v2_with_area(rec(body(value=vi(2) + b"v")), 1), InvalidRecordError)

    # -- too-long varints
    add("too-long-varint-record-length", v2_with_area(LONG_VARINT + GOOD_BODY, 1), InvalidRecordError)
    add("too-long-varlong-timestamp-delta", v2_with_area(rec(body(ts=LONG_VARLONG)), 1), InvalidRecordError)
    add("too-long-varint-offset-delta", v2_with_area(rec(body(off=LONG_VARINT)), 1), InvalidRecordError)
    add("too-long-varint-key-length", v2_with_area(rec(body(key=LONG_VARINT)), 1), InvalidRecordError)
    add("too-long-varint-value-length", v2_with_area(rec(body(value=LONG_VARINT)), 1), InvalidRecordError)
    add("too-long-varint-header-count", v2_with_area(rec(body(headers=LONG_VARINT)), 1), InvalidRecordError)
    add("too-long-varint-header-key-length", v2_with_area(rec(body(headers=vi(1) + LONG_VARINT + b"\x00")), 1),
        InvalidRecordError)

    # -- headers
    add("header-count-minus-1", v2_with_area(rec(body(headers=vi(-1))), 1), InvalidRecordError)
    add("header-count-int32-max", v2_with_area(rec(body(headers=vi(INT32_MAX))), 1), InvalidRecordError)
    add("header-count-one-too-many", v2_with_area(rec(body(headers=vi(2) + vi(1) + b"h" + vi(-1))), 1),
        InvalidRecordError)
    add("header-key-length-minus-1", v2_with_area(rec(body(headers=vi(1) + vi(-1) + vi(-1))), 1),
        InvalidRecordError)
    add("header-key-length-past-record", v2_with_area(rec(body(headers=vi(1) + vi(30) + b"h" + vi(-1))), 1),
        InvalidRecordError)
    add("header-value-length-past-record", v2_with_area(rec(body(headers=vi(1) + vi(1) + b"h" + vi(30) + b"x")), 1),
        InvalidRecordError)

    # -- codecs (v2)
    for codec in (CompressionType.GZIP, CompressionType.SNAPPY, CompressionType.LZ4, CompressionType.ZSTD):
        add(f"garbage-{codec.label}", v2_with_area(GARBAGE, 1, codec_id=int(codec)), CompressionError)
        add(f"truncated-{codec.label}", truncated_payload(codec), CompressionError)
    # garbage behind each codec's own magic, so that the decoder itself has to reject it
    add("garbage-after-magic-gzip", v2_with_area(b"\x1f\x8b\x08\x00" + GARBAGE, 1, codec_id=1), CompressionError)
    add("garbage-after-magic-snappy", v2_with_area(XERIAL_MAGIC + struct.pack(">iii", 1, 1, len(GARBAGE)) + GARBAGE, 1,
                                                   codec_id=2), CompressionError)
    add("garbage-after-magic-lz4", v2_with_area(LZ4_FRAME_MAGIC + b"\x60\x40\x82" + GARBAGE, 1, codec_id=3),
        CompressionError)
    add("garbage-after-magic-zstd", v2_with_area(b"\x28\xb5\x2f\xfd" + GARBAGE, 1, codec_id=4), CompressionError)
    for codec_id in (5, 6, 7):
        add(f"v2-codec-{codec_id}", v2_with_area(rec(GOOD_BODY), 1, codec_id=codec_id), UnsupportedCodecError)

    # -- legacy messages
    for magic in (0, 1):
        for codec_id in (5, 6, 7):
            add(f"v{magic}-codec-{codec_id}", wrapper(magic, CompressionType.GZIP, inner_set(magic), codec_id=codec_id),
                UnsupportedCodecError)
        inner = inner_set(magic)
        add(f"v{magic}-zstd", legacy(2, magic, int(CompressionType.ZSTD), None,
                                     compress(CompressionType.ZSTD, inner)), UnsupportedCodecError)
        add(f"v{magic}-wrapper-null-value", legacy(2, magic, int(CompressionType.GZIP), None, None),
            InvalidRecordError)
        add(f"v{magic}-inner-compressed", wrapper(magic, CompressionType.GZIP, inner_set(magic, attributes=1)),
            InvalidRecordError)
        add(f"v{magic}-inner-magic-mismatch", wrapper(magic, CompressionType.GZIP, inner_set(1 - magic)),
            InvalidRecordError)
        add(f"v{magic}-inner-empty", wrapper(magic, CompressionType.GZIP, b""), InvalidRecordError)
        add(f"v{magic}-inner-size-below-overhead", wrapper(magic, CompressionType.GZIP, struct.pack(">qi", 0, 3) + b"\x00" * 14),
            CorruptRecordError)
        for codec in (CompressionType.GZIP, CompressionType.SNAPPY, CompressionType.LZ4):
            add(f"v{magic}-garbage-{codec.label}", legacy(2, magic, int(codec), None, GARBAGE), CompressionError)
        key_length_at = LOG_OVERHEAD + (22 if magic == 1 else 14) - 8
        for name, length in (("past-message", 99), ("int32-max", INT32_MAX)):
            entry = bytearray(legacy(3, magic, 0, b"k" * 8, b"value"))
            struct.pack_into(">i", entry, key_length_at, length)
            add(f"v{magic}-key-length-{name}", bytes(fix_legacy_crc(entry)), InvalidRecordError)
        value_length_at = key_length_at + 4 + 8
        entry = bytearray(legacy(3, magic, 0, b"k" * 8, b"value"))
        struct.pack_into(">i", entry, value_length_at, 6)
        add(f"v{magic}-value-length-past-message", bytes(fix_legacy_crc(entry)), InvalidRecordError)
    add("v1-wrapper-offset-below-last-inner", wrapper(1, CompressionType.GZIP, inner_set(1, n=5), offset=2),
        InvalidRecordError)

    # -- control batch with a key too short for a control type (only the dump interprets it)
    control = bytearray(build_batch([Record(10, T0, b"\x00", b"\x00\x00\x00\x00\x00\x00")], is_control=True,
                                    is_transactional=True, producer_id=1, producer_epoch=0))
    add("control-key-too-short", bytes(control), InvalidRecordError, readers=("dump",))

    # -- a timestamp that Kafka reads but that no timestamp[us] column can hold (only the columnar
    #    readers refuse it; any KlogError will do, but located like every error about bytes)
    for ts in (2**62, -(2**62)):
        add(f"timestamp-{ts}-outside-microseconds", build_batch([Record(10, ts, None, b"v")]), KlogError,
            readers=("columnar-native", "columnar-python", "columnar-bulk"), exact=False)
    return out


CASES = cases()
CASE_READERS = [pytest.param(c, r, id=f"{c.id}-{r}") for c in CASES for r in c.readers]


# --- reading -----------------------------------------------------------------------------------


def check_bounds(elapsed: float, peak: int) -> None:
    assert elapsed < MAX_SECONDS, f"took {elapsed:.1f}s"
    assert peak < MAX_PEAK_BYTES, f"allocated {peak} bytes"


@contextmanager
def bounded() -> Iterator[None]:
    """Assert that a block that does not raise is quick and does not allocate much."""
    tracemalloc.start()
    start = time.perf_counter()
    try:
        yield
    finally:
        elapsed = time.perf_counter() - start
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    check_bounds(elapsed, peak)


def read_records(path: Path) -> int:
    n = 0
    for batch in FileRecords(path).batches():
        batch.ensure_valid()
        n += len(batch.records())
    return n


def read_columnar(path: Path, native: bool) -> int:
    rb = decode_batches(FileRecords(path).batches(), "t", 0, include_headers=True, native=native)
    return int(rb.num_rows)


def read_dump(path: Path) -> tuple[DumpSummary, list[str]]:
    out = io.StringIO()
    summary = dump_jsonl(path, out)
    return summary, out.getvalue().splitlines()


def read_bulk(path: Path) -> int:
    """The bulk path every Spark read takes: whole runs of batches per kernel call."""
    dec = ArrowDecoder("t", 0, include_headers=True, native=True)
    n = sum(rb.num_rows for rb in decode_file_range(FileRecords(path), 0, None, dec, flush_rows=1))
    return n + int(dec.finish().num_rows)


def run_reader(reader: str, path: Path) -> int:
    if reader == "records":
        return read_records(path)
    if reader == "columnar-bulk":
        return read_bulk(path)
    return read_columnar(path, native=reader == "columnar-native")


def capture(fn: Callable[[], object]) -> KlogError | None:
    """Run ``fn``; return the KlogError it raised, or None. Anything else fails the test, and so does
    taking long or allocating much (absurd sizes and counts must fail fast)."""
    error: KlogError | None = None
    tracemalloc.start()
    start = time.perf_counter()
    try:
        fn()
    except KlogError as exc:
        error = exc
    except Exception as exc:  # noqa: BLE001 - the point: nothing but a KlogError may escape
        pytest.fail(f"raised {type(exc).__module__}.{type(exc).__qualname__}, not a KlogError: {exc!r}")
    finally:
        elapsed = time.perf_counter() - start
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    check_bounds(elapsed, peak)
    return error


def assert_located(err: KlogError, path: Path, position: int) -> None:
    assert err.path == str(path)
    assert err.position == position
    text = str(err)
    assert str(path) in text
    assert f"position {position}" in text


# --- tests ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["prefix", "suffix", "valid-v2", "valid-v2-zstd", "legacy-v0", "legacy-v1",
                                  "v0-gzip-wrapper", "v1-snappy-wrapper", "v1-lz4-wrapper", "hand-made-record"])
def test_the_material_of_the_cases_is_good(name: str) -> None:
    """The batches the bad ones are made from are good: the cases fail for the damage alone."""
    data = {
        "prefix": PREFIX,
        "suffix": SUFFIX,
        "valid-v2": bytes(valid_v2()),
        "valid-v2-zstd": bytes(valid_v2(CompressionType.ZSTD, n=20)),
        "legacy-v0": legacy(1, 0, 0, b"k", b"v"),
        "legacy-v1": legacy(1, 1, 0, None, b"v"),
        "v0-gzip-wrapper": wrapper(0, CompressionType.GZIP, inner_set(0)),
        "v1-snappy-wrapper": wrapper(1, CompressionType.SNAPPY, inner_set(1)),
        "v1-lz4-wrapper": wrapper(1, CompressionType.LZ4, inner_set(1)),
        "hand-made-record": v2_with_area(rec(GOOD_BODY), 1),
    }[name]
    batches = list(iter_batches(data))
    assert len(batches) == 1
    batches[0].ensure_valid()
    assert batches[0].records()


def test_good_file_reads_every_way(tmp_path: Path) -> None:
    path = tmp_path / "good.log"
    path.write_bytes(PREFIX + SUFFIX)
    for reader in READERS[:4]:
        assert run_reader(reader, path) == 5, reader
    summary, lines = read_dump(path)
    assert summary.error is None
    assert len(lines) == 5
    assert all("error" not in json.loads(line) for line in lines)


@pytest.mark.parametrize(("case", "reader"), CASE_READERS)
def test_bad_batch(tmp_path: Path, case: Case, reader: str) -> None:
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(PREFIX + case.bad + SUFFIX)
    position = len(PREFIX)
    if reader == "dump":
        with bounded():
            summary, lines = read_dump(path)
        assert len(lines) == PREFIX_RECORDS + 1, lines  # the good batch, then the error line
        last = json.loads(lines[-1])
        assert set(last) == {"error", "position"}
        assert last["position"] == position
        error = summary.error
        assert error is not None
        assert type(error) is case.expected, f"{type(error).__name__}: {error}"
        assert last["error"] == f"{case.expected.kafka_exception}: {error.detail}"
        assert summary.valid_bytes == position
    else:
        error = capture(lambda: run_reader(reader, path))
        assert error is not None, f"{reader} read the bad batch without an error"
        if case.exact:
            assert type(error) is case.expected, f"{type(error).__name__}: {error}"
        assert isinstance(error, case.expected)
    assert_located(error, path, position)


@pytest.mark.parametrize("cut", [5, 16, 17, 40, RECORD_BATCH_OVERHEAD, -1])
@pytest.mark.parametrize("kind", ["v2", "v2-zstd", "v0", "v1"])
def test_truncated_last_batch_ends_the_data(tmp_path: Path, kind: str, cut: int) -> None:
    """A partial batch at the end of a file is the end of the data (Kafka's recovery cuts it), not an error."""
    whole = {
        "v2": bytes(valid_v2()),
        "v2-zstd": bytes(valid_v2(CompressionType.ZSTD)),
        "v0": legacy(5, 0, 0, b"key", b"value" * 20),
        "v1": legacy(5, 1, 0, b"key", b"value" * 20),
    }[kind]
    part = whole[:cut]
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(PREFIX + part)

    walk: BatchWalk = FileRecords(path).batches()
    assert [b.position for b in walk] == [0]
    assert walk.valid_bytes == len(PREFIX)
    tail = walk.partial_tail
    assert tail is not None
    assert tail.position == len(PREFIX)
    assert tail.size == len(part)
    assert tail.declared_size == (len(whole) if len(part) >= 17 else None)

    for reader in READERS[:3]:
        assert capture(partial(run_reader, reader, path)) is None, reader
        assert run_reader(reader, path) == PREFIX_RECORDS, reader

    summary, lines = read_dump(path)
    assert summary.error is None
    assert summary.valid_bytes == len(PREFIX)
    assert len(lines) == PREFIX_RECORDS
    assert all("error" not in json.loads(line) for line in lines)
