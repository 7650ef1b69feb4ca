"""``df.write.format("klog")``: every task stages segments, the driver commits them atomically.

Input columns (as Spark's Kafka sink): ``value`` (string or binary, required), ``key`` (string
or binary), ``headers`` (``array<struct<key: string, value: binary>>``), ``topic`` (string; the
``topic`` option wins), ``partition`` (int), ``timestamp`` (timestamp; else the write time).
Other columns are ignored. Rows go to the given ``partition``, else to Kafka's default
partitioner's choice (murmur2 of the key), else round-robin for null keys.

``offsets``: ``new`` (the default) appends each partition's rows from its log end, as a producer's
records; ``keep`` writes each row at its own ``offset`` column (long), in its ``partition`` (int,
required), as ``klog restore`` does (a backfill from a notebook: ``spark.read.format("klog")`` or a
``klog export``'s Parquet, filtered, written back): key, value, headers, timestamp and, with a
``timestampType`` column (int: 0 CreateTime, 1 LogAppendTime), the timestamp type are kept, gaps
between offsets stay gaps. Each task sorts each partition's rows by offset and stages them at
their offsets (:meth:`~storage_core.log.staged.StagingWriter.append_rows_at`, one pinned writer per
partition from its first offset; a task holds its rows in memory to sort them); several tasks may
write one partition, each a range of offsets apart from the others' (``df.repartitionByRange(n,
"partition", "offset")``). Refused before anything is visible: an offset twice (by its task), tasks
whose ranges overlap, a partition that ends above the first offset written, and a gap that klog's
readers would take for lost data (by the commit, under the lock:
:func:`~storage_core.log.staged.pinned_ranges`, :func:`~storage_core.log.staged.check_at_offsets`);
an empty partition's log start offset becomes the first offset written. Refused on the driver: a
missing column, ``txnAppId`` (a rerun at the same offsets is refused anyway), overwrite mode, a
streaming write.

The protocol is :mod:`storage_core.log.staged`: nothing a task writes is visible until the driver's
``commit`` assigns offsets and renames the staged segments in, with a journal that a crash rolls
forward; ``abort``, failed and speculative attempts leave only staging, which is collected.
"""

from __future__ import annotations

import hashlib
import logging
import time
import uuid
from collections import deque
from collections.abc import Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructType, TimestampType

from storage_core.errors import InvalidOptionError, KlogError, ReplicatedWriteError, RestoreError
from storage_core.files import journal_name, staging_prefix
from storage_core.fs import OPTION_PREFIX, StorageOptions, writable_dir
from storage_core.limits import INT32_MAX, INT64_MAX
from storage_core.log.cluster_metadata import check_new_topic, find_cluster_metadata
from storage_core.log.config import CONFIG_KEYS, LogConfig
from storage_core.log.journal import SinkBatch
from storage_core.log.lock import check_free_to_stage
from storage_core.log.manager import find_partitions
from storage_core.log.replicas import write_targets
from storage_core.log.staged import StagedPartition, StagingWriter, collect_staging, commit_job
from storage_core.log.topic_partition import TopicPartition, check_appendable, validate_topic_name
from storage_core.read.kafka_compat import split_kafka_options
from storage_core.read.options import unknown_options_message
from storage_core.record.columnar import EncodeBuffer, EncodeColumns, RowSelection, prepare_columns
from storage_core.record.compression import CompressionType

from .errors import spark_entry

log = logging.getLogger("klog")

WRITE_OPTIONS = {"path", "topic", "numpartitions", "compression", "maxbatchbytes", "locktimeoutms",
                 "includeheaders", "kafka.compression.type", "txnappid", "txnversion", "offsets"}
#: The most partitions one write creates for a new topic: Kafka's controller refuses a CreateTopics or
#: CreatePartitions request for more than this many partitions at once
#: (``ReplicationControlManager.MAX_PARTITIONS_PER_BATCH``, PolicyViolationException).
MAX_NEW_PARTITIONS = 10_000
#: Upper bound of an encoded batch's records area (kept under max.message.bytes).
DEFAULT_MAX_BATCH_BYTES = 1 << 20
STALE_STAGING_S = 24 * 3600
#: A task stages each partition's rows in runs of about this many bytes of Arrow data (see KlogWriter.write).
STAGE_BYTES = 4 << 20
#: Runs cut but not yet staged, at most (each about STAGE_BYTES of rows).
STAGES_IN_FLIGHT = 2
#: How long a job's ``abort`` keeps removing what the job made while it finds some left: Spark aborts
#: a job as soon as one task fails, without waiting for the others, which it kills within
#: ``spark.python.task.killTimeout`` (2 s by default); one of them may meanwhile stage into a dir
#: the abort just emptied, or make a partition dir again, and remove its staging only after.
ABORT_STRAGGLERS_S = 3.0


