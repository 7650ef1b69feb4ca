"""``klog snapshot SRC DST``: consistent, incremental copies of a log dir that another process writes.

The live test runs a writer in another process (klog's writable ``LogManager``: small segments so
it rolls often, ``retention.bytes`` so it deletes, ``file.delete.delay.ms=0`` so deleted files vanish
at once) whose records are a function of their offsets, and takes snapshots at random moments:
each must verify, open without recovery notes, and hold exactly the truth for
``[DST log start, DST end)``.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import shared_fixtures as sf

import storage_core as klog
from storage_core.errors import (
    CorruptCheckpointError,
    KlogError,
    LogDirLockedError,
    NotALogDirError,
    OffsetOutOfRangeError,
    SegmentGoneError,
    SnapshotError,
)
from storage_core.fs import StorageOptions, as_path
from storage_core.log.lock import LogDirLock
from storage_core.log.manager import find_partitions, open_log_read_only
from storage_core.tools.cli import main
from storage_core.tools.snapshot import SnapshotSummary, snapshot

WRITER = r"""
import os, sys, time
import pyarrow as pa
from storage_core.log.config import LogConfig
from storage_core.log.manager import LogManager
from storage_core.log.topic_partition import TopicPartition
from storage_core.record.columnar import encode_arrow

root, stop = sys.argv[1], sys.argv[2]
cfg = LogConfig.from_properties({"segment.bytes": "6000", "retention.bytes": "30000", "file.delete.delay.ms": "0",
                                 "index.interval.bytes": "700"})
lm = LogManager([root], writable=True, config=cfg)
tps = [TopicPartition("orders", 0), TopicPartition("orders", 1), TopicPartition("my.topic-x", 0)]
logs = [lm.create_log(tp) for tp in tps]
lm.checkpoint()
nxt = [0] * len(logs)
rounds = 0
while not os.path.exists(stop):
    for i, log in enumerate(logs):
        n = 3 + (rounds * 7 + i) % 11
        offs = range(nxt[i], nxt[i] + n)
        now = int(time.time() * 1000)
        t = pa.table({"key": pa.array([b"k%d" % o for o in offs], pa.binary()),
                      "value": pa.array([b"value-%d-" % o + b"x" * (o % 37) for o in offs], pa.binary()),
                      "timestamp": pa.array([now] * n, pa.int64())})
        for batch in encode_arrow(t, max_batch_bytes=300):
            log.append(batch)
        nxt[i] += n
    rounds += 1
    if rounds % 4 == 0:
        lm.retention()
    time.sleep(0.002)
