"""The KRaft cluster metadata a log dir holds: its topics, their ids and their configs.

A KRaft broker (or combined controller) keeps the cluster's metadata in the log dir named by
``metadata.log.dir`` (the first of ``log.dirs`` by default), in ``__cluster_metadata-0/``: a log
of metadata records and snapshots of the whole state, ``<end offset>-<epoch>.checkpoint``.
:func:`replay_cluster_metadata` rebuilds the part of that state klog needs, the way a broker's
``MetadataLoader`` does: the newest snapshot that reads to its end, then the log's records from
the snapshot's end offset on (the whole log when there is no snapshot). Records are decoded by
:mod:`storage_core.record.messages` (the one decoder) and applied in offset order:

- ``TopicRecord``: a topic's name and id (a topic deleted and created again gets a new id);
- ``PartitionRecord``: a partition of a topic (by id), with its replicas, ISR, ELR, leader and
  leader epoch (:class:`PartitionRegistration`);
- ``PartitionChangeRecord``: a change of one partition, merged as
  ``PartitionRegistration.merge`` does (a null field is unchanged; a leader other than -2
  ``NO_LEADER_CHANGE`` is a new leader and bumps the leader epoch by one; every change bumps the
  partition epoch);
- ``RemoveTopicRecord``: the topic (by id) and its configs are gone (``ConfigurationsDelta``
  deletes a removed topic's configs as well);
- ``ConfigRecord``: resource type 2 (topic, by name) or 4 (broker: the empty name is the
  cluster-wide default, a number one broker's own); a null value deletes the config;
- ``BeginTransactionRecord`` / ``EndTransactionRecord`` / ``AbortTransactionRecord`` (KIP-868):
  the records between are applied at the end, dropped at an abort, and dropped (with a note) when
  the log ends inside one;
- every other type (brokers, features, ACLs, no-ops, ...), and any record klog cannot decode, is
  skipped: it is counted, never an error.

The result, :class:`ClusterMetadata`, is immutable. Broker-level configs are kept under their
broker names (``log.retention.ms``); :meth:`ClusterMetadata.topic_defaults` turns them into the
topic configs they default, by Kafka's synonym table
(:data:`~storage_core.log.config.BROKER_SYNONYMS`). A broker's static configs
(``server.properties``) are not in the log dir: they are unknown here.

What cannot be known from the files: whether the last records were committed by the quorum (the
high watermark is not on disk), so every record of the log is applied. A copy that misses records
between the snapshot and the log (or a log that starts past offset 0 with no snapshot) gives a
model with a note saying so.

:func:`cluster_metadata` caches the replay per log dir in the process, keyed by the names, sizes
and modification times of the metadata files, so opening many partitions of one dir replays once.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from storage_core.errors import InvalidTopicError, KlogError
from storage_core.files import META_PROPERTIES_FILE, base_offset_of, is_log_file
from storage_core.fs import ObjectPath, as_path
from storage_core.log.config import topic_configs_from_broker
from storage_core.record.file_records import FileRecords
from storage_core.record.messages.decoders import decode_metadata_record

__all__ = ["CLUSTER_METADATA_DIR", "ClusterMetadata", "KraftTopic", "RESOURCE_BROKER", "RESOURCE_TOPIC",
           "cluster_metadata", "find_cluster_metadata", "replay_cluster_metadata"]

#: The KRaft metadata partition's directory in a log dir.
CLUSTER_METADATA_TOPIC = "__cluster_metadata"
CLUSTER_METADATA_DIR = CLUSTER_METADATA_TOPIC + "-0"
#: ``Uuid.METADATA_TOPIC_ID``: the id of ``__cluster_metadata`` (no TopicRecord names it).
METADATA_TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAQ"
#: ``ConfigResource.Type`` ids of ``ConfigRecord.ResourceType``.
RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
#: ``Snapshots``: ``<20-digit end offset>-<10-digit epoch>.checkpoint``.
_SNAPSHOT = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")


@dataclass(frozen=True)
class KraftTopic:
    """A topic as the cluster metadata knows it."""

    name: str
    topic_id: str  # Kafka's Uuid.toString: 22 chars of url-safe base64
    partitions: tuple[int, ...]


#: ``LeaderConstants.NO_LEADER_CHANGE``: PartitionChangeRecord's Leader when the leader stays.
NO_LEADER_CHANGE = -2
#: ``LeaderConstants.NO_LEADER``.
NO_LEADER = -1


@dataclass(frozen=True)
class PartitionRegistration:
    """One partition as the controller registered it (``org.apache.kafka.metadata.PartitionRegistration``)."""

    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int  # NO_LEADER (-1) when none
    leader_epoch: int
    partition_epoch: int
    #: KIP-966's eligible leader replicas and last known ELR (empty before 3.7, or when unused)
    elr: tuple[int, ...] = ()
    last_known_elr: tuple[int, ...] = ()
    #: 1 (RECOVERING) after an unclean election, until the new leader has recovered
    leader_recovery_state: int = 0

    def merge(self, change: Mapping[str, Any]) -> PartitionRegistration:
        """This registration with a ``PartitionChangeRecord`` applied, as ``PartitionRegistration.merge``."""
        def ints(name: str, old: tuple[int, ...]) -> tuple[int, ...]:
            v = change.get(name)
            return old if v is None else tuple(int(x) for x in v)

        leader, epoch = self.leader, self.leader_epoch
        new_leader = int(change.get("leader", NO_LEADER_CHANGE))
        if new_leader != NO_LEADER_CHANGE:
            leader, epoch = new_leader, epoch + 1
        state = int(change.get("leaderRecoveryState", -1))
        return PartitionRegistration(
            replicas=ints("replicas", self.replicas), isr=ints("isr", self.isr), leader=leader, leader_epoch=epoch,
            partition_epoch=self.partition_epoch + 1, elr=ints("eligibleLeaderReplicas", self.elr),
            last_known_elr=ints("lastKnownElr", self.last_known_elr),
            leader_recovery_state=self.leader_recovery_state if state < 0 else state)

    @classmethod
    def of(cls, record: Mapping[str, Any]) -> PartitionRegistration:
        """A ``PartitionRecord``'s registration."""
        def ints(name: str) -> tuple[int, ...]:
            return tuple(int(x) for x in (record.get(name) or ()))

        return cls(replicas=ints("replicas"), isr=ints("isr"), leader=int(record.get("leader", NO_LEADER)),
                   leader_epoch=int(record.get("leaderEpoch", -1)), partition_epoch=int(record.get("partitionEpoch", -1)),
                   elr=ints("eligibleLeaderReplicas"), last_known_elr=ints("lastKnownElr"),
                   leader_recovery_state=int(record.get("leaderRecoveryState", 0)))


