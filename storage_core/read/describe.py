"""What is in a log dir, partition by partition: ``klog describe`` and :func:`storage_core.describe`.

One implementation for both: :func:`describe_partition` summarizes one partition dir, the CLI
prints the summaries as a table or JSON, and :func:`describe` hands them over as a
``pyarrow.Table`` (one row per topic-partition) for notebooks and scripts::

    import storage_core as klog

    info = klog.describe("/mnt/kafka-copy", topics="orders")   # the read-selection options of read_arrow
    info.to_pandas()

A summary comes from the indexes, the first batch header of each segment, the log dir's
checkpoints and the producer state; no record is decoded and nothing is written:

* ``start_offset``: the log start offset (the segments' first offset, or the log dir's
  ``log-start-offset-checkpoint`` where a broker advanced it by retention or DeleteRecords);
* ``end_offset``: the log end offset (exclusive), from the last segment's offset index and tail;
  for a replicated partition, the high watermark (where a consumer's read ends, below which the
  cluster committed every record: see ``broker`` below);
* ``last_stable_offset``: the first offset of the oldest transaction still open (where a
  ``read_committed`` read stops), else the end offset. It comes from the newest producer
  ``.snapshot`` at or below the end and the batch headers after it: a broker writes a snapshot at
  every segment roll and on shutdown, so this is short on a broker's dirs; where there is no
  snapshot (a dir written by klog without producer ids) every segment's batches are walked once;
* ``estimated_records``: ``end_offset - start_offset``, an upper bound where compaction left
  gaps and transaction markers take offsets;
* ``segments``, ``size_bytes``: the segment files and their bytes;
* ``first_timestamp``: the timestamp of the first record (as a consumer sees it: LogAppendTime,
  and a cleaned batch's delete horizon, taken into account); ``max_timestamp``: the largest record
  timestamp the time indexes know; ``None`` for a partition without timestamps;
* ``codecs``: every compression codec of the partition's batches (the attributes of each batch
  header: a walk of the headers, no record decompressed);
* ``topic_id``: the topic id the partition's ``partition.metadata`` holds (None without one);
  ``kraft_topic_id``: the id the KRaft metadata gives the topic (None without it, or when it does
  not know the topic); ``topic_id_matches``: whether the two are equal (None when either is
  missing). A mismatch is a partition of another incarnation of the topic (deleted and created
  again): a broker would treat the dir as stray. It is reported, not an error;
* ``configs``: ``name=value (source)`` for every topic config set above Kafka's defaults, by
  :func:`~storage_core.log.topic_configs.resolve_topic_config` (the config retention and
  compaction use): ``internal``, ``kraft cluster default``, ``kraft broker``, ``kraft topic``,
  ``klog-topic-configs.json``; ``configs_ignored``: KRaft configs klog could not apply, and why;
* ``lost``: what the dir's own evidence (index entries, the next segment's base offset, the
  recovery point, producer snapshots) says should be there and cannot be read, one line per lost
  range naming the offsets, the file and the bytes (:mod:`storage_core.log.lost`); empty when
  nothing is lost. A partition whose ``.log`` files are all gone is listed with its lost offsets;
* ``remote_start_offset``, ``remote_end_offset`` (exclusive), ``remote_segments``,
  ``remote_size_bytes``, ``remote_max_timestamp``: a tiered partition's remote history (KIP-405),
  from the log dirs' ``__remote_log_metadata`` walked by the partition's leader-epoch lineage as
  the broker's read path walks it (:mod:`storage_core.log.tiered`); None and 0 for a partition
  without remote segments. The local fields above describe the local segments only;
* ``kraft_metadata``: the log dir whose ``__cluster_metadata-0`` was replayed, or None: then the
  dir has no KRaft metadata (a ZooKeeper-era dir, or a copy without it), its topic configs are
  unknown and Kafka's defaults are assumed (:data:`NO_KRAFT_METADATA`, also in the table's schema
  metadata under ``klog.topic_configs``);
* ``broker``, ``leader``, ``leader_epoch``, ``isr``, ``elr``, ``replicas``, ``replica_notes``: a
  replicated partition (the dirs of several brokers of one cluster, or a partition whose KRaft ISR
  has several brokers): the broker whose replica is read, the KRaft registration's leader, leader
  epoch, in-sync and eligible replicas, and every replica found among the dirs (``broker``,
  ``path``, ``log_start_offset``, ``log_end_offset``, its checkpointed ``high_watermark`` and
  ``diverges_at``, the offset Kafka would truncate it to where it leaves the lineage of the
  replica read, whose records from there are never read); ``replica_notes`` says why that replica
  is read and what the others disagree on (:mod:`storage_core.log.replicas`). None and empty for a
  partition of one replica.

Indexes are trusted as they are (no recovery scan: ``klog verify`` checks them).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from storage_core.errors import InvalidOptionError, KlogError, PendingCommitError
from storage_core.files import has_log_files
from storage_core.fs import OPTION_PREFIX
from storage_core.log.checkpoint import PartitionMetadataFile
from storage_core.log.cluster_metadata import ClusterMetadata, find_cluster_metadata
from storage_core.log.dir_state import LogDirState, LogDirStates
from storage_core.log.log import Log
from storage_core.log.lost import gather_evidence, lost_data
from storage_core.log.manager import PartitionDir
from storage_core.log.tiered import TieredMetadata, load_remote_metadata, partition_history
from storage_core.log.topic_configs import load_topic_configs, resolve_topic_config
from storage_core.read.api import read_options
from storage_core.read.planner import select_partitions
from storage_core.record.records import DefaultRecordBatch

__all__ = ["DESCRIBE_SCHEMA", "NO_KRAFT_METADATA", "SELECTION_OPTIONS", "ConfigContext", "PartitionSummary",
           "describe", "describe_partition", "summaries_table"]

#: What describe says, once, for log dirs without KRaft metadata.
NO_KRAFT_METADATA = ("no __cluster_metadata in this log dir (ZooKeeper-era or a copy without it): topic configs "
                     "unknown, Kafka defaults assumed")


@dataclass(frozen=True)
class ConfigContext:
    """What a partition's config is resolved from: the log dirs' ``klog-topic-configs.json`` (a
    later dir's file wins, as in :class:`~storage_core.log.manager.LogManager`) and their KRaft
    metadata, if one of them holds it."""

    stored: dict[str, dict[str, str]]
    kraft: ClusterMetadata | None

    @classmethod
    def of(cls, log_dirs: Sequence[str | os.PathLike[str]]) -> ConfigContext:
        stored: dict[str, dict[str, str]] = {}
        for d in log_dirs:
            for topic, props in load_topic_configs(d).items():
                stored.setdefault(topic, {}).update(props)
        return cls(stored, find_cluster_metadata(log_dirs))


@dataclass
class PartitionSummary:
    """One topic-partition of a log dir, as ``klog describe`` reports it (see the module's docstring)."""

    topic: str
    partition: int
    path: str
    start_offset: int
    end_offset: int
    last_stable_offset: int
    estimated_records: int
    segments: int
    size_bytes: int
    first_timestamp: int | None  # epoch ms
    max_timestamp: int | None  # epoch ms
    codecs: list[str]
    topic_id: str | None = None
    kraft_topic_id: str | None = None
    topic_id_matches: bool | None = None
    configs: list[str] = field(default_factory=list)
    configs_ignored: list[str] = field(default_factory=list)
    kraft_metadata: str | None = None
    #: what the dir's evidence says should be there and cannot be read (:mod:`storage_core.log.lost`),
    #: one line per lost range naming the offsets, file and bytes; empty when nothing is lost
    lost: list[str] = field(default_factory=list)
    #: a tiered partition's remote history (``__remote_log_metadata``, :mod:`storage_core.log.tiered`):
    #: its first offset, end (exclusive), segments, bytes and largest timestamp; None/0 when not tiered
    remote_start_offset: int | None = None
    remote_end_offset: int | None = None
    remote_segments: int = 0
    remote_size_bytes: int = 0
    remote_max_timestamp: int | None = None  # epoch ms
    #: a replicated partition (several brokers' dirs, or the KRaft metadata's ISR): the broker whose
    #: replica is read and why, the registration's leader, leader epoch, ISR and ELR, and every
    #: replica found (broker, path, log start and end, checkpointed high watermark, and where Kafka
    #: would truncate it, ``diverges_at``, when it leaves the lineage of the one read); the
    #: ``end_offset`` is then the high watermark (:mod:`storage_core.log.replicas`). None/empty otherwise
    broker: int | None = None
    leader: int | None = None
    leader_epoch: int | None = None
    isr: list[int] = field(default_factory=list)
    elr: list[int] = field(default_factory=list)
    replicas: list[dict[str, Any]] = field(default_factory=list)
    replica_notes: list[str] = field(default_factory=list)


def _ids_and_configs(pd: PartitionDir, context: ConfigContext) -> dict[str, Any]:
    topic = pd.topic_partition.topic
    try:
        pm = PartitionMetadataFile.in_dir(pd.path).read()
    except KlogError:  # an unreadable partition.metadata: klog verify says why
        pm = None
    topic_id = None if pm is None else pm.topic_id_base64
    kraft = context.kraft
    kraft_id = None if kraft is None else kraft.topic_id(topic)
    resolved = resolve_topic_config(topic, context.stored, kraft=kraft)
    return {"topic_id": topic_id, "kraft_topic_id": kraft_id,
            "topic_id_matches": None if topic_id is None or kraft_id is None else topic_id == kraft_id,
            "configs": resolved.described(), "configs_ignored": list(resolved.ignored),
            "kraft_metadata": None if kraft is None else str(kraft.log_dir)}


def _remote_range(pd: PartitionDir, topic_id: str | None, tiered: TieredMetadata | None) -> dict[str, Any]:
    """The ``remote_*`` fields: the partition's remote history as a reader walks it."""
    history = partition_history(tiered, pd.topic_partition, pd.path, topic_id)
    if not history:
        return {}
    return {"remote_start_offset": history[0].start_offset, "remote_end_offset": history[-1].end_offset + 1,
            "remote_segments": len(history), "remote_size_bytes": sum(s.size_bytes for s in history),
            "remote_max_timestamp": max(s.max_timestamp_ms for s in history)}


def _replica_fields(pd: PartitionDir) -> dict[str, Any]:
    """The replica fields of a replicated partition (see :class:`PartitionSummary`)."""
    rs = pd.replicas
    if rs is None:
        return {}
    reg = rs.registration
    notes = [f"read from broker {rs.read.broker}: {rs.reason}", *rs.notes]
    if rs.problem:
        notes.append(rs.problem)
    for r in rs.divergent:
        assert r.diverges_at is not None
        notes.append(f"broker {r.broker}'s replica diverges from the one read at offset {r.diverges_at}: Kafka would "
                     f"truncate its offsets {r.diverges_at}..{r.log_end_offset - 1}, which are never read")
    return {"broker": rs.read.broker, "leader": None if reg is None else reg.leader,
            "leader_epoch": None if reg is None else reg.leader_epoch,
            "isr": [] if reg is None else list(reg.isr), "elr": [] if reg is None else list(reg.elr),
            "replicas": [{"broker": r.broker, "path": str(r.path), "log_start_offset": r.log_start_offset,
                          "log_end_offset": r.log_end_offset, "high_watermark": r.checkpoint_high_watermark,
                          "diverges_at": r.diverges_at} for r in rs.replicas],
            "replica_notes": notes}


def describe_partition(pd: PartitionDir, context: ConfigContext | None = None,
                       state: LogDirState | None = None, tiered: TieredMetadata | None = None) -> PartitionSummary:
    """The summary of one partition dir (read-only: no lock, no recovery, no byte written);
    ``context`` defaults to the partition's own log dir's, ``state`` (its log dir's checkpoints,
    marker and journals, :mod:`storage_core.log.dir_state`) to a fresh read of them; ``tiered``: the
    log dirs' remote log metadata, for a tiered partition's remote range (None: not described)."""
    tp = pd.topic_partition
    extra = _ids_and_configs(pd, context or ConfigContext.of([pd.log_dir]))
    extra.update(_remote_range(pd, extra["topic_id"], tiered))
    extra.update(_replica_fields(pd))
    if state is None:
        state = LogDirState(pd.log_dir)
    evidence = gather_evidence(pd, state)  # before the open: a live broker only adds data after it
    if not has_log_files(pd.path):  # only orphan indexes (Kafka deletes them and starts empty), or lost data
        return PartitionSummary(tp.topic, tp.partition, str(pd.path), start_offset=0, end_offset=0,
                                last_stable_offset=0, estimated_records=0, segments=0, size_bytes=0,
                                first_timestamp=None, max_timestamp=None, codecs=[], **extra,
                                lost=[str(x) for x in lost_data(pd, None, evidence)])
    # indexes are trusted (no recovery: describe decodes no records), the log start offset is the
    # log dir's checkpoint where a broker advanced it (retention, DeleteRecords)
    with Log(pd.path, state.config_for(tp.topic), had_clean_shutdown=True, log_start_offset=state.log_starts.get(tp),
             dir_state=state) as log:
        log.bound_to(pd.high_watermark)  # a replica: what the cluster committed
        lost = [str(x) for x in lost_data(pd, log, evidence)]
        damaged: list[str] = []  # what the header walks below met: named by a full lost-data scan
        codecs: set[str] = set()
        first_ts = None
        max_ts = -1
        for seg in log.segments:
            try:
                for i, batch in enumerate(seg.batches()):  # headers only: no record is decompressed
                    codecs.add(batch.compression.label)
                    if i == 0 and first_ts is None and batch.max_timestamp >= 0:
                        first_ts = (batch.first_timestamp if isinstance(batch, DefaultRecordBatch)
                                    else batch.max_timestamp)
                max_ts = max(max_ts, seg.max_timestamp_so_far.timestamp)
            except KlogError as exc:
                damaged.append(str(exc))
        start, end = log.log_start_offset, log.high_watermark
        try:
            lso = log.last_stable_offset
        except KlogError as exc:  # batches after the newest snapshot are damaged
            damaged.append(str(exc))
            lso = end
        if damaged and not lost:
            lost = [str(x) for x in lost_data(pd, log, evidence, full=True)] or damaged
        return PartitionSummary(tp.topic, tp.partition, str(pd.path), start_offset=start, end_offset=end,
                                last_stable_offset=lso, estimated_records=end - start,
                                segments=len(log.segments), size_bytes=log.size_in_bytes, first_timestamp=first_ts,
                                max_timestamp=max_ts if max_ts >= 0 else None, codecs=sorted(codecs), **extra,
                                lost=lost)


_TIMESTAMP = pa.timestamp("ms", tz="UTC")

#: The columns of :func:`describe`'s table, one row per topic-partition.
DESCRIBE_SCHEMA = pa.schema([
    pa.field("topic", pa.string(), nullable=False),
    pa.field("partition", pa.int32(), nullable=False),
    pa.field("start_offset", pa.int64(), nullable=False),
    pa.field("end_offset", pa.int64(), nullable=False),
    pa.field("last_stable_offset", pa.int64(), nullable=False),
    pa.field("estimated_records", pa.int64(), nullable=False),
    pa.field("segments", pa.int32(), nullable=False),
    pa.field("size_bytes", pa.int64(), nullable=False),
    pa.field("first_timestamp", _TIMESTAMP),
    pa.field("max_timestamp", _TIMESTAMP),
    pa.field("codecs", pa.list_(pa.string()), nullable=False),
    pa.field("path", pa.string(), nullable=False),
    pa.field("topic_id", pa.string()),
    pa.field("kraft_topic_id", pa.string()),
    pa.field("topic_id_matches", pa.bool_()),
    pa.field("configs", pa.list_(pa.string()), nullable=False),
    pa.field("configs_ignored", pa.list_(pa.string()), nullable=False),
    pa.field("kraft_metadata", pa.string()),
    pa.field("lost", pa.list_(pa.string()), nullable=False),
    pa.field("remote_start_offset", pa.int64()),
    pa.field("remote_end_offset", pa.int64()),
    pa.field("remote_segments", pa.int32(), nullable=False),
    pa.field("remote_size_bytes", pa.int64(), nullable=False),
    pa.field("remote_max_timestamp", _TIMESTAMP),
    pa.field("broker", pa.int32()),
    pa.field("leader", pa.int32()),
    pa.field("leader_epoch", pa.int32()),
    pa.field("isr", pa.list_(pa.int32()), nullable=False),
    pa.field("elr", pa.list_(pa.int32()), nullable=False),
    pa.field("replicas", pa.list_(pa.struct([
        pa.field("broker", pa.int32()), pa.field("path", pa.string(), nullable=False),
        pa.field("log_start_offset", pa.int64(), nullable=False), pa.field("log_end_offset", pa.int64(), nullable=False),
        pa.field("high_watermark", pa.int64()), pa.field("diverges_at", pa.int64())])), nullable=False),
    pa.field("replica_notes", pa.list_(pa.string()), nullable=False),
])


def summaries_table(rows: Sequence[PartitionSummary]) -> pa.Table:
    """Summaries as a table of :data:`DESCRIBE_SCHEMA` (timestamps as UTC ``timestamp[ms]``); where a
    row has no KRaft metadata, the schema metadata ``klog.topic_configs`` says so
    (:data:`NO_KRAFT_METADATA`)."""
    columns = {name: [getattr(r, name) for r in rows] for name in DESCRIBE_SCHEMA.names}
    table = pa.Table.from_pydict(columns, schema=DESCRIBE_SCHEMA)
    if any(r.kraft_metadata is None for r in rows):
        table = table.replace_schema_metadata({"klog.topic_configs": NO_KRAFT_METADATA})
    return table


#: The options :func:`describe` takes (lower-cased): those that choose partitions, by Spark's names.
SELECTION_OPTIONS = ("topics", "subscribe", "topicpattern", "subscribepattern", "assign")


def describe(path: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], **options: object) -> pa.Table:
    """What is in a log dir: one row per topic-partition, sorted by topic and partition.

    ``path`` is what :func:`storage_core.read_arrow` takes: a Kafka log dir, several (a list or
    ``"dir1,dir2"``, like ``log.dirs``), or one ``<topic>-<partition>`` dir. ``options`` are the
    read-selection options of ``spark.read.format("klog")``, by the same names (any case), and the
    ``fs.*`` options of a path in object storage (:mod:`storage_core.fs`):
    ``topics`` (a list or ``"a,b"``; each must exist), ``topicPattern`` (a regex matching the whole
    name) or ``assign`` (``{"orders": [0, 1]}``); none selects every partition with segments. Other
    read options are an :class:`~storage_core.errors.InvalidOptionError`.

    Columns (:data:`DESCRIBE_SCHEMA`): ``topic``, ``partition``, ``start_offset`` (the log start
    offset), ``end_offset`` (the log end offset, exclusive), ``last_stable_offset``,
    ``estimated_records`` (end - start), ``segments``, ``size_bytes``, ``first_timestamp``,
    ``max_timestamp`` (UTC), ``codecs``, ``path`` and ``lost`` (lost offsets, see the module); the same figures as ``klog describe --json``.
    Nothing is decoded or written. A partition whose first commit is still being applied by a
    running job is left out (it is empty until the commit completes).
    """
    wrong = sorted(k for k in options if k.lower() not in SELECTION_OPTIONS and not k.lower().startswith(OPTION_PREFIX))
    if wrong:
        raise InvalidOptionError(f"describe takes only the options that select partitions (topics, topicPattern, "
                                 f"assign) and the fs.* options of a URI path, not {', '.join(wrong)}")
    opts = read_options(path, **options)
    states = LogDirStates()  # each dir's checkpoints, marker and journals read once, not once per partition
    absent: dict[Any, tuple[int, ...]] = {}
    selected = select_partitions(opts, states=states, replicas_checked=False, absent=absent)
    _warn_absent(absent)
    context = ConfigContext.of(_log_dirs(opts.log_dirs, selected))
    tiered = load_remote_metadata(dict.fromkeys([*(pd.log_dir for pd in selected), *opts.log_dirs]), opts.storage)
    rows = []
    for pd in selected:
        try:
            rows.append(describe_partition(pd, context, states.of(pd.log_dir), tiered))
        except PendingCommitError:
            continue
    return _with_skipped(summaries_table(rows), opts.log_dirs)


def _warn_absent(absent: dict[Any, tuple[int, ...]]) -> None:
    """Partitions the KRaft metadata assigns to brokers none of whose dirs is given: a warning each
    (a describe shows what the dirs hold; a read of them fails, :func:`~storage_core.read.planner.check_replicas`)."""
    import logging

    for tp, brokers in sorted(absent.items()):
        logging.getLogger("klog").warning("describe: %s: no replica is among the log dirs; it is on brokers %s", tp,
                                          ", ".join(map(str, brokers)))


def _with_skipped(table: pa.Table, paths: Sequence[Path]) -> pa.Table:
    """``table`` with the dirs that were not read (names that are not ``<topic>-<partition>``) in its
    schema metadata (``klog.skipped``: JSON ``[[path, why], ...]``), each also logged as a warning
    on the ``klog`` logger: nothing is left out in silence."""
    import json
    import logging

    from storage_core.log.manager import skipped_dirs

    skipped = skipped_dirs(paths)
    for path, why in skipped:
        logging.getLogger("klog").warning("describe: skipped %s: %s", path, why)
    if not skipped:
        return table
    return table.replace_schema_metadata({**(table.schema.metadata or {}), b"klog.skipped": json.dumps(skipped).encode()})


def _log_dirs(paths: Sequence[Path], parts: Sequence[PartitionDir]) -> list[Path]:
    """The log dirs of a describe: each partition's, and each given path that is not a partition
    dir (the dir holding ``__cluster_metadata-0`` need not hold a selected partition)."""
    partition_dirs = {pd.path for pd in parts}
    out: list[Path] = []
    for d in [*(pd.log_dir for pd in parts), *(p for p in paths if p.is_dir())]:
        if d not in out and d not in partition_dirs:
            out.append(d)
    return out
