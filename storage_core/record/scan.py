"""A byte range of a record-set file, decoded into Arrow: the bulk path of every read.

:func:`decode_file_range` reads the range in large chunks into one reusable buffer and hands
each chunk to :meth:`ArrowDecoder.add_run <storage_core.record.columnar.ArrowDecoder.add_run>`, which
decodes run after run of whole v2 batches in one kernel call (CRC checked, control batches and
batches outside the offset range skipped, codecs called back in Python; under read_committed the
batches of aborted transactions left out by a :class:`~storage_core.record.txn_filter.TxnFilter` whose
state the kernel updates as it goes). Whatever the kernel
does not take - a legacy batch, a corrupt header or CRC, a codec error, a record it refuses -
goes through the object path (:mod:`storage_core.record.file_records`, :meth:`ArrowDecoder.add`) one
batch at a time, which decodes it or raises its error with the file and position. So the two
paths give the same rows and the same errors; the tests compare them on every fixture.

Memory is bounded by the chunk (:data:`~storage_core.record.file_records.READ_CHUNK_BYTES`, or one
batch if a batch is larger) plus what the decoder buffers before the caller's flush limits.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pyarrow as pa

from storage_core.errors import KlogError
from storage_core.limits import INT64_MAX as _I64_MAX
from storage_core.limits import INT64_MIN as _I64_MIN
from storage_core.record.columnar import RUN_END, RUN_FULL, RUN_SHORT, ArrowDecoder
from storage_core.record.file_records import (
    READ_CHUNK_BYTES,
    BatchWalk,
    ChunkReader,
    FileRecords,
    _batch_total,
    _walk_view,
)
from storage_core.record.records import HEADER_SIZE_UP_TO_MAGIC

if TYPE_CHECKING:
    from storage_core.record.txn_filter import TxnFilter

__all__ = ["decode_file_range", "decode_view"]



def decode_view(view: memoryview, dec: ArrowDecoder, *, position: int = 0, at_eof: bool = True,
                path: str | None = None, min_offset: int = _I64_MIN, end_offset: int = _I64_MAX,
                verify: bool = True, max_bytes: int | None = None, txn: TxnFilter | None = None) -> int:
    """Decode the whole batches at the start of ``view`` (file position ``position``) into ``dec``.

    Returns the bytes consumed. It stops before a batch cut off by the end of ``view``; with
    ``at_eof`` that batch is a partial tail (the end of the data), otherwise the next read should
    start there. With ``max_bytes`` it also stops before a batch once ``dec`` holds that many bytes
    (the caller finishes it and goes on from there). Errors are raised by the object path, located
    at the batch they are about. With ``txn`` (read_committed) every whole batch goes through the
    filter, in the kernel's runs and on the object path alike, and only what it admits is decoded.
    """
    off = 0
    while off < len(view):
        if max_bytes is not None and dec.nbytes >= max_bytes:
            break
        used, why = dec.add_run(view[off:] if off else view, min_offset=min_offset, end_offset=end_offset,
                                verify=verify, max_bytes=max_bytes, txn=txn)
        off += used
        if why == RUN_SHORT and not at_eof:
            if len(view) - off >= HEADER_SIZE_UP_TO_MAGIC:
                # a size no batch has is corruption here, not a batch to read on for (as in the walk)
                _batch_total(view, off, position, path)
            break
        if why in (RUN_END, RUN_FULL):
            break
        # the object path, for one batch: decode it, raise its error, or find the partial tail
        try:
            batch = next(_walk_view(view, position, off, len(view), path, at_eof, BatchWalk(iter(()))), None)
            if batch is None:
                break
            if verify:
                batch.ensure_valid()
            if txn is None or txn.admit(batch):
                dec.add(batch, min_offset=min_offset, end_offset=end_offset, verify=False)
        except KlogError as exc:
            exc.located(path=path, position=position + off)
            raise
        off += batch.size_in_bytes
    return off


def decode_file_range(records: FileRecords, start: int, stop: int | None, dec: ArrowDecoder, *,
                      min_offset: int = _I64_MIN, end_offset: int = _I64_MAX, verify: bool = True,
                      flush_bytes: int | None = None, flush_rows: int | None = None,
                      chunk_bytes: int = READ_CHUNK_BYTES, txn: TxnFilter | None = None,
                      progress: list[int] | None = None) -> Iterator[pa.RecordBatch]:
    """Decode the batches of ``records`` from byte ``start`` (a batch boundary) to ``stop``.

    Records are added to ``dec``; whenever it holds ``flush_bytes`` bytes (checked before each batch)
    or ``flush_rows`` rows (checked after each chunk) its contents are yielded as a RecordBatch, so
    the batches handed on stay near ``flush_bytes`` whatever the chunk size. What remains at the end
    stays in ``dec`` for the caller to finish. A partial batch at the end of the range ends the
    walk, as in :meth:`FileRecords.batches`. Errors carry the file and the position of the batch.

    ``txn`` (read_committed): a :class:`~storage_core.record.txn_filter.TxnFilter` over the slice's aborted
    transactions (:func:`~storage_core.record.txn_filter.new_txn_filter`), which must see every batch from
    the slice's start. Its state lives on between chunks and between calls: after a skip past
    damage, go on with the same filter, as the per-batch path goes on with its own.

    ``progress`` (a one-item list): set to the position after the last whole batch decoded, so a
    caller can tell a range read to its end from one that stopped at a partial batch.
    """
    end = records.size_in_bytes if stop is None else min(stop, records.size_in_bytes)
    name = str(records.path)
    pos = start
    with records.path.open("rb", buffering=0) as f:
        reader = ChunkReader(f, end, chunk_bytes, start)
        while pos < end:
            view = reader.read(pos)
            at_eof = pos + len(view) >= end
            off = 0
            while True:
                used = decode_view(view[off:] if off else view, dec, position=pos + off, at_eof=at_eof, path=name,
                                   min_offset=min_offset, end_offset=end_offset, verify=verify,
                                   max_bytes=flush_bytes, txn=txn)
                off += used
                full = flush_bytes is not None and dec.nbytes >= flush_bytes
                if full or (flush_rows is not None and dec.num_rows >= flush_rows):
                    yield dec.finish()
                if not full or off >= len(view):
                    break  # the rest of the chunk needs the next read (or there is none)
            pos += off
            if progress is not None:
                progress[0] = pos
            if off == 0 or (at_eof and pos < end):
                return  # a partial batch at the end of the range
