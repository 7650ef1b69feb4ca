"""Staged writes and the commit that makes them visible all at once (the writing side of
:mod:`storage_core.log.journal`).

Protocol (what a Spark job, or any batch writer, does):

1. **Stage** (:class:`StagingWriter`). Each task writes whole segments (``.log`` + ``.index`` +
   ``.timeindex``) into a staging directory *inside* the target partition directory,
   ``<topic>-<p>/.klog-staging-<job>-<task>-<attempt>/``. Kafka's loader only looks at files in
   a partition dir, so a broker ignores staging, and nothing staged is visible to readers.
   Offsets are staged from :data:`~storage_core.log.journal.STAGED_ORIGIN` (2**62), far above
   any real offset. A restore (:meth:`StagingWriter.append_at`) stages records at their own
   offsets instead: its writer is *pinned* to a final base offset, STAGED_ORIGIN standing for it,
   and the gaps between the records' offsets are kept.
2. **Commit** (:func:`commit_job`, on the driver, holding the log dir's ``.lock``): the log end
   offset of each partition is read, every staged segment gets its final base offset (in task
   order; a pinned partition's writers, one or several, keep their base offsets, in offset order:
   refused if their ranges overlap, if the partition ends above the first, or where a gap is taken for
   lost data (:func:`check_at_offsets`); an empty partition's log start offset moves up to the first:
   the journal's ``log_starts``), and the plan is written to a journal ``<log dir>/.klog-commit-<job>.json``, which is
   then applied (:func:`~storage_core.log.journal.finish_commit`): batches rebased in place,
   files renamed in, checkpoints and the clean-shutdown marker written, the journal removed.
3. **Crash.** A journal left behind is settled by the next commit, writable open or the job's
   own ``abort`` (:func:`~storage_core.log.journal.recover_commits`): rolled back, unless an
   overwrite had started to delete the old data. A job that never wrote its journal left only
   staging, which :func:`collect_staging` removes.
4. **Streaming sinks** (:class:`~storage_core.log.journal.SinkBatch`): a micro-batch commit also
   records the sink's last batch id in the log dir; a commit whose batch id is not above that
   mark was already made (Spark replays a micro-batch with the same id after a failure): its
   staging is dropped and nothing is written twice.
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import struct
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from storage_core.errors import (
    CommitError,
    KlogError,
    LogDirLockedError,
    OffsetOverlapError,
    RestoreError,
    storage_error,
)
from storage_core.faults import maybe_crash_at_step
from storage_core.files import LOG_SUFFIX, RECOVERY_POINT_OFFSET_CHECKPOINT, STAGING_PREFIX, staging_prefix
from storage_core.limits import INT32_MAX
from storage_core.log.checkpoint import (
    CleanShutdownFile,
    OffsetCheckpointFile,
    assign_leader_epoch,
    current_leader_epoch,
    fsync_dir,
)
from storage_core.log.cluster_metadata import find_cluster_metadata
from storage_core.log.config import LogConfig
from storage_core.log.journal import (
    STAGED_ORIGIN,
    JournalEntry,
    SinkBatch,
    advance_high_watermarks,
    finish_commit,
    journal_path,
    read_sink_mark,
    recover_commits,
    write_json,
)
from storage_core.log.lock import LogDirLock, check_free_to_stage
from storage_core.log.log import Log
from storage_core.log.lost import gaps_are_lost, gather_evidence
from storage_core.log.manager import PartitionDir
from storage_core.log.segment import LogSegment, RollParams
from storage_core.log.topic_configs import config_for_topic, load_topic_configs
from storage_core.log.topic_partition import TopicPartition, check_appendable
from storage_core.record.columnar import EncodeBuffer, EncodedBatch, RowSelection, RowsEncoder, prepare_columns
from storage_core.record.compression import CompressionType
from storage_core.record.records import NO_TIMESTAMP, TimestampType

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

_log = logging.getLogger(__name__)
_BASE_OFFSET = struct.Struct(">q")  # a batch's first 8 bytes


@dataclass(frozen=True)
class StagedSegment:
    staged_base: int  # >= STAGED_ORIGIN
    records: int  # offsets it spans (next offset - base)
    size: int


@dataclass(frozen=True)
class StagedPartition:
    """What one task staged for one partition (travels in a Spark commit message)."""

    topic: str
    partition: int
    partition_dir: str
    staging_dir: str
    segments: tuple[StagedSegment, ...]
    #: the partition leader epoch its batches carry (:func:`~storage_core.log.checkpoint.current_leader_epoch`),
    #: which the commit records in each replica's leader-epoch-checkpoint; -1: none
    leader_epoch: int = -1
    #: a restore's: the final offset STAGED_ORIGIN stands for (the first segment's base), kept by the
    #: commit instead of rebasing to the log end; None: offsets from the log end
    pinned_base: int | None = None

    @property
    def records(self) -> int:
        return sum(s.records for s in self.segments)


_F = TypeVar("_F", bound=Callable[..., Any])


def _staging_io(doing: str) -> Callable[[_F], _F]:
    """An ``OSError`` while staging (disk full) becomes a :class:`StorageError`; nothing is visible,
    and the staged files are the caller's to remove (:meth:`StagingWriter.discard`), or the job's
    abort's (:func:`collect_staging`)."""
    def deco(fn: _F) -> _F:
        @functools.wraps(fn)
        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                return fn(self, *args, **kwargs)
            except OSError as exc:
                raise storage_error(exc, doing, getattr(self, "staging", None)) from exc
        return wrapper  # type: ignore[return-value]
    return deco


