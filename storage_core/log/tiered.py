"""The remote history of tiered partitions (KIP-405): which remote segments a broker would serve,
and where a remote storage keeps their bytes.

A broker with tiered storage copies closed segments to a remote storage and records each copy
in ``__remote_log_metadata``; local retention (``local.retention.ms``/``bytes``) then deletes the
local copies, so a log dir holds only the tail of a tiered partition, and its
``log-start-offset-checkpoint`` may be below its first local segment. This module is what the
read paths use to see the rest:

* :func:`load_remote_metadata` replays the ``__remote_log_metadata-N`` partitions of the log dirs
  (:func:`storage_core.log.remote_metadata.replay`, the broker's metadata store) into one
  :class:`RemotePartition` per user partition;
* :func:`remote_history` walks one partition's remote segments as the broker's read path finds
  them (``RemoteLogManager``: the leader epoch of an offset from the partition's own
  ``leader-epoch-checkpoint``, then the metadata's segment serving that epoch and offset, then the
  next epochs'), from the oldest to the newest: one segment per offset, re-uploads of earlier
  leaders resolved by the lineage;
* :class:`RemoteStorage` names where the segments' bytes are and in which object layout. Kafka's
  ``LocalTieredStorage`` (:data:`LOCAL_TIERED`) keeps plain copies of the segment files,
  ``<root>/kafka-tiered-storage/<topic>-<partition>-<topic id>/<base, 20 digits>-<segment id><suffix>``
  with the suffixes of a log dir (``.log``, ``.index``, ``.timeindex``, ``.txnindex``,
  ``.snapshot``, ``.leader_epoch_checkpoint``); :meth:`RemoteStorage.segment` opens such a copy as a
  read-only :class:`~storage_core.log.segment.LogSegment`, so ranges, timestamps and
  ``read_committed`` use its indexes as for a local segment. The root may be a local path or a URI
  (``s3://bucket/prefix``, read through :mod:`storage_core.fs` with the read's ``fs.*`` options).

A segment the metadata lists but the storage does not hold is a :class:`RemoteSegmentMissingError`
naming the object key.
"""

from __future__ import annotations

import enum
import functools
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from storage_core.errors import (
    InvalidOptionError,
    KlogError,
    RemoteSegmentMissingError,
    RemoteSegmentUnreadableError,
    SegmentGoneError,
)
from storage_core.files import LOG_SUFFIX, filename_prefix, has_log_files
from storage_core.fs import StorageOptions, as_path, refuse_credentials
from storage_core.log.aiven.config import AivenConfig
from storage_core.log.checkpoint import LeaderEpochCheckpointFile
from storage_core.log.log import Log
from storage_core.log.remote_metadata import RemotePartition, RemoteSegment, replay
from storage_core.log.segment import LogSegment
from storage_core.log.topic_partition import TopicPartition

__all__ = ["LOCAL_TIERED", "REMOTE_LOG_METADATA_TOPIC", "RemoteLayout",
           "RemoteStorage", "TieredMetadata", "attach_history", "check_remote_copy", "history_below_local",
           "load_remote_metadata",
           "partition_history",
           "remote_history",
           "unread_remote_range"]

#: The internal topic a broker records its remote segments in (``TopicBasedRemoteLogMetadataManager``).
REMOTE_LOG_METADATA_TOPIC = "__remote_log_metadata"
#: ``LocalTieredStorage``'s dir under its configured ``dir`` (``ROOT_STORAGE_DIR_NAME``).
LOCAL_TIERED_ROOT = "kafka-tiered-storage"


class RemoteLayout(str, enum.Enum):
    """How a remote storage lays out a segment's objects (the ``remoteStorageLayout`` option)."""

    LOCAL_TIERED = "local-tiered"  # Kafka's LocalTieredStorage: plain copies of the segment files
    AIVEN = "aiven"  # Aiven's tiered-storage-for-apache-kafka: chunked, compressed, encrypted objects


LOCAL_TIERED = RemoteLayout.LOCAL_TIERED


@dataclass(frozen=True)
class TieredMetadata:
    """Every tiered partition the log dirs' ``__remote_log_metadata`` knows, by (topic, partition)."""

    partitions: dict[tuple[str, int], RemotePartition]
    #: the ``__remote_log_metadata-N`` dirs it came from
    sources: tuple[str, ...] = ()

    def get(self, tp: TopicPartition, topic_id: str | None = None) -> RemotePartition | None:
        """The partition's remote metadata; with ``topic_id``, only that incarnation's (a topic
        deleted and created again keeps its name, not its id)."""
        part = self.partitions.get((tp.topic, tp.partition))
        if part is None or (topic_id is not None and part.topic_id != topic_id):
            return None
        return part


