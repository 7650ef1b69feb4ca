"""KRaft metadata drives topic configs and ids (issue 17 item 4).

- the fixtures' real ``__cluster_metadata``: every topic id the replay finds is the one each
  partition dir's ``partition.metadata`` holds; the configs it finds are the ConfigRecords Kafka
  itself read from the same bytes (the ``*.expected.jsonl`` beside each file, decoded here by a
  small parser of the test's own, not klog's codec); snapshot + log and the whole log agree;
- generated metadata logs with known truth (``message_encoder``): topic created, config set,
  changed, deleted, topic deleted and created again, cluster defaults and their synonyms,
  transactions, undecodable records; and what follows from the configs: retention deletes by a
  KRaft ``retention.ms``, ``klog compact`` compacts a topic KRaft says is compacted;
- the precedence against ``klog-topic-configs.json`` and explicit options; ``describe``.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import struct
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
import shared_fixtures as sf
from message_encoder import encode, uvarint

import storage_core
from storage_core.log.checkpoint import PartitionMetadataFile, uuid_to_base64
from storage_core.log.cluster_metadata import (
    CLUSTER_METADATA_DIR,
    METADATA_TOPIC_ID,
    cluster_metadata,
    replay_cluster_metadata,
)
from storage_core.log.config import BROKER_SYNONYMS, CONFIG_KEYS, LogConfig, topic_configs_from_broker
from storage_core.log.log import Log
from storage_core.log.manager import LogManager
from storage_core.log.topic_configs import resolve_topic_config, update_topic_configs
from storage_core.log.topic_partition import TopicPartition
from storage_core.read.describe import NO_KRAFT_METADATA
from storage_core.record.messages import metadata as md
from storage_core.record.messages.schema import MessageSpec
from storage_core.record.records import Record, build_batch

T0 = 1_700_000_000_000
HOUR = 3_600_000


def klog(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "storage_core.tools.cli", *args], capture_output=True, text=True)


# --- fixtures: Kafka's own reading of the same bytes ---------------------------------------------------


def _kraft_dirs() -> list[Path]:
    if not sf.available():
        return []
    return sorted({p.parent.parent for p in sf.KAFKA_FIXTURES.rglob(f"{CLUSTER_METADATA_DIR}/*.log")})


class _Bytes:
    """A reader of Kafka's flexible-version encoding, just enough for the three records below."""

    def __init__(self, raw: bytes) -> None:
        self.raw, self.pos = raw, 0

    def uvarint(self) -> int:
        shift = value = 0
        while True:
            b = self.raw[self.pos]
            self.pos += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7

    def compact_string(self) -> str | None:
        n = self.uvarint()
        if n == 0:
            return None
        s = self.raw[self.pos : self.pos + n - 1].decode()
        self.pos += n - 1
        return s


def _kafka_state(files: list[tuple[Path, int]]) -> tuple[dict[str, str], dict[tuple[int, str], dict[str, str]]]:
    """Topic ids and configs from Kafka's expected decoding of ``files`` (each from an offset on):
    the record values Kafka read, parsed by hand (TopicRecord 2, ConfigRecord 4, RemoveTopicRecord 9)."""
    ids: dict[str, str] = {}
    configs: dict[tuple[int, str], dict[str, str]] = {}
    for path, start in files:
        plain = path.with_name(path.name + ".expected.jsonl")
        text = plain.read_text() if plain.exists() else gzip.decompress(
            path.with_name(path.name + ".expected.jsonl.gz").read_bytes()).decode()
        for line in text.splitlines():
            row = json.loads(line)
            if row.get("is_control") or row.get("value_b64") is None or row["offset"] < start:
                continue
            r = _Bytes(base64.b64decode(row["value_b64"]))
            frame, kind, version = r.uvarint(), r.uvarint(), r.uvarint()
            assert (frame, version) == (1, 0) or kind not in (2, 4, 9)
            if kind == 2:
                name = r.compact_string()
                assert name is not None
                ids[name] = base64.urlsafe_b64encode(r.raw[r.pos : r.pos + 16]).decode().rstrip("=")
            elif kind == 9:
                gone = base64.urlsafe_b64encode(r.raw[r.pos : r.pos + 16]).decode().rstrip("=")
                for name in [n for n, i in ids.items() if i == gone]:
                    del ids[name]
                    configs.pop((2, name), None)
            elif kind == 4:
                rtype = r.raw[r.pos]
                r.pos += 1
                resource, name, value = r.compact_string(), r.compact_string(), r.compact_string()
                assert resource is not None and name is not None
                if value is None:
                    configs.get((rtype, resource), {}).pop(name, None)
                else:
                    configs.setdefault((rtype, resource), {})[name] = value
    return ids, configs