lm.close()
"""


def value_of(offset: int) -> bytes:
    return b"value-%d-" % offset + b"x" * (offset % 37)


def start_writer(tmp_path: Path) -> tuple[subprocess.Popen[bytes], Path, Path]:
    src = tmp_path / "src"
    src.mkdir()
    stop = tmp_path / "stop"
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(src), str(stop)])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # until every partition has rolled a few times
        dirs = [src / d for d in ("orders-0", "orders-1", "my.topic-x-0")]
        if all(d.is_dir() and len(list(d.glob("*.log"))) >= 3 for d in dirs):
            return proc, src, stop
        assert proc.poll() is None, "the writer died"
        time.sleep(0.05)
    proc.kill()
    raise AssertionError("the writer did not start writing")


def check_snapshot(dst: str | Path, summary: SnapshotSummary, storage: dict[str, str] | None = None) -> None:
    """DST opens clean, reads back the truth for [start, end) of every partition, and (local) verifies."""
    opts = storage or {}
    parts = {str(pd.topic_partition): pd for pd in find_partitions(
        [dst], storage=StorageOptions.from_options(opts))}
    assert len(parts) == len(summary.partitions) == 3
    for pc in summary.partitions:
        with open_log_read_only(parts[f"{pc.topic}-{pc.partition}"]) as log:
            assert log.recovery_notes == [], log.recovery_notes
            assert (log.log_start_offset, log.log_end_offset) == (pc.start_offset, pc.end_offset)
    table = klog.read_arrow(str(dst), **opts).read_all()
    by_part: dict[tuple[str, int], list[tuple[int, bytes, bytes]]] = {}
    for row in table.select(["topic", "partition", "offset", "key", "value"]).to_pylist():
        by_part.setdefault((row["topic"], row["partition"]), []).append((row["offset"], row["key"], row["value"]))
    for pc in summary.partitions:
        rows = sorted(by_part.get((pc.topic, pc.partition), []))
        assert [r[0] for r in rows] == list(range(pc.start_offset, pc.end_offset)), (pc, rows[:3], rows[-3:])
        assert all(k == b"k%d" % o and v == value_of(o) for o, k, v in rows)


#: how the read path says a file went away under it (locally; in a bucket, an object deleted between
#: its listing and its GET)
VANISHED = ("no such segment file", "No such record file", "No such file", "Not a regular file", "no segments in",
            "RESOURCE_NOT_FOUND", "NoSuchKey")


def read_consistently(dst: Path | str, done: threading.Event, seen: list[int], failures: list[str],
                      options: dict[str, str] | None = None) -> None:
    """A reader of DST while snapshots run into it: every read is a log without gaps that holds the
    truth (a segment removed under it is a reason to read again, as for any reader of a live dir).

    In a bucket, pyarrow reads an object with a HEAD (its size) and then a ranged GET: a checkpoint
    replaced in between reads as the new object cut to the old size, which its entry count shows
    (CorruptCheckpointError): a reason to read again there too, never wrong data."""
    opts = options or {}
    while not done.is_set():
        if not (as_path(str(dst), StorageOptions.from_options(opts)) / "klog-snapshot.json").exists():
            time.sleep(0.05)
            continue
        try:
            table = klog.read_arrow(str(dst), **opts).read_all()
        except SegmentGoneError:
            continue
        except CorruptCheckpointError:
            if not opts:
                raise
            continue
        except OffsetOutOfRangeError:
            # DST's log start moved past everything it held, and the new first segment lands with the
            # next rename (an empty log at the new start in between, as a broker loads it)
            continue
        except (KlogError, OSError) as exc:
            # a file listed, then removed below the new log start before it was opened: the race of
            # every reader of a live log dir (the read path reports it in these words); or the moment
            # a DST whose old segments all fell below the source's log start has none
            if not any(w in str(exc) for w in VANISHED):
                failures.append(f"{type(exc).__name__}: {exc}")
            continue
        except Exception as exc:  # noqa: BLE001 - every other failure is what this test looks for
            failures.append(f"{type(exc).__name__}: {exc}")
            continue
        by_part: dict[tuple[str, int], list[tuple[int, bytes]]] = {}
        for row in table.select(["topic", "partition", "offset", "value"]).to_pylist():
            by_part.setdefault((row["topic"], row["partition"]), []).append((row["offset"], row["value"]))
        for key, rows in by_part.items():
            rows.sort()
            offsets = [o for o, _ in rows]
            if offsets != list(range(offsets[0], offsets[0] + len(offsets))):
                holes = [(a, b) for a, b in zip(offsets, offsets[1:], strict=False) if b != a + 1]
                failures.append(f"{key}: gaps {holes[:3]} in {offsets[0]}..{offsets[-1]}")
            if any(v != value_of(o) for o, v in rows):
                failures.append(f"{key}: a value differs from the truth")
        seen.append(len(by_part))


def _segments(log_dir: Path) -> set[str]:
    return {f"{p.parent.name}/{p.name}" for p in log_dir.glob("*/*.log")}


def _closed_segments(log_dir: Path) -> set[str]:
    """The segments of ``log_dir`` but each partition's last (active) one."""
    return {f"{d.name}/{p.name}" for d in log_dir.glob("*-*") for p in sorted(d.glob("*.log"))[:-1]}


