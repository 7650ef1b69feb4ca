"""Consumer groups restored: each group's committed offsets written into a stopped broker's
``__consumer_offsets``, as its group coordinator writes them, so that the group's consumers resume
where they were (``klog restore --groups``; issue 55).

What is written, per group, into the partition the coordinator loads the group from
(:func:`~storage_core.read.groups.offsets_partition_for`: ``Utils.abs(groupId.hashCode()) %
offsets.topic.num.partitions``, ``GroupCoordinatorService.partitionFor``):

- its group record, by the protocol the source's coordinator knew it by
  (:func:`~storage_core.read.groups.group_protocols`):

  * **classic**: a GroupMetadataValue (version 3, ``GroupCoordinatorRecordHelpers.GROUP_METADATA_VALUE_VERSION``)
    of an Empty group: the source's protocolType (``consumer``), generation 0, no protocol, leader
    or members, its state timestamp the restore's time (what ``newGroupMetadataRecord`` writes when
    the last member of a group leaves);
  * **consumer** (KIP-848): ConsumerGroupMetadataValue and ConsumerGroupTargetAssignmentMetadataValue
    (version 0) at epoch 1 and no members (what the coordinator keeps of a consumer group whose
    members all left): replayed as an Empty consumer group (``getOrMaybeCreatePersistedConsumerGroup``);
  * **simple** (offsets only): nothing; replaying an offset commit of an unknown group creates a
    "simple" classic group (``OffsetMetadataManager.replay``), which a classic member's JoinGroup
    adopts and a consumer-protocol member's heartbeat replaces by a consumer group, the offsets kept
    (``GroupMetadataManager.getOrMaybeCreateConsumerGroup``/``maybeDeleteEmptyClassicGroup``);

- an OffsetCommitValue (version 4, ``GroupCoordinatorRecordHelpers.offsetCommitValueVersion``, as
  Kafka 4.1 and later write it; 3.9 and later read it) per partition: the committed offset
  (translated, below), leader epoch -1 (the source's epochs are another cluster's history: a
  consumer then skips the epoch validation of the position, as after Admin's
  ``alterConsumerGroupOffsets``), the source's metadata string, the commit timestamp the restore's
  time, and the target's topic id (from its KRaft metadata; left out where it has none).

The records are one uncompressed batch per partition, CreateTime, each record's timestamp its
commit timestamp, as the coordinator appends them. The commit timestamp is the time of the restore,
not the source's: a restored commit is a new commit, and the coordinator expires an empty group's
offsets ``offsets.retention.minutes`` after it (after the group's state timestamp for a classic
group), so that the source's timestamps would expire an old backup's offsets at once.

Offsets: a committed offset is the next record to consume. Restored at their original offsets
(``translate=None``) it is kept, if the target partition reaches it; otherwise ``translate`` gives the
target offset of the first restored record at or after it (:class:`OffsetTranslation`: the target's
end of the partition where the group had consumed everything restored). An offset nothing maps to is
refused (``unmapped="fail"``), left out with a warning (``"skip"``) or set to the target partition's
log end (``"end"``) or log start (``"start"``).

The write is klog's staged commit (:mod:`storage_core.log.staged`): staged, then made visible at
once under the log dir's lock, rolled back after a crash. Every refusal comes before anything is
written, in one line: a dir held by a broker, a target without ``__consumer_offsets``, a group's
topic or partition the target lacks, a group the target already has, an offset nothing maps to.
"""

from __future__ import annotations

import bisect
import json
import logging
import os
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, get_args

