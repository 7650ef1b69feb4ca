"""Compacting copies of real compacted topics (``../shared/fixtures/kafka``): the records kept are
the ones Kafka's rules keep, computed here independently from Kafka's own decoding of the
originals (``*.expected.jsonl``) and the raw batch headers; the compacted segments are then read
by Kafka's ``FileRecords`` (tests/oracles/kafka_oracle.py) and pass ``klog verify``.

Fixture partitions usually hold one (active) segment, which Kafka never cleans: each copy is
rolled first, as a broker rolls by ``segment.ms``. Two cleanings run: the first keeps the latest
tombstones (and gives them a delete horizon), the second, past ``delete.retention.ms``, drops them.
"""

from __future__ import annotations

import base64
import json
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest
import shared_fixtures as sf
from kafka_oracle import kafka_dump, oracle_available

from storage_core.cleaner import LogCleaner
from storage_core.log.manager import LogManager
from storage_core.log.topic_configs import INTERNAL_TOPIC_CONFIGS, update_topic_configs
from storage_core.log.topic_partition import TopicPartition

pytestmark = pytest.mark.skipif(not sf.available(), reason=sf.MISSING_REASON)

#: Topics created compacted by the systems that wrote them (Kafka, Schema Registry, Connect,
#: Kafka Streams state-store changelogs, Confluent's command topic).
COMPACTED = re.compile(r"^(__consumer_offsets|__transaction_state|_schemas|_confluent-command"
                       r"|(docker-)?connect[-_](configs|offsets|status)|.*-changelog)$")
DELETE_RETENTION_MS = 86_400_000  # Kafka's default delete.retention.ms
_HEADER = struct.Struct(">qiibIhiqqqhii")  # the v2 batch header, unpacked here without klog
_DELETE_HORIZON_BIT = 0x40


def compacted_partitions() -> list[Path]:
    out = []
    for d in sorted({p.parent for p in sf.KAFKA_FIXTURES.rglob("*.log")}):
        if "captures" in d.parts or "vectors" in d.parts:
            continue
        topic = d.name.rsplit("-", 1)[0]
        if COMPACTED.match(topic):
            out.append(d)
    return out


def decoded(log_file: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in sf.expected_lines(log_file)]


def horizons(log_file: Path) -> dict[int, int | None]:
    """Batch base offset → delete horizon (attribute bit 6 and base timestamp), from the raw bytes."""
    data = log_file.read_bytes()
    out: dict[int, int | None] = {}
    pos = 0
    while pos + 12 <= len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        if pos + 12 + length > len(data) or data[pos + 16] != 2:
            break
        fields = _HEADER.unpack_from(data, pos)
        attrs, base_ts = fields[5], fields[7]
        out[base] = base_ts if attrs & _DELETE_HORIZON_BIT else None
        pos += 12 + length
    return out


def expected_records(rows: list[dict[str, object]], hz: dict[int, int | None], now: int, *,
                     second: bool) -> set[tuple[object, ...]]:
    """Kafka's record rule over the whole (rolled, so cleanable) log: aborted transactional data
    goes; keyless records go; a keyed record stays if it is the key's latest and has a value, or
    is a tombstone still within its delete horizon. On the first cleaning a tombstone's horizon is
    the one its batch already had (a broker's earlier cleaning) or none; on the second, a batch
    without one got ``first now + delete.retention.ms``, which has passed."""
    aborted: set[int] = set()
    open_txn: dict[int, list[int]] = {}
    for r in rows:
        pid = int(r["producer_id"])  # type: ignore[arg-type]
        if r["is_control"]:
            offs = open_txn.pop(pid, [])
            if r["control_type"] == "ABORT":
                aborted.update(offs)
        elif r["is_transactional"]:
            open_txn.setdefault(pid, []).append(int(r["offset"]))  # type: ignore[arg-type]
    assert not open_txn, "an open transaction: the LSO would bound the cleaning"
    data = [r for r in rows if not r["is_control"] and int(r["offset"]) not in aborted]  # type: ignore[arg-type]
    latest: dict[object, int] = {}
    for r in data:
        if r["key_b64"] is not None:
            latest[r["key_b64"]] = int(r["offset"])  # type: ignore[arg-type]
    keep = set()
    for r in data:
        off = int(r["offset"])  # type: ignore[arg-type]
        if r["key_b64"] is None or latest[r["key_b64"]] != off:
            continue
        if r["value_b64"] is None:
            h = hz.get(int(r["batch_base_offset"]))  # type: ignore[arg-type]
            within = (h is None or now < h) if not second else (h is not None and now < h)
            if not within:
                continue
        keep.add((off, r["key_b64"], r["value_b64"], r["timestamp"], r["timestamp_type"], json.dumps(r["headers"])))
    return keep


def data_of(rows: list[dict[str, object]]) -> set[tuple[object, ...]]:
    """(offset, key, value, timestamp, timestamp type, headers) of the data records; Kafka prints an
    empty batch as a line without an offset."""
    return {(int(r["offset"]), r["key_b64"], r["value_b64"], r["timestamp"], r["timestamp_type"],  # type: ignore[arg-type]
             json.dumps(r["headers"])) for r in rows if not r["is_control"] and r.get("offset") is not None}


