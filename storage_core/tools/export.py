"""``klog export``: a topic, or an offset or time range of it, to one Parquet file, or to a file per
partition in a directory (``--per-partition``) (no Spark).

The rows are those ``spark.read.format("klog")`` returns for the same range, in the same Arrow
schema, because the export is planned and read by the same code: its flags become
:class:`~storage_core.read.options.ReadOptions` (:meth:`ExportRequest.read_options`), the read
planner resolves every partition's range with the Spark source's rules (a start past the end or a
start time after the last record is an error, as ``startingOffsets``/``startingTimestamp`` are;
an end time is exclusive and, when no record is that late, means the end of the log), and each
piece is read by the bulk piece reader (CRC checked, control records dropped, and under
``read_committed`` stopping at the last stable offset and leaving out aborted transactions).

The file is written next to its destination as ``.<name>.tmp-<pid>`` and renamed when complete,
so a failed export (a corrupt batch, a full disk) never leaves a partial Parquet file behind;
``--per-partition`` renames its files only once all of them are complete.

Pieces are decoded on up to ``threads`` threads at once (``--threads``; default the CPUs, at most
8, or ``KLOG_THREADS``) and written in plan order: the file holds the same rows in the same order
whatever the count (:func:`~storage_core.read.piece_reader.parallel_pieces`). One file has one
Parquet writer, which is one thread, and past two threads it is what an export waits for;
``--per-partition`` writes several partitions' files at once, each with its own writer.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import shutil
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from storage_core.errors import InvalidOptionError
from storage_core.fs import ObjectPath, StorageOptions, as_path
from storage_core.log.tiered import RemoteStorage
from storage_core.log.topic_partition import TopicPartition
from storage_core.read.options import DEFAULT_MAX_BYTES_PER_PARTITION, OffsetSpec, ReadOptions
from storage_core.read.piece_reader import read_pieces
from storage_core.read.pieces import Piece
from storage_core.read.planner import ReadPlan, plan_read
from storage_core.record.columnar import kafka_schema
from storage_core.workers import ordered_map, pool_size

PARQUET_CODECS = ("none", "snappy", "gzip", "zstd", "lz4", "brotli")
#: Columns whose value changes from record to record (the offset, the timestamp, the producer's
#: sequence, and a value, which seldom repeats): a dictionary for them only fills its page limit and
#: falls back to plain encoding, which cost a third of the writer's time (2M records of 100 B: 0.61
#: -> 0.41 s) for no smaller file. Every other column (topic, partition, key, headers, the batch
#: metadata) repeats and keeps Parquet's dictionary encoding.
PLAIN_COLUMNS = frozenset({"value", "offset", "timestamp", "sequence"})

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
    #: a start time past the partition's last record: "error", or "latest" (start at the end: export nothing
    #: of it), Spark's startingOffsetsByTimestampStrategy
    if_past_end: str = "error"
    read_committed: bool = False
    include_headers: bool = False
    include_metadata: bool = False
    #: the fs.* settings of URI log dirs and of a URI output
    storage: StorageOptions = StorageOptions()
    #: threads decoding pieces at once (None: :func:`~storage_core.workers.pool_size`'s default; 1: none)
    threads: int | None = None
    #: a tiered topic's remote storage (``--remote-storage``): its remote segments are read too
    remote: RemoteStorage | None = None

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
        if self.if_past_end not in ("error", "latest"):
            raise InvalidOptionError(f"--if-past-end {self.if_past_end!r}: expected error or latest")
        if self.start_time_ms is not None and self.end_time_ms is not None and self.end_time_ms < self.start_time_ms:
            raise InvalidOptionError(f"end time {self.end_time_ms} is before start time {self.start_time_ms}")

    def read_options(self) -> ReadOptions:
        """The Spark source's options for this export: one planner and one reader for both."""
        if self.start_offset is not None:
            starting = OffsetSpec("offset", offset=self.start_offset)
        elif self.start_time_ms is not None:
            starting = OffsetSpec("timestamp", timestamp=self.start_time_ms)
        else:
            starting = OffsetSpec("earliest")
        if self.end_offset is not None:
            ending = OffsetSpec("offset", offset=self.end_offset)
        elif self.end_time_ms is not None:
            ending = OffsetSpec("timestamp", timestamp=self.end_time_ms)
        else:
            ending = OffsetSpec("latest")
        return ReadOptions(
            paths=self.log_dirs,
            topics=(self.topic,) if self.partitions is None else None,
            topic_pattern=None,
            assign=None if self.partitions is None else {self.topic: dict.fromkeys(self.partitions, 0)},
            starting=starting,
            ending=ending,
            starting_timestamp_strategy=self.if_past_end,
            include_headers=self.include_headers,
            include_metadata=self.include_metadata,
            read_committed=self.read_committed,
            fail_on_data_loss=True,
            clamp_ending=True,  # --end-offset: up to there, or each partition's end if it ends before
            min_partitions=None,
            max_records_per_partition=None,
            max_bytes_per_partition=DEFAULT_MAX_BYTES_PER_PARTITION,
            storage=self.storage,
            remote=self.remote,
            # errors name the CLI's flags; it has no failOnDataLoss: a loss always fails an export
            spelling=(("assign", "--partition"), ("startingOffsetsByTimestampStrategy", "--if-past-end"),
                      ("failOnDataLoss", ""), ("remoteStorage", "--remote-storage")),
        )



