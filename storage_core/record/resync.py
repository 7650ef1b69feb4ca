"""Finding the next intact batch after damage in a ``.log``: resynchronising a reader.

A reader that meets damage (a bad CRC, a length field that makes no sense, zeroed bytes) must
not give up the good batches after it, and must not guess either. :func:`next_valid_batch` scans
forward byte by byte for a plausible v2 batch header — magic 2 at byte 16, a size that fits
before the end, a base offset in the range the caller expects, a last offset delta that is not
negative — and takes the first whose CRC-32C validates. A random position passes the CRC check
with probability 2^-32 after the header checks, so what it finds is a batch Kafka wrote.

It only reads (in chunks of :data:`SCAN_CHUNK`), locally or in object storage.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from typing import BinaryIO

from storage_core.fs import as_path
from storage_core.record.records import (
    ATTRIBUTES_OFFSET,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAGIC_VALUE_V2,
    RECORD_BATCH_OVERHEAD,
    crc32c,
)

__all__ = ["SCAN_CHUNK", "FoundBatch", "next_valid_batch"]

#: Bytes read at a time while scanning.
SCAN_CHUNK = 1 << 20
_HEAD = struct.Struct(">qiibI")  # base offset, size, partition leader epoch, magic, crc
_LAST_DELTA = struct.Struct(">i")
_LAST_DELTA_AT = 23  # after attributes (int16)


@dataclass(frozen=True, slots=True)
class FoundBatch:
    """A batch found by :func:`next_valid_batch`: where it starts, its size and its offsets."""

    position: int
    size: int  # LOG_OVERHEAD included
    base_offset: int
    last_offset: int


def next_valid_batch(path: str | os.PathLike[str], start: int, end: int, *, min_offset: int,
                     max_offset: int | None = None) -> FoundBatch | None:
    """The first v2 batch at a position in ``[start, end)`` that ends by ``end``, whose base offset
    is in ``[min_offset, max_offset]`` (no upper bound for None) and whose CRC validates; None if
    there is none."""
    f: BinaryIO = as_path(path).open("rb")
    try:
        pos = start
        while pos < end:
            f.seek(pos)
            buf = f.read(min(SCAN_CHUNK + RECORD_BATCH_OVERHEAD, end - pos))
            if len(buf) < RECORD_BATCH_OVERHEAD:
                return None
            limit = len(buf) - RECORD_BATCH_OVERHEAD  # candidates whose header is whole in buf
            i = buf.find(MAGIC_VALUE_V2.to_bytes(1, "big"), MAGIC_OFFSET)
            while 0 <= i - MAGIC_OFFSET <= limit:
                at = i - MAGIC_OFFSET
                found = _check(f, buf, at, pos, end, min_offset, max_offset)
                if found is not None:
                    return found
                i = buf.find(MAGIC_VALUE_V2.to_bytes(1, "big"), i + 1)
            pos += limit + 1
        return None
    finally:
        f.close()


def _check(f: BinaryIO, buf: bytes, at: int, base: int, end: int, min_offset: int,
           max_offset: int | None) -> FoundBatch | None:
    offset, size, _epoch, magic, crc = _HEAD.unpack_from(buf, at)
    if magic != MAGIC_VALUE_V2 or size < RECORD_BATCH_OVERHEAD - LOG_OVERHEAD:
        return None
    total = LOG_OVERHEAD + size
    if base + at + total > end or offset < min_offset or (max_offset is not None and offset > max_offset):
        return None
    delta = _LAST_DELTA.unpack_from(buf, at + _LAST_DELTA_AT)[0]
    if delta < 0:
        return None
    if at + total <= len(buf):
        body: bytes | memoryview = memoryview(buf)[at + ATTRIBUTES_OFFSET: at + total]
    else:
        f.seek(base + at + ATTRIBUTES_OFFSET)
        body = f.read(total - ATTRIBUTES_OFFSET)
        if len(body) != total - ATTRIBUTES_OFFSET:
            return None
    if crc32c(body) != crc:
        return None
    return FoundBatch(base + at, total, offset, offset + delta)