@dataclass(frozen=True)
class WriteOptions:
    log_dir: str  # where new topics are created (the first of the paths)
    paths: tuple[str, ...]
    topic: str | None
    num_partitions: int
    compression: CompressionType
    config: LogConfig
    config_props: Mapping[str, str]  # the topic configs given as options, stored for the topics written
    max_batch_bytes: int
    lock_timeout_s: float
    ignored: tuple[str, ...] = ()  # Spark Kafka-sink options that mean nothing without a broker
    num_partitions_given: bool = False  # numPartitions was set: the count of a partial copy's topic
    #: ``txnAppId``/``txnVersion`` (Delta Lake's names for idempotent writes): the commit's mark
    txn: SinkBatch | None = None
    #: ``offsets=keep``: each row at its ``offset`` column's offset (a restore's writers, pinned)
    keep_offsets: bool = False


def parse_write_options(options: Mapping[str, str]) -> WriteOptions:
    spelled = {str(k).lower(): str(k) for k in options}  # the user's spelling, for messages
    opts, ignored = split_kafka_options({str(k).lower(): str(v) for k, v in options.items()}, write=True)
    StorageOptions.from_options(opts)  # fs.* (a read's options may be reused); URI paths are refused below
    opts = {k: v for k, v in opts.items() if not k.startswith(OPTION_PREFIX)}
    config_props = {k: v for k, v in opts.items() if k in CONFIG_KEYS}
    unknown = sorted(k for k in opts if k not in WRITE_OPTIONS and k not in config_props)
    if unknown:
        raise InvalidOptionError(unknown_options_message([spelled[k] for k in unknown], WRITE_OPTIONS | set(CONFIG_KEYS),
                                                         "write")
                                 + "path, topic, numPartitions, compression, maxBatchBytes, lockTimeoutMs, txnAppId, txnVersion, "
                                 "offsets, includeHeaders and topic configs by their Kafka names (segment.bytes, ...)")
    codec_name = opts.get("compression")
    producer_codec = opts.get("kafka.compression.type")
    if codec_name is not None and producer_codec is not None and codec_name.strip().lower() != producer_codec.strip().lower():
        raise InvalidOptionError(f"options compression={codec_name!r} and kafka.compression.type={producer_codec!r} "
                                 "disagree; give one")
    path = opts.get("path", "").strip()
    if not path:
        raise InvalidOptionError("no path: use df.write.format('klog').save('/path/to/log-dir')")
    paths = tuple(str(writable_dir(p.strip())) for p in path.split(",") if p.strip())
    if not paths:
        raise InvalidOptionError(f"path {path!r} names no directory; expected a log dir (or a comma-separated list)")
    topic = opts.get("topic")
    if topic is not None:
        validate_topic_name(topic)
        check_appendable(topic)

    def positive(lower: str, default: int, maximum: int = INT32_MAX) -> int:
        key = {"numpartitions": "numPartitions", "maxbatchbytes": "maxBatchBytes",
               "locktimeoutms": "lockTimeoutMs"}.get(lower, lower)  # named as the user spells it
        raw = opts.get(lower)
        if raw is None:
            return default
        try:
            v = int(raw)
        except ValueError:
            raise InvalidOptionError(f"write option {key}={raw!r} is not an integer") from None
        if not 1 <= v <= maximum:
            why = (f" (Kafka's controller creates at most {MAX_NEW_PARTITIONS} partitions per request)"
                   if lower == "numpartitions" else "")
            raise InvalidOptionError(f"write option {key}={raw!r} must be in 1..{maximum}{why}")
        return v

    config = LogConfig.from_properties(config_props)
    txn = _txn_option(opts.get("txnappid"), opts.get("txnversion"))
    keep = _offsets_option(opts.get("offsets"))
    if keep and txn is not None:
        raise InvalidOptionError("write options offsets=keep and txnAppId/txnVersion do not go together: a write at "
                                 "the rows' own offsets is refused where the partition already holds them, so a "
                                 "rerun adds nothing twice without a txnVersion; expected one or the other")
    given_codec = codec_name if codec_name is not None else producer_codec
    codec = CompressionType.from_name(given_codec if given_codec is not None else "none")  # "" is an error
    return WriteOptions(paths[0], paths, topic, positive("numpartitions", 1, MAX_NEW_PARTITIONS), codec, config,
                        config_props, positive("maxbatchbytes", DEFAULT_MAX_BATCH_BYTES),
                        positive("locktimeoutms", 600_000, INT64_MAX) / 1000, ignored, "numpartitions" in opts, txn,
                        keep)


