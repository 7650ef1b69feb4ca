"""Planning a read on the driver: directories → partitions → offset ranges → input partitions.

Each topic-partition's range ``[start, end)`` is resolved with the partition's own indexes
(offset index for offsets, time index for timestamps), then turned into byte slices of its
segments (``start_position``/``end_position`` at batch boundaries): executors seek straight to
them and never decode a segment before the range. A range larger than the byte or record
target is cut at offset-index entries; small pieces are packed together so a task is worth its
overhead. Every piece has an explicit end, so a DataFrame is a consistent snapshot of a log
that is still being appended to.
"""

from __future__ import annotations

import logging
import math
import re
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql.datasource import InputPartition

from storage_core.errors import CorruptRecordError, InvalidOptionError, OffsetOutOfRangeError, PendingCommitError
from storage_core.log.log import Log, lost_data_notes
from storage_core.log.manager import PartitionDir, find_partitions, open_log_read_only
from storage_core.log.segment import LogSegment
from storage_core.log.topic_partition import TopicPartition
from storage_core.log.txn_index import AbortedTxn

from .options import EARLIEST, LATEST, OffsetSpec, ReadOptions

log = logging.getLogger("klog")


@dataclass(frozen=True)
class Piece:
    """A byte slice of one segment and the offsets wanted from it."""

    topic: str
    partition: int
    log_path: str
    start_position: int
    end_position: int
    min_offset: int
    end_offset: int
    aborted: tuple[AbortedTxn, ...] | None  # read_committed: the partition's aborted transactions in range
    est_records: int
    #: inode number of the .log when planned: a file a compaction put in its place is never read
    file_id: int | None = None

    @property
    def nbytes(self) -> int:
        return self.end_position - self.start_position


class KlogInputPartition(InputPartition):
    """What one Spark task reads: pieces of one or more topic-partitions (picklable, no open files)."""

    def __init__(self, index: int, pieces: tuple[Piece, ...]) -> None:
        super().__init__(index)
        self.index = index
        self.pieces = pieces

    def __repr__(self) -> str:
        return f"KlogInputPartition({self.index}, {len(self.pieces)} pieces)"


@dataclass(frozen=True)
class Pruning:
    """Bounds taken from pushed filters (all optional, intersected with the options' ranges)."""

    topics: frozenset[str] | None = None
    partitions: frozenset[int] | None = None
    partition_min: int | None = None
    partition_max: int | None = None  # inclusive
    offset_min: int | None = None
    offset_end: int | None = None  # exclusive
    timestamp_min_ms: int | None = None  # coarse: records from the first with timestamp >= it

    def keeps(self, tp: TopicPartition) -> bool:
        if self.topics is not None and tp.topic not in self.topics:
            return False
        if self.partitions is not None and tp.partition not in self.partitions:
            return False
        if self.partition_min is not None and tp.partition < self.partition_min:
            return False
        return not (self.partition_max is not None and tp.partition > self.partition_max)


NO_PRUNING = Pruning()


@dataclass(frozen=True)
class ResolvedRange:
    topic_partition: TopicPartition
    path: str
    start: int
    end: int


def select_partitions(opts: ReadOptions) -> list[PartitionDir]:
    parts = [p for p in find_partitions(opts.paths) if any(p.path.glob("*.log"))]
    names = {p.topic_partition.topic for p in parts}
    if opts.topics is not None:
        missing = [t for t in opts.topics if t not in names]
        if missing:
            raise InvalidOptionError(f"no such topic in {', '.join(opts.paths)}: {', '.join(missing)}; topics there: "
                                     f"{', '.join(sorted(names)) or 'none'}")
        parts = [p for p in parts if p.topic_partition.topic in set(opts.topics)]
    elif opts.topic_pattern is not None:
        rx = re.compile(opts.topic_pattern)
        parts = [p for p in parts if rx.fullmatch(p.topic_partition.topic)]
    elif opts.assign is not None:
        parts = _require_listed(parts, opts.assign, "assign")
    else:
        explicit = [s for s in (opts.starting, opts.ending) if s.kind in ("offsets", "timestamps")]
        if explicit and explicit[0].offsets is not None:
            parts = _require_listed(parts, explicit[0].offsets, "startingOffsets/endingOffsets")
    return parts


