"""What ``klog describe`` and ``klog verify`` compute, separate from how the CLI prints it.

``describe`` reads only headers and indexes (no record decoding): offsets, time range, sizes,
segment counts, codecs (from each segment's first batch) and a record-count estimate
(end offset - start offset, which compaction gaps and control records make an upper bound).

``verify`` reads every batch: CRCs and structure, index entries against the log. A problem is
an *error* when data is lost or corrupt (a bad CRC, an index entry that points to the wrong
place, a torn batch in a segment that is not the last) and a *warning* when Kafka would simply
rebuild (a missing or untrimmed index, a torn tail of the active segment).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from storage_core.errors import KlogError
from storage_core.files import (
    INDEX_SUFFIX,
    LOG_START_OFFSET_CHECKPOINT,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    base_offset_of,
    has_log_files,
)
from storage_core.log.checkpoint import OffsetCheckpointFile
from storage_core.log.log import Log
from storage_core.log.manager import PartitionDir
from storage_core.log.offset_index import OffsetIndex
from storage_core.log.segment import scan_segment
from storage_core.log.time_index import TimeIndex
from storage_core.record.file_records import FileRecords
from storage_core.record.records import DefaultRecordBatch


@dataclass
class PartitionSummary:
    topic: str
    partition: int
    path: str
    start_offset: int
    end_offset: int
    estimated_records: int
    segments: int
    size_bytes: int
    first_timestamp: int | None
    max_timestamp: int | None
    codecs: list[str]


def describe_partition(pd: PartitionDir) -> PartitionSummary:
    tp = pd.topic_partition
    if not has_log_files(pd.path):  # only orphan indexes (Kafka deletes them and starts empty)
        return PartitionSummary(tp.topic, tp.partition, str(pd.path), 0, 0, 0, 0, 0, None, None, [])
    # indexes are trusted (no recovery: describe reads no records), the log start offset is the
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
        return PartitionSummary(pd.topic_partition.topic, pd.topic_partition.partition, str(pd.path), start, end,
                                end - start, len(log.segments), log.size_in_bytes, first_ts,
                                max_ts if max_ts >= 0 else None, sorted(codecs))


@dataclass
class VerifyReport:
    path: str
    batches: int = 0
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def verify_partition(pd: PartitionDir, index_interval_bytes: int = 4096) -> VerifyReport:
    rep = VerifyReport(str(pd.path))
    logs = sorted(pd.path.glob("*" + LOG_SUFFIX))
    for orphan in sorted(pd.path.glob("*" + INDEX_SUFFIX)) + sorted(pd.path.glob("*" + TIME_INDEX_SUFFIX)):
        if not orphan.with_suffix(LOG_SUFFIX).exists():
            rep.warnings.append(f"{orphan}: index without its .log (Kafka deletes it)")
    for i, log_path in enumerate(logs):
        last = i == len(logs) - 1
        scan = scan_segment(log_path, index_interval_bytes=index_interval_bytes)
        rep.batches += scan.batches
        if scan.error is not None:
            rep.errors.append(str(scan.error))
        elif scan.partial_tail is not None:
            msg = (f"{log_path}: {scan.partial_tail.size} bytes of a partial batch at position "
                   f"{scan.partial_tail.position} (Kafka's recovery truncates them)")
            (rep.warnings if last else rep.errors).append(msg)
        _verify_indexes(log_path, scan.valid_bytes, last, rep)
    return rep


def _verify_indexes(log_path: Path, valid_bytes: int, active: bool, rep: VerifyReport) -> None:
    base = base_offset_of(log_path)
    index_path = log_path.with_suffix(INDEX_SUFFIX)
    time_path = log_path.with_suffix(TIME_INDEX_SUFFIX)
    if not index_path.exists():
        rep.warnings.append(f"{index_path}: missing (Kafka rebuilds it)")
        return
    records = FileRecords(log_path)
    with OffsetIndex(index_path, base) as oi:
        if oi.entries * 8 != index_path.stat().st_size and not active:
            rep.warnings.append(f"{index_path}: not trimmed ({index_path.stat().st_size} bytes for {oi.entries} "
                                "entries)")
        try:
            oi.sanity_check()
        except KlogError as exc:
            rep.errors.append(str(exc))
            return
        for e in oi.all_entries():
            if e.position >= valid_bytes:
                rep.errors.append(f"{index_path}: entry for offset {e.offset} points to position {e.position}, past "
                                  f"the valid data ({valid_bytes} bytes)")
                continue
            batch = next(iter(records.batches(e.position, valid_bytes)), None)
            if batch is None or batch.last_offset != e.offset:
                found = None if batch is None else batch.last_offset
                rep.errors.append(f"{index_path}: entry for offset {e.offset} points to position {e.position}, where "
                                  f"the batch's last offset is {found}")
    if time_path.exists():
        with TimeIndex(time_path, base) as ti:
            try:
                ti.sanity_check()
            except KlogError as exc:
                rep.errors.append(str(exc))
            prev = -1
            for t in ti.all_entries():
                if t.timestamp <= prev:
                    rep.errors.append(f"{time_path}: timestamps out of order ({t.timestamp} after {prev})")
                prev = t.timestamp
    else:
        rep.warnings.append(f"{time_path}: missing (Kafka rebuilds it)")
