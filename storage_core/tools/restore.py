"""``klog restore``: records taken out of Kafka (a log dir or a ``klog snapshot`` of one, a ``klog
export`` Parquet file or dir, a Delta or Iceberg table ``klog sync`` made) written back into a log dir
at their **original offsets**, so that a broker started on it serves them where the source had them.

What is kept, per record: topic, partition, offset, key, value, headers, timestamp and timestamp
type. A LogAppendTime record goes into a batch whose attributes say LogAppendTime and whose
maxTimestamp is its time, as a broker stores it (``LogValidator``; a reader takes a LogAppendTime
record's timestamp from its batch's maxTimestamp, ``DefaultRecordBatch``); consecutive records
of one type (and, for LogAppendTime, one time) share batches. Gaps between offsets stay gaps: they
are offset deltas within a batch, as compaction leaves them. A log dir is read ``read_committed``
(:func:`storage_core.read.api.read_arrow`), so aborted records and transaction markers are not
restored. Not kept: producer ids, epochs and sequences (the batches are written without a
producer, as ``klog``'s writer writes them), batch boundaries, compression (``compression`` chooses
one for all), leader epochs (the target partition's are stamped).

The rules of the target, checked before anything is written:

- the topic must be one its KRaft metadata knows, when the dir is a broker's (the writer's one rule,
  :func:`~storage_core.log.cluster_metadata.check_new_topic`), and a partition it lists; internal
  topics are refused (:func:`~storage_core.log.topic_partition.check_appendable`);
- no broker may hold the dir (:func:`~storage_core.log.lock.check_free_to_stage`; the commit takes
  the lock);
- each partition must end at or below the first offset restored into it
  (:func:`~storage_core.log.staged.check_ends_at_or_below`, asked again by the commit under the lock); a gap
  is allowed, the records starting a segment of their own. A partition that was empty gets that
  first offset as its log start offset (a consumer at ``earliest`` starts there).

The source's first offset of a partition (its log start offset for a log dir, the first row's for
Parquet and tables) is what the target's end is checked against; the first restored record's offset
is where the partition's first new segment starts (and its log start, when it was empty). The records
are staged and committed by the staged-write protocol (:mod:`storage_core.log.staged`), with each
partition's offsets pinned: a crash at any step leaves the target as it was.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from storage_core.errors import InvalidTopicError, RestoreError
from storage_core.files import staging_prefix
from storage_core.log.cluster_metadata import check_new_topic, find_cluster_metadata
from storage_core.log.journal import journal_path
from storage_core.log.lock import check_free_to_stage
from storage_core.log.staged import (
    StagedPartition,
    StagingWriter,
    check_at_offsets,
    collect_staging,
    commit_job,
)
from storage_core.log.topic_configs import config_for_topic, load_topic_configs
from storage_core.log.topic_partition import INTERNAL_TOPICS, TopicPartition, check_appendable, validate_topic_name
from storage_core.record.columnar import DEFAULT_BATCH_BYTES, EncodeBuffer
from storage_core.record.compression import CompressionType
from storage_core.workers import pool_size, stream_in_order

#: the columns a Parquet source must have (what ``klog export`` writes), besides ``value``
PARQUET_COLUMNS = ("topic", "partition", "offset")


@dataclass(frozen=True)
class RestoredPartition:
    """What a restore wrote into one partition: offsets ``[first, end)``, ``records`` of them."""

    topic: str
    partition: int
    first: int
    end: int
    records: int


@dataclass(frozen=True)
class RestoreSummary:
    """What :func:`restore` wrote, per partition (in topic, partition order)."""

    target: str
    partitions: tuple[RestoredPartition, ...]

    @property
    def records(self) -> int:
        return sum(p.records for p in self.partitions)


@dataclass(frozen=True)
class _Source:
    """A source opened: each partition's first offset (the restored partition's base) and its rows."""

    description: str
    starts: dict[TopicPartition, int]
    batches: Iterator[pa.RecordBatch]


def _parquet_files(path: Path) -> list[Path] | None:
    """The Parquet files of a ``klog export`` (a file, or a dir of them), or None: not Parquet."""
    if path.is_file():
        return [path] if path.suffix == ".parquet" else None
    files = sorted(p for p in path.iterdir() if p.is_file() and p.suffix == ".parquet" and not p.name.startswith("."))
    return files or None


class _Index:
    """Each partition's first offset over the rows of a source's files or tables, in their order, each
    partition's offsets checked to increase from one to the next."""

    def __init__(self) -> None:
        self.starts: dict[TopicPartition, int] = {}
        self.last: dict[TopicPartition, int] = {}
        self.held: set[str] = set()

    def add(self, where: str, names: Sequence[str], index: pa.Table, topics: Sequence[str] | None) -> None:
        """``index``: the ``topic``, ``partition`` and ``offset`` columns of ``where`` (its columns ``names``)."""
        missing = [c for c in (*PARQUET_COLUMNS, "value") if c not in names]
        if missing:
            raise RestoreError(f"{where} has no {', '.join(repr(c) for c in missing)} column; expected the columns a "
                               f"klog export writes (topic, partition, offset, key, value, timestamp, timestampType), "
                               f"so that each record goes back at its partition and offset; found {list(names)}")
        self.held.update(str(t) for t in pc.unique(index.column("topic")).to_pylist())
        for tp, offsets in _runs(index, topics):
            first, top = int(offsets[0]), self.last.get(tp)
            bad = np.flatnonzero(np.diff(offsets) <= 0)
            if (top is not None and first <= top) or len(bad):
                at, prev = (first, top) if top is not None and first <= top else \
                    (int(offsets[bad[0] + 1]), int(offsets[bad[0]]))
                raise RestoreError(f"{where}: offset {at} of {tp} follows offset {prev}; expected each partition's "
                                   "offsets increasing, each once, as a klog export or sync writes them")
            self.starts.setdefault(tp, first)
            self.last[tp] = int(offsets[-1])

    def check_topics(self, where: str, topics: Sequence[str] | None) -> None:
        absent = sorted(set(topics or ()) - self.held)
        if absent:
            raise RestoreError(f"{where} holds no record of topic {', '.join(map(repr, absent))}; expected one of "
                               f"the topics it holds: {sorted(self.held)}")