class StagingWriter:
    """Stages Arrow rows for one partition as whole segments, offsets from STAGED_ORIGIN."""

    @_staging_io("creating the staging directory")
    def __init__(self, partition_dir: str | os.PathLike[str], staging_name: str, config: LogConfig,
                 compression: CompressionType, max_batch_bytes: int, buffer: EncodeBuffer | None = None,
                 registered_epoch: int | None = None, pinned_base: int | None = None, *,
                 group_records: bool = False) -> None:
        """``buffer``: the encode buffer to use, which writers that never append at the same time may
        share (a task's writers, on its one staging thread); a buffer of its own when None.
        ``registered_epoch``: the partition's leader epoch by the KRaft metadata, stamped when the
        partition has no leader-epoch checkpoint (:func:`~storage_core.log.checkpoint.current_leader_epoch`).
        ``pinned_base``: the records keep their own offsets (:meth:`append_at`), from this one up,
        which becomes the first staged segment's base offset.

        The partition dir must exist: making it is the job's (the topic's creation), and one missing
        here was removed by the job's own abort (Spark aborts a job without waiting for the tasks it
        is killing), which a task must not undo.

        An internal topic is refused (:func:`~storage_core.log.topic_partition.check_appendable`),
        but ``__consumer_offsets`` when ``group_records`` says the rows are the group coordinator's
        records (the restore of consumer groups alone passes it)."""
        self.partition_dir = Path(partition_dir)
        self.topic_partition = TopicPartition.parse_dir_name(self.partition_dir.name)
        check_appendable(self.topic_partition.topic, group_records=group_records)
        self.staging = self.partition_dir / staging_name
        check_free_to_stage(self.partition_dir.parent, None)  # never a file in a running broker's dir
        if self.staging.exists():
            shutil.rmtree(self.staging)  # a previous try of the same attempt id
        self.staging.mkdir()  # not parents: see above
        self.config = config
        self.compression = compression
        self.max_batch_bytes = min(max_batch_bytes, config.max_message_bytes)
        self.next_offset = STAGED_ORIGIN
        self.pinned_base = pinned_base
        self.segment: LogSegment | None = None
        self.segments: list[StagedSegment] = []
        # each batch carries the partition's leader epoch, as a broker's appends do
        self.leader_epoch = current_leader_epoch(self.partition_dir, registered_epoch)
        self.encoder = RowsEncoder(compression, max_batch_bytes=self.max_batch_bytes, buffer=buffer,
                                   partition_leader_epoch=self.leader_epoch)

    def _new_segment(self, base_offset: int) -> LogSegment:
        if self.segment is not None:
            self._close_segment()
        self.segment = LogSegment(self.staging, base_offset, index_interval_bytes=self.config.index_interval_bytes,
                                  max_index_size=self.config.segment_index_bytes, writable=True)
        return self.segment

    def _close_segment(self) -> None:
        seg = self.segment
        assert seg is not None
        seg.on_become_inactive_segment()
        seg.flush()
        size = seg.size_in_bytes
        seg.close()
        if size:
            self.segments.append(StagedSegment(seg.base_offset, self.next_offset - seg.base_offset, size))
        self.segment = None

    def append(self, table: object, default_timestamp_ms: int) -> int:
        """Encode and stage rows (``key``, ``value``, ``headers``, ``timestamp``); returns records staged."""
        import pyarrow as pa

        assert isinstance(table, (pa.Table, pa.RecordBatch))
        if table.num_rows == 0:
            return 0
        return self.append_rows(RowSelection.of([(prepare_columns(table, default_timestamp_ms), None)]))

    @_staging_io("staging records")
    def append_rows(self, rows: RowSelection) -> int:
        """Encode and stage rows picked from prepared columns, where they lie; returns records staged."""
        if rows.num_rows == 0:
            return 0
        if self.pinned_base is not None:
            raise CommitError(f"{self.topic_partition}: a restore's writer stages records at their own offsets "
                              "(append_at), not from the log end")
        self._check_timestamps(rows.timestamps)
        now = int(time.time() * 1000)
        for batch in self.encoder.encode(rows, self.next_offset):
            self._stage_batch(batch, self.next_offset, now)
        return rows.num_rows

    @_staging_io("staging restored records")
    def append_at(self, rows: RowSelection, offsets: np.ndarray, log_append_time: int | None = None) -> int:
        """Stage rows at their own offsets (a restore's; the writer is pinned): ``offsets`` (int64, one
        per row, strictly increasing, at or above the pinned base and above what was staged before)
        are kept, gaps between them included (offset deltas within a batch, as compaction leaves
        them). ``log_append_time``: the rows are LogAppendTime records of that time, staged as a batch
        a broker stamped (:meth:`RowsEncoder.encode`). Timestamps are not checked against
        ``message.timestamp.*.max.ms``: those records were appended once, and a broker checks a
        producer's append, not a replica's copy. Returns records staged."""
        if self.pinned_base is None:
            raise CommitError(f"{self.topic_partition}: records at their own offsets need a writer pinned to a "
                              "base offset (pinned_base)")
        if rows.num_rows == 0:
            return 0
        first = int(offsets[0])
        staged_first = STAGED_ORIGIN + first - self.pinned_base
        if first < self.pinned_base or staged_first < self.next_offset:
            raise CommitError(f"{self.topic_partition}: offset {first} staged after offset "
                              f"{self.next_offset - 1 - STAGED_ORIGIN + self.pinned_base} or below the base "
                              f"{self.pinned_base}; expected increasing offsets from the base")
        now = int(time.time() * 1000)
        for batch in self.encoder.encode(rows, staged_first, offsets=offsets, log_append_time=log_append_time):
            self._stage_batch(batch, _BASE_OFFSET.unpack_from(batch.data)[0], now)
        return rows.num_rows

    def append_rows_at(self, rows: pa.RecordBatch) -> int:
        """Stage one partition's rows at their offsets (the writer is pinned): ``rows`` has an ``offset``
        column (int64, strictly increasing, at or above the pinned base and above what was staged
        before), ``value``, and optionally ``key``, ``headers``, ``timestamp`` (a null one, or none: -1,
        no timestamp) and ``timestampType`` (0 CreateTime, 1 LogAppendTime, as ``klog export`` and a
        klog read give it; null or absent: CreateTime). Each run of records that share a batch's
        timestamp type (and, for LogAppendTime, its time) is staged apart (:meth:`append_at`), so that
        a LogAppendTime record lands in a batch a broker stamped with its time. The one way rows are
        staged at their offsets: ``klog restore`` and the Spark writer's ``offsets=keep``. Returns
        records staged."""
        import numpy as np
        import pyarrow.compute as pc

        if rows.num_rows == 0:
            return 0
        offsets = rows.column("offset").to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
        cols = prepare_columns(rows, NO_TIMESTAMP)
        ts = cols.timestamps
        if "timestampType" in rows.column_names:
            types = np.asarray(pc.fill_null(rows.column("timestampType"), 0).to_numpy(zero_copy_only=False))
        else:
            types = np.zeros(rows.num_rows, np.int32)
        lat = types == int(TimestampType.LOG_APPEND_TIME)
        cut = np.flatnonzero((lat[1:] != lat[:-1]) | (lat[1:] & (ts[1:] != ts[:-1]))) + 1
        bounds = [0, *cut.tolist(), rows.num_rows]
        n = 0
        for a, b in zip(bounds, bounds[1:], strict=False):
            picked = RowSelection.of([(cols, np.arange(a, b, dtype=np.int64))])
            n += self.append_at(picked, offsets[a:b], int(ts[a]) if lat[a] else None)
        return n

    def _stage_batch(self, batch: EncodedBatch, base_offset: int, now: int) -> None:
        """Append one encoded batch (of first offset ``base_offset``) to the staged segment, rolling first
        where Kafka's ``LogSegment.shouldRoll`` would."""
        size = len(batch.data)
        if size > self.config.max_message_bytes:
            from storage_core.errors import RecordTooLargeError

            raise RecordTooLargeError(f"a record batch of {size} bytes is larger than "
                                      f"max.message.bytes ({self.config.max_message_bytes})")
        seg = self.segment or self._new_segment(self.next_offset)
        if seg.should_roll(RollParams(self.config.segment_ms, self.config.segment_bytes, batch.max_timestamp,
                                      batch.last_offset, size, now)) and not self._gap_holds_roll(seg, batch, base_offset):
            # a new segment at the batch's first offset (UnifiedLog.maybeRoll rolls at the append's first
            # offset; a pinned writer's batches keep their own offsets)
            seg = self._new_segment(base_offset)
        seg.append(batch.last_offset, batch.max_timestamp, batch.last_offset, batch.data)
        self.next_offset = batch.last_offset + 1

    def _gap_holds_roll(self, seg: LogSegment, batch: EncodedBatch, base_offset: int) -> bool:
        """Whether a roll that is due waits for a later batch: records at their own offsets (a restore's)
        with a gap before this batch, in a topic that is not compacted. A segment starting after a gap
        is what a compacted log holds; in one that is not, a log rolls at its end, and every reader
        takes a gap between segments (or a segment whose first batch lies above its base offset) for a
        deleted or misplaced segment (:mod:`storage_core.log.lost`). So the segment grows past
        ``segment.bytes`` (or ``segment.ms``) until a batch follows on without a gap, as far as a
        segment can: not with a full index or an offset its index cannot hold relative to its base."""
        if base_offset == self.next_offset or self.config.compact:
            return False
        return not (seg.offset_index.is_full() or seg.time_index.is_full()
                    or not 0 <= batch.last_offset - seg.base_offset <= INT32_MAX
                    or seg.size_in_bytes + len(batch.data) > INT32_MAX)

    def _check_timestamps(self, timestamps: np.ndarray) -> None:
        """Kafka's ``LogValidator.validateTimestamp``: under CreateTime, a record's timestamp (other than
        -1, none) must lie within [now - message.timestamp.before.max.ms, now + message.timestamp.after.max.ms]."""
        from storage_core.errors import InvalidTimestampError
        from storage_core.log.config import MessageTimestampType

        if self.config.message_timestamp_type != MessageTimestampType.CREATE_TIME:
            return
        ts = timestamps[timestamps != NO_TIMESTAMP]
        if not len(ts):
            return
        now = int(time.time() * 1000)
        lo, hi = now - self.config.message_timestamp_before_max_ms, now + self.config.message_timestamp_after_max_ms
        for t in (int(ts.min()), int(ts.max())):
            if t < lo or t > hi:
                raise InvalidTimestampError(
                    f"Timestamp {t} of a record for {self.topic_partition} is out of range: it should be within "
                    f"[{lo}, {hi}] (now {now} less message.timestamp.before.max.ms="
                    f"{self.config.message_timestamp_before_max_ms}, plus message.timestamp.after.max.ms="
                    f"{self.config.message_timestamp_after_max_ms}), as a broker checks a CreateTime record on append")

    def discard(self) -> None:
        """Remove everything this writer staged (a task that fails removes its own staging: the
        job's ``abort`` may already have run, as Spark aborts a job while its other tasks are still
        being killed). A failure here is logged, not raised: the caller is already failing with the
        error that matters, and staging left behind is collected by the next job's commit."""
        try:
            if self.segment is not None:
                seg, self.segment = self.segment, None
                seg.close()
            shutil.rmtree(self.staging)
        except OSError as exc:
            _log.warning("could not remove the staging dir %s of a failed task (%s); the next job's "
                         "commit collects it", self.staging, exc)

    @_staging_io("finishing the staged segments")
    def finish(self) -> StagedPartition:
        if self.segment is not None:
            self._close_segment()
        return StagedPartition(self.topic_partition.topic, self.topic_partition.partition, str(self.partition_dir),
                               self.staging.name, tuple(self.segments), self.leader_epoch, self.pinned_base)