from storage_core.errors import GroupRestoreError, KlogError
from storage_core.log.cluster_metadata import cluster_metadata
from storage_core.log.lock import check_free_to_stage
from storage_core.log.manager import PartitionDir, find_partitions, open_log_read_only
from storage_core.log.staged import StagedPartition, StagingWriter, collect_staging, commit_job
from storage_core.log.topic_configs import config_for_topic, load_topic_configs
from storage_core.log.topic_partition import GROUP_OFFSETS_TOPIC, TopicPartition
from storage_core.read.groups import CLASSIC, CONSUMER, SIMPLE, group_offsets, group_protocols, offsets_partition_for
from storage_core.record.compression import CompressionType
from storage_core.record.messages.coordinator import (
    CONSUMER_GROUP_METADATA_KEY,
    CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY,
    GROUP_METADATA_KEY,
    OFFSET_COMMIT_KEY,
)
from storage_core.record.messages.decoders import CONSUMER_PROTOCOL_TYPE, Decoder, encode_coordinator_record
from storage_core.record.messages.schema import MessageSpec

__all__ = ["GroupOffset", "OffsetTranslation", "RestoreGroupsReport", "RestoredOffset", "SkippedOffset",
           "load_groups", "restore_groups"]

log = logging.getLogger("klog")

Unmapped = Literal["fail", "skip", "end", "start"]
UNMAPPED_POLICIES: tuple[str, ...] = get_args(Unmapped)
PROTOCOLS = (CLASSIC, CONSUMER, SIMPLE)

#: The value versions written (``GroupCoordinatorRecordHelpers`` of Kafka 4.4: ``offsetCommitValueVersion``
#: without an expire timestamp, ``GROUP_METADATA_VALUE_VERSION``; the consumer group's records at 0).
OFFSET_COMMIT_VERSION, GROUP_METADATA_VERSION, CONSUMER_GROUP_VERSION = 4, 3, 0
#: The epoch of a restored consumer-protocol group (its first member's heartbeat bumps it).
RESTORED_GROUP_EPOCH = 1
NO_LEADER_EPOCH = -1  # RecordBatch.NO_PARTITION_LEADER_EPOCH

#: source (topic, partition), committed offset -> target offset, None where no record maps it
Translate = Callable[[TopicPartition, int], "int | None"]


@dataclass(frozen=True)
class GroupOffset:
    """One committed offset of a group to restore."""

    offset: int
    metadata: str | None = None


@dataclass(frozen=True)
class RestoredOffset:
    group: str
    topic_partition: TopicPartition
    source_offset: int
    target_offset: int
    offsets_partition: int  # the __consumer_offsets partition it was written to
    how: str  # "kept", "translated", "end" or "start" (an unmapped offset's policy)


@dataclass(frozen=True)
class SkippedOffset:
    group: str
    topic_partition: TopicPartition
    source_offset: int
    reason: str


@dataclass(frozen=True)
class RestoreGroupsReport:
    """What :func:`restore_groups` wrote."""

    restored: tuple[RestoredOffset, ...]
    skipped: tuple[SkippedOffset, ...]
    #: each group written, and the protocol its records are of
    protocols: Mapping[str, str]
    records: int
    #: each ``__consumer_offsets`` partition written: (first offset, end offset) of the records
    partitions: Mapping[int, tuple[int, int]] = field(default_factory=dict)


class OffsetTranslation:
    """Source offsets to target offsets, from what a restore wrote: per source partition, the
    source offsets of the restored records (ascending) and the target offsets they were written at.

    A committed offset ``c`` (the next record to consume) becomes the target offset of the first
    restored record at or after ``c``; past the last restored record, up to the source partition's
    end (``source_ends``; else the last restored offset + 1), the target partition's end
    (``target_ends``; else the last target offset + 1): the group had consumed everything. None for
    a partition not restored, or an offset past the source's end."""

    def __init__(self, offsets: Mapping[TopicPartition, tuple[Sequence[int], Sequence[int]]], *,
                 source_ends: Mapping[TopicPartition, int] | None = None,
                 target_ends: Mapping[TopicPartition, int] | None = None) -> None:
        self._src: dict[TopicPartition, list[int]] = {}
        self._dst: dict[TopicPartition, list[int]] = {}
        for tp, (src, dst) in offsets.items():
            s, d = list(map(int, src)), list(map(int, dst))
            if len(s) != len(d):
                raise ValueError(f"{tp}: {len(s)} source offsets but {len(d)} target offsets; expected one each")
            if any(b <= a for a, b in zip(s, s[1:], strict=False)) or any(b <= a for a, b in zip(d, d[1:], strict=False)):
                raise ValueError(f"{tp}: the source and target offsets must both be strictly ascending")
            self._src[tp], self._dst[tp] = s, d
        self._source_ends = dict(source_ends or {})
        self._target_ends = dict(target_ends or {})

    def __call__(self, tp: TopicPartition, offset: int) -> int | None:
        src = self._src.get(tp)
        if src is None:
            return None
        dst = self._dst[tp]
        i = bisect.bisect_left(src, offset)
        if i < len(src):
            return dst[i]
        source_end = self._source_ends.get(tp, src[-1] + 1 if src else None)
        target_end = self._target_ends.get(tp, dst[-1] + 1 if dst else None)
        if source_end is None or target_end is None or offset > source_end:
            return None
        return target_end


