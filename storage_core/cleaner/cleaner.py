"""``LogCleaner``: one cleaning of a log (``Cleaner.doClean``, ``cleanSegments``, ``cleanInto``,
``LocalLog.replaceSegments``) and what decides it (``LogCleanerManager``). See the package doc."""

from __future__ import annotations

import os
import struct
import threading
import time
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from storage_core.cleaner.cleaned_segment import CleanedSegment, empty_header, rebuild_batch, rebuilt_from_area
from storage_core.cleaner.offset_map import DEFAULT_MEMORY_BYTES, OffsetMap, SkimpyOffsetMap, new_offset_map
from storage_core.cleaner.transactions import CleanedTransactionMetadata, aborted_between, all_aborted
from storage_core.errors import InvalidRecordError, KlogError, storage_error
from storage_core.faults import maybe_crash
from storage_core.files import (
    CLEANED_SUFFIX,
    CLEANER_OFFSET_CHECKPOINT,
    DELETED_SUFFIX,
    LOG_SUFFIX,
    SEGMENT_SUFFIXES,
    SNAPSHOT_SUFFIX,
    SWAP_SUFFIX,
    filename_prefix,
)
from storage_core.limits import INT32_MAX
from storage_core.log.checkpoint import OffsetCheckpointFile, fsync_dir
from storage_core.log.log import Log
from storage_core.log.segment import LogSegment
from storage_core.log.topic_partition import TopicPartition
from storage_core.log.txn_index import AbortedTxn
from storage_core.record.file_records import AnyBatch
from storage_core.record.kernel import native_kernel
from storage_core.record.records import DefaultRecordBatch, Record, TimestampType
from storage_core.workers import ordered_map, pool_size

MAX_TIMESTAMP_OFFSET = 35  # maxTimestamp in the v2 batch header (records.BATCH_HEADER)
_MAX_TIMESTAMP = struct.Struct(">q")


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


#: Within :meth:`LogCleaner.deferred_checkpoints`, a dir's checkpoint is written again once the
#: time since its last write is this many times what that write took: the writes cost at most
#: about a tenth of the run, however many partitions are cleaned.
CHECKPOINT_COST_RATIO = 10


class _CleanerCheckpoints:
    """Each log dir's ``cleaner-offset-checkpoint`` as a :class:`LogCleaner` knows it.

    Kafka's ``LogCleanerManager.updateCheckpoints`` reads the whole file and writes it whole after
    every cleaning: over N partitions of a dir that is N² entries parsed and written (2,000
    partitions: 43 s of 45 for ``klog compact``). Here each dir's file is parsed once and kept
    (parsed again only if another writer replaced it: a stat per use tells), and an update is
    written at once, or, while deferred, when due (:data:`CHECKPOINT_COST_RATIO`) and at the end.
    An update lost to a crash only makes the next run clean that partition again, which leaves it
    as it is (what Kafka's cleaner does after a crash between a swap and its checkpoint).

    Shared by the cleaners of one run's threads (:meth:`LogCleaner.for_thread`): one lock guards
    the offsets and the writes (each dir's file is written whole, sorted, through one temp name)."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        #: dir -> (the file's identity when read or written by us, its offsets)
        self._dirs: dict[Path, tuple[tuple[int, int, int] | None, dict[TopicPartition, int]]] = {}
        self._pending: dict[Path, dict[TopicPartition, int]] = {}
        self._written: dict[Path, tuple[float, float]] = {}  # dir -> (when the last write ended, what it took)
        self.deferred = False

    @staticmethod
    def _identity(path: Path) -> tuple[int, int, int] | None:
        try:
            st = path.stat()
        except FileNotFoundError:
            return None
        return (st.st_ino, st.st_size, st.st_mtime_ns)

    def offsets(self, log_dir: Path) -> dict[TopicPartition, int]:
        with self.lock:
            return self._offsets(log_dir)

    def _offsets(self, log_dir: Path) -> dict[TopicPartition, int]:
        path = log_dir / CLEANER_OFFSET_CHECKPOINT
        identity = self._identity(path)
        known = self._dirs.get(log_dir)
        if known is None or known[0] != identity:
            offsets = OffsetCheckpointFile(path).read()
            offsets.update(self._pending.get(log_dir, {}))  # ours, not yet written, win
            self._dirs[log_dir] = known = (identity, offsets)
        return known[1]

    def get(self, log: Log) -> int | None:
        tp = topic_partition_of(log)
        if tp is None:
            return None
        with self.lock:
            return self._offsets(log.dir.parent).get(tp)

    def put(self, log: Log, offset: int) -> None:
        tp = topic_partition_of(log)
        if tp is None:
            return
        log_dir = log.dir.parent
        with self.lock:
            self._offsets(log_dir)[tp] = offset
            self._pending.setdefault(log_dir, {})[tp] = offset
            last = self._written.get(log_dir)
            if not self.deferred or last is None or time.monotonic() - last[0] >= CHECKPOINT_COST_RATIO * last[1]:
                self.flush(log_dir)

    def flush(self, log_dir: Path | None = None) -> None:
        """Write the pending updates of ``log_dir`` (default: every dir)."""
        with self.lock:
            self._flush(log_dir)

    def _flush(self, log_dir: Path | None) -> None:
        for d in [log_dir] if log_dir is not None else list(self._pending):
            if not self._pending.pop(d, None):
                continue
            started = time.monotonic()
            path = d / CLEANER_OFFSET_CHECKPOINT
            OffsetCheckpointFile(path).write(self._dirs[d][1])
            self._dirs[d] = (self._identity(path), self._dirs[d][1])
            ended = time.monotonic()
            self._written[d] = (ended, ended - started)


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


@dataclass(frozen=True, slots=True)
class _LastRecord:
    """``LastRecord``: a producer's last data offset (None: markers only) and epoch."""

    last_data_offset: int | None
    producer_epoch: int