@dataclass(frozen=True)
class ClusterMetadata:
    """The topics and configs replayed from a log dir's ``__cluster_metadata-0`` (see the module)."""

    log_dir: Path
    topics: Mapping[str, KraftTopic]
    #: Topic-level configs (``kafka-configs --entity-type topics``), Kafka names, by topic.
    topic_configs: Mapping[str, Mapping[str, str]]
    #: Cluster-wide dynamic broker configs (``--entity-type brokers --entity-default``), broker names.
    cluster_defaults: Mapping[str, str]
    #: Per-broker dynamic configs (``--entity-type brokers --entity-name N``), broker names, by id.
    broker_configs: Mapping[str, Mapping[str, str]]
    #: ``node.id`` (or ``broker.id``) of the log dir's ``meta.properties``, when there is one.
    node_id: str | None
    #: The snapshot file the replay started from, or None (the log from its start).
    snapshot: str | None
    #: The offset after the last record applied.
    end_offset: int
    #: Records applied, and records skipped (other types, undecodable).
    applied: int
    skipped: int
    #: What the replay could not do or had to assume, in words.
    notes: tuple[str, ...] = field(default=())
    #: Every partition's registration (replicas, ISR, leader, epochs), by topic name and partition.
    partition_states: Mapping[tuple[str, int], PartitionRegistration] = field(default_factory=dict)

    def partition(self, topic: str, partition: int) -> PartitionRegistration | None:
        """The partition's registration, or None when the metadata has none (not a topic of the
        cluster, or ``__cluster_metadata`` itself, which KRaft replicates by its own quorum)."""
        return self.partition_states.get((topic, partition))

    def topic_id(self, topic: str) -> str | None:
        """The topic's id; ``__cluster_metadata``'s own is the fixed ``Uuid.METADATA_TOPIC_ID``."""
        if topic == CLUSTER_METADATA_TOPIC:
            return METADATA_TOPIC_ID
        t = self.topics.get(topic)
        return None if t is None else t.topic_id

    def topic_defaults(self) -> tuple[dict[str, str], dict[str, str], list[str]]:
        """The dynamic broker configs as topic configs: ``(cluster defaults, this dir's broker's
        own, problems)``; each maps topic config names to values (``log.retention.hours=1`` is
        ``retention.ms=3600000``)."""
        cluster, problems = topic_configs_from_broker(self.cluster_defaults)
        own: dict[str, str] = {}
        if self.node_id is not None and self.node_id in self.broker_configs:
            own, more = topic_configs_from_broker(self.broker_configs[self.node_id])
            problems += more
        return cluster, own, problems


