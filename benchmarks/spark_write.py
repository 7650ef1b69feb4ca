"""Spark write benchmark: klog against Parquet and against the writer API's ceiling, one run.

Writes the same DataFrame (``--records`` rows, 100-byte values, keyed, 4 partitions, lz4):

(a) ``df.write.format("klog")`` into a fresh log dir (staging, encoding, commit);
(b) ``df.write.parquet`` of the same DataFrame;
(c) a ``DataSourceArrowWriter`` that only counts the bytes it is given (the API's ceiling).

Then prints segment count and sizes. Run: ``python -m benchmarks.spark_write [--records N]``.

The writers take turns, round after round (``--repeat`` rounds, the best time of each writer
kept), so that load from elsewhere on a shared machine falls on all of them alike rather than on
whichever ran during it; the ratios compare times of the same rounds.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path


def _counting_sink():  # type: ignore[no-untyped-def]
    from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, WriterCommitMessage

    class Counted(WriterCommitMessage):
        def __init__(self, n: int) -> None:
            self.n = n

    class CountWriter(DataSourceArrowWriter):
        def write(self, iterator):  # type: ignore[no-untyped-def]
            from spark_logsource.worker_gc import task_started

            task_started()  # what klog's writer does at a task's start, so the ceiling stays the API's
            n = 0
            for batch in iterator:
                n += batch.nbytes
            return Counted(n)

    class CountSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "klogbenchcount"

        def writer(self, schema, overwrite):  # type: ignore[no-untyped-def]
            return CountWriter()

    return CountSource


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.spark_write", description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=4_000_000)
    ap.add_argument("--repeat", type=int, default=3, help="rounds of every writer; the best time of each is kept")
    args = ap.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    owned = SparkSession.getActiveSession() is None
    spark = (SparkSession.builder.master("local[2]").appName("klog-bench-write").config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.memory", "4g").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    # Python data sources are looked up through the JVM's active session of this thread: make it
    # this one (a caller may have left another session active, as the test suite's do)
    spark._jvm.org.apache.spark.sql.SparkSession.setActiveSession(spark._jsparkSession)  # type: ignore[union-attr]
    work = Path(tempfile.mkdtemp(prefix="klog-bench-write-"))
    try:
        spark.dataSource.register(_counting_sink())
        df = (spark.range(args.records, numPartitions=4)
              .selectExpr("CONCAT('key-', CAST(id % 100000 AS STRING)) AS key",
                          "CAST(rpad(CAST(id AS STRING), 100, 'x') AS BINARY) AS value",
                          "timestamp_millis(1700000000000 + id) AS timestamp")
              .cache())
        df.count()

        import spark_logsource

        writers = {
            "klog": lambda p: df.write.format("klog").option("topic", "bench").option("numPartitions", "4")
            .option("compression", "lz4").mode("append").save(str(p / "logs_a")),
            "klog_p": lambda p: spark_logsource.with_kafka_partitions(df, 4).write.format("klog")
            .option("topic", "bench").option("numPartitions", "4").option("compression", "lz4")
            .mode("append").save(str(p / "logs_a2")),
            "parquet": lambda p: df.write.mode("overwrite").parquet(str(p / "parquet")),
            "ceiling": lambda p: df.write.format("klogbenchcount").mode("append").save(),
        }
        best = dict.fromkeys(writers, float("inf"))
        rounds: list[dict[str, float]] = []
        for i in range(args.repeat):  # round-robin: each round runs every writer once
            target = work / f"run{i}"
            rounds.append({})
            for name, fn in writers.items():
                t = time.perf_counter()
                fn(target)
                rounds[-1][name] = time.perf_counter() - t
                best[name] = min(best[name], rounds[-1][name])
            if i < args.repeat - 1:
                shutil.rmtree(target, ignore_errors=True)
        t_klog, t_klog_p, t_pq, t_ceiling = best["klog"], best["klog_p"], best["parquet"], best["ceiling"]
        logs = sorted((work / f"run{args.repeat - 1}" / "logs_a").rglob("*.log"))
        logs_p = sorted((work / f"run{args.repeat - 1}" / "logs_a2").rglob("*.log"))
        n = args.records
        sizes = [p.stat().st_size for p in logs]
        assert spark.read.format("klog").load(str(logs[0].parent.parent)).count() == n
        print(f"{n:,} records, 100-byte values, 4 Spark partitions → topic with 4 partitions, lz4")
        print()
        print(f"{'writer':<52} {'best s':>8} {'Mrec/s':>8}")
        print(f"{'(a) df.write.format(klog)':<52} {t_klog:>8.2f} {n / t_klog / 1e6:>8.2f}")
        print(f"{'(a2) the same after with_kafka_partitions(df, 4)':<52} {t_klog_p:>8.2f} {n / t_klog_p / 1e6:>8.2f}")
        print(f"{'(b) df.write.parquet':<52} {t_pq:>8.2f} {n / t_pq / 1e6:>8.2f}")
        print(f"{'(c) DataSourceArrowWriter counting bytes (ceiling)':<52} {t_ceiling:>8.2f} {n / t_ceiling / 1e6:>8.2f}")
        print()
        print(f"segments (a): {len(sizes)}, {sum(sizes) / 1e6:.0f} MB, sizes {min(sizes) / 1e6:.1f}.."
              f"{max(sizes) / 1e6:.1f} MB; (a2): {len(logs_p)} segments")
        print(f"ratio klog/parquet time: {t_klog / t_pq:.2f}x")
        print(f"ratio klog/ceiling throughput: {t_ceiling / t_klog:.2f}x")
        print("ratio klog/ceiling throughput per round: "
              + ", ".join(f"{r['ceiling'] / r['klog']:.2f}x" for r in rounds))
        from benchmarks import _summary as summary

        summary.add(summary.Row(
            f'`df.write.format("klog")`, {n / 1e6:g}M records, lz4, 4 partitions, local[2]',
            f"{t_klog:.2f} s ({n / t_klog / 1e6:.2f} M records/s)",
            f"a `DataSourceArrowWriter` that only counts bytes, {t_ceiling:.2f} s", t_ceiling / t_klog,
            "throughput", 0.8))
        summary.add(summary.Row("same", "", f"`df.write.parquet`, {t_pq:.2f} s", t_pq / t_klog, "throughput", None))
    finally:
        if owned:
            spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
