"""``klog sync``: topics into Iceberg and Delta tables, incrementally and exactly once.

The truth is the generator's (:mod:`sync_gen`: it decided every record and every transaction's
fate) and, column for column, ``read_arrow`` over the same range (the rows Spark's source gives).
The tables are read back by their own libraries (pyiceberg, delta-rs). Crashes are real SIGKILLs
of ``klog sync`` processes at random moments; concurrent syncs are real processes racing."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from sync_gen import SyncWorkload

import storage_core as klog
from storage_core.errors import InvalidOptionError, OffsetOutOfRangeError, SyncError
from storage_core.log.config import LogConfig
from storage_core.log.log import Log
from storage_core.log.manager import LogManager
from storage_core.tables import sync

FORMATS = ("iceberg", "delta")
SEED = int(os.environ.get("KLOG_SYNC_SEED", random.randrange(1 << 30)))
ORDER = [("topic", "ascending"), ("partition", "ascending"), ("offset", "ascending")]


def _seeded(msg: str) -> str:
    return f"{msg} (seed {SEED}; rerun with KLOG_SYNC_SEED={SEED})"


class Table:
    """One table of a test, in either format: where it is, how to sync to it and read it back."""

    def __init__(self, fmt: str, root: Path) -> None:
        self.format = fmt
        self.warehouse = root / "warehouse"
        self.to = "kafka.orders" if fmt == "iceberg" else str(root / "delta" / "orders")

    def kwargs(self) -> dict[str, Any]:
        return {"format": self.format, **({"warehouse": self.warehouse} if self.format == "iceberg" else {})}

    def cli(self) -> list[str]:
        return ["--format", self.format, "--to", self.to] + (
            ["--warehouse", str(self.warehouse)] if self.format == "iceberg" else [])

    def exists(self) -> bool:
        return (self.warehouse / "catalog.db").exists() if self.format == "iceberg" else Path(self.to).exists()

    def read(self) -> pa.Table:
        if self.format == "iceberg":
            from pyiceberg.catalog import load_catalog

            cat = load_catalog("klog", type="sql", uri=f"sqlite:///{self.warehouse / 'catalog.db'}",
                               warehouse=self.warehouse.as_uri())
            out = cat.load_table(self.to).scan().to_arrow()
        else:
            from deltalake import DeltaTable

            out = DeltaTable(self.to).to_pyarrow_table()
        return out.sort_by(ORDER)

    def offsets(self) -> dict[str, dict[int, int]]:
        """The next offsets the table records, read the way each format's own readers find them."""
        if self.format == "iceberg":
            from pyiceberg.catalog import load_catalog

            cat = load_catalog("klog", type="sql", uri=f"sqlite:///{self.warehouse / 'catalog.db'}",
                               warehouse=self.warehouse.as_uri())
            snap = cat.load_table(self.to).current_snapshot()
            assert snap is not None and snap.summary is not None
            return {t: {int(p): o for p, o in ps.items()} for t, ps in json.loads(snap.summary["klog.offsets"]).items()}
        from deltalake import DeltaTable

        dt = DeltaTable(self.to)
        found: dict[str, dict[int, int]] = {}
        for commit in dt.history():
            if "klog.offsets" in commit:
                for t, ps in json.loads(commit["klog.offsets"]).items():
                    for p in ps:
                        v = dt.transaction_version(f"klog/{t}/{p}")
                        if v is not None:
                            found.setdefault(t, {})[int(p)] = v
                break
        return found

    def version(self) -> int | None:
        if not self.exists():
            return None
        if self.format == "iceberg":
            from pyiceberg.catalog import load_catalog

            cat = load_catalog("klog", type="sql", uri=f"sqlite:///{self.warehouse / 'catalog.db'}",
                               warehouse=self.warehouse.as_uri())
            try:
                snap = cat.load_table(self.to).current_snapshot()
            except Exception:  # noqa: BLE001 - no such table yet
                return None
            return None if snap is None else snap.snapshot_id
        from deltalake import DeltaTable

        return DeltaTable(self.to).version()


def klog_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "storage_core.tools.cli", *args], capture_output=True, text=True)


def rows_of(table: pa.Table) -> dict[tuple[str, int], dict[int, tuple[bytes | None, bytes | None]]]:
    out: dict[tuple[str, int], dict[int, tuple[bytes | None, bytes | None]]] = {}
    cols = [table.column(c).to_pylist() for c in ("topic", "partition", "offset", "key", "value")]
    for t, p, o, k, v in zip(*cols, strict=True):
        d = out.setdefault((t, p), {})
        assert o not in d, _seeded(f"{t}-{p} offset {o} is in the table twice")
        d[o] = (k, v)
    return out


