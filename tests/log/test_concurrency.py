"""Readers and writers at the same time, in separate processes.

- A read-only open while another process appends and rolls sees a consistent prefix of the log
  (offsets 0..n-1 with their records, every CRC valid), whenever it opens and however long it
  keeps its open; the Spark read path (planned pieces read later) too.
- Two writers never hold one log dir: ``LogManager(writable=True)`` and ``commit_job`` take the
  dir's ``.lock``; the second fails with a typed error (or waits, for a commit), and concurrent
  commits are serialised without interleaving or duplicating offsets.
- Retention and compaction by a writer while a reader has the log open: the reader keeps reading
  the files it opened on (renamed ``*.deleted``, kept for ``file.delete.delay.ms`` as Kafka
  does); once they are gone it gets :class:`SegmentGoneError`, never another file's bytes.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest

from storage_core.cleaner import LogCleaner
from storage_core.errors import CommitError, LogDirLockedError, SegmentGoneError
from storage_core.log.config import LogConfig
from storage_core.log.log import Log
from storage_core.log.manager import LogManager
from storage_core.log.staged import StagingWriter, commit_job
from storage_core.log.topic_configs import update_topic_configs
from storage_core.log.topic_partition import TopicPartition
from storage_core.record.compression import CompressionType
from storage_core.record.records import DefaultRecordBatch, Record, build_batch

T0 = 1_700_000_000_000
TP = TopicPartition("t", 0)
PROPS = {"segment.bytes": "2000", "index.interval.bytes": "200"}


def fork(body: Callable[[], None]) -> int:
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            body()
        except BaseException as exc:  # noqa: BLE001 - shown by the exit code and stderr
            os.write(2, f"child failed: {type(exc).__name__}: {exc}\n".encode())
            code = 3
        os._exit(code)
    return pid


def wait(pid: int, timeout: float = 60) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.005)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    raise AssertionError("child hung")


def values_of(log: Log, start: int | None = None) -> list[tuple[int, bytes | None]]:
    out = []
    for b in log.batches(start):
        b.ensure_valid()
        if isinstance(b, DefaultRecordBatch) and b.is_control:
            continue
        out += [(r.offset, r.value) for r in b.records()]
    return out


def batch(seq: int, keys: int = 0) -> bytes:
    return build_batch([Record(0, T0 + seq, b"k%d" % (seq % keys if keys else seq), b"v%d" % seq, ())])


def assert_prefix(recs: list[tuple[int, bytes | None]], first: int = 0) -> None:
    assert [o for o, _ in recs] == list(range(first, first + len(recs))), "offsets not a contiguous prefix"
    assert [v for _, v in recs] == [b"v%d" % o for o in range(first, first + len(recs))], "records do not match"


def test_reader_sees_a_consistent_prefix_while_a_writer_appends_and_rolls(tmp_path: Path) -> None:
    root = tmp_path / "logs"
    root.mkdir()
    update_topic_configs(root, "t", PROPS)
    with LogManager([root], writable=True) as m:
        m.create_log(TP).append(batch(0), now_ms=T0)
    n = 1500

    def writer() -> None:
        with LogManager([root], writable=True) as m:
            log = m.create_log(TP)
            for seq in range(1, n):
                log.append(batch(seq), now_ms=T0 + seq)

    pid = fork(writer)
    seen: list[int] = []
    long_lived = Log(root / "t-0")  # opened once, read again and again while the writer goes on
    long_lived_len = len(values_of(long_lived))
    try:
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            with Log(root / "t-0") as fresh:  # a new read-only open: recovery in memory, no writes
                recs = values_of(fresh)
                assert_prefix(recs)
                seen.append(len(recs))
                if len(seen) % 5 == 1:  # a read at an offset in the middle, through the index
                    mid = len(recs) // 2
                    assert_prefix(values_of(fresh, mid), mid)
            assert len(values_of(long_lived)) == long_lived_len  # its view does not move
            if done:
                assert os.waitstatus_to_exitcode(status) == 0
                break
    finally:
        long_lived.close()
        if not done:
            wait(pid)
    assert seen[-1] == n and len(set(seen)) >= 3, f"reads did not overlap the writes: {seen[:10]}"
    assert len(list((root / "t-0").glob("*.log"))) > 20  # many rolls happened under the reads


def test_spark_read_path_planned_then_read_while_a_writer_appends(tmp_path: Path) -> None:
    """Pieces planned on the driver, read later by an executor while the log grows: exactly the planned range."""
    from storage_core.log.manager import find_partitions
    from storage_core.read.piece_reader import batches_of as _batches
    from storage_core.read.planner import Piece

    root = tmp_path / "logs"
    root.mkdir()
    update_topic_configs(root, "t", PROPS)
    with LogManager([root], writable=True) as m:
        log = m.create_log(TP)
        for seq in range(200):
            log.append(batch(seq), now_ms=T0 + seq)
    assert find_partitions([root])
    with Log(root / "t-0") as lg:
        end = lg.log_end_offset
        pieces = [Piece("t", 0, str(s.log_path), 0, s.size_in_bytes, 0, end, None, 0, s.file_identity)
                  for s in lg.segments if s.size_in_bytes]

    def writer() -> None:
        with LogManager([root], writable=True) as m:
            log = m.create_log(TP)
            for seq in range(200, 700):
                log.append(batch(seq), now_ms=T0 + seq)

    pid = fork(writer)
    got = []
    for p in pieces:
        for b in _batches(p, True):
            got += [(r.offset, r.value) for r in b.records() if r.offset < end]
    assert wait(pid) == 0
    assert_prefix(got)
    assert len(got) == 200


def test_two_writers_never_both_hold_a_log_dir(tmp_path: Path) -> None:
    root = tmp_path / "logs"
    (root / "w-0").mkdir(parents=True)
    r, w = os.pipe()

    def holder() -> None:
        with LogManager([root], writable=True):
            os.write(w, b"x")
            time.sleep(1.5)

    pid = fork(holder)
    assert os.read(r, 1) == b"x"
    with pytest.raises(LogDirLockedError, match=f"is locked by process {pid} "):
        LogManager([root], writable=True)
    cfg = LogConfig()
    sw = StagingWriter(root / "w-0", ".klog-staging-j1-00000-0", cfg, CompressionType.NONE, 512)
    sw.append(pa.table({"value": [b"a", b"b"]}), T0)
    staged = sw.finish()
    with pytest.raises(CommitError, match="stayed locked"):
        commit_job("j1", [staged], lock_timeout_s=0.2)
    assert all(p.stat().st_size == 0 for p in (root / "w-0").glob("*.log"))  # nothing committed
    with LogManager([root]) as ro:  # a reader takes no lock: never blocked by the writer
        assert ro.writable is False
    assert commit_job("j1", [staged], lock_timeout_s=30) == {TopicPartition("w", 0): (0, 2)}  # waits, then commits
    assert wait(pid) == 0


def test_concurrent_commits_are_serialised(tmp_path: Path) -> None:
    root = tmp_path / "logs"
    (root / "w-0").mkdir(parents=True)
    cfg = LogConfig.from_properties({"segment.bytes": "4000"})

    def job(tag: str) -> Callable[[], None]:
        def body() -> None:
            for k in range(4):
                sw = StagingWriter(root / "w-0", f".klog-staging-{tag}{k}-00000-0", cfg, CompressionType.LZ4, 512)
                sw.append(pa.table({"value": [f"{tag}{k}-{i}".encode() for i in range(100)]}), T0)
                commit_job(f"{tag}{k}", [sw.finish()], config=cfg)
        return body

    pids = [fork(job("a")), fork(job("b"))]
    assert [wait(p) for p in pids] == [0, 0]
    with Log(root / "w-0") as lg:
        recs = values_of(lg)
    assert [o for o, _ in recs] == list(range(800))
    vals = [v.decode() for _, v in recs if v is not None]
    assert len(set(vals)) == 800
    for start in range(0, 800, 100):  # each job's 100 records contiguous, in order
        tags = {v.split("-")[0] for v in vals[start:start + 100]}
        assert len(tags) == 1
        tag = tags.pop()
        assert vals[start:start + 100] == [f"{tag}-{i}" for i in range(100)]


def _build(root: Path, n: int, props: dict[str, str], keys: int = 0) -> None:
    root.mkdir()
    update_topic_configs(root, "t", props)
    with LogManager([root], writable=True) as m:
        log = m.create_log(TP)
        for seq in range(n):
            log.append(batch(seq, keys), now_ms=T0 + seq)
        log.roll()


@pytest.mark.parametrize("delay_ms", ["60000", "0"])
def test_retention_while_a_reader_has_the_log_open(tmp_path: Path, delay_ms: str) -> None:
    root = tmp_path / "logs"
    props = {**PROPS, "retention.bytes": "4000", "retention.ms": "-1", "file.delete.delay.ms": delay_ms}
    _build(root, 300, props)
    reader = Log(root / "t-0")
    it = reader.batches()
    first = next(it)  # the first segment is being read
    before = len(reader.segments)

    def retention() -> None:
        with LogManager([root], writable=True) as m:
            assert m.retention()  # retention.bytes removes the oldest segments

    assert wait(fork(retention)) == 0
    assert not (root / "t-0" / "00000000000000000000.log").exists()
    recs = [(r.offset, r.value) for r in first.records()]
    if delay_ms != "0":
        for b in it:  # the rest of the reader's segments, renamed *.deleted by now
            b.ensure_valid()
            recs += [(r.offset, r.value) for r in b.records()]
        assert_prefix(recs)
        assert len(recs) == 300 and len(reader.segments) == before
    else:
        with pytest.raises(SegmentGoneError, match="reopen the log"):  # typed, never other bytes
            for b in it:
                b.ensure_valid()
                recs += [(r.offset, r.value) for r in b.records()]
        assert_prefix(recs)
    reader.close()
    with Log(root / "t-0") as fresh:  # a new open sees the log after retention
        recs = values_of(fresh)
        assert_prefix(recs, recs[0][0])
        assert recs[0][0] > 0 and recs[-1][0] == 299


def test_compaction_while_a_reader_has_the_log_open(tmp_path: Path) -> None:
    root = tmp_path / "logs"
    _build(root, 300, {**PROPS, "cleanup.policy": "compact"}, keys=10)
    reader = Log(root / "t-0")
    spark_pieces = [(s.log_path, s.size_in_bytes, s.file_identity) for s in reader.segments if s.size_in_bytes]

    def clean() -> None:
        with LogManager([root], writable=True) as m:
            LogCleaner(1 << 20).clean_log(m.logs[TP])

    assert wait(fork(clean)) == 0
    assert list((root / "t-0").glob("*.deleted"))  # the old files wait out file.delete.delay.ms
    old_view = values_of(reader)  # exactly what the reader opened on
    assert_prefix(old_view)
    assert len(old_view) == 300
    from storage_core.read.piece_reader import batches_of as _batches
    from storage_core.read.planner import Piece

    for path, size, ino in spark_pieces:  # pieces planned before the swap read the old files too
        piece = Piece("t", 0, str(path), 0, size, 0, 300, None, 0, ino)
        assert all(b.base_offset >= 0 for b in _batches(piece, True))
    reader.close()
    with Log(root / "t-0") as fresh:
        new_view = values_of(fresh)
    assert len(new_view) < 300
    assert {v for _, v in new_view} >= {b"v%d" % s for s in range(290, 300)}  # the latest value of each key
    for path in (root / "t-0").glob("*.deleted"):  # once they are gone: a typed error, not the new file
        path.unlink()
    gone = Piece("t", 0, str(spark_pieces[0][0]), 0, spark_pieces[0][1], 0, 300, None, 0, spark_pieces[0][2])
    with pytest.raises(SegmentGoneError):
        list(_batches(gone, True))


def test_read_committed_reader_keeps_its_aborted_transactions_after_retention(tmp_path: Path) -> None:
    """The .txnindex of a segment renamed *.deleted is read beside it: aborted records stay hidden."""
    from storage_core.record.control import ControlRecordType, EndTransactionMarker
    from storage_core.record.records import build_end_txn_marker

    root = tmp_path / "logs"
    root.mkdir()
    update_topic_configs(root, "t", {**PROPS, "retention.bytes": "2000", "retention.ms": "-1"})
    with LogManager([root], writable=True) as m:
        log = m.create_log(TP)
        log.append(build_batch([Record(0, T0, b"k", b"aborted", ())], producer_id=7, producer_epoch=0,
                               base_sequence=0, is_transactional=True), now_ms=T0)
        log.append(build_end_txn_marker(0, T0, 0, 7, 0, EndTransactionMarker(ControlRecordType.ABORT, 0)), now_ms=T0)
        for seq in range(2, 200):
            log.append(batch(seq), now_ms=T0 + seq)
        log.roll()
    reader = Log(root / "t-0", had_clean_shutdown=True)  # as LogManager opens a cleanly closed dir: reads .txnindex
    seen = [r.value for b in reader.batches(read_committed=True) for r in b.records() if not b.is_control]
    assert b"aborted" not in seen

    def retention() -> None:
        with LogManager([root], writable=True) as m:
            assert m.retention()

    assert wait(fork(retention)) == 0
    assert (root / "t-0" / "00000000000000000000.txnindex.deleted").exists()
    again = [r.value for b in reader.batches(read_committed=True) for r in b.records() if not b.is_control]
    assert again == seen  # the same view, aborted record still hidden
    reader.close()