def _replay_files(logdir: Path) -> list[tuple[Path, int]]:
    """The files a replay reads, each from the offset it is read from: the newest snapshot, then the log."""
    mdir = logdir / CLUSTER_METADATA_DIR
    snaps = sorted(mdir.glob("*-*.checkpoint"))
    start = int(snaps[-1].name.split("-")[0]) if snaps else 0
    return [*[(s, 0) for s in snaps[-1:]], *[(p, start) for p in sorted(mdir.glob("*.log"))]]


@pytest.mark.parametrize("logdir", sf.params(_kraft_dirs(), "KRaft log dirs"))
def test_fixture_topic_ids_equal_partition_metadata(logdir: Path) -> None:
    model = replay_cluster_metadata(logdir)
    assert model is not None and not model.notes and model.applied > 0
    checked = 0
    for pm_file in sorted(logdir.glob("*/partition.metadata")):
        pm = PartitionMetadataFile(pm_file).read()
        assert pm is not None
        topic, _, partition = pm_file.parent.name.rpartition("-")
        assert model.topic_id(topic) == pm.topic_id_base64, f"{pm_file}: {pm.topic_id_base64}"
        if topic != "__cluster_metadata":
            assert int(partition) in model.topics[topic].partitions
        else:
            assert pm.topic_id_base64 == METADATA_TOPIC_ID
        checked += 1
    assert checked >= 2
    rows = storage_core.describe(logdir).to_pylist()
    assert rows and all(r["topic_id_matches"] is True for r in rows)
    assert all(r["kraft_metadata"] == str(logdir) for r in rows)


@pytest.mark.parametrize("logdir", sf.params(_kraft_dirs(), "KRaft log dirs"))
def test_fixture_configs_are_the_config_records_kafka_read(logdir: Path) -> None:
    model = replay_cluster_metadata(logdir)
    assert model is not None
    ids, configs = _kafka_state(_replay_files(logdir))
    assert {n: t.topic_id for n, t in model.topics.items()} == ids
    topics = {name: dict(c) for (t, name), c in configs.items() if t == 2 and c}
    assert {n: dict(c) for n, c in model.topic_configs.items()} == topics
    assert dict(model.cluster_defaults) == configs.get((4, ""), {})
    assert topics, "every KRaft fixture records topic configs"
    for topic, props in topics.items():  # each config klog knows is in the config retention/compaction use
        resolved = resolve_topic_config(topic, {}, kraft=model)
        for name, value in props.items():
            if name in CONFIG_KEYS:
                assert resolved.config.get(name) == CONFIG_KEYS[name].coerce(value), (topic, name)
                assert resolved.sources[name] == "kraft topic"
            else:
                assert any(i.startswith(f"{name}={value} ") for i in resolved.ignored)


def test_fixture_snapshot_and_whole_log_agree(tmp_path: Path) -> None:
    """rjmfernandes' copy has the log from offset 0 and two snapshots: replaying the whole log
    (links to the log only) gives the state the newest snapshot + the log after it give."""
    src = sf.KAFKA_FIXTURES / "rjmfernandes+flink-on-prem" / "43d3daa" / "data"
    if not (src / CLUSTER_METADATA_DIR).is_dir():
        pytest.skip(f"{src} is not in this copy of the shared fixtures" if sf.available() else sf.MISSING_REASON)
    with_snapshot = replay_cluster_metadata(src)
    (tmp_path / CLUSTER_METADATA_DIR).mkdir()
    for log in (src / CLUSTER_METADATA_DIR).glob("*.log"):
        os.symlink(log, tmp_path / CLUSTER_METADATA_DIR / log.name)
    whole = replay_cluster_metadata(tmp_path)
    assert with_snapshot is not None and whole is not None
    assert with_snapshot.snapshot is not None and whole.snapshot is None
    assert with_snapshot.end_offset == whole.end_offset
    assert dict(with_snapshot.topics) == dict(whole.topics)
    assert {k: dict(v) for k, v in with_snapshot.topic_configs.items()} == {
        k: dict(v) for k, v in whole.topic_configs.items()}


