"""Executor side of a read: one input partition → Arrow record batches, one read-layer call per piece.

All the work (chunks, CRC, the bulk kernel walk, damage skipping, transaction filtering,
conforming to the schema) is :func:`storage_core.read.piece_reader.read_piece`'s.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa

from storage_core.read.piece_reader import read_piece

from .planning import KlogInputPartition

__all__ = ["read_partition"]


def read_partition(partition: KlogInputPartition | None, schema: pa.Schema, *, include_headers: bool,
                   include_metadata: bool, fail_on_data_loss: bool) -> Iterator[pa.RecordBatch]:
    if partition is None or not getattr(partition, "pieces", None):
        return
    for piece in partition.pieces:
        yield from read_piece(piece, include_headers=include_headers, include_metadata=include_metadata,
                              fail_on_data_loss=fail_on_data_loss, schema=schema)
