"""Consumer groups restored: each group's committed offsets written into a stopped broker's (or
cluster's) ``__consumer_offsets``, as its group coordinator writes them, so that the group's consumers resume
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
(:class:`KeptOffsets`) it is kept, if the target partition reaches it; past it, up to the source
partition's end (the aborted records and markers a ``read_committed`` restore leaves out at the
end), it becomes the target partition's end. Otherwise ``translate`` gives the target offset of the
first restored record at or after it (:class:`OffsetTranslation`: the target's end of the partition
where the group had consumed everything restored). An offset nothing maps to is refused
(``unmapped="fail"``), left out with a warning (``"skip"``) or set to the target partition's log end
(``"end"``) or log start (``"start"``).

Two parts, which :func:`restore_groups` (the groups alone) and
:func:`storage_core.tools.restore.restore` (``groups=...``: the records and the groups in one job)
both run: **planning** (:func:`plan_groups`: the groups loaded, every refusal asked, the offsets
mapped by :meth:`GroupsPlan.map` into the target's partitions as they are, or as the restore in the
same job will leave them) and **staging** (:meth:`GroupsPlan.records`, :func:`stage_groups`: the
coordinator's records staged into their ``__consumer_offsets`` partitions, for the job's commit).

The write is klog's staged commit (:mod:`storage_core.log.staged`): staged, then made visible at
once under the log dir's lock, rolled back after a crash. Into a cluster (every broker's log dirs
given), each ``__consumer_offsets`` partition written is replicated as the records are
(:func:`~storage_core.log.replicas.write_targets`): staged in its leader's dir, the same batches at
the same offsets committed into every in-sync replica. Every refusal comes before anything is
written, in one line: a dir held by a broker, a target without ``__consumer_offsets``, a group's
topic or partition the target lacks (and the restore does not write), a group the target already
has, an offset nothing maps to, a replicated ``__consumer_offsets`` partition one of whose in-sync
replicas' dirs is not given.
"""

from __future__ import annotations

import json
import logging
import os
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, get_args

import numpy as np

from storage_core.errors import GroupRestoreError, RestoreError
from storage_core.files import LOG_SUFFIX, staging_prefix
from storage_core.log.cluster_metadata import find_cluster_metadata
from storage_core.log.journal import journal_path
from storage_core.log.lock import check_free_to_stage
from storage_core.log.manager import PartitionDir, find_partitions, open_log_read_only
from storage_core.log.replicas import ReplicaSet, write_targets
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