# --- the cleaner -------------------------------------------------------------------------------


class LogCleaner:
    """Cleans logs with a map of ``memory_bytes``; ``now_ms`` fixes the clock (tests, ``--now``).

    With the native kernel (``native=None`` where it is built; ``native=False`` forces the
    pure-Python twins) the map is the kernel's ``OffsetMap`` and runs of plain batches (v2,
    uncompressed, neither control nor transactional) are mapped and recopied by the kernel
    (``map_run``, ``clean_run``) without a Python object per batch; every other batch goes through
    the same per-batch Python as without the kernel, with the kernel's record loops.
    """

    def __init__(self, memory_bytes: int = DEFAULT_MEMORY_BYTES, *, now_ms: int | None = None,
                 progress: Progress | None = None, native: bool | None = None) -> None:
        self.offset_map: OffsetMap = new_offset_map(memory_bytes, native=native)
        self._native: Any | None = None if isinstance(self.offset_map, SkimpyOffsetMap) else self.offset_map
        self._kernel: Any | None = native_kernel() if self._native is not None else None
        self.now_ms = now_ms
        self.progress = progress
        self._checkpoints = _CleanerCheckpoints()
        self._memory_bytes = memory_bytes
        self._native_wanted = native
        self._owner = threading.get_ident()
        self._threads = threading.local()

    def for_thread(self) -> LogCleaner:
        """This cleaner for the calling thread: itself on the thread that made it; on any other, one
        cleaner per thread with its own offset map of the same size (a map is one thread's working
        memory) and this one's clock, progress and cleaner-offset checkpoints (shared, under their
        lock). So N threads cleaning N partitions use N maps: N times ``memory_bytes``."""
        if threading.get_ident() == self._owner:
            return self
        mine: LogCleaner | None = getattr(self._threads, "cleaner", None)
        if mine is None:
            mine = LogCleaner(self._memory_bytes, now_ms=self.now_ms, progress=self.progress,
                              native=self._native_wanted)
            mine._checkpoints = self._checkpoints
            self._threads.cleaner = mine
        return mine

    def _now(self) -> int:
        return int(time.time() * 1000) if self.now_ms is None else self.now_ms

    @contextmanager
    def deferred_checkpoints(self) -> Iterator[None]:
        """Clean many logs with the cleaner-offset checkpoints written when due, not after each log,
        and every pending update written on the way out (:class:`_CleanerCheckpoints`)."""
        self._checkpoints.deferred = True
        try:
            yield
        finally:
            self._checkpoints.deferred = False
            self._checkpoints.flush()

    def cleaner_offset(self, log: Log) -> int | None:
        """The log's offset in its dir's ``cleaner-offset-checkpoint``, with this cleaner's updates."""
        return self._checkpoints.get(log)

    def _progress(self, done: int, added: int = 0) -> None:
        if self.progress is not None:
            with self._checkpoints.lock:  # one report at a time, from whichever thread cleans
                self.progress(done, added)

    # -- public
    def clean_log(self, log: Log, *, force: bool = True) -> CleanResult | None:
        """Clean ``log`` in as many passes as the map needs, up to the first uncleanable offset.

        ``force`` (an explicit request, ``klog compact``) cleans whatever the policy and dirty
        ratio; otherwise only a compacted log that :func:`needs_cleaning` is cleaned, and None is
        returned for any other. A write that fails (disk full, read-only file system) raises
        :class:`StorageError`; the log keeps its old contents for the group being written (its
        ``.cleaned`` files are removed) and the new ones for the groups already swapped in.
        """
        try:
            return self._clean_log(log, force=force)
        except OSError as exc:
            if not any(log.dir.glob("*" + SWAP_SUFFIX)):  # no swap under way: the .cleaned files are only copies
                for p in log.dir.glob("*" + CLEANED_SUFFIX):
                    p.unlink(missing_ok=True)
            raise storage_error(exc, "cleaning log", log.dir) from exc

    def _clean_log(self, log: Log, *, force: bool) -> CleanResult | None:
        if not log.writable:
            raise KlogError(f"log {log.dir} is open read-only; cleaning needs a writable open (it holds the lock)")
        now = self._now()
        stats = CleanerStats()
        bytes_before = log.size_in_bytes
        segments_before = len(log.segments)
        rng = cleanable_range(log, now, self._checkpoints.get(log))
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
            self._checkpoints.put(log, end)
            if end >= rng.first_uncleanable_offset:
                break
            rng = cleanable_range(log, now, end)
        return CleanResult(topic_partition_of(log), str(log.dir), first_dirty, end, bytes_before, log.size_in_bytes,
                           segments_before, len(log.segments), stats)

    def clean_logs(self, logs: Iterable[Log], *, workers: int | None = 1) -> list[CleanResult]:
        """An automatic round over many logs (``grabFilthiestCompactedLog`` until none is left):
        the compacted logs that :func:`needs_cleaning`, dirtiest first; ``workers`` cleans that many
        at once (None: :func:`~storage_core.workers.pool_size`'s default), each thread with its own
        offset map (:meth:`for_thread`), the results in the same order."""
        now = self._now()
        candidates = []
        for log in logs:
            if not log.config.compact:
                continue
            rng = cleanable_range(log, now, self._checkpoints.get(log))
            if needs_cleaning(log, now, rng):
                candidates.append((rng.dirty_ratio, log))
        candidates.sort(key=lambda c: -c[0])
        out = []
        n = 1 if workers == 1 else pool_size(workers, len(candidates))
        with self.deferred_checkpoints():
            for result in ordered_map(lambda c: self.for_thread().clean_log(c[1], force=False), candidates, n,
                                      window=n):
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
        aborted = all_aborted(log)
        for gi, group in enumerate(groups):
            self._clean_segments(log, group, gi, txn, aborted, last_records, upper, now, stats)
            stats.groups += 1
        return end

    def _build_offset_map(self, log: Log, start: int, end: int, stats: CleanerStats) -> None:
        """``buildOffsetMap``: latest offset per key digest over ``[start, end)``, until full.

        Unlike Kafka, batches at or past ``end`` (a last stable offset inside a segment) are not
        mapped: an open transaction's keys must not remove older committed records. When the map
        fills in a batch, the pass ends before that batch (Kafka ends it at the last record put).
        """
        m = self.offset_map
        m.clear()
        txn = CleanedTransactionMetadata()
        txn.add_aborted_transactions(aborted_between(all_aborted(log), start, end))
        dirty = _segments_between(log, start, end)
        for i, seg in enumerate(dirty):
            next_start = dirty[i + 1].base_offset if i + 1 < len(dirty) else end
            position = seg.offset_index.lookup(start).position if seg.base_offset <= start else 0
            run = _MapRun(self._kernel, self._native, start, end, stats) if self._native is not None else None
            done = 0
            full = False
            for batch in seg.batch_runs(run, position) if run is not None else seg.batches(position):
                if batch.base_offset >= end:
                    break
                done += batch.size_in_bytes
                full = self._map_batch(batch, txn, start, stats)
                if full:
                    break
                if batch.last_offset >= start:
                    m.update_latest_offset(batch.last_offset)
            if run is not None:
                done += run.bytes
                full = full or run.full
            stats.map_bytes += done
            self._progress(done)
            if full:
                return
            m.update_latest_offset(next_start - 1)  # offset gaps: the range up to the next segment is covered

    def _map_batch(self, batch: AnyBatch, txn: CleanedTransactionMetadata, start: int, stats: CleanerStats) -> bool:
        """One batch into the map (not its latest offset); True if the map filled in it."""
        if isinstance(batch, DefaultRecordBatch) and batch.is_control:
            txn.on_control_batch_read(batch)
            return False
        if txn.on_batch_read(batch):  # aborted: not mapped
            return False
        if self._native is not None and isinstance(batch, DefaultRecordBatch):
            try:
                records, full = self._native.map_records(batch.records_payload(), batch.records_count,
                                                         batch.base_offset, start)
            except InvalidRecordError:
                batch.records()  # raises it with the batch's file and position
                raise
            stats.map_records += records
            return bool(full)
        return map_records(self.offset_map, batch.records(), start, stats)

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
                txn.add_aborted_transactions(aborted_between(aborted, seg.base_offset, seg_upper))
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
        done = 0
        if self._native is not None:
            stops = {r.last_data_offset for r in last_records.values() if r.last_data_offset is not None}
            stops.add(upper - 1)
            run = _CleanRun(self._native, dest, now, delete_retention_ms, array("q", sorted(stops)), stats,
                            self._progress)
            batches: Iterable[AnyBatch] = seg.batch_runs(run)
        else:
            batches = seg.batches()
        for batch in batches:
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
            out = self._filter_batch(batch, txn, last_records, upper, now, delete_retention_ms, stats)
            if out is not None:
                dest.append(out, batch.last_offset, _MAX_TIMESTAMP.unpack_from(out, MAX_TIMESTAMP_OFFSET)[0])
        self._progress(done)

    def _select(self, batch: DefaultRecordBatch, deletes_retained: bool) -> _Selection:
        if self._native is not None:
            return _NativeSelection(batch, self._kernel, self._native, deletes_retained)
        return _PySelection(batch, self.offset_map, deletes_retained)

    def _filter_batch(self, batch: DefaultRecordBatch, txn: CleanedTransactionMetadata,
                      last_records: dict[int, _LastRecord], upper: int, now: int, delete_retention_ms: int,
                      stats: CleanerStats) -> bytes | memoryview | None:
        """The cleaner's ``RecordFilter`` through ``MemoryRecords.filterTo``: the bytes to keep, or None.

        The kernel's ``clean_run`` does the same for the batches it takes (never a control or
        transactional batch, the last batch of a producer or of the cleaned range)."""
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
        control_records: list[Record] = []
        selection: _Selection | None = None
        if is_control:
            control_records = batch.records()
            count = len(control_records)
        else:
            selection = self._select(batch, horizon is None or now < horizon)
            count = selection.count
        stats.records_read += count
        if delete:
            stats.batches_removed += 1
            if is_control:
                stats.markers_dropped += 1
            else:
                stats.aborted_batches_dropped += 1
            return None
        if selection is None:  # a control batch: all or nothing
            retained = 0 if discard_records else count
            kept_tombstones = sum(1 for r in control_records if r.value is None) if retained else 0
        else:
            retained = 0 if discard_records else selection.retained
            kept_tombstones = 0 if discard_records else selection.tombstones_kept
            if not discard_records:
                stats.keyless_dropped += selection.keyless_dropped
            stats.tombstones_read += selection.tombstones_read
            stats.tombstones_kept += kept_tombstones
        stats.records_retained += retained
        if retained:
            need_horizon = (kept_tombstones > 0 or marker_for_empty_txn) and horizon is None
            if retained == count and not need_horizon:
                stats.batches_copied += 1
                return batch.buffer
            stats.batches_rebuilt += 1
            new_horizon = now + delete_retention_ms if need_horizon else horizon
            if selection is None:
                return rebuild_batch(batch, control_records, new_horizon)
            return selection.rebuild(new_horizon)
        if retain_empty:
            stats.batches_emptied += 1
            return empty_header(batch)
        stats.batches_removed += 1
        if is_control:
            stats.markers_dropped += 1
        elif can_discard:
            stats.aborted_batches_dropped += 1
        return None

    # -- the swap (LocalLog.replaceSegments)
    def _swap_in(self, log: Log, cleaned: CleanedSegment, old: list[LogSegment], group_index: int) -> None:
        d = log.dir
        for suffix in SEGMENT_SUFFIXES:
            src = cleaned.path(suffix, CLEANED_SUFFIX)
            if src.exists():
                os.replace(src, cleaned.path(suffix, SWAP_SUFFIX))
            if suffix == LOG_SUFFIX:
                maybe_crash("cleaner-swap-partial", group=group_index)
        fsync_dir(d)
        maybe_crash("cleaner-swapped", group=group_index)
        positions = [log.segments.index(s) for s in old]
        for i, seg in enumerate(old):
            seg.close()
            prefix = filename_prefix(seg.base_offset)
            for suffix in SEGMENT_SUFFIXES:
                p = d / (prefix + suffix)
                if p.exists():
                    os.replace(p, d / (prefix + suffix + DELETED_SUFFIX))
            fsync_dir(d)
            maybe_crash("cleaner-old-deleted", group=group_index, segment=i)
        for suffix in SEGMENT_SUFFIXES:
            src = cleaned.path(suffix, SWAP_SUFFIX)
            if src.exists():
                os.replace(src, cleaned.path(suffix))
            if suffix == LOG_SUFFIX:
                maybe_crash("cleaner-replaced-partial", group=group_index)
        fsync_dir(d)
        maybe_crash("cleaner-replaced", group=group_index)
        # the producer snapshots of the segments gone (all but the first, whose base the cleaned
        # segment keeps) go too, as *.deleted (UnifiedLog.replaceSegments -> deleteProducerSnapshots)
        for seg in old:
            snapshot = d / (filename_prefix(seg.base_offset) + SNAPSHOT_SUFFIX)
            if seg.base_offset != cleaned.base_offset and snapshot.exists():
                os.replace(snapshot, snapshot.with_name(snapshot.name + DELETED_SUFFIX))
        # the old files stay as *.deleted for file.delete.delay.ms: a read-only open that was
        # reading them keeps its view (LogSegment.current_log_path); removed by a later cleaning,
        # retention or writable open
        log.remove_deleted_files()
        new_seg = LogSegment(d, cleaned.base_offset, index_interval_bytes=log.config.index_interval_bytes,
                             max_index_size=log.config.segment_index_bytes, writable=False)
        first = positions[0]
        log.segments[first:positions[-1] + 1] = [new_seg]