def test_fixture_cluster_default_applies() -> None:
    """ronem123's snapshots hold a cluster-wide default (broker "" min.insync.replicas=1)."""
    d = sf.KAFKA_FIXTURES / "ronem123+rupia-transaction-service" / "5d88e97" / "kafka-logs"
    if not (d / CLUSTER_METADATA_DIR).is_dir():
        pytest.skip(f"{d} is not in this copy of the shared fixtures" if sf.available() else sf.MISSING_REASON)
    model = replay_cluster_metadata(d)
    assert model is not None and dict(model.cluster_defaults) == {"min.insync.replicas": "1"}
    resolved = resolve_topic_config("topic_transactions", {}, kraft=model)
    assert resolved.config.min_insync_replicas == 1 and resolved.sources["min.insync.replicas"] == "kraft cluster default"


def test_zookeeper_dir_says_configs_are_unknown() -> None:
    d = sf.KAFKA_FIXTURES / "DonaldY+kafka-2.7.1" / "13bb4a8" / "kafka-logs"
    if not d.is_dir():
        pytest.skip(f"{d} is not in this copy of the shared fixtures" if sf.available() else sf.MISSING_REASON)
    assert replay_cluster_metadata(d) is None
    table = storage_core.describe(d)
    assert table.schema.metadata == {b"klog.topic_configs": NO_KRAFT_METADATA.encode()}
    rows = table.to_pylist()
    assert all(r["kraft_metadata"] is None and r["kraft_topic_id"] is None and r["topic_id_matches"] is None
               for r in rows)
    offsets = [r for r in rows if r["topic"] == "__consumer_offsets"]
    assert offsets and offsets[0]["configs"] == ["cleanup.policy=compact (internal)"]
    res = klog("describe", str(d))
    assert res.returncode == 0 and res.stdout.count(NO_KRAFT_METADATA) == 1


# --- generated metadata logs ---------------------------------------------------------------------------

TOPIC_ID_1 = uuid_to_base64(uuid.UUID(int=0x1111))
TOPIC_ID_2 = uuid_to_base64(uuid.UUID(int=0x2222))
USERS_ID = uuid_to_base64(uuid.UUID(int=0x3333))


def rec(spec: MessageSpec, **data: Any) -> bytes:
    """A metadata record's value: frame version 1, type, version 0, the record."""
    assert spec.api_key is not None
    return uvarint(1) + uvarint(spec.api_key) + uvarint(0) + encode(spec, 0, data)


def topic(name: str, tid: str) -> bytes:
    return rec(md.TOPIC_RECORD, name=name, topicId=tid)


def partition(tid: str, p: int) -> bytes:
    return rec(md.PARTITION_RECORD, partitionId=p, topicId=tid, replicas=[1], isr=[1], removingReplicas=[],
               addingReplicas=[], leader=1, leaderEpoch=0, partitionEpoch=0)


def config(name: str, value: str | None, resource: str, rtype: int = 2) -> bytes:
    return rec(md.CONFIG_RECORD, resourceType=rtype, resourceName=resource, name=name, value=value)


def write_metadata(log_dir: Path, values: list[bytes], *, base: int = 0, name: str | None = None) -> Path:
    """``values`` as data records at offsets ``base``.. in one batch of a ``__cluster_metadata-0`` file."""
    mdir = log_dir / CLUSTER_METADATA_DIR
    mdir.mkdir(parents=True, exist_ok=True)
    path = mdir / (name or f"{base:020d}.log")
    batch = build_batch([Record(base + i, T0, None, v) for i, v in enumerate(values)])
    with open(path, "ab") as f:
        f.write(batch)
    return path


def partition_dir(log_dir: Path, name: str, p: int, tid: str | None) -> Path:
    d = log_dir / f"{name}-{p}"
    d.mkdir(exist_ok=True)
    if tid is not None:
        PartitionMetadataFile.in_dir(d).write(uuid.UUID(bytes=base64.urlsafe_b64decode(tid + "==")))
    return d


