"""Self-tests of the multi-broker cluster fixture (``tests/oracles/cluster_fixture.py``), collected by
``tests/log/test_cluster.py`` (so that one test process runs one cluster and one messy scenario for
both): that the cluster is
the one the whole-cluster tests of issue 57 assume: one cluster id over every node's dir, RF-3
replicas on three brokers' dirs, leader epochs bumped by a killed leader, a divergent replica after
an unclean election, and aborted transactions that the two isolation levels see differently.

Each test reads the brokers' own files (meta.properties, leader-epoch-checkpoint, the segments'
batch headers) against what Kafka's Admin client and consumer say.
"""

from __future__ import annotations

import random
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from broker_fixture import split_tp
from cluster_fixture import CONTROLLER_ID, Cluster, Messy

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


def last_epoch_is(partition_dir: Path, epoch: int) -> bool:
    entries = LeaderEpochCheckpointFile.in_dir(partition_dir).read()
    return bool(entries) and entries[-1].epoch == epoch


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


# --- the messy scenario ---------------------------------------------------------------------------


# ``messy``: the session's one run of cluster_fixture.messy_scenario (tests/conftest.py)


def test_messy_killed_leader_gave_a_new_leader_with_a_higher_epoch(cluster: Cluster, messy: Messy) -> None:
    kill = messy.leader_kill
    assert kill is not None and kill.new_leader != kill.leader and kill.new_epoch > kill.epoch, kill
    # both replicas' own checkpoints hold the new epoch, begun at one offset (the restarted old
    # leader followed the new one's lineage)
    starts = []
    for b in (kill.leader, kill.new_leader):
        entries = LeaderEpochCheckpointFile.in_dir(replica_dir(cluster, b, kill.tp)).read()
        assert [e.epoch for e in entries] == sorted({e.epoch for e in entries}), (b, entries)
        starts.append([e.start_offset for e in entries if e.epoch == kill.new_epoch])
    assert len(starts[0]) == 1 and starts[0] == starts[1], (kill, starts)


def test_messy_leaders_checkpoints_end_at_the_admin_leader_epoch(cluster: Cluster, messy: Messy) -> None:
    for tp, d in messy.describe.items():
        assert d["leader"] != messy.dead and d["leaderEpoch"] == messy.offsets[tp]["leaderEpoch"], (tp, d)
        path, epoch = replica_dir(cluster, d["leader"], tp), d["leaderEpoch"]
        cluster.wait_until(f"{path}'s last epoch is {epoch}", partial(last_epoch_is, path, epoch), timeout=10)


def test_messy_dead_broker_left_every_isr_and_the_rest_agree(cluster: Cluster, messy: Messy) -> None:
    assert not cluster.broker(messy.dead).running
    assert sorted(cluster.live) == sorted(set(cluster.brokers) - {messy.dead})
    for tp, d in messy.describe.items():
        assert messy.dead not in d["isr"] and sorted(d["isr"]) == sorted(set(d["replicas"]) - {messy.dead}), (tp, d)
        hw = messy.offsets[tp]["latest"]
        leader = batch_heads(replica_dir(cluster, d["leader"], tp), hw)
        assert leader and leader[-1][1] >= hw - 1, (tp, hw)
        for b in d["isr"]:
            assert batch_heads(replica_dir(cluster, b, tp), hw) == leader, f"{tp}: broker {b} differs below {hw}"


def test_messy_divergent_replica_disagrees_with_the_new_leader(cluster: Cluster, messy: Messy) -> None:
    div = messy.divergence
    tp = f"{div.topic}-{div.partition}"
    snap = div.snapshot
    assert div.leader != div.broker and div.new_epoch > div.old_epoch and div.truncate_to < div.log_end, div
    old = batch_heads(snap / f"b{div.broker}" / "data" / tp)
    new = batch_heads(snap / f"b{div.leader}" / "data" / tp)
    assert old[-1][1] == div.log_end - 1, (old[-1], div)
    assert new[-1][1] >= div.log_end - 1, "the new leader's log passes the divergent replica's end"
    common = [h for h in old if h[0] < div.truncate_to]
    assert common == [h for h in new if h[0] < div.truncate_to], "the replicas agree below the truncation point"
    assert common[-1][1] == div.truncate_to - 1
    diverged = [h for h in old if h[0] >= div.truncate_to]
    assert diverged and not set(diverged) & set(new), "every batch from the truncation point on is not the leader's"
    # the lineages: the divergent replica's last epoch is the old one; the new leader's first epoch
    # after it begins exactly where Kafka truncated the divergent replica
    old_epochs = LeaderEpochCheckpointFile.in_dir(snap / f"b{div.broker}" / "data" / tp).read()
    new_epochs = LeaderEpochCheckpointFile.in_dir(snap / f"b{div.leader}" / "data" / tp).read()
    assert old_epochs[-1].epoch == div.old_epoch, old_epochs
    after = [e for e in new_epochs if e.epoch > div.old_epoch]
    assert after and after[0].start_offset == div.truncate_to and after[-1].epoch == div.new_epoch, new_epochs
    # in the live cluster Kafka truncated it and it followed the new leader
    hw = messy.offsets[tp]["latest"]
    live_old = batch_heads(replica_dir(cluster, div.broker, tp), hw)
    assert live_old == batch_heads(replica_dir(cluster, div.leader, tp), hw)[:len(live_old)]
    assert set(diverged).isdisjoint(live_old)


def test_messy_isolation_levels_differ_where_aborted(cluster: Cluster, messy: Messy) -> None:
    def keys(rows: list[dict[str, Any]]) -> set[tuple[str, int, int]]:
        return {(r["topic"], r["partition"], r["offset"]) for r in rows}

    committed, uncommitted = keys(messy.committed), keys(messy.uncommitted)
    assert committed < uncommitted
    txn = next(t for t in messy.topics if t.endswith("-txn"))
    assert {k[0] for k in uncommitted - committed} == {txn}
    assert sum(p["aborted"] for p in messy.produced) > 0
    # every other topic: one record per offset from 0 to the high watermark, at both levels
    for tp, o in messy.offsets.items():
        topic, p = split_tp(tp)
        if topic != txn:
            assert sorted(k[2] for k in uncommitted if k[:2] == (topic, p)) == list(range(o["latest"])), tp
            assert o["lso"] == o["latest"]
    # what only read_uncommitted returns lies in transactional batches of the leader's log
    for tp, d in messy.describe.items():
        topic, p = split_tp(tp)
        if topic != txn:
            continue
        transactional = set()
        for seg in replica_dir(cluster, d["leader"], tp).glob("*.log"):
            for b in FileRecords(seg).batches():
                if b.is_transactional and not b.is_control:
                    transactional |= {(topic, p, o) for o in range(b.base_offset, b.last_offset + 1)}
        only = {k for k in uncommitted - committed if k[:2] == (topic, p)}
        assert only <= transactional, tp
