"""Segment-engine benchmark: append throughput and tail-read latency, each against a peer.

1. **Append from Arrow** into a ``Log`` (encode, CRC, offsets, index maintenance, rolls) against a
   plain sequential ``write`` of the same bytes to one file: the ratio is the engine's overhead.
2. **Tail read of 1,000 records** from a 1-segment and a 200-segment partition holding the same
   records: the offset index makes the seek independent of the segment count (ratio ~1).

Run: ``python -m benchmarks.engine [--records N]``.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa

from storage_core.log.config import LogConfig
from storage_core.log.log import Log
from storage_core.record.columnar import ArrowDecoder, encode_arrow

T0 = 1_700_000_000_000


def _table(n: int, seed: int = 7) -> pa.Table:
    rng = np.random.default_rng(seed)
    values = rng.integers(65, 91, size=(n, 100), dtype=np.uint8)
    return pa.table({
        "key": pa.array([b"key-%07d" % (i % 100_000) for i in range(n)], pa.binary()),
        "value": pa.array([row.tobytes() for row in values], pa.binary()),
        "timestamp": pa.array(T0 + np.arange(n, dtype=np.int64), pa.int64()),
    })


def _best(fn: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.engine", description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=400_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    n = args.records
    table = _table(n)
    work = Path(tempfile.mkdtemp(prefix="klog-bench-engine-"))
    try:
        batches = encode_arrow(table, max_batch_bytes=16 * 1024)
        data = b"".join(batches)
        big = LogConfig.from_properties({"segment.bytes": str(1 << 30)})

        def klog_append() -> None:
            d = work / "append" / "t-0"
            shutil.rmtree(d.parent, ignore_errors=True)
            d.mkdir(parents=True)
            with Log(d, big, writable=True) as log:
                for raw in encode_arrow(table, max_batch_bytes=16 * 1024):
                    log.append(raw)

        def plain_write() -> None:
            p = work / "plain.bin"
            with open(p, "wb") as f:
                for raw in batches:
                    f.write(raw)
                f.flush()

        t_klog = _best(klog_append, args.repeat)
        t_plain = _best(plain_write, args.repeat)

        # the same records in 1 segment and in 200 segments
        seg_bytes = max(1 << 14, len(data) // 200 + 1)
        dirs = {}
        for label, size in (("1 segment", 1 << 30), ("200 segments", seg_bytes)):
            d = work / label.replace(" ", "_") / "t-0"
            d.mkdir(parents=True)
            with Log(d, LogConfig.from_properties({"segment.bytes": str(size)}), writable=True) as log:
                for raw in batches:
                    log.append(raw)
            dirs[label] = d

        def tail_read(log: Log) -> Callable[[], object]:
            def run() -> object:
                leo = log.log_end_offset
                dec = ArrowDecoder("t", 0)
                for b in log.batches(leo - 1000):
                    dec.add(b, min_offset=leo - 1000)
                out = dec.finish()
                assert out.num_rows == 1000
                return out
            return run

        def open_close(d: Path) -> Callable[[], object]:
            def run() -> object:
                Log(d, had_clean_shutdown=True).close()
                return None
            return run

        tail = {}
        opening = {}
        for label, d in dirs.items():
            opening[label] = _best(open_close(d), max(5, args.repeat))
            with Log(d, had_clean_shutdown=True) as log:
                tail[label] = _best(tail_read(log), max(20, args.repeat))
        segs = {label: len(list(d.glob("*.log"))) for label, d in dirs.items()}
        mb = len(data) / 1e6
        print(f"{n:,} records of 100-byte values, {mb:.1f} MB in {len(batches):,} batches")
        print()
        print(f"{'what':<44} {'time':>10} {'throughput':>16}")
        print(f"{'klog: encode from Arrow + Log.append':<44} {t_klog:>9.3f}s {n / t_klog / 1e6:>10.2f} Mrec/s")
        print(f"{'peer: plain sequential write, same bytes':<44} {t_plain:>9.3f}s {mb / t_plain:>11.0f} MB/s")
        for label in dirs:
            print(f"{'tail read 1,000 records, ' + label + f' ({segs[label]})':<44} {tail[label] * 1000:>8.2f}ms")
        for label in dirs:
            print(f"{'open the partition read-only, ' + label:<44} {opening[label] * 1000:>8.2f}ms")
        print()
        print(f"ratio append klog/plain-write time: {t_klog / t_plain:.1f}x")
        print(f"ratio tail read 200-segment/1-segment: {tail['200 segments'] / tail['1 segment']:.2f}x")
        print(f"peak RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.1f} MiB")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