def test_topic_and_config_lifecycle(tmp_path: Path) -> None:
    write_metadata(tmp_path, [
        topic("orders", TOPIC_ID_1), partition(TOPIC_ID_1, 0), partition(TOPIC_ID_1, 1),
        config("retention.ms", "1000", "orders"),            # set
        config("segment.bytes", "2048", "orders"),
        config("retention.ms", "5000", "orders"),            # changed
        config("segment.bytes", None, "orders"),             # deleted
        config("log.retention.ms", "7200000", "", 4),        # cluster default (broker name)
        config("log.cleanup.policy", "compact", "", 4),
        config("num.io.threads", "8", "", 4),                # not a topic config's synonym
        config("cleanup.policy", "compact", "gone"), topic("gone", TOPIC_ID_2), partition(TOPIC_ID_2, 0),
        rec(md.REMOVE_TOPIC_RECORD, topicId=TOPIC_ID_2),     # deleted: its configs go too
        topic("gone", USERS_ID), partition(USERS_ID, 0),     # created again with a new id
        rec(md.NO_OP_RECORD),
    ])
    model = replay_cluster_metadata(tmp_path)
    assert model is not None and not model.notes
    assert model.topic_id("orders") == TOPIC_ID_1 and model.topics["orders"].partitions == (0, 1)
    assert model.topic_id("gone") == USERS_ID and model.topics["gone"].partitions == (0,)
    assert {k: dict(v) for k, v in model.topic_configs.items()} == {"orders": {"retention.ms": "5000"}}
    assert dict(model.cluster_defaults) == {"log.retention.ms": "7200000", "log.cleanup.policy": "compact",
                                            "num.io.threads": "8"}
    orders = resolve_topic_config("orders", {}, kraft=model)
    assert (orders.config.retention_ms, orders.config.segment_bytes, orders.config.compact) == (
        5000, LogConfig().segment_bytes, True)
    assert orders.described() == ["cleanup.policy=compact (kraft cluster default)", "retention.ms=5000 (kraft topic)"]
    gone = resolve_topic_config("gone", {}, kraft=model)
    assert gone.config.retention_ms == 7_200_000 and gone.sources["retention.ms"] == "kraft cluster default"
    other = resolve_topic_config("__consumer_offsets", {}, kraft=model)
    assert other.sources["cleanup.policy"] == "kraft cluster default"  # above the internal built-in


def test_broker_synonyms_and_this_brokers_own_configs(tmp_path: Path) -> None:
    assert BROKER_SYNONYMS["retention.ms"] == (("log.retention.ms", 1), ("log.retention.minutes", 60_000),
                                              ("log.retention.hours", HOUR))
    assert all(CONFIG_KEYS[t].broker_name == s[0][0] for t, s in BROKER_SYNONYMS.items())
    assert topic_configs_from_broker({"log.retention.hours": "2"})[0] == {"retention.ms": str(2 * HOUR)}
    assert topic_configs_from_broker({"log.retention.hours": "2", "log.retention.minutes": "3"})[0] == {
        "retention.ms": "180000"}
    assert topic_configs_from_broker({"log.retention.hours": "2", "log.retention.ms": "7"})[0] == {"retention.ms": "7"}
    assert topic_configs_from_broker({"log.roll.hours": " 1 ", "log.cleaner.min.cleanable.ratio": "0.1"})[0] == {
        "segment.ms": str(HOUR), "min.cleanable.dirty.ratio": "0.1"}
    assert topic_configs_from_broker({"log.retention.hours": "soon"})[1] == ["log.retention.hours=soon (not a number of hours)"]
    (tmp_path / "meta.properties").write_text("version=1\nnode.id=3\ncluster.id=abc\n")
    write_metadata(tmp_path, [
        topic("t", TOPIC_ID_1),
        config("log.retention.hours", "1", "", 4),
        config("log.retention.hours", "5", "3", 4),   # this dir's broker: above the cluster default
        config("log.segment.bytes", "4096", "4", 4),  # another broker's: not this dir's
        config("max.compaction.lag.ms", "10", "t"), config("min.compaction.lag.ms", "20", "t"),  # conflict
        config("confluent.placement", "x", "t"),
    ])
    model = replay_cluster_metadata(tmp_path)
    assert model is not None and model.node_id == "3"
    r = resolve_topic_config("t", {}, kraft=model)
    assert r.config.retention_ms == 5 * HOUR and r.sources["retention.ms"] == "kraft broker"
    assert r.config.segment_bytes == LogConfig().segment_bytes
    assert r.config.min_compaction_lag_ms == 0  # the conflicting pair is left out, and said so
    assert any(i.startswith("min.compaction.lag.ms=20 ") for i in r.ignored)
    assert any(i.startswith("confluent.placement=x (kraft topic: not a topic config") for i in r.ignored)


