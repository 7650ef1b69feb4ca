"""Structured Streaming: ``spark.readStream.format("klog")`` tails log dirs, ``writeStream`` appends.

**Source** (:class:`KlogStreamReader`). Offsets are the Kafka source's JSON,
``{"topic": {"0": next_offset}}``, so a checkpoint reads like one of Spark's Kafka source. Each
trigger lists the partitions (new topics and partitions are picked up, from their log start)
and asks each for its end (the last stable offset under ``read_committed``); admission control
caps that end: ``maxOffsetsPerTrigger`` is shared across partitions in proportion to their
backlog (a partition with any backlog gets at least one record, as in Spark's Kafka source),
``minOffsetsPerTrigger`` holds a trigger back until enough records wait or ``maxTriggerDelay``
passes. ``Trigger.AvailableNow`` fixes the ends at the start of the query and drains to them in
bounded batches. A micro-batch ``[start, end)`` is planned from its offsets alone, into the same
input partitions as a batch read (byte slices of segments), so a replay after a failure reads
the same records. Offsets deleted by retention before they were read are data loss: with
``failOnDataLoss=true`` the batch fails naming them; with false they are skipped and logged.

The driver-side reader lives in one long-lived Python process per query run; executors read
with another instance, so :meth:`KlogStreamReader.read` uses only its input partition.

**Sink** (:class:`KlogStreamWriter`). Each micro-batch runs the batch writer's protocol
(:mod:`storage_core.log.staged`): tasks stage segments, ``commit(messages, batchId)`` makes them
visible atomically. Spark replays a failed micro-batch with the same ``batchId``; the commit
records the last batch id per query in the log dir (``.klog-sink-<query id>.json``, in the
same journaled step as the data), so a replayed batch is not written twice. The query id is
the one Spark keeps in ``<checkpointLocation>/metadata``: a new checkpoint is a new query.
Spark builds a new writer for every commit, so nothing is kept in the writer instance.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import math
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamArrowWriter, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)

from storage_core.errors import InvalidOptionError, OffsetOutOfRangeError, PendingCommitError
from storage_core.files import STAGING_PREFIX, is_log_file
from storage_core.log.dir_state import LogDirState, LogDirStates
from storage_core.log.journal import SinkBatch
from storage_core.log.log import Log
from storage_core.log.lost import gather_evidence
from storage_core.log.manager import PartitionDir, find_partitions
from storage_core.log.staged import collect_staging, commit_job
from storage_core.log.tiered import TieredMetadata, load_remote_metadata
from storage_core.log.topic_partition import TopicPartition
from storage_core.read.kafka_compat import warn_ignored
from storage_core.read.planner import (
    PartitionRange,
    check_listed,
    check_lost_data,
    committed_for,
    latest_offset,
    loss_window,
    offset_for,
    open_tail,
    pieces_of,
    select_partitions,
    with_history,
)
from storage_core.record.columnar import kafka_schema

from .errors import spark_entry
from .options import ReadOptions, StreamOptions
from .planning import KlogInputPartition, pack
from .writer import KlogCommitMessage, KlogWriter, WriteOptions

log = logging.getLogger("klog")

Offsets = dict[TopicPartition, int]


def offsets_to_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """Spark's Kafka source offset JSON: ``{"topic": {"0": 42}}``, sorted."""
    out: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        out.setdefault(tp.topic, {})[str(tp.partition)] = int(offsets[tp])
    return out


def offsets_from_json(obj: Mapping[str, Mapping[str, int]] | str) -> Offsets:
    if isinstance(obj, str):
        raw = obj
        try:
            obj = json.loads(raw)
        except (RecursionError, json.JSONDecodeError):
            obj = raw  # not JSON: refused below
        if not isinstance(obj, dict):
            raise InvalidOptionError(f"not a klog/Kafka stream offset: {raw[:200]!r}; expected "
                                     "{\"topic\": {\"0\": 42}}") from None
    assert isinstance(obj, Mapping)
    try:
        return {TopicPartition(t, int(p)): int(o) for t, parts in obj.items() for p, o in parts.items()}
    except (AttributeError, TypeError, ValueError):
        raise InvalidOptionError(f"not a klog/Kafka stream offset: {obj!r}; expected {{\"topic\": {{\"0\": 42}}}}") \
            from None


