"""Streaming benchmark: a klog → transform → klog query, end to end, in one run.

(a) **Fixed input rate.** A producer process appends ``--rate`` records/s for ``--seconds``
    (3 partitions, storage_core's writer, each record stamped with its append time) while the
    query (default trigger: as fast as it can) tails the topic and writes another. A poller
    records when each output offset becomes visible, i.e. when the sink's commit of its
    micro-batch completed. Prints the end-to-end records/s and the median and p95 latency from
    append to sink commit.
(b) **Drain.** ``Trigger.AvailableNow`` over ``--drain-records`` records already in the log,
    against the same transform run as one batch job (``spark.read`` → ``df.write``) in the same
    session: the ratio is what streaming's per-micro-batch overhead costs.

Run: ``python -m benchmarks.streaming [--rate N] [--seconds S] [--drain-records N]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from storage_core.log.log import Log


def _ends(out: Path) -> dict[int, int]:
    ends: dict[int, int] = {}
    for d in out.glob("u-*"):
        if any(d.glob("*.log")):
            try:
                with Log(d) as lg:
                    ends[int(d.name.rsplit("-", 1)[1])] = lg.log_end_offset
            except Exception:  # noqa: BLE001 - a commit in flight: look again at the next poll
                continue
    return ends


def _transform(df):  # type: ignore[no-untyped-def]
    from pyspark.sql import functions as F

    return df.select("key", F.upper(F.col("value").cast("string")).alias("value"), "partition", "timestamp")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.streaming", description=__doc__.splitlines()[0])
    ap.add_argument("--rate", type=int, default=20_000, help="input records/s of the producer")
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--drain-records", type=int, default=1_000_000)
    args = ap.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from benchmarks.producer import produce

    owned = SparkSession.getActiveSession() is None
    spark = (SparkSession.builder.master("local[2]").appName("klog-bench-stream").config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2").config("spark.driver.memory", "4g").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    tmp = Path(tempfile.mkdtemp(prefix="klog-bench-stream-"))
    try:
        # (a) fixed rate
        src, out, ck = tmp / "in", tmp / "out", tmp / "ck"
        src.mkdir()
        produce(str(src), "t", partitions=3, records=3, rate=0, per_append=3)  # the topic exists before the query
        q = (_transform(spark.readStream.format("klog").option("startingOffsets", "latest").load(str(src)))
             .writeStream.format("klog").option("topic", "u").option("numPartitions", 3)
             .option("checkpointLocation", str(ck)).start(str(out)))
        while q.lastProgress is None:  # first (empty) trigger done: the query tails from "latest"
            time.sleep(0.05)
        warm = 3000  # the first micro-batches start Python workers: not part of the measurement
        produce(str(src), "t", partitions=3, records=warm, rate=0, per_append=300, start=3)
        deadline = time.time() + 300
        while sum(_ends(out).values()) < warm and time.time() < deadline:
            time.sleep(0.05)
        skip = warm // 3  # per output partition; input partition p has one more record first (before "latest")
        seen: list[tuple[float, dict[int, int]]] = []
        stop = threading.Event()

        def poll() -> None:
            while not stop.is_set():
                seen.append((time.time(), _ends(out)))
                time.sleep(0.02)

        poller = threading.Thread(target=poll, daemon=True)
        poller.start()
        total = int(args.rate * args.seconds)
        per_append = max(3, args.rate // 100)  # an append every 10 ms
        t0 = time.time()
        subprocess.run([sys.executable, "-m", "benchmarks.producer", str(src), "t", "--records", str(total), "--start",
                        str(warm + 3), "--rate", str(args.rate), "--per-append", str(per_append)], check=True,
                       cwd=Path(__file__).resolve().parent.parent)
        produced_s = time.time() - t0
        deadline = time.time() + 120
        while sum(_ends(out).values()) < total + warm and time.time() < deadline:
            time.sleep(0.05)
        stop.set()
        poller.join()
        q.stop()
        # latency: output offset k of partition p is input offset k + 1 of p (same partition, same order)
        inputs = {}
        for p in range(3):
            with Log(src / f"t-{p}") as lg:
                inputs[p] = [r.timestamp for b in lg.batches(skip + 1) for r in b.records() if r.offset > skip]
        latencies = []
        for p, stamps in inputs.items():
            i = 0
            for when, ends in seen:
                end = ends.get(p, 0) - skip
                while i < end and i < len(stamps):
                    latencies.append(when * 1000 - stamps[i])
                    i += 1
        got = sum(_ends(out).values()) - warm
        last_commit = next((w for w, e in seen if sum(e.values()) - warm >= got), seen[-1][0] if seen else t0)
        print(f"fixed rate: {total} records at {args.rate} rec/s offered (producer took {produced_s:.2f} s); "
              f"{got} committed by the sink")
        print(f"end-to-end throughput: {got / max(1e-9, last_commit - t0):,.0f} rec/s")
        if latencies:
            latencies.sort()
            print(f"latency append -> sink commit: median {statistics.median(latencies):.0f} ms, "
                  f"p95 {latencies[int(len(latencies) * 0.95) - 1]:.0f} ms, max {latencies[-1]:.0f} ms "
                  f"(poll every 20 ms)")

        # (b) drain vs batch
        src2 = tmp / "in2"
        src2.mkdir()
        produce(str(src2), "t", partitions=3, records=args.drain_records, rate=0, per_append=3000)
        t = time.perf_counter()
        q = (_transform(spark.readStream.format("klog").option("startingOffsets", "earliest")
                        .option("maxOffsetsPerTrigger", str(max(1, args.drain_records // 4))).load(str(src2)))
             .writeStream.format("klog").option("topic", "u").option("numPartitions", 3)
             .option("checkpointLocation", str(tmp / "ck2")).trigger(availableNow=True).start(str(tmp / "out2")))
        q.awaitTermination()
        stream_s = time.perf_counter() - t
        batches = sum(1 for p in q.recentProgress if p["numInputRows"])
        t = time.perf_counter()
        (_transform(spark.read.format("klog").load(str(src2))).write.format("klog").mode("append")
         .option("topic", "u").option("numPartitions", 3).save(str(tmp / "out3")))
        batch_s = time.perf_counter() - t
        n = args.drain_records
        print(f"drain {n} records: AvailableNow {stream_s:.2f} s ({n / stream_s:,.0f} rec/s, {batches} micro-batches); "
              f"one batch job {batch_s:.2f} s ({n / batch_s:,.0f} rec/s)")
        print(f"ratio stream-drain/batch-job throughput: {batch_s / stream_s:.2f}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if owned:
            spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
