"""``df.write.format("klog").option("offsets", "keep")``: rows written at their own offsets, as ``klog
restore`` writes them (a backfill from a notebook).

The truth is the generator's (:func:`restore_gen.export_table`: offsets with gaps, null keys and
values, headers, runs of LogAppendTime records) or, for a backfill, klog's read of the source; what
was written is read back through :func:`storage_core.read_arrow` and compared field by field, offset
by offset. The rows reach the tasks shuffled (Spark gives no order), several tasks per partition.
Every refusal is checked to leave the target exactly as it was, file by file.

``KLOG_SEED`` fixes the seed (default: a new one per run, in every failure's message).
"""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from restore_gen import export_table

import storage_core as klog
from storage_core.files import LOG_SUFFIX

SEED = int(os.environ.get("KLOG_SEED") or random.SystemRandom().randrange(1 << 30))
CTX = f"KLOG_SEED={SEED}"
T0 = 1_600_000_000_000
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
#: one record as the generator decides it and as read_arrow gives it back
Row = tuple[int, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...], int, int]


def rows_of(table: pa.Table) -> dict[tuple[str, int], list[Row]]:
    """Each partition's records in offset order: offset, key, value, headers, timestamp (ms), timestamp type."""
    out: dict[tuple[str, int], list[Row]] = {}
    millis = table.column("timestamp").cast(pa.timestamp("ms", tz="UTC")).cast(pa.int64()).to_pylist()
    cols = table.to_pydict()
    types = cols.get("timestampType") or [0] * table.num_rows
    headers = cols.get("headers") or [None] * table.num_rows
    for i in range(table.num_rows):
        out.setdefault((cols["topic"][i], cols["partition"][i]), []).append(
            (cols["offset"][i], cols["key"][i], cols["value"][i],
             tuple((h["key"], h["value"]) for h in (headers[i] or ())), millis[i], types[i]))
    return {tp: sorted(rows) for tp, rows in out.items()}


def read(path: Path, **options: Any) -> dict[tuple[str, int], list[Row]]:
    return rows_of(klog.read_arrow(str(path), includeHeaders=True, **options).read_all())


def log_starts(log_dir: Path) -> dict[tuple[str, int], int]:
    return {(r.topic_partition.topic, r.topic_partition.partition): r.start for r in klog.plan(str(log_dir)).ranges}


