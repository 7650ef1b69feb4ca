"""The public Python API (``storage_core.read_arrow``) and ``klog export`` on real broker log dirs.

Every partition directory of the shared fixtures is read whole through the read planner and the
bulk piece reader, by the API and by export, and compared with Kafka's own decoding of its
segments (``*.expected.jsonl``, made by kafka-clients' ``FileRecords``): the data records from the
log start offset (``log-start-offset-checkpoint``) on, control records left out.
"""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import shared_fixtures as sf

import storage_core
from storage_core.errors import InvalidOptionError, OffsetOutOfRangeError
from storage_core.tools.export import ExportRequest, export_parquet, plan_export

pytestmark = pytest.mark.conformance
needs_shared = pytest.mark.skipif(not sf.available(), reason=sf.MISSING_REASON)


def _partition_dirs() -> list[Path]:
    if not sf.available():
        return []
    out = set()
    for log in sf.KAFKA_FIXTURES.rglob("*.log"):
        d = log.parent
        if "captures" in d.parts or "vectors" in d.parts or d.name.startswith("generated"):
            continue
        if (log.with_name(log.name + ".expected.jsonl").exists()
                or log.with_name(log.name + ".expected.jsonl.gz").exists()):
            out.add(d)
    return sorted(out)


DIRS = _partition_dirs()


def _log_start(d: Path) -> int | None:
    ckpt = d.parent / "log-start-offset-checkpoint"
    if not ckpt.exists():
        return None
    topic, _, part = d.name.rpartition("-")
    for line in ckpt.read_text().splitlines()[2:]:
        fields = line.split()
        if len(fields) == 3 and fields[0] == topic and fields[1] == part:
            return int(fields[2])
    return None


def _expected(d: Path) -> list[tuple[int, str | None, str | None, int]]:
    """(offset, key b64, value b64, timestamp ms) of every data record Kafka decodes, in offset order."""
    rows = []
    for log in sorted(d.glob("*.log")):
        for line in sf.expected_lines(log):
            obj = json.loads(line)
            if "error" in obj:
                break
            if obj["is_control"] or obj["offset"] is None:
                continue
            rows.append((obj["offset"], obj["key_b64"], obj["value_b64"], obj["timestamp"]))
    start = _log_start(d)
    return [r for r in rows if start is None or r[0] >= start]


def _rows(table: pa.Table) -> list[tuple[int, str | None, str | None, int]]:
    def b64(b: bytes | None) -> str | None:
        return None if b is None else base64.b64encode(b).decode()

    return [(o, b64(k), b64(v), t) for o, k, v, t in zip(
        table.column("offset").to_pylist(), table.column("key").to_pylist(), table.column("value").to_pylist(),
        table.column("timestamp").cast("int64").to_pylist(), strict=True)]


