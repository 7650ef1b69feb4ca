"""The one read planner: log dirs and :class:`ReadOptions` → partitions → offset ranges → pieces.

Every reader plans here: Spark batch reads (which pack the pieces into input partitions), each
micro-batch of a stream, ``klog export`` and the Python API (:func:`storage_core.read.read_arrow`).
It owns, once each, Kafka's rules for

* **selection** (:func:`select_partitions`): ``topics``, ``topicPattern``, ``assign``, or the
  partitions a JSON spec lists; a JSON spec must name exactly the partitions read
  (:func:`check_listed`, Spark's Kafka source asserts the same);
* **range resolution** (:func:`resolve`, :func:`offset_for`): ``earliest``/``latest``, JSON offsets
  with -2/-1, timestamps through the time index, the log start offset, the last stable offset
  under ``read_committed``, a consumer group's committed offsets (``startingOffsetsFromGroup``,
  ``endingOffsetsFromGroup``: :func:`committed_for`, from :mod:`storage_core.read.groups`), and
  ``failOnDataLoss``;
* **pieces** (:func:`pieces_of`): byte slices of segments at batch boundaries (executors seek
  straight to them), cut at offset-index entries by ``maxBytesPerPartition``,
  ``maxRecordsPerPartition`` and ``minPartitions``;
* **aborted transactions per piece** under ``read_committed``, by Kafka's fetch rule
  (``LocalLog.collectAbortedTransactions(fetchOffset, upperBoundOffset)``): those whose ABORT
  marker is at or after the piece's first offset and whose first offset is before its end. A
  piece is never handed a transaction whose marker it cannot meet, so a reader never carries a
  producer into the aborted set past the marker that would take it out again.

Nothing here decodes records; a piece is read by :func:`storage_core.read.piece_reader.read_piece`.
Every piece has an explicit end, so a read is a consistent snapshot of a log still being appended to.
"""

from __future__ import annotations

import dataclasses
import difflib
import logging
import math
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from contextlib import closing, contextmanager
from dataclasses import dataclass

from storage_core.errors import (
    InvalidOptionError,
    OffsetOutOfRangeError,
    PendingCommitError,
    RemoteSegmentMissingError,
    ReplicaMissingError,
)
from storage_core.files import has_log_files
from storage_core.limits import INT64_MAX
from storage_core.log.dir_state import LogDirState, LogDirStates
from storage_core.log.log import Log
from storage_core.log.lost import Evidence, data_loss_error, expects_data, gather_evidence, lost_data
from storage_core.log.manager import (
    PartitionDir,
    find_partitions,
    open_log_read_only,
    replica_problems,
    scan_log_dirs,
)
from storage_core.log.segment import LogSegment
from storage_core.log.tiered import (
    TieredMetadata,
    attach_history,
    load_remote_metadata,
    unread_remote_range,
)
from storage_core.log.topic_partition import TopicPartition
from storage_core.read.groups import offsets_of_group
from storage_core.read.options import EARLIEST, LATEST, OffsetSpec, ReadOptions
from storage_core.read.pieces import Piece, aborted_for, slices
from storage_core.workers import ordered_map, pool_size

__all__ = [
    "NO_PRUNING",
    "PartitionRange",
    "Piece",
    "Pruning",
    "ReadPlan",
    "check_listed",
    "choose_partitions",
    "committed_for",
    "offset_for",
    "open_tail",
    "pieces_of",
    "plan_read",
    "resolve",
    "select_partitions",
    "with_history",
]

log = logging.getLogger("klog")


@dataclass(frozen=True)
class PartitionRange:
    """One partition's resolved offsets ``[start, end)``."""

    topic_partition: TopicPartition
    path: str
    start: int
    end: int
    #: what opening the log found and Kafka would repair (a torn tail): reported, not an error
    notes: tuple[str, ...] = ()
    #: offsets ``(first, last)`` held twice, or by a segment out of its place (failOnDataLoss=false):
    #: no copy of them is read (:attr:`~storage_core.log.lost.LostData.unread`)
    unread: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True)
