"""Structured Streaming: klog as a source (tailing a log dir) and as an exactly-once sink."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import time
from pathlib import Path

import pytest

from storage_core.errors import InvalidOptionError
from storage_core.log.journal import read_sink_mark
from storage_core.log.topic_partition import TopicPartition

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.spark
pytest.importorskip("pyspark")

from pyspark.sql import functions as F  # noqa: E402

from benchmarks.producer import produce  # noqa: E402
from spark_logsource.options import parse_stream_options  # noqa: E402
from spark_logsource.streaming import KlogStreamReader, offsets_from_json, offsets_to_json, rate_limit  # noqa: E402

T0, T1, T2 = (TopicPartition("t", p) for p in range(3))


# --- offsets, admission control and options (no Spark) ------------------------------------------

def test_offsets_are_the_kafka_source_json() -> None:
    offs = {T1: 7, T0: 3, TopicPartition("a.b-c", 12): 0}
    js = offsets_to_json(offs)
    assert js == {"a.b-c": {"12": 0}, "t": {"0": 3, "1": 7}}
    assert offsets_from_json(json.dumps(js)) == offs
    with pytest.raises(InvalidOptionError, match="not a klog/Kafka stream offset"):
        offsets_from_json({"t": {"x": 1}})


def test_rate_limit_shares_by_backlog_and_starves_nobody() -> None:
    begin = {T0: 0, T1: 100, T2: 5}
    until = {T0: 1000, T1: 101, T2: 5}
    out = rate_limit(100, begin, until)
    assert out[T1] == 101  # backlog 1: its share rounds up to one record, not down to zero
    assert out[T0] == 99  # floor(100 * 1000/1001)
    assert out[T2] == 5  # nothing to read
    assert rate_limit(10_000, begin, until) == until
    assert rate_limit(5, {T0: 0}, {T0: 0}) == {T0: 0}


@pytest.mark.parametrize(("options", "message"), [
    ({"endingOffsets": "latest"}, "endingOffsets is not valid for streaming"),
    ({"endingTimestamp": "5"}, "endingTimestamp is not valid for streaming"),
    ({"maxOffsetsPerTrigger": "0"}, "maxOffsetsPerTrigger='0' must be at least 1"),
    ({"maxOffsetsPerTrigger": "ten"}, "maxOffsetsPerTrigger='ten' is not an integer"),
    ({"minOffsetsPerTrigger": "50", "maxOffsetsPerTrigger": "10"}, "larger than maxOffsetsPerTrigger"),
    ({"maxTriggerDelay": "5s"}, "only applies with minOffsetsPerTrigger"),
    ({"minOffsetsPerTrigger": "5", "maxTriggerDelay": "5 fortnights"}, "is not a duration"),
    ({"startingOffsets": '{"t": {"0": -3}}'}, "expected an offset >= 0, -2 for earliest or -1 for latest"),
    ({"startingOffsets": "first"}, "startingOffsets is not valid JSON"),
])
def test_bad_stream_options_are_typed_errors(options: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidOptionError, match=message):
        parse_stream_options({"path": "/x", **options})


def test_stream_defaults() -> None:
    o = parse_stream_options({"path": "/x", "minOffsetsPerTrigger": "10", "maxTriggerDelay": "2m"})
    assert o.starting.kind == "latest"  # as Spark's Kafka source
    assert (o.min_offsets_per_trigger, o.max_trigger_delay_ms, o.max_offsets_per_trigger) == (10, 120_000, None)


# --- with Spark -----------------------------------------------------------------------------------

def _values(spark, path: str, topic: str) -> dict[int, list[str]]:  # type: ignore[no-untyped-def]
    rows = (spark.read.format("klog").option("topics", topic).load(path)
            .select("partition", "offset", F.col("value").cast("string").alias("v")).collect())
    out: dict[int, list[str]] = {}
    for r in sorted(rows, key=lambda r: (r.partition, r.offset)):
        out.setdefault(r.partition, []).append(r.v)
    return out


def _pipeline(spark, src: Path, out: Path, ck: Path, *, trigger: dict[str, object], **options: str):  # type: ignore[no-untyped-def]
    reader = spark.readStream.format("klog")
    for k, v in {"startingOffsets": "earliest", **options}.items():
        reader = reader.option(k, v)
    return (reader.load(str(src))
            .select("key", F.upper(F.col("value").cast("string")).alias("value"), "partition")
            .writeStream.format("klog").option("topic", "u").option("numPartitions", 3)
            .option("checkpointLocation", str(ck)).trigger(**trigger).start(str(out)))


def test_source_and_sink_exactly_once_while_another_process_appends(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    src, out, ck = tmp_path / "in", tmp_path / "out", tmp_path / "ck"
    src.mkdir()
    produce(str(src), "t", partitions=3, records=30, rate=0, per_append=30)
    total = 1800
    proc = subprocess.Popen([sys.executable, "-m", "benchmarks.producer", str(src), "t", "--records",
                             str(total - 30), "--start", "30", "--rate", "250", "--per-append", "15"], cwd=REPO)
    q = _pipeline(spark, src, out, ck, trigger={"processingTime": "250 milliseconds"}, maxOffsetsPerTrigger="120")
    try:
        assert proc.wait(timeout=120) == 0
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            q.processAllAvailable()
            if sum(len(v) for v in _values(spark, str(out), "u").values()) >= total:
                break
        batches = [p for p in q.recentProgress if p["numInputRows"] > 0]
    finally:
        q.stop()
    assert len(batches) >= 10, [p["numInputRows"] for p in batches]
    assert max(p["numInputRows"] for p in batches) <= 120
    got, want = _values(spark, str(out), "u"), _values(spark, str(src), "t")
    assert {p: [v.upper() for v in vs] for p, vs in want.items()} == got  # exactly once, in partition order
    assert sum(len(v) for v in got.values()) == total
    marks = list(out.glob(".klog-sink-*.json"))
    assert len(marks) == 1 and read_sink_mark(out, marks[0].name[len(".klog-sink-"):-5]) is not None
    assert not list(out.glob("u-*/.klog-staging-*"))  # staging collected


def test_available_now_drains_in_bounded_batches_then_only_new_records(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    src, out, ck = tmp_path / "in", tmp_path / "out", tmp_path / "ck"
    src.mkdir()
    produce(str(src), "t", partitions=3, records=250, rate=0, per_append=50)
    q = _pipeline(spark, src, out, ck, trigger={"availableNow": True}, maxOffsetsPerTrigger="60")
    assert q.awaitTermination(120)
    sizes = [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]
    assert len(sizes) >= 4 and max(sizes) <= 60 and sum(sizes) == 250, sizes
    produce(str(src), "t", partitions=3, records=40, rate=0, per_append=40, start=250)
    q = _pipeline(spark, src, out, ck, trigger={"availableNow": True}, maxOffsetsPerTrigger="60")
    assert q.awaitTermination(120)
    assert sum(p["numInputRows"] for p in q.recentProgress) == 40
    got = _values(spark, str(out), "u")
    assert sorted(v for vs in got.values() for v in vs) == sorted(f"V{i}" for i in range(290))


def test_starting_offsets_latest_json_and_timestamp(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    src = tmp_path / "in"
    src.mkdir()
    produce(str(src), "t", partitions=3, records=30, rate=0, per_append=30)

    def run(**options: str) -> list[str]:
        name = f"q{abs(hash(json.dumps(options, sort_keys=True)))}"
        reader = spark.readStream.format("klog")
        for k, v in options.items():
            reader = reader.option(k, v)
        q = (reader.load(str(src)).select(F.col("value").cast("string").alias("v"))
             .writeStream.format("memory").queryName(name).trigger(availableNow=True).start())
        assert q.awaitTermination(60)
        return sorted(r.v for r in spark.sql(f"select v from {name}").collect())

    assert run() == []  # latest is the default: only what comes after the start
    assert len(run(startingOffsets="earliest")) == 30
    assert run(startingOffsets=json.dumps({"t": {"0": 8, "1": -1, "2": -2}})) == \
        sorted(["v24", "v27"] + [f"v{i}" for i in range(2, 30, 3)])
    with pytest.raises(Exception, match="startingOffsets names partitions that do not exist"):
        run(startingOffsets=json.dumps({"t": {"7": 0}}))
    ts_ms = int(time.time() * 1000) + 5
    time.sleep(0.05)
    produce(str(src), "t", partitions=3, records=6, rate=0, per_append=6, start=30)
    assert run(startingTimestamp=str(ts_ms)) == sorted(f"v{i}" for i in range(30, 36))


def test_new_topics_and_partitions_are_picked_up(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    src = tmp_path / "in"
    src.mkdir()
    produce(str(src), "t", partitions=1, records=5, rate=0, per_append=5)
    q = (spark.readStream.format("klog").option("startingOffsets", "earliest").load(str(src))
         .select("topic", "partition", F.col("value").cast("string").alias("v"))
         .writeStream.format("memory").queryName("newparts").trigger(processingTime="100 milliseconds").start())
    try:
        q.processAllAvailable()
        produce(str(src), "t", partitions=2, records=4, rate=0, per_append=4, start=5)  # adds t-1
        produce(str(src), "other", partitions=1, records=3, rate=0, per_append=3)
        deadline = time.monotonic() + 60
        while spark.sql("select * from newparts").count() < 12 and time.monotonic() < deadline:
            q.processAllAvailable()
            time.sleep(0.2)
    finally:
        q.stop()
    rows = spark.sql("select topic, partition, v from newparts").collect()
    assert sorted((r.topic, r.partition, r.v) for r in rows) == sorted(
        [("t", 0, f"v{i}") for i in range(5)] + [("t", 0, "v6"), ("t", 0, "v8"), ("t", 1, "v5"), ("t", 1, "v7")]
        + [("other", 0, f"v{i}") for i in range(3)])


def _delete_before(part_dir: Path, keep_from_segment: int) -> int:
    """Retention by hand: drop the oldest segments (as ``klog retention`` with a log start offset)."""
    from storage_core.log.log import Log

    with Log(part_dir, writable=True) as lg:
        lg.log_start_offset = lg.segments[keep_from_segment].base_offset
        lg.delete_old_segments()
        lg.remove_deleted_files(now_ms=2**62)
        return lg.log_start_offset


@pytest.mark.parametrize("fail", [True, False])
def test_retention_deleting_unread_offsets(spark, tmp_path: Path, fail: bool, caplog) -> None:  # type: ignore[no-untyped-def]
    src, ck = tmp_path / "in", tmp_path / "ck"
    src.mkdir()
    df = spark.range(1000).select(F.col("id").cast("string").alias("value"))
    df.coalesce(1).write.format("klog").mode("append").option("topic", "t").option("segment.bytes", "2000") \
        .option("maxBatchBytes", "200").save(str(src))
    assert len(list((src / "t-0").glob("*.log"))) > 3

    def start(trigger: dict[str, object]):  # type: ignore[no-untyped-def]
        return (spark.readStream.format("klog").option("startingOffsets", "earliest")
                .option("maxOffsetsPerTrigger", "20").option("failOnDataLoss", str(fail).lower()).load(str(src))
                .select(F.col("value").cast("string").alias("v"))
                .writeStream.format("parquet").option("path", str(tmp_path / "pq"))
                .option("checkpointLocation", str(ck)).trigger(**trigger).start())

    q = start({"processingTime": "1 hour"})  # one batch now (offsets 0..19), the next in an hour
    deadline = time.monotonic() + 60
    while not (q.lastProgress and q.lastProgress["numInputRows"]) and time.monotonic() < deadline:
        time.sleep(0.1)
    q.stop()
    log_start = _delete_before(src / "t-0", 2)
    assert log_start > 20
    q = start({"availableNow": True})
    if fail:
        with pytest.raises(Exception, match=rf"offsets 20\.\.{log_start - 1} of t-0 were deleted"):
            q.awaitTermination(60)
        q.stop()
        return
    assert q.awaitTermination(60)
    got = sorted(int(r.v) for r in spark.read.parquet(str(tmp_path / "pq")).collect())
    assert got[:20] == list(range(20)) and got[20] == log_start and got[-1] == 999
    # the report (Spark's Python runner logs it to the driver's stderr; here the reader is called directly)
    reader = KlogStreamReader(parse_stream_options({"path": str(src), "failOnDataLoss": "false"}))
    with caplog.at_level(logging.WARNING, logger="klog"):
        parts = reader.partitions({"t": {"0": 20}}, {"t": {"0": log_start + 5}})
    assert f"offsets 20..{log_start - 1} of t-0 were deleted" in caplog.text
    assert "skipping" in caplog.text
    assert [(p.min_offset, p.end_offset) for part in parts for p in part.pieces] == [(log_start, log_start + 5)]


def test_latest_notice_once_per_stream(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Spark asks a stream's reader for its initial offset more than once (the quickstart printed the
    startingOffsets=latest notice twice for one stream): the notice is said once."""
    produce(str(tmp_path), "t", partitions=1, records=5, rate=0, per_append=5)
    reader = KlogStreamReader(parse_stream_options({"path": str(tmp_path)}))
    with caplog.at_level(logging.INFO, logger="klog"):
        first, again = reader.initialOffset(), reader.initialOffset()
    assert first == again == {"t": {"0": 5}}
    assert caplog.text.count("startingOffsets=latest (the default)") == 1, caplog.text


