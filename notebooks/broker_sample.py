"""A stand-in for a copy of a broker's ``log.dirs``, for ``broker_audit.ipynb`` when no copy is given.

Written with klog's log layer the way a broker lays out its dirs (a broker writes transactions,
which klog's Spark writer does not): two log dirs with the partitions spread over them, producer
``.snapshot`` files, ``.txnindex`` files, the recovery-point and log-start-offset checkpoints and
the clean-shutdown marker. Everything is deterministic (fixed timestamps, a seeded generator), so
the notebook's stored outputs do not change from run to run.

* ``orders``: 3 partitions, lz4, keyed by customer, partition 2 the busiest;
* ``clicks``: 4 partitions, zstd, small segments, a burst from 08:30 to 08:36, and retention
  (``retention.ms``) that deleted the oldest segments: its log start offsets are above 0;
* ``payments``: 2 partitions, gzip, written by transactional producers: most transactions
  committed, some aborted, and one still open on partition 1 when the copy was taken.

Only :func:`write_broker_copy`'s own ``root`` is written; a ``root`` that exists and was not made
here is refused.
"""

from __future__ import annotations

import json
import random
import shutil
import struct
from pathlib import Path

from storage_core.log.config import LogConfig
from storage_core.log.manager import LogManager
from storage_core.log.topic_partition import TopicPartition
from storage_core.record.compression import CompressionType
from storage_core.record.control import ControlRecordType, EndTransactionMarker
from storage_core.record.records import Record, build_batch, build_end_txn_marker

#: 2026-11-22T08:00:00Z: the copy holds the hour after it.
T0_MS = 1_795_334_400_000
HOUR_MS = 3_600_000
MARKER = ".klog-notebook-sample"


def _append(log, records: list[Record], codec: CompressionType, **producer: int | bool) -> None:  # type: ignore[no-untyped-def]
    base = log.log_end_offset
    recs = [Record(base + i, r.timestamp, r.key, r.value) for i, r in enumerate(records)]
    log.append(build_batch(recs, compression=codec, **producer), now_ms=recs[-1].timestamp)


def _orders_config() -> LogConfig:
    return LogConfig.from_properties({"compression.type": "lz4", "segment.bytes": "262144"})


