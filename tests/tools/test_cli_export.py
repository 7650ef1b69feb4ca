"""``klog export``: success (whole topic, offset and time ranges, headers, read_committed, equal to
the Spark source), bad path, corrupt data, wrong arguments — exit codes and messages."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from storage_core.log.config import LogConfig
from storage_core.log.log import Log
from storage_core.record.columnar import kafka_schema
from storage_core.record.control import ControlRecordType, EndTransactionMarker
from storage_core.record.records import Header, Record, build_batch, build_end_txn_marker

T0 = 1_700_000_000_000  # 2023-11-14T22:13:20Z
CFG = LogConfig.from_properties({"segment.bytes": "2048", "index.interval.bytes": "256"})


def klog(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "storage_core.tools.cli", *args], capture_output=True, text=True,
                          env=None if env is None else {**os.environ, **env})


def log_dir(root: Path) -> Path:
    """Topic ``orders``: 2 partitions of 100 records, one a second from T0 (offset i at T0 + i s)."""
    for p in range(2):
        d = root / f"orders-{p}"
        d.mkdir(parents=True)
        with Log(d, CFG, writable=True) as log:
            for i in range(20):
                log.append(build_batch([Record(j, T0 + 1000 * (5 * i + j), b"k%d" % p, b"v%d-%d" % (p, 5 * i + j),
                                               (Header("h", b"x"),)) for j in range(5)]))
    return root


def test_export_whole_topic(tmp_path: Path) -> None:
    d = log_dir(tmp_path / "data")
    out = tmp_path / "orders.parquet"
    res = klog("export", str(d), "--topic", "orders", "-o", str(out))
    assert res.returncode == 0, res.stderr
    assert res.stderr == ""
    assert res.stdout.splitlines()[-1].startswith("exported 200 records (")
    assert f"from 2 partitions) to {out} (" in res.stdout
    t = pq.read_table(out)
    assert t.schema.equals(kafka_schema())
    assert t.num_rows == 200
    rows = t.to_pylist()
    assert [(r["partition"], r["offset"]) for r in rows] == [(p, o) for p in range(2) for o in range(100)]
    assert rows[7]["value"] == b"v0-7" and rows[7]["key"] == b"k0" and rows[7]["topic"] == "orders"
    assert int(rows[7]["timestamp"].timestamp() * 1000) == T0 + 7000 and rows[7]["timestampType"] == 0
    assert not any(p.name.startswith(".") for p in tmp_path.iterdir())  # no temp file left


def test_export_time_range_iso_and_ms_partition_headers(tmp_path: Path) -> None:
    d = log_dir(tmp_path / "data")
    out = tmp_path / "w.parquet"
    res = klog("export", str(d), "--topic", "orders", "--partition", "1", "--start-time", "2023-11-14T22:13:30Z",
               "--end-time", str(T0 + 42_000), "--headers", "--metadata", "--quiet", "-o", str(out))
    assert res.returncode == 0, res.stderr
    assert res.stdout == ""
    t = pq.read_table(out)
    assert t.schema.equals(kafka_schema(True, True))
    assert t.column("offset").to_pylist() == list(range(10, 42))
    assert set(t.column("partition").to_pylist()) == {1}
    assert t.column("headers").to_pylist()[0] == [{"key": "h", "value": b"x"}]
    # naive ISO-8601 is UTC; an end time past the last record means the end of the log
    res = klog("export", str(d), "--topic", "orders", "--start-time", "2023-11-14 22:14:50", "--end-time",
               "2030-01-01", "-o", str(out), "--overwrite")
    assert res.returncode == 0, res.stderr
    assert pq.read_table(out).num_rows == 2 * 10


def test_export_dictionary_encodes_the_columns_that_repeat(tmp_path: Path) -> None:
    """Parquet's own metadata (not klog's list) says which columns were dictionary-encoded: every
    column whose values repeat (topic, partition, key, headers, batch metadata) is; the offset,
    timestamp, value and sequence, which change with every record, are written plain."""
    from storage_core.tools.export import PLAIN_COLUMNS, dictionary_columns

    d = log_dir(tmp_path / "data")
    out = tmp_path / "e.parquet"
    res = klog("export", str(d), "--topic", "orders", "--headers", "--metadata", "--quiet", "-o", str(out))
    assert res.returncode == 0, res.stderr
    meta = pq.ParquetFile(out).metadata
    encoded = {meta.row_group(0).column(i).path_in_schema: meta.row_group(0).column(i).encodings
               for i in range(meta.num_columns)}
    assert set(dictionary_columns(kafka_schema(True, True))) == {p for p in encoded if p not in PLAIN_COLUMNS}
    for path, encodings in encoded.items():
        if path == "isTransactional":  # Parquet has no dictionary for booleans
            continue
        dictionary = "RLE_DICTIONARY" in encodings or "PLAIN_DICTIONARY" in encodings
        assert dictionary == (path not in PLAIN_COLUMNS), (path, encodings)
    assert pq.read_table(out).equals(pq.read_table(out, use_threads=False))


def test_export_offset_range(tmp_path: Path) -> None:
    d = log_dir(tmp_path / "data")
    out = tmp_path / "o.parquet"
    res = klog("export", str(d), "--topic", "orders", "--start-offset", "33", "--end-offset", "77", "-o", str(out))
    assert res.returncode == 0, res.stderr
    assert "orders-0: offsets 33..77 (44 offsets)" in res.stdout
    t = pq.read_table(out)
    assert t.num_rows == 88 and min(t.column("offset").to_pylist()) == 33 and max(t.column("offset").to_pylist()) == 76
    res = klog("export", str(d), "--topic", "orders", "--start-offset", "100", "-o", str(out), "--overwrite")
    assert res.returncode == 0 and pq.read_table(out).num_rows == 0  # at the end: empty, not an error


def test_export_read_committed(tmp_path: Path) -> None:
    d = tmp_path / "data" / "pay-0"
    d.mkdir(parents=True)
    with Log(d, CFG, writable=True) as log:
        def txn(pid: int, n: int, abort: bool) -> None:
            log.append(build_batch([Record(i, T0 + i, None, b"p%d" % pid) for i in range(n)], producer_id=pid,
                                   producer_epoch=0, base_sequence=0, is_transactional=True))
            kind = ControlRecordType.ABORT if abort else ControlRecordType.COMMIT
            log.append(build_end_txn_marker(0, T0, 0, pid, 0, EndTransactionMarker(kind, 1)))
        txn(1, 3, abort=False)  # offsets 0-2, marker 3
        txn(2, 2, abort=True)  # offsets 4-5, marker 6
        log.append(build_batch([Record(0, T0 + 9, None, b"plain")]))  # offset 7
        log.append(build_batch([Record(0, T0, None, b"open")], producer_id=3, producer_epoch=0, base_sequence=0,
                               is_transactional=True))  # offset 8, never committed
    out = tmp_path / "p.parquet"
    assert klog("export", str(tmp_path / "data"), "--topic", "pay", "-o", str(out)).returncode == 0
    assert pq.read_table(out).column("offset").to_pylist() == [0, 1, 2, 4, 5, 7, 8]  # markers never come out
    res = klog("export", str(tmp_path / "data"), "--topic", "pay", "--read-committed", "-o", str(out), "--overwrite")
    assert res.returncode == 0, res.stderr
    assert pq.read_table(out).column("offset").to_pylist() == [0, 1, 2, 7]


def test_export_bad_path(tmp_path: Path) -> None:
    res = klog("export", str(tmp_path / "nope"), "--topic", "orders", "-o", str(tmp_path / "x.parquet"))
    assert res.returncode == 2
    assert res.stderr.strip() == f"klog: error: no such log directory: {tmp_path / 'nope'}"
    d = log_dir(tmp_path / "data")
    res = klog("export", str(d), "--topic", "orders", "-o", str(tmp_path / "no" / "dir" / "x.parquet"))
    assert res.returncode == 2 and "no such directory for the output" in res.stderr
    res = klog("export", str(d), "--topic", "orders", "-o", str(tmp_path))
    assert res.returncode == 2 and "is a directory; expected a file name" in res.stderr


def test_export_corrupt_batch_writes_nothing(tmp_path: Path) -> None:
    d = log_dir(tmp_path / "data")
    seg = sorted((d / "orders-1").glob("*.log"))[1]
    raw = bytearray(seg.read_bytes())
    raw[200] ^= 0x01
    seg.write_bytes(bytes(raw))
    out = tmp_path / "x.parquet"
    # not shut down cleanly: the read-only open finds the damage (Kafka's recovery would cut the log there)
    res = klog("export", str(d), "--topic", "orders", "-o", str(out))
    assert res.returncode == 1
    assert res.stderr.startswith(f"klog: error: data in the middle of {d / 'orders-1'} is unreadable: {seg}")
    assert "Record is corrupt" in res.stderr and "Traceback" not in res.stderr and len(res.stderr.splitlines()) == 1
    assert not out.exists() and list(tmp_path.glob(".x.parquet*")) == []
    # shut down cleanly: the segment is trusted at open, the CRC check of the export finds it
    (d / ".kafka_cleanshutdown").touch()
    res = klog("export", str(d), "--topic", "orders", "-o", str(out))
    assert res.returncode == 1
    assert f"file {seg}, position " in res.stderr and "Record is corrupt" in res.stderr
    assert not out.exists() and list(tmp_path.glob(".x.parquet*")) == []
    res = klog("export", str(d), "--topic", "orders", "--debug", "-o", str(out))
    assert res.returncode == 1 and "Traceback" in res.stderr
    # partition 0 is fine
    assert klog("export", str(d), "--topic", "orders", "--partition", "0", "-o", str(out)).returncode == 0


def test_export_torn_tail_is_a_warning(tmp_path: Path) -> None:
    d = log_dir(tmp_path / "data")
    seg = sorted((d / "orders-0").glob("*.log"))[-1]
    seg.write_bytes(seg.read_bytes()[:-7])
    out = tmp_path / "x.parquet"
    res = klog("export", str(d), "--topic", "orders", "-o", str(out))
    assert res.returncode == 0, res.stderr
    assert res.stderr.startswith("warning: orders-0: ") and "(torn tail)" in res.stderr
    assert pq.read_table(out).num_rows == 195


@pytest.mark.parametrize(("args", "message"), [
    (["--topic", "nope"], "no such topic in {d}: nope; topics there: orders"),
    (["--topic", "order"], "no such topic in {d}: order (did you mean orders?); topics there: orders"),
    (["--topic", "orders", "--partition", "7"], "--partition names partitions that do not exist: orders-7 (in {d}: orders has partitions 0, 1)"),
    (["--topic", "orders", "--start-offset", "999999"], "orders-0: starting offset 999999 is past the end of the log"),
    (["--topic", "orders", "--start-time", "2100-01-01"], "no record at or after timestamp 4102444800000 in orders-0 "
     "(--if-past-end error); use --if-past-end latest to start at the end instead"),
    (["--topic", "orders", "--start-time", "yesterday"], "--start-time: 'yesterday' is not a time; expected epoch"),
    (["--topic", "orders", "--start-time", "1", "--start-offset", "3"], "a start offset and a start time were both given; expected one of them"),
    (["--topic", "orders", "--start-offset", "9", "--end-offset", "3"], "end offset 3 is before start offset 9"),
    (["--topic", "orders", "--start-offset", "-1"], "start offset must be >= 0, got -1"),
    (["--topic", "orders", "--compression", "rar"], "unknown Parquet compression 'rar'; expected one of"),
])
def test_export_wrong_argument(tmp_path: Path, args: list[str], message: str) -> None:
    d = log_dir(tmp_path / "data")
    out = tmp_path / "x.parquet"
    res = klog("export", str(d), *args, "-o", str(out))
    assert res.returncode == 2, res.stderr
    assert res.stderr.startswith("klog: error: " + message.format(d=d)), res.stderr
    assert "Traceback" not in res.stderr and not out.exists()


def test_export_start_time_past_the_end_with_if_past_end_latest(tmp_path: Path) -> None:
    """Spark's startingOffsetsByTimestampStrategy=latest on the CLI: a start time after the last
    record starts each partition at its end (the "last hour" of an old copy is empty, not an error)."""
    d = log_dir(tmp_path / "data")
    out = tmp_path / "x.parquet"
    res = klog("export", str(d), "--topic", "orders", "--start-time", "2100-01-01", "--if-past-end", "latest",
               "-o", str(out))
    assert res.returncode == 0, res.stderr
    assert pq.read_table(out).num_rows == 0
    res = klog("export", str(d), "--topic", "orders", "--start-time", "0", "--if-past-end", "latest",
               "-o", str(out), "--overwrite")
    assert res.returncode == 0 and pq.read_table(out).num_rows > 0


def test_export_argparse_errors_and_existing_output(tmp_path: Path) -> None:
    d = log_dir(tmp_path / "data")
    res = klog("export", str(d), "-o", str(tmp_path / "x.parquet"))
    assert res.returncode == 2 and "the following arguments are required: --topic" in res.stderr
    res = klog("export", str(d), "--topic", "orders", "--start-offset", "ten", "-o", "x")
    assert res.returncode == 2 and "argument --start-offset: invalid int value: 'ten'" in res.stderr
    out = tmp_path / "x.parquet"
    out.write_bytes(b"keep me")
    res = klog("export", str(d), "--topic", "orders", "-o", str(out))
    assert res.returncode == 2 and "exists; pass --overwrite to replace it" in res.stderr
    assert out.read_bytes() == b"keep me"


def test_export_progress_bar_on_stderr(tmp_path: Path) -> None:
    d = log_dir(tmp_path / "data")
    res = klog("export", str(d), "--topic", "orders", "-o", str(tmp_path / "x.parquet"), env={"KLOG_PROGRESS": "1"})
    assert res.returncode == 0
    assert "export orders:" in res.stderr and "%|" in res.stderr and "B/s]" in res.stderr
    res = klog("export", str(d), "--topic", "orders", "-o", str(tmp_path / "y.parquet"), "--quiet",
               env={"KLOG_PROGRESS": "1"})
    assert res.returncode == 0 and res.stderr == "" and res.stdout == ""


def test_export_help_has_examples() -> None:
    res = klog("export", "--help")
    assert res.returncode == 0
    assert "examples:" in res.stdout and "--start-time 2026-11-22T10:00Z" in res.stdout and "exit codes:" in res.stdout


@pytest.mark.spark
def test_export_equals_spark_read(tmp_path: Path, spark) -> None:  # type: ignore[no-untyped-def]
    d = log_dir(tmp_path / "data")
    out = tmp_path / "x.parquet"
    start, end = T0 + 12_500, T0 + 61_000
    assert klog("export", str(d), "--topic", "orders", "--start-time", str(start), "--end-time", str(end),
                "--headers", "-o", str(out)).returncode == 0
    df = (spark.read.format("klog").option("topics", "orders").option("startingTimestamp", str(start))
          .option("endingTimestamp", str(end)).option("includeHeaders", "true").load(str(d)))
    from_spark = sorted(tuple(r) for r in df.collect())
    from_parquet = sorted(tuple(r) for r in spark.read.parquet(str(out)).collect())
    assert len(from_spark) == 2 * 48
    assert from_parquet == from_spark
    assert spark.read.parquet(str(out)).schema == df.schema


def test_export_per_partition_cli(tmp_path: Path) -> None:
    d = log_dir(tmp_path / "data")
    out = tmp_path / "orders"
    res = klog("export", str(d), "--topic", "orders", "--per-partition", "-o", str(out), "--start-offset", "90")
    assert res.returncode == 0, res.stderr
    assert f"from 2 partitions) to {out} (2 files, " in res.stdout.splitlines()[-1]
    assert sorted(p.name for p in out.iterdir()) == ["orders-0.parquet", "orders-1.parquet"]
    for p in range(2):
        t = pq.read_table(out / f"orders-{p}.parquet")
        assert t.schema.equals(kafka_schema())
        assert [(r["partition"], r["offset"]) for r in t.to_pylist()] == [(p, o) for o in range(90, 100)]
    # a directory that is not empty: refused, unless it holds only an earlier export's files
    res = klog("export", str(d), "--topic", "orders", "--per-partition", "-o", str(out))
    assert res.returncode == 2
    assert f"output directory {out} is not empty (it holds orders-0.parquet); pass --overwrite" in res.stderr
    res = klog("export", str(d), "--topic", "orders", "--per-partition", "-o", str(out), "--overwrite",
               "--partition", "1")
    assert res.returncode == 0, res.stderr
    assert [p.name for p in out.iterdir()] == ["orders-1.parquet"]  # the earlier export's other file is gone
    assert pq.read_table(out / "orders-1.parquet").num_rows == 100
    (out / "notes.txt").write_text("mine")
    res = klog("export", str(d), "--topic", "orders", "--per-partition", "-o", str(out), "--overwrite")
    assert res.returncode == 2 and "holds notes.txt, which is not an exported Parquet file" in res.stderr
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt", "orders-1.parquet"]
    # a file where the directory should be, and a parent that does not exist
    res = klog("export", str(d), "--topic", "orders", "--per-partition", "-o", str(out / "notes.txt"))
    assert res.returncode == 2 and "is a file; --per-partition writes a file per partition" in res.stderr
    res = klog("export", str(d), "--topic", "orders", "--per-partition", "-o", str(tmp_path / "no" / "such"))
    assert res.returncode == 2 and "no such directory for the output" in res.stderr
    # an empty range still gets its file, of no rows
    empty = tmp_path / "empty"
    res = klog("export", str(d), "--topic", "orders", "--per-partition", "-o", str(empty), "--start-offset", "100")
    assert res.returncode == 0, res.stderr
    assert [pq.read_table(empty / f"orders-{p}.parquet").num_rows for p in range(2)] == [0, 0]