@dataclass
class ExportSummary:
    output: str
    records: int = 0
    bytes_read: int = 0  # record-batch bytes read from the log
    bytes_written: int = 0  # size of the Parquet file (files)
    partitions: int = 0
    files: int = 1


def plan_export(req: ExportRequest) -> ReadPlan:
    """Each selected partition's range and the pieces reading it (opens every log once; reads only
    indexes). Raises before anything is written when an option does not fit the log or a selected
    log is damaged in the middle."""
    return plan_read(req.read_options())


def dictionary_columns(schema: pa.Schema) -> list[str]:
    """The Parquet column paths of ``schema`` that are dictionary-encoded: all but
    :data:`PLAIN_COLUMNS`. A nested column's leaves are named as Parquet names them
    (``headers.list.element.key``)."""
    def leaves(path: str, typ: pa.DataType) -> list[str]:
        if pa.types.is_struct(typ):
            return [leaf for f in typ for leaf in leaves(f"{path}.{f.name}", f.type)]
        if pa.types.is_list(typ) or pa.types.is_large_list(typ):
            return leaves(f"{path}.list.element", typ.value_type)
        return [path]

    return [leaf for f in schema if f.name not in PLAIN_COLUMNS for leaf in leaves(f.name, f.type)]


def _check_codec(compression: str) -> None:
    if compression not in PARQUET_CODECS:
        raise InvalidOptionError(f"unknown Parquet compression {compression!r}; expected one of "
                                 f"{', '.join(PARQUET_CODECS)}")


def _staged(out: Path) -> Path:
    """The temporary name ``out`` is written under until it is complete (beside it, hidden)."""
    return out.with_name(f".{out.name}.tmp-{os.getpid()}")


def _remove(path: Path) -> None:
    """Delete a file, local or in object storage; one that is not there is no error."""
    if isinstance(path, ObjectPath):
        try:
            path.store.fs().delete_file(path.fs_key)
        except FileNotFoundError:
            pass
    else:
        path.unlink(missing_ok=True)


def _move(src: Path, dst: Path) -> None:
    if isinstance(src, ObjectPath) and isinstance(dst, ObjectPath):
        src.store.fs().move(src.fs_key, dst.fs_key)
    else:
        os.replace(src, dst)


def _write_staged(batches: Iterator[pa.RecordBatch], out: Path, schema: pa.Schema, compression: str) -> int:
    """Write ``batches`` to a Parquet file under ``out``'s temporary name (:func:`_staged`); the
    records written. On any failure the temporary file is removed and the error raised."""
    tmp = _staged(out)
    # in object storage the file is written under a temporary key and moved into place when complete
    fs = out.store.fs() if isinstance(out, ObjectPath) else None
    where = tmp.fs_key if isinstance(tmp, ObjectPath) else tmp
    writer = pq.ParquetWriter(where, schema, compression=None if compression == "none" else compression,
                              use_dictionary=dictionary_columns(schema), filesystem=fs)
    records = 0
    try:
        for batch in batches:
            records += batch.num_rows
            writer.write_batch(batch)
        writer.close()
    except BaseException:
        writer.close()
        _remove(tmp)
        raise
    return records


def export_parquet(req: ExportRequest, plan: ReadPlan, output: str | os.PathLike[str], *,
                   compression: str = "zstd", overwrite: bool = False,
                   progress: Callable[[int], None] | None = None) -> ExportSummary:
    """Write the records of ``plan`` to the Parquet file ``output``; ``progress(n)`` gets bytes read."""
    out = as_path(output, req.storage)
    _check_codec(compression)
    if out.is_dir():
        raise InvalidOptionError(f"output {out} is a directory; expected a file name such as {out / 'export.parquet'} "
                                 "(or --per-partition, for a file per partition in it)")
    if out.exists() and not overwrite:
        raise InvalidOptionError(f"output {out} exists; pass --overwrite to replace it")
    if not isinstance(out, ObjectPath) and not out.parent.is_dir():
        raise InvalidOptionError(f"no such directory for the output: {out.parent}")
    schema = kafka_schema(req.include_headers, req.include_metadata)
    summary = ExportSummary(str(out), partitions=len(plan.ranges))

    def piece_done(piece: Piece) -> None:
        summary.bytes_read += piece.nbytes
        if progress is not None:
            progress(piece.nbytes)

    summary.records = _write_staged(
        read_pieces(plan.pieces, include_headers=req.include_headers, include_metadata=req.include_metadata,
                    schema=schema, done=piece_done, threads=req.threads), out, schema, compression)
    try:
        _move(_staged(out), out)
    except BaseException:
        _remove(_staged(out))
        raise
    summary.bytes_written = as_path(str(out), req.storage).stat().st_size
    return summary