def copy_partition(src: Path, log_dir: Path, name: str) -> Path:
    dst = log_dir / name
    dst.mkdir(parents=True)
    for f in src.iterdir():
        if f.suffix in (".log", ".index", ".timeindex", ".snapshot") or f.name == "leader-epoch-checkpoint":
            shutil.copy(f, dst / f.name)
    return dst


def test_fixture_topics_compact_as_kafka_would(tmp_path: Path) -> None:
    reason = oracle_available()
    if reason is not None:
        pytest.skip(reason)
    parts = compacted_partitions()
    assert len(parts) >= 30, [p.name for p in parts]
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    originals: dict[TopicPartition, list[dict[str, object]]] = {}
    hz: dict[TopicPartition, dict[int, int | None]] = {}
    copies: dict[TopicPartition, Path] = {}
    for i, src in enumerate(parts):
        topic = src.name.rsplit("-", 1)[0]
        name = f"{topic}-{i}"  # partitions of different repositories side by side: unique numbers
        tp = TopicPartition(topic, i)
        logs = sorted(src.glob("*.log"))
        originals[tp] = [r for f in logs for r in decoded(f)]
        hz[tp] = {b: h for f in logs for b, h in horizons(f).items()}
        copies[tp] = copy_partition(src, log_dir, name)
        if topic not in INTERNAL_TOPIC_CONFIGS:
            update_topic_configs(log_dir, topic, {"cleanup.policy": "compact"})
    # and Kafka's generated transactions (commit, abort, keyless records, four codecs, LogAppendTime)
    txn = TopicPartition("txn-fixture", 0)
    gen = sf.KAFKA_FIXTURES / "generated-by-kafka-clients-4.3.0" / "v2-txn-markers.log"
    (log_dir / "txn-fixture-0").mkdir()
    shutil.copy(gen, log_dir / "txn-fixture-0" / "00000000000000000000.log")
    originals[txn] = decoded(gen)
    hz[txn] = horizons(gen)
    copies[txn] = log_dir / "txn-fixture-0"
    update_topic_configs(log_dir, "txn-fixture", {"cleanup.policy": "compact"})

    now = max(int(r["timestamp"]) for rows in originals.values() for r in rows) + 1  # type: ignore[arg-type]
    removed = kept_tombstones = 0
    with LogManager([log_dir], writable=True) as m:
        assert set(m.logs) == set(originals)
        for tp, log in m.logs.items():
            assert log.config.compact
            log.roll()
            r = LogCleaner(now_ms=now).clean_log(log)
            assert r is not None, tp
            removed += r.stats.records_removed
            kept_tombstones += r.stats.tombstones_kept
    new_logs = {tp: sorted(d.glob("*.log")) for tp, d in copies.items()}
    dumps = kafka_dump([f for fs in new_logs.values() for f in fs])
    for tp, files in new_logs.items():
        rows = []
        for f in files:
            res = dumps[str(f)]
            assert res.error is None and res.valid_bytes == res.size_in_bytes, (tp, f, res.error)
            rows += [json.loads(line) for line in res.lines]
        assert data_of(rows) == expected_records(originals[tp], hz[tp], now, second=False), tp
    assert removed > 1000 and kept_tombstones > 0
    # the generated transactions: aborted data gone (its batch kept as pid 4242's last, empty),
    # both markers kept (their transactions' batches were seen by this cleaning)
    txn_rows = [json.loads(line) for f in new_logs[txn] for line in dumps[str(f)].lines]
    assert [int(r["offset"]) for r in txn_rows if r["is_control"]] == [7, 10]
    assert sorted(int(r["offset"]) for r in txn_rows if not r["is_control"] and r.get("offset") is not None) == [
        0, 1, 3, 4, 6, 11, 12]
    empty = [r for r in txn_rows if r.get("offset") is None]
    assert [(r["batch_base_offset"], r["batch_last_offset"], r["producer_id"]) for r in empty] == [(8, 9, 4242)]

    verify = subprocess.run([sys.executable, "-m", "storage_core.tools.cli", "verify", str(log_dir), "--quiet"],
                            capture_output=True, text=True)
    assert verify.returncode == 0, verify.stdout + verify.stderr

    # past the delete horizon the tombstones go too
    later = now + DELETE_RETENTION_MS
    with LogManager([log_dir], writable=True) as m:
        for log in m.logs.values():
            assert LogCleaner(now_ms=later).clean_log(log) is not None
    dumps = kafka_dump([f for d in copies.values() for f in sorted(d.glob("*.log"))])
    for tp, d in copies.items():
        rows = [json.loads(line) for f in sorted(d.glob("*.log")) for line in dumps[str(f)].lines]
        assert all(dumps[str(f)].error is None for f in sorted(d.glob("*.log")))
        assert data_of(rows) == expected_records(originals[tp], hz[tp], later, second=True), tp
    verify = subprocess.run([sys.executable, "-m", "storage_core.tools.cli", "verify", str(log_dir), "--quiet"],
                            capture_output=True, text=True)
    assert verify.returncode == 0, verify.stdout + verify.stderr


def test_fixture_partitions_found() -> None:
    names = {p.name.rsplit("-", 1)[0] for p in compacted_partitions()}
    assert {"__consumer_offsets", "_schemas", "connect-offsets"} <= names
    assert base64  # (decoded values are compared as Kafka printed them, base64)