def test_min_offsets_per_trigger_waits_for_enough_records(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    src = tmp_path / "in"
    src.mkdir()
    produce(str(src), "t", partitions=1, records=5, rate=0, per_append=5)
    q = (spark.readStream.format("klog").option("startingOffsets", "earliest").option("minOffsetsPerTrigger", "20")
         .option("maxTriggerDelay", "1h").load(str(src)).select(F.col("value").cast("string").alias("v"))
         .writeStream.format("memory").queryName("minrows").trigger(processingTime="100 milliseconds").start())
    def count_reaches(n: int) -> int:
        deadline = time.monotonic() + 60
        while (got := spark.sql("select * from minrows").count()) < n and time.monotonic() < deadline:
            time.sleep(0.2)
        return int(got)

    try:
        # the first trigger never waits (as Spark's Kafka source: its delay counts from the last
        # trigger let through, and before the first there is none)
        assert count_reaches(5) == 5
        produce(str(src), "t", partitions=1, records=5, rate=0, per_append=5, start=5)
        time.sleep(1.5)
        assert spark.sql("select * from minrows").count() == 5  # 5 new < 20: held back
        produce(str(src), "t", partitions=1, records=20, rate=0, per_append=20, start=10)
        assert count_reaches(30) == 30
    finally:
        q.stop()
    assert spark.sql("select * from minrows").count() == 30


def test_sink_needs_a_value_column_before_starting(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    src = tmp_path / "in"
    src.mkdir()
    produce(str(src), "t", partitions=1, records=1, rate=0, per_append=1)
    df = spark.readStream.format("klog").option("startingOffsets", "earliest").load(str(src)).select("key")
    q = df.writeStream.format("klog").option("topic", "u").option("checkpointLocation", str(tmp_path / "ck")) \
        .start(str(tmp_path / "out"))
    try:
        with pytest.raises(Exception, match="has no 'value' column"):  # before any batch is written
            q.awaitTermination(60)
    finally:
        q.stop()
    assert not any((tmp_path / "out").glob("u-0/*.log"))


def test_following_a_log_another_process_appends_to(tmp_path: Path) -> None:
    """The source's view of a live log: each trigger's end only grows, and everything below it
    reads back with valid CRCs, while the writer (no clean shutdown, no checkpoint) appends."""
    from spark_logsource.options import parse_stream_options
    from spark_logsource.streaming import scan

    src = tmp_path / "in"
    src.mkdir()
    produce(str(src), "t", partitions=1, records=10, rate=0, per_append=10)
    proc = subprocess.Popen([sys.executable, "-m", "benchmarks.producer", str(src), "t", "--partitions", "1",
                             "--records", "60000", "--start", "10", "--rate", "20000", "--per-append", "200"], cwd=REPO)
    opts = parse_stream_options({"path": str(src)})
    ends = []
    try:
        while proc.poll() is None:
            st = scan(opts)[T0]
            ends.append(st.end)
            from storage_core.log.log import Log

            with Log(st.dir.path, had_clean_shutdown=True, verify_tail=False) as lg:
                n = 0
                for b in lg.batches(0, st.end):
                    b.ensure_valid()  # CRC
                    n += sum(1 for r in b.records() if r.offset < st.end)
            assert n == st.end  # a consistent prefix: every record below the end is there, valid
            time.sleep(0.01)
    finally:
        proc.wait(timeout=60)
    assert proc.returncode == 0
    assert ends == sorted(ends) and len(set(ends)) > 5
    assert scan(opts)[T0].end == 60010