def commit_job(job_id: str, staged: Sequence[StagedPartition], *, overwrite_topics: Iterable[str] = (),
               lock_timeout_s: float = 600.0, config: LogConfig | None = None,
               sink: SinkBatch | None = None,
               owner_alive: Callable[[], bool] | None = None,
               replicas: Mapping[str, Sequence[str]] | None = None,
               topic_configs: Mapping[str, LogConfig] | None = None) -> dict[TopicPartition, tuple[int, int]]:
    """Make a job's staged partitions visible atomically per log dir; returns each partition's
    new ``(first offset, end offset)`` of what was committed. With ``sink``, a log dir whose
    sink mark already holds the batch (or a later one) is skipped and its staging dropped.

    A write that fails (disk full, read-only file system) raises :class:`StorageError`: the
    commit did not return, so, as after a crash, its journal makes the next commit or writable
    open roll it back (readers never see it in part).

    ``owner_alive`` says whether the process the commit belongs to (a Spark job's driver) still
    lives. The commit is decided when its journal is removed; until then a dead owner makes it
    roll back (:func:`~storage_core.log.journal.recover_commits`) and raise :class:`CommitError`,
    because an owner that died never told its user the job succeeded, and the user's rerun must not
    add the records twice.

    ``replicas``: for a replicated partition, the partition dirs of its other replicas by the dir
    its tasks staged in (:func:`~storage_core.log.replicas.write_targets`). Each gets a byte-for-byte
    copy of the staging and commits it at the same offsets, under its own log dir's lock; the dirs
    of the staging replicas (the leaders') commit last, so that a commit cut short leaves klog's
    records on followers only, which a follower truncates to its leader when the cluster starts
    (``Partition.makeFollower``): never on a leader without them on its ISR.

    Writers pinned to their offsets (a restore's, the Spark writer's ``offsets=keep``; one or several
    per partition, each its own range of offsets) keep them in every replica, each replica's log dir
    checked by :func:`check_at_offsets` under its lock (with the topic's config from
    ``topic_configs``, else from the dir: its KRaft metadata and ``klog-topic-configs.json``), and
    their ranges by :func:`pinned_ranges`; a pinned partition of an ``overwrite_topics`` topic is
    refused (:class:`CommitError`)."""
    try:
        more, last = _replicate_staging(staged, replicas or {})
        return _commit_job(job_id, [*staged, *more], overwrite_topics=overwrite_topics, lock_timeout_s=lock_timeout_s,
                           config=config, sink=sink, owner_alive=owner_alive, last=last,
                           topic_configs=topic_configs or {})
    except OSError as exc:
        raise storage_error(exc, f"committing job {job_id}") from exc