# --- the record rules, one twin per implementation ----------------------------------------------


def should_retain_record(offset: int, key: bytes | None, tombstone: bool, key_offset: int, latest_offset: int,
                         deletes_retained: bool) -> bool:
    """``shouldRetainRecord`` (the cleaner's ``RecordFilter``; the C twin is ``should_retain`` in
    ``_kernel_src/cleaner.c``): a record past the map's latest offset is kept; one without a key is dropped; a
    keyed record is kept if no later offset of its key was mapped (``key_offset``: the map's
    offset for it, -1 if none), and a tombstone only while its batch's delete horizon allows."""
    if offset > latest_offset:
        return True
    if key is None:
        return False
    return offset >= key_offset and (deletes_retained or not tombstone)


def map_records(m: OffsetMap, records: Sequence[Record], start: int, stats: CleanerStats) -> bool:
    """Put the keyed records at or past ``start``, in order, while the map has room
    (``buildOffsetMapForSegment``; the C twin is ``om_map_records``); True if it filled first."""
    if isinstance(m, SkimpyOffsetMap):
        keyed = [r for r in records if r.key is not None and r.offset >= start]
        if m.try_put_all([r.key for r in keyed if r.key is not None], [r.offset for r in keyed]):
            stats.map_records += len(records)
            return False
    for r in records:
        if r.key is not None and r.offset >= start:
            if m.size >= m.max_entries:
                return True
            m.put(r.key, r.offset)
        stats.map_records += 1
    return False