def test_snapshots_of_a_live_writer_are_consistent_and_incremental(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    rng = random.Random(16)
    proc, src, stop = start_writer(tmp_path)
    dst = tmp_path / "dst"
    done = threading.Event()
    seen: list[int] = []
    failures: list[str] = []
    reader = threading.Thread(target=read_consistently, args=(dst, done, seen, failures), daemon=True)
    reader.start()
    try:
        summaries = []
        recopied = []
        for i in range(22):
            time.sleep(rng.uniform(0, 0.15))
            target = dst if i % 4 else tmp_path / f"fresh-{i}"  # mostly incremental, some from nothing
            closed = _closed_segments(target)
            s = snapshot(src, target)
            check_snapshot(target, s)
            assert main(["verify", str(target), "--quiet"]) == 0, capsys.readouterr()
            summaries.append((target == dst, s))
            # closed segments are copied once: one DST held closed before and still holds was skipped
            # (how many survive depends on how far the writer got meanwhile, and so on the machine's load)
            if closed & _segments(target) and s.segments_skipped == 0 and s.partitions_skipped == 0:
                recopied.append(f"snapshot {i}: {sorted(closed & _segments(target))[:3]} copied again")
        assert not recopied, recopied
        incremental = [s for same, s in summaries[1:] if same]
        assert any(s.segments_deleted > 0 for s in incremental)  # DST follows the source's retention
    finally:
        stop.touch()
        proc.wait(timeout=30)
        done.set()
        reader.join(timeout=60)
    assert failures == [] and len(seen) >= 5, (failures[:5], len(seen))
    last = snapshot(src, dst)  # what was written since, and the writer's close
    check_snapshot(dst, last)
    again = snapshot(src, dst)  # nothing new: nothing copied
    assert (again.files_copied, again.bytes_copied, again.segments_copied) == (0, 0, 0)
    assert again.segments_skipped > 0 or not _closed_segments(dst), again
    assert again.partitions_skipped == 3 and again.files_skipped > 0
    src_table = klog.read_arrow(str(src)).read_all().sort_by([("topic", "ascending"), ("partition", "ascending"),
                                                              ("offset", "ascending")])
    dst_table = klog.read_arrow(str(dst)).read_all().sort_by([("topic", "ascending"), ("partition", "ascending"),
                                                              ("offset", "ascending")])
    assert dst_table.equals(src_table)


def test_snapshots_into_s3_while_writing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    from s3_server import server_or_skip

    server = server_or_skip()
    storage = StorageOptions.from_options(server.options)
    proc, src, stop = start_writer(tmp_path)
    uri = server.bucket() + "/snap"
    done = threading.Event()
    seen: list[int] = []
    failures: list[str] = []
    reader = threading.Thread(target=read_consistently, args=(uri, done, seen, failures, server.options),
                              daemon=True)
    reader.start()
    try:
        for _ in range(4):
            time.sleep(0.2)
            s = snapshot(src, uri, storage=storage)
            check_snapshot(uri, s, server.options)
    finally:
        stop.touch()
        proc.wait(timeout=30)
        done.set()
        reader.join(timeout=60)
    assert failures == [] and len(seen) >= 2, (failures[:5], len(seen))
    for k, v in server.env.items():  # klog verify takes credentials from the environment
        monkeypatch.setenv(k, v)
    assert main(["verify", uri, "--quiet"]) == 0, capsys.readouterr()
    snapshot(src, uri, storage=storage)
    again = snapshot(src, uri, storage=storage)
    assert (again.files_copied, again.bytes_copied) == (0, 0)
    got = klog.read_arrow(uri, **server.options).read_all().sort_by([("topic", "ascending"),
                                                                     ("partition", "ascending"),
                                                                     ("offset", "ascending")])
    want = klog.read_arrow(str(src)).read_all().sort_by([("topic", "ascending"), ("partition", "ascending"),
                                                          ("offset", "ascending")])
    assert got.equals(want)
    back = tmp_path / "back"  # and from the bucket to a local dir: SRC may be a URI too
    s = snapshot(uri, back, storage=storage)
    check_snapshot(back, s)
    assert _sorted(klog.read_arrow(str(back)).read_all()).equals(want)
    assert snapshot(uri, back, storage=storage).files_copied == 0


def _broker_dirs() -> list[Path]:
    if not sf.available():
        return []
    return sorted({p.parent.parent for p in sf.KAFKA_FIXTURES.rglob("*.log")
                   if "captures" not in str(p) and "generated" not in str(p) and "vectors" not in str(p)})


def _sorted(t: pa.Table) -> pa.Table:
    return t.sort_by([("topic", "ascending"), ("partition", "ascending"), ("offset", "ascending")])


@pytest.mark.parametrize("src", sf.params(_broker_dirs(), "broker log dirs"))
def test_snapshot_of_every_broker_log_dir_reads_the_same(src: Path, tmp_path: Path) -> None:
    dst = tmp_path / "dst"
    s = snapshot(src, dst)
    assert s.partitions_copied == len(s.partitions) > 0
    lost = sf.lost_partitions(src)  # partitions whose .log files are gone: named, not copied
    assert len(s.lost) == len(lost) and all(sf.names_loss(x, src) for x in s.lost), s.lost
    assert main(["verify", str(dst), "--quiet"]) == 0
    assert _sorted(klog.read_arrow(str(dst), includeHeaders=True).read_all()).equals(
        _sorted(klog.read_arrow(str(src), includeHeaders=True, **sf.tolerant_options(src)).read_all()))
    again = snapshot(src, dst)
    assert again.files_copied == 0 and again.partitions_skipped == len(again.partitions)
    for extra in [*src.glob("bootstrap.checkpoint"), *src.glob("__cluster_metadata-0/*-*.checkpoint"),
                  *src.glob("*/partition.metadata"), *src.glob("meta.properties")]:  # KRaft's own files
        if extra.parent != src and not list(extra.parent.glob("*.log")):
            continue  # a partition dir without segments (orphan indexes) is not copied
        assert (dst / extra.relative_to(src)).read_bytes() == extra.read_bytes(), extra


def _small_log_dir(root: Path) -> Path:
    from storage_core.log.config import LogConfig
    from storage_core.log.log import Log
    from storage_core.record.records import Record, build_batch

    cfg = LogConfig.from_properties({"segment.bytes": "2048", "index.interval.bytes": "256"})
    d = root / "orders-0"
    d.mkdir(parents=True)
    with Log(d, cfg, writable=True) as log:
        for i in range(30):
            log.append(build_batch([Record(j, 1_700_000_000_000 + i, b"k", b"v" * 40) for j in range(5)]))
    return root


def klog_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "storage_core.tools.cli", *args], capture_output=True, text=True,
                          env=None if env is None else {**os.environ, **env})


