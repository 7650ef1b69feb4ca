"""The replicas of a cluster's partitions across the log dirs of several brokers: which one a read
reads, and up to which offset the cluster has committed it.

A replicated partition has a copy (a replica) in the log dir of each broker it is assigned to. Given
the log dirs of several brokers of one cluster (each dir's ``meta.properties`` names its
``cluster.id`` and ``node.id``), a partition found in more than one of them is one partition with
several replicas, not a conflict. The rules, each Kafka's own:

- **the registration** of each partition (replicas, ISR, ELR, leader, leader epoch) is the KRaft
  metadata's (:class:`~storage_core.log.cluster_metadata.PartitionRegistration`), replayed from the
  most advanced copy of ``__cluster_metadata`` among the dirs
  (:func:`~storage_core.log.cluster_metadata.find_cluster_metadata`);
- **the replica read** is the leader's when its dir is given (the broker serves fetches from the
  leader, ``ReplicaManager.fetchMessages``); otherwise the in-sync (or eligible, KIP-966) replica
  whose log is longest along the leader-epoch lineage, which is the replica Kafka's election would
  make leader (``PartitionChangeBuilder.electLeader`` takes an ISR/ELR member) and whose log the
  others would truncate to. With no in-sync replica among the dirs (or no KRaft metadata, as in a
  ZooKeeper-era copy), the replica with the highest leader epoch and then the longest log is read,
  and :attr:`ReplicaSet.problem` says what may be missing;
- **divergence** (:func:`divergence_offset`): where a replica's leader-epoch lineage leaves the
  read replica's, it holds records Kafka would truncate (``AbstractFetcherThread``'s truncation by
  ``OffsetsForLeaderEpoch``, ``LeaderEpochFileCache.endOffsetFor``); they are never read, and
  :attr:`Replica.diverges_at` names the offset Kafka would truncate to;
- **the high watermark**, where records end for a consumer (``Partition.maybeIncrementLeaderHW``:
  the lowest log end offset among the ISR): the highest of the replicas' checkpointed high
  watermarks (``replication-offset-checkpoint``, each taken no further than where that replica
  agrees with the one read), or, where the dir of every member of the ISR is given, the last offset
  all of them hold along the read replica's lineage, whichever is higher. A partition whose ISR is
  the read replica alone reads to its log end (its high watermark is its log end offset).

:func:`replica_sets` applies these to the partition dirs that :func:`~storage_core.log.manager.find_partitions`
found; every read path gets the chosen replica from there, with its :attr:`ReplicaSet.high_watermark`
(the bound :meth:`Log.bound_to <storage_core.log.log.Log.bound_to>` puts on the log opened).
Nothing here decodes a record: it reads ``meta.properties``, the checkpoints, each replica's
``leader-epoch-checkpoint`` and the tail of its last segment.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from storage_core.errors import KlogError, MixedClustersError, ReplicatedWriteError
from storage_core.files import (
    base_offset_of,
    is_log_file,
)
from storage_core.log.checkpoint import EpochEntry, LeaderEpochCheckpointFile, MetaProperties
from storage_core.log.cluster_metadata import (
    CLUSTER_METADATA_TOPIC,
    NO_LEADER,
    ClusterMetadata,
    PartitionRegistration,
)
from storage_core.log.dir_state import LogDirStates
from storage_core.log.topic_partition import TopicPartition
from storage_core.record.file_records import FileRecords

__all__ = ["BrokerDir", "Replica", "ReplicaSet", "broker_dir", "divergence_offset", "end_offset_for_epoch",
           "first_disagreement", "replica_sets", "write_targets"]

#: ``LeaderEpochFileCache``'s answers for an epoch it cannot place.
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


@dataclass(frozen=True)
class BrokerDir:
    """A log dir and the broker whose it is, from its ``meta.properties`` (``MetaProperties.java``:
    ``cluster.id``, ``node.id``, or ``broker.id`` in the ZooKeeper era, and ``directory.id``);
    each is None where the file, or the key, is missing."""

    path: Path
    cluster_id: str | None
    node_id: int | None
    directory_id: str | None


def broker_dir(path: Path) -> BrokerDir:
    """The broker identity of the log dir ``path`` (an unreadable ``meta.properties`` is no identity)."""
    try:
        props = MetaProperties.in_dir(path).read()
    except (KlogError, OSError):
        props = {}
    raw = MetaProperties.node_of(props)
    try:
        node = None if raw is None else int(raw)
    except ValueError:
        node = None
    return BrokerDir(path, props.get("cluster.id"), node, props.get("directory.id"))


def check_one_cluster(dirs: Iterable[BrokerDir]) -> None:
    """Refuse log dirs of two different clusters, naming a dir of each and both cluster ids."""
    seen: dict[str, BrokerDir] = {}
    for d in dirs:
        if d.cluster_id is None:
            continue
        seen.setdefault(d.cluster_id, d)
        if len(seen) > 1:
            (a, da), (b, db) = list(seen.items())[:2]
            raise MixedClustersError(
                f"the log dirs belong to different Kafka clusters: {da.path} is of cluster {a} and {db.path} of "
                f"cluster {b} (meta.properties cluster.id); give the dirs of one cluster's brokers")


# --- the leader-epoch lineage ------------------------------------------------------------------------

def end_offset_for_epoch(epochs: Sequence[EpochEntry], log_end_offset: int, requested: int) -> tuple[int, int]:
    """``LeaderEpochFileCache.endOffsetFor(requestedEpoch, logEndOffset)``: ``(epoch, end offset)``:
    the log end offset for the latest epoch; for an older one, the largest epoch at or below it and
    the start offset of the first epoch above it; ``(UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)`` for
    an epoch above every known one."""
    if requested == UNDEFINED_EPOCH or not epochs:
        return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
    if epochs[-1].epoch == requested:
        return requested, log_end_offset
    higher = next((e for e in epochs if e.epoch > requested), None)
    if higher is None:
        return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
    floor = next((e for e in reversed(epochs) if e.epoch <= requested), None)
    return (requested if floor is None else floor.epoch), higher.start_offset


def divergence_offset(follower: Sequence[EpochEntry], follower_end: int, leader: Sequence[EpochEntry],
                      leader_end: int) -> int:
    """The offset a follower would truncate its log to, following ``leader``: its records below it
    agree with the leader's lineage; those at or after it Kafka would truncate (the follower's log
    end offset when nothing diverges). ``AbstractFetcherThread.getOffsetTruncationState``: the
    follower asks the leader for the end of its latest epoch (``OffsetsForLeaderEpoch``); when the
    leader answers with an epoch the follower lacks, the follower truncates to its own end of the
    largest epoch below it and asks again."""
    epochs = list(follower)
    end = follower_end
    while True:
        if not epochs:
            # no lineage to compare (an empty log, or one written before leader epochs): only the
            # leader's end bounds it
            return min(end, leader_end)
        leader_epoch, leader_offset = end_offset_for_epoch(leader, leader_end, epochs[-1].epoch)
        if leader_offset == UNDEFINED_EPOCH_OFFSET:
            return min(end, leader_end)
        if leader_epoch == UNDEFINED_EPOCH:
            return min(leader_offset, end)
        own_epoch, own_end = end_offset_for_epoch(epochs, end, leader_epoch)
        if own_end == UNDEFINED_EPOCH_OFFSET:
            return min(leader_offset, end)
        if own_epoch != leader_epoch:
            end = min(own_end, end)  # an intermediate truncation, then ask again
            epochs = [e for e in epochs if e.start_offset < end]  # LeaderEpochFileCache.truncateFromEnd
            continue
        return min(own_end, leader_offset, end)


# --- replicas ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Replica:
    """One broker's copy of a partition, as its files say (nothing decoded)."""

    broker: int | None
    path: Path
    log_dir: Path
    log_start_offset: int
    log_end_offset: int
    #: this broker's checkpointed high watermark (``replication-offset-checkpoint``), or None
    checkpoint_high_watermark: int | None
    epochs: tuple[EpochEntry, ...]
    #: the offset Kafka would truncate this replica to, following the replica read; None when it
    #: agrees with it up to its log end (and for the replica read)
    diverges_at: int | None = None

    @property
    def latest_epoch(self) -> int:
        return self.epochs[-1].epoch if self.epochs else UNDEFINED_EPOCH

    @property
    def agreed_end(self) -> int:
        """Where this replica stops agreeing with the replica read (its log end when it agrees)."""
        return self.log_end_offset if self.diverges_at is None else self.diverges_at


