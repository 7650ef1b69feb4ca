"""``klog export``: a topic, or an offset or time range of it, to one Parquet file (no Spark).

The rows are those ``spark.read.format("klog")`` returns for the same range, in the same Arrow
schema, because the export is planned and read by the same code: its flags become
:class:`~storage_core.read.options.ReadOptions` (:meth:`ExportRequest.read_options`), the read
planner resolves every partition's range with the Spark source's rules (a start past the end or a
start time after the last record is an error, as ``startingOffsets``/``startingTimestamp`` are;
an end time is exclusive and, when no record is that late, means the end of the log), and each
piece is read by the bulk piece reader (CRC checked, control records dropped, and under
``read_committed`` stopping at the last stable offset and leaving out aborted transactions).

The file is written next to its destination as ``.<name>.tmp-<pid>`` and renamed when complete,
so a failed export (a corrupt batch, a full disk) never leaves a partial Parquet file behind.

Pieces are decoded on up to ``threads`` threads at once (``--threads``; default the CPUs, at most
8, or ``KLOG_THREADS``) and written in plan order: the file holds the same rows in the same order
whatever the count (:func:`~storage_core.read.piece_reader.parallel_pieces`).
"""

from __future__ import annotations

import datetime as dt
import os
import re
from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq

from storage_core.errors import InvalidOptionError
from storage_core.fs import ObjectPath, StorageOptions, as_path
from storage_core.log.tiered import RemoteStorage
from storage_core.read.options import DEFAULT_MAX_BYTES_PER_PARTITION, OffsetSpec, ReadOptions
from storage_core.read.piece_reader import read_pieces
from storage_core.read.pieces import Piece
from storage_core.read.planner import ReadPlan, plan_read
from storage_core.record.columnar import kafka_schema

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
    bytes_written: int = 0  # size of the Parquet file
    partitions: int = 0


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


def export_parquet(req: ExportRequest, plan: ReadPlan, output: str | os.PathLike[str], *,
                   compression: str = "zstd", overwrite: bool = False,
                   progress: Callable[[int], None] | None = None) -> ExportSummary:
    """Write the records of ``plan`` to the Parquet file ``output``; ``progress(n)`` gets bytes read."""
    out = as_path(output, req.storage)
    if compression not in PARQUET_CODECS:
        raise InvalidOptionError(f"unknown Parquet compression {compression!r}; expected one of "
                                 f"{', '.join(PARQUET_CODECS)}")
    if out.is_dir():
        raise InvalidOptionError(f"output {out} is a directory; expected a file name such as {out / 'export.parquet'}")
    if out.exists() and not overwrite:
        raise InvalidOptionError(f"output {out} exists; pass --overwrite to replace it")
    if not isinstance(out, ObjectPath) and not out.parent.is_dir():
        raise InvalidOptionError(f"no such directory for the output: {out.parent}")
    schema = kafka_schema(req.include_headers, req.include_metadata)
    summary = ExportSummary(str(out), partitions=len(plan.ranges))
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    # in object storage the file is written under a temporary key and moved into place when complete
    fs = out.store.fs() if isinstance(out, ObjectPath) else None
    where = tmp.fs_key if isinstance(tmp, ObjectPath) else tmp
    writer = pq.ParquetWriter(where, schema, compression=None if compression == "none" else compression,
                              use_dictionary=dictionary_columns(schema), filesystem=fs)
    try:
        def piece_done(piece: Piece) -> None:
            summary.bytes_read += piece.nbytes
            if progress is not None:
                progress(piece.nbytes)

        for batch in read_pieces(plan.pieces, include_headers=req.include_headers,
                                 include_metadata=req.include_metadata, schema=schema, done=piece_done,
                                 threads=req.threads):
            summary.records += batch.num_rows
            writer.write_batch(batch)
        writer.close()
        if isinstance(out, ObjectPath) and isinstance(tmp, ObjectPath):
            out.store.fs().move(tmp.fs_key, out.fs_key)
        else:
            os.replace(tmp, out)
    except BaseException:
        writer.close()
        if isinstance(tmp, ObjectPath):
            tmp.store.fs().delete_file(tmp.fs_key)
        else:
            tmp.unlink(missing_ok=True)
        raise
    summary.bytes_written = as_path(str(out), req.storage).stat().st_size
    return summary