# --- the groups to restore ---------------------------------------------------------------------


Groups = Mapping[str, Mapping[TopicPartition, GroupOffset]]


def load_groups(source: str | os.PathLike[str] | Mapping[str, Mapping[TopicPartition, object]],
                ) -> tuple[dict[str, dict[TopicPartition, GroupOffset]], dict[str, tuple[str, str]]]:
    """The groups of ``source`` and what is known of their protocols (group -> (protocol,
    protocolType)): a log dir (or several, ``"a,b"``) read by :func:`~storage_core.read.groups.group_offsets`
    and :func:`~storage_core.read.groups.group_protocols`; a ``klog groups --json`` file (protocols
    unknown); or a mapping group -> (topic, partition) -> offset (an int, a :class:`GroupOffset` or a
    :class:`~storage_core.read.groups.Committed`)."""
    if isinstance(source, Mapping):
        out: dict[str, dict[TopicPartition, GroupOffset]] = {}
        for group, parts in source.items():
            out[group] = {TopicPartition(tp.topic, tp.partition) if isinstance(tp, TopicPartition)
                          else TopicPartition(*tp): _group_offset(v, group, tp) for tp, v in parts.items()}
        return out, {}
    path = Path(source)
    if path.is_file():
        return _groups_json(path), {}
    from storage_core.read.options import split_paths

    paths = split_paths(str(source))
    found = group_offsets(paths)
    groups = {g: {tp: GroupOffset(c.offset, c.metadata) for tp, c in parts.items()} for g, parts in found.items()}
    return groups, group_protocols(paths)


def _group_offset(v: object, group: str, tp: object) -> GroupOffset:
    if isinstance(v, GroupOffset):
        return v
    if isinstance(v, bool) or not isinstance(v, int):
        offset = getattr(v, "offset", None)
        if isinstance(offset, int) and not isinstance(offset, bool):
            return GroupOffset(offset, getattr(v, "metadata", None))
        raise GroupRestoreError(f"group {group!r} {tp}: offset {v!r} is not an offset; expected an int")
    return GroupOffset(v)


def _groups_json(path: Path) -> dict[str, dict[TopicPartition, GroupOffset]]:
    """``klog groups --json``'s rows: ``group``, ``topic``, ``partition``, ``committedOffset``, ``metadata``."""
    try:
        rows = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise GroupRestoreError(f"{path} is not a `klog groups --json` file: {e}") from e
    if not isinstance(rows, list):
        raise GroupRestoreError(f"{path}: expected a JSON list of rows (`klog groups --json`), found "
                                f"a {type(rows).__name__}")
    out: dict[str, dict[TopicPartition, GroupOffset]] = {}
    for i, r in enumerate(rows):
        try:
            tp = TopicPartition(str(r["topic"]), int(r["partition"]))
            out.setdefault(str(r["group"]), {})[tp] = GroupOffset(int(r["committedOffset"]), r.get("metadata"))
        except (KeyError, TypeError, ValueError) as e:
            raise GroupRestoreError(f"{path}: row {i} is not a `klog groups --json` row (group, topic, partition, "
                                    f"committedOffset): {e!r}") from e
    return out


