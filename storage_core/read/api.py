"""The public Python API: a Kafka log dir → a ``pyarrow.RecordBatchReader``, no Spark needed.

::

    import storage_core as klog

    reader = klog.read_arrow("/data/kafka", topics="orders", isolationLevel="read_committed")
    table = reader.read_all()                 # pyarrow.Table in Spark's Kafka-source schema
    df = reader.read_pandas()                 # or: polars.from_arrow(reader), duckdb.sql("... FROM reader")

Options are those of ``spark.read.format("klog")`` (:mod:`storage_core.read.options`), by the same
names, so a Spark job and a notebook read the same records from the same options; values may be
Python objects (a dict for JSON offsets, ints, bools). The plan is made (and every option checked
against the log) when :func:`read_arrow` is called; records are read as the reader is consumed.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa

from storage_core.read.kafka_compat import warn_ignored
from storage_core.read.options import ReadOptions, parse_read_options
from storage_core.read.piece_reader import read_pieces
from storage_core.read.planner import ReadPlan, plan_read
from storage_core.read.values import decoded_schema, prepare
from storage_core.record.columnar import kafka_schema

__all__ = ["plan", "read_arrow", "read_options"]


def _option_text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return json.dumps(value)
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return ",".join(value)
    return str(value)


def read_options(path: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], **options: object) -> ReadOptions:
    """``options`` (Spark's names, any case) for a read of ``path``, parsed and checked."""
    paths = [path] if isinstance(path, (str, os.PathLike)) else list(path)
    given = {k: _option_text(v) for k, v in options.items() if v is not None}
    given["path"] = ",".join(str(p) if isinstance(p, Path) else os.fspath(p) for p in paths)
    opts = parse_read_options(given)
    warn_ignored(opts.ignored, "read")
    return opts


def plan(path: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], **options: object) -> ReadPlan:
    """The plan of a read (each partition's resolved range and the pieces), without reading records."""
    return plan_read(read_options(path, **options))


def read_arrow(path: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
               **options: object) -> pa.RecordBatchReader:
    """The records of a log dir (or several, or a partition dir) as a ``pyarrow.RecordBatchReader``.

    The same rows, in the same schema, as ``spark.read.format("klog").options(**options).load(path)``.

    With ``valueFormat``/``keyFormat`` ``confluent-avro`` the ``value``/``key`` column is the decoded
    value (:mod:`storage_core.read.values`), typed from the subject's latest schema.

    Pieces are decoded on up to ``maxThreads`` threads at once (default: the CPUs, at most 8, or
    ``KLOG_THREADS``; ``maxThreads=1`` reads on the caller's thread alone), the rows always in the
    serial order (:func:`~storage_core.read.piece_reader.parallel_pieces`). The threads start when
    the reader is first read and are joined when it is exhausted, fails or is closed or dropped.
    """
    opts = read_options(path, **options)
    the_plan = plan_read(opts)
    decoding = prepare(opts, (r.topic_partition.topic for r in the_plan.ranges)) if opts.formats.decoded else None
    schema = decoded_schema(kafka_schema(opts.include_headers, opts.include_metadata), decoding)
    batches = read_pieces(the_plan.pieces, include_headers=opts.include_headers,
                          include_metadata=opts.include_metadata, fail_on_data_loss=opts.fail_on_data_loss,
                          decoding=decoding, threads=opts.max_threads)
    return pa.RecordBatchReader.from_batches(schema, batches)