def _require_listed(parts: list[PartitionDir], listed: dict[str, dict[int, int]] | object, what: str) -> list[PartitionDir]:
    assert isinstance(listed, dict)
    have = {p.topic_partition: p for p in parts}
    wanted = [TopicPartition(t, p) for t, ps in listed.items() for p in ps]
    missing = [str(tp) for tp in wanted if tp not in have]
    if missing:
        raise InvalidOptionError(f"option {what} names partitions that do not exist: {', '.join(missing)}")
    return [have[tp] for tp in sorted(wanted)]


def _offset_for(spec: OffsetSpec, tp: TopicPartition, lg: Log, latest: int, *, starting: bool,
                strategy: str) -> int:
    if spec.kind == "earliest":
        return lg.log_start_offset
    if spec.kind == "latest":
        return latest
    if spec.kind == "offsets":
        assert spec.offsets is not None
        v = _listed(spec.offsets, tp, "startingOffsets" if starting else "endingOffsets")
        return lg.log_start_offset if v == EARLIEST else latest if v == LATEST else int(v)
    ts = spec.timestamp if spec.kind == "timestamp" else None
    if spec.kind == "timestamps":
        assert spec.offsets is not None
        ts = _listed(spec.offsets, tp, "startingOffsetsByTimestamp" if starting else "endingOffsetsByTimestamp")
    assert ts is not None
    found = lg.offset_for_timestamp(ts)
    if found is not None:
        return min(found.offset, latest)
    if starting and strategy == "error":
        raise InvalidOptionError(f"no record at or after timestamp {ts} in {tp} (startingOffsetsByTimestampStrategy="
                                 "error); use startingOffsetsByTimestampStrategy=latest to start at the end instead")
    return latest


def _listed(m: object, tp: TopicPartition, what: str) -> int:
    assert isinstance(m, dict)
    parts = m.get(tp.topic)
    if parts is None or tp.partition not in parts:
        raise InvalidOptionError(f"option {what} does not list {tp}; list every partition read (-2 earliest, "
                                 "-1 latest)")
    value: int = parts[tp.partition]
    return value


def resolve(opts: ReadOptions, pd: PartitionDir, lg: Log) -> ResolvedRange:
    tp = pd.topic_partition
    latest = lg.last_stable_offset if opts.read_committed else lg.log_end_offset
    start = _offset_for(opts.starting, tp, lg, latest, starting=True, strategy=opts.starting_timestamp_strategy)
    end = _offset_for(opts.ending, tp, lg, latest, starting=False, strategy=opts.starting_timestamp_strategy)
    if start < lg.log_start_offset:
        if opts.fail_on_data_loss:
            raise OffsetOutOfRangeError(
                f"{tp}: starting offset {start} is below the log start offset {lg.log_start_offset} (offsets "
                f"{start}..{lg.log_start_offset - 1} were deleted); set failOnDataLoss=false to start at "
                f"{lg.log_start_offset}")
        log.warning("%s: offsets %d..%d are gone; reading from %d", tp, start, lg.log_start_offset - 1,
                    lg.log_start_offset)
        start = lg.log_start_offset
    if start > latest:
        if opts.fail_on_data_loss:
            raise OffsetOutOfRangeError(f"{tp}: starting offset {start} is past the end of the log ({latest})")
        start = latest
    if end > latest:
        log.warning("%s: ending offset %d is past the end of the log; reading up to %d", tp, end, latest)
        end = latest
    return ResolvedRange(tp, str(pd.path), start, max(start, end))


