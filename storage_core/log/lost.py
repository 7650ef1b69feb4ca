"""Lost data: what a partition dir's own evidence says should be there and cannot be read.

The one rule every reader applies (read_arrow and Spark batch reads through the planner,
``klog export``, ``klog describe``, ``klog verify``; the piece reader applies its byte-level half
while it reads, :mod:`storage_core.read.piece_reader`). A dir holds evidence of what was written:

* an **offset index** entry says a batch with that last offset was written at that position: an
  entry past the end of its ``.log`` is data cut off;
* a broker rolls a segment at the log end offset, so in a log that was never compacted (the
  dir says how its topic is configured, in its KRaft metadata or ``klog-topic-configs.json``, and
  it is not compacted; the dir's ``cleaner-offset-checkpoint`` does not list it) and that a log
  manager wrote (its recovery point checkpoint knows the partition) the offsets between a segment's last
  record and the **next segment's base offset** are a deleted or cut segment: lost. Elsewhere
  (the cleaner leaves gaps, so do hand-assembled dirs) a closed segment's **time index**, which
  ends with the offset of its largest timestamp, is the evidence: a segment whose records end
  before an offset it names lost its tail up to that offset;
* a local segment whose batches run **past the next segment's base offset** holds those offsets
  twice: neither copy is read (each piece stops at the next base, the next segment's starts after
  them), and they are named like lost ones (:attr:`LostData.unread`); a segment whose first batch
  is below its base offset (Kafka names a segment by it), or above it in a log known never
  compacted, is another segment's: its offsets up to the next base are named and not read;
* a **batch cut short** (its size runs past the end of a segment that is not the last), a batch
  whose CRC fails or bytes that are no batch, followed by intact batches (found by
  :func:`~storage_core.record.resync.next_valid_batch`), are lost offsets between intact batches;
* the **recovery point** (``recovery-point-offset-checkpoint``: offsets below it were flushed)
  and the newest producer **snapshot** (``<offset>.snapshot``: written when the log ended there)
  say the log reached at least that far;
* an **index without its** ``.log`` (and no ``.log.deleted`` beside it) is a deleted segment.

What it is not: a torn or short tail of the *last* segment beyond the recovery point (a write a
crash interrupted, which Kafka's recovery truncates), the zero-filled preallocated indexes of a live
broker's active segment, a missing index (Kafka rebuilds it), a log start offset a broker advanced
(retention, DeleteRecords).

:func:`gather_evidence` reads the dir's checkpoints and file names *before* the log is opened (a
live broker only adds data after them); :func:`lost_data` compares them with the opened log.
Under ``failOnDataLoss=true`` (the default) a loss is a :class:`~storage_core.errors.DataLossError`
naming the file, the offsets and the bytes (:func:`data_loss_error`); with ``false`` a warning
naming the lost offsets.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from storage_core.errors import DataLossError, KlogError
from storage_core.files import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    base_offset_of,
    is_offset_named,
    segment_file,
)
from storage_core.fs import list_names
from storage_core.log.config import CleanupPolicy
from storage_core.log.dir_state import LogDirState
from storage_core.log.log import Log
from storage_core.log.manager import PartitionDir
from storage_core.log.offset_index import OffsetIndex
from storage_core.log.producer_state import snapshot_files
from storage_core.log.segment import LogSegment, SegmentScan, scan_segment
from storage_core.log.time_index import TimeIndex
from storage_core.record.records import MAGIC_VALUE_V2
from storage_core.record.resync import next_valid_batch

__all__ = ["Evidence", "LostData", "data_loss_error", "expects_data", "gather_evidence", "lost_data",
           "lost_offsets_text"]


@dataclass(frozen=True)
class Evidence:
    """What a partition dir says about its own extent, read before the log is opened."""

    recovery_point: int | None
    log_start: int | None
    snapshots: tuple[int, ...]
    clean_shutdown: bool
    #: base offsets of ``.index`` files with no ``.log`` (nor ``.log.deleted``/``.swap``/``.cleaned``) beside them
    orphan_indexes: tuple[int, ...]
    #: the partition is in the dir's ``cleaner-offset-checkpoint``: the log cleaner compacted it at
    #: some time (its topic may be ``delete`` now), so gaps between its segments are legitimate
    cleaned: bool = False
    #: the dir says how the topic is configured (KRaft metadata or klog-topic-configs.json): its
    #: cleanup policy is known, not Kafka's default taken for it
    config_known: bool = False

    @property
    def written_up_to(self) -> int:
        """The offset the log reached at least (exclusive): the recovery point or newest snapshot."""
        return max(self.recovery_point or 0, max(self.snapshots, default=0))


def gather_evidence(pd: PartitionDir, state: LogDirState | None = None) -> Evidence:
    """The checkpoints, snapshots and orphan indexes of ``pd`` (read-only, a few small files).
    ``state``: the log dir's state of the query (:mod:`storage_core.log.dir_state`), whose
    checkpoints were read before this call; None reads them now."""
    tp = pd.topic_partition
    if state is None:
        state = LogDirState(pd.log_dir)
    recovery = state.recovery_points.get(tp)
    start = state.log_starts.get(tp)
    clean = state.clean_shutdown
    names = set(list_names(pd.path))
    orphans = []
    for n in names:
        if n.endswith(INDEX_SUFFIX) and is_offset_named(n):
            prefix = n[: -len(INDEX_SUFFIX)]
            log = prefix + LOG_SUFFIX
            if not any(x in names for x in (log, log + DELETED_SUFFIX, log + SWAP_SUFFIX, log + CLEANED_SUFFIX)):
                orphans.append(base_offset_of(n))
    snaps = tuple(o for o, _ in snapshot_files(pd.path))
    pending = state.pending_commit_from(pd.path.name)
    if pending is not None:
        # an unfinished commit moved the checkpoints before its journal went (journal.finish_commit):
        # its segments are hidden from readers (the loader), so what it added is no evidence yet
        recovery = None if recovery is None else min(recovery, pending)
        snaps = tuple(o for o in snaps if o <= pending)
    return Evidence(recovery, start, snaps, clean, tuple(sorted(orphans)), tp in state.cleaner_offsets,
                    state.config_known(tp.topic))


def expects_data(pd: PartitionDir, state: LogDirState | None = None) -> bool:
    """Whether a partition dir without ``.log`` files held data by its own evidence (checkpoints,
    snapshots, indexes): then it is a partition whose data is lost, not an empty one."""
    return bool(lost_data(pd, None, gather_evidence(pd, state)))


@dataclass(frozen=True)
class LostData:
    """Offsets ``first..last`` (inclusive) of a partition that cannot be read, and why."""

    partition: str
    path: str  # the file (or the partition dir) the loss is in
    first: int
    last: int
    why: str
    position: int | None = None
    nbytes: int | None = None
    #: the offsets are held twice (a segment's batches run past the next segment's base), or by a
    #: segment that is not in its place: no copy of them is read (:attr:`PartitionRange.unread`)
    unread: bool = False

    @property
    def offsets(self) -> str:
        return f"{self.first}..{self.last}" if self.last != self.first else str(self.first)

    def __str__(self) -> str:
        at = []
        if self.nbytes is not None:
            at.append(f"{self.nbytes} bytes")
        if self.position is not None:
            at.append(f"from position {self.position}")
        fate = "are not read: no copy of them can be trusted" if self.unread else "are lost"
        return (f"{self.path}: offsets {self.offsets} of {self.partition} {fate} ({self.why}"
                f"{'; ' + ' '.join(at) if at else ''})")


def lost_offsets_text(lost: list[LostData]) -> str:
    return ", ".join(f"{x.partition} offsets {x.offsets}" for x in lost)


def data_loss_error(lost: list[LostData]) -> DataLossError:
    """The error a read under failOnDataLoss=true raises for ``lost`` (at least one)."""
    first = lost[0]
    more = f"; and {len(lost) - 1} more: {lost_offsets_text(lost[1:])}" if len(lost) > 1 else ""
    path = Path(first.path)
    where = f"data in the middle of {path.parent}" if path.name.endswith(LOG_SUFFIX) else f"data of {path}"
    return DataLossError(f"{where} is unreadable: {first}{more}. 'klog verify' lists every problem; a read with "
                         "failOnDataLoss=false reads every intact record and warns naming the lost offsets",
                         offsets=tuple((x.first, x.last) for x in lost))


def _compacted(lg: Log) -> bool:
    return CleanupPolicy.COMPACT in lg.config.cleanup_policy


def _damage_runs(seg: LogSegment, scan: SegmentScan, after: int,
                 limit: int) -> tuple[list[tuple[int, int, int, int | None]], int]:
    """``(position, first lost offset, bytes, next intact offset or None)`` for each damaged run of
    ``seg`` from ``scan``'s first damage on, resynchronising at each intact batch after it; and the
    offset after the segment's last intact batch."""
    path = seg.current_log_path()
    size = scan.size_in_bytes
    runs: list[tuple[int, int, int, int | None]] = []
    position = scan.valid_bytes
    while position < size:
        found = next_valid_batch(path, position + 1, size, min_offset=after, max_offset=limit - 1)
        if found is None:
            runs.append((position, after, size - position, None))
            return runs, after
        runs.append((position, after, found.position - position, found.base_offset))
        # walk on from the intact batch to the next damage, if any
        walk = seg.batches(found.position, size)
        position = size
        after = found.base_offset
        try:
            for batch in walk:
                batch.ensure_valid()
                after = batch.last_offset + 1
            position = walk.valid_bytes
        except KlogError as exc:
            position = exc.position if exc.position is not None else walk.valid_bytes
    return runs, after


