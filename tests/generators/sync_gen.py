"""Log dirs for the sync tests from a generator that knows the answer: it decides every record,
which transactions commit, abort or stay open, and so which records a ``read_committed`` reader
must see (:meth:`SyncWorkload.expected`). Each value names its own record (``topic/partition/n``),
so a duplicate or a loss in a table shows by name."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from storage_core.log.config import LogConfig
from storage_core.log.log import Log
from storage_core.log.manager import LogManager
from storage_core.record.compression import CompressionType
from storage_core.record.control import ControlRecordType, EndTransactionMarker
from storage_core.record.records import Header, Record, TimestampType, build_batch, build_end_txn_marker

T0 = 1_700_000_000_000
CODECS = (CompressionType.NONE, CompressionType.GZIP, CompressionType.LZ4, CompressionType.ZSTD,
          CompressionType.SNAPPY)


@dataclass
class _Partition:
    pid: int
    epoch: int = 0
    seq: int = 0
    n: int = 0  # records made so far (the name's counter)
    #: offset -> (key, value) of records a read_committed reader sees
    visible: dict[int, tuple[bytes | None, bytes | None]] = field(default_factory=dict)
    #: the open transaction's records: offset -> (key, value), not visible until committed
    open_txn: dict[int, tuple[bytes | None, bytes | None]] = field(default_factory=dict)


class SyncWorkload:
    """Topics of ``partitions`` partitions in ``root``, written in rounds (:meth:`write`). With
    ``headers`` some records carry headers (:attr:`headers`); with ``append_time`` some batches are
    LogAppendTime. Both draw from a generator of their own, so the records are the same either way."""

    def __init__(self, root: Path, seed: int, topics: tuple[str, ...] = ("orders",), partitions: int = 2,
                 segment_bytes: int = 4000, tombstones: float = 0.0, *, headers: bool = False,
                 append_time: bool = False) -> None:
        self.root = root
        self.tombstones = tombstones  # the share of keyed records that are tombstones (a null value)
        self.seed = seed
        self.rng = random.Random(seed)
        self.extra_rng = random.Random(seed + 1) if headers or append_time else None
        self.with_headers = headers
        self.append_time = append_time
        #: (topic, partition) -> offset -> the headers of each record written (``(key, value)`` pairs)
        self.headers: dict[tuple[str, int], dict[int, tuple[tuple[str, bytes | None], ...]]] = {}
        self.config = LogConfig.from_properties({"segment.bytes": str(segment_bytes), "index.interval.bytes": "400"})
        self.parts = {(t, p): _Partition(pid=1000 + i) for i, (t, p) in
                      enumerate((t, p) for t in topics for p in range(partitions))}
        root.mkdir(parents=True, exist_ok=True)

    def write(self, batches: int, *, leave_open: bool = True) -> None:
        """``batches`` random batches per partition: plain, or transactional (committed, aborted, or
        with ``leave_open`` sometimes left open at the end of the round)."""
        rng = self.rng
        for (topic, p), st in self.parts.items():
            d = self.root / f"{topic}-{p}"
            d.mkdir(exist_ok=True)
            with Log(d, self.config, writable=True) as log:
                for i in range(batches):
                    n = rng.randint(1, 25)
                    offset = log.log_end_offset
                    recs, kv = [], {}
                    for j in range(n):
                        key = None if rng.random() < 0.1 else b"k%d" % rng.randrange(40)
                        value: bytes | None = f"{topic}/{p}/{st.n}/".encode() + \
                            rng.randbytes(rng.randint(0, 60)).hex().encode()
                        if key is not None and rng.random() < self.tombstones:
                            value = None
                        st.n += 1
                        hdrs = self._headers()
                        self.headers.setdefault((topic, p), {})[offset + j] = hdrs
                        recs.append(Record(offset + j, T0 + offset + j, key, value, tuple(Header(*h) for h in hdrs)))
                        kv[offset + j] = (key, value)
                    codec = rng.choice(CODECS)
                    stamp: dict[str, Any] = {}
                    if self.extra_rng is not None and self.append_time and self.extra_rng.random() < 0.3:
                        stamp = {"timestamp_type": TimestampType.LOG_APPEND_TIME, "log_append_time": T0 + 10**6 + offset}
                    if st.open_txn or rng.random() < 0.35:
                        log.append(build_batch(recs, compression=codec, producer_id=st.pid, producer_epoch=st.epoch,
                                               base_sequence=st.seq, is_transactional=True, **stamp),
                                   now_ms=T0 + offset)
                        st.seq += n
                        st.open_txn.update(kv)
                        last = i == batches - 1
                        if not (last and leave_open and rng.random() < 0.5) and rng.random() < 0.6 or \
                                (last and not leave_open):
                            self._end(log, st, commit=rng.random() < 0.6)
                    else:
                        log.append(build_batch(recs, compression=codec, **stamp), now_ms=T0 + offset)
                        st.visible.update(kv)
        LogManager([self.root], writable=True).close()  # checkpoints and the clean-shutdown marker

    def _headers(self) -> tuple[tuple[str, bytes | None], ...]:
        """Up to three headers for a record (none without ``headers``): repeated and non-ASCII keys,
        empty and null values."""
        r = self.extra_rng
        if r is None or not self.with_headers or r.random() < 0.4:
            return ()
        return tuple((r.choice(("trace", "h", "é", "键", "")), None if r.random() < 0.2 else r.randbytes(r.randint(0, 8)))
                     for _ in range(r.randint(1, 3)))

    def _end(self, log: Log, st: _Partition, *, commit: bool) -> None:
        kind = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
        at = log.log_end_offset
        log.append(build_end_txn_marker(at, T0 + at, 0, st.pid, st.epoch, EndTransactionMarker(kind, 0)),
                   now_ms=T0 + at)
        if commit:
            st.visible.update(st.open_txn)
        st.open_txn = {}

    def expected(self) -> dict[tuple[str, int], dict[int, tuple[bytes | None, bytes | None]]]:
        """Per partition, what a read_committed reader sees now: offset -> (key, value). An open
        transaction's records, and everything after its first offset, are not there yet."""
        out = {}
        for tp, st in self.parts.items():
            lso = min(st.open_txn) if st.open_txn else None
            out[tp] = {o: kv for o, kv in st.visible.items() if lso is None or o < lso}
        return out

    def latest(self, upto: dict[str, dict[int, int]]) -> dict[tuple[str, int, bytes], tuple[int, bytes]]:
        """What an upserted table holds below the offsets ``upto``: per partition, each key's last
        visible record (offset, value), unless that is a tombstone; records with no key are not there."""
        out: dict[tuple[str, int, bytes], tuple[int, bytes]] = {}
        for (t, p), recs in self.expected().items():
            last: dict[bytes, tuple[int, bytes | None]] = {}
            for o in sorted(recs):
                key, value = recs[o]
                if o < upto.get(t, {}).get(p, 0) and key is not None:
                    last[key] = (o, value)
            out.update({(t, p, k): (o, v) for k, (o, v) in last.items() if v is not None})
        return out
