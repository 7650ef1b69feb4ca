"""Executor side of a batch read: a piece's byte slice → Arrow record batches.

Nothing is opened before :func:`read_partition` runs on the executor. Each piece is read in
large chunks from its start position, every batch's CRC is checked, records are decoded by the
columnar kernel straight into Arrow and trimmed to the piece's offsets; control records never
come out, and under ``read_committed`` aborted transactions are left out with the aborted list
the driver resolved. A corrupt batch fails the task with its file and position, or, with
``failOnDataLoss=false``, is skipped up to the next offset-index entry and logged.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa

from storage_core.errors import KlogError
from storage_core.files import base_offset_of
from storage_core.log.offset_index import OffsetIndex
from storage_core.log.segment import resolve_segment_file
from storage_core.log.txn_index import filter_read_committed
from storage_core.record.columnar import ArrowDecoder
from storage_core.record.file_records import AnyBatch, FileRecords
from storage_core.record.scan import decode_file_range

from .planning import KlogInputPartition, Piece

log = logging.getLogger("klog")

#: Emit a RecordBatch once this many bytes are buffered (checked before each record batch): it
#: bounds worker memory, and PySpark serializes each RecordBatch into one buffer, which glibc
#: reuses below its 32 MiB mmap threshold but maps and page-faults in afresh above it.
FLUSH_BYTES = 16 << 20
FLUSH_ROWS = 262_144


def _piece_file(piece: Piece) -> str | Path:
    return piece.log_path if piece.file_id is None else resolve_segment_file(piece.log_path, piece.file_id)


def _resume_after(piece: Piece, path: str | Path, bad: int, exc: KlogError, fail_on_data_loss: bool) -> int | None:
    """Where to go on after damage at byte ``bad`` (None: nowhere, the slice is done). Raises
    ``exc`` under failOnDataLoss=true; otherwise logs the bytes skipped, up to the next entry of
    the offset index."""
    if fail_on_data_loss:
        raise exc
    resume = _next_index_position(piece, bad, Path(path))
    log.warning("klog: skipping %s bytes of %s from position %s (failOnDataLoss=false): %s",
                (resume or piece.end_position) - bad, piece.log_path, bad, exc)
    return resume


def _batches(piece: Piece, fail_on_data_loss: bool) -> Iterator[AnyBatch]:
    path = _piece_file(piece)
    records = FileRecords(path)
    position: int | None = piece.start_position
    while position is not None and position < piece.end_position:
        walk = records.batches(position, piece.end_position)
        try:
            for batch in walk:
                batch.ensure_valid()
                yield batch
            return
        except KlogError as exc:
            bad = exc.position if exc.position is not None else walk.valid_bytes
            position = _resume_after(piece, path, bad, exc, fail_on_data_loss)


def _next_index_position(piece: Piece, after: int, log_file: Path) -> int | None:
    """The first offset-index position past ``after``, from the index beside ``log_file`` (the
    segment file being read: ``X.log``, or ``X.log.deleted`` with ``X.index.deleted``)."""
    index = log_file.with_name(log_file.name.replace(".log", ".index", 1))
    if not index.exists():
        return None
    with OffsetIndex(index, base_offset_of(piece.log_path)) as oi:
        for e in oi.all_entries():
            if after < e.position < piece.end_position:
                return e.position
    return None


def _decode_piece(piece: Piece, dec: ArrowDecoder, fail_on_data_loss: bool) -> Iterator[pa.RecordBatch]:
    """The bulk path for read_uncommitted: chunks of the slice → the kernel, errors as in :func:`_batches`."""
    path = _piece_file(piece)
    records = FileRecords(path)
    position: int | None = piece.start_position
    while position is not None and position < piece.end_position:
        try:
            yield from decode_file_range(records, position, piece.end_position, dec, min_offset=piece.min_offset,
                                         end_offset=piece.end_offset, verify=True, flush_bytes=FLUSH_BYTES,
                                         flush_rows=FLUSH_ROWS)
            return
        except KlogError as exc:
            bad = exc.position if exc.position is not None else position
            position = _resume_after(piece, path, bad, exc, fail_on_data_loss)


def read_partition(partition: KlogInputPartition | None, schema: pa.Schema, *, include_headers: bool,
                   include_metadata: bool, fail_on_data_loss: bool) -> Iterator[pa.RecordBatch]:
    if partition is None or not getattr(partition, "pieces", None):
        return
    for piece in partition.pieces:
        dec = ArrowDecoder(piece.topic, piece.partition, include_headers=include_headers,
                           include_metadata=include_metadata)
        if piece.aborted is None:  # read_uncommitted: the bulk path
            for out in _decode_piece(piece, dec, fail_on_data_loss):
                yield _conform(out, schema)
        else:
            batches = filter_read_committed(_batches(piece, fail_on_data_loss), list(piece.aborted),
                                            where=piece.log_path)
            for batch in batches:
                dec.add(batch, min_offset=piece.min_offset, end_offset=piece.end_offset, verify=False)
                if dec.nbytes >= FLUSH_BYTES or dec.num_rows >= FLUSH_ROWS:
                    yield _conform(dec.finish(), schema)
        if dec.num_rows:
            yield _conform(dec.finish(), schema)


def _conform(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    if batch.schema.equals(schema):
        return batch
    return pa.RecordBatch.from_arrays([batch.column(i).cast(f.type) for i, f in enumerate(schema)], schema=schema)