@dataclass(frozen=True)
class ReplicaSet:
    """A partition's replicas among the log dirs, the one read and where its records end."""

    topic_partition: TopicPartition
    read: Replica
    #: every replica found, the one read included, by broker id
    replicas: tuple[Replica, ...]
    registration: PartitionRegistration | None
    #: where a read ends (exclusive): None reads the replica to its log end
    high_watermark: int | None
    #: why this replica is read, in words
    reason: str
    #: what may be missing (no in-sync replica among the dirs), or None
    problem: str | None = None
    notes: tuple[str, ...] = field(default=())

    @property
    def divergent(self) -> tuple[Replica, ...]:
        return tuple(r for r in self.replicas if r.diverges_at is not None)


def _log_end(path: Path, log_start: int) -> int:
    """A partition dir's log end offset from the tail of its last segment (nothing else opened)."""
    from storage_core.log.config import LogConfig
    from storage_core.log.loader import open_segment

    logs = sorted((p for p in path.iterdir() if is_log_file(p.name)), key=base_offset_of)
    if not logs:
        return log_start
    seg = open_segment(path, base_offset_of(logs[-1]), LogConfig(), False)
    try:
        return int(seg.read_next_offset())
    finally:
        seg.close()


def _replica(tp: TopicPartition, path: Path, log_dir: Path, broker: int | None, states: LogDirStates) -> Replica:
    logs = sorted((p for p in path.iterdir() if is_log_file(p.name)), key=base_offset_of)
    first = base_offset_of(logs[0]) if logs else 0
    state = states.of(log_dir)  # each log dir's checkpoints read once
    start = max(first, state.log_starts.get(tp, first))
    return Replica(broker=broker, path=path, log_dir=log_dir, log_start_offset=start,
                   log_end_offset=_log_end(path, start),
                   checkpoint_high_watermark=state.high_watermarks.get(tp),
                   epochs=tuple(LeaderEpochCheckpointFile.in_dir(path).read()))


