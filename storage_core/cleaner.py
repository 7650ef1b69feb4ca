"""Log compaction: Kafka's log cleaner on klog's engine (``LogCleaner``/``Cleaner``,
``LogCleanerManager``, ``SkimpyOffsetMap``, ``MemoryRecords.filterTo``,
``CleanedTransactionMetadata``).

What one cleaning of a partition does (:meth:`LogCleaner.clean_log`)
-----------------------------------------------------------------------

1. **Range.** The first dirty offset comes from ``cleaner-offset-checkpoint`` in the log dir
   (Kafka's offset-checkpoint text format), reset to the log start offset when missing or out of
   range. The first uncleanable offset is the least of the last stable offset (an open
   transaction is never cleaned past), the active segment's base offset, and the base offset of
   the first dirty segment whose largest timestamp is newer than ``min.compaction.lag.ms``.
2. **Offset map.** :class:`SkimpyOffsetMap` maps the MD5 digest of each key (16 bytes) to the
   key's latest offset in the dirty range, in a bounded number of slots: ``memory_bytes / 24``
   slots (digest + offset, as Kafka counts them), filled to a 0.9 load factor. Batches of
   aborted transactions (``.txnindex``) are not mapped. When the map fills, it covers a prefix
   of the dirty range: the pass cleans up to ``map.latest_offset + 1`` and the next pass
   continues from there (an explicit clean runs passes until the range is done).
   *Collisions*: as in Kafka, two keys with the same MD5 digest would be taken for one key, and
   the older record dropped. With 2**128 digests the chance is negligible (Kafka accepts it;
   klog does the same), and keys are never compared byte for byte.
3. **Recopy.** Segments from the start of the log up to the map's end are grouped so that a
   group's log bytes stay within ``segment.bytes``, its index bytes within
   ``segment.index.bytes`` and its offsets within an int (``groupSegmentsBySize``); each group is
   rewritten into one segment named after its first base offset. Per batch (v2), as
   ``MemoryRecords.filterTo`` with the cleaner's filter:

   * a record past the map's latest offset is kept; a record without a key is dropped; a keyed
     record is kept if its offset is the latest for its key and it has a value, or it is a
     tombstone whose batch has no delete horizon yet or whose horizon is still in the future;
   * batches of aborted transactions are dropped whatever their keys; an ABORT marker is kept
     (and its ``.txnindex`` entry re-added) while batches of its transaction were seen in this
     cleaning, a COMMIT marker while batches of its transaction were seen; a marker that could
     be dropped first gets a delete horizon and goes when the horizon has passed;
   * a batch from which nothing is removed is copied byte for byte, unless it holds tombstones
     (or is such a marker) and has no delete horizon yet: then it is rebuilt with attribute bit 6
     set and ``baseTimestamp = now + delete.retention.ms`` (KIP-534);
   * a filtered batch is rebuilt with the same codec, base offset, last offset (offset gaps
     inside a batch are normal afterwards), producer fields and leader epoch;
   * a batch left empty is removed, except the last data batch of a producer (or its last marker
     when it has no data), and the batch that ends at the first uncleanable offset: those keep a
     61-byte header (``RETAIN_EMPTY``), so that producer state and the last offset survive.

   Legacy (magic 0/1) batches are copied unchanged (klog does not rewrite v0/v1 message sets).
4. **Checkpoint.** ``cleaner-offset-checkpoint`` is updated to the end of the cleaned range.
   The log start offset and the producer snapshots are not changed.

An explicit request (``force=True``, ``klog compact``) cleans whatever the policy and dirty
ratio; when nothing is dirty it still recopies the clean section with an empty map, so that
tombstones and markers whose delete horizon passed go (Kafka waits for new dirty data). An
automatic round (:meth:`LogCleaner.clean_logs`) cleans the compacted logs whose dirty ratio
reaches ``min.cleanable.dirty.ratio`` (or whose oldest dirty batch is older than
``max.compaction.lag.ms``), dirtiest first.

Records are decoded in bulk by the native kernel (keys, offsets and tombstone flags of many
batches at once; whole records only for those a rebuilt batch keeps), with the per-record
decoder as the fallback.

Crash safety: the ``.cleaned → .swap → .deleted`` protocol
----------------------------------------------------------

Each group is replaced as ``LogCleaner.cleanSegments`` + ``LocalLog.replaceSegments`` do. The
names below use the group's first base offset ``B``; ``maybe_crash`` points (see
:mod:`storage_core.faults`) are given in brackets, with the context ``group`` (the group's
index in its pass) or ``partition`` (the partition directory's name).

1. ``[cleaner-map-built]`` nothing written yet.
2. ``B.log.cleaned`` is written batch by batch ``[cleaner-cleaned-writing]`` (after the group's
   first source segment), then ``B.index.cleaned``, ``B.timeindex.cleaned`` and, when the group
   keeps aborted transactions, ``B.txnindex.cleaned``; all fsynced, the log's mtime set to that
   of the group's last source segment ``[cleaner-cleaned-written]``.
3. Each ``*.cleaned`` is renamed ``*.swap``, in Kafka's order: the ``.log`` first
   ``[cleaner-swap-partial]``, then the indexes ``[cleaner-swapped]``; the directory is fsynced.
   Once no ``B.*.cleaned`` is left, ``B.log.swap`` commits the group: from then on reopening
   completes the replacement (before, it rolls it back: KAFKA-6264's rule).
4. The old segments' files are renamed ``*.deleted`` one segment at a time
   ``[cleaner-old-deleted]`` (context ``segment`` = its position in the group).
5. The ``*.swap`` files are renamed to their final names, ``B.log`` first
   ``[cleaner-replaced-partial]``, then the indexes ``[cleaner-replaced]``; then the ``*.deleted``
   files are removed (Kafka waits ``file.delete.delay.ms`` for readers; klog's readers keep
   their open file handles, so the files go at once). A group whose recopy changed nothing
   (one segment, every batch copied byte for byte) is not replaced: its ``.cleaned`` files
   are removed after step 2.
6. After every group, ``[cleaner-checkpoint]``, then the checkpoint is written.

Reopening (:class:`storage_core.log.Log`, writable, as ``LogLoader``): ``*.cleaned`` and
``*.deleted`` files are removed, with any ``*.swap`` at or after a ``*.cleaned`` (a crash in
steps 1-3 leaves the old segments untouched); each remaining ``*.log.swap`` is completed: the
segments whose base offsets lie in ``[B, next offset of the swap)`` are removed and the
``*.swap`` files renamed into place; a lone index ``*.swap`` is renamed into place (a crash in
steps 3-5). Missing indexes are rebuilt. So every
offset reads its old or its new contents. As in Kafka, when the last batches of a group were all
removed, the swap's next offset lies before the group's end, and an old segment of the group
that starts after it can survive a crash beside the new one: its offsets keep their old
contents (records the cleaner would have removed), nothing is lost. A crash before step 6 leaves
the old checkpoint: the next cleaning redoes the range, which is idempotent. A read-only open
ignores ``*.swap`` files and reads the ``.log`` files in place; after a crash in step 4-5 it
can miss the offsets of the group being replaced until a writable open completes the swap.
"""

