"""Source log dirs for the restore tests from a generator that knows the answer: every record's
offset (first offsets above 0, gaps within and between batches, as compaction and retention leave
them), key and value (null keys and values), headers, timestamp and timestamp type (CreateTime,
LogAppendTime batches), and transactions that commit or abort, so which records a ``read_committed``
reader must see (:attr:`RestoreSource.expected`)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pyarrow as pa

from storage_core.files import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, filename_prefix
from storage_core.log.config import LogConfig
from storage_core.log.log import Log
from storage_core.log.manager import LogManager
from storage_core.record.columnar import HEADER_TYPE
from storage_core.record.compression import CompressionType
from storage_core.record.control import ControlRecordType, EndTransactionMarker
from storage_core.record.records import Header, Record, TimestampType, build_batch, build_end_txn_marker

T0 = 1_600_000_000_000  # long ago: a restore does not check CreateTime against message.timestamp.*.max.ms
CODECS = (CompressionType.NONE, CompressionType.GZIP, CompressionType.LZ4, CompressionType.ZSTD,
          CompressionType.SNAPPY)

#: one restored record as read_arrow gives it: (offset, key, value, headers, timestamp ms, timestamp type)
Row = tuple[int, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...], int, int]


class RestoreSource:
    """Topics of ``partitions`` partitions in ``root``; :attr:`expected` holds, per (topic, partition),
    the rows a read_committed reader sees, and :attr:`starts` each partition's first offset (its
    first segment's base, above 0 for some)."""

    def __init__(self, root: Path, seed: int, topics: tuple[str, ...] = ("orders",), partitions: int = 2,
                 batches: int = 30, segment_bytes: int = 3000, start: int | None = None) -> None:
        self.rng = rng = random.Random(seed)
        self.expected: dict[tuple[str, int], list[Row]] = {}
        self.starts: dict[tuple[str, int], int] = {}
        config = LogConfig.from_properties({"segment.bytes": str(segment_bytes), "index.interval.bytes": "300"})
        root.mkdir(parents=True, exist_ok=True)
        for topic in topics:
            for p in range(partitions):
                d = root / f"{topic}-{p}"
                d.mkdir()
                first = rng.choice((0, rng.randint(1, 100_000))) if start is None else start
                for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
                    (d / (filename_prefix(first) + suffix)).touch()
                self.starts[(topic, p)] = first
                rows = self.expected[(topic, p)] = []
                with Log(d, config, writable=True) as log:
                    for _ in range(batches):
                        self._batch(log, topic, p, rows)
        LogManager([root], writable=True).close()  # checkpoints and the clean-shutdown marker

    def _batch(self, log: Log, topic: str, p: int, rows: list[Row]) -> None:
        rng = self.rng
        at = log.log_end_offset + (rng.randint(1, 50) if rng.random() < 0.2 else 0)  # a gap between batches
        recs: list[Record] = []
        for _ in range(rng.randint(1, 20)):
            key = None if rng.random() < 0.2 else b"k%d" % rng.randrange(30)
            value = None if rng.random() < 0.1 else f"{topic}/{p}/{at}/".encode() + rng.randbytes(rng.randint(0, 40))
            headers = () if rng.random() < 0.5 else tuple(
                Header(rng.choice(("trace", "é", "")), None if rng.random() < 0.2 else rng.randbytes(rng.randint(0, 6)))
                for _ in range(rng.randint(1, 3)))
            recs.append(Record(at, T0 + rng.randint(-10**6, 10**6), key, value, headers))
            at += rng.randint(2, 6) if rng.random() < 0.3 else 1  # a gap within the batch (compaction's)
        append_time = T0 + 5 * 10**6 + at if rng.random() < 0.3 else None
        stamp = {} if append_time is None else {"timestamp_type": TimestampType.LOG_APPEND_TIME,
                                                 "log_append_time": append_time}
        txn = rng.random() < 0.3
        pid = 4000 + p
        batch = build_batch(recs, compression=rng.choice(CODECS), is_transactional=txn,
                            producer_id=pid if txn else -1, producer_epoch=0 if txn else -1,
                            base_sequence=-1, **stamp)  # type: ignore[arg-type]
        log.append(batch, assign_offsets=False, now_ms=T0)
        commit = not txn or rng.random() < 0.5
        if txn:
            end = log.log_end_offset
            kind = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
            log.append(build_end_txn_marker(end, T0, 0, pid, 0, EndTransactionMarker(kind, 0)),
                       assign_offsets=False, now_ms=T0)
        if commit:
            for r in recs:
                rows.append((r.offset, r.key, r.value, tuple((h.key, h.value) for h in r.headers),
                             r.timestamp if append_time is None else append_time,
                             int(TimestampType.CREATE_TIME if append_time is None else TimestampType.LOG_APPEND_TIME)))


def export_table(rng: random.Random, topic: str, partitions: int, records: int, first: int, t0: int) -> pa.Table:
    """A ``klog export``'s table made up by the generator (the truth is the table itself): per partition,
    ``records`` records from offset ``first`` with gaps, null keys and values, headers, and runs of
    LogAppendTime records (each run one time, as a broker stamps a batch) between CreateTime ones."""
    cols: dict[str, list[Any]] = {c: [] for c in ("topic", "partition", "offset", "key", "value", "timestamp",
                                                   "timestampType", "headers")}
    for p in range(partitions):
        offset, append_time = first, None
        for _ in range(records):
            if rng.random() < 0.1:  # a run starts or ends
                append_time = None if append_time is not None else t0 + rng.randint(0, 10**6)
            cols["topic"].append(topic)
            cols["partition"].append(p)
            cols["offset"].append(offset)
            cols["key"].append(None if rng.random() < 0.2 else b"k%d" % rng.randrange(50))
            cols["value"].append(None if rng.random() < 0.1 else f"{topic}/{p}/{offset}".encode() + rng.randbytes(8))
            cols["timestamp"].append(append_time if append_time is not None else t0 + rng.randint(-10**6, 10**6))
            cols["timestampType"].append(int(TimestampType.CREATE_TIME if append_time is None
                                             else TimestampType.LOG_APPEND_TIME))
            cols["headers"].append([] if rng.random() < 0.5 else [
                {"key": rng.choice(("trace", "é")), "value": None if rng.random() < 0.2 else rng.randbytes(4)}
                for _ in range(rng.randint(1, 2))])
            offset += 1 if rng.random() < 0.7 else rng.randint(2, 9)
    return pa.table({**cols, "partition": pa.array(cols["partition"], pa.int32()),
                     "timestamp": pa.array(cols["timestamp"], pa.timestamp("ms", tz="UTC")),
                     "timestampType": pa.array(cols["timestampType"], pa.int32()),
                     "headers": pa.array(cols["headers"], HEADER_TYPE)})
