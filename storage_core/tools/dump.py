"""``klog dump``: what ``kafka-dump-log.sh`` prints, plus a JSON-lines form.

The JSON-lines form is the one of ``shared/fixtures/kafka/**/*.expected.jsonl`` (written by
Kafka's own ``FileRecords``), so the two can be compared line for line: one object per record
with the keys of :data:`JSONL_KEYS`, one line with record fields null for a batch without
records, a batch's lines only once all of it decoded, and at the first batch that fails, one
``{"error": "<Kafka exception>: <message>", "position": <byte position>}`` line that ends the
output. A partial batch at the end of the file ends the output silently, as in Kafka.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import IO, Any

from storage_core.errors import KlogError
from storage_core.files import INDEX_SUFFIX, LOG_SUFFIX, TXN_INDEX_SUFFIX, base_offset_of, is_offset_named
from storage_core.limits import INT32_MAX
from storage_core.record.control import ControlRecordType, EndTransactionMarker
from storage_core.record.file_records import AnyBatch, BatchWalk, FileRecords
from storage_core.record.records import MAGIC_VALUE_V2, Record

JSONL_KEYS = (
    "batch_base_offset", "batch_last_offset", "magic", "compression", "timestamp_type", "is_transactional",
    "is_control", "producer_id", "producer_epoch", "base_sequence", "partition_leader_epoch", "offset",
    "timestamp", "key_b64", "value_b64", "headers", "control_type",
)


def _b64(b: bytes | None) -> str | None:
    return None if b is None else base64.b64encode(b).decode("ascii")


def _dumps(obj: dict[str, Any]) -> str:
    return json.dumps(obj, separators=(",", ":"))


def batch_fields(batch: AnyBatch) -> dict[str, Any]:
    return {
        "batch_base_offset": batch.base_offset,
        "batch_last_offset": batch.last_offset,
        "magic": batch.magic,
        "compression": batch.compression.label,
        "timestamp_type": batch.timestamp_type.label,
        "is_transactional": batch.is_transactional,
        "is_control": batch.is_control,
        "producer_id": batch.producer_id,
        "producer_epoch": batch.producer_epoch,
        "base_sequence": batch.base_sequence,
        "partition_leader_epoch": batch.partition_leader_epoch,
    }


def batch_jsonl(batch: AnyBatch) -> list[str]:
    """The JSON lines of one batch (validated and fully decoded first; may raise KlogError)."""
    batch.ensure_valid()
    records = batch.records()
    head = batch_fields(batch)
    if not records:
        return [_dumps({**head, "offset": None, "timestamp": None, "key_b64": None, "value_b64": None,
                        "headers": None, "control_type": None})]
    lines = []
    for r in records:
        control = None
        if batch.is_control:
            try:
                control = ControlRecordType.parse(r.key).name
            except KlogError as exc:
                exc.located(path=batch.path, position=batch.position)
                raise
        lines.append(_dumps({
            **head,
            "offset": r.offset,
            "timestamp": r.timestamp,
            "key_b64": _b64(r.key),
            "value_b64": _b64(r.value),
            "headers": [[h.key, _b64(h.value)] for h in r.headers],
            "control_type": control,
        }))
    return lines


def error_line(exc: KlogError, position: int) -> str:
    return _dumps({"error": f"{exc.kafka_exception}: {exc.detail}", "position": position})


@dataclass
class DumpSummary:
    batches: int = 0
    records: int = 0
    valid_bytes: int = 0
    size_in_bytes: int = 0
    error: KlogError | None = None
    invalid_batches: int = 0  # batches whose CRC fails (the text form lists them, as Kafka does)


def _walk_safely(walk: BatchWalk, summary: DumpSummary) -> Iterator[AnyBatch]:
    try:
        yield from walk
    except KlogError as exc:
        summary.error = exc


def dump_jsonl(path: str | os.PathLike[str], out: IO[str], *,
               progress: Callable[[int], None] | None = None) -> DumpSummary:
    """Write the JSON lines of a record-set file to ``out``; ``progress(n)`` gets the bytes of each batch."""
    fr = FileRecords(path)
    summary = DumpSummary(size_in_bytes=fr.size_in_bytes)
    walk = fr.batches()
    for batch in _walk_safely(walk, summary):
        try:
            lines = batch_jsonl(batch)
        except KlogError as exc:
            summary.error = exc.located(position=batch.position)
            break
        summary.batches += 1
        summary.records += len(lines)
        out.write("\n".join(lines) + "\n")
        if progress is not None:
            progress(batch.size_in_bytes)
    if summary.error is not None:
        pos = summary.error.position if summary.error.position is not None else walk.valid_bytes
        out.write(error_line(summary.error, pos) + "\n")
        summary.valid_bytes = pos
    else:
        summary.valid_bytes = walk.valid_bytes
    return summary


# --- kafka-dump-log's text form (DumpLogSegments.scala) ------------------------------------------


def _opt_long(v: int | None) -> str:
    return "OptionalLong.empty" if v is None else f"OptionalLong[{v}]"


def _text(b: bytes | None) -> str:
    return "null" if b is None else b.decode("utf-8", "replace")


def batch_line(batch: AnyBatch) -> str:
    if batch.magic >= MAGIC_VALUE_V2:
        assert not hasattr(batch, "wrapper_timestamp")
        head = (f"baseOffset: {batch.base_offset} lastOffset: {batch.last_offset} count: {batch.records_count} "
                f"baseSequence: {batch.base_sequence} lastSequence: {batch.last_sequence} "
                f"producerId: {batch.producer_id} producerEpoch: {batch.producer_epoch} "
                f"partitionLeaderEpoch: {batch.partition_leader_epoch} isTransactional: "
                f"{str(batch.is_transactional).lower()} isControl: {str(batch.is_control).lower()} "
                f"deleteHorizonMs: {_opt_long(batch.delete_horizon_ms)}")
    else:
        head = f"offset: {batch.last_offset}"
    codec = batch.attributes & 0x07
    codec_name = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}.get(codec, f"unknown({codec})")
    return (f"{head} position: {batch.position} {batch.timestamp_type.label}: {batch.max_timestamp} "
            f"size: {batch.size_in_bytes} magic: {batch.magic} compresscodec: {codec_name} crc: {batch.crc} "
            f"isvalid: {str(batch.is_valid()).lower()}")


def record_line(batch: AnyBatch, r: Record, print_data: bool) -> str:
    ksize = -1 if r.key is None else len(r.key)
    vsize = -1 if r.value is None else len(r.value)
    s = f"| offset: {r.offset} {batch.timestamp_type.label}: {r.timestamp} keySize: {ksize} valueSize: {vsize}"
    if batch.magic >= MAGIC_VALUE_V2:
        s += f" sequence: {r.sequence} headerKeys: [{','.join(h.key for h in r.headers)}]"
    if batch.is_control:
        ctype = ControlRecordType.parse(r.key)
        if ctype in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
            m = EndTransactionMarker.deserialize(r.key, r.value)
            s += f" endTxnMarker: {m.type.name} coordinatorEpoch: {m.coordinator_epoch}"
        else:
            s += f" {ctype.name}"
    elif print_data:
        if r.key is not None:
            s += f" key: {_text(r.key)}"
        s += f" payload: {_text(r.value)}"
    return s


def dump_text(path: str | os.PathLike[str], out: IO[str], *, deep: bool = False, print_data: bool = False,
              max_bytes: int | None = None, progress: Callable[[int], None] | None = None) -> DumpSummary:
    """kafka-dump-log's output for a ``.log`` file; ``progress(n)`` gets the bytes of each batch."""
    fr = FileRecords(path)
    summary = DumpSummary(size_in_bytes=fr.size_in_bytes)
    deep = deep or print_data
    out.write(f"Dumping {path}\n")
    if is_offset_named(os.path.basename(os.fspath(path))):
        out.write(f"Log starting offset: {base_offset_of(path)}\n")
    walk = fr.batches(end=max_bytes)
    last_offset: int | None = None
    non_consecutive = False
    for batch in _walk_safely(walk, summary):
        try:
            out.write(batch_line(batch) + "\n")
            summary.batches += 1
            if not batch.is_valid():
                summary.invalid_batches += 1
            if deep:
                for r in batch.records():
                    if last_offset is not None and r.offset != last_offset + 1 and not batch.is_control:
                        non_consecutive = True
                    last_offset = r.offset
                    out.write(record_line(batch, r, print_data) + "\n")
                    summary.records += 1
            if progress is not None:
                progress(batch.size_in_bytes)
        except KlogError as exc:
            summary.error = exc.located(position=batch.position)
            break
    summary.valid_bytes = walk.valid_bytes
    if summary.error is not None:
        out.write(f"Error: {summary.error}\n")
    end = fr.size_in_bytes if max_bytes is None else min(max_bytes, fr.size_in_bytes)
    if summary.error is None and walk.valid_bytes < end:
        out.write(f"Found {end - walk.valid_bytes} invalid bytes at the end of {os.path.basename(os.fspath(path))}\n")
    if non_consecutive:
        out.write(f"Non-consecutive offsets in {path}\n")
    if summary.invalid_batches:
        out.write(f"Found {summary.invalid_batches} batches with a bad CRC in {path}\n")
    return summary


