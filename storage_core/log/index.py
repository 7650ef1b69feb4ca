"""The shared machinery of Kafka's sparse indexes (``AbstractIndex.java``).

An index file is an array of fixed-size big-endian entries, each keyed by an offset relative to
the segment's base offset. The file of an *active* segment is preallocated to
``segment.index.bytes`` rounded down to a whole entry and zero-filled past the last entry; the
index of a closed segment is trimmed to its entries. Kafka assumes a file it opens is valid and
counts ``length // entry size`` entries, which is why closed indexes must be trimmed.

klog opens an index in one of two modes:

* **read-only** (every reader): the file is read into memory once (not mapped: a writer in
  another process may trim it at any moment, and a mapped page past the new end of a file is
  SIGBUS, which no Python code can catch) and never resized. A zero-filled tail (a preallocated index copied off a running broker) is recognised the way
  ``DumpLogSegments`` does, by the first entry after the first whose relative offset is 0.
* **writable**: the file is preallocated to ``max_index_size`` while the segment is active,
  appended through a writable map, and trimmed by :meth:`AbstractIndex.trim_to_valid_size`
  (on roll) and :meth:`AbstractIndex.close`.

Lookups are binary searches over the map, first within the *warm section* (the last 8 KiB of
entries, which tail reads keep in the page cache), as ``indexSlotRangeFor`` does.
"""

from __future__ import annotations

import io
import mmap
import os
import struct
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Generic, TypeVar

if TYPE_CHECKING:
    from typing_extensions import Self

from storage_core.errors import CorruptIndexError, KlogError
from storage_core.fs import as_path
from storage_core.limits import INT32_MAX

#: Bytes of the file's tail that lookups try first (``AbstractIndex`` warm section).
WARM_SECTION_BYTES = 8192

E = TypeVar("E")


