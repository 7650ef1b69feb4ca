"""Consumer groups' committed offsets, from the ``__consumer_offsets`` partitions of log dirs.

:func:`group_offsets` is the one function that computes them; ``klog groups``, the read options
``startingOffsetsFromGroup``/``endingOffsetsFromGroup`` (resolved by the planner) and
:func:`committed_offsets` (the Python API, a ``pyarrow.Table``) all call it.

What it computes is what Kafka's group coordinator loads when it becomes the coordinator of an
offsets partition (``GroupMetadataManager.loadGroupsAndOffsets`` / the new coordinator's replay):
every ``__consumer_offsets-N`` partition read from its log start to its log end offset, in offset
order, each OffsetCommit record (key types 0 and 1) setting the committed offset of its
``(group, topic, partition)`` and a tombstone (null value) deleting it: compaction semantics, so a
compacted copy gives the same answer as the uncompacted one.

Transactions (``TxnOffsetCommit``): the coordinator keeps a transactional commit pending until its
COMMIT marker and drops it on ABORT. So the records are read with read_committed semantics
(aborted transactions by Kafka's fetch rule, control batches left out) but up to the log end, not
the last stable offset: a non-transactional commit after an open transaction still counts, while
the records of a transaction still open at the end of the copy are left out (they are pending).

Records klog cannot decode (an unknown key type or version) are skipped and counted in a warning;
GroupMetadata and the newer consumer-group records do not carry offsets and are ignored.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from storage_core.errors import InvalidOptionError, PendingCommitError
from storage_core.files import has_log_files
from storage_core.log.log import Log
from storage_core.log.manager import PartitionDir, find_partitions, open_log_read_only
from storage_core.log.topic_partition import GROUP_OFFSETS_TOPIC, TopicPartition
from storage_core.read.piece_reader import read_piece
from storage_core.read.pieces import Piece, aborted_for, slices
from storage_core.record.messages.decoders import Decoder, decode_coordinator_record

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["OFFSETS_TOPIC", "Committed", "committed_offsets", "group_offsets", "group_protocols", "offsets_of_group",
           "offsets_partition_for"]

log = logging.getLogger("klog")

OFFSETS_TOPIC = GROUP_OFFSETS_TOPIC
_OFFSET_COMMIT_TYPES = (0, 1)  # LegacyOffsetCommitKey, OffsetCommitKey

GroupOffsets = dict[str, dict[TopicPartition, "Committed"]]

#: A group's protocol by the records its coordinator keeps of it: ``classic`` (a GroupMetadata record:
#: JoinGroup/SyncGroup members), ``consumer`` (ConsumerGroupMetadata, KIP-848), ``simple`` (offsets
#: only: a consumer that commits without joining, ``assign()``).
CLASSIC, CONSUMER, SIMPLE = "classic", "consumer", "simple"
_GROUP_METADATA_TYPES = {"2": CLASSIC, "3": CONSUMER}  # GroupMetadataKey, ConsumerGroupMetadataKey


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode()``: ``s[0]*31^(n-1) + ... + s[n-1]`` over the UTF-16 code units, in
    int32 arithmetic."""
    units = text.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def offsets_partition_for(group_id: str, num_partitions: int) -> int:
    """The ``__consumer_offsets`` partition of a group: ``Utils.abs(groupId.hashCode()) %
    offsets.topic.num.partitions`` (``GroupCoordinatorService.partitionFor``; ``Utils.abs`` maps
    ``Integer.MIN_VALUE`` to 0)."""
    if num_partitions <= 0:
        raise ValueError(f"{OFFSETS_TOPIC} has {num_partitions} partitions; expected at least 1")
    h = java_string_hash(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions


@dataclass(frozen=True)
class Committed:
    """A group's committed offset of one partition, as its last OffsetCommit record holds it."""

    offset: int
    leader_epoch: int  # -1: not recorded (values before version 3)
    metadata: str | None
    commit_timestamp: int  # ms
    #: where the record is: the __consumer_offsets partition and offset
    source_partition: int
    source_offset: int


def _offsets_partitions(paths: Iterable[str | os.PathLike[str]]) -> list[PartitionDir]:
    return [pd for pd in find_partitions(paths, required=True, only=lambda tp: tp.topic == OFFSETS_TOPIC)
            if pd.topic_partition.topic == OFFSETS_TOPIC and has_log_files(pd.path)]


def _pieces(lg: Log, tp: TopicPartition) -> Iterator[Piece]:
    """The whole log, from its start to its end, with each piece's aborted transactions."""
    for piece in slices(lg, tp, lg.log_start_offset, lg.high_watermark):
        yield dataclasses.replace(piece, aborted=aborted_for(lg, piece))


def _records(pd: PartitionDir) -> Iterator[tuple[int, bytes | None, bytes | None]]:
    """``(offset, key, value)`` of one offsets partition: read_committed up to the log end, open
    transactions' records left out."""
    try:
        lg = open_log_read_only(pd)
    except PendingCommitError:
        return
    try:
        state = lg.producer_state
        pending = {pid: e.current_txn_first_offset for pid, e in state.producers.items()
                   if e.current_txn_first_offset >= 0}
        pieces = list(_pieces(lg, pd.topic_partition))
    finally:
        lg.close()
    for piece in pieces:
        for batch in read_piece(piece, include_metadata=True):
            cols = batch.to_pydict()
            for off, key, value, pid, txn in zip(cols["offset"], cols["key"], cols["value"], cols["producerId"],
                                                 cols["isTransactional"], strict=True):
                if txn and pid in pending and off >= pending[pid]:
                    continue  # a transaction still open at the log end: pending in the coordinator
                yield off, key, value


def group_offsets(paths: Iterable[str | os.PathLike[str]]) -> GroupOffsets:
    """Every group's committed offsets in the log dirs ``paths``: group -> partition -> :class:`Committed`.

    Groups whose every commit was deleted do not appear. Empty when the dirs hold no
    ``__consumer_offsets`` partition.
    """
    state: dict[tuple[str, str, int], Committed] = {}
    undecodable = 0
    for pd in _offsets_partitions(paths):
        for off, key, value in _records(pd):
            rec = decode_coordinator_record(Decoder.OFFSETS, key, value)
            k = rec.key or {}
            if k.get("type") not in ("0", "1") or "data" not in k:
                undecodable += rec.error is not None
                continue
            ident = (k["data"]["group"], k["data"]["topic"], int(k["data"]["partition"]))
            if rec.value is None:
                state.pop(ident, None)
                continue
            data = rec.value.get("data")
            if data is None:
                undecodable += 1
                continue
            state[ident] = Committed(int(data["offset"]), int(data.get("leaderEpoch", -1)), data.get("metadata"),
                                     int(data["commitTimestamp"]), pd.topic_partition.partition, off)
    if undecodable:
        log.warning("klog: %d records of %s could not be decoded and were skipped", undecodable, OFFSETS_TOPIC)
    out: GroupOffsets = {}
    for (group, topic, partition), c in sorted(state.items()):
        out.setdefault(group, {})[TopicPartition(topic, partition)] = c
    return out


def group_protocols(paths: Iterable[str | os.PathLike[str]]) -> dict[str, tuple[str, str]]:
    """Each group's protocol (:data:`CLASSIC` or :data:`CONSUMER`) and, for a classic group, its
    protocolType (``consumer``, ``connect``, ...; empty for the consumer protocol), by the group
    records the coordinator would replay (compaction semantics: a tombstone deletes). Groups with
    offsets and no such record are :data:`SIMPLE` groups (not listed here)."""
    state: dict[str, tuple[str, str]] = {}
    for pd in _offsets_partitions(paths):
        for _off, key, value in _records(pd):
            rec = decode_coordinator_record(Decoder.OFFSETS, key, value)
            k = rec.key or {}
            protocol = _GROUP_METADATA_TYPES.get(k.get("type") or "")
            if protocol is None or "data" not in k:
                continue
            group = k["data"].get("group", k["data"].get("groupId"))
            if rec.value is None:
                state.pop(group, None)
            else:
                data = rec.value.get("data") or {}
                state[group] = (protocol, data.get("protocolType", "") if protocol == CLASSIC else "")
    return state


def offsets_of_group(paths: Sequence[str | os.PathLike[str]], group: str, option: str) -> dict[TopicPartition, int]:
    """One group's committed offsets, for the read option ``option`` (a CLI flag such as ``--group``
    names itself as such); an unknown group is an :class:`InvalidOptionError` listing the groups found."""
    found = group_offsets(paths)
    if group not in found:
        where = ", ".join(map(str, paths))
        given = f"{option} {group!r}" if option.startswith("--") else f"option {option}={group!r}"
        if not _offsets_partitions(paths):
            raise InvalidOptionError(f"{given}: there is no {OFFSETS_TOPIC} in {where}, so no group offsets")
        listed = ", ".join(repr(g) for g in sorted(found)) or "none"
        raise InvalidOptionError(f"{given}: no such group with committed offsets in {where}; "
                                 f"groups found: {listed}")
    return {tp: c.offset for tp, c in found[group].items()}


def _log_ends(paths: Sequence[str | os.PathLike[str]], wanted: set[TopicPartition]) -> dict[TopicPartition, int]:
    out: dict[TopicPartition, int] = {}
    for pd in find_partitions(paths, only=lambda tp: tp in wanted):
        if pd.topic_partition not in wanted or not has_log_files(pd.path):
            continue
        try:
            lg = open_log_read_only(pd)
        except PendingCommitError:
            continue
        try:
            out[pd.topic_partition] = lg.high_watermark
        finally:
            lg.close()
    return out


def committed_offsets(path: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
                      group: str | None = None, *, option: str = "group") -> pa.Table:
    """Committed offsets of every group (or of ``group``) in a log dir, as a ``pyarrow.Table``.

    ``path`` is what :func:`storage_core.read_arrow` takes: a log dir, several (a list or
    ``"dir1,dir2"``, like ``log.dirs``), or one partition dir.

    Columns: ``group``, ``topic``, ``partition``, ``committedOffset``, ``leaderEpoch`` (null when not
    recorded), ``metadata``, ``commitTimestamp`` (timestamp ms, UTC), ``logEndOffset`` and ``lag``
    (null when the partition is not in the same dirs). One row per (group, topic, partition), sorted;
    ``table.to_pandas()`` or ``spark.createDataFrame(table.to_pandas())`` is one call away.
    """
    import pyarrow as pa

    from storage_core.read.options import split_paths

    given = [path] if isinstance(path, (str, os.PathLike)) else list(path)
    paths: list[str | os.PathLike[str]] = [d for p in given
                                           for d in (split_paths(p) if isinstance(p, str) else (p,))]
    found = group_offsets(paths)
    if group is not None:
        found = {group: found[group]} if group in found else {}
        if not found:
            offsets_of_group(paths, group, option)  # raises, listing the groups (``option``: how the caller spells it)
    ends = _log_ends(paths, {tp for g in found.values() for tp in g})
    rows = [(g, tp, c) for g, parts in sorted(found.items()) for tp, c in sorted(parts.items())]
    end_of = [ends.get(tp) for _, tp, _ in rows]
    return pa.table({
        "group": pa.array([g for g, _, _ in rows], pa.string()),
        "topic": pa.array([tp.topic for _, tp, _ in rows], pa.string()),
        "partition": pa.array([tp.partition for _, tp, _ in rows], pa.int32()),
        "committedOffset": pa.array([c.offset for _, _, c in rows], pa.int64()),
        "leaderEpoch": pa.array([c.leader_epoch if c.leader_epoch >= 0 else None for _, _, c in rows], pa.int32()),
        "metadata": pa.array([c.metadata for _, _, c in rows], pa.string()),
        "commitTimestamp": pa.array([c.commit_timestamp for _, _, c in rows], pa.timestamp("ms", tz="UTC")),
        "logEndOffset": pa.array(end_of, pa.int64()),
        "lag": pa.array([None if e is None else e - c.offset for e, (_, _, c) in zip(end_of, rows, strict=True)],
                        pa.int64()),
    })