__all__ = ["GroupOffset", "GroupsPlan", "KeptOffsets", "OffsetTranslation", "RestoreGroupsReport", "RestoredOffset",
           "SkippedOffset", "load_groups", "plan_groups", "restore_groups", "stage_groups"]

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
    source offsets of the restored records (ascending) and the target offsets they were written at
    (sequences or numpy arrays: a restore's millions of offsets are held as int64 arrays, a dense
    run of target offsets as its first one alone).

    A committed offset ``c`` (the next record to consume) becomes the target offset of the first
    restored record at or after ``c``; past the last restored record, up to the source partition's
    end (``source_ends``; else the last restored offset + 1), the target partition's end
    (``target_ends``; else the last target offset + 1): the group had consumed everything. None for
    a partition not restored, or an offset past the source's end. A partition given no offsets (none
    of its records restored) maps every offset up to its source end to its target end."""

    def __init__(self, offsets: Mapping[TopicPartition, tuple[Sequence[int] | np.ndarray, Sequence[int] | np.ndarray]],
                 *, source_ends: Mapping[TopicPartition, int] | None = None,
                 target_ends: Mapping[TopicPartition, int] | None = None) -> None:
        self._src: dict[TopicPartition, np.ndarray] = {}
        self._dst: dict[TopicPartition, np.ndarray | int] = {}  # an int: the first of a dense run
        for tp, (src, dst) in offsets.items():
            s, d = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
            if s.ndim != 1 or s.shape != d.shape:
                raise ValueError(f"{tp}: {s.size} source offsets but {d.size} target offsets; expected one each")
            if bool(np.any(np.diff(s) <= 0)) or bool(np.any(np.diff(d) <= 0)):
                raise ValueError(f"{tp}: the source and target offsets must both be strictly ascending")
            self._src[tp] = s
            self._dst[tp] = int(d[0]) if d.size and int(d[-1]) - int(d[0]) == d.size - 1 else d
        self.source_ends: dict[TopicPartition, int] = {
            tp: int(v) for tp, v in (source_ends or {}).items()}
        for tp, s in self._src.items():
            if s.size:
                self.source_ends.setdefault(tp, int(s[-1]) + 1)
        self.target_ends: dict[TopicPartition, int] = {tp: int(v) for tp, v in (target_ends or {}).items()}
        for tp, dense in self._dst.items():
            if isinstance(dense, int) or dense.size:
                self.target_ends.setdefault(tp, self._target_at(tp, self._src[tp].size - 1) + 1)

    @property
    def partitions(self) -> list[TopicPartition]:
        return sorted(self._src)

    def records(self, tp: TopicPartition) -> int:
        """How many restored records of ``tp`` the translation holds (0 for a partition it does not know)."""
        s = self._src.get(tp)
        return 0 if s is None else int(s.size)

    def _target_at(self, tp: TopicPartition, i: int) -> int:
        d = self._dst[tp]
        return d + i if isinstance(d, int) else int(d[i])

    def __call__(self, tp: TopicPartition, offset: int) -> int | None:
        src = self._src.get(tp)
        if src is None:
            return None
        i = int(np.searchsorted(src, offset, side="left"))
        if i < src.size:
            return self._target_at(tp, i)
        source_end, target_end = self.source_ends.get(tp), self.target_ends.get(tp)
        if source_end is None or target_end is None or offset > source_end:
            return None
        return target_end


class KeptOffsets:
    """Offsets at their original place (a restore at the original offsets, or none at all): a
    committed offset the target partition reaches (``0 <= c <=`` its end, ``target_ends``) is kept;
    one past it, up to the source partition's end (``source_ends``: the records after the last one
    restored were left out, as a ``read_committed`` source leaves aborted records and markers out),
    becomes the target partition's end (the group had consumed everything restored); None past both.
    One below the target partition's log start (``target_starts``: the records before its first
    restored one were left out, aborted or deleted by retention in the source) becomes that start, the
    first record at or after it: a consumer fetching below the log start would be out of range."""

    def __init__(self, target_ends: Mapping[TopicPartition, int],
                 source_ends: Mapping[TopicPartition, int] | None = None,
                 target_starts: Mapping[TopicPartition, int] | None = None) -> None:
        self.target_ends = dict(target_ends)
        self.source_ends = dict(source_ends or {})
        self.target_starts = dict(target_starts or {})

    def __call__(self, tp: TopicPartition, offset: int) -> int | None:
        end = self.target_ends.get(tp)
        if end is None or offset < 0:
            return None
        start = self.target_starts.get(tp, 0)
        if offset < start <= end:
            return start
        if offset <= end:
            return offset
        return end if offset <= self.source_ends.get(tp, end) else None


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
    absent = [q for q in paths if "://" not in q and not Path(q).is_dir()]
    if absent:
        raise GroupRestoreError(f"groups source {absent[0]} does not exist; expected a log dir (or several, "
                                "\"a,b\"), a `klog groups --json` file or a mapping of groups")
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


def target_dirs(target_dir: str | os.PathLike[str] | Sequence[str | os.PathLike[str]]) -> list[Path]:
    """A restore's target log dirs: one, or a cluster's (a list, ``"a,b"`` or a glob, as the read paths)."""
    from storage_core.read.options import split_paths

    given = [target_dir] if isinstance(target_dir, (str, os.PathLike)) else list(target_dir)
    out = [Path(p) for g in given for p in split_paths(os.fspath(g))]
    if not out:
        raise RestoreError(f"no target log dir in {target_dir!r}; expected a log dir, or a cluster's log dirs")
    return out


@dataclass(frozen=True)
class _Target:
    log_dirs: tuple[Path, ...]  # one broker's log dir, or every broker's of a cluster
    offsets_dirs: Mapping[int, Path]  # __consumer_offsets partition -> its dir (the replica read: the leader's)
    #: a replicated __consumer_offsets partition -> its replica set (the records go into every in-sync
    #: replica given, by the writer's rule: :func:`~storage_core.log.replicas.write_targets`)
    offsets_replicas: Mapping[int, ReplicaSet]
    num_partitions: int
    #: each partition the groups name: (log start, log end) as the target holds it, or as a restore
    #: in the same job will leave it (:func:`plan_groups`' ``ranges``)
    ranges: Mapping[TopicPartition, tuple[int, int]]
    topic_ids: Mapping[str, str]

    @property
    def where(self) -> str:
        """The target's log dirs as the user gave them to a message: ``a`` or ``a,b,c``."""
        return _joined(self.log_dirs)


