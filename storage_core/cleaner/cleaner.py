"""``LogCleaner``: one cleaning of a log (``Cleaner.doClean``, ``cleanSegments``, ``cleanInto``,
``LocalLog.replaceSegments``) and what decides it (``LogCleanerManager``). See the package doc."""

from __future__ import annotations

import os
import struct
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from storage_core.cleaner.cleaned_segment import CleanedSegment, empty_header, rebuild_batch
from storage_core.cleaner.offset_map import DEFAULT_MEMORY_BYTES, SkimpyOffsetMap
from storage_core.cleaner.records_view import RecordsView, chunks, decode_views
from storage_core.cleaner.transactions import CleanedTransactionMetadata, aborted_between, all_aborted
from storage_core.errors import KlogError, storage_error
from storage_core.faults import maybe_crash
from storage_core.files import (
    CLEANED_SUFFIX,
    CLEANER_OFFSET_CHECKPOINT,
    DELETED_SUFFIX,
    LOG_SUFFIX,
    SEGMENT_SUFFIXES,
    SWAP_SUFFIX,
    filename_prefix,
)
from storage_core.limits import INT32_MAX
from storage_core.log.checkpoint import OffsetCheckpointFile, fsync_dir
from storage_core.log.log import Log
from storage_core.log.segment import LogSegment
from storage_core.log.topic_partition import TopicPartition
from storage_core.log.txn_index import AbortedTxn
from storage_core.record.records import DefaultRecordBatch

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
        aborted = all_aborted(log)
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
        txn.add_aborted_transactions(aborted_between(all_aborted(log), start, end))
        legacy_views: list[RecordsView] = []
        dirty = _segments_between(log, start, end)
        for i, seg in enumerate(dirty):
            next_start = dirty[i + 1].base_offset if i + 1 < len(dirty) else end
            position = seg.offset_index.lookup(start).position if seg.base_offset <= start else 0
            done = 0
            stop = False
            for chunk in chunks(seg.batches(position)):
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
        m = self.offset_map
        done = 0
        for chunk in chunks(seg.batches()):
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
            return rebuild_batch(batch, [view.record(i) for i in retained],
                            now + delete_retention_ms if need_horizon else horizon)
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
        # the old files stay as *.deleted for file.delete.delay.ms: a read-only open that was
        # reading them keeps its view (LogSegment.current_log_path); removed by a later cleaning,
        # retention or writable open
        log.remove_deleted_files()
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
