"""df.write.format("klog"): round trips in every codec, Kafka's partitioner, input errors, modes,
what Kafka's own FileRecords reads, concurrent jobs, a task that dies and is retried."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from kafka.partitioner.default import murmur2 as kp_murmur2
from spark_env import short_jvm_env

from storage_core.log.segment import scan_segment

pytestmark = pytest.mark.spark

T0_US = 1_700_000_000_000_000


def source_df(spark, n: int = 2000):  # type: ignore[no-untyped-def]
    return spark.range(n).selectExpr(
        "CASE WHEN id % 7 = 0 THEN NULL ELSE CAST(id % 50 AS STRING) END AS key",
        "CASE WHEN id % 11 = 0 THEN NULL ELSE CAST(CONCAT('value-', id) AS BINARY) END AS value",
        "CASE WHEN id % 3 = 0 THEN NULL ELSE array(named_struct('key', 'h', 'value', CAST(id AS STRING)),"
        " named_struct('key', 'n', 'value', CAST(NULL AS BINARY))) END AS headers",
        f"timestamp_micros({T0_US} + id * 1000) AS timestamp", "id")


def write(df, path: Path, mode: str = "append", **opts: str) -> None:  # type: ignore[no-untyped-def]
    w = df.write.format("klog").mode(mode)
    for k, v in opts.items():
        w = w.option(k, v)
    w.save(str(path))


def as_rows(df):  # type: ignore[no-untyped-def]
    return sorted(((None if r.key is None else bytes(r.key), None if r.value is None else bytes(r.value),
                   None if not r.headers else tuple((h.key, None if h.value is None else bytes(h.value))
                                                    for h in r.headers),
                   int(r.timestamp.timestamp() * 1000)) for r in df.collect()), key=repr)


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_round_trip_every_codec(spark, tmp_path: Path, codec: str) -> None:  # type: ignore[no-untyped-def]
    src = source_df(spark).drop("id")
    write(src, tmp_path, topic="t", numPartitions="3", compression=codec, **{"segment.bytes": "20000"})
    back = spark.read.format("klog").option("includeHeaders", "true").load(str(tmp_path))
    want = sorted(((None if r.key is None else r.key.encode(), None if r.value is None else bytes(r.value),
                   None if not r.headers else tuple((h.key, None if h.value is None else bytes(h.value))
                                                    for h in r.headers),
                   int(r.timestamp.timestamp() * 1000)) for r in src.collect()), key=repr)
    assert as_rows(back) == want
    for p in range(3):
        segs = sorted((tmp_path / f"t-{p}").glob("*.log"))
        assert len(segs) > 1  # rolled by segment.bytes
        offsets = [r.offset for r in back.filter(f"partition = {p}").orderBy("offset").collect()]
        assert offsets == list(range(len(offsets)))  # contiguous per partition
        for seg in segs:
            scan = scan_segment(seg)
            assert scan.error is None and scan.partial_tail is None
            assert seg.with_suffix(".index").read_bytes() == b"".join(
                int(e.offset - scan.base_offset).to_bytes(4, "big") + e.position.to_bytes(4, "big")
                for e in scan.offset_entries)  # the index is what a rebuild gives
    res = subprocess.run([sys.executable, "-m", "storage_core.tools.cli", "verify", str(tmp_path)], capture_output=True,
                         text=True)
    assert res.returncode == 0 and "warning" not in res.stderr, res.stderr


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_kafka_reads_what_spark_wrote(spark, tmp_path: Path, codec: str) -> None:  # type: ignore[no-untyped-def]
    import kafka_oracle

    reason = kafka_oracle.oracle_available()
    if reason is not None:
        pytest.skip(reason)
    src = source_df(spark, 500).drop("id")
    write(src, tmp_path, topic="t", compression=codec)
    segs = sorted(tmp_path.glob("t-0/*.log"))
    lines = [json.loads(x) for s in segs for x in kafka_oracle.kafka_dump([s])[str(s)].lines]
    assert all("error" not in x for x in lines)
    got = sorted(((None if x["key_b64"] is None else base64.b64decode(x["key_b64"]),
                  None if x["value_b64"] is None else base64.b64decode(x["value_b64"]),
                  None if not x["headers"] else tuple((k, None if v is None else base64.b64decode(v))
                                                      for k, v in x["headers"]), x["timestamp"]) for x in lines),
                 key=repr)
    assert got == as_rows(spark.read.format("klog").option("includeHeaders", "true").load(str(tmp_path)))
    assert [x["offset"] for x in lines] == list(range(500))


def test_partitioner_is_kafkas(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    n = 100_000
    df = spark.range(n).selectExpr("CONCAT('key-', CAST(id AS STRING)) AS key", "CAST(id AS STRING) AS value")
    write(df, tmp_path, topic="p", numPartitions="7")
    got = {bytes(r.key): r.partition for r in spark.read.format("klog").load(str(tmp_path)).collect()}
    assert len(got) == n
    assert all(p == (kp_murmur2(k) & 0x7FFFFFFF) % 7 for k, p in got.items())


def test_explicit_partitions_topic_column_and_null_keys(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    df = spark.range(300).selectExpr("CASE WHEN id < 100 THEN 'a' ELSE 'b' END AS topic",
                                     "CAST(NULL AS STRING) AS key", "CAST(id AS STRING) AS value",
                                     "CASE WHEN id < 100 THEN CAST(id % 2 AS INT) ELSE NULL END AS partition")
    write(df, tmp_path, numPartitions="4")
    back = spark.read.format("klog").load(str(tmp_path))
    counts = {(r.topic, r.partition): r["count"] for r in back.groupBy("topic", "partition").count().collect()}
    assert counts[("a", 0)] == 50 and counts[("a", 1)] == 50 and ("a", 2) not in counts
    b = [counts.get(("b", p), 0) for p in range(4)]
    assert sum(b) == 200 and max(b) - min(b) <= 4  # null keys spread evenly
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == [f"{t}-{p}" for t in "ab" for p in range(4)]


def test_existing_topic_keeps_its_partition_count(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    write(spark.range(10).selectExpr("CAST(id AS STRING) AS key", "CAST(id AS STRING) AS value"), tmp_path,
          topic="t", numPartitions="2")
    write(spark.range(10).selectExpr("CAST(id AS STRING) AS key", "CAST(id AS STRING) AS value"), tmp_path,
          topic="t", numPartitions="5")
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == ["t-0", "t-1"]


def test_idempotent_writes_by_txn_app_id_and_version(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Delta Lake's idempotent-write options: a write whose txnVersion is at or below the last one
    committed for its txnAppId adds nothing (a rerun of a job whose driver died unreported)."""
    def job(tag: str, app: str, version: int) -> None:
        write(spark.range(50).selectExpr(f"CONCAT('{tag}', CAST(id AS STRING)) AS value"), tmp_path, topic="t",
              numPartitions="2", txnAppId=app, txnVersion=str(version))

    job("a", "app", 0)
    job("a", "app", 0)  # the rerun
    job("b", "app", 1)
    job("c", "app", 1)  # an older version than committed: nothing
    job("c", "app", 0)
    job("d", "other", 0)  # another application's own versions
    values = [r.value.decode() for r in spark.read.format("klog").load(str(tmp_path)).collect()]
    assert sorted({v[0] for v in values}) == ["a", "b", "d"] and len(values) == 150


