"""Log dirs with known consumer-group commits, for the group-offset tests.

The generator knows the truth because it made it: random groups commit random offsets of random
partitions (several commits per key), tombstones delete some, transactional commits (Kafka's
TxnOffsetCommit) are committed, aborted or left open, and the records are spread over the segments
and partitions of ``__consumer_offsets``. The truth is the generator's final state: for each
(group, topic, partition) the last commit that was not aborted or left open, unless a later
tombstone deleted it.

The group coordinator's OffsetCommitKey/OffsetCommitValue classes are not in kafka-clients, so the
records are encoded with the independent test encoder (``tests/generators/message_encoder.py``, written apart
from klog's decoder), from the field tables of Kafka's published message definitions.
"""

from __future__ import annotations

import random
import struct
from dataclasses import dataclass, field
from pathlib import Path

from message_encoder import encode

from storage_core.log.config import LogConfig
from storage_core.log.log import Log
from storage_core.log.topic_partition import TopicPartition
from storage_core.record.control import ControlRecordType, EndTransactionMarker
from storage_core.record.messages.coordinator import OFFSET_COMMIT_KEY, OFFSET_COMMIT_VALUE
from storage_core.record.records import Record, build_batch, build_end_txn_marker

T0 = 1_700_000_000_000
TOPICS = {"orders": (3, 40), "clicks": (2, 25)}  # topic -> (partitions, records per partition)
OFFSETS_PARTITIONS = 3
OFFSETS_CFG = LogConfig.from_properties({"segment.bytes": "700", "cleanup.policy": "compact",
                                         "index.interval.bytes": "100"})


def offset_commit_key(group: str, topic: str, partition: int, key_type: int = 1) -> bytes:
    return struct.pack(">h", key_type) + encode(OFFSET_COMMIT_KEY, 0,
                                                {"group": group, "topic": topic, "partition": partition})


def offset_commit_value(offset: int, version: int, *, leader_epoch: int = 0, metadata: str = "",
                        commit_ts: int = T0) -> bytes:
    body = {"offset": offset, "leaderEpoch": leader_epoch, "metadata": metadata, "commitTimestamp": commit_ts,
            "expireTimestamp": -1}
    return struct.pack(">h", version) + encode(OFFSET_COMMIT_VALUE, version, body)


@dataclass
class Generated:
    root: Path
    #: group -> partition -> (offset, leader epoch or -1, metadata, commit timestamp)
    truth: dict[str, dict[TopicPartition, tuple[int, int, str, int]]] = field(default_factory=dict)
    log_ends: dict[TopicPartition, int] = field(default_factory=dict)


def _data_topics(root: Path) -> dict[TopicPartition, int]:
    ends = {}
    for topic, (parts, n) in TOPICS.items():
        for p in range(parts):
            d = root / f"{topic}-{p}"
            d.mkdir()
            with Log(d, writable=True) as lg:
                for i in range(n):
                    lg.append(build_batch([Record(0, T0 + i, b"k%d" % i, b"v%d-%d" % (p, i))]), now_ms=T0 + i)
            ends[TopicPartition(topic, p)] = n
    return ends


def generate(root: Path, seed: int, *, commits: int = 120, groups: int = 4) -> Generated:
    """A log dir at ``root`` with the data topics and a ``__consumer_offsets`` of known content."""
    rng = random.Random(seed)
    root.mkdir(parents=True)
    gen = Generated(root, log_ends=_data_topics(root))
    names = [f"group-{seed}-{i}" for i in range(groups)]
    home = {g: i % OFFSETS_PARTITIONS for i, g in enumerate(names)}  # the coordinator partition of each group
    tps = sorted(gen.log_ends)
    state: dict[tuple[str, TopicPartition], tuple[int, int, str, int] | None] = {}
    logs = []
    for p in range(OFFSETS_PARTITIONS):
        d = root / f"__consumer_offsets-{p}"
        d.mkdir()
        logs.append(Log(d, OFFSETS_CFG, writable=True))
    try:
        for i in range(commits):
            group = rng.choice(names)
            lg = logs[home[group]]
            now = T0 + 1000 * i
            n = rng.randint(1, 3)  # one commit request: several partitions in one batch
            chosen = rng.sample(tps, n)
            kind = rng.random()
            recs = []
            outcome: dict[tuple[str, TopicPartition], tuple[int, int, str, int] | None] = {}
            for tp in chosen:
                key = offset_commit_key(group, tp.topic, tp.partition, key_type=rng.choice((0, 1, 1, 1)))
                if kind < 0.15 and (group, tp) in state:
                    recs.append(Record(len(recs), now, key, None))
                    outcome[(group, tp)] = None
                else:
                    version = rng.choice((0, 1, 2, 3, 3, 4))
                    off = rng.randint(0, gen.log_ends[tp])
                    epoch = rng.randint(0, 5) if version >= 3 else -1
                    meta = rng.choice(("", "m", f"metadata-{i}"))
                    recs.append(Record(len(recs), now, key, offset_commit_value(off, version, leader_epoch=epoch,
                                                                                 metadata=meta, commit_ts=now)))
                    outcome[(group, tp)] = (off, epoch, meta, now)
            if 0.15 <= kind < 0.35:  # a TxnOffsetCommit: committed or aborted by a later marker
                pid = 1000 + i
                lg.append(build_batch(recs, producer_id=pid, producer_epoch=0, base_sequence=0,
                                      is_transactional=True), now_ms=now)
                abort = rng.random() < 0.5
                marker = EndTransactionMarker(ControlRecordType.ABORT if abort else ControlRecordType.COMMIT, 0)
                lg.append(build_end_txn_marker(0, now, 0, pid, 0, marker), now_ms=now)
                if not abort:
                    state.update(outcome)
            else:
                lg.append(build_batch(recs), now_ms=now)
                state.update(outcome)
        # a transaction left open at the end of one offsets partition: pending, never visible
        group = names[0]
        tp = tps[0]
        logs[home[group]].append(build_batch(
            [Record(0, T0, offset_commit_key(group, tp.topic, tp.partition), offset_commit_value(1, 3))],
            producer_id=999, producer_epoch=0, base_sequence=0, is_transactional=True), now_ms=T0 + 10**7)
        # and a plain commit after it, which the coordinator applies (it is past the last stable offset)
        other = tps[-1]
        final = (gen.log_ends[other] - 1, 2, "after-open-txn", T0 + 10**7)
        logs[home[group]].append(build_batch(
            [Record(0, T0, offset_commit_key(group, other.topic, other.partition),
                    offset_commit_value(final[0], 3, leader_epoch=2, metadata=final[2], commit_ts=final[3]))]),
            now_ms=T0 + 10**7)
        state[(group, other)] = final
    finally:
        for lg in logs:
            lg.close()
    for (group, tp), v in sorted(state.items()):
        if v is not None:
            gen.truth.setdefault(group, {})[tp] = v
    return gen
