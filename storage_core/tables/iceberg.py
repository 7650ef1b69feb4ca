"""An Iceberg table kept by ``klog sync``, through ``pyiceberg``.

The catalog is any one ``pyiceberg`` supports, configured as ``pyiceberg`` configures it (its
``~/.pyiceberg.yaml``, ``PYICEBERG_CATALOG__<NAME>__*`` variables, or properties given here); the
default is an embedded SQL catalog on SQLite in a local warehouse dir (:func:`embedded_catalog`).

Each commit is one Iceberg append whose snapshot summary carries the offsets
(:data:`~storage_core.tables.offsets.OFFSETS_PROPERTY`), committed on the condition that the table's
``main`` branch still points at the snapshot the offsets were read from. ``pyiceberg`` retries an
append that lost a race by re-applying it on the new snapshot, which would append the same records
twice; the condition is a requirement of klog's own, which that retry keeps, so the retry fails too
and the loser stops with :class:`~storage_core.errors.SyncConflictError`, its data files deleted.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

import pyarrow as pa
from pydantic import Field, model_serializer
from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.exceptions import (
    CommitFailedException,
    NoSuchTableError,
)
from pyiceberg.expressions import And, BooleanExpression, EqualTo, In, Or
from pyiceberg.table import Table
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.snapshots import Snapshot
from pyiceberg.table.update import AssertRefSnapshotId, ValidatableTableRequirement
from pyiceberg.transforms import DayTransform, HourTransform
from pyiceberg.utils.config import Config
from sqlalchemy.exc import SQLAlchemyError

from storage_core.errors import SyncConflictError, SyncError
from storage_core.log.topic_partition import TopicPartition
from storage_core.tables.offsets import MODE_PROPERTY, OFFSETS_PROPERTY, TableOffsets, decode, encode
from storage_core.tables.schema import changed, evolve, partition_column
from storage_core.tables.upsert import Latest

__all__ = ["EMBEDDED_CATALOG", "IcebergTarget", "embedded_catalog"]

#: The catalog name used when none is given: SQLite in ``<warehouse>/catalog.db``.
EMBEDDED_CATALOG = "klog"
MAIN_BRANCH = "main"
#: partitionBy's Iceberg transforms of the record timestamp.
_TRANSFORMS = {"day": DayTransform, "hour": HourTransform}


class _BranchAt(ValidatableTableRequirement):
    """``main`` still at the snapshot the sync read its offsets from: Iceberg's
    ``assert-ref-snapshot-id`` (the same JSON to a REST catalog), of a class ``pyiceberg``'s retry
    does not replace with the new snapshot's."""

    type: Literal["assert-ref-snapshot-id"] = Field(default="assert-ref-snapshot-id")
    ref: str = Field(...)
    snapshot_id: int | None = Field(default=None, alias="snapshot-id")

    @model_serializer(mode="wrap")
    def _serialize(self, handler: Any) -> dict[str, Any]:
        return {**handler(self), "snapshot-id": self.snapshot_id}

    def validate(self, base_metadata: TableMetadata | None) -> None:  # type: ignore[override]  # as pyiceberg
        AssertRefSnapshotId.model_validate({"ref": self.ref, "snapshot-id": self.snapshot_id}).validate(base_metadata)


def _keep_null_lists() -> None:
    """Make ``pyiceberg`` keep a null list or map of structs null. Its Arrow projection, run on
    every batch it writes to Parquet (and reads back), rebuilds such a list (map) from its offsets
    alone, so a null one becomes empty (apache/iceberg-python#3833, open in 0.12): a record without
    headers, whose ``headers`` is null in ``format("klog")`` and in Spark's Kafka source, was stored
    as ``[]`` (found by Iceberg's Java reader, ``tests/tables/test_sync_oracles.py``), and a tombstone's
    Protobuf ``map<K, Message>`` field as ``{}`` (``tests/read/test_schema_registry_protobuf.py``). The
    rebuilt array gets the original's validity back; a ``pyiceberg`` that keeps the nulls itself is
    left as it is."""
    from pyiceberg.io import pyarrow as pyiceberg_arrow

    visitor = pyiceberg_arrow.ArrowProjectionVisitor
    if getattr(visitor.list, "_klog_keeps_nulls", False):
        return
    rebuild_list, rebuild_map = visitor.list, visitor.map

    def list_keeping_nulls(self: Any, list_type: Any, list_array: pa.Array | None,
                           value_array: pa.Array | None) -> pa.Array | None:
        result = rebuild_list(self, list_type, list_array, value_array)
        if result is not None and list_array is not None and result.null_count < list_array.null_count:
            result = type(result).from_arrays(result.offsets, result.values, type=result.type,
                                              mask=list_array.is_null())
        return result

    def map_keeping_nulls(self: Any, map_type: Any, map_array: pa.Array | None, key_result: pa.Array | None,
                          value_result: pa.Array | None) -> pa.Array | None:
        result = rebuild_map(self, map_type, map_array, key_result, value_result)
        if result is not None and map_array is not None and result.null_count < map_array.null_count:
            result = pa.MapArray.from_arrays(result.offsets, result.keys, result.items, type=result.type,
                                             mask=map_array.is_null())
        return result

    list_keeping_nulls._klog_keeps_nulls = True  # type: ignore[attr-defined]
    visitor.list = list_keeping_nulls  # type: ignore[method-assign]
    visitor.map = map_keeping_nulls  # type: ignore[method-assign]


