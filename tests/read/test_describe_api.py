"""``storage_core.describe``: one row per topic-partition, the same figures as ``klog describe --json``
(one implementation, :mod:`storage_core.read.describe`), and offsets that agree with the read plan."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
import shared_fixtures as sf

import storage_core
from storage_core.errors import InvalidOptionError
from storage_core.log.config import LogConfig
from storage_core.log.log import Log
from storage_core.read.describe import DESCRIBE_SCHEMA
from storage_core.record.control import ControlRecordType, EndTransactionMarker
from storage_core.record.records import Record, build_batch, build_end_txn_marker

T0 = 1_700_000_000_000
CFG = LogConfig.from_properties({"segment.bytes": "2048", "index.interval.bytes": "256"})


def _txn(pid: int, offsets: range) -> bytes:
    return build_batch([Record(i, T0 + i, b"k", b"v") for i in offsets], producer_id=pid, producer_epoch=0,
                       base_sequence=0, is_transactional=True)


def log_dir(root: Path) -> Path:
    """orders (2 partitions, several segments, lz4 and none), payments (transactions; partition 1
    ends in an open one) and a log start offset advanced by a checkpoint."""
    for p in range(2):
        d = root / f"orders-{p}"
        d.mkdir(parents=True)
        with Log(d, CFG, writable=True) as log:
            for i in range(20):
                codec = storage_core.CompressionType.LZ4 if p == 1 and i >= 10 else storage_core.CompressionType.NONE
                log.append(build_batch([Record(j, T0 + 1000 * i + j, b"k", b"v" * 40) for j in range(5)],
                                       compression=codec))
    for p in range(2):
        d = root / f"payments-{p}"
        d.mkdir()
        with Log(d, CFG, writable=True) as log:
            log.append(_txn(7, range(0, 3)))                                    # 0-2
            log.append(build_end_txn_marker(0, T0 + 10, 0, 7, 0, EndTransactionMarker(ControlRecordType.COMMIT, 0)))
            log.append(_txn(8, range(4, 6)))                                    # 4-5
            log.append(build_end_txn_marker(0, T0 + 20, 0, 8, 0, EndTransactionMarker(ControlRecordType.ABORT, 0)))
            if p == 1:
                log.append(_txn(9, range(7, 9)))                                # 7-8: still open
    (root / "log-start-offset-checkpoint").write_text("0\n1\norders 1 42\n")
    return root


def cli_json(*args: str) -> list[dict[str, object]]:
    res = subprocess.run([sys.executable, "-m", "storage_core.tools.cli", "describe", *args, "--json"],
                         capture_output=True, text=True)
    assert res.returncode == 0 or (res.returncode == 1 and "LOST DATA" in res.stderr), res.stderr
    rows: list[dict[str, object]] = json.loads(res.stdout)
    return rows


def _ms(v: dt.datetime | None) -> int | None:
    return None if v is None else round(v.timestamp() * 1000)


def test_describe_is_what_the_cli_reports(tmp_path: Path) -> None:
    d = log_dir(tmp_path)
    table = storage_core.describe(d)
    assert isinstance(table, pa.Table) and table.schema == DESCRIBE_SCHEMA
    rows = table.to_pylist()
    assert [(r["topic"], r["partition"]) for r in rows] == [("orders", 0), ("orders", 1), ("payments", 0),
                                                            ("payments", 1)]
    cli = cli_json(str(d))
    assert len(cli) == len(rows)
    for r, c in zip(rows, cli, strict=True):
        mine = {**r, "first_timestamp": _ms(r["first_timestamp"]), "max_timestamp": _ms(r["max_timestamp"])}
        assert mine == c
    by = {(r["topic"], r["partition"]): r for r in rows}
    o0, o1 = by[("orders", 0)], by[("orders", 1)]
    assert (o0["start_offset"], o0["end_offset"], o0["estimated_records"]) == (0, 100, 100)
    assert (o1["start_offset"], o1["end_offset"], o1["estimated_records"]) == (42, 100, 58)  # the checkpoint
    assert o0["segments"] > 1 and o0["codecs"] == ["none"] and o1["codecs"] == ["lz4", "none"]
    assert o0["size_bytes"] == sum(f.stat().st_size for f in (d / "orders-0").glob("*.log"))
    assert _ms(o0["first_timestamp"]) == T0 and _ms(o0["max_timestamp"]) == T0 + 19004
    assert o0["path"] == str(d / "orders-0")
    assert o0["last_stable_offset"] == 100
    p0, p1 = by[("payments", 0)], by[("payments", 1)]
    assert (p0["end_offset"], p0["last_stable_offset"]) == (7, 7)
    assert (p1["end_offset"], p1["last_stable_offset"]) == (9, 7)  # the open transaction begins at 7


def test_describe_agrees_with_the_plan(tmp_path: Path) -> None:
    d = log_dir(tmp_path)
    rows = {(r["topic"], r["partition"]): r for r in storage_core.describe(d).to_pylist()}
    for level, end in (("read_uncommitted", "end_offset"), ("read_committed", "last_stable_offset")):
        ranges = storage_core.plan(d, isolationLevel=level).ranges
        assert {(r.topic_partition.topic, r.topic_partition.partition): (r.start, r.end) for r in ranges} == {
            k: (r["start_offset"], r[end]) for k, r in rows.items()}


def test_selection_options(tmp_path: Path) -> None:
    d = log_dir(tmp_path)

    def chosen(**options: object) -> list[tuple[str, int]]:
        return [(r["topic"], r["partition"]) for r in storage_core.describe(d, **options).to_pylist()]

    assert chosen(topics="payments") == [("payments", 0), ("payments", 1)]
    assert chosen(topics=["orders", "payments"]) == chosen()
    assert chosen(subscribe="orders") == [("orders", 0), ("orders", 1)]
    assert chosen(topicPattern="pay.*") == chosen(TOPICPATTERN="pay.*") == [("payments", 0), ("payments", 1)]
    assert chosen(assign={"orders": [1], "payments": [0]}) == [("orders", 1), ("payments", 0)]
    assert chosen(topicPattern="nothing") == []
    assert chosen() == [(r["topic"], r["partition"]) for r in cli_json(str(d))]
    # a partition dir, several log dirs
    assert chosen() == [(r["topic"], r["partition"]) for r in storage_core.describe([d]).to_pylist()]
    assert storage_core.describe(d / "orders-1").column("start_offset").to_pylist() == [42]
    assert storage_core.describe(str(d / "orders-1")).column("end_offset").to_pylist() == [100]
    with pytest.raises(InvalidOptionError, match="no such topic .*: absent"):
        storage_core.describe(d, topics="absent")
    with pytest.raises(InvalidOptionError, match="describe takes only .* not endingOffsets, startingTimestamp"):
        storage_core.describe(d, startingTimestamp=T0, endingOffsets="latest")


def test_empty_table_keeps_the_schema(tmp_path: Path) -> None:
    d = log_dir(tmp_path)
    empty = storage_core.describe(d, topicPattern="none")
    assert empty.num_rows == 0 and empty.schema == DESCRIBE_SCHEMA


def test_describe_is_public_and_lazy() -> None:
    assert {"describe", "plan", "read_arrow"} <= set(storage_core.__all__)
    code = ("import sys, storage_core; assert 'storage_core.read' not in sys.modules; "
            "f = storage_core.describe; assert 'storage_core.read' in sys.modules; print(f.__module__)")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "storage_core.read.describe"
    assert storage_core.describe.__doc__ and "one row per topic-partition" in storage_core.describe.__doc__


@pytest.mark.conformance
@pytest.mark.skipif(not sf.available(), reason=sf.MISSING_REASON)
def test_real_broker_dir_agrees_with_the_cli_and_the_plan() -> None:
    d = sf.KAFKA_FIXTURES / "rjmfernandes+flink-on-prem" / "43d3daa" / "data"
    if not d.is_dir():
        pytest.skip(f"{d} is not in this copy of the shared fixtures")
    rows = storage_core.describe(d).to_pylist()
    assert len(rows) > 10
    cli = {(c["topic"], c["partition"]): c for c in cli_json(str(d))}
    for r in rows:
        c = cli[(r["topic"], r["partition"])]
        assert (r["start_offset"], r["end_offset"], r["last_stable_offset"], r["size_bytes"]) == (
            c["start_offset"], c["end_offset"], c["last_stable_offset"], c["size_bytes"])
        assert _ms(r["first_timestamp"]) == c["first_timestamp"]
    # issue 30: partitions whose .log files are not in this copy while their checkpoints and snapshots
    # say they held data (customers-0: offsets up to 17,081) are lost data, not empty partitions
    lost = {(r["topic"], r["partition"]) for r in rows if r["lost"]}
    assert ("customers", 0) in lost
    assert any("offsets 0..17080 of customers-0 are lost" in x for r in rows if (r["topic"], r["partition"]) == ("customers", 0)
               for x in r["lost"])
    with pytest.raises(storage_core.DataLossError, match="offsets"):
        storage_core.plan(d, isolationLevel="read_committed")
    ranges = {(g.topic_partition.topic, g.topic_partition.partition): (g.start, g.end)
              for g in storage_core.plan(d, isolationLevel="read_committed", failOnDataLoss="false").ranges}
    assert ranges == {(r["topic"], r["partition"]): (r["start_offset"], r["last_stable_offset"]) for r in rows
                      if (r["topic"], r["partition"]) not in lost}


def test_codecs_are_every_codec_of_the_batches(tmp_path: Path) -> None:
    """One segment whose first batch is lz4 and whose others are zstd and gzip (a producer that changed
    its compression.type): describe lists all three, from the batch headers (issue 56: it showed the
    first batch's codec only)."""
    d = tmp_path / "mixed-0"
    d.mkdir()
    codecs = [storage_core.CompressionType.LZ4] + [storage_core.CompressionType.ZSTD] * 30 + \
             [storage_core.CompressionType.GZIP]
    with Log(d, LogConfig.from_properties({}), writable=True) as log:
        for i, codec in enumerate(codecs):
            log.append(build_batch([Record(j, T0 + i, b"k", b"v" * 40) for j in range(3)], compression=codec))
        assert len(log.segments) == 1
    (row,) = storage_core.describe(tmp_path).to_pylist()
    assert row["codecs"] == ["gzip", "lz4", "zstd"]
    (cli,) = cli_json(str(tmp_path))
    assert cli["codecs"] == ["gzip", "lz4", "zstd"]