def test_overwrite_replaces_the_data_and_keeps_offsets_rising(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    df = spark.range(100).selectExpr("CAST(NULL AS STRING) AS key", "CAST(id AS STRING) AS value")
    write(df, tmp_path, topic="t")
    write(spark.range(5).selectExpr("CAST(id + 1000 AS STRING) AS value"), tmp_path, mode="overwrite", topic="t")
    back = spark.read.format("klog").load(str(tmp_path)).orderBy("offset").collect()
    assert [r.value.decode() for r in back] == [str(i) for i in range(1000, 1005)]
    assert [r.offset for r in back] == list(range(100, 105))


@pytest.mark.parametrize("columns, opts, message", [
    (["CAST(id AS STRING) AS key"], {"topic": "t"}, "no 'value' column"),
    (["id AS value"], {"topic": "t"}, "column 'value' has type bigint; expected string or binary"),
    (["CAST(id AS STRING) AS value", "id AS key"], {"topic": "t"}, "column 'key' has type bigint"),
    (["CAST(id AS STRING) AS value", "id AS partition"], {"topic": "t"}, "column 'partition' has type bigint"),
    (["CAST(id AS STRING) AS value"], {}, "no topic"),
    (["CAST(id AS STRING) AS value"], {"topic": "bad/name"}, "bad/name"),
    (["CAST(id AS STRING) AS value"], {"topic": "t", "compression": "brotli"}, "Unknown compression type 'brotli'"),
    (["CAST(id AS STRING) AS value"], {"topic": "t", "segment.bytes": "-5"}, "segment.bytes"),
    (["CAST(id AS STRING) AS value"], {"topic": "t", "bogus": "1"}, "unknown write option 'bogus'"),
    (["CAST(id AS STRING) AS value", "CAST(id + 5 AS INT) AS partition"], {"topic": "t"}, "which has 1 partitions"),
    (["CAST(id AS STRING) AS value"], {"topic": "t", "txnAppId": "a"}, "txnAppId and txnVersion go together"),
    (["CAST(id AS STRING) AS value"], {"topic": "t", "txnAppId": "a", "txnVersion": "x"}, "txnVersion='x'"),
    (["CAST(id AS STRING) AS value"], {"topic": "t", "txnAppId": "a", "txnVersion": "-1"}, "must be in 0.."),
])
def test_input_errors(spark, tmp_path: Path, columns: list[str], opts: dict[str, str], message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(Exception) as info:
        write(spark.range(3).selectExpr(*columns), tmp_path, **opts)
    assert message in str(info.value)
    visible = [p for p in tmp_path.rglob("*.log") if ".klog-staging" not in str(p) and p.stat().st_size]
    assert visible == []  # nothing written


def test_two_jobs_at_once(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    errors: list[BaseException] = []

    def job(tag: str) -> None:
        try:
            # Spark resolves Python data sources through the thread's active session (a new thread has none)
            spark._jvm.org.apache.spark.sql.SparkSession.setActiveSession(spark._jsparkSession)
            df = spark.range(2000).selectExpr(f"CONCAT('{tag}', CAST(id AS STRING)) AS value").repartition(4)
            write(df, tmp_path, topic="t")
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=job, args=(t,)) for t in "ab"]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    rows = spark.read.format("klog").load(str(tmp_path)).orderBy("offset").collect()
    assert [r.offset for r in rows] == list(range(4000))
    tags = [r.value.decode()[0] for r in rows]
    # each job's records are contiguous: one commit after the other
    assert tags == sorted(tags) or tags == sorted(tags, reverse=True)


def test_killed_task_attempts_are_retried_without_duplicates(tmp_path: Path) -> None:
    """local[2,4] retries failed task attempts. In each of 8 jobs the first attempt of a random
    task kills its Python worker after staging; every job must still land exactly once."""
    fault = tmp_path / "fault.json"
    script = tmp_path / "job.py"
    script.write_text(f"""
import json, random
from pyspark.sql import SparkSession
spark = SparkSession.builder.master("local[2,4]").config("spark.ui.enabled", "false").getOrCreate()
spark.sparkContext.setLogLevel("OFF")
rng = random.Random(5)
for job in range(8):
    with open({str(fault)!r}, "w") as f:
        json.dump({{"point": "task-staged", "partition": rng.randrange(4), "attempt": 0}}, f)
    df = spark.range(2000, numPartitions=4).selectExpr("CAST(id AS STRING) AS key",
                                                        f"CONCAT('j{{job}}:', CAST(id AS STRING)) AS value")
    df.write.format("klog").option("topic", "t").option("numPartitions", "2").mode("append").save({str(tmp_path / 'data')!r})
back = spark.read.format("klog").load({str(tmp_path / 'data')!r})
print("RESULT", back.count(), back.select("value").distinct().count())
spark.stop()
""")
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, KLOG_FAULT_FILE=str(fault), **short_jvm_env())
    res = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=900)
    assert "RESULT 16000 16000" in res.stdout, res.stderr[-3000:]
    fired = (tmp_path / "fault.json.fired").read_text().splitlines()
    assert len(fired) == 8  # one killed attempt per job, each retried
    leftovers = list((tmp_path / "data").rglob(".klog-staging-*"))
    assert leftovers == []