_keep_null_lists()


def embedded_catalog(warehouse: str | os.PathLike[str]) -> Catalog:
    """``pyiceberg``'s SQL catalog on SQLite in ``warehouse/catalog.db``, the tables' files under ``warehouse``."""
    root = Path(warehouse).resolve()
    if root.exists() and not root.is_dir():
        raise SyncError(f"warehouse {root} is a file; expected a directory (created if missing)")
    root.mkdir(parents=True, exist_ok=True)
    try:
        return load_catalog(EMBEDDED_CATALOG, type="sql", uri=f"sqlite:///{root / 'catalog.db'}",
                            warehouse=root.as_uri())
    except SQLAlchemyError:  # two first syncs creating the catalog's tables at once: the second sees them now
        return load_catalog(EMBEDDED_CATALOG, type="sql", uri=f"sqlite:///{root / 'catalog.db'}",
                            warehouse=root.as_uri())


def configured_catalog(name: str, properties: Mapping[str, str]) -> Catalog:
    """The catalog ``name`` as ``pyiceberg`` configures it, with ``properties`` over its own; an
    unknown name (no configuration, no properties) is an error listing the configured ones."""
    config = Config()
    if not config.get_catalog_config(name) and not properties:
        catalogs = config.config.get("catalog")
        known = sorted(catalogs) if isinstance(catalogs, dict) else []
        raise SyncError(f"unknown Iceberg catalog {name!r}: pyiceberg has no configuration for it (~/.pyiceberg.yaml, "
                        f"PYICEBERG_CATALOG__{name.upper()}__URI); "
                        + (f"configured: {', '.join(known)}" if known else "none is configured")
                        + "; give its properties (type=rest uri=...), or --warehouse DIR for the embedded catalog")
    try:
        return load_catalog(name, **properties)
    except (ValueError, NotImplementedError) as exc:
        raise SyncError(f"Iceberg catalog {name!r}: {exc}") from None


def _key_filter(keys: pa.Table) -> BooleanExpression | None:
    """The rows of ``keys`` (:data:`~storage_core.tables.upsert.KEY_COLUMNS`): per partition, its key in the set."""
    if not keys.num_rows:
        return None
    terms: list[BooleanExpression] = []
    grouped = keys.group_by(["topic", "partition"], use_threads=False).aggregate([("key", "list")])
    for topic, partition, ks in zip(grouped.column("topic").to_pylist(), grouped.column("partition").to_pylist(),
                                    grouped.column("key_list").to_pylist(), strict=True):
        # pyiceberg's expressions take their terms positionally (their pydantic fields confuse mypy)
        where = And(EqualTo("topic", topic), EqualTo("partition", partition))  # type: ignore[call-arg, arg-type]
        terms.append(And(where, In("key", set(ks))))  # type: ignore[call-arg, arg-type]
    return terms[0] if len(terms) == 1 else Or(*terms)


