"""Tables changed behind klog's back: every change another writer made to a table since klog's
last sync that touches its records (Delta ``restore()``, Iceberg ``rollback_to_snapshot``, a
foreign append, delete or overwrite) is refused in one line before anything is written, naming
the version or snapshot and what it did; ``rebase=True`` (``klog sync --rebase``) re-bases the
offsets on the records the table holds. A Delta table's mode is found however far back klog's last
commit lies (no window of the last 20 commits). The tables are changed by their own libraries
(delta-rs, pyiceberg); the truth is the generator's (:mod:`sync_gen`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from sync_gen import SyncWorkload
from test_sync import SEED, Table, _seeded, klog_cli, rows_of

from storage_core.errors import SyncError
from storage_core.tables import sync


def _iceberg(table: Table) -> Any:
    from pyiceberg.catalog import load_catalog

    cat = load_catalog("klog", type="sql", uri=f"sqlite:///{table.warehouse / 'catalog.db'}",
                       warehouse=table.warehouse.as_uri())
    return cat.load_table(table.to)


def _delta(table: Table) -> Any:
    from deltalake import DeltaTable

    return DeltaTable(table.to)


def _some_rows(table: Table, n: int) -> pa.Table:
    return table.read().slice(0, n)


def _foreign_append(table: Table) -> str:
    rows = _some_rows(table, 10)  # ten records the table holds already: duplicates
    if table.format == "delta":
        from deltalake import write_deltalake

        write_deltalake(_delta(table), rows.cast(pa.schema(_delta(table).schema().to_arrow())), mode="append")
        return "appended 10 rows"
    _iceberg(table).append(rows.cast(_iceberg(table).schema().as_arrow()))
    return "append (10 records added)"


def _foreign_delete(table: Table) -> str:
    # the table's first offsets, wherever the workload's partitions start (a seed whose partitions all
    # start above offset 5 deleted nothing, and so changed nothing to refuse)
    below = pc.min(table.read().column("offset")).as_py() + 5
    if table.format == "delta":
        _delta(table).delete(f"\"offset\" < {below}")
        return "deleted"
    from pyiceberg.expressions import LessThan

    _iceberg(table).delete(LessThan("offset", below))  # type: ignore[call-arg, arg-type]
    return " deleted)"  # pyiceberg rewrites the data files (copy on write): an overwrite snapshot


def _foreign_overwrite(table: Table) -> str:
    rows = _some_rows(table, 7)
    if table.format == "delta":
        from deltalake import write_deltalake

        write_deltalake(_delta(table), rows.cast(pa.schema(_delta(table).schema().to_arrow())), mode="overwrite")
        return "wrote in Overwrite mode"
    _iceberg(table).overwrite(rows.cast(_iceberg(table).schema().as_arrow()))
    return "records added)"  # pyiceberg's overwrite: a delete snapshot, then an append


def _back_to_the_first_sync(table: Table) -> str:
    if table.format == "delta":
        _delta(table).restore(1)  # version 0: the create; 1: the first sync
        return "restored the table to version 1"
    t = _iceberg(table)
    first = min((s for s in t.snapshots()), key=lambda s: s.sequence_number)  # the first sync's
    newest = t.current_snapshot().snapshot_id
    t.manage_snapshots().rollback_to_snapshot(first.snapshot_id).commit()
    return f"main was moved back from klog's snapshot {newest} to snapshot {first.snapshot_id}"


TAMPERINGS: dict[str, Callable[[Table], str]] = {
    "restore-or-rollback": _back_to_the_first_sync, "append": _foreign_append, "delete": _foreign_delete,
    "overwrite": _foreign_overwrite,
}


@pytest.mark.parametrize("fmt", ["iceberg", "delta"])
@pytest.mark.parametrize("how", sorted(TAMPERINGS))
def test_a_table_changed_behind_klogs_back_is_refused_then_rebased(fmt: str, how: str, tmp_path: Path) -> None:
    work = SyncWorkload(tmp_path / "data", SEED + 11, partitions=2)
    table = Table(fmt, tmp_path)
    work.write(6, leave_open=False)
    sync(work.root, table.to, topics="orders", **table.kwargs())
    work.write(4, leave_open=False)
    sync(work.root, table.to, topics="orders", **table.kwargs())
    what = TAMPERINGS[how](table)
    work.write(3, leave_open=False)
    before = table.read()
    version = table.version()
    with pytest.raises(SyncError, match="changed since klog's last sync") as info:
        sync(work.root, table.to, topics="orders", **table.kwargs())
    assert what in str(info.value), _seeded(str(info.value))
    assert "\n" not in str(info.value)
    assert table.version() == version and table.read().equals(before), _seeded("a refused sync wrote")
    r = klog_cli("sync", str(work.root), "--topic", "orders", *table.cli())
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and what in r.stderr, r.stderr

    # on purpose: re-based on what the table holds, then synced from there
    r = klog_cli("sync", str(work.root), "--topic", "orders", "--rebase", *table.cli())
    assert r.returncode == 0, _seeded(r.stderr)
    got = table.read()
    truth = work.expected()
    held_before = {(t, p, o) for t, p, o in zip(*(before.column(c).to_pylist() for c in ("topic", "partition",
                                                                                       "offset")), strict=True)}
    for (t, p), recs in truth.items():
        mine = pc.and_(pc.equal(got.column("topic"), t), pc.equal(got.column("partition"), p))
        part = got.filter(mine)
        offsets = part.column("offset").to_pylist()
        top = max((o for tt, pp, o in held_before if (tt, pp) == (t, p)), default=-1)
        # what the table held stays as the other writer left it; every record after its highest offset once
        assert sorted(o for o in offsets if o > top) == sorted(o for o in recs if o > top), _seeded(f"{t}-{p}")
        if how != "append":
            assert len(set(offsets)) == len(offsets), _seeded(f"{t}-{p}: an offset twice after the rebase")
    # the rebase is klog's last commit now: the next sync is not refused, and adds what is new
    work.write(2, leave_open=False)
    sync(work.root, table.to, topics="orders", **table.kwargs())
    after = table.read()
    for (t, p), recs in work.expected().items():
        mine = after.filter(pc.and_(pc.equal(after.column("topic"), t), pc.equal(after.column("partition"), p)))
        assert pc.max(mine.column("offset")).as_py() == max(recs), _seeded(f"{t}-{p}: the sync after the rebase "
                                                                           "did not reach the end")


def test_delta_mode_is_found_past_any_window_of_recent_commits(tmp_path: Path) -> None:
    """klog's mode marker behind 40 commits of another writer that change no record (property sets),
    more than one page of the history klog reads at a time (``delta._HISTORY_PAGE``): an upsert sync
    into the append table is still refused (the old 20-commit window accepted it and its MERGE
    replaced rows), and an append sync goes on, those commits being no change of the records."""
    from storage_core.tables import delta

    foreign = 40
    assert foreign > delta._HISTORY_PAGE  # the history is read in more than one page
    work = SyncWorkload(tmp_path / "data", SEED + 12, partitions=2)
    table = Table("delta", tmp_path)
    work.write(5, leave_open=False)
    sync(work.root, table.to, topics="orders", **table.kwargs())
    for i in range(foreign):
        _delta(table).alter.set_table_properties({"delta.appendOnly": "false" if i % 2 else "false"})
    with pytest.raises(SyncError, match="was synced in append mode; this sync runs in upsert mode"):
        sync(work.root, table.to, topics="orders", mode="upsert", **table.kwargs())
    work.write(2, leave_open=False)
    s = sync(work.root, table.to, topics="orders", **table.kwargs())
    assert s.records > 0
    got = rows_of(table.read())
    for (t, p), recs in work.expected().items():
        assert got[(t, p)] == recs, _seeded(f"{t}-{p}")