from __future__ import annotations

import hashlib
import heapq
import os
import struct
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from .checkpoint import CLEANER_OFFSET_CHECKPOINT, OffsetCheckpointFile
from .columnar import _I64_MAX, _I64_MIN, _arrays_from_buffers, native_kernel, new_builder
from .compression import CompressionType
from .control import ControlRecordType
from .errors import InvalidRecordError, KlogError
from .faults import maybe_crash
from .file_records import AnyBatch
from .log import CLEANED_SUFFIX, DELETED_SUFFIX, SWAP_SUFFIX, Log
from .offset_index import OFFSET_INDEX_ENTRY, OffsetPosition
from .records import (
    NO_TIMESTAMP,
    RECORD_BATCH_OVERHEAD,
    DefaultRecordBatch,
    Header,
    Record,
    TimestampType,
    batch_attributes,
    build_batch,
    write_batch_header,
)
from .segment import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    LogSegment,
    _maybe_append_time,
    filename_prefix,
)
from .time_index import TIME_INDEX_ENTRY, TimestampOffset
from .topic_partition import TopicPartition
from .txn_index import AbortedTxn

#: Bytes per map entry as Kafka counts them: a 16-byte MD5 digest and an 8-byte offset.
OFFSET_MAP_ENTRY_BYTES = 16 + 8
#: ``log.cleaner.io.buffer.load.factor``: the map is full at this fraction of its slots.
OFFSET_MAP_LOAD_FACTOR = 0.9
#: Default map memory of one cleaning (Kafka: ``log.cleaner.dedupe.buffer.size`` 128 MiB shared
#: by the cleaner threads). 16 MiB = 699,050 slots.
DEFAULT_MEMORY_BYTES = 16 << 20
#: Kafka's key hash (``log.cleaner`` ``SkimpyOffsetMap(memory, "MD5")``).
HASH_ALGORITHM = "md5"
INT32_MAX = (1 << 31) - 1
MAX_TIMESTAMP_OFFSET = 35  # maxTimestamp in the v2 batch header (records.BATCH_HEADER)
_MAX_TIMESTAMP = struct.Struct(">q")

_FILE_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
#: Rename order of a segment's files (``LogSegment.changeFileSuffixes``): the ``.log`` first.
_RENAME_ORDER = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# --- the offset map ----------------------------------------------------------------------------


class SkimpyOffsetMap:
    """Key digest → latest offset, with a fixed number of slots (``SkimpyOffsetMap``).

    ``slots = memory_bytes // 24``; the map counts as full at ``slots * 0.9`` distinct keys.
    Kafka stores the entries in one byte buffer with open addressing; klog keeps them in a dict
    keyed by the 16-byte digest (Python's per-entry overhead is larger than 24 bytes, about
    100 bytes; the *number* of keys is bounded exactly as in Kafka, so the passes are the same).
    """

    __slots__ = ("memory_bytes", "slots", "max_entries", "latest_offset", "_map", "lookups", "_hash")

    def __init__(self, memory_bytes: int = DEFAULT_MEMORY_BYTES) -> None:
        slots = memory_bytes // OFFSET_MAP_ENTRY_BYTES
        max_entries = int(slots * OFFSET_MAP_LOAD_FACTOR)
        if max_entries < 1:
            raise KlogError(f"offset map memory of {memory_bytes} bytes holds no key; expected at least "
                            f"{-(-OFFSET_MAP_ENTRY_BYTES // OFFSET_MAP_LOAD_FACTOR):.0f} bytes "
                            f"({OFFSET_MAP_ENTRY_BYTES} bytes per key at load factor {OFFSET_MAP_LOAD_FACTOR})")
        self.memory_bytes = memory_bytes
        self.slots = slots
        self.max_entries = max_entries
        self.latest_offset = -1
        self._map: dict[bytes, int] = {}
        self._hash = getattr(hashlib, HASH_ALGORITHM)

    def digest(self, key: bytes) -> bytes:
        return bytes(self._hash(key).digest())

    def put(self, key: bytes, offset: int) -> None:
        self._map[self._hash(key).digest()] = offset

    def get(self, key: bytes) -> int:
        """The latest offset of ``key``, or -1."""
        return self._map.get(self._hash(key).digest(), -1)

    def try_put_all(self, keys: list[bytes], offsets: list[int]) -> bool:
        """Put every pair (in order: a later offset of a key wins) when that cannot fill the map,
        and return True; otherwise put nothing and return False (the caller puts one by one)."""
        if len(self._map) + len(keys) > self.max_entries:
            return False
        h = self._hash
        self._map.update(zip([h(k).digest() for k in keys], offsets, strict=True))
        return True

    def get_all(self, keys: list[bytes | None]) -> list[int]:
        """The latest offset of each key (-1 for a missing or null key)."""
        h, get = self._hash, self._map.get
        return [-1 if k is None else get(h(k).digest(), -1) for k in keys]

    @property
    def size(self) -> int:
        return len(self._map)

    @property
    def is_full(self) -> bool:
        return len(self._map) >= self.max_entries

    @property
    def utilization(self) -> float:
        return len(self._map) / self.slots

    def update_latest_offset(self, offset: int) -> None:
        self.latest_offset = offset

    def clear(self) -> None:
        self._map.clear()
        self.latest_offset = -1


