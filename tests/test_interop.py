"""Interop both ways with Kafka's own code and with kafka-python.

* Batches klog builds (every codec, headers, null keys/values, empty values, idempotent,
  transactional, control markers, LogAppendTime, a delete horizon, an empty batch) are accepted
  by Kafka's ``FileRecords`` (``ensureValid()`` and full decompression; kafka-clients 4.3.0) and
  decode there to exactly what klog decodes; kafka-python's ``validate_crc()`` accepts them too.
* Batches kafka-python builds, for every codec, decode in klog to what kafka-python put in.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatch as KpBatch
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from storage_core.record.columnar import decode_batches
from storage_core.record.compression import CompressionType
from storage_core.record.control import ControlRecordType, EndTransactionMarker
from storage_core.record.file_records import FileRecords, iter_batches
from storage_core.record.records import Header, Record, TimestampType, build_batch, build_end_txn_marker
from storage_core.tools.dump import dump_jsonl

pytestmark = pytest.mark.interop

T0 = 1_700_000_000_000


def sample_records(base: int, n: int) -> list[Record]:
    out = []
    for i in range(n):
        off = base + i
        key = None if i % 3 == 2 else f"key-{off}".encode()
        value = None if i % 5 == 4 else (b"" if i % 7 == 3 else f"value-{off}-".encode() + b"x" * (off % 50))
        headers = (Header(f"h{i}", f"hv{off}".encode()), Header("empty", b""), Header("null", None)) if i % 2 == 0 else ()
        out.append(Record(off, T0 + off * 10 - (5 if i == n - 1 else 0), key, value, headers))
    return out


def klog_segment(tmp_path: Path) -> tuple[Path, list[bytes]]:
    """One file holding every kind of batch klog can write."""
    batches: list[bytes] = []
    off = 0
    for codec in CompressionType:
        batches.append(build_batch(sample_records(off, 7), compression=codec, partition_leader_epoch=3))
        off += 7
    # idempotent
    batches.append(build_batch(sample_records(off, 3), producer_id=1000, producer_epoch=0, base_sequence=0,
                               compression=CompressionType.LZ4))
    off += 3
    # transaction committed, then one aborted
    batches.append(build_batch(sample_records(off, 4), producer_id=4242, producer_epoch=3, base_sequence=0,
                               is_transactional=True, compression=CompressionType.ZSTD))
    off += 4
    batches.append(build_end_txn_marker(off, T0 + 100, 5, 4242, 3, EndTransactionMarker(ControlRecordType.COMMIT, 17)))
    off += 1
    batches.append(build_batch(sample_records(off, 2), producer_id=4242, producer_epoch=3, base_sequence=4,
                               is_transactional=True, compression=CompressionType.SNAPPY))
    off += 2
    batches.append(build_end_txn_marker(off, T0 + 200, 5, 4242, 3, EndTransactionMarker(ControlRecordType.ABORT, 17)))
    off += 1
    # LogAppendTime, gzip
    batches.append(build_batch(sample_records(off, 3), compression=CompressionType.GZIP,
                               timestamp_type=TimestampType.LOG_APPEND_TIME, log_append_time=T0 + 999,
                               partition_leader_epoch=6))
    off += 3
    # compacted: offset gaps inside, last offset overridden, delete horizon set (a cleaned batch)
    gappy = [Record(off + 0, T0, b"k", b"v"), Record(off + 4, T0 + 1, b"k2", None)]
    batches.append(build_batch(gappy, last_offset=off + 6, delete_horizon_ms=T0 + 86_400_000))
    off += 7
    # an empty batch (what the cleaner keeps for producer state)
    batches.append(build_batch([], base_offset=off, last_offset=off + 1, producer_id=7, producer_epoch=1))
    off += 2
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(b"".join(batches))
    return path, batches


@pytest.fixture(scope="module")
def oracle() -> object:
    import kafka_oracle

    reason = kafka_oracle.oracle_available()
    if reason is not None:
        pytest.skip(reason)
    return kafka_oracle


def test_kafka_accepts_and_decodes_klog_batches(tmp_path: Path, oracle: object) -> None:
    path, batches = klog_segment(tmp_path)
    result = oracle.kafka_dump([path])[str(path)]  # type: ignore[attr-defined]
    assert result.error is None, result.error
    assert result.valid_bytes == path.stat().st_size
    out = io.StringIO()
    summary = dump_jsonl(path, out)
    assert summary.error is None
    assert list(result.lines) == out.getvalue().splitlines()
    assert len(result.lines) == sum(max(1, len(list(b.records()))) for b in FileRecords(path).batches())


def test_kafka_sees_the_records_klog_wrote(tmp_path: Path, oracle: object) -> None:
    import base64
    import json

    recs = sample_records(0, 50)
    path = tmp_path / "x.log"
    path.write_bytes(b"".join(build_batch(recs[i:i + 10], compression=c)
                              for i, c in zip(range(0, 50, 10), CompressionType, strict=True)))
    lines = [json.loads(x) for x in oracle.kafka_dump([path])[str(path)].lines]  # type: ignore[attr-defined]
    assert [x["offset"] for x in lines] == [r.offset for r in recs]
    assert [x["timestamp"] for x in lines] == [r.timestamp for r in recs]
    assert [x["key_b64"] for x in lines] == [None if r.key is None else base64.b64encode(r.key).decode() for r in recs]
    assert [x["value_b64"] for x in lines] == [None if r.value is None else base64.b64encode(r.value).decode()
                                              for r in recs]
    assert [x["headers"] for x in lines] == [
        [[h.key, None if h.value is None else base64.b64encode(h.value).decode()] for h in r.headers] for r in recs]
    assert [x["compression"] for x in lines[::10]] == [c.label for c in CompressionType]


def test_kafka_python_validates_klog_batches(tmp_path: Path) -> None:
    _path, batches = klog_segment(tmp_path)
    for raw in batches:
        mr = MemoryRecords(raw)
        kp = mr.next_batch()
        assert kp is not None
        assert kp.validate_crc(), f"kafka-python rejects the CRC of {kp}"
        ours = next(iter(iter_batches(raw)))
        if not ours.is_control:
            theirs = [(r.offset, r.timestamp, r.key, r.value, [(k, v) for k, v in r.headers]) for r in kp]
            mine = [(r.offset, r.timestamp, r.key, r.value, [(h.key, h.value) for h in r.headers])
                    for r in ours.records()]
            assert theirs == mine


KP_CODECS = {
    CompressionType.NONE: DefaultRecordBatchBuilder.CODEC_NONE,
    CompressionType.GZIP: DefaultRecordBatchBuilder.CODEC_GZIP,
    CompressionType.SNAPPY: DefaultRecordBatchBuilder.CODEC_SNAPPY,
    CompressionType.LZ4: DefaultRecordBatchBuilder.CODEC_LZ4,
    CompressionType.ZSTD: DefaultRecordBatchBuilder.CODEC_ZSTD,
}


@pytest.mark.parametrize("codec", list(CompressionType), ids=lambda c: c.label)
@pytest.mark.parametrize("native", [True, False], ids=["kernel", "python"])
def test_klog_decodes_kafka_python_batches(codec: CompressionType, native: bool) -> None:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=KP_CODECS[codec], is_transactional=False,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    expected = []
    for i, r in enumerate(sample_records(0, 40)):
        hdrs = [(h.key, h.value) for h in r.headers if h.value is not None]
        builder.append(i, timestamp=r.timestamp, key=r.key, value=r.value, headers=hdrs)
        expected.append((i, r.timestamp, r.key, r.value, hdrs))
    raw = bytes(builder.build())
    (batch,) = list(iter_batches(raw))
    batch.ensure_valid()
    assert batch.compression == codec
    assert [(r.offset, r.timestamp, r.key, r.value, [(h.key, h.value) for h in r.headers])
            for r in batch.records()] == expected
    table = decode_batches([batch], "t", 0, include_headers=True, native=native)
    got = [(row["offset"], int(row["timestamp"].timestamp() * 1000), row["key"], row["value"],
            [(h["key"], h["value"]) for h in row["headers"] or []]) for row in table.to_pylist()]
    assert got == expected
    # kafka-python reads its own batch the same way (sanity of the oracle itself)
    assert KpBatch(bytearray(raw)).validate_crc()
