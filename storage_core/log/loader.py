"""Opening a partition directory: its segments found, interrupted operations settled, damage
recovered (Kafka's ``LogLoader``). :class:`~storage_core.log.log.Log` calls it from its
constructor and keeps what it returns; everything after the open (reading, appending, rolling,
retention) is the log's.

:meth:`LogLoader.load` follows ``LogLoader.load``:

1. ``*.deleted`` and ``*.cleaned`` files are leftovers of an interrupted delete or cleaning:
   removed (writable) or ignored (read-only).
2. ``*.swap`` files are cleaned segments that were about to replace the originals. A ``.swap``
   whose base offset is at or after that of a ``.cleaned`` file was still being renamed from
   ``.cleaned`` (KAFKA-6264): it is removed with the ``.cleaned`` files (the old segments stay).
   Every other ``.log.swap`` is completed: the segments whose base offsets lie in
   ``[swap base, swap next offset)`` are removed, the swap's files renamed into place (an old
   index of the same base that the swap lacks is removed); then any remaining ``.swap`` (an index
   whose ``.log`` was renamed already) is renamed into place. A read-only open ignores them and
   reads the ``.log`` files in place (the old contents), which is only complete while the
   cleaner had not yet renamed any original to ``.deleted``. See :mod:`storage_core.cleaner`.
3. Index files without their ``.log`` are removed (writable) or ignored. A read-only open leaves
   out the segments of a commit that has not completed (:mod:`storage_core.log.journal`).
4. A segment without its ``.index`` is recovered where it sits (writable).
5. Unless the log dir says it was shut down cleanly, every segment from the one holding the
   recovery point to the end is recovered (:meth:`LogSegment.recover`): a torn tail is
   truncated and, if a segment lost bytes, every later segment is dropped; the aborted
   transactions (``.txnindex``) and the producer state are rebuilt from the recovered segments.
   A read-only open does this in memory: it only bounds what is read (and is not asked to for a
   dir a running broker holds: :func:`~storage_core.log.manager.open_log_read_only`). After a
   clean shutdown a read-only open still checks the tail of the active segment (a copy of a log
   dir may be torn by the copy itself) unless the caller follows a log being appended to
   (``verify_tail``).

What the open changed or left out is reported as one note per segment
(:attr:`LoadedLog.recovery_notes`); :data:`NOT_READ_NOTE` and :data:`STOPS_READING_NOTE` mark the
notes that mean acknowledged data is not read (see :func:`storage_core.log.log.lost_data_notes`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from storage_core.errors import KlogError, PendingCommitError, UnsafePathError
from storage_core.files import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    INDEX_SUFFIXES,
    LOG_SUFFIX,
    SEGMENT_SUFFIXES,
    SWAP_SUFFIX,
    base_offset_of,
    is_log_file,
    is_offset_named,
    segment_file,
)
from storage_core.fs import list_names
from storage_core.log.config import LogConfig
from storage_core.log.dir_state import LogDirState
from storage_core.log.journal import pending_journal_offsets
from storage_core.log.producer_state import ProducerStateManager, snapshot_files
from storage_core.log.segment import LogSegment, SegmentScan, batches_between, intact_batches, scan_segment
from storage_core.log.txn_index import AbortedTxn

__all__ = ["NOT_READ_NOTE", "STOPS_READING_NOTE", "LoadedLog", "LogLoader", "open_segment", "producer_state_at", "replay_aborted",
           "refuse_symlinks"]

#: A read-only open's note on a segment after a damaged one.
NOT_READ_NOTE = "not read, it follows a damaged segment"
#: A read-only open's note on a segment whose reading ends early, followed by ``(<why>)``: the
#: error, or ``torn tail`` (a write the broker never acknowledged, which loses nothing).
STOPS_READING_NOTE = "read-only: reading stops at the last valid batch"


def open_segment(directory: Path, base: int, config: LogConfig, writable: bool) -> LogSegment:
    """A segment of a partition dir with the log's index settings."""
    return LogSegment(directory, base, index_interval_bytes=config.index_interval_bytes,
                      max_index_size=config.segment_index_bytes, writable=writable)