class _Selection:
    """:func:`should_retain_record` over a data batch's records: which it keeps, the counts, and
    the batch rebuilt from the kept records."""

    count: int
    retained: int
    tombstones_read: int
    tombstones_kept: int
    keyless_dropped: int

    def rebuild(self, delete_horizon_ms: int | None) -> bytes:
        raise NotImplementedError


class _PySelection(_Selection):
    def __init__(self, batch: DefaultRecordBatch, m: OffsetMap, deletes_retained: bool) -> None:
        self.batch = batch
        self.records = batch.records()
        latest = m.latest_offset
        found = (m.get_all([r.key if r.offset <= latest else None for r in self.records])
                 if isinstance(m, SkimpyOffsetMap) else
                 [m.get(r.key) if r.key is not None and r.offset <= latest else -1 for r in self.records])
        self.keep = [should_retain_record(r.offset, r.key, r.value is None, f, latest, deletes_retained)
                     for r, f in zip(self.records, found, strict=True)]
        self.count = len(self.records)
        self.retained = sum(self.keep)
        self.tombstones_read = sum(1 for r in self.records if r.value is None)
        self.tombstones_kept = sum(1 for r, k in zip(self.records, self.keep, strict=True) if k and r.value is None)
        self.keyless_dropped = sum(1 for r in self.records if r.key is None and r.offset <= latest)

    def rebuild(self, delete_horizon_ms: int | None) -> bytes:
        return rebuild_batch(self.batch, [r for r, k in zip(self.records, self.keep, strict=True) if k],
                             delete_horizon_ms)


