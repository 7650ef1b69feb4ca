"""The remote segments of tiered topics, replayed from ``__remote_log_metadata`` as a broker does.

Kafka's ``TopicBasedRemoteLogMetadataManager`` consumes the topic into a
``RemotePartitionMetadataStore``: per user partition a ``RemoteLogMetadataCache`` that holds every
segment not yet ``DELETE_SEGMENT_FINISHED`` and, per leader epoch, which segment serves which
offsets (``RemoteLogLeaderEpochState``). :func:`replay` is that store, event for event:

* a segment's metadata (apiKey 0) adds it as copy-in-progress; an update (apiKey 1) moves it to
  its new state, taking the update's broker id, event time and custom metadata. A transition
  ``RemoteLogSegmentState.isValidTransition`` refuses is dropped, as is an update for a segment
  the replay never saw (the store drops those while it catches up with the topic);
* when a segment's copy finishes, for each leader epoch it holds (from the epoch's start offset
  *s* in the segment to the next epoch's start - 1, or the segment's end, *E*), the epoch's
  serving segments that start at or after *s* are superseded while the epoch's highest offset
  is at most *E* (a new leader re-uploaded what an earlier one had copied), then the segment
  serves the epoch from *s*. A delete that starts takes the segment out of the epoch's offsets;
  one that finishes forgets it;
* a partition delete is recorded; ``DELETE_PARTITION_FINISHED`` forgets the partition, and events
  for it after that are dropped, as the store then has no cache for it;
* snapshot records (apiKey 3) belong to the manager's snapshot files, not to the topic's events:
  the store refuses them, the replay skips them.

:meth:`RemotePartition.segment_for` is ``remoteLogSegmentMetadata(leaderEpoch, offset)``, the read
path's lookup. Tests compare all of it with Kafka's own store on random histories
(``tests/oracles/java/RemoteLogMetadataGen.java``).
"""

from __future__ import annotations

import base64
import bisect
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from storage_core.record.messages.remote import RemoteLogSegmentState, RemotePartitionDeleteState

__all__ = ["RemotePartition", "RemoteSegment", "replay"]

_START, _FINISHED, _DELETE_STARTED, _DELETE_FINISHED = (RemoteLogSegmentState.COPY_SEGMENT_STARTED,
                                                      RemoteLogSegmentState.COPY_SEGMENT_FINISHED,
                                                      RemoteLogSegmentState.DELETE_SEGMENT_STARTED,
                                                      RemoteLogSegmentState.DELETE_SEGMENT_FINISHED)
#: ``RemoteLogSegmentState.isValidTransition``: from -> the states it may go to (besides itself)
_NEXT = {None: {_START}, _START: {_FINISHED, _DELETE_STARTED}, _FINISHED: {_DELETE_STARTED},
         _DELETE_STARTED: {_DELETE_FINISHED}, _DELETE_FINISHED: set()}


def valid_transition(current: RemoteLogSegmentState | None, target: RemoteLogSegmentState) -> bool:
    """Kafka's ``RemoteLogSegmentState.isValidTransition`` (a state may always be repeated)."""
    return current == target or target in _NEXT[current]


@dataclass(frozen=True)
class RemoteSegment:
    """One segment in remote storage, as the metadata last described it."""

    topic: str
    topic_id: str  # Kafka's Uuid string
    partition: int
    segment_id: str  # Kafka's Uuid string: the object keys are made from it
    start_offset: int
    end_offset: int  # inclusive
    max_timestamp_ms: int
    event_timestamp_ms: int
    broker_id: int
    size_bytes: int
    #: (leader epoch, the offset it starts at in this segment), by epoch
    leader_epochs: tuple[tuple[int, int], ...]
    state: RemoteLogSegmentState
    custom_metadata: bytes | None
    txn_index_empty: bool

    def epoch_end(self, epoch: int) -> int:
        """The last offset of ``epoch`` in this segment: the next epoch's start - 1, or the end."""
        later = [start for e, start in self.leader_epochs if e > epoch]
        return min(later) - 1 if later else self.end_offset


@dataclass
class _EpochState:
    """``RemoteLogLeaderEpochState``: which finished segment serves the epoch from which offset."""

    starts: list[int] = field(default_factory=list)  # sorted start offsets of the serving segments
    ids: dict[int, str] = field(default_factory=dict)  # start offset -> segment id
    unreferenced: set[str] = field(default_factory=set)
    highest: int | None = None

    def finished(self, start: int, segment_id: str, epoch_end: int) -> None:
        while self.starts and self.starts[-1] >= start and self.highest is not None and self.highest <= epoch_end:
            last = self.starts.pop()
            self.unreferenced.add(self.ids.pop(last))
        if start not in self.ids:
            bisect.insort(self.starts, start)
        self.ids[start] = segment_id  # a finished copy of the same start replaces the one there
        self.unreferenced.discard(segment_id)
        if self.highest is None or epoch_end > self.highest:
            self.highest = epoch_end

    def delete_started(self, start: int, segment_id: str) -> None:
        if self.ids.get(start) == segment_id:
            del self.ids[start]
            self.starts.remove(start)
        self.unreferenced.add(segment_id)

    def floor(self, offset: int) -> str | None:
        i = bisect.bisect_right(self.starts, offset)
        return self.ids[self.starts[i - 1]] if i else None


