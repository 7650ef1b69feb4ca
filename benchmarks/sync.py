"""``klog sync`` into Iceberg and into Delta against ``klog export`` of the same records to plain
Parquet, in one run: what the table formats' commits and metadata cost over writing the rows.

The log: ``--records`` records (default 4,000,000), 100-byte values, lz4, in 8 partitions (the
threads benchmark's log). Each round syncs into a new table (an embedded SQLite Iceberg catalog; a
Delta dir) and exports to a new Parquet file, all three in zstd (``klog export``'s and pyiceberg's
default, and what the sync asks of delta-rs), the syncs with 1,000,000 records per commit. Best of ``--repeat`` rounds, the runs taking turns. Target (issue 28): each sync >= 0.8x
the export's throughput. Run: ``python -m benchmarks.sync [--records N] [--repeat N]``.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from benchmarks import _summary as summary
from benchmarks.threads import PARTITIONS, _best, build

TARGET = 0.8


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.sync", description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=4_000_000)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args(argv)
    from storage_core.tables import sync
    from storage_core.tools.export import ExportRequest, export_parquet, plan_export

    work = Path(tempfile.mkdtemp(prefix="klog-bench-sync-"))
    try:
        logs = build(work, args.records)
        size = sum(p.stat().st_size for p in logs.rglob("*.log"))
        print(f"{args.records:,} records in {PARTITIONS} partitions, 100-byte values, lz4: {size / 1e6:.0f} MB of "
              "segments")
        n = 0

        def fresh() -> Path:
            nonlocal n
            n += 1
            return work / f"run-{n}"

        def export() -> int:
            req = ExportRequest(log_dirs=(str(logs),), topic="bench", read_committed=True)
            return export_parquet(req, plan_export(req), fresh().with_suffix(".parquet"), compression="zstd").records

        def iceberg() -> int:
            return sync(logs, "bench.t", format="iceberg", warehouse=fresh(), topics="bench").records

        def delta() -> int:
            return sync(logs, fresh(), format="delta", topics="bench").records

        want = args.records // PARTITIONS * PARTITIONS

        def checked(fn: Callable[[], int]) -> Callable[[], None]:
            def run() -> None:
                assert fn() == want, fn.__name__
            return run

        def clean() -> None:
            for old in work.glob("run-*"):
                shutil.rmtree(old, ignore_errors=True) if old.is_dir() else old.unlink()

        best = _best({"export": checked(export), "iceberg": checked(iceberg), "delta": checked(delta)}, args.repeat,
                     before=clean)
        print(f"{'run':<10} {'best s':>8} {'Mrec/s':>8}")
        for name, s in best.items():
            print(f"{name:<10} {s:>8.3f} {args.records / s / 1e6:>8.2f}")
        for name, label in (("iceberg", "Iceberg (pyiceberg, SQLite catalog)"), ("delta", "Delta (deltalake)")):
            ratio = best["export"] / best[name]
            print(f"ratio sync {name}/export throughput: {ratio:.3f} (target >= {TARGET})")
            summary.add(summary.Row(
                f"`klog sync` into {label}, {args.records / 1e6:g}M records, lz4, {PARTITIONS} partitions",
                f"{best[name]:.2f} s ({args.records / best[name] / 1e6:.2f} M records/s)",
                f"`klog export` to Parquet (zstd): {best['export']:.2f} s "
                f"({args.records / best['export'] / 1e6:.2f} M records/s)", ratio, "throughput", TARGET))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
