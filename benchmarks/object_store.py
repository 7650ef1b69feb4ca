"""Log dirs in object storage: a Spark scan from S3 against local disk, and ``klog snapshot`` against a plain copy.

``spark_scan`` (:mod:`benchmarks._object_store_scan`): ``spark.read.format("klog")`` full-scan
aggregate of one log (default about 1 GB, ``--scan-mb``) from a SeaweedFS S3 server on 127.0.0.1
and from local disk, taking turns, best of ``--repeat``; the ratio is S3 throughput over local
(the issue's target: ≥ 0.6).

``snapshot_vs_copy()`` builds a log dir deterministically (default 256 MiB over two partitions,
records of ~200 bytes in batches of 16 KiB, 32 MiB segments), then times, for a local DST and for an
S3 DST (a local SeaweedFS server, as the tests start it; skipped without the ``weed`` binary):

1. **plain copy**: every file of the log dir copied as it is (local: read, write, fsync each
   file; S3: one upload per file through the same ``pyarrow.fs`` client): the floor;
2. **klog snapshot** into an empty DST: the same files, with the active segments CRC-checked and
   their indexes rebuilt, each object written atomically, checksums and the manifest.

The ratio is copy time / snapshot time (the issue's target: ≥ 0.8). Run:
``python -m benchmarks.object_store [--mb N] [--no-s3]`` (or ``KLOG_BENCH_SNAPSHOT_MB``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from benchmarks import _summary
from storage_core.log.config import LogConfig
from storage_core.log.manager import LogManager
from storage_core.log.topic_partition import TopicPartition
from storage_core.record.columnar import encode_arrow

SEGMENT_BYTES = 32 << 20
RECORDS_PER_CHUNK = 100_000
VALUE_BYTES = 180
SNAPSHOT_TARGET = 0.8


def build_log_dir(root: Path, target_bytes: int, partitions: int = 2, seed: int = 5) -> int:
    """A log dir of ``partitions`` partitions of ``orders`` holding ``target_bytes`` in all; returns its bytes."""
    rng = np.random.default_rng(seed)
    per_part = target_bytes // partitions
    cfg = LogConfig.from_properties({"segment.bytes": str(SEGMENT_BYTES), "retention.ms": "-1"})
    now = int(time.time() * 1000)
    with LogManager([root], writable=True, config=cfg) as lm:
        for p in range(partitions):
            log = lm.create_log(TopicPartition("orders", p))
            written = 0
            while log.size_in_bytes < per_part:
                n = RECORDS_PER_CHUNK
                values = rng.integers(0, 256, size=(n, VALUE_BYTES), dtype=np.uint8)
                table = pa.table({
                    "key": pa.array([b"key-%09d" % (written + i) for i in range(n)], pa.binary()),
                    "value": pa.array([row.tobytes() for row in values], pa.binary()),
                    "timestamp": pa.array(now + np.arange(written, written + n), pa.int64()),
                })
                for batch in encode_arrow(table, max_batch_bytes=16 * 1024):
                    log.append(batch)
                written += n
    return sum(f.stat().st_size for f in root.rglob("*") if f.is_file())


def _files(root: Path) -> list[Path]:
    return sorted(f for f in root.rglob("*") if f.is_file() and f.name != ".lock")


def plain_copy_local(src: Path, dst: Path) -> None:
    for f in _files(src):
        out = dst / f.relative_to(src)
        out.parent.mkdir(parents=True, exist_ok=True)
        with open(f, "rb") as i, open(out, "wb") as o:
            shutil.copyfileobj(i, o, 8 << 20)
            o.flush()
            os.fsync(o.fileno())


def plain_copy_object(src: Path, fs: Any, key: str) -> None:
    for f in _files(src):
        with open(f, "rb") as i, fs.open_output_stream(f"{key}/{f.relative_to(src).as_posix()}") as o:
            while chunk := i.read(8 << 20):
                o.write(chunk)


def _s3_server() -> Any:
    """The SeaweedFS server the tests use too (:mod:`benchmarks._s3_server`), or None with the reason printed."""
    from benchmarks._s3_server import S3Server

    try:
        return S3Server.shared()
    except RuntimeError as exc:
        print(f"S3 DST skipped: {exc}")
        return None


def snapshot_vs_copy(mb: int = 256, *, s3: bool = True, repeat: int = 1) -> list[_summary.Row]:
    """Time ``klog snapshot`` and a plain copy of the same log dir, into a local dir and into S3;
    print the figures and the ratios, add the rows to the summary table and return them."""
    from storage_core.fs import StorageOptions, as_path
    from storage_core.tools.snapshot import snapshot

    rows: list[_summary.Row] = []
    work = Path(tempfile.mkdtemp(prefix="klog-bench-snapshot-"))
    try:
        src = work / "src"
        src.mkdir()
        t = time.perf_counter()
        size = build_log_dir(src, mb << 20)
        mbytes = size / 1e6
        print(f"log dir: {mbytes:.1f} MB, {len(list(src.rglob('*.log')))} segments in 2 partitions "
              f"(built in {time.perf_counter() - t:.1f} s)")

        def best(fn: Any) -> float:
            times = []
            for i in range(repeat):
                t0 = time.perf_counter()
                fn(i)
                times.append(time.perf_counter() - t0)
            return min(times)

        copy_s = best(lambda i: plain_copy_local(src, work / f"copy-{i}"))
        snap_s = best(lambda i: snapshot(src, work / f"snap-{i}"))
        ratio = copy_s / snap_s
        print(f"local plain copy: {copy_s:.2f} s, {mbytes / copy_s:.0f} MB/s")
        print(f"local klog snapshot: {snap_s:.2f} s, {mbytes / snap_s:.0f} MB/s")
        print(f"ratio snapshot/copy local throughput: {ratio:.3f}")
        rows.append(_summary.Row("klog snapshot of a log dir, local DST", f"{mbytes / snap_s:.0f} MB/s",
                                 f"plain copy (read, write, fsync) {mbytes / copy_s:.0f} MB/s", ratio, "throughput",
                                 SNAPSHOT_TARGET))
        server = _s3_server() if s3 else None
        if server is not None:
            storage = StorageOptions.from_options(server.options)
            bucket = server.bucket()
            dst = as_path(bucket, storage)
            fs = dst.store.fs()  # type: ignore[attr-defined]
            base = dst.fs_key  # type: ignore[attr-defined]
            copy_s = best(lambda i: plain_copy_object(src, fs, f"{base}/copy-{i}"))
            snap_s = best(lambda i: snapshot(src, f"{bucket}/snap-{i}", storage=storage))
            ratio = copy_s / snap_s
            print(f"S3 plain upload: {copy_s:.2f} s, {mbytes / copy_s:.0f} MB/s")
            print(f"S3 klog snapshot: {snap_s:.2f} s, {mbytes / snap_s:.0f} MB/s")
            print(f"ratio snapshot/copy s3 throughput: {ratio:.3f}")
            rows.append(_summary.Row("klog snapshot of a log dir, S3 DST (local SeaweedFS)",
                                     f"{mbytes / snap_s:.0f} MB/s",
                                     f"plain upload of the files {mbytes / copy_s:.0f} MB/s", ratio, "throughput",
                                     SNAPSHOT_TARGET))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for r in rows:
        _summary.add(r)
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.object_store", description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=int(os.environ.get("KLOG_BENCH_SNAPSHOT_MB", "256")),
                    help="log dir size in MiB (default 256, or $KLOG_BENCH_SNAPSHOT_MB)")
    ap.add_argument("--repeat", type=int, default=2, help="best of N runs of each (default 2)")
    ap.add_argument("--no-s3", action="store_true", help="local DST only (no SeaweedFS server), and no Spark scan")
    ap.add_argument("--scan-mb", type=float, default=1024.0, help="MB of the log the Spark scan reads (default 1024)")
    args = ap.parse_args(argv)
    if not args.no_s3:
        from benchmarks._object_store_scan import spark_scan
        from benchmarks._spark import bench_session

        with bench_session("klog-bench-object-store", cores=2) as (spark, work):
            spark_scan(spark, work, mb=args.scan_mb, repeat=args.repeat)
    snapshot_vs_copy(args.mb, s3=not args.no_s3, repeat=args.repeat)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
