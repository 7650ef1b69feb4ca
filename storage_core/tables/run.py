"""``klog sync``: keep an Iceberg or Delta table in step with topics of a log dir, exactly once.

One run: open the table and read the offsets it records (:mod:`storage_core.tables.offsets`); plan a
read of every selected partition from there to its end (the read planner, with Spark's rules:
``read_committed`` by default, so a sync stops at each partition's last stable offset and never
writes an aborted or still-open transaction); read the records with the bulk piece reader; append
them in commits of up to ``commit_records`` records, each carrying the offsets it reaches. Every
commit is atomic with its offsets, so a run killed at any point leaves the table as of its last
commit, and a rerun continues from there: every record once.
"""

from __future__ import annotations

import errno
import logging
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Protocol

import pyarrow as pa

from storage_core.errors import InvalidOptionError, SyncError, storage_error
from storage_core.log.topic_partition import TopicPartition
from storage_core.read import values
from storage_core.read.api import read_options
from storage_core.read.options import OffsetSpec, ReadOptions, option_name
from storage_core.read.piece_reader import read_pieces
from storage_core.read.planner import PartitionRange, ReadPlan, plan_read, select_partitions
from storage_core.record.columnar import kafka_schema
from storage_core.tables.offsets import (
    TableOffsets,
    check_history,
    check_holds,
    check_mode,
    offsets_held,
    starting_offsets,
)
from storage_core.tables.schema import PARTITIONINGS, table_schema, to_table
from storage_core.tables.upsert import Latest, latest

__all__ = ["DEFAULT_COMMIT_RECORDS", "FORMATS", "MODES", "SyncSummary", "sync"]

log = logging.getLogger(__name__)

FORMATS = ("iceberg", "delta")
#: append: every record a row; upsert: the latest record of each key a row (:mod:`storage_core.tables.upsert`).
MODES = ("append", "upsert")
#: Records per commit: each commit holds its records in memory as one Arrow table.
DEFAULT_COMMIT_RECORDS = 1_000_000
#: Bytes of Arrow data per commit, whichever of the two limits comes first.
DEFAULT_COMMIT_BYTES = 256 << 20
#: Read options a sync sets itself: the table's offsets decide where it starts.
_STARTS = ("startingoffsets", "startingtimestamp", "startingoffsetsbytimestamp", "startinggroup")


class Target(Protocol):
    """A table a sync appends to (:class:`~storage_core.tables.iceberg.IcebergTarget`,
    :class:`~storage_core.tables.delta.DeltaTarget`)."""

    format: str
    description: str
    #: the mode of the sync whose offsets held() found (None: no sync committed)
    mode: str | None
    #: what held() found changed since klog's last commit by another writer, and that commit
    changes: list[str]
    last_sync: str

    @property
    def version(self) -> int | None: ...

    def held(self, partitions: Iterable[TopicPartition]) -> tuple[TableOffsets, bool, list[str]]: ...

    def records(self, topics: Iterable[str]) -> pa.Table: ...

    def prepare(self, schema: pa.Schema, source: str, partition_by: str | None = None) -> pa.Schema: ...

    def commit(self, data: pa.Table, offsets: TableOffsets, partitions: Iterable[TopicPartition]) -> None: ...

    def upsert(self, latest: Latest, offsets: TableOffsets, partitions: Iterable[TopicPartition]) -> None: ...


@dataclass
class SyncSummary:
    """What one sync did: the ranges read and the offsets the table records now."""

    table: str
    format: str
    records: int = 0
    commits: int = 0
    ranges: tuple[PartitionRange, ...] = ()
    offsets: TableOffsets = field(default_factory=dict)
    #: the table's version after the sync: Iceberg's snapshot id, Delta's version (None: no table)
    version: int | None = None
    mode: str = "append"
    #: upsert: records with no key, dropped as Kafka's cleaner drops them
    dropped: int = 0