def test_cli_json_summary_and_exit_codes(tmp_path: Path) -> None:
    src = _small_log_dir(tmp_path / "src")
    dst = tmp_path / "dst"
    res = klog_cli("snapshot", str(src), str(dst), "--json")
    assert res.returncode == 0, res.stderr
    first: dict[str, Any] = json.loads(res.stdout)
    assert first["partitions_copied"] == 1 and first["segments_copied"] > 1 and first["bytes_copied"] > 0
    assert {"bytes_skipped", "segments_skipped", "partitions_skipped", "files_copied"} <= set(first)
    res = klog_cli("snapshot", str(src), str(dst), "--json")
    again = json.loads(res.stdout)
    assert res.returncode == 0 and again["bytes_copied"] == 0 and again["partitions_skipped"] == 1
    assert again["segments_skipped"] == first["segments_copied"]
    res = klog_cli("snapshot", str(src), str(dst))
    assert res.returncode == 0 and "snapshot of" in res.stdout and "0 segments copied" in res.stdout
    assert klog_cli("verify", str(dst)).returncode == 0
    # usage errors: exit 2, one line, nothing written
    assert klog_cli("snapshot", str(src), str(src / "inside")).returncode == 2
    assert not (src / "inside").exists()
    other = _small_log_dir(tmp_path / "other")
    res = klog_cli("snapshot", str(src), str(other))
    assert res.returncode == 2 and "not a klog snapshot" in res.stderr and not (other / ".lock").exists()
    res = klog_cli("snapshot", str(tmp_path / "nowhere"), str(tmp_path / "d2"))
    assert res.returncode == 2 and "no such log directory" in res.stderr
    res = klog_cli("snapshot", str(other), str(dst))
    assert res.returncode == 2 and "is a snapshot of" in res.stderr
    with LogDirLock(dst):
        res = klog_cli("snapshot", str(src), str(dst))
    assert res.returncode == 2 and "locked" in res.stderr
    res = klog_cli("snapshot", str(src), str(tmp_path / "d3"), "--fs", "nonsense")
    assert res.returncode == 2 and "--fs expects KEY=VALUE" in res.stderr


def test_python_api_errors(tmp_path: Path) -> None:
    src = _small_log_dir(tmp_path / "src")
    (tmp_path / "empty").mkdir()
    with pytest.raises(NotALogDirError):
        snapshot(tmp_path / "empty", tmp_path / "d")
    with pytest.raises(SnapshotError):
        snapshot(src, src / "orders-0" / "x")
    snapshot(src, tmp_path / "d")
    with LogDirLock(tmp_path / "d"), pytest.raises(LogDirLockedError):
        snapshot(src, tmp_path / "d")