class Pruning:
    """Bounds taken from pushed-down filters (all optional, intersected with the options' ranges)."""

    topics: frozenset[str] | None = None
    partitions: frozenset[int] | None = None
    partition_min: int | None = None
    partition_max: int | None = None  # inclusive
    offset_min: int | None = None
    offset_end: int | None = None  # exclusive
    timestamp_min_ms: int | None = None  # coarse: records from the first with timestamp >= it

    def keeps(self, tp: TopicPartition) -> bool:
        if self.topics is not None and tp.topic not in self.topics:
            return False
        if self.partitions is not None and tp.partition not in self.partitions:
            return False
        if self.partition_min is not None and tp.partition < self.partition_min:
            return False
        return not (self.partition_max is not None and tp.partition > self.partition_max)


NO_PRUNING = Pruning()


@dataclass(frozen=True)
class ReadPlan:
    """What a read will do: each selected partition's range, and the pieces that read them."""

    ranges: tuple[PartitionRange, ...]
    pieces: tuple[Piece, ...]

    @property
    def nbytes(self) -> int:
        return sum(p.nbytes for p in self.pieces)


# --- selection ------------------------------------------------------------------------------------

def _with_segments(pd: PartitionDir, states: LogDirStates | None = None) -> bool:
    """A partition dir with segments, or one whose segments are gone while its checkpoints say it
    held data (a read reports that loss rather than leaving the partition out)."""
    return has_log_files(pd.path) or expects_data(pd, None if states is None else states.of(pd.log_dir))


def _spec_name(spec: OffsetSpec, starting: bool) -> str:
    if spec.kind == "timestamps":
        return "startingOffsetsByTimestamp" if starting else "endingOffsetsByTimestamp"
    return "startingOffsets" if starting else "endingOffsets"


def _listed_partitions(listed: Mapping[str, Mapping[int, int]]) -> list[TopicPartition]:
    return sorted(TopicPartition(t, p) for t, ps in listed.items() for p in ps)


def no_such_topics(missing: Iterable[str], names: Iterable[str], paths: Iterable[str]) -> InvalidOptionError:
    """The error for topics asked for that ``paths`` do not hold: each with the closest topic there
    (``orders`` for ``order``), else a few of the topics there."""
    have = sorted(set(names))
    said = []
    for t in missing:
        close = difflib.get_close_matches(t, have, n=1, cutoff=0.6)
        said.append(f"{t} (did you mean {close[0]}?)" if close else t)
    there = (", ".join(have[:10]) + (f" and {len(have) - 10} more" if len(have) > 10 else "")) or "none"
    return InvalidOptionError(f"no such topic in {', '.join(map(str, paths))}: {', '.join(said)}; topics there: {there}")


def choose_partitions(dirs: list[PartitionDir], paths: Iterable[str], *, topics: Iterable[str] | None = None,
                      topic_pattern: str | None = None,
                      assign: Mapping[str, Mapping[int, int]] | None = None,
                      assign_name: str = "option assign") -> list[PartitionDir] | None:
    """The partitions of ``dirs`` that ``topics`` (each must exist), ``topic_pattern`` (a whole-name
    match) or ``assign`` (each partition must exist; ``assign_name`` names it in the error) select;
    None when none of them is given."""
    if topics is not None:
        wanted = list(topics)
        names = {p.topic_partition.topic for p in dirs}
        missing = [t for t in wanted if t not in names]
        if missing:
            raise no_such_topics(missing, names, paths)
        return [p for p in dirs if p.topic_partition.topic in set(wanted)]
    if topic_pattern is not None:
        rx = re.compile(topic_pattern)
        return [p for p in dirs if rx.fullmatch(p.topic_partition.topic)]
    if assign is not None:
        _require_existing(dirs, assign, assign_name, paths)
        chosen = set(_listed_partitions(assign))
        return [p for p in dirs if p.topic_partition in chosen]
    return None