def _tail_is_intact(seg: LogSegment, size: int) -> tuple[bool, int, tuple[int, bool] | None]:
    """Walk ``seg`` from its last index entry before ``size`` to the end (CRC checked): whether it
    ends with a whole intact batch, the offset after its last batch, and (when the walk started at
    the segment's first byte) the first batch's :func:`_first_offset`."""
    start = 0
    index = seg.dir / (seg.stem + INDEX_SUFFIX)  # a remote copy's files carry its stem (<base>-<segment id>)
    if index.is_file():
        try:
            with OffsetIndex(index, seg.base_offset) as oi:
                for e in oi.all_entries():
                    if e.position < size:
                        start = max(start, e.position)
        except KlogError:
            start = 0
    after = seg.base_offset
    head: tuple[int, bool] | None = None
    walk = seg.batches(start, size)
    try:
        for batch in walk:
            batch.ensure_valid()
            if start == 0 and head is None:
                head = (batch.base_offset, batch.magic >= MAGIC_VALUE_V2)
            after = batch.last_offset + 1
    except KlogError:
        return False, after, head
    if start > 0 and after == seg.base_offset:
        return False, after, None  # the entry's position held no batch
    return walk.partial_tail is None, after, head


def _index_past_end(seg: LogSegment, size: int) -> tuple[int, int] | None:
    """``(largest offset, largest position)`` of the on-disk offset index's entries at or past
    ``size`` (the ``.log``'s length), or None."""
    index = seg.dir / (seg.stem + INDEX_SUFFIX)
    if not index.is_file():
        return None
    try:
        with OffsetIndex(index, seg.base_offset) as oi:
            past = [e for e in oi.all_entries() if e.position >= size]
    except KlogError:
        return None
    return (max(e.offset for e in past), max(e.position for e in past)) if past else None


