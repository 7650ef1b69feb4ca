"""The log dir's ``.lock`` against a real JVM that holds it exactly as a Kafka broker does.

A broker locks ``<log dir>/.lock`` with ``FileChannel.tryLock()`` (``oracle/BrokerDirLock.java``
does what Kafka's ``FileLock`` does: on Linux a POSIX record lock, ``fcntl(F_SETLK)``, of the whole
file). While the JVM holds it every klog writer is refused, with the JVM's PID in the message and
no file of the dir changed: ``klog recover``/``retention``/``compact``/``snapshot`` (exit 2), a
writable ``LogManager`` (:class:`LogDirLockedError`), a commit (:class:`CommitError`) and a Spark
append. Once the JVM lets go (as a broker's shutdown does: unlock, delete ``.lock``) the same
writes succeed. The other way round, a broker cannot lock a dir a klog writer holds. Readers take
no lock and never wait for one.

Needs only a JDK (``java`` and ``javac``); skips with the reason where it is missing.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa
import pytest
from broker_fixture import JAVA
from kafka_oracle import java_classpath, oracle_available

import storage_core.log.lock as lock_module
from storage_core.errors import CommitError, DataLossError, LogDirLockedError
from storage_core.log.config import LogConfig
from storage_core.log.lock import LogDirLock, is_held
from storage_core.log.log import Log
from storage_core.log.manager import LogManager
from storage_core.log.staged import StagingWriter, commit_job
from storage_core.log.topic_configs import update_topic_configs
from storage_core.log.topic_partition import TopicPartition
from storage_core.read.api import read_arrow
from storage_core.record.compression import CompressionType
from storage_core.record.records import Record, build_batch

pytestmark = [pytest.mark.interop,
              pytest.mark.skipif(sys.platform != "linux", reason="Linux's locks (OFD, /proc/locks) are what is tested")]

ORACLE = JAVA / "BrokerDirLock.java"
T0 = 1_700_000_000_000
EXIT_USAGE = 2  # storage_core.tools.cli: a log dir locked by a broker is exit 2


def _classpath() -> str:
    reason = oracle_available(ORACLE, None)
    if reason is not None:
        pytest.skip(reason)
    return java_classpath(ORACLE, None)


@contextmanager
def broker_holds(log_dir: Path, pause_ms: int = 0) -> Iterator[int]:
    """A JVM holds ``log_dir/.lock`` as a broker does for the block; yields the JVM's PID. At the
    end it lets go as ``LogManager.shutdown`` does (``FileLock.destroy``: unlock, delete, close),
    pausing ``pause_ms`` between the unlock and the delete."""
    proc = subprocess.Popen(["java", "-XX:TieredStopAtLevel=1", "-cp", _classpath(), "BrokerDirLock", "hold", str(log_dir / ".lock"),
                             str(pause_ms)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        pid, state = proc.stdout.readline().split()
        assert state == "locked" and int(pid) == proc.pid
        yield proc.pid
        proc.stdin.close()
        assert proc.stdout.read().split() == ["released"] and proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def broker_can_lock(log_dir: Path) -> bool:
    """Whether a broker starting now would get ``log_dir/.lock`` (it lets go at once)."""
    res = subprocess.run(["java", "-XX:TieredStopAtLevel=1", "-cp", _classpath(), "BrokerDirLock", "try", str(log_dir / ".lock")],
                         capture_output=True, text=True, timeout=120, check=True)
    state = res.stdout.split()[1]
    assert state in ("locked", "busy"), res.stdout
    return state == "locked"


def files_of(d: Path) -> dict[str, str]:
    """Every file and dir under ``d`` with the sha256 of each file's bytes."""
    return {str(p.relative_to(d)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
            for p in sorted(d.rglob("*"))}


def klog(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "storage_core.tools.cli", *map(str, args)], capture_output=True,
                          text=True, timeout=300)


def log_dir(root: Path) -> Path:
    """``users`` (compacted by its stored config) and ``clicks`` (delete), 2 partitions of 60
    records each in segments of about 1 KiB: something for recovery, retention and compaction."""
    root.mkdir(parents=True)
    update_topic_configs(root, "users", {"cleanup.policy": "compact", "segment.bytes": 1024})
    cfg = LogConfig.from_properties({"segment.bytes": "1024"})
    for topic in ("users", "clicks"):
        for p in range(2):
            d = root / f"{topic}-{p}"
            d.mkdir()
            with Log(d, cfg, writable=True) as log:
                for i in range(60):
                    log.append(build_batch([Record(0, T0 + i, b"key-%d" % (i % 5), b"value-%d" % i)]), now_ms=T0 + i)
    return root