class IcebergTarget:
    """One Iceberg table: its offsets as of the snapshot it was opened at, and conditional appends."""

    format = "iceberg"

    def __init__(self, catalog: Catalog, identifier: str) -> None:
        parts = identifier.split(".")
        if len(parts) < 2 or not all(parts):
            raise SyncError(f"Iceberg table {identifier!r}: expected namespace.table, such as kafka.orders")
        self.catalog = catalog
        self.identifier = identifier
        self.description = f"Iceberg table {identifier} (catalog {catalog.name})"
        try:
            self.table: Table | None = catalog.load_table(identifier)
        except NoSuchTableError:
            self.table = None
        snap = self.table.current_snapshot() if self.table is not None else None
        self._snapshot_id: int | None = snap.snapshot_id if snap is not None else None
        #: the mode of the sync that committed the offsets held() found (None: none)
        self.mode: str | None = None
        #: what held() found changed since klog's last commit, and that commit
        self.changes: list[str] = []
        self.last_sync = "no sync"

    @property
    def version(self) -> int | None:
        """The snapshot id the table is at (None: no snapshot yet)."""
        return self._snapshot_id

    def held(self, partitions: Iterable[TopicPartition]) -> tuple[TableOffsets, bool, list[str]]:
        """The offsets the table records (the newest snapshot in ``main``'s history carrying them),
        whether it holds records, and the topics its offsets name.

        Also what changed since klog's last commit (:attr:`changes`, for
        :func:`~storage_core.tables.offsets.check_history`): each snapshot of ``main`` after that
        one (another writer's: klog's all carry the offsets) that adds or removes records, and a
        ``main`` moved back (``rollback_to_snapshot``, ``set_current_snapshot``) past a later klog
        snapshot, which the table still lists but ``main`` no longer descends from."""
        self.mode = None
        self.changes = []
        self.last_sync = "no sync"
        if self.table is None:
            return {}, False, []
        snap = self.table.current_snapshot()
        has_records = snap is not None and snap.summary is not None and \
            int(snap.summary.get("total-records") or 0) > 0
        since: list[Snapshot] = []
        ancestors: set[int] = set()
        found: tuple[Snapshot, TableOffsets] | None = None
        while snap is not None:
            ancestors.add(snap.snapshot_id)
            summary = snap.summary
            text = summary.get(OFFSETS_PROPERTY) if summary is not None else None
            if summary is not None and text is not None:
                found = snap, decode(text, f"{self.description}, snapshot {snap.snapshot_id}")
                self.mode = summary.get(MODE_PROPERTY) or "append"  # none: a sync from before modes
                break
            since.append(snap)
            snap = self.table.snapshot_by_id(snap.parent_snapshot_id) if snap.parent_snapshot_id is not None else None
        if found is None:
            return {}, has_records, []
        last, offsets = found
        self.last_sync = f"snapshot {last.snapshot_id}"
        later = [s for s in self.table.snapshots() if _order(s) > _order(last)
                 and s.snapshot_id not in ancestors and s.summary is not None and OFFSETS_PROPERTY in s.summary]
        if later:
            newest = max(later, key=_order)
            current = self.table.current_snapshot()
            self.changes.append(f"main was moved back from klog's snapshot {newest.snapshot_id} to snapshot "
                                f"{current.snapshot_id if current is not None else None} (a rollback)")
        self.changes += [d for s in reversed(since) if (d := _change(s)) is not None]
        return offsets, has_records, sorted(offsets)

    def records(self, topics: Iterable[str]) -> pa.Table:
        """The table's ``topic``, ``partition`` and ``offset`` of ``topics`` (a re-based sync's)."""
        assert self.table is not None
        return self.table.scan(row_filter=In("topic", set(topics)),  # type: ignore[call-arg, arg-type]
                               selected_fields=("topic", "partition", "offset")).to_arrow()

    def prepare(self, schema: pa.Schema, source: str, partition_by: str | None = None) -> pa.Schema:
        """Create the table (and its namespace) with ``schema``, partitioned by ``partition_by``'s
        transform of the timestamp if given, or fit its columns to ``schema``
        (:func:`~storage_core.tables.schema.evolve`; ``source`` names where the value's columns come
        from): the columns to write."""
        if self.table is None:
            # another sync may create the namespace or the table at the same moment: the SQL
            # catalog then fails on its unique key (not with pyiceberg's AlreadyExists errors);
            # either way the one that exists now is used, and the commits decide
            namespace = self.identifier.rpartition(".")[0]
            try:
                self.catalog.create_namespace(namespace)
            except Exception:
                if not self.catalog.namespace_exists(namespace):
                    raise
            try:
                create = self.catalog.create_table_transaction(self.identifier, schema=schema)
                if partition_by is not None:  # the table and its partitioning in one commit
                    with create.update_spec() as spec:
                        spec.add_field("timestamp", _TRANSFORMS[partition_by](), partition_column(partition_by).name)
                create.commit_transaction()
                # the catalog's table, not the StagedTable the transaction returns: pyiceberg's commit
                # retry refreshes the table, which a staged one refuses with a ValueError (a sync that
                # lost its first commit to a concurrent sync then failed as an internal error, CI37)
                self.table = self.catalog.load_table(self.identifier)
            except Exception:
                if not self.catalog.table_exists(self.identifier):
                    raise
                self.table = self.catalog.load_table(self.identifier)
                return self.prepare(schema, source, partition_by)
            return schema
        if partition_by is not None:
            fields = [f.name for f in self.table.spec().fields]
            if fields != [partition_column(partition_by).name]:
                raise SyncError(f"{self.description} is partitioned by {', '.join(fields) or 'nothing'}; expected "
                                f"{partition_column(partition_by).name} (a table's partitioning is set when a sync "
                                "creates it; sync without partitionBy to keep the table's own)")
        held = self.table.schema().as_arrow()
        evolved = evolve(self.description, schema, held, widen=True, source=source)
        if changed(held, evolved):
            # a commit of its own, before any record: a sync killed after it leaves new columns,
            # empty, which the rerun finds as they are; the branch's snapshot does not move
            try:
                with self.table.update_schema() as update:
                    update.union_by_name(evolved)
            except CommitFailedException as exc:
                raise SyncConflictError(f"{self.description}: another writer changed its schema while this sync "
                                        f"evolved it ({exc}); nothing was written; rerun") from None
        return evolved

    def commit(self, data: pa.Table, offsets: TableOffsets, partitions: Iterable[TopicPartition]) -> None:
        """Append ``data`` with ``offsets`` in one snapshot, if ``main`` is where the offsets were read."""
        self._commit(data, None, offsets, "append")

    def upsert(self, latest: Latest, offsets: TableOffsets, partitions: Iterable[TopicPartition]) -> None:
        """Replace the rows of ``latest``'s keys by its rows (tombstoned keys by none), with
        ``offsets``, in one commit: a delete snapshot and an append snapshot, both carrying the offsets."""
        self._commit(latest.rows, _key_filter(latest.keys()), offsets, "upsert")

    def _commit(self, data: pa.Table, delete: BooleanExpression | None, offsets: TableOffsets, mode: str) -> None:
        assert self.table is not None, "prepare() first"
        tx = self.table.transaction()
        branch_at = _BranchAt.model_validate({"ref": MAIN_BRANCH, "snapshot-id": self._snapshot_id})
        props = {OFFSETS_PROPERTY: encode(offsets), MODE_PROPERTY: mode}
        try:
            # checked at once against the table as loaded (a table another sync made and appended
            # to meanwhile fails here), and again by the catalog at the commit
            tx._stage((), (branch_at,))  # type: ignore[arg-type]  # pyiceberg's union names its own classes
            if delete is not None:
                with warnings.catch_warnings():  # keys new to the table match no rows: nothing to say
                    warnings.filterwarnings("ignore", "Delete operation did not match any records")
                    tx.delete(delete, snapshot_properties=props)
            tx.append(data, snapshot_properties=props)
            self.table = tx.commit_transaction()
        except CommitFailedException as exc:
            raise SyncConflictError(
                f"{self.description} moved since this sync read its offsets (snapshot {self._snapshot_id}): another "
                f"sync committed first ({exc}); nothing of this commit is in the table; rerun to continue from the "
                "offsets that sync recorded") from None
        snap = self.table.current_snapshot()
        self._snapshot_id = snap.snapshot_id if snap is not None else None


def _order(snap: Snapshot) -> tuple[int, int]:
    """When a snapshot was made: its sequence number (a v1 table has none), then its time."""
    return snap.sequence_number or 0, snap.timestamp_ms


def _change(snap: Snapshot) -> str | None:
    """What a snapshot of another writer did to the records, as its summary says (None: nothing: a
    ``replace``, Iceberg's rewrite of the same records, or a commit adding and removing none)."""
    summary = snap.summary
    if summary is None:
        return f"snapshot {snap.snapshot_id} (no summary)"
    op = summary.operation.value if hasattr(summary.operation, "value") else str(summary.operation)
    added = int(summary.get("added-records") or 0)
    deleted = int(summary.get("deleted-records") or 0) + int(summary.get("added-position-deletes") or 0) + \
        int(summary.get("added-equality-deletes") or 0)
    if op == "replace" or (added == 0 and deleted == 0 and not int(summary.get("deleted-data-files") or 0)):
        return None
    what = ", ".join(x for x in (f"{added} records added" if added else "",
                                  f"{deleted} deleted" if deleted else "") if x) or "data files removed"
    return f"snapshot {snap.snapshot_id} {op} ({what})"