def _offsets_option(raw: str | None) -> bool:
    """``offsets``: ``new`` (the default, False: from each partition's log end) or ``keep`` (True: each
    row at its ``offset`` column's offset)."""
    if raw is None:
        return False
    value = raw.strip().lower()
    if value not in ("new", "keep"):
        raise InvalidOptionError(f"write option offsets={raw!r} is neither 'new' (the default: each partition's rows "
                                 "from its log end) nor 'keep' (each row at its 'offset' column's offset)")
    return value == "keep"


def _txn_option(app_id: str | None, version: str | None) -> SinkBatch | None:
    """An idempotent write's identity, as Delta Lake names it: a write whose ``txnVersion`` is at
    or below the last one committed for its ``txnAppId`` in a log dir adds nothing there. Kept as
    the streaming sink keeps its batches (a sink mark per app id, written by the commit itself)."""
    if app_id is None and version is None:
        return None
    if app_id is None or version is None or not app_id.strip():
        raise InvalidOptionError("txnAppId and txnVersion go together: an application id (any non-empty string) "
                                 "and a version (an integer >= 0) that grows with each write of that application")
    try:
        v = int(version)
    except ValueError:
        raise InvalidOptionError(f"write option txnVersion={version!r} is not an integer") from None
    if not 0 <= v <= INT64_MAX:
        raise InvalidOptionError(f"write option txnVersion={version!r} must be in 0..{INT64_MAX}")
    return SinkBatch("t" + hashlib.sha1(app_id.encode("utf-8")).hexdigest()[:32], v)


def validate_schema(schema: StructType, opts: WriteOptions) -> None:
    """The input columns Spark's Kafka sink accepts, checked before any task runs."""
    fields = {f.name: f.dataType for f in schema.fields}
    accepted = {
        "value": ((StringType, BinaryType), "string or binary"),
        "key": ((StringType, BinaryType), "string or binary"),
        "topic": ((StringType,), "string"),
        "partition": ((IntegerType,), "int"),
        "timestamp": ((TimestampType,), "timestamp"),
    }
    if "value" not in fields:
        raise InvalidOptionError(f"the DataFrame has no 'value' column (string or binary), which a write needs; it "
                                 f"has {', '.join(fields) or 'no columns'}")
    for name, (types, label) in accepted.items():
        if name in fields and not isinstance(fields[name], types):
            raise InvalidOptionError(f"column {name!r} has type {fields[name].simpleString()}; expected {label}")
    if "headers" in fields:
        t = fields["headers"]
        ok = (isinstance(t, ArrayType) and isinstance(t.elementType, StructType)
              and [(f.name, type(f.dataType)) for f in t.elementType.fields] == [("key", StringType),
                                                                                 ("value", BinaryType)])
        if not ok:
            raise InvalidOptionError(f"column 'headers' has type {t.simpleString()}; expected "
                                     "array<struct<key:string,value:binary>>")
    if opts.topic is None and "topic" not in fields:
        raise InvalidOptionError("no topic: set the 'topic' option or give a 'topic' column")
    if opts.keep_offsets:
        _validate_keep_schema(fields)


def _validate_keep_schema(fields: Mapping[str, object]) -> None:
    """``offsets=keep``: the ``offset`` (long) and ``partition`` (int) columns that say where each row
    goes, and the ``timestampType`` (int) that may say its timestamp type, as a klog read gives them."""
    from pyspark.sql.types import DataType, LongType

    have = ", ".join(f"{n} {t.simpleString() if isinstance(t, DataType) else t}" for n, t in fields.items())
    for name, types, label in (("offset", (LongType,), "long"), ("partition", (IntegerType,), "int")):
        if name not in fields:
            raise InvalidOptionError(f"offsets=keep writes each row at its own offset in its own partition, and the "
                                     f"DataFrame has no {name!r} column ({label}); expected the 'partition' (int) and "
                                     f"'offset' (long) columns a klog read or a klog export gives; it has {have}")
        if not isinstance(fields[name], types):
            t = fields[name]
            raise InvalidOptionError(f"column {name!r} has type {t.simpleString() if isinstance(t, DataType) else t}; "
                                     f"expected {label} (offsets=keep)")
    t = fields.get("timestampType")
    if t is not None and not isinstance(t, IntegerType):
        raise InvalidOptionError(f"column 'timestampType' has type {t.simpleString() if isinstance(t, DataType) else t}; "
                                 "expected int (0 CreateTime, 1 LogAppendTime), as a klog read gives it")


