"""Backfill a historical time range of a Kafka topic into Parquet with Spark, no broker involved.

    python examples/backfill_range.py                         # builds a sample log dir, backfills 30 minutes of it
    python examples/backfill_range.py --log-dir /mnt/kafka-copy --topic orders \\
        --start 2026-11-22T10:00Z --end 2026-11-22T11:00Z --json-schema "id LONG, amount DOUBLE" --output out/

The range is read with ``spark.read.format("klog")`` and the ``startingTimestamp`` /
``endingTimestamp`` options: each partition's time index turns them into a seek, so only the
segments holding the range are read. JSON values are decoded with ``from_json`` when a schema is
given (the sample's is known), and the rows are written as Parquet partitioned by Kafka partition.
Without ``--log-dir`` a sample topic ``events`` (3 partitions, 2 hours of one JSON event a second,
written with ``df.write.format("klog")``) is created first under ``--work-dir``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shutil
import sys
from pathlib import Path

SAMPLE_T0_MS = 1_763_805_600_000  # 2025-11-22T10:00:00Z
SAMPLE_SECONDS = 2 * 3600
SAMPLE_SCHEMA = "user STRING, page STRING, amount DOUBLE, n LONG"


def to_ms(text: str) -> int:
    """Epoch milliseconds from epoch ms or ISO-8601 (no zone means UTC)."""
    if text.lstrip("-").isdigit():
        return int(text)
    t = dt.datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith("Z") else text)
    return round((t if t.tzinfo else t.replace(tzinfo=dt.timezone.utc)).timestamp() * 1000)


def iso(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.timezone.utc).isoformat().replace("+00:00", "Z")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                epilog="\n\n".join(__doc__.split("\n\n")[1:]),
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--log-dir", help="a Kafka log dir (read-only); default: build a sample one under --work-dir")
    p.add_argument("--topic", default="events", help="the topic (default: events, the sample's)")
    p.add_argument("--start", help="start time, inclusive: epoch ms or ISO-8601 (sample default: 10:30Z)")
    p.add_argument("--end", help="end time, exclusive: epoch ms or ISO-8601 (sample default: 11:00Z)")
    p.add_argument("--json-schema", help=f"DDL schema of the JSON values (sample: {SAMPLE_SCHEMA!r}); "
                   "without it the value is kept as a string")
    p.add_argument("--output", help="Parquet output dir (default: <work-dir>/backfill-<topic>)")
    p.add_argument("--work-dir", default="klog-backfill", help="where the sample and the output go (default: "
                   "./klog-backfill)")
    p.add_argument("--master", default="local[2]", help="Spark master (default: local[2])")
    args = p.parse_args(argv)
    if args.log_dir is not None and (args.start is None or args.end is None):
        p.error("with --log-dir, give --start and --end")
    try:
        args.start_ms = to_ms(args.start) if args.start else SAMPLE_T0_MS + 1800_000
        args.end_ms = to_ms(args.end) if args.end else SAMPLE_T0_MS + 3600_000
    except ValueError as exc:
        p.error(f"--start/--end: {exc}; expected epoch milliseconds or ISO-8601 such as 2026-11-22T10:00Z")
    if args.end_ms <= args.start_ms:
        p.error(f"--end ({iso(args.end_ms)}) must be after --start ({iso(args.start_ms)})")
    if args.log_dir is not None and not Path(args.log_dir).is_dir():
        p.error(f"--log-dir {args.log_dir}: no such directory")
    return args


def write_sample(spark, log_dir: Path) -> None:  # type: ignore[no-untyped-def]
    """Topic ``events``: one JSON event a second for 2 hours, keyed by user, 3 partitions, lz4."""
    if log_dir.exists():
        shutil.rmtree(log_dir)
    (spark.range(SAMPLE_SECONDS)
     .selectExpr("CONCAT('user-', CAST(id % 50 AS STRING)) AS key",
                 "to_json(named_struct('user', CONCAT('user-', CAST(id % 50 AS STRING)), "
                 "'page', CONCAT('/p/', CAST(id % 7 AS STRING)), 'amount', ROUND((id % 100) * 1.25, 2), "
                 "'n', id)) AS value",
                 f"timestamp_millis({SAMPLE_T0_MS} + id * 1000) AS timestamp")
     .write.format("klog").option("topic", "events").option("numPartitions", "3").option("compression", "lz4")
     .mode("append").save(str(log_dir)))
    print(f"sample: wrote {SAMPLE_SECONDS} events to topic 'events' (3 partitions) under {log_dir}, "
          f"{iso(SAMPLE_T0_MS)} to {iso(SAMPLE_T0_MS + SAMPLE_SECONDS * 1000)}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    work = Path(args.work_dir).resolve()
    spark = (SparkSession.builder.master(args.master).appName("klog-backfill")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.session.timeZone", "UTC").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    try:
        if args.log_dir is None:
            log_dir = work / "data"
            write_sample(spark, log_dir)
            schema = args.json_schema or SAMPLE_SCHEMA
        else:
            log_dir = Path(args.log_dir).resolve()
            schema = args.json_schema
        out = Path(args.output).resolve() if args.output else work / f"backfill-{args.topic}"

        # 1. the range: a seek per partition through its time index
        df = (spark.read.format("klog")
              .option("topics", args.topic)
              .option("startingTimestamp", str(args.start_ms))
              .option("endingTimestamp", str(args.end_ms))
              .load(str(log_dir)))
        # 2. decode: key and value are binary, as in Spark's Kafka source
        rows = df.select(
            "partition", "offset", "timestamp",
            F.col("key").cast("string").alias("key"),
            (F.from_json(F.col("value").cast("string"), schema).alias("v") if schema
             else F.col("value").cast("string").alias("value")))
        if schema:
            rows = rows.select("partition", "offset", "timestamp", "key", "v.*")
        # 3. write: Parquet, one directory per Kafka partition
        rows.write.mode("overwrite").partitionBy("partition").parquet(str(out))

        back = spark.read.parquet(str(out))
        per_partition = {r["partition"]: r["count"] for r in back.groupBy("partition").count().collect()}
        total = sum(per_partition.values())
        print(f"backfilled {args.topic} from {iso(args.start_ms)} to {iso(args.end_ms)}: {total} records "
              f"(per partition {dict(sorted(per_partition.items()))})")
        print(f"wrote Parquet to {out}")
        back.orderBy("timestamp").show(5, truncate=False)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
