"""``klog export`` against the Spark scan's per-core rate, on the same log dir, in one run.

Both read through the same planner and bulk piece reader; export runs in one process (one core)
and writes Parquet, Spark (``local[2]``) runs a full-scan aggregate with two task threads. The
ratio compares export's records/s with Spark's records/s per core (its rate / 2). Export is timed
with Parquet compression ``none`` (the read path and the Parquet encoder) and ``zstd`` (the CLI's
default); the best of ``--repeat`` rounds of each is kept, the runs taking turns.

Run: ``python -m benchmarks.export [--records N] [--codecs none,lz4]``.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks import _summary as summary
from benchmarks._spark import bench_session
from benchmarks.spark_read import build

#: The issue's target: export within 1.5x of the Spark scan's per-core rate.
TARGET = 1 / 1.5
SPARK_CORES = 2


def _export(logs: Path, out: Path, compression: str) -> int:
    from storage_core.tools.export import ExportRequest, export_parquet, plan_export

    req = ExportRequest(log_dirs=(str(logs),), topic="bench")
    return export_parquet(req, plan_export(req), out, compression=compression, overwrite=True).records


def _run_codec(spark: Any, work: Path, records: int, repeat: int, codec: str) -> None:
    from pyspark.sql import functions as F

    logs = build(work, records, codec)
    size = sum(p.stat().st_size for p in logs.rglob("*.log"))

    def scan() -> int:
        df = spark.read.format("klog").load(str(logs))
        rows = df.groupBy("partition").agg(F.count("*").alias("n"), F.sum(F.length("value")).alias("b")).collect()
        return int(sum(r.n for r in rows))

    runs: dict[str, Callable[[], int]] = {
        "spark": scan,
        "export-none": lambda: _export(logs, work / "x.parquet", "none"),
        "export-zstd": lambda: _export(logs, work / "x.parquet", "zstd"),
    }
    for fn in runs.values():  # warm the JVM, the Python workers and the page cache
        assert fn() == records
    best = dict.fromkeys(runs, float("inf"))
    for _ in range(repeat):
        for name, fn in runs.items():
            t = time.perf_counter()
            assert fn() == records
            best[name] = min(best[name], time.perf_counter() - t)
    per_core = records / best["spark"] / SPARK_CORES
    print(f"{records:,} records in 2 partitions, 100-byte values, {codec}: {size / 1e6:.0f} MB of segments")
    print(f"{'run':<52} {'best s':>8} {'Mrec/s':>8}")
    print(f"{'Spark full-scan aggregate, local[2]':<52} {best['spark']:>8.2f} {records / best['spark'] / 1e6:>8.2f}"
          f"   ({per_core / 1e6:.2f} per core)")
    for name in ("export-none", "export-zstd"):
        rate = records / best[name]
        print(f"{'klog export, Parquet ' + name.split('-')[1] + ', 1 process':<52} {best[name]:>8.2f} "
              f"{rate / 1e6:>8.2f}   ratio to Spark per core: {rate / per_core:.2f}x")
    print()
    for name in ("export-none", "export-zstd"):
        rate = records / best[name]
        summary.add(summary.Row(
            f"`klog export` (Parquet {name.split('-')[1]}), {records / 1e6:g}M records, {codec}",
            f"{best[name]:.2f} s ({rate / 1e6:.2f} M records/s, 1 process)",
            f"Spark full scan, local[2]: {best['spark']:.2f} s ({per_core / 1e6:.2f} M records/s per core)",
            rate / per_core, "throughput", TARGET if name == "export-none" else None))


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.export", description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=2_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--codecs", default="none,lz4", help="segment codecs, one run each (default %(default)s)")
    args = ap.parse_args(argv)
    with bench_session("klog-bench-export", cores=SPARK_CORES) as (spark, work):
        for codec in args.codecs.split(","):
            _run_codec(spark, work / codec, args.records, args.repeat, codec)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