class _NativeSelection(_Selection):
    def __init__(self, batch: DefaultRecordBatch, kernel: Any, m: Any, deletes_retained: bool) -> None:
        self.batch = batch
        self.kernel = kernel
        self.area = batch.records_payload()
        try:
            (self.keep, self.retained, self.tombstones_read, self.tombstones_kept,
             self.keyless_dropped) = m.select(self.area, batch.records_count, batch.base_offset, deletes_retained)
        except InvalidRecordError:
            batch.records()  # raises it with the batch's file and position
            raise
        self.count = batch.records_count

    def rebuild(self, delete_horizon_ms: int | None) -> bytes:
        b = self.batch
        lat = b.max_timestamp if b.timestamp_type == TimestampType.LOG_APPEND_TIME else None
        built = self.kernel.retained_records(
            self.area, b.records_count, b.base_offset, b.base_timestamp, lat, self.keep, delete_horizon_ms)
        if built is None:  # what only the Python builder decides (a header key that is not UTF-8, say)
            return rebuild_batch(b, [r for r, k in zip(b.records(), self.keep, strict=True) if k], delete_horizon_ms)
        area, n, base_ts, max_ts = built
        return rebuilt_from_area(b, area, n, base_ts, max_ts, delete_horizon_ms)


class _MapRun:
    """The kernel's ``map_run`` as a :data:`~storage_core.record.file_records.BatchRun`."""

    def __init__(self, kernel: Any, m: Any, start: int, end: int, stats: CleanerStats) -> None:
        self.m, self.start, self.end, self.stats = m, start, end, stats
        self.bytes = 0
        self.full = False
        self._full_code = kernel.CLEAN_FULL

    def __call__(self, data: memoryview, pos: int) -> tuple[int, int]:
        pos, why, records, nbytes = self.m.map_run(data, pos, self.start, self.end)
        self.stats.map_records += records
        self.bytes += nbytes
        self.full = why == self._full_code
        return pos, why


