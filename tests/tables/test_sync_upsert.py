"""``klog sync --mode upsert``: a compacted, transactional topic as a table of each key's latest
record. The truth is the generator's (it decided every key, tombstone and transaction's fate:
:meth:`sync_gen.SyncWorkload.latest`) and Kafka's cleaner's: ``klog compact`` of a copy of the same
dir, read back, must leave the same latest record per key (what the issue calls "what ``klog
compact`` would leave, read as a table")."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pytest
from sync_gen import SyncWorkload
from test_sync import FORMATS, SEED, Table, _seeded, klog_cli

import storage_core as klog
from storage_core.errors import InvalidOptionError, SyncError
from storage_core.tables import sync


def table_latest(table: pa.Table) -> dict[tuple[str, int, bytes], tuple[int, bytes]]:
    rows = table.select(["topic", "partition", "key", "offset", "value"]).to_pylist()
    out = {(r["topic"], r["partition"], r["key"]): (r["offset"], r["value"]) for r in rows}
    assert len(out) == len(rows), _seeded("a key has two rows in the upserted table")
    return out


def compacted_latest(work: SyncWorkload, tmp: Path, upto: dict[str, dict[int, int]]) -> dict[tuple[str, int, bytes],
                                                                                          tuple[int, bytes]]:
    """Each key's last record below ``upto`` in a copy of the dir compacted by ``klog compact``."""
    copy = tmp / "compacted"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(work.root, copy)
    done = klog_cli("compact", str(copy), "--topic", "orders", "--roll")
    assert done.returncode == 0, done.stderr
    read = klog.read_arrow(copy, topics="orders", isolationLevel="read_committed").read_all()
    last: dict[tuple[str, int, bytes], tuple[int, bytes | None]] = {}
    for r in read.select(["topic", "partition", "key", "offset", "value"]).to_pylist():
        if r["key"] is not None and r["offset"] < upto.get(r["topic"], {}).get(r["partition"], 0):
            last[(r["topic"], r["partition"], r["key"])] = (r["offset"], r["value"])
    return {k: (o, v) for k, (o, v) in last.items() if v is not None}


@pytest.mark.parametrize("fmt", FORMATS)
def test_upsert_equals_the_compacted_topic(fmt: str, tmp_path: Path) -> None:
    work = SyncWorkload(tmp_path / "logs", SEED, tombstones=0.2)
    table = Table(fmt, tmp_path)
    rounds = [(8, True), (5, True), (3, False)]
    for batches, leave_open in rounds:
        work.write(batches, leave_open=leave_open)
        # small commits: a key's records fall in several commits, and again within one
        s = sync(work.root, table.to, **table.kwargs(), mode="upsert", commit_records=53)
        assert s.mode == "upsert"
        upto = table.offsets()
        got = table_latest(table.read())
        truth = work.latest(upto)
        assert got == truth, _seeded(f"after {s.commits} commits the table differs from each key's latest record")
        assert got == compacted_latest(work, tmp_path, upto), _seeded("the table differs from the compacted topic")
        visible = work.expected()
        no_key = sum(1 for r in s.ranges for o, (k, _) in visible[(r.topic_partition.topic, r.topic_partition.partition)]
                     .items() if k is None and r.start <= o < r.end)
        assert s.dropped == no_key, _seeded(f"{s.dropped} records with no key dropped; the generator made {no_key}")
    assert table.read().num_rows == len(truth) > 0


def test_upsert_refusals(tmp_path: Path) -> None:
    work = SyncWorkload(tmp_path / "logs", SEED)
    work.write(2)
    table = Table("delta", tmp_path)
    with pytest.raises(InvalidOptionError, match="an upsert sync keeps each key's latest committed record"):
        sync(work.root, table.to, **table.kwargs(), mode="upsert", isolationLevel="read_uncommitted")
    with pytest.raises(InvalidOptionError, match="an upsert sync matches rows by the key's bytes"):
        sync(work.root, table.to, **table.kwargs(), mode="upsert", keyFormat="confluent-avro")
    with pytest.raises(InvalidOptionError, match="unknown mode 'merge'; expected one of append, upsert"):
        sync(work.root, table.to, **table.kwargs(), mode="merge")
    assert not table.exists()


def test_upsert_from_the_cli(tmp_path: Path) -> None:
    work = SyncWorkload(tmp_path / "logs", SEED, tombstones=0.2)
    work.write(4, leave_open=False)
    table = Table("iceberg", tmp_path)
    done = klog_cli("sync", str(work.root), *table.cli(), "--mode", "upsert", "--json")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["mode"] == "upsert" and out["dropped"] == sum(
        1 for recs in work.expected().values() for k, _ in recs.values() if k is None)
    assert table_latest(table.read()) == work.latest(table.offsets()), _seeded("the CLI's upsert differs")


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_table_keeps_its_mode(fmt: str, tmp_path: Path) -> None:
    work = SyncWorkload(tmp_path / "logs", SEED, tombstones=0.2)
    work.write(3, leave_open=False)
    upserted, appended = Table(fmt, tmp_path / "u"), Table(fmt, tmp_path / "a")
    sync(work.root, upserted.to, **upserted.kwargs(), mode="upsert")
    sync(work.root, appended.to, **appended.kwargs())
    work.write(2, leave_open=False)
    for table, held, other in ((upserted, "upsert", "append"), (appended, "append", "upsert")):
        before = table.version()
        with pytest.raises(SyncError, match=f"was synced in {held} mode; this sync runs in {other} mode"):
            sync(work.root, table.to, **table.kwargs(), mode=other)
        assert table.version() == before
    assert sync(work.root, upserted.to, **upserted.kwargs(), mode="upsert").records > 0
    assert table_latest(upserted.read()) == work.latest(upserted.offsets()), _seeded("upsert after a refusal")
