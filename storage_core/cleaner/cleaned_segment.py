"""The segment a cleaning writes (``<base>.log.cleaned`` and its indexes) and the batches it
rebuilds (``buildRetainedRecordsInto``, ``writeEmptyHeader``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from storage_core.errors import KlogError
from storage_core.files import (
    CLEANED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SEGMENT_SUFFIXES,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    filename_prefix,
)
from storage_core.limits import INT32_MAX
from storage_core.log.offset_index import OFFSET_INDEX_ENTRY, OffsetPosition
from storage_core.log.segment import _maybe_append_time
from storage_core.log.time_index import TIME_INDEX_ENTRY, TimestampOffset
from storage_core.log.txn_index import AbortedTxn
from storage_core.record.compression import CompressionType
from storage_core.record.records import (
    NO_TIMESTAMP,
    RECORD_BATCH_OVERHEAD,
    DefaultRecordBatch,
    Record,
    TimestampType,
    batch_attributes,
    batch_of_area,
    build_batch,
    write_batch_header,
)

if TYPE_CHECKING:
    from typing_extensions import Buffer


class CleanedSegment:
    """``<base>.log.cleaned`` and its indexes, written as a cleaning recopies a group."""

    def __init__(self, directory: Path, base_offset: int, index_interval_bytes: int) -> None:
        self.dir = directory
        self.base_offset = base_offset
        self.prefix = filename_prefix(base_offset)
        self.index_interval_bytes = index_interval_bytes
        self.log_path = self.path(LOG_SUFFIX, CLEANED_SUFFIX)
        self._file = open(self.log_path, "wb")  # noqa: SIM115 - closed by finish()/discard()
        self.size = 0
        self.last_offset: int | None = None
        self._bytes_since_index = 0
        self._max_ts = NO_TIMESTAMP
        self._offset_of_max_ts = base_offset
        self.offset_entries: list[OffsetPosition] = []
        self.time_entries: list[TimestampOffset] = []
        self.aborted: list[AbortedTxn] = []

    def path(self, suffix: str, state: str = "") -> Path:
        return self.dir / (self.prefix + suffix + state)

    def append(self, data: bytes | memoryview, last_offset: int, max_timestamp: int) -> None:
        """One batch, indexed with ``LogSegment.append``'s sparse rule."""
        self._index(last_offset, max_timestamp, len(data))
        self._file.write(data)

    def append_many(self, data: Buffer, meta: Buffer) -> None:
        """Batches back to back in ``data``, with an int64 (last offset, max timestamp, size) per
        batch in ``meta`` (the kernel's ``clean_run``), each indexed as :meth:`append` does."""
        m = memoryview(meta).cast("B").cast("q").tolist()
        for j in range(0, len(m), 3):
            self._index(m[j], m[j + 1], m[j + 2])
        self._file.write(data)

    def _index(self, last_offset: int, max_timestamp: int, size: int) -> None:
        if not 0 <= last_offset - self.base_offset <= INT32_MAX:
            raise KlogError(f"offset {last_offset} cannot be stored relative to base offset {self.base_offset} "
                            f"in {self.log_path}")
        if max_timestamp > self._max_ts:
            self._max_ts, self._offset_of_max_ts = max_timestamp, last_offset
        if self._bytes_since_index > self.index_interval_bytes:
            self.offset_entries.append(OffsetPosition(last_offset, self.size))
            _maybe_append_time(self.time_entries, self._max_ts, self._offset_of_max_ts)
            self._bytes_since_index = 0
        self.size += size
        self._bytes_since_index += size
        self.last_offset = last_offset

    def finish(self, mtime: float) -> None:
        """Flush and fsync every file; the log keeps the mtime of the group's last source segment."""
        _maybe_append_time(self.time_entries, self._max_ts, self._offset_of_max_ts)
        self._file.flush()
        os.fsync(self._file.fileno())
        self._file.close()
        files = {
            INDEX_SUFFIX: b"".join(OFFSET_INDEX_ENTRY.pack(e.offset - self.base_offset, e.position)
                                   for e in self.offset_entries),
            TIME_INDEX_SUFFIX: b"".join(TIME_INDEX_ENTRY.pack(e.timestamp, e.offset - self.base_offset)
                                        for e in self.time_entries),
        }
        if self.aborted:
            files[TXN_INDEX_SUFFIX] = b"".join(t.pack() for t in self.aborted)
        for suffix, data in files.items():
            with open(self.path(suffix, CLEANED_SUFFIX), "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
        for suffix in (LOG_SUFFIX, TIME_INDEX_SUFFIX):
            os.utime(self.path(suffix, CLEANED_SUFFIX), (mtime, mtime))

    def discard(self) -> None:
        if not self._file.closed:
            self._file.close()
        for suffix in SEGMENT_SUFFIXES:
            self.path(suffix, CLEANED_SUFFIX).unlink(missing_ok=True)


def empty_header(batch: DefaultRecordBatch) -> bytes:
    """``DefaultRecordBatch.writeEmptyHeader``: count 0, no codec, base timestamp -1, max kept."""
    buf = bytearray(RECORD_BATCH_OVERHEAD)
    write_batch_header(
        buf, base_offset=batch.base_offset, partition_leader_epoch=batch.partition_leader_epoch,
        attributes=batch_attributes(CompressionType.NONE, batch.timestamp_type, batch.is_transactional,
                                    batch.is_control),
        last_offset_delta=batch.last_offset - batch.base_offset, base_timestamp=NO_TIMESTAMP,
        max_timestamp=batch.max_timestamp, producer_id=batch.producer_id, producer_epoch=batch.producer_epoch,
        base_sequence=batch.base_sequence, records_count=0)
    return bytes(buf)


def rebuilt_from_area(batch: DefaultRecordBatch, records_area: Buffer, count: int, base_timestamp: int,
                      max_timestamp: int, delete_horizon_ms: int | None) -> bytes:
    """:func:`rebuild_batch` from records already encoded (the kernel's ``retained_records``): the
    same codec, header fields and attributes as ``build_batch`` gives them."""
    return batch_of_area(
        memoryview(records_area), count, base_offset=batch.base_offset, last_offset=batch.last_offset,
        base_timestamp=base_timestamp, max_timestamp=max_timestamp, compression=batch.compression,
        timestamp_type=batch.timestamp_type, producer_id=batch.producer_id, producer_epoch=batch.producer_epoch,
        base_sequence=batch.base_sequence, is_transactional=batch.is_transactional, is_control=batch.is_control,
        partition_leader_epoch=batch.partition_leader_epoch, has_delete_horizon=delete_horizon_ms is not None)


def rebuild_batch(batch: DefaultRecordBatch, records: list[Record], delete_horizon_ms: int | None) -> bytes:
    """``buildRetainedRecordsInto``: same codec, base and last offset, producer fields, epoch."""
    lat = batch.timestamp_type == TimestampType.LOG_APPEND_TIME
    return build_batch(
        records, base_offset=batch.base_offset, compression=batch.compression, timestamp_type=batch.timestamp_type,
        log_append_time=batch.max_timestamp if lat else None, producer_id=batch.producer_id,
        producer_epoch=batch.producer_epoch, base_sequence=batch.base_sequence,
        is_transactional=batch.is_transactional, is_control=batch.is_control,
        partition_leader_epoch=batch.partition_leader_epoch, delete_horizon_ms=delete_horizon_ms,
        last_offset=batch.last_offset)