def _joined(log_dirs: Sequence[Path]) -> str:
    return ",".join(map(str, log_dirs))


def _target(log_dirs: Sequence[Path], wanted: set[TopicPartition],
            ranges: Mapping[TopicPartition, tuple[int, int]]) -> _Target:
    log_dir = _joined(log_dirs)
    for d in log_dirs:
        if not d.is_dir():
            raise GroupRestoreError(f"target {d} is not a directory; expected a stopped broker's log dir")
    kraft = find_cluster_metadata(log_dirs)
    pds = {pd.topic_partition: pd for pd in find_partitions(list(log_dirs), allow_empty=True)}
    offsets_dirs = {tp.partition: pd.path for tp, pd in pds.items() if tp.topic == GROUP_OFFSETS_TOPIC}
    offsets_replicas = {tp.partition: pd.replicas for tp, pd in pds.items()
                        if tp.topic == GROUP_OFFSETS_TOPIC and pd.replicas is not None}
    known = kraft.topics.get(GROUP_OFFSETS_TOPIC) if kraft is not None else None
    if known is None and not offsets_dirs:
        raise GroupRestoreError(
            f"target {log_dir} has no {GROUP_OFFSETS_TOPIC}: a broker creates it (offsets.topic.num.partitions "
            "partitions) when a group first looks up its coordinator; start the broker, run "
            "`kafka-consumer-groups.sh --bootstrap-server HOST:PORT --describe --group any` (or any consumer "
            "with a group.id) once, stop it, then restore")
    num = len(known.partitions) if known is not None else max(offsets_dirs) + 1
    missing = sorted(wanted - set(pds) - set(ranges))
    if missing:
        tp = missing[0]
        raise GroupRestoreError(f"target {log_dir} has no partition {tp} (no dir {tp.dir_name}), which a group "
                                f"has an offset of, and no record is restored into it: create the topic with its "
                                f"partitions first (kafka-topics.sh --create), or restore it with the groups "
                                f"({len(missing)} partitions missing)")
    got = {tp: ranges[tp] if tp in ranges else _log_range(pds[tp]) for tp in sorted(wanted)}
    ids = {t: kraft.topics[t].topic_id for t in {tp.topic for tp in wanted} if kraft is not None and t in kraft.topics}
    return _Target(tuple(log_dirs), offsets_dirs, offsets_replicas, num, got, ids)


def _check_new_groups(targets: Sequence[Path], groups: set[str]) -> None:
    """Refuse groups the target's coordinator already has (group records or committed offsets): the
    restored records would be replayed over them, and a consumer group's records over a classic
    group (or the reverse) fail the load of the whole ``__consumer_offsets`` partition
    (``GroupMetadataManager.getOrMaybeCreatePersistedConsumerGroup``: "is not a consumer group")."""
    there = set(group_offsets(list(targets))) | set(group_protocols(list(targets)))
    clash = sorted(groups & there)
    if clash:
        raise GroupRestoreError(f"target {_joined(targets)} already has group {clash[0]!r} ({len(clash)} of the "
                                "groups to restore): delete it there first (kafka-consumer-groups.sh --delete --group), or "
                                "restore the others (only=..., klog restore --group G)")


def _log_range(pd: PartitionDir) -> tuple[int, int]:
    """(log start, log end) of a partition of the target; (0, 0) for one without segments (a commit into
    it starts its log at 0)."""
    if not any(pd.path.glob("*" + LOG_SUFFIX)):
        return 0, 0
    lg = open_log_read_only(pd)
    try:
        return lg.log_start_offset, lg.log_end_offset
    finally:
        lg.close()


def target_range(log_dir: str | os.PathLike[str], tp: TopicPartition) -> tuple[int, int] | None:
    """(log start, log end) of ``tp`` in the log dir ``log_dir`` as it is now (:func:`_log_range`); None:
    the dir has no such partition."""
    pdir = Path(log_dir) / tp.dir_name
    return _log_range(PartitionDir(tp, pdir, Path(log_dir))) if pdir.is_dir() else None


