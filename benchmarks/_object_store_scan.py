"""Spark full scan of one log from an S3 server against the same log on local disk (in one run).

The log (2 partitions, 100-byte values, uncompressed) is built with klog's writer, uploaded to a
SeaweedFS S3 server on 127.0.0.1 (:mod:`benchmarks._s3_server`), and scanned with the same
aggregate from both places by ``spark.read.format("klog")``, taking turns, best of ``repeat``
after one untimed round each. The ratio is S3 throughput over local throughput (target ≥ 0.6×).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from benchmarks import _summary as summary

#: bytes per record of the built log (100-byte value, 10-byte key, v2 record and batch overhead)
BYTES_PER_RECORD = 130


def spark_scan(spark: Any, work: Path, *, mb: float, repeat: int) -> float:
    """Run the comparison; returns the S3/local throughput ratio."""
    from pyspark.sql import functions as F

    from benchmarks._s3_server import S3Server
    from benchmarks.spark_read import build

    records = max(2_000, int(mb * 1e6 / BYTES_PER_RECORD)) // 2 * 2
    t = time.perf_counter()
    logs = build(work / "scan", records, "none")
    size = sum(p.stat().st_size for p in logs.rglob("*.log"))
    built = time.perf_counter() - t
    server = S3Server(work / "s3")
    server.start()
    try:
        uri = server.bucket() + "/logs"
        t = time.perf_counter()
        server.upload(logs, uri)
        uploaded = time.perf_counter() - t

        def agg(df: Any) -> list[Any]:
            rows = df.groupBy("partition").agg(F.count("*").alias("n"), F.sum(F.length("value")).alias("bytes"),
                                               F.max("offset").alias("last")).collect()
            return sorted(tuple(r) for r in rows)

        queries = {
            "local": lambda: agg(spark.read.format("klog").load(str(logs))),
            "s3": lambda: agg(spark.read.format("klog").options(**server.options).load(uri)),
        }
        results = {name: fn() for name, fn in queries.items()}  # untimed: JVM, workers, clients warm
        assert results["local"] == results["s3"], (results["local"], results["s3"])
        best = dict.fromkeys(queries, float("inf"))
        for _ in range(repeat):
            for name, fn in queries.items():
                t = time.perf_counter()
                fn()
                best[name] = min(best[name], time.perf_counter() - t)
    finally:
        server.stop()
    ratio = best["local"] / best["s3"]
    print(f"{records:,} records in 2 partitions, 100-byte values, none: {size / 1e6:.0f} MB of segments "
          f"(built in {built:.1f} s, uploaded to the S3 server in {uploaded:.1f} s)")
    print(f"{'query':<52} {'best s':>8} {'MB/s':>8}")
    print(f"{'klog full-scan aggregate, local disk':<52} {best['local']:>8.2f} {size / best['local'] / 1e6:>8.0f}")
    print(f"{'klog full-scan aggregate, S3 (SeaweedFS, 127.0.0.1)':<52} {best['s3']:>8.2f} "
          f"{size / best['s3'] / 1e6:>8.0f}")
    print(f"ratio s3/local scan throughput: {ratio:.2f}x")
    print()
    summary.add(summary.Row(f'`spark.read.format("klog")` full scan from S3, {size / 1e9:.2g} GB, local[2]',
                            f"{best['s3']:.2f} s ({size / best['s3'] / 1e6:.0f} MB/s)",
                            f"the same log on local disk, {best['local']:.2f} s", ratio, "throughput", 0.6))
    return ratio