def select_partitions(opts: ReadOptions, *, streaming: bool = False,
                      states: LogDirStates | None = None, replicas_checked: bool = True,
                      absent: dict[TopicPartition, tuple[int, ...]] | None = None) -> list[PartitionDir]:
    """The partitions a read selects, sorted: ``topics`` (each must exist), ``topicPattern``,
    ``assign`` (each partition must exist), else the partitions a JSON ``startingOffsets``/
    ``endingOffsets`` lists (a stream subscribes to the JSON's topics: partitions created later
    are read too), else every partition. Only directories with segments count. A path with no
    partition dirs is an error (a stream may start on an empty log dir). ``states``: the query's
    log dir states (:mod:`storage_core.log.dir_state`), read once per dir; None: a new one.

    The log dirs of several brokers give each partition once, as its replica read
    (:mod:`storage_core.log.replicas`); with ``replicas_checked`` (every read), a selected partition
    whose in-sync replicas are all missing from the dirs, or that no dir holds though the KRaft
    metadata assigns it, fails the read (:func:`check_replicas`); ``absent`` (a dict) receives the
    selected partitions no dir holds, by the brokers that hold them (a describe reports them)."""
    if states is None:
        states = LogDirStates()
    view = scan_log_dirs(opts.log_dirs, required=True, allow_empty=streaming,
                         only=lambda tp: _selects(opts, tp, streaming))
    dirs = [p for p in view.partitions if (has_log_files(p.path) if streaming else _with_segments(p, states))]
    missing = {tp: b for tp, b in view.absent.items() if _selects(opts, tp, streaming)}
    if absent is not None:
        absent.update(missing)
    if replicas_checked:
        check_replicas(opts, [], missing)
    chosen = choose_partitions(dirs, opts.paths, topics=opts.topics, topic_pattern=opts.topic_pattern,
                               assign=opts.assign, assign_name=opts.setting("assign") or "option assign")
    if chosen is None:
        chosen = dirs
        for spec, starting in ((opts.starting, True), (opts.ending, False)):
            if spec.listed is not None:
                if streaming:
                    chosen = [p for p in dirs if p.topic_partition.topic in spec.listed]
                    break
                _require_existing(dirs, spec.listed, f"option {_spec_name(spec, starting)}", opts.paths)
                wanted = set(_listed_partitions(spec.listed))
                chosen = [p for p in dirs if p.topic_partition in wanted]
                break
    if replicas_checked:
        check_replicas(opts, chosen, {})
    return chosen


def _selects(opts: ReadOptions, tp: TopicPartition, streaming: bool) -> bool:
    """Whether the read's selection takes ``tp`` (a partition the dirs may not hold)."""
    if opts.topics is not None:
        return tp.topic in opts.topics
    if opts.topic_pattern is not None:
        return re.fullmatch(opts.topic_pattern, tp.topic) is not None
    if opts.assign is not None:
        return tp.partition in opts.assign.get(tp.topic, {})
    for spec in (opts.starting, opts.ending):
        if spec.listed is not None:
            return tp.topic in spec.listed if streaming else tp.partition in spec.listed.get(tp.topic, {})
    return True


def check_replicas(opts: ReadOptions, selected: Iterable[PartitionDir],
                   absent: Mapping[TopicPartition, tuple[int, ...]]) -> None:
    """A replicated partition read from the log dirs of some of its brokers must have an in-sync
    replica among them (:attr:`~storage_core.log.replicas.ReplicaSet.problem`), and a partition the
    KRaft metadata assigns to brokers whose dirs are not given (``absent``) cannot be read at all:
    a :class:`~storage_core.errors.ReplicaMissingError` naming the partitions and the brokers that
    hold them, or with failOnDataLoss=false a warning (the best replica present is read; an absent
    partition is left out)."""
    problems = replica_problems(selected, absent)
    if not problems:
        return
    if opts.fail_on_data_loss:
        hint = opts.setting("failOnDataLoss", "false")
        more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
        raise ReplicaMissingError("; ".join(problems[:5]) + more
                                  + (f"; set {hint} to read what the dirs hold" if hint else ""))
    for text in problems:
        log.warning("klog: %s (failOnDataLoss=false: reading what the dirs hold)", text)


def _require_existing(dirs: list[PartitionDir], listed: Mapping[str, Mapping[int, int]], what: str,
                      paths: Iterable[str]) -> None:
    have = {p.topic_partition for p in dirs}
    missing = [tp for tp in _listed_partitions(listed) if tp not in have]
    if missing:
        raise InvalidOptionError(f"{what} names partitions that do not exist: {', '.join(map(str, missing))} "
                                 f"({_what_exists(dirs, {tp.topic for tp in missing}, paths)})")