def _replicate_staging(staged: Sequence[StagedPartition], replicas: Mapping[str, Sequence[str]],
                       ) -> tuple[list[StagedPartition], set[Path]]:
    """Copies of each replicated partition's staging into its other replicas' partition dirs (the
    same staging name, fsynced), and the log dirs of the staging replicas, which commit last."""
    more: list[StagedPartition] = []
    last: set[Path] = set()
    for sp in staged:
        targets = replicas.get(sp.partition_dir, ())
        if not targets:
            continue
        last.add(Path(sp.partition_dir).parent)
        source = Path(sp.partition_dir) / sp.staging_dir
        for target in targets:
            check_free_to_stage(Path(target).parent, None)  # never a file in a running broker's dir
            copy = Path(target) / sp.staging_dir
            if copy.exists():
                shutil.rmtree(copy)
            shutil.copytree(source, copy)
            for f in copy.iterdir():
                with open(f, "rb") as fh:
                    os.fsync(fh.fileno())
            fsync_dir(copy)
            more.append(StagedPartition(sp.topic, sp.partition, str(target), sp.staging_dir, sp.segments,
                                        sp.leader_epoch, sp.pinned_base))
    return more, last


def _commit_job(job_id: str, staged: Sequence[StagedPartition], *, overwrite_topics: Iterable[str],
                lock_timeout_s: float, config: LogConfig | None, sink: SinkBatch | None,
                owner_alive: Callable[[], bool] | None, last: set[Path],
                topic_configs: Mapping[str, LogConfig]) -> dict[TopicPartition, tuple[int, int]]:
    by_dir: dict[Path, list[StagedPartition]] = {}
    for sp in staged:
        by_dir.setdefault(Path(sp.partition_dir).parent, []).append(sp)
    for d in _overwrite_dirs(overwrite_topics, staged):
        by_dir.setdefault(d, [])
    # records at their own offsets: every log dir's partitions (each replica's) checked before any
    # log dir commits, so that a refusal leaves every replica as it was; asked again under each lock
    overwritten = set(overwrite_topics)
    for log_dir, parts in by_dir.items():
        writers: dict[str, list[StagedPartition]] = {}
        for sp in parts:
            writers.setdefault(sp.partition_dir, []).append(sp)
        for pdir, mine in sorted(writers.items()):
            _check_pinned(job_id, log_dir, pdir, mine, overwritten, topic_configs)
    result: dict[TopicPartition, tuple[int, int]] = {}
    for log_dir, parts in sorted(by_dir.items(), key=lambda kv: (kv[0] in last, kv[0])):
        try:
            lock = LogDirLock(log_dir, lock_timeout_s)
        except LogDirLockedError as exc:
            raise CommitError(f"{exc.detail}; nothing was committed") from None
        try:
            recover_commits(log_dir)
            previous_mark = read_sink_mark(log_dir, sink.sink_id) if sink is not None else None
            if sink is not None and previous_mark is not None and \
                    int(previous_mark["batch"]) >= sink.batch_id:  # type: ignore[call-overload]
                for sp in parts:  # a replayed micro-batch: already committed here
                    shutil.rmtree(Path(sp.partition_dir) / sp.staging_dir, ignore_errors=True)
                continue
            entries: list[dict[str, object]] = []
            ends: dict[str, int] = {}
            epochs: dict[str, tuple[int, int]] = {}  # by partition dir: (epoch, first offset) to assign
            log_starts: dict[str, int] = {}  # by partition dir: the log start offset a pinned commit sets
            overwrite: dict[str, int] = {}
            starts: dict[str, int] = {}  # by partition dir: its log end before the commit
            overwrite_set = set(overwrite_topics)
            pdirs = sorted({sp.partition_dir for sp in parts} |
                           {str(p) for p in log_dir.iterdir() if p.is_dir() and _topic_of(p) in overwrite_set})
            recovery = OffsetCheckpointFile(log_dir / RECOVERY_POINT_OFFSET_CHECKPOINT).read()
            clean = CleanShutdownFile.in_dir(log_dir).exists()
            broker_epoch = CleanShutdownFile.in_dir(log_dir).kept_epoch()
            staged_in: dict[str, list[StagedPartition]] = {}
            for sp in sorted(parts, key=lambda s: s.staging_dir):
                staged_in.setdefault(sp.partition_dir, []).append(sp)
            for pdir in pdirs:
                tp0 = TopicPartition.parse_dir_name(Path(pdir).name)
                _check_pinned(job_id, log_dir, pdir, staged_in.get(pdir, ()), overwrite_set, topic_configs)
                with Log(pdir, config, writable=True, recovery_point=recovery.get(tp0, 0),
                         had_clean_shutdown=clean) as lg:
                    leo = lg.log_end_offset
                    empty = lg.log_start_offset >= leo
                first, next_base = _final_bases(job_id, pdir, staged_in.get(pdir, ()), leo, entries)
                if first > leo and empty:  # a restore into an empty partition: a consumer at earliest starts there
                    log_starts[pdir] = first
                epoch = max((sp.leader_epoch for sp in staged_in.get(pdir, ())), default=-1)
                if epoch >= 0 and next_base > first:
                    epochs[pdir] = (epoch, first)
                tp = TopicPartition.parse_dir_name(Path(pdir).name)
                if tp in result and result[tp] != (first, next_base):  # a replica that moved since the job began
                    raise CommitError(f"job {job_id}: the replica of {tp} in {pdir} ends at {leo}, another at "
                                      f"{result[tp][0]}: the same offsets cannot be committed to both; the replicas "
                                      "committed so far are followers, which Kafka truncates to their leader")
                result[tp] = (first, next_base)
                ends[pdir] = next_base
                starts[pdir] = leo
                if tp.topic in overwrite_set:
                    overwrite[pdir] = leo
            journal: dict[str, object] = {"job": job_id, "entries": entries, "ends": ends, "overwrite": overwrite,
                                          "starts": starts, "phase": "applying"}
            if log_starts:
                journal["log_starts"] = log_starts
            if sink is not None:
                journal["sink"] = {"id": sink.sink_id, "batch": sink.batch_id, "previous": previous_mark}
            jpath = journal_path(log_dir, job_id)
            maybe_crash_at_step()
            if owner_alive is not None and not owner_alive():
                raise CommitError(f"job {job_id}: the driver that owns the commit is gone; nothing was committed")
            write_json(jpath, journal)
            maybe_crash_at_step()
            finish_commit(log_dir, journal, jpath)
            maybe_crash_at_step()
            if owner_alive is not None and not owner_alive():  # the decision: undo, or complete an overwrite
                settled = recover_commits(log_dir, job_id)
                raise CommitError(f"job {job_id}: the driver that owns the commit died during it; "
                                  f"{', '.join(settled) or 'settled'} in {log_dir}")
            # the batches' epoch into each replica's leader-epoch-checkpoint, as the broker's append
            # does (a follower's lacks a leader's epoch under which nothing was appended yet). Before
            # the decision: a rollback leaves an entry starting at the log end, as a broker's new
            # leader does before its first append (LogLoader truncates it from the end if need be)
            for pdir, (epoch, start) in epochs.items():
                assign_leader_epoch(pdir, epoch, start)
            maybe_crash_at_step()
            jpath.unlink()
            fsync_dir(log_dir)
            advance_high_watermarks(log_dir, ends)
            CleanShutdownFile.in_dir(log_dir).write(broker_epoch)
        finally:
            lock.release()
    return result


