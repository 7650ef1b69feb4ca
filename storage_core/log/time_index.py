"""``.timeindex``: the time index of a segment (``TimeIndex.java``).

Layout: :data:`TIME_INDEX_ENTRY`, 12 bytes, big-endian::

    int64 timestamp        the largest timestamp seen up to the offset
    int32 relativeOffset   offset - segment base offset

Timestamps strictly increase: :meth:`TimeIndex.maybe_append` writes only when the timestamp is
above the last entry's (starting from ``(-1, base offset)``), so a segment of v0 batches has an
empty time index. A closed segment gets one last entry for its max timestamp; to keep room for
it, the index counts as full one slot early (``entries >= max entries - 1``).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from storage_core.log.index import AbstractIndex

#: timestamp int64, relative offset int32
TIME_INDEX_ENTRY = struct.Struct(">qi")
NO_TIMESTAMP = -1


@dataclass(frozen=True, slots=True)
class TimestampOffset:
    timestamp: int
    offset: int


class TimeIndex(AbstractIndex[TimestampOffset]):
    ENTRY = TIME_INDEX_ENTRY
    RELATIVE_OFFSET_FIELD = 1

    def entry(self, slot: int) -> TimestampOffset:
        ts, rel = self._raw(slot)
        return TimestampOffset(ts, self.base_offset + rel)

    def all_entries(self) -> list[TimestampOffset]:
        return [self.entry(i) for i in range(self.entries)]

    @property
    def last_entry(self) -> TimestampOffset:
        return self.entry(self.entries - 1) if self.entries else TimestampOffset(NO_TIMESTAMP, self.base_offset)

    def is_full(self) -> bool:
        return self.entries >= self.max_entries - 1

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """Largest entry with timestamp <= target, or ``(-1, base offset)``."""
        slot = self._largest_lower_bound_slot(target_timestamp, 0)
        return TimestampOffset(NO_TIMESTAMP, self.base_offset) if slot < 0 else self.entry(slot)

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        last = self.last_entry
        if not skip_full_check and self.is_full():
            raise self._corrupt(f"Attempt to append to a full time index (size = {self.entries}) in {self.path}")
        if self.entries and offset < last.offset:
            raise self._corrupt(f"Attempt to append an offset ({offset}) to slot {self.entries} no larger than the "
                                f"last offset appended ({last.offset}) to {self.path}")
        if self.entries and timestamp < last.timestamp:
            raise self._corrupt(f"Attempt to append a timestamp ({timestamp}) to slot {self.entries} no larger than "
                                f"the last timestamp appended ({last.timestamp}) to {self.path}")
        if timestamp > last.timestamp:
            self._write(timestamp, self.relative(offset))

    def truncate_to(self, offset: int) -> None:
        """Remove entries with offset >= ``offset``."""
        keep = 0
        for i in range(self.entries):
            if self.entry(i).offset >= offset:
                break
            keep = i + 1
        self.truncate_to_entries(keep)

    def sanity_check(self) -> None:
        """``TimeIndex.sanityCheck``."""
        if self._length_now() % self.entry_size:
            raise self._corrupt(f"Time index file {self.path.name} is corrupt, found {self._length_now()} bytes which "
                                f"is neither positive nor a multiple of {self.entry_size}")
        if self.entries:
            first, last = self.entry(0), self.last_entry
            if last.timestamp < first.timestamp:
                raise self._corrupt(f"Corrupt time index found, time index file ({self.path}) has non-zero size but "
                                    f"the last timestamp is {last.timestamp} which is less than the first timestamp "
                                    f"{first.timestamp}")
            if last.offset < self.base_offset:
                raise self._corrupt(f"Corrupt time index found, time index file ({self.path}) has non-zero size but "
                                    f"the last offset is {last.offset} which is less than the first offset "
                                    f"{self.base_offset}")