def locked_by(pid: int) -> str:
    return f"is locked by process {pid} (a Kafka broker or another klog writer)"


def test_the_jvm_holds_a_posix_lock_of_the_whole_file(tmp_path: Path) -> None:
    """What the other tests stand on: ``tryLock()`` is an fcntl lock (``POSIX`` in /proc/locks,
    owned by the JVM's PID), exclusive, from byte 0 to the end of any file (``0 EOF``)."""
    with broker_holds(tmp_path) as pid:
        st = (tmp_path / ".lock").stat()
        where = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
        locks = [line.split()[1:] for line in Path("/proc/locks").read_text().splitlines() if f" {where} " in line]
        assert locks == [["POSIX", "ADVISORY", "WRITE", str(pid), where, "0", "EOF"]]


@pytest.mark.parametrize("command", [
    ["recover"],
    ["retention", "--config", "retention.ms=1000", "--now", str(T0 + 1_000_000)],
    ["compact"],
])
def test_writing_commands_refuse_a_dir_a_broker_holds(tmp_path: Path, command: list[str]) -> None:
    d = log_dir(tmp_path / "data")
    with broker_holds(d) as pid:
        before = files_of(d)
        res = klog(command[0], d, *command[1:])
        assert res.returncode == EXIT_USAGE, res.stderr
        assert res.stderr.startswith(f"klog: error: log dir {d} {locked_by(pid)}"), res.stderr
        assert files_of(d) == before
    res = klog(command[0], d, *command[1:])
    assert res.returncode == 0, res.stderr
    assert files_of(d) != before  # the command does write when the dir is free


def test_a_writable_log_manager_refuses_a_dir_a_broker_holds(tmp_path: Path) -> None:
    d = log_dir(tmp_path / "data")
    with broker_holds(d) as pid:
        before = files_of(d)
        with pytest.raises(LogDirLockedError, match=re.escape(f"log dir {d} {locked_by(pid)}")):
            LogManager([d], writable=True)
        assert files_of(d) == before
    with LogManager([d], writable=True) as lm:
        assert len(lm.logs) == 4
    assert files_of(d) != before  # checkpoints and the clean-shutdown marker


def test_a_commit_refuses_a_dir_a_broker_holds(tmp_path: Path) -> None:
    d = log_dir(tmp_path / "data")
    sw = StagingWriter(d / "clicks-0", ".klog-staging-j1-00000-0", LogConfig(), CompressionType.NONE, 512)
    sw.append(pa.table({"value": [b"a", b"b"]}), T0)
    staged = sw.finish()
    with broker_holds(d) as pid:
        before = files_of(d)
        with pytest.raises(CommitError, match=re.escape(f"log dir {d} stayed locked by process {pid} (a Kafka "
                                                        "broker or another klog writer) for 0.3 s; nothing was "
                                                        "committed")):
            commit_job("j1", [staged], lock_timeout_s=0.3)
        assert files_of(d) == before
    assert commit_job("j1", [staged], lock_timeout_s=0.3) == {TopicPartition("clicks", 0): (60, 62)}


def test_staging_refuses_a_dir_a_broker_holds_before_it_creates_anything(tmp_path: Path) -> None:
    """A write's tasks ask before they make a staging dir: a broker's dir gets none (not even for the
    commit to refuse later); a dir a klog writer holds (a commit) is staged into, the commit waits."""
    d = log_dir(tmp_path / "data")
    with broker_holds(d) as pid:
        before = files_of(d)
        t0 = time.monotonic()
        with pytest.raises(LogDirLockedError, match=re.escape(f"log dir {d} {locked_by(pid)}; nothing was written")):
            StagingWriter(d / "clicks-0", ".klog-staging-j1-00000-0", LogConfig(), CompressionType.NONE, 512)
        assert time.monotonic() - t0 < 1
        assert files_of(d) == before
    with LogDirLock(d):  # klog's own lock: another writer's commit, which ends
        sw = StagingWriter(d / "clicks-0", ".klog-staging-j1-00000-0", LogConfig(), CompressionType.NONE, 512)
        sw.append(pa.table({"value": [b"a"]}), T0)
        staged = sw.finish()
    assert commit_job("j1", [staged]) == {TopicPartition("clicks", 0): (60, 61)}