def _check_pinned(job_id: str, log_dir: Path, pdir: str, staged: Sequence[StagedPartition], overwrite: set[str],
                  topic_configs: Mapping[str, LogConfig]) -> None:
    """The refusals of a partition's pinned writers (none: nothing to check): their ranges
    (:func:`pinned_ranges`), an overwrite of their topic, the target (:func:`check_at_offsets`, with the
    topic's config from ``topic_configs``, else the dir's)."""
    pinned = pinned_ranges(job_id, pdir, staged)
    if not pinned:
        return
    tp = TopicPartition.parse_dir_name(Path(pdir).name)
    if tp.topic in overwrite:
        raise CommitError(f"job {job_id}: {pdir} is written at its records' own offsets and its topic {tp.topic!r} "
                          "overwritten; expected one or the other (an overwrite starts from the log end); nothing "
                          "was committed")
    config = topic_configs.get(tp.topic) or config_for_topic(tp.topic, load_topic_configs(log_dir),
                                                             kraft=find_cluster_metadata([log_dir]))
    check_at_offsets(log_dir, tp, config, [(a, b) for a, b, _ in pinned])


def check_ends_at_or_below(partition_dir: str | os.PathLike[str], log_end: int, first: int) -> None:
    """Refuse records at their own offsets from ``first`` (a restore's) into a partition that ends at
    ``log_end`` above it: they would overlap what it holds. A gap (``log_end`` below ``first``) is
    allowed: the records start a segment of their own at ``first``."""
    if log_end > first:
        raise OffsetOverlapError(f"{Path(partition_dir).name} in {Path(partition_dir).parent} ends at offset "
                                 f"{log_end}, above the first offset to restore, {first}: the source overlaps what the "
                                 f"target holds; expected a partition that ends at or below {first}; nothing was "
                                 "written")


