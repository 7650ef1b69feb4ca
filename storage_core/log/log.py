"""A partition's log: its segments by base offset, read and written (``LocalLog``, ``UnifiedLog``).

Opening a partition directory is :mod:`storage_core.log.loader`'s (``LogLoader``): settling
interrupted deletes, cleanings and swaps, recovery, rebuilding missing indexes; the log keeps what
it found. From then on the log reads (by offset, seeking with the offset index; by timestamp;
``read_committed`` up to the last stable offset without aborted transactions), appends, rolls,
flushes, truncates and applies retention.

Appends assign offsets from the log end offset (the base offset is outside the CRC, so it is
patched in place) or, for producer-assigned offsets, check they only move forward; a batch larger
than ``max.message.bytes`` is refused; the active segment is rolled by Kafka's conditions.
Retention renames a segment's files ``*.deleted`` and removes them after ``file.delete.delay.ms``.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from storage_core.errors import (
    CorruptRecordError,
    InvalidTopicError,
    KlogError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
    StorageError,
    storage_error,
)
from storage_core.faults import maybe_crash
from storage_core.files import (
    DELETED_SUFFIX,
    SEGMENT_SUFFIXES,
    segment_file,
)
from storage_core.fs import as_path, writable_dir
from storage_core.log.cluster_metadata import cluster_metadata
from storage_core.log.config import LogConfig, MessageTimestampType
from storage_core.log.dir_state import LogDirState
from storage_core.log.loader import (
    LogLoader,
    open_segment,
    producer_state_at,
    refuse_symlinks,
    replay_aborted,
)
from storage_core.log.producer_state import ProducerStateManager, snapshot_files
from storage_core.log.segment import (
    FetchData,
    LogSegment,
    RollParams,
    SegmentScan,
    batches_between,
    segment_index_for,
)
from storage_core.log.time_index import TimestampOffset
from storage_core.log.topic_configs import config_for_topic, load_topic_configs
from storage_core.log.topic_partition import TopicPartition
from storage_core.log.txn_index import AbortedTxn
from storage_core.record.file_records import AnyBatch, iter_batches
from storage_core.record.records import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    MAGIC_VALUE_V2,
    TIMESTAMP_TYPE_MASK,
    DefaultRecordBatch,
    crc32c,
    set_base_offset,
)
from storage_core.record.txn_filter import filter_read_committed

#: ListOffsets special timestamps (``ListOffsetsRequest``).
EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3


def _now_ms() -> int:
    return int(time.time() * 1000)


def _stored_config(partition_dir: Path) -> LogConfig:
    """The config of a partition opened without one: Kafka's defaults, the internal-topic configs,
    the KRaft metadata and the ``klog-topic-configs.json`` of its log dir, by
    :mod:`storage_core.log.topic_configs`' precedence."""
    try:
        topic = TopicPartition.parse_dir_name(partition_dir.name).topic
    except InvalidTopicError:
        return LogConfig()
    log_dir = partition_dir.parent
    return config_for_topic(topic, load_topic_configs(log_dir), kraft=cluster_metadata(log_dir))


_F = TypeVar("_F", bound=Callable[..., Any])


def _writes(doing: str) -> Callable[[_F], _F]:
    """An ``OSError`` from a writing method (disk full, read-only file system) becomes a
    :class:`StorageError` naming the log and what was being done."""
    def deco(fn: _F) -> _F:
        @functools.wraps(fn)
        def wrapper(self: Log, *args: Any, **kwargs: Any) -> Any:
            try:
                return fn(self, *args, **kwargs)
            except OSError as exc:
                raise storage_error(exc, doing, self.dir) from exc
        return wrapper  # type: ignore[return-value]
    return deco