@pytest.mark.parametrize("pause_ms", [0, 300])
def test_a_waiting_writer_locks_the_file_a_restarted_broker_would_lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                       pause_ms: int) -> None:
    """A writer that waits (a commit's ``lockTimeoutMs``) gets the lock when the broker stops. A
    broker's shutdown unlocks ``.lock``, then deletes it, so the writer must end up holding the file
    now at that path, not the deleted one (opened while waiting, or locked between the unlock and
    the delete): else the next broker would lock a new file and both would write. ``pause_ms``
    widens the moment between the unlock and the delete (``SETTLE_S`` longer than it, as it is
    longer than a broker's moment)."""
    monkeypatch.setattr(lock_module, "SETTLE_S", max(lock_module.SETTLE_S, 2 * pause_ms / 1000))
    got: list[LogDirLock] = []
    with broker_holds(tmp_path, pause_ms):
        waiter = threading.Thread(target=lambda: got.append(LogDirLock(tmp_path, 60)))
        waiter.start()
        time.sleep(1)
        assert waiter.is_alive() and not got  # it waits while the broker holds the dir
    waiter.join(60)
    assert got
    try:
        assert not broker_can_lock(tmp_path)
    finally:
        got[0].release()
    assert broker_can_lock(tmp_path)


@pytest.mark.parametrize("ofd", [True, False], ids=["ofd", "no-ofd"])
def test_a_broker_cannot_lock_a_dir_klog_holds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ofd: bool) -> None:
    """Both ways: a broker starting while klog writes is refused, also after a second writer of the
    same process was refused (closing its file must not drop the first one's lock). ``no-ofd`` is
    the fallback for systems without Linux's open-file-description locks."""
    if not ofd:
        monkeypatch.setattr(lock_module, "F_OFD_SETLK", None)
    with LogDirLock(tmp_path):
        assert not broker_can_lock(tmp_path)
        with pytest.raises(LogDirLockedError, match=re.escape(f"is locked by process {os.getpid()} (this process:")):
            LogDirLock(tmp_path)
        assert not broker_can_lock(tmp_path)
    assert broker_can_lock(tmp_path)


def test_a_snapshot_refuses_a_destination_a_broker_holds(tmp_path: Path) -> None:
    src = log_dir(tmp_path / "src")
    dst = tmp_path / "dst"
    assert klog("snapshot", src, dst, "--quiet").returncode == 0
    with Log(src / "clicks-0", writable=True) as lg:
        lg.append(build_batch([Record(0, T0 + 100, b"k", b"new")]))
    with broker_holds(dst) as pid:
        before = files_of(dst)
        res = klog("snapshot", src, dst, "--quiet")
        assert res.returncode == EXIT_USAGE and locked_by(pid) in res.stderr, res.stderr
        assert files_of(dst) == before
    res = klog("snapshot", src, dst, "--quiet")
    assert res.returncode == 0, res.stderr
    assert files_of(dst) != before


def test_readers_take_no_lock_and_never_wait(tmp_path: Path) -> None:
    d = log_dir(tmp_path / "data")
    with broker_holds(d):
        before = files_of(d)
        with LogManager([d]) as lm:
            assert len(lm.logs) == 4
        assert read_arrow(d, topics="clicks").read_all().num_rows == 120
        for command in ("describe", "verify"):
            res = klog(command, d)
            assert res.returncode == 0, res.stderr
        assert files_of(d) == before
    with LogManager([d]):
        assert broker_can_lock(d)  # an open reader does not keep a broker out


