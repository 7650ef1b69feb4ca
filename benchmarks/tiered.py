"""A Spark full scan of a tiered topic's whole history against the same data as a plain log dir.

A single-node Apache Kafka broker (``tests/oracles/broker_fixture.py``) with tiered storage on (Kafka's
``LocalTieredStorage``, ``local.retention.bytes=1``) takes about ``--mb`` MB (default 1 GB) of
100-byte values, lz4, into one topic of 4 partitions (32 MB segments), plus up to a segment per
partition for the local tail, written by Spark's own Kafka sink. Once every closed segment is
copied to the remote storage and deleted locally, the broker stops: the log dir holds only each
partition's last segment, the remote storage the rest.

The peer is the same history as one plain log dir: ``klog snapshot --include-remote`` of the
broker's dir (the remote segments copied in as ordinary segments, byte for byte). The query, a
count and a sum of value lengths, runs with ``format("klog")`` on:

* the broker's log dir with ``remoteStorage`` naming the remote storage on the local disk;
* the same with the remote storage in S3 (SeaweedFS on 127.0.0.1, where ``weed`` is installed);
* the plain log dir (the peer).

After one untimed round of each, the queries take turns ``--repeat`` rounds; the best time of each
is kept. Ratio: the peer's time over the tiered read's (the issue's target: at least 0.6).
Run: ``python -m benchmarks.tiered [--mb N]``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks import _summary as summary
from benchmarks._broker import broker_and_connector
from benchmarks._spark import bench_session

TOPIC = "tiered-bench"
PARTITIONS = 4
VALUE_BYTES = 100
#: records per MB on disk: 100-byte hex values and short keys, lz4, as the broker writes them
#: (measured: about 9,650 records of this frame take 1 MB of segment files)
RECORDS_PER_MB = 9_650
TARGET = 0.6


def _frame(spark: Any, records: int) -> Any:
    from pyspark.sql import functions as F

    return spark.range(records, numPartitions=4).select(
        F.expr("cast(cast(id % 100000 as string) as binary)").alias("key"),
        F.expr(f"cast(substring(sha2(cast(id as string), 512), 1, {VALUE_BYTES}) as binary)").alias("value"))


def _sizes(d: Path, pattern: str) -> int:
    return sum(p.stat().st_size for p in d.glob(pattern))


def build(spark: Any, broker_fixture: Any, root: Path, records: int, segment_mb: int) -> tuple[Path, Path]:
    """The broker's tiered log dir and its remote storage, once every closed segment is remote."""
    remote = root / "remote"
    remote.mkdir()
    broker = broker_fixture.Broker(root / "broker", broker_fixture.tiered_release(),
                                   **broker_fixture.tiered_storage_config(remote))
    broker.start()
    try:
        broker.create_topic(TOPIC, PARTITIONS, {"remote.storage.enable": "true", "segment.bytes": str(segment_mb << 20),
                                                "local.retention.bytes": "1", "retention.ms": "-1",
                                                "file.delete.delay.ms": "0", "compression.type": "lz4"})
        t = time.perf_counter()
        _frame(spark, records).write.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap) \
            .option("kafka.compression.type", "lz4").option("kafka.linger.ms", "20") \
            .option("kafka.batch.size", str(256 << 10)).option("topic", TOPIC).save()
        print(f"wrote {records:,} records through the broker in {time.perf_counter() - t:.1f} s")
        deadline = time.monotonic() + 600
        while True:  # every partition down to its active segment locally, the rest copied
            local = [len(list((broker.log_dir / f"{TOPIC}-{p}").glob("*.log"))) for p in range(PARTITIONS)]
            if all(n == 1 for n in local):
                break
            if time.monotonic() > deadline:
                raise SystemExit(f"the broker did not tier {TOPIC} in 600 s (local segments {local})")
            time.sleep(1)
        time.sleep(2)  # the copy task's metadata update lands after the files
    finally:
        broker.stop()
    return broker.log_dir, remote