def existing_topics(paths: tuple[str, ...]) -> dict[str, dict[int, str]]:
    """The partition dirs of each topic in the log dirs ``paths``: for a replicated partition of a
    cluster's dirs, its replica read (the leader's), where the write's tasks stage."""
    out: dict[str, dict[int, str]] = {}
    for pd in find_partitions([p for p in paths if Path(p).exists()]):
        out.setdefault(pd.topic_partition.topic, {})[pd.topic_partition.partition] = str(pd.path)
    return out


def replica_plan(paths: tuple[str, ...]) -> tuple[dict[str, tuple[str, ...]], dict[str, str]]:
    """For each replicated partition of the log dirs ``paths`` (:mod:`storage_core.log.replicas`):
    the other replicas' dirs a write must reach, by the dir its tasks stage in; and, by that dir, why
    a partition cannot be written (:func:`~storage_core.log.replicas.write_targets` refused it)."""
    targets: dict[str, tuple[str, ...]] = {}
    refused: dict[str, str] = {}
    for pd in find_partitions([p for p in paths if Path(p).exists()]):
        if pd.replicas is None:
            continue
        try:
            more = write_targets(pd.replicas)
        except ReplicatedWriteError as exc:
            refused[str(pd.path)] = exc.detail
            continue
        if more:
            targets[str(pd.path)] = tuple(map(str, more))
    return targets, refused


def ensure_topic(opts: WriteOptions, topics: dict[str, dict[int, str]], topic: str) -> dict[int, str]:
    """The partition dirs of ``topic``, creating ``numPartitions`` of them if it is new."""
    if topic in topics:
        return topics[topic]
    validate_topic_name(topic)
    check_appendable(topic)
    check_new_topic(find_cluster_metadata([p for p in opts.paths if Path(p).is_dir()]), topic)
    root = Path(opts.log_dir)
    check_free_to_stage(root, None)  # a task making a topic's dirs: not in a broker's dir (the driver waited)
    root.mkdir(parents=True, exist_ok=True)
    dirs = {}
    for p in range(opts.num_partitions):
        d = root / TopicPartition(topic, p).dir_name
        d.mkdir(exist_ok=True)
        dirs[p] = str(d)
    topics[topic] = dirs
    return dirs


@dataclass
class KlogCommitMessage(WriterCommitMessage):
    staged: tuple[StagedPartition, ...]
    task: int
    attempt: int


