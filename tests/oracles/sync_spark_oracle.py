"""Run by tests/tables/test_sync_oracles.py in a process of its own (a SparkSession with Delta's reader,
``delta-spark``, on its classpath, which the suite's shared session has not): for each case, read
a Delta table with ``spark.read.format("delta")`` and the same range with ``format("klog")``, and
print one line ``ORACLE <json>`` per case: both row counts, the rows of each side the other lacks
(``exceptAll`` both ways: every column, duplicates counted), a few of them, and both schemas.

Usage: ``python sync_spark_oracle.py JARS CASES_JSON``; ``CASES_JSON`` is a file holding a list of
``{"name", "delta" (the table's path), "log_dir", "options" (format("klog")'s read options)}``.
One session serves every case."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any


def _where(row: Any) -> tuple[str, int, int]:
    return (row["topic"], row["partition"], row["offset"])


def main(jars: str, cases_file: str) -> None:
    from pyspark.sql import SparkSession

    begin = time.monotonic()
    cases: list[dict[str, Any]] = json.loads(Path(cases_file).read_text())
    spark = (SparkSession.builder.master("local[1]").appName("klog-delta-oracle")
             .config("spark.jars", jars)
             .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
             .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
             .config("spark.sql.session.timeZone", "UTC")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.databricks.delta.snapshotPartitions", "1")  # not 50 tasks per table read
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    print(f"SESSION {time.monotonic() - begin:.1f}", flush=True)
    try:
        for case in cases:
            start = time.monotonic()
            table = spark.read.format("delta").load(case["delta"])
            reader = spark.read.format("klog")
            for k, v in case["options"].items():
                reader = reader.option(k, v)
            klog = reader.load(case["log_dir"])
            table_columns = table.columns
            table = table.select(*klog.columns).cache()
            klog = klog.cache()
            counts = (table.count(), klog.count())
            # every row of each side the other lacks, duplicates counted (few or none: collected)
            only_table = sorted(table.exceptAll(klog).collect(), key=_where)
            only_klog = sorted(klog.exceptAll(table).collect(), key=_where)
            out = {"name": case["name"], "table": counts[0], "klog": counts[1],
                   "only_table": len(only_table), "only_klog": len(only_klog),
                   "sample_only_table": [str(r) for r in only_table[:3]],
                   "sample_only_klog": [str(r) for r in only_klog[:3]],
                   "table_columns": table_columns, "klog_columns": klog.columns,
                   "table_schema": table.schema.simpleString(), "klog_schema": klog.schema.simpleString(),
                   "seconds": round(time.monotonic() - start, 1)}
            print("ORACLE " + json.dumps(out), flush=True)
            table.unpersist()
            klog.unpersist()
    finally:
        spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:3])