# --- the target --------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Target:
    log_dir: Path
    offsets_dirs: Mapping[int, Path]  # __consumer_offsets partition -> its dir
    num_partitions: int
    #: each partition the groups name: (log start, log end)
    ranges: Mapping[TopicPartition, tuple[int, int]]
    topic_ids: Mapping[str, str]


def _target(log_dir: Path, wanted: set[TopicPartition]) -> _Target:
    if not log_dir.is_dir():
        raise GroupRestoreError(f"target {log_dir} is not a directory; expected a stopped broker's log dir")
    kraft = cluster_metadata(log_dir)
    pds = {pd.topic_partition: pd for pd in find_partitions([log_dir], allow_empty=True)}
    offsets_dirs = {tp.partition: pd.path for tp, pd in pds.items() if tp.topic == GROUP_OFFSETS_TOPIC}
    known = kraft.topics.get(GROUP_OFFSETS_TOPIC) if kraft is not None else None
    if known is None and not offsets_dirs:
        raise GroupRestoreError(
            f"target {log_dir} has no {GROUP_OFFSETS_TOPIC}: a broker creates it (offsets.topic.num.partitions "
            "partitions) when a group first looks up its coordinator; start the broker, run "
            "`kafka-consumer-groups.sh --bootstrap-server HOST:PORT --describe --group any` (or any consumer "
            "with a group.id) once, stop it, then restore")
    num = len(known.partitions) if known is not None else max(offsets_dirs) + 1
    missing = sorted(wanted - set(pds))
    if missing:
        tp = missing[0]
        raise GroupRestoreError(f"target {log_dir} has no partition {tp} (no dir {tp.dir_name}), which a group "
                                f"has an offset of; create the topic with its partitions first ({len(missing)} "
                                "partitions missing)")
    ranges: dict[TopicPartition, tuple[int, int]] = {}
    for tp in sorted(wanted):
        ranges[tp] = _log_range(pds[tp])
    ids = {t: kraft.topics[t].topic_id for t in {tp.topic for tp in wanted} if kraft is not None and t in kraft.topics}
    return _Target(log_dir, offsets_dirs, num, ranges, ids)


def _check_new_groups(target: Path, groups: set[str]) -> None:
    """Refuse groups the target's coordinator already has (group records or committed offsets): the
    restored records would be replayed over them, and a consumer group's records over a classic
    group (or the reverse) fail the load of the whole ``__consumer_offsets`` partition
    (``GroupMetadataManager.getOrMaybeCreatePersistedConsumerGroup``: "is not a consumer group")."""
    there = set(group_offsets([target])) | set(group_protocols([target]))
    clash = sorted(groups & there)
    if clash:
        raise GroupRestoreError(f"target {target} already has group {clash[0]!r} ({len(clash)} of the groups to "
                                "restore): delete it there first (kafka-consumer-groups.sh --delete --group), or "
                                "restore the others (only=...)")


def _log_range(pd: PartitionDir) -> tuple[int, int]:
    lg = open_log_read_only(pd)
    try:
        return lg.log_start_offset, lg.log_end_offset
    finally:
        lg.close()


# --- the restore -------------------------------------------------------------------------------