def open_target(fmt: str, to: str | os.PathLike[str], *, catalog: str | None = None,
                catalog_properties: Mapping[str, str] | None = None, warehouse: str | os.PathLike[str] | None = None,
                storage_options: Mapping[str, str] | None = None) -> Target:
    """The table ``to`` in format ``fmt``, opened (its offsets pinned) but not changed."""
    if fmt == "iceberg":
        from storage_core.tables.iceberg import IcebergTarget, configured_catalog, embedded_catalog

        if catalog is not None and warehouse is not None:
            raise InvalidOptionError("a catalog and a warehouse were both given; expected one: --catalog NAME (as "
                                     "pyiceberg configures it) or --warehouse DIR (the embedded SQLite catalog)")
        if catalog is None and warehouse is None:
            raise InvalidOptionError("no Iceberg catalog: give --warehouse DIR (an embedded SQLite catalog there) or "
                                     "--catalog NAME (one pyiceberg is configured with)")
        cat = configured_catalog(catalog, catalog_properties or {}) if catalog is not None else \
            embedded_catalog(warehouse)  # type: ignore[arg-type]
        return IcebergTarget(cat, os.fspath(to))
    if fmt == "delta":
        from storage_core.tables.delta import DeltaTarget

        if catalog is not None or warehouse is not None or catalog_properties:
            raise InvalidOptionError("a Delta table is named by its path or URI alone; --catalog, --warehouse and "
                                     "catalog properties are Iceberg's")
        return DeltaTarget(to, storage_options)
    raise InvalidOptionError(f"unknown table format {fmt!r}; expected one of {', '.join(FORMATS)}")


def _refuse_inside(written: str | os.PathLike[str], what: str, sources: Iterable[str]) -> None:
    """A table (or warehouse) is never written inside a log dir it reads, nor a log dir inside it."""
    where = os.fspath(written)
    if "://" in where:
        return
    table = os.path.realpath(where)
    for src in sources:
        if "://" in src:
            continue
        s = os.path.realpath(src)
        if os.path.commonpath([table, s]) in (table, s):
            raise InvalidOptionError(f"{what} {where} and log dir {src} overlap; expected a {what} outside the log "
                                     "dirs it reads (a sync never writes to a log dir)")


def _positions(batch: pa.RecordBatch) -> Iterator[tuple[TopicPartition, int]]:
    """Each partition in ``batch`` and the offset after its last record there. The piece reader's
    batches hold one partition each, in offset order: its last row says it, with no group-by."""
    topics, parts, offsets = (batch.column(c) for c in ("topic", "partition", "offset"))
    last = batch.num_rows - 1
    if topics[0] == topics[last] and parts[0] == parts[last]:
        yield TopicPartition(topics[last].as_py(), parts[last].as_py()), offsets[last].as_py() + 1
        return
    grouped = pa.Table.from_batches([batch]).group_by(["topic", "partition"]).aggregate([("offset", "max")])
    for topic, partition, last in zip(grouped.column("topic").to_pylist(), grouped.column("partition").to_pylist(),
                                      grouped.column("offset_max").to_pylist(), strict=True):
        yield TopicPartition(topic, partition), last + 1


