"""A log segment: ``<base>.log`` with its ``.index`` and ``.timeindex`` (``LogSegment.java``).

This module starts with what recovery and ``klog verify`` need: :func:`scan_segment`, which
walks a ``.log`` the way ``LogSegment.recover`` does and computes the index entries Kafka would
build, without writing anything. The rule (``index.interval.bytes``, default 4096)::

    for each batch at position validBytes:
        ensureValid(batch)                      # the first invalid batch ends the valid data
        if batch.maxTimestamp > maxTimestampSoFar: remember (batch.maxTimestamp, batch.lastOffset)
        if validBytes - lastIndexEntry > indexIntervalBytes:   # strictly greater, before this batch
            offsetIndex.append(batch.lastOffset, validBytes)
            timeIndex.maybeAppend(maxTimestampSoFar, offsetOfMaxTimestampSoFar)
            lastIndexEntry = validBytes
        validBytes += batch.size
    timeIndex.maybeAppend(maxTimestampSoFar, offsetOfMaxTimestampSoFar)   # the entry of a closed segment

The first batch of a segment never gets an entry: position 0 is implicit.

On the time index's offsets: recovery records the *last offset of the batch* holding the max
timestamp, while a broker's append path may record the offset of the record inside the batch
that holds it. klog's append path follows recovery's rule (the batch's last offset): it needs no
record decoding, it is what any broker writes after an unclean shutdown, and lookups give the
same answer, since they resolve a time-index offset to the batch that contains it.

The module ends with what a log does over its list of segments (Kafka's ``LogSegments``): find
the segment holding an offset (:func:`segment_index_for`) and walk the batches of a range
across segments (:func:`batches_between`).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from storage_core.errors import KlogError, SegmentGoneError, storage_error
from storage_core.faults import maybe_crash
from storage_core.files import (
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    base_offset_of,
    filename_prefix,
)
from storage_core.fs import as_path
from storage_core.limits import INT32_MAX
from storage_core.log.offset_index import OffsetIndex, OffsetPosition
from storage_core.log.time_index import NO_TIMESTAMP, TimeIndex, TimestampOffset
from storage_core.log.txn_index import AbortedTxn
from storage_core.record.file_records import AnyBatch, BatchRun, BatchWalk, FileRecords, PartialTail
from storage_core.record.records import DefaultRecordBatch

#: Kafka's default ``index.interval.bytes``.
DEFAULT_INDEX_INTERVAL_BYTES = 4096


def resolve_segment_file(log_path: str | os.PathLike[str], identity: int) -> Path:
    """The file with inode number ``identity`` (not the device: it differs between the hosts that
    mount a shared file system) under ``log_path`` or ``log_path.deleted`` (a writer renamed
    it for deletion and ``file.delete.delay.ms`` keeps it); :class:`SegmentGoneError` if neither is
    that file any more (deleted, or replaced by a compaction): never another file's bytes."""
    path = as_path(log_path)
    for p in (path, path.with_name(path.name + DELETED_SUFFIX)):
        try:
            st = p.stat()
        except FileNotFoundError:
            continue
        if st.st_ino == identity:
            return p
    raise SegmentGoneError(f"segment {path.name} was deleted or replaced (retention or compaction by a writer) since "
                           "the log was opened or the read was planned; reopen the log (rerun the query) to read its "
                           "current segments", path=path)


@dataclass
class SegmentScan:
    """What :func:`scan_segment` found: the valid prefix and the indexes it implies."""

    base_offset: int
    size_in_bytes: int
    valid_bytes: int = 0
    batches: int = 0
    first_offset: int | None = None  # first offset of the first batch (base offset for v2)
    last_offset: int | None = None
    max_timestamp: int = NO_TIMESTAMP
    offset_of_max_timestamp: int | None = None
    offset_entries: list[OffsetPosition] = field(default_factory=list)
    time_entries: list[TimestampOffset] = field(default_factory=list)
    error: KlogError | None = None  # the corruption that ended the valid data, if any
    partial_tail: PartialTail | None = None
    codecs: dict[str, int] = field(default_factory=dict)

    @property
    def truncated_bytes(self) -> int:
        return self.size_in_bytes - self.valid_bytes

    @property
    def next_offset(self) -> int:
        return self.base_offset if self.last_offset is None else self.last_offset + 1


