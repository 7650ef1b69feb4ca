"""A 2 GB partition: a 10,000-record tail range against a full scan, and a worker's peak memory.

Builds one partition of ``--gb`` GB (10^9 bytes; 100-byte values, 10-byte keys, uncompressed,
64 KiB batches, 1 GiB segments) with klog's ``LogManager``, as klog's writer leaves a topic.
Then, each run ``--repeat`` times (best kept):

engine
    ``spark_logsource.reader.read_partition`` (exactly what a Spark task runs) of the planned
    full scan, and of the last 10,000 offsets, each in a fresh Python process that reports its
    own time and peak resident memory (``VmHWM``): the worker's side without Spark around it.
spark
    ``spark.read.format("klog")`` full-scan aggregate and a 10,000-record tail range
    (``startingOffsets``), ``local[2]``; a thin wrapper source records the peak resident memory
    of each Python worker while it reads (reset when its task starts).

Run: ``python -m benchmarks.big_partition [--gb 2] [--no-spark]``. Lines to grep:
``ratio engine tail/full-scan time``, ``ratio spark tail/full-scan time``, ``peak RSS ...``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from benchmarks import _summary as summary
from benchmarks._memory import peak_rss_bytes, reset_peak_rss

T0 = 1_700_000_000_000
TOPIC = "big"
TAIL_RECORDS = 10_000
TEMPLATE_RECORDS = 200_000


def _template() -> bytes:
    """200,000 records as v2 batches of at most 64 KiB, appended again and again."""
    from storage_core.record.columnar import encode_arrow

    rng = np.random.default_rng(11)
    values = rng.integers(65, 91, size=(TEMPLATE_RECORDS, 100), dtype=np.uint8)
    table = pa.table({
        "key": pa.array([b"key-%06d" % (i % 100_000) for i in range(TEMPLATE_RECORDS)], pa.binary()),
        "value": pa.array([row.tobytes() for row in values], pa.binary()),
        "timestamp": pa.array(T0 + np.arange(TEMPLATE_RECORDS, dtype=np.int64), pa.int64()),
    })
    return b"".join(encode_arrow(table, max_batch_bytes=64 << 10))


def build(root: Path, gb: float) -> tuple[Path, int]:
    """The log dir and its record count."""
    from storage_core.log.config import LogConfig
    from storage_core.log.manager import LogManager
    from storage_core.log.topic_partition import TopicPartition

    logs = root / "logs"
    logs.mkdir(parents=True)
    chunk = _template()
    target = int(gb * 1e9)
    with LogManager([logs], writable=True) as manager:
        log = manager.create_log(TopicPartition(TOPIC, 0), LogConfig.from_properties({"segment.bytes": str(1 << 30)}))
        written = 0
        while written < target:
            log.append(chunk)
            written += len(chunk)
        records = log.log_end_offset
    return logs, records


# --- engine: read_partition in a fresh process -------------------------------------------------


def scan_in_this_process(logs: str, starting: str | None) -> dict[str, Any]:
    """Plan like the driver, then read every planned partition like the tasks; time and memory.

    A one-record read first loads the modules, as in a Spark worker that has run a task before."""
    from spark_logsource.options import parse_read_options
    from spark_logsource.planning import plan
    from spark_logsource.reader import read_partition
    from storage_core.record.columnar import kafka_schema

    schema = kafka_schema()

    def scan(options: dict[str, str]) -> tuple[int, int]:
        parts, _ = plan(parse_read_options(options))
        rows = 0
        for part in parts:
            for rb in read_partition(part, schema, include_headers=False, include_metadata=False,
                                     fail_on_data_loss=True):
                rows += rb.num_rows
        return rows, len(parts)

    scan({"path": logs, "endingOffsets": json.dumps({TOPIC: {"0": 1}})})
    reset_peak_rss()
    t = time.perf_counter()
    rows, tasks = scan({"path": logs, **({"startingOffsets": starting} if starting else {})})
    return {"seconds": time.perf_counter() - t, "rows": rows, "peak_rss": peak_rss_bytes(), "tasks": tasks}


def scan_in_a_process(logs: Path, starting: str | None) -> dict[str, Any]:
    code = ("import json, sys; from benchmarks.big_partition import scan_in_this_process; "
            "print(json.dumps(scan_in_this_process(sys.argv[1], sys.argv[2] or None)))")
    repo = str(Path(__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": repo + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = subprocess.run([sys.executable, "-c", code, str(logs), starting or ""], capture_output=True, text=True,
                         check=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


# --- spark: a wrapper source that records each worker's peak memory ----------------------------


def _rss_source():  # type: ignore[no-untyped-def]
    from pyspark.sql.datasource import DataSourceReader

    from spark_logsource.options import parse_read_options
    from spark_logsource.source import KlogDataSource, KlogReader

    class RssReader(DataSourceReader):
        def __init__(self, inner: KlogReader, out_dir: str) -> None:
            self.inner = inner
            self.out_dir = out_dir

        def partitions(self):  # type: ignore[no-untyped-def]
            return self.inner.partitions()

        def read(self, partition):  # type: ignore[no-untyped-def]
            from benchmarks._memory import peak_rss_bytes, reset_peak_rss

            reset_peak_rss()
            yield from self.inner.read(partition)
            Path(self.out_dir, f"{os.getpid()}-{time.monotonic_ns()}.json").write_text(
                json.dumps({"peak_rss": peak_rss_bytes()}))

    class RssSource(KlogDataSource):
        def __init__(self, options):  # type: ignore[no-untyped-def]
            options = dict(options)
            self.rss_dir = next(v for k, v in options.items() if k.lower() == "rssdir")
            super().__init__({k: v for k, v in options.items() if k.lower() != "rssdir"})

        @classmethod
        def name(cls) -> str:
            return "klogbenchrss"

        def reader(self, schema):  # type: ignore[no-untyped-def]
            return RssReader(KlogReader(parse_read_options(self.options)), self.rss_dir)

    return RssSource


def _best(repeat: int, fn: Any) -> tuple[float, Any]:
    best, result = float("inf"), None
    for _ in range(repeat):
        t = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t)
    return best, result


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.big_partition", description=__doc__.splitlines()[0])
    ap.add_argument("--gb", type=float, default=2.0, help="partition size in 10^9 bytes (default %(default)s)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--spark", action=argparse.BooleanOptionalAction, default=True,
                    help="also measure through Spark (default: yes)")
    ap.add_argument("--workdir", type=Path, default=None)
    args = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="klog-bench-big-", dir=args.workdir))
    try:
        t = time.perf_counter()
        logs, n = build(work, args.gb)
        size = sum(p.stat().st_size for p in logs.rglob("*.log"))
        print(f"one partition: {n:,} records, {size / 1e9:.2f} GB in {len(list(logs.rglob('*.log')))} segments "
              f"(built in {time.perf_counter() - t:.1f} s)")
        tail = json.dumps({TOPIC: {"0": n - TAIL_RECORDS}})
        full = min((scan_in_a_process(logs, None) for _ in range(args.repeat)), key=lambda r: r["seconds"])
        part = min((scan_in_a_process(logs, tail) for _ in range(args.repeat)), key=lambda r: r["seconds"])
        assert full["rows"] == n and part["rows"] == TAIL_RECORDS, (full, part)
        mib = 1 << 20
        print()
        print(f"{'engine (read_partition, fresh process)':<46} {'s':>8} {'Mrec/s':>8} {'GB/s':>6} {'peak RSS MiB':>13}")
        print(f"{'full scan':<46} {full['seconds']:>8.3f} {n / full['seconds'] / 1e6:>8.2f} "
              f"{size / full['seconds'] / 1e9:>6.2f} {full['peak_rss'] / mib:>13.0f}")
        print(f"{'10,000-record tail range':<46} {part['seconds']:>8.4f} {'':>8} {'':>6} {part['peak_rss'] / mib:>13.0f}")
        print(f"ratio engine tail/full-scan time: {part['seconds'] / full['seconds']:.4f}x")
        print(f"peak RSS engine full scan of {size / 1e9:.1f} GB: {full['peak_rss'] / mib:.0f} MiB "
              f"(one process, interpreter and pyarrow included)")
        summary.add(summary.Row(
            f"tail range read of 10,000 records, {size / 1e9:.1f} GB partition (read_partition, no Spark)",
            f"{part['seconds'] * 1e3:.1f} ms", f"full scan of the partition, {full['seconds']:.2f} s",
            part["seconds"] / full["seconds"], "time", 0.02, part["peak_rss"]))
        if args.spark:
            _spark(args, logs, n, size, tail)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def _spark(args: argparse.Namespace, logs: Path, n: int, size: int, tail: str) -> None:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    repo = str(Path(__file__).resolve().parent.parent)
    os.environ["PYTHONPATH"] = repo + os.pathsep + os.environ.get("PYTHONPATH", "")
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    owned = SparkSession.getActiveSession() is None
    spark = (SparkSession.builder.master("local[2]").appName("klog-bench-big").config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.session.timeZone", "UTC").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    rss_dir = logs.parent / "rss"
    rss_dir.mkdir()
    try:
        spark.dataSource.register(_rss_source())

        def full() -> int:
            rows = (spark.read.format("klogbenchrss").option("rssdir", str(rss_dir)).load(str(logs))
                    .agg(F.count("*").alias("n"), F.sum(F.length("value")).alias("b")).collect())
            return int(rows[0]["n"])

        def tail_read() -> int:
            return spark.read.format("klog").option("startingOffsets", tail).load(str(logs)).count()

        def empty_read() -> int:  # Spark's fixed cost of a query on the source: planning, a task, no rows
            end = json.dumps({TOPIC: {"0": n}})
            return spark.read.format("klog").option("startingOffsets", end).load(str(logs)).count()

        t_full, got = _best(args.repeat, full)
        t_tail, got_tail = _best(args.repeat, tail_read)
        t_empty, got_empty = _best(args.repeat, empty_read)
        assert got == n and got_tail == TAIL_RECORDS and got_empty == 0, (got, got_tail, got_empty)
        peaks = [json.loads(p.read_text())["peak_rss"] for p in rss_dir.iterdir()]
        mib = 1 << 20
        print()
        print(f"{'spark local[2]':<46} {'s':>8} {'Mrec/s':>8} {'GB/s':>6}")
        print(f"{'full-scan aggregate':<46} {t_full:>8.3f} {n / t_full / 1e6:>8.2f} {size / t_full / 1e9:>6.2f}")
        print(f"{'10,000-record tail range (count)':<46} {t_tail:>8.3f}")
        print(f"{'the same query on an empty range (fixed cost)':<46} {t_empty:>8.3f}")
        print(f"ratio spark tail/full-scan time: {t_tail / t_full:.4f}x "
              f"({(t_tail - t_empty) / t_full:.4f}x without the fixed cost of a query)")
        print(f"peak RSS of a Python worker scanning the {size / 1e9:.1f} GB partition: max {max(peaks) / mib:.0f} MiB "
              f"over {len(peaks)} tasks")
        summary.add(summary.Row("same through Spark (a query each, local[2])",
                                f"{t_tail:.3f} s, of which {t_empty:.3f} s is the cost of any query (empty range)",
                                f"full-scan aggregate, {t_full:.2f} s", t_tail / t_full, "time", 0.02))
        summary.add(summary.Row(
            f"peak RSS of a Python worker scanning a {size / 1e9:.1f} GB partition (Spark tasks)",
            f"{max(peaks) / mib:.0f} MiB", "—", max(peaks) / (512 * mib), "time", 1.0, max(peaks),
            ratio_label=f"{max(peaks) / (512 * mib):.2f} of the 512 MiB bound"))
    finally:
        if owned:
            spark.stop()


if __name__ == "__main__":
    raise SystemExit(main())
