"""A producer process for streaming tests and benchmarks: appends keyed records to a topic with
storage_core's writer (holding the log dir's lock, as a broker-less producer job would).

    python -m benchmarks.producer LOG_DIR TOPIC --partitions 3 --records 3000 --rate 1000

Record ``i`` goes to partition ``i % partitions`` with key ``k<i>`` and value ``v<i>``; its
timestamp is the wall clock at append (the streaming benchmark measures latency from it).
Each append is flushed, so a reader sees whole batches as soon as they are written.
"""

from __future__ import annotations

import argparse
import sys
import time

from storage_core.log.manager import LogManager
from storage_core.log.topic_partition import TopicPartition
from storage_core.record.records import Record, build_batch


def produce(log_dir: str, topic: str, *, partitions: int, records: int, rate: float, per_append: int,
            start: int = 0) -> int:
    """Append ``records`` records (numbered from ``start``) at about ``rate`` records/s."""
    with LogManager([log_dir], writable=True) as mgr:
        logs = [mgr.create_log(TopicPartition(topic, p)) for p in range(partitions)]
        t0 = time.monotonic()
        i = start
        while i < start + records:
            n = min(per_append, start + records - i)
            now = int(time.time() * 1000)
            by_part: dict[int, list[Record]] = {}
            for j in range(i, i + n):
                by_part.setdefault(j % partitions, []).append(Record(0, now, b"k%d" % j, b"v%d" % j))
            for p, recs in sorted(by_part.items()):
                recs = [Record(k, r.timestamp, r.key, r.value) for k, r in enumerate(recs)]
                logs[p].append(build_batch(recs))
                logs[p].flush()
            i += n
            if rate > 0:
                ahead = (i - start) / rate - (time.monotonic() - t0)
                if ahead > 0:
                    time.sleep(ahead)
    return i


def cli(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.producer", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("log_dir")
    ap.add_argument("topic")
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--records", type=int, default=1000)
    ap.add_argument("--rate", type=float, default=1000.0, help="records per second (0: as fast as possible)")
    ap.add_argument("--per-append", type=int, default=30, help="records per append (spread over the partitions)")
    ap.add_argument("--start", type=int, default=0, help="number of the first record")
    a = ap.parse_args(argv)
    produce(a.log_dir, a.topic, partitions=a.partitions, records=a.records, rate=a.rate, per_append=a.per_append,
            start=a.start)
    return 0


if __name__ == "__main__":
    sys.exit(cli())
