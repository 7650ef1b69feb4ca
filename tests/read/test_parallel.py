"""The paths without Spark on several threads (``storage_core.workers``): ``read_arrow`` and
``klog export`` decode pieces at once, ``klog compact``/``verify``/``recover`` work on several
partitions at once, and each gives exactly what one thread gives.

Random log dirs written by klog's own writer (seeded; the seed is in every assertion's message):
many partitions of several segments each, batches in every codec, transactions committed and
aborted (and one left open), read whole and read_committed with 1, 2 and 8 threads. Also: a
reader closed early leaves no thread behind, damage in a middle piece raises the same error
after the same rows, and compaction, verify and recovery with 1 and 4 workers leave the same
bytes in every file and print the same report.
"""

from __future__ import annotations

import gc
import hashlib
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import storage_core
from storage_core.errors import DataLossError, InvalidOptionError, KlogError
from storage_core.log.config import LogConfig
from storage_core.log.log import Log
from storage_core.log.manager import LogManager
from storage_core.log.topic_configs import update_topic_configs
from storage_core.read.piece_reader import read_pieces
from storage_core.read.planner import ReadPlan
from storage_core.record.compression import CompressionType
from storage_core.record.control import ControlRecordType, EndTransactionMarker
from storage_core.record.records import Record, build_batch, build_end_txn_marker
from storage_core.tools.export import ExportRequest, export_parquet, export_parquet_per_partition, plan_export
from storage_core.workers import THREADS_ENV, pool_size, stream_in_order

T0 = 1_700_000_000_000
CODECS = (CompressionType.NONE, CompressionType.GZIP, CompressionType.LZ4, CompressionType.ZSTD,
          CompressionType.SNAPPY)
SEEDS = (1, 29)


def write_partition(d: Path, rng: random.Random, cfg: LogConfig, batches: int) -> None:
    """``batches`` batches of random codecs into the partition dir ``d``: plain ones, and
    transactions of one producer, committed or aborted (the last one of some partitions left open)."""
    d.mkdir(parents=True)
    pid = 1000 + rng.randrange(1000)
    seq = 0
    with Log(d, cfg, writable=True) as log:
        offset = 0
        open_txn = False
        for i in range(batches):
            n = rng.randint(1, 40)
            recs = [Record(offset + j, T0 + offset + j, b"k%d" % rng.randrange(50),
                           None if rng.random() < 0.05 else rng.randbytes(rng.randint(0, 200)))
                    for j in range(n)]
            codec = rng.choice(CODECS)
            if rng.random() < 0.3 or open_txn:
                log.append(build_batch(recs, compression=codec, producer_id=pid, producer_epoch=0,
                                       base_sequence=seq, is_transactional=True), now_ms=T0 + offset)
                seq += n
                open_txn = True
                if rng.random() < 0.6 and i < batches - 1:
                    kind = ControlRecordType.ABORT if rng.random() < 0.5 else ControlRecordType.COMMIT
                    log.append(build_end_txn_marker(0, T0 + offset, 0, pid, 0, EndTransactionMarker(kind, 0)),
                               now_ms=T0 + offset)
                    open_txn = False
            else:
                log.append(build_batch(recs, compression=codec), now_ms=T0 + offset)
            offset = log.log_end_offset
        if open_txn and rng.random() < 0.5:
            log.append(build_end_txn_marker(0, T0 + offset, 0, pid, 0,
                                            EndTransactionMarker(ControlRecordType.COMMIT, 0)), now_ms=T0 + offset)