@pytest.mark.parametrize("ofd", [True, False], ids=["ofd", "no-ofd"])
def test_is_held_sees_a_broker_and_a_klog_writer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ofd: bool) -> None:
    """``is_held``, the reader's question (a running broker appends to the dir): no ``.lock`` or
    an unlocked one is not held; a JVM's lock (a broker's), a klog writer's in this process or in
    another is. Asking neither takes nor drops a lock (a classic lock of this process survives it)."""
    if not ofd:
        monkeypatch.setattr(lock_module, "F_OFD_SETLK", None)
    assert not is_held(tmp_path)
    (tmp_path / ".lock").touch()
    assert not is_held(tmp_path)
    with broker_holds(tmp_path):
        assert is_held(tmp_path)
    assert not is_held(tmp_path)
    with LogDirLock(tmp_path):
        assert is_held(tmp_path) and is_held(tmp_path)
        assert not broker_can_lock(tmp_path)
    assert not is_held(tmp_path) and broker_can_lock(tmp_path)
    holder = subprocess.Popen([sys.executable, "-c", "import sys; from storage_core.log.lock import LogDirLock; "
                               f"l = LogDirLock({str(tmp_path)!r}); print('locked', flush=True); sys.stdin.read()"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdin is not None
    try:
        assert holder.stdout.readline().strip() == "locked"
        assert is_held(tmp_path)
    finally:
        holder.stdin.close()
        holder.wait(60)
    assert not is_held(tmp_path)


def test_a_dir_a_broker_holds_is_read_as_the_broker_serves_it(tmp_path: Path) -> None:
    """A running broker's dir has no clean-shutdown marker, and what it appended since its recovery
    point is unflushed, not suspect: the broker checked every batch it appended. A read takes its
    files as they are (no recovery scan: that cost a live partition's open a CRC pass over its whole
    unflushed log) and checks each batch's CRC as it reads it. So a damaged batch is what a consumer
    of the broker meets: that batch's offsets are lost (failOnDataLoss=false reads every batch
    after it), and a batch still being written at the end is not read. The same dir not held (a
    crashed broker's) is recovered in memory as Kafka's recovery would: the damaged segment is cut
    at the damage, so everything from it on is lost."""
    d = log_dir(tmp_path / "data")  # no clean-shutdown marker, no recovery point: all of it unflushed
    part = d / "clicks-0"
    last = sorted(part.glob("*.log"))[-1]  # offsets 48..59, one 81-byte batch each
    base = int(last.name.split(".")[0])
    with last.open("r+b") as f:  # the 3rd batch's last byte: its CRC fails
        f.seek(3 * 81 - 1)
        byte = f.read(1)[0]
        f.seek(3 * 81 - 1)
        f.write(bytes([byte ^ 0xFF]))
    with last.open("ab") as f:  # the broker is writing the next batch
        f.write(bytes(build_batch([Record(0, T0, b"k", b"v")]))[:30])
    damaged = base + 2

    def offsets(**options: str) -> list[int]:
        return read_arrow(d, assign='{"clicks": [0]}', **options).read_all().column("offset").to_pylist()

    with pytest.raises(DataLossError, match=f"offsets {damaged}..59 of clicks-0 are lost"):
        offsets()
    assert offsets(failOnDataLoss="false") == list(range(damaged))
    with broker_holds(d):
        with pytest.raises(DataLossError, match=f"offsets {damaged}..{damaged} of clicks-0 are lost.*"
                                                f"{re.escape(str(last))} from position {2 * 81}"):
            offsets()
        assert offsets(failOnDataLoss="false") == [o for o in range(60) if o != damaged]
        assert read_arrow(d, assign='{"clicks": [1]}').read_all().num_rows == 60  # the other partition is whole


@pytest.mark.spark
def test_a_spark_append_refuses_a_dir_a_broker_holds(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    df = spark.range(5).selectExpr("CAST(id AS STRING) AS value")
    df.write.format("klog").option("topic", "t").mode("append").save(str(tmp_path))
    with broker_holds(tmp_path) as pid:
        before = files_of(tmp_path)
        with pytest.raises(Exception) as info:
            (df.write.format("klog").option("topic", "t").option("lockTimeoutMs", "300").mode("append")
             .save(str(tmp_path)))
        # refused on the driver before any task staged a file (check_free_to_stage), not at the commit
        assert f"log dir {tmp_path} is locked by process {pid} (a Kafka broker" in str(info.value), str(info.value)
        assert "nothing was written" in str(info.value)
        assert files_of(tmp_path) == before
    df.write.format("klog").option("topic", "t").option("lockTimeoutMs", "300").mode("append").save(str(tmp_path))
    assert spark.read.format("klog").load(str(tmp_path)).count() == 10