def test_a_segment_replaced_at_the_source_is_copied_again(tmp_path: Path) -> None:
    """A compaction swaps in a new file under the same name: identity and checksum differ."""
    from storage_core.cleaner import LogCleaner
    from storage_core.log.config import LogConfig
    from storage_core.log.log import Log
    from storage_core.record.records import Record, build_batch

    src = tmp_path / "src"
    d = src / "orders-0"
    d.mkdir(parents=True)
    cfg = LogConfig.from_properties({"segment.bytes": "3000", "cleanup.policy": "compact"})
    with Log(d, cfg, writable=True) as log:
        for i in range(60):
            log.append(build_batch([Record(0, 1_700_000_000_000 + i, b"key-%d" % (i % 3), b"v%d" % i)]))
        log.roll()
    dst = tmp_path / "dst"
    snapshot(src, dst)
    with Log(d, cfg, writable=True) as log:
        assert LogCleaner(1 << 20, now_ms=1_700_000_000_000).clean_log(log, force=True) is not None
    s = snapshot(src, dst)
    assert s.segments_copied >= 1
    assert main(["verify", str(dst), "--quiet"]) == 0
    assert _sorted(klog.read_arrow(str(dst)).read_all()).equals(_sorted(klog.read_arrow(str(src)).read_all()))


def test_no_secret_in_errors(tmp_path: Path) -> None:
    from s3_server import server_or_skip

    server = server_or_skip()
    src = _small_log_dir(tmp_path / "src")
    secret = "WrongSecretValue-987654"
    res = klog_cli("snapshot", str(src), server.bucket() + "/x", "--fs", f"endpoint_override={server.endpoint}",
                   "--fs", "scheme=http", "--fs", "region=us-east-1", "--fs", "access_key=klogtestkey",
                   "--fs", f"secret_key={secret}")
    assert res.returncode != 0
    assert secret not in res.stderr + res.stdout and "klog: error:" in res.stderr


def test_aborted_transactions_read_committed_the_same(tmp_path: Path) -> None:
    """Aborted transactions in closed segments and in the active one (the writer still has it open)."""
    from storage_core.log.config import LogConfig
    from storage_core.log.log import Log
    from storage_core.record.control import ControlRecordType, EndTransactionMarker
    from storage_core.record.records import Record, build_batch, build_end_txn_marker

    def data(pid: int, n: int, seq: int) -> bytes:
        return build_batch([Record(i, 1_700_000_000_000 + i, b"k%d" % i, b"p%d" % pid) for i in range(n)],
                           producer_id=pid, producer_epoch=0, base_sequence=seq, is_transactional=True)

    def marker(pid: int, abort: bool) -> bytes:
        kind = ControlRecordType.ABORT if abort else ControlRecordType.COMMIT
        return build_end_txn_marker(0, 1_700_000_000_000, 0, pid, 0, EndTransactionMarker(kind, 3))

    src = tmp_path / "src"
    d = src / "payments-0"
    d.mkdir(parents=True)
    log = Log(d, LogConfig.from_properties({"segment.bytes": "1500", "index.interval.bytes": "200"}), writable=True)
    seq = {1: 0, 2: 0}
    for i in range(40):
        pid = 1 + i % 2
        log.append(data(pid, 3, seq[pid]))
        seq[pid] += 3
        if i % 3 == 2:
            log.append(marker(1, abort=i % 2 == 0))
            log.append(marker(2, abort=i % 4 == 1))
    log.flush()  # no close: the active segment is a live one, with no clean shutdown
    assert len(list(d.glob("*.log"))) > 3 and any(p.stat().st_size for p in d.glob("*.txnindex"))
    dst = tmp_path / "dst"
    snapshot(src, dst)
    assert main(["verify", str(dst), "--quiet"]) == 0
    for level in ("read_committed", "read_uncommitted"):
        assert _sorted(klog.read_arrow(str(dst), isolationLevel=level).read_all()).equals(
            _sorted(klog.read_arrow(str(src), isolationLevel=level).read_all())), level
    log.close()


