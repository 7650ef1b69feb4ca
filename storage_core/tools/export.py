"""``klog export``: a topic, or an offset or time range of it, to one Parquet file (no Spark).

The rows are those ``spark.read.format("klog")`` returns for the same range, in the same
Arrow schema (:func:`storage_core.record.columnar.kafka_schema`): ranges are resolved with the same
rules as the Spark source's ``startingOffsets``/``endingOffsets``/``startingTimestamp``/
``endingTimestamp`` (a start time gives the first offset whose record has a timestamp at or
after it, an end time is exclusive and, when no record is that late, means the end of the
log), every batch's CRC is checked, control records never come out, and ``read_committed``
stops at the last stable offset and leaves out aborted transactions.

The file is written next to its destination as ``<name>.tmp-<pid>`` and renamed when complete,
so a failed export (a corrupt batch, a full disk) never leaves a partial Parquet file behind.
"""

from __future__ import annotations

import datetime as dt
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from storage_core.errors import CorruptRecordError, InvalidOptionError, PendingCommitError
from storage_core.log.log import Log, lost_data_notes
from storage_core.log.manager import PartitionDir, find_partitions, open_log_read_only
from storage_core.log.topic_partition import TopicPartition
from storage_core.record.columnar import ArrowDecoder, kafka_schema

#: Write a row group once this many bytes of keys/values are buffered (bounds memory).
FLUSH_BYTES = 64 << 20
FLUSH_ROWS = 500_000

PARQUET_CODECS = ("none", "snappy", "gzip", "zstd", "lz4", "brotli")

_EPOCH_MS = re.compile(r"^-?\d+$")


def parse_time(text: str, what: str) -> int:
    """Epoch milliseconds from ``text``: an integer (ms) or ISO-8601 (naive means UTC)."""
    s = text.strip()
    if _EPOCH_MS.match(s):
        return int(s)
    try:
        t = dt.datetime.fromisoformat(s.replace("Z", "+00:00") if s.endswith("Z") else s)
    except ValueError:
        raise InvalidOptionError(f"{what}: {text!r} is not a time; expected epoch milliseconds (1700000000000) or "
                                 "ISO-8601 (2023-11-14T22:13:20Z, 2023-11-14 22:13, 2023-11-14)") from None
    if t.tzinfo is None:
        t = t.replace(tzinfo=dt.timezone.utc)
    return round(t.timestamp() * 1000)


@dataclass(frozen=True)
class ExportRequest:
    """What to export; ``None`` bounds mean the log start / the log end."""

    log_dirs: tuple[str, ...]
    topic: str
    partitions: tuple[int, ...] | None = None
    start_offset: int | None = None
    end_offset: int | None = None  # exclusive
    start_time_ms: int | None = None
    end_time_ms: int | None = None  # exclusive
    read_committed: bool = False
    include_headers: bool = False
    include_metadata: bool = False

    def __post_init__(self) -> None:
        if self.start_offset is not None and self.start_time_ms is not None:
            raise InvalidOptionError("a start offset and a start time were both given; expected one of them")
        if self.end_offset is not None and self.end_time_ms is not None:
            raise InvalidOptionError("an end offset and an end time were both given; expected one of them")
        for name, v in (("start offset", self.start_offset), ("end offset", self.end_offset)):
            if v is not None and v < 0:
                raise InvalidOptionError(f"{name} must be >= 0, got {v}")
        if self.start_offset is not None and self.end_offset is not None and self.end_offset < self.start_offset:
            raise InvalidOptionError(f"end offset {self.end_offset} is before start offset {self.start_offset}")
        if self.start_time_ms is not None and self.end_time_ms is not None and self.end_time_ms < self.start_time_ms:
            raise InvalidOptionError(f"end time {self.end_time_ms} is before start time {self.start_time_ms}")


@dataclass(frozen=True)
class PartitionRange:
    """One partition's resolved offsets ``[start, end)`` and the segment bytes they span."""

    topic_partition: TopicPartition
    partition_dir: PartitionDir
    start: int
    end: int
    nbytes: int  # bytes of the segments overlapping the range (for progress)
    warnings: tuple[str, ...] = ()  # what opening the log found and Kafka would repair (a torn tail)


@dataclass
class ExportSummary:
    output: str
    records: int = 0
    batches: int = 0
    bytes_read: int = 0  # record-batch bytes read from the log
    bytes_written: int = 0  # size of the Parquet file
    partitions: int = 0


def _select(req: ExportRequest) -> list[PartitionDir]:
    parts = [p for p in find_partitions(req.log_dirs) if any(p.path.glob("*.log"))]
    names = sorted({p.topic_partition.topic for p in parts})
    mine = [p for p in parts if p.topic_partition.topic == req.topic]
    if not mine:
        raise InvalidOptionError(f"no such topic in {','.join(req.log_dirs)}: {req.topic}; topics there: "
                                 f"{', '.join(names) or 'none'}")
    if req.partitions is not None:
        have = {p.topic_partition.partition for p in mine}
        missing = sorted(set(req.partitions) - have)
        if missing:
            raise InvalidOptionError(f"topic {req.topic} has no partition {', '.join(map(str, missing))}; it has "
                                     f"{', '.join(map(str, sorted(have)))}")
        mine = [p for p in mine if p.topic_partition.partition in set(req.partitions)]
    return mine


