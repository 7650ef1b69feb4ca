"""Producer state and transactions of a partition (``ProducerStateManager.java``).

For every producer id the state keeps its epoch, last sequence, last offset and timestamp, and
the first offset of its ongoing transaction. Appending a transactional data batch starts a
transaction (if none is ongoing); an ABORT or COMMIT control batch completes it. The *last
stable offset* (LSO) is the first offset of the oldest ongoing transaction, or the log end offset
when none is ongoing: ``read_committed`` readers never read past it.

Snapshots (``<offset>.snapshot``, :data:`SNAPSHOT_HEADER` + :data:`SNAPSHOT_ENTRY` × count) are
Kafka's ``ProducerSnapshot`` version 1::

    int16  version (1)
    uint32 crc                      CRC-32C of everything after this field
    int32  count
    count × (int64 producerId, int16 epoch, int32 lastSequence, int64 lastOffset,
             int32 offsetDelta, int64 timestamp, int32 coordinatorEpoch,
             int64 currentTxnFirstOffset (-1: none))

A snapshot is named after the offset it describes (the state after every batch below it); the
state at a later offset is the snapshot plus a replay of the batches in between.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass, replace
from pathlib import Path

from storage_core.errors import CorruptIndexError, storage_error
from storage_core.files import SNAPSHOT_SUFFIX, TMP_SUFFIX, base_offset_of, filename_prefix, is_offset_named
from storage_core.fs import as_path
from storage_core.record.control import ControlRecordType
from storage_core.record.file_records import AnyBatch
from storage_core.record.records import NO_PRODUCER_EPOCH, NO_SEQUENCE, NO_TIMESTAMP, crc32c

SNAPSHOT_VERSION = 1
#: version int16, crc uint32, count int32
SNAPSHOT_HEADER = struct.Struct(">hIi")
#: producerId, epoch, lastSequence, lastOffset, offsetDelta, timestamp, coordinatorEpoch, currentTxnFirstOffset
SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")
_CRC_FIELD = struct.Struct(">I")


@dataclass(frozen=True, slots=True)
class ProducerStateEntry:
    producer_id: int
    epoch: int
    last_sequence: int
    last_offset: int  # Kafka's lastDataOffset: last offset of the last *data* batch, -1 if none
    offset_delta: int
    timestamp: int
    coordinator_epoch: int
    current_txn_first_offset: int  # -1: no transaction ongoing


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction ended by a marker at ``last_offset``."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


class ProducerStateManager:
    """The producer state of one partition, updated batch by batch."""

    def __init__(self) -> None:
        self.producers: dict[int, ProducerStateEntry] = {}
        self.map_end_offset = 0  # the state covers every batch below this offset

    def copy(self) -> ProducerStateManager:
        other = ProducerStateManager()
        other.producers = dict(self.producers)
        other.map_end_offset = self.map_end_offset
        return other

    # -- updating
    def update(self, batch: AnyBatch) -> CompletedTxn | None:
        """Take one appended batch into account (``ProducerAppendInfo.append`` then
        ``ProducerStateManager.update``); returns the transaction a marker completed.

        As in Kafka, a data batch becomes the producer's last batch (its epoch replacing the
        entry's); a transaction marker ends the ongoing transaction, sets the coordinator epoch and
        the last timestamp, and when its epoch differs from the entry's (the bump that ends every
        transaction under KIP-890) forgets the last batch: the entry then holds no batch (last
        sequence and last offset -1). An empty control batch (a transaction the cleaner removed
        whole) changes nothing, but makes an entry with no epoch for a producer not seen before."""
        self.map_end_offset = max(self.map_end_offset, batch.next_offset)
        pid = batch.producer_id
        if pid < 0:
            return None
        prev = self.producers.get(pid) or ProducerStateEntry(pid, NO_PRODUCER_EPOCH, NO_SEQUENCE, -1, 0,
                                                             NO_TIMESTAMP, -1, -1)
        epoch = batch.producer_epoch
        if not batch.is_control:
            txn_first = prev.current_txn_first_offset
            if batch.is_transactional and txn_first < 0:
                txn_first = batch.base_offset
            self.producers[pid] = ProducerStateEntry(pid, epoch, batch.last_sequence, batch.last_offset,
                                                     batch.last_offset - batch.base_offset, batch.max_timestamp,
                                                     prev.coordinator_epoch, txn_first)
            return None
        records = batch.records()
        kind = ControlRecordType.parse(records[0].key) if records and batch.is_transactional else None
        if kind not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
            self.producers[pid] = prev
            return None
        marker = records[0]
        completed = None
        if prev.current_txn_first_offset >= 0:
            completed = CompletedTxn(pid, prev.current_txn_first_offset, batch.last_offset,
                                     kind == ControlRecordType.ABORT)
        value = marker.value or b""
        coordinator_epoch = struct.unpack_from(">i", value, 2)[0] if len(value) >= 6 else prev.coordinator_epoch
        if epoch != prev.epoch:  # ProducerStateEntry.maybeUpdateProducerEpoch: the batches of the old epoch go
            last_seq, last_offset, delta = NO_SEQUENCE, -1, 0
        else:  # a marker is not data: the last batch stays the last data batch
            last_seq, last_offset, delta = prev.last_sequence, prev.last_offset, prev.offset_delta
        self.producers[pid] = ProducerStateEntry(pid, epoch, last_seq, last_offset, delta, marker.timestamp,
                                                 coordinator_epoch, -1)
        return completed

    def ongoing_first_offsets(self) -> list[int]:
        return sorted(e.current_txn_first_offset for e in self.producers.values() if e.current_txn_first_offset >= 0)

    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest ongoing transaction, or None."""
        firsts = self.ongoing_first_offsets()
        return firsts[0] if firsts else None

    def last_stable_offset_for(self, completed: CompletedTxn) -> int:
        """The LSO recorded with an aborted transaction (``lastStableOffset(completedTxn)``)."""
        others = [e.current_txn_first_offset for e in self.producers.values()
                  if e.current_txn_first_offset >= 0 and e.producer_id != completed.producer_id]
        return min(others) if others else completed.last_offset + 1

    def truncate_to(self, offset: int) -> None:
        """Forget what happened at or after ``offset`` (approximation: drop producers last seen there)."""
        self.producers = {pid: e for pid, e in self.producers.items() if e.last_offset < offset}
        self.producers = {pid: (e if e.current_txn_first_offset < offset else replace(e, current_txn_first_offset=-1))
                          for pid, e in self.producers.items()}
        self.map_end_offset = min(self.map_end_offset, offset)

    # -- snapshots
    def write_snapshot(self, directory: str | os.PathLike[str], offset: int) -> Path:
        body = bytearray(struct.pack(">i", len(self.producers)))
        for e in sorted(self.producers.values(), key=lambda x: x.producer_id):
            body += SNAPSHOT_ENTRY.pack(e.producer_id, e.epoch, e.last_sequence, e.last_offset, e.offset_delta,
                                        e.timestamp, e.coordinator_epoch, e.current_txn_first_offset)
        data = struct.pack(">h", SNAPSHOT_VERSION) + _CRC_FIELD.pack(crc32c(bytes(body))) + bytes(body)
        path = Path(directory) / (filename_prefix(offset) + SNAPSHOT_SUFFIX)
        tmp = path.with_name(path.name + TMP_SUFFIX)
        try:
            with open(tmp, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except OSError as exc:  # disk full: no new snapshot; the old file, if any, is untouched
            try:
                tmp.unlink(missing_ok=True)
            except OSError:
                pass
            raise storage_error(exc, "writing a producer snapshot", path) from exc
        return path

    @classmethod
    def read_snapshot(cls, path: str | os.PathLike[str]) -> ProducerStateManager:
        p = as_path(path)
        data = p.read_bytes()
        if len(data) < SNAPSHOT_HEADER.size:
            raise CorruptIndexError(f"Producer snapshot {p.name} is {len(data)} bytes; expected at least "
                                    f"{SNAPSHOT_HEADER.size}", path=p)
        version, crc, count = SNAPSHOT_HEADER.unpack_from(data)
        if version != SNAPSHOT_VERSION:
            raise CorruptIndexError(f"Unknown producer snapshot version {version}; expected {SNAPSHOT_VERSION}", path=p)
        computed = crc32c(data[6:])
        if computed != crc:
            raise CorruptIndexError(f"Snapshot is corrupt (CRC is no longer valid). Stored crc: {crc}. "
                                    f"Computed crc: {computed}", path=p)
        if count < 0 or len(data) != SNAPSHOT_HEADER.size + count * SNAPSHOT_ENTRY.size:
            raise CorruptIndexError(f"Producer snapshot {p.name} declares {count} entries but holds "
                                    f"{len(data) - SNAPSHOT_HEADER.size} bytes of entries", path=p)
        state = cls()
        for i in range(count):
            e = ProducerStateEntry(*SNAPSHOT_ENTRY.unpack_from(data, SNAPSHOT_HEADER.size + i * SNAPSHOT_ENTRY.size))
            state.producers[e.producer_id] = e
        state.map_end_offset = base_offset_of(p)
        return state


def snapshot_files(directory: str | os.PathLike[str]) -> list[tuple[int, Path]]:
    """``(offset, path)`` of every ``<offset>.snapshot`` in a partition dir, ascending."""
    out = []
    for p in as_path(directory).glob("*" + SNAPSHOT_SUFFIX):
        if is_offset_named(p.name):
            out.append((base_offset_of(p), p))
    return sorted(out)
