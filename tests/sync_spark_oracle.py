"""Run by tests/test_sync_spark.py in a process of its own (a SparkSession with Delta's reader on its
classpath, which the suite's shared session has not): read a Delta table with ``delta-spark`` and
the same range with ``format("klog")``, and print how many rows each has and how many differ.

Usage: ``python sync_spark_oracle.py JARS DELTA_PATH LOG_DIR TOPIC ENDING_OFFSETS_JSON``."""

from __future__ import annotations

import json
import sys


def main(jars: str, delta: str, log_dir: str, topic: str, ending: str) -> None:
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[1]").appName("klog-delta-oracle")
             .config("spark.jars", jars)
             .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
             .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
             .config("spark.sql.session.timeZone", "UTC")
             .config("spark.ui.enabled", "false")
             .getOrCreate())
    try:
        table = spark.read.format("delta").load(delta)
        klog = (spark.read.format("klog").option("topics", topic).option("isolationLevel", "read_committed")
                .option("endingOffsets", ending).load(log_dir))
        cols = klog.columns
        table = table.select(*cols)
        out = {"table": table.count(), "klog": klog.count(),
               "only_table": table.exceptAll(klog).count(), "only_klog": klog.exceptAll(table).count(),
               "table_schema": table.schema.simpleString(), "klog_schema": klog.schema.simpleString()}
        print("ORACLE " + json.dumps(out))
    finally:
        spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:6])
