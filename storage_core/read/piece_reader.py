"""Reading one planned piece: a byte slice of a segment → Arrow record batches in the read's schema.

:func:`read_piece` is the one call every reader makes per piece (a Spark task, a micro-batch,
``klog export``, the Python API). It reads the slice in large chunks from its start position,
checks every batch's CRC, decodes records with the columnar kernel straight into Arrow, trims
them to the piece's offsets, and never returns control records; under ``read_committed`` it
leaves out the aborted transactions the planner handed the piece. A corrupt batch raises its
file and position, or, with ``failOnDataLoss=false``, is skipped up to the next offset-index
entry and logged. Output batches are about :data:`FLUSH_BYTES` (bounded worker memory) and
always in exactly the schema asked for (:func:`conform`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

import pyarrow as pa

from storage_core.errors import CorruptIndexError, KlogError
from storage_core.files import INDEX_SUFFIX, LOG_SUFFIX, base_offset_of
from storage_core.log.offset_index import OffsetIndex
from storage_core.read.pieces import Piece
from storage_core.record.columnar import ArrowDecoder, kafka_schema
from storage_core.record.file_records import AnyBatch, FileRecords
from storage_core.record.scan import decode_file_range
from storage_core.record.txn_filter import filter_read_committed, new_txn_filter

__all__ = ["FLUSH_BYTES", "FLUSH_ROWS", "BatchDecoding", "conform", "read_piece", "read_pieces"]

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


def _resume_after(piece: Piece, path: Path, bad: int, exc: KlogError, fail_on_data_loss: bool) -> int | None:
    """Where to go on after damage at byte ``bad`` (None: nowhere, the slice is done). Raises
    ``exc`` under failOnDataLoss=true; otherwise logs the bytes skipped, up to the next entry of
    the offset index."""
    if fail_on_data_loss or isinstance(exc, CorruptIndexError):
        raise exc  # an incomplete transaction index is never skipped: it would read aborted data
    resume = _next_index_position(piece, bad, path)
    log.warning("klog: skipping %s bytes of %s from position %s (failOnDataLoss=false): %s",
                (resume or piece.end_position) - bad, piece.log_path, bad, exc)
    return resume


def _next_index_position(piece: Piece, after: int, log_file: Path) -> int | None:
    """The first offset-index position past ``after``, from the index beside ``log_file`` (the
    segment file being read: ``X.log``, or ``X.log.deleted`` with ``X.index.deleted``)."""
    index = log_file.with_name(log_file.name.replace(LOG_SUFFIX, INDEX_SUFFIX, 1))
    if not index.exists():
        return None
    with OffsetIndex(index, base_offset_of(piece.log_path)) as oi:
        for e in oi.all_entries():
            if after < e.position < piece.end_position:
                return e.position
    return None


def batches_of(piece: Piece, fail_on_data_loss: bool) -> Iterator[AnyBatch]:
    """Every batch of the slice, CRC checked, damage skipped as :func:`read_piece` does (the
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
            return
        except KlogError as exc:
            bad = exc.position if exc.position is not None else walk.valid_bytes
            position = _resume_after(piece, path, bad, exc, fail_on_data_loss)


def _bulk(piece: Piece, dec: ArrowDecoder, fail_on_data_loss: bool) -> Iterator[pa.RecordBatch]:
    """The bulk path: chunks of the slice → the kernel, errors as in :func:`batches_of`; under
    read_committed one :class:`~storage_core.record.txn_filter.TxnFilter` over the piece's aborted
    transactions sees every batch of the slice, in the kernel's runs and on the object path."""
    path = piece.log_file()
    records = FileRecords(path)
    txn = None if piece.aborted is None else new_txn_filter(piece.aborted, where=piece.log_path)
    position: int | None = piece.start_position
    while position is not None and position < piece.end_position:
        try:
            yield from decode_file_range(records, position, piece.end_position, dec, min_offset=piece.min_offset,
                                         end_offset=piece.end_offset, verify=True, flush_bytes=FLUSH_BYTES,
                                         flush_rows=FLUSH_ROWS, txn=txn)
            return
        except KlogError as exc:
            bad = exc.position if exc.position is not None else position
            position = _resume_after(piece, path, bad, exc, fail_on_data_loss)


def per_batch(piece: Piece, dec: ArrowDecoder, fail_on_data_loss: bool) -> Iterator[pa.RecordBatch]:
    """read_committed batch by batch through :func:`filter_read_committed`: the reference the bulk
    path is tested against (tests/test_read_paths_corpus.py), not used by readers."""
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
                include_metadata: bool = False, fail_on_data_loss: bool = True,
                decoding: BatchDecoding | None = None) -> Iterator[pa.RecordBatch]:
    """:func:`read_piece` over several pieces in turn."""
    schema = kafka_schema(include_headers, include_metadata)
    for piece in pieces:
        yield from read_piece(piece, include_headers=include_headers, include_metadata=include_metadata,
                              fail_on_data_loss=fail_on_data_loss, schema=schema, decoding=decoding)
