"""klog quickstart: write a keyed topic with 3 partitions, read a time range back with Spark.

Run with ``make quickstart``. It writes ``klog-data/clicks-{0,1,2}`` through storage_core
(partitioned by Kafka's murmur2 of the key, lz4 batches, with headers), then reads a time
range of it with ``spark.read.format("klog")`` and shows a small table. (Writing with Spark and
tailing with a stream join it when the writer and streaming land.)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa

from storage_core.columnar import encode_arrow, murmur2_partitions
from storage_core.compression import CompressionType
from storage_core.manager import LogManager
from storage_core.topic_partition import TopicPartition

DATA = Path(os.environ.get("KLOG_QUICKSTART_DIR", "klog-data")).resolve()
T0 = 1_700_000_000_000  # 2023-11-14T22:13:20Z
N = 3000


def write_topic() -> None:
    if DATA.exists():
        shutil.rmtree(DATA)
    DATA.mkdir(parents=True)
    users = np.arange(N) % 40
    rows = pa.table({
        "key": pa.array([f"user-{u}".encode() for u in users], pa.binary()),
        "value": pa.array([f'{{"user": {u}, "page": "/p/{i % 17}", "n": {i}}}'.encode() for i, u in enumerate(users)]),
        "timestamp": pa.array(T0 + 1000 * np.arange(N, dtype=np.int64)),  # one click a second
        "headers": [[{"key": "source", "value": b"quickstart"}]] * N,
    })
    parts = murmur2_partitions(rows.column("key").combine_chunks(), 3)  # the partition a Java producer picks
    with LogManager([DATA], writable=True) as lm:
        for p in range(3):
            mask = pa.array(parts == p)
            log = lm.create_log(TopicPartition("clicks", p))
            for raw in encode_arrow(rows.filter(mask), compression=CompressionType.LZ4, max_batch_bytes=16 << 10):
                log.append(raw)
    print(f"wrote {N} clicks to topic 'clicks' (3 partitions) under {DATA}")


def read_range() -> None:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").appName("klog-quickstart")
             .config("spark.ui.enabled", "false").config("spark.sql.session.timeZone", "UTC").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    start, end = T0 + 600_000, T0 + 900_000  # minutes 10 to 15
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
    spark.stop()


def main() -> None:
    write_topic()
    read_range()
    klog = Path(sys.executable).with_name("klog")
    print(f"\nthe data is in {DATA}; next: {klog.name} describe {DATA}\n")
    sys.stdout.flush()
    subprocess.run([str(klog), "describe", str(DATA)], check=True)


if __name__ == "__main__":
    main()