#: The recovery scan's read size: a chunk that stays in the CPU's cache while its CRCs are checked.
SCAN_CHUNK_BYTES = 1 << 20


#: Bytes read at a time when a file's tail is checked for zeros (its holes, if sparse, are not read).
_ZERO_CHECK_BLOCK = 1 << 20


def zero_filled(path: str | os.PathLike[str], start: int = 0) -> bool:
    """Whether every byte of the file from ``start`` on is zero: a segment preallocated by
    ``file.preallocate=true`` (Kafka's ``FileRecords.openChannel`` sets the file's length to
    ``segment.bytes`` up front, a sparse file of zeros, trimmed on roll or clean shutdown), past its
    last batch. Kafka's recovery reads its first zero header as a record of size 0
    (``FileLogInputStream``: "smaller than minimum record overhead") and truncates there; every klog
    reader cuts it the same way, and ``klog verify`` (:mod:`storage_core.tools.report`) calls it so.
    The holes of a sparse file are skipped (``SEEK_DATA``): a 4 GiB preallocation reads only the
    pages written."""
    with open(path, "rb") as f:
        fd = f.fileno()
        size = os.fstat(fd).st_size
        pos = start
        while pos < size:
            try:
                pos = os.lseek(fd, pos, getattr(os, "SEEK_DATA", os.SEEK_SET))
            except OSError:  # ENXIO: nothing but a hole up to the end
                return True
            hole = os.lseek(fd, pos, getattr(os, "SEEK_HOLE", os.SEEK_END)) if hasattr(os, "SEEK_HOLE") else size
            f.seek(pos)
            while pos < hole:
                block = f.read(min(_ZERO_CHECK_BLOCK, hole - pos))
                if not block:
                    return True
                if block.count(0) != len(block):
                    return False
                pos += len(block)
    return True


def scan_segment(log_path: str | os.PathLike[str], *, index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
                 base_offset: int | None = None) -> SegmentScan:
    """Validate every batch of a ``.log`` and compute its index entries; reads only."""
    base = base_offset_of(log_path) if base_offset is None else base_offset
    fr = FileRecords(log_path)
    scan = SegmentScan(base, fr.size_in_bytes)
    walk = fr.batches(transient=True, chunk_bytes=SCAN_CHUNK_BYTES)  # no batch is kept
    last_index_entry = 0
    max_ts, max_ts_offset = NO_TIMESTAMP, base
    try:
        for batch in walk:
            batch.ensure_valid()
            last = batch.last_offset
            if last - base > INT32_MAX or last < base:
                raise KlogError(f"Batch with last offset {last} cannot be in a segment based at {base}",
                                path=str(log_path), position=batch.position)
            if batch.max_timestamp > max_ts:
                max_ts, max_ts_offset = batch.max_timestamp, last
            if batch.position - last_index_entry > index_interval_bytes:
                scan.offset_entries.append(OffsetPosition(last, batch.position))
                _maybe_append_time(scan.time_entries, max_ts, max_ts_offset)
                last_index_entry = batch.position
            if scan.first_offset is None:
                scan.first_offset = batch.base_offset
            scan.last_offset = last
            scan.batches += 1
            label = batch.compression.label
            scan.codecs[label] = scan.codecs.get(label, 0) + 1
            scan.valid_bytes = batch.position + batch.size_in_bytes
    except KlogError as exc:
        scan.error = exc
    else:
        scan.partial_tail = walk.partial_tail
    _maybe_append_time(scan.time_entries, max_ts, max_ts_offset)
    scan.max_timestamp = max_ts
    scan.offset_of_max_timestamp = max_ts_offset if max_ts != NO_TIMESTAMP else None
    return scan


def _maybe_append_time(entries: list[TimestampOffset], timestamp: int, offset: int) -> None:
    last_ts = entries[-1].timestamp if entries else NO_TIMESTAMP
    if timestamp > last_ts:
        entries.append(TimestampOffset(timestamp, offset))


# --- LogSegment --------------------------------------------------------------------------------

#: Kafka's default ``segment.index.bytes``.
DEFAULT_MAX_INDEX_SIZE = 10 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class LogOffsetPosition:
    """A batch found by offset: its last offset, byte position and size (``FileRecords.LogOffsetPosition``)."""

    offset: int
    position: int
    size: int


