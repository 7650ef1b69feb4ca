"""Compaction benchmark: ``LogCleaner`` throughput against a plain copy of the same bytes.

Builds a log deterministically (default ~1 GiB, records of ~150 bytes, uncompressed batches of
16 KiB, 128 MiB segments) whose keys are drawn so that 10% of the records are the latest of
their key (10% live keys), rolls it so that every segment is cleanable, then times:

1. **compaction**: ``LogCleaner.clean_log`` (offset map, recopy, fsync, ``.cleaned → .swap``),
   as MB/s of input log bytes;
2. **plain copy**: copying every segment file of the same log to another directory with an
   fsync (the I/O floor a recopy cannot beat), as MB/s.

The ratio copy/compaction says how far from the I/O floor the cleaner is; the target (issue 19)
is compaction at half the copy's throughput or better (``>= 0.5x``), a row of the summary table.
Run: ``python -m benchmarks.compaction [--mb N] [--memory BYTES]`` (or ``KLOG_BENCH_COMPACTION_MB``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa

from benchmarks import _summary as summary
from benchmarks._memory import peak_rss_bytes, reset_peak_rss
from storage_core.cleaner import LogCleaner
from storage_core.log.config import LogConfig
from storage_core.log.log import Log
from storage_core.record.columnar import encode_arrow
from storage_core.record.kernel import native_kernel

T0 = 1_700_000_000_000
RECORDS_PER_CHUNK = 200_000
VALUE_BYTES = 120
LIVE_FRACTION = 0.10
SEGMENT_BYTES = 128 << 20
#: The issue's target: compaction throughput / plain copy throughput.
TARGET_RATIO = 0.5


def build_log(directory: Path, target_bytes: int, seed: int = 11) -> tuple[int, int]:
    """Append records until the log holds ``target_bytes``; returns (records, distinct keys)."""
    rng = np.random.default_rng(seed)
    approx_record = VALUE_BYTES + 30
    total_records = max(1000, target_bytes // approx_record)
    n_keys = max(1, int(total_records * LIVE_FRACTION))
    cfg = LogConfig.from_properties({"segment.bytes": str(SEGMENT_BYTES), "cleanup.policy": "compact"})
    written = 0
    with Log(directory, cfg, writable=True) as log:
        while written < total_records:
            n = min(RECORDS_PER_CHUNK, total_records - written)
            keys = rng.integers(0, n_keys, size=n)
            # every key appears once more in the last tenth, so the live set is exactly n_keys
            tail = total_records - n_keys
            idx = np.arange(written, written + n)
            keys = np.where(idx >= tail, idx - tail, keys)
            values = rng.integers(65, 91, size=(n, VALUE_BYTES), dtype=np.uint8)
            table = pa.table({
                "key": pa.array([b"key-%09d" % k for k in keys], pa.binary()),
                "value": pa.array([row.tobytes() for row in values], pa.binary()),
                "timestamp": pa.array(T0 + idx, pa.int64()),
            })
            for batch in encode_arrow(table, max_batch_bytes=16 * 1024):
                log.append(batch, now_ms=T0 + written)
            written += n
        log.roll()
    return total_records, n_keys


def _copy(src: Path, dst: Path) -> None:
    dst.mkdir()
    for f in sorted(src.glob("*.log")):
        with open(f, "rb") as i, open(dst / f.name, "wb") as o:
            shutil.copyfileobj(i, o, 8 << 20)
            o.flush()
            os.fsync(o.fileno())


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.compaction", description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=int(os.environ.get("KLOG_BENCH_COMPACTION_MB", "1024")),
                    help="log size in MiB (default 1024, or $KLOG_BENCH_COMPACTION_MB)")
    ap.add_argument("--memory", type=int, default=64 << 20, help="offset map memory in bytes")
    args = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="klog-bench-compaction-"))
    try:
        part = work / "logs" / "bench-0"
        part.mkdir(parents=True)
        t = time.perf_counter()
        records, keys = build_log(part, args.mb << 20)
        build_s = time.perf_counter() - t
        size = sum(f.stat().st_size for f in part.glob("*.log"))
        mb = size / 1e6
        print(f"log: {mb:.1f} MB, {records} records, {keys} live keys ({LIVE_FRACTION:.0%}), "
              f"{len(list(part.glob('*.log')))} segments (built in {build_s:.1f} s)")
        t = time.perf_counter()
        _copy(part, work / "copy")
        copy_s = time.perf_counter() - t
        shutil.rmtree(work / "copy")
        cfg = LogConfig.from_properties({"segment.bytes": str(SEGMENT_BYTES), "cleanup.policy": "compact"})
        with Log(part, cfg, writable=True) as log:
            cleaner = LogCleaner(args.memory, now_ms=T0 + records)
            reset_peak_rss()
            t = time.perf_counter()
            result = cleaner.clean_log(log)
            clean_s = time.perf_counter() - t
            peak = peak_rss_bytes()
        assert result is not None
        after = sum(f.stat().st_size for f in part.glob("*.log"))
        s = result.stats
        print(f"compaction: {clean_s:.2f} s, {mb / clean_s:.1f} MB/s ({s.passes} pass(es), "
              f"{s.records_read} records read, {s.records_removed} removed, {after / 1e6:.1f} MB left)")
        print(f"plain copy: {copy_s:.2f} s, {mb / copy_s:.1f} MB/s")
        print(f"ratio compaction/copy throughput: {copy_s / clean_s:.4f} (target >= {TARGET_RATIO})")
        kernel = native_kernel()
        summary.add(summary.Row(
            f"compaction, {mb:.0f} MB log, {VALUE_BYTES + 30}-byte records, {LIVE_FRACTION:.0%} live keys, "
            f"{s.passes} pass(es){'' if kernel is not None else ', pure Python (no kernel)'}",
            f"{mb / clean_s:.0f} MB/s ({clean_s:.2f} s)", f"plain copy + fsync of the same segments, "
            f"{mb / copy_s:.0f} MB/s", copy_s / clean_s, "throughput", TARGET_RATIO, peak))
        expected_left = keys
        assert s.records_read - s.records_removed == expected_left or s.passes > 1 or s.records_read == 0, \
            (s.records_read, s.records_removed, expected_left)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