def sync(source: str | os.PathLike[str], to: str | os.PathLike[str], *, format: str,
         catalog: str | None = None, catalog_properties: Mapping[str, str] | None = None,
         warehouse: str | os.PathLike[str] | None = None, storage_options: Mapping[str, str] | None = None,
         commit_records: int = DEFAULT_COMMIT_RECORDS, commit_bytes: int = DEFAULT_COMMIT_BYTES,
         mode: str = "append", partition_by: str | None = None, rebase: bool = False,
         **options: object) -> SyncSummary:
    """Append to the table ``to`` the records of ``source`` it does not hold yet, exactly once.

    ``format``: ``iceberg`` (``to`` is ``namespace.table`` in ``catalog``, one ``pyiceberg`` is
    configured with, with ``catalog_properties`` over its configuration; or in an embedded SQLite
    catalog in ``warehouse``) or ``delta`` (``to`` is a path or URI; ``storage_options`` are
    delta-rs's). ``options`` are ``spark.read.format("klog")``'s, which pick the topics and where
    the range ends; ``isolationLevel`` defaults to ``read_committed``; the start is the table's.
    ``partition_by``: ``day`` or ``hour`` of the record timestamp (UTC), for a table the sync
    creates (Iceberg: a partition transform; Delta: a derived ``timestamp_day``/``timestamp_hour``
    column); an existing table keeps its own.
    ``mode``: ``append`` (every record a row) or ``upsert`` (the table holds each key's latest
    record, tombstones delete, as Kafka's log cleaner leaves a compacted topic).
    ``rebase``: a table another writer changed since klog's last sync (a restore or rollback, an
    append, delete or overwrite; refused without it, :func:`~storage_core.tables.offsets.check_history`)
    has its offsets re-based on the records it holds, every partition of the topics read.
    Raises before anything is written when an option, the table or the range does not fit."""
    if mode not in MODES:
        raise InvalidOptionError(f"unknown mode {mode!r}; expected one of {', '.join(MODES)}")
    if partition_by is not None and partition_by not in PARTITIONINGS:
        raise InvalidOptionError(f"partition by {partition_by!r}; expected one of {', '.join(PARTITIONINGS)} (of the "
                                 "record timestamp, UTC)")
    given = {str(k).lower(): k for k in options}
    starts = [option_name(given[k]) for k in _STARTS if k in given]
    if starts:
        raise InvalidOptionError(f"option {starts[0]}: a sync starts where the table's offsets say (and a new table at "
                                 "each partition's earliest offset); expected no starting option")
    if "isolationlevel" not in given and "kafka.isolation.level" not in given:
        options["isolationLevel"] = "read_committed"
    if commit_records < 1 or commit_bytes < 1:
        raise InvalidOptionError(f"commit size {commit_records} records / {commit_bytes} bytes; expected at least 1")
    opts = read_options(source, **options)
    if mode == "upsert":
        _check_upsert(opts)
    if format == "delta":
        _refuse_inside(to, "table", opts.paths)
    if warehouse is not None:
        _refuse_inside(warehouse, "warehouse", opts.paths)
    target = open_target(format, to, catalog=catalog, catalog_properties=catalog_properties, warehouse=warehouse,
                         storage_options=storage_options)
    selected = [pd.topic_partition for pd in select_partitions(opts)]
    topics = sorted({tp.topic for tp in selected})
    # every partition of the topics read: a table synced from some of them holds the offsets of others
    everything = [pd.topic_partition for pd in select_partitions(replace(opts, topics=tuple(topics),
                                                                           topic_pattern=None, assign=None))]
    if opts.formats.decoded and opts.formats.schemas_topic in topics:
        raise InvalidOptionError(f"topic {opts.formats.schemas_topic} holds the Schema Registry's schemas, not records "
                                 "of the valueFormat/keyFormat; expected the topics to sync named (topics=..., "
                                 "subscribe or subscribePattern) without it")
    held, has_records, named = target.held(everything)
    rebased = check_history(target.description, target.last_sync, target.changes, rebase=rebase)
    if rebased:
        if set(selected) != set(everything):
            raise InvalidOptionError(f"rebase of {target.description}: the offsets of every partition of "
                                     f"{', '.join(topics)} are re-based at once; expected a sync of them all (no "
                                     "assign or partition selection)")
        held = offsets_held(target.records(topics))
        log.warning("%s changed since klog's last sync (%s): %s; offsets re-based on the records it holds: %s",
                    target.description, target.last_sync, "; ".join(target.changes), held)
    check_holds(target.description, held, topics, has_records=has_records, named=named)
    check_mode(target.description, target.mode, mode)
    the_plan = plan_read(replace(opts, starting=OffsetSpec("offsets", offsets=starting_offsets(held, selected))))
    decoding = values.prepare(opts, topics) if opts.formats.decoded else None
    read_schema = values.decoded_schema(kafka_schema(opts.include_headers, opts.include_metadata), decoding)
    with _table_io(target):
        schema = target.prepare(table_schema(read_schema), _value_source(opts, topics), partition_by)
        return _append(target, the_plan, held, read_schema, schema, decoding, opts, commit_records, commit_bytes,
                       mode, rebased)


#: The file system's refusals of a write (as opposed to a bug, or a read that failed).
_FULL_OR_READ_ONLY = (errno.ENOSPC, errno.EDQUOT, errno.EROFS)
#: How delta-rs (Rust's std::io::Error) and SQLite name them in their messages.
_RUST_OS_ERROR = re.compile(r"\(os error (\d+)\)")
_SQLITE_FULL = "database or disk is full"


@contextmanager
def _table_io(target: Target) -> Iterator[None]:
    """A full or read-only file system under the table (or the catalog's database) is a
    :class:`~storage_core.errors.StorageError` (exit 2), not an internal error: pyiceberg raises
    the ``OSError``, delta-rs a ``DeltaError`` naming the OS error in its text, SQLite an
    ``OperationalError``. The table stays as of its last commit (every commit is atomic); what
    this sync committed before stays, with its offsets, and a rerun continues from there."""
    doing = f"writing {target.description}"
    try:
        yield
    except OSError as exc:
        if exc.errno in _FULL_OR_READ_ONLY:
            raise storage_error(exc, doing) from exc
        raise
    except Exception as exc:
        text = str(exc)
        found = _RUST_OS_ERROR.search(text)
        code = int(found.group(1)) if found else errno.ENOSPC if _SQLITE_FULL in text else None
        if code in _FULL_OR_READ_ONLY and type(exc).__name__ in ("DeltaError", "CommitFailedError", "OperationalError"):
            raise storage_error(OSError(code, os.strerror(code)), doing) from exc
        raise