def refuse_symlinks(partition_dir: Path) -> None:
    """Writes never go through a symlink out of a partition dir (see :class:`UnsafePathError`)."""
    real = os.path.realpath(partition_dir)
    if partition_dir.is_symlink() and os.path.dirname(real) != os.path.realpath(partition_dir.parent):
        raise UnsafePathError(f"partition dir {partition_dir} is a symlink to {real}, outside its log dir; klog does not "
                              "write through it (read-only opens follow it). Move the data into the log dir or open "
                              "it read-only", path=partition_dir)
    with os.scandir(partition_dir) as entries:
        for e in entries:
            if e.is_symlink():
                raise UnsafePathError(f"{e.name} in {partition_dir} is a symlink (to {os.readlink(e.path)}); klog does "
                                      "not write in a partition dir holding symlinks, since recovery, retention and "
                                      "compaction would truncate or delete what it points to (read-only opens follow "
                                      "it). Replace it with the file itself or open the log read-only",
                                      path=e.path)


def producer_state_at(segments: list[LogSegment], offset: int, *, notes: list[str]) -> ProducerStateManager:
    """Producer state covering every batch below ``offset`` (``UnifiedLog.rebuildProducerState``):
    the newest usable snapshot at or below it, then a replay of the batches in between, from the
    first segment: batches below the log start offset count too, since a transaction that began
    there and is still open holds the last stable offset at the log start. A snapshot that does
    not parse is skipped with a note."""
    state = ProducerStateManager()
    first_base = segments[0].base_offset
    start = first_base
    for snap_offset, path in reversed(snapshot_files(segments[0].dir)):
        if snap_offset <= offset and snap_offset >= first_base:
            try:
                state = ProducerStateManager.read_snapshot(path)
                start = snap_offset
                break
            except KlogError as exc:
                notes.append(f"{path}: ignored ({exc.detail})")
    if start < offset:
        for batch in batches_between(segments, max(start, first_base), offset):
            if batch.base_offset >= offset:
                break
            state.update(batch)
    state.map_end_offset = offset
    return state


def replay_aborted(segments: list[LogSegment], first_segment: int, *,
                   notes: list[str]) -> tuple[dict[int, list[AbortedTxn]], ProducerStateManager]:
    """The aborted transactions of ``segments[first_segment:]`` by segment base, as recovery writes
    them to ``.txnindex`` (one per ABORT marker, in the segment holding it), found by replaying the
    batches; and the producer state at the end of the replay."""
    state = producer_state_at(segments, segments[first_segment].base_offset, notes=notes)
    found: dict[int, list[AbortedTxn]] = {}
    for seg in segments[first_segment:]:
        aborted = found.setdefault(seg.base_offset, [])
        for batch in intact_batches(seg):  # past damage too: a reader resynchronises there
            done = state.update(batch)
            if done is not None and done.is_aborted:
                aborted.append(AbortedTxn(done.producer_id, done.first_offset, done.last_offset,
                                          state.last_stable_offset_for(done)))
    return found, state


@dataclass
class LoadedLog:
    """What opening a partition dir found: the log starts from this."""

    segments: list[LogSegment]
    recovery_point: int
    truncated_bytes: int = 0  # what recovery cut, for reporting
    recovery_notes: list[str] = field(default_factory=list)  # one line per segment recovery changed or left out
    # aborted transactions recomputed by a read-only recovery, by segment base (overrides .txnindex)
    memory_aborted: dict[int, list[AbortedTxn]] = field(default_factory=dict)
    producer_state: ProducerStateManager | None = None  # rebuilt by recovery, else computed when first needed
    #: read-only: segments before the last whose recovery scan found damage (left uncut), by base offset
    damaged_scans: dict[int, SegmentScan] = field(default_factory=dict)
    #: read-only: the first segment found without its .index, whose .txnindex cannot be trusted either
    #: (a broker's recovery rebuilds both); the log rebuilds its aborted transactions when first asked
    unindexed_from: int | None = None
    #: read-only recovery: the base offset of the first recovered segment, from which the aborted
    #: transactions and the producer state are replayed when first asked (a read_uncommitted read of
    #: a live broker's dir never needs them, and the replay walks every unflushed batch)
    replay_from: int | None = None