def check_exact(table: Table, work: SyncWorkload, *, upto: dict[str, dict[int, int]] | None = None) -> None:
    """The table holds exactly the records the generator made visible below the offsets it records
    (every one once), and its columns equal read_arrow's over the same range."""
    got = table.read()
    offsets = table.offsets() if upto is None else upto
    truth = work.expected()
    assert len(set(zip(got.column("topic").to_pylist(), got.column("partition").to_pylist(),
                       got.column("offset").to_pylist(), strict=True))) == got.num_rows, _seeded("duplicate rows")
    held = rows_of(got)
    for (t, p), recs in truth.items():
        nxt = offsets.get(t, {}).get(p, 0)
        want = {o: kv for o, kv in recs.items() if o < nxt}
        assert held.get((t, p), {}) == want, _seeded(f"{t}-{p} below offset {nxt}: table differs from the generator")
    if not offsets:  # killed before its first commit (a new table, created empty)
        assert got.num_rows == 0, _seeded("rows in a table that records no offsets")
        return
    # column for column: read_arrow over the same range
    ref = pa.concat_tables([
        klog.read_arrow(work.root, assign={t: sorted(ps)}, isolationLevel="read_committed",
                        endingOffsets={t: {str(p): o for p, o in ps.items()}}).read_all()
        for t, ps in sorted(offsets.items())]).sort_by(ORDER)
    assert got.cast(ref.schema).equals(ref), _seeded("the table's columns differ from read_arrow's")


@pytest.mark.parametrize("fmt", FORMATS)
def test_sync_append_sync_again(fmt: str, tmp_path: Path) -> None:
    """Sync, more data arrives (new transactions, some open), sync again: the table equals the range
    read directly, and records each partition's last stable offset."""
    work = SyncWorkload(tmp_path / "data", SEED, topics=("orders",), partitions=3)
    work.write(25)
    table = Table(fmt, tmp_path)
    first = sync(work.root, table.to, topics="orders", **table.kwargs())
    assert first.records == sum(len(v) for v in work.expected().values()) and first.commits == 1
    check_exact(table, work)
    plan = klog.plan(work.root, topics="orders", isolationLevel="read_committed")
    assert table.offsets() == {"orders": {r.topic_partition.partition: r.end for r in plan.ranges}}
    again = sync(work.root, table.to, topics="orders", **table.kwargs())
    assert (again.records, again.commits) == (0, 0), "a sync with nothing new commits nothing"
    work.write(15, leave_open=False)
    more = sync(work.root, table.to, topics="orders", commit_records=70, **table.kwargs())
    assert more.commits > 1 and first.records + more.records == sum(len(v) for v in work.expected().values())
    check_exact(table, work)
    plan = klog.plan(work.root, topics="orders", isolationLevel="read_committed")
    assert table.offsets() == {"orders": {r.topic_partition.partition: r.end for r in plan.ranges}}


@pytest.mark.parametrize("fmt", FORMATS)
def test_headers_kept_null_where_a_record_has_none(fmt: str, tmp_path: Path) -> None:
    """With includeHeaders, a record without headers has null headers in the table, as in
    format("klog") and Spark's Kafka source, not an empty list (pyiceberg 0.12 writes a null list of
    structs as [] unless klog puts the nulls back: apache/iceberg-python#3833). The Iceberg data
    files are read with pyarrow itself, not through pyiceberg's read path, which has the same rebuild."""
    work = SyncWorkload(tmp_path / "data", SEED, topics=("orders",), partitions=2, headers=True)
    work.write(10, leave_open=False)
    table = Table(fmt, tmp_path)
    sync(work.root, table.to, topics="orders", includeHeaders="true", **table.kwargs())
    ref = klog.read_arrow(work.root, topics="orders", isolationLevel="read_committed",
                          includeHeaders="true").read_all().sort_by(ORDER)
    assert 0 < ref.column("headers").null_count < ref.num_rows, _seeded("the workload has records with and without")
    if fmt == "iceberg":
        import pyarrow.parquet as pq

        got = pa.concat_tables(pq.read_table(f) for f in sorted(table.warehouse.rglob("*.parquet"))).sort_by(ORDER)
    else:
        got = table.read()
    assert got.column("headers").to_pylist() == ref.column("headers").to_pylist(), _seeded("headers differ")
    assert table.read().cast(ref.schema).equals(ref), _seeded("the table's columns differ from read_arrow's")


