"""Walking the batches of a record-set file (``FileRecords.java``, ``FileLogInputStream.java``).

The walk, at each ``position``:

1. stop if fewer than :data:`HEADER_SIZE_UP_TO_MAGIC` (17) bytes remain;
2. read ``offset`` (8), ``size`` (4) and ``magic`` (byte 16);
3. ``size < 14`` (the smallest legacy message) is a :class:`CorruptRecordError`;
4. a batch that runs past the end is a *partial tail*: the end of the data, not an error
   (Kafka's recovery truncates it later); the walk reports it in :attr:`BatchWalk.partial_tail`;
5. magic 0/1 → :class:`LegacyRecordBatch`, otherwise :class:`DefaultRecordBatch`; advance by
   ``12 + size``.

Files are read in large chunks (:data:`READ_CHUNK_BYTES`); a batch never costs a system call
of its own. Nothing is ever written.
"""

from __future__ import annotations

import io
import os
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from storage_core.errors import CorruptRecordError, KlogError
from storage_core.fs import as_path
from storage_core.record.legacy_records import RECORD_OVERHEAD_V0, LegacyRecordBatch
from storage_core.record.records import (
    HEADER_SIZE_UP_TO_MAGIC,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAGIC_VALUE_V2,
    DefaultRecordBatch,
)

__all__ = ["AnyBatch", "BatchRun", "BatchWalk", "ChunkReader", "FileRecords", "PartialTail", "batch_from_bytes", "iter_batches",
           "READ_CHUNK_BYTES", "RUN_SHORT", "RUN_TAKEN", "RUN_YIELD"]

AnyBatch = DefaultRecordBatch | LegacyRecordBatch

#: Bytes read from a file at a time.
READ_CHUNK_BYTES = 8 << 20
_OFFSET_SIZE = struct.Struct(">qi")


#: What a :data:`BatchRun` says when it stops (:meth:`FileRecords.runs`); the kernel's ``CLEAN_*``.
RUN_TAKEN = 0
RUN_SHORT = 1
RUN_YIELD = 2
#: ``run(chunk, i) -> (i, why)``: takes whole batches from ``chunk[i:]`` (:meth:`FileRecords.runs`).
BatchRun = Callable[[memoryview, int], tuple[int, int]]


@dataclass(frozen=True, slots=True)
class PartialTail:
    """Bytes at the end of a file that do not make a whole batch."""

    position: int
    size: int
    declared_size: int | None  # the batch's declared size (LOG_OVERHEAD included), if readable


def batch_from_bytes(buf: bytes | bytearray | memoryview, position: int = 0, path: str | None = None) -> AnyBatch:
    """Wrap the bytes of exactly one batch, choosing the class by the magic byte."""
    if buf[MAGIC_OFFSET] < MAGIC_VALUE_V2:
        return LegacyRecordBatch(buf, position, path)
    return DefaultRecordBatch(buf, position, path)


class BatchWalk(Iterator[AnyBatch]):
    """An iterator over batches that remembers where the valid data ended.

    After the walk, :attr:`valid_bytes` is the position just past the last whole batch and
    :attr:`partial_tail` says what followed it, if anything.
    """

    def __init__(self, chunks: Iterator[AnyBatch]) -> None:
        self._it = chunks
        self.valid_bytes = 0
        self.partial_tail: PartialTail | None = None

    def __next__(self) -> AnyBatch:
        return next(self._it)


def _batch_total(view: memoryview | bytes, pos: int, base: int, path: str | None) -> int:
    """The whole size (log overhead included) of the batch at ``view[pos]``, whose first
    ``HEADER_SIZE_UP_TO_MAGIC`` bytes must be there; a size below any batch's is corruption."""
    _offset, size = _OFFSET_SIZE.unpack_from(view, pos)
    if size < RECORD_OVERHEAD_V0:
        raise CorruptRecordError(
            f"Found record size {size} smaller than minimum record overhead ({RECORD_OVERHEAD_V0})",
            path=path, position=base + pos)
    return LOG_OVERHEAD + int(size)


