"""Conformance with Kafka's own decoding of real broker data (``shared/fixtures/kafka``).

For every record-set file there, Kafka's ``FileRecords`` produced ``*.expected.jsonl``; klog must
produce the same lines with ``klog dump --jsonl``, and its columnar decoder (native kernel and
pure Python) must yield the same data records (control records left out, as consumers see them).
"""

from __future__ import annotations

import base64
import io
import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
import shared_fixtures as sf

from storage_core.errors import KlogError
from storage_core.record.columnar import ArrowDecoder
from storage_core.record.file_records import FileRecords
from storage_core.record.scan import decode_file_range
from storage_core.tools.dump import dump_jsonl

pytestmark = pytest.mark.conformance

FILES = sf.record_set_files()
needs_shared = pytest.mark.skipif(not sf.available(), reason=sf.MISSING_REASON)


def test_fixture_inventory() -> None:
    if not sf.available():
        pytest.skip(sf.MISSING_REASON)
    # docs/compatibility.md: 175 record-set files (118 .log, 49 .records, 8 .checkpoint)
    assert len(FILES) == 175
    assert sum(1 for f in FILES if f.suffix == ".log") == 118


@needs_shared
@pytest.mark.parametrize("path", sf.params(FILES, "record-set files with Kafka's decoding"))
def test_dump_jsonl_equals_kafka(path: Path) -> None:
    out = io.StringIO()
    dump_jsonl(path, out)
    got = out.getvalue().splitlines()
    expected = sf.expected_lines(path)
    assert len(got) == len(expected)
    for i, (g, e) in enumerate(zip(got, expected, strict=True)):
        assert g == e, f"line {i} differs"


def _expected_data_records(path: Path) -> list[dict[str, object]]:
    rows = []
    for line in sf.expected_lines(path):
        obj = json.loads(line)
        if "error" in obj:
            break
        if obj["is_control"] or obj["offset"] is None:
            continue
        rows.append(obj)
    return rows


@needs_shared
@pytest.mark.parametrize("mode", ["kernel", "python", "bulk"])
@pytest.mark.parametrize("path", sf.params(FILES, "record-set files with Kafka's decoding"))
def test_columnar_decode_equals_kafka(path: Path, mode: str) -> None:
    """Every record Kafka's FileRecords reads, decoded batch by batch by the kernel and by its
    pure-Python twin, and in bulk (``decode_file_range``, what Spark reads go through)."""
    expected = _expected_data_records(path)
    dec = ArrowDecoder("t", 7, include_headers=True, include_metadata=True, native=mode != "python")
    parts = []
    try:
        if mode == "bulk":
            # small chunks: batches cross chunk ends, and some are larger than a chunk
            parts += decode_file_range(FileRecords(path), 0, None, dec, flush_rows=1, chunk_bytes=4096)
        else:
            for batch in FileRecords(path).batches():
                dec.add(batch)
    except KlogError:
        pass  # the expected file stops at the same batch; what came before must match
    table = pa.Table.from_batches([*parts, dec.finish()])
    assert table.num_rows == len(expected)
    offsets = table.column("offset").to_pylist()
    ts = table.column("timestamp").cast("int64").to_pylist()
    keys = table.column("key").to_pylist()
    values = table.column("value").to_pylist()
    headers = table.column("headers").to_pylist()
    ts_type = table.column("timestampType").to_pylist()
    base = table.column("batchBaseOffset").to_pylist()
    pids = table.column("producerId").to_pylist()
    codec = table.column("compression").to_pylist()
    labels = {"CreateTime": 0, "LogAppendTime": 1, "NoTimestampType": -1}

    def b64(b: bytes | None) -> str | None:
        return None if b is None else base64.b64encode(b).decode()

    for i, e in enumerate(expected):
        assert offsets[i] == e["offset"]
        assert ts[i] == e["timestamp"] * 1000
        assert b64(keys[i]) == e["key_b64"]
        assert b64(values[i]) == e["value_b64"]
        want_headers = [[h["key"], b64(h["value"])] for h in headers[i]] if headers[i] else []
        assert want_headers == e["headers"]
        assert headers[i] is None or len(headers[i]) > 0  # no headers -> null, as Spark's Kafka source
        assert ts_type[i] == labels[str(e["timestamp_type"])]
        assert base[i] == e["batch_base_offset"]
        assert pids[i] == e["producer_id"]
        assert codec[i] == e["compression"]
    assert table.column("topic").to_pylist() == ["t"] * len(expected)
    assert table.column("partition").to_pylist() == [7] * len(expected)


@needs_shared
def test_cli_dump_jsonl_on_a_fixture() -> None:
    path = sf.KAFKA_FIXTURES / "generated-by-kafka-clients-4.3.0" / "v2-txn-markers.log"
    res = subprocess.run([sys.executable, "-m", "storage_core.tools.cli", "dump", "--jsonl", str(path)],
                         capture_output=True, text=True, check=True)
    assert res.stdout.splitlines() == sf.expected_lines(path)


@needs_shared
def test_corrupt_capture_exits_1_with_error_line() -> None:
    path = next(p for p in FILES if "invalid_crc" in str(p))
    res = subprocess.run([sys.executable, "-m", "storage_core.tools.cli", "dump", "--jsonl", str(path)],
                         capture_output=True, text=True)
    assert res.returncode == 1
    assert res.stdout.splitlines() == sf.expected_lines(path)
    assert "Record is corrupt" in res.stderr and str(path) in res.stderr