def _lineage(r: Replica) -> tuple[int, int]:
    return r.latest_epoch, r.log_end_offset


def _brokers(ids: Iterable[int]) -> str:
    ids = sorted(ids)
    return ("broker " if len(ids) == 1 else "brokers ") + ", ".join(map(str, ids)) if ids else "no broker"


def choose_replica(tp: TopicPartition, replicas: Sequence[Replica], reg: PartitionRegistration | None) -> ReplicaSet:
    """The replica of ``tp`` a read reads among ``replicas`` and where it ends (see the module)."""
    by_broker = {r.broker: r for r in replicas}
    problem = None
    notes: list[str] = []
    if reg is not None and reg.leader != NO_LEADER and reg.leader in by_broker:
        read = by_broker[reg.leader]
        reason = f"the leader (broker {reg.leader}, leader epoch {reg.leader_epoch})"
    elif reg is not None:
        eligible = [r for r in replicas if r.broker in reg.isr or r.broker in reg.elr]
        if eligible:
            read = max(eligible, key=_lineage)
            leader = "no leader" if reg.leader == NO_LEADER else f"the leader's (broker {reg.leader}) dir is not given"
            reason = f"the in-sync replica with the longest log ({leader})"
        else:
            read = max(replicas, key=_lineage)
            reason = "the replica with the latest leader epoch and the longest log (no in-sync replica given)"
            eligible_ids = tuple(dict.fromkeys([*reg.isr, *reg.elr]))
            problem = (f"{tp}: none of its in-sync replicas ({_brokers(reg.isr)}"
                       + (f"; eligible: {', '.join(map(str, reg.elr))}" if reg.elr else "")
                       + f") is among the log dirs{'' if eligible_ids else ' (it has none)'}; "
                       f"{_brokers(r.broker for r in replicas if r.broker is not None)} "
                       f"{'holds an out-of-sync replica' if len(replicas) == 1 else 'hold out-of-sync replicas'}, "
                       "which may lack records the cluster committed; give the dir of an in-sync replica")
    else:
        read = max(replicas, key=_lineage)
        reason = ("the replica with the latest leader epoch and the longest log (no KRaft metadata: the ISR "
                  "is not known)")
    checked = []
    for r in replicas:
        if r is read:
            checked.append(r)
            continue
        at = divergence_offset(r.epochs, r.log_end_offset, read.epochs, read.log_end_offset)
        checked.append(r if at >= r.log_end_offset else
                       Replica(r.broker, r.path, r.log_dir, r.log_start_offset, r.log_end_offset,
                               r.checkpoint_high_watermark, r.epochs, diverges_at=at))
    hw = _high_watermark(read, checked, reg, notes)
    return ReplicaSet(tp, read, tuple(sorted(checked, key=lambda r: (r.broker is None, r.broker or 0))), reg, hw,
                      reason, problem, tuple(notes))