def _orders(lm: LogManager, rng: random.Random, start_ms: int = T0_MS, seconds: int = HOUR_MS // 1000) -> int:
    logs = [lm.create_log(TopicPartition("orders", p), _orders_config()) for p in range(3)]
    written = 0
    for second in range(0, seconds, 2):  # a batch every 2 s per partition
        t = start_ms + second * 1000
        for p, log in enumerate(logs):
            n = rng.randint(1, 3) + (2 if p == 2 else 0)
            recs = []
            for i in range(n):
                customer = rng.randrange(40) * 3 + p
                body = {"order": f"o-{second}-{p}-{i}", "customer": f"c-{customer}",
                        "amount": round(rng.uniform(5, 400), 2), "items": rng.randint(1, 6)}
                recs.append(Record(0, t + i * 7, f"c-{customer}".encode(), json.dumps(body).encode()))
            _append(log, recs, CompressionType.LZ4)
            written += n
    return written


def _clicks(lm: LogManager, rng: random.Random) -> None:
    cfg = LogConfig.from_properties({"compression.type": "zstd", "segment.bytes": "32768",
                                     "retention.ms": str(52 * 60_000), "file.delete.delay.ms": "0"})
    logs = [lm.create_log(TopicPartition("clicks", p), cfg) for p in range(4)]
    pages = ["/", "/search", "/product", "/cart", "/checkout", "/help"]
    for second in range(HOUR_MS // 1000):
        t = T0_MS + second * 1000
        burst = 30 * 60 <= second < 36 * 60
        for log in logs:
            n = rng.randint(0, 2) + (rng.randint(4, 8) if burst else 0)
            if n == 0:
                continue
            recs = [Record(0, t + i * 3, None, json.dumps({"page": rng.choice(pages), "session": rng.randrange(10_000),
                                                           "ms": rng.randint(20, 900)}).encode())
                    for i in range(n)]
            _append(log, recs, CompressionType.ZSTD)
    for log in logs:  # as the broker's retention would have done an hour in: segments older than 52 minutes go
        log.delete_old_segments(now_ms=T0_MS + HOUR_MS)


def _payments(lm: LogManager, rng: random.Random) -> None:
    cfg = LogConfig.from_properties({"compression.type": "gzip"})
    for p in range(2):
        log = lm.create_log(TopicPartition("payments", p), cfg)
        pid = 1000 + p
        epoch = 0
        seq = 0
        t = T0_MS
        txn = 0
        while t < T0_MS + HOUR_MS - 60_000:
            txn += 1
            n = rng.randint(2, 6)
            recs = [Record(0, t + i * 50, f"account-{rng.randrange(25)}".encode(),
                           json.dumps({"payment": f"p{p}-{txn}-{i}", "cents": rng.randint(100, 90_000)}).encode())
                    for i in range(n)]
            _append(log, recs, CompressionType.GZIP, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                     is_transactional=True)
            seq += n
            kind = ControlRecordType.ABORT if txn % 9 == 0 else ControlRecordType.COMMIT
            marker = EndTransactionMarker(kind, 0)
            log.append(build_end_txn_marker(0, t + 400, 0, pid, epoch, marker), now_ms=t + 400)
            t += rng.randint(8_000, 16_000)
        if p == 1:  # the producer was mid-transaction when the copy was taken: records after it are not stable
            recs = [Record(0, T0_MS + HOUR_MS - 30_000 + i * 50, b"account-7", json.dumps({"payment": f"open-{i}",
                                                                                           "cents": 500}).encode())
                    for i in range(4)]
            _append(log, recs, CompressionType.GZIP, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                     is_transactional=True)
        for second in range(0, 60, 5):  # and a plain (non-transactional) producer after the open transaction
            ts = T0_MS + HOUR_MS - 60_000 + second * 1000
            _append(log, [Record(0, ts, b"refunds", json.dumps({"refund": second, "cents": 250}).encode())],
                    CompressionType.GZIP)


def _string(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def _consumer_offsets(lm: LogManager, rng: random.Random) -> None:
    """Two consumer groups' commits in ``__consumer_offsets-12``, as a group coordinator writes them:
    key OffsetCommitKey (version 1: group, topic, partition), value OffsetCommitValue version 3
    (offset, leader epoch, metadata, commit timestamp); later commits of a partition win."""
    log = lm.create_log(TopicPartition("__consumer_offsets", 12),
                        LogConfig.from_properties({"cleanup.policy": "compact"}))
    ends = {tp: lg.log_end_offset for tp, lg in lm.logs.items() if not tp.topic.startswith("_")}
    for minute in range(0, 60, 10):
        t = T0_MS + minute * 60_000
        commits = []
        for (group, topic) in (("billing", "payments"), ("dashboards", "orders"), ("dashboards", "clicks")):
            for tp in sorted(x for x in ends if x.topic == topic):
                lag = rng.randint(0, 40) if minute == 50 else rng.randint(0, 400)
                offset = max(0, ends[tp] * (minute + 10) // 60 - lag)
                key = struct.pack(">h", 1) + _string(group) + _string(topic) + struct.pack(">i", tp.partition)
                value = (struct.pack(">hqi", 3, offset, 0) + _string("") + struct.pack(">q", t))
                commits.append(Record(0, t, key, value))
        _append(log, commits, CompressionType.NONE)


def write_broker_copy(root: str | Path) -> list[Path]:
    """Write the sample under ``root`` (replacing an earlier sample there) and return its log dirs."""
    root = Path(root)
    if root.exists():
        if not (root / MARKER).exists():
            raise FileExistsError(f"{root} exists and is not a sample this notebook wrote: not touching it")
        shutil.rmtree(root)
    dirs = [root / "data-1", root / "data-2"]
    for d in dirs:
        d.mkdir(parents=True)
    rng = random.Random(2026)
    with LogManager(dirs, writable=True) as lm:
        _orders(lm, rng)
        _clicks(lm, rng)
        _payments(lm, rng)
        _consumer_offsets(lm, rng)
    (root / MARKER).write_text("written by notebooks/broker_sample.py; deleted by its next run\n")
    return dirs


def append_orders(log_dirs: list[str | Path], minutes: int = 10, *, seed: int = 2027) -> int:
    """Append ``minutes`` more of ``orders`` to a sample :func:`write_broker_copy` wrote, as the
    broker would have gone on writing them (from 09:00 UTC, the copy's end, on: a second call writes
    the same minutes again, at later offsets); the number of records appended. Only a sample's dirs
    are written: dirs not under a sample's marker are refused."""
    dirs = [Path(d) for d in log_dirs]
    for d in dirs:
        if not (d.parent / MARKER).exists():
            raise FileExistsError(f"{d} is not a log dir of a sample this notebook wrote: not appending to it")
    with LogManager(dirs, writable=True, topic_configs={"orders": _orders_config()}) as lm:
        return _orders(lm, random.Random(seed), start_ms=T0_MS + HOUR_MS, seconds=minutes * 60)


if __name__ == "__main__":
    import sys

    if len(sys.argv) != 2 or sys.argv[1].startswith("-"):
        sys.exit("usage: python notebooks/broker_sample.py DIR   (writes DIR/data-1 and DIR/data-2)")
    written = write_broker_copy(sys.argv[1])
    print(f"wrote a broker copy's log dirs: {','.join(str(d) for d in written)}")