def _open_parquet(files: list[Path], topics: Sequence[str] | None) -> _Source:
    import pyarrow.parquet as pq

    index = _Index()
    for f in files:
        names = pq.read_schema(f).names
        index.add(str(f), names, pq.read_table(f, columns=[c for c in PARQUET_COLUMNS if c in names]), topics)
    where = ", ".join(map(str, files))
    index.check_topics(where, topics)

    # row groups decoded on threads, the next ones while the caller stages these, the rows in file order:
    # Parquet's decode is what a restore from an export waits for most
    groups = [(f, g) for f in files for g in range(pq.ParquetFile(f).num_row_groups)]

    def batches(group: tuple[Path, int]) -> Iterator[pa.RecordBatch]:
        return iter(pq.ParquetFile(group[0]).read_row_group(group[1]).to_batches(max_chunksize=1 << 16))

    return _Source(where, index.starts, stream_in_order(groups, batches, pool_size(None, len(groups)), depth=4))


def _latest_iceberg_metadata(path: Path) -> Path | None:
    """The newest ``metadata/<version>-<uuid>.metadata.json`` of an Iceberg table's dir, or None: not one."""
    found = sorted(path.glob("metadata/*.metadata.json"), key=lambda p: (int(p.name.split("-", 1)[0])
                                                                        if p.name.split("-", 1)[0].isdigit() else -1,
                                                                        p.name))
    return found[-1] if found else None


def _open_table(path: Path, topics: Sequence[str] | None) -> _Source | None:
    """A table ``klog sync`` made, by its dir: Delta (``_delta_log``) or Iceberg (``metadata/*.metadata.json``,
    read from its newest metadata file without a catalog); None: neither. Its rows are read whole and put in
    offset order (a table's files need not be in commit order)."""
    if (path / "_delta_log").is_dir():
        from deltalake import DeltaTable

        table = DeltaTable(str(path)).to_pyarrow_table()
    else:
        metadata = _latest_iceberg_metadata(path) if path.is_dir() else None
        if metadata is None:
            return None
        from pyiceberg.table import StaticTable

        table = StaticTable.from_metadata(str(metadata)).scan().to_arrow()
    names = table.column_names
    if all(c in names for c in PARQUET_COLUMNS):
        if topics is not None:
            table = table.filter(pc.is_in(table.column("topic"), pa.array(list(topics), table.column("topic").type)))
        table = table.sort_by([("topic", "ascending"), ("partition", "ascending"), ("offset", "ascending")])
    index = _Index()
    index.add(str(path), names, table.select([c for c in PARQUET_COLUMNS if c in names]), topics)
    index.check_topics(str(path), topics)
    return _Source(str(path), index.starts, iter(table.to_batches(max_chunksize=1 << 16)))