# --- records of a batch, decoded in bulk -------------------------------------------------------

#: Batches decoded per call of the native kernel.
DECODE_CHUNK_BATCHES = 512


class RecordsView:
    """Offsets, keys and tombstone flags of one batch's records; whole records on demand."""

    __slots__ = ("offsets", "keys", "tombstones", "_records", "_chunk", "_start")

    def __init__(self, offsets: list[int], keys: list[bytes | None], tombstones: list[bool], *,
                 records: list[Record] | None = None, chunk: _DecodedChunk | None = None, start: int = 0) -> None:
        self.offsets = offsets
        self.keys = keys
        self.tombstones = tombstones
        self._records = records
        self._chunk = chunk
        self._start = start

    @classmethod
    def of_records(cls, records: list[Record]) -> RecordsView:
        return cls([r.offset for r in records], [r.key for r in records], [r.value is None for r in records],
                   records=records)

    def __len__(self) -> int:
        return len(self.offsets)

    def record(self, i: int) -> Record:
        if self._records is not None:
            return self._records[i]
        assert self._chunk is not None
        return self._chunk.record(self._start + i)


class _DecodedChunk:
    """The records of several v2 data batches, decoded by the native kernel into Arrow arrays."""

    def __init__(self, arrays: dict[str, pa.Array], with_headers: bool) -> None:
        self.offsets: list[int] = arrays["offset"].to_pylist()
        self.keys: list[bytes | None] = arrays["key"].to_pylist()
        self.tombstones: list[bool] = arrays["value"].is_null().to_pylist()
        self._ts = arrays["ts_ms"]
        self._values = arrays["value"]
        self._headers = arrays["headers"] if with_headers else None

    def record(self, j: int) -> Record:
        hs = self._headers[j].as_py() if self._headers is not None else None
        return Record(self.offsets[j], self._ts[j].as_py(), self.keys[j], self._values[j].as_py(),
                      tuple(Header(h["key"], h["value"]) for h in hs) if hs else ())


def decode_views(batches: list[DefaultRecordBatch], *, with_headers: bool) -> list[RecordsView]:
    """A :class:`RecordsView` per data batch: one kernel call for all of them, or (no kernel, or a
    batch the kernel refuses, such as a timestamp beyond its range) the per-record decoder."""
    if not batches:
        return []
    if native_kernel() is not None:
        builder = new_builder(with_headers)
        counts: list[int] = []
        try:
            for b in batches:
                lat = b.max_timestamp if b.timestamp_type == TimestampType.LOG_APPEND_TIME else None
                try:
                    counts.append(builder.add_v2(b.records_payload(), b.records_count, b.base_offset,
                                                 b.base_timestamp, lat, _I64_MIN, _I64_MAX))
                except KlogError as exc:
                    exc.located(path=b.path, position=b.position)
                    raise
            chunk = _DecodedChunk(_arrays_from_buffers(builder.finish(), with_headers), with_headers)
        except InvalidRecordError:
            pass  # decoded again below, record by record: the error (if real) is raised there
        else:
            out = []
            start = 0
            for n in counts:
                out.append(RecordsView(chunk.offsets[start:start + n], chunk.keys[start:start + n],
                                       chunk.tombstones[start:start + n], chunk=chunk, start=start))
                start += n
            return out
    return [RecordsView.of_records(b.records()) for b in batches]


def _chunks(batches: Iterable[AnyBatch], size: int = DECODE_CHUNK_BATCHES) -> Iterator[list[AnyBatch]]:
    chunk: list[AnyBatch] = []
    for b in batches:
        chunk.append(b)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


# --- transactions ------------------------------------------------------------------------------


@dataclass(slots=True)
class _AbortedTxnState:
    txn: AbortedTxn
    last_observed_batch_offset: int | None = None