#: The last replays, by what their ``__remote_log_metadata`` files were (names, sizes, mtimes): a
#: stream's triggers and repeated plans replay the topic again only once it has changed.
_REPLAYS: dict[tuple[object, ...], TieredMetadata] = {}
_REPLAYS_KEPT = 8
_REPLAYS_LOCK = threading.Lock()


def load_remote_metadata(log_dirs: Iterable[str | os.PathLike[str]],
                         storage: StorageOptions | None = None) -> TieredMetadata:
    """The replay of every ``__remote_log_metadata-N`` partition in ``log_dirs`` (a user
    partition's events are all in one of them, in order). Records that do not decode are left
    out, as the broker's consumer of the topic leaves them; an empty result where the dirs have no
    such partition (no tiered storage). Files unchanged since an earlier call give its result."""
    found: list[tuple[Path, list[Path]]] = []
    for d in log_dirs:
        root = as_path(d, storage)
        if not root.is_dir() or has_log_files(root):
            continue
        for pdir in sorted(root.glob(REMOTE_LOG_METADATA_TOPIC + "-*")):
            try:
                TopicPartition.parse_dir_name(pdir.name)
            except KlogError:
                continue
            found.append((pdir, sorted(pdir.glob("*" + LOG_SUFFIX))))
    if not found:
        return TieredMetadata({})
    key = tuple((str(pdir), tuple((p.name, st.st_size, st.st_mtime_ns) for p in logs for st in [p.stat()]))
                for pdir, logs in found)
    with _REPLAYS_LOCK:
        known = _REPLAYS.get(key)
    if known is not None:
        return known
    parts: dict[tuple[str, int], RemotePartition] = {}
    for _pdir, logs in found:
        for part in replay(_events(logs)).values():
            parts[(part.topic, part.partition)] = part
    result = TieredMetadata(parts, tuple(str(pdir) for pdir, _ in found))
    with _REPLAYS_LOCK:
        if len(_REPLAYS) >= _REPLAYS_KEPT:
            _REPLAYS.clear()
        _REPLAYS[key] = result
    return result


def _events(logs: Sequence[Path]) -> Iterator[dict[str, Any]]:
    """The decoded records of one ``__remote_log_metadata`` partition's segments, in order."""
    from storage_core.record.file_records import FileRecords
    from storage_core.record.messages.decoders import Decoder, decode_record

    for log in logs:
        for batch in FileRecords(log).batches():
            if batch.is_control:
                continue
            for r in batch.records():
                decoded = decode_record(Decoder.REMOTE_LOG_METADATA, r.key, r.value).value
                if isinstance(decoded, dict):
                    yield decoded


def _lineage(part: RemotePartition, partition_dir: str | os.PathLike[str] | None) -> list[tuple[int, int]]:
    """(epoch, start offset) by epoch: the partition's ``leader-epoch-checkpoint`` (what the broker
    resolves offsets with), or where there is none the epochs the finished segments carry."""
    if partition_dir is not None:
        try:
            entries = LeaderEpochCheckpointFile.in_dir(partition_dir).read()
        except KlogError:
            entries = []
        if entries:
            return sorted((e.epoch, e.start_offset) for e in entries)
    starts: dict[int, int] = {}
    for seg in part.segments.values():
        for epoch, start in seg.leader_epochs:
            starts[epoch] = min(start, starts.get(epoch, start))
    return sorted(starts.items())


def _epoch_for(lineage: Sequence[tuple[int, int]], offset: int) -> int | None:
    """``LeaderEpochFileCache.epochForOffset``: the last epoch starting at or before ``offset``."""
    found = None
    for epoch, start in lineage:
        if start > offset:
            break
        found = epoch
    return found


def remote_history(part: RemotePartition, partition_dir: str | os.PathLike[str] | None = None) -> list[RemoteSegment]:
    """The finished remote segments of ``part`` a reader walks from the oldest offset up, by
    start offset: at each offset the segment the broker's read path serves (the offset's leader
    epoch by the lineage, then ``segment_for(epoch, offset)``); where the epoch has none, the next
    epochs' first segment (``findNextSegmentMetadata``). A gap between two segments is kept as it
    is (the reader's lost-data check names it)."""
    served = {seg_id for state in part.epochs.values() for seg_id in state.ids.values()}
    if not served:
        return []
    lineage = _lineage(part, partition_dir)
    cursor = min(part.segments[i].start_offset for i in served)
    out: list[RemoteSegment] = []
    while True:
        epoch = _epoch_for(lineage, cursor)
        seg = part.segment_for(epoch, cursor) if epoch is not None else None
        if seg is None:  # the epoch serves nothing here: the first segment of a later epoch
            for e, start in lineage:
                if epoch is not None and e <= epoch:
                    continue
                seg = part.segment_for(e, max(cursor, start))
                if seg is None:
                    later = [s for s in part.epoch_segments(e) if s.segment_id in served and s.end_offset >= cursor]
                    seg = later[0] if later else None
                if seg is not None:
                    break
        if seg is None or (out and seg.segment_id == out[-1].segment_id):
            return out
        out.append(seg)
        cursor = seg.end_offset + 1


