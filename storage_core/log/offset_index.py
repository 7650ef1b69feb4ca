"""``.index``: the offset index of a segment (``OffsetIndex.java``).

Layout: :data:`OFFSET_INDEX_ENTRY`, 8 bytes, big-endian::

    int32 relativeOffset   offset - segment base offset
    int32 position         byte position of a batch start in the .log

An entry ``(O, P)`` says: the batch starting at byte ``P`` has *last* offset ``O``. Entries are
sparse (one per ``index.interval.bytes`` of log, see :func:`storage_core.log.segment.scan_segment`)
and strictly increasing. :meth:`OffsetIndex.lookup` returns the largest entry with offset <=
target, or ``(base offset, 0)``; the segment is then scanned from that position.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from storage_core.log.index import AbstractIndex

#: relative offset int32, position int32
OFFSET_INDEX_ENTRY = struct.Struct(">ii")


@dataclass(frozen=True, slots=True)
class OffsetPosition:
    offset: int
    position: int


class OffsetIndex(AbstractIndex[OffsetPosition]):
    ENTRY = OFFSET_INDEX_ENTRY
    RELATIVE_OFFSET_FIELD = 0

    def entry(self, slot: int) -> OffsetPosition:
        rel, pos = self._raw(slot)
        return OffsetPosition(self.base_offset + rel, pos)

    def all_entries(self) -> list[OffsetPosition]:
        return [self.entry(i) for i in range(self.entries)]

    @property
    def last_offset(self) -> int:
        return self.entry(self.entries - 1).offset if self.entries else self.base_offset

    def lookup(self, target_offset: int) -> OffsetPosition:
        """Largest entry with offset <= target, or ``(base offset, 0)``."""
        slot = self._largest_lower_bound_slot(target_offset - self.base_offset, 0)
        if slot < 0:
            return OffsetPosition(self.base_offset, 0)
        found = self.entry(slot)
        if found.position < 0:  # a damaged entry: no read may seek there
            raise self._corrupt(f"Corrupt index found, index file ({self.path}) has an entry for offset "
                                f"{found.offset} at position {found.position}; expected a position >= 0")
        return found

    def append(self, offset: int, position: int) -> None:
        """Add ``(offset, position)``; offsets must increase strictly (``InvalidOffsetException``)."""
        if self.entries and offset <= self.last_offset:
            raise self._corrupt(f"Attempt to append an offset ({offset}) no larger than the last offset appended "
                                f"({self.last_offset}) to {self.path}")
        self._write(self.relative(offset), position)

    def truncate_to(self, offset: int) -> None:
        """Remove entries with offset >= ``offset``."""
        slot = self._largest_lower_bound_slot(offset - self.base_offset, 0)
        keep = 0 if slot < 0 else (slot if self.entry(slot).offset == offset else slot + 1)
        self.truncate_to_entries(keep)

    def sanity_check(self) -> None:
        """``OffsetIndex.sanityCheck``: a whole number of entries, last offset not below the base."""
        if self._length_now() % self.entry_size:
            raise self._corrupt(f"Index file {self.path.name} is corrupt, found {self._length_now()} bytes which is "
                                f"neither positive nor a multiple of {self.entry_size}")
        if self.entries and self.last_offset < self.base_offset:
            raise self._corrupt(f"Corrupt index found, index file ({self.path}) has non-zero size but the last offset "
                                f"is {self.last_offset} which is less than the base offset {self.base_offset}.")