def test_untrimmed_and_missing_indexes_of_closed_segments(tmp_path: Path) -> None:
    """A broker's closed segment may keep a preallocated (zero-filled) index, or have lost it."""
    src = _small_log_dir(tmp_path / "src")
    part = src / "orders-0"
    segs = sorted(part.glob("*.log"))
    assert len(segs) >= 3
    untrimmed = segs[0].with_suffix(".index")
    untrimmed.write_bytes(untrimmed.read_bytes() + bytes(8 * 100))
    segs[1].with_suffix(".index").unlink()
    segs[1].with_suffix(".timeindex").unlink()
    dst = tmp_path / "dst"
    snapshot(src, dst)
    copied = dst / "orders-0" / untrimmed.name
    assert copied.stat().st_size == untrimmed.stat().st_size - 800  # trimmed as a roll trims it
    assert (dst / "orders-0" / segs[1].with_suffix(".index").name).is_file()  # built from the bytes
    from storage_core.log.manager import PartitionDir
    from storage_core.log.topic_partition import TopicPartition
    from storage_core.tools.report import verify_partition

    rep = verify_partition(PartitionDir(TopicPartition("orders", 0), dst / "orders-0", dst), 256)
    assert rep.errors == [] and rep.warnings == []
    assert _sorted(klog.read_arrow(str(dst)).read_all()).equals(_sorted(klog.read_arrow(str(src)).read_all()))


def test_progress_bar_and_torn_active_tail(tmp_path: Path) -> None:
    """A batch still being written at the end of the active segment is left out (and said so)."""
    src = _small_log_dir(tmp_path / "src")
    active = sorted((src / "orders-0").glob("*.log"))[-1]
    whole = active.read_bytes()
    with open(active, "ab") as f:
        f.write(whole[:40])  # the first 40 bytes of a batch: its header says more follows
    res = klog_cli("snapshot", str(src), str(tmp_path / "dst"), env={"KLOG_PROGRESS": "1"})
    assert res.returncode == 0, res.stderr
    assert "snapshot" in res.stderr and "left out" in res.stderr  # the bar and the note
    assert (tmp_path / "dst" / "orders-0" / active.name).stat().st_size == len(whole)
    assert klog_cli("verify", str(tmp_path / "dst")).returncode == 0


def test_retention_past_everything_dst_holds_and_partitions_coming_and_going(tmp_path: Path) -> None:
    from storage_core.log.config import LogConfig
    from storage_core.log.manager import LogManager
    from storage_core.log.topic_partition import TopicPartition
    from storage_core.record.records import Record, build_batch

    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    cfg = LogConfig.from_properties({"segment.bytes": "1200", "retention.bytes": "2500", "retention.ms": "-1"})
    with LogManager([src], writable=True, config=cfg) as lm:
        log = lm.create_log(TopicPartition("orders", 0))
        gone = lm.create_log(TopicPartition("old", 0))
        n = 0

        def append(count: int) -> None:
            nonlocal n
            for _ in range(count):
                log.append(build_batch([Record(0, 1_700_000_000_000 + n, b"k%d" % n, value_of(n))]))
                n += 1

        append(40)
        gone.append(build_batch([Record(0, 1_700_000_000_000, b"k", b"v")]))
        first = snapshot(src, dst)
        old_bases = sorted(p.name for p in (dst / "orders-0").glob("*.log"))
        assert len(old_bases) > 2 and first.partitions_copied == 2
        append(120)
        lm.retention()  # everything DST holds is now below the source's log start
        lm.delete_log(TopicPartition("old", 0))
        lm.create_log(TopicPartition("new", 0)).append(build_batch([Record(0, 1_700_000_000_000, b"k", b"v")]))
        lm.checkpoint()
        assert log.segments[0].base_offset > int(old_bases[-1].split(".")[0])  # DST's last is gone too
        s = snapshot(src, dst)
        assert s.partitions_deleted == 1 and not (dst / "old-0").exists() and (dst / "new-0").is_dir()
        assert s.segments_deleted >= len(old_bases)
        assert not set(old_bases) & {p.name for p in (dst / "orders-0").glob("*.log")}
        by_tp = {(p.topic, p.partition): p for p in s.partitions}
        pc = by_tp[("orders", 0)]
        assert (pc.start_offset, pc.end_offset) == (log.log_start_offset, log.log_end_offset)
    assert main(["verify", str(dst), "--quiet"]) == 0
    check = klog.read_arrow(str(dst), topics="orders").read_all().to_pylist()
    assert [r["offset"] for r in check] == list(range(pc.start_offset, pc.end_offset))
    assert all(r["value"] == value_of(r["offset"]) for r in check)
    assert "new 0" in (dst / "recovery-point-offset-checkpoint").read_text()
    assert "old 0" not in (dst / "recovery-point-offset-checkpoint").read_text()