class CleanedTransactionMetadata:
    """Transaction state carried through one cleaning (``CleanedTransactionMetadata``)."""

    def __init__(self) -> None:
        self._ongoing_committed: set[int] = set()
        self._ongoing_aborted: dict[int, _AbortedTxnState] = {}
        self._heap: list[tuple[int, int, int, AbortedTxn]] = []  # by first offset
        self._seq = 0
        self.cleaned_index: list[AbortedTxn] | None = None  # aborted txns to write to the cleaned segment

    def add_aborted_transactions(self, txns: Iterable[AbortedTxn]) -> None:
        for t in txns:
            self._seq += 1
            heapq.heappush(self._heap, (t.first_offset, self._seq, t.producer_id, t))

    def _consume_aborted_up_to(self, offset: int) -> None:
        while self._heap and self._heap[0][0] <= offset:
            t = heapq.heappop(self._heap)[3]
            self._ongoing_aborted.setdefault(t.producer_id, _AbortedTxnState(t))

    def on_control_batch_read(self, batch: DefaultRecordBatch) -> bool:
        """A control batch was read; returns True if it can be discarded."""
        self._consume_aborted_up_to(batch.last_offset)
        records = batch.records()
        if not records:
            return True  # an empty control batch was cleaned already
        kind = ControlRecordType.parse(records[0].key)
        pid = batch.producer_id
        if kind == ControlRecordType.ABORT:
            state = self._ongoing_aborted.pop(pid, None)
            if state is not None and state.last_observed_batch_offset is not None:
                if self.cleaned_index is not None:
                    self.cleaned_index.append(state.txn)
                return False
            return True
        if kind == ControlRecordType.COMMIT:
            if pid in self._ongoing_committed:
                self._ongoing_committed.discard(pid)
                return False
            return True
        return False

    def on_batch_read(self, batch: AnyBatch) -> bool:
        """A data batch was read; returns True if it belongs to an aborted transaction."""
        self._consume_aborted_up_to(batch.last_offset)
        if isinstance(batch, DefaultRecordBatch) and batch.is_transactional:
            state = self._ongoing_aborted.get(batch.producer_id)
            if state is not None:
                state.last_observed_batch_offset = batch.last_offset
                return True
            self._ongoing_committed.add(batch.producer_id)
        return False


# --- results -----------------------------------------------------------------------------------


@dataclass(slots=True)
class CleanerStats:
    """What a cleaning read and kept (``CleanerStats``); accumulated over passes."""

    bytes_read: int = 0
    bytes_written: int = 0
    batches_read: int = 0
    batches_copied: int = 0  # byte for byte
    batches_rebuilt: int = 0
    batches_emptied: int = 0  # kept as a bare header
    batches_removed: int = 0
    records_read: int = 0
    records_retained: int = 0
    keyless_dropped: int = 0
    tombstones_read: int = 0
    tombstones_kept: int = 0
    aborted_batches_dropped: int = 0
    markers_dropped: int = 0
    map_records: int = 0
    map_bytes: int = 0
    passes: int = 0
    groups: int = 0

    @property
    def records_removed(self) -> int:
        return self.records_read - self.records_retained

    @property
    def tombstones_removed(self) -> int:
        return self.tombstones_read - self.tombstones_kept


@dataclass(frozen=True, slots=True)
class CleanableRange:
    """``LogCleanerManager.cleanableOffsets`` plus the byte counts of ``LogToClean``."""

    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    cleanable_bytes: int

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def dirty_ratio(self) -> float:
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0


@dataclass(frozen=True, slots=True)
class CleanResult:
    """The outcome of cleaning one partition."""

    topic_partition: TopicPartition | None
    path: str
    first_dirty_offset: int
    end_offset: int  # the new checkpoint: everything below it was cleaned
    bytes_before: int
    bytes_after: int
    segments_before: int
    segments_after: int
    stats: CleanerStats = field(default_factory=CleanerStats)

    def summary(self) -> dict[str, object]:
        s = self.stats
        return {
            "topic": self.topic_partition.topic if self.topic_partition else None,
            "partition": self.topic_partition.partition if self.topic_partition else None,
            "path": self.path, "first_dirty_offset": self.first_dirty_offset, "end_offset": self.end_offset,
            "bytes_before": self.bytes_before, "bytes_after": self.bytes_after,
            "segments_before": self.segments_before, "segments_after": self.segments_after,
            "records_read": s.records_read, "records_removed": s.records_removed,
            "keyless_dropped": s.keyless_dropped, "tombstones_kept": s.tombstones_kept,
            "tombstones_removed": s.tombstones_removed, "aborted_batches_dropped": s.aborted_batches_dropped,
            "markers_dropped": s.markers_dropped, "batches_copied": s.batches_copied,
            "batches_rebuilt": s.batches_rebuilt, "batches_emptied": s.batches_emptied, "passes": s.passes,
        }


#: ``progress(bytes_done, bytes_added_to_total)``: called as bytes are mapped and recopied.
Progress = Callable[[int, int], None]


# --- checkpoint --------------------------------------------------------------------------------


def topic_partition_of(log: Log) -> TopicPartition | None:
    try:
        return TopicPartition.parse_dir_name(log.dir.name)
    except KlogError:
        return None


def cleaner_checkpoint(log_dir: Path) -> OffsetCheckpointFile:
    return OffsetCheckpointFile(log_dir / CLEANER_OFFSET_CHECKPOINT)


def read_cleaner_offset(log: Log) -> int | None:
    tp = topic_partition_of(log)
    if tp is None:
        return None
    return cleaner_checkpoint(log.dir.parent).read().get(tp)


def write_cleaner_offset(log: Log, offset: int) -> None:
    tp = topic_partition_of(log)
    if tp is None:
        return
    ckpt = cleaner_checkpoint(log.dir.parent)
    offsets = ckpt.read()
    offsets[tp] = offset
    ckpt.write(offsets)


# --- the range ---------------------------------------------------------------------------------


