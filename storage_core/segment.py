"""A log segment: ``<base>.log`` with its ``.index`` and ``.timeindex`` (``LogSegment.java``).

This module starts with what recovery and ``klog verify`` need: :func:`scan_segment`, which
walks a ``.log`` the way ``LogSegment.recover`` does and computes the index entries Kafka would
build, without writing anything. The rule (``index.interval.bytes``, default 4096)::

    for each batch at position validBytes:
        ensureValid(batch)                      # the first invalid batch ends the valid data
        if batch.maxTimestamp > maxTimestampSoFar: remember (batch.maxTimestamp, batch.lastOffset)
        if validBytes - lastIndexEntry > indexIntervalBytes:   # strictly greater, before this batch
            offsetIndex.append(batch.lastOffset, validBytes)
            timeIndex.maybeAppend(maxTimestampSoFar, offsetOfMaxTimestampSoFar)
            lastIndexEntry = validBytes
        validBytes += batch.size
    timeIndex.maybeAppend(maxTimestampSoFar, offsetOfMaxTimestampSoFar)   # the entry of a closed segment

The first batch of a segment never gets an entry: position 0 is implicit.

On the time index's offsets: recovery records the *last offset of the batch* holding the max
timestamp, while a broker's append path may record the offset of the record inside the batch
that holds it. klog's append path follows recovery's rule (the batch's last offset): it needs no
record decoding, it is what any broker writes after an unclean shutdown, and lookups give the
same answer, since they resolve a time-index offset to the batch that contains it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from .errors import KlogError
from .file_records import FileRecords, PartialTail
from .offset_index import OffsetPosition
from .time_index import NO_TIMESTAMP, TimestampOffset

#: Kafka's default ``index.interval.bytes``.
DEFAULT_INDEX_INTERVAL_BYTES = 4096

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"


def filename_prefix(offset: int) -> str:
    """``LogFileUtils.filenamePrefixFromOffset``: the base offset zero-padded to 20 digits."""
    return f"{offset:020d}"


def base_offset_of(path: str | os.PathLike[str]) -> int:
    """The base offset in a segment file's name (``00000000000000000042.log`` → 42)."""
    name = Path(path).name
    stem = name.split(".", 1)[0]
    if not stem.isdigit():
        raise KlogError(f"not a segment file name: {name!r}; expected <20-digit base offset>.log")
    return int(stem)


@dataclass
class SegmentScan:
    """What :func:`scan_segment` found: the valid prefix and the indexes it implies."""

    base_offset: int
    size_in_bytes: int
    valid_bytes: int = 0
    batches: int = 0
    first_offset: int | None = None  # first offset of the first batch (base offset for v2)
    last_offset: int | None = None
    max_timestamp: int = NO_TIMESTAMP
    offset_of_max_timestamp: int | None = None
    offset_entries: list[OffsetPosition] = field(default_factory=list)
    time_entries: list[TimestampOffset] = field(default_factory=list)
    error: KlogError | None = None  # the corruption that ended the valid data, if any
    partial_tail: PartialTail | None = None
    codecs: dict[str, int] = field(default_factory=dict)

    @property
    def truncated_bytes(self) -> int:
        return self.size_in_bytes - self.valid_bytes

    @property
    def next_offset(self) -> int:
        return self.base_offset if self.last_offset is None else self.last_offset + 1


def scan_segment(log_path: str | os.PathLike[str], *, index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
                 base_offset: int | None = None) -> SegmentScan:
    """Validate every batch of a ``.log`` and compute its index entries; reads only."""
    base = base_offset_of(log_path) if base_offset is None else base_offset
    fr = FileRecords(log_path)
    scan = SegmentScan(base, fr.size_in_bytes)
    walk = fr.batches()
    last_index_entry = 0
    max_ts, max_ts_offset = NO_TIMESTAMP, base
    try:
        for batch in walk:
            batch.ensure_valid()
            last = batch.last_offset
            if last - base > 0x7FFFFFFF or last < base:
                raise KlogError(f"Batch with last offset {last} cannot be in a segment based at {base}",
                                path=str(log_path), position=batch.position)
            if batch.max_timestamp > max_ts:
                max_ts, max_ts_offset = batch.max_timestamp, last
            if batch.position - last_index_entry > index_interval_bytes:
                scan.offset_entries.append(OffsetPosition(last, batch.position))
                _maybe_append_time(scan.time_entries, max_ts, max_ts_offset)
                last_index_entry = batch.position
            if scan.first_offset is None:
                scan.first_offset = batch.base_offset
            scan.last_offset = last
            scan.batches += 1
            label = batch.compression.label
            scan.codecs[label] = scan.codecs.get(label, 0) + 1
            scan.valid_bytes = batch.position + batch.size_in_bytes
    except KlogError as exc:
        scan.error = exc
    else:
        scan.partial_tail = walk.partial_tail
    _maybe_append_time(scan.time_entries, max_ts, max_ts_offset)
    scan.max_timestamp = max_ts
    scan.offset_of_max_timestamp = max_ts_offset if max_ts != NO_TIMESTAMP else None
    return scan


def _maybe_append_time(entries: list[TimestampOffset], timestamp: int, offset: int) -> None:
    last_ts = entries[-1].timestamp if entries else NO_TIMESTAMP
    if timestamp > last_ts:
        entries.append(TimestampOffset(timestamp, offset))
