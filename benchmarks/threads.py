"""The paths without Spark on several threads: ``read_arrow``, ``klog export`` and ``klog compact``
with 2 threads against the same call with 1, on the same log dir, in one run; ``klog export``
both to one file and to a file per partition (``--per-partition``).

``read_arrow`` and ``klog export`` decode pieces on a thread pool (``maxThreads``, ``--threads``)
and ``klog compact`` cleans partitions on one (``--workers``); the threads run at once only while
the native kernel has released the GIL (its decode walk, CRC and lz4, the cleaner's loops), so
with a kernel that holds it the ratios are about 1x. One Parquet file has one writer, one thread;
``--per-partition`` writes several files at once. Targets (issue 29): read and export with 2
threads >= 1.7x the throughput of 1, compaction of 8 partitions with 2 workers >= 1.6x.

Beside the read and the per-partition export, the machine's own bound for two workers: two
processes, each doing the one-thread run on half the partitions, at once (a barrier starts each
round; a round lasts until both are done). They share no GIL, allocator or page tables, only the
cores, caches, memory and the OS, so two threads of one process cannot expect more than that.

The log: ``--records`` records (default 2,000,000, 100-byte values as the export and Spark read
rows), lz4, in 8 partitions of several segments (so that there are many more pieces than
threads); the compaction log: 8 partitions of ``--compact-mb`` MiB in all (default 256), 10%
live keys, rolled so that all of it is cleanable. Best of ``--repeat`` rounds, the runs taking
turns. Run: ``python -m benchmarks.threads [--records N] [--compact-mb N] [--repeat N]``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import multiprocessing
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier
from pathlib import Path

import numpy as np
import pyarrow as pa

from benchmarks import _summary as summary
from benchmarks.compaction import build_log

PARTITIONS = 8
THREADS = 2
TARGET_READ = 1.7
TARGET_COMPACT = 1.6
T0 = 1_700_000_000_000


def build(root: Path, records: int, codec: str = "lz4") -> Path:
    """``records`` records in :data:`PARTITIONS` partitions of 32 MiB segments, as klog's writer
    leaves a dir (checkpoints and the clean-shutdown marker)."""
    from storage_core.log.config import LogConfig
    from storage_core.log.manager import LogManager
    from storage_core.log.topic_partition import TopicPartition
    from storage_core.record.columnar import encode_arrow
    from storage_core.record.compression import CompressionType

    logs = root / "logs"
    logs.mkdir(parents=True)
    per = records // PARTITIONS
    rng = np.random.default_rng(29)
    config = LogConfig.from_properties({"segment.bytes": str(32 << 20)})
    with LogManager([logs], writable=True) as manager:
        for p in range(PARTITIONS):
            log = manager.create_log(TopicPartition("bench", p), config)
            values = rng.integers(32, 127, size=(per, 100), dtype=np.uint8)
            table = pa.table({
                "key": pa.array([b"key-%d" % (i % 1000) for i in range(per)], pa.binary()),
                "value": pa.array([row.tobytes() for row in values], pa.binary()),
                "timestamp": pa.array(T0 + np.arange(per), pa.int64()),
            })
            for raw in encode_arrow(table, compression=CompressionType.from_name(codec), max_batch_bytes=64 << 10):
                log.append(raw)
    return logs


def build_compacted(root: Path, mb: int) -> Path:
    """:data:`PARTITIONS` partitions of the compaction benchmark's log (10% live keys), rolled."""
    logs = root / "compact"
    for p in range(PARTITIONS):
        part = logs / f"bench-{p}"
        part.mkdir(parents=True)
        build_log(part, max(1, (mb << 20) // PARTITIONS), seed=11 + p)
    from storage_core.log.manager import LogManager

    LogManager([logs], writable=True).close()  # checkpoints and the clean-shutdown marker
    return logs


def _best(runs: dict[str, Callable[[], object]], repeat: int, before: Callable[[], None] | None = None,
          ) -> dict[str, float]:
    best = dict.fromkeys(runs, float("inf"))
    for _ in range(repeat):
        for name, fn in runs.items():
            if before is not None:
                before()
            t = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - t)
    return best


def run_read(logs: Path, threads: int, partitions: Sequence[int] | None = None) -> int:
    """The benchmark's read: ``read_arrow`` of ``partitions`` (all: None) on ``threads`` threads."""
    import storage_core

    chosen = {} if partitions is None else {"assign": json.dumps({"bench": list(partitions)})}
    return int(storage_core.read_arrow(logs, maxThreads=threads, **chosen).read_all().num_rows)


def run_export_per_partition(logs: Path, out: Path, threads: int, partitions: Sequence[int] | None = None) -> int:
    """The benchmark's ``klog export --per-partition`` (Parquet none) of ``partitions`` (all: None)
    into ``out`` on ``threads`` threads."""
    from storage_core.tools.export import ExportRequest, export_parquet_per_partition, plan_export

    req = ExportRequest(log_dirs=(str(logs),), topic="bench", threads=threads,
                        partitions=None if partitions is None else tuple(partitions))
    return export_parquet_per_partition(req, plan_export(req), out, compression="none", overwrite=True).records


def _half_run(what: str, logs: Path, out: Path, partitions: tuple[int, ...], repeat: int, barrier: Barrier,
              results: Queue[tuple[str, list[float] | str]]) -> None:
    """One of the two processes of the machine's bound: ``what`` (``read`` or ``export_pp``) with
    one thread on ``partitions``, once untimed, then ``repeat`` rounds each started at ``barrier``.
    Puts ``("ok", round times)`` on ``results``, or ``("error", what went wrong)`` after breaking
    the barrier, so that neither the other process nor the parent waits for it."""
    try:
        def once() -> None:
            if what == "read":
                run_read(logs, 1, partitions)
            else:
                run_export_per_partition(logs, out, 1, partitions)

        once()
        times = []
        for _ in range(repeat):
            barrier.wait()
            t = time.perf_counter()
            once()
            times.append(time.perf_counter() - t)
        results.put(("ok", times))
    except Exception as exc:
        barrier.abort()
        results.put(("error", f"{type(exc).__name__}: {exc}"))
        raise


def two_processes(what: str, logs: Path, work: Path, repeat: int) -> float:
    """The best round time of two processes running ``what`` with one thread on half the
    partitions each, at once (:func:`_half_run`): the machine's bound for two workers."""
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(2), ctx.Queue()
    halves = [tuple(range(PARTITIONS))[i::2] for i in range(2)]
    procs = [ctx.Process(target=_half_run, args=(what, logs, work / f"{what}-half-{i}", half, repeat, barrier,
                                                  results)) for i, half in enumerate(halves)]
    for p in procs:
        p.start()
    answers = [results.get(timeout=600) for _ in procs]
    for p in procs:
        p.join()
    errors = [str(got) for status, got in answers if status != "ok"]
    if errors:
        raise RuntimeError(f"a process of the two-process bound failed: {'; '.join(errors)}")
    times = [got for _status, got in answers if isinstance(got, list)]
    return min(max(round_times) for round_times in zip(*times, strict=True))


def _kernel_note() -> str:
    from storage_core.record.kernel import native_kernel

    return "" if native_kernel() is not None else ", pure Python (no kernel)"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.threads", description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=2_000_000)
    ap.add_argument("--compact-mb", type=int, default=int(os.environ.get("KLOG_BENCH_COMPACTION_MB", "256")))
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    import storage_core
    from storage_core.tools.cli import main as klog
    from storage_core.tools.export import ExportRequest, export_parquet, plan_export

    work = Path(tempfile.mkdtemp(prefix="klog-bench-threads-"))
    try:
        logs = build(work, args.records)
        size = sum(p.stat().st_size for p in logs.rglob("*.log"))
        pieces = len(storage_core.plan(logs).pieces)
        print(f"{args.records:,} records in {PARTITIONS} partitions ({pieces} pieces), 100-byte values, lz4: "
              f"{size / 1e6:.0f} MB of segments")

        def read(threads: int) -> int:
            return run_read(logs, threads)

        def export(threads: int) -> int:
            req = ExportRequest(log_dirs=(str(logs),), topic="bench", threads=threads)
            return export_parquet(req, plan_export(req), work / "x.parquet", compression="none",
                                  overwrite=True).records

        def export_per_partition(threads: int) -> int:
            return run_export_per_partition(logs, work / "per-partition", threads)

        for fn in (read, export, export_per_partition):
            assert fn(1) == fn(THREADS) == args.records // PARTITIONS * PARTITIONS  # warm the page cache
        best = _best({"read-1": lambda: read(1), f"read-{THREADS}": lambda: read(THREADS),
                      "export-1": lambda: export(1), f"export-{THREADS}": lambda: export(THREADS),
                      "export_pp-1": lambda: export_per_partition(1),
                      f"export_pp-{THREADS}": lambda: export_per_partition(THREADS)}, args.repeat)
        for what in ("read", "export_pp"):
            best[f"{what}-2 processes"] = two_processes(what, logs, work, args.repeat)
        print(f"{'run':<44} {'best s':>8} {'Mrec/s':>8}")
        for name, s in best.items():
            print(f"{name:<44} {s:>8.3f} {args.records / s / 1e6:>8.2f}")
        for what, label in (("read", "`read_arrow` full read"), ("export", "`klog export` (Parquet none)"),
                            ("export_pp", "`klog export --per-partition` (Parquet none, a file per partition)")):
            one, many = best[f"{what}-1"], best[f"{what}-{THREADS}"]
            print(f"ratio {what} {THREADS} threads/1 thread throughput: {one / many:.3f} (target >= {TARGET_READ})")
            summary.add(summary.Row(
                f"{label}, {THREADS} threads, {args.records / 1e6:g}M records, lz4, {PARTITIONS} partitions"
                f"{_kernel_note()}", f"{many:.2f} s ({args.records / many / 1e6:.2f} M records/s)",
                f"the same with 1 thread: {one:.2f} s ({args.records / one / 1e6:.2f} M records/s)",
                one / many, "throughput", TARGET_READ))
            if f"{what}-2 processes" in best:
                bound = best[f"{what}-2 processes"]
                print(f"ratio {what} 2 processes/1 thread throughput: {one / bound:.3f} (the machine's bound for two "
                      "workers)")
                summary.add(summary.Row(
                    "same: two processes, each the one-thread run on half the partitions, at once (the machine's "
                    "bound for two workers)", f"{bound:.2f} s ({args.records / bound / 1e6:.2f} M records/s)",
                    f"the same with 1 thread: {one:.2f} s", one / bound, "throughput", None))

        source = build_compacted(work, args.compact_mb)
        csize = sum(p.stat().st_size for p in source.rglob("*.log"))
        target = work / "compact-run"

        def fresh() -> None:
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(source, target)

        def compact(workers: int) -> None:
            with contextlib.redirect_stdout(io.StringIO()):
                rc = klog(["compact", str(target), "--topic", "bench", "--now", str(T0 + 10**10), "--quiet",
                           "--workers", str(workers)])
            assert rc == 0

        cbest = _best({"compact-1": lambda: compact(1), f"compact-{THREADS}": lambda: compact(THREADS)},
                      args.repeat, before=fresh)
        one, many = cbest["compact-1"], cbest[f"compact-{THREADS}"]
        print(f"klog compact, {PARTITIONS} partitions, {csize / 1e6:.0f} MB: 1 worker {one:.3f} s "
              f"({csize / one / 1e6:.0f} MB/s), {THREADS} workers {many:.3f} s ({csize / many / 1e6:.0f} MB/s)")
        print(f"ratio compact {THREADS} workers/1 worker throughput: {one / many:.3f} (target >= {TARGET_COMPACT})")
        summary.add(summary.Row(
            f"`klog compact`, {THREADS} workers, {PARTITIONS} partitions of {csize / 1e6 / PARTITIONS:.0f} MB, "
            f"10% live keys{_kernel_note()}", f"{many:.2f} s ({csize / many / 1e6:.0f} MB/s)",
            f"the same with 1 worker: {one:.2f} s ({csize / one / 1e6:.0f} MB/s)", one / many, "throughput",
            TARGET_COMPACT))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