def _ms(rows: list[tuple[int, str | None, str | None, int]]) -> list[tuple[int, str | None, str | None, int]]:
    return [(o, k, v, t // 1000) for o, k, v, t in rows]


@needs_shared
@pytest.mark.parametrize("d", sf.params(DIRS, "partition dirs with Kafka's decoding"))
def test_read_arrow_equals_kafka(d: Path) -> None:
    reader = storage_core.read_arrow(d, includeHeaders=True)
    table = reader.read_all()
    assert table.schema == reader.schema
    assert _ms(_rows(table)) == _expected(d)
    topic, _, part = d.name.rpartition("-")
    assert set(table.column("topic").to_pylist()) <= {topic}
    assert set(table.column("partition").to_pylist()) <= {int(part)}


@needs_shared
@pytest.mark.parametrize("d", sf.params(DIRS, "partition dirs with Kafka's decoding"))
def test_export_equals_kafka(d: Path, tmp_path: Path) -> None:
    topic = d.name.rpartition("-")[0]
    req = ExportRequest(log_dirs=(str(d),), topic=topic)
    out = tmp_path / "x.parquet"
    export_parquet(req, plan_export(req), out)
    assert _ms(_rows(pq.read_table(out))) == _expected(d)


def test_read_arrow_rejects_bad_options(tmp_path: Path) -> None:
    with pytest.raises(InvalidOptionError, match="unknown option 'startingOffset'"):
        storage_core.read_arrow(tmp_path, startingOffset="earliest")
    with pytest.raises(InvalidOptionError, match="isolationLevel"):
        storage_core.read_arrow(tmp_path, isolationLevel="serializable")


@needs_shared
def test_read_arrow_ranges_follow_the_spark_source() -> None:
    d = sf.KAFKA_FIXTURES / "SharaWeil+kafka-0.11.0" / "b397ead" / "data"
    full = storage_core.read_arrow(d, topics="test0").read_all()
    assert full.num_rows == 33
    part = storage_core.read_arrow(d, topics="test0", startingOffsets={"test0": {"0": 3, "1": -2, "2": 10}},
                                   endingOffsets={"test0": {"0": 5, "1": -1, "2": -1}}).read_all()
    assert sorted(zip(part.column("partition").to_pylist(), part.column("offset").to_pylist(), strict=True)) == \
        [(0, 3), (0, 4)] + [(1, o) for o in range(11)] + [(2, 10)]
    with pytest.raises(OffsetOutOfRangeError, match="past the end of the log"):
        storage_core.read_arrow(d, topics="test0", startingOffsets={"test0": {"0": 100, "1": -2, "2": -2}})
    with pytest.raises(InvalidOptionError, match="test0-7"):
        storage_core.read_arrow(d, topics="test0", endingOffsets={"test0": {"0": 5, "1": 5, "2": 5, "7": 5}})
    with pytest.raises(InvalidOptionError, match=r"do not exist.*test0-7"):
        storage_core.read_arrow(d, endingOffsets={"test0": {"7": 5}})
    with pytest.raises(InvalidOptionError, match=r"do not exist: test0-7 \(in .*: test0 has partitions 0, 1, 2\)"):
        storage_core.read_arrow(d, topics="test0", endingOffsets={"test0": {"0": 5, "1": 5, "2": 5, "7": 5}})
    with pytest.raises(InvalidOptionError, match=r"does not list test0-2"):
        storage_core.read_arrow(d, topics="test0", startingOffsets={"test0": {"0": 1, "1": 1}})


@pytest.mark.parametrize("fail_on_data_loss", ["true", "false"])
def test_a_start_from_a_timestamp_past_the_ending_offset_fails_as_sparks_source(tmp_path: Path,
                                                                               fail_on_data_loss: str) -> None:
    """Spark's Kafka source asserts each partition's start at or before its end (KafkaSourceRDD.compute),
    whatever failOnDataLoss says: a startingTimestamp whose offset lies past one partition's
    endingOffsets fails the read rather than return the other partitions' records."""
    from storage_core.log.log import Log
    from storage_core.record.records import Record, build_batch

    t0 = 1_700_000_000_000
    for p in (0, 1):
        (tmp_path / f"t-{p}").mkdir()
        with Log(tmp_path / f"t-{p}", writable=True) as lg:
            for i in range(60):
                lg.append(build_batch([Record(0, t0 + i * 10, None, b"v%d" % i)]), now_ms=t0)
    opts = {"topics": "t", "startingTimestamp": t0 + 500, "startingOffsetsByTimestampStrategy": "error",
            "failOnDataLoss": fail_on_data_loss}
    ok = storage_core.read_arrow(tmp_path, endingOffsets={"t": {"0": 55, "1": -1}}, **opts).read_all()
    assert ok.num_rows == 5 + 10  # 50..54 and 50..59
    with pytest.raises(InvalidOptionError, match=re.escape("t-0: beginning offset 50 is after the ending offset 20")):
        storage_core.read_arrow(tmp_path, endingOffsets={"t": {"0": 20, "1": -1}}, **opts)
