"""LogManager: log dirs, a writer's lock, checkpoints and the clean-shutdown marker, recovery after a kill."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from storage_core.errors import InvalidTopicError, KlogError, LogDirLockedError
from storage_core.log.checkpoint import CleanShutdownFile, OffsetCheckpointFile
from storage_core.log.config import LogConfig
from storage_core.log.manager import LogManager
from storage_core.log.topic_partition import TopicPartition
from storage_core.record.records import Record, build_batch

T0 = 1_700_000_000_000
CFG = LogConfig.from_properties({"segment.bytes": "4096", "index.interval.bytes": "512"})


def batch(n: int) -> bytes:
    return build_batch([Record(i, T0 + i, b"k", b"v" * 60) for i in range(n)])


def test_write_close_checkpoints_and_marker(tmp_path: Path) -> None:
    with LogManager([tmp_path], writable=True, config=CFG) as lm:
        for p in range(2):
            log = lm.create_log(TopicPartition("orders", p))
            for _ in range(20):
                log.append(batch(5))
    assert CleanShutdownFile.in_dir(tmp_path).exists()
    rp = OffsetCheckpointFile(tmp_path / "recovery-point-offset-checkpoint").read()
    assert rp == {TopicPartition("orders", 0): 100, TopicPartition("orders", 1): 100}
    assert (tmp_path / "recovery-point-offset-checkpoint").read_text().startswith("0\n2\norders 0 100\n")
    with LogManager([tmp_path]) as ro:
        assert ro.get_log(TopicPartition("orders", 1)).log_end_offset == 100  # type: ignore[union-attr]
    assert CleanShutdownFile.in_dir(tmp_path).exists()  # read-only leaves the marker alone
    with LogManager([tmp_path], writable=True, config=CFG) as lm:
        assert not CleanShutdownFile.in_dir(tmp_path).exists()  # a crash from here on means recovery


def test_bad_topic_names(tmp_path: Path) -> None:
    with LogManager([tmp_path], writable=True) as lm:
        for bad in ("..", "a/b", "x\x00", "t" * 250, ""):
            with pytest.raises(InvalidTopicError):
                lm.create_log(TopicPartition(bad, 0))
        with pytest.raises(KlogError, match="partition"):
            lm.create_log(TopicPartition("ok", -1))
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == []


def test_one_writer_per_log_dir(tmp_path: Path) -> None:
    held, free = tmp_path / "held", tmp_path / "free"
    for d in (held, free):
        (d / "t-0").mkdir(parents=True)
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import time
        from storage_core.log.manager import LogManager
        lm = LogManager([{str(held)!r}], writable=True)
        print("locked", flush=True)
        time.sleep(60)
    """)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file() and p.name != ".lock"}
        for dirs in ([held], [free, held]):
            with pytest.raises(LogDirLockedError, match=re.escape(f"log dir {held} is locked by process {holder.pid} "
                                                                  "(a Kafka broker or another klog writer)")):
                LogManager(dirs, writable=True)
        # a refused writer writes nothing (but an empty .lock, as a broker would): no checkpoint or
        # clean-shutdown marker, not even in the dir it did lock
        assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file() and p.name != ".lock"} == before
        LogManager([held]).close()  # readers need no lock
    finally:
        holder.kill()
        holder.wait()
    LogManager([held], writable=True).close()  # the lock died with its process