def _high_watermark(read: Replica, replicas: Sequence[Replica], reg: PartitionRegistration | None,
                    notes: list[str]) -> int | None:
    """Where the cluster has committed the partition, as the module says; None: the read replica's log end.

    The members whose logs bound it are the ISR, or, when the ISR is empty (every broker of a
    cluster shut down cleanly leaves it so under KIP-966), the eligible leader replicas: one of
    them is elected when the cluster starts, and its log becomes the partition's."""
    members = reg.isr or reg.elr if reg is not None else ()
    if reg is not None and set(members) <= {read.broker}:
        return None  # the replica read alone: its high watermark is its log end
    checkpointed = [min(r.checkpoint_high_watermark, r.agreed_end) for r in replicas
                    if r.checkpoint_high_watermark is not None]
    by_broker = {r.broker: r for r in replicas}
    candidates = list(checkpointed)
    if reg is not None and members and all(b in by_broker for b in members):
        candidates.append(min(by_broker[b].agreed_end for b in members))
    elif reg is None and len(replicas) > 1 and not checkpointed:
        candidates.append(min(r.agreed_end for r in replicas))
    if not candidates:
        if len(replicas) == 1 and reg is None:
            return None
        notes.append("no high watermark is known (no replication-offset-checkpoint, and not every in-sync "
                     "replica's dir is given): read to the log end of the replica read")
        return None
    return max(read.log_start_offset, min(max(candidates), read.log_end_offset))


def replica_sets(found: Mapping[TopicPartition, Sequence[tuple[Path, Path]]], brokers: Mapping[Path, BrokerDir],
                 kraft: ClusterMetadata | None) -> dict[TopicPartition, ReplicaSet]:
    """Each partition's :class:`ReplicaSet` from its partition dirs ``(path, log dir)`` among the
    log dirs, whose brokers are ``brokers`` (by log dir), with the registrations of ``kraft``.
    ``__cluster_metadata`` (replicated by KRaft's quorum, not by the ISR) is read from its most
    advanced copy."""
    states = LogDirStates()
    out: dict[TopicPartition, ReplicaSet] = {}
    for tp, where in found.items():
        replicas = [_replica(tp, path, log_dir, brokers[log_dir].node_id, states) for path, log_dir in where]
        if tp.topic == CLUSTER_METADATA_TOPIC:
            read = max(replicas, key=lambda r: r.log_end_offset)
            out[tp] = ReplicaSet(tp, read, tuple(replicas), None, None, "the most advanced copy of the metadata log")
            continue
        out[tp] = choose_replica(tp, replicas, None if kraft is None else kraft.partition(tp.topic, tp.partition))
    return out


# --- replicas cross-checked ----------------------------------------------------------------------------

def _batch_heads(path: Path, start: int, end: int) -> Iterator[tuple[int, int, int, int, int]]:
    """``(base offset, last offset, size, CRC, partition leader epoch)`` of each batch of the
    partition dir ``path`` that ends at or after ``start`` and begins before ``end`` (headers only:
    a follower appends the leader's batches byte for byte, ``Partition.appendRecordsToFollowerOrFutureReplica``)."""
    for log_path in sorted((p for p in path.iterdir() if is_log_file(p.name)), key=base_offset_of):
        for batch in FileRecords(log_path).batches(transient=True):
            if batch.last_offset < start:
                continue
            if batch.base_offset >= end:
                return
            yield (batch.base_offset, batch.last_offset, batch.size_in_bytes, int(getattr(batch, "crc", -1)),
                   int(getattr(batch, "partition_leader_epoch", -1)))