def test_transactions_snapshots_and_undecodable_records(tmp_path: Path) -> None:
    write_metadata(tmp_path, [topic("a", TOPIC_ID_1), config("retention.ms", "1", "a")],
                   name="00000000000000000010-0000000001.checkpoint")
    write_metadata(tmp_path, [config("retention.ms", "999", "a")], base=0)  # before the snapshot: not replayed
    write_metadata(tmp_path, [
        rec(md.BEGIN_TRANSACTION_RECORD), config("retention.ms", "2", "a"), rec(md.END_TRANSACTION_RECORD),
        rec(md.BEGIN_TRANSACTION_RECORD), config("retention.ms", "3", "a"), rec(md.ABORT_TRANSACTION_RECORD),
        uvarint(1) + uvarint(250) + uvarint(0) + b"future",   # a type klog does not know
        b"\x07garbage",                                       # not a metadata frame
        config("segment.ms", "4", "a"),
        rec(md.BEGIN_TRANSACTION_RECORD), config("retention.ms", "5", "a"),  # the log ends inside it
    ], base=10)
    model = replay_cluster_metadata(tmp_path)
    assert model is not None and model.snapshot == "00000000000000000010-0000000001.checkpoint"
    assert dict(model.topic_configs["a"]) == {"retention.ms": "2", "segment.ms": "4"}
    assert model.end_offset == 21 and model.skipped >= 3
    assert model.notes == ("the log ends inside a metadata transaction: its 1 records are not applied",)


def test_a_gap_and_a_corrupt_tail_are_notes(tmp_path: Path) -> None:
    write_metadata(tmp_path, [topic("a", TOPIC_ID_1)], base=5)
    seg = tmp_path / CLUSTER_METADATA_DIR / f"{5:020d}.log"
    with open(seg, "ab") as f:
        f.write(b"\x00" * 8 + struct.pack(">i", 100) + b"\xff" * 100)
    model = replay_cluster_metadata(tmp_path)
    assert model is not None and model.topic_id("a") == TOPIC_ID_1
    assert any("records 0..4" in n and "incomplete" in n for n in model.notes)


def test_the_cache_follows_the_files(tmp_path: Path) -> None:
    write_metadata(tmp_path, [topic("a", TOPIC_ID_1)])
    first = cluster_metadata(tmp_path)
    assert first is cluster_metadata(tmp_path) and first is not None and first.topic_id("a") == TOPIC_ID_1
    write_metadata(tmp_path, [rec(md.REMOVE_TOPIC_RECORD, topicId=TOPIC_ID_1)], base=1)
    later = cluster_metadata(tmp_path)
    assert later is not None and later.topic_id("a") is None
    assert cluster_metadata(tmp_path / "nowhere") is None


# --- what the configs do, and the precedence --------------------------------------------------------


def data_log(log_dir: Path, name: str, tid: str | None, keys: int = 1) -> Path:
    """A partition with 10 segments of 5 records each, one second apart from T0."""
    d = partition_dir(log_dir, name, 0, tid)
    with Log(d, LogConfig.from_properties({"segment.bytes": "300"}), writable=True) as log:
        for i in range(10):
            log.append(build_batch([Record(j, T0 + 1000 * i, str(j % keys).encode(), b"v%d" % i) for j in range(5)]))
            log.roll()
    return d


def test_kraft_retention_ms_drives_klog_retention(tmp_path: Path) -> None:
    write_metadata(tmp_path, [topic("orders", TOPIC_ID_1), partition(TOPIC_ID_1, 0), topic("keep", TOPIC_ID_2),
                              partition(TOPIC_ID_2, 0), config("retention.ms", "4500", "orders")])
    data_log(tmp_path, "orders", TOPIC_ID_1)
    data_log(tmp_path, "keep", TOPIC_ID_2)
    res = klog("retention", str(tmp_path), "--now", str(T0 + 10_000))
    assert res.returncode == 0, res.stderr
    rows = {r["topic"]: r for r in json.loads(klog("describe", str(tmp_path), "--json").stdout)}
    # segments whose newest record is older than now - 4500 ms go: those of seconds 0..5
    assert rows["orders"]["start_offset"] == 30 and rows["keep"]["start_offset"] == 0
    assert "retention.ms=4500 (kraft topic)" in rows["orders"]["configs"]
    # an explicit option beats the KRaft topic config
    res = klog("retention", str(tmp_path), "--topic", "orders", "--config", "retention.ms=100000", "--now",
               str(T0 + 10_000))
    assert res.returncode == 0 and "nothing to delete" in res.stdout


