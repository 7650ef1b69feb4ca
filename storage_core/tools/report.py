"""What ``klog verify`` computes, separate from how the CLI prints it. (``klog describe``'s
summaries are :mod:`storage_core.read.describe`'s, shared with :func:`storage_core.describe`.)

``verify`` reads every batch: CRCs and structure, index entries against the log. A problem is
an *error* when data is lost or corrupt (a bad CRC, an index entry that points to the wrong
place, a torn batch in a segment that is not the last) and a *warning* when Kafka would simply
rebuild (a missing or untrimmed index, a torn tail of the active segment, the zero-filled tail of a
preallocated one: :func:`~storage_core.log.segment.zero_filled`). Lost data — what the
dir's own evidence says should be there and cannot be read, by the rule every reader applies
(:mod:`storage_core.log.lost`) — is an error naming the offsets, the file and the bytes.

A replicated partition read from several brokers' dirs (:mod:`storage_core.log.replicas`) is
verified in the replica read, and its other replicas are cross-checked against it: a replica that
leaves the read one's leader-epoch lineage is a warning naming the broker and the offsets Kafka
would truncate; batches that differ where both replicas should hold the same ones are an error.

A tiered partition's remote segments (``__remote_log_metadata``) are verified too when the remote
storage is given (:func:`verify_remote`): each copy is opened as every reader opens it
(:meth:`~storage_core.log.tiered.RemoteStorage.segment`: the size the broker recorded; Aiven's
manifest, chunk index, data key and every chunk's GCM tag as the batches are read), every batch's
CRC is checked, and its offsets must rise from the segment's start offset to its end offset.
Anything else is an error naming the segment, its offsets and its object; without the storage the
report says the remote history was not verified.
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
from storage_core.log.replicas import first_disagreement
from storage_core.log.segment import scan_segment, zero_filled
from storage_core.log.tiered import RemoteStorage, TieredMetadata, partition_history
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
                     *, tiered: TieredMetadata | None = None, remote: RemoteStorage | None = None) -> VerifyReport:
    """``state``: the log dir's checkpoints and journals of the run (:mod:`storage_core.log.dir_state`:
    read once per dir, not once per partition); None reads them for this partition. ``tiered``: the
    remote log metadata of the dirs, whose segments of this partition are verified in ``remote``
    (:func:`verify_remote`)."""
    rep = VerifyReport(str(pd.path))
    logs = sorted(pd.path.glob("*" + LOG_SUFFIX))
    for orphan in sorted(pd.path.glob("*" + INDEX_SUFFIX)) + sorted(pd.path.glob("*" + TIME_INDEX_SUFFIX)):
        if not orphan.with_suffix(LOG_SUFFIX).exists():
            rep.warnings.append(f"{orphan}: index without its .log (Kafka deletes it)")
    lost = _find_lost(pd, rep, state)
    unclean = not (state if state is not None else LogDirState(pd.log_dir)).clean_shutdown
    for i, log_path in enumerate(logs):
        last = i == len(logs) - 1
        scan = scan_segment(log_path, index_interval_bytes=index_interval_bytes)
        rep.batches += scan.batches
        intact = [(0, scan.valid_bytes)]
        if scan.error is not None and last and not any(x.path == str(log_path) for x in lost):
            # the readers' rule decides (storage_core.log.lost): nothing of the active segment's tail is
            # lost, Kafka's recovery truncates it; a warning saying what it holds, never CORRUPT
            if zero_filled(log_path, scan.valid_bytes):
                rep.warnings.append(f"{log_path}: zero-filled from position {scan.valid_bytes} to its size "
                                    f"{scan.size_in_bytes} (a preallocated active segment; Kafka's recovery "
                                    "truncates it)")
            else:
                rep.warnings.append(f"{log_path}: {scan.error}; no batch follows that any reader reads, and the "
                                    "log's checkpoints hold no offset past it (a torn tail: Kafka's recovery "
                                    "truncates it from there)")
        elif scan.error is not None:
            rep.errors.append(str(scan.error))
            # the intact batches after the damage are checked too: where every reader resumes
            intact = _intact_spans(log_path, scan.valid_bytes, scan.size_in_bytes, lost)
            rep.batches += sum(_count_batches(log_path, s, e) for s, e in intact[1:])
        elif scan.partial_tail is not None:
            msg = (f"{log_path}: {scan.partial_tail.size} bytes of a partial batch at position "
                   f"{scan.partial_tail.position} (Kafka's recovery truncates them)")
            (rep.warnings if last else rep.errors).append(msg)
        _verify_record_counts(log_path, intact, rep)
        if unclean and last:
            # the active segment of a dir not shut down cleanly (a running broker's, or a copy of
            # it): its .index is the broker's preallocated mmap, whose entries past the in-memory
            # position (none yet, or left by a truncation) are not the broker's; Kafka's recovery
            # rebuilds it (LogLoader.recoverLog from the recovery point), so nothing is lost. A
            # closed segment's index was trimmed to its entries at the roll: checked as ever
            found = VerifyReport(rep.path)
            _verify_indexes(log_path, intact, last, found)
            rep.warnings.extend(found.warnings)
            rep.warnings.extend(f"{e} (the active segment of a dir not shut down cleanly: Kafka's recovery "
                                "rebuilds it)" for e in found.errors)
        else:
            _verify_indexes(log_path, intact, last, rep)
    rep.lost.extend(lost)
    rep.errors.extend(f"lost data: {x}" for x in lost)
    _cross_check(pd, rep)
    verify_remote(pd, tiered, remote, rep, index_interval_bytes)
    return rep


def verify_remote(pd: PartitionDir, tiered: TieredMetadata | None, remote: RemoteStorage | None, rep: VerifyReport,
                  index_interval_bytes: int = 4096) -> None:
    """The remote segments ``tiered`` lists for ``pd``'s partition, read from ``remote`` (see the
    module doc); without ``remote``, a warning that they were not verified."""
    history = partition_history(tiered, pd.topic_partition, pd.path)
    if not history:
        return
    if remote is None:
        rep.warnings.append(f"{pd.topic_partition}: {len(history)} remote segments (offsets {history[0].start_offset}-"
                            f"{history[-1].end_offset}, tiered) not verified: give the remote storage "
                            "(--remote-storage) to verify them")
        return
    tp = pd.topic_partition
    for rs in history:
        where = f"remote segment {rs.segment_id} of {tp} (offsets {rs.start_offset}-{rs.end_offset})"
        try:
            seg = remote.segment(rs, index_interval_bytes=index_interval_bytes)
            try:
                expected, last = rs.start_offset, None
                for batch in seg.batches(0):
                    batch.ensure_valid()
                    if batch.base_offset < expected:
                        raise KlogError(f"the batch at position {batch.position} starts at offset {batch.base_offset}, "
                                        f"below {expected} (offsets must rise from the segment's start offset)")
                    expected, last = batch.last_offset + 1, batch.last_offset
                    rep.batches += 1
            finally:
                seg.close()
        except KlogError as exc:  # every failure of the copy: missing, cut, a bad key, tag or CRC
            rep.errors.append(f"{where}: {exc}")
            continue
        if last != rs.end_offset:
            rep.errors.append(f"{where}: its batches end at offset {last}; __remote_log_metadata says "
                              f"{rs.end_offset}")


def _cross_check(pd: PartitionDir, rep: VerifyReport) -> None:
    """The replicas of ``pd`` against the one read: divergence (a warning) and differing batches
    below where both agree (an error), compared from past what either replica's cleaner compacted."""
    rs = pd.replicas
    if rs is None:
        return
    if rs.problem:
        rep.warnings.append(rs.problem)
    tp = pd.topic_partition
    for other in rs.replicas:
        if other is rs.read or other.path == rs.read.path:
            continue
        if other.diverges_at is not None:
            rep.warnings.append(f"{tp}: broker {other.broker}'s replica ({other.path}) diverges from broker "
                                f"{rs.read.broker}'s at offset {other.diverges_at}: Kafka would truncate its offsets "
                                f"{other.diverges_at}..{other.log_end_offset - 1} (never read)")
        cleaned = max(LogDirState(rs.read.log_dir).cleaner_offsets.get(tp, 0),
                      LogDirState(other.log_dir).cleaner_offsets.get(tp, 0))
        start = max(rs.read.log_start_offset, other.log_start_offset, cleaned)
        end = min(other.agreed_end, rs.read.log_end_offset)
        if start < end:
            found = first_disagreement(tp, rs.read, other, start, end)
            if found is not None:
                rep.errors.append(found)