def _resolve(req: ExportRequest, pd: PartitionDir, lg: Log) -> PartitionRange:
    tp = pd.topic_partition
    latest = lg.last_stable_offset if req.read_committed else lg.log_end_offset
    if req.start_offset is not None:
        if req.start_offset < lg.log_start_offset:
            raise InvalidOptionError(f"{tp}: start offset {req.start_offset} is below the log start offset "
                                     f"{lg.log_start_offset} (offsets before it were deleted); expected an offset in "
                                     f"[{lg.log_start_offset}, {latest}]")
        start = min(req.start_offset, latest)
    elif req.start_time_ms is not None:
        found = lg.offset_for_timestamp(req.start_time_ms)
        start = latest if found is None else min(max(found.offset, lg.log_start_offset), latest)
    else:
        start = lg.log_start_offset
    if req.end_offset is not None:
        end = min(req.end_offset, latest)
    elif req.end_time_ms is not None:
        found = lg.offset_for_timestamp(req.end_time_ms)
        end = latest if found is None else min(found.offset, latest)
    else:
        end = latest
    end = max(start, end)
    nbytes = 0
    segs = lg.segments
    for i, seg in enumerate(segs):
        nxt = segs[i + 1].base_offset if i + 1 < len(segs) else None
        if (nxt is not None and nxt <= start) or seg.base_offset >= end:
            continue
        nbytes += seg.size_in_bytes
    return PartitionRange(tp, pd, start, end, nbytes if end > start else 0, _damage(lg))


def _damage(lg: Log) -> tuple[str, ...]:
    """The notes of the read-only open; raises when data *inside* the log is unreadable."""
    lost = lost_data_notes(lg)
    if lost:
        more = f" (and {len(lost) - 1} more problems)" if len(lost) > 1 else ""
        raise CorruptRecordError(f"data in the middle of {lg.dir} is unreadable: {lost[0]}{more}; 'klog verify' "
                                 "lists every problem")
    return tuple(lg.recovery_notes)


def plan_export(req: ExportRequest) -> list[PartitionRange]:
    """Each selected partition's range (opens every log once; reads only indexes). Raises
    :class:`CorruptRecordError` before anything is written when a selected log is damaged."""
    out = []
    for pd in _select(req):
        try:
            lg = open_log_read_only(pd)
        except PendingCommitError:
            continue  # a new partition whose first commit is still being applied: empty for now
        with lg:
            out.append(_resolve(req, pd, lg))
    return out


def export_parquet(req: ExportRequest, ranges: Sequence[PartitionRange], output: str | os.PathLike[str], *,
                   compression: str = "zstd", overwrite: bool = False,
                   progress: Callable[[int], None] | None = None) -> ExportSummary:
    """Write the records of ``ranges`` to the Parquet file ``output``; ``progress(n)`` gets bytes read."""
    out = Path(output)
    if compression not in PARQUET_CODECS:
        raise InvalidOptionError(f"unknown Parquet compression {compression!r}; expected one of "
                                 f"{', '.join(PARQUET_CODECS)}")
    if out.is_dir():
        raise InvalidOptionError(f"output {out} is a directory; expected a file name such as {out / 'export.parquet'}")
    if out.exists() and not overwrite:
        raise InvalidOptionError(f"output {out} exists; pass --overwrite to replace it")
    if not out.parent.is_dir():
        raise InvalidOptionError(f"no such directory for the output: {out.parent}")
    schema = kafka_schema(req.include_headers, req.include_metadata)
    summary = ExportSummary(str(out), partitions=len(ranges))
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    writer = pq.ParquetWriter(tmp, schema, compression=None if compression == "none" else compression)
    try:
        for rng in ranges:
            if rng.end <= rng.start:
                continue
            tp = rng.topic_partition
            dec = ArrowDecoder(tp.topic, tp.partition, include_headers=req.include_headers,
                               include_metadata=req.include_metadata)
            with open_log_read_only(rng.partition_dir) as lg:
                for batch in lg.batches(rng.start, rng.end, read_committed=req.read_committed):
                    summary.records += dec.add(batch, min_offset=rng.start, end_offset=rng.end, verify=True)
                    summary.batches += 1
                    summary.bytes_read += batch.size_in_bytes
                    if progress is not None:
                        progress(batch.size_in_bytes)
                    if dec.nbytes >= FLUSH_BYTES or dec.num_rows >= FLUSH_ROWS:
                        writer.write_batch(_conform(dec.finish(), schema))
            if dec.num_rows:
                writer.write_batch(_conform(dec.finish(), schema))
        writer.close()
        os.replace(tmp, out)
    except BaseException:
        writer.close()
        tmp.unlink(missing_ok=True)
        raise
    summary.bytes_written = out.stat().st_size
    return summary


def _conform(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    if batch.schema.equals(schema):
        return batch
    return pa.RecordBatch.from_arrays([batch.column(i).cast(f.type) for i, f in enumerate(schema)], schema=schema)