@dataclass(frozen=True, slots=True)
class FetchData:
    """Whole batches read from a segment, starting at ``position``."""

    start_offset: int
    position: int
    records: bytes


@dataclass(frozen=True, slots=True)
class RollParams:
    """What decides whether to roll before an append (``RollParams.java``)."""

    max_segment_ms: int
    max_segment_bytes: int
    max_timestamp_in_messages: int
    max_offset_in_messages: int
    messages_size: int
    now_ms: int


class LogSegment:
    """``<base>.log`` with its ``.index``, ``.timeindex`` and ``.txnindex`` (``LogSegment.java``).

    Writable segments append batches and keep the indexes with Kafka's sparse rule; read-only
    segments never change a byte on disk: a missing or unusable index is rebuilt in memory.
    """

    def __init__(self, directory: str | os.PathLike[str], base_offset: int, *,
                 index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
                 max_index_size: int = DEFAULT_MAX_INDEX_SIZE, writable: bool = False,
                 rolling_jitter_ms: int = 0, stem: str | None = None) -> None:
        from storage_core.log.txn_index import TransactionIndex

        self.dir = as_path(directory)
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.writable = writable
        self.rolling_jitter_ms = rolling_jitter_ms
        #: the files' name before the suffix: the base offset in 20 digits, or another name the
        #: segment's files carry (a remote copy's ``<base>-<segment id>``, :mod:`storage_core.log.tiered`)
        self.stem = prefix = filename_prefix(base_offset) if stem is None else stem
        self.log_path = self.dir / (prefix + LOG_SUFFIX)
        index_path = self.dir / (prefix + INDEX_SUFFIX)
        time_path = self.dir / (prefix + TIME_INDEX_SUFFIX)
        self.txn_index = TransactionIndex(self.dir / (prefix + TXN_INDEX_SUFFIX), base_offset)
        self._log = None
        self.rebuilt_in_memory = False
        if writable:
            try:
                self._log = open(self.log_path, "a+b")  # noqa: SIM115 - lives as long as the segment
                self.size_in_bytes = os.fstat(self._log.fileno()).st_size
                self._offset_index: OffsetIndex | None = OffsetIndex(index_path, base_offset,
                                                                     max_index_size=max_index_size, writable=True)
                self._time_index: TimeIndex | None = TimeIndex(time_path, base_offset,
                                                               max_index_size=max_index_size, writable=True)
            except OSError as exc:
                if self._log is not None:
                    self._log.close()
                raise storage_error(exc, "opening the segment for writing", self.log_path) from exc
        else:
            try:  # one stat: a file deleted between a check and the stat must read as gone, too
                st = self.log_path.stat()
                regular = stat.S_ISREG(st.st_mode)
            except FileNotFoundError:
                regular = False
            if not regular:
                raise SegmentGoneError(f"no such segment file: {self.log_path} (deleted since its partition dir was "
                                       "listed, by retention or a writer's compaction); reopen the log to read its "
                                       "current segments")
            self.size_in_bytes = st.st_size
            self._identity = st.st_ino
            self._offset_index = self._time_index = None  # mapped on first use: opening 1000s of segments is cheap
        self._bytes_since_last_index_entry = 0
        self._rolling_based_timestamp: int | None = None
        self._max_ts: TimestampOffset | None = None  # loaded lazily

    def current_log_path(self) -> Path:
        """The file this segment reads. A writer (retention, a compaction swap) may rename a
        segment ``*.deleted`` while a read-only open of the log is in use, and put a new file in
        its place; the segment keeps reading the file it was opened on (found by its inode under
        either name) for as long as ``file.delete.delay.ms`` keeps it, as Kafka's readers do with
        their open channels. Once it is gone: :class:`SegmentGoneError`, never another file's bytes."""
        if self.writable:
            return self.log_path
        return resolve_segment_file(self.log_path, self._identity)

    def aborted_txns(self) -> list[AbortedTxn]:
        """The ``.txnindex`` entries, from the index beside the file this segment reads (``X.txnindex.deleted``
        when a writer renamed the segment for deletion)."""
        if self.writable or self.current_log_path() == self.log_path:
            return self.txn_index.read()
        from storage_core.log.txn_index import TransactionIndex

        path = self.txn_index.path
        return TransactionIndex(path.with_name(path.name + DELETED_SUFFIX), self.base_offset).read()

    @property
    def file_identity(self) -> int | None:
        """The inode number of the ``.log`` file a read-only segment was opened on."""
        return None if self.writable else self._identity

    def _load_indexes(self) -> tuple[OffsetIndex, TimeIndex]:
        if self._offset_index is None or self._time_index is None:
            prefix = self.stem
            tail = DELETED_SUFFIX if self.current_log_path() != self.log_path else ""
            self._offset_index, self._time_index = self._read_only_indexes(
                self.dir / (prefix + INDEX_SUFFIX + tail), self.dir / (prefix + TIME_INDEX_SUFFIX + tail))
        return self._offset_index, self._time_index

    @property
    def offset_index(self) -> OffsetIndex:
        return self._load_indexes()[0]

    @property
    def time_index(self) -> TimeIndex:
        return self._load_indexes()[1]

    def _read_only_indexes(self, index_path: Path, time_path: Path) -> tuple[OffsetIndex, TimeIndex]:
        try:
            if not index_path.is_file():
                raise KlogError(f"missing index {index_path}")
            oi = OffsetIndex(index_path, self.base_offset)
            ti = TimeIndex(time_path, self.base_offset) if time_path.is_file() else None
            oi.sanity_check()
            if ti is not None:
                ti.sanity_check()
            if oi.entries and oi.entry(oi.entries - 1).position >= self.size_in_bytes:
                raise KlogError(f"index {index_path} points past the end of its segment")
            if ti is not None and (oi.entries or self.size_in_bytes <= self.index_interval_bytes):
                return oi, ti
            oi.close()
            if ti is not None:
                ti.close()
        except KlogError:
            pass  # rebuilt below, in memory: a reader never writes
        scan = scan_segment(self.current_log_path(), index_interval_bytes=self.index_interval_bytes,
                            base_offset=self.base_offset)
        return self._in_memory_indexes(scan)

    def _in_memory_indexes(self, scan: SegmentScan) -> tuple[OffsetIndex, TimeIndex]:
        from storage_core.log.offset_index import OFFSET_INDEX_ENTRY
        from storage_core.log.time_index import TIME_INDEX_ENTRY

        self.rebuilt_in_memory = True
        prefix = self.stem
        odata = b"".join(OFFSET_INDEX_ENTRY.pack(e.offset - self.base_offset, e.position) for e in scan.offset_entries)
        tdata = b"".join(TIME_INDEX_ENTRY.pack(e.timestamp, e.offset - self.base_offset) for e in scan.time_entries)
        oi = OffsetIndex.in_memory(self.dir / (prefix + INDEX_SUFFIX), self.base_offset, odata)
        ti = TimeIndex.in_memory(self.dir / (prefix + TIME_INDEX_SUFFIX), self.base_offset, tdata)
        assert isinstance(oi, OffsetIndex) and isinstance(ti, TimeIndex)
        return oi, ti

    def recover_in_memory(self, scan: SegmentScan) -> int:
        """Read-only recovery: read no further than the valid prefix, with indexes rebuilt in
        memory from ``scan``; nothing on disk changes. Returns the bytes left out."""
        if self.writable:
            raise KlogError(f"recover_in_memory is for read-only segments: {self.log_path}")
        cut = self.size_in_bytes - scan.valid_bytes
        self.size_in_bytes = scan.valid_bytes
        if self._offset_index is not None:
            self._offset_index.close()
        if self._time_index is not None:
            self._time_index.close()
        self._offset_index, self._time_index = self._in_memory_indexes(scan)
        self._max_ts = None
        return cut

    # -- reading
    def _records(self) -> FileRecords:
        return FileRecords(self.current_log_path())

    def batches(self, start_position: int = 0, end_position: int | None = None, *, transient: bool = False) -> BatchWalk:
        """Batches from a byte position (a batch boundary) up to the segment's size when opened
        (``transient``: each valid only until the next is taken, see :meth:`FileRecords.batches`)."""
        end = self.size_in_bytes if end_position is None else end_position
        return self._records().batches(start_position, end, transient=transient)

    def batch_runs(self, run: BatchRun, start_position: int = 0) -> Iterator[AnyBatch]:
        """:meth:`batches`, with runs of them taken by ``run`` (:meth:`FileRecords.runs`)."""
        return self._records().runs(run, start_position, self.size_in_bytes)

    def translate_offset(self, offset: int, starting_position: int = 0) -> LogOffsetPosition | None:
        """The first batch whose last offset is >= ``offset`` (index lookup, then a short scan)."""
        mapping = self.offset_index.lookup(offset)
        for batch in self.batches(max(mapping.position, starting_position)):
            if batch.last_offset >= offset:
                return LogOffsetPosition(batch.last_offset, batch.position, batch.size_in_bytes)
        return None

    def read(self, start_offset: int, max_size: int, *, max_position: int | None = None,
             min_one_message: bool = True) -> FetchData | None:
        """Whole batches from the one holding ``start_offset``, at most ``max_size`` bytes
        (the first batch whatever its size when ``min_one_message``); None past the end."""
        if max_size < 0:
            raise KlogError(f"Invalid max size {max_size} for log read from segment {self.log_path}")
        pos = self.translate_offset(start_offset)
        if pos is None:
            return None
        end = self.size_in_bytes if max_position is None else max_position
        taken = 0
        for batch in self.batches(pos.position, end):
            if taken + batch.size_in_bytes > max_size and not (taken == 0 and min_one_message):
                break
            taken += batch.size_in_bytes
        with self.current_log_path().open("rb") as f:
            f.seek(pos.position)
            data = f.read(taken)
        return FetchData(start_offset, pos.position, data)

    def find_offset_by_timestamp(self, timestamp: int, starting_offset: int | None = None) -> TimestampOffset | None:
        """First record with timestamp >= ``timestamp`` and offset >= ``starting_offset``."""
        start = self.base_offset if starting_offset is None else starting_offset
        entry = self.time_index.lookup(timestamp)
        position = self.offset_index.lookup(max(entry.offset, start)).position
        for batch in self.batches(position):
            if batch.max_timestamp >= timestamp and batch.last_offset >= start:
                for rec in batch.records():
                    if rec.timestamp >= timestamp and rec.offset >= start:
                        return TimestampOffset(rec.timestamp, rec.offset)
        return None

    def read_next_offset(self) -> int:
        """The offset after the last batch (the base offset for an empty segment).

        Walks from the last index entry. An entry can be ahead of the bytes a reader sees while
        another process appends (its batch not yet complete in the file): then no whole batch
        starts there, and the walk starts again from the entry before it (from the start of the
        segment if there is none), never reporting less than what is there."""
        index = self.offset_index
        slot = index.entries - 1
        while True:
            position = index.entry(slot).position if slot >= 0 else 0
            nxt: int | None = None
            for batch in self.batches(position):
                nxt = batch.next_offset
            if nxt is not None or slot < 0:
                return self.base_offset if nxt is None else nxt
            slot -= 1

    @property
    def max_timestamp_so_far(self) -> TimestampOffset:
        if self._max_ts is None:
            self._max_ts = self._load_max_timestamp()
        return self._max_ts

    def _load_max_timestamp(self) -> TimestampOffset:
        last = self.time_index.last_entry
        best = last
        position = self.offset_index.lookup(last.offset).position
        for batch in self.batches(position):
            if batch.max_timestamp > best.timestamp:
                best = TimestampOffset(batch.max_timestamp, batch.last_offset)
        return best

    @property
    def largest_timestamp(self) -> int:
        """Max record timestamp, or the file's mtime if there is none (retention's rule)."""
        ts = self.max_timestamp_so_far.timestamp
        return ts if ts >= 0 else int(self.current_log_path().stat().st_mtime * 1000)

    # -- writing
    def _require_writable(self) -> None:
        if not self.writable or self._log is None:
            raise KlogError(f"segment {self.log_path} is open read-only")

    def append(self, largest_offset: int, largest_timestamp: int, offset_of_max_timestamp: int,
               records: bytes | bytearray | memoryview) -> None:
        """Append one or more whole batches (``LogSegment.append``); indexes follow the sparse rule."""
        self._require_writable()
        assert self._log is not None
        if not records:
            return
        position = self.size_in_bytes
        if not 0 <= largest_offset - self.base_offset <= INT32_MAX:
            raise KlogError(f"Largest offset {largest_offset} cannot be stored relative to base offset "
                            f"{self.base_offset} in {self.log_path}")
        oi_entries, ti_entries = self.offset_index.entries, self.time_index.entries
        saved = (self._max_ts, self._bytes_since_last_index_entry, self._rolling_based_timestamp)
        if position == 0:
            self._rolling_based_timestamp = largest_timestamp
        try:
            self._log.write(records)
            self._log.flush()
            self.size_in_bytes += len(records)
            if largest_timestamp > self.max_timestamp_so_far.timestamp:
                self._max_ts = TimestampOffset(largest_timestamp, offset_of_max_timestamp)
            if self._bytes_since_last_index_entry > self.index_interval_bytes:
                self.offset_index.append(largest_offset, position)
                mts = self.max_timestamp_so_far
                self.time_index.maybe_append(mts.timestamp, mts.offset)
                self._bytes_since_last_index_entry = 0
            self._bytes_since_last_index_entry += len(records)
        except OSError as exc:  # disk full, read-only, I/O error: cut back to where this append started
            self._undo_append(position, oi_entries, ti_entries, saved)
            raise storage_error(exc, f"appending {len(records)} bytes at position {position} of segment",
                                self.log_path) from exc

    def _undo_append(self, position: int, oi_entries: int, ti_entries: int,
                     saved: tuple[TimestampOffset | None, int, int | None]) -> None:
        assert self._log is not None
        # a buffered file would keep the bytes it could not write and retry them on the next
        # write: start over from a fresh handle on the file cut back to ``position``
        try:
            self._log.close()
        except OSError:
            pass  # the unwritten buffer is what is being dropped
        os.truncate(self.log_path, position)  # frees space: works on a full file system
        self._log = open(self.log_path, "a+b")  # noqa: SIM115 - lives as long as the segment
        self.size_in_bytes = position
        self.offset_index.truncate_to_entries(oi_entries)
        self.time_index.truncate_to_entries(ti_entries)
        self._max_ts, self._bytes_since_last_index_entry, self._rolling_based_timestamp = saved

    def flush(self) -> None:
        try:
            if self._log is not None:
                self._log.flush()
                os.fsync(self._log.fileno())
                maybe_crash("segment-flush-log-synced", segment=self.log_path.name)
            self.offset_index.flush()
            self.time_index.flush()
        except OSError as exc:
            raise storage_error(exc, "flushing segment", self.log_path) from exc

    def recover(self) -> int:
        """``LogSegment.recover``: revalidate, truncate after the last valid batch, rebuild the
        indexes. Returns the bytes truncated."""
        self._require_writable()
        assert self._log is not None
        scan = scan_segment(self.log_path, index_interval_bytes=self.index_interval_bytes,
                            base_offset=self.base_offset)
        self.offset_index.reset()
        self.time_index.reset()
        for e in scan.offset_entries:
            self.offset_index.append(e.offset, e.position)
        for t in scan.time_entries[:-1] if scan.time_entries else []:
            self.time_index.maybe_append(t.timestamp, t.offset)
        if scan.time_entries:
            last = scan.time_entries[-1]
            self.time_index.maybe_append(last.timestamp, last.offset, skip_full_check=True)
        truncated = self.size_in_bytes - scan.valid_bytes
        if truncated > 0:
            self._log.truncate(scan.valid_bytes)
            self.size_in_bytes = scan.valid_bytes
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()
        self._max_ts = TimestampOffset(scan.max_timestamp, scan.offset_of_max_timestamp or self.base_offset)
        self._bytes_since_last_index_entry = 0
        return truncated

    def truncate_to(self, offset: int) -> int:
        """Remove everything from ``offset`` on; returns the bytes removed (``LogSegment.truncateTo``)."""
        self._require_writable()
        assert self._log is not None
        mapping = self.translate_offset(offset)
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        self.offset_index.resize(self.offset_index.max_index_size)
        self.time_index.resize(self.time_index.max_index_size)
        truncated = 0
        if mapping is not None and mapping.position < self.size_in_bytes:
            truncated = self.size_in_bytes - mapping.position
            self._log.truncate(mapping.position)
            self.size_in_bytes = mapping.position
        if self.size_in_bytes == 0:
            self._rolling_based_timestamp = None
        self._bytes_since_last_index_entry = 0
        self._max_ts = None
        return truncated

    def time_waited_for_roll(self, now_ms: int, message_timestamp: int) -> int:
        if self._rolling_based_timestamp is None and self.size_in_bytes > 0:
            for batch in self.batches():
                self._rolling_based_timestamp = batch.max_timestamp
                break
        if self._rolling_based_timestamp is not None and self._rolling_based_timestamp >= 0:
            return message_timestamp - self._rolling_based_timestamp
        return now_ms - int(self.log_path.stat().st_ctime * 1000)

    def should_roll(self, p: RollParams) -> bool:
        """``LogSegment.shouldRoll``: size, time (record timestamps), full indexes, offset overflow."""
        reached_roll_ms = self.time_waited_for_roll(p.now_ms, p.max_timestamp_in_messages) > \
            p.max_segment_ms - self.rolling_jitter_ms
        return (self.size_in_bytes > p.max_segment_bytes - p.messages_size
                or (self.size_in_bytes > 0 and reached_roll_ms)
                or self.offset_index.is_full() or self.time_index.is_full()
                or not 0 <= p.max_offset_in_messages - self.base_offset <= INT32_MAX)

    def on_become_inactive_segment(self) -> None:
        """On roll: the closing time-index entry, then trim both indexes."""
        self._require_writable()
        mts = self.max_timestamp_so_far
        self.time_index.maybe_append(mts.timestamp, mts.offset, skip_full_check=True)
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()

    def close(self) -> None:
        if self.writable and self._log is not None:
            mts = self.max_timestamp_so_far
            self.time_index.maybe_append(mts.timestamp, mts.offset, skip_full_check=True)
            self._log.flush()
            self._log.close()
            self._log = None
        if self._offset_index is not None:
            self._offset_index.close()
        if self._time_index is not None:
            self._time_index.close()

    def __enter__(self) -> LogSegment:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"LogSegment({self.log_path}, size={self.size_in_bytes}, writable={self.writable})"