def partition_file_name(tp: TopicPartition) -> str:
    """The file ``--per-partition`` writes a partition to: Kafka's own dir name, ``<topic>-<n>.parquet``."""
    return f"{tp.dir_name}.parquet"


def export_parquet_per_partition(req: ExportRequest, plan: ReadPlan, output_dir: str | os.PathLike[str], *,
                                 compression: str = "zstd", overwrite: bool = False,
                                 progress: Callable[[int], None] | None = None) -> ExportSummary:
    """Write each partition of ``plan`` to its own Parquet file in the directory ``output_dir``
    (:func:`partition_file_name`; created if missing): the rows of the one-file export, a
    partition's in offset order in its file, with the same schema in every file, so that a reader
    of the directory (pyarrow, DuckDB, Spark) sees one table. A partition whose range is empty
    gets a file of no rows.

    Up to ``req.threads`` partitions are read and written at once, each file by its own Parquet
    writer: the one-file export's writer is one thread however many decode, this scales with the
    partitions (one partition: its pieces decode on the threads, as the one-file export's do).
    Every file is written under a temporary name and all are renamed into place only when every
    one is complete, so a failed export leaves the directory as it found it. ``overwrite`` lets
    the directory hold an earlier export's Parquet files, which the new files replace (those it
    does not write again are removed); anything else in it is refused before any work starts."""
    out = as_path(output_dir, req.storage)
    _check_codec(compression)
    if out.exists() and not out.is_dir():
        raise InvalidOptionError(f"output {out} is a file; --per-partition writes a file per partition into a "
                                 "directory: expected a directory name")
    if not isinstance(out, ObjectPath) and not out.parent.is_dir():
        raise InvalidOptionError(f"no such directory for the output: {out.parent}")
    earlier = sorted(out.iterdir()) if out.is_dir() else []
    if earlier and not overwrite:
        raise InvalidOptionError(f"output directory {out} is not empty (it holds {earlier[0].name}); pass "
                                 "--overwrite to replace the Parquet files of an earlier export")
    for entry in earlier:
        if not (entry.name.endswith(".parquet") and not entry.name.startswith(".") and entry.is_file()):
            raise InvalidOptionError(f"output directory {out} holds {entry.name}, which is not an exported Parquet "
                                     "file; --overwrite replaces only an earlier export's files: expected a new or "
                                     "empty directory")
    schema = kafka_schema(req.include_headers, req.include_metadata)
    summary = ExportSummary(str(out), partitions=len(plan.ranges), files=len(plan.ranges))
    files = [out / partition_file_name(r.topic_partition) for r in plan.ranges]
    pieces: dict[TopicPartition, list[Piece]] = {r.topic_partition: [] for r in plan.ranges}
    for piece in plan.pieces:
        pieces[TopicPartition(piece.topic, piece.partition)].append(piece)
    workers = pool_size(req.threads, len(files))
    lock = threading.Lock()

    def piece_done(piece: Piece) -> None:
        with lock:
            summary.bytes_read += piece.nbytes
            if progress is not None:
                progress(piece.nbytes)

    def write(i: int) -> int:
        return _write_staged(read_pieces(pieces[plan.ranges[i].topic_partition], include_headers=req.include_headers,
                                         include_metadata=req.include_metadata, schema=schema, done=piece_done,
                                         threads=req.threads if workers == 1 else 1),
                             files[i], schema, compression)

    created = not isinstance(out, ObjectPath) and not out.is_dir()
    if created:
        out.mkdir()
    try:
        summary.records = sum(ordered_map(write, range(len(files)), workers))
        for f in files:
            _move(_staged(f), f)
    except BaseException:
        for f in files:
            _remove(_staged(f))
        if created:
            shutil.rmtree(out, ignore_errors=True)
        raise
    written = {f.name for f in files}
    for entry in earlier:
        if entry.name not in written:
            _remove(entry)
    summary.bytes_written = sum(as_path(str(f), req.storage).stat().st_size for f in files)
    return summary