def _first_offset(seg: LogSegment) -> tuple[int, bool] | None:
    """The base offset of the segment's first batch and whether it is a v2 batch (a legacy
    compressed wrapper's offset is its last inner offset), or None when the file starts with no
    intact batch (damage is the damage rules' to name, not a misplaced file)."""
    try:
        for batch in seg.batches(0):
            batch.ensure_valid()
            return batch.base_offset, batch.magic >= MAGIC_VALUE_V2
    except (OSError, KlogError):
        return None
    return None


def _out_of_place(seg: LogSegment, gaps: bool, head: tuple[int, bool] | None = None) -> str | None:
    """Why ``seg``'s first batch says the file is not the segment of its name, or None: Kafka names
    a segment by the offset of its first batch, never above it; and a log that is never compacted
    (``gaps``) starts each segment with a batch at its base. ``head``: the first batch's
    :func:`_first_offset` when already read."""
    if head is None:
        head = _first_offset(seg)
    if head is None:
        return None
    first, v2 = head
    if first < seg.base_offset:
        return f"the segment's first batch is offset {first}, below its base offset {seg.base_offset}"
    if gaps and v2 and first > seg.base_offset:
        return (f"the segment's first batch is offset {first}, above its base offset {seg.base_offset} in a log that "
                "is not compacted")
    return None