def _slices(lg: Log, rng: ResolvedRange, aborted: tuple[AbortedTxn, ...] | None) -> list[Piece]:
    """Byte slices of the segments holding ``[start, end)``, cut at index entries into pieces."""
    out: list[Piece] = []
    if rng.end <= rng.start:
        return out
    segs = lg.segments
    for i, seg in enumerate(segs):
        nxt = segs[i + 1].base_offset if i + 1 < len(segs) else None
        if nxt is not None and nxt <= rng.start:
            continue
        if seg.base_offset >= rng.end:
            break
        first = seg.translate_offset(rng.start) if rng.start > seg.base_offset else None
        start_pos = first.position if first is not None else 0
        last = seg.translate_offset(rng.end)
        end_pos = seg.size_in_bytes
        if last is not None:
            # the batch holding `end` starts at last.position: stop before it unless it holds offsets < end
            end_pos = last.position + last.size if _batch_base(seg, last.position) < rng.end else last.position
        if end_pos <= start_pos:
            continue
        est_first = max(rng.start, seg.base_offset)
        est_last = min(rng.end, nxt if nxt is not None else rng.end)
        out.append(Piece(rng.topic_partition.topic, rng.topic_partition.partition, str(seg.log_path), start_pos,
                         end_pos, rng.start, rng.end, aborted, max(0, est_last - est_first), seg.file_identity))
    return out


def _batch_base(seg: LogSegment, position: int) -> int:
    for batch in seg.batches(position):
        return batch.base_offset
    return seg.base_offset


def _cut(lg: Log, piece: Piece, parts: int) -> list[Piece]:
    """Cut a piece into about ``parts`` pieces of equal bytes at offset-index entries."""
    if parts <= 1:
        return [piece]
    seg = next(s for s in lg.segments if str(s.log_path) == piece.log_path)
    entries = [e for e in seg.offset_index.all_entries() if piece.start_position < e.position < piece.end_position]
    if not entries:
        return [piece]
    step = piece.nbytes / parts
    cuts: list[tuple[int, int]] = []  # (position, offset at about that position)
    target = piece.start_position + step
    for e in entries:
        if e.position >= target and (not cuts or e.position > cuts[-1][0]):
            cuts.append((e.position, e.offset))
            target = e.position + step
    bounds = [(piece.start_position, max(piece.min_offset, seg.base_offset))] + cuts + [(piece.end_position, None)]
    out = []
    for (p0, o0), (p1, o1) in zip(bounds, bounds[1:], strict=False):
        est = ((o1 if o1 is not None else min(piece.end_offset, o0 + piece.est_records)) - o0) if o0 is not None else 0
        out.append(Piece(piece.topic, piece.partition, piece.log_path, p0, p1, piece.min_offset, piece.end_offset,
                         piece.aborted, max(0, est), piece.file_id))
    return out


def _prune(rng: ResolvedRange, lg: Log, pruning: Pruning) -> ResolvedRange:
    start, end = rng.start, rng.end
    if pruning.offset_min is not None:
        start = max(start, pruning.offset_min)
    if pruning.offset_end is not None:
        end = min(end, pruning.offset_end)
    if pruning.timestamp_min_ms is not None and start < end:
        found = lg.offset_for_timestamp(pruning.timestamp_min_ms)
        start = max(start, found.offset if found is not None else end)
    return ResolvedRange(rng.topic_partition, rng.path, min(start, end), end)


def _check_lost_data(opts: ReadOptions, pd: PartitionDir, lg: Log) -> None:
    """A log whose read-only open had to stop before the end of its data (a corrupt batch in a dir
    that was not shut down cleanly) fails the read, or with failOnDataLoss=false is read up to the
    damage with a warning; it is never silently shorter. A torn tail is not a loss."""
    lost = lost_data_notes(lg)
    if not lost:
        return
    if opts.fail_on_data_loss:
        raise CorruptRecordError(f"{pd.topic_partition}: data in the middle of {pd.path} is unreadable: {lost[0]}; "
                                 "set failOnDataLoss=false to read the records before it ('klog verify' lists every "
                                 "problem)")
    log.warning("%s: reading only up to the damage (failOnDataLoss=false): %s", pd.topic_partition, "; ".join(lost))