def run(spark: Any, log_dir: Path, remote: Path, work: Path, repeat: int, s3: Any | None) -> dict[str, float]:
    from pyspark.sql import functions as F

    import storage_core
    from storage_core.log.tiered import RemoteStorage

    plain = work / "plain"
    storage_core.snapshot(log_dir, plain, remote=RemoteStorage.of(str(remote), None), include_remote=True, workers=2)
    remote_bytes = _sizes(remote, "kafka-tiered-storage/*/*.log")
    local_bytes = sum(_sizes(log_dir / f"{TOPIC}-{p}", "*.log") for p in range(PARTITIONS))
    if not remote_bytes:
        raise SystemExit("nothing was tiered: give more --mb than --segment-mb per partition")
    print(f"remote storage: {remote_bytes / 1e6:,.0f} MB of segments; local tail: {local_bytes / 1e6:,.1f} MB; "
          f"the plain copy: {sum(_sizes(plain / f'{TOPIC}-{p}', '*.log') for p in range(PARTITIONS)) / 1e6:,.0f} MB")

    def scan(path: Path, **opts: str) -> Callable[[], list[Any]]:
        def go() -> list[Any]:
            d = spark.read.format("klog").option("subscribe", TOPIC).options(**opts).load(str(path))
            rows: list[Any] = d.agg(F.count("*").alias("n"), F.sum(F.length("value")).alias("bytes")).collect()
            return rows
        return go

    queries = {"tiered": scan(log_dir, remoteStorage=str(remote)), "plain": scan(plain)}
    if s3 is not None:
        uri = s3.bucket() + "/tiered-bench"
        s3.upload(remote, uri)
        queries["tiered-s3"] = scan(log_dir, remoteStorage=uri, **s3.options)
    best = {k: float("inf") for k in queries}
    answers = {k: q() for k, q in queries.items()}  # the untimed round
    if len({(a[0].n, a[0].bytes) for a in answers.values()}) != 1:
        raise SystemExit(f"the reads disagree: {answers}")
    for _ in range(repeat):
        for k, q in queries.items():
            t = time.perf_counter()
            q()
            best[k] = min(best[k], time.perf_counter() - t)
    n = answers["plain"][0].n
    print(f"full scan of {n:,} records ({remote_bytes / 1e6:,.0f} MB remote), count and sum of value lengths:")
    for k, t in best.items():
        print(f"    {k:<10} {t:7.2f} s  {n / t / 1e6:6.2f} M records/s")
    where = {"tiered": ("tiered", "in the remote storage", "on the broker's dir + remoteStorage"),
             "tiered-s3": ("tiered(S3)", "remote in S3 (SeaweedFS, 127.0.0.1)", "+ remoteStorage=s3://...")}
    for k, (label, what, how) in where.items():
        if k not in best:
            continue
        ratio = best["plain"] / best[k]
        print(f"ratio {label}/plain-dir throughput: {ratio:.2f}x (target >= {TARGET})")
        summary.add(summary.Row(f"Spark full scan of a tiered topic, {remote_bytes / 1e9:.1f} GB {what}",
                                f"format(\"klog\") {how}, {best[k]:.1f} s",
                                f"the same history as a plain log dir, {best['plain']:.1f} s", ratio, "throughput",
                                TARGET))
    return best


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.tiered", description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=1024, help="MB of segments to tier, about (default %(default)s; the "
                    "local tail is up to a segment per partition more)")
    ap.add_argument("--segment-mb", type=int, default=32, help="segment.bytes in MB (default %(default)s)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-s3", action="store_true", help="leave out the read from S3 (SeaweedFS)")
    args = ap.parse_args(argv)
    found = broker_and_connector("tiered")
    if found is None:
        return 0
    broker_fixture, jars = found
    s3 = None
    if not args.no_s3:
        from benchmarks._s3_server import S3Server

        try:
            s3 = S3Server.shared()
        except RuntimeError as exc:
            print(f"benchmarks.tiered: the S3 read is left out: {exc}")
    with tempfile.TemporaryDirectory(prefix="klog-bench-tiered-") as tmp, \
            bench_session("klog-bench-tiered", cores=2, jars=jars) as (spark, work):
        log_dir, remote = build(spark, broker_fixture, Path(tmp), (args.mb + PARTITIONS * args.segment_mb) * RECORDS_PER_MB,
                              args.segment_mb)
        run(spark, log_dir, remote, work, args.repeat, s3)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
