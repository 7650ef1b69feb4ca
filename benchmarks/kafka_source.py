"""klog against Spark's own Kafka source and sink, in one run, on one broker's data.

A single-node Apache Kafka broker (``tests/oracles/broker_fixture.py``) runs on 127.0.0.1; Spark's Kafka
connector (``tests/oracles/spark_kafka.py``) is on the session's ``spark.jars``. On one topic of 4
partitions, lz4, 100-byte values (4M records by default):

(1) batch write: ``df.write.format("kafka")`` into the broker (the peer) and
    ``df.write.format("klog")`` into a fresh dir, the same frame, both sides with lz4 and both
    with no compression (the default of each);
(2) full scan (count and sum of value lengths): ``format("kafka")`` from the broker and
    ``format("klog")`` on the broker's live log dir;
(3) the last 10,000 records of each partition, both ways;
(4) a stream tailing a topic a producer (kafka-python) writes at a fixed rate: the time from each
    record's send to its row in a micro-batch at the driver, p50 and p99, each side in turn.

Beside (2), the Python Data Source API's own ceiling: a source yielding the same number of rows
from Arrow batches already in memory. The Kafka source's time over the ceiling's bounds the ratio
any Python data source can reach.

Both sides get the same ``local[2]`` session; the broker runs throughout (klog reads its live
dir), so each query's figures include the broker's CPU seconds during it (from ``/proc``): Spark's
Kafka source makes the broker serve every fetch, klog does not touch it. Beside them, the CPU
seconds of Spark's JVM (task threads, JIT, the Kafka client) and of its Python workers (a Python
data source's reads and writes, and the Arrow batches they exchange with the JVM): where each
side's time goes, on the same two cores. After one untimed round of
each query, the queries take turns ``--repeat`` rounds; the best time of each is kept.
Run: ``python -m benchmarks.kafka_source [--records N]``.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks import _summary as summary
from benchmarks._broker import broker_and_connector
from benchmarks._spark import bench_session

TOPIC = "bench"
PARTITIONS = 4
#: the topic the scans read: lz4, as the producer sends it (the topics of later write rounds keep what the producer
#: sends); segments large enough that each partition is one
TOPIC_CONFIGS = {"compression.type": "lz4", "segment.bytes": str(256 << 20)}
#: the codecs both sides write with: lz4 (the topic the scans read), and none (the default of the Kafka producer and of
#: klog's writer, so what a ported job writes unless it says otherwise)
WRITE_CODECS = ("lz4", "none")


def _cpu_seconds(pid: int) -> float:
    """User plus system CPU seconds of process ``pid`` so far (``/proc/<pid>/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


#: a process's CPU seconds: (parent pid, its own, what the children it waited for left in its counts)
_Proc = tuple[int, float, float]


def _spark_cpu_seconds(jvm: int | None) -> tuple[float, dict[int, _Proc]]:
    """CPU seconds so far of Spark's JVM ``jvm``, and of its Python workers per process (its
    descendants: the pyspark daemon and its forks; the JVM itself with only its reaped children's
    share); NaN and nothing where the JVM's pid is not known (a session this process did not
    launch). :func:`_workers_delta` takes the difference of two readings."""
    if jvm is None:
        return float("nan"), {}
    stats: dict[int, tuple[int, list[int]]] = {}
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                fields = (p / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:  # gone meanwhile
                continue
            stats[int(p.name)] = (int(fields[1]), [int(x) for x in fields[11:15]])  # ppid; utime stime cutime cstime
    if jvm not in stats:
        return float("nan"), {}
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    tck = os.sysconf("SC_CLK_TCK")
    own = sum(stats[jvm][1][:2]) / tck
    # a worker the JVM forked itself and reaped left its CPU in the JVM's cutime/cstime
    procs, todo = {jvm: (stats[jvm][0], 0.0, sum(stats[jvm][1][2:]) / tck)}, list(children.get(jvm, []))
    while todo:
        pid = todo.pop()
        ppid, t = stats[pid]
        procs[pid] = (ppid, sum(t[:2]) / tck, sum(t[2:]) / tck)
        todo += children.get(pid, [])
    return own, procs


def _workers_delta(before: dict[int, _Proc], after: dict[int, _Proc]) -> float:
    """The workers' CPU seconds between two readings. A worker that exited meanwhile is in its
    parent's counts if the parent waited for it; if not (its parent ignores SIGCHLD, or has not
    reaped it yet), what it spent before the first reading is not taken off, and what it spent after
    is missing: the figure is then a lower bound, never below zero."""
    if not after:
        return float("nan")
    delta = sum(s + c for _, s, c in after.values()) - sum(s + c for _, s, c in before.values())
    for pid, (ppid, s, c) in before.items():
        if pid not in after:
            grew = after[ppid][2] - before[ppid][2] if ppid in after and ppid in before else 0.0
            if grew < s + c:  # not in its parent's counts
                delta += s + c
    return delta


@dataclass(frozen=True)
class _Run:
    """One timed run: wall seconds and the CPU seconds each side spent meanwhile."""

    wall: float
    broker: float
    jvm: float
    workers: float


def _jvm_pid(spark: Any) -> int | None:
    """The pid of the JVM PySpark launched for ``spark`` (its gateway's process), if it did."""
    proc = getattr(getattr(spark.sparkContext, "_gateway", None), "proc", None)
    return getattr(proc, "pid", None)


def _frame(spark: Any, records: int) -> Any:
    from pyspark.sql import functions as F

    return spark.range(records, numPartitions=4).select(
        F.expr("cast(cast(id % 100000 as string) as binary)").alias("key"),
        F.expr("cast(substring(sha2(cast(id as string), 512), 1, 100) as binary)").alias("value"))


def run(spark: Any, broker: Any, work: Path, records: int, repeat: int) -> dict[str, float]:
    from pyspark.sql import functions as F

    pid, jvm = broker.proc.pid, _jvm_pid(spark)
    broker.create_topic(TOPIC, PARTITIONS, TOPIC_CONFIGS)
    df = _frame(spark, records).cache()
    df.count()
    producer = {"kafka.bootstrap.servers": broker.bootstrap, "kafka.compression.type": "lz4",
                "kafka.linger.ms": "20", "kafka.batch.size": str(256 << 10)}

    best: dict[str, _Run] = {}  # what -> its fastest run

    def timed(what: str, fn: Callable[[], Any]) -> Any:
        """fn's result; its run is kept in ``best[what]`` if it is the fastest of ``what`` so far."""
        broker0, (jvm0, py0), t = _cpu_seconds(pid), _spark_cpu_seconds(jvm), time.perf_counter()
        out = fn()
        wall, (jvm1, py1) = time.perf_counter() - t, _spark_cpu_seconds(jvm)
        if what not in best or wall < best[what].wall:
            best[what] = _Run(wall, _cpu_seconds(pid) - broker0, jvm1 - jvm0, _workers_delta(py0, py1))
        return out

    # (1) writes, after one small untimed write each (JVM, connector, Python workers warm). Each
    # side writes the same number of rounds, each into a place of its own: the Kafka sink into a
    # new topic (the first is what the reads read), klog into a new dir; both then take page cache
    # the system has not handed out before, and each side's fastest round counts
    broker.create_topic("warm", PARTITIONS)
    small = _frame(spark, 10_000)
    small.write.format("kafka").options(**producer).option("topic", "warm").save()
    small.write.format("klog").option("topic", TOPIC).option("numPartitions", str(PARTITIONS)).mode("append") \
        .save(str(work / "warm"))
    from benchmarks.spark_write import _counting_sink

    spark.dataSource.register(_counting_sink())
    for i in range(repeat):  # the Kafka sink, klog and the API's ceiling (a writer that only counts bytes) take turns
        for codec in WRITE_CODECS:  # lz4, as the scans read; and none, both sides' default
            topic = TOPIC if i == 0 and codec == "lz4" else f"{TOPIC}-{codec}-w{i}"
            if topic != TOPIC:
                broker.create_topic(topic, PARTITIONS, {**TOPIC_CONFIGS, "compression.type": "producer"})
            timed(f"kafka write {codec}", lambda t=topic, c=codec: df.write.format("kafka").options(**producer)
                  .option("kafka.compression.type", c).option("topic", t).save())
            timed(f"klog write {codec}", lambda i=i, c=codec: df.write.format("klog").option("topic", TOPIC)
                  .option("compression", c).option("numPartitions", str(PARTITIONS)).mode("append")
                  .save(str(work / f"w{i}-{c}")))
        timed("ceiling write", lambda: df.write.format("klogbenchcount").mode("append").save())
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
    from benchmarks.spark_read import _memory_source

    spark.dataSource.register(_memory_source())

    tail_n = sum(min(e, 10_000) for e in ends.values())

    def ceiling(rows: int) -> list[Any]:  # the same count and sum, from rows already in memory as Arrow
        d = spark.read.format("klogbenchmem").option("per", rows // 2).load()
        return d.agg(F.count("*").alias("n"), F.sum(F.length("value")).alias("bytes")).collect()

    queries: dict[str, Callable[[], list[Any]]] = {
        "ceiling scan": lambda: ceiling(records),
        "ceiling tail": lambda: ceiling(tail_n),
        "kafka scan": lambda: scan("kafka"),
        "klog scan": lambda: scan("klog"),
        "kafka tail": lambda: scan("kafka", startingOffsets=start),
        "klog tail": lambda: scan("klog", startingOffsets=start),
    }
    for fn in queries.values():  # JVM, Python workers and the broker's page cache warm
        fn()
    results: dict[str, Any] = {}
    for _ in range(repeat):
        for name, fn in queries.items():
            results[name] = timed(name, fn)
    assert results["kafka scan"][0].n == results["klog scan"][0].n == records, results
    assert results["kafka scan"][0].bytes == results["klog scan"][0].bytes == records * 100
    assert results["kafka tail"][0].n == results["klog tail"][0].n == tail_n, results

    n = records
    print(f"{n:,} records of 100 B, lz4, {PARTITIONS} partitions; broker on 127.0.0.1, Spark local[2]")
    print()
    print(f"{'query':<56} {'best s':>8} {'broker CPU s':>13} {'Spark JVM CPU s':>16} {'Python workers CPU s':>21}")
    rows = [(f"(1) df.write.format('{fmt}') {where}, {codec}", f"{fmt} write {codec}") for codec in WRITE_CODECS
            for fmt, where in (("kafka", "into the broker"), ("klog", "into a dir"))]
    rows += [("(1) a writer that only counts bytes (the API's ceiling)", "ceiling write")]
    rows += [(f"({2 if 'scan' in q else 3}) {q}" + (" (in-memory Arrow: the API's ceiling)" if q.startswith("ceiling")
                                                     else ""), q) for q in queries]
    for what, key in rows:
        r = best[key]
        print(f"{what:<56} {r.wall:>8.2f} {r.broker:>13.2f} {r.jvm:>16.2f} {r.workers:>21.2f}")
    print()
    wall = {what: r.wall for what, r in best.items()}
    scan_ratio = wall["kafka scan"] / wall["klog scan"]
    bound = wall["kafka scan"] / wall["ceiling scan"]
    print(f"ratio full scan API-ceiling/kafka-source throughput: {bound:.2f}x (no Python data source can do better)")
    tail_ratio = wall["kafka tail"] / wall["klog tail"]
    tail_bound = wall["kafka tail"] / wall["ceiling tail"]
    print(f"ratio tail API-ceiling/kafka-source throughput: {tail_bound:.2f}x (no Python data source can do better)")
    write_ratio = {c: wall[f"kafka write {c}"] / wall[f"klog write {c}"] for c in WRITE_CODECS}
    write_bound = {c: wall[f"kafka write {c}"] / wall["ceiling write"] for c in WRITE_CODECS}
    for c in WRITE_CODECS:
        print(f"ratio batch write {c} API-ceiling/kafka-sink throughput: {write_bound[c]:.2f}x (no Python data source "
              "can do better)")
    print(f"ratio full scan klog/kafka-source throughput: {scan_ratio:.2f}x")
    print(f"ratio tail klog/kafka-source throughput: {tail_ratio:.2f}x")
    for c in WRITE_CODECS:
        print(f"ratio batch write {c} klog/kafka-sink throughput: {write_ratio[c]:.2f}x")
    print()
    summary.add(summary.Row(f"full scan, {n / 1e6:g}M records of 100 B, lz4, {PARTITIONS} partitions (count, sum of "
                            "value lengths)", f'`format("klog")` on the broker\'s live dir, {wall["klog scan"]:.2f} s',
                            f'`format("kafka")` from the same broker, {wall["kafka scan"]:.2f} s (broker '
                            f'{best["kafka scan"].broker:.1f} CPU s)', scan_ratio, "throughput", 5.0))
    summary.add(summary.Row("same", f"a Python data source yielding the rows from in-memory Arrow (the API's "
                            f'ceiling), {wall["ceiling scan"]:.2f} s', f'the Kafka source, {wall["kafka scan"]:.2f} s',
                            bound, "throughput", None))
    summary.add(summary.Row("the last 10,000 records of each partition", f'{wall["klog tail"]:.2f} s',
                            f'Kafka source, {wall["kafka tail"]:.2f} s', tail_ratio, "throughput", 5.0))
    summary.add(summary.Row("same", f"a Python data source yielding {tail_n:,} rows from in-memory Arrow (the API's "
                            f'ceiling), {wall["ceiling tail"]:.2f} s', f'the Kafka source, {wall["kafka tail"]:.2f} s',
                            tail_bound, "throughput", None))
    for c in WRITE_CODECS:
        summary.add(summary.Row(f"batch write of {n / 1e6:g}M rows, {c} (both sides)",
                                f'`df.write.format("klog")`, {wall[f"klog write {c}"]:.2f} s',
                                f'`df.write.format("kafka")` into the broker, {wall[f"kafka write {c}"]:.2f} s (broker '
                                f'{best[f"kafka write {c}"].broker:.1f} CPU s)', write_ratio[c], "throughput", 3.0))
    summary.add(summary.Row("same", f"a Python data source writer that only counts the bytes (the API's ceiling), "
                            f"{wall['ceiling write']:.2f} s", f'`df.write.format("kafka")`, lz4, '
                            f'{wall["kafka write lz4"]:.2f} s', write_bound["lz4"], "throughput", None))
    return {"scan": scan_ratio, "tail": tail_ratio, **{f"write {c}": r for c, r in write_ratio.items()}}


def _produce_at(bootstrap: str, topic: str, rate: int, seconds: float) -> int:
    """Records of 100 B, each carrying its send time, at ``rate`` a second for ``seconds``
    (kafka-python's producer, acks=1, no linger: each tick's records leave at once)."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=0)
    tick, sent = 0.01, 0
    start = time.monotonic()
    try:
        while (now := time.monotonic()) - start < seconds:
            due = int((now - start) * rate)
            while sent < due:
                producer.send(topic, f"{time.time():.6f}:".encode().ljust(100, b"x"))
                sent += 1
            producer.flush()
            time.sleep(tick)
    finally:
        producer.close()
    return sent


def latency(spark: Any, broker: Any, work: Path, rate: int, seconds: float) -> dict[str, list[float]]:
    """(4) A topic a producer writes at a fixed rate, tailed by each side's stream in turn (default
    trigger: as soon as the last batch is done): for each record, the time from its send to its
    row reaching the driver in a micro-batch."""
    import threading

    from pyspark.sql import functions as F

    out: dict[str, list[float]] = {}
    for fmt in ("kafka", "klog"):
        topic = f"lat-{fmt}"
        broker.create_topic(topic, 2)
        lat: list[float] = []

        def on_batch(batch_df: Any, _batch_id: int, lat: list[float] = lat) -> None:
            rows = batch_df.select(F.substring_index(F.col("value").cast("string"), ":", 1).alias("t")).collect()
            now = time.time()
            lat.extend(now - float(r.t) for r in rows)

        reader = spark.readStream.format(fmt).option("subscribe", topic).option("startingOffsets", "latest")
        df = reader.option("kafka.bootstrap.servers", broker.bootstrap).load() if fmt == "kafka" \
            else reader.load(str(broker.log_dir))
        q = df.writeStream.foreachBatch(on_batch).option("checkpointLocation", str(work / f"lat-{fmt}")).start()
        try:
            deadline = time.monotonic() + 120
            while q.lastProgress is None and time.monotonic() < deadline:  # started, at the end of the topic
                time.sleep(0.2)
            producer = threading.Thread(target=_produce_at, args=(broker.bootstrap, topic, rate, seconds))
            producer.start()
            producer.join()
            time.sleep(5)  # the last records reach a batch
            assert q.exception() is None, q.exception()
        finally:
            q.stop()
        out[fmt] = sorted(lat)
    return out


def _pct(xs: list[float], p: float) -> float:
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))] if xs else float("nan")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.kafka_source", description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=4_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--rate", type=int, default=2_000, help="records/s of the tailing row (default %(default)s)")
    ap.add_argument("--seconds", type=float, default=30, help="how long each stream tails (default %(default)s)")
    args = ap.parse_args(argv)
    found = broker_and_connector("kafka_source")
    if found is None:
        return 0
    broker_fixture, jars = found
    with tempfile.TemporaryDirectory(prefix="klog-bench-kafka-") as tmp, \
            bench_session("klog-bench-kafka-source", cores=2, jars=jars) as (spark, work):
        broker = broker_fixture.Broker(Path(tmp) / "broker")
        broker.start()
        try:
            run(spark, broker, work, args.records, args.repeat)
            lat = latency(spark, broker, work, args.rate, args.seconds)
            print(f"(4) tailing a topic written at {args.rate:,} records/s for {args.seconds:g} s: send -> row "
                  "in a micro-batch at the driver")
            for fmt, xs in lat.items():
                print(f"    {fmt:<6} {len(xs):>7,} records  p50 {_pct(xs, 50) * 1000:7.0f} ms  "
                      f"p99 {_pct(xs, 99) * 1000:7.0f} ms")
            p99 = _pct(lat["klog"], 99) / _pct(lat["kafka"], 99)
            print(f"ratio stream p99 latency klog/kafka-source time: {p99:.2f}x")
            summary.add(summary.Row(
                f"stream tailing a topic a producer writes at {args.rate:,} records/s: send to row, p50 / p99",
                f"klog on the live dir, {_pct(lat['klog'], 50) * 1000:.0f} / {_pct(lat['klog'], 99) * 1000:.0f} ms",
                f"Kafka-source stream, {_pct(lat['kafka'], 50) * 1000:.0f} / {_pct(lat['kafka'], 99) * 1000:.0f} ms",
                p99, "time", 2.0, ratio_label=f"p99 {p99:.2f}× its p99"))
        finally:
            broker.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
