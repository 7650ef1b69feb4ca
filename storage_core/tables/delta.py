"""A Delta table kept by ``klog sync``, through ``deltalake`` (delta-rs), at a local path or a URI.

Each commit is one Delta append carrying an application transaction per partition it read
(``appId`` ``klog/<topic>/<partition>``, ``version`` the next offset:
:func:`~storage_core.tables.offsets.app_id`) and the offsets' JSON in its commit info. The append is
made against the table version the offsets were read at; Delta's conflict check refuses a commit
whose transactions another commit since then also set, so two syncs of one partition cannot both
commit: the loser stops with :class:`~storage_core.errors.SyncConflictError`. Syncs of disjoint
partitions do not conflict, and need not.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Final

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, Transaction, WriterProperties, write_deltalake
from deltalake.exceptions import CommitFailedError, TableNotFoundError

from storage_core.errors import SyncConflictError, SyncError
from storage_core.log.topic_partition import TopicPartition
from storage_core.tables.offsets import MODE_PROPERTY, OFFSETS_PROPERTY, TableOffsets, app_id, decode, encode
from storage_core.tables.schema import PARTITIONINGS, changed, evolve, partition_column
from storage_core.tables.upsert import KEY_COLUMNS, Latest

__all__ = ["DeltaTarget"]

#: The data files' Parquet codec: zstd, as pyiceberg's default and klog export's (delta-rs's own is snappy).
PARQUET_CODEC: Final = "ZSTD"
#: How far back in the commit history the topics a foreign table's offsets name are looked for (a message only).
_HISTORY = 20
#: The merge source's column saying a key's last record is a tombstone (not a table column).
_TOMBSTONE = "__klog_tombstone"


def _is_uri(where: str) -> bool:
    return "://" in where


class DeltaTarget:
    """One Delta table: its offsets as of the version it was opened at, and conditional appends."""

    format = "delta"

    def __init__(self, where: str | os.PathLike[str], storage_options: Mapping[str, str] | None = None) -> None:
        self.where = os.fspath(where) if _is_uri(os.fspath(where)) else str(Path(where).resolve())
        if not _is_uri(self.where) and Path(self.where).exists() and not Path(self.where).is_dir():
            raise SyncError(f"Delta table {self.where} is a file; expected a directory (created if missing)")
        self.storage_options = dict(storage_options or {})
        self.description = f"Delta table {self.where}"
        self._partitions: list[TopicPartition] = []
        self._merge = False  # the next commit adds columns (prepare)
        #: the mode of the sync that committed the offsets held() found (None: none found)
        self.mode: str | None = None
        try:
            self.table: DeltaTable | None = DeltaTable(self.where, storage_options=self.storage_options or None)
        except TableNotFoundError:
            self.table = None

    @property
    def version(self) -> int | None:
        return self.table.version() if self.table is not None else None

    def held(self, partitions: Iterable[TopicPartition]) -> tuple[TableOffsets, bool, list[str]]:
        """The next offsets of ``partitions`` the table's transactions record, whether it holds
        records, and (for a message only) the topics its latest klog commit names."""
        self._partitions = list(partitions)
        self.mode = None
        if self.table is None:
            return {}, False, []
        offsets: TableOffsets = {}
        for tp in self._partitions:
            v = self.table.transaction_version(app_id(tp))
            if v is not None:
                offsets.setdefault(tp.topic, {})[tp.partition] = int(v)
        has_records = len(self.table.file_uris()) > 0
        named: list[str] = []
        if has_records or offsets:
            for commit in self.table.history(_HISTORY):
                text = commit.get(OFFSETS_PROPERTY)
                if isinstance(text, str):
                    named = sorted(decode(text, f"{self.description}, version {commit.get('version')}"))
                    mode = commit.get(MODE_PROPERTY)
                    self.mode = mode if isinstance(mode, str) else "append"
                    break
        return offsets, has_records, named

    def prepare(self, schema: pa.Schema, source: str, partition_by: str | None = None) -> pa.Schema:
        """Fit an existing table's columns to ``schema`` (:func:`~storage_core.tables.schema.evolve`;
        ``source`` names where the value's columns come from), or create the table, empty: the
        columns to write. New columns are added by the first commit, with its records (Delta's
        schema merge); Delta cannot widen a column's type, so a widened field is an error.

        A new table is made by a commit of its own, with no records: two syncs making it at once
        both succeed harmlessly (delta-rs does not refuse a second create that races the first).
        The offsets are then read again at the version loaded, where the appends are checked from:
        if another sync already appended there, this one stops rather than start from the earliest."""
        if partition_by is not None:
            schema = schema.append(partition_column(partition_by))
        if self.table is None:
            DeltaTable.create(self.where, schema=schema, mode="ignore", storage_options=self.storage_options or None,
                              partition_by=[partition_column(partition_by).name] if partition_by else None)
            self.table = DeltaTable(self.where, storage_options=self.storage_options or None)
            raced = [tp for tp in self._partitions if self.table.transaction_version(app_id(tp)) is not None]
            if raced:
                raise self._conflict(RuntimeError(f"it synced {', '.join(map(str, raced))} into the new table"))
        # a Delta table has no transforms: its partition column is one the sync derives from the
        # timestamp, whether this sync asked for it or the sync that made the table did
        parts = list(self.table.metadata().partition_columns)
        derived = [partition_column(by) for by in PARTITIONINGS]
        wanted = [partition_column(partition_by).name] if partition_by is not None else \
            [c for c in parts if c in {f.name for f in derived}]
        if parts != wanted:
            raise SyncError(f"{self.description} is partitioned by {', '.join(parts) or 'nothing'}; expected "
                            f"{', '.join(wanted) or 'nothing'} (a table's partitioning is set when a sync creates it; "
                            "sync without partitionBy to keep the table's own)")
        if partition_by is None:
            schema = pa.schema(list(schema) + [f for f in derived if f.name in parts])
        held = pa.schema(self.table.schema().to_arrow())
        evolved = evolve(self.description, schema, held, widen=False, source=source)
        self._merge = changed(held, evolved)
        return evolved

    def commit(self, data: pa.Table, offsets: TableOffsets, partitions: Iterable[TopicPartition],
               mode: str = "append") -> None:
        """Append ``data`` with a transaction per partition of ``partitions`` set to its offset in
        ``offsets`` (``mode``: the sync's, recorded with them)."""
        assert self.table is not None, "prepare() first"
        try:
            write_deltalake(self.table, data, mode="append",
                            commit_properties=self._properties(offsets, partitions, mode),
                            schema_mode="merge" if self._merge else None,
                            writer_properties=WriterProperties(compression=PARQUET_CODEC))
        except CommitFailedError as exc:
            raise self._conflict(exc) from None
        self._committed(offsets, partitions)

    @staticmethod
    def _properties(offsets: TableOffsets, partitions: Iterable[TopicPartition], mode: str) -> CommitProperties:
        txns = [Transaction(app_id(tp), offsets[tp.topic][tp.partition]) for tp in partitions]
        return CommitProperties(custom_metadata={OFFSETS_PROPERTY: encode(offsets), MODE_PROPERTY: mode},
                                app_transactions=txns)

    def _committed(self, offsets: TableOffsets, partitions: Iterable[TopicPartition]) -> None:
        assert self.table is not None
        self.table.update_incremental()
        self._merge = False
        # the next commit is checked against the commits after the version loaded now: one of
        # another sync that set these partitions after this commit (between the commit and the
        # load) would go unchecked, so it is looked for here
        for tp in partitions:
            found = self.table.transaction_version(app_id(tp))
            if found != offsets[tp.topic][tp.partition]:
                raise SyncConflictError(
                    f"{self.description}: another sync committed {tp} (to offset {found}) right after this one's "
                    f"commit up to offset {offsets[tp.topic][tp.partition]}; this sync stops there (what it "
                    "committed stays, exactly once); rerun to continue")

    def upsert(self, latest: Latest, offsets: TableOffsets, partitions: Iterable[TopicPartition]) -> None:
        """Replace the rows of ``latest``'s keys by its rows (tombstoned keys by none), with a
        transaction per partition of ``partitions``, in one Delta merge."""
        assert self.table is not None, "prepare() first"
        rows = latest.rows
        if not rows.num_rows and not latest.deleted.num_rows:  # only offsets move: delta-rs commits no empty merge
            self.commit(rows, offsets, partitions, "upsert")
            return
        gone = pa.table([latest.deleted.column(f.name) if f.name in KEY_COLUMNS else
                         pa.nulls(latest.deleted.num_rows, f.type) for f in rows.schema], schema=rows.schema)
        source = pa.concat_tables([rows, gone]).append_column(_TOMBSTONE, pa.chunked_array(
            [pa.repeat(False, rows.num_rows), pa.repeat(True, gone.num_rows)], pa.bool_()))
        if self._merge:  # new columns first, in a commit of no records (a merge would add the tombstone flag too)
            write_deltalake(self.table, rows.slice(0, 0), mode="append", schema_mode="merge")
            self.table.update_incremental()
            self._merge = False
        columns = {f"`{n}`": f"s.`{n}`" for n in rows.schema.names}
        on = " AND ".join(f"t.`{c}` = s.`{c}`" for c in KEY_COLUMNS)
        try:
            self.table.merge(source, predicate=on, source_alias="s", target_alias="t",
                             commit_properties=self._properties(offsets, partitions, "upsert"),
                             writer_properties=WriterProperties(compression=PARQUET_CODEC)) \
                .when_matched_delete(predicate=f"s.{_TOMBSTONE}") \
                .when_matched_update(updates=columns, predicate=f"NOT s.{_TOMBSTONE}") \
                .when_not_matched_insert(updates=columns, predicate=f"NOT s.{_TOMBSTONE}") \
                .execute()
        except CommitFailedError as exc:
            raise self._conflict(exc) from None
        self._committed(offsets, partitions)

    def _conflict(self, exc: Exception) -> SyncConflictError:
        return SyncConflictError(
            f"{self.description} moved since this sync read its offsets (version {self.version}): another sync "
            f"committed the same partitions first ({exc}); nothing of this commit is in the table; rerun to continue "
            "from the offsets that sync recorded")
