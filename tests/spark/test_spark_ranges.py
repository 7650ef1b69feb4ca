"""Ranges, timestamps, topic selection, pushdown and option errors, against a Python oracle (chispa)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from chispa import assert_df_equality
from spark_env import own_session

from storage_core.log.config import LogConfig
from storage_core.log.log import Log
from storage_core.record.compression import CompressionType
from storage_core.record.control import ControlRecordType, EndTransactionMarker
from storage_core.record.records import Header, Record, build_batch, build_end_txn_marker

pytestmark = pytest.mark.spark

T0 = 1_700_000_000_000
CFG = LogConfig.from_properties({"segment.bytes": "6000", "index.interval.bytes": "400"})


@pytest.fixture(scope="module")
def log_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """orders (3 partitions, 300 records each, several segments, codecs, headers), clicks (1 partition,
    with a compaction-like gap), tx (a committed and an aborted transaction)."""
    root = tmp_path_factory.mktemp("klog") / "logs"
    for p in range(3):
        d = root / f"orders-{p}"
        d.mkdir(parents=True)
        with Log(d, CFG, writable=True) as log:
            for b in range(30):
                recs = [Record(i, T0 + 1000 * (10 * b + i) + p, f"k{(10 * b + i) % 7}".encode(),
                               f"order-{p}-{10 * b + i}".encode(), (Header("src", b"x"),) if i % 2 else ())
                        for i in range(10)]
                log.append(build_batch(recs, compression=list(CompressionType)[b % 5]))
    d = root / "clicks-0"
    d.mkdir()
    with Log(d, CFG, writable=True) as log:
        log.append(build_batch([Record(0, T0, b"a", b"0"), Record(5, T0 + 5, b"b", b"5")], last_offset=9),
                   assign_offsets=False)  # offsets 1-4 and 6-9 gone, as after compaction
        log.append(build_batch([Record(10, T0 + 10, b"c", b"10")]), assign_offsets=False)
    d = root / "tx-0"
    d.mkdir()
    with Log(d, CFG, writable=True) as log:
        def txn(pid: int, n: int) -> bytes:
            return build_batch([Record(i, T0 + i, b"k", b"p%d" % pid) for i in range(n)], producer_id=pid,
                               producer_epoch=0, base_sequence=0, is_transactional=True)
        log.append(txn(1, 3))  # 0-2 committed
        log.append(build_end_txn_marker(0, T0, 0, 1, 0, EndTransactionMarker(ControlRecordType.COMMIT, 1)))  # 3
        log.append(txn(2, 2))  # 4-5 aborted
        log.append(build_end_txn_marker(0, T0, 0, 2, 0, EndTransactionMarker(ControlRecordType.ABORT, 1)))  # 6
        log.append(build_batch([Record(0, T0, None, b"plain")]))  # 7
    return root


def oracle(log_dir: Path, topic: str, committed: bool = False) -> list[tuple[str, int, int, int, bytes | None, bytes]]:
    rows = []
    for d in sorted(log_dir.glob(f"{topic}-*")):
        part = int(d.name.rpartition("-")[2])
        with Log(d, had_clean_shutdown=True) as log:
            for b in log.batches(read_committed=committed):
                if b.is_control:
                    continue
                rows += [(topic, part, r.offset, r.timestamp, r.key, r.value) for r in b.records()]
    return rows


def rows_of(df) -> list[tuple[str, int, int, int, bytes | None, bytes]]:  # type: ignore[no-untyped-def]
    return sorted((r.topic, r.partition, r.offset, int(r.timestamp.timestamp() * 1000),
                   None if r.key is None else bytes(r.key), bytes(r.value)) for r in df.collect())


def read(spark, log_dir: Path, **opts: str):  # type: ignore[no-untyped-def]
    reader = spark.read.format("klog")
    for k, v in opts.items():
        reader = reader.option(k, v)
    return reader.load(str(log_dir))


def test_whole_topic_and_schema(spark, log_dir: Path) -> None:  # type: ignore[no-untyped-def]
    df = read(spark, log_dir, topics="orders")
    assert df.schema.simpleString() == ("struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
                                        "timestamp:timestamp,timestampType:int>")
    assert rows_of(df) == sorted(oracle(log_dir, "orders"))
    assert df.rdd.getNumPartitions() >= 1


def test_offset_json_ranges(spark, log_dir: Path) -> None:  # type: ignore[no-untyped-def]
    df = read(spark, log_dir, startingOffsets='{"orders": {"0": 17, "1": -2, "2": 250}}',
              endingOffsets='{"orders": {"0": 123, "1": 40, "2": -1}}')
    want = [r for r in oracle(log_dir, "orders")
            if (r[1] == 0 and 17 <= r[2] < 123) or (r[1] == 1 and r[2] < 40) or (r[1] == 2 and r[2] >= 250)]
    assert rows_of(df) == sorted(want)


def test_timestamp_ranges(spark, log_dir: Path) -> None:  # type: ignore[no-untyped-def]
    df = read(spark, log_dir, topics="orders", startingTimestamp=str(T0 + 50_000), endingTimestamp=str(T0 + 80_000))
    # record n of partition p has timestamp T0 + 1000 n + p: per partition the first offset at or after
    # T0+50s is 50 and at or after T0+80s is 80 (exclusive end)
    assert rows_of(df) == sorted(r for r in oracle(log_dir, "orders") if 50 <= r[2] < 80)
    df = read(spark, log_dir, startingOffsetsByTimestamp=f'{{"orders": {{"0": {T0 + 299_000}, "1": {T0}, '
                                                         f'"2": {T0 + 10**9}}}}}',
              startingOffsetsByTimestampStrategy="latest")
    got = rows_of(df)
    assert {r[1] for r in got} == {0, 1} and len([r for r in got if r[1] == 0]) == 1


def test_selection(spark, log_dir: Path) -> None:  # type: ignore[no-untyped-def]
    assert {r.topic for r in read(spark, log_dir, topicPattern="o.*|cl.*").select("topic").distinct().collect()} == \
        {"orders", "clicks"}
    assert read(spark, log_dir, assign='{"orders": [1]}').select("partition").distinct().collect()[0][0] == 1
    assert read(spark, log_dir / "orders-2").count() == 300  # a partition dir
    two = f"{log_dir / 'orders-0'},{log_dir / 'clicks-0'}"
    assert read(spark, two).count() == 303  # comma-separated, like log.dirs


def test_compaction_gaps_and_empty_ranges(spark, log_dir: Path) -> None:  # type: ignore[no-untyped-def]
    df = read(spark, log_dir, topics="clicks")
    assert [r.offset for r in df.orderBy("offset").collect()] == [0, 5, 10]
    df = read(spark, log_dir, startingOffsets='{"clicks": {"0": 2}}', endingOffsets='{"clicks": {"0": 5}}')
    assert df.count() == 0  # inside a gap: empty, not an error
    df = read(spark, log_dir, startingOffsets='{"clicks": {"0": 3}}', endingOffsets='{"clicks": {"0": 7}}')
    assert [r.offset for r in df.collect()] == [5]
    df = read(spark, log_dir, startingOffsets='{"clicks": {"0": 11}}')
    assert df.count() == 0  # at the end
    # an end past the end fails, as Spark's Kafka source does (test_kafka_source_parity), unless
    # failOnDataLoss=false: then up to the end
    with pytest.raises(Exception, match="ending offset 500 is past the end of the log"):
        read(spark, log_dir, startingOffsets='{"clicks": {"0": 0}}', endingOffsets='{"clicks": {"0": 500}}').count()
    df = read(spark, log_dir, startingOffsets='{"clicks": {"0": 0}}', endingOffsets='{"clicks": {"0": 500}}',
              failOnDataLoss="false")
    assert df.count() == 3


def test_read_committed(spark, log_dir: Path) -> None:  # type: ignore[no-untyped-def]
    assert sorted(r.offset for r in read(spark, log_dir, topics="tx").collect()) == [0, 1, 2, 4, 5, 7]
    got = sorted(r.offset for r in read(spark, log_dir, topics="tx", isolationLevel="read_committed").collect())
    assert got == [0, 1, 2, 7]
    got = sorted(r.offset for r in read(spark, log_dir, **{"topics": "tx", "kafka.isolation.level": "read_committed"})
                 .collect())
    assert got == [0, 1, 2, 7]


def test_headers_and_metadata(spark, log_dir: Path) -> None:  # type: ignore[no-untyped-def]
    df = read(spark, log_dir, topics="orders", includeHeaders="true", includeMetadata="true",
              endingOffsets='{"orders": {"0": 2, "1": 2, "2": 2}}')
    rows = df.orderBy("partition", "offset").collect()
    assert rows[0].headers is None and [(h.key, bytes(h.value)) for h in rows[1].headers] == [("src", b"x")]
    assert rows[0].compression == "none" and rows[0].batchBaseOffset == 0 and rows[0].producerId == -1


def test_splitting_options(spark, log_dir: Path) -> None:  # type: ignore[no-untyped-def]
    df = read(spark, log_dir, topics="orders", maxRecordsPerPartition="50")
    assert df.rdd.getNumPartitions() >= 6
    assert rows_of(df) == sorted(oracle(log_dir, "orders"))
    df = read(spark, log_dir, topics="orders", minPartitions="7")
    assert df.rdd.getNumPartitions() >= 7 - 1
    assert rows_of(df) == sorted(oracle(log_dir, "orders"))
    assert read(spark, log_dir, topics="orders", maxBytesPerPartition="1000000000").rdd.getNumPartitions() == 1


def test_pushdown(spark, log_dir: Path) -> None:  # type: ignore[no-untyped-def]
    import spark_logsource

    with own_session(spark) as session:
        spark_logsource.register(session)
        df = session.read.format("klog").load(str(log_dir))
        q = df.filter("topic = 'orders' and partition in (0, 2) and offset >= 100 and offset < 110")
        want = [r for r in oracle(log_dir, "orders") if r[1] in (0, 2) and 100 <= r[2] < 110]
        assert rows_of(q) == sorted(want)
        ts = dt.datetime.fromtimestamp((T0 + 200_000) / 1000, tz=dt.timezone.utc)
        from pyspark.sql import functions as F

        q = session.read.format("klog").load(str(log_dir)).filter(F.col("timestamp") >= ts).filter("topic = 'orders'")
        assert rows_of(q) == sorted(r for r in oracle(log_dir, "orders") if r[3] >= T0 + 200_000)
        expected = session.createDataFrame([(r[2],) for r in oracle(log_dir, "orders") if r[1] == 1 and r[2] == 42],
                                           "offset bigint")
        assert_df_equality(session.read.format("klog").load(str(log_dir)).filter("partition = 1 and offset = 42")
                           .filter("topic = 'orders'").select("offset"), expected)


def test_default_source_reuses_a_dataframe_safely(spark, log_dir: Path) -> None:  # type: ignore[no-untyped-def]
    """Without pushdown (the auto-discovered default) a DataFrame reused across queries stays right."""
    df = read(spark, log_dir, topics="orders")
    assert df.count() == 900
    assert df.filter("offset >= 10 and offset < 20").count() == 30
    assert df.count() == 900


@pytest.mark.parametrize("opts, message", [
    ({"nosuch": "1"}, "unknown option 'nosuch'"),
    ({"startingOfsets": "earliest"}, "did you mean 'startingOffsets'"),
    ({"startingOffsets": "latest"}, "startingOffsets=latest is not allowed for batch"),
    ({"startingOffsets": "{not json"}, "is not valid JSON"),
    ({"startingOffsets": '{"orders": {"9": 0}}'}, "partitions that do not exist: orders-9"),
    ({"startingOffsets": '{"orders": {"0": -1}}'}, "is -1 (latest)"),
    ({"endingOffsets": "earliest"}, "endingOffsets=earliest is not allowed"),
    ({"topics": "nope"}, "no such topic"),
    ({"includeHeaders": "yes"}, "is not a boolean"),
    ({"minPartitions": "0"}, "must be at least 1"),
    ({"isolationLevel": "serializable"}, "expected read_committed or read_uncommitted"),
    ({"topics": "orders", "topicPattern": "o.*"}, "conflict"),
    ({"topics": "orders", "startingTimestamp": str(T0 + 10**12)}, "no record at or after timestamp"),
    ({"topics": "orders", "startingOffsets": '{"orders": {"0": 5000, "1": 0, "2": 0}}'}, "past the end of the log"),
])
def test_option_errors(spark, log_dir: Path, opts: dict[str, str], message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(Exception, match="InvalidOptionError|OffsetOutOfRangeError") as info:
        read(spark, log_dir, **opts).count()
    assert message in str(info.value)


def test_missing_path(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(Exception, match="no such log directory"):
        spark.read.format("klog").load(str(tmp_path / "nope")).count()
    with pytest.raises(Exception, match="no path"):
        spark.read.format("klog").load().count()


def test_corruption_fails_or_is_skipped(spark, log_dir: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    import hashlib
    import shutil

    d = tmp_path / "copy"
    shutil.copytree(log_dir / "orders-1", d / "orders-1")
    seg = sorted((d / "orders-1").glob("*.log"))[0]
    data = bytearray(seg.read_bytes())
    data[700] ^= 0xFF  # inside the first segment: a batch fails its CRC
    seg.write_bytes(bytes(data))
    (d / ".kafka_cleanshutdown").write_bytes(b"")  # as a broker leaves it: no recovery at open
    before = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in (d / "orders-1").iterdir()}
    with pytest.raises(Exception, match="Record is corrupt") as info:
        read(spark, d).count()
    assert str(seg) in str(info.value) and "position" in str(info.value)
    n = read(spark, d, failOnDataLoss="false").count()
    assert 250 <= n < 300  # the damaged batch (and up to the next index entry) left out, the rest read
    after = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in (d / "orders-1").iterdir()}
    assert before == after  # reads never write


def test_data_loss_below_log_start(spark, log_dir: Path) -> None:  # type: ignore[no-untyped-def]
    import shutil
    import tempfile

    from storage_core.log.checkpoint import OffsetCheckpointFile
    from storage_core.log.topic_partition import TopicPartition

    d = Path(tempfile.mkdtemp()) / "logs"
    shutil.copytree(log_dir / "orders-0", d / "orders-0")
    OffsetCheckpointFile(d / "log-start-offset-checkpoint").write({TopicPartition("orders", 0): 120})
    assert read(spark, d).count() == 180  # earliest is the log start offset
    with pytest.raises(Exception, match="below the log start offset 120"):
        read(spark, d, startingOffsets='{"orders": {"0": 100}}').count()
    assert read(spark, d, startingOffsets='{"orders": {"0": 100}}', failOnDataLoss="false").count() == 180


@pytest.mark.parametrize("fail_on_data_loss", ["true", "false"])
def test_a_start_from_a_timestamp_past_the_ending_offset_fails_as_sparks_source(  # type: ignore[no-untyped-def]
        spark, tmp_path: Path, fail_on_data_loss: str) -> None:
    """Issue 53 item 6 through Spark: a LogAppendTime topic of three partitions, ``startingTimestamp``
    (strategy ``error``) resolving past one partition's ``endingOffsets``, read_committed: Spark's
    Kafka source fails the query (``KafkaSourceRDD.compute`` asserts each start at or before its
    end, whatever failOnDataLoss says), so klog's does, naming the partition; the other partitions'
    records are never returned alone."""
    import json

    t0 = 1_700_000_000_000
    for p in range(3):
        (tmp_path / f"t-{p}").mkdir()
        with Log(tmp_path / f"t-{p}", LogConfig.from_properties({"message.timestamp.type": "LogAppendTime"}),
                 writable=True) as lg:
            for i in range(60):
                lg.append(build_batch([Record(0, t0 + i * 10, None, b"v%d" % i)]), now_ms=t0 + i * 10)

    def read(ending: dict[str, int]):  # type: ignore[no-untyped-def]
        return (spark.read.format("klog").option("subscribe", "t").option("startingTimestamp", str(t0 + 500))
                .option("startingOffsetsByTimestampStrategy", "error")
                .option("endingOffsets", json.dumps({"t": ending})).option("kafka.isolation.level", "read_committed")
                .option("failOnDataLoss", fail_on_data_loss).load(str(tmp_path)))

    assert read({"0": 55, "1": -1, "2": 58}).count() == 5 + 10 + 8  # 50..54, 50..59, 50..57
    with pytest.raises(Exception, match="t-2: beginning offset 50 is after the ending offset 20"):  # noqa: PT011
        read({"0": 55, "1": -1, "2": 20}).count()