def make_log_dir(root: Path, seed: int, *, partitions: int = 8, batches: int = 60, topics: int = 2,
                 segment_bytes: int | None = None) -> Path:
    rng = random.Random(seed)
    cfg = LogConfig.from_properties({"segment.bytes": str(segment_bytes or rng.choice((3000, 6000, 12000))),
                                     "index.interval.bytes": "500"})
    root.mkdir(parents=True, exist_ok=True)
    for t in range(topics):
        for p in range(partitions):
            write_partition(root / f"topic{t}-{p}", rng, cfg, rng.randint(batches // 2, batches))
    LogManager([root], writable=True).close()  # checkpoints and the clean-shutdown marker, as a broker leaves them
    return root


@pytest.fixture(scope="module", params=SEEDS)
def logs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[int, Path]:
    seed = request.param
    return seed, make_log_dir(tmp_path_factory.mktemp(f"par{seed}") / "data", seed)


def klog(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "storage_core.tools.cli", *args], capture_output=True, text=True,
                          env=env)


def extra_threads(before: set[threading.Thread], wait: float = 2.0) -> list[threading.Thread]:
    """The threads alive now that were not before (after ``wait`` s at most for them to end)."""
    deadline = time.monotonic() + wait
    while True:
        extra = [t for t in threading.enumerate() if t not in before and t.is_alive()]
        if not extra or time.monotonic() > deadline:
            return extra
        time.sleep(0.01)


# --- the rule and the runner ---------------------------------------------------------------------


def test_pool_size_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(THREADS_ENV, raising=False)
    assert 1 <= pool_size() <= 8
    assert pool_size(16, 3) == 3  # never more threads than items
    assert pool_size(None, 0) == 1
    assert pool_size(5) == 5
    monkeypatch.setenv(THREADS_ENV, "3")
    assert pool_size() == 3 and pool_size(2) == 2  # an explicit request wins over the environment
    monkeypatch.setenv(THREADS_ENV, "zero")
    with pytest.raises(InvalidOptionError, match="KLOG_THREADS"):
        pool_size()
    with pytest.raises(InvalidOptionError):
        pool_size(0)


@pytest.mark.parametrize("workers", [1, 2, 8])
def test_stream_in_order_keeps_order_and_raises_in_place(workers: int) -> None:
    rng = random.Random(workers)
    sizes = [rng.randint(0, 7) for _ in range(40)]
    sizes[23] = 5

    def produce(i: int):  # type: ignore[no-untyped-def]
        for j in range(sizes[i]):
            time.sleep(rng.random() / 2000)
            if i == 23 and j == 2:
                raise KlogError(f"item {i} fails")
            yield (i, j)

    done: list[int] = []
    got = []
    with pytest.raises(KlogError, match="item 23 fails"):
        for r in stream_in_order(range(40), produce, workers, done=done.append):
            got.append(r)
    want = [(i, j) for i in range(23) for j in range(sizes[i])] + [(23, 0), (23, 1)]
    assert got == want
    assert done == list(range(23))


# --- read_arrow and export -----------------------------------------------------------------------


def _table(path: Path, **options: object) -> pa.Table:
    return storage_core.read_arrow(path, **options).read_all().combine_chunks()


@pytest.mark.parametrize("isolation", ["read_uncommitted", "read_committed"])
def test_read_arrow_same_table_with_any_thread_count(logs: tuple[int, Path], isolation: str) -> None:
    seed, root = logs
    plan = storage_core.plan(root, isolationLevel=isolation)
    assert len(plan.pieces) > 2 * 8, f"seed {seed}: the dir should make many pieces"
    serial = _table(root, isolationLevel=isolation, maxThreads=1)
    assert serial.num_rows > 0
    for threads in (2, 8):
        got = _table(root, isolationLevel=isolation, maxThreads=threads, includeHeaders=False)
        assert got.equals(serial), f"seed {seed}: {threads} threads, {isolation}"
    with_meta = _table(root, isolationLevel=isolation, maxThreads=1, includeHeaders=True, includeMetadata=True)
    assert _table(root, isolationLevel=isolation, maxThreads=4, includeHeaders=True,
                  includeMetadata=True).equals(with_meta), f"seed {seed}"


def test_read_arrow_on_8_threads_again_and_again(logs: tuple[int, Path]) -> None:
    """The thread-safety check of issue 29 (also run under ASan+UBSan, docs/testing.md): every
    partition's pieces decoded by 8 threads at once, read_committed with headers, five times over,
    each time the single-threaded table."""
    seed, root = logs
    options = {"isolationLevel": "read_committed", "includeHeaders": True}
    serial = _table(root, maxThreads=1, **options)
    for round_ in range(5):
        assert _table(root, maxThreads=8, **options).equals(serial), f"seed {seed}: round {round_}"


def test_read_pieces_threads_one_starts_no_thread(logs: tuple[int, Path]) -> None:
    _, root = logs
    pieces = storage_core.plan(root).pieces
    before = set(threading.enumerate())
    seen = []
    for _ in read_pieces(pieces, threads=1):
        seen.extend(t for t in threading.enumerate() if t not in before)
    assert seen == []


def _as_live(root: Path, dst: Path) -> Path:
    """A copy of ``root`` as a running broker's dir looks: no clean-shutdown marker, and recovery
    points at 0, so that opening any partition is a read-only recovery of all of it."""
    import shutil

    shutil.copytree(root, dst)
    (dst / ".kafka_cleanshutdown").unlink()
    lines = (dst / "recovery-point-offset-checkpoint").read_text().splitlines()
    (dst / "recovery-point-offset-checkpoint").write_text(
        "\n".join(lines[:2] + [" ".join(line.split()[:2] + ["0"]) for line in lines[2:]]) + "\n")
    return dst


@pytest.mark.parametrize("isolation", ["read_uncommitted", "read_committed"])
def test_plan_opens_partitions_on_threads_same_plan(logs: tuple[int, Path], tmp_path: Path, isolation: str) -> None:
    """The planner opens partitions on threads: a live-looking dir (each open recovers the whole
    partition in memory, its transactions replayed when read_committed asks) planned with 1 and 4
    threads gives the same ranges and pieces, aborted transactions included, and the same rows as
    the cleanly shut down original."""
    seed, root = logs
    live = _as_live(root, tmp_path / "live")
    one = storage_core.plan(live, isolationLevel=isolation, maxThreads=1)
    four = storage_core.plan(live, isolationLevel=isolation, maxThreads=4)
    assert one.ranges == four.ranges and one.pieces == four.pieces, f"seed {seed}"
    def spans(plan: ReadPlan) -> list[tuple[object, int, int]]:
        return [(r.topic_partition, r.start, r.end) for r in plan.ranges]

    assert spans(storage_core.plan(root, isolationLevel=isolation)) == spans(one), f"seed {seed}"
    if isolation == "read_committed":
        assert any(p.aborted for p in one.pieces), f"seed {seed}: the dir should hold aborted transactions"
    assert _table(live, isolationLevel=isolation, maxThreads=4).equals(
        _table(root, isolationLevel=isolation, maxThreads=1)), f"seed {seed}"


def test_max_threads_option_is_checked(logs: tuple[int, Path]) -> None:
    _, root = logs
    with pytest.raises(InvalidOptionError, match="maxThreads"):
        storage_core.read_arrow(root, maxThreads=0)
    with pytest.raises(InvalidOptionError, match="maxThreads"):
        storage_core.read_arrow(root, maxThreads="many")


@pytest.mark.parametrize("how", ["drop", "exhaust", "generator-close", "error"])
def test_stopping_early_leaves_no_thread(logs: tuple[int, Path], how: str) -> None:
    """(pyarrow's ``RecordBatchReader.close()`` keeps the Python source until the reader is dropped:
    the threads end then.)"""
    seed, root = logs
    before = set(threading.enumerate())
    reader = storage_core.read_arrow(root, maxThreads=4)
    first = reader.read_next_batch()
    assert first.num_rows > 0
    assert [t for t in threading.enumerate() if t not in before], "the read should run on threads"
    if how == "drop":
        del reader
        gc.collect()
    elif how == "exhaust":
        reader.read_all()
    else:
        del reader
        batches = read_pieces(storage_core.plan(root).pieces, threads=4)
        next(batches)
        if how == "generator-close":
            batches.close()
        else:
            with pytest.raises(RuntimeError):
                batches.throw(RuntimeError("the consumer fails"))
    assert extra_threads(before) == [], f"seed {seed}: {how}"


def test_export_same_parquet_rows_with_any_thread_count(logs: tuple[int, Path], tmp_path: Path) -> None:
    seed, root = logs
    tables = {}
    for threads in (1, 2, 8):
        req = ExportRequest(log_dirs=(str(root),), topic="topic1", read_committed=True, include_headers=True,
                            threads=threads)
        done: list[int] = []
        summary = export_parquet(req, plan_export(req), tmp_path / f"t{threads}.parquet", progress=done.append)
        assert sum(done) == summary.bytes_read
        tables[threads] = pq.read_table(tmp_path / f"t{threads}.parquet").combine_chunks()
    assert tables[1].num_rows > 0
    assert tables[2].equals(tables[1]), f"seed {seed}"
    assert tables[8].equals(tables[1]), f"seed {seed}"


def test_export_cli_threads_flag(logs: tuple[int, Path], tmp_path: Path) -> None:
    seed, root = logs
    outs = []
    for threads in ("1", "3"):
        out = tmp_path / f"cli{threads}.parquet"
        res = klog("export", str(root), "--topic", "topic0", "-o", str(out), "--threads", threads)
        assert res.returncode == 0, res.stderr
        outs.append((res.stdout.replace(str(out), "OUT"), pq.read_table(out)))
    assert outs[0][0] == outs[1][0]
    assert outs[0][1].equals(outs[1][1]), f"seed {seed}"
    res = klog("export", str(root), "--topic", "topic0", "-o", str(tmp_path / "x.parquet"), "--threads", "0")
    assert res.returncode == 2 and "--threads" in res.stderr


def test_export_per_partition_same_files_with_any_thread_count(logs: tuple[int, Path], tmp_path: Path) -> None:
    """A file per partition, written several at once: byte for byte the same files whatever the
    thread count, and together the rows of the one-file export, each file one partition's in order."""
    seed, root = logs
    req = ExportRequest(log_dirs=(str(root),), topic="topic1", read_committed=True, include_headers=True, threads=1)
    plan = plan_export(req)
    export_parquet(req, plan, tmp_path / "one.parquet")
    one = pq.read_table(tmp_path / "one.parquet").combine_chunks()
    digests = {}
    for threads in (1, 2, 8):
        req = ExportRequest(log_dirs=(str(root),), topic="topic1", read_committed=True, include_headers=True,
                            threads=threads)
        done: list[int] = []
        before = set(threading.enumerate())
        summary = export_parquet_per_partition(req, plan_export(req), tmp_path / f"t{threads}", progress=done.append)
        assert extra_threads(before) == []
        assert sum(done) == summary.bytes_read == plan.nbytes
        assert summary.records == one.num_rows > 0 and summary.files == len(plan.ranges)
        digests[threads] = files_of(tmp_path / f"t{threads}")
        assert summary.bytes_written == sum(f.stat().st_size for f in (tmp_path / f"t{threads}").iterdir())
    assert sorted(digests[1]) == [f"topic1-{r.topic_partition.partition}.parquet" for r in plan.ranges]
    assert digests[2] == digests[1] and digests[8] == digests[1], f"seed {seed}"
    parts = []
    for r in plan.ranges:  # in partition order, as the one-file export holds them
        t = pq.read_table(tmp_path / "t2" / f"topic1-{r.topic_partition.partition}.parquet")
        assert t.schema.equals(one.schema)
        assert set(t.column("partition").to_pylist()) <= {r.topic_partition.partition}, f"seed {seed}"
        parts.append(t)
    assert pa.concat_tables(parts).combine_chunks().equals(one), f"seed {seed}"


def test_export_per_partition_failure_leaves_the_directory_as_it_was(tmp_path: Path) -> None:
    root = make_log_dir(tmp_path / "data", 7, partitions=4, batches=150, segment_bytes=40000, topics=1)
    req = ExportRequest(log_dirs=(str(root),), topic="topic0", threads=2)
    earlier = tmp_path / "earlier"
    export_parquet_per_partition(req, plan_export(req), earlier)
    before_files = files_of(earlier)
    _corrupt_middle(root, random.Random(7))
    plan = plan_export(req)
    for out, overwrite in ((tmp_path / "new", False), (earlier, True)):
        threads = set(threading.enumerate())
        with pytest.raises(DataLossError):
            export_parquet_per_partition(req, plan, out, overwrite=overwrite)
        assert extra_threads(threads) == []
    assert not (tmp_path / "new").exists()
    assert files_of(earlier) == before_files and not any(p.name.startswith(".") for p in earlier.iterdir())


def _corrupt_middle(root: Path, rng: random.Random) -> Path:
    """Flip a byte inside a batch in the middle of a middle segment of a middle partition."""
    parts = sorted(p for p in root.iterdir() if p.is_dir())
    part = parts[len(parts) // 2]
    segs = sorted(part.glob("*.log"))
    seg = segs[len(segs) // 2]
    data = bytearray(seg.read_bytes())
    at = len(data) // 4 + rng.randrange(-20, 20)  # before the last index entry: found by the read, not the plan
    data[at] ^= 0xFF
    seg.write_bytes(bytes(data))
    return seg


@pytest.mark.parametrize("seed", SEEDS)
def test_damage_in_a_middle_piece_fails_at_the_same_row(tmp_path: Path, seed: int) -> None:
    root = make_log_dir(tmp_path / "data", seed, partitions=4, batches=150, segment_bytes=40000)
    _corrupt_middle(root, random.Random(seed))

    def until_error(threads: int) -> tuple[int, type[BaseException], str]:
        rows = 0
        reader = storage_core.read_arrow(root, maxThreads=threads)
        try:
            for batch in reader:
                rows += batch.num_rows
        except KlogError as exc:
            return rows, type(exc), str(exc)
        raise AssertionError(f"seed {seed}: no error with {threads} threads")

    before = set(threading.enumerate())
    serial = until_error(1)
    assert serial[1] is DataLossError and serial[0] > 0, serial
    for threads in (2, 8):
        assert until_error(threads) == serial, f"seed {seed}, {threads} threads"
    assert extra_threads(before) == []
    # failOnDataLoss=false: every intact record, the same with threads
    tolerant = _table(root, failOnDataLoss="false", maxThreads=1)
    assert _table(root, failOnDataLoss="false", maxThreads=8).equals(tolerant), f"seed {seed}"


# --- compact, verify, recover --------------------------------------------------------------------


def files_of(root: Path) -> dict[str, str]:
    """Every file under ``root`` by its relative path: the digest of its bytes."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def _copies(root: Path, tmp_path: Path, n: int) -> list[Path]:
    import shutil

    out = []
    for i in range(n):
        dst = tmp_path / f"copy{i}"
        shutil.copytree(root, dst)
        out.append(dst)
    return out


def _same_run(a: subprocess.CompletedProcess[str], b: subprocess.CompletedProcess[str], pa_: Path, pb: Path,
              context: str) -> None:
    assert a.returncode == b.returncode, f"{context}: {a.stderr} / {b.stderr}"
    assert a.stdout.replace(str(pa_), "DIR") == b.stdout.replace(str(pb), "DIR"), context
    assert a.stderr.replace(str(pa_), "DIR") == b.stderr.replace(str(pb), "DIR"), context


@pytest.mark.parametrize("json_out", [False, True])
def test_compact_with_workers_same_bytes_and_report(logs: tuple[int, Path], tmp_path: Path, json_out: bool) -> None:
    seed, root = logs
    one, four = _copies(root, tmp_path, 2)
    args = ["--topic", "topic0", "--topic", "topic1", "--roll", "--now", str(T0 + 10**9), "--memory", "4096"]
    args += ["--json"] if json_out else []
    a = klog("compact", str(one), *args, "--workers", "1")
    b = klog("compact", str(four), *args, "--workers", "4")
    assert a.returncode == 0, a.stderr
    _same_run(a, b, one, four, f"seed {seed}")
    assert files_of(one) == files_of(four), f"seed {seed}"
    assert files_of(one) != files_of(root)  # it did compact


def test_cleaner_clean_logs_workers(logs: tuple[int, Path], tmp_path: Path) -> None:
    """The Python API's automatic round: the same results and bytes with 1 and 3 workers."""
    from storage_core.cleaner import LogCleaner

    seed, root = logs
    results = []
    for copy, workers in zip(_copies(root, tmp_path, 2), (1, 3), strict=True):
        update_topic_configs(copy, "topic1", {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01"})
        with LogManager([copy], writable=True) as lm:
            for log in lm.logs.values():
                log.roll()
            got = LogCleaner(8192, now_ms=T0 + 10**9).clean_logs(lm.logs.values(), workers=workers)
        results.append(([r.summary() | {"path": Path(r.path).name} for r in got], files_of(copy)))
    assert results[0][0], f"seed {seed}: nothing cleaned"
    assert results[0] == results[1], f"seed {seed}"


def _damage(root: Path, seed: int) -> None:
    """A torn tail on some partitions' last segments, a corrupt batch in the middle of another."""
    rng = random.Random(seed)
    parts = sorted(p for p in root.iterdir() if p.is_dir())
    for part in rng.sample(parts, 4):
        last = sorted(part.glob("*.log"))[-1]
        size = last.stat().st_size
        if size > 40:
            with last.open("r+b") as f:
                f.truncate(size - rng.randint(1, 30))
    _corrupt_middle(root, rng)


def test_verify_with_workers_same_report(logs: tuple[int, Path], tmp_path: Path) -> None:
    seed, root = logs
    (damaged,) = _copies(root, tmp_path, 1)
    _damage(damaged, seed)
    for extra in ([], ["--quiet"]):
        a = klog("verify", str(damaged), *extra, "--workers", "1")
        b = klog("verify", str(damaged), *extra, "--workers", "4")
        assert a.returncode == 1, a.stdout + a.stderr
        _same_run(a, b, damaged, damaged, f"seed {seed} {extra}")
    clean = [klog("verify", str(root), "--workers", w) for w in ("1", "3")]
    assert clean[0].returncode == 0
    _same_run(clean[0], clean[1], root, root, f"seed {seed}")


def test_recover_with_workers_same_bytes_and_report(logs: tuple[int, Path], tmp_path: Path) -> None:
    seed, root = logs
    one, four = _copies(root, tmp_path, 2)
    for d in (one, four):
        _damage(d, seed)
        (d / ".kafka_cleanshutdown").unlink(missing_ok=True)
    a = klog("recover", str(one), "--workers", "1")
    b = klog("recover", str(four), "--workers", "4")
    assert a.returncode == 1, a.stdout + a.stderr  # bytes were cut
    _same_run(a, b, one, four, f"seed {seed}")
    assert files_of(one) == files_of(four), f"seed {seed}"


def test_workers_flag_is_checked(logs: tuple[int, Path]) -> None:
    _, root = logs
    for cmd in ("verify", "recover", "compact"):
        res = klog(cmd, str(root), "--workers", "0")
        assert res.returncode == 2 and "--workers" in res.stderr, (cmd, res.stderr)


# --- snapshot ------------------------------------------------------------------------------------


def test_snapshot_with_workers_same_copy_and_summary(logs: tuple[int, Path], tmp_path: Path) -> None:
    """``klog snapshot`` of one source with 1 and with 4 workers: the same files in DST, byte for
    byte (manifest included), the same summary; again for the incremental rerun after the source
    grew, retention moved a partition's log start past DST's first segment (the mid-copy checkpoint
    move) and a segment was replaced."""
    import dataclasses
    import shutil

    from storage_core.log.manager import LogManager
    from storage_core.tools.snapshot import snapshot

    seed, root = logs
    src = tmp_path / "src"
    shutil.copytree(root, src)
    rng = random.Random(seed)
    dsts = {w: tmp_path / f"dst{w}" for w in (1, 4)}

    def both(what: str) -> None:
        summaries = {w: dataclasses.asdict(snapshot(src, d, workers=w)) for w, d in dsts.items()}
        for s in summaries.values():
            s.pop("destination")
        assert summaries[1] == summaries[4], f"seed {seed}: {what}: summaries differ"
        assert files_of(dsts[1]) == files_of(dsts[4]), f"seed {seed}: {what}: DST differs"

    both("first copy")
    with LogManager([src], writable=True) as lm:  # more data, rolled segments, retention at the front
        for i, tp in enumerate(sorted(lm.logs)):
            log = lm.logs[tp]
            if i % 3 == 0 or i % 4 == 1:
                log.roll()
            log.append(build_batch([Record(log.log_end_offset + j, T0 + 10**6, b"k", rng.randbytes(30))
                                    for j in range(5)]), now_ms=T0 + 10**6)
            if i % 4 == 1:  # retention past everything DST has: its first segment is new to DST
                log.log_start_offset = log.segments[-1].base_offset
                assert log.delete_old_segments(now_ms=T0 + 10**6)
    both("incremental copy")
    both("nothing new")