@dataclass(frozen=True)
class RemoteStorage:
    """Where a tiered topic's remote segments are: ``location`` (a local path or a URI), in
    ``layout``; ``storage``: how to reach a URI (the ``fs.*`` options)."""

    location: str
    layout: RemoteLayout = LOCAL_TIERED
    storage: StorageOptions = StorageOptions()

    #: ``remoteStorageLayout=aiven``: the plugin's ``rsm.config.*`` settings (:mod:`storage_core.log.aiven`)
    aiven: AivenConfig | None = None

    @classmethod
    def of(cls, location: str | None, layout: str | None, storage: StorageOptions | None = None, *,
           config: str | None = None, rsm: Mapping[str, str] | None = None) -> RemoteStorage | None:
        """The remote storage the ``remoteStorage``/``remoteStorageLayout`` options name (None: not
        given); an :class:`InvalidOptionError` for an unknown layout or a layout without a location.
        ``config`` (``remoteStorageConfig``: a properties file) and ``rsm`` (the read's
        ``rsm.config.*`` options, over the file's) configure the ``aiven`` layout; without
        ``remoteStorage`` its location is the plugin's own (``storage.root``, ``s3.bucket.name``)."""
        name = (layout or LOCAL_TIERED.value).strip().lower()
        try:
            kind = RemoteLayout(name)
        except ValueError:
            raise InvalidOptionError(f"remoteStorageLayout={layout!r}; expected one of "
                                     f"{', '.join(x.value for x in RemoteLayout)}") from None
        aiven = None
        if kind is RemoteLayout.AIVEN:
            aiven = AivenConfig.load(config, rsm)
            if location is None or not location.strip():
                location = aiven.location()
        elif config is not None or rsm:
            raise InvalidOptionError("options remoteStorageConfig and rsm.config.* configure Aiven's tiered-storage "
                                     "plugin: they need remoteStorageLayout=aiven")
        if location is None or not location.strip():
            if layout is not None:
                raise InvalidOptionError(f"option remoteStorageLayout={layout!r} needs option remoteStorage (where the "
                                         "remote segments are: a path or an s3:// URI"
                                         + (", or rsm.config.storage.root in remoteStorageConfig)" if aiven else ")"))
            return None
        refuse_credentials(location.strip())  # before any message or plan could show a secret
        return cls(location.strip(), kind, storage or StorageOptions(), aiven)

    @functools.cached_property
    def root(self) -> Path:
        """The dir holding the topic-partition dirs: ``location``, or its ``kafka-tiered-storage``
        child when it has one (the ``dir`` LocalTieredStorage was configured with); looked up once."""
        base = as_path(self.location, self.storage)
        inner = base / LOCAL_TIERED_ROOT
        return inner if inner.is_dir() else base

    def partition_dir(self, seg: RemoteSegment) -> Path:
        """``RemoteTopicPartitionDirectory``: ``<topic>-<partition>-<topic id>``."""
        return self.root / f"{seg.topic}-{seg.partition}-{seg.topic_id}"

    def segment(self, seg: RemoteSegment, *, index_interval_bytes: int) -> LogSegment:
        """The remote copy of ``seg`` as a read-only segment; :class:`RemoteSegmentMissingError`
        naming the object key when the storage does not hold it."""
        if self.layout is RemoteLayout.AIVEN:
            from storage_core.log.aiven.objects import AivenSegment, aiven_log_segment

            assert self.aiven is not None
            aiven = AivenSegment(self.location, self.storage, self.aiven, seg)
            copy = aiven_log_segment(aiven, index_interval_bytes=index_interval_bytes)
            # the first batch is not looked at here: it would fetch a chunk of every segment at plan time
            check_remote_copy(seg, copy, aiven.log_object, first_batch=False)
            return copy
        pdir = self.partition_dir(seg)
        stem = f"{filename_prefix(seg.start_offset)}-{seg.segment_id}"
        key = pdir / (stem + LOG_SUFFIX)
        offsets = ((seg.start_offset, seg.end_offset),)
        try:
            copy = LogSegment(pdir, seg.start_offset, index_interval_bytes=index_interval_bytes, stem=stem)
        except SegmentGoneError as exc:
            raise RemoteSegmentMissingError(
                f"remote segment {key} is not in the remote storage {self.location}: __remote_log_metadata lists "
                f"segment {seg.segment_id} of {seg.topic}-{seg.partition} (offsets {seg.start_offset}-"
                f"{seg.end_offset}, {seg.size_bytes} bytes) as copied", offsets=offsets, path=key) from exc
        except OSError as exc:
            raise RemoteSegmentMissingError(f"remote segment {key} of {seg.topic}-{seg.partition} could not be read: "
                                            f"{exc}", offsets=offsets, path=key) from exc
        check_remote_copy(seg, copy, key, first_batch=True)
        return copy