@dataclass(frozen=True)
class PartitionState:
    """What one trigger sees of a partition."""

    dir: PartitionDir
    log_start: int
    end: int  # log end offset, or last stable offset under read_committed


def _with_start(opts: StreamOptions) -> ReadOptions:
    """The read options with the stream's start, which selection and range resolution look at."""
    return dataclasses.replace(opts.read, starting=opts.starting)


#: What a partition's files were when a trigger last opened it: its file names, the identity
#: (inode, size, mtime) of each ``.log``, its checkpointed log start and the offset an unfinished
#: commit hides it from. Equal at the next trigger, the files say what they said then.
TailKey = tuple[tuple[str, ...], tuple[tuple[int, int, int], ...], int | None, int | None]


def tail_key(pd: PartitionDir, state: LogDirState) -> TailKey | None:
    """The :data:`TailKey` of ``pd`` now (None if a segment vanished while it was looked at).
    Appends grow the active ``.log``; rolls, retention and a journal's renames change the names; a
    compaction's replacement changes a ``.log``'s inode; the log start and the pending commits
    come from ``state`` (asked after the listing, as the loader asks)."""
    children = sorted(pd.path.iterdir(), key=lambda p: p.name)
    logs = []
    for child in children:
        if is_log_file(child.name):
            try:
                st = child.stat()
            except FileNotFoundError:
                return None
            logs.append((st.st_ino, st.st_size, st.st_mtime_ns))
    return (tuple(c.name for c in children), tuple(logs), state.log_starts.get(pd.topic_partition),
            state.pending_commit_from(pd.path.name))


TailCache = dict[TopicPartition, tuple[TailKey, PartitionState]]


def _tiered(opts: StreamOptions) -> TieredMetadata | None:
    """The log dirs' remote log metadata, read again at each use, when the stream names a remote
    storage (``remoteStorage``); None otherwise."""
    return load_remote_metadata(opts.read.log_dirs, opts.read.storage) if opts.read.remote is not None else None


def _open(pd: PartitionDir, state: LogDirState, opts: StreamOptions, tiered: TieredMetadata | None) -> Log:
    """:func:`open_tail`, with a tiered partition's remote segments before the local ones when the
    stream names its remote storage (the planner's :func:`with_history`)."""
    lg = open_tail(pd, state)
    if tiered is not None and tiered.partitions:
        with_history(opts.read, pd, lg, tiered)
    return lg


def scan(opts: StreamOptions, states: LogDirStates | None = None,
         cache: TailCache | None = None) -> dict[TopicPartition, PartitionState]:
    """Every selected partition that has visible data now (a first commit still in flight is not).
    Each log dir's checkpoints and journals are read once (``states``, new if None), not once per
    partition. With ``cache`` (a stream reader's, kept across its triggers), a partition whose
    :func:`tail_key` is what it was at the last trigger is not opened again: an idle trigger costs
    a listing and a stat per segment file, not an open."""
    if states is None:
        states = LogDirStates()
    out: dict[TopicPartition, PartitionState] = {}
    seen: TailCache = {}
    tiered = _tiered(opts)
    for pd in select_partitions(_with_start(opts), streaming=True, states=states):
        tp = pd.topic_partition
        state = states.of(pd.log_dir)
        key = tail_key(pd, state) if cache is not None else None
        if cache is not None and key is not None and tp in cache and cache[tp][0] == key \
                and cache[tp][1].dir == pd:
            seen[tp] = cache[tp]
            out[tp] = cache[tp][1]
            continue
        try:
            lg = _open(pd, state, opts, tiered)
        except PendingCommitError:
            continue
        try:
            out[tp] = PartitionState(pd, lg.log_start_offset, latest_offset(lg, opts.read.read_committed))
        finally:
            lg.close()
        if key is not None:
            seen[tp] = (key, out[tp])
    if cache is not None:
        cache.clear()  # partitions gone, or not visible now, are forgotten
        cache.update(seen)
    return out


