"""Cluster benchmark: what reading a whole cluster's log dirs costs against reading one broker's.

A copy of a cluster is three brokers' log dirs holding the same partitions (replication factor 3):
each broker's ``meta.properties`` names the one ``cluster.id`` and its own ``node.id``, each replica
has its ``leader-epoch-checkpoint`` and each dir its ``replication-offset-checkpoint``, as a broker
leaves them. klog reads each partition once, from the replica its rules choose, up to the high
watermark (:mod:`storage_core.log.replicas`), so the other replicas cost their small files and the
tail of their last segment, never a record decoded. Two rows, each against the same step on one
broker's dir in the same run (the peer):

* **describe** of a copy of ``--partitions`` partitions (default 3,000) of 10 records each:
  ``storage_core.describe`` of the three dirs against one dir's (target ≤ 3.3× the time);
* **read**: ``read_arrow`` of every record of ``--read-partitions`` partitions of ``--records``
  records each (100-byte values, lz4) from the three dirs against one dir's (target ≤ 1.1× the time).

The replicas are copies of one broker's dir with the metadata files a broker writes; no KRaft
metadata is written (each partition's ISR is then unknown: the replica with the latest leader
epoch and the longest log is read, bounded by the checkpointed high watermarks), which costs the
same file reads as a dir with it. Each step is timed ``--repeat`` times (median).

Run: ``python -m benchmarks.cluster [--partitions 3000] [--read-partitions 4] [--records 250000] [--repeat 3]``.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from benchmarks import _summary

CLUSTER_ID = "k1ogBenchClusterAAAAAA"
BROKERS = (1, 2, 3)


def _as_brokers(one: Path, root: Path) -> list[Path]:
    """Three brokers' copies of the log dir ``one`` (the ``meta.properties``, leader-epoch and
    high-watermark checkpoints a broker leaves)."""
    from storage_core.files import REPLICATION_OFFSET_CHECKPOINT
    from storage_core.log.checkpoint import EpochEntry, LeaderEpochCheckpointFile, MetaProperties, OffsetCheckpointFile
    from storage_core.log.manager import find_partitions, open_log_read_only

    ends = {}
    for pd in find_partitions([one]):
        LeaderEpochCheckpointFile.in_dir(pd.path).write([EpochEntry(0, 0)], sync=False)
        with open_log_read_only(pd) as lg:
            ends[pd.topic_partition] = lg.log_end_offset
    OffsetCheckpointFile(one / REPLICATION_OFFSET_CHECKPOINT).write(ends, sync=False)
    out = []
    for b in BROKERS:
        d = root / f"b{b}"
        shutil.copytree(one, d)
        MetaProperties.in_dir(d).write({"version": "1", "cluster.id": CLUSTER_ID, "node.id": str(b)}, sync=False)
        out.append(d)
    return out


def _write_records(root: Path, partitions: int, records: int) -> Path:
    from storage_core.log.manager import LogManager
    from storage_core.log.topic_partition import TopicPartition
    from storage_core.record.compression import CompressionType
    from storage_core.record.records import Record, build_batch

    d = root / "one-read"
    d.mkdir()
    value = b"v" * 100
    with LogManager([d], writable=True) as lm:
        for p in range(partitions):
            lg = lm.create_log(TopicPartition("orders", p))
            for first in range(0, records, 1000):
                n = min(1000, records - first)
                lg.append(build_batch([Record(i, 1_700_000_000_000 + first + i, f"k{first + i}".encode(), value)
                                       for i in range(n)], compression=CompressionType.LZ4))
    return d


def _median(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.cluster", description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=3000)
    parser.add_argument("--read-partitions", type=int, default=4)
    parser.add_argument("--records", type=int, default=250_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)

    import storage_core
    from benchmarks.scale import write_dir

    with tempfile.TemporaryDirectory(prefix="klog-bench-cluster-") as tmp:
        root = Path(tmp)
        one = write_dir(root, args.partitions)
        three = _as_brokers(one, root / "cluster")
        joined = ",".join(map(str, three))
        d_one = _median(lambda: storage_core.describe(str(one)), args.repeat)
        d_three = _median(lambda: storage_core.describe(joined), args.repeat)
        assert storage_core.describe(joined).num_rows == args.partitions

        data = _write_records(root, args.read_partitions, args.records)
        data3 = _as_brokers(data, root / "cluster-read")
        joined3 = ",".join(map(str, data3))

        def read(path: str) -> int:
            return sum(b.num_rows for b in storage_core.read_arrow(path, topics="orders"))

        assert read(joined3) == read(str(data)) == args.read_partitions * args.records
        r_one = _median(lambda: read(str(data)), args.repeat)
        r_three = _median(lambda: read(joined3), args.repeat)

    print(f"describe, {args.partitions:,} partitions: one broker's dir {d_one:.3f} s, three brokers' {d_three:.3f} s "
          f"-> {d_three / d_one:.2f}x (target <= 3.3x)")
    print(f"read_arrow, {args.read_partitions} x {args.records:,} records: one broker's dir {r_one:.3f} s, three "
          f"brokers' {r_three:.3f} s -> {r_three / r_one:.2f}x (target <= 1.1x)")
    _summary.add(_summary.Row(f"describe of a 3-broker copy, {args.partitions:,} partitions", f"{d_three:.3f} s",
                              f"one broker's dir: {d_one:.3f} s", d_three / d_one, "time", 3.3))
    _summary.add(_summary.Row(f"read_arrow of 3 replicas, {args.read_partitions * args.records:,} records",
                              f"{r_three:.3f} s", f"one replica's dir: {r_one:.3f} s", r_three / r_one, "time", 1.1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