def restore_groups(groups: str | os.PathLike[str] | Mapping[str, Mapping[TopicPartition, object]],
                   target_dir: str | os.PathLike[str], *, translate: Translate | None = None,
                   unmapped: Unmapped = "fail", protocols: Mapping[str, str] | None = None,
                   only: Iterable[str] | None = None, now_ms: int | None = None,
                   lock_timeout_s: float = 60.0) -> RestoreGroupsReport:
    """Write each group's committed offsets into ``target_dir``'s ``__consumer_offsets`` (see the
    module): ``groups`` is a source log dir, a ``klog groups --json`` file or a mapping (:func:`load_groups`).

    ``translate``: source (topic, partition) and committed offset -> target offset, None where no
    record maps it (:class:`OffsetTranslation`); None keeps the offsets (a restore at the original
    offsets). ``unmapped``: what an offset nothing maps to does: ``fail`` (refused, nothing written),
    ``skip`` (left out, logged), ``end``/``start`` (the target partition's log end / start).
    ``protocols``: group -> ``classic``, ``consumer`` or ``simple``, over what the source says (a
    source without group records, such as a JSON file, restores ``simple`` groups). ``only``: these
    groups alone. ``now_ms``: the commit timestamp written (default: now).

    Raises :class:`~storage_core.errors.GroupRestoreError` (or ``LogDirLockedError`` for a dir a
    broker holds) before writing anything."""
    if unmapped not in UNMAPPED_POLICIES:
        raise GroupRestoreError(f"unmapped={unmapped!r}; expected one of {', '.join(UNMAPPED_POLICIES)}")
    target = Path(target_dir)
    check_free_to_stage(target, 0)  # a running broker's dir: refused at once, nothing written
    found, known = load_groups(groups)
    if only is not None:
        wanted_groups = set(only)
        absent = sorted(wanted_groups - set(found))
        if absent:
            raise GroupRestoreError(f"no group {absent[0]!r} in the source; groups found: "
                                    f"{', '.join(repr(g) for g in sorted(found)) or 'none'}")
        found = {g: v for g, v in found.items() if g in wanted_groups}
    chosen: dict[str, tuple[str, str]] = {}  # group -> (protocol, a classic group's protocolType)
    for g in found:
        protocol, protocol_type = known.get(g, (SIMPLE, ""))
        protocol = (protocols or {}).get(g, protocol)
        if protocol not in PROTOCOLS:
            raise GroupRestoreError(f"group {g!r}: protocol {protocol!r}; expected one of {', '.join(PROTOCOLS)}")
        chosen[g] = (protocol, (protocol_type or CONSUMER_PROTOCOL_TYPE) if protocol == CLASSIC else "")
    tgt = _target(target, {tp for parts in found.values() for tp in parts})
    _check_new_groups(target, set(found))
    now = int(time.time() * 1000) if now_ms is None else now_ms

    restored: list[RestoredOffset] = []
    skipped: list[SkippedOffset] = []
    for g, parts in sorted(found.items()):
        opart = offsets_partition_for(g, tgt.num_partitions)
        for tp, go in sorted(parts.items()):
            start, end = tgt.ranges[tp]
            if translate is None:
                mapped, how = (go.offset, "kept") if 0 <= go.offset <= end else (None, "")
            else:
                mapped, how = translate(tp, go.offset), "translated"
                if mapped is not None and not 0 <= mapped <= end:
                    raise GroupRestoreError(f"group {g!r} {tp}: offset {go.offset} translates to {mapped}, beyond "
                                            f"the target partition's end {end}; expected a translation of what "
                                            "was restored into this dir")
            if mapped is None:
                why = (f"group {g!r} {tp}: no restored record maps committed offset {go.offset} (the target "
                       f"partition holds offsets {start} to {end})")
                if unmapped == "fail":
                    raise GroupRestoreError(why + "; choose a policy for it: unmapped=skip, end or start")
                if unmapped == "skip":
                    log.warning("klog: %s; left out (unmapped=skip)", why)
                    skipped.append(SkippedOffset(g, tp, go.offset, why))
                    continue
                mapped, how = (end, "end") if unmapped == "end" else (start, "start")
            restored.append(RestoredOffset(g, tp, go.offset, mapped, opart, how))
    written = {r.group for r in restored}
    if not restored:
        return RestoreGroupsReport((), tuple(skipped), {}, 0)
    missing = sorted({offsets_partition_for(g, tgt.num_partitions) for g in written} - set(tgt.offsets_dirs))
    if missing:
        raise GroupRestoreError(f"target {target} has no dir {GROUP_OFFSETS_TOPIC}-{missing[0]}, the partition of "
                                f"{len(missing)} of the groups' coordinators; expected all {tgt.num_partitions} "
                                f"partitions of {GROUP_OFFSETS_TOPIC} (a single broker's dir holds them all)")

    rows: dict[int, list[tuple[bytes, bytes]]] = {}
    for g in sorted(written):
        rows.setdefault(offsets_partition_for(g, tgt.num_partitions), []).extend(
            _group_records(g, *chosen[g], now))
    for r in restored:
        go = found[r.group][r.topic_partition]
        rows.setdefault(r.offsets_partition, []).append(
            _offset_commit(r.group, r.topic_partition, r.target_offset, go.metadata, now, tgt.topic_ids))
    partitions = _append(target, tgt, rows, now, lock_timeout_s)
    return RestoreGroupsReport(tuple(restored), tuple(skipped), {g: chosen[g][0] for g in sorted(written)},
                               sum(len(v) for v in rows.values()), partitions)