def pinned_ranges(job_id: str, pdir: str, staged: Sequence[StagedPartition]) -> list[tuple[int, int, StagedPartition]]:
    """The ``(first, end, writer)`` of each writer of a partition pinned to its offsets (a restore's, the
    Spark writer's ``offsets=keep``: one or several tasks, each its own range), in offset order;
    ``end`` is the offset after its last record. Empty: no writer is pinned. Refused (nothing is
    visible yet): pinned and unpinned writers in one partition (records at their own offsets and
    records from the log end cannot be told apart), and two writers whose ranges overlap (their
    segments cannot both be in the log: a partition's offsets are written once, in order)."""
    pinned = [sp for sp in staged if sp.pinned_base is not None]
    if not pinned:
        return []
    if len(pinned) != len(staged):
        raise CommitError(f"job {job_id}: {pdir} has {len(staged)} staged writers, {len(pinned)} of them pinned to "
                          "their offsets; expected every writer of a partition pinned (records at their own "
                          "offsets) or none (records from the log end)")
    out = []
    for sp in pinned:
        base = sp.pinned_base
        assert base is not None
        end = base
        for seg in sp.segments:
            end = base + seg.staged_base - STAGED_ORIGIN + seg.records
        out.append((base, end, sp))
    out.sort(key=lambda r: (r[0], r[1]))
    for (a0, a1, _), (b0, b1, _) in zip(out, out[1:], strict=False):
        if b0 < a1:
            raise OffsetOverlapError(
                f"{Path(pdir).name} in {Path(pdir).parent}: offsets {a0}..{a1 - 1} and {b0}..{b1 - 1} were staged "
                f"by two tasks (job {job_id}) and overlap; expected each offset of a partition written once, the "
                "tasks of a partition each holding a range of its offsets apart from the others' (in Spark: "
                "df.repartitionByRange('partition', 'offset'), or df.repartition('partition') for one task per "
                "partition); nothing was written")
    return out