def files_of(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` and its bytes: what a refusal must leave as it was."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def frame(spark, table: pa.Table, path: Path, rng: random.Random | None = None):  # type: ignore[no-untyped-def]
    """``table`` as a DataFrame read from a Parquet file (as from a ``klog export``), its rows shuffled
    when ``rng`` is given; one small file is one task."""
    if rng is not None:
        order = list(range(table.num_rows))
        rng.shuffle(order)
        table = table.take(pa.array(order))
    pq.write_table(table, path)
    return spark.read.parquet(str(path))


def plain(topic: str, partition: int, offsets: list[int]) -> pa.Table:
    """Records at ``offsets`` of one partition: value ``v<offset>``, timestamp T0 + offset, CreateTime."""
    return pa.table({"topic": [topic] * len(offsets), "partition": pa.array([partition] * len(offsets), pa.int32()),
                     "offset": pa.array(offsets, pa.int64()), "key": pa.array([None] * len(offsets), pa.binary()),
                     "value": [b"v%d" % o for o in offsets],
                     "timestamp": pa.array([T0 + o for o in offsets], pa.timestamp("ms", tz="UTC")),
                     "timestampType": pa.array([0] * len(offsets), pa.int32())})


def write(df, path: Path, mode: str = "append", **opts: str) -> None:  # type: ignore[no-untyped-def]
    w = df.write.format("klog").mode(mode).option("offsets", "keep")
    for k, v in opts.items():
        w = w.option(k, v)
    w.save(str(path))


@pytest.mark.spark
def test_rows_at_their_offsets_from_several_tasks(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Every record at its offset with its key, value, headers, timestamp and timestamp type (LogAppendTime
    runs in batches of their time), gaps kept, each partition's rows in several tasks reaching them
    shuffled; an empty partition's log starts at its first offset."""
    print(CTX)
    rng = random.Random(SEED)
    truth = export_table(rng, "orders", 3, rng.randint(80, 160), rng.randint(1, 10**6), T0)
    df = frame(spark, truth, tmp_path / "in.parquet", rng).repartitionByRange(7, "partition", "offset")
    codec = rng.choice(CODECS)
    write(df, tmp_path / "dst", numPartitions="3", compression=codec)
    want = rows_of(truth)
    assert read(tmp_path / "dst") == want, f"{CTX} {codec}"
    assert log_starts(tmp_path / "dst") == {tp: rows[0][0] for tp, rows in want.items()}, CTX
    # the tasks' own segments (each task's first is named by its first offset): more than one per partition
    segments = sorted(p.name for p in (tmp_path / "dst").glob("orders-*/*" + LOG_SUFFIX))
    assert len(segments) > 3, f"{CTX}: {segments}"
    # what Kafka's reader of a segment file takes: every batch intact, nothing left to recover
    from storage_core.log.segment import scan_segment

    for seg in (tmp_path / "dst").glob("orders-*/*" + LOG_SUFFIX):
        scan = scan_segment(seg)
        assert scan.error is None and scan.partial_tail is None, f"{CTX} {seg}"


@pytest.mark.spark
def test_backfill_a_range_from_a_klog_read(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A notebook's backfill: a range of a klog dir read with ``spark.read.format("klog")``, written at its
    offsets into an empty dir (whose log then starts at the range's first offset), then the next range
    after it (the partition ends at or below its first offset: appended, the gap kept)."""
    print(CTX)
    rng = random.Random(SEED + 1)
    source = export_table(rng, "orders", 2, rng.randint(100, 200), rng.randint(1, 10**5), T0)
    pq.write_table(source, tmp_path / "export.parquet")
    klog.restore(tmp_path / "export.parquet", tmp_path / "src")
    offsets = sorted(source.column("offset").to_pylist())
    lo, mid = offsets[len(offsets) // 5], offsets[len(offsets) // 2]
    df = spark.read.format("klog").option("includeHeaders", "true").load(str(tmp_path / "src"))
    write(df.filter(f"offset >= {lo} AND offset < {mid}").repartitionByRange(3, "partition", "offset"),
          tmp_path / "dst", numPartitions="2")
    write(df.filter(f"offset >= {mid}"), tmp_path / "dst")
    want = {tp: [r for r in rows if r[0] >= lo] for tp, rows in read(tmp_path / "src").items()}
    assert read(tmp_path / "dst") == want, CTX
    assert log_starts(tmp_path / "dst") == {tp: rows[0][0] for tp, rows in want.items()}, CTX


@pytest.fixture
def target(tmp_path: Path) -> tuple[Path, dict[tuple[str, int], int], random.Random]:
    """A log dir holding topic ``orders`` (2 partitions, records from offset 100) restored from an export;
    each partition's end offset; the seeded generator."""
    print(CTX)
    rng = random.Random(SEED + 2)
    export = export_table(rng, "orders", 2, 30, 100, T0)
    pq.write_table(export, tmp_path / "first.parquet")
    summary = klog.restore(tmp_path / "first.parquet", tmp_path / "dst")
    return tmp_path / "dst", {("orders", p.partition): p.end for p in summary.partitions}, rng


def refused(spark_action, into: Path, *words: str) -> str:  # type: ignore[no-untyped-def]
    """Run ``spark_action``, which must fail with a message holding ``words``, and leave ``into`` as it was."""
    before = files_of(into)
    with pytest.raises(Exception) as info:  # Spark wraps klog's exception; its text names it
        spark_action()
    text = str(info.value)
    assert all(w in text for w in words), f"{CTX}: {words} not in {text}"
    assert files_of(into) == before, f"{CTX}: the refused write changed {into}"
    return text


@pytest.mark.spark
def test_refusals_leave_the_target_as_it_was(spark, tmp_path: Path, target) -> None:  # type: ignore[no-untyped-def]
    dst, ends, rng = target
    above = max(ends.values()) + rng.randint(0, 5)
    rows = export_table(rng, "orders", 2, 40, above, T0)
    df = frame(spark, rows, tmp_path / "rows.parquet", rng)
    # columns missing or of a wrong type: refused on the driver, before any task
    refused(lambda: write(df.drop("offset"), dst), dst, "InvalidOptionError", "no 'offset' column (long)",
            "expected the 'partition' (int) and 'offset' (long) columns")
    refused(lambda: write(df.drop("partition"), dst), dst, "no 'partition' column (int)")
    refused(lambda: write(df.selectExpr("*", "CAST(offset AS INT) AS o").drop("offset").withColumnRenamed("o", "offset"),
                          dst), dst, "column 'offset' has type int; expected long")
    refused(lambda: write(df.drop("topic"), dst), dst, "no topic")
    # options that make no sense with it
    refused(lambda: write(df, dst, txnAppId="app", txnVersion="1"), dst, "offsets=keep and txnAppId")
    refused(lambda: write(df, dst, mode="overwrite"), dst, "mode('overwrite')")
    refused(lambda: df.write.format("klog").option("offsets", "old").mode("append").save(str(dst)), dst,
            "offsets='old' is neither 'new'")

    def stream() -> None:
        q = (spark.readStream.format("klog").option("includeHeaders", "true").load(str(dst))
             .writeStream.format("klog").option("offsets", "keep").option("checkpointLocation", str(tmp_path / "ck"))
             .trigger(availableNow=True).start(str(tmp_path / "out")))
        try:
            q.awaitTermination(60)
        finally:
            q.stop()
    refused(stream, dst, "InvalidOptionError", "offsets=keep is a batch write's")
    assert not list((tmp_path / "out").glob("*/*" + LOG_SUFFIX)) if (tmp_path / "out").exists() else True
    # an offset twice in one task
    twice = frame(spark, pa.concat_tables([rows, rows.slice(3, 1)]), tmp_path / "twice.parquet", rng)
    dup = rows.column("offset")[3].as_py()
    refused(lambda: write(twice.coalesce(1), dst), dst, "RestoreError", f"offset {dup} is in 2 rows",
            "expected each offset of a partition once")
    # the records the target holds already (from their first offset, 100)
    again = frame(spark, export_table(random.Random(SEED), "orders", 2, 10, 100, T0), tmp_path / "again.parquet")
    refused(lambda: write(again, dst), dst, "OffsetOverlapError", "ends at offset", "at or below 100")
    # two tasks whose offsets interleave: their segments cannot both be in the log
    even = frame(spark, rows.filter(pc.equal(pc.bit_wise_and(rows.column("offset"), 1), 0)),
                 tmp_path / "even.parquet")
    odd = frame(spark, rows.filter(pc.equal(pc.bit_wise_and(rows.column("offset"), 1), 1)),
                tmp_path / "odd.parquet")
    text = refused(lambda: write(even.union(odd), dst), dst, "OffsetOverlapError", "were staged by two tasks",
                   "repartitionByRange")
    assert "orders-0 in " in text or "orders-1 in " in text, text
    # after all that: the same rows, once, in one task per partition, are written
    write(df.repartition("partition"), dst)
    got = read(dst)
    for tp, want in rows_of(rows).items():
        assert got[tp][-len(want):] == want, f"{CTX} {tp}"


@pytest.mark.spark
def test_gap_where_readers_take_it_for_lost_data(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """In a dir that says its topic is not compacted (a log that rolls at its end, by the lost-data rule
    every reader applies), a gap below the first offset written, or between two tasks' ranges, is
    refused; the same offsets without a gap are written, in two tasks."""
    from storage_core.log.log import Log
    from storage_core.log.manager import LogManager
    from storage_core.log.topic_configs import save_topic_configs
    from storage_core.record.records import Record, build_batch

    dst = tmp_path / "dst"
    (dst / "g-0").mkdir(parents=True)
    save_topic_configs(dst, {"g": {"cleanup.policy": "delete"}})
    with Log(dst / "g-0", writable=True) as lg:
        lg.append(build_batch([Record(i, T0, b"k", b"old") for i in range(3)]))
    LogManager([dst], writable=True).close()  # the recovery point checkpoint knows the partition

    def df(name: str, offsets: list[int]):  # type: ignore[no-untyped-def]
        # one small file, one task; a union of two is two tasks (not a union of two coalesce(1), which
        # Spark 4 makes one partition)
        return frame(spark, plain("g", 0, offsets), tmp_path / f"{name}.parquet")

    refused(lambda: write(df("far", list(range(1000, 1010))), dst), dst, "RestoreError",
            "g-0 in", "ends at offset 3 and the source starts at 1000", "lost data (offsets 3..999)")
    refused(lambda: write(df("a", list(range(3, 53))).union(df("b", list(range(60, 100)))), dst), dst,
            "the records of one task end at offset 52 and the next task's start at 60", "lost data (offsets 53..59)")
    two = df("c", list(range(3, 53))).union(df("d", list(range(53, 100))))
    assert two.rdd.getNumPartitions() == 2
    write(two, dst)
    got = read(dst)[("g", 0)]
    assert [r[0] for r in got] == list(range(100)) and [r[2] for r in got[3:]] == [b"v%d" % o for o in range(3, 100)]
    assert log_starts(dst) == {("g", 0): 0}


# -- the commit of pinned writers, without Spark (what each task's commit message carries)


def _stage(pdir: Path, name: str, offsets: list[int]):  # type: ignore[no-untyped-def]
    from storage_core.log.config import LogConfig
    from storage_core.log.staged import StagingWriter
    from storage_core.record.compression import CompressionType

    w = StagingWriter(pdir, name, LogConfig(), CompressionType.NONE, 1 << 20, pinned_base=offsets[0])
    w.append_rows_at(plain(pdir.name.rpartition("-")[0], 0, offsets).to_batches()[0])
    return w.finish()


def test_commit_orders_several_pinned_writers_of_a_partition(tmp_path: Path) -> None:
    """Writers of one partition, each its range, committed in offset order whatever order they come in;
    the empty partition's log starts at the first; overlapping ranges, and pinned and unpinned writers
    mixed, are refused with nothing visible."""
    from storage_core.errors import CommitError, OffsetOverlapError
    from storage_core.log.config import LogConfig
    from storage_core.log.staged import StagingWriter, collect_staging, commit_job
    from storage_core.log.topic_partition import TopicPartition
    from storage_core.record.compression import CompressionType

    pdir = tmp_path / "t-0"
    pdir.mkdir()
    staged = [_stage(pdir, ".klog-staging-j1-2", list(range(50, 60))), _stage(pdir, ".klog-staging-j1-0", [10, 12, 19]),
              _stage(pdir, ".klog-staging-j1-1", list(range(30, 40)))]
    assert commit_job("j1", staged) == {TopicPartition("t", 0): (10, 60)}
    want = [10, 12, 19, *range(30, 40), *range(50, 60)]
    assert [r[0] for r in read(tmp_path)[("t", 0)]] == want
    assert log_starts(tmp_path) == {("t", 0): 10}
    before = files_of(tmp_path)
    overlapping = [_stage(pdir, ".klog-staging-j2-0", list(range(100, 110))),
                   _stage(pdir, ".klog-staging-j2-1", list(range(105, 115)))]
    with pytest.raises(OffsetOverlapError, match=r"t-0 in .*: offsets 100..109 and 105..114 were staged by two tasks"):
        commit_job("j2", overlapping)
    collect_staging([pdir], job_id="j2")
    assert files_of(tmp_path) == before
    w = StagingWriter(pdir, ".klog-staging-j3-1", LogConfig(), CompressionType.NONE, 1 << 20)
    w.append(plain("t", 0, [0]), T0)
    mixed = [_stage(pdir, ".klog-staging-j3-0", list(range(100, 110))), w.finish()]
    with pytest.raises(CommitError, match="2 staged writers, 1 of them pinned"):
        commit_job("j3", mixed)
    collect_staging([pdir], job_id="j3")
    assert files_of(tmp_path) == before


def test_pinned_writers_keep_their_offsets_in_every_replica(tmp_path: Path) -> None:
    """A replicated partition (the Spark writer's ``replicas``, from a cluster's dirs): each replica gets the
    tasks' segments at the same offsets, its empty log starting at the first; a replica that holds those
    offsets already refuses the commit, and no replica changes."""
    from storage_core.errors import OffsetOverlapError
    from storage_core.log.staged import collect_staging, commit_job

    leader, follower = tmp_path / "b1" / "t-0", tmp_path / "b2" / "t-0"
    leader.mkdir(parents=True)
    follower.mkdir(parents=True)
    staged = [_stage(leader, ".klog-staging-r1-1", list(range(40, 45))), _stage(leader, ".klog-staging-r1-0", [20, 25])]
    commit_job("r1", staged, replicas={str(leader): [str(follower)]})
    for d in (tmp_path / "b1", tmp_path / "b2"):
        assert [r[0] for r in read(d)[("t", 0)]] == [20, 25, 40, 41, 42, 43, 44], d
        assert log_starts(d) == {("t", 0): 20}
    # the follower alone holds later offsets (a replica that moved since): nothing committed anywhere
    commit_job("r2", [_stage(follower, ".klog-staging-r2-0", [60])])
    before = {d: files_of(tmp_path / d) for d in ("b1", "b2")}
    with pytest.raises(OffsetOverlapError, match=r"t-0 in .*b2 ends at offset 61, above the first offset to restore, 50"):
        commit_job("r3", [_stage(leader, ".klog-staging-r3-0", [50, 51])], replicas={str(leader): [str(follower)]})
    collect_staging([leader, follower], job_id="r3")
    assert {d: files_of(tmp_path / d) for d in ("b1", "b2")} == before
    # the leader, whose dir commits last, holds them: refused before the follower's commit too
    commit_job("r4", [_stage(leader, ".klog-staging-r4-0", [80])])
    before = {d: files_of(tmp_path / d) for d in ("b1", "b2")}
    with pytest.raises(OffsetOverlapError, match=r"t-0 in .*b1 ends at offset 81, above the first offset to restore, 70"):
        commit_job("r5", [_stage(leader, ".klog-staging-r5-0", [70])], replicas={str(leader): [str(follower)]})
    collect_staging([leader, follower], job_id="r5")
    assert {d: files_of(tmp_path / d) for d in ("b1", "b2")} == before