def _what_exists(dirs: list[PartitionDir], topics: set[str], paths: Iterable[str]) -> str:
    """``orders has partitions 0, 1`` for each of ``topics``, said of the log dirs ``paths``."""
    said = []
    for t in sorted(topics):
        ps = sorted(p.topic_partition.partition for p in dirs if p.topic_partition.topic == t)
        said.append(f"{t} has partitions {', '.join(map(str, ps))}" if ps else f"no topic {t}")
    return f"in {', '.join(paths)}: {'; '.join(said)}"


def check_listed(opts: ReadOptions, selected: Iterable[PartitionDir], *, streaming: bool = False) -> None:
    """A JSON ``startingOffsets``/``endingOffsets``/``...ByTimestamp`` must list exactly the partitions
    read (Spark's Kafka source asserts the same): a partition it names that does not exist or is not
    selected, or a selected partition it leaves out, is an error naming them. A stream checks only
    its start (partitions created later start at their log start)."""
    chosen = {pd.topic_partition for pd in selected}
    specs = [(opts.starting, True)] if streaming else [(opts.starting, True), (opts.ending, False)]
    for spec, starting in specs:
        if spec.listed is None:
            continue
        name = _spec_name(spec, starting)
        listed = _listed_partitions(spec.listed)
        extra = [tp for tp in listed if tp not in chosen]
        if extra:
            dirs = [p for p in find_partitions(opts.log_dirs) if _with_segments(p)]
            existing = {p.topic_partition for p in dirs}
            gone = [tp for tp in extra if tp not in existing]
            if gone:
                raise InvalidOptionError(f"option {name} names partitions that do not exist: "
                                         f"{', '.join(map(str, gone))} "
                                         f"({_what_exists(dirs, {tp.topic for tp in gone}, opts.paths)})")
            raise InvalidOptionError(f"option {name} names partitions the read does not select: "
                                     f"{', '.join(map(str, extra))}; {_selector(opts)}")
        left_out = [str(tp) for tp in sorted(chosen) if tp not in set(listed)]
        if left_out:
            raise InvalidOptionError(f"option {name} does not list {', '.join(left_out)}; list every partition read "
                                     "(-2 earliest, -1 latest)" if spec.kind == "offsets" else
                                     f"option {name} does not list {', '.join(left_out)}; list every partition read")


def _selector(opts: ReadOptions) -> str:
    if opts.topics is not None:
        return f"topics={','.join(opts.topics)}"
    if opts.topic_pattern is not None:
        return f"topicPattern={opts.topic_pattern}"
    if opts.assign is not None:
        return "assign selects " + ", ".join(map(str, _listed_partitions(opts.assign)))
    return "no topics, topicPattern or assign option"


# --- opening --------------------------------------------------------------------------------------

def open_tail(pd: PartitionDir, state: LogDirState | None = None) -> Log:
    """A partition opened to follow it: read-only, no recovery scan, the files trusted as they are
    (:func:`~storage_core.log.manager.open_log_read_only` with ``follow``).

    A stream only needs the segments, their indexes and the end of the active segment (from its
    last index entry: a few KiB); every batch's CRC is checked when a micro-batch reads it, so
    damage fails that micro-batch (or is skipped and logged with failOnDataLoss=false) with its
    file and position. ``state``: the log dir's state of the query
    (:mod:`storage_core.log.dir_state`); None reads the dir's files for this partition alone.
    """
    return open_log_read_only(pd, state, follow=True)


def with_history(opts: ReadOptions, pd: PartitionDir, lg: Log, tiered: TieredMetadata) -> None:
    """A tiered partition's remote segments put before its local ones when the read names the
    remote storage (``remoteStorage``); without it, a warning naming the offsets left unread
    (the read starts at the local log, as a consumer of a broker without its remote storage would)."""
    tp = pd.topic_partition
    try:
        if opts.remote is not None:
            attach_history(lg, tp, tiered, opts.remote, on_missing=None if opts.fail_on_data_loss else _skip_missing)
            return
        unread = unread_remote_range(lg, tp, tiered)
    except BaseException:
        lg.close()
        raise
    if unread is not None:
        log.warning("%s is tiered: offsets %d-%d are in remote storage (__remote_log_metadata) and not read; give "
                     "%s to read them", tp, unread[0], unread[1] - 1, opts.setting("remoteStorage") or "remoteStorage")