@pytest.mark.parametrize("fmt", FORMATS)
def test_sync_of_some_partitions_keeps_the_others(fmt: str, tmp_path: Path) -> None:
    """A sync of one partition (assign) continues it and leaves the others' offsets as they were."""
    work = SyncWorkload(tmp_path / "data", SEED + 1, topics=("orders",), partitions=2)
    work.write(10, leave_open=False)
    table = Table(fmt, tmp_path)
    sync(work.root, table.to, topics="orders", **table.kwargs())
    before = table.offsets()
    work.write(10, leave_open=False)
    sync(work.root, table.to, assign={"orders": [1]}, **table.kwargs())
    after = table.offsets()
    assert after["orders"][0] == before["orders"][0] and after["orders"][1] > before["orders"][1]
    check_exact(table, work, upto=after)


def _kill_runs(table: Table, work: SyncWorkload, rng: random.Random, kills: int) -> int:
    """Start ``klog sync`` and SIGKILL it at a random moment, ``kills`` times (some rounds write
    more data first); after each kill the table holds every record below its offsets once."""
    killed = 0
    attempts = 0
    latest = 2.5  # the latest kill time tried, in s: shortened while syncs finish before it
    while killed < kills:
        attempts += 1
        assert attempts < kills * 4, _seeded("the syncs kept finishing before the kill")
        if rng.random() < 0.3:
            work.write(rng.randint(5, 15))
        proc = subprocess.Popen([sys.executable, "-m", "storage_core.tools.cli", "sync", str(work.root),
                                 "--topic", "orders", "--quiet", "--commit-records", str(rng.randint(20, 80)),
                                 *table.cli()], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        time.sleep(rng.uniform(0.2, latest))
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            killed += 1
        else:
            latest = max(0.4, latest * 0.7)
        _, err = proc.communicate()
        assert proc.returncode in (0, -signal.SIGKILL), _seeded(err.decode())
        if table.version() is not None:
            check_exact(table, work)
    return killed


@pytest.mark.parametrize("fmt", FORMATS)
def test_sync_killed_at_random_moments(fmt: str, tmp_path: Path) -> None:
    """At least 10 SIGKILLs of running syncs (before, during and after writing data files and
    commits); after every one the table is consistent, and a final sync leaves every record once."""
    rng = random.Random(SEED)
    work = SyncWorkload(tmp_path / "data", SEED + 2, topics=("orders",), partitions=3)
    work.write(80)
    table = Table(fmt, tmp_path)
    assert _kill_runs(table, work, rng, kills=10) >= 10
    done = klog_cli("sync", str(work.root), "--topic", "orders", "--quiet", *table.cli())
    assert done.returncode == 0, _seeded(done.stderr)
    check_exact(table, work)
    plan = klog.plan(work.root, topics="orders", isolationLevel="read_committed")
    assert table.offsets() == {"orders": {r.topic_partition.partition: r.end for r in plan.ranges}}


@pytest.mark.parametrize("fmt", FORMATS)
def test_concurrent_syncs_commit_each_range_once(fmt: str, tmp_path: Path) -> None:
    """Two syncs of one table at once, three rounds: each commit of one is refused when the other
    committed the same partitions first (exit 2, nothing of it in the table); no record twice."""
    work = SyncWorkload(tmp_path / "data", SEED + 3, topics=("orders",), partitions=2)
    table = Table(fmt, tmp_path)
    refused = 0
    for _round in range(3):
        work.write(40)
        procs = [subprocess.Popen([sys.executable, "-m", "storage_core.tools.cli", "sync", str(work.root), "--topic",
                                   "orders", "--quiet", "--commit-records", "30", *table.cli()],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
        for proc in procs:
            _, err = proc.communicate()
            assert proc.returncode in (0, 2), _seeded(err)
            if proc.returncode == 2:
                assert "another sync" in err, err
                refused += 1
        check_exact(table, work)
    done = klog_cli("sync", str(work.root), "--topic", "orders", "--quiet", *table.cli())
    assert done.returncode == 0, _seeded(done.stderr)
    check_exact(table, work)
    print(f"{fmt}: {refused} of 6 concurrent syncs were refused")


# --- bad input: one line, before anything is written ------------------------------------------------


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> SyncWorkload:
    work = SyncWorkload(tmp_path_factory.mktemp("sync-small") / "data", SEED + 4, topics=("orders", "payments"),
                        partitions=2)
    work.write(8, leave_open=False)
    return work


@pytest.mark.parametrize("fmt", FORMATS)
def test_another_topics_table_is_refused(fmt: str, small: SyncWorkload, tmp_path: Path) -> None:
    table = Table(fmt, tmp_path)
    sync(small.root, table.to, topics="orders", **table.kwargs())
    version = table.version()
    with pytest.raises(SyncError, match="holds the offsets of topic orders; this sync reads payments"):
        sync(small.root, table.to, topics="payments", **table.kwargs())
    assert table.version() == version
    r = klog_cli("sync", str(small.root), "--topic", "payments", *table.cli())
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "holds the offsets of topic orders" in r.stderr


@pytest.mark.parametrize("fmt", FORMATS)
def test_other_columns_are_refused(fmt: str, small: SyncWorkload, tmp_path: Path) -> None:
    table = Table(fmt, tmp_path)
    sync(small.root, table.to, topics="orders", endingOffsets={"orders": {"0": 3, "1": 3}}, **table.kwargs())
    version = table.version()
    with pytest.raises(SyncError, match="the table has no column headers"):
        sync(small.root, table.to, topics="orders", includeHeaders=True, **table.kwargs())
    assert table.version() == version


def test_unknown_catalog_and_bad_options(small: SyncWorkload, tmp_path: Path) -> None:
    r = klog_cli("sync", str(small.root), "--topic", "orders", "--format", "iceberg", "--catalog", "nowhere",
                 "--to", "kafka.orders")
    assert r.returncode == 2 and "unknown Iceberg catalog 'nowhere'" in r.stderr and r.stderr.count("\n") == 1
    with pytest.raises(InvalidOptionError, match="startingOffsets: a sync starts where the table's offsets say"):
        sync(small.root, str(tmp_path / "d"), format="delta", topics="orders", startingOffsets="earliest")
    with pytest.raises(InvalidOptionError, match="overlap"):
        sync(small.root, str(small.root / "table"), format="delta", topics="orders")
    with pytest.raises(InvalidOptionError, match="overlap"):
        sync(small.root, "kafka.orders", format="iceberg", warehouse=small.root / "wh", topics="orders")
    with pytest.raises(InvalidOptionError, match="unknown table format 'hudi'"):
        sync(small.root, str(tmp_path / "d"), format="hudi", topics="orders")
    with pytest.raises(SyncError, match="expected namespace.table"):
        sync(small.root, "orders", format="iceberg", warehouse=tmp_path / "wh", topics="orders")
    assert not (tmp_path / "d").exists() and not (small.root / "table").exists() and not (small.root / "wh").exists()


def _apply_retention(root: Path, tp_dir: str, keep_bytes: int) -> int:
    """Delete the oldest segments of one partition as retention.bytes would; the new log start."""
    cfg = LogConfig.from_properties({"segment.bytes": "4000", "retention.bytes": str(keep_bytes)})
    with Log(root / tp_dir, cfg, writable=True) as log:
        log.roll()
        assert log.delete_old_segments(), "retention deleted nothing"
        start = log.log_start_offset
    LogManager([root], writable=True).close()
    return start


@pytest.mark.parametrize("fmt", FORMATS)
def test_range_lost_to_retention(fmt: str, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Records deleted by retention since the last sync: an error naming the lost offsets, nothing
    written; with failOnDataLoss=false a warning naming them, and the sync goes on from the log start."""
    work = SyncWorkload(tmp_path / "data", SEED + 5, topics=("orders",), partitions=1)
    work.write(10, leave_open=False)
    table = Table(fmt, tmp_path)
    sync(work.root, table.to, topics="orders", **table.kwargs())
    synced = table.offsets()["orders"][0]
    work.write(60, leave_open=False)
    start = _apply_retention(work.root, "orders-0", keep_bytes=3000)
    assert start > synced
    version = table.version()
    with pytest.raises(OffsetOutOfRangeError, match=f"starting offset {synced} is below the log start offset {start}"):
        sync(work.root, table.to, topics="orders", **table.kwargs())
    assert table.version() == version
    r = klog_cli("sync", str(work.root), "--topic", "orders", *table.cli())
    assert r.returncode == 2 and f"offsets {synced}..{start - 1} were deleted" in r.stderr
    summary = sync(work.root, table.to, topics="orders", failOnDataLoss=False, **table.kwargs())
    assert f"offsets {synced}..{start - 1} are gone" in caplog.text
    assert summary.ranges[0].start == start
    held = rows_of(table.read())[("orders", 0)]
    truth = work.expected()[("orders", 0)]
    assert held == {o: kv for o, kv in truth.items() if o < synced or o >= start}


def _write_spread(root: Path, rng: random.Random, count: int, start: int) -> None:
    """``count`` records per partition of topic orders, timestamps spread over three days."""
    from storage_core.log.topic_partition import TopicPartition
    from storage_core.record.records import Record, build_batch

    with LogManager([root], writable=True, config=LogConfig.from_properties({})) as lm:
        for p in range(2):
            tp = TopicPartition("orders", p)
            lg = lm.get_log(tp) or lm.create_log(tp)
            base = lg.log_end_offset
            lg.append(build_batch([Record(base + i, start + rng.randrange(3 * 86_400_000), b"k%d" % i, b"v%d" % i)
                                   for i in range(count)]))
        lm.checkpoint()


@pytest.mark.parametrize("by", ["day", "hour"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_partitioned_by_the_record_timestamp(fmt: str, by: str, tmp_path: Path) -> None:
    rng = random.Random(SEED)
    root = tmp_path / "logs"
    root.mkdir()
    start = 1_700_000_000_000 + rng.randrange(86_400_000)
    _write_spread(root, rng, 150, start)
    table = Table(fmt, tmp_path)
    sync(root, table.to, **table.kwargs(), partition_by=by)
    _write_spread(root, rng, 100, start)
    sync(root, table.to, **table.kwargs())  # the table keeps its partitioning
    got = table.read()
    ref = klog.read_arrow(root, topics="orders").read_all().sort_by(ORDER)
    assert got.num_rows == ref.num_rows == 500, _seeded(f"{got.num_rows} rows")
    unit = 86_400_000_000 if by == "day" else 3_600_000_000
    slots = {ts // unit for ts in ref.column("timestamp").cast(pa.int64()).to_pylist()}
    if fmt == "iceberg":
        from pyiceberg.catalog import load_catalog

        cat = load_catalog("klog", type="sql", uri=f"sqlite:///{table.warehouse / 'catalog.db'}",
                           warehouse=table.warehouse.as_uri())
        tbl = cat.load_table(table.to)
        assert [(f.name, str(f.transform)) for f in tbl.spec().fields] == [(f"timestamp_{by}", by)]
        files = {task.file.partition[0] for task in tbl.scan().plan_files()}
        assert files == slots, _seeded("the data files' partitions differ from the records' days/hours")
        assert got.cast(ref.schema).equals(ref), _seeded("the partitioned table differs from read_arrow")
    else:
        from deltalake import DeltaTable

        assert DeltaTable(table.to).metadata().partition_columns == [f"timestamp_{by}"]
        derived = got.column(f"timestamp_{by}")
        stamps = got.column("timestamp").cast(pa.int64()).to_pylist()
        if by == "day":
            assert derived.cast(pa.int32()).to_pylist() == [ts // unit for ts in stamps]
        else:
            assert derived.cast(pa.int64()).to_pylist() == [ts // unit * unit for ts in stamps]
        assert len(DeltaTable(table.to).partitions()) == len(slots)
        assert got.drop_columns([f"timestamp_{by}"]).cast(ref.schema).equals(ref), _seeded("differs from read_arrow")
    # a table's partitioning is set when it is made
    other = "day" if by == "hour" else "hour"
    with pytest.raises(SyncError, match=f"is partitioned by timestamp_{by}; expected timestamp_{other}"):
        sync(root, table.to, **table.kwargs(), partition_by=other)
    with pytest.raises(InvalidOptionError, match="partition by 'week'; expected one of day, hour"):
        sync(root, table.to, **table.kwargs(), partition_by="week")


def test_iceberg_sync_that_created_the_table_loses_its_first_commit_cleanly(tmp_path: Path) -> None:
    """A sync that created the table and then lost its first commit to another sync is a conflict
    (exit 2), not an internal error: pyiceberg's commit retry refreshes the table, which the staged
    table a create transaction returns refuses (CI37, the concurrent-syncs test above, by chance)."""
    pytest.importorskip("pyiceberg")
    import pyarrow as pa

    from storage_core.errors import SyncConflictError
    from storage_core.tables.iceberg import IcebergTarget, embedded_catalog

    schema = pa.schema([pa.field("n", pa.int64())])
    first = IcebergTarget(embedded_catalog(tmp_path), "kafka.orders")
    first.prepare(schema, "orders")  # creates the table
    second = IcebergTarget(embedded_catalog(tmp_path), "kafka.orders")
    second.prepare(schema, "orders")
    second.commit(pa.table({"n": [1]}, schema=schema), {"orders": {0: 1}}, [])
    with pytest.raises(SyncConflictError, match="another sync committed first"):
        first.commit(pa.table({"n": [2]}, schema=schema), {"orders": {0: 1}}, [])
    held, _, _ = IcebergTarget(embedded_catalog(tmp_path), "kafka.orders").held([])
    assert held == {"orders": {0: 1}}