# --- index files (DumpLogSegments.dumpIndex / dumpTimeIndex / dumpTxnIndex) ---------------------


def dump_index(path: str | os.PathLike[str], out: IO[str], err: IO[str], *, sanity_only: bool = False,
               verify_only: bool = False) -> int:
    """Print an ``.index``/``.timeindex``/``.txnindex`` like kafka-dump-log; returns mismatches found."""
    from pathlib import Path

    from storage_core.log.offset_index import OffsetIndex
    from storage_core.log.time_index import TimeIndex
    from storage_core.log.txn_index import TransactionIndex

    p = Path(path)
    base = base_offset_of(p)
    out.write(f"Dumping {p}\n")
    if p.suffix == TXN_INDEX_SUFFIX:
        for t in TransactionIndex(p, base).read():
            out.write(f"version: {t.version} producerId: {t.producer_id} firstOffset: {t.first_offset} "
                      f"lastOffset: {t.last_offset} lastStableOffset: {t.last_stable_offset}\n")
        return 0
    index: OffsetIndex | TimeIndex = OffsetIndex(p, base) if p.suffix == INDEX_SUFFIX else TimeIndex(p, base)
    try:
        if index.entries == 0:
            out.write(f"{p} is empty.\n")
            return 0
        if sanity_only:
            index.sanity_check()
            out.write(f"{p} passed sanity check.\n")
            return 0
        log = p.with_suffix(LOG_SUFFIX)
        fr = FileRecords(log) if log.exists() else None
        mismatches: list[tuple[int, int | None]] = []
        for i in range(index.entries):
            entry = index.entry(i)
            if isinstance(index, OffsetIndex):
                if fr is not None:
                    batch = next(iter(fr.batches(entry.position)), None)  # type: ignore[union-attr]
                    found = None if batch is None else batch.last_offset
                    if found != entry.offset:
                        mismatches.append((entry.offset, found))
                if not verify_only:
                    out.write(f"offset: {entry.offset} position: {entry.position}\n")  # type: ignore[union-attr]
            elif not verify_only:
                out.write(f"timestamp: {entry.timestamp} offset: {entry.offset}\n")  # type: ignore[union-attr]
        if mismatches:
            err.write(f"Mismatches in :{p}\n")
            for idx_off, log_off in mismatches:
                err.write(f"  Index offset: {idx_off}, log offset: {log_off}\n")
        return len(mismatches)
    finally:
        index.close()