# --- planning: the groups loaded, checked, their offsets mapped ----------------------------------


@dataclass(frozen=True)
class GroupsPlan:
    """Groups to restore into a target, loaded and checked (:func:`plan_groups`): nothing is written
    yet. :meth:`map` maps their offsets, :meth:`records` makes the coordinator's records of them."""

    target: _Target
    #: group -> (topic, partition) -> its committed offset in the source
    groups: Mapping[str, Mapping[TopicPartition, GroupOffset]]
    #: group -> (protocol, a classic group's protocolType)
    protocols: Mapping[str, tuple[str, str]]
    unmapped: Unmapped
    #: the partitions a restore in the same job writes (their ranges are the restore's projection)
    restored: frozenset[TopicPartition] = frozenset()

    def map(self, translate: Translate | None, ranges: Mapping[TopicPartition, tuple[int, int]] | None = None,
            ) -> tuple[list[RestoredOffset], list[SkippedOffset]]:
        """Each committed offset's target offset, by ``translate`` (None: kept where the target partition
        reaches it, :class:`KeptOffsets`), in the target's partitions as ``ranges`` gives them (over the
        plan's). An offset nothing maps to follows the plan's ``unmapped`` policy: refused
        (:class:`~storage_core.errors.GroupRestoreError`), skipped, or the partition's end or start."""
        spans = {**self.target.ranges, **(ranges or {})}
        if translate is None:
            translate = KeptOffsets({tp: end for tp, (_, end) in spans.items()},
                                    target_starts={tp: start for tp, (start, _) in spans.items()})
        restored: list[RestoredOffset] = []
        skipped: list[SkippedOffset] = []
        for g, parts in sorted(self.groups.items()):
            opart = offsets_partition_for(g, self.target.num_partitions)
            for tp, go in sorted(parts.items()):
                start, end = spans[tp]
                mapped = translate(tp, go.offset)
                if mapped is not None and not 0 <= mapped <= end:
                    raise GroupRestoreError(f"group {g!r} {tp}: offset {go.offset} translates to {mapped}, beyond "
                                            f"the target partition's end {end}; expected a translation of what "
                                            "was restored into this dir")
                if mapped is not None:
                    how = "kept" if mapped == go.offset else "translated"
                else:
                    why = self._unmapped_why(g, tp, go.offset, translate, start, end)
                    if self.unmapped == "fail":
                        raise GroupRestoreError(why + "; expected an offset a restored record maps, or a policy for "
                                                "it: unmapped=skip, end or start (klog restore --unmapped)")
                    if self.unmapped == "skip":
                        skipped.append(SkippedOffset(g, tp, go.offset, why))
                        continue
                    mapped, how = (end, "end") if self.unmapped == "end" else (start, "start")
                restored.append(RestoredOffset(g, tp, go.offset, mapped, opart, how))
        return restored, skipped

    def _unmapped_why(self, group: str, tp: TopicPartition, offset: int, translate: Translate,
                      start: int, end: int) -> str:
        source_end = getattr(translate, "source_ends", {}).get(tp)
        if tp in self.restored and source_end is not None:
            why = f"past the source partition's end {source_end}"
        elif isinstance(translate, KeptOffsets):
            why = f"past the target partition's end: it holds offsets {start} to {end}"
        else:
            why = f"none of the partition's records is restored; the target partition holds offsets {start} to {end}"
        return f"group {group!r} {tp}: no restored record maps committed offset {offset} ({why})"

    def check_offsets_dirs(self, restored: Sequence[RestoredOffset]) -> None:
        """Refuse a target lacking the ``__consumer_offsets`` partition a written group's coordinator
        loads, or, for a replicated one, the dir of one of its in-sync replicas (:meth:`replicas_of`)."""
        parts = {r.offsets_partition for r in restored}
        missing = sorted(parts - set(self.target.offsets_dirs))
        if missing:
            raise GroupRestoreError(f"target {self.target.where} has no dir {GROUP_OFFSETS_TOPIC}-{missing[0]}, the "
                                    f"partition of {len(missing)} of the groups' coordinators; expected all "
                                    f"{self.target.num_partitions} partitions of {GROUP_OFFSETS_TOPIC} (a single "
                                    "broker's dir holds them all; a cluster's, every broker's dirs together)")
        for p in sorted(parts):
            self.replicas_of(p)

    def replicas_of(self, offsets_partition: int) -> tuple[Path, ...]:
        """The other replicas' dirs of a ``__consumer_offsets`` partition, which get the same batches
        as its dir (none for a partition with one replica); raises
        :class:`~storage_core.errors.ReplicatedWriteError` when an in-sync replica's dir is not given."""
        rs = self.target.offsets_replicas.get(offsets_partition)
        return () if rs is None else write_targets(rs)

    def replicas_by_dir(self, partitions: Iterable[int]) -> dict[str, list[str]]:
        """For :func:`~storage_core.log.staged.commit_job`'s ``replicas``: each replicated
        ``__consumer_offsets`` partition's dir among ``partitions``, and its other replicas' dirs."""
        out: dict[str, list[str]] = {}
        for p in sorted(partitions):
            more = self.replicas_of(p)
            if more:
                out[str(self.target.offsets_dirs[p])] = [str(r) for r in more]
        return out

    def records(self, restored: Sequence[RestoredOffset], now: int) -> dict[int, list[tuple[bytes, bytes]]]:
        """The coordinator's records of the ``restored`` offsets, by ``__consumer_offsets`` partition: each
        written group's own records, then its offset commits."""
        rows: dict[int, list[tuple[bytes, bytes]]] = {}
        for g in sorted({r.group for r in restored}):
            rows.setdefault(offsets_partition_for(g, self.target.num_partitions), []).extend(
                _group_records(g, *self.protocols[g], now))
        for r in restored:
            go = self.groups[r.group][r.topic_partition]
            rows.setdefault(r.offsets_partition, []).append(
                _offset_commit(r.group, r.topic_partition, r.target_offset, go.metadata, now, self.target.topic_ids))
        return rows

    def report(self, restored: Sequence[RestoredOffset], skipped: Sequence[SkippedOffset],
               rows: Mapping[int, Sequence[tuple[bytes, bytes]]],
               partitions: Mapping[int, tuple[int, int]]) -> RestoreGroupsReport:
        for s in skipped:
            log.warning("klog: %s; left out (unmapped=skip)", s.reason)
        written = sorted({r.group for r in restored})
        return RestoreGroupsReport(tuple(restored), tuple(skipped), {g: self.protocols[g][0] for g in written},
                                   sum(len(v) for v in rows.values()), dict(partitions))


