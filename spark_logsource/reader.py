"""Executor side of a read: one input partition → Arrow record batches, one read-layer call per piece.

All the work (chunks, CRC, the bulk kernel walk, damage skipping, transaction filtering,
conforming to the schema) is :func:`storage_core.read.piece_reader.read_pieces`'s.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa

from storage_core.read.options import ReadOptions
from storage_core.read.piece_reader import read_pieces
from storage_core.read.planner import select_partitions
from storage_core.read.values import Decoding, prepare

from .planning import KlogInputPartition

__all__ = ["decoding_for", "read_partition"]


def decoding_for(opts: ReadOptions, *, streaming: bool = False) -> Decoding | None:
    """The key/value decoding of a read (``valueFormat``/``keyFormat``), made on the driver from the
    topics the read selects; None for raw keys and values."""
    if not opts.formats.decoded:
        return None
    return prepare(opts, (pd.topic_partition.topic for pd in select_partitions(opts, streaming=streaming)))


def read_partition(partition: KlogInputPartition | None, schema: pa.Schema, *, include_headers: bool,
                   include_metadata: bool, fail_on_data_loss: bool,
                   decoding: Decoding | None = None) -> Iterator[pa.RecordBatch]:
    if partition is None or not getattr(partition, "pieces", None):
        return
    yield from read_pieces(partition.pieces, include_headers=include_headers, include_metadata=include_metadata,
                           fail_on_data_loss=fail_on_data_loss, schema=schema, decoding=decoding)