def _batch_bytes(seg: LogSegment, lo: int, hi: int) -> list[bytes]:
    """The bytes of ``seg``'s batches whose offsets reach into ``lo..hi-1`` (walked from the index
    entry before ``lo``)."""
    found = seg.translate_offset(lo)
    out: list[bytes] = []
    if found is None:
        return out
    with seg.current_log_path().open("rb") as f:
        for batch in seg.batches(found.position):
            if batch.base_offset >= hi:
                break
            if batch.last_offset >= lo:
                f.seek(batch.position)
                out.append(f.read(batch.size_in_bytes))
    return out


def _overlap(name: str, path: str, seg: LogSegment, nxt_seg: LogSegment, after: int) -> LostData:
    """Offsets ``nxt..after-1`` that ``seg``'s batches hold past the next segment's base ``nxt``:
    the same batches byte for byte in both (a duplicated tail) leave out those offsets; batches
    that differ mean one of the two segments is another's, and which cannot be told: everything of
    ``seg`` and the next segment below ``after`` is left out."""
    nxt = nxt_seg.base_offset
    same = _batch_bytes(seg, nxt, after) == _batch_bytes(nxt_seg, nxt, after)
    if same:
        return LostData(name, path, nxt, after - 1, f"the segment's batches run up to offset {after - 1}, past the "
                        f"next segment's base offset {nxt}; both hold the same batches", None, None, unread=True)
    return LostData(name, path, seg.base_offset, after - 1, f"the segment's batches run up to offset {after - 1}, "
                    f"past the next segment's base offset {nxt}, and the two hold different batches for offsets "
                    f"{nxt}..{after - 1}: one of them is not this partition's", None, None, unread=True)


def _segment_losses(name: str, lg: Log, seg: LogSegment, nxt_seg: LogSegment, full: bool, gaps: bool,
                    local: bool) -> list[LostData]:
    """Losses of a segment that is not the last one (its offsets are below ``nxt``). ``gaps``: the
    offsets between its last record and ``nxt`` are lost (a log that rolls at its end leaves none).
    ``local``: it and the next segment are both local (a remote copy running into the local range
    is read up to the local base: the local copy wins, as on the broker)."""
    path = str(seg.log_path)
    nxt = nxt_seg.base_offset
    size = seg.current_log_path().stat().st_size
    out: list[LostData] = []
    after = seg.base_offset
    head = None
    scan = lg.damaged_scans.get(seg.base_offset)
    if scan is None and full:
        scan = scan_segment(seg.current_log_path(), index_interval_bytes=seg.index_interval_bytes,
                            base_offset=seg.base_offset)
        after = scan.next_offset
    elif scan is None:
        intact, after, head = _tail_is_intact(seg, size)
        if not intact:
            scan = scan_segment(seg.current_log_path(), index_interval_bytes=seg.index_interval_bytes,
                                base_offset=seg.base_offset)
    wrong = _out_of_place(seg, gaps, head) if local else None
    if wrong is not None:
        return [LostData(name, path, seg.base_offset, nxt - 1, f"{wrong}: the file is another segment's", 0, size,
                         unread=True)]
    if scan is not None and scan.valid_bytes < scan.size_in_bytes:
        after = scan.next_offset
        cause = f": {scan.error.detail}" if scan.error is not None else ": a batch cut short"
        runs, after_all = _damage_runs(seg, scan, scan.next_offset, nxt)
        for position, first, nbytes, resumed in runs:
            why = ("bytes that are not an intact batch" if resumed is not None else
                   f"the segment's data ends in damage before the next segment's base offset {nxt}") + cause
            cause = ""
            last = (resumed if resumed is not None else nxt) - 1
            if last >= first:
                out.append(LostData(name, path, first, last, why, position, nbytes))
            elif resumed is None:
                out.append(LostData(name, path, first, first, why + " (no offset known lost)", position, nbytes))
            if resumed is None:
                return out
        after = after_all  # the last run resumed: the offset after the segment's last intact batch
    past = _index_past_end(seg, size)
    if past is not None:
        last = max(past[0], nxt - 1 if not _compacted(lg) else past[0])
        out.append(LostData(name, path, after, last, f"the offset index has entries up to offset {past[0]} at "
                            f"position {past[1]}, past the end of the {size}-byte .log", size, past[1] - size))
    elif after < nxt:
        timed = _time_index_past(seg, after)
        if timed is not None:
            out.append(LostData(name, path, after, nxt - 1 if gaps else timed,
                                f"the time index has an entry for offset {timed}, past the segment's last record "
                                f"(offset {after - 1}); the next segment starts at {nxt}", size, None))
        elif gaps and not out:
            out.append(LostData(name, path, after, nxt - 1,
                                f"the segment's last record is offset {after - 1} and the next segment starts at "
                                f"{nxt}: a log that is not compacted rolls at its end, so the offsets between are a "
                                "deleted or cut segment", size, None))
    elif after > nxt and local:
        out.append(_overlap(name, path, seg, nxt_seg, after))
    return out


