"""Scale benchmark: what a query costs as a log dir grows from 1 to 10,000 partitions.

For each size it writes a log dir of that many partitions of 10 records each (one partition is
written with storage_core's log manager, the others are copies of its dir; both checkpoints list
every partition, as a broker's do) and times, in this process:

* ``describe`` (:func:`storage_core.describe`) of the whole dir;
* ``plan`` (:func:`storage_core.plan`): selection, evidence, opens, ranges and pieces;
* ``read_arrow`` of every record;
* an **idle streaming trigger**: :meth:`KlogStreamReader.latestOffset` from the end (no new data)
  and :meth:`~KlogStreamReader.partitions` of the empty range it returns (no Spark needed).

It prints a table of the times and, for each size after the first, the ratio
``time(10n) / (10 × time(n))``: 1 when the cost grows linearly with the partitions, 10 when it
grows as n². The peer of each ratio is the same step run at a tenth of the size, in the same run.

Run: ``python -m benchmarks.scale [--sizes 1,100,1000,10000] [--repeat 3]`` (about three minutes).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from benchmarks import _summary

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


def _time(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.scale", description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1,100,1000,10000", help="partition counts, comma-separated")
    ap.add_argument("--repeat", type=int, default=3, help="runs per step (median reported)")
    ap.add_argument("--steps", default="describe,plan,read_arrow,idle trigger",
                    help="what to time, comma-separated (idle trigger needs pyspark, not Spark)")
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]

    import storage_core as klog

    steps: dict[str, Callable[[Path], Callable[[], object]]] = {
        "describe": lambda d: lambda: klog.describe(d),
        "plan": lambda d: lambda: klog.plan(d),
        "read_arrow": lambda d: lambda: klog.read_arrow(d).read_all(),
    }
    steps["idle trigger"] = idle_trigger
    wanted = [w.strip() for w in args.steps.split(",")]
    unknown = [w for w in wanted if w not in steps]
    if unknown:
        ap.error(f"unknown step(s) {', '.join(unknown)}; steps: {', '.join(steps)}")
    steps = {name: make for name, make in steps.items() if name in wanted}
    results: dict[str, dict[int, float]] = {name: {} for name in steps}
    with tempfile.TemporaryDirectory(prefix="klog-bench-scale-") as tmp:
        for n in sizes:
            t0 = time.perf_counter()
            d = write_dir(Path(tmp), n)
            print(f"wrote {n} partitions in {time.perf_counter() - t0:.1f} s", flush=True)
            os.utime(d, ns=(time.time_ns() - 10**9, time.time_ns() - 10**9))  # as a dir not written this second
            for name, make in steps.items():
                fn = make(d)
                fn()  # warm: imports, the page cache
                results[name][n] = _time(fn, args.repeat)
                print(f"  {name:>13} at {n:>6} partitions: {results[name][n]:.3f} s", flush=True)
            shutil.rmtree(d)
    print()
    print(f"| partitions | {' | '.join(steps)} |")
    print(f"|---|{'---|' * len(steps)}")
    for n in sizes:
        print(f"| {n:,} | {' | '.join(f'{results[s][n]:.3f} s' for s in steps)} |")
    print()
    for a, b in zip(sizes, sizes[1:], strict=False):
        for name in steps:
            ta, tb = results[name][a], results[name][b]
            ratio = tb / ((b / a) * ta) if ta > 0 else float("inf")
            print(f"ratio {name} {b}/{a} time(n)/(n/m * time(m)): {ratio:.2f}")
            if a >= 1000:
                _summary.add(_summary.Row(
                    what=f"scale: {name}, {a:,} → {b:,} partitions", klog=f"{tb:.2f} s at {b:,}",
                    peer=f"{b // a} × {ta:.2f} s at {a:,}", ratio=ratio, ratio_means="time", target=1.5,
                    ratio_label=f"{ratio:.2f} = time(10n)/(10·time(n))"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