def test_recovery_after_kill(tmp_path: Path) -> None:
    script = textwrap.dedent(f"""
        import os, sys
        from storage_core.log.config import LogConfig
        from storage_core.log.manager import LogManager
        from storage_core.record.records import Record, build_batch
        from storage_core.log.topic_partition import TopicPartition
        cfg = LogConfig.from_properties({{"segment.bytes": "4096", "index.interval.bytes": "512"}})
        lm = LogManager([{str(tmp_path)!r}], writable=True, config=cfg)
        log = lm.create_log(TopicPartition("t", 0))
        i = 0
        while True:
            log.append(build_batch([Record(j, 1700000000000 + j, b"k", b"v" * 60) for j in range(5)]))
            i += 1
            if i == 30:
                print("appended", flush=True)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "appended"
    time.sleep(0.2)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not CleanShutdownFile.in_dir(tmp_path).exists()
    # tear the last batch as a crash mid-write would
    last = [p for p in sorted((tmp_path / "t-0").glob("*.log")) if p.stat().st_size][-1]  # a roll may be the last act
    last.write_bytes(last.read_bytes()[:-11])
    with LogManager([tmp_path], writable=True, config=CFG) as lm:
        log = lm.get_log(TopicPartition("t", 0))
        assert log is not None and log.truncated_bytes > 0
        leo = log.log_end_offset
        assert leo >= 150 and leo % 5 == 0
        offsets = [r.offset for b in log.batches() for r in b.records()]
        assert offsets == list(range(leo))


def test_delete_log(tmp_path: Path) -> None:
    with LogManager([tmp_path], writable=True, config=CFG) as lm:
        for p in range(2):
            lm.create_log(TopicPartition("gone", p)).append(batch(3))
        lm.delete_log(TopicPartition("gone", 0))
        with pytest.raises(KlogError, match="no such partition"):
            lm.delete_log(TopicPartition("gone", 0))
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == ["gone-1"]
    rp = OffsetCheckpointFile(tmp_path / "recovery-point-offset-checkpoint").read()
    assert rp == {TopicPartition("gone", 1): 3}


@pytest.mark.parametrize("epoch", [None, 0, 7, 2**40])
def test_the_broker_epoch_of_the_clean_shutdown_marker_is_kept(tmp_path: Path, epoch: int | None) -> None:
    """klog's writers mark a dir clean again with the broker epoch the broker recorded: rewritten
    without it, the broker would register as after an unclean shutdown and the controller drop it
    from every partition's eligible leader replicas (KIP-966): the cluster tests' restart after a klog
    write found partitions with no leader that way. Both the manager (recovery, retention,
    compaction) and a job's commit keep it."""
    from storage_core.log.staged import StagingWriter, commit_job
    from storage_core.record.compression import CompressionType

    with LogManager([tmp_path], writable=True) as lm:
        lm.create_log(TopicPartition("t", 0)).append(build_batch([Record(0, 1_700_000_000_000, b"k", b"v")]))
    CleanShutdownFile.in_dir(tmp_path).write(epoch)
    with LogManager([tmp_path], writable=True) as lm:
        assert not CleanShutdownFile.in_dir(tmp_path).exists()  # open: a crash now must lead to recovery
        lm.retention()
    assert CleanShutdownFile.in_dir(tmp_path).read() == epoch
    import pyarrow as pa

    w = StagingWriter(tmp_path / "t-0", ".klog-staging-job1-00000-0", LogConfig(), CompressionType.NONE, 1 << 20)
    w.append(pa.table({"key": [b"a"], "value": [b"b"]}), 1_700_000_000_000)
    commit_job("job1", [w.finish()])
    assert CleanShutdownFile.in_dir(tmp_path).read() == epoch


def _broker_copy(root: Path, node: int, segments: int) -> Path:
    """A log dir of broker ``node`` (its meta.properties) holding orders-0: ``segments`` full segments."""
    from storage_core.log.checkpoint import MetaProperties

    d = root / f"b{node}"
    d.mkdir()
    MetaProperties.in_dir(d).write({"version": "1", "cluster.id": "AAAAAAAAAAAAAAAAAAAAAA", "node.id": str(node)})
    with LogManager([d], writable=True, config=CFG) as lm:
        log = lm.create_log(TopicPartition("orders", 0))
        for _ in range(segments * 12):
            log.append(batch(5))
    return d


def test_a_manager_refuses_two_brokers_replicas_and_the_cli_works_on_each(tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """Two brokers' dirs holding the same partition are two replicas, each with its own checkpoints: one
    LogManager over both is refused before anything changes (it kept one replica per partition and wrote
    the other broker's checkpoints without it); ``klog retention`` over both works on each replica and
    each dir's checkpoints keep their partition."""
    from storage_core.tools.cli import main as klog

    dirs = [_broker_copy(tmp_path, n, 3) for n in (1, 2)]
    before = {d: (d / "recovery-point-offset-checkpoint").read_bytes() for d in dirs}
    with pytest.raises(KlogError, match="orders-0 is in two of the log dirs"):
        LogManager(dirs, writable=True, config=CFG)
    assert {d: (d / "recovery-point-offset-checkpoint").read_bytes() for d in dirs} == before
    assert all(CleanShutdownFile.in_dir(d).exists() for d in dirs)
    assert klog(["retention", ",".join(map(str, dirs)), "--config", "retention.bytes=1", "--config",
                 "retention.ms=-1"]) == 0
    out = capsys.readouterr().out
    for d in dirs:
        assert f"broker {d.name[1:]}: orders-0: deleted" in out, out
        rp = OffsetCheckpointFile(d / "recovery-point-offset-checkpoint").read()
        starts = OffsetCheckpointFile(d / "log-start-offset-checkpoint").read()
        first = min(int(p.name.split(".")[0]) for p in (d / "orders-0").glob("*.log"))
        assert rp.get(TopicPartition("orders", 0)) == 180 and first > 0, (d, rp, starts)