def _skip_missing(exc: RemoteSegmentMissingError) -> None:
    """failOnDataLoss=false: a remote segment the storage lacks is skipped, and said so."""
    lost = ", ".join(f"{a}-{b}" for a, b in exc.offsets)
    log.warning("failOnDataLoss=false: offsets %s skipped (lost): %s", lost, exc)


@contextmanager
def _opened(logs: list[Log]) -> Iterator[list[Log]]:
    try:
        yield logs
    finally:
        for lg in logs:
            lg.close()


# --- range resolution -----------------------------------------------------------------------------

def latest_offset(lg: Log, read_committed: bool) -> int:
    """Where ``latest`` is: the last stable offset under read_committed, else the high watermark
    (the log end offset of a partition of one replica), as a consumer's ``ListOffsets`` answers."""
    return lg.last_stable_offset if read_committed else lg.high_watermark


def committed_for(spec: OffsetSpec, paths: Iterable[str | os.PathLike[str]], *, starting: bool) -> Mapping[TopicPartition, int] | None:
    """The committed offsets of the group a ``...FromGroup`` spec names (read once per read, from
    the ``__consumer_offsets`` of the same log dirs), or None for other specs. An unknown group is
    an :class:`InvalidOptionError` listing the groups found."""
    if spec.kind != "group":
        return None
    assert spec.group is not None
    option = "startingOffsetsFromGroup" if starting else "endingOffsetsFromGroup"
    return offsets_of_group(list(paths), spec.group, option)


def offset_for(spec: OffsetSpec, tp: TopicPartition, lg: Log, latest: int, *, starting: bool,
               strategy: str, committed: Mapping[TopicPartition, int] | None = None,
               spelling: ReadOptions | None = None) -> int:
    """The offset ``spec`` names for ``tp`` (not yet checked against the log's bounds). A group
    spec takes ``committed`` (:func:`committed_for`); a partition the group never committed
    follows the spec's fallback (``startingOffsets``: earliest, or latest in a stream;
    ``endingOffsets``: latest). ``spelling``: the read whose face names options in errors."""
    if spec.kind == "group":
        assert committed is not None and spec.fallback is not None
        if tp in committed:
            return committed[tp]
        spec = spec.fallback
    if spec.kind == "earliest":
        return lg.log_start_offset
    if spec.kind == "latest":
        return latest
    if spec.kind == "offset":
        assert spec.offset is not None
        return spec.offset
    if spec.kind == "offsets":
        v = _listed(spec, tp, starting)
        return lg.log_start_offset if v == EARLIEST else latest if v == LATEST else v
    ts = spec.timestamp if spec.kind == "timestamp" else _listed(spec, tp, starting)
    assert ts is not None
    found = lg.offset_for_timestamp(ts)
    if found is not None:
        return min(max(found.offset, lg.log_start_offset), latest)
    if starting and strategy == "error":
        # the face's own spelling: Spark's option, or the CLI's --if-past-end
        now = spelling.setting("startingOffsetsByTimestampStrategy", "error") if spelling else None
        then = spelling.setting("startingOffsetsByTimestampStrategy", "latest") if spelling else None
        raise InvalidOptionError(
            f"no record at or after timestamp {ts} in {tp} ({now or 'startingOffsetsByTimestampStrategy=error'}); "
            f"use {then or 'startingOffsetsByTimestampStrategy=latest'} to start at the end instead")
    return latest


def _listed(spec: OffsetSpec, tp: TopicPartition, starting: bool) -> int:
    assert spec.offsets is not None
    parts = spec.offsets.get(tp.topic)
    if parts is None or tp.partition not in parts:
        raise InvalidOptionError(f"option {_spec_name(spec, starting)} does not list {tp}; list every partition read "
                                 "(-2 earliest, -1 latest)")
    return parts[tp.partition]


def check_order(tp: TopicPartition, start: int, end: int) -> None:
    """A range whose start, as its options name it (an offset, a timestamp's offset, a group's, -2 and
    -1 bound to the log's earliest and latest), lies after its end is refused, whatever
    failOnDataLoss says: Spark's Kafka source asserts it before it reads the partition
    (``KafkaSourceRDD.compute``: "Beginning offset ... is after the ending offset ... You either
    provided an invalid fromOffset, or the Kafka topic has been damaged"), so a query whose start
    resolved from ``startingTimestamp`` falls past an ``endingOffsets`` fails, not reads the other
    partitions alone. Checked before either end is clamped to the log's bounds."""
    if start > end:
        raise InvalidOptionError(f"{tp}: beginning offset {start} is after the ending offset {end} (as Spark's Kafka "
                                 "source refuses it: an invalid starting offset, or a damaged topic); expected a "
                                 "starting offset at or before the ending offset of every partition read")