def cleanable_range(log: Log, now_ms: int, checkpoint_offset: int | None = None) -> CleanableRange:
    """First dirty and first uncleanable offsets and the clean/cleanable byte counts."""
    start = log.log_start_offset
    first_dirty = start if checkpoint_offset is None else checkpoint_offset
    if first_dirty < start or first_dirty > log.log_end_offset:
        first_dirty = start
    candidates = [log.last_stable_offset, log.active_segment.base_offset]
    lag = max(log.config.min_compaction_lag_ms, 0)
    if lag > 0:
        for seg in _segments_between(log, first_dirty, log.active_segment.base_offset):
            if seg is not log.active_segment and seg.largest_timestamp > now_ms - lag:
                candidates.append(seg.base_offset)
                break
    first_uncleanable = max(first_dirty, min(candidates))
    ends = [s.base_offset for s in log.segments[1:]] + [log.log_end_offset]
    clean = sum(s.size_in_bytes for s, e in zip(log.segments, ends, strict=True) if e <= first_dirty)
    cleanable = sum(s.size_in_bytes for s, e in zip(log.segments, ends, strict=True)
                    if e > first_dirty and s.base_offset < first_uncleanable)
    return CleanableRange(first_dirty, first_uncleanable, clean, cleanable)


def _aborted_between(entries: list[AbortedTxn], start: int, end: int) -> list[AbortedTxn]:
    """``collectAbortedTransactions(start, end)`` over entries read once (:func:`_all_aborted`)."""
    return [t for t in entries if t.last_offset >= start and t.first_offset < end]


def _all_aborted(log: Log) -> list[AbortedTxn]:
    """Every ``.txnindex`` entry of the log, read once per pass (a cleaned group's entries end
    before the segments still to be cleaned, so the list stays right for them)."""
    return sorted((t for seg in log.segments for t in seg.txn_index.read()), key=lambda t: t.first_offset)


def _segment_end(log: Log, seg: LogSegment) -> int:
    """The next segment's base offset (or the log end offset for the active one)."""
    i = log.segments.index(seg)
    return log.segments[i + 1].base_offset if i + 1 < len(log.segments) else log.log_end_offset


def _segments_between(log: Log, start: int, end: int) -> list[LogSegment]:
    """Segments holding offsets in ``[start, end)`` (``logSegments(from, to)``)."""
    out = []
    for i, seg in enumerate(log.segments):
        nxt = log.segments[i + 1].base_offset if i + 1 < len(log.segments) else None
        if seg.base_offset >= end:
            break
        if nxt is not None and nxt <= start:
            continue
        out.append(seg)
    return out


def needs_cleaning(log: Log, now_ms: int, rng: CleanableRange | None = None) -> bool:
    """An automatic pass cleans a compacted log whose dirty ratio reaches
    ``min.cleanable.dirty.ratio``, or whose oldest dirty batch is older than ``max.compaction.lag.ms``."""
    if not log.config.compact:
        return False
    r = rng or cleanable_range(log, now_ms, read_cleaner_offset(log))
    if r.cleanable_bytes == 0:
        return False
    if r.dirty_ratio >= log.config.min_cleanable_dirty_ratio:
        return True
    for seg in _segments_between(log, r.first_dirty_offset, r.first_uncleanable_offset):
        for batch in seg.batches():
            return batch.max_timestamp >= 0 and batch.max_timestamp < now_ms - log.config.max_compaction_lag_ms
    return False


# --- the cleaned segment -----------------------------------------------------------------------


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
        if not 0 <= last_offset - self.base_offset <= INT32_MAX:
            raise KlogError(f"offset {last_offset} cannot be stored relative to base offset {self.base_offset} "
                            f"in {self.log_path}")
        if max_timestamp > self._max_ts:
            self._max_ts, self._offset_of_max_ts = max_timestamp, last_offset
        if self._bytes_since_index > self.index_interval_bytes:
            self.offset_entries.append(OffsetPosition(last_offset, self.size))
            _maybe_append_time(self.time_entries, self._max_ts, self._offset_of_max_ts)
            self._bytes_since_index = 0
        self._file.write(data)
        self.size += len(data)
        self._bytes_since_index += len(data)
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
        for suffix in _FILE_SUFFIXES:
            self.path(suffix, CLEANED_SUFFIX).unlink(missing_ok=True)


def _empty_header(batch: DefaultRecordBatch) -> bytes:
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


def _rebuild(batch: DefaultRecordBatch, records: list[Record], delete_horizon_ms: int | None) -> bytes:
    """``buildRetainedRecordsInto``: same codec, base and last offset, producer fields, epoch."""
    lat = batch.timestamp_type == TimestampType.LOG_APPEND_TIME
    return build_batch(
        records, base_offset=batch.base_offset, compression=batch.compression, timestamp_type=batch.timestamp_type,
        log_append_time=batch.max_timestamp if lat else None, producer_id=batch.producer_id,
        producer_epoch=batch.producer_epoch, base_sequence=batch.base_sequence,
        is_transactional=batch.is_transactional, is_control=batch.is_control,
        partition_leader_epoch=batch.partition_leader_epoch, delete_horizon_ms=delete_horizon_ms,
        last_offset=batch.last_offset)


@dataclass(frozen=True, slots=True)
class _LastRecord:
    """``LastRecord``: a producer's last data offset (None: markers only) and epoch."""

    last_data_offset: int | None
    producer_epoch: int


# --- the cleaner -------------------------------------------------------------------------------


