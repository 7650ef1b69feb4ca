"""A piece: the unit of reading, a byte slice of one segment and the offsets wanted from it.

The rules that make pieces live here, once: :func:`slices` (a range's byte slices, one per
segment) and :func:`aborted_for` (Kafka's fetch rule for a piece's aborted transactions). The
planner (:mod:`storage_core.read.planner`) cuts slices further and the piece reader
(:mod:`storage_core.read.piece_reader`) reads them; the group offsets
(:mod:`storage_core.read.groups`) read ``__consumer_offsets`` through the same two rules, below the
planner (which resolves ``startingOffsetsFromGroup`` through them).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from storage_core.fs import ObjectPath, StorageOptions, as_path
from storage_core.log.aiven.objects import AivenPath
from storage_core.log.log import Log
from storage_core.log.segment import LogSegment, resolve_segment_file
from storage_core.log.topic_partition import TopicPartition
from storage_core.log.txn_index import AbortedTxn

__all__ = ["Piece", "aborted_for", "slices"]


@dataclass(frozen=True)
class Piece:
    """A byte slice of one segment and the offsets wanted from it (picklable: paths and numbers)."""

    topic: str
    partition: int
    log_path: str
    start_position: int
    end_position: int
    min_offset: int  # records below it are not wanted (the range's start)
    end_offset: int  # exclusive
    #: read_committed: the aborted transactions this piece may meet (Kafka's fetch rule); None: read_uncommitted
    aborted: tuple[AbortedTxn, ...] | None
    est_records: int
    #: inode number of the .log when planned: a file a compaction put in its place is never read
    file_id: int | None = None
    #: how to reach ``log_path`` when it is a URI (settings, never a client: :mod:`storage_core.fs`)
    storage: StorageOptions | None = None
    #: the base offset of the next segment (None: this is the last one): offsets of this segment are below it
    next_base: int | None = None
    #: the slice runs to the end of the log's last segment, whose tail the open did not check (a
    #: stream following a live log): a partial batch there is a write in progress, not damage
    open_tail: bool = False
    #: the segment file as a path that reads itself (a remote segment of Aiven's layout,
    #: :class:`~storage_core.log.aiven.objects.AivenPath`: picklable, it fetches and decrypts where read)
    source: Path | None = None

    def log_file(self) -> Path:
        """The segment file this piece reads: the one it was planned on (:class:`SegmentGoneError`
        if a writer deleted or replaced it since), local or in object storage."""
        if self.source is not None:
            return self.source
        path = as_path(self.log_path, self.storage)
        return path if self.file_id is None else resolve_segment_file(path, self.file_id)

    @property
    def nbytes(self) -> int:
        return self.end_position - self.start_position


def slices(lg: Log, tp: TopicPartition, start: int, end: int) -> list[Piece]:
    """Byte slices of the segments of ``lg`` holding ``[start, end)``, one per segment (without
    aborted transactions: :func:`aborted_for` gives a piece's)."""
    out: list[Piece] = []
    if end <= start:
        return out
    segs = lg.segments
    for i, seg in enumerate(segs):
        nxt = segs[i + 1].base_offset if i + 1 < len(segs) else None
        if nxt is not None and nxt <= start:
            continue
        if seg.base_offset >= end:
            break
        first = seg.translate_offset(start) if start > seg.base_offset else None
        if start > seg.base_offset and first is None:
            continue  # the segment ends before the range starts (an offset gap up to the next segment)
        start_pos = first.position if first is not None else 0
        # only the segment holding `end` is walked for it (a damaged segment before it is read, not walked here)
        last = seg.translate_offset(end) if nxt is None or end < nxt else None
        end_pos = seg.size_in_bytes
        if last is not None:
            # the batch holding `end` starts at last.position: stop before it unless it holds offsets < end
            end_pos = last.position + last.size if _batch_base(seg, last.position) < end else last.position
        if end_pos <= start_pos:
            continue
        est_first = max(start, seg.base_offset)
        est_last = min(end, nxt if nxt is not None else end)
        # a segment holds the offsets below the next one's base: batches running past it are not read
        # from this copy (lost.py names them)
        out.append(Piece(tp.topic, tp.partition, str(seg.log_path), start_pos, end_pos, start,
                         end if nxt is None else min(end, nxt), None,
                         max(0, est_last - est_first), seg.file_identity,
                         seg.log_path.options if isinstance(seg.log_path, ObjectPath) else None, nxt,
                         nxt is None and end_pos == seg.size_in_bytes and not lg.tail_verified,
                         seg.log_path if isinstance(seg.log_path, AivenPath) else None))
    return out


def _batch_base(seg: LogSegment, position: int) -> int:
    for batch in seg.batches(position):
        return batch.base_offset
    return seg.base_offset


def _first_offset_at(piece: Piece) -> int:
    """The first offset a piece can hold: the range's start, or the offset field of the batch at the
    piece's start position when that is later (a v2 batch's base offset; a legacy message's own
    offset, which no transaction marker can fall inside)."""
    with piece.log_file().open("rb") as f:
        f.seek(piece.start_position)
        head = f.read(8)
    at = int.from_bytes(head, "big", signed=True) if len(head) == 8 else piece.min_offset
    return max(piece.min_offset, at)


def aborted_for(lg: Log, piece: Piece) -> tuple[AbortedTxn, ...]:
    """Kafka's fetch rule for one piece: the aborted transactions whose ABORT marker is at or after
    the piece's first offset and whose first offset is before its end, by first offset."""
    return tuple(lg.aborted_transactions(_first_offset_at(piece), piece.end_offset))