@pytest.mark.parametrize("seed", [3, 17])
def test_every_state_dst_passes_through_reads_without_a_gap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             seed: int) -> None:
    """Each file an incremental snapshot writes or deletes leaves DST a consistent log: read after
    every step (with the checkpoints of the last run, as a reader that read them before listing
    sees them), it gives a contiguous run of the truth, never a loss. Retention at the source
    (and a log start moved inside a segment, as DeleteRecords moves it) deletes some of DST's
    segments, and the active segment grows and rolls."""
    from storage_core.log.config import LogConfig
    from storage_core.log.manager import LogManager
    from storage_core.log.topic_partition import TopicPartition
    from storage_core.record.records import Record, build_batch
    from storage_core.tools import snapshot as snap_mod

    rng = random.Random(seed)
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    cfg = LogConfig.from_properties({"segment.bytes": "1200", "retention.bytes": "4000", "retention.ms": "-1",
                                     "index.interval.bytes": "200", "file.delete.delay.ms": "0"})
    states: list[str] = []

    before: dict[str, bytes] = {}  # DST's checkpoints as the run found them

    def read_dst(step: str) -> None:
        import shutil

        # DST as it is, and as a reader sees it that read the checkpoints before this run wrote them
        stale = tmp_path / "stale"
        shutil.rmtree(stale, ignore_errors=True)
        shutil.copytree(dst, stale)
        for name, data in before.items():
            (stale / name).write_bytes(data)
        for where in (dst, stale):
            read_one(where, f"{step}{' (checkpoints read before the run)' if where == stale else ''}")

    def read_one(where: Path, step: str) -> None:
        try:
            rows = klog.read_arrow(str(where), topics="orders").read_all().select(["offset", "value"]).to_pylist()
        except klog.KlogError as exc:
            states.append(f"seed {seed}, after {step}: {type(exc).__name__}: {exc}")
            return
        offsets = [r["offset"] for r in rows]
        if offsets != list(range(offsets[0], offsets[0] + len(offsets))) if offsets else False:
            states.append(f"seed {seed}, after {step}: a gap in {offsets[0]}..{offsets[-1]}")
        if any(r["value"] != value_of(r["offset"]) for r in rows):
            states.append(f"seed {seed}, after {step}: a value differs from the truth")

    with LogManager([src], writable=True, config=cfg) as lm:
        log = lm.create_log(TopicPartition("orders", 0))
        n = deleted = 0
        for _round in range(4):
            for _ in range(rng.randint(15, 40)):
                log.append(build_batch([Record(0, 1_700_000_000_000 + n, b"k%d" % n, value_of(n))]))
                n += 1
            # a DeleteRecords-like log start inside a segment, then retention below it
            log.log_start_offset = rng.randint(log.log_start_offset, (log.log_start_offset + n) // 2)
            lm.retention()
            lm.checkpoint()
            if _round == 0:
                snapshot(src, dst)
                continue
            before.clear()
            before.update({p.name: p.read_bytes() for p in dst.glob("*-checkpoint")})
            real_delete, real_commit = snap_mod._LocalDest.delete, snap_mod._LocalSink.commit

            def delete(self: Any, rel: str, real: Any = real_delete) -> None:
                real(self, rel)
                read_dst(f"deleting {rel}")

            def commit(self: Any, real: Any = real_commit) -> None:
                real(self)
                read_dst(f"writing {self._path.name}")

            with monkeypatch.context() as m:
                m.setattr(snap_mod._LocalDest, "delete", delete)
                m.setattr(snap_mod._LocalSink, "commit", commit)
                s = snapshot(src, dst)
            deleted += s.segments_deleted
    assert states == [], states[:5]
    assert deleted > 0  # DST followed the source's retention
    assert klog.read_arrow(str(dst)).read_all().num_rows == log.log_end_offset - log.log_start_offset