def test_kraft_cleanup_policy_drives_klog_compact(tmp_path: Path) -> None:
    write_metadata(tmp_path, [topic("users", USERS_ID), partition(USERS_ID, 0), topic("plain", TOPIC_ID_1),
                              partition(TOPIC_ID_1, 0), config("cleanup.policy", "compact", "users")])
    data_log(tmp_path, "users", USERS_ID, keys=2)
    data_log(tmp_path, "plain", TOPIC_ID_1, keys=2)
    res = klog("compact", str(tmp_path), "--json")
    assert res.returncode == 0, res.stderr
    summary = json.loads(res.stdout)
    assert {s["topic"] for s in summary} == {"users"}
    rows = storage_core.read_arrow(tmp_path, topics="users").read_all().to_pylist()
    assert sorted((r["key"], r["value"]) for r in rows) == [(b"0", b"v9"), (b"1", b"v9")]


def test_precedence_file_and_explicit_over_kraft(tmp_path: Path) -> None:
    write_metadata(tmp_path, [topic("t", TOPIC_ID_1), partition(TOPIC_ID_1, 0),
                              config("log.segment.bytes", "10000", "", 4),
                              config("segment.bytes", "20000", "t"), config("retention.ms", "1", "t"),
                              config("delete.retention.ms", "2", "t")])
    data_log(tmp_path, "t", TOPIC_ID_1)
    update_topic_configs(tmp_path, "t", {"retention.ms": "30", "delete.retention.ms": "40"})
    with LogManager([tmp_path], overrides={"delete.retention.ms": "50"}) as m:
        r = m.resolved_config_for("t")
        assert (r.config.segment_bytes, r.config.retention_ms, r.config.delete_retention_ms) == (20000, 30, 50)
        assert dict(r.sources) == {"segment.bytes": "kraft topic", "retention.ms": "klog-topic-configs.json",
                                   "delete.retention.ms": "explicit"}
        assert m.logs[TopicPartition("t", 0)].config.segment_bytes == 20000
        assert m.config_for("other").segment_bytes == 10000  # the cluster default
        assert m.config_for("__cluster_metadata").segment_bytes == LogConfig().segment_bytes  # metadata.log.*
    with Log(tmp_path / "t-0") as log:  # opened without a config: the same rule
        assert (log.config.segment_bytes, log.config.retention_ms, log.config.delete_retention_ms) == (20000, 30, 40)


def test_describe_shows_a_mismatched_id_loudly(tmp_path: Path) -> None:
    write_metadata(tmp_path, [topic("t", TOPIC_ID_1), partition(TOPIC_ID_1, 0), config("retention.ms", "9", "t")])
    data_log(tmp_path, "t", TOPIC_ID_2)  # a partition of another incarnation
    data_log(tmp_path, "unknown", TOPIC_ID_1)
    rows = {r["topic"]: r for r in storage_core.describe(tmp_path).to_pylist()}
    t = rows["t"]
    assert (t["topic_id"], t["kraft_topic_id"], t["topic_id_matches"]) == (TOPIC_ID_2, TOPIC_ID_1, False)
    assert t["configs"] == ["retention.ms=9 (kraft topic)"] and t["kraft_metadata"] == str(tmp_path)
    assert rows["unknown"]["kraft_topic_id"] is None and rows["unknown"]["topic_id_matches"] is None
    assert rows["__cluster_metadata"]["kraft_topic_id"] == METADATA_TOPIC_ID
    res = klog("describe", str(tmp_path))
    assert res.returncode == 0
    assert "TOPIC ID MISMATCH" in res.stderr and TOPIC_ID_2 in res.stderr
    assert "retention.ms=9 (kraft topic)" in res.stdout and "not in metadata" in res.stdout
    assert json.loads(klog("describe", str(tmp_path), "--json").stdout)[0]["kraft_metadata"] == str(tmp_path)