class Log:
    """The segments of one partition directory, read-only by default."""

    def __init__(self, directory: str | os.PathLike[str], config: LogConfig | None = None, *,
                 writable: bool = False, recovery_point: int = 0, log_start_offset: int | None = None,
                 had_clean_shutdown: bool = False, verify_tail: bool = True,
                 dir_state: LogDirState | None = None) -> None:
        """``dir_state``: the log dir's state of the query opening it (:mod:`storage_core.log.dir_state`),
        which says which segments an unfinished commit adds (read-only); None reads the journals.

        ``verify_tail=False`` (read-only, with ``had_clean_shutdown``) trusts the files as they
        are, without even checking the active segment's tail: for a reader that follows a log
        another process is appending to, which bounds what it reads by offsets it has seen and
        checks every batch's CRC when it reads it (the stream source)."""
        self.dir = writable_dir(directory) if writable else as_path(directory)
        if not self.dir.is_dir():
            raise KlogError(f"no such partition directory: {self.dir}")
        if writable:
            try:
                refuse_symlinks(self.dir)
            except OSError as exc:
                raise storage_error(exc, "listing the partition dir", self.dir) from exc
        self.config = config if config is not None else _stored_config(self.dir)
        self.writable = writable
        self._last_flush_ms = _now_ms()
        self._unflushed = 0
        self._leo: int | None = None
        try:
            loaded = LogLoader(self.dir, self.config, writable=writable, recovery_point=recovery_point,
                               had_clean_shutdown=had_clean_shutdown, verify_tail=verify_tail,
                               dir_state=dir_state).load()
        except OSError as exc:
            raise storage_error(exc, "opening the log for writing" if writable else "opening the log", self.dir) from exc
        self.segments: list[LogSegment] = loaded.segments
        self.recovery_point = loaded.recovery_point
        self.truncated_bytes = loaded.truncated_bytes  # what recovery cut, for reporting
        self.recovery_notes: list[str] = loaded.recovery_notes  # one line per segment recovery changed or left out
        # aborted transactions recomputed by a read-only recovery, by segment base (overrides .txnindex)
        self._memory_aborted: dict[int, list[AbortedTxn]] = loaded.memory_aborted
        self._producer_state: ProducerStateManager | None = loaded.producer_state
        self._unindexed_from = loaded.unindexed_from
        self._replay_from = loaded.replay_from
        first_base = self.segments[0].base_offset
        self._checkpoint_start = log_start_offset
        self.log_start_offset = max(first_base, log_start_offset or first_base)
        #: how many of the first segments are remote copies (:meth:`attach_remote`)
        self.remote_segments = 0
        #: whether the open made sure the last segment ends with a whole batch (False: a reader
        #: following a live log, which may meet a write in progress at the end)
        self.tail_verified = writable or not had_clean_shutdown or verify_tail
        #: read-only: segments (not the last) the open's recovery scan found damaged, by base
        #: offset; they are read as they are (:mod:`storage_core.log.lost` reports what is lost)
        self.damaged_scans: dict[int, SegmentScan] = loaded.damaged_scans
        #: where the cluster has committed this replica's records (:meth:`bound_to`), or None
        self._high_watermark: int | None = None
        self._bounded_state: ProducerStateManager | None = None

    def bound_to(self, high_watermark: int | None) -> None:
        """Reads end at ``high_watermark``, the partition's high watermark in its cluster
        (:mod:`storage_core.log.replicas`): records above it are on this replica but not yet
        committed, and no consumer is served them (``FetchIsolation.HIGH_WATERMARK``). None: the
        log end offset, as for a partition of one replica."""
        if self.writable and high_watermark is not None:
            raise KlogError(f"a high watermark bounds reads only; {self.dir} is open for writing")
        self._high_watermark = high_watermark
        self._bounded_state = None

    @property
    def high_watermark(self) -> int:
        """The offset up to which a consumer reads (``UnifiedLog.highWatermark``): the bound
        :meth:`bound_to` set, never past the log end offset; the log end offset when unbound."""
        leo = self.log_end_offset
        return leo if self._high_watermark is None else max(self.log_start_offset, min(self._high_watermark, leo))

    def attach_remote(self, segments: Sequence[LogSegment]) -> None:
        """Read a tiered partition's history: its remote segments (read-only copies, by base offset,
        from :mod:`storage_core.log.tiered`) go before the local ones, as the broker serves them.
        Where both hold an offset the local copy wins: remote segments based at or after the first
        local one are left out, and a remote segment running into the local range is read only up to
        the local base (a piece stops at the next segment's base). The log start offset becomes the
        log dir's checkpoint (the broker's ``logStartOffset``, which retention moves through the
        remote segments), or the first remote base when the checkpoint is lower or missing."""
        if self.writable:
            raise KlogError(f"remote segments are read-only history; {self.dir} is open for writing")
        older = [s for s in segments if s.base_offset < self.segments[self.remote_segments].base_offset]
        if not older:
            return
        self.segments[: self.remote_segments] = older
        self.remote_segments = len(older)
        first = older[0].base_offset
        self.log_start_offset = max(first, self._checkpoint_start or first)

    def _segment(self, base: int, writable: bool) -> LogSegment:
        return open_segment(self.dir, base, self.config, writable)

    # -- producer state and transactions
    def replay_transactions(self) -> None:
        """Run the transaction replay a read-only open left for when it is first needed (from the
        first segment it recovered, or the first it found without an ``.index``): the aborted
        transactions of those segments, which override their ``.txnindex``, and the producer state
        at the log end. Asking for either runs it; the planner runs it on its threads for a
        read_committed read. Once done, a call does nothing."""
        froms = [b for b in (self._replay_from, self._unindexed_from) if b is not None]
        if not froms:
            return
        self._replay_from = self._unindexed_from = None
        first = next((i for i, s in enumerate(self.segments) if s.base_offset >= min(froms)), None)
        if first is None:
            return
        found, state = replay_aborted(self.segments, first, notes=self.recovery_notes)
        self._memory_aborted.update(found)
        if self._producer_state is None:
            self._producer_state = state

    @property
    def producer_state(self) -> ProducerStateManager:
        self.replay_transactions()
        if self._producer_state is None:
            self._producer_state = producer_state_at(self.segments, self.log_end_offset, notes=self.recovery_notes)
        return self._producer_state

    @property
    def last_stable_offset(self) -> int:
        """First offset of the oldest ongoing transaction (never below the log start offset, as
        ``UnifiedLog.updateFirstUnstableOffset``), or the high watermark. Bound below the log end
        (:meth:`bound_to`), a transaction whose marker lies at or above the high watermark is still
        open for a consumer: ``ProducerStateManager`` keeps a completed transaction unstable until
        the high watermark passes its marker (``removeUnreplicatedTransactions``), so the producer
        state is the one at the high watermark."""
        hw = self.high_watermark
        if hw >= self.log_end_offset:
            first = self.producer_state.first_unstable_offset()
        else:
            if self._bounded_state is None:
                self.replay_transactions()
                self._bounded_state = producer_state_at(self.segments, hw, notes=self.recovery_notes)
            first = self._bounded_state.first_unstable_offset()
        return hw if first is None else min(hw, max(first, self.log_start_offset))

    def aborted_transactions(self, start_offset: int, end_offset: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping ``[start_offset, end_offset)`` (``collectAbortedTxns``)."""
        self.replay_transactions()
        out: list[AbortedTxn] = []
        for seg in self.segments[self._segment_for(start_offset):]:
            entries = self._memory_aborted.get(seg.base_offset)
            if entries is None:
                entries = seg.aborted_txns()
            out += [t for t in entries if t.last_offset >= start_offset and t.first_offset < end_offset]
        return sorted(out, key=lambda t: (t.first_offset, t.last_offset))

    # -- offsets
    @property
    def active_segment(self) -> LogSegment:
        return self.segments[-1]

    @property
    def log_end_offset(self) -> int:
        """The offset the next record gets; cached, kept up to date by appends and truncation."""
        if self._leo is None:
            # never below the active segment's base (its name says the log reached it): a segment
            # whose batches lie below its name is another's (storage_core.log.lost names it)
            self._leo = max(self.active_segment.read_next_offset(), self.active_segment.base_offset)
        return self._leo

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size_in_bytes for s in self.segments)

    def _segment_for(self, offset: int) -> int:
        return segment_index_for(self.segments, offset)

    # -- reading
    def batches(self, start_offset: int | None = None, end_offset: int | None = None, *,
                read_committed: bool = False) -> Iterator[AnyBatch]:
        """Batches holding offsets in ``[start_offset, end_offset)``, seeking with the offset index.

        With ``read_committed`` the read stops at the last stable offset and leaves out control
        batches and the batches of aborted transactions (``CompletedFetch``'s algorithm over the
        aborted transactions of ``.txnindex``); otherwise every batch is returned, control
        batches included (decoders drop their records).
        """
        start = self.log_start_offset if start_offset is None else start_offset
        leo = self.high_watermark
        end = leo if end_offset is None else end_offset
        if start < self.log_start_offset or start > leo:
            raise OffsetOutOfRangeError(f"offset {start} is outside [{self.log_start_offset}, {leo}] of {self.dir}")
        if not read_committed:
            yield from self._raw_batches(start, end)
            return
        end = min(end, self.last_stable_offset)
        yield from filter_read_committed(self._raw_batches(start, end), self.aborted_transactions(start, end),
                                         where=str(self.dir))

    def _raw_batches(self, start: int, end: int) -> Iterator[AnyBatch]:
        return batches_between(self.segments, start, end)

    def read(self, start_offset: int, max_bytes: int = 1 << 20) -> FetchData | None:
        for seg in self.segments[self._segment_for(start_offset):]:
            data = seg.read(start_offset, max_bytes)
            if data is not None:
                return data
        return None

    def offset_for_timestamp(self, timestamp: int) -> TimestampOffset | None:
        """ListOffsets: the first record at or after ``timestamp`` (or -2 earliest, -1 latest, -3 max)."""
        if timestamp == EARLIEST_TIMESTAMP:
            return TimestampOffset(-1, self.log_start_offset)
        if timestamp == LATEST_TIMESTAMP:
            return TimestampOffset(-1, self.log_end_offset)
        if timestamp == MAX_TIMESTAMP:
            best = max((s.max_timestamp_so_far for s in self.segments), key=lambda t: t.timestamp)
            return best if best.timestamp >= 0 else None
        # Kafka searches only the first segment whose largest timestamp reaches the target
        # (UnifiedLog.fetchOffsetByTimestamp); a segment whose late timestamp is an empty batch's
        # (emptied by compaction) answers nothing, and so does klog
        for seg in self.segments:
            if seg.largest_timestamp >= timestamp:
                return seg.find_offset_by_timestamp(timestamp, self.log_start_offset)
        return None

    # -- writing
    def _require_writable(self) -> None:
        if not self.writable:
            raise KlogError(f"log {self.dir} is open read-only")

    def append(self, records: bytes, *, assign_offsets: bool = True, now_ms: int | None = None) -> tuple[int, int]:
        """Append whole v2 batches; returns ``(first offset, last offset)`` of what was appended."""
        self._require_writable()
        now = _now_ms() if now_ms is None else now_ms
        walk = iter_batches(records)
        batches = list(walk)
        if walk.partial_tail is not None:
            raise CorruptRecordError(f"append of {len(records)} bytes ends with a partial batch at byte "
                                     f"{walk.partial_tail.position}")
        if not batches:
            raise KlogError("append needs at least one record batch")
        start_leo = self.log_end_offset
        try:
            return self._append_batches(batches, assign_offsets, now)
        except (OSError, KlogError) as exc:  # one call appends all of its batches or none
            self._abandon_append(start_leo, exc)
            if isinstance(exc, KlogError):
                raise
            raise storage_error(exc, "appending to the log", self.dir) from exc

    def _abandon_append(self, start_leo: int, exc: BaseException) -> None:
        """An append failed part way (disk full): remove what of it was written, so that the
        call has no effect (a retry writes its batches once)."""
        if self.log_end_offset <= start_leo:
            return  # nothing of it got in (a segment cuts back its own failed write)
        try:
            self.truncate_to(start_leo)
        except (OSError, KlogError) as undo:
            raise StorageError(f"appending to the log failed ({exc}) and cutting it back to offset {start_leo} "
                               f"failed too ({undo}); reopen the log writable: recovery cuts what is not whole",
                               path=self.dir) from undo

    def _append_batches(self, batches: list[AnyBatch], assign_offsets: bool, now: int) -> tuple[int, int]:
        for batch in batches:  # every batch is checked before any is written: a bad one appends nothing
            if not isinstance(batch, DefaultRecordBatch) or batch.magic != MAGIC_VALUE_V2:
                raise CorruptRecordError("klog writes record batches of magic 2 only", position=batch.position)
            batch.ensure_valid()
            if batch.size_in_bytes > self.config.max_message_bytes:
                raise RecordTooLargeError(f"batch of {batch.size_in_bytes} bytes is larger than max.message.bytes "
                                          f"({self.config.max_message_bytes})", position=batch.position)
        first = last = None
        for batch in batches:
            assert isinstance(batch, DefaultRecordBatch)
            raw = bytearray(batch.buffer)
            leo = self.log_end_offset
            if assign_offsets:
                set_base_offset(raw, leo)
                base = leo
            else:
                base = batch.base_offset
                if base < leo:
                    raise KlogError(f"producer-assigned offset {base} is below the log end offset {leo} of {self.dir}")
            last_off = base + batch.header.last_offset_delta
            max_ts = batch.max_timestamp
            if self.config.message_timestamp_type == MessageTimestampType.LOG_APPEND_TIME:
                raw[ATTRIBUTES_OFFSET + 1] |= TIMESTAMP_TYPE_MASK
                raw[35:43] = now.to_bytes(8, "big", signed=True)
                raw[CRC_OFFSET:CRC_OFFSET + 4] = crc32c(bytes(raw[ATTRIBUTES_OFFSET:])).to_bytes(4, "big")
                max_ts = now
            state = self.producer_state  # loaded before the append changes the log end
            self._maybe_roll(len(raw), max_ts, last_off, base, now)
            data = bytes(raw)
            self.active_segment.append(last_off, max_ts, last_off, data)
            maybe_crash("log-batch-written", partition=self.dir.name)
            self._leo = last_off + 1
            done = state.update(DefaultRecordBatch(data))
            if done is not None and done.is_aborted:
                self.active_segment.txn_index.append(
                    AbortedTxn(done.producer_id, done.first_offset, done.last_offset,
                               state.last_stable_offset_for(done)))
            first = base if first is None else first
            last = last_off
            self._unflushed += batch.records_count
        self._maybe_flush(now)
        assert first is not None and last is not None
        return first, last

    def _maybe_roll(self, size: int, max_ts: int, last_offset: int, base: int, now: int) -> None:
        seg = self.active_segment
        params = RollParams(self.config.segment_ms, self.config.segment_bytes, max_ts, last_offset, size, now)
        if seg.should_roll(params):
            self.roll(max(base, self.log_end_offset))

    @_writes("rolling a new segment")
    def roll(self, new_base: int | None = None) -> LogSegment:
        """Close the active segment for writes and start a new one at ``new_base`` (default: LEO)."""
        self._require_writable()
        base = self.log_end_offset if new_base is None else new_base
        old = self.active_segment
        if old.size_in_bytes == 0 and old.base_offset == base:
            return old
        state = self.producer_state
        old.on_become_inactive_segment()
        old.flush()
        old.close()
        maybe_crash("log-roll-old-closed", partition=self.dir.name)
        self.segments[-1] = self._segment(old.base_offset, False)
        seg = self._segment(base, True)
        self.segments.append(seg)
        maybe_crash("log-roll-new-segment", partition=self.dir.name)
        state.write_snapshot(self.dir, base)  # as Kafka does on roll: the state below the new segment
        maybe_crash("log-roll-snapshot", partition=self.dir.name)
        return seg

    def _maybe_flush(self, now: int) -> None:
        if self._unflushed >= self.config.flush_messages or now - self._last_flush_ms >= self.config.flush_ms:
            self.flush()

    @_writes("flushing the log")
    def flush(self) -> None:
        self.active_segment.flush()
        maybe_crash("log-flushed", partition=self.dir.name)
        self._unflushed = 0
        self._last_flush_ms = _now_ms()
        self.recovery_point = self.log_end_offset

    @_writes("truncating the log")
    def truncate_to(self, offset: int) -> None:
        """Remove every offset >= ``offset`` (``UnifiedLog.truncateTo``)."""
        self._require_writable()
        if offset >= self.log_end_offset:
            return
        while len(self.segments) > 1 and self.segments[-1].base_offset >= offset:
            seg = self.segments.pop()
            seg.close()
            for suffix in SEGMENT_SUFFIXES:
                p = segment_file(self.dir, seg.base_offset, suffix)
                if p.exists():
                    p.unlink()
        seg = self.segments[-1]
        if not seg.writable:
            seg.close()
            seg = self._segment(seg.base_offset, True)
            self.segments[-1] = seg
        seg.truncate_to(offset)
        self._leo = None
        for snap_offset, path in snapshot_files(self.dir):
            if snap_offset > self.log_end_offset:
                path.unlink()
        self._producer_state = None  # rebuilt from a snapshot below the cut on next use
        self.recovery_point = min(self.recovery_point, self.log_end_offset)

    # -- retention (UnifiedLog.deleteOldSegments)
    def deletable_segments(self, now_ms: int | None = None) -> list[LogSegment]:
        """Oldest-first run of segments that retention would delete now.

        With ``delete`` in ``cleanup.policy``: ``retention.ms`` (by the segment's largest record
        timestamp) and ``retention.bytes``; always: segments wholly below the log start offset.
        The run is contiguous from the oldest segment and never includes an empty active segment.
        """
        now = _now_ms() if now_ms is None else now_ms
        cfg = self.config
        total = self.size_in_bytes
        out: list[LogSegment] = []
        for i, seg in enumerate(self.segments):
            nxt = self.segments[i + 1] if i + 1 < len(self.segments) else None
            if nxt is None and seg.size_in_bytes == 0:
                break
            below_start = nxt is not None and nxt.base_offset <= self.log_start_offset
            by_time = cfg.delete and cfg.retention_ms >= 0 and now - seg.largest_timestamp > cfg.retention_ms
            by_size = cfg.delete and cfg.retention_bytes >= 0 and total - cfg.retention_bytes - seg.size_in_bytes >= 0
            if not (below_start or by_time or by_size):
                break
            out.append(seg)
            total -= seg.size_in_bytes
        return out

    @_writes("deleting old segments")
    def delete_old_segments(self, now_ms: int | None = None) -> list[int]:
        """Apply retention: returns the base offsets of the segments deleted.

        Files are renamed ``*.deleted`` at once (readers that already opened them keep working)
        and removed by :meth:`remove_deleted_files` once ``file.delete.delay.ms`` has passed.
        """
        self._require_writable()
        doomed = self.deletable_segments(now_ms)
        if not doomed:
            return []
        if len(doomed) == len(self.segments):
            self.roll()  # Kafka rolls first so that the log keeps an active segment
            wanted = {s.base_offset for s in doomed}
            doomed = [s for s in self.segments[:-1] if s.base_offset in wanted]
        bases = []
        for seg in doomed:
            seg.close()
            for suffix in SEGMENT_SUFFIXES:
                p = segment_file(self.dir, seg.base_offset, suffix)
                if p.exists():
                    os.replace(p, segment_file(self.dir, seg.base_offset, suffix, DELETED_SUFFIX))
                    maybe_crash("retention-file-renamed", partition=self.dir.name, suffix=suffix)
            self.segments.remove(seg)
            bases.append(seg.base_offset)
            maybe_crash("retention-segment-gone", partition=self.dir.name)
        self.log_start_offset = max(self.log_start_offset, self.segments[0].base_offset)
        for snap_offset, path in snapshot_files(self.dir):
            if snap_offset < self.segments[0].base_offset:
                path.unlink()  # the segments it described are gone
        maybe_crash("retention-snapshots-removed", partition=self.dir.name)
        self.remove_deleted_files()  # the delay is wall-clock time, whatever clock retention ran on
        return bases

    @_writes("removing *.deleted files")
    def remove_deleted_files(self, now_ms: int | None = None, *, delay_ms: int | None = None) -> int:
        """Remove ``*.deleted`` files renamed more than ``file.delete.delay.ms`` (or ``delay_ms``)
        ago (the rename sets the file's ctime; its mtime is the segment's last write, which may be
        long before); returns how many. Until then a read-only open that was using them keeps
        reading them. ``delay_ms=0``: all of them now (``klog compact`` at its end)."""
        now = _now_ms() if now_ms is None else now_ms
        delay = self.config.file_delete_delay_ms if delay_ms is None else delay_ms
        n = 0
        for p in self.dir.glob("*" + DELETED_SUFFIX):
            try:
                renamed_ms = p.stat().st_ctime_ns // 1_000_000
            except FileNotFoundError:
                continue
            # a zero delay removes at once: the file system's clock for ctime is not time.time() and
            # may stand a tick ahead of it, which once left files of a retention run behind
            if delay <= 0 or now - renamed_ms >= delay:
                p.unlink(missing_ok=True)
                n += 1
        return n

    @property
    def closed(self) -> bool:
        return getattr(self, "_closed", False)

    @_writes("closing the log")
    def close(self) -> None:
        """Flush (writable), close every segment's files; a second call does nothing. The log's
        offsets and checkpoint values stay readable after it."""
        if self.closed:
            return
        self._closed = True
        if self.writable:
            self.active_segment.flush()
            self.recovery_point = self.log_end_offset
            if self._producer_state is not None and self._producer_state.producers:
                self._producer_state.write_snapshot(self.dir, self.log_end_offset)
        for seg in self.segments:
            seg.close()

    def __enter__(self) -> Log:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