def test_with_kafka_partitions_gives_one_task_per_partition(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    import spark_logsource

    df = spark.range(20_000).selectExpr("CAST(id % 977 AS STRING) AS key", "CAST(id AS STRING) AS value")
    pdf = spark_logsource.with_kafka_partitions(df, 5)
    assert pdf.rdd.getNumPartitions() == 5
    assert sorted(pdf.rdd.mapPartitions(lambda it: [sorted({r.partition for r in it})]).collect()) == \
        [[0], [1], [2], [3], [4]]
    write(pdf, tmp_path, topic="t", numPartitions="5")
    assert all(len(list((tmp_path / f"t-{p}").glob("*.log"))) == 1 for p in range(5))  # one segment run each
    back = spark.read.format("klog").load(str(tmp_path)).collect()
    assert len(back) == 20_000
    assert all(r.partition == (kp_murmur2(bytes(r.key)) & 0x7FFFFFFF) % 5 for r in back)


def test_topic_configs_given_as_options_become_the_topics_own(spark, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from storage_core.log.topic_configs import load_topic_configs
    from storage_core.tools.cli import main as klog

    df = spark.createDataFrame([(f"k{i % 5}", f"v{i}") for i in range(50)], "key string, value string")
    df.coalesce(1).write.format("klog").mode("append").option("topic", "state").option("cleanup.policy", "compact") \
        .option("segment.bytes", "1048576").save(str(tmp_path))
    assert load_topic_configs(tmp_path)["state"] == {"cleanup.policy": "compact", "segment.bytes": "1048576"}
    df.coalesce(1).write.format("klog").mode("append").option("topic", "plain").save(str(tmp_path))
    assert "plain" not in load_topic_configs(tmp_path)  # nothing given, nothing stored
    # klog compact (no --topic) now knows 'state' is compacted: the latest value per key stays
    assert klog(["compact", str(tmp_path), "--roll", "--quiet"]) == 0
    rows = spark.read.format("klog").option("topics", "state").load(str(tmp_path)).selectExpr(
        "cast(key as string) k", "cast(value as string) v").collect()
    assert sorted((r.k, r.v) for r in rows) == [(f"k{i}", f"v{45 + i}") for i in range(5)]
    assert spark.read.format("klog").option("topics", "plain").load(str(tmp_path)).count() == 50


@pytest.mark.parametrize("where", ["input", "staging"])
def test_a_failing_task_removes_its_own_staging(tmp_path: Path, where: str) -> None:
    """Spark aborts a job as soon as one task fails, without waiting for its other tasks to be
    killed, so the job's abort may collect staging before a slower task has written its own (CI54
    saw one left behind). A task whose write fails, in its input or in its staging thread,
    removes what it staged before failing."""
    import pyarrow as pa

    from spark_logsource.writer import KlogWriter, parse_write_options
    from storage_core.errors import InvalidTimestampError

    root = tmp_path / "logs"
    writer = KlogWriter(parse_write_options({"path": str(root), "topic": "t", "numPartitions": "2"}), False)
    now = pa.array([int(time.time() * 1000)] * 4000, pa.timestamp("ms"))
    rows = pa.record_batch({"key": [str(i % 5) for i in range(4000)], "value": [b"v" * 300] * 4000, "timestamp": now})

    def batches():  # type: ignore[no-untyped-def]
        yield from [rows] * 8  # enough for several staged runs per partition
        if where == "input":
            raise RuntimeError("the input ended in an error")
        # a timestamp beyond message.timestamp.after.max.ms: refused by the staging thread's append
        later = pa.array([int(time.time() * 1000) + 10 * 86_400_000], pa.timestamp("ms"))
        yield pa.record_batch({"key": ["k"], "value": [b"x"], "timestamp": later})

    with pytest.raises(RuntimeError if where == "input" else InvalidTimestampError):
        writer.write(batches())
    left = sorted(str(p.relative_to(root)) for p in root.rglob(".klog-staging-*"))
    assert left == []
    assert sorted(p.name for p in root.iterdir() if p.is_dir()) == ["t-0", "t-1"]  # the abort removes these