class ChunkReader:
    """Reads ``[pos, stop)`` of a file a chunk at a time. A chunk always holds the whole first
    batch when its size is readable (however large the batch), so every chunk makes progress.

    With ``reuse`` every chunk is read into one buffer, so a chunk (and every batch cut from it)
    is valid only until the next read: for walks that keep nothing (the bulk decode, a recovery
    scan), which then touch no freshly allocated memory. Without it each chunk is its own.
    """

    def __init__(self, f: io.RawIOBase, stop: int, chunk_bytes: int, first: int, *, reuse: bool = True) -> None:
        self._f = f
        self._stop = stop
        self._reuse = reuse
        self._buf = bytearray(max(1, min(chunk_bytes, stop - first)) if reuse else 0)
        self._chunk_bytes = chunk_bytes

    def read(self, pos: int) -> memoryview:
        want = min(self._chunk_bytes, self._stop - pos)
        if want > len(self._buf) or not self._reuse:
            self._buf = bytearray(want)
        n = self._read_into(pos, memoryview(self._buf)[:want])
        if n >= HEADER_SIZE_UP_TO_MAGIC and n < self._stop - pos:
            _off, size = _OFFSET_SIZE.unpack_from(self._buf, 0)
            total = min(LOG_OVERHEAD + size, self._stop - pos)
            if size >= RECORD_OVERHEAD_V0 and total > n:  # the first batch must fit
                if total > len(self._buf):
                    grown = bytearray(total)
                    grown[:n] = self._buf[:n]
                    self._buf = grown
                n += self._read_into(pos + n, memoryview(self._buf)[n:total])
        return memoryview(self._buf)[:n]

    def _read_into(self, pos: int, into: memoryview) -> int:
        f = self._f
        f.seek(pos)
        got = 0
        while got < len(into):
            k = f.readinto(into[got:])
            if not k:
                break
            got += k
        return got


def _walk_view(view: memoryview, base: int, start: int, end: int, path: str | None,
               at_eof: bool, walk: BatchWalk) -> Iterator[AnyBatch]:
    """Batches of ``view[start:end]``; ``base`` is the file position of ``view[0]``.

    Stops at the first batch that does not fit; if ``at_eof`` that is a partial tail.
    """
    pos = start
    while end - pos >= HEADER_SIZE_UP_TO_MAGIC:
        total = _batch_total(view, pos, base, path)
        if total > end - pos:
            if at_eof:
                walk.partial_tail = PartialTail(base + pos, end - pos, total)
            return
        yield batch_from_bytes(view[pos:pos + total], base + pos, path)
        pos += total
        walk.valid_bytes = base + pos
    if at_eof and end > pos:
        walk.partial_tail = PartialTail(base + pos, end - pos, None)


def iter_batches(buf: bytes | bytearray | memoryview, *, path: str | None = None, base_position: int = 0) -> BatchWalk:
    """Walk the batches of an in-memory record set (a fetch response's records, say)."""
    view = memoryview(buf)
    walk = BatchWalk(iter(()))
    walk.valid_bytes = base_position
    walk._it = _walk_view(view, base_position, 0, len(view), path, True, walk)
    return walk