def _open_log_dir(path: Path, topics: Sequence[str] | None) -> _Source:
    """A log dir's records, read ``read_committed`` from one plan: its ranges give each partition's
    first offset, its pieces (those of the chosen topics) the rows."""
    from storage_core.read.api import read_options
    from storage_core.read.piece_reader import read_pieces
    from storage_core.read.planner import plan_read

    options: dict[str, object] = {"isolationLevel": "read_committed", "includeHeaders": True}
    if topics is not None:
        options["topics"] = list(topics)
    opts = read_options(str(path), **options)
    the_plan = plan_read(opts)
    chosen = {r.topic_partition.topic for r in the_plan.ranges} - (INTERNAL_TOPICS if topics is None else set())
    starts = {r.topic_partition: r.start for r in the_plan.ranges
              if r.topic_partition.topic in chosen and r.end > r.start}
    pieces = [pc for pc in the_plan.pieces if pc.topic in chosen]
    batches = read_pieces(pieces, include_headers=True, fail_on_data_loss=opts.fail_on_data_loss,
                          threads=opts.max_threads)
    return _Source(str(path), starts, batches)


def _runs(table: pa.Table | pa.RecordBatch, topics: Sequence[str] | None
          ) -> Iterator[tuple[TopicPartition, np.ndarray]]:
    """The rows of ``table`` (``topic``, ``partition``, ``offset``) cut where the partition changes: each
    run's partition and its offsets (runs of topics not in ``topics`` left out)."""
    for tp, a, b in _partition_runs(table, topics):
        yield tp, table.column("offset").slice(a, b - a).to_numpy(zero_copy_only=False).astype(np.int64)


def _partition_runs(table: pa.Table | pa.RecordBatch, topics: Sequence[str] | None
                    ) -> Iterator[tuple[TopicPartition, int, int]]:
    n = table.num_rows
    if not n:
        return
    topic = table.column("topic")
    part = table.column("partition")
    if topic.null_count or part.null_count:
        raise RestoreError("a row has a null topic or partition; expected every row's (klog export writes them)")
    cut = pc.or_(pc.not_equal(topic.slice(1), topic.slice(0, n - 1)),
                 pc.not_equal(part.slice(1), part.slice(0, n - 1)))
    bounds = [0, *(np.flatnonzero(np.asarray(cut.to_numpy(zero_copy_only=False))) + 1).tolist(), n]
    wanted = None if topics is None else set(topics)
    for a, b in zip(bounds, bounds[1:], strict=False):
        t = str(topic[a].as_py())
        if (wanted is None and t in INTERNAL_TOPICS) or (wanted is not None and t not in wanted):
            continue
        yield TopicPartition(t, int(part[a].as_py())), a, b


def _open_source(source: str | os.PathLike[str], topics: Sequence[str] | None) -> _Source:
    path = Path(source)
    if not path.exists():
        raise RestoreError(f"source {source} does not exist; expected a log dir, a klog snapshot, or a klog export "
                           "Parquet file or dir")
    table = _open_table(path, topics)
    if table is not None:
        return table
    files = _parquet_files(path)
    return _open_parquet(files, topics) if files is not None else _open_log_dir(path, topics)


def _check_target(target: Path, topics: Iterable[str], partitions: Iterable[TopicPartition],
                  lock_timeout_s: float) -> None:
    """Every refusal of the target, before anything is written (see the module's doc)."""
    check_free_to_stage(target, lock_timeout_s)
    kraft = find_cluster_metadata([target]) if target.is_dir() else None
    _check_names(topics)
    for topic in sorted(set(topics)):
        check_new_topic(kraft, topic)
    for tp in sorted(partitions):
        if kraft is None:
            continue
        known = kraft.topics.get(tp.topic)
        if known is not None and tp.partition not in known.partitions:
            raise InvalidTopicError(f"partition {tp} is not in the KRaft metadata of {kraft.log_dir}, which gives "
                                    f"{tp.topic!r} partitions {sorted(known.partitions)}; expected a partition of the "
                                    "topic as it was created (kafka-topics.sh --create with the source's partition "
                                    "count)")
        reg = kraft.partition(tp.topic, tp.partition)
        if reg is not None and (kraft.node_id or "").isdigit() and reg.replicas and int(kraft.node_id or 0) not in reg.replicas:
            raise InvalidTopicError(f"partition {tp} is not hosted by broker {kraft.node_id}, whose log dir {target} "
                                    f"is: its replicas are brokers {list(reg.replicas)}, and a broker treats a "
                                    "partition dir it does not host as stray; expected the log dir of one of them")


