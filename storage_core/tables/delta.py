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
#: The commit info key of a klog commit saying the table version its sync read (a commit of another
#: writer made between that read and the commit is checked too: see :meth:`DeltaTarget.held`).
READ_PROPERTY = "klog.readVersion"
#: Commits that change no record (Delta's operation names, as delta-rs and Delta Lake write them).
_NO_RECORD_CHANGE = frozenset({
    "OPTIMIZE", "VACUUM START", "VACUUM END", "SET TBLPROPERTIES", "UNSET TBLPROPERTIES", "ADD COLUMNS",
    "CHANGE COLUMN", "ADD CONSTRAINT", "DROP CONSTRAINT", "UPDATE SCHEMA", "ADD FEATURE", "DROP FEATURE",
    "UPDATE FIELD METADATA", "UPDATE TABLE METADATA", "CREATE TABLE", "FSCK", "UPGRADE PROTOCOL", "SET COLUMN METADATA",
    "CHECKPOINT", "COMPUTE STATS"})
#: Commits read from the history at first: grown eightfold until klog's last commit is among them.
_HISTORY_PAGE = 32
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
        #: what held() found changed since klog's last commit, and that commit
        self.changes: list[str] = []
        self.last_sync = "no sync"
        try:
            self.table: DeltaTable | None = DeltaTable(self.where, storage_options=self.storage_options or None)
        except TableNotFoundError:
            self.table = None

    @property
    def version(self) -> int | None:
        return self.table.version() if self.table is not None else None

    def held(self, partitions: Iterable[TopicPartition]) -> tuple[TableOffsets, bool, list[str]]:
        """The next offsets of ``partitions`` the table's transactions record, whether it holds
        records, and (for a message only) the topics its latest klog commit names.

        Also what changed since klog's last commit (:attr:`changes`, for
        :func:`~storage_core.tables.offsets.check_history`): the history is read back, however far,
        to the newest commit carrying :data:`~storage_core.tables.offsets.OFFSETS_PROPERTY` (the
        mode is that commit's), and every commit after it, and after the version that commit's
        sync read, is a change if another writer made it and it touches records. Application
        transactions outlive a ``restore()`` (Delta keeps the newest per app id), so a restore
        leaves the offsets where klog's last commit put them and the records where the version
        restored to had them: only the history says so. Transactions with no klog commit left in
        the history (its log was cleaned up behind commits since) cannot be checked: a change too."""
        self._partitions = list(partitions)
        self.mode = None
        self.changes = []
        self.last_sync = "no sync"
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
            since, last, oldest = self._since_last_sync()
            if last is not None:
                named = sorted(decode(str(last[OFFSETS_PROPERTY]), f"{self.description}, version {last.get('version')}"))
                mode = last.get(MODE_PROPERTY)
                self.mode = mode if isinstance(mode, str) else "append"
                self.last_sync = f"version {last.get('version')}"
            elif offsets:
                self.changes.append(f"klog's last commit is older than the history the table keeps (from version "
                                    f"{oldest}), so the {len(since)} commits since cannot be checked")
            self.changes += [d for c in since if (d := _change(c)) is not None]
        return offsets, has_records, named

    def _since_last_sync(self) -> tuple[list[dict[str, object]], dict[str, object] | None, object]:
        """The commits another writer made since klog's last one, newest first, that commit (None:
        none in the history), and the oldest version the history holds."""
        assert self.table is not None
        limit = _HISTORY_PAGE
        while True:
            commits = self.table.history(limit)
            since: list[dict[str, object]] = []
            last: dict[str, object] | None = None
            read: int | None = None
            done = False
            for c in commits:
                if last is None:
                    if not isinstance(c.get(OFFSETS_PROPERTY), str):
                        since.append(c)
                        continue
                    last = c
                    r = str(c.get(READ_PROPERTY))
                    read = int(r) if r.isdigit() else None
                version = c.get("version")
                if read is None or not isinstance(version, int) or version <= read:
                    done = True
                    break
                if c is not last and not isinstance(c.get(OFFSETS_PROPERTY), str):
                    since.append(c)  # made while klog's last sync ran, after the version it read
            if done or len(commits) < limit:
                return since, last, commits[-1].get("version") if commits else None
            limit *= 8

    def records(self, topics: Iterable[str]) -> pa.Table:
        """The table's ``topic``, ``partition`` and ``offset`` of ``topics`` (a re-based sync's)."""
        assert self.table is not None
        import pyarrow.compute as pc

        rows = self.table.to_pyarrow_dataset().to_table(columns=["topic", "partition", "offset"])
        return rows.filter(pc.is_in(rows.column("topic"), pa.array(sorted(set(topics)), pa.string())))

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

    def _properties(self, offsets: TableOffsets, partitions: Iterable[TopicPartition], mode: str) -> CommitProperties:
        txns = [Transaction(app_id(tp), offsets[tp.topic][tp.partition]) for tp in partitions]
        return CommitProperties(custom_metadata={OFFSETS_PROPERTY: encode(offsets), MODE_PROPERTY: mode,
                                                 READ_PROPERTY: str(self.version)},
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


def _change(commit: Mapping[str, object]) -> str | None:
    """What a commit of another writer did to the records, as its history entry says (None: nothing:
    a compaction, a property or schema change, an append of no rows)."""
    op = str(commit.get("operation"))
    params = commit.get("operationParameters")
    params = params if isinstance(params, dict) else {}
    metrics = commit.get("operationMetrics")
    metrics = metrics if isinstance(metrics, dict) else {}
    if op in _NO_RECORD_CHANGE:
        return None
    version = commit.get("version")
    mode = str(params.get("mode", ""))
    added = metrics.get("num_added_rows", metrics.get("numOutputRows"))
    if op in ("WRITE", "STREAMING UPDATE") and mode.lower() == "append":
        if added == 0:
            return None
        return f"version {version} appended {added if added is not None else 'some'} rows"
    if op == "RESTORE":
        return f"version {version} restored the table to version {params.get('version', params.get('timestamp'))}"
    if op == "DELETE":
        return (f"version {version} deleted {metrics.get('num_deleted_rows', 'some')} rows"
                + (f" ({params['predicate']})" if params.get("predicate") else ""))
    if op == "WRITE":
        return f"version {version} wrote in {mode or 'an unknown'} mode"
    return f"version {version} made a {op}"