def rate_limit(limit: int, begin: Offsets, until: Offsets) -> Offsets:
    """Spark's Kafka source ``rateLimit``: ``limit`` records shared by backlog; a partition with a
    backlog below one share still gets one record (none is starved)."""
    sizes = {tp: end - begin[tp] for tp, end in until.items() if end - begin[tp] > 0}
    total = float(sum(sizes.values()))
    if total < 1:
        return dict(until)
    out = {}
    for tp, end in until.items():
        if tp not in sizes:
            out[tp] = end
            continue
        prorate = limit * (sizes[tp] / total)
        step = int(-(-prorate // 1)) if prorate < 1 else int(prorate // 1)
        out[tp] = min(end, begin[tp] + step)
    return out


def _log_latest_start(states: Mapping[TopicPartition, PartitionState]) -> None:
    """One line saying where a ``startingOffsets=latest`` stream (Spark's default) starts: over a
    static copy it reads nothing, which must not happen without a word."""
    before = sum(max(0, st.end - st.log_start) for st in states.values())
    if before:
        log.warning("klog stream: startingOffsets=latest (the default): starting at the end of %d partition(s), after "
                    "the %d records already there, which this query will not read; set startingOffsets=earliest to "
                    "read them", len(states), before)
    else:
        log.info("klog stream: startingOffsets=latest (the default): starting at the end of %d partition(s), which "
                 "hold no records yet", len(states))


class KlogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Driver side: offsets and planning. Executors only call :meth:`read`."""

    def __init__(self, opts: StreamOptions) -> None:
        import faulthandler

        if not faulthandler.is_enabled():  # a hard crash of the runner shows its Python stack in the driver log
            faulthandler.enable()
        from .reader import decoding_for

        self.opts = opts
        self.decoding = decoding_for(_with_start(opts), streaming=True)
        self._target: Offsets | None = None  # Trigger.AvailableNow: the ends at query start
        self._latest: Offsets | None = None  # for reportLatestOffset
        self._noted_latest = False  # the startingOffsets=latest notice: once per stream, however often Spark asks
        # minOffsetsPerTrigger: when the last trigger was let through (Spark's lastTriggerMillis,
        # which starts at 0: the first trigger never waits)
        self._last_trigger = -math.inf
        self._warned = False  # the driver's reader warns of ignored options at its first trigger
        self._tails: TailCache = {}  # what each partition's files were at the last trigger (scan)

    # -- offsets
    @spark_entry
    def initialOffset(self) -> dict[str, dict[str, int]]:
        o = self.opts
        dir_states = LogDirStates()
        states = scan(o, dir_states, self._tails)
        check_listed(_with_start(o), [st.dir for st in states.values()], streaming=True)
        committed = committed_for(o.starting, o.read.log_dirs, starting=True)
        tiered = _tiered(o)
        out: Offsets = {}
        for tp, st in states.items():
            if o.starting.kind == "earliest":
                out[tp] = st.log_start
            elif o.starting.kind == "latest":
                out[tp] = st.end
            else:
                lg = _open(st.dir, dir_states.of(st.dir.log_dir), o, tiered)
                try:
                    out[tp] = offset_for(o.starting, tp, lg, st.end, starting=True,
                                         strategy=o.read.starting_timestamp_strategy, committed=committed)
                finally:
                    lg.close()
                if o.starting.kind in ("offsets", "group") and out[tp] < st.log_start:
                    what = "startingOffsets" if o.starting.kind == "offsets" else "startingOffsetsFromGroup"
                    out[tp] = self._lost(tp, out[tp], st.log_start, what)
                if o.starting.kind == "group" and out[tp] > st.end:
                    msg = (f"{tp}: startingOffsetsFromGroup={o.starting.group!r} committed offset {out[tp]} is past "
                           f"the end of the log ({st.end})")
                    if o.read.fail_on_data_loss:
                        raise OffsetOutOfRangeError(msg + f"; set failOnDataLoss=false to start at {st.end}")
                    log.warning("%s; starting at %d (failOnDataLoss=false)", msg, st.end)
                    out[tp] = st.end
        if o.starting.kind == "latest" and not self._noted_latest:
            _log_latest_start(states)
            self._noted_latest = True
        return offsets_to_json(out)

    @spark_entry
    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        if self.opts.min_offsets_per_trigger is not None:
            return ReadMinRows(self.opts.min_offsets_per_trigger)
        return ReadAllAvailable()

    @spark_entry
    def prepareForTriggerAvailableNow(self) -> None:
        self._target = {tp: st.end for tp, st in scan(self.opts, cache=self._tails).items()}

    @spark_entry
    def latestOffset(self, start: dict[str, dict[str, int]], limit: ReadLimit) -> dict[str, dict[str, int]]:
        if not self._warned:  # executors' readers never get here: one warning per query
            warn_ignored(self.opts.read.ignored, "stream")
            self._warned = True
        begin = offsets_from_json(start)
        states = scan(self.opts, cache=self._tails)
        until: Offsets = dict(begin)  # partitions that vanished keep their offsets
        for tp, st in states.items():
            if self._target is not None and tp not in self._target:
                continue  # AvailableNow: only what existed when the query started
            if tp not in begin:
                begin[tp] = st.log_start  # a new partition: read it from its start
            elif begin[tp] < st.log_start and begin[tp] < st.end:
                # deleted before it was read: fail now, naming all of it, or admit from the log start
                # (partitions() skips the gap, and logs it again if the batch is replayed)
                begin[tp] = self._lost(tp, begin[tp], st.log_start, "the next micro-batch")
            end = st.end if self._target is None else min(st.end, self._target[tp])
            if end < begin[tp]:
                if st.end < begin[tp] and self._target is None:
                    self._report_truncation(tp, begin[tp], st.end)
                end = begin[tp]
            until[tp] = end
        self._latest = {tp: max(until[tp], states[tp].end if tp in states else 0) for tp in until}
        backlog = sum(until[tp] - begin[tp] for tp in until)
        min_rows = self.opts.min_offsets_per_trigger
        if min_rows is not None and self._target is None and not isinstance(limit, ReadAllAvailable):
            if self._delay_batch(min_rows, backlog):
                return start  # not enough yet: no batch this trigger
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        if max_rows is not None:
            until = rate_limit(max_rows, begin, until)
        return offsets_to_json(until)

    def _delay_batch(self, min_rows: int, backlog: int) -> bool:
        """Spark's Kafka source ``delayBatch``: a trigger goes through once ``maxTriggerDelay`` has
        passed since the last one that went through (whatever its backlog, none included), or when
        the backlog reaches ``minOffsetsPerTrigger``; otherwise it waits."""
        now = time.monotonic()
        if (now - self._last_trigger) * 1000 >= self.opts.max_trigger_delay_ms or backlog >= min_rows:
            self._last_trigger = now
            return False
        return True

    @spark_entry
    def reportLatestOffset(self) -> dict[str, dict[str, int]] | None:
        return offsets_to_json(self._latest) if self._latest is not None else None

    def _report_truncation(self, tp: TopicPartition, offset: int, end: int) -> None:
        msg = (f"klog stream: {tp} now ends at offset {end}, before offset {offset} the query had reached (the "
               "partition was truncated or re-created)")
        if self.opts.read.fail_on_data_loss:
            raise OffsetOutOfRangeError(msg + "; set failOnDataLoss=false to go on from there")
        log.warning("%s; waiting for it to grow past %d (failOnDataLoss=false)", msg, offset)

    def _lost(self, tp: TopicPartition, first: int, log_start: int, what: str) -> int:
        msg = (f"klog stream: offsets {first}..{log_start - 1} of {tp} were deleted (by retention) before the query "
               f"read them; {what} needs them, and the log now starts at {log_start}")
        if self.opts.read.fail_on_data_loss:
            raise OffsetOutOfRangeError(msg + ". Set failOnDataLoss=false to skip them and go on")
        log.warning("%s; skipping %d records (failOnDataLoss=false)", msg, log_start - first)
        return log_start

    # -- planning
    @spark_entry
    def partitions(self, start: dict[str, dict[str, int]], end: dict[str, dict[str, int]]) -> Sequence[InputPartition]:
        begin = offsets_from_json(start)
        until = offsets_from_json(end)
        wanted = {tp for tp, e in until.items() if e > begin.get(tp, -1)}
        if not wanted:
            return []
        dirs = {pd.topic_partition: pd for pd in find_partitions(self.opts.read.log_dirs, only=lambda tp: tp in wanted)}
        states = LogDirStates()  # each dir's checkpoints and journals read once for the batch
        tiered = _tiered(self.opts)
        parts: list[tuple[Log, PartitionRange]] = []
        logs = []
        try:
            for tp in sorted(wanted):
                pd = dirs.get(tp)
                first = begin.get(tp)
                if pd is None:
                    self._lost(tp, first or 0, until[tp], "this micro-batch")
                    continue
                state = states.of(pd.log_dir)
                evidence = gather_evidence(pd, state)  # before the open: a live writer only adds data after it
                try:
                    lg = _open(pd, state, self.opts, tiered)
                except PendingCommitError:
                    continue
                logs.append(lg)
                if first is None:
                    first = lg.log_start_offset  # discovered in this batch
                elif first < lg.log_start_offset:
                    first = min(self._lost(tp, first, lg.log_start_offset, "this micro-batch"), until[tp])
                last = min(until[tp], lg.high_watermark)
                if last < until[tp]:
                    self._lost(tp, max(first, last), until[tp], "this micro-batch")
                if first < last:
                    # what the dir's evidence says this range held and cannot be read: the batch reads' rule
                    # (a range from the log start also answers for losses below it, as a batch read does)
                    unread = check_lost_data(self.opts.read, pd, lg, evidence,
                                             within=loss_window(lg, first, last, to_the_end=False))
                    parts.append((lg, PartitionRange(tp, str(pd.path), first, last, unread=unread)))
            pieces = pieces_of(parts, self.opts.read)
        finally:
            for lg in logs:
                lg.close()
        return pack(pieces, self.opts.read)

    @spark_entry
    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        from .reader import read_partition
        from .worker_gc import task_started

        task_started()
        o = self.opts.read
        schema = kafka_schema(o.include_headers, o.include_metadata)
        return read_partition(partition if isinstance(partition, KlogInputPartition) else None, schema,
                              include_headers=o.include_headers, include_metadata=o.include_metadata,
                              fail_on_data_loss=o.fail_on_data_loss, decoding=self.decoding)

    @spark_entry
    def commit(self, end: dict[str, dict[str, int]]) -> None:
        """Nothing to release: a log dir keeps no per-reader state."""


# --- sink -------------------------------------------------------------------------------------

def sink_id_for(options: Mapping[str, str]) -> str | None:
    """The query's identity for idempotent commits: Spark's query id from
    ``<checkpointLocation>/metadata`` (stable across restarts, new with a new checkpoint), else a
    digest of the checkpoint path; None without a ``checkpointLocation`` option."""
    opts = {str(k).lower(): str(v) for k, v in options.items()}
    location = opts.get("checkpointlocation")
    if not location:
        return None
    local = location[len("file:"):] if location.startswith("file:") else location
    try:
        query_id = json.loads((Path(local) / "metadata").read_text())["id"]
        return "q" + str(uuid.UUID(str(query_id)).hex)
    except (OSError, ValueError, KeyError, TypeError):
        return "c" + hashlib.sha1(location.encode()).hexdigest()[:32]


#: Sinks warned of being at-least-once (no checkpointLocation option), in this process.
_AT_LEAST_ONCE_WARNED: set[str] = set()


class KlogStreamWriter(KlogWriter, DataSourceStreamArrowWriter):
    """A :class:`~spark_logsource.writer.KlogWriter` per micro-batch, committed once per batch id."""

    def __init__(self, opts: WriteOptions, overwrite: bool, sink_id: str | None) -> None:
        super().__init__(opts, overwrite)
        self.sink_id = sink_id

    @property
    def _query_tag(self) -> str:
        return f"s{self.sink_id or self.job_id}"

    def _staging_name(self, task: int, attempt: int) -> str:
        # the writer is pickled once per query: each task attempt of each batch stages apart
        return f"{STAGING_PREFIX}{self._query_tag}-{task:05d}-{uuid.uuid4().hex[:12]}-{attempt}"  # task order first

    @spark_entry
    def commit(self, messages: list[KlogCommitMessage | None], batchId: int) -> None:  # type: ignore[override]
        # Spark sets up a writer at the query's start and again for every batch's commit, all in
        # one runner process per query: its first commit gives the query's one warning
        warn_ignored(self.opts.ignored, "stream write", once_key=f"{self.opts.log_dir}|{self.sink_id}")
        if self.sink_id is None and self.opts.log_dir not in _AT_LEAST_ONCE_WARNED:
            _AT_LEAST_ONCE_WARNED.add(self.opts.log_dir)
            log.warning("klog stream write to %s: no checkpointLocation option, so a replayed micro-batch cannot be "
                        "told from a new one and is written again (at-least-once); give "
                        ".option('checkpointLocation', ...) for exactly-once", self.opts.log_dir)
        staged = [sp for m in messages if isinstance(m, KlogCommitMessage) for sp in m.staged]
        overwrite_topics: set[str] = set()
        if self.overwrite:
            overwrite_topics = {self.opts.topic} if self.opts.topic else {sp.topic for sp in staged}
        sink = SinkBatch(self.sink_id, batchId) if self.sink_id is not None else None
        commit_job(f"{self._query_tag}-b{batchId}-{uuid.uuid4().hex[:8]}", staged,
                   overwrite_topics=overwrite_topics, lock_timeout_s=self.opts.lock_timeout_s,
                   config=self.opts.config, sink=sink, replicas=self.replicas)
        self._store_configs({sp.topic for sp in staged} | ({self.opts.topic} if self.opts.topic else set()))
        self._collect_sink_staging()

    @spark_entry
    def abort(self, messages: list[KlogCommitMessage | None], batchId: int) -> None:  # type: ignore[override]
        self._collect_sink_staging()

    def _collect_sink_staging(self) -> None:
        """Staging left by this query's tasks (replayed, failed or abandoned attempts)."""
        collect_staging(self._partition_dirs(), job_id=self._query_tag)


def stream_writer(options: Mapping[str, str], schema: object, overwrite: bool) -> KlogStreamWriter:
    from .writer import parse_write_options, validate_schema

    wopts = parse_write_options({k: v for k, v in options.items()
                                 if str(k).lower() not in ("checkpointlocation", "queryname")})
    if wopts.keep_offsets:
        raise InvalidOptionError("write option offsets=keep is a batch write's (df.write): a stream writes each "
                                 "micro-batch from the log end; expected offsets=new, or a batch write of the rows")
    validate_schema(schema, wopts)  # type: ignore[arg-type]
    return KlogStreamWriter(wopts, overwrite, sink_id_for(options))