def _intact_spans(log_path: Path, valid_bytes: int, size: int, lost: list[LostData]) -> list[tuple[int, int]]:
    """The byte spans of ``log_path`` that hold intact batches: before its first damage at
    ``valid_bytes``, and between the damaged runs the lost-data rule found (it resynchronises at
    the next intact batch, :mod:`storage_core.log.lost`)."""
    damaged = sorted((x.position, x.position + x.nbytes) for x in lost
                     if x.path == str(log_path) and x.position is not None and x.nbytes is not None
                     and valid_bytes <= x.position < size)
    spans = [(0, valid_bytes)]
    at = valid_bytes
    for start, end in damaged:
        if start > at:
            spans.append((at, start))
        at = max(at, end)
    if damaged and at < size:
        spans.append((at, size))
    return [(s, e) for s, e in spans if e > s]


def _count_batches(log_path: Path, start: int, end: int) -> int:
    n = 0
    try:
        for batch in FileRecords(log_path).batches(start, end):
            batch.ensure_valid()
            n += 1
    except KlogError:
        pass  # the span's end: its damage is reported by the lost-data rule
    return n


def _verify_record_counts(log_path: Path, intact: list[tuple[int, int]], rep: VerifyReport) -> None:
    """A v2 batch's record count, which its CRC covers but a CRC does not make right: it cannot be
    negative, above the offsets the batch spans (``lastOffsetDelta + 1``), or, uncompressed, above
    the bytes of its records (each takes at least one); every read refuses such a batch."""
    for batch in (b for s, e in intact for b in FileRecords(log_path).batches(s, e)):
        if not isinstance(batch, DefaultRecordBatch):
            continue
        count, spans = batch.records_count, batch.last_offset - batch.base_offset + 1
        room = batch.size_in_bytes - RECORDS_OFFSET
        if count < 0 or count > spans or (batch.header.attributes & COMPRESSION_CODEC_MASK == 0 and count > room):
            rep.errors.append(f"{log_path}: the batch at position {batch.position} (offsets {batch.base_offset}.."
                              f"{batch.last_offset}) declares {count} records; expected 0..{spans} in its "
                              f"{room} bytes of records (every read refuses it)")


