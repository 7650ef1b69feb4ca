"""Run every example of Spark's Kafka guide ported to klog, as a Spark job would: its own
SparkSession, its own stderr. Prints one JSON object: example name -> the values read (reads) or
written (writes). Usage: ``python run_examples.py LOG_DIR OUT_DIR``."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

from data import append  # noqa: E402
from spark_docs_examples import BATCH_SINKS, BATCH_SOURCES, STREAM_SINKS, STREAM_SOURCES, port  # noqa: E402


def values(rows: list[Any]) -> list[str]:
    return sorted(r["value"] if isinstance(r["value"], str) else bytes(r["value"]).decode() for r in rows)


def main() -> None:
    from pyspark.sql import SparkSession

    LOG_DIR, OUT = sys.argv[1], Path(sys.argv[2])
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (SparkSession.builder.master("local[2]").appName("klog-porting")
             .config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.streaming.checkpointLocation", tempfile.mkdtemp(prefix="klog-porting-ckpt-"))
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    result: dict[str, Any] = {}
    for name, example in BATCH_SOURCES.items():
        scope: dict[str, Any] = {"spark": spark, "LOG_DIR": LOG_DIR}
        exec(port(example, "LOG_DIR"), scope)
        result[name] = values(scope["df"].selectExpr("CAST(value AS STRING) AS value").collect())
    for i, (name, example) in enumerate(STREAM_SOURCES.items()):
        scope = {"spark": spark, "LOG_DIR": LOG_DIR}
        exec(port(example, "LOG_DIR"), scope)
        table = f"stream{i}"
        q = scope["df"].selectExpr("CAST(value AS STRING) AS value", "headers" if "headers" in example else "1 AS one") \
            .writeStream.format("memory").queryName(table).start()
        q.processAllAvailable()  # the first batch: a stream starts at latest
        for topic, partition in (("topic1", 0), ("topic1", 1), ("topic2", 0), ("events", 0)):
            append(Path(LOG_DIR), topic, partition, 5, seed=i + 1)
        q.processAllAvailable()
        q.stop()
        rows = spark.table(table).collect()
        result[name] = values(rows)
        if "headers" in example:
            result[name + " (headers)"] = sorted({str([(h["key"], bytes(h["value"]).decode()) for h in r["headers"]])
                                                  for r in rows})
    source = spark.read.format("klog").load(LOG_DIR)
    for i, (name, example) in enumerate(BATCH_SINKS.items()):
        out = str(OUT / f"batch{i}")
        exec(port(example, "out"), {"df": source, "out": out})
        result[name] = values(spark.read.format("klog").load(out).selectExpr("CAST(value AS STRING) AS value").collect())
    for i, (name, example) in enumerate(STREAM_SINKS.items()):
        out = str(OUT / f"stream{i}")
        df = spark.readStream.format("klog").option("startingOffsets", "earliest").load(LOG_DIR)
        scope = {"df": df, "out": out}
        exec(port(example, "out"), scope)
        scope["ds"].processAllAvailable()
        scope["ds"].stop()
        written = spark.read.format("klog").load(out).selectExpr("topic", "CAST(value AS STRING) AS value").collect()
        result[name] = values(written)
        result[name + " (topics)"] = sorted({r["topic"] for r in written})
    spark.stop()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