def _record(key_spec: MessageSpec, key: dict[str, object], version: int,
            value: dict[str, object]) -> tuple[bytes, bytes]:
    assert key_spec.api_key is not None
    k, v = encode_coordinator_record(Decoder.OFFSETS, key_spec.api_key, key, version, value)
    assert v is not None
    return k, v


def _group_records(group: str, protocol: str, protocol_type: str, now: int) -> list[tuple[bytes, bytes]]:
    """The group's own records (none for a simple group)."""
    if protocol == CLASSIC:
        return [_record(GROUP_METADATA_KEY, {"group": group}, GROUP_METADATA_VERSION, {
            "protocolType": protocol_type, "generation": 0, "protocol": None, "leader": None,
            "currentStateTimestamp": now, "members": []})]
    if protocol == CONSUMER:
        return [_record(CONSUMER_GROUP_METADATA_KEY, {"groupId": group}, CONSUMER_GROUP_VERSION,
                        {"epoch": RESTORED_GROUP_EPOCH}),
                _record(CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY, {"groupId": group}, CONSUMER_GROUP_VERSION,
                        {"assignmentEpoch": RESTORED_GROUP_EPOCH})]
    return []


def _offset_commit(group: str, tp: TopicPartition, offset: int, metadata: str | None, now: int,
                   topic_ids: Mapping[str, str]) -> tuple[bytes, bytes]:
    value: dict[str, object] = {"offset": offset, "leaderEpoch": NO_LEADER_EPOCH, "metadata": metadata or "",
                                "commitTimestamp": now}
    if tp.topic in topic_ids:
        value["topicId"] = topic_ids[tp.topic]
    return _record(OFFSET_COMMIT_KEY, {"group": group, "topic": tp.topic, "partition": tp.partition},
                   OFFSET_COMMIT_VERSION, value)


def _append(target: Path, tgt: _Target, rows: Mapping[int, list[tuple[bytes, bytes]]], now: int,
            lock_timeout_s: float) -> dict[int, tuple[int, int]]:
    """The records staged into their ``__consumer_offsets`` partitions and committed at once (one job)."""
    import pyarrow as pa

    kraft = cluster_metadata(target)
    config = config_for_topic(GROUP_OFFSETS_TOPIC, load_topic_configs(target), kraft=kraft)
    job = f"restore-groups-{uuid.uuid4().hex[:12]}"
    staging = f".klog-staging-{job}-00000-0"
    staged: list[StagedPartition] = []
    dirs = [tgt.offsets_dirs[p] for p in sorted(rows)]
    try:
        for p in sorted(rows):
            reg = kraft.partition(GROUP_OFFSETS_TOPIC, p) if kraft is not None else None
            w = StagingWriter(tgt.offsets_dirs[p], staging, config, CompressionType.NONE, config.max_message_bytes,
                              registered_epoch=None if reg is None else reg.leader_epoch, group_records=True)
            try:
                keys, values = zip(*rows[p], strict=True)
                w.append(pa.table({"key": pa.array(keys, pa.binary()), "value": pa.array(values, pa.binary()),
                                   "timestamp": pa.array([now] * len(keys), pa.int64())}), now)
                staged.append(w.finish())
            except BaseException:
                w.discard()
                raise
        committed = commit_job(job, staged, lock_timeout_s=lock_timeout_s, config=config)
    except KlogError:
        collect_staging(dirs, job_id=job)
        raise
    return {tp.partition: span for tp, span in committed.items()}