# --- replay ----------------------------------------------------------------------------------------


class _State:
    """The mutable state of one replay."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}  # topic id -> name
        self.ids: dict[str, str] = {}  # name -> topic id
        self.partitions: dict[str, set[int]] = {}  # topic id -> partitions
        self.registrations: dict[tuple[str, int], PartitionRegistration] = {}  # (topic id, partition)
        self.configs: dict[tuple[int, str], dict[str, str]] = {}
        self.applied = 0
        self.skipped = 0
        self.txn: list[tuple[str, dict[str, Any]]] | None = None
        self.end_offset = 0

    def record(self, value: bytes | None) -> None:
        decoded = decode_metadata_record(value).value
        if decoded is None or "data" not in decoded:
            self.skipped += 1  # undecodable: kept out of the model
            return
        kind, data = decoded["type"], decoded["data"]
        if kind == "BEGIN_TRANSACTION_RECORD":
            self.txn = []
        elif kind == "END_TRANSACTION_RECORD":
            pending, self.txn = self.txn or [], None
            for k, d in pending:
                self.apply(k, d)
        elif kind == "ABORT_TRANSACTION_RECORD":
            self.skipped += len(self.txn or [])
            self.txn = None
        elif self.txn is not None:
            self.txn.append((kind, data))
        else:
            self.apply(kind, data)

    def apply(self, kind: str, data: dict[str, Any]) -> None:
        if kind == "TOPIC_RECORD":
            name, tid = str(data["name"]), str(data["topicId"])
            old = self.ids.get(name)
            if old is not None and old != tid:
                self.names.pop(old, None)
                self.partitions.pop(old, None)
            self.ids[name] = tid
            self.names[tid] = name
            self.partitions.setdefault(tid, set())
        elif kind == "PARTITION_RECORD":
            tid, p = str(data["topicId"]), int(data["partitionId"])
            self.partitions.setdefault(tid, set()).add(p)
            self.registrations[(tid, p)] = PartitionRegistration.of(data)
        elif kind == "PARTITION_CHANGE_RECORD":
            part = (str(data["topicId"]), int(data["partitionId"]))
            reg = self.registrations.get(part)
            if reg is None:  # a change of a partition the copy does not hold the record of
                self.skipped += 1
                return
            self.registrations[part] = reg.merge(data)
        elif kind == "REMOVE_TOPIC_RECORD":
            tid = str(data["topicId"])
            removed = self.names.pop(tid, None)
            self.partitions.pop(tid, None)
            for gone in [k for k in self.registrations if k[0] == tid]:
                del self.registrations[gone]
            if removed is not None:
                if self.ids.get(removed) == tid:
                    del self.ids[removed]
                self.configs.pop((RESOURCE_TOPIC, removed), None)
        elif kind == "CONFIG_RECORD":
            rtype = int(data["resourceType"])
            if rtype not in (RESOURCE_TOPIC, RESOURCE_BROKER):
                self.skipped += 1
                return
            key = (rtype, str(data["resourceName"]))
            value = data["value"]
            if value is None:
                self.configs.get(key, {}).pop(str(data["name"]), None)
            else:
                self.configs.setdefault(key, {})[str(data["name"])] = str(value)
        else:
            self.skipped += 1
            return
        self.applied += 1


def _records(path: Path, start: int = 0) -> Iterator[tuple[int, bytes | None, bool]]:
    """``(offset, value, is_control)`` of the records of a record-set file at ``start`` or later."""
    for batch in FileRecords(path).batches():
        if batch.last_offset < start:
            continue
        for r in batch.records():
            if r.offset >= start:
                yield r.offset, r.value, batch.is_control


def _snapshots(mdir: Path) -> list[tuple[int, int, Path]]:
    out = []
    for p in mdir.iterdir():
        m = _SNAPSHOT.match(p.name)
        if m:
            out.append((int(m.group(1)), int(m.group(2)), p))
    return sorted(out)


def _node_id(log_dir: Path) -> str | None:
    from storage_core.log.checkpoint import MetaProperties

    try:
        props = MetaProperties(log_dir / META_PROPERTIES_FILE).read()
    except (KlogError, OSError):
        return None
    return MetaProperties.node_of(props)


def replay_cluster_metadata(log_dir: str | os.PathLike[str]) -> ClusterMetadata | None:
    """The cluster metadata of ``log_dir``'s ``__cluster_metadata-0``, or None when it has none.
    Never raises for what is in the files: what could not be read is in :attr:`ClusterMetadata.notes`."""
    log_dir = as_path(log_dir)
    mdir = log_dir / CLUSTER_METADATA_DIR
    if not mdir.is_dir():
        return None
    notes: list[str] = []
    state = _State()
    snapshot: Path | None = None
    start = 0
    for end, _epoch, path in reversed(_snapshots(mdir)):  # the newest that reads to its end
        trial = _State()
        try:
            for _offset, value, control in _records(path):
                if not control:  # SnapshotHeader/Footer, KRaft voters: not metadata records
                    trial.record(value)
        except KlogError as exc:
            notes.append(f"snapshot {path.name} is unreadable ({exc}); an older one or the log is used")
            continue
        state, snapshot, start = trial, path, end
        break
    state.end_offset = start
    segments = sorted((p for p in mdir.iterdir() if is_log_file(p.name)), key=base_offset_of)
    first: int | None = None
    for seg in segments:
        try:
            for offset, value, control in _records(seg, start):
                if first is None:
                    first = offset
                if not control:  # LeaderChange and the KRaft control records: not metadata records
                    state.record(value)
                state.end_offset = offset + 1
        except KlogError as exc:
            notes.append(f"stopped reading {seg.name} at a corrupt batch ({exc}); later records are not applied")
            break
    if first is not None and first > start:
        since = f"snapshot {snapshot.name}" if snapshot else "the start of the log (no snapshot)"
        notes.append(f"records {start}..{first - 1} after {since} are not in this copy: the model may be incomplete")
    if state.txn is not None:
        notes.append(f"the log ends inside a metadata transaction: its {len(state.txn)} records are not applied")
    topics = {}
    for name, tid in state.ids.items():
        topics[name] = KraftTopic(name, tid, tuple(sorted(state.partitions.get(tid, ()))))
    return ClusterMetadata(
        log_dir=log_dir,
        topics=MappingProxyType(dict(sorted(topics.items()))),
        topic_configs=_frozen({n: c for (t, n), c in state.configs.items() if t == RESOURCE_TOPIC and c}),
        cluster_defaults=MappingProxyType(dict(state.configs.get((RESOURCE_BROKER, ""), {}))),
        broker_configs=_frozen({n: c for (t, n), c in state.configs.items() if t == RESOURCE_BROKER and n and c}),
        node_id=_node_id(log_dir),
        snapshot=None if snapshot is None else snapshot.name,
        end_offset=state.end_offset,
        applied=state.applied,
        skipped=state.skipped,
        notes=tuple(notes),
        partition_states=MappingProxyType({(state.names[tid], p): reg for (tid, p), reg in sorted(state.registrations.items())
                                           if tid in state.names}),
    )


def _frozen(d: Mapping[str, Mapping[str, str]]) -> Mapping[str, Mapping[str, str]]:
    return MappingProxyType({k: MappingProxyType(dict(v)) for k, v in sorted(d.items())})


# --- the per-process cache -------------------------------------------------------------------------

_cache: dict[Path, tuple[tuple[tuple[str, int, float], ...], ClusterMetadata | None]] = {}
_cache_lock = threading.Lock()


def _signature(mdir: Path) -> tuple[tuple[str, int, float], ...]:
    out = []
    try:
        entries = list(mdir.iterdir())
    except OSError:
        return ()
    for e in entries:
        if e.name.endswith((".log", ".checkpoint")):
            try:
                st = e.stat()
            except OSError:
                continue
            out.append((e.name, st.st_size, st.st_mtime))
    return tuple(sorted(out))


def cluster_metadata(log_dir: str | os.PathLike[str]) -> ClusterMetadata | None:
    """:func:`replay_cluster_metadata`, cached in the process until a metadata file changes."""
    given = as_path(log_dir)
    key = given if isinstance(given, ObjectPath) else Path(os.path.abspath(given))
    mdir = key / CLUSTER_METADATA_DIR
    if not mdir.is_dir():
        return None
    sig = _signature(mdir)
    with _cache_lock:
        hit = _cache.get(key)
    if hit is not None and hit[0] == sig:
        return hit[1]
    result = replay_cluster_metadata(key)
    with _cache_lock:
        _cache[key] = (sig, result)
    return result


def find_cluster_metadata(log_dirs: Iterable[str | os.PathLike[str]]) -> ClusterMetadata | None:
    """The cluster metadata of ``log_dirs`` (a broker keeps ``__cluster_metadata-0`` in one of its
    ``log.dirs``), or None when none holds it. Where several do (the dirs of several brokers, a
    controller's among them), a controller's copy first (the quorum's own log: a dir holding no
    partition but ``__cluster_metadata-0``), else the most advanced copy: the one whose replay
    reaches the highest offset (the first of them on a tie). A broker that died stopped replicating
    the metadata: its copy says what the cluster was when it died."""
    best: tuple[bool, int] | None = None
    chosen: ClusterMetadata | None = None
    for d in log_dirs:
        found = cluster_metadata(d)
        if found is None:
            continue
        rank = (_controller_dir(as_path(d)), found.end_offset)
        if best is None or rank > best:
            best, chosen = rank, found
    return chosen


def _controller_dir(log_dir: Path) -> bool:
    """Whether ``log_dir`` is a KRaft controller's metadata dir: ``__cluster_metadata-0`` and no other
    partition dir (a broker's holds its partitions beside it)."""
    try:
        return not any(p.is_dir() and p.name != CLUSTER_METADATA_DIR and "-" in p.name and not p.name.startswith(".")
                       for p in log_dir.iterdir())
    except OSError:
        return False


def check_new_topic(kraft: ClusterMetadata | None, topic: str) -> None:
    """Refuse to create ``topic`` in a broker's log dir whose KRaft metadata does not know it.

    A broker loads only the partitions its metadata assigns it: a partition dir of an unknown
    topic is a stray (Kafka 3.7+ renames it ``-stray`` and deletes it), so a write that created
    one would lose its records at the broker's next start. Where there is no KRaft metadata (a dir
    of klog's own, a copy) any valid topic may be created."""
    if kraft is None or topic in kraft.topics:
        return
    raise InvalidTopicError(
        f"topic {topic!r} is not in the KRaft metadata of {kraft.log_dir} ({CLUSTER_METADATA_DIR}): a Kafka broker "
        "would treat its partition dirs as stray and delete them on its next start. Create the topic through the "
        "broker first (kafka-topics.sh --create, with the partition count you want), stop the broker, then write; "
        f"or write into a log dir without {CLUSTER_METADATA_DIR}")