def plan_groups(groups: str | os.PathLike[str] | Mapping[str, Mapping[TopicPartition, object]],
                target_dir: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], *,
                translate: Translate | None = None, unmapped: Unmapped = "fail",
                protocols: Mapping[str, str] | None = None, only: Iterable[str] | None = None,
                ranges: Mapping[TopicPartition, tuple[int, int]] | None = None) -> GroupsPlan:
    """The groups of ``groups`` (:func:`load_groups`) checked against ``target_dir``, nothing written:
    every refusal of a restore of groups (a target without ``__consumer_offsets``, a group the target
    has already, a group's partition the target neither has nor gets, a protocol or policy that is not
    one, an offset nothing maps to under ``unmapped="fail"``).

    ``ranges``: the partitions a restore in the same job writes, each (log start, log end) as that
    restore projects it (they need not exist yet); the others are read from the target. ``translate``:
    as :meth:`GroupsPlan.map` (for a restore in the same job, one that maps the same offsets as the
    restore's final one: the refusals are asked here, the offsets mapped again once it has staged its
    records)."""
    if unmapped not in UNMAPPED_POLICIES:
        raise GroupRestoreError(f"unmapped={unmapped!r}; expected one of {', '.join(UNMAPPED_POLICIES)}")
    targets = target_dirs(target_dir)
    found, known = load_groups(groups)
    if only is not None:
        wanted_groups = {only} if isinstance(only, str) else set(only)
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
    tgt = _target(targets, {tp for parts in found.values() for tp in parts}, ranges or {})
    _check_new_groups(targets, set(found))
    plan = GroupsPlan(tgt, found, chosen, unmapped, frozenset(ranges or {}))
    restored, _ = plan.map(translate)
    plan.check_offsets_dirs(restored)
    return plan


# --- staging and the restore ---------------------------------------------------------------------


