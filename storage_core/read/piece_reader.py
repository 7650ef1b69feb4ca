"""Reading one planned piece: a byte slice of a segment → Arrow record batches in the read's schema.

:func:`read_piece` is the one call every reader makes per piece (a Spark task, a micro-batch,
``klog export``, the Python API). It reads the slice in large chunks from its start position,
checks every batch's CRC, decodes records with the columnar kernel straight into Arrow, trims
them to the piece's offsets, and never returns control records; under ``read_committed`` it
leaves out the aborted transactions the planner handed the piece. A corrupt batch raises its
file, position and lost offsets (:class:`DataLossError`), or, with ``failOnDataLoss=false``, is
stepped over: reading resumes at the next intact batch and a warning names the offsets lost. Output batches are about :data:`FLUSH_BYTES` (bounded worker memory) and
always in exactly the schema asked for (:func:`conform`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Protocol

import pyarrow as pa

from storage_core.errors import (
    CorruptIndexError,
    CorruptRecordError,
    DataLossError,
    KlogError,
    RemoteSegmentMissingError,
)
from storage_core.files import INDEX_SUFFIX, LOG_SUFFIX, base_offset_of
from storage_core.log.offset_index import OffsetIndex
from storage_core.read.pieces import Piece
from storage_core.record.columnar import ArrowDecoder, kafka_schema
from storage_core.record.file_records import AnyBatch, FileRecords
from storage_core.record.resync import next_valid_batch
from storage_core.record.scan import decode_file_range
from storage_core.record.txn_filter import filter_read_committed, new_txn_filter
from storage_core.workers import pool_size, sized, stream_in_order

__all__ = ["FLUSH_BYTES", "FLUSH_ROWS", "PARALLEL_DEPTH", "BatchDecoding", "conform", "parallel_pieces", "read_piece",
           "read_pieces"]

log = logging.getLogger("klog")

#: Emit a RecordBatch once this many bytes are buffered (checked before each record batch): it
#: bounds worker memory, and PySpark serializes each RecordBatch into one buffer, which glibc
#: reuses below its 32 MiB mmap threshold but maps and page-faults in afresh above it.
FLUSH_BYTES = 16 << 20
FLUSH_ROWS = 262_144


class BatchDecoding(Protocol):
    """What decodes the key/value columns of a read's batches (``valueFormat``/``keyFormat``):
    :class:`storage_core.read.values.Decoding`."""

    def apply(self, batch: pa.RecordBatch, topic: str, partition: int) -> pa.RecordBatch: ...


def conform(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """``batch`` in exactly ``schema`` (the decoder's types cast where they differ)."""
    if batch.schema.equals(schema):
        return batch
    return pa.RecordBatch.from_arrays([batch.column(i).cast(f.type) for i, f in enumerate(schema)], schema=schema)


def _damaged(piece: Piece, path: Path, bad: int, exc: KlogError, fail_on_data_loss: bool) -> int | None:
    """Damage at byte ``bad`` of the slice (a batch whose CRC fails, bytes that are no batch, a
    batch cut short): the lost offsets are those between the last intact batch before it and the
    next intact batch after it (:func:`~storage_core.record.resync.next_valid_batch`). Raises a
    :class:`DataLossError` naming them under failOnDataLoss=true; otherwise logs them and returns
    where reading resumes (None: nowhere in this slice)."""
    if isinstance(exc, CorruptIndexError):
        raise exc  # an incomplete transaction index is never skipped: it would read aborted data
    if isinstance(exc, RemoteSegmentMissingError):  # a remote segment that does not read (storage_core.log.aiven)
        if fail_on_data_loss:
            raise exc
        log.warning("klog: %s (failOnDataLoss=false): the rest of this remote segment is skipped", exc)
        return None
    first = _offset_before(piece, path, bad)
    limit = piece.next_base
    found = next_valid_batch(path, bad + 1, piece.end_position, min_offset=first,
                             max_offset=None if limit is None else limit - 1)
    if found is not None:
        last, resume, nbytes = found.base_offset - 1, found.position, found.position - bad
    else:
        last, resume, nbytes = _offset_at_end(piece, path) - 1, None, max(0, piece.end_position - bad)
    lo, hi = max(first, piece.min_offset), min(last, piece.end_offset - 1)
    if hi < lo:
        lo, hi = first, max(first, last)
    tp = f"{piece.topic}-{piece.partition}"
    what = (f"{nbytes} bytes of {piece.log_path} from position {bad} are not intact batches ({exc.detail})")
    if fail_on_data_loss:
        raise DataLossError(f"offsets {lo}..{hi} of {tp} are lost: {what}; set failOnDataLoss=false to read the "
                            "intact records around them", offsets=((lo, hi),), path=piece.log_path, position=bad)
    log.warning("klog: %s: offsets %d..%d are lost (failOnDataLoss=false): %s; %s", tp, lo, hi, what,
                f"reading resumes at position {resume} (offset {last + 1})" if resume is not None else
                "nothing intact follows in this slice")
    return resume


def _index_positions(piece: Piece, log_file: Path) -> list[int]:
    """The positions of the offset-index entries beside ``log_file`` (the segment file being
    read: ``X.log``, or ``X.log.deleted`` with ``X.index.deleted``); none if it is unreadable."""
    index = log_file.with_name(log_file.name.replace(LOG_SUFFIX, INDEX_SUFFIX, 1))
    try:
        if not index.exists():
            return []
        with OffsetIndex(index, base_offset_of(piece.log_path)) as oi:
            return [e.position for e in oi.all_entries()]
    except KlogError:
        return []


def _offset_before(piece: Piece, path: Path, bad: int) -> int:
    """The offset after the last intact batch before byte ``bad``: walked from the nearest
    offset-index entry before it (or an earlier one, or the segment's start)."""
    starts = sorted({0, piece.start_position, *(p for p in _index_positions(piece, path) if p < bad)}, reverse=True)
    records = FileRecords(path)
    for s in starts:
        if s >= bad:
            continue
        after = None
        try:
            for batch in records.batches(s, bad):
                after = batch.next_offset
        except KlogError:
            continue
        if after is not None:
            return after
    return base_offset_of(piece.log_path)


def _offset_at_end(piece: Piece, path: Path) -> int:
    """The first offset after the slice: the base offset of the batch at its end, or the next
    segment's base offset, or the range's end."""
    fallback = piece.next_base if piece.next_base is not None else piece.end_offset
    try:
        with path.open("rb") as f:
            f.seek(piece.end_position)
            head = f.read(8)
    except OSError:
        return fallback
    if len(head) == 8:
        at = int.from_bytes(head, "big", signed=True)
        if base_offset_of(piece.log_path) <= at <= fallback:
            return at
    return fallback


def _cut_short(piece: Piece, stop: int) -> KlogError | None:
    """Why a walk of the slice that stopped at ``stop`` is damage (None: it read the whole slice,
    or stopped at a write in progress at the end of a live log's last segment)."""
    if stop >= piece.end_position or piece.open_tail:
        return None
    return CorruptRecordError(f"a batch cut short: the slice holds whole batches up to position "
                              f"{piece.end_position}", path=piece.log_path, position=stop)


def batches_of(piece: Piece, fail_on_data_loss: bool) -> Iterator[AnyBatch]:
    """Every batch of the slice, CRC checked, damage handled as :func:`read_piece` does (the
    per-batch reference path)."""
    path = piece.log_file()
    records = FileRecords(path)
    position: int | None = piece.start_position
    while position is not None and position < piece.end_position:
        walk = records.batches(position, piece.end_position)
        try:
            for batch in walk:
                batch.ensure_valid()
                yield batch
            exc = _cut_short(piece, walk.valid_bytes)
            if exc is None:
                return
            bad = walk.valid_bytes
        except KlogError as e:
            exc, bad = e, e.position if e.position is not None else walk.valid_bytes
        position = _damaged(piece, path, bad, exc, fail_on_data_loss)


def _bulk(piece: Piece, dec: ArrowDecoder, fail_on_data_loss: bool) -> Iterator[pa.RecordBatch]:
    """The bulk path: chunks of the slice → the kernel, damage as in :func:`batches_of`; under
    read_committed one :class:`~storage_core.record.txn_filter.TxnFilter` over the piece's aborted
    transactions sees every batch of the slice, in the kernel's runs and on the object path."""
    path = piece.log_file()
    records = FileRecords(path)
    txn = None if piece.aborted is None else new_txn_filter(piece.aborted, where=piece.log_path)
    position: int | None = piece.start_position
    while position is not None and position < piece.end_position:
        progress = [position]
        try:
            yield from decode_file_range(records, position, piece.end_position, dec, min_offset=piece.min_offset,
                                         end_offset=piece.end_offset, verify=True, flush_bytes=FLUSH_BYTES,
                                         flush_rows=FLUSH_ROWS, txn=txn, progress=progress)
            exc = _cut_short(piece, progress[0])
            if exc is None:
                return
            bad = progress[0]
        except KlogError as e:
            exc, bad = e, e.position if e.position is not None else position
        position = _damaged(piece, path, bad, exc, fail_on_data_loss)


def per_batch(piece: Piece, dec: ArrowDecoder, fail_on_data_loss: bool) -> Iterator[pa.RecordBatch]:
    """read_committed batch by batch through :func:`filter_read_committed`: the reference the bulk
    path is tested against (tests/read/test_read_paths_corpus.py), not used by readers."""
    assert piece.aborted is not None
    for batch in filter_read_committed(batches_of(piece, fail_on_data_loss), list(piece.aborted),
                                       where=piece.log_path):
        dec.add(batch, min_offset=piece.min_offset, end_offset=piece.end_offset, verify=False)
        if dec.nbytes >= FLUSH_BYTES or dec.num_rows >= FLUSH_ROWS:
            yield dec.finish()


def read_piece(piece: Piece, *, include_headers: bool = False, include_metadata: bool = False,
               fail_on_data_loss: bool = True, schema: pa.Schema | None = None,
               decoding: BatchDecoding | None = None) -> Iterator[pa.RecordBatch]:
    """The records of one piece as RecordBatches in ``schema`` (default: :func:`kafka_schema` of the
    include flags), keys/values decoded by ``decoding`` if given; nothing is opened before the first
    batch is asked for."""
    out_schema = schema if schema is not None else kafka_schema(include_headers, include_metadata)
    dec = ArrowDecoder(piece.topic, piece.partition, include_headers=include_headers,
                       include_metadata=include_metadata)
    for out in _bulk(piece, dec, fail_on_data_loss):
        yield _decoded(conform(out, out_schema), piece, decoding)
    if dec.num_rows:
        yield _decoded(conform(dec.finish(), out_schema), piece, decoding)


def _decoded(batch: pa.RecordBatch, piece: Piece, decoding: BatchDecoding | None) -> pa.RecordBatch:
    return batch if decoding is None else decoding.apply(batch, piece.topic, piece.partition)


def read_pieces(pieces: Iterator[Piece] | tuple[Piece, ...] | list[Piece], *, include_headers: bool = False,
                include_metadata: bool = False, fail_on_data_loss: bool = True, schema: pa.Schema | None = None,
                decoding: BatchDecoding | None = None,
                done: Callable[[Piece], None] | None = None, threads: int | None = 1) -> Iterator[pa.RecordBatch]:
    """:func:`read_piece` over several pieces in turn, with the same rows in the same order.

    ``threads`` (None: :func:`~storage_core.workers.pool_size`'s default, the CPUs up to 8 or
    ``KLOG_THREADS``) decodes up to that many pieces at once (:func:`parallel_pieces`); 1, the
    default, reads them one after the other on the caller's thread, as below.

    Consecutive pieces of one partition share one decoder: a partition of many small segments
    (each a piece) gives a few full batches, not one small batch (with its own buffers) per
    segment, so memory follows the data rather than the piece count. ``done`` is called with each
    piece once its records are decoded (some may still wait in the decoder for the next batch)."""
    out_schema = schema if schema is not None else kafka_schema(include_headers, include_metadata)
    workers = 1 if threads == 1 else pool_size(threads, sized(pieces))
    if workers > 1:
        yield from parallel_pieces(pieces, workers, include_headers=include_headers,
                                   include_metadata=include_metadata, fail_on_data_loss=fail_on_data_loss,
                                   schema=out_schema, decoding=decoding, done=done)
        return
    dec: ArrowDecoder | None = None
    current: Piece | None = None
    for piece in pieces:
        if current is None or dec is None or (piece.topic, piece.partition) != (current.topic, current.partition):
            if dec is not None and current is not None and dec.num_rows:
                yield _decoded(conform(dec.finish(), out_schema), current, decoding)
            dec = ArrowDecoder(piece.topic, piece.partition, include_headers=include_headers,
                               include_metadata=include_metadata)
        current = piece
        for out in _bulk(piece, dec, fail_on_data_loss):
            yield _decoded(conform(out, out_schema), piece, decoding)
        if done is not None:
            done(piece)
    if dec is not None and current is not None and dec.num_rows:
        yield _decoded(conform(dec.finish(), out_schema), current, decoding)


#: Decoded batches waiting per piece in :func:`parallel_pieces` (each at most about FLUSH_BYTES).
PARALLEL_DEPTH = 2


def parallel_pieces(pieces: Iterator[Piece] | tuple[Piece, ...] | list[Piece], threads: int, *,
                    include_headers: bool = False, include_metadata: bool = False, fail_on_data_loss: bool = True,
                    schema: pa.Schema | None = None, decoding: BatchDecoding | None = None,
                    done: Callable[[Piece], None] | None = None) -> Iterator[pa.RecordBatch]:
    """The rows of :func:`read_pieces`, in the same order, with up to ``threads`` pieces decoded at
    once (:func:`~storage_core.workers.stream_in_order`): a window of ``threads`` pieces in
    progress, each at most :data:`PARALLEL_DEPTH` batches ahead of the consumer, so memory is
    about ``(threads * (PARALLEL_DEPTH + 1) + 1) * FLUSH_BYTES`` at most. Each piece has its own
    decoder; the consumer merges a partition's small batches up to :data:`FLUSH_BYTES` or
    :data:`FLUSH_ROWS` as the serial path's shared decoder does (a Parquet export writes a row
    group per batch), so batch boundaries may differ from the serial path's; the rows do not. A piece's error (a :class:`DataLossError`, ...) is
    raised after the batches before it, as the serial path raises it; ``done(piece)`` is called
    in plan order once a piece's batches were all consumed; closing the generator stops and joins
    the threads. ``decoding`` (valueFormat/keyFormat) runs on the consumer's thread: its decoders
    are not shared between threads. The kernel's decode walk releases the GIL (where the kernel
    does), which is what lets the threads run at once."""
    out_schema = schema if schema is not None else kafka_schema(include_headers, include_metadata)

    def produce(piece: Piece) -> Iterator[tuple[Piece, pa.RecordBatch]]:
        for batch in read_piece(piece, include_headers=include_headers, include_metadata=include_metadata,
                                fail_on_data_loss=fail_on_data_loss, schema=out_schema):
            yield piece, batch

    held: list[pa.RecordBatch] = []  # small batches of one partition, merged as the serial path's decoder merges them
    held_piece: Piece | None = None
    rows = nbytes = 0
    for piece, batch in stream_in_order(pieces, produce, threads, depth=PARALLEL_DEPTH, done=done):
        if held and held_piece is not None and (piece.topic, piece.partition) != (held_piece.topic,
                                                                                 held_piece.partition):
            yield _decoded(_merged(held, out_schema), held_piece, decoding)
            held, rows, nbytes = [], 0, 0
        if batch.num_rows:
            held.append(batch)
        held_piece = piece
        rows += batch.num_rows
        nbytes += batch.nbytes
        if held and (nbytes >= FLUSH_BYTES or rows >= FLUSH_ROWS):
            yield _decoded(_merged(held, out_schema), held_piece, decoding)
            held, rows, nbytes = [], 0, 0
    if held and held_piece is not None:
        yield _decoded(_merged(held, out_schema), held_piece, decoding)


def _merged(batches: list[pa.RecordBatch], schema: pa.Schema) -> pa.RecordBatch:
    """One batch of the (non-empty) ``batches``, copied only when there are several."""
    if len(batches) == 1:
        return batches[0]
    concat = getattr(pa, "concat_batches", None)  # pyarrow >= 19
    if concat is not None:
        return concat(batches)
    return pa.Table.from_batches(batches, schema=schema).combine_chunks().to_batches()[0]
