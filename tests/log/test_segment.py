"""LogSegment: append with Kafka's index rule, read, translate, find by time, truncate, recover, roll."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import shared_fixtures as sf

from storage_core.files import base_offset_of
from storage_core.log.segment import LogSegment, RollParams, scan_segment
from storage_core.record.columnar import encode_arrow
from storage_core.record.compression import CompressionType
from storage_core.record.file_records import iter_batches
from storage_core.record.records import Record, build_batch

T0 = 1_700_000_000_000


def fill(seg: LogSegment, base: int, batches: int, per_batch: int = 20, value_size: int = 60,
         codec: CompressionType = CompressionType.NONE) -> list[bytes]:
    out = []
    off = base
    for b in range(batches):
        recs = [Record(off + i, T0 + (off + i) * 10 - (7 if i == per_batch // 2 else 0), f"k{off + i}".encode(),
                       bytes([65 + (off + i) % 26]) * value_size) for i in range(per_batch)]
        raw = build_batch(recs, compression=codec)
        batch = next(iter(iter_batches(raw)))
        seg.append(batch.last_offset, batch.max_timestamp, batch.last_offset, raw)
        out.append(raw)
        off += per_batch
        del b
    return out


def test_append_builds_the_indexes_recovery_would(tmp_path: Path) -> None:
    seg = LogSegment(tmp_path, 100, writable=True, max_index_size=4096)
    fill(seg, 100, 120)
    seg.on_become_inactive_segment()
    oi = seg.offset_index.all_entries()
    ti = seg.time_index.all_entries()
    seg.close()
    scan = scan_segment(seg.log_path)
    assert oi == scan.offset_entries and len(oi) > 5
    assert ti == scan.time_entries
    assert (tmp_path / "00000000000000000100.index").stat().st_size == 8 * len(oi)  # trimmed


def test_read_translate_and_find_by_timestamp(tmp_path: Path) -> None:
    with LogSegment(tmp_path, 0, writable=True) as seg:
        raws = fill(seg, 0, 50)
    ro = LogSegment(tmp_path, 0)
    assert not ro.rebuilt_in_memory
    pos = ro.translate_offset(555)
    assert pos is not None and pos.offset == 559 and pos.position == sum(len(r) for r in raws[:27])
    assert ro.translate_offset(1000) is None
    fetched = ro.read(555, sum(len(r) for r in raws[27:30]) + 10)
    assert fetched is not None and fetched.records == b"".join(raws[27:30])
    assert ro.read(555, 1).records == raws[27]  # min one message
    found = ro.find_offset_by_timestamp(T0 + 4005)
    assert found is not None and found.offset == 401 and found.timestamp == T0 + 4010
    assert ro.find_offset_by_timestamp(T0 + 10**9) is None
    assert ro.read_next_offset() == 1000
    assert ro.max_timestamp_so_far.timestamp == T0 + 9990
    ro.close()


def test_read_only_never_writes_and_rebuilds_missing_index_in_memory(tmp_path: Path) -> None:
    with LogSegment(tmp_path, 0, writable=True) as seg:
        fill(seg, 0, 60)
    (tmp_path / "00000000000000000000.index").unlink()
    before = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in tmp_path.iterdir()}
    ro = LogSegment(tmp_path, 0)
    assert ro.translate_offset(700) is not None
    assert ro.rebuilt_in_memory
    ro.close()
    after = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in tmp_path.iterdir()}
    assert before == after


def test_truncate_to(tmp_path: Path) -> None:
    seg = LogSegment(tmp_path, 0, writable=True)
    raws = fill(seg, 0, 40)
    removed = seg.truncate_to(300)  # 300 is inside batch 15 (offsets 300..319): that batch goes
    assert removed == sum(len(r) for r in raws[15:])
    assert seg.read_next_offset() == 300
    assert all(e.offset < 300 for e in seg.offset_index.all_entries())
    fill(seg, 300, 5)
    seg.close()
    scan = scan_segment(seg.log_path)
    assert scan.error is None and scan.next_offset == 400


@pytest.mark.parametrize("cut", [1, 10, 61, 100])
def test_recover_truncates_a_torn_tail(tmp_path: Path, cut: int) -> None:
    with LogSegment(tmp_path, 0, writable=True) as seg:
        raws = fill(seg, 0, 30, codec=CompressionType.LZ4)
    log = tmp_path / "00000000000000000000.log"
    log.write_bytes(log.read_bytes()[:-cut])
    seg = LogSegment(tmp_path, 0, writable=True)
    truncated = seg.recover()
    assert truncated == len(raws[-1]) - cut
    assert seg.read_next_offset() == 29 * 20
    seg.close()
    assert scan_segment(log).error is None


def test_recover_stops_at_garbage(tmp_path: Path) -> None:
    with LogSegment(tmp_path, 0, writable=True) as seg:
        fill(seg, 0, 10)
    log = tmp_path / "00000000000000000000.log"
    good = log.stat().st_size
    with open(log, "ab") as f:
        f.write(b"\x00" * 8 + b"\x00\x00\x00\x05" + b"garbage-garbage")
    seg = LogSegment(tmp_path, 0, writable=True)
    assert seg.recover() == 27
    assert log.stat().st_size == good
    seg.close()


def test_roll_conditions(tmp_path: Path) -> None:
    seg = LogSegment(tmp_path, 0, writable=True, max_index_size=8 * 4)
    def params(**kw: int) -> RollParams:
        base = dict(max_segment_ms=1000, max_segment_bytes=10**9, max_timestamp_in_messages=T0,
                    max_offset_in_messages=1, messages_size=100, now_ms=T0)
        base.update(kw)
        return RollParams(**base)
    assert not seg.should_roll(params())
    fill(seg, 0, 1)
    assert seg.should_roll(params(max_segment_bytes=seg.size_in_bytes + 50))  # would not fit
    assert seg.should_roll(params(max_timestamp_in_messages=T0 + 10_000))  # record time passed segment.ms
    assert not seg.should_roll(params(max_timestamp_in_messages=T0 + 500))
    assert seg.should_roll(params(max_offset_in_messages=2**31))  # offset overflow
    seg.close()


@pytest.mark.skipif(not sf.available(), reason=sf.MISSING_REASON)
def test_broker_segments_open_read_only_unchanged() -> None:
    logs = sorted(p for p in sf.KAFKA_FIXTURES.rglob("*.log") if "captures" not in str(p) and "generated" not in str(p))
    assert logs
    for log in logs:
        before = hashlib.sha256(log.read_bytes()).hexdigest()
        seg = LogSegment(log.parent, base_offset_of(log))
        scan = scan_segment(log)
        assert seg.read_next_offset() == scan.next_offset
        seg.close()
        assert hashlib.sha256(log.read_bytes()).hexdigest() == before


def test_encode_arrow_batches_append(tmp_path: Path) -> None:
    import pyarrow as pa

    t = pa.table({"value": [b"v" * 50] * 500, "timestamp": pa.array([T0 + i for i in range(500)], pa.int64())})
    with LogSegment(tmp_path, 0, writable=True) as seg:
        for raw in encode_arrow(t, max_batch_bytes=2048):
            b = next(iter(iter_batches(raw)))
            seg.append(b.last_offset, b.max_timestamp, b.last_offset, raw)
    assert scan_segment(tmp_path / "00000000000000000000.log").next_offset == 500


def test_next_offset_of_a_segment_another_process_appends_to(tmp_path: Path) -> None:
    """A read-only segment knows the file's size when it was opened; if its index is loaded later
    (lazily) it can hold entries for batches appended since, past that size. The next offset
    must then come from the bytes the reader has, not fall back to the base offset."""
    from storage_core.record.records import Record, build_batch

    def batch(first: int, n: int) -> bytes:
        return build_batch([Record(first + i, 1000 + first + i, b"k", b"x" * 300) for i in range(n)])

    writer = LogSegment(tmp_path, 0, index_interval_bytes=1, writable=True)
    for first in range(0, 50, 10):
        writer.append(first + 9, 1000 + first + 9, first + 9, batch(first, 10))
    writer.flush()
    reader = LogSegment(tmp_path, 0)  # sees 50 records' bytes; its index is not loaded yet
    for first in range(50, 100, 10):
        writer.append(first + 9, 1000 + first + 9, first + 9, batch(first, 10))
    writer.flush()
    assert reader.read_next_offset() == 50
    writer.close()
    reader.close()
