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
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from storage_core.errors import KlogError
from storage_core.files import INDEX_SUFFIX, LOG_SUFFIX, TXN_INDEX_SUFFIX, base_offset_of, is_segment_named
from storage_core.fs import StorageOptions, as_path
from storage_core.limits import INT32_MAX
from storage_core.log.offset_index import OffsetIndex
from storage_core.log.time_index import NO_TIMESTAMP, TimeIndex
from storage_core.record.control import ControlRecordType, EndTransactionMarker
from storage_core.record.file_records import AnyBatch, BatchWalk, FileRecords
from storage_core.record.messages.decoders import (
    DecodedRecord,
    Decoder,
    control_label,
    decode_control_record,
    decode_record,
)
from storage_core.record.messages.remote import java_text as remote_java_text
from storage_core.record.records import MAGIC_VALUE_V2, Record
from storage_core.record.text import java_utf8

if TYPE_CHECKING:
    from storage_core.read.values import WriterDecoder

#: The file name of a KRaft bootstrap snapshot (``BootstrapDirectory.BINARY_BOOTSTRAP_FILENAME``).
BOOTSTRAP_CHECKPOINT = "bootstrap.checkpoint"
SNAPSHOT_SUFFIX = ".checkpoint"  # KRaft snapshots: <20-digit end offset>-<10-digit epoch>.checkpoint

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