def resolve(opts: ReadOptions, pd: PartitionDir, lg: Log, *,
            committed: tuple[Mapping[TopicPartition, int] | None, Mapping[TopicPartition, int] | None] = (None, None),
            ) -> PartitionRange:
    """``[start, end)`` of one partition for a bounded read, by the Kafka source's rules: a start
    below the log start offset or past the end is data loss (an error, or with failOnDataLoss=false
    moved to the nearest offset that exists, with a warning); so is an end past the end (with
    failOnDataLoss=false, or ``opts.clamp_ending``, it reads to the end).
    A group's committed offset follows the same rules. ``committed``: the starting and ending
    groups' offsets (:func:`committed_for`)."""
    tp = pd.topic_partition
    latest = latest_offset(lg, opts.read_committed)
    strategy = opts.starting_timestamp_strategy
    start = offset_for(opts.starting, tp, lg, latest, starting=True, strategy=strategy, committed=committed[0],
                       spelling=opts)
    end = offset_for(opts.ending, tp, lg, latest, starting=False, strategy=strategy, committed=committed[1],
                     spelling=opts)
    named = start  # as the options name it, before it is moved into the log's bounds
    if start < lg.log_start_offset:
        if opts.fail_on_data_loss:
            hint = opts.setting("failOnDataLoss", "false")
            raise OffsetOutOfRangeError(
                f"{tp}: starting offset {start} is below the log start offset {lg.log_start_offset} (offsets "
                f"{start}..{lg.log_start_offset - 1} were deleted)"
                + (f"; set {hint} to start at {lg.log_start_offset}" if hint else
                   f"; expected an offset in [{lg.log_start_offset}, {latest}]"))
        log.warning("%s: offsets %d..%d are gone; reading from %d", tp, start, lg.log_start_offset - 1,
                    lg.log_start_offset)
        start = lg.log_start_offset
    if start > latest:
        if opts.fail_on_data_loss:
            raise OffsetOutOfRangeError(f"{tp}: starting offset {start} is past the end of the log ({latest}"
                                        f"{', its last stable offset' if opts.read_committed else ''}); expected "
                                        f"an offset in [{lg.log_start_offset}, {latest}]")
        start = latest
    # (an end below the log start: deleted or lost offsets, the loss rules' to say; a consumer group's
    # committed offsets, klog's ...FromGroup options, are no range the user named: outside the log
    # they follow failOnDataLoss, as documented)
    if end >= lg.log_start_offset and opts.starting.kind != "group" and opts.ending.kind != "group":
        check_order(tp, named, end)  # (a start past the end with failOnDataLoss=true was refused above, as such)
    if end > latest:
        # Spark's Kafka source waits for records that are not there and fails (failOnDataLoss=true)
        # or reads what there is
        if opts.fail_on_data_loss and not opts.clamp_ending:
            hint = opts.setting("failOnDataLoss", "false")
            raise OffsetOutOfRangeError(f"{tp}: ending offset {end} is past the end of the log ({latest}"
                                        f"{', its last stable offset' if opts.read_committed else ''}); expected "
                                        f"an offset in [{lg.log_start_offset}, {latest}] or -1 (latest)"
                                        + (f"; set {hint} to read up to {latest}" if hint else ""))
        log.warning("%s: ending offset %d is past the end of the log; reading up to %d", tp, end, latest)
        end = latest
    return PartitionRange(tp, str(pd.path), start, max(start, end), tuple(lg.recovery_notes))


def _prune(rng: PartitionRange, lg: Log, pruning: Pruning) -> PartitionRange:
    start, end = rng.start, rng.end
    if pruning.offset_min is not None:
        start = max(start, pruning.offset_min)
    if pruning.offset_end is not None:
        end = min(end, pruning.offset_end)
    if pruning.timestamp_min_ms is not None and start < end:
        found = lg.offset_for_timestamp(pruning.timestamp_min_ms)
        start = max(start, found.offset if found is not None else end)
    return dataclasses.replace(rng, start=min(start, end), end=end)


