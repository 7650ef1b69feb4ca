"""``klog restore`` of a ``klog export`` against that export, on the same records, in one run.

A 2-partition log dir of N records (100-byte values) is exported to one Parquet file (``zstd``, the
CLI's default, and ``none``), and each file is restored into an empty log dir at the records'
offsets. The ratio is the restore's records/s over the export's records/s (the issue's target:
>= 0.8x). The best of ``--repeat`` rounds of each is kept, the runs taking turns.

Run: ``python -m benchmarks.restore [--records N]``.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from benchmarks import _summary as summary
from benchmarks.export import _export  # the export the restore is measured against, as benchmarks.export runs it
from benchmarks.spark_read import build

#: The issue's target: a restore from an export at >= 0.8x that export's throughput.
TARGET = 0.8


def _restore(source: Path, target: Path) -> int:
    from storage_core.tools.restore import restore

    return restore(source, target).records


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.restore", description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=4_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--codec", default="lz4", help="the source log's codec (default %(default)s)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="klog-bench-restore-") as tmp:
        work = Path(tmp)
        logs = build(work, args.records, args.codec)
        records = args.records // 2 * 2
        runs: dict[str, Callable[[], int]] = {}
        for pq_codec in ("zstd", "none"):
            out = work / f"export-{pq_codec}.parquet"
            runs[f"export-{pq_codec}"] = lambda o=out, c=pq_codec: _export(logs, o, c)  # type: ignore[misc]
            runs[f"restore-{pq_codec}"] = lambda o=out: _restore(o, work / "target")  # type: ignore[misc]
        best = dict.fromkeys(runs, float("inf"))
        for round_ in range(args.repeat + 1):  # round 0 warms the page cache (and makes the files), not timed
            for name, fn in runs.items():
                shutil.rmtree(work / "target", ignore_errors=True)  # each restore into an empty dir
                t = time.perf_counter()
                assert fn() == records
                if round_:
                    best[name] = min(best[name], time.perf_counter() - t)
    print(f"{records:,} records in 2 partitions, 100-byte values, segments {args.codec}")
    print(f"{'run':<44} {'best s':>8} {'Mrec/s':>8}")
    for pq_codec in ("zstd", "none"):
        ex, re_ = best[f"export-{pq_codec}"], best[f"restore-{pq_codec}"]
        print(f"{'klog export, Parquet ' + pq_codec:<44} {ex:>8.2f} {records / ex / 1e6:>8.2f}")
        print(f"{'klog restore of that file':<44} {re_:>8.2f} {records / re_ / 1e6:>8.2f}")
        print(f"ratio restore/export {pq_codec} throughput: {ex / re_:.2f}x")
        summary.add(summary.Row(
            f"`klog restore` of a `klog export` (Parquet {pq_codec}), {records / 1e6:g}M records",
            f"{re_:.2f} s ({records / re_ / 1e6:.2f} M records/s)",
            f"that export: {ex:.2f} s ({records / ex / 1e6:.2f} M records/s)",
            ex / re_, "throughput", TARGET))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
