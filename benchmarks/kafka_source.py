"""klog against Spark's own Kafka source and sink, in one run, on one broker's data.

A single-node Apache Kafka broker (``tests/broker_fixture.py``) runs on 127.0.0.1; Spark's Kafka
connector (``tests/spark_kafka.py``) is on the session's ``spark.jars``. On one topic of 4
partitions, lz4, 100-byte values (4M records by default):

(1) batch write: ``df.write.format("kafka")`` into the broker (the peer) and
    ``df.write.format("klog")`` into a fresh dir, the same frame;
(2) full scan (count and sum of value lengths): ``format("kafka")`` from the broker and
    ``format("klog")`` on the broker's live log dir;
(3) the last 10,000 records of each partition, both ways.

Both sides get the same ``local[2]`` session; the broker runs throughout (klog reads its live
dir), so each query's figures include the broker's CPU seconds during it (from ``/proc``): Spark's
Kafka source makes the broker serve every fetch, klog does not touch it. After one untimed round of
each query, the queries take turns ``--repeat`` rounds; the best time of each is kept.
Run: ``python -m benchmarks.kafka_source [--records N]``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks import _summary as summary
from benchmarks._spark import bench_session

TESTS = Path(__file__).resolve().parent.parent / "tests"
TOPIC = "bench"
PARTITIONS = 4


def _helpers() -> tuple[Any, Any]:
    if str(TESTS) not in sys.path:
        sys.path.insert(0, str(TESTS))
    import broker_fixture
    import spark_kafka

    return broker_fixture, spark_kafka


def _cpu_seconds(pid: int) -> float:
    """User plus system CPU seconds of process ``pid`` so far (``/proc/<pid>/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _frame(spark: Any, records: int) -> Any:
    from pyspark.sql import functions as F

    return spark.range(records, numPartitions=4).select(
        F.expr("cast(cast(id % 100000 as string) as binary)").alias("key"),
        F.expr("cast(substring(sha2(cast(id as string), 512), 1, 100) as binary)").alias("value"))


def run(spark: Any, broker: Any, work: Path, records: int, repeat: int) -> dict[str, float]:
    from pyspark.sql import functions as F

    pid = broker.proc.pid
    broker.create_topic(TOPIC, PARTITIONS, {"compression.type": "lz4", "segment.bytes": str(256 << 20)})
    df = _frame(spark, records).cache()
    df.count()
    producer = {"kafka.bootstrap.servers": broker.bootstrap, "kafka.compression.type": "lz4",
                "kafka.linger.ms": "20", "kafka.batch.size": str(256 << 10)}

    def timed(fn: Callable[[], object]) -> tuple[float, float, object]:
        cpu, t = _cpu_seconds(pid), time.perf_counter()
        out = fn()
        return time.perf_counter() - t, _cpu_seconds(pid) - cpu, out

    # (1) writes: the broker's topic is written once (it is what the reads read); klog's dir anew
    # each round
    t_kafka_write, cpu_kafka_write, _ = timed(lambda: df.write.format("kafka").options(**producer)
                                              .option("topic", TOPIC).save())
    t_klog_write = float("inf")
    for i in range(repeat):
        t, _, _ = timed(lambda i=i: df.write.format("klog").option("topic", TOPIC).option("compression", "lz4")
                        .option("numPartitions", str(PARTITIONS)).mode("append").save(str(work / f"w{i}")))
        t_klog_write = min(t_klog_write, t)
    df.unpersist()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # the broker has flushed what it acknowledged to its page cache
        if spark.read.format("klog").option("subscribe", TOPIC).load(str(broker.log_dir)).count() == records:
            break
        time.sleep(0.5)

    def scan(fmt: str, **opts: str) -> list[Any]:
        reader = spark.read.format(fmt).option("subscribe", TOPIC).options(**opts)
        d = reader.option("kafka.bootstrap.servers", broker.bootstrap).load() if fmt == "kafka" \
            else reader.load(str(broker.log_dir))
        return d.agg(F.count("*").alias("n"), F.sum(F.length("value")).alias("bytes")).collect()

    ends = {p: 0 for p in range(PARTITIONS)}
    for r in spark.read.format("klog").option("subscribe", TOPIC).load(str(broker.log_dir)) \
            .groupBy("partition").agg(F.max("offset").alias("last")).collect():
        ends[r.partition] = r.last + 1
    start = json.dumps({TOPIC: {str(p): max(0, e - 10_000) for p, e in ends.items()}})
    queries: dict[str, Callable[[], list[Any]]] = {
        "kafka scan": lambda: scan("kafka"),
        "klog scan": lambda: scan("klog"),
        "kafka tail": lambda: scan("kafka", startingOffsets=start),
        "klog tail": lambda: scan("klog", startingOffsets=start),
    }
    for fn in queries.values():  # JVM, Python workers and the broker's page cache warm
        fn()
    best = dict.fromkeys(queries, float("inf"))
    broker_cpu = dict.fromkeys(queries, 0.0)
    results: dict[str, Any] = {}
    for _ in range(repeat):
        for name, fn in queries.items():
            t, cpu, results[name] = timed(fn)
            if t < best[name]:
                best[name], broker_cpu[name] = t, cpu
    assert results["kafka scan"][0].n == results["klog scan"][0].n == records, results
    assert results["kafka scan"][0].bytes == results["klog scan"][0].bytes == records * 100
    tail_n = sum(min(e, 10_000) for e in ends.values())
    assert results["kafka tail"][0].n == results["klog tail"][0].n == tail_n, results

    n = records
    print(f"{n:,} records of 100 B, lz4, {PARTITIONS} partitions; broker on 127.0.0.1, Spark local[2]")
    print()
    print(f"{'query':<52} {'best s':>8} {'broker CPU s':>13}")
    rows = [("(1) df.write.format('kafka') into the broker", t_kafka_write, cpu_kafka_write),
            ("(1) df.write.format('klog') into a dir", t_klog_write, 0.0)]
    rows += [(f"({2 if 'scan' in q else 3}) {q}", best[q], broker_cpu[q]) for q in queries]
    for what, t, cpu in rows:
        print(f"{what:<52} {t:>8.2f} {cpu:>13.2f}")
    print()
    scan_ratio = best["kafka scan"] / best["klog scan"]
    tail_ratio = best["kafka tail"] / best["klog tail"]
    write_ratio = t_kafka_write / t_klog_write
    print(f"ratio full scan klog/kafka-source throughput: {scan_ratio:.2f}x")
    print(f"ratio tail klog/kafka-source throughput: {tail_ratio:.2f}x")
    print(f"ratio batch write klog/kafka-sink throughput: {write_ratio:.2f}x")
    print()
    summary.add(summary.Row(f"full scan, {n / 1e6:g}M records of 100 B, lz4, {PARTITIONS} partitions (count, sum of "
                            "value lengths)", f'`format("klog")` on the broker\'s live dir, {best["klog scan"]:.2f} s',
                            f'`format("kafka")` from the same broker, {best["kafka scan"]:.2f} s (broker '
                            f'{broker_cpu["kafka scan"]:.1f} CPU s)', scan_ratio, "throughput", 5.0))
    summary.add(summary.Row("the last 10,000 records of each partition", f'{best["klog tail"]:.2f} s',
                            f'Kafka source, {best["kafka tail"]:.2f} s', tail_ratio, "throughput", 5.0))
    summary.add(summary.Row(f"batch write of {n / 1e6:g}M rows, lz4", f'`df.write.format("klog")`, {t_klog_write:.2f} s',
                            f'`df.write.format("kafka")` into the broker, {t_kafka_write:.2f} s (broker '
                            f"{cpu_kafka_write:.1f} CPU s)", write_ratio, "throughput", 3.0))
    return {"scan": scan_ratio, "tail": tail_ratio, "write": write_ratio}


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.kafka_source", description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=4_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    broker_fixture, spark_kafka = _helpers()
    for reason in (broker_fixture.unavailable(), spark_kafka.unavailable()):
        if reason is not None:
            print(f"benchmarks.kafka_source: skipped: {reason}")
            return 0
    jars = [str(j) for j in spark_kafka.connector_jars()]
    with tempfile.TemporaryDirectory(prefix="klog-bench-kafka-") as tmp, \
            bench_session("klog-bench-kafka-source", cores=2, jars=jars) as (spark, work):
        broker = broker_fixture.Broker(Path(tmp) / "broker")
        broker.start()
        try:
            run(spark, broker, work, args.records, args.repeat)
        finally:
            broker.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