def check_at_offsets(log_dir: str | os.PathLike[str], tp: TopicPartition, config: LogConfig,
                     ranges: Sequence[tuple[int, int]]) -> None:
    """The one rule of the target of records written at their own offsets (``klog restore``, asked
    before it stages; the Spark writer's ``offsets=keep``; and every commit of pinned writers, again
    under the lock): ``ranges`` are the ``[first, end)`` of the records of each writer of partition
    ``tp`` of ``log_dir``, in offset order (a restore, before staging, gives its source's first offset
    alone: ``[(first, first)]``). Refused, before anything is visible:

    - a partition that ends above the first offset (:func:`check_ends_at_or_below`,
      :class:`~storage_core.errors.OffsetOverlapError`): it holds those offsets already;
    - where klog's readers would take a gap between segments for lost data
      (:func:`~storage_core.log.lost.gaps_are_lost`: a log known never compacted rolls at its end), a
      partition holding records that ends below the first offset, and a gap between two writers'
      ranges (each writer's records start segments of their own)
      (:class:`~storage_core.errors.RestoreError`).

    An empty partition takes any first offset (its log then starts there), and a partition dir without
    a ``.log`` (a topic the write creates) any ranges. ``config``: the topic's (its cleanup policy says
    whether it is compacted)."""
    pdir = Path(log_dir) / tp.dir_name
    if not ranges or not pdir.is_dir() or not any(pdir.glob("*" + LOG_SUFFIX)):
        return
    first = ranges[0][0]
    evidence = gather_evidence(PartitionDir(tp, pdir, Path(log_dir)))  # before the open, as every reader takes it
    with Log(pdir, config) as lg:
        end, empty = lg.log_end_offset, lg.log_start_offset >= lg.log_end_offset
        check_ends_at_or_below(pdir, end, first)
        if not gaps_are_lost(lg, evidence):
            return
    if end < first and not empty:
        raise RestoreError(f"{tp} in {log_dir} ends at offset {end} and the source starts at {first}: its topic "
                           "is not compacted, and klog's readers take a gap between segments of such a log "
                           f"for lost data (offsets {end}..{first - 1}); expected a source starting at {end}, "
                           "an empty partition, or a compacted topic")
    for (_, a_end), (b_first, _) in zip(ranges, ranges[1:], strict=False):
        if a_end < b_first:
            raise RestoreError(f"{tp} in {log_dir}: the records of one task end at offset {a_end - 1} and the next "
                               f"task's start at {b_first}: its topic is not compacted, and klog's readers take a gap "
                               f"between segments of such a log for lost data (offsets {a_end}..{b_first - 1}); "
                               "expected each partition's rows in one task (in Spark: df.repartition('partition')), "
                               "offsets without a gap where one task's end, or a compacted topic; nothing was "
                               "written")


