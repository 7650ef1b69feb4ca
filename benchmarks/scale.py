"""Scale benchmark: what a query costs as a log dir grows to 10,000 partitions, and a partition to
100,000 segments.

**Partitions.** For each size it writes a log dir of that many partitions of 10 records each (one
partition is written with storage_core's log manager, the others are copies of its dir; both
checkpoints list every partition, as a broker's do) and times, in this process:

* ``describe`` (:func:`storage_core.describe`) of the whole dir;
* ``plan`` (:func:`storage_core.plan`): selection, evidence, opens, ranges and pieces;
* ``read_arrow`` of every record;
* an **idle streaming trigger**: :meth:`KlogStreamReader.latestOffset` from the end (no new data)
  and :meth:`~KlogStreamReader.partitions` of the empty range it returns (no Spark needed);
* ``klog verify`` and ``klog compact --roll`` (the CLI's own entry point, in this process; compact
  on a fresh copy each run, not timed);
* with ``--spark``: ``spark.read.format("klog").load(dir).count()`` in a ``local[2]`` session.

**Segments.** With ``--segments`` (e.g. ``10000,100000``), one partition of that many closed
segments of 10 records each (each ``.log``, an empty ``.index`` as Kafka leaves a segment under
``index.interval.bytes``, and the ``.timeindex`` entry a roll writes): ``describe``, ``plan``,
``read_arrow`` of everything, a **tail read** of the last 100 records, an idle trigger, ``klog verify``,
``klog compact --roll`` and (``--spark``) Spark ``count()``.

Each step reports its median time and the process's peak resident memory during it (Linux's
``VmHWM``, reset before the step). For each size after the first it prints the ratio
``time(10n) / (10 × time(n))``: 1 when the cost grows linearly, 10 when it grows as n². The
peer of each ratio is the same step run at a tenth of the size, in the same run.

Run: ``python -m benchmarks.scale [--sizes 1,100,1000,10000] [--segments 10000,100000] [--spark]
[--repeat 3]`` (about ten minutes with every option).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from benchmarks import _summary
from benchmarks._memory import peak_rss_bytes, reset_peak_rss

TOPIC = "t"
RECORDS = 10


def write_dir(root: Path, partitions: int) -> Path:
    """A log dir of ``partitions`` partitions of :data:`RECORDS` records each, closed cleanly."""
    from storage_core.files import CLEAN_SHUTDOWN_FILE, LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_OFFSET_CHECKPOINT
    from storage_core.log.checkpoint import OffsetCheckpointFile
    from storage_core.log.manager import LogManager
    from storage_core.log.topic_partition import TopicPartition
    from storage_core.record.records import Record, build_batch

    d = root / f"n{partitions}"
    d.mkdir()
    first = TopicPartition(TOPIC, 0)
    with LogManager([d], writable=True) as lm:
        lg = lm.create_log(first)
        lg.append(build_batch([Record(i, 1_700_000_000_000 + i, f"k{i}".encode(), f"value {i}".encode())
                               for i in range(RECORDS)]))
    src = d / first.dir_name
    for p in range(1, partitions):
        shutil.copytree(src, d / TopicPartition(TOPIC, p).dir_name)
    everything = {TopicPartition(TOPIC, p): RECORDS for p in range(partitions)}
    OffsetCheckpointFile(d / RECOVERY_POINT_OFFSET_CHECKPOINT).write(everything, sync=False)
    OffsetCheckpointFile(d / LOG_START_OFFSET_CHECKPOINT).write({}, sync=False)
    assert (d / CLEAN_SHUTDOWN_FILE).exists()
    return d


def write_segments_dir(root: Path, segments: int) -> Path:
    """A log dir of one partition of ``segments`` closed segments of :data:`RECORDS` records each,
    shut down cleanly (checkpoints and the clean-shutdown marker)."""
    import struct

    from storage_core.files import (
        INDEX_SUFFIX,
        LOG_START_OFFSET_CHECKPOINT,
        LOG_SUFFIX,
        RECOVERY_POINT_OFFSET_CHECKPOINT,
        TIME_INDEX_SUFFIX,
        segment_file,
    )
    from storage_core.log.checkpoint import CleanShutdownFile, OffsetCheckpointFile
    from storage_core.log.topic_partition import TopicPartition
    from storage_core.record.records import Record, build_batch

    d = root / f"s{segments}"
    tp = TopicPartition(TOPIC, 0)
    part = d / tp.dir_name
    part.mkdir(parents=True)
    t0 = 1_700_000_000_000
    for i in range(segments):
        base = i * RECORDS
        batch = build_batch([Record(base + j, t0 + base + j, f"k{base + j}".encode(), f"value {base + j}".encode())
                             for j in range(RECORDS)], base_offset=base)
        segment_file(part, base, LOG_SUFFIX).write_bytes(batch)
        segment_file(part, base, INDEX_SUFFIX).write_bytes(b"")
        segment_file(part, base, TIME_INDEX_SUFFIX).write_bytes(struct.pack(">qi", t0 + base + RECORDS - 1,
                                                                            RECORDS - 1))
    OffsetCheckpointFile(d / RECOVERY_POINT_OFFSET_CHECKPOINT).write({tp: segments * RECORDS}, sync=False)
    OffsetCheckpointFile(d / LOG_START_OFFSET_CHECKPOINT).write({}, sync=False)
    CleanShutdownFile.in_dir(d).write(None, sync=False)
    return d


def idle_trigger(d: Path, starting: str = "latest") -> Callable[[], object]:
    """One trigger of a stream of ``d`` that starts at ``starting`` (the end: no new data):
    latestOffset and partitions()."""
    from spark_logsource.options import parse_stream_options
    from spark_logsource.streaming import KlogStreamReader

    reader = KlogStreamReader(parse_stream_options({"path": str(d), "startingOffsets": starting}))
    start = reader.initialOffset()

    def trigger() -> object:
        from pyspark.sql.streaming.datasource import ReadAllAvailable

        end = reader.latestOffset(start, ReadAllAvailable())
        return reader.partitions(start, end)

    return trigger


def _time(fn: Callable[[], object], repeat: int, fresh: Callable[[], object] | None = None) -> tuple[float, int]:
    """The median time of ``repeat`` runs and the peak resident memory of the process during them;
    ``fresh`` runs untimed before each run (a new copy for a step that writes)."""
    times = []
    reset_peak_rss()
    for _ in range(repeat):
        if fresh is not None:
            fresh()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), peak_rss_bytes()


def _cli(*argv: str) -> Callable[[], object]:
    from storage_core.tools.cli import main as klog_main

    def run() -> object:
        with contextlib.redirect_stdout(io.StringIO()):  # compact's table: a line per partition
            code = klog_main([*argv, "--quiet"])
        if code != 0:
            raise SystemExit(f"klog {' '.join(argv)} exited {code}")
        return code
    return run


def _spark_count(d: Path) -> Callable[[], object]:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").appName("klog-bench-scale")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return lambda: spark.read.format("klog").load(str(d)).count()


def _compact(d: Path) -> tuple[Callable[[], object], Callable[[], object]]:
    """``klog compact --roll`` of a copy of ``d``, and the untimed step that makes the copy."""
    copy = d.with_name(d.name + "-compact")

    def fresh() -> None:
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(d, copy)
    return _cli("compact", str(copy), "--topic", TOPIC, "--roll"), fresh


def _run_series(title: str, unit: str, sizes: list[int], write: Callable[[Path, int], Path],
                steps: dict[str, Callable[[Path], Callable[[], object]]], repeat: int) -> None:
    results: dict[str, dict[int, tuple[float, int]]] = {name: {} for name in steps}
    with tempfile.TemporaryDirectory(prefix="klog-bench-scale-") as tmp:
        for n in sizes:
            t0 = time.perf_counter()
            d = write(Path(tmp), n)
            print(f"wrote {n:,} {unit} in {time.perf_counter() - t0:.1f} s", flush=True)
            os.utime(d, ns=(time.time_ns() - 10**9, time.time_ns() - 10**9))  # as a dir not written this second
            for name, make in steps.items():
                fresh = None
                if name == "klog compact":
                    fn, fresh = _compact(d)
                else:
                    fn = make(d)
                if fresh is not None:
                    fresh()
                fn()  # warm: imports, the page cache
                results[name][n] = _time(fn, repeat, fresh)
                secs, rss = results[name][n]
                print(f"  {name:>16} at {n:>7,} {unit}: {secs:.3f} s, peak RSS {rss >> 20} MiB", flush=True)
            shutil.rmtree(Path(tmp), ignore_errors=True)
            Path(tmp).mkdir(exist_ok=True)
    print()
    print(f"{title}: time (peak RSS)")
    print()
    print(f"| {unit} | {' | '.join(steps)} |")
    print(f"|---|{'---|' * len(steps)}")
    for n in sizes:
        cells = [f"{results[s][n][0]:.3f} s ({results[s][n][1] >> 20} MiB)" for s in steps]
        print(f"| {n:,} | {' | '.join(cells)} |")
    print()
    for a, b in zip(sizes, sizes[1:], strict=False):
        for name in steps:
            ta, tb = results[name][a][0], results[name][b][0]
            ratio = tb / ((b / a) * ta) if ta > 0 else float("inf")
            print(f"ratio {name} {b:,}/{a:,} {unit} time(n)/(n/m * time(m)): {ratio:.2f}")
            if a >= 1000:
                _summary.add(_summary.Row(
                    what=f"scale: {name}, {a:,} → {b:,} {unit}", klog=f"{tb:.2f} s at {b:,}",
                    peer=f"{b // a} × {ta:.2f} s at {a:,}", ratio=ratio, ratio_means="time", target=1.5,
                    ratio_label=f"{ratio:.2f} = time(10n)/(10·time(n))"))
    print()


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.scale", description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1,100,1000,10000", help="partition counts, comma-separated ('' for none)")
    ap.add_argument("--segments", default="", help="segment counts of one partition, comma-separated "
                    "(e.g. 10000,100000)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per step (median reported)")
    ap.add_argument("--steps", default="describe,plan,read_arrow,idle trigger,klog verify,klog compact",
                    help="what to time over partitions, comma-separated (idle trigger needs pyspark, not Spark)")
    ap.add_argument("--spark", action="store_true", help="also time Spark count() (a local[2] session)")
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    segments = [int(s) for s in args.segments.split(",") if s.strip()]

    import storage_core as klog

    steps: dict[str, Callable[[Path], Callable[[], object]]] = {
        "describe": lambda d: lambda: klog.describe(d),
        "plan": lambda d: lambda: klog.plan(d),
        "read_arrow": lambda d: lambda: klog.read_arrow(d).read_all(),
        "idle trigger": idle_trigger,
        "klog verify": lambda d: _cli("verify", str(d)),
        "klog compact": lambda d: _cli("compact", str(d)),  # replaced by _compact (a fresh copy each run)
    }
    wanted = [w.strip() for w in args.steps.split(",")]
    unknown = [w for w in wanted if w not in steps]
    if unknown:
        ap.error(f"unknown step(s) {', '.join(unknown)}; steps: {', '.join(steps)}")
    steps = {name: make for name, make in steps.items() if name in wanted}
    if args.spark:
        steps["Spark count()"] = _spark_count
    if sizes:
        _run_series("Partitions of 10 records", "partitions", sizes, write_dir, steps, args.repeat)
    if segments:
        seg_steps: dict[str, Callable[[Path], Callable[[], object]]] = {
            "describe": lambda d: lambda: klog.describe(d),
            "plan": lambda d: lambda: klog.plan(d),
            "read_arrow": lambda d: lambda: klog.read_arrow(d).read_all(),
            "tail 100 records": lambda d: lambda: klog.read_arrow(
                d, startingOffsets={TOPIC: {"0": int(d.name[1:]) * RECORDS - 100}}).read_all(),
            "idle trigger": idle_trigger,
            "klog verify": lambda d: _cli("verify", str(d)),
            "klog compact": lambda d: _cli("compact", str(d)),  # replaced by _compact (a fresh copy each run)
        }
        seg_steps = {name: make for name, make in seg_steps.items() if name in wanted or name == "tail 100 records"}
        if args.spark:
            seg_steps["Spark count()"] = _spark_count
        _run_series("One partition of segments of 10 records", "segments", segments, write_segments_dir,
                    seg_steps, args.repeat)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