def _find_lost(pd: PartitionDir, rep: VerifyReport, state: LogDirState | None = None) -> list[LostData]:
    """The lost offsets, by the rule every reader applies (:func:`~storage_core.log.lost.lost_data`)."""
    evidence = gather_evidence(pd, state)
    if not has_log_files(pd.path):
        lost = lost_data(pd, None, evidence)
    else:
        try:
            lg = open_log_read_only(pd, state)
        except PendingCommitError:
            return []
        except KlogError as exc:
            rep.errors.append(f"{pd.path}: cannot be opened to find lost offsets: {exc}")
            return []
        with lg:
            lost = lost_data(pd, lg, evidence, full=True)
    return lost


def _verify_indexes(log_path: Path, intact: list[tuple[int, int]], active: bool, rep: VerifyReport) -> None:
    """Each index entry against the log: an offset-index entry must be where an intact batch with
    that last offset starts; entries into damaged bytes are one error per index."""
    base = base_offset_of(log_path)
    index_path = log_path.with_suffix(INDEX_SUFFIX)
    time_path = log_path.with_suffix(TIME_INDEX_SUFFIX)
    if not index_path.exists():
        rep.warnings.append(f"{index_path}: missing (Kafka rebuilds it)")
        return
    records = FileRecords(log_path)
    valid_bytes = intact[0][1] if intact else 0
    # (an index of no bytes is the one a clean shutdown trims an empty segment's to, not preallocated)
    if (active and valid_bytes == 0 and len(intact) <= 1 and index_path.stat().st_size > 0 and _all_zero(index_path)
            and (not time_path.exists() or _all_zero(time_path))):
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
        into_damage = []
        end = intact[-1][1] if intact else 0
        for e in oi.all_entries():
            span = next(((s, x) for s, x in intact if s <= e.position < x), None)
            if span is None:
                if e.position < end:
                    into_damage.append(e.offset)
                else:
                    rep.errors.append(f"{index_path}: entry for offset {e.offset} points to position {e.position}, "
                                      f"past the valid data ({end} bytes)")
                continue
            try:
                batch = next(iter(records.batches(e.position, span[1])), None)
            except KlogError:
                batch = None
            if batch is None or batch.last_offset != e.offset:
                found = None if batch is None else batch.last_offset
                rep.errors.append(f"{index_path}: entry for offset {e.offset} points to position {e.position}, where "
                                  f"the batch's last offset is {found}")
        if into_damage:
            rep.errors.append(f"{index_path}: {len(into_damage)} entries (offsets {into_damage[0]}.."
                              f"{into_damage[-1]}) point into damaged bytes of the .log")
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
    """A file of zero bytes only (a preallocated index no entry was written to)."""
    return zero_filled(path)