def loss_window(lg: Log, start: int, end: int, *, to_the_end: bool = True) -> tuple[int, int]:
    """The offsets whose loss a read of ``[start, end)`` of ``lg`` answers for: its own, and all
    below it when it starts at the log start offset (data lost before the first segment is what
    such a read would have returned), and all above it when it reaches the log end offset and
    ``to_the_end`` (what the checkpoints say the log held past its segments). A read of the last
    100 records of 10,000 segments then checks the segments it reads, not every one."""
    lo = start if start > lg.log_start_offset else 0
    hi = INT64_MAX if to_the_end and end >= lg.log_end_offset else end
    return lo, hi


def check_lost_data(opts: ReadOptions, pd: PartitionDir, lg: Log | None, evidence: Evidence, *,
                    within: tuple[int, int] | None = None) -> tuple[tuple[int, int], ...]:
    """What the dir's own evidence says should be there and the log cannot give
    (:func:`~storage_core.log.lost.lost_data`): a :class:`~storage_core.errors.DataLossError` naming
    the file, offsets and bytes, or with failOnDataLoss=false a warning naming the lost offsets (the
    intact records are read). Never a silently shorter read; a torn tail of the last segment beyond
    the recovery point is not a loss. ``within=(first, end)``: only losses of offsets in
    ``first..end-1`` count (a stream's micro-batch; each batch reports those of its own range).
    Returns the offsets no copy of which is to be read (:attr:`PartitionRange.unread`)."""
    lost = lost_data(pd, lg, evidence, within=within)
    if within is not None:
        lost = [x for x in lost if x.last >= within[0] and x.first < within[1]]
    if not lost:
        return ()
    if opts.fail_on_data_loss:
        raise data_loss_error(lost)
    for x in lost:
        log.warning("klog: %s (failOnDataLoss=false: the intact records are read)", x)
    return tuple((x.first, x.last) for x in lost if x.unread)


def _unread_skipped(piece: Piece, base: int, unread: tuple[tuple[int, int], ...]) -> list[Piece]:
    """``piece`` (of the segment based at ``base``) without the offsets no copy of which is read
    (:attr:`PartitionRange.unread`): its offset bounds narrowed, or the piece split in two around
    them, or dropped when nothing is left."""
    pieces = [piece]
    for first, last in unread:
        kept: list[Piece] = []
        for p in pieces:
            lo, hi = max(p.min_offset, base), p.end_offset
            if last < lo or first >= hi:
                kept.append(p)
                continue
            if first > lo:
                kept.append(dataclasses.replace(p, end_offset=first))
            if last + 1 < hi:
                kept.append(dataclasses.replace(p, min_offset=last + 1))
        pieces = kept
    return pieces


# --- pieces ---------------------------------------------------------------------------------------

def _cut(seg: LogSegment, piece: Piece, parts: int) -> list[Piece]:
    """Cut a piece into about ``parts`` pieces of equal bytes at offset-index entries."""
    if parts <= 1:
        return [piece]
    entries = [e for e in seg.offset_index.all_entries() if piece.start_position < e.position < piece.end_position]
    if not entries:
        return [piece]
    step = piece.nbytes / parts
    cuts: list[tuple[int, int]] = []  # (position, offset at about that position)
    target = piece.start_position + step
    for e in entries:
        if e.position >= target and (not cuts or e.position > cuts[-1][0]):
            cuts.append((e.position, e.offset))
            target = e.position + step
    bounds: list[tuple[int, int | None]] = [(piece.start_position, max(piece.min_offset, seg.base_offset))] + cuts + [(piece.end_position, None)]
    out = []
    for (p0, o0), (p1, o1) in zip(bounds, bounds[1:], strict=False):
        assert o0 is not None  # only the last bound has no offset
        est = (o1 if o1 is not None else min(piece.end_offset, o0 + piece.est_records)) - o0
        out.append(dataclasses.replace(piece, start_position=p0, end_position=p1, est_records=max(0, est),
                                       open_tail=piece.open_tail and p1 == piece.end_position))
    return out