# --- a log's segments, oldest first (LogSegments) ---------------------------------------------


def segment_index_for(segments: Sequence[LogSegment], offset: int) -> int:
    """Index of the segment that holds ``offset``: the last one whose base offset is at or below it."""
    idx = 0
    for i, seg in enumerate(segments):
        if seg.base_offset <= offset:
            idx = i
    return idx


def batches_between(segments: Sequence[LogSegment], start: int, end: int) -> Iterator[AnyBatch]:
    """Batches of consecutive segments from the one holding ``start``, sought with its offset
    index, until the first v2 batch at or after ``end``."""
    for seg in segments[segment_index_for(segments, start):]:
        if seg.base_offset >= end:
            return
        pos = seg.translate_offset(start)
        if pos is None:
            continue
        for batch in seg.batches(pos.position):
            if batch.base_offset >= end and isinstance(batch, DefaultRecordBatch):
                return
            yield batch


def intact_batches(seg: LogSegment, start_position: int = 0) -> Iterator[AnyBatch]:
    """The batches of ``seg`` from a batch boundary, damage stepped over: after a batch whose CRC
    fails, bytes that are no batch, or a batch cut short, the walk resynchronises at the next
    intact v2 batch (:func:`~storage_core.record.resync.next_valid_batch`). For replays that must
    go on past damage (transaction state), which keep no batch: each is valid only until the next
    is taken. Readers report what they skip (:mod:`storage_core.read.piece_reader`)."""
    from storage_core.record.resync import next_valid_batch

    position = start_position
    end = seg.size_in_bytes
    after = seg.base_offset
    while position < end:
        walk = seg.batches(position, end, transient=True)
        try:
            for batch in walk:
                batch.ensure_valid()
                after = batch.last_offset + 1
                yield batch
            stop = walk.valid_bytes
        except KlogError as exc:
            stop = exc.position if exc.position is not None else walk.valid_bytes
        if stop >= end:
            return
        found = next_valid_batch(seg.current_log_path(), stop + 1, end, min_offset=after)
        if found is None:
            return
        position = found.position