def _time_index_past(seg: LogSegment, after: int) -> int | None:
    """The largest offset of the on-disk time index's entries at or after ``after`` (a closed
    segment's time index ends with the offset of its largest timestamp), or None."""
    path = seg.dir / (seg.stem + TIME_INDEX_SUFFIX)
    if not path.is_file():
        return None
    try:
        with TimeIndex(path, seg.base_offset) as ti:
            past = [e.offset for e in ti.all_entries() if e.offset >= after]
    except KlogError:
        return None
    return max(past) if past else None


def _problem_at(seg: LogSegment, position: int, size: int) -> str | None:
    """Why the bytes at ``position`` of ``seg``'s file (``size`` bytes) are not a whole batch with a
    valid CRC, or None when they are (at the end of what the open read: a writer's append since,
    not damage)."""
    from storage_core.record.file_records import FileRecords

    walk = FileRecords(seg.current_log_path()).batches(position, size)
    try:
        for batch in walk:
            batch.ensure_valid()
            return None
    except KlogError as exc:
        return exc.detail
    return "a batch cut short"


def _last_segment_losses(name: str, lg: Log, ev: Evidence, full: bool) -> list[LostData]:
    seg = lg.segments[-1]
    path = str(seg.log_path)
    leo = lg.log_end_offset
    out: list[LostData] = []
    if full:  # damage inside the last segment's readable part, with intact batches after it
        scan = scan_segment(seg.current_log_path(), index_interval_bytes=seg.index_interval_bytes,
                            base_offset=seg.base_offset)
        if scan.valid_bytes < seg.size_in_bytes:
            for position, first, nbytes, resumed in _damage_runs(seg, scan, scan.next_offset, 2**63 - 1)[0]:
                if resumed is not None and resumed > first:
                    out.append(LostData(name, path, first, resumed - 1, "bytes that are not an intact batch",
                                        position, nbytes))
    try:
        size = seg.current_log_path().stat().st_size
    except (OSError, KlogError):
        size = seg.size_in_bytes
    hi = ev.written_up_to
    problem = (_problem_at(seg, seg.size_in_bytes, size)  # None: an intact batch there, the log grew since the open
               if size > seg.size_in_bytes and (ev.clean_shutdown or ev.recovery_point is None or leo < hi) else None)
    if problem is not None:
        # the open cut the tail in memory below what the dir says was written, or with no recovery
        # point to say where a crash may have torn it (beyond a recorded recovery point anything may
        # be torn after a crash, and Kafka truncates it): intact batches after the cut are acknowledged data
        found = next_valid_batch(seg.current_log_path(), seg.size_in_bytes + 1, size, min_offset=leo)
        if found is not None:
            last = found.last_offset
            position = found.position + found.size
            while position < size:
                more = next_valid_batch(seg.current_log_path(), position, size, min_offset=last + 1)
                if more is None:
                    break
                last, position = more.last_offset, more.position + more.size
            out.append(LostData(name, path, leo, max(last, hi - 1), "bytes that are not an intact batch, with "
                                f"intact batches after them: {problem}", seg.size_in_bytes,
                                size - seg.size_in_bytes))
            return out
    if hi > leo:
        what = ("the recovery point checkpoint" if (ev.recovery_point or 0) >= max(ev.snapshots, default=0)
                else "a producer snapshot")
        out.append(LostData(name, path, leo, hi - 1, f"{what} says the log reached offset {hi}, its segments end at "
                            f"{leo}", seg.size_in_bytes, size - seg.size_in_bytes if size > seg.size_in_bytes else None))
    return out