class LogCleaner:
    """Cleans logs with a map of ``memory_bytes``; ``now_ms`` fixes the clock (tests, ``--now``)."""

    def __init__(self, memory_bytes: int = DEFAULT_MEMORY_BYTES, *, now_ms: int | None = None,
                 progress: Progress | None = None) -> None:
        self.offset_map = SkimpyOffsetMap(memory_bytes)
        self.now_ms = now_ms
        self.progress = progress

    def _now(self) -> int:
        import time

        return int(time.time() * 1000) if self.now_ms is None else self.now_ms

    def _progress(self, done: int, added: int = 0) -> None:
        if self.progress is not None:
            self.progress(done, added)

    # -- public
    def clean_log(self, log: Log, *, force: bool = True) -> CleanResult | None:
        """Clean ``log`` in as many passes as the map needs, up to the first uncleanable offset.

        ``force`` (an explicit request, ``klog compact``) cleans whatever the policy and dirty
        ratio; otherwise only a compacted log that :func:`needs_cleaning` is cleaned, and None is
        returned for any other.
        """
        if not log.writable:
            raise KlogError(f"log {log.dir} is open read-only; cleaning needs a writable open (it holds the lock)")
        now = self._now()
        stats = CleanerStats()
        bytes_before = log.size_in_bytes
        segments_before = len(log.segments)
        rng = cleanable_range(log, now, read_cleaner_offset(log))
        if not force and not needs_cleaning(log, now, rng):
            return None
        first_dirty = rng.first_dirty_offset
        end = first_dirty
        while True:
            if rng.first_uncleanable_offset <= rng.first_dirty_offset:
                end = max(end, rng.first_dirty_offset)
                if force and stats.passes == 0 and log.segments[0].base_offset < rng.first_dirty_offset:
                    # nothing dirty: an explicit request still recopies the clean section with an
                    # empty map, which removes tombstones and markers whose delete horizon passed
                    # (Kafka only does this when new dirty data triggers a cleaning)
                    self._progress(0, sum(s.size_in_bytes for s in log.segments
                                          if s.base_offset < rng.first_dirty_offset))
                    self._clean_pass(log, rng, now, stats, build_map=False)
                    stats.passes += 1
                break
            self._progress(0, rng.cleanable_bytes + sum(s.size_in_bytes for s in log.segments
                                                        if s.base_offset < rng.first_uncleanable_offset))
            end = self._clean_pass(log, rng, now, stats)
            stats.passes += 1
            maybe_crash("cleaner-checkpoint", partition=log.dir.name)
            write_cleaner_offset(log, end)
            if end >= rng.first_uncleanable_offset:
                break
            rng = cleanable_range(log, now, end)
        return CleanResult(topic_partition_of(log), str(log.dir), first_dirty, end, bytes_before, log.size_in_bytes,
                           segments_before, len(log.segments), stats)

    def clean_logs(self, logs: Iterable[Log]) -> list[CleanResult]:
        """An automatic round over many logs (``grabFilthiestCompactedLog`` until none is left):
        the compacted logs that :func:`needs_cleaning`, dirtiest first."""
        now = self._now()
        candidates = []
        for log in logs:
            if not log.config.compact:
                continue
            rng = cleanable_range(log, now, read_cleaner_offset(log))
            if needs_cleaning(log, now, rng):
                candidates.append((rng.dirty_ratio, log))
        candidates.sort(key=lambda c: -c[0])
        out = []
        for _ratio, log in candidates:
            result = self.clean_log(log, force=False)
            if result is not None:
                out.append(result)
        return out

    # -- one pass (Cleaner.doClean)
    def _clean_pass(self, log: Log, rng: CleanableRange, now: int, stats: CleanerStats, *,
                    build_map: bool = True) -> int:
        upper = rng.first_uncleanable_offset
        if build_map:
            self._build_offset_map(log, rng.first_dirty_offset, upper, stats)
        else:
            self.offset_map.clear()
            self.offset_map.update_latest_offset(rng.first_dirty_offset - 1)
        end = self.offset_map.latest_offset + 1
        if build_map and end <= rng.first_dirty_offset:
            raise KlogError(f"offset map of {self.offset_map.memory_bytes} bytes ({self.offset_map.max_entries} keys) "
                            f"is full before the first batch at offset {rng.first_dirty_offset} of {log.dir} is "
                            "mapped; expected memory for at least one batch's keys (raise --memory)")
        maybe_crash("cleaner-map-built", partition=log.dir.name)
        txn = CleanedTransactionMetadata()
        last_records = {pid: _LastRecord(e.last_offset if e.last_offset >= 0 else None, e.epoch)
                        for pid, e in log.producer_state.producers.items()}
        groups = group_segments_by_size(log, [s for s in log.segments if s.base_offset < end],
                                        log.config.segment_size, log.config.segment_index_bytes, upper)
        aborted = _all_aborted(log)
        for gi, group in enumerate(groups):
            self._clean_segments(log, group, gi, txn, aborted, last_records, upper, now, stats)
            stats.groups += 1
        return end

    def _build_offset_map(self, log: Log, start: int, end: int, stats: CleanerStats) -> None:
        """``buildOffsetMap``: latest offset per key digest over ``[start, end)``, until full.

        Unlike Kafka, batches at or past ``end`` (a last stable offset inside a segment) are not
        mapped: an open transaction's keys must not remove older committed records.
        """
        m = self.offset_map
        m.clear()
        txn = CleanedTransactionMetadata()
        txn.add_aborted_transactions(_aborted_between(_all_aborted(log), start, end))
        legacy_views: list[RecordsView] = []
        dirty = _segments_between(log, start, end)
        for i, seg in enumerate(dirty):
            next_start = dirty[i + 1].base_offset if i + 1 < len(dirty) else end
            position = seg.offset_index.lookup(start).position if seg.base_offset <= start else 0
            done = 0
            stop = False
            for chunk in _chunks(seg.batches(position)):
                events: list[tuple[int, int]] = []  # (index into views or -1, batch last offset), in log order
                mapped: list[DefaultRecordBatch] = []
                for batch in chunk:
                    if batch.base_offset >= end:
                        stop = True
                        break
                    done += batch.size_in_bytes
                    if isinstance(batch, DefaultRecordBatch) and batch.is_control:
                        txn.on_control_batch_read(batch)
                        events.append((-1, batch.last_offset))
                    elif txn.on_batch_read(batch):  # aborted: not mapped
                        events.append((-1, batch.last_offset))
                    elif isinstance(batch, DefaultRecordBatch):
                        events.append((len(mapped), batch.last_offset))
                        mapped.append(batch)
                    else:  # a legacy message set
                        events.append((-2 - len(legacy_views), batch.last_offset))
                        legacy_views.append(RecordsView.of_records(batch.records()))
                views = decode_views(mapped, with_headers=False)
                for index, last_offset in events:
                    view = views[index] if index >= 0 else (legacy_views[-2 - index] if index <= -2 else None)
                    if view is not None:
                        keyed = [(k, o) for o, k in zip(view.offsets, view.keys, strict=True)
                                 if k is not None and o >= start]
                        if m.try_put_all([k for k, _ in keyed], [o for _, o in keyed]):
                            stats.map_records += len(view)
                            if last_offset >= start:
                                m.update_latest_offset(last_offset)
                            continue
                        for off, key in zip(view.offsets, view.keys, strict=True):
                            if key is not None and off >= start:
                                if m.size >= m.max_entries:
                                    stats.map_bytes += done
                                    self._progress(done)
                                    return
                                m.put(key, off)
                            stats.map_records += 1
                    if last_offset >= start:
                        m.update_latest_offset(last_offset)
                legacy_views.clear()
                if stop:
                    break
            stats.map_bytes += done
            self._progress(done)
            m.update_latest_offset(next_start - 1)  # offset gaps: the range up to the next segment is covered

    # -- one group (Cleaner.cleanSegments + LocalLog.replaceSegments)
    def _clean_segments(self, log: Log, group: list[LogSegment], group_index: int, txn: CleanedTransactionMetadata,
                        aborted: list[AbortedTxn], last_records: dict[int, _LastRecord], upper: int, now: int, stats: CleanerStats) -> None:
        base = group[0].base_offset
        cleaned = CleanedSegment(log.dir, base, log.config.index_interval_bytes)
        txn.cleaned_index = cleaned.aborted
        changed_before = stats.batches_rebuilt + stats.batches_emptied + stats.batches_removed
        try:
            for i, seg in enumerate(group):
                seg_upper = group[i + 1].base_offset if i + 1 < len(group) else _segment_end(log, seg)
                txn.add_aborted_transactions(_aborted_between(aborted, seg.base_offset, seg_upper))
                self._clean_into(seg, cleaned, txn, last_records, upper, now, log.config.delete_retention_ms, stats)
                if i == 0:
                    maybe_crash("cleaner-cleaned-writing", group=group_index)
            cleaned.finish(group[-1].log_path.stat().st_mtime)
        except BaseException:
            cleaned.discard()
            raise
        finally:
            txn.cleaned_index = None
        maybe_crash("cleaner-cleaned-written", group=group_index)
        stats.bytes_written += cleaned.size
        unchanged = stats.batches_rebuilt + stats.batches_emptied + stats.batches_removed == changed_before
        if unchanged and len(group) == 1 and cleaned.aborted == group[0].txn_index.read():
            cleaned.discard()  # every batch copied byte for byte into one segment: nothing to replace
            return
        self._swap_in(log, cleaned, group, group_index)

    def _clean_into(self, seg: LogSegment, dest: CleanedSegment, txn: CleanedTransactionMetadata,
                    last_records: dict[int, _LastRecord], upper: int, now: int, delete_retention_ms: int,
                    stats: CleanerStats) -> None:
        m = self.offset_map
        done = 0
        for chunk in _chunks(seg.batches()):
            data = [b for b in chunk if isinstance(b, DefaultRecordBatch) and not b.is_control]
            views = iter(decode_views(data, with_headers=True))
            for batch in chunk:
                stats.batches_read += 1
                stats.bytes_read += batch.size_in_bytes
                done += batch.size_in_bytes
                if done >= 1 << 20:
                    self._progress(done)
                    done = 0
                if not isinstance(batch, DefaultRecordBatch):  # legacy message set: copied unchanged
                    txn.on_batch_read(batch)
                    n = len(batch.records())
                    stats.records_read += n
                    stats.records_retained += n
                    stats.batches_copied += 1
                    dest.append(bytes(batch.buffer), batch.last_offset, batch.max_timestamp)
                    continue
                view = RecordsView.of_records(batch.records()) if batch.is_control else next(views)
                out = self._filter_batch(batch, view, m, txn, last_records, upper, now, delete_retention_ms, stats)
                if out is not None:
                    dest.append(out, batch.last_offset, _MAX_TIMESTAMP.unpack_from(out, MAX_TIMESTAMP_OFFSET)[0])
        self._progress(done)

    def _filter_batch(self, batch: DefaultRecordBatch, view: RecordsView, m: SkimpyOffsetMap,
                      txn: CleanedTransactionMetadata,
                      last_records: dict[int, _LastRecord], upper: int, now: int, delete_retention_ms: int,
                      stats: CleanerStats) -> bytes | memoryview | None:
        """The cleaner's ``RecordFilter`` through ``MemoryRecords.filterTo``: the bytes to keep, or None."""
        is_control = batch.is_control
        can_discard = txn.on_control_batch_read(batch) if is_control else txn.on_batch_read(batch)
        horizon = batch.delete_horizon_ms
        if is_control:
            discard_records = can_discard and horizon is not None and horizon <= now
        else:
            discard_records = can_discard
        pid = batch.producer_id
        last = last_records.get(pid)
        last_of_producer = last is not None and (
            batch.last_offset == last.last_data_offset if last.last_data_offset is not None
            else is_control and batch.producer_epoch == last.producer_epoch)
        if pid >= 0 and last_of_producer:
            retain_empty, delete = True, False
        elif batch.next_offset == upper:  # the last batch of the cleaning round keeps the last offset
            retain_empty, delete = True, False
        else:
            retain_empty, delete = False, discard_records
        marker_for_empty_txn = can_discard and is_control
        if delete:
            stats.records_read += len(view)
            stats.batches_removed += 1
            if is_control:
                stats.markers_dropped += 1
            else:
                stats.aborted_batches_dropped += 1
            return None
        stats.records_read += len(view)
        offsets, keys, tombs = view.offsets, view.keys, view.tombstones
        if discard_records:
            retained: list[int] = []
        elif is_control:
            retained = list(range(len(view)))
        else:
            # shouldRetainRecord: past the map's end → keep; no key → drop (counted); else the
            # key's latest offset, and a tombstone only within its delete horizon
            latest = m.latest_offset
            found = m.get_all(keys)
            deletes_retained = horizon is None or now < horizon
            retained = [i for i, (off, key, tomb, f) in enumerate(zip(offsets, keys, tombs, found, strict=True))
                        if off > latest or (key is not None and off >= f and (deletes_retained or not tomb))]
            stats.keyless_dropped += sum(1 for off, key in zip(offsets, keys, strict=True)
                                         if key is None and off <= latest)
        write_original = len(retained) == len(view)
        kept_tombstones = sum(1 for i in retained if tombs[i])
        tombstones = kept_tombstones > 0
        if not is_control:
            stats.tombstones_read += sum(tombs)
            stats.tombstones_kept += kept_tombstones
        stats.records_retained += len(retained)
        if retained:
            need_horizon = (tombstones or marker_for_empty_txn) and horizon is None
            if write_original and not need_horizon:
                stats.batches_copied += 1
                return batch.buffer
            stats.batches_rebuilt += 1
            return _rebuild(batch, [view.record(i) for i in retained],
                            now + delete_retention_ms if need_horizon else horizon)
        if retain_empty:
            stats.batches_emptied += 1
            return _empty_header(batch)
        stats.batches_removed += 1
        if is_control:
            stats.markers_dropped += 1
        elif can_discard:
            stats.aborted_batches_dropped += 1
        return None

    # -- the swap (LocalLog.replaceSegments)
    def _swap_in(self, log: Log, cleaned: CleanedSegment, old: list[LogSegment], group_index: int) -> None:
        d = log.dir
        for suffix in _RENAME_ORDER:
            src = cleaned.path(suffix, CLEANED_SUFFIX)
            if src.exists():
                os.replace(src, cleaned.path(suffix, SWAP_SUFFIX))
            if suffix == LOG_SUFFIX:
                maybe_crash("cleaner-swap-partial", group=group_index)
        _fsync_dir(d)
        maybe_crash("cleaner-swapped", group=group_index)
        positions = [log.segments.index(s) for s in old]
        for i, seg in enumerate(old):
            seg.close()
            prefix = filename_prefix(seg.base_offset)
            for suffix in _RENAME_ORDER:
                p = d / (prefix + suffix)
                if p.exists():
                    os.replace(p, d / (prefix + suffix + DELETED_SUFFIX))
            _fsync_dir(d)
            maybe_crash("cleaner-old-deleted", group=group_index, segment=i)
        for suffix in _RENAME_ORDER:
            src = cleaned.path(suffix, SWAP_SUFFIX)
            if src.exists():
                os.replace(src, cleaned.path(suffix))
            if suffix == LOG_SUFFIX:
                maybe_crash("cleaner-replaced-partial", group=group_index)
        _fsync_dir(d)
        maybe_crash("cleaner-replaced", group=group_index)
        for seg in old:
            prefix = filename_prefix(seg.base_offset)
            for suffix in _FILE_SUFFIXES:
                (d / (prefix + suffix + DELETED_SUFFIX)).unlink(missing_ok=True)
        new_seg = LogSegment(d, cleaned.base_offset, index_interval_bytes=log.config.index_interval_bytes,
                             max_index_size=log.config.segment_index_bytes, writable=False)
        first = positions[0]
        log.segments[first:positions[-1] + 1] = [new_seg]