def stage_groups(plan: GroupsPlan, rows: Mapping[int, Sequence[tuple[bytes, bytes]]], now: int,
                 staging_name: str) -> list[StagedPartition]:
    """The records staged into their ``__consumer_offsets`` partitions (not yet visible: a job's
    :func:`~storage_core.log.staged.commit_job` makes them so), under ``staging_name``. A failure
    removes what this call staged and raises."""
    import pyarrow as pa

    kraft = find_cluster_metadata(plan.target.log_dirs)
    config = config_for_topic(GROUP_OFFSETS_TOPIC, load_topic_configs(plan.target.log_dirs[0]), kraft=kraft)
    staged: list[StagedPartition] = []
    writers: list[StagingWriter] = []
    try:
        for p in sorted(rows):
            reg = kraft.partition(GROUP_OFFSETS_TOPIC, p) if kraft is not None else None
            w = StagingWriter(plan.target.offsets_dirs[p], staging_name, config, CompressionType.NONE,
                              config.max_message_bytes, registered_epoch=None if reg is None else reg.leader_epoch,
                              group_records=True)
            writers.append(w)
            keys, values = zip(*rows[p], strict=True)
            w.append(pa.table({"key": pa.array(keys, pa.binary()), "value": pa.array(values, pa.binary()),
                               "timestamp": pa.array([now] * len(keys), pa.int64())}), now)
            staged.append(w.finish())
    except BaseException:
        for w in writers:
            w.discard()
        raise
    return staged


def offsets_partitions(committed: Mapping[TopicPartition, tuple[int, int]]) -> dict[int, tuple[int, int]]:
    """The ``__consumer_offsets`` partitions of a commit's result: partition -> (first offset, end offset)."""
    return {tp.partition: span for tp, span in committed.items() if tp.topic == GROUP_OFFSETS_TOPIC}


def restore_groups(groups: str | os.PathLike[str] | Mapping[str, Mapping[TopicPartition, object]],
                   target_dir: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], *,
                   translate: Translate | None = None, unmapped: Unmapped = "fail",
                   protocols: Mapping[str, str] | None = None, only: Iterable[str] | None = None,
                   now_ms: int | None = None,
                   lock_timeout_s: float = 60.0) -> RestoreGroupsReport:
    """Write each group's committed offsets into ``target_dir``'s ``__consumer_offsets`` (see the
    module): ``groups`` is a source log dir, a ``klog groups --json`` file or a mapping (:func:`load_groups`).
    The groups alone: :func:`storage_core.tools.restore.restore` (``groups=...``) restores records and
    groups in one commit.

    ``translate``: source (topic, partition) and committed offset -> target offset, None where no
    record maps it (:class:`OffsetTranslation`); None keeps the offsets (a restore at the original
    offsets, :class:`KeptOffsets`). ``unmapped``: what an offset nothing maps to does: ``fail`` (refused,
    nothing written), ``skip`` (left out, logged), ``end``/``start`` (the target partition's log end / start).
    ``protocols``: group -> ``classic``, ``consumer`` or ``simple``, over what the source says (a
    source without group records, such as a JSON file, restores ``simple`` groups). ``only``: these
    groups alone. ``now_ms``: the commit timestamp written (default: now).

    Raises :class:`~storage_core.errors.GroupRestoreError` (or ``LogDirLockedError`` for a dir a
    broker holds) before writing anything."""
    targets = target_dirs(target_dir)
    for target in targets:
        check_free_to_stage(target, 0)  # a running broker's dir: refused at once, nothing written
    plan = plan_groups(groups, targets, translate=translate, unmapped=unmapped, protocols=protocols, only=only)
    now = int(time.time() * 1000) if now_ms is None else now_ms
    restored, skipped = plan.map(translate)
    if not restored:
        return plan.report((), skipped, {}, {})
    rows = plan.records(restored, now)
    job = f"restore-groups-{uuid.uuid4().hex[:12]}"
    replicas = plan.replicas_by_dir(rows)
    staged = stage_groups(plan, rows, now, staging_prefix(job) + "groups")
    try:
        committed = commit_job(job, staged, lock_timeout_s=lock_timeout_s, replicas=replicas)
    except BaseException:
        # refused before its journal was written: the staging goes; a journal written is settled by
        # the next writable open, which removes it with the commit
        if not any(journal_path(t, job).exists() for t in targets):
            collect_staging([Path(sp.partition_dir) for sp in staged] +
                            [Path(r) for rs in replicas.values() for r in rs], job_id=job)
        raise
    return plan.report(restored, skipped, rows, offsets_partitions(committed))


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