@dataclass
class RemotePartition:
    """What the metadata says of one user partition (``RemoteLogMetadataCache``)."""

    topic: str
    topic_id: str
    partition: int
    #: every segment not yet DELETE_SEGMENT_FINISHED, by id, in the order first seen
    segments: dict[str, RemoteSegment] = field(default_factory=dict)
    epochs: dict[int, _EpochState] = field(default_factory=dict)
    #: the last partition delete event's state, if any
    delete_state: RemotePartitionDeleteState | None = None

    def _apply(self, seg: RemoteSegment) -> None:
        for epoch, start in seg.leader_epochs:
            state = self.epochs.setdefault(epoch, _EpochState())
            if seg.state == _FINISHED:
                state.finished(start, seg.segment_id, seg.epoch_end(epoch))
            elif seg.state == _DELETE_STARTED:
                state.delete_started(start, seg.segment_id)
            elif seg.state == _DELETE_FINISHED:
                state.unreferenced.discard(seg.segment_id)
            else:
                state.unreferenced.add(seg.segment_id)
        if seg.state == _DELETE_FINISHED:
            self.segments.pop(seg.segment_id, None)
        else:
            self.segments[seg.segment_id] = seg

    def segment_for(self, leader_epoch: int, offset: int) -> RemoteSegment | None:
        """``remoteLogSegmentMetadata(leaderEpoch, offset)``: the finished segment that serves
        ``offset`` of ``leader_epoch``, or None."""
        state = self.epochs.get(leader_epoch)
        segment_id = state.floor(offset) if state is not None else None
        if segment_id is None:
            return None
        seg = self.segments[segment_id]
        return seg if offset <= seg.epoch_end(leader_epoch) else None

    def epoch_segments(self, leader_epoch: int) -> list[RemoteSegment]:
        """``listRemoteLogSegments(leaderEpoch)``: the epoch's serving segments and those it no
        longer serves but that still exist (copying, deleting, superseded), by start offset."""
        state = self.epochs.get(leader_epoch)
        if state is None:
            return []
        ids = [state.ids[s] for s in state.starts] + sorted(state.unreferenced)
        return sorted((self.segments[i] for i in ids), key=lambda s: s.start_offset)

    def highest_offset(self, leader_epoch: int) -> int | None:
        """``highestOffsetForEpoch``: never lowered, even once the epoch's segments are deleted."""
        state = self.epochs.get(leader_epoch)
        return None if state is None else state.highest


def _segment(d: dict[str, Any]) -> RemoteSegment:
    sid = d["remoteLogSegmentId"]
    tip = sid["topicIdPartition"]
    custom = d["customMetadata"]
    epochs = {e["leaderEpoch"]: e["offset"] for e in d["segmentLeaderEpochs"]}
    return RemoteSegment(tip["name"], tip["id"], tip["partition"], sid["id"], d["startOffset"], d["endOffset"],
                         d["maxTimestampMs"], d["eventTimestampMs"], d["brokerId"], d["segmentSizeInBytes"],
                         tuple(sorted(epochs.items())), RemoteLogSegmentState(d["remoteLogSegmentState"]),
                         None if custom is None else base64.b64decode(custom), bool(d.get("txnIndexEmpty", False)))


def replay(events: Iterable[dict[str, Any]]) -> dict[tuple[str, int], RemotePartition]:
    """The remote partitions the decoded records of ``__remote_log_metadata`` describe, keyed by
    (topic id, partition); ``events`` in the topic's order (per metadata partition; a user
    partition's events are all in one). A partition whose delete finished is not in the result."""
    parts: dict[tuple[str, int], RemotePartition] = {}
    gone: set[tuple[str, int]] = set()
    for ev in _records(events):
        kind, d = ev["type"], ev["data"]
        if kind == "REMOTE_LOG_SEGMENT_METADATA_RECORD":
            seg = _segment(d)
            key = (seg.topic_id, seg.partition)
            if key in gone:
                continue
            part = parts.setdefault(key, RemotePartition(seg.topic, seg.topic_id, seg.partition))
            old = part.segments.get(seg.segment_id)
            if seg.state == _START and valid_transition(None if old is None else old.state, seg.state):
                part._apply(seg)
        elif kind == "REMOTE_LOG_SEGMENT_METADATA_UPDATE_RECORD":
            sid = d["remoteLogSegmentId"]
            key = (sid["topicIdPartition"]["id"], sid["topicIdPartition"]["partition"])
            part_or_none = parts.get(key)
            old = None if part_or_none is None else part_or_none.segments.get(sid["id"])
            target = RemoteLogSegmentState(d["remoteLogSegmentState"])
            if part_or_none is None or old is None or target == _START or not valid_transition(old.state, target):
                continue  # unknown segment (dropped while catching up), or a transition Kafka drops
            custom = d["customMetadata"]
            part_or_none._apply(replace(old, state=target, broker_id=d["brokerId"],
                                        event_timestamp_ms=d["eventTimestampMs"],
                                        custom_metadata=None if custom is None else base64.b64decode(custom)))
        elif kind == "REMOTE_PARTITION_DELETE_METADATA_RECORD":
            tip = d["topicIdPartition"]
            key = (tip["id"], tip["partition"])
            state = RemotePartitionDeleteState(d["remotePartitionDeleteState"])
            if state == RemotePartitionDeleteState.DELETE_PARTITION_FINISHED:
                parts.pop(key, None)
                gone.add(key)
            elif key not in gone:
                parts.setdefault(key, RemotePartition(tip["name"], tip["id"], tip["partition"])).delete_state = state
    return parts


def _records(events: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for ev in events:
        if ev.get("error") is None and ev.get("type") != "REMOTE_LOG_SEGMENT_METADATA_SNAPSHOT_RECORD":
            yield ev