def group_segments_by_size(log: Log, segments: list[LogSegment], max_size: int, max_index_size: int,
                           first_uncleanable_offset: int) -> list[list[LogSegment]]:
    """``groupSegmentsBySize``: consecutive segments whose summed log bytes fit ``segment.bytes``,
    summed index bytes fit ``segment.index.bytes`` and offsets fit an int from the group's base."""
    groups: list[list[LogSegment]] = []
    segs = list(segments)
    i = 0
    while i < len(segs):
        group = [segs[i]]
        log_size = segs[i].size_in_bytes
        index_size = segs[i].offset_index.size_in_bytes
        time_size = segs[i].time_index.size_in_bytes
        i += 1
        while i < len(segs):
            s = segs[i]
            nxt = segs[i + 1].base_offset if i + 1 < len(segs) else first_uncleanable_offset
            last_offset = nxt - 1
            if not (log_size + s.size_in_bytes <= max_size
                    and index_size + s.offset_index.size_in_bytes <= max_index_size
                    and time_size + s.time_index.size_in_bytes <= max_index_size
                    and (s.size_in_bytes == 0 or last_offset - group[0].base_offset <= INT32_MAX)):
                break
            group.append(s)
            log_size += s.size_in_bytes
            index_size += s.offset_index.size_in_bytes
            time_size += s.time_index.size_in_bytes
            i += 1
        groups.append(group)
    return groups


def iter_compacted_logs(logs: Iterable[Log]) -> Iterator[Log]:
    """The logs whose ``cleanup.policy`` includes ``compact``."""
    return (log for log in logs if log.config.compact)
