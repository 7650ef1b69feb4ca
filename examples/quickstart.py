"""klog quickstart: write a keyed topic with Spark, read a time range back, tail it with a stream.

Run with ``make quickstart``. In Spark local mode it writes 3,000 click events (one a second)
to topic ``clicks`` with 3 partitions under ``klog-data/`` (Kafka's murmur2 partitioner on the
key, lz4, a header on each record), reads minutes 10 to 15 back by timestamp, shows a small
table, then tails the topic with ``spark.readStream.format("klog")`` while three more batches
of clicks are appended, one micro-batch each, and prints ``klog describe`` of the log dir.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

DATA = Path(os.environ.get("KLOG_QUICKSTART_DIR", "klog-data")).resolve()
T0_MS = 1_700_000_000_000  # 2023-11-14T22:13:20Z
N = 3000


def main() -> None:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").appName("klog-quickstart")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.session.timeZone", "UTC").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    for d in (DATA, DATA.parent / "klog-data-checkpoints"):
        if d.exists():
            shutil.rmtree(d)

    # 1. write: a keyed topic with 3 partitions
    events = spark.range(N).selectExpr(
        "CONCAT('user-', CAST(id % 40 AS STRING)) AS key",
        "to_json(named_struct('user', id % 40, 'page', CONCAT('/p/', CAST(id % 17 AS STRING)), 'n', id)) AS value",
        f"timestamp_millis({T0_MS} + id * 1000) AS timestamp",
        "array(named_struct('key', 'source', 'value', CAST('quickstart' AS BINARY))) AS headers")
    (events.write.format("klog")
     .option("topic", "clicks").option("numPartitions", "3").option("compression", "lz4")
     .mode("append").save(str(DATA)))
    print(f"wrote {N} clicks to topic 'clicks' (3 partitions) under {DATA}")

    # 2. read a time range back: minutes 10 to 15
    start, end = T0_MS + 600_000, T0_MS + 900_000
    df = (spark.read.format("klog")
          .option("topics", "clicks")
          .option("startingTimestamp", str(start))
          .option("endingTimestamp", str(end))
          .load(str(DATA)))
    print(f"\nclicks between minute 10 and 15: {df.count()} (expected {(end - start) // 1000})")
    (df.selectExpr("partition", "offset", "timestamp", "CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value")
       .orderBy("timestamp").show(5, truncate=False))
    per_partition = {r.partition: r["count"] for r in df.groupBy("partition").count().collect()}
    print(f"per partition: {dict(sorted(per_partition.items()))}")

    # 3. tail the topic with a stream while appending (startingOffsets=latest: only new clicks)
    tail = (spark.readStream.format("klog").option("topics", "clicks").load(str(DATA))
            .selectExpr("partition", "offset", "CAST(key AS STRING) AS key", "timestamp")
            .writeStream.format("memory").queryName("tail").trigger(processingTime="200 milliseconds")
            .option("checkpointLocation", str(DATA.parent / "klog-data-checkpoints" / "tail")).start())
    tail.processAllAvailable()  # the stream now sits at the end of the topic
    for batch in range(3):
        more = events.limit(10 * (batch + 1)).selectExpr(  # a producer job appends a few clicks
            "key", "value", f"timestamp_millis({T0_MS + N * 1000 + batch * 60_000} + unix_millis(timestamp) - {T0_MS})"
            " AS timestamp")
        more.write.format("klog").option("topic", "clicks").mode("append").save(str(DATA))
        tail.processAllAvailable()
        seen = spark.sql("SELECT count(*) AS n FROM tail").first()
        print(f"appended {10 * (batch + 1)} clicks -> the stream has seen {seen.n if seen else 0}")
    rows = tail.recentProgress
    print("micro-batches with data: " + ", ".join(f"#{p['batchId']}: {p['numInputRows']} rows"
                                                 for p in rows if p["numInputRows"]))
    spark.sql("SELECT * FROM tail ORDER BY offset DESC, partition").show(5, truncate=False)
    tail.stop()
    spark.stop()

    # 4. where the data is, and what to run next
    klog = Path(sys.executable).with_name("klog")
    on_path = shutil.which("klog") == str(klog)
    command = "klog" if on_path else os.path.relpath(klog)  # .venv/bin/klog unless the venv is active
    print(f"\nthe data is in {DATA}; next: {command} describe {DATA}\n")
    sys.stdout.flush()
    subprocess.run([str(klog), "describe", str(DATA)], check=True)


if __name__ == "__main__":
    main()