class _CleanRun:
    """The kernel's ``clean_run`` as a :data:`~storage_core.record.file_records.BatchRun`: the
    batches it keeps go to ``dest``, its counts to ``stats``, the bytes it read to ``progress``."""

    def __init__(self, m: Any, dest: CleanedSegment, now: int, delete_retention_ms: int, stops: array[int],
                 stats: CleanerStats, progress: Callable[[int], None]) -> None:
        self.m, self.dest, self.now, self.retention, self.stops, self.stats = m, dest, now, delete_retention_ms, stops, stats
        self.progress = progress

    def __call__(self, data: memoryview, pos: int) -> tuple[int, int]:
        pos, why, out, meta, counts = self.m.clean_run(data, pos, self.now, self.retention, self.stops)
        if len(out):
            self.dest.append_many(out, meta)
        s = self.stats
        (batches, nbytes, records, retained, keyless, tombs_read, tombs_kept, copied, rebuilt, removed) = counts
        s.batches_read += batches
        s.bytes_read += nbytes
        s.records_read += records
        s.records_retained += retained
        s.keyless_dropped += keyless
        s.tombstones_read += tombs_read
        s.tombstones_kept += tombs_kept
        s.batches_copied += copied
        s.batches_rebuilt += rebuilt
        s.batches_removed += removed
        if nbytes:
            self.progress(nbytes)
        return pos, why


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
