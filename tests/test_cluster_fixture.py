"""Self-tests of the multi-broker cluster fixture (``tests/cluster_fixture.py``): that the cluster is
the one the whole-cluster tests of issue 57 assume: one cluster id over every node's dir, RF-3
replicas on three brokers' dirs, leader epochs bumped by a killed leader, a divergent replica after
an unclean election, and aborted transactions that the two isolation levels see differently.

Each test reads the brokers' own files (meta.properties, leader-epoch-checkpoint, the segments'
batch headers) against what Kafka's Admin client and consumer say.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from cluster_fixture import CONTROLLER_ID, Cluster

from storage_core.log.checkpoint import CleanShutdownFile, LeaderEpochCheckpointFile
from storage_core.record.file_records import FileRecords

pytestmark = [pytest.mark.broker, pytest.mark.fault]


def seed_for(name: str) -> int:
    seed = random.randrange(2**31)
    print(f"{name} seed={seed}")
    return seed


def properties(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        if line and not line.startswith("#") and "=" in line:
            k, _, v = line.partition("=")
            out[k.strip()] = v.strip()
    return out


def batch_heads(partition_dir: Path, below: int | None = None) -> list[tuple[int, int, int]]:
    """(base offset, last offset, CRC) of every batch in the replica's segments, in offset order,
    those starting below ``below`` when given."""
    out = []
    for seg in sorted(partition_dir.glob("*.log")):
        for batch in FileRecords(seg).batches():
            if below is None or batch.base_offset < below:
                out.append((batch.base_offset, batch.last_offset, batch.crc))
    return out


def replica_dir(cluster: Cluster, broker: int, tp: str) -> Path:
    return cluster.broker(broker).log_dir / tp


def test_one_cluster_id_and_node_ids_over_every_dir(cluster: Cluster) -> None:
    ids = set()
    for node in cluster.nodes:
        meta = properties(node.log_dir / "meta.properties")
        assert meta["node.id"] == str(node.node_id), node.log_dir
        ids.add(meta["cluster.id"])
        assert (node.log_dir / "__cluster_metadata-0").is_dir(), node.log_dir
    assert ids == {cluster.cluster_id}
    assert cluster.controller.node_id == CONTROLLER_ID
    assert sorted(cluster.brokers) == [1, 2, 3]
    assert [p.name for p in cluster.controller.log_dir.iterdir() if "-" in p.name] == ["__cluster_metadata-0"]


def test_rf3_topic_has_three_equal_replicas_on_three_dirs(cluster: Cluster) -> None:
    cluster.start()
    seed = seed_for("rf3")
    topic = f"rf3-{seed}"
    cluster.create_topic(topic, 2)
    produced = cluster.produce(seed, [(topic, "idempotent", 600), (topic, "plain", 200)])
    assert sum(p["acked"] for p in produced) == 800, produced
    desc = cluster.wait_replicated([topic])
    offsets = cluster.list_offsets([topic])
    assert sum(o["latest"] for o in offsets.values()) == 800, offsets
    rows = cluster.consume("read_uncommitted", [topic])
    assert len(rows) == 800
    codecs = set()
    for tp, d in desc.items():
        assert sorted(d["replicas"]) == [1, 2, 3] and sorted(d["isr"]) == [1, 2, 3], d
        hw = offsets[tp]["latest"]
        copies = {b: batch_heads(replica_dir(cluster, b, tp), hw) for b in d["replicas"]}
        assert all(copies[b] == copies[d["leader"]] for b in copies), f"{tp}: replicas differ below {hw}"
        assert copies[d["leader"]][-1][1] == hw - 1, tp
        for seg in replica_dir(cluster, d["leader"], tp).glob("*.log"):
            codecs |= {b.compression.name.lower() for b in FileRecords(seg).batches()}
    assert codecs == {"none", "gzip", "snappy", "lz4", "zstd"}


def test_killed_leader_gives_a_new_leader_with_a_higher_epoch(cluster: Cluster, tmp_path: Path) -> None:
    cluster.start()
    seed = seed_for("epoch")
    topic = f"epoch-{seed}"
    cluster.create_topic(topic, 1)
    cluster.produce(seed, [(topic, "idempotent", 200)])
    before = cluster.wait_replicated([topic])[f"{topic}-0"]
    old = before["leader"]
    cluster.broker(old).kill()
    new = cluster.wait_leader(topic, 0, not_in=[old])
    cluster.produce(seed + 1, [(topic, "idempotent", 100)])
    after = cluster.describe([topic])[f"{topic}-0"]
    assert after["leaderEpoch"] > before["leaderEpoch"], (before, after)
    cluster.broker(old).start()
    cluster.wait_replicated([topic])
    # the new leader's own checkpoint: its epoch began where the old leader's log ended
    entries = LeaderEpochCheckpointFile.in_dir(replica_dir(cluster, new, f"{topic}-0")).read()
    assert entries[-1].epoch == after["leaderEpoch"] and entries[-1].start_offset == 200, entries
    assert entries[0].epoch == before["leaderEpoch"] and entries[0].start_offset == 0, entries
    # the restarted old leader follows the same lineage
    cluster.wait_until("the old leader's checkpoint has the new epoch", lambda: LeaderEpochCheckpointFile.in_dir(
        replica_dir(cluster, old, f"{topic}-0")).read()[-1:] == entries[-1:])


def test_abort_is_seen_at_read_uncommitted_only(cluster: Cluster) -> None:
    cluster.start()
    seed = seed_for("abort")
    topic = f"abort-{seed}"
    cluster.create_topic(topic, 2)
    (result,) = cluster.produce(seed, [(topic, "txn", 600)])
    assert result["aborted"] > 0 and result["committed"] > 0, result
    cluster.wait_replicated([topic])
    offsets = cluster.list_offsets([topic])
    assert all(o["lso"] == o["latest"] for o in offsets.values()), offsets  # no open transaction
    committed = cluster.consume("read_committed", [topic])
    uncommitted = cluster.consume("read_uncommitted", [topic])
    keys = {(r["partition"], r["offset"]) for r in committed}
    assert keys < {(r["partition"], r["offset"]) for r in uncommitted}
    assert len(uncommitted) - len(committed) > 0
    # every record only read_uncommitted returns is in an aborted transaction's batch on disk
    aborted_only = {(r["partition"], r["offset"]) for r in uncommitted} - keys
    transactional = set()
    for p in range(2):
        for seg in replica_dir(cluster, 1, f"{topic}-{p}").glob("*.log"):
            for b in FileRecords(seg).batches():
                if b.is_transactional and not b.is_control:
                    transactional |= {(p, o) for o in range(b.base_offset, b.last_offset + 1)}
    assert aborted_only <= transactional


def test_snapshot_copies_every_dir_live_and_stopped(cluster: Cluster, tmp_path: Path) -> None:
    cluster.start()
    live = cluster.snapshot(tmp_path / "live")
    stopped = cluster.stopped_snapshot(tmp_path / "stopped")
    for snap in (live, stopped):
        assert set(snap) == {CONTROLLER_ID, 1, 2, 3}
        for n, path in snap.items():
            assert properties(path / "meta.properties")["node.id"] == str(n)
            assert (path / "__cluster_metadata-0").is_dir()
    # a clean shutdown leaves Kafka's clean-shutdown marker in each broker's dir; a live copy has none
    for n in cluster.brokers:
        assert CleanShutdownFile.in_dir(stopped[n]).exists() and not CleanShutdownFile.in_dir(live[n]).exists()
    assert sorted(cluster.live) == [1, 2, 3]  # restarted
