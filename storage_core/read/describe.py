"""What is in a log dir, partition by partition: ``klog describe`` and :func:`storage_core.describe`.

One implementation for both: :func:`describe_partition` summarizes one partition dir, the CLI
prints the summaries as a table or JSON, and :func:`describe` hands them over as a
``pyarrow.Table`` (one row per topic-partition) for notebooks and scripts::

    import storage_core as klog

    info = klog.describe("/mnt/kafka-copy", topics="orders")   # the read-selection options of read_arrow
    info.to_pandas()

A summary comes from the indexes, the first batch header of each segment, the log dir's
checkpoints and the producer state; no record is decoded and nothing is written:

* ``start_offset``: the log start offset (the segments' first offset, or the log dir's
  ``log-start-offset-checkpoint`` where a broker advanced it by retention or DeleteRecords);
* ``end_offset``: the log end offset (exclusive), from the last segment's offset index and tail;
* ``last_stable_offset``: the first offset of the oldest transaction still open (where a
  ``read_committed`` read stops), else the end offset. It comes from the newest producer
  ``.snapshot`` at or below the end and the batch headers after it: a broker writes a snapshot at
  every segment roll and on shutdown, so this is short on a broker's dirs; where there is no
  snapshot (a dir written by klog without producer ids) every segment's batches are walked once;
* ``estimated_records``: ``end_offset - start_offset``, an upper bound where compaction left
  gaps and transaction markers take offsets;
* ``segments``, ``size_bytes``: the segment files and their bytes;
* ``first_timestamp``: the first batch's (base) timestamp; ``max_timestamp``: the largest record
  timestamp the time indexes know; ``None`` for a partition without timestamps;
* ``codecs``: the compression codecs of the segments' first batches.

Indexes are trusted as they are (no recovery scan: ``klog verify`` checks them).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa

from storage_core.errors import InvalidOptionError, PendingCommitError
from storage_core.files import LOG_START_OFFSET_CHECKPOINT, has_log_files
from storage_core.fs import OPTION_PREFIX
from storage_core.log.checkpoint import OffsetCheckpointFile
from storage_core.log.log import Log
from storage_core.log.manager import PartitionDir
from storage_core.read.api import read_options
from storage_core.read.planner import select_partitions
from storage_core.record.records import DefaultRecordBatch

__all__ = ["DESCRIBE_SCHEMA", "SELECTION_OPTIONS", "PartitionSummary", "describe", "describe_partition",
           "summaries_table"]


@dataclass
class PartitionSummary:
    """One topic-partition of a log dir, as ``klog describe`` reports it (see the module's docstring)."""

    topic: str
    partition: int
    path: str
    start_offset: int
    end_offset: int
    last_stable_offset: int
    estimated_records: int
    segments: int
    size_bytes: int
    first_timestamp: int | None  # epoch ms
    max_timestamp: int | None  # epoch ms
    codecs: list[str]


def describe_partition(pd: PartitionDir) -> PartitionSummary:
    """The summary of one partition dir (read-only: no lock, no recovery, no byte written)."""
    tp = pd.topic_partition
    if not has_log_files(pd.path):  # only orphan indexes (Kafka deletes them and starts empty)
        return PartitionSummary(tp.topic, tp.partition, str(pd.path), start_offset=0, end_offset=0,
                                last_stable_offset=0, estimated_records=0, segments=0, size_bytes=0,
                                first_timestamp=None, max_timestamp=None, codecs=[])
    # indexes are trusted (no recovery: describe decodes no records), the log start offset is the
    # log dir's checkpoint where a broker advanced it (retention, DeleteRecords)
    starts = OffsetCheckpointFile(pd.log_dir / LOG_START_OFFSET_CHECKPOINT).read()
    with Log(pd.path, had_clean_shutdown=True, log_start_offset=starts.get(tp)) as log:
        codecs: set[str] = set()
        first_ts = None
        for seg in log.segments:
            for batch in seg.batches():
                codecs.add(batch.compression.label)
                if first_ts is None and batch.max_timestamp >= 0:
                    first_ts = batch.base_timestamp if isinstance(batch, DefaultRecordBatch) else batch.max_timestamp
                break
        max_ts = max((s.max_timestamp_so_far.timestamp for s in log.segments), default=-1)
        start, end = log.log_start_offset, log.log_end_offset
        return PartitionSummary(tp.topic, tp.partition, str(pd.path), start_offset=start, end_offset=end,
                                last_stable_offset=log.last_stable_offset, estimated_records=end - start,
                                segments=len(log.segments), size_bytes=log.size_in_bytes, first_timestamp=first_ts,
                                max_timestamp=max_ts if max_ts >= 0 else None, codecs=sorted(codecs))


_TIMESTAMP = pa.timestamp("ms", tz="UTC")

#: The columns of :func:`describe`'s table, one row per topic-partition.
DESCRIBE_SCHEMA = pa.schema([
    pa.field("topic", pa.string(), nullable=False),
    pa.field("partition", pa.int32(), nullable=False),
    pa.field("start_offset", pa.int64(), nullable=False),
    pa.field("end_offset", pa.int64(), nullable=False),
    pa.field("last_stable_offset", pa.int64(), nullable=False),
    pa.field("estimated_records", pa.int64(), nullable=False),
    pa.field("segments", pa.int32(), nullable=False),
    pa.field("size_bytes", pa.int64(), nullable=False),
    pa.field("first_timestamp", _TIMESTAMP),
    pa.field("max_timestamp", _TIMESTAMP),
    pa.field("codecs", pa.list_(pa.string()), nullable=False),
    pa.field("path", pa.string(), nullable=False),
])


def summaries_table(rows: Sequence[PartitionSummary]) -> pa.Table:
    """Summaries as a table of :data:`DESCRIBE_SCHEMA` (timestamps as UTC ``timestamp[ms]``)."""
    columns = {name: [getattr(r, name) for r in rows] for name in DESCRIBE_SCHEMA.names}
    return pa.Table.from_pydict(columns, schema=DESCRIBE_SCHEMA)


#: The options :func:`describe` takes (lower-cased): those that choose partitions, by Spark's names.
SELECTION_OPTIONS = ("topics", "subscribe", "topicpattern", "subscribepattern", "assign")


def describe(path: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], **options: object) -> pa.Table:
    """What is in a log dir: one row per topic-partition, sorted by topic and partition.

    ``path`` is what :func:`storage_core.read_arrow` takes: a Kafka log dir, several (a list or
    ``"dir1,dir2"``, like ``log.dirs``), or one ``<topic>-<partition>`` dir. ``options`` are the
    read-selection options of ``spark.read.format("klog")``, by the same names (any case), and the
    ``fs.*`` options of a path in object storage (:mod:`storage_core.fs`):
    ``topics`` (a list or ``"a,b"``; each must exist), ``topicPattern`` (a regex matching the whole
    name) or ``assign`` (``{"orders": [0, 1]}``); none selects every partition with segments. Other
    read options are an :class:`~storage_core.errors.InvalidOptionError`.

    Columns (:data:`DESCRIBE_SCHEMA`): ``topic``, ``partition``, ``start_offset`` (the log start
    offset), ``end_offset`` (the log end offset, exclusive), ``last_stable_offset``,
    ``estimated_records`` (end - start), ``segments``, ``size_bytes``, ``first_timestamp``,
    ``max_timestamp`` (UTC), ``codecs`` and ``path``; the same figures as ``klog describe --json``.
    Nothing is decoded or written. A partition whose first commit is still being applied by a
    running job is left out (it is empty until the commit completes).
    """
    wrong = sorted(k for k in options if k.lower() not in SELECTION_OPTIONS and not k.lower().startswith(OPTION_PREFIX))
    if wrong:
        raise InvalidOptionError(f"describe takes only the options that select partitions (topics, topicPattern, "
                                 f"assign) and the fs.* options of a URI path, not {', '.join(wrong)}")
    rows = []
    for pd in select_partitions(read_options(path, **options)):
        try:
            rows.append(describe_partition(pd))
        except PendingCommitError:
            continue
    return summaries_table(rows)
