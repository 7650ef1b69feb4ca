"""``SkimpyOffsetMap``: key digest → latest offset, with a bounded number of slots.

Two twins behind one interface (:class:`OffsetMap`): the native kernel's ``OffsetMap`` (Kafka's
flat array of 24-byte slots, open addressing, MD5 in C; it also walks whole runs of batches, see
:mod:`storage_core.cleaner.cleaner`) and :class:`SkimpyOffsetMap`, a dict of ``hashlib`` digests,
the pure-Python fallback. :func:`new_offset_map` picks the kernel's where it is built.
"""

from __future__ import annotations

import hashlib
from typing import Protocol

from storage_core.errors import KlogError
from storage_core.record.kernel import native_kernel

#: Bytes per map entry as Kafka counts them: a 16-byte MD5 digest and an 8-byte offset.
OFFSET_MAP_ENTRY_BYTES = 16 + 8
#: ``log.cleaner.io.buffer.load.factor``: the map is full at this fraction of its slots.
OFFSET_MAP_LOAD_FACTOR = 0.9
#: Default map memory of one cleaning (Kafka: ``log.cleaner.dedupe.buffer.size`` 128 MiB shared
#: by the cleaner threads). 16 MiB = 699,050 slots.
DEFAULT_MEMORY_BYTES = 16 << 20
#: Kafka's key hash (``log.cleaner`` ``SkimpyOffsetMap(memory, "MD5")``).
HASH_ALGORITHM = "md5"


class OffsetMap(Protocol):
    """What the cleaner asks of a map (``OffsetMap``); both twins have it."""

    @property
    def memory_bytes(self) -> int: ...
    @property
    def slots(self) -> int: ...
    @property
    def max_entries(self) -> int: ...
    @property
    def size(self) -> int: ...
    @property
    def latest_offset(self) -> int: ...
    @property
    def is_full(self) -> bool: ...
    @property
    def utilization(self) -> float: ...
    def put(self, key: bytes, offset: int, /) -> None: ...
    def get(self, key: bytes, /) -> int: ...
    def update_latest_offset(self, offset: int, /) -> None: ...
    def clear(self) -> None: ...


def check_memory(memory_bytes: int) -> None:
    """Refuse a map memory that holds no key."""
    if int(memory_bytes // OFFSET_MAP_ENTRY_BYTES * OFFSET_MAP_LOAD_FACTOR) < 1:
        raise KlogError(f"offset map memory of {memory_bytes} bytes holds no key; expected at least "
                        f"{-(-OFFSET_MAP_ENTRY_BYTES // OFFSET_MAP_LOAD_FACTOR):.0f} bytes "
                        f"({OFFSET_MAP_ENTRY_BYTES} bytes per key at load factor {OFFSET_MAP_LOAD_FACTOR})")


def new_offset_map(memory_bytes: int = DEFAULT_MEMORY_BYTES, *, native: bool | None = None) -> OffsetMap:
    """The kernel's map where the kernel is built (``native=None``), else :class:`SkimpyOffsetMap`;
    ``native=False`` forces the Python twin."""
    check_memory(memory_bytes)
    kernel = native_kernel() if native is not False else None
    if kernel is None or not hasattr(kernel, "OffsetMap"):  # no kernel, or one built before it had the map
        return SkimpyOffsetMap(memory_bytes)
    m: OffsetMap = kernel.OffsetMap(memory_bytes)
    return m


class SkimpyOffsetMap:
    """Key digest → latest offset, with a fixed number of slots (``SkimpyOffsetMap``).

    ``slots = memory_bytes // 24``; the map counts as full at ``slots * 0.9`` distinct keys.
    Kafka stores the entries in one byte buffer with open addressing; klog keeps them in a dict
    keyed by the 16-byte digest (Python's per-entry overhead is larger than 24 bytes, about
    100 bytes; the *number* of keys is bounded exactly as in Kafka, so the passes are the same).
    """

    __slots__ = ("memory_bytes", "slots", "max_entries", "latest_offset", "_map", "_hash")

    def __init__(self, memory_bytes: int = DEFAULT_MEMORY_BYTES) -> None:
        check_memory(memory_bytes)
        slots = memory_bytes // OFFSET_MAP_ENTRY_BYTES
        max_entries = int(slots * OFFSET_MAP_LOAD_FACTOR)
        self.memory_bytes = memory_bytes
        self.slots = slots
        self.max_entries = max_entries
        self.latest_offset = -1
        self._map: dict[bytes, int] = {}
        self._hash = getattr(hashlib, HASH_ALGORITHM)

    def digest(self, key: bytes) -> bytes:
        return bytes(self._hash(key).digest())

    def put(self, key: bytes, offset: int) -> None:
        self._map[self._hash(key).digest()] = offset

    def get(self, key: bytes) -> int:
        """The latest offset of ``key``, or -1."""
        return self._map.get(self._hash(key).digest(), -1)

    def try_put_all(self, keys: list[bytes], offsets: list[int]) -> bool:
        """Put every pair (in order: a later offset of a key wins) when that cannot fill the map,
        and return True; otherwise put nothing and return False (the caller puts one by one)."""
        if len(self._map) + len(keys) > self.max_entries:
            return False
        h = self._hash
        self._map.update(zip([h(k).digest() for k in keys], offsets, strict=True))
        return True

    def get_all(self, keys: list[bytes | None]) -> list[int]:
        """The latest offset of each key (-1 for a missing or null key)."""
        h, get = self._hash, self._map.get
        return [-1 if k is None else get(h(k).digest(), -1) for k in keys]

    @property
    def size(self) -> int:
        return len(self._map)

    @property
    def is_full(self) -> bool:
        return len(self._map) >= self.max_entries

    @property
    def utilization(self) -> float:
        return len(self._map) / self.slots

    def update_latest_offset(self, offset: int) -> None:
        self.latest_offset = offset

    def clear(self) -> None:
        self._map.clear()
        self.latest_offset = -1


