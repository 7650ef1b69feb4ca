"""Disk full and read-only file systems, on real size-limited tmpfs mounts (skipped with a
reason where this process may not mount, e.g. without root).

A write that fails with ``ENOSPC``/``EROFS`` must raise a typed :class:`StorageError` (not a raw
``OSError``), leave the log valid (no torn batch, nothing half-appended, checkpoints old or new),
and lose nothing acknowledged; once there is space again the log reopens and takes writes.
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from storage_core.cleaner import LogCleaner
from storage_core.errors import StorageError
from storage_core.files import RECOVERY_POINT_OFFSET_CHECKPOINT
from storage_core.log.checkpoint import OffsetCheckpointFile
from storage_core.log.config import LogConfig
from storage_core.log.log import Log
from storage_core.log.manager import LogManager
from storage_core.log.staged import StagingWriter, collect_staging, commit_job
from storage_core.log.topic_configs import update_topic_configs
from storage_core.log.topic_partition import TopicPartition
from storage_core.record.compression import CompressionType
from storage_core.record.records import DefaultRecordBatch, Record, build_batch

pytestmark = pytest.mark.fault

T0 = 1_700_000_000_000
TP = TopicPartition("t", 0)
PAGE = 4096


def _mount(path: Path, options: str) -> None:
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], capture_output=True, text=True)
    if res.returncode != 0:
        pytest.skip(f"cannot mount a size-limited tmpfs here ({res.stderr.strip() or res.returncode}); "
                    "the disk-full tests need root or CAP_SYS_ADMIN")


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs."""
    mnt = tmp_path / "fs"
    mnt.mkdir()
    _mount(mnt, "size=1m")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def remount(mnt: Path, options: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{options}", str(mnt)], check=True)


def fill(mnt: Path, leave: int = 0) -> Path:
    """Fill the file system, then free ``leave`` bytes (rounded to pages)."""
    filler = mnt / "filler"
    with open(filler, "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * PAGE)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
    if leave:
        os.truncate(filler, max(0, filler.stat().st_size - leave))
    return filler


def batch(seq: int, size: int = 900, keys: int = 0) -> bytes:
    key = b"k%d" % (seq % keys if keys else seq)
    return build_batch([Record(0, T0 + seq, key, b"%08d" % seq + b"x" * size, ())])


def records(log_dir: Path) -> list[tuple[int, bytes | None, bytes | None]]:
    out = []
    with LogManager([log_dir]) as m:
        for b in m.logs[TP].batches():
            b.ensure_valid()
            if not (isinstance(b, DefaultRecordBatch) and b.is_control):
                out += [(r.offset, r.key, r.value) for r in b.records()]
    return out


def test_append_until_the_disk_is_full(small_fs: Path) -> None:
    root = small_fs / "logs"
    root.mkdir()
    update_topic_configs(root, "t", {"segment.bytes": "200000", "index.interval.bytes": "2000"})
    acked = []
    m = LogManager([root], writable=True)
    log = m.create_log(TP)
    with pytest.raises(StorageError) as info:
        for seq in range(100_000):
            log.append(batch(seq), now_ms=T0 + seq)
            acked.append(seq)
    err = info.value
    assert err.errno == errno.ENOSPC and "the file system is full" in str(err) and "t-0" in str(err)
    assert 300 < len(acked) < 1200  # it really filled 1 MiB, with rolls on the way
    # the failed append left nothing behind: the log is valid and takes the same append once space is back
    assert log.log_end_offset == len(acked)
    assert [v[:8] for _, _, v in records(root)] == [b"%08d" % s for s in acked]  # type: ignore[index]
    remount(small_fs, "size=4m")
    first, _ = log.append(batch(len(acked)), now_ms=T0)
    assert first == len(acked)
    m.close()
    got = records(root)
    assert [o for o, _, _ in got] == list(range(len(acked) + 1))
    assert [v[:8] for _, _, v in got] == [b"%08d" % s for s in range(len(acked) + 1)]  # type: ignore[index]


def test_close_and_reopen_after_disk_full(small_fs: Path) -> None:
    """The process gives up when the disk is full (close may fail too); a restart with space recovers."""
    root = small_fs / "logs"
    root.mkdir()
    acked = []
    m = LogManager([root], writable=True)
    log = m.create_log(TP, LogConfig.from_properties({"segment.bytes": "100000"}))
    try:
        for seq in range(100_000):
            log.append(batch(seq, 2000), now_ms=T0 + seq)
            acked.append(seq)
    except StorageError:
        pass
    try:
        m.close()
    except StorageError as exc:  # checkpoints may not fit: typed, and the old ones stay
        assert exc.errno == errno.ENOSPC
    assert not list(root.glob("*.tmp"))
    remount(small_fs, "size=4m")
    got = records(root)
    assert [v[:8] for _, _, v in got] == [b"%08d" % s for s in acked]  # type: ignore[index]
    with LogManager([root], writable=True) as m2:
        m2.logs[TP].append(batch(len(acked)), now_ms=T0)
    assert len(records(root)) == len(acked) + 1


def test_checkpoint_write_on_a_full_disk_keeps_the_old_file(small_fs: Path) -> None:
    cp = OffsetCheckpointFile(small_fs / RECOVERY_POINT_OFFSET_CHECKPOINT)
    cp.write({TP: 5})
    fill(small_fs)
    with pytest.raises(StorageError, match="recovery-point-offset-checkpoint.*full"):
        cp.write({TopicPartition(f"topic-{i}", 0): i for i in range(2000)})
    assert cp.read() == {TP: 5}
    assert not list(small_fs.glob("*.tmp"))


def test_staging_and_commit_on_a_full_disk(small_fs: Path) -> None:
    root = small_fs / "logs"
    (root / "w-0").mkdir(parents=True)
    cfg = LogConfig.from_properties({"segment.bytes": "100000"})

    def stage(job: str, n: int) -> object:
        w = StagingWriter(root / "w-0", f".klog-staging-{job}-00000-0", cfg, CompressionType.NONE, 1 << 16)
        w.append(pa.table({"value": [b"%s-%06d-" % (job.encode(), i) + os.urandom(400) for i in range(n)]}), T0)
        return w.finish()

    commit_job("ok", [stage("ok", 200)], config=cfg)  # type: ignore[list-item]
    with pytest.raises(StorageError, match="full"):  # staging fills the disk: typed, nothing visible
        stage("big", 5000)
    assert collect_staging([root / "w-0"], job_id="big") == 1
    staged = stage("late", 100)
    filler = fill(small_fs)
    with pytest.raises(StorageError, match="committing job late.*full"):
        commit_job("late", [staged], config=cfg)  # type: ignore[list-item]
    vals = [v for _, _, v in records_w(root)]
    assert len(vals) == 200 and all(v.startswith(b"ok-") for v in vals)  # type: ignore[union-attr]
    filler.unlink()
    staged2 = stage("late2", 100)
    commit_job("late2", [staged2], config=cfg)  # type: ignore[list-item]
    vals = [v for _, _, v in records_w(root)]
    assert len(vals) == 300 and len(set(vals)) == 300


def records_w(root: Path) -> list[tuple[int, bytes | None, bytes | None]]:
    with Log(root / "w-0") as lg:
        return [(r.offset, r.key, r.value) for b in lg.batches() for r in b.records()]


def test_compaction_on_a_full_disk_leaves_the_log_as_it_was(small_fs: Path) -> None:
    root = small_fs / "logs"
    root.mkdir()
    update_topic_configs(root, "t", {"cleanup.policy": "compact", "segment.bytes": "60000"})
    with LogManager([root], writable=True) as m:
        log = m.create_log(TP)
        for seq in range(300):
            log.append(batch(seq, 800, keys=250), now_ms=T0 + seq)
        log.roll()
    before = records(root)
    filler = fill(small_fs, leave=8 * PAGE)
    with LogManager([root], writable=True) as m:
        with pytest.raises(StorageError, match="cleaning log.*full"):
            LogCleaner(1 << 20).clean_log(m.logs[TP])
        assert not list((root / "t-0").glob("*.cleaned"))
        filler.unlink()
    # groups swapped in before the disk filled are compacted, the rest is as it was: every record
    # still there is the one at that offset before, and every key keeps its latest value
    partial = records(root)
    by_offset = {o: (k, v) for o, k, v in before}
    assert all(by_offset[o] == (k, v) for o, k, v in partial)
    assert {k: (o, v) for o, k, v in partial} == {k: (o, v) for o, k, v in before}
    with LogManager([root], writable=True) as m:
        LogCleaner(1 << 20).clean_log(m.logs[TP])
    after = records(root)
    assert len(after) < len(before) and {k for _, k, _ in after} == {k for _, k, _ in before}


def test_read_only_file_system(small_fs: Path) -> None:
    root = small_fs / "logs"
    root.mkdir()
    with LogManager([root], writable=True) as m:
        log = m.create_log(TP)
        for seq in range(50):
            log.append(batch(seq, 100), now_ms=T0 + seq)
    before = records(root)
    remount(small_fs, "ro")
    try:
        assert records(root) == before  # reads work: a read-only open writes nothing
        with pytest.raises(StorageError, match="read-only") as info:
            LogManager([root], writable=True)
        assert info.value.errno == errno.EROFS
        with pytest.raises(StorageError, match="read-only"):
            Log(root / "t-0", writable=True)
        with pytest.raises(StorageError, match="read-only"):
            StagingWriter(root / "t-0", ".klog-staging-j-00000-0", LogConfig(), CompressionType.NONE, 1024)
        res = subprocess.run([sys.executable, "-m", "storage_core.tools.cli", "recover", str(root)], capture_output=True,
                             text=True, env={**os.environ, "KLOG_PROGRESS": "0"})
        assert res.returncode != 0 and res.stderr.startswith("klog: error:") and "read-only" in res.stderr
        assert "Traceback" not in res.stderr
        res = subprocess.run([sys.executable, "-m", "storage_core.tools.cli", "describe", str(root)], capture_output=True,
                             text=True)
        assert res.returncode == 0, res.stderr
    finally:
        remount(small_fs, "rw")


def test_an_append_call_is_all_or_nothing(tmp_path: Path) -> None:
    """A bad batch after good ones in one call (too large, or a producer offset going back) appends nothing."""
    from storage_core.errors import KlogError, RecordTooLargeError

    d = tmp_path / "t-0"
    d.mkdir()
    cfg = LogConfig.from_properties({"max.message.bytes": "2000", "segment.bytes": "3000"})
    with Log(d, cfg, writable=True) as lg:
        lg.append(batch(0, 100))
        with pytest.raises(RecordTooLargeError):
            lg.append(batch(1, 100) + batch(2, 100) + batch(3, 5000))
        assert lg.log_end_offset == 1
        segments = len(lg.segments)
        forward = b"".join(build_batch([Record(o, T0, b"k", b"x" * 900, ())]) for o in range(1, 6))
        back = build_batch([Record(2, T0, b"k", b"v", ())])
        with pytest.raises(KlogError, match="producer-assigned offset 2 is below"):  # written, rolled, then undone
            lg.append(forward + back, assign_offsets=False)
        assert lg.log_end_offset == 1 and len(lg.segments) == segments
        lg.append(batch(1, 100))
    assert [v[:8] for _, _, v in [(r.offset, r.key, r.value) for b in Log(d).batches() for r in b.records()]] == \
        [b"%08d" % 0, b"%08d" % 1]


@pytest.mark.parametrize("fmt", ["delta", "iceberg"])
def test_a_full_disk_under_a_table_is_a_storage_error(small_fs: Path, tmp_path: Path, fmt: str) -> None:
    """A sync whose table (or catalog) fills its file system: StorageError, exit 2 from the CLI, not an
    internal error; the table stays as of its last commit, and once there is space a rerun holds every
    record once."""
    from sync_gen import SyncWorkload

    from storage_core.tables import sync

    work = SyncWorkload(tmp_path / "data", 7, partitions=2)
    work.write(120, leave_open=False)
    kw: dict[str, object] = {"warehouse": small_fs / "wh"} if fmt == "iceberg" else {}
    to = "kafka.orders" if fmt == "iceberg" else str(small_fs / "delta")
    filler = fill(small_fs, leave=48 * 1024)
    with pytest.raises(StorageError, match="the file system is full"):
        sync(work.root, to, format=fmt, topics="orders", commit_records=100, **kw)  # type: ignore[arg-type]
    cli = [sys.executable, "-m", "storage_core.tools.cli", "sync", str(work.root), "--topic", "orders", "--to", to,
           "--format", fmt, "--commit-records", "100"] + (["--warehouse", str(small_fs / "wh")] if kw else [])
    res = subprocess.run(cli, capture_output=True, text=True)
    assert res.returncode == 2, res.stderr
    last = res.stderr.strip().splitlines()[-1]  # (delta-rs's own threads may print a panic of theirs before)
    assert last.startswith("klog: error: writing ") and "the file system is full" in last, res.stderr
    filler.unlink()
    sync(work.root, to, format=fmt, topics="orders", **kw)  # type: ignore[arg-type]
    if fmt == "delta":
        from deltalake import DeltaTable

        got = DeltaTable(to).to_pyarrow_table()
    else:
        from storage_core.tables.iceberg import embedded_catalog

        got = embedded_catalog(small_fs / "wh").load_table(to).scan().to_arrow()
    held: dict[tuple[str, int], dict[int, tuple[bytes | None, bytes | None]]] = {}
    for t, p, o, k, v in zip(*(got.column(c).to_pylist() for c in ("topic", "partition", "offset", "key", "value")),
                             strict=True):
        assert o not in held.setdefault((t, p), {}), f"{t}-{p} offset {o} twice"
        held[(t, p)][o] = (k, v)
    assert held == work.expected()
