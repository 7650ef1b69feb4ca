"""klog dump with kafka-dump-log's decoders: the shape of its lines, automatic choice by the
partition dir's name, --skip-record-metadata, --jsonl's decoded key and value, KRaft snapshots,
and undecodable records shown with their offset and bytes."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

import pytest
import shared_fixtures as sf
from message_encoder import encode

from storage_core.record.messages import coordinator
from storage_core.record.records import Record, build_batch


def klog(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "storage_core.tools.cli", *args], capture_output=True, text=True)


RJM = sf.KAFKA_FIXTURES / "rjmfernandes+flink-on-prem" / "43d3daa" / "data"
needs_fixtures = pytest.mark.skipif(not sf.available(), reason=sf.MISSING_REASON)


@needs_fixtures
def test_offsets_decoded_by_dir_name() -> None:
    res = klog("dump", "--print-data-log", str(RJM / "__consumer_offsets-36"))
    assert res.returncode == 0, res.stderr
    line = next(x for x in res.stdout.splitlines() if x.startswith("| offset: 0 "))
    assert line.endswith(' key: {"type":"1","data":{"group":"_confluent-controlcenter-7-6-0-1",'
                         '"topic":"_confluent-monitoring","partition":0}} payload: {"version":"3","data":{"offset":0,'
                         '"leaderEpoch":-1,"metadata":"","commitTimestamp":1713533411797}}')
    raw = klog("dump", "--print-data-log", "--no-decoder", str(RJM / "__consumer_offsets-36"))
    assert '"type"' not in raw.stdout


@needs_fixtures
def test_snapshot_and_skip_record_metadata() -> None:
    snap = RJM / "__cluster_metadata-0" / "00000000000000007752-0000000001.checkpoint"
    res = klog("dump", "--cluster-metadata-decoder", str(snap))
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[1] == "Snapshot end offset: 7752, epoch: 1"
    assert lines[3].endswith(' SnapshotHeader {"version":0,"lastContainedLogTimestamp":1713537222197}')
    assert any(x.endswith('payload: {"type":"FEATURE_LEVEL_RECORD","version":0,"data":{"name":"metadata.version",'
                          '"featureLevel":14}}') for x in lines)
    skip = klog("dump", "--print-data-log", "--skip-record-metadata", str(snap)).stdout.splitlines()
    # as kafka-dump-log 4.4.0 prints it: batch lines stay, a control record's line is empty, a
    # payload without a key follows "| " (4.1.1 printed one space: dump_text.RELEASE_DIFFERENCES)
    assert skip[2].startswith("baseOffset: 0 lastOffset: 0 ") and skip[3] == ""
    assert skip[4].startswith("baseOffset: 1 lastOffset: 583 ")
    assert skip[5] == '| payload: {"type":"FEATURE_LEVEL_RECORD","version":0,"data":{"name":"metadata.version",' \
                      '"featureLevel":14}}'


@needs_fixtures
def test_jsonl_has_decoded_key_and_value() -> None:
    res = klog("dump", "--jsonl", str(RJM / "__consumer_offsets-36"))
    first = json.loads(res.stdout.splitlines()[0])
    assert first["key"]["type"] == "1" and first["value"]["version"] == "3"
    plain = {k: v for k, v in first.items() if k not in ("key", "value")}
    assert json.dumps(plain, separators=(",", ":")) == sf.expected_lines(
        next((RJM / "__consumer_offsets-36").glob("*.log")))[0]


def _segment(tmp_path: Path, records: list[tuple[bytes | None, bytes | None]]) -> Path:
    d = tmp_path / "__consumer_offsets-3"
    d.mkdir()
    path = d / "00000000000000000000.log"
    path.write_bytes(build_batch([Record(offset=i, timestamp=1, key=k, value=v)
                                  for i, (k, v) in enumerate(records)]))
    return path


def test_garbage_is_shown_with_offset_and_bytes(tmp_path: Path) -> None:
    key = struct.pack(">h", 1) + encode(coordinator.OFFSET_COMMIT_KEY, 0, {"group": "g", "topic": "t", "partition": 0})
    path = _segment(tmp_path, [(key, b"\x00\x03\x00"), (b"\x00\x63zz", b"\x00"), (key, None)])
    res = klog("dump", "--print-data-log", str(path))
    assert res.returncode == 0, res.stderr
    lines = [x for x in res.stdout.splitlines() if x.startswith("|")]
    assert "key: Error at offset 0, skipping. OffsetCommitValue v3: field offset needs 8 bytes" in lines[0]
    assert "raw value: AAMA" in lines[0]
    assert "key: Error at offset 1, skipping. unknown record type 99" in lines[1] and "raw key: AGN6eg==" in lines[1]
    assert lines[2].endswith("payload: <DELETE>")
    rows = [json.loads(x) for x in klog("dump", "--jsonl", str(path)).stdout.splitlines()]
    assert rows[0]["value"]["raw"] == "AAMA" and rows[1]["key"]["type"] == "99" and rows[2]["value"] is None
