"""Spark read benchmark: klog against the Python data source ceiling and Parquet, one run.

On the same 2-partition log (100-byte values; 4M records by default), once uncompressed and once
lz4 (``--codecs``):

(a) ``spark.read.format("klog")`` full-scan aggregate;
(b) a Python data source that yields the same rows from Arrow batches already in the worker's
    memory (what the Python Data Source API can do at best);
(c) ``spark.read.parquet`` of the same rows;
(d) a 10,000-record offset range at the tail, against (a).

After one untimed round of every query (JVM and Python workers warm), the queries take turns
``--repeat`` rounds; the best time of each is kept.
Run: ``python -m benchmarks.spark_read [--records N]``.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from benchmarks import _summary as summary
from benchmarks._spark import bench_session

T0 = 1_700_000_000_000


def _table(n: int, part: int) -> pa.Table:
    rng = np.random.default_rng(part)
    values = rng.integers(65, 91, size=(n, 100), dtype=np.uint8)
    return pa.table({
        "key": pa.array([b"key-%06d" % (i % 50_000) for i in range(n)], pa.binary()),
        "value": pa.array([row.tobytes() for row in values], pa.binary()),
        "timestamp": pa.array(T0 + np.arange(n, dtype=np.int64), pa.int64()),
    })


def build(root: Path, records: int, codec: str = "lz4") -> Path:
    """A 2-partition log dir as klog's writer leaves it: segments, indexes, checkpoints and the
    clean-shutdown marker (so reads trust it, as a broker does after a clean shutdown)."""
    from storage_core.log.config import LogConfig
    from storage_core.log.manager import LogManager
    from storage_core.log.topic_partition import TopicPartition
    from storage_core.record.columnar import encode_arrow
    from storage_core.record.compression import CompressionType

    logs = root / "logs"
    logs.mkdir(parents=True)
    per = records // 2
    config = LogConfig.from_properties({"segment.bytes": str(256 << 20)})
    with LogManager([logs], writable=True) as manager:
        for p in range(2):
            log = manager.create_log(TopicPartition("bench", p), config)
            for raw in encode_arrow(_table(per, p), compression=CompressionType.from_name(codec),
                                    max_batch_bytes=64 << 10):
                log.append(raw)
    return logs


# --- (b) the API's ceiling: rows already in memory as Arrow ------------------------------------------

_CACHE: dict[tuple[int, int], list[pa.RecordBatch]] = {}


def _memory_source():  # type: ignore[no-untyped-def]
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    class MemReader(DataSourceReader):
        def __init__(self, per: int) -> None:
            self.per = per

        def partitions(self):  # type: ignore[no-untyped-def]
            return [InputPartition(0), InputPartition(1)]

        def read(self, partition):  # type: ignore[no-untyped-def]
            from benchmarks.spark_read import _CACHE, _mem_batches
            from spark_logsource.worker_gc import task_started

            task_started()  # what klog's reader does at a task's start, so the ceiling stays the API's
            p = partition.value
            if (self.per, p) not in _CACHE:
                _CACHE[self.per, p] = _mem_batches(self.per, p)
            return iter(_CACHE[self.per, p])

    class MemSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "klogbenchmem"

        def schema(self) -> str:
            return ("key binary, value binary, topic string, partition int, offset bigint, timestamp timestamp, "
                    "timestampType int")

        def reader(self, schema):  # type: ignore[no-untyped-def]
            return MemReader(int(self.options["per"]))

    return MemSource


def _mem_batches(per: int, part: int) -> list[pa.RecordBatch]:
    from storage_core.record.columnar import kafka_schema

    t = _table(per, part)
    n = t.num_rows
    full = pa.table({
        "key": t.column("key"), "value": t.column("value"),
        "topic": pa.repeat(pa.scalar("bench"), n), "partition": pa.repeat(pa.scalar(part, pa.int32()), n),
        "offset": pa.array(np.arange(n, dtype=np.int64)),
        "timestamp": t.column("timestamp").cast(pa.timestamp("ms", tz="UTC")).cast(pa.timestamp("us", tz="UTC")),
        "timestampType": pa.repeat(pa.scalar(0, pa.int32()), n),
    }).cast(kafka_schema())
    return full.to_batches(max_chunksize=100_000)


def _best(fn: Callable[[], object], repeat: int) -> tuple[float, object]:
    best = float("inf")
    result: object = None
    for _ in range(repeat):
        t = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t)
    return best, result


def _run_codec(spark: Any, work: Path, records: int, repeat: int, codec: str) -> None:
    from pyspark.sql import functions as F

    t = time.perf_counter()
    logs = build(work, records, codec)
    built = time.perf_counter() - t
    size = sum(p.stat().st_size for p in logs.rglob("*.log"))

    def agg(df):  # type: ignore[no-untyped-def]
        return df.groupBy("partition").agg(F.count("*").alias("n"), F.sum(F.length("value")).alias("bytes"),
                                           F.max("offset").alias("last")).collect()

    klog_df = lambda: spark.read.format("klog").load(str(logs))  # noqa: E731
    parquet = work / "parquet"
    klog_df().write.parquet(str(parquet))
    per = records // 2
    tail = f'{{"bench": {{"0": {per - 10_000}, "1": {per}}}}}'
    queries: dict[str, Callable[[], object]] = {
        "klog": lambda: agg(klog_df()),
        "mem": lambda: agg(spark.read.format("klogbenchmem").option("per", per).load()),
        "parquet": lambda: agg(spark.read.parquet(str(parquet))),
        "tail": lambda: spark.read.format("klog").option("startingOffsets", tail).load(str(logs)).count(),
    }
    # one untimed round warms the JVM and the Python workers for every query; then the queries
    # take turns round by round, so that neither warm-up nor load from elsewhere lands on one
    for fn in queries.values():
        fn()
    best: dict[str, float] = dict.fromkeys(queries, float("inf"))
    results: dict[str, Any] = {}
    for _ in range(repeat):
        for name, fn in queries.items():
            t, results[name] = _best(fn, 1)
            best[name] = min(best[name], t)
    t_klog, t_mem, t_pq, t_tail = best["klog"], best["mem"], best["parquet"], best["tail"]
    r_klog, r_mem, r_pq, r_tail = results["klog"], results["mem"], results["parquet"], results["tail"]
    assert sorted((r.partition, r.n) for r in r_klog) == [(0, per), (1, per)]
    assert sorted(tuple(r) for r in r_klog) == sorted(tuple(r) for r in r_mem)
    assert sorted(tuple(r) for r in r_klog) == sorted(tuple(r) for r in r_pq)
    assert r_tail == 10_000
    n = records
    print(f"{n:,} records in 2 partitions, 100-byte values, {codec}: {size / 1e6:.0f} MB of segments "
          f"(built in {built:.1f} s)")
    print()
    print(f"{'query':<58} {'best s':>8} {'Mrec/s':>8}")
    print(f"{'(a) klog full-scan aggregate':<58} {t_klog:>8.2f} {n / t_klog / 1e6:>8.2f}")
    print(f"{'(b) Python data source from in-memory Arrow (API ceiling)':<58} {t_mem:>8.2f} {n / t_mem / 1e6:>8.2f}")
    print(f"{'(c) spark.read.parquet, same rows':<58} {t_pq:>8.2f} {n / t_pq / 1e6:>8.2f}")
    print(f"{'(d) klog 10,000-record range at the tail':<58} {t_tail:>8.2f}")
    print()
    print(f"ratio {codec} klog/ceiling throughput: {t_mem / t_klog:.2f}x")
    print(f"ratio {codec} klog/parquet throughput: {t_pq / t_klog:.2f}x")
    print(f"ratio {codec} tail-range/full-scan time: {t_tail / t_klog:.3f}x")
    print()
    what = f'`spark.read.format("klog")` full-scan aggregate, {n / 1e6:g}M records, {codec}, local[2]'
    summary.add(summary.Row(what, f"{t_klog:.2f} s ({n / t_klog / 1e6:.2f} M records/s)",
                            f"Python data source yielding the same rows from in-memory Arrow, {t_mem:.2f} s",
                            t_mem / t_klog, "throughput", 0.9))
    summary.add(summary.Row("same", "", f"`spark.read.parquet` of the same rows, {t_pq:.2f} s", t_pq / t_klog,
                            "throughput", None))


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.spark_read", description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=4_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--codecs", default="none,lz4", help="segment codecs, one run each (default %(default)s)")
    args = ap.parse_args(argv)
    with bench_session("klog-bench-spark", cores=2) as (spark, work):
        spark.dataSource.register(_memory_source())
        for codec in args.codecs.split(","):
            _run_codec(spark, work / codec, args.records, args.repeat, codec)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
