"""No silent nothing: a path that is not a Kafka log dir, and bytes that are not Kafka batches,
are errors that say what was found, the same in the CLI, the Python API and Spark."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import shared_fixtures as sf

import storage_core
from storage_core.errors import NotALogDirError
from tests.porting.data import append

needs_shared = pytest.mark.skipif(not sf.available(), reason=sf.MISSING_REASON)


def klog(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "storage_core.tools.cli", *args], capture_output=True, text=True)


def cases(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    """name -> (path, a regex the error must match)."""
    empty = tmp_path / "empty"
    empty.mkdir()
    junk = tmp_path / "junk"
    (junk / "notes").mkdir(parents=True)
    (junk / "hosts").write_text("127.0.0.1 localhost\n")
    parent = tmp_path / "parent"
    append(parent / "kafka-logs", "orders", 0, 3)
    append(parent / "kafka-logs", "orders", 1, 3)
    # log dirs named as partitions would be (topic "data", partitions 1 and 2): once read as two
    # empty partitions of a topic "data", silently empty
    disks = tmp_path / "disks"
    append(disks / "data-1", "orders", 0, 3)
    append(disks / "data-2", "orders", 1, 3)
    return {
        "empty dir": (empty, rf"{re.escape(str(empty))} is empty: no topic-partition directories"),
        "non-Kafka files": (junk, rf"no topic-partition directories .* in {re.escape(str(junk))}: it holds hosts, "
                                  r"notes/; expected a Kafka log dir"),
        "parent of a log dir": (parent, rf"{re.escape(str(parent / 'kafka-logs'))} looks like a Kafka log dir \(it "
                                        r"holds orders-0, orders-1\): pass that path"),
        "parent of log dirs named like partitions": (
            disks, r"it holds Kafka log dirs \(data-1 holds orders-0; data-2 holds orders-1\): pass them as "
                   + re.escape(f"'{disks / 'data-1'},{disks / 'data-2'}'")),
    }


def test_cli_describe_verify_export_refuse_what_is_not_a_log_dir(tmp_path: Path) -> None:
    for name, (path, message) in cases(tmp_path).items():
        for args in (["describe", str(path)], ["verify", str(path)],
                     ["export", str(path), "--topic", "orders", "-o", str(tmp_path / "x.parquet")]):
            res = klog(*args)
            assert res.returncode == 2, (name, args, res.stdout, res.stderr)
            assert re.search(message, res.stderr), (name, args, res.stderr)
            assert res.stdout == "" and "Traceback" not in res.stderr


def test_python_api_refuses_what_is_not_a_log_dir(tmp_path: Path) -> None:
    for path, message in cases(tmp_path).values():
        for call in (storage_core.read_arrow, storage_core.plan):
            with pytest.raises(NotALogDirError, match=message):
                call(path)


def test_a_log_dir_and_a_partition_dir_still_read(tmp_path: Path) -> None:
    append(tmp_path / "logs", "orders", 0, 3)
    assert storage_core.read_arrow(tmp_path / "logs").read_all().num_rows == 3
    assert storage_core.read_arrow(tmp_path / "logs" / "orders-0").read_all().num_rows == 3


@pytest.mark.spark
def test_spark_refuses_what_is_not_a_log_dir(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    for name, (path, message) in cases(tmp_path).items():
        with pytest.raises(Exception, match=message):
            spark.read.format("klog").load(str(path)).count()
        if name != "empty dir":  # a stream may start on an empty dir and wait for its first topic
            with pytest.raises(Exception, match=message):
                q = spark.readStream.format("klog").load(str(path)).writeStream.format("noop").start()
                try:
                    q.processAllAvailable()
                finally:
                    q.stop()


def test_dump_of_bytes_that_are_not_kafka_batches_fails(tmp_path: Path) -> None:
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n")
    for args in ([], ["--jsonl"]):
        res = klog("dump", *args, str(hosts))
        assert res.returncode == 1, res.stderr
        assert res.stderr.startswith(f"klog: error: {hosts} holds no Kafka record batch"), res.stderr
        assert res.stdout == ""  # nothing dumped: the error is the whole answer


def test_dump_of_a_partition_dir_dumps_its_segments_in_offset_order(tmp_path: Path) -> None:
    from storage_core.log.config import LogConfig
    from storage_core.log.manager import LogManager
    from storage_core.log.topic_partition import TopicPartition
    from storage_core.record.records import Record, build_batch

    with LogManager([tmp_path], writable=True, config=LogConfig(segment_bytes=400)) as m:
        log = m.create_log(TopicPartition("t", 0))
        for i in range(40):
            log.append(build_batch([Record(i, i, None, b"v%d" % i, ())]))
    segments = sorted((p for p in (tmp_path / "t-0").glob("*.log")), key=lambda p: int(p.stem))
    assert len(segments) > 3
    res = klog("dump", str(tmp_path / "t-0"))
    assert res.returncode == 0, res.stderr
    assert [ln[len("Dumping "):] for ln in res.stdout.splitlines() if ln.startswith("Dumping ")] == \
        [str(p) for p in segments]
    offsets = [int(ln.split()[1]) for ln in res.stdout.splitlines() if ln.startswith("baseOffset: ")]
    assert offsets == list(range(40))
    res = klog("dump", str(tmp_path))
    assert res.returncode == 2 and "pass a partition dir" in res.stderr


@needs_shared
def test_dump_of_producer_snapshots_agrees_with_the_log(tmp_path: Path) -> None:
    """Each entry of a broker's producer snapshot names the last batch the producer appended
    before the snapshot offset: where that batch is still in the log, its producer id, last
    sequence, offset delta and max timestamp must be what the dump prints."""
    from storage_core.log.manager import find_partitions, open_log_read_only

    snapshots = sorted(p for p in sf.KAFKA_FIXTURES.rglob("*.snapshot") if p.stat().st_size > 10)
    assert snapshots, "no producer snapshots in the fixtures"
    line_rx = re.compile(r"producerId: (-?\d+) producerEpoch: (-?\d+) coordinatorEpoch: (-?\d+) currentTxnFirstOffset: "
                         r"(OptionalLong\.empty|OptionalLong\[\d+\]) lastTimestamp: (-?\d+)(?: firstSequence: (-?\d+) "
                         r"lastSequence: (-?\d+) lastOffset: (-?\d+) offsetDelta: (-?\d+) timestamp: (-?\d+))?$")
    checked = 0
    for snap in snapshots[:60]:
        res = klog("dump", str(snap))
        assert res.returncode == 0, (snap, res.stderr)
        lines = res.stdout.splitlines()
        assert lines[0] == f"Dumping {snap}"
        copy = tmp_path / "copy" / snap.parent.name
        shutil.rmtree(copy.parent, ignore_errors=True)
        shutil.copytree(snap.parent, copy)
        (pd,) = find_partitions([copy])
        log = open_log_read_only(pd)
        try:
            for line in lines[1:]:
                m = line_rx.fullmatch(line)
                assert m, line
                if m.group(8) is None:
                    continue
                pid, last_seq, last_offset, delta, ts = (int(m.group(i)) for i in (1, 7, 8, 9, 10))
                if not log.log_start_offset <= last_offset < log.log_end_offset:
                    continue
                batch = next(b for b in log.batches(last_offset) if b.last_offset >= last_offset)
                assert (batch.producer_id, batch.last_offset, batch.last_offset - batch.base_offset) == \
                    (pid, last_offset, delta), line
                assert batch.base_sequence + delta == last_seq and batch.max_timestamp == ts, line
                checked += 1
        finally:
            log.close()
    assert checked > 20