_HEAD_FIELDS = ("base offset", "last offset", "size", "CRC", "partition leader epoch")


def first_disagreement(tp: TopicPartition, read: Replica, other: Replica, start: int, end: int) -> str | None:
    """Where ``other``'s batches in ``[start, end)`` differ from those of the replica ``read``
    (comparing batch headers: base and last offset, size, CRC, partition leader epoch), in words
    naming the brokers, the offset and both values; None when they agree. ``start`` should lie past
    what either replica's cleaner compacted (each replica compacts on its own)."""
    heads_a = _batch_heads(read.path, start, end)
    heads_b = _batch_heads(other.path, start, end)
    while True:
        a, b = next(heads_a, None), next(heads_b, None)
        if a is None or b is None:
            if a == b:
                return None
            have, lacks = (read, other) if b is None else (other, read)
            at = (a or b or (0,))[0]
            return (f"{tp}: broker {have.broker}'s replica has a batch at offset {at} that broker {lacks.broker}'s "
                    f"lacks, though both should hold offsets {start}..{end - 1}")
        if a != b:
            field_name, va, vb = next((n, x, y) for n, x, y in zip(_HEAD_FIELDS, a, b, strict=True) if x != y)
            return (f"{tp}: the replicas of brokers {read.broker} and {other.broker} differ at offset "
                    f"{min(a[0], b[0])}: {field_name} {va} in {read.path}, {vb} in {other.path}; a follower's batches "
                    "are the leader's, byte for byte")


# --- writes: every in-sync replica gets the same batches ------------------------------------------

def write_targets(rs: ReplicaSet) -> tuple[Path, ...]:
    """The partition dirs a write into the replicated partition ``rs`` must reach besides the one
    read (``rs.read.path``, where its tasks stage), so that every replica given holds the same
    batches at the same offsets; raises :class:`~storage_core.errors.ReplicatedWriteError` before
    anything is written when that cannot be:

    - an in-sync replica's dir is not among the log dirs (its broker would become leader, or stay
      one, without the records, and the others would truncate them: ``Partition.makeFollower``);
    - the replicas to write do not end at the same offset along one lineage (a follower behind,
      or one that diverges: the same offsets cannot be appended to both).

    A replica out of the ISR that ends where the others do is written too; one behind or divergent
    is left to Kafka (it fetches, or truncates, from the leader when the cluster runs again)."""
    tp = rs.topic_partition
    reg = rs.registration
    by_broker = {r.broker: r for r in rs.replicas}
    if reg is not None:
        # the ISR, or the eligible replicas when a clean shutdown of every broker emptied it (KIP-966)
        members = reg.isr or reg.elr
        missing = [b for b in members if b not in by_broker]
        if missing:
            which = "ISR" if reg.isr else "eligible leader replicas"
            raise ReplicatedWriteError(
                f"a write into {tp} must reach every in-sync replica ({which} {', '.join(map(str, members))} by the "
                f"KRaft metadata), but the log dirs of {_brokers(missing)} are not given; nothing was written: give "
                "every broker's log dirs")
        must = [by_broker[b] for b in members]
    else:
        must = list(rs.replicas)
    end = rs.read.log_end_offset
    uneven = [r for r in must if r.log_end_offset != end or r.diverges_at is not None]
    if uneven:
        said = ", ".join(f"broker {r.broker} ends at {r.log_end_offset}"
                         + (f" and diverges at {r.diverges_at}" if r.diverges_at is not None else "") for r in uneven)
        raise ReplicatedWriteError(
            f"the in-sync replicas of {tp} do not end at the same offset (broker {rs.read.broker} ends at {end}; {said}), "
            "so the same offsets cannot be appended to each; nothing was written: start the cluster until its "
            "followers have caught up, stop it cleanly, then write")
    extra = [r for r in rs.replicas if r not in must and r.log_end_offset == end and r.diverges_at is None]
    return tuple(r.path for r in [*must, *extra] if r.path != rs.read.path)