def pieces_of(parts: list[tuple[Log, PartitionRange]], opts: ReadOptions) -> list[Piece]:
    """The pieces reading ``parts`` (their logs still open): slices, cut by ``maxBytesPerPartition``,
    ``maxRecordsPerPartition`` and ``minPartitions`` at offset-index entries, each with its own
    aborted transactions under read_committed."""
    segment_of: dict[str, LogSegment] = {}  # by .log path: a scan of lg.segments per piece was n² in segments
    for lg, _rng in parts:
        segment_of.update((str(s.log_path), s) for s in lg.segments)
    raw = []
    for lg, rng in parts:
        for p in slices(lg, rng.topic_partition, rng.start, rng.end):
            kept = _unread_skipped(p, segment_of[p.log_path].base_offset, rng.unread) if rng.unread else [p]
            raw += [(lg, q) for q in kept]
    total_records = sum(p.est_records for _, p in raw) or 1
    out: list[Piece] = []
    for lg, p in raw:
        n = math.ceil(p.nbytes / opts.max_bytes_per_partition)
        if opts.max_records_per_partition:
            n = max(n, math.ceil(p.est_records / opts.max_records_per_partition))
        if opts.min_partitions and opts.min_partitions > len(raw):
            n = max(n, round(p.est_records / total_records * opts.min_partitions))
        seg = segment_of[p.log_path]
        for q in _cut(seg, p, n):
            out.append(dataclasses.replace(q, aborted=aborted_for(lg, q)) if opts.read_committed else q)
    return out


def plan_read(opts: ReadOptions, pruning: Pruning = NO_PRUNING) -> ReadPlan:
    """Plan a bounded read: select, check the JSON specs, resolve each partition's range (raising
    before anything is read when an option does not fit the log), and cut it into pieces. Each
    log dir's checkpoints, marker and journals are read once (:class:`LogDirStates`), not once
    per partition."""
    states = LogDirStates()
    selected = select_partitions(opts, states=states)
    check_listed(opts, selected)
    committed = (committed_for(opts.starting, opts.log_dirs, starting=True),
                 committed_for(opts.ending, opts.log_dirs, starting=False))
    ranges: list[PartitionRange] = []
    parts: list[tuple[Log, PartitionRange]] = []
    wanted = [(pd, states.of(pd.log_dir)) for pd in selected if pruning.keeps(pd.topic_partition)]
    tiered = load_remote_metadata(opts.log_dirs, opts.storage)  # empty without __remote_log_metadata

    def open_one(item: tuple[PartitionDir, LogDirState]) -> tuple[Evidence, Log | None, bool]:
        """The partition's evidence, its log (None: none to read) and whether it has .log files."""
        pd, state = item
        # the evidence just before the open (a live broker only adds data after it): read long
        # before, it would call the index of a segment retention deleted since lost data
        evidence = gather_evidence(pd, state)
        if not has_log_files(pd.path):  # its .log files are gone, its checkpoints say it held data
            return evidence, None, False
        try:
            lg = open_log_read_only(pd, state)
        except PendingCommitError:
            return evidence, None, True  # a new partition whose first commit is still being applied: empty for now
        if tiered.partitions:
            with_history(opts, pd, lg, tiered)
        if opts.read_committed:
            lg.replay_transactions()
        return evidence, lg, True

    # opening a crashed broker's partition validates the batches after its recovery point (a
    # read-only recovery) and, read_committed, replays their transactions: the partitions are
    # opened on threads, since the reads and checksums let go of the GIL (LogDirState is shared
    # under its lock)
    opened = ordered_map(open_one, wanted, pool_size(opts.max_threads, items=len(wanted)))
    with _opened([]) as logs, closing(opened):
        for (pd, _state), (evidence, lg, has_logs) in zip(wanted, opened, strict=True):
            if not has_logs:
                check_lost_data(opts, pd, None, evidence)
                continue
            if lg is None:
                continue
            logs.append(lg)
            try:
                rng = _prune(resolve(opts, pd, lg, committed=committed), lg, pruning)
            except OffsetOutOfRangeError:
                check_lost_data(opts, pd, lg, evidence)  # offsets lost, not deleted: say so instead
                raise
            unread = check_lost_data(opts, pd, lg, evidence, within=loss_window(lg, rng.start, rng.end))
            if unread:
                rng = dataclasses.replace(rng, unread=unread)
            ranges.append(rng)
            parts.append((lg, rng))
        pieces = pieces_of(parts, opts)
    return ReadPlan(tuple(ranges), tuple(pieces))