def gaps_are_lost(lg: Log, ev: Evidence) -> bool:
    """Whether offsets between a segment's last record and the next segment's base offset are lost data
    in this log: it is known never compacted (its recovery point checkpoint knows the partition, the
    dir says how its topic is configured and it is not compacted, the cleaner never listed it), and
    such a log rolls at its end (see the module)."""
    return ev.recovery_point is not None and ev.config_known and not _compacted(lg) and not ev.cleaned


def lost_data(pd: PartitionDir, lg: Log | None, ev: Evidence, *, full: bool = False,
              within: tuple[int, int] | None = None) -> list[LostData]:
    """What of ``pd`` its evidence ``ev`` (:func:`gather_evidence`, taken before the open) says
    should be there and ``lg`` (opened read-only; None: the dir has no ``.log`` files) cannot give,
    by offset. Reads index files and the last few KiB of each segment; a segment found damaged
    there is scanned in full for the intact batches after the damage. ``full`` (``klog verify``):
    every segment is scanned, so damage anywhere is named by its offsets. ``within=(lo, hi)``: a
    segment (not the last) whose offsets all lie below ``lo`` or at ``hi`` and above is not looked
    at (the caller counts only losses of ``lo..hi-1``)."""
    name = str(pd.topic_partition)
    if lg is None:
        # only the checkpoints and snapshots say how far a log with no segments reached: an index
        # without its .log is no evidence by itself (Kafka's loader deletes orphaned indexes, and a
        # writer that publishes a segment's indexes before its .log shows one for a moment)
        hi = ev.written_up_to
        lo = ev.log_start if ev.log_start is not None else min(ev.orphan_indexes, default=0)
        if hi > lo:
            return [LostData(name, str(pd.path), lo, hi - 1, "the partition has no .log files, while its "
                             f"checkpoints, snapshots or indexes say it held offsets up to {hi - 1}")]
        return []
    out: list[LostData] = []
    segs = lg.segments
    first_base = segs[0].base_offset
    bases = [s.base_offset for s in segs]
    # a log known never compacted (its recovery point checkpoint knows the partition, the dir says how
    # its topic is configured and it is not compacted, the cleaner never listed it) rolls at its end:
    # a gap between its segments is lost, and a segment starts at its base (see the module)
    gaps = gaps_are_lost(lg, ev)
    for base in ev.orphan_indexes:
        if base < first_base and (ev.log_start is None or ev.log_start <= base):
            out.append(LostData(name, str(segment_file(pd.path, base, LOG_SUFFIX)), base, first_base - 1,
                                f"the .log of the segment at {base} is gone (its index is there)"))
    for i, seg in enumerate(segs[:-1]):
        nxt = segs[i + 1].base_offset
        if within is not None and (nxt <= within[0] or seg.base_offset >= within[1]):
            continue
        out += _segment_losses(name, lg, seg, segs[i + 1], full, gaps, i >= lg.remote_segments)
    last = segs[-1]
    wrong = _out_of_place(last, gaps)
    if wrong is not None:  # (the log end the open found is the other segment's: the evidence's reach counts)
        end = max(lg.log_end_offset, ev.written_up_to, last.base_offset + 1)
        out.append(LostData(name, str(last.log_path), last.base_offset, end - 1,
                            f"{wrong}: the file is another segment's", 0, last.size_in_bytes, unread=True))
    for base in ev.orphan_indexes:
        if first_base < base < lg.log_end_offset and base not in bases and not any(x.first <= base <= x.last
                                                                                    for x in out):
            nxt = min((b for b in bases if b > base), default=lg.log_end_offset)
            out.append(LostData(name, str(segment_file(pd.path, base, LOG_SUFFIX)), base, nxt - 1,
                                f"the .log of the segment at {base} is gone (its index is there)"))
    if wrong is None:
        out += _last_segment_losses(name, lg, ev, full)
    return sorted(out, key=lambda x: x.first)