def plan(opts: ReadOptions, pruning: Pruning = NO_PRUNING) -> tuple[list[KlogInputPartition], list[ResolvedRange]]:
    """Input partitions for a batch read, and the resolved range of every topic-partition."""
    ranges: list[ResolvedRange] = []
    pieces: list[tuple[Log, Piece]] = []
    logs: list[Log] = []
    try:
        for pd in select_partitions(opts):
            if not pruning.keeps(pd.topic_partition):
                continue
            try:
                lg = open_log_read_only(pd)
            except PendingCommitError:
                continue  # a new partition whose first commit is still being applied: empty for now
            logs.append(lg)
            _check_lost_data(opts, pd, lg)
            rng = _prune(resolve(opts, pd, lg), lg, pruning)
            ranges.append(rng)
            aborted = tuple(lg.aborted_transactions(rng.start, rng.end)) if opts.read_committed else None
            pieces += [(lg, p) for p in _slices(lg, rng, aborted)]
        split = split_pieces(pieces, opts)
    finally:
        for lg in logs:
            lg.close()
    return pack(split, opts), ranges


def split_pieces(pieces: list[tuple[Log, Piece]], opts: ReadOptions) -> list[Piece]:
    """Cut large pieces at index entries (by ``maxBytesPerPartition``, ``maxRecordsPerPartition``
    and ``minPartitions``); the logs must still be open."""
    split: list[Piece] = []
    total_records = sum(p.est_records for _, p in pieces) or 1
    for lg, p in pieces:
        parts = math.ceil(p.nbytes / opts.max_bytes_per_partition)
        if opts.max_records_per_partition:
            parts = max(parts, math.ceil(p.est_records / opts.max_records_per_partition))
        if opts.min_partitions and opts.min_partitions > len(pieces):
            parts = max(parts, round(p.est_records / total_records * opts.min_partitions))
        split += _cut(lg, p, parts)
    return split


def slices(lg: Log, rng: ResolvedRange, *, read_committed: bool) -> list[Piece]:
    """The pieces of one resolved range (with its aborted transactions under read_committed)."""
    aborted = tuple(lg.aborted_transactions(rng.start, rng.end)) if read_committed else None
    return _slices(lg, rng, aborted)


#: Pieces smaller than this are packed together (a task costs tens of ms); larger ones get a task
#: each, so partitions are read in parallel as in Spark's Kafka source.
PACK_BELOW_BYTES = 8 << 20


def pack(pieces: list[Piece], opts: ReadOptions) -> list[KlogInputPartition]:
    """One task per large piece; consecutive small pieces share a task (up to the byte budget)."""
    groups: list[list[Piece]] = []
    target_tasks = opts.min_partitions or 1
    budget = min(opts.max_bytes_per_partition, PACK_BELOW_BYTES)
    if len(pieces) >= target_tasks and target_tasks > 1:
        budget = min(budget, max(1, sum(p.nbytes for p in pieces) // target_tasks))
    current: list[Piece] = []
    size = 0
    records = 0
    for p in pieces:
        over_records = opts.max_records_per_partition is not None and \
            records + p.est_records > opts.max_records_per_partition
        if current and (size + p.nbytes > budget or over_records):
            groups.append(current)
            current, size, records = [], 0, 0
        current.append(p)
        size += p.nbytes
        records += p.est_records
    if current:
        groups.append(current)
    return [KlogInputPartition(i, tuple(g)) for i, g in enumerate(groups)]


def describe_plan(parts: list[KlogInputPartition]) -> str:
    return "; ".join(f"task {p.index}: " + ", ".join(f"{x.topic}-{x.partition}@{Path(x.log_path).name}"
                                                     f"[{x.start_position}:{x.end_position}]" for x in p.pieces)
                     for p in parts)

