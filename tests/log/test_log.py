"""Log: opening partition dirs like LogLoader, appending with offset assignment and rolls, reading."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
import shared_fixtures as sf

from storage_core.errors import KlogError, OffsetOutOfRangeError, RecordTooLargeError
from storage_core.log.config import LogConfig
from storage_core.log.log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, Log
from storage_core.log.segment import scan_segment
from storage_core.record.records import Record, build_batch

T0 = 1_700_000_000_000


def batch(n: int, start_ts: int = T0, size: int = 50) -> bytes:
    return build_batch([Record(i, start_ts + i, f"k{i}".encode(), b"v" * size) for i in range(n)])


def small_config(**kw: object) -> LogConfig:
    return LogConfig.from_properties({"segment.bytes": "4096", "index.interval.bytes": "512", **{k: str(v) for k, v in kw.items()}})


def written_log(path: Path, batches: int = 40, config: LogConfig | None = None) -> list[tuple[int, int]]:
    path.mkdir(exist_ok=True)
    with Log(path, config or small_config(), writable=True) as log:
        return [log.append(batch(10, T0 + 100 * i)) for i in range(batches)]


def test_append_assigns_offsets_and_rolls(tmp_path: Path) -> None:
    ranges = written_log(tmp_path / "t-0")
    assert ranges[0] == (0, 9) and ranges[-1] == (390, 399)
    logs = sorted((tmp_path / "t-0").glob("*.log"))
    assert len(logs) > 3
    for p in logs:
        scan = scan_segment(p, index_interval_bytes=512)
        assert scan.error is None and p.stat().st_size <= 4096
        idx = p.with_suffix(".index")
        assert idx.stat().st_size == 8 * len(scan.offset_entries) or p == logs[-1]
    log = Log(tmp_path / "t-0", small_config())
    assert (log.log_start_offset, log.log_end_offset) == (0, 400)
    offsets = [r.offset for b in log.batches() for r in b.records()]
    assert offsets == list(range(400))
    assert [r.offset for b in log.batches(205, 215) for r in b.records()][:1] == [200]
    log.close()


def test_reopen_writable_appends_after(tmp_path: Path) -> None:
    written_log(tmp_path / "t-0", 5)
    with Log(tmp_path / "t-0", small_config(), writable=True) as log:
        assert log.log_end_offset == 50
        assert log.append(batch(3)) == (50, 52)
    with Log(tmp_path / "t-0", small_config()) as log:
        assert log.log_end_offset == 53


def test_offset_for_timestamp(tmp_path: Path) -> None:
    written_log(tmp_path / "t-0")
    with Log(tmp_path / "t-0", small_config()) as log:
        assert log.offset_for_timestamp(EARLIEST_TIMESTAMP).offset == 0
        assert log.offset_for_timestamp(LATEST_TIMESTAMP).offset == 400
        found = log.offset_for_timestamp(T0 + 1505)
        assert found is not None and (found.offset, found.timestamp) == (155, T0 + 1505)
        assert log.offset_for_timestamp(T0 + 10**9) is None


def test_out_of_range_and_read_only(tmp_path: Path) -> None:
    written_log(tmp_path / "t-0", 3)
    with Log(tmp_path / "t-0", small_config()) as log:
        with pytest.raises(OffsetOutOfRangeError):
            list(log.batches(31))
        with pytest.raises(KlogError, match="read-only"):
            log.append(batch(1))


def test_limits_and_producer_offsets(tmp_path: Path) -> None:
    (tmp_path / "t-0").mkdir()
    with Log(tmp_path / "t-0", small_config(**{"max.message.bytes": "300"}), writable=True) as log:
        with pytest.raises(RecordTooLargeError, match="max.message.bytes"):
            log.append(batch(10))
        log.append(batch(2, size=10))
        with pytest.raises(KlogError, match="below the log end offset"):
            log.append(build_batch([Record(1, T0, None, b"x")]), assign_offsets=False)
        assert log.append(build_batch([Record(10, T0, None, b"x")]), assign_offsets=False) == (10, 10)
        assert log.log_end_offset == 11


@pytest.mark.parametrize("writable", [True, False])
def test_torn_tail_recovery(tmp_path: Path, writable: bool) -> None:
    written_log(tmp_path / "t-0")
    last = sorted((tmp_path / "t-0").glob("*.log"))[-1]
    data = last.read_bytes()
    last.write_bytes(data[:-7])
    before = hashlib.sha256(last.read_bytes()).hexdigest()
    with Log(tmp_path / "t-0", small_config(), writable=writable) as log:
        assert log.log_end_offset == 390
        assert log.truncated_bytes == len(batch(10)) - 7
    if writable:
        assert scan_segment(last, index_interval_bytes=512).partial_tail is None
    else:
        assert hashlib.sha256(last.read_bytes()).hexdigest() == before


def test_leftovers_of_delete_and_clean_and_swap(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    written_log(d, 10, small_config(**{"segment.bytes": "100000"}))
    (d / "00000000000000000000.log.deleted").write_bytes(b"old")
    (d / "00000000000000000100.log.cleaned").write_bytes(b"partial")  # a later group's: the swap at 0 stands
    (d / "00000000000000099999.index").write_bytes(b"")  # orphan
    # a completed cleaning of [0, 100): one segment holding only the last 5 records of each key
    swap = build_batch([Record(i, T0, f"k{i}".encode(), b"c") for i in range(95, 100)])
    (d / "00000000000000000000.log").rename(d / "00000000000000000000.log.deleted.tmp")
    (d / "00000000000000000000.log.deleted.tmp").rename(d / "00000000000000000000.log")
    (d / "00000000000000000000.log.swap").write_bytes(swap)
    with Log(d, small_config(), writable=True) as log:
        assert sorted(os.listdir(d)) == ["00000000000000000000.index", "00000000000000000000.log",
                                         "00000000000000000000.timeindex"]
        assert [r.offset for b in log.batches(95) for r in b.records()] == [95, 96, 97, 98, 99]


def test_truncate_to(tmp_path: Path) -> None:
    written_log(tmp_path / "t-0")
    with Log(tmp_path / "t-0", small_config(), writable=True) as log:
        segs = len(log.segments)
        log.truncate_to(155)
        assert log.log_end_offset == 150  # the batch holding 155 started at 150
        assert len(log.segments) < segs
        assert log.append(batch(1)) == (150, 150)
    with Log(tmp_path / "t-0", small_config()) as log:
        assert [r.offset for b in log.batches() for r in b.records()] == list(range(151))


def test_log_append_time(tmp_path: Path) -> None:
    (tmp_path / "t-0").mkdir()
    cfg = small_config(**{"message.timestamp.type": "LogAppendTime"})
    with Log(tmp_path / "t-0", cfg, writable=True) as log:
        log.append(batch(3), now_ms=T0 + 5555)
        (b,) = list(log.batches())
        b.ensure_valid()
        assert [r.timestamp for r in b.records()] == [T0 + 5555] * 3


def _expected_offsets(log_dir: Path) -> list[int]:
    out = []
    for seg in sorted(log_dir.glob("*.log")):
        for line in sf.expected_lines(seg):
            obj = json.loads(line)
            if obj.get("offset") is not None:
                out.append(obj["offset"])
    return out


PARTITIONS = sorted({p.parent for p in sf.KAFKA_FIXTURES.rglob("*.log") if "captures" not in str(p)
                     and "generated" not in str(p)}) if sf.available() else []


@pytest.mark.conformance
@pytest.mark.parametrize("part", sf.params(PARTITIONS, "partition dirs"))
def test_broker_partition_dirs_open_read_only(part: Path) -> None:
    before = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in part.iterdir() if p.is_file()}
    with Log(part) as log:
        offsets = [r.offset for b in log.batches() for r in b.records()]
        assert offsets == _expected_offsets(part)
        last_batch_next = max([b.next_offset for b in log.batches()], default=log.segments[-1].base_offset)
        assert log.log_end_offset == last_batch_next
        assert log.log_start_offset == log.segments[0].base_offset
    after = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in part.iterdir() if p.is_file()}
    assert before == after


def test_retention_by_time_bytes_and_start_offset(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    written_log(d)  # timestamps T0 + 100*i + j, segments of 6 batches
    now = T0 + 10_000
    cfg = small_config(**{"retention.ms": "8000", "file.delete.delay.ms": "60000"})
    with Log(d, cfg, writable=True) as log:
        reader = Log(d, small_config())  # a reader that opened the segments before the delete
        first_seg_bytes = list(reader.segments[0].batches())
        doomed = log.deletable_segments(now)
        # a segment goes when its newest record is older than 8 s: segments ending before T0 + 2000
        assert [s.base_offset for s in doomed] == [0, 60, 120]
        assert log.delete_old_segments(now) == [0, 60, 120]
        assert log.log_start_offset == 180
        assert sorted(p.name for p in d.glob("*.deleted"))[:1] == ["00000000000000000000.index.deleted"]
        assert [b.base_offset for b in first_seg_bytes][:1] == [0]
        reader.close()
        with pytest.raises(OffsetOutOfRangeError):
            list(log.batches(100))
        assert log.remove_deleted_files(now_ms=int(10**15)) == 9
    cfg = small_config(**{"retention.bytes": "5000", "retention.ms": "-1"})
    with Log(d, cfg, writable=True, log_start_offset=180) as log:
        size = log.size_in_bytes
        deleted = log.delete_old_segments(now)
        assert log.size_in_bytes <= 5000 + 4096 and log.size_in_bytes < size and deleted
    cfg = small_config(**{"cleanup.policy": "compact"})
    with Log(d, cfg, writable=True) as log:
        assert log.deletable_segments(now + 10**12) == []  # compact only: no time or size retention
        log.log_start_offset = log.segments[1].base_offset
        assert [s.base_offset for s in log.deletable_segments(now)] == [log.segments[0].base_offset]


def test_zero_delete_delay_removes_the_files_at_once(tmp_path: Path) -> None:
    # the rename's ctime comes from the file system's clock, which may stand a tick ahead of
    # time.time(): with file.delete.delay.ms=0, about one retention run in two once left its
    # *.deleted files behind (a notebook's file count changed from run to run)
    for trial in range(30):
        d = tmp_path / f"t-{trial}"
        written_log(d, 2)
        with Log(d, small_config(**{"retention.ms": "1", "file.delete.delay.ms": "0"}), writable=True) as log:
            assert log.delete_old_segments(T0 + 10**9) == [0]
        assert sorted(p.name for p in d.glob("*.deleted")) == [], f"trial {trial}"


def test_retention_of_everything_rolls_first(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    written_log(d, 3)
    with Log(d, small_config(**{"retention.ms": "1"}), writable=True) as log:
        assert log.delete_old_segments(T0 + 10**9) == [0]
        assert [s.base_offset for s in log.segments] == [30]
        assert log.log_start_offset == 30 and log.log_end_offset == 30


def test_flush_policy(tmp_path: Path) -> None:
    (tmp_path / "t-0").mkdir()
    with Log(tmp_path / "t-0", small_config(**{"flush.messages": "5"}), writable=True) as log:
        log.append(batch(3))
        assert log.recovery_point == 0  # not flushed yet: 3 < flush.messages
        log.append(batch(2))
        assert log.recovery_point == 5  # flushed: the recovery point moves to the log end
    (tmp_path / "u-0").mkdir()
    with Log(tmp_path / "u-0", small_config(**{"flush.ms": "1000"}), writable=True) as log:
        import time as _time

        now = int(_time.time() * 1000)
        log.append(batch(1), now_ms=now)
        assert log.recovery_point == 0
        log.append(batch(1), now_ms=now + 5000)
        assert log.recovery_point == 2