def _check_names(topics: Iterable[str]) -> None:
    """Topics Kafka would not take: an invalid name, an internal topic."""
    for topic in sorted(set(topics)):
        validate_topic_name(topic)
        check_appendable(topic)


def restore(source: str | os.PathLike[str], target_dir: str | os.PathLike[str], *,
            topics: Sequence[str] | str | None = None, compression: CompressionType | str = CompressionType.NONE,
            lock_timeout_s: float = 0.0, max_batch_bytes: int = DEFAULT_BATCH_BYTES) -> RestoreSummary:
    """Restore the records of ``source`` into the log dir ``target_dir`` at their original offsets.

    ``source``: a log dir or a ``klog snapshot`` of one (read ``read_committed``), a ``klog export``
    Parquet file or dir of them, or the dir of a Delta or Iceberg table ``klog sync`` made.
    ``topics``: those to restore (default: every topic of the source but Kafka's internal ones).
    ``compression``: the codec of the written batches.
    ``lock_timeout_s``: how long to wait for another klog writer's lock (a broker's is refused at
    once). Raises :class:`~storage_core.errors.RestoreError` (a source without offsets),
    :class:`~storage_core.errors.OffsetOverlapError` (a partition holding offsets at or above the
    first one restored), :class:`~storage_core.errors.InvalidTopicError` (a topic the dir's KRaft
    metadata does not know, an internal topic) or :class:`~storage_core.errors.LogDirLockedError` (a
    broker holds the dir) before anything is written; the commit is atomic."""
    wanted = [topics] if isinstance(topics, str) else None if topics is None else list(topics)
    codec = compression if isinstance(compression, CompressionType) else CompressionType.from_name(compression)
    target = Path(target_dir)
    _check_names(wanted or ())
    src = _open_source(source, wanted)
    _check_target(target, {tp.topic for tp in src.starts} | set(wanted or ()), src.starts, lock_timeout_s)
    kraft = find_cluster_metadata([target]) if target.is_dir() else None
    stored = load_topic_configs(target) if target.is_dir() else {}
    configs = {t: config_for_topic(t, stored, kraft=kraft) for t in {tp.topic for tp in src.starts}}
    for tp, first in sorted(src.starts.items()):
        check_at_offsets(target, tp, configs[tp.topic], [(first, first)])
    # every refusal asked: from here on the target is written (staging, then the commit)
    target.mkdir(parents=True, exist_ok=True)
    job = uuid.uuid4().hex[:16]
    writers: dict[TopicPartition, StagingWriter] = {}
    counts: dict[TopicPartition, int] = {}
    buffer = EncodeBuffer()
    try:
        for batch in src.batches:
            for tp, a, b in _partition_runs(batch, wanted):
                w = writers.get(tp)
                if w is None:
                    if tp not in src.starts:
                        raise RestoreError(f"{src.description}: rows of {tp}, which its index of partitions did not "
                                           "list; expected the source not to change during the restore")
                    pdir = target / tp.dir_name
                    pdir.mkdir(exist_ok=True)
                    reg = kraft.partition(tp.topic, tp.partition) if kraft is not None else None
                    # the partition's first segment starts at its first restored record (at or above the
                    # source's first offset, checked above: a read_committed source may begin with
                    # records it leaves out)
                    first = int(batch.column("offset")[a].as_py())
                    w = writers[tp] = StagingWriter(pdir, staging_prefix(job) + "restore", configs[tp.topic], codec,
                                                    max_batch_bytes, buffer, None if reg is None else reg.leader_epoch,
                                                    pinned_base=first)
                counts[tp] = counts.get(tp, 0) + w.append_rows_at(batch.slice(a, b - a))
        staged: list[StagedPartition] = [w.finish() for w in writers.values()]
    except BaseException:
        for w in writers.values():
            w.discard()
        raise
    try:
        committed = commit_job(job, [sp for sp in staged if sp.segments], lock_timeout_s=lock_timeout_s)
    except BaseException:
        # refused before its journal was written (a partition that moved since the checks): the staging
        # goes; a journal written is settled by the next writable open, which removes it with the commit
        if not journal_path(target, job).exists():
            collect_staging([w.partition_dir for w in writers.values()], job_id=job)
        raise
    done = [RestoredPartition(tp.topic, tp.partition, first, end, counts.get(tp, 0))
            for tp, (first, end) in sorted(committed.items())]
    return RestoreSummary(str(target), tuple(done))
