"""What ``klog verify`` computes, separate from how the CLI prints it. (``klog describe``'s
summaries are :mod:`storage_core.read.describe`'s, shared with :func:`storage_core.describe`.)

``verify`` reads every batch: CRCs and structure, index entries against the log. A problem is
an *error* when data is lost or corrupt (a bad CRC, an index entry that points to the wrong
place, a torn batch in a segment that is not the last) and a *warning* when Kafka would simply
rebuild (a missing or untrimmed index, a torn tail of the active segment). Lost data — what the
dir's own evidence says should be there and cannot be read, by the rule every reader applies
(:mod:`storage_core.log.lost`) — is an error naming the offsets, the file and the bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from storage_core.errors import KlogError, PendingCommitError
from storage_core.files import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    base_offset_of,
    has_log_files,
)
from storage_core.log.dir_state import LogDirState
from storage_core.log.lost import LostData, gather_evidence, lost_data
from storage_core.log.manager import PartitionDir, open_log_read_only
from storage_core.log.offset_index import OffsetIndex
from storage_core.log.segment import scan_segment
from storage_core.log.time_index import TimeIndex
from storage_core.record.file_records import FileRecords
from storage_core.record.records import COMPRESSION_CODEC_MASK, RECORDS_OFFSET, DefaultRecordBatch


@dataclass
class VerifyReport:
    path: str
    batches: int = 0
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    lost: list[LostData] = field(default_factory=list)  # the lost offsets (also in errors)


def verify_partition(pd: PartitionDir, index_interval_bytes: int = 4096, state: LogDirState | None = None,
                     ) -> VerifyReport:
    """``state``: the log dir's checkpoints and journals of the run (:mod:`storage_core.log.dir_state`:
    read once per dir, not once per partition); None reads them for this partition."""
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
        _verify_record_counts(log_path, scan.valid_bytes, rep)
        _verify_indexes(log_path, scan.valid_bytes, last, rep)
    _verify_lost(pd, rep, state)
    return rep


def _verify_record_counts(log_path: Path, valid_bytes: int, rep: VerifyReport) -> None:
    """A v2 batch's record count, which its CRC covers but a CRC does not make right: it cannot be
    negative, above the offsets the batch spans (``lastOffsetDelta + 1``), or, uncompressed, above
    the bytes of its records (each takes at least one); every read refuses such a batch."""
    for batch in FileRecords(log_path).batches(0, valid_bytes):
        if not isinstance(batch, DefaultRecordBatch):
            continue
        count, spans = batch.records_count, batch.last_offset - batch.base_offset + 1
        room = batch.size_in_bytes - RECORDS_OFFSET
        if count < 0 or count > spans or (batch.header.attributes & COMPRESSION_CODEC_MASK == 0 and count > room):
            rep.errors.append(f"{log_path}: the batch at position {batch.position} (offsets {batch.base_offset}.."
                              f"{batch.last_offset}) declares {count} records; expected 0..{spans} in its "
                              f"{room} bytes of records (every read refuses it)")


def _verify_lost(pd: PartitionDir, rep: VerifyReport, state: LogDirState | None = None) -> None:
    """The lost offsets, by the rule every reader applies (:func:`~storage_core.log.lost.lost_data`)."""
    evidence = gather_evidence(pd, state)
    if not has_log_files(pd.path):
        lost = lost_data(pd, None, evidence)
    else:
        try:
            lg = open_log_read_only(pd, state)
        except PendingCommitError:
            return
        except KlogError as exc:
            rep.errors.append(f"{pd.path}: cannot be opened to find lost offsets: {exc}")
            return
        with lg:
            lost = lost_data(pd, lg, evidence, full=True)
    rep.lost.extend(lost)
    rep.errors.extend(f"lost data: {x}" for x in lost)


def _verify_indexes(log_path: Path, valid_bytes: int, active: bool, rep: VerifyReport) -> None:
    base = base_offset_of(log_path)
    index_path = log_path.with_suffix(INDEX_SUFFIX)
    time_path = log_path.with_suffix(TIME_INDEX_SUFFIX)
    if not index_path.exists():
        rep.warnings.append(f"{index_path}: missing (Kafka rebuilds it)")
        return
    records = FileRecords(log_path)
    if active and valid_bytes == 0 and _all_zero(index_path) and (not time_path.exists() or _all_zero(time_path)):
        rep.warnings.append(f"{index_path}: preallocated ({index_path.stat().st_size} bytes) for an empty active "
                            "segment, as an unclean shutdown leaves it (Kafka's recovery rebuilds it)")
        return
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


def _all_zero(path: Path) -> bool:
    """A file of zero bytes only (a preallocated index no entry was written to), read in blocks."""
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            if block.count(0) != len(block):
                return False
    return True