def _final_bases(job_id: str, pdir: str, staged: Sequence[StagedPartition], leo: int,
                 entries: list[dict[str, object]]) -> tuple[int, int]:
    """Each staged segment of a partition its final base offset (one journal entry each, added to
    ``entries``); returns the first offset and the end offset of what the commit adds. Staged from the
    log end ``leo`` in task order; a pinned partition's writers (:func:`pinned_ranges`) at their own
    offsets, in offset order, refused when the partition ends above the first of them (a write at its
    offsets never overwrites nor shifts a record)."""
    pinned = pinned_ranges(job_id, pdir, staged)
    if pinned:
        first = pinned[0][0]
        check_ends_at_or_below(pdir, leo, first)
        for base, _, sp in pinned:
            for seg in sp.segments:
                final = base + seg.staged_base - STAGED_ORIGIN
                entries.append(asdict(JournalEntry(pdir, sp.staging_dir, seg.staged_base, final)))
        return first, pinned[-1][1]
    next_base = leo
    for sp in staged:
        for seg in sp.segments:
            entries.append(asdict(JournalEntry(pdir, sp.staging_dir, seg.staged_base, next_base)))
            next_base += seg.records
    return leo, next_base


def _topic_of(p: Path) -> str | None:
    try:
        return TopicPartition.parse_dir_name(p.name).topic
    except KlogError:
        return None


def _overwrite_dirs(topics: Iterable[str], staged: Sequence[StagedPartition]) -> set[Path]:
    return {Path(sp.partition_dir).parent for sp in staged if sp.topic in set(topics)}


def collect_staging(partition_dirs: Iterable[str | os.PathLike[str]], *, job_id: str | None = None,
                    older_than_s: float | None = None) -> int:
    """Remove staging left by aborted jobs, failed or speculative attempts; returns how many."""
    n = 0
    now = time.time()
    for pdir in partition_dirs:
        for s in Path(pdir).glob(STAGING_PREFIX + "*"):
            mine = job_id is not None and s.name.startswith(staging_prefix(job_id))
            old = older_than_s is not None and now - s.stat().st_mtime > older_than_s
            if mine or old:
                shutil.rmtree(s, ignore_errors=True)
                n += 1
    return n
