"""Read a Kafka log dir copied off a broker with Spark, read-only, and print what is in it.

    python examples/read_broker_dir.py                        # the shared real-broker fixture, or a sample
    python examples/read_broker_dir.py /mnt/kafka-copy        # your copy (rsync/cp of a broker's log.dirs)
    python examples/read_broker_dir.py /mnt/kafka-copy --topics orders,payments --show orders

No broker runs and nothing in the directory is written (no lock, no recovery on disk, no
checkpoint): the example checks it by comparing every file's size and modification time before
and after. Internal topics (``__consumer_offsets``, ``__cluster_metadata``) are read as any
other topic; they are left out unless ``--internal`` is given. Without a directory the example
reads the real broker data of ``shared/fixtures/kafka`` when it is there (Confluent Platform
7.6 / Kafka 3.6, KRaft, lz4, headers, idempotent producers), else it builds a small sample.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FIXTURE = "rjmfernandes+flink-on-prem/43d3daa/data"


def default_dir() -> Path | None:
    """The shared fixture's broker log dir, if present (under $KLOG_SHARED, else ../shared beside the repo)."""
    shared = Path(os.environ.get("KLOG_SHARED", REPO.parent / "shared"))
    d = shared / "fixtures" / "kafka" / FIXTURE
    return d if d.is_dir() else None


def snapshot(d: Path) -> dict[str, tuple[int, int]]:
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in d.rglob("*") if p.is_file()}


def build_sample(spark, d: Path) -> None:  # type: ignore[no-untyped-def]
    """A stand-in for a copied broker dir: topics ``orders`` (3 partitions) and ``audit``."""
    if d.exists():
        shutil.rmtree(d)
    orders = spark.range(3000).selectExpr(
        "CONCAT('customer-', CAST(id % 30 AS STRING)) AS key",
        "to_json(named_struct('order', id, 'amount', id % 500)) AS value",
        "timestamp_millis(1763805600000 + id * 1000) AS timestamp")
    orders.write.format("klog").option("topic", "orders").option("numPartitions", "3").mode("append").save(str(d))
    audit = spark.range(200).selectExpr("CAST(NULL AS STRING) AS key", "CONCAT('event ', CAST(id AS STRING)) AS value")
    audit.write.format("klog").option("topic", "audit").option("compression", "zstd").mode("append").save(str(d))
    print(f"no broker dir given and no shared fixture found: built a sample under {d}")


def select_topics(path: str, args: argparse.Namespace) -> list[str] | int:
    """The topics to read, or an exit code after printing why there are none."""
    from storage_core.log.manager import find_partitions

    parts = find_partitions(path.split(","))
    topics = sorted({p.topic_partition.topic for p in parts if any(p.path.glob("*.log"))})
    if args.topics:
        wanted = args.topics.split(",")
        unknown = [t for t in wanted if t not in topics]
        if unknown:
            print(f"error: no such topic in {path}: {', '.join(unknown)}; topics there: {', '.join(topics)}",
                  file=sys.stderr)
            return 2
        return wanted
    if not args.internal:
        topics = [t for t in topics if not t.startswith("_")]
    if not topics:
        print(f"error: no topics to read in {path} (internal topics need --internal)", file=sys.stderr)
        return 1
    return topics


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog="\n\n".join(__doc__.split("\n\n")[1:]),
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("log_dir", nargs="?", help="a copied Kafka log dir (several: dir1,dir2); default: the shared "
                   "fixture, else a sample")
    p.add_argument("--topics", help="comma-separated topics to read (default: every non-internal topic)")
    p.add_argument("--internal", action="store_true", help="include topics whose name starts with '_'")
    p.add_argument("--show", metavar="TOPIC", help="print the newest records of this topic (default: the largest)")
    p.add_argument("--work-dir", default="klog-broker-sample", help="where a sample is built when needed")
    p.add_argument("--master", default="local[2]", help="Spark master (default: local[2])")
    args = p.parse_args(argv)
    if args.log_dir is not None:
        missing = [d for d in args.log_dir.split(",") if not Path(d).is_dir()]
        if missing:
            p.error(f"no such log directory: {', '.join(missing)}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    path = args.log_dir if args.log_dir is not None else (str(default_dir()) if default_dir() else None)
    if path is not None:  # check the topics before starting Spark
        topics = select_topics(path, args)
        if isinstance(topics, int):
            return topics
    spark = (SparkSession.builder.master(args.master).appName("klog-read-broker-dir")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.session.timeZone", "UTC").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    try:
        if path is None:
            sample = Path(args.work_dir).resolve()
            build_sample(spark, sample)
            path = str(sample)
            topics = select_topics(path, args)
            if isinstance(topics, int):
                return topics
        elif args.log_dir is None:
            print(f"reading the shared real-broker fixture {path}")
        dirs = [Path(d) for d in path.split(",")]
        before = {d: snapshot(d) for d in dirs}

        t0 = time.perf_counter()
        df = (spark.read.format("klog").option("topics", ",".join(topics)).option("includeHeaders", "true")
              .load(path))
        summary = (df.groupBy("topic")
                   .agg(F.countDistinct("partition").alias("partitions"), F.count("*").alias("records"),
                        F.min("offset").alias("min_offset"), F.max("offset").alias("max_offset"),
                        F.min("timestamp").alias("first"), F.max("timestamp").alias("last"),
                        F.sum(F.coalesce(F.length("value"), F.lit(0))).alias("value_bytes"),
                        F.sum(F.when(F.size("headers") > 0, 1).otherwise(0)).alias("with_headers"))
                   .orderBy(F.desc("records")))
        rows = summary.collect()
        seconds = time.perf_counter() - t0
        total = sum(r["records"] for r in rows)
        print(f"\n{len(rows)} topics, {total:,} records read with spark.read.format('klog') in {seconds:.1f} s")
        summary.show(len(rows), truncate=False)

        show = args.show or (rows[0]["topic"] if rows else None)
        if show is not None:
            print(f"newest records of {show}:")
            (spark.read.format("klog").option("topics", show).load(path)
             .orderBy(F.desc("timestamp")).limit(5)
             .selectExpr("partition", "offset", "timestamp",  # non-printable bytes (Avro, ...) shown as '.'
                         r"regexp_replace(SUBSTRING(CAST(key AS STRING), 1, 24), '[^\\x20-\\x7E]', '.') AS key",
                         r"regexp_replace(SUBSTRING(CAST(value AS STRING), 1, 60), '[^\\x20-\\x7E]', '.') AS value")
             .show(truncate=False))

        changed = [f for d in dirs for f, st in snapshot(d).items() if before[d].get(f) != st]
        changed += [f for d in dirs for f in before[d] if not Path(f).exists()]
        if changed:
            print(f"error: {len(changed)} files changed while reading, e.g. {changed[0]}", file=sys.stderr)
            return 1
        print(f"read-only: all {sum(len(b) for b in before.values())} files in {path} are unchanged")
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