# --- producer snapshots (DumpLogSegments.dumpProducerIdSnapshot) --------------------------------


def _first_sequence(last_sequence: int, offset_delta: int) -> int:
    """``BatchMetadata.firstSeq``: ``DefaultRecordBatch.decrementSequence(lastSeq, offsetDelta)``."""
    if last_sequence < offset_delta:
        return INT32_MAX - (offset_delta - last_sequence) + 1
    return last_sequence - offset_delta


def dump_snapshot(path: str | os.PathLike[str], out: IO[str]) -> int:
    """Print a producer ``.snapshot`` as kafka-dump-log does; returns the number of entries.
    A corrupt snapshot raises :class:`~storage_core.errors.CorruptIndexError`."""
    from storage_core.log.producer_state import ProducerStateManager

    out.write(f"Dumping {path}\n")
    state = ProducerStateManager.read_snapshot(path)
    for e in state.producers.values():
        txn = "OptionalLong.empty" if e.current_txn_first_offset < 0 else f"OptionalLong[{e.current_txn_first_offset}]"
        line = (f"producerId: {e.producer_id} producerEpoch: {e.epoch} coordinatorEpoch: {e.coordinator_epoch} "
                f"currentTxnFirstOffset: {txn} lastTimestamp: {e.timestamp} ")
        if e.last_offset >= 0:
            line += (f"firstSequence: {_first_sequence(e.last_sequence, e.offset_delta)} lastSequence: "
                     f"{e.last_sequence} lastOffset: {e.last_offset} offsetDelta: {e.offset_delta} "
                     f"timestamp: {e.timestamp}")
        out.write(line + "\n")
    return len(state.producers)


# --- what to dump ----------------------------------------------------------------------------------


def files_to_dump(paths: list[str]) -> list[str]:
    """The files ``klog dump`` prints for its arguments: a file as given; a partition dir as its
    segments (``.log``) in offset order. Anything else is an InvalidOptionError saying what to pass."""
    from pathlib import Path

    from storage_core.errors import InvalidOptionError
    from storage_core.files import has_log_files, is_log_file

    out: list[str] = []
    for raw in paths:
        p = Path(raw)
        if p.is_file():
            out.append(raw)
        elif p.is_dir():
            if not has_log_files(p):
                raise InvalidOptionError(f"{raw} is a directory with no segments (.log files); pass a partition dir "
                                         "(<topic>-<partition>, e.g. orders-0) or the files to dump; for a whole log "
                                         "dir use klog describe or klog verify")
            out += [str(f) for f in sorted((f for f in p.iterdir() if is_log_file(f.name)), key=base_offset_of)]
        else:
            raise InvalidOptionError(f"no such file: {raw} (expected .log, .index, .timeindex, .txnindex, .snapshot "
                                     "or other record-set files, or a partition dir)")
    return out