class KlogWriter(DataSourceArrowWriter):
    """Pickled to every task; ``commit``/``abort`` run on an unpickled copy on the driver side."""

    def __init__(self, opts: WriteOptions, overwrite: bool) -> None:
        if opts.keep_offsets and overwrite:
            raise InvalidOptionError("offsets=keep with mode('overwrite'): an overwrite deletes what the topic holds "
                                     "and appends from its log end; expected mode('append') with offsets=keep (into "
                                     "partitions that end at or below the first offset written, or are empty)")
        # on the driver, before any task runs: a dir a broker holds is refused now, not after its tasks
        # staged into the broker's partition dirs and the commit waited lockTimeoutMs; the tasks ask again
        # (StagingWriter, ensure_topic) before they create anything
        for p in opts.paths:
            check_free_to_stage(p, opts.lock_timeout_s)
        self.opts = opts
        self.overwrite = overwrite
        self.job_id = uuid.uuid4().hex[:16]
        self.topics = existing_topics(opts.paths)
        # a cluster's dirs: every replica of a partition gets the same batches (commit_job), and a
        # partition that cannot give them to every in-sync replica is refused before a task runs
        self.replicas, self.refused = replica_plan(opts.paths)
        # what was there before this job: a failed job removes the dirs it made (see _remove_new_dirs)
        self.dirs_before = frozenset(d for parts in self.topics.values() for d in parts.values())
        self.roots_before = frozenset(p for p in opts.paths if Path(p).exists())
        self.counts: dict[str, int | None] = {}
        from storage_core.log.topic_configs import load_topic_configs

        self.stored_configs: dict[str, dict[str, str]] = {}
        for p in opts.paths:
            if Path(p).is_dir():
                for topic, props in load_topic_configs(p).items():
                    self.stored_configs.setdefault(topic, dict(props))
        self.configs: dict[str, LogConfig] = {}
        if opts.topic is not None:
            ensure_topic(opts, self.topics, opts.topic)
            for d in self.topics[opts.topic].values():
                self._writable(d)

    def _writable(self, pdir: str) -> None:
        """Refuse a partition whose replicas cannot all be written (see :func:`replica_plan`)."""
        why = self.refused.get(pdir)
        if why is not None:
            raise ReplicatedWriteError(why)

    # -- tasks
    @spark_entry
    def write(self, iterator: Iterator[pa.RecordBatch]) -> KlogCommitMessage:
        from pyspark import TaskContext

        from .worker_gc import task_started

        task_started()
        ctx = TaskContext.get()
        task = ctx.partitionId() if ctx else 0
        attempt = ctx.attemptNumber() if ctx else 0
        staging_name = self._staging_name(task, attempt)
        if self.opts.keep_offsets:
            return self._write_at(iterator, staging_name, task, attempt)
        writers: dict[str, StagingWriter] = {}
        now = int(time.time() * 1000)
        rr = task  # round-robin position for null keys
        # Spark hands over batches of 10,000 rows (spark.sql.execution.arrow.maxRecordsPerBatch),
        # a few hundred KB per Kafka partition. Each batch is put in partition order at once (one
        # take, while the batch is in the CPU's caches; the encoder then reads each partition's rows
        # front to back, not scattered over batches the caches have long left), and each partition's
        # rows are collected as ranges of those batches, nothing joined: they are staged in runs of
        # about STAGE_BYTES, so that batches reach maxBatchBytes and the encoder, codec and segment
        # are called per run rather than per Spark batch. The encoder writes a run's batches into one
        # buffer the task's writers share and reuse (no fresh memory to fault in for every batch,
        # and one buffer however many partitions the task writes: they stage on one thread).
        # The runs are encoded, compressed and written on one staging thread (in the order they were
        # cut, so each partition's rows stay in order) while this one takes the next batches from
        # Spark: the encoder and the codecs let the GIL go, so the two overlap. At most
        # STAGES_IN_FLIGHT runs wait for it.
        encode_buffer = EncodeBuffer()
        pending: dict[str, list[tuple[EncodeColumns, np.ndarray | None]]] = {}
        pending_bytes: dict[str, int] = {}
        in_flight: deque[Future[int]] = deque()

        try:
            with ThreadPoolExecutor(max_workers=1, thread_name_prefix="klog-stage") as stager:
                def stage(pdir: str) -> None:
                    run = RowSelection.of(pending.pop(pdir))
                    pending_bytes.pop(pdir)
                    in_flight.append(stager.submit(writers[pdir].append_rows, run))
                    while len(in_flight) > STAGES_IN_FLIGHT or (in_flight and in_flight[0].done()):
                        in_flight.popleft().result()  # raises the staging thread's error here

                try:
                    for batch in iterator:
                        if batch.num_rows == 0:
                            continue
                        topics = self._topics_of(batch)
                        parts, rr = self._partitions_of(batch, topics, rr)
                        order, groups = self._groups(topics, parts)
                        # the batch in partition order, copied while it is in the CPU's caches: each
                        # partition's rows are then a range the encoder reads front to back
                        cols = prepare_columns(batch if order is None else batch.take(pa.array(order)), now)
                        row_bytes = batch.nbytes / batch.num_rows
                        for topic, p, rows in groups:
                            pdir = self.topics[topic][p]
                            if pdir not in writers:
                                self._writable(pdir)
                                writers[pdir] = StagingWriter(pdir, staging_name, self._config(topic),
                                                              self.opts.compression, self.opts.max_batch_bytes,
                                                              encode_buffer, self._registered_epoch(topic, p))
                            pending.setdefault(pdir, []).append((cols, rows))
                            n = batch.num_rows if rows is None else len(rows)
                            pending_bytes[pdir] = pending_bytes.get(pdir, 0) + int(n * row_bytes)
                            if pending_bytes[pdir] >= STAGE_BYTES:
                                stage(pdir)
                    for pdir in list(pending):
                        stage(pdir)
                    while in_flight:
                        in_flight.popleft().result()
                finally:
                    for f in in_flight:
                        f.cancel()
            staged = tuple(w.finish() for w in writers.values())
        except BaseException:
            # Spark may have aborted the job already (it does not wait for the other tasks to be
            # killed), so its collect_staging ran before this staging was written: remove it here.
            for w in writers.values():
                w.discard()
            raise
        from storage_core.faults import maybe_crash

        maybe_crash("task-staged", partition=task, attempt=attempt)  # tests: die after staging
        return KlogCommitMessage(staged, task, attempt)

    def _write_at(self, iterator: Iterator[pa.RecordBatch], staging_name: str, task: int,
                  attempt: int) -> KlogCommitMessage:
        """A task of ``offsets=keep``: each partition's rows collected, sorted by offset (Spark gives them
        in no order), a duplicate refused, and staged at their offsets by one writer pinned to the first
        (:meth:`~storage_core.log.staged.StagingWriter.append_rows_at`, klog restore's staging)."""
        import pyarrow.compute as pc

        names = ("offset", "key", "value", "headers", "timestamp", "timestampType")
        pending: dict[str, list[pa.RecordBatch]] = {}
        for batch in iterator:
            if batch.num_rows == 0:
                continue
            for col in ("partition", "offset"):
                nulls = batch.column(col).null_count
                if nulls:
                    raise InvalidOptionError(f"{nulls} rows have a null {col!r}; offsets=keep writes each row at its "
                                             "own partition and offset: expected both in every row")
            topics = self._topics_of(batch)
            parts, _ = self._partitions_of(batch, topics, 0)
            order, groups = self._groups(topics, parts)
            rows = batch if order is None else batch.take(pa.array(order))
            rows = rows.select([n for n in names if n in rows.schema.names])
            for topic, p, picked in groups:
                pdir = self.topics[topic][p]
                self._writable(pdir)
                part = rows if picked is None else rows.slice(int(picked[0]), len(picked))
                pending.setdefault(pdir, []).append(part)
        writers: dict[str, StagingWriter] = {}
        encode_buffer = EncodeBuffer()
        try:
            for pdir in sorted(pending):
                table = pa.Table.from_batches(pending.pop(pdir))
                table = table.take(pc.sort_indices(table.column("offset")))
                offsets = table.column("offset").to_numpy()
                tp = TopicPartition.parse_dir_name(Path(pdir).name)
                if offsets[0] < 0:
                    raise RestoreError(f"{tp} in {Path(pdir).parent}: a row at offset {offsets[0]}; expected offsets "
                                       "of 0 and above; nothing was written")
                twice = np.flatnonzero(offsets[1:] == offsets[:-1])
                if len(twice):
                    raise RestoreError(f"{tp} in {Path(pdir).parent}: offset {offsets[twice[0]]} is in "
                                       f"{int(np.count_nonzero(offsets == offsets[twice[0]]))} rows of task {task}; "
                                       "expected each offset of a partition once; nothing was written")
                w = writers[pdir] = StagingWriter(pdir, staging_name, self._config(tp.topic), self.opts.compression,
                                                  self.opts.max_batch_bytes, encode_buffer,
                                                  self._registered_epoch(tp.topic, tp.partition),
                                                  pinned_base=int(offsets[0]))
                for chunk in table.to_batches(max_chunksize=1 << 16):
                    w.append_rows_at(chunk)
            staged = tuple(w.finish() for w in writers.values())
        except BaseException:
            for w in writers.values():  # as write(): the job's abort may have run already
                w.discard()
            raise
        from storage_core.faults import maybe_crash

        maybe_crash("task-staged", partition=task, attempt=attempt)
        return KlogCommitMessage(staged, task, attempt)

    def _config(self, topic: str) -> LogConfig:
        """The topic's config by :mod:`storage_core.log.topic_configs`' precedence: Kafka's defaults <
        the KRaft metadata of the dirs, if any < ``klog-topic-configs.json`` < this write's options."""
        cfg = self.configs.get(topic)
        if cfg is None:
            from storage_core.log.topic_configs import config_for_topic

            kraft = find_cluster_metadata([p for p in self.opts.paths if Path(p).is_dir()])  # cached per process
            cfg = self.configs[topic] = config_for_topic(topic, self.stored_configs, kraft=kraft,
                                                         overrides=self.opts.config_props)
        return cfg

    def _registered_epoch(self, topic: str, partition: int) -> int | None:
        """The partition's leader epoch by the KRaft metadata of the dirs (cached per process), or None:
        what a partition without a leader-epoch checkpoint stamps (``StagingWriter``)."""
        kraft = find_cluster_metadata([p for p in self.opts.paths if Path(p).is_dir()])
        reg = kraft.partition(topic, partition) if kraft is not None else None
        return None if reg is None else reg.leader_epoch

    def _store_configs(self, topics: set[str]) -> None:
        """Topic configs given as options become the topics' own (as ``kafka-configs --alter``)."""
        if not self.opts.config_props:
            return
        from storage_core.log.topic_configs import update_topic_configs

        for topic in sorted(topics):
            dirs = {Path(d).parent for d in existing_topics(self.opts.paths).get(topic, {}).values()}
            for d in sorted(dirs):
                update_topic_configs(d, topic, self.opts.config_props)

    def _staging_name(self, task: int, attempt: int) -> str:
        return f"{staging_prefix(self.job_id)}{task:05d}-{attempt}"

    def _groups(self, topics: list[str] | None,
                parts: np.ndarray) -> tuple[np.ndarray | None, list[tuple[str, int, np.ndarray | None]]]:
        """The order that sorts a batch's rows by (topic, partition), stably (None: one group, in
        input order), and each group's row numbers in that order (None: every row)."""
        if topics is None:  # the topic option: the partition number is the group
            assert self.opts.topic is not None
            names = [self.opts.topic]
            # partition numbers fit 16 bits nearly always: numpy's stable sort is then a radix sort
            keys = parts.astype(np.int16 if max(self.topics[self.opts.topic]) < 1 << 15 else np.int64)
        else:
            names = sorted(set(topics))
            index = {t: i for i, t in enumerate(names)}
            keys = np.fromiter((index[t] for t in topics), dtype=np.int64, count=len(topics)) * (1 << 32) + parts
        if (keys == keys[0]).all():
            k = int(keys[0])
            return None, [(names[k >> 32], k & 0xFFFFFFFF, None)]
        order = np.argsort(keys, kind="stable")
        sorted_keys = keys[order]
        starts = np.flatnonzero(np.r_[True, sorted_keys[1:] != sorted_keys[:-1]])
        ends = np.r_[starts[1:], len(keys)]
        return order, [(names[int(sorted_keys[a]) >> 32], int(sorted_keys[a]) & 0xFFFFFFFF, np.arange(a, b))
                       for a, b in zip(starts.tolist(), ends.tolist(), strict=True)]

    def _topics_of(self, batch: pa.RecordBatch) -> list[str] | None:
        """Each row's topic, or None when the ``topic`` option names the one topic of every row."""
        if self.opts.topic is not None:
            return None
        col = batch.column(batch.schema.get_field_index("topic"))
        if col.null_count:
            raise KlogError("a row has a null 'topic' and no 'topic' option was given")
        names: list[str] = col.to_pylist()
        for t in set(names):
            check_appendable(t)
            if t not in self.topics:
                ensure_topic(self.opts, self.topics, t)
        return names

    def _count(self, topic: str) -> int | None:
        """The topic's partition count, which routing by key (murmur2 % count) and round-robin need:
        the KRaft metadata's, if the dir has it; else the partitions of a topic this job creates;
        else, for a dir holding partitions 0..n-1, n; else (a partial copy, say partitions 8, 14 and
        19 of 20) the ``numPartitions`` option, or None: unknown, routing is refused."""
        if topic in self.counts:
            return self.counts[topic]
        have = sorted(self.topics.get(topic, {}))
        kraft = find_cluster_metadata([p for p in self.opts.paths if Path(p).is_dir()])
        known = kraft.topics.get(topic) if kraft is not None else None
        n: int | None
        if known is not None and known.partitions:
            n = max(known.partitions) + 1
        elif have == list(range(len(have))):
            n = len(have)
        elif self.opts.num_partitions_given:
            n = self.opts.num_partitions
            if n <= have[-1]:
                raise InvalidOptionError(f"numPartitions={n}, but topic {topic!r} has partition {have[-1]} in "
                                         f"{Path(self.topics[topic][have[-1]]).parent}; expected the topic's "
                                         "partition count")
        else:
            n = None
        self.counts[topic] = n
        return n

    def _partitions_of(self, batch: pa.RecordBatch, topics: list[str] | None, rr: int) -> tuple[np.ndarray, int]:
        from storage_core.record.columnar import murmur2_partitions

        n = batch.num_rows
        only = self.opts.topic
        known = {t: self._count(t) for t in ({only} if only is not None and topics is None else set(topics or ()))}
        # an unknown count (a partial copy without metadata) bounds explicit partitions by the dirs there
        per_topic = {t: (c if c is not None else max(self.topics[t]) + 1) for t, c in known.items()}
        if topics is None:  # one topic: one partition count (not a Python object per row)
            assert only is not None
            counts = np.full(n, per_topic[only], dtype=np.int64)
        else:
            counts = np.fromiter((per_topic[t] for t in topics), dtype=np.int64, count=n)
        out = np.full(n, -1, dtype=np.int64)
        names = batch.schema.names
        if "partition" in names:
            col = batch.column(names.index("partition"))
            given = np.asarray(col.fill_null(-1).to_numpy(zero_copy_only=False), dtype=np.int64)
            bad = (given >= counts) | (given < -1) | ((given < 0) & np.asarray(col.is_valid()))
            if bad.any():
                i = int(np.argmax(bad))
                topic = topics[i] if topics is not None else self.opts.topic
                raise InvalidOptionError(f"row with partition {given[i]} for topic {topic!r}, which has "
                                         f"{counts[i]} partitions (0..{counts[i] - 1})")
            out = given
        todo = out < 0
        if todo.any():
            unknown = sorted({t for t, c in known.items() if c is None}
                             & (set(known) if topics is None else {topics[i] for i in np.nonzero(todo)[0]}))
            if unknown:
                t = unknown[0]
                raise InvalidOptionError(
                    f"topic {t!r} holds only partitions {', '.join(map(str, sorted(self.topics[t])))} here (a partial "
                    "copy) and the dir has no KRaft metadata to give its partition count, so rows without a "
                    "'partition' cannot be routed as Kafka's partitioner would (murmur2 of the key % the count); "
                    "expected the numPartitions option set to the topic's partition count, or a 'partition' column")
        if todo.any() and "key" in names:
            keys = batch.column(names.index("key"))
            for c in (np.unique(counts[todo]) if topics is not None else counts[:1]):
                parts = murmur2_partitions(keys, int(c))
                sel = todo & (counts == c) & (parts >= 0)
                out[sel] = parts[sel]
            todo = out < 0
        if todo.any():  # null keys: spread evenly
            idx = np.nonzero(todo)[0]
            out[idx] = (rr + np.arange(len(idx))) % counts[idx]
            rr += len(idx)
        for t in known:  # every row's partition must be a dir here (a partial copy holds only some)
            held = np.fromiter(self.topics[t], dtype=np.int64)
            rows = out if topics is None else out[np.fromiter((x == t for x in topics), dtype=bool, count=n)]
            missing = ~np.isin(rows, held)
            if missing.any():
                p = int(rows[int(np.argmax(missing))])
                raise InvalidOptionError(
                    f"a row goes to partition {p} of topic {t!r}, which is not in this log dir (it holds partitions "
                    f"{', '.join(map(str, sorted(self.topics[t])))}; a copy from one broker holds only its own); "
                    "expected rows for the partitions the dir holds")
        return out, rr

    # -- driver
    @spark_entry
    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        staged = [sp for m in messages if isinstance(m, KlogCommitMessage) for sp in m.staged]
        overwrite_topics: set[str] = set()
        if self.overwrite:  # the option's topic even if no row came; else the topics rows went to
            overwrite_topics = {self.opts.topic} if self.opts.topic else {sp.topic for sp in staged}
        from .driver import driver_liveness

        # a write at its rows' offsets: each partition's target checked under the lock with its topic's config
        pinned = {sp.topic: self._config(sp.topic) for sp in staged if sp.pinned_base is not None}
        commit_job(self.job_id, staged, overwrite_topics=overwrite_topics, lock_timeout_s=self.opts.lock_timeout_s,
                   config=self.opts.config, sink=self.opts.txn, owner_alive=driver_liveness(), replicas=self.replicas,
                   topic_configs=pinned)
        self._store_configs({sp.topic for sp in staged} | ({self.opts.topic} if self.opts.topic else set()))
        self._collect(older_than_s=STALE_STAGING_S)

    @spark_entry
    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        from storage_core.log.journal import recover_commits
        from storage_core.log.lock import LogDirLock

        for d in {Path(pd).parent for parts in existing_topics(self.opts.paths).values() for pd in parts.values()}:
            if (d / journal_name(self.job_id)).exists():  # our commit died half-way: undo it
                with LogDirLock(d, self.opts.lock_timeout_s):
                    recover_commits(d, self.job_id)
        deadline = time.monotonic() + ABORT_STRAGGLERS_S
        while True:  # until nothing new is left, or the job's other tasks are surely gone
            self._collect(older_than_s=None)
            if not self._remove_new_dirs() or time.monotonic() >= deadline:
                break
            time.sleep(0.05)

    def _remove_new_dirs(self) -> list[str]:
        """A failed job leaves no new dir: the partition dirs it created (for a new topic), if they
        hold nothing now, and a log dir it created, if it holds no partition dir (only the lock and
        checkpoint files of the failed commit). Returns the new dirs still there (another job's
        staging keeps one, or a task of this job not yet killed)."""
        from storage_core.files import LOG_DIR_FILES

        left = []
        for parts in existing_topics(self.opts.paths).values():
            for d in parts.values():
                if d not in self.dirs_before:
                    try:
                        Path(d).rmdir()  # only if empty
                    except OSError:
                        left.append(d)
        for root in self.opts.paths:
            r = Path(root)
            if root in self.roots_before or not r.is_dir():
                continue
            entries = list(r.iterdir())
            if all(e.is_file() and e.name in LOG_DIR_FILES for e in entries):
                for e in entries:
                    e.unlink(missing_ok=True)
                try:
                    r.rmdir()
                except OSError:
                    left.append(root)
            else:
                left.append(root)
        return left

    def _collect(self, older_than_s: float | None) -> None:
        collect_staging(self._partition_dirs(), job_id=self.job_id, older_than_s=older_than_s)

    def _partition_dirs(self) -> list[str]:
        """Every partition dir of the log dirs, each replica's of a replicated partition included."""
        dirs = [d for parts in existing_topics(self.opts.paths).values() for d in parts.values()]
        return dirs + [t for d in dirs for t in self.replicas.get(d, ())]

