"""A piece: the unit of reading, a byte slice of one segment and the offsets wanted from it.

The planner (:mod:`storage_core.read.planner`) makes pieces and the piece reader
(:mod:`storage_core.read.piece_reader`) reads them; the group offsets
(:mod:`storage_core.read.groups`) read ``__consumer_offsets`` with pieces of their own, below the
planner (which resolves ``startingOffsetsFromGroup`` through them).
"""

from __future__ import annotations

from dataclasses import dataclass

from storage_core.log.txn_index import AbortedTxn

__all__ = ["Piece"]


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

    @property
    def nbytes(self) -> int:
        return self.end_position - self.start_position