class AbstractIndex(Generic[E]):
    """A memory-mapped index of fixed-size entries; see the module doc for the two modes."""

    ENTRY: struct.Struct  # set by subclasses
    RELATIVE_OFFSET_FIELD: int  # which of ENTRY's fields is the offset relative to the base

    def __init__(self, path: str | os.PathLike[str], base_offset: int, *, max_index_size: int = -1,
                 writable: bool = False) -> None:
        self.path = as_path(path)
        self.base_offset = base_offset
        self.writable = writable
        self.entry_size = self.ENTRY.size
        self._mmap: mmap.mmap | bytes | None = None
        self._file = None
        self._dirty = False  # written (pwrite, truncate) since the last fsync
        exists = self.path.exists()
        if writable:
            if max_index_size < self.entry_size:
                raise KlogError(f"max_index_size {max_index_size} is smaller than one entry ({self.entry_size} bytes)")
            self._file = open(self.path, "r+b" if exists else "w+b")  # noqa: SIM115 - lives as long as the index
            length = os.fstat(self._file.fileno()).st_size
            fresh = length == 0
            if fresh:
                length = self._round(max_index_size)
                self._file.truncate(length)
            # the first flush always syncs: a process that died may have left unsynced entries
            self._dirty = True
            self.max_index_size = max(max_index_size, length)
            self._map(length, writable=True)
            self._entries = 0 if fresh else self._count_valid_entries()
        else:
            if not exists:
                raise KlogError(f"no such index file: {self.path}")
            # Read, not mapped: a writer may shrink the file at any time (trimming a preallocated
            # index on close), and touching a mapped page past the new end is SIGBUS, which kills
            # the process. A read returns what is there (a zero-filled tail is recognised below).
            with self.path.open("rb") as f:
                fd = _fileno(f)
                if fd is None:  # an object in object storage: one request for the whole file
                    data = f.read()
                    self.max_index_size = len(data)
                else:
                    data, self.max_index_size = self._read_entries(fd)
            length = len(data)
            if length:
                self._mmap = data
            self._entries = self._count_valid_entries()
        self._length = length

    @classmethod
    def in_memory(cls, path: str | os.PathLike[str], base_offset: int, data: bytes) -> Self:
        """A read-only index over entries built in memory (read-only recovery never writes)."""
        self = cls.__new__(cls)
        self.path = as_path(path)
        self.base_offset = base_offset
        self.writable = False
        self.entry_size = cls.ENTRY.size
        self._file = None
        self._dirty = False
        self._mmap = bytes(data)
        self.max_index_size = len(data)
        self._length = len(data)
        self._entries = len(data) // self.entry_size
        return self

    # -- layout
    def _round(self, size: int) -> int:
        return size - size % self.entry_size

    def _map(self, length: int, *, writable: bool) -> None:
        if isinstance(self._mmap, mmap.mmap):
            self._mmap.close()
        self._mmap = None
        assert self._file is not None
        if length:
            self._mmap = mmap.mmap(self._file.fileno(), length, access=mmap.ACCESS_WRITE if writable else mmap.ACCESS_READ)

    def _read_entries(self, fd: int) -> tuple[bytes, int]:
        """The file's bytes up to its zero-filled tail, and the file's size. An active segment's
        index is preallocated (10 MiB by default) and holds its entries in the first few hundred
        KiB: :func:`_zero_tail_slot` finds where the zeros start with single-entry reads, and only
        the slots before it are read. A file that is not a whole number of entries, or that a
        writer trimmed during the search, is read whole."""
        size = os.fstat(fd).st_size
        es = self.entry_size
        if size % es == 0:
            try:
                end = _zero_tail_slot(size // es, lambda slot: self._relative_offset_at(fd, slot))
            except _Trimmed:  # its segment rolled meanwhile: what is left is all entries
                size = os.fstat(fd).st_size
            else:
                if end is not None:  # entries a writer appended since are not wanted (the log as of the open)
                    return _read_all(fd, end * es), size
        return _read_all(fd, size), size

    def _relative_offset_at(self, fd: int, slot: int) -> int:
        """The relative offset in ``slot`` of the file (:class:`_Trimmed` past the file's end)."""
        raw = os.pread(fd, self.entry_size, slot * self.entry_size)
        if len(raw) != self.entry_size:
            raise _Trimmed
        return int(self.ENTRY.unpack(raw)[self.RELATIVE_OFFSET_FIELD])

    def _count_valid_entries(self) -> int:
        """Entries in the file: ``length // entry size``, stopping at a zero-filled tail."""
        n = self._length_now() // self.entry_size
        if self._mmap is None:
            return n
        end = _zero_tail_slot(n, self._relative_offset)
        return n if end is None else end

    def _length_now(self) -> int:
        return 0 if self._mmap is None else len(self._mmap)

    def _relative_offset(self, slot: int) -> int:
        return int(self._raw(slot)[self.RELATIVE_OFFSET_FIELD])

    # -- entries
    @property
    def entries(self) -> int:
        return self._entries

    @property
    def max_entries(self) -> int:
        return self.max_index_size // self.entry_size

    def is_full(self) -> bool:
        return self._entries >= self.max_entries

    @property
    def size_in_bytes(self) -> int:
        return self._entries * self.entry_size

    def _raw(self, slot: int) -> tuple[int, ...]:
        assert self._mmap is not None
        return self.ENTRY.unpack_from(self._mmap, slot * self.entry_size)

    def _write(self, *fields: int) -> None:
        if not self.writable:
            raise KlogError(f"index {self.path} is open read-only")
        if self._entries >= self.max_entries:  # the hard limit (TimeIndex.is_full keeps a slot spare)
            raise KlogError(f"Attempt to append to a full index (size = {self._entries}) in {self.path}")
        if self._mmap is None or (self._entries + 1) * self.entry_size > len(self._mmap):
            self.resize(max(self.max_index_size, (self._entries + 1) * self.entry_size))
        assert isinstance(self._mmap, mmap.mmap) and self._file is not None
        # pwrite, not a store into the map: the file is sparse, and a store into a page the file
        # system cannot allocate (disk full) is a SIGBUS; pwrite fails with ENOSPC instead. The
        # shared map sees the bytes (one page cache).
        data = self.ENTRY.pack(*fields)
        self._dirty = True
        if os.pwrite(self._file.fileno(), data, self._entries * self.entry_size) != len(data):
            raise OSError(28, "short write to index", str(self.path))
        self._entries += 1

    def relative(self, offset: int) -> int:
        rel = offset - self.base_offset
        if not 0 <= rel <= INT32_MAX:
            raise KlogError(f"offset {offset} cannot be stored relative to base offset {self.base_offset} "
                            f"in {self.path}")
        return rel

    def _largest_lower_bound_slot(self, key: int, key_of: int) -> int:
        """Slot of the largest entry whose field ``key_of`` is <= key, or -1 (indexSlotRangeFor)."""
        n = self._entries
        if n == 0:
            return -1

        def value(slot: int) -> int:
            return int(self._raw(slot)[key_of])

        warm = WARM_SECTION_BYTES // self.entry_size
        first_hot = max(0, n - 1 - warm)
        if value(first_hot) < key:
            lo, hi = first_hot, n - 1
        elif value(0) > key:
            return -1
        else:
            lo, hi = 0, first_hot
        while lo < hi:
            mid = (lo + hi + 1) >> 1
            if value(mid) > key:
                hi = mid - 1
            else:
                lo = mid
        return lo

    # -- lifecycle
    def resize(self, new_size: int) -> None:
        if not self.writable or self._file is None:
            raise KlogError(f"index {self.path} is open read-only")
        length = self._round(new_size)
        if length == self._length and (self._mmap is not None or length == 0):
            return  # already that size (a second trim on close)
        # no flush first: entries are written with pwrite, never stored into the map, so the map
        # has no dirty pages of its own; durability is flush()'s job, and truncating is not made
        # any more durable by syncing the bytes before it
        self._map(0, writable=True)
        self._file.truncate(length)
        self._map(length, writable=True)
        self._length = length
        self._dirty = True

    def trim_to_valid_size(self) -> None:
        """Shrink the file to its entries (on roll and close)."""
        if self.writable:
            self.resize(self.size_in_bytes)
            self.max_index_size = max(self.max_index_size, self.size_in_bytes)

    def truncate_to_entries(self, entries: int) -> None:
        old = self._entries
        self._entries = min(entries, old)
        if isinstance(self._mmap, mmap.mmap) and self.writable and self._file is not None and old > self._entries:
            # zero the dropped entries only (written pages): the rest of the sparse file stays unallocated
            start = self._entries * self.entry_size
            end = min(old * self.entry_size, len(self._mmap))
            self._dirty = True
            os.pwrite(self._file.fileno(), bytes(end - start), start)

    def reset(self) -> None:
        """Drop every entry (before a rebuild)."""
        self.truncate_to_entries(0)

    def flush(self) -> None:
        """fsync the index file if this index changed it since the last flush (an fsync, not an
        msync of the map: it also makes a trimmed length durable)."""
        if self.writable and self._file is not None and self._dirty:
            os.fsync(self._file.fileno())
            self._dirty = False

    def close(self) -> None:
        if self.writable and self._file is not None:
            self.trim_to_valid_size()
            self.flush()
        if isinstance(self._mmap, mmap.mmap):
            self._mmap.close()
        self._mmap = None
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _corrupt(self, detail: str) -> CorruptIndexError:
        return CorruptIndexError(detail, path=self.path)


class _Trimmed(Exception):
    """An index file got shorter while it was being searched."""


def _zero_tail_slot(n: int, relative_offset: Callable[[int], int]) -> int | None:
    """Where the zero-filled tail of an index of ``n`` slots starts (the first slot after slot 0
    whose relative offset is 0: ``DumpLogSegments``'s rule; slot 0 may hold relative offset 0, and
    offsets grow, so zeros come only at the end), found by a binary search; None when the last
    slot is not zero (a trimmed index: every slot an entry)."""
    if n <= 1 or relative_offset(n - 1) != 0:
        return None
    lo, hi = 1, n - 1
    while lo < hi:
        mid = (lo + hi) // 2
        if relative_offset(mid) == 0:
            hi = mid
        else:
            lo = mid + 1
    return lo


def _read_all(fd: int, size: int) -> bytes:
    """Up to ``size`` bytes from the start of ``fd`` (fewer where the file ends first)."""
    chunks = []
    pos = 0
    while pos < size:
        chunk = os.pread(fd, size - pos, pos)
        if not chunk:
            break
        chunks.append(chunk)
        pos += len(chunk)
    return b"".join(chunks)


def _fileno(f: IO[bytes]) -> int | None:
    """``f``'s file descriptor; None for a file that has none (an object store's)."""
    try:
        return f.fileno()
    except (AttributeError, OSError, io.UnsupportedOperation):
        return None