def check_remote_copy(seg: RemoteSegment, copy: LogSegment, key: Path, *, first_batch: bool) -> None:
    """The one check of a remote segment's bytes against ``__remote_log_metadata`` (every read path
    opens remote copies through :meth:`RemoteStorage.segment`): the ``.log`` holds the
    ``segmentSizeInBytes`` the broker recorded when it copied it, and (``first_batch``) its first
    batch starts at the segment's start offset. A copy cut, emptied or replaced by another
    segment's is a :class:`RemoteSegmentUnreadableError` naming the object, the value found and
    the value expected, never a short or foreign read."""
    offsets = ((seg.start_offset, seg.end_offset),)
    what = (f"__remote_log_metadata lists segment {seg.segment_id} of {seg.topic}-{seg.partition} (offsets "
            f"{seg.start_offset}-{seg.end_offset}) as")
    size = copy.size_in_bytes
    if size != seg.size_bytes:
        raise RemoteSegmentUnreadableError(f"remote segment {key} holds {size} bytes; {what} {seg.size_bytes} bytes "
                                           "(the copy was cut, emptied or replaced)", offsets=offsets, path=key)
    if not first_batch or size == 0:
        return
    try:
        base = next(iter(copy.batches(0))).base_offset
    except StopIteration:
        base = None
    except KlogError as exc:
        raise RemoteSegmentUnreadableError(f"remote segment {key}: its first batch does not read ({exc.detail}); "
                                           f"{what} starting there", offsets=offsets, path=key) from exc
    if base != seg.start_offset:
        raise RemoteSegmentUnreadableError(f"remote segment {key} starts at offset {base}; {what} starting at "
                                           f"{seg.start_offset} (the copy was replaced by another segment's)",
                                           offsets=offsets, path=key)


def _topic_id(partition_dir: Path) -> str | None:
    from storage_core.log.checkpoint import PartitionMetadataFile

    try:
        pm = PartitionMetadataFile.in_dir(partition_dir).read()
    except KlogError:
        return None
    return None if pm is None else pm.topic_id_base64


def partition_history(meta: TieredMetadata | None, tp: TopicPartition, partition_dir: str | os.PathLike[str],
                      topic_id: str | None = None) -> list[RemoteSegment]:
    """``tp``'s remote segments as a reader walks them (:func:`remote_history`), oldest first:
    only the metadata of the partition's own topic id counts (``topic_id``, else the one in its
    ``partition.metadata``); empty when the partition is not tiered or ``meta`` is None."""
    if meta is None:
        return []
    part = meta.get(tp, topic_id if topic_id is not None else _topic_id(Path(partition_dir)))
    return [] if part is None else remote_history(part, partition_dir)


def history_below_local(lg: Log, tp: TopicPartition, meta: TieredMetadata | None) -> list[RemoteSegment]:
    """``tp``'s remote segments that start below ``lg``'s first local segment, oldest first: what a
    read of the whole history puts before the local ones (the local copy wins above)."""
    local = lg.segments[lg.remote_segments].base_offset
    return [s for s in partition_history(meta, tp, lg.dir) if s.start_offset < local]


def attach_history(lg: Log, tp: TopicPartition, meta: TieredMetadata, remote: RemoteStorage, *,
                   on_missing: Callable[[RemoteSegmentMissingError], None] | None = None) -> int:
    """Put ``tp``'s remote segments before ``lg``'s local ones (:meth:`Log.attach_remote`), from
    ``remote``; returns how many. Only the metadata of the partition's own topic id counts. A
    segment the storage lacks raises :class:`RemoteSegmentMissingError`, or with ``on_missing`` is
    handed to it and left out (its offsets are then a gap in the history)."""
    segments = []
    for seg in history_below_local(lg, tp, meta):
        try:
            segments.append(remote.segment(seg, index_interval_bytes=lg.config.index_interval_bytes))
        except RemoteSegmentMissingError as exc:
            if on_missing is None:
                raise
            on_missing(exc)
    lg.attach_remote(segments)
    return len(segments)


def unread_remote_range(lg: Log, tp: TopicPartition, meta: TieredMetadata) -> tuple[int, int] | None:
    """``[first, end)``: the offsets below ``lg``'s first local segment that the partition's remote
    segments hold, when no remote storage was given to read them; None when there are none."""
    if lg.remote_segments:
        return None
    history = history_below_local(lg, tp, meta)
    if not history:
        return None
    return history[0].start_offset, min(lg.segments[0].base_offset, history[-1].end_offset + 1)