def _compact(obj: Any) -> str:
    """JSON as Jackson's ``ObjectNode.toString()`` writes it (compact, non-ASCII as is)."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def decode(decoder: Decoder, batch: AnyBatch, r: Record) -> DecodedRecord | None:
    """A record of an internal topic decoded (None for ABORT/COMMIT markers and unknown control types)."""
    if batch.is_control:
        ctype = ControlRecordType.parse(r.key)
        return decode_control_record(ctype, r.value) if decoder is Decoder.CLUSTER_METADATA else None
    return decode_record(decoder, r.key, r.value)


@dataclass(frozen=True)
class SchemaDecoders:
    """``--key-decoder``/``--value-decoder confluent-avro|confluent-json|confluent-protobuf``: keys and values decoded by
    their writer schemas (from a ``_schemas`` topic) as JSON (:func:`storage_core.read.avro.json_value`)."""

    key: WriterDecoder | None = None
    value: WriterDecoder | None = None

    def fields(self, r: Record) -> dict[str, Any]:
        """``key``/``value`` (the decoded JSON) of the parts asked for; where one does not decode,
        ``key_error``/``value_error`` says why (its bytes are in ``key_b64``/``value_b64``)."""
        out: dict[str, Any] = {}
        for name, dec, data in (("key", self.key, r.key), ("value", self.value, r.value)):
            if dec is None:
                continue
            out[name] = None
            if data is not None:
                try:
                    out[name] = dec.decode(data)
                except KlogError as exc:
                    out[f"{name}_error"] = f"offset {r.offset}: {exc.detail}"
        return out


def batch_jsonl(batch: AnyBatch, decoder: Decoder | None = None, schemas: SchemaDecoders | None = None) -> list[str]:
    """The JSON lines of one batch (validated and fully decoded first; may raise KlogError). With a
    ``decoder`` each line also has ``key`` and ``value``: the record decoded, in kafka-dump-log's JSON
    (a tombstone's value is null; an undecodable part says why and keeps its bytes)."""
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
        line = {
            **head,
            "offset": r.offset,
            "timestamp": r.timestamp,
            "key_b64": _b64(r.key),
            "value_b64": _b64(r.value),
            "headers": [[h.key, _b64(h.value)] for h in r.headers],
            "control_type": control,
        }
        if decoder is not None:
            decoded = decode(decoder, batch, r)
            line["key"] = None if decoded is None else decoded.key
            line["value"] = None if decoded is None else decoded.value
        if schemas is not None and not batch.is_control:
            line.update(schemas.fields(r))
        lines.append(_dumps(line))
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


def dump_jsonl(path: str | os.PathLike[str], out: IO[str], *, decoder: Decoder | None = None,
               progress: Callable[[int], None] | None = None, schemas: SchemaDecoders | None = None) -> DumpSummary:
    """Write the JSON lines of a record-set file to ``out``; ``progress(n)`` gets the bytes of each batch."""
    fr = FileRecords(path)
    summary = DumpSummary(size_in_bytes=fr.size_in_bytes)
    walk = fr.batches()
    for batch in _walk_safely(walk, summary):
        try:
            lines = batch_jsonl(batch, decoder, schemas)
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


def _text(b: bytes) -> str:
    """Bytes as kafka-dump-log's ``StringDecoder`` prints them (Java's UTF-8, malformed bytes replaced)."""
    return java_utf8(b)


def _where(path: str | os.PathLike[str]) -> str:
    """A file as kafka-dump-log names it in its reports on stderr (``File.getAbsolutePath``)."""
    p = as_path(path)
    return str(p.absolute()) if isinstance(p, Path) else str(p)


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


def record_line(batch: AnyBatch, r: Record, print_data: bool, decoder: Decoder | None = None,
                skip_metadata: bool = False, schemas: SchemaDecoders | None = None) -> str:
    """One record as ``DumpLogSegments.dumpLog`` prints it: its metadata (unless
    ``skip_metadata``), a control record's content, then with ``print_data`` its key and payload,
    decoded by ``decoder`` when given. As in Kafka, a null key or payload prints nothing (not even
    its label); when the metadata is skipped the first of them follows ``"| "``, else ``" "``
    (Kafka 4.4's ``org.apache.kafka.tools.DumpLogSegments``; 4.1.1's printed a keyless payload after
    ``" "`` alone)."""
    s = "" if skip_metadata else _record_metadata(batch, r)
    if print_data and not batch.is_control:
        if schemas is not None:
            key, payload = _schema_contents(schemas, r)
        elif decoder is None:
            key = None if r.key is None else _text(r.key)
            payload = None if r.value is None else _text(r.value)
        else:
            key, payload = _decoded_contents(decode_record(decoder, r.key, r.value), decoder, r)
        if key is not None:
            s += f"{'| ' if skip_metadata else ' '}key: {key}"
        if payload is not None:
            s += f"{'| ' if skip_metadata and key is None else ' '}payload: {payload}"
    return s


def _schema_contents(schemas: SchemaDecoders, r: Record) -> tuple[str | None, str | None]:
    """Key and payload decoded by their writer schemas (the text of the bytes, and why, where one
    does not decode)."""
    f = schemas.fields(r)
    out: list[str | None] = []
    for name, data in (("key", r.key), ("value", r.value)):
        if data is None:
            out.append(None)
        elif name in f and f"{name}_error" not in f:
            out.append(_compact(f[name]))
        else:
            out.append(_text(data) + (f" ({f[name + '_error']})" if f"{name}_error" in f else ""))
    return out[0], out[1]


def _record_metadata(batch: AnyBatch, r: Record) -> str:
    ksize = -1 if r.key is None else len(r.key)
    vsize = -1 if r.value is None else len(r.value)
    s = f"| offset: {r.offset} {batch.timestamp_type.label}: {r.timestamp} keySize: {ksize} valueSize: {vsize}"
    if batch.magic >= MAGIC_VALUE_V2:
        s += f" sequence: {r.sequence} headerKeys: [{','.join(h.key for h in r.headers)}]"
    if batch.is_control:
        ctype = ControlRecordType.parse(r.key)
        label = control_label(ctype)
        if ctype in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
            m = EndTransactionMarker.deserialize(r.key, r.value)
            s += f" endTxnMarker: {m.type.name} coordinatorEpoch: {m.coordinator_epoch}"
        elif label is not None:
            decoded = decode_control_record(ctype, r.value)
            assert decoded is not None and decoded.value is not None
            if decoded.error is None:
                s += f" {label} {_compact(decoded.value['data'])}"
            else:
                s += f" {label} undecodable at offset {r.offset}: {decoded.error}; value: {_b64(r.value)}"
        else:
            s += f" controlType: {ctype.name}({_control_type_id(r.key)})"
    return s


def _control_type_id(key: bytes | None) -> int:
    return -1 if key is None or len(key) < 4 else int.from_bytes(key[2:4], "big", signed=True)


def _decoded_contents(d: DecodedRecord, decoder: Decoder, r: Record) -> tuple[str | None, str | None]:
    """Key and payload as kafka-dump-log's coordinator and metadata parsers give them; where Kafka
    prints only "Error at offset ..., skipping.", klog adds the raw bytes."""
    if d.error is not None:
        raw = f" raw key: {_b64(r.key)} raw value: {_b64(r.value)}"
        if decoder in (Decoder.CLUSTER_METADATA, Decoder.REMOTE_LOG_METADATA):
            return None, f"Error at {r.offset}, skipping. {d.error}{raw}"
        return f"Error at offset {r.offset}, skipping. {d.error}{raw}", None
    if decoder is Decoder.REMOTE_LOG_METADATA and d.value is not None:
        return None, remote_java_text(d.value)  # kafka-dump-log prints the objects' toString()
    key = None if d.key is None else _compact(d.key)
    return key, "<DELETE>" if d.value is None else _compact(d.value)


def dump_text(path: str | os.PathLike[str], out: IO[str], *, deep: bool = False, print_data: bool = False,
              max_bytes: int | None = None, progress: Callable[[int], None] | None = None,
              decoder: Decoder | None = None, skip_record_metadata: bool = False,
              schemas: SchemaDecoders | None = None, err: IO[str] | None = None) -> DumpSummary:
    """kafka-dump-log's output for a ``.log`` (or KRaft ``.checkpoint``) file; ``progress(n)`` gets
    the bytes of each batch. With ``decoder`` the keys and payloads are the records decoded;
    ``skip_record_metadata`` leaves out each record's metadata (a control record's line is then
    empty), not the batch lines. Offsets that do not follow each other (deep iteration) are
    reported on ``err`` as Kafka reports them, newest pair first, after the file's output (Kafka
    prints them after all the files)."""
    fr = FileRecords(path)
    summary = DumpSummary(size_in_bytes=fr.size_in_bytes)
    deep = deep or print_data
    out.write(f"Dumping {path}\n")
    name = as_path(path).name
    if is_segment_named(name):  # a log dir's segment, or a remote copy's (tiered storage)
        out.write(f"Log starting offset: {base_offset_of(path)}\n")
    elif name == BOOTSTRAP_CHECKPOINT:
        out.write("KRaft bootstrap snapshot\n")
    elif name.endswith(SNAPSHOT_SUFFIX) and _snapshot_id(name) is not None:
        end_offset, epoch = _snapshot_id(name)  # type: ignore[misc]
        out.write(f"Snapshot end offset: {end_offset}, epoch: {epoch}\n")
    walk = fr.batches(end=max_bytes)
    last_offset: int | None = None
    non_consecutive: list[tuple[int, int]] = []
    for batch in _walk_safely(walk, summary):
        try:
            out.write(batch_line(batch) + "\n")
            summary.batches += 1
            if not batch.is_valid():
                summary.invalid_batches += 1
            if deep:
                for r in batch.records():
                    if last_offset is not None and r.offset != last_offset + 1:
                        non_consecutive.append((last_offset, r.offset))
                    last_offset = r.offset
                    out.write(record_line(batch, r, print_data, decoder, skip_record_metadata, schemas) + "\n")
                    summary.records += 1
            if progress is not None:
                progress(batch.size_in_bytes)
        except KlogError as exc:
            summary.error = exc.located(position=batch.position)
            break
    summary.valid_bytes = walk.valid_bytes
    if summary.error is not None:
        out.write(f"Error: {summary.error}\n")
    if summary.error is None and max_bytes is None and walk.valid_bytes < fr.size_in_bytes:
        # as Kafka: not said of a file cut by --max-bytes
        out.write(f"Found {fr.size_in_bytes - walk.valid_bytes} invalid bytes at the end of {as_path(path).name}\n")
    if non_consecutive:
        report = err if err is not None else out
        report.write(f"Non-consecutive offsets in {_where(path)}\n")
        report.write("".join(f"  {a} is followed by {b}\n" for a, b in reversed(non_consecutive)))
    if summary.invalid_batches:
        out.write(f"Found {summary.invalid_batches} batches with a bad CRC in {path}\n")
    return summary


def _snapshot_id(name: str) -> tuple[int, int] | None:
    """``(end offset, epoch)`` of a KRaft snapshot file name (``Snapshots.parse``), else None."""
    stem = name[: -len(SNAPSHOT_SUFFIX)]
    parts = stem.split("-")
    if len(parts) != 2 or not all(p.isdigit() for p in parts):
        return None
    return int(parts[0]), int(parts[1])


# --- index files (DumpLogSegments.dumpIndex / dumpTimeIndex / dumpTxnIndex) ---------------------


def dump_index(path: str | os.PathLike[str], out: IO[str], err: IO[str], *, sanity_only: bool = False,
               verify_only: bool = False) -> int:
    """Print an ``.index``/``.timeindex``/``.txnindex`` like kafka-dump-log (``dumpIndex``,
    ``dumpTimeIndex``, ``dumpTxnIndex``); returns the problems found, which are reported on ``err``
    in Kafka's words after the file's entries (Kafka reports them after all the files).

    The index is read as Kafka opens it for the dump: every whole entry of the file counts (so the
    sanity check of an untrimmed, preallocated index sees its zero-filled tail, as a broker's does),
    and the listing stops at the first entry after the first whose offset is the base offset.
    A ``.index`` entry is checked against the last offset of the batch at its position; a
    ``.timeindex`` entry against the batch found from the offset index: same last offset, same
    largest record timestamp, timestamps increasing."""

    from storage_core.log.txn_index import TransactionIndex

    p = as_path(path)
    base = base_offset_of(p)
    out.write(f"Dumping {p}\n")
    if p.suffix == TXN_INDEX_SUFFIX:
        for t in TransactionIndex(p, base).read():
            out.write(f"version: {t.version} producerId: {t.producer_id} firstOffset: {t.first_offset} "
                      f"lastOffset: {t.last_offset} lastStableOffset: {t.last_stable_offset}\n")
        return 0
    if p.suffix == INDEX_SUFFIX:
        return _dump_offset_index(p, base, out, err, sanity_only, verify_only)
    return _dump_time_index(p, base, out, err, sanity_only, verify_only)


def _listed(index: OffsetIndex | TimeIndex) -> Iterator[int]:
    """The slots kafka-dump-log lists: up to the first after the first at the base offset (the
    zero-filled tail of a preallocated index)."""
    for i in range(index.entries):
        if i > 0 and index.entry(i).offset == index.base_offset:
            return
        yield i


def _sanity_checked(index: OffsetIndex | TimeIndex, p: Path, out: IO[str]) -> int:
    """``--index-sanity-check``: Kafka's ``sanityCheck`` of the index (raises on a failure)."""
    index.sanity_check()
    out.write(f"{p} passed sanity check.\n")
    return 0


def _records_beside(p: Path) -> FileRecords | None:
    """The ``.log`` of an index file's segment, where it exists."""
    log = p.with_suffix(LOG_SUFFIX)
    return FileRecords(log) if log.exists() else None


def _dump_offset_index(p: Path, base: int, out: IO[str], err: IO[str], sanity_only: bool, verify_only: bool) -> int:
    index = OffsetIndex.in_memory(p, base, p.read_bytes())
    if index.entries == 0:
        out.write(f"{p} is empty.\n")
        return 0
    if sanity_only:
        return _sanity_checked(index, p, out)
    fr = _records_beside(p)
    mismatches: list[tuple[int, int | None]] = []
    for i in _listed(index):
        entry = index.entry(i)
        if fr is not None:
            batch = next(iter(fr.batches(entry.position)), None)
            found = None if batch is None else batch.last_offset
            if found != entry.offset:
                mismatches.append((entry.offset, found))
        if not verify_only:
            out.write(f"offset: {entry.offset} position: {entry.position}\n")
    if mismatches:
        err.write(f"Mismatches in :{_where(p)}\n")
        for idx_off, log_off in reversed(mismatches):  # Kafka prepends each to its list
            err.write(f"  Index offset: {idx_off}, log offset: {log_off}\n")
    return len(mismatches)


def _dump_time_index(p: Path, base: int, out: IO[str], err: IO[str], sanity_only: bool, verify_only: bool) -> int:
    index = TimeIndex.in_memory(p, base, p.read_bytes())
    if sanity_only:
        return _sanity_checked(index, p, out)
    fr = _records_beside(p)
    offsets = p.with_suffix(INDEX_SUFFIX)
    offset_index = OffsetIndex(offsets, base) if fr is not None and offsets.exists() else None
    mismatches: list[tuple[int, int]] = []
    out_of_order: list[tuple[int, int]] = []
    not_found: list[tuple[int, int]] = []
    prev = NO_TIMESTAMP
    for i in _listed(index):
        entry = index.entry(i)
        if fr is not None:
            position = 0 if offset_index is None else offset_index.lookup(entry.offset).position
            batch = next((b for b in fr.batches(position) if b.last_offset >= entry.offset), None)
            if batch is None:
                not_found.append((entry.offset, -1))
            elif batch.last_offset != entry.offset:
                not_found.append((entry.offset, batch.last_offset))
            else:
                max_ts = max((r.timestamp for r in batch.records()), default=NO_TIMESTAMP)
                max_ts = max(max_ts, NO_TIMESTAMP)
                if max_ts != entry.timestamp:
                    mismatches.append((entry.timestamp, max_ts))
                if prev >= entry.timestamp:
                    out_of_order.append((entry.timestamp, prev))
        if not verify_only:
            out.write(f"timestamp: {entry.timestamp} offset: {entry.offset}\n")
        prev = entry.timestamp
    if mismatches:
        err.write(f"Found timestamp mismatch in :{_where(p)}\n")
        err.write("".join(f"  Index timestamp: {a}, log timestamp: {b}\n" for a, b in mismatches))
    if out_of_order:
        err.write(f"Found out of order timestamp in :{_where(p)}\n")
        err.write("".join(f"  Index timestamp: {a}, Previously indexed timestamp: {b}\n" for a, b in out_of_order))
    if not_found:
        # 4.4.0's words (4.1.1 says "... not found in the log." without the file)
        err.write(f"The following indexed offsets are not found in :{_where(p)}\n")
        err.write("".join(f"Indexed offset: {a}, found log offset: {b}\n" for a, b in not_found))
    return len(mismatches) + len(out_of_order) + len(not_found)


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
                f"currentTxnFirstOffset: {txn} lastTimestamp: {e.timestamp}")
        if e.last_offset >= 0:  # (4.1.1's tool ended a line without batch metadata in a space; 4.4.0's does not)
            line += (f" firstSequence: {_first_sequence(e.last_sequence, e.offset_delta)} lastSequence: "
                     f"{e.last_sequence} lastOffset: {e.last_offset} offsetDelta: {e.offset_delta} "
                     f"timestamp: {e.timestamp}")
        out.write(line + "\n")
    return len(state.producers)


# --- what to dump ----------------------------------------------------------------------------------


def files_to_dump(paths: list[str], storage: StorageOptions | None = None) -> list[Path]:
    """The files ``klog dump`` prints for its arguments: a file as given; a partition dir as its
    segments (``.log``) in offset order; local, or in object storage (through ``storage``). Anything
    else is an InvalidOptionError saying what to pass."""
    from storage_core.errors import InvalidOptionError
    from storage_core.files import has_log_files, is_log_file

    out: list[Path] = []
    for raw in paths:
        p = as_path(raw, storage)
        if p.is_file():
            out.append(p)
        elif p.is_dir():
            if not has_log_files(p):
                raise InvalidOptionError(f"{raw} is a directory with no segments (.log files); pass a partition dir "
                                         "(<topic>-<partition>, e.g. orders-0) or the files to dump; for a whole log "
                                         "dir use klog describe or klog verify")
            out += sorted((f for f in p.iterdir() if is_log_file(f.name)), key=lambda f: base_offset_of(f.name))
        else:
            raise InvalidOptionError(f"no such file: {raw} (expected .log, .index, .timeindex, .txnindex, .snapshot "
                                     "or other record-set files, or a partition dir)")
    return out