class FileRecords:
    """A record-set file (``.log``, a snapshot ``.checkpoint``, a fetch capture), read-only."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = as_path(path)
        try:
            self.size_in_bytes = self.path.stat().st_size
        except FileNotFoundError:
            raise KlogError(f"No such record file: {self.path}") from None
        if not self.path.is_file():
            raise KlogError(f"Not a regular file: {self.path}")

    def batches(self, start: int = 0, end: int | None = None, *, chunk_bytes: int = READ_CHUNK_BYTES,
                transient: bool = False) -> BatchWalk:
        """Walk from byte ``start`` (a batch boundary) to ``end`` (default: the file's end). With
        ``transient`` a batch's bytes are valid only until the next batch is taken (one reused
        buffer, see :class:`ChunkReader`): for walks that keep no batch."""
        stop = self.size_in_bytes if end is None else min(end, self.size_in_bytes)
        walk = BatchWalk(iter(()))
        walk.valid_bytes = start
        walk._it = self._walk(start, stop, chunk_bytes, walk, transient)
        return walk

    def heads(self, start: int = 0) -> Iterator[tuple[int, int, int]]:
        """``(position, base offset, whole size)`` of each whole batch from byte ``start`` (a batch
        boundary), reading only each batch's first bytes (one ``pread`` a batch): for walks that
        need where the batches are, not what they hold. A partial tail ends it; a size below any
        batch's is a :class:`CorruptRecordError`, as in :meth:`batches`."""
        name = str(self.path)
        stop = self.size_in_bytes
        with self.path.open("rb", buffering=0) as f:
            pos = start
            while stop - pos >= HEADER_SIZE_UP_TO_MAGIC:
                f.seek(pos)
                head = f.read(HEADER_SIZE_UP_TO_MAGIC)
                if len(head) < HEADER_SIZE_UP_TO_MAGIC:
                    return  # the file shrank under us: what is left is a partial tail
                total = _batch_total(head, 0, pos, name)
                if total > stop - pos:
                    return
                yield pos, _OFFSET_SIZE.unpack_from(head, 0)[0], total
                pos += total

    def runs(self, run: BatchRun, start: int = 0, end: int | None = None, *,
             chunk_bytes: int | None = None) -> Iterator[AnyBatch]:
        """Walk from byte ``start`` (a batch boundary) to ``end`` as :meth:`batches` does, handing
        the bytes to ``run`` first and yielding only the batches it leaves to the caller.

        ``run(chunk, i)`` takes what batches it can from ``chunk[i:]`` (whole batches, in order)
        and returns where it stopped and why: :data:`RUN_TAKEN` (every byte), :data:`RUN_SHORT`
        (the next batch is not whole in the chunk: the walk reads on), :data:`RUN_YIELD` (the next
        batch goes to the caller, then ``run`` goes on after it), anything else (the walk ends).
        A partial tail ends the walk as it ends :meth:`batches`. ``chunk_bytes`` defaults to
        :data:`READ_CHUNK_BYTES` (read when called).
        """
        chunk_bytes = READ_CHUNK_BYTES if chunk_bytes is None else chunk_bytes
        stop = self.size_in_bytes if end is None else min(end, self.size_in_bytes)
        name = str(self.path)
        with self.path.open("rb", buffering=0) as f:
            reader = ChunkReader(f, stop, chunk_bytes, start, reuse=False)  # the caller may keep the batches
            pos = start
            while pos < stop:
                view = reader.read(pos)
                at_eof = pos + len(view) >= stop
                i = 0
                while True:
                    i, why = run(view, i)
                    if why in (RUN_TAKEN, RUN_SHORT):
                        break
                    if why != RUN_YIELD:
                        return
                    if len(view) - i < HEADER_SIZE_UP_TO_MAGIC:
                        break
                    total = _batch_total(view, i, pos, name)
                    if total > len(view) - i:
                        break
                    yield batch_from_bytes(view[i:i + total], pos + i, name)
                    i += total
                if i == 0:
                    if not at_eof:  # cannot happen: the first batch was made to fit
                        raise CorruptRecordError("walk made no progress", path=name, position=pos)
                    return  # a partial tail
                pos += i

    def _walk(self, start: int, stop: int, chunk_bytes: int, walk: BatchWalk, transient: bool) -> Iterator[AnyBatch]:
        name = str(self.path)
        with self.path.open("rb", buffering=0) as f:
            reader = ChunkReader(f, stop, chunk_bytes, start, reuse=transient)
            pos = start
            while pos < stop:
                chunk = reader.read(pos)
                at_eof = pos + len(chunk) >= stop
                before = walk.valid_bytes
                yield from _walk_view(chunk, pos, 0, len(chunk), name, at_eof, walk)
                if at_eof or walk.valid_bytes == before:
                    if not at_eof:  # cannot happen: the first batch was made to fit
                        raise CorruptRecordError("walk made no progress", path=name, position=pos)
                    return
                pos = walk.valid_bytes