class LogLoader:
    """Loads the segments of one partition dir (``LogLoader``); one :meth:`load` per instance."""

    def __init__(self, directory: Path, config: LogConfig, *, writable: bool, recovery_point: int,
                 had_clean_shutdown: bool, verify_tail: bool, dir_state: LogDirState | None = None) -> None:
        self.dir = directory
        self.dir_state = dir_state
        self.config = config
        self.writable = writable
        self.had_clean_shutdown = had_clean_shutdown
        self.verify_tail = verify_tail or writable
        self.loaded = LoadedLog([], recovery_point)

    @property
    def segments(self) -> list[LogSegment]:
        return self.loaded.segments

    def _segment(self, base: int, writable: bool) -> LogSegment:
        return open_segment(self.dir, base, self.config, writable)

    def load(self) -> LoadedLog:
        names = sorted(list_names(self.dir))
        if self.writable:
            # KAFKA-6264: a .swap at or after the first .cleaned file belongs to a replacement that
            # was not complete when it was interrupted (files still being renamed from .cleaned)
            cleaned = [base_offset_of(n) for n in names if n.endswith(CLEANED_SUFFIX) and is_offset_named(n)]
            min_cleaned = min(cleaned) if cleaned else None
            for name in names:
                if name.endswith(DELETED_SUFFIX) or name.endswith(CLEANED_SUFFIX):
                    (self.dir / name).unlink()
                elif (name.endswith(SWAP_SUFFIX) and min_cleaned is not None and is_offset_named(name)
                      and base_offset_of(name) >= min_cleaned):
                    (self.dir / name).unlink()
            for name in sorted(n for n in os.listdir(self.dir) if n.endswith(LOG_SUFFIX + SWAP_SUFFIX)):
                self._complete_swap(name)
            for name in sorted(os.listdir(self.dir)):  # index .swap files whose .log was renamed already
                if name.endswith(SWAP_SUFFIX) and is_offset_named(name):
                    os.replace(self.dir / name, self.dir / name[: -len(SWAP_SUFFIX)])
            for name in os.listdir(self.dir):
                if name.endswith(INDEX_SUFFIXES):
                    if not (self.dir / (name.split(".", 1)[0] + LOG_SUFFIX)).exists():
                        (self.dir / name).unlink()
            names = os.listdir(self.dir)  # what settling the leftovers left
        logs = sorted(base_offset_of(n) for n in names if is_log_file(n))
        if not self.writable:
            # asked after the listing above: a commit that renamed segments in has its journal by now
            hidden_from = (pending_journal_offsets(self.dir.parent).get(self.dir.name) if self.dir_state is None
                           else self.dir_state.pending_commit_from(self.dir.name))
            if hidden_from is not None:  # an unfinished commit: none of it is visible yet
                logs = [b for b in logs if b < hidden_from]
                if not logs:
                    raise PendingCommitError(f"{self.dir} holds only data of an unfinished commit (from offset "
                                             f"{hidden_from}); it is empty until the commit completes")
                self.loaded.recovery_notes.append(f"{self.dir}: segments from offset {hidden_from} belong to an "
                                                  "unfinished commit and are not read")
        if not logs:
            if not self.writable:
                raise KlogError(f"no segments in {self.dir}")
            logs = [0]
        missing_index = {b for b in logs if not segment_file(self.dir, b, INDEX_SUFFIX).exists()}
        for i, base in enumerate(logs):
            active = i == len(logs) - 1
            self.segments.append(self._segment(base, self.writable and active))
        if self.writable:
            self._rebuild_missing_indexes(missing_index)
        if not self.had_clean_shutdown:
            self._recover()
        elif not self.writable and self.verify_tail:
            self._bound_active_in_memory()
        if not self.writable:
            self.loaded.unindexed_from = next((s.base_offset for s in self.segments if s.base_offset in missing_index),
                                              None)
        return self.loaded

    def _rebuild_missing_indexes(self, missing: set[int]) -> None:
        """A segment without its ``.index`` is recovered wherever it sits (``LogSegment.sanityCheck``)."""
        for i, seg in enumerate(self.segments):
            if seg.base_offset not in missing:
                continue
            if seg.writable:  # the active segment: recover in place
                self._note(seg, seg.recover(), "rebuilt a missing index")
                continue
            seg.close()
            w = self._segment(seg.base_offset, True)
            cut = w.recover()
            self._note(w, cut, "rebuilt a missing index")
            w.on_become_inactive_segment()
            w.close()
            self.segments[i] = self._segment(seg.base_offset, False)

    def _note(self, seg: LogSegment, cut: int, what: str) -> None:
        self.loaded.truncated_bytes += cut
        msg = f"{seg.log_path}: {what}"
        if cut:
            msg += f"; cut {cut} bytes after position {seg.size_in_bytes}"
        self.loaded.recovery_notes.append(msg)

    def _complete_swap(self, swap_name: str) -> None:
        """Rename a cleaned ``.swap`` segment into place, replacing the segments it covers."""
        swap_log = self.dir / swap_name
        base = base_offset_of(swap_name)
        end = scan_segment(swap_log, base_offset=base).next_offset
        for name in os.listdir(self.dir):
            if is_log_file(name):
                b = base_offset_of(name)
                if base <= b < end:
                    for suffix in SEGMENT_SUFFIXES:
                        p = self.dir / (name.split(".", 1)[0] + suffix)
                        if p.exists():
                            p.unlink()
        prefix = swap_name.split(".", 1)[0]
        for suffix in SEGMENT_SUFFIXES:
            p = self.dir / (prefix + suffix + SWAP_SUFFIX)
            if p.exists():
                os.replace(p, self.dir / (prefix + suffix))
            else:  # an old index of the same base offset must not pair with the new .log
                (self.dir / (prefix + suffix)).unlink(missing_ok=True)

    def _recover(self) -> None:
        start = 0
        for i, seg in enumerate(self.segments):
            if seg.base_offset <= self.loaded.recovery_point:
                start = i
        if self.writable:
            for i in range(start, len(self.segments)):
                seg = self.segments[i]
                if not seg.writable:
                    seg.close()
                    seg = self._segment(seg.base_offset, True)
                    self.segments[i] = seg
                cut = seg.recover()
                if cut:
                    self._note(seg, cut, "recovered")
                if cut and i < len(self.segments) - 1:
                    for later in self.segments[i + 1:]:
                        later.close()
                        self.loaded.recovery_notes.append(f"{later.log_path}: deleted, it followed a truncated segment")
                        for suffix in SEGMENT_SUFFIXES:
                            p = segment_file(later.dir, later.base_offset, suffix)
                            if p.exists():
                                p.unlink()
                    del self.segments[i + 1:]
                    break
                if i < len(self.segments) - 1:  # only the active segment stays writable
                    seg.on_become_inactive_segment()
                    seg.close()
                    self.segments[i] = self._segment(seg.base_offset, False)
            self._rebuild_transaction_state(start)
            self.loaded.recovery_point = self.segments[-1].read_next_offset()
        else:
            last = len(self.segments) - 1
            for i in range(start, len(self.segments)):
                seg = self.segments[i]
                scan = scan_segment(seg.log_path, index_interval_bytes=self.config.index_interval_bytes,
                                    base_offset=seg.base_offset)
                if i < last:
                    # a segment before the last is never cut in memory: what follows its damage is
                    # acknowledged data, which the reader resynchronises to (or fails naming it);
                    # what is lost is storage_core.log.lost's to say
                    if scan.error is not None or scan.partial_tail is not None:
                        self.loaded.damaged_scans[seg.base_offset] = scan
                        self.loaded.recovery_notes.append(
                            f"{seg.log_path}: damaged at position {scan.valid_bytes} "
                            f"({scan.error or 'a batch cut short'})")
                    continue
                cut = seg.recover_in_memory(scan)  # indexes rebuilt in memory too, as recovery does
                if cut:
                    self._note(seg, cut, f"{STOPS_READING_NOTE} ({scan.error or 'torn tail'})")
            if start < len(self.segments):
                self.loaded.replay_from = self.segments[start].base_offset

    def _bound_active_in_memory(self) -> None:
        """After a clean shutdown Kafka trusts the files; a copy may still be torn by the copy
        itself, so check the tail of the active segment (from its last index entry, a few KiB)
        and fall back to a full in-memory recovery of that segment only if it is damaged."""
        seg = self.segments[-1]
        start = seg.offset_index.lookup(2**62).position
        walk = seg.batches(start)
        try:
            for batch in walk:
                batch.ensure_valid()
            damaged = walk.partial_tail is not None
        except KlogError:
            damaged = True
        if damaged:
            scan = scan_segment(seg.log_path, index_interval_bytes=self.config.index_interval_bytes,
                                base_offset=seg.base_offset)
            cut = seg.recover_in_memory(scan)
            self._note(seg, cut, f"{STOPS_READING_NOTE} ({scan.error or 'torn tail'})")

    def _rebuild_transaction_state(self, first_segment: int) -> None:
        """Replay the recovered segments: their aborted transactions (``.txnindex``) and the
        producer state at the log end. (A read-only recovery leaves this to the log, as
        :attr:`LoadedLog.replay_from`.)"""
        if first_segment >= len(self.segments):
            return
        found, state = replay_aborted(self.segments, first_segment, notes=self.loaded.recovery_notes)
        for seg in self.segments[first_segment:]:
            seg.txn_index.path.unlink(missing_ok=True)
            for t in found[seg.base_offset]:
                seg.txn_index.append(t)
        self.loaded.producer_state = state
        log_end = self.segments[-1].read_next_offset()
        for snap_offset, path in snapshot_files(self.dir):
            if snap_offset > log_end:
                path.unlink()  # describes data recovery removed