def _check_upsert(opts: ReadOptions) -> None:
    """Upsert keeps each key's latest committed record: a read that could show an aborted record,
    match rows by a decoded key, or take a value that does not decode for a tombstone is refused."""
    if not opts.read_committed:
        raise InvalidOptionError("isolationLevel read_uncommitted: an upsert sync keeps each key's latest committed "
                                 "record (aborted transactions never reach the table); expected read_committed")
    if opts.formats.key_format != "raw":
        raise InvalidOptionError(f"keyFormat {opts.formats.key_format}: an upsert sync matches rows by the key's "
                                 "bytes; expected keyFormat raw")
    if opts.formats.decoded and opts.formats.permissive:
        raise InvalidOptionError("mode PERMISSIVE: a value that does not decode would read as a tombstone and delete "
                                 "its key's row; expected FAILFAST with an upsert sync")


def _value_source(opts: ReadOptions, topics: list[str]) -> str:
    """Where the value's columns come from, for messages."""
    if opts.formats.value_format == "raw":
        return "this sync (raw values)"
    subjects = sorted({values.subject(opts.formats, t, False) for t in topics})
    return f"the latest schema of subject {', '.join(subjects)}"


def _append(target: Target, the_plan: ReadPlan, held: TableOffsets, read_schema: pa.Schema, schema: pa.Schema,
            decoding: values.Decoding | None, opts: ReadOptions, commit_records: int, commit_bytes: int,
            mode: str, rebased: bool = False) -> SyncSummary:
    summary = SyncSummary(target.description, target.format, ranges=the_plan.ranges, mode=mode)
    position: TableOffsets = {t: dict(ps) for t, ps in held.items()}
    for r in the_plan.ranges:
        position.setdefault(r.topic_partition.topic, {})[r.topic_partition.partition] = r.start
    committed = {t: dict(ps) for t, ps in held.items()}
    pending: list[pa.RecordBatch] = []
    tombstones: list[pa.Array] = []  # upsert: which pending rows are tombstones
    rows = nbytes = 0
    # a re-based sync commits every partition's offsets (its commit is then klog's last, the changes
    # before it accepted), even when nothing is new
    touched: set[TopicPartition] = {r.topic_partition for r in the_plan.ranges} if rebased else set()

    def commit() -> None:
        nonlocal pending, tombstones, rows, nbytes
        data = pa.Table.from_batches(pending, schema=schema)
        offsets = {t: dict(ps) for t, ps in position.items()}
        if mode == "upsert":
            last = latest(data, pa.chunked_array(tombstones, pa.bool_()))
            if last.dropped:
                log.warning("%s: %d record(s) with no key dropped, as Kafka's log cleaner drops them from a "
                            "compacted topic", target.description, last.dropped)
            summary.dropped += last.dropped
            target.upsert(last, offsets, sorted(touched))
        else:
            target.commit(data, offsets, sorted(touched))
        summary.records += data.num_rows
        summary.commits += 1
        committed.clear()
        committed.update({t: dict(ps) for t, ps in position.items()})
        pending, tombstones, rows, nbytes = [], [], 0, 0
        touched.clear()

    for batch in read_pieces(the_plan.pieces, include_headers=opts.include_headers,
                             include_metadata=opts.include_metadata, fail_on_data_loss=opts.fail_on_data_loss,
                             decoding=decoding, threads=opts.max_threads):
        if not batch.num_rows:
            continue
        rows += batch.num_rows
        nbytes += batch.nbytes
        pending.append(to_table(batch, schema))
        if mode == "upsert":
            tombstones.append(batch.column("value").is_null())
        for tp, after in _positions(batch):
            position[tp.topic][tp.partition] = after
            touched.add(tp)
        if rows >= commit_records or nbytes >= commit_bytes:
            commit()
    # the end of each range, past trailing control records and aborted batches that gave no rows
    for r in the_plan.ranges:
        tp = r.topic_partition
        position[tp.topic][tp.partition] = r.end
        if committed.get(tp.topic, {}).get(tp.partition) != r.end:
            touched.add(tp)
    if pending or touched:
        commit()
    summary.offsets = position
    summary.version = target.version
    if summary.commits == 0 and target.version is None and not the_plan.ranges:
        raise SyncError(f"{target.description}: nothing to sync and no table to keep; expected a topic with partitions")
    return summary
