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

A cluster's log dirs (``"b1/data,b2/data,b3/data"``, or a glob, as the read paths take them) are
one target: each replicated partition is staged in its replica read (the leader's dir) and every
other replica given gets the same batches at the same offsets in the same commit, by the writer's
rule (:func:`~storage_core.log.replicas.write_targets`): a partition whose in-sync replicas are not
all among the dirs, or do not end at the same offset, is refused, since a follower truncates to
its leader when the cluster starts and a record only one replica holds would be lost without a
word. The same rule refuses one broker's dir alone for a replicated partition, and places the
groups' ``__consumer_offsets`` partitions (replicated too) when ``groups`` is given. The partition dirs
must exist: the brokers make them when the topic is created (start the cluster once after
``kafka-topics.sh --create``).

The source's first offset of a partition (its log start offset for a log dir, the first row's for
Parquet and tables) is what the target's end is checked against; the first restored record's offset
is where the partition's first new segment starts (and its log start, when it was empty). The records
are staged and committed by the staged-write protocol (:mod:`storage_core.log.staged`), with each
partition's offsets pinned: a crash at any step leaves the target as it was.

**New offsets** (``offsets="new"``): the records are appended at each partition's log end instead,
consecutive from it, the staged base pinned to the end the checks saw (a partition that grows before
the commit makes it refuse, rather than shift the records); no overlap is refused, and a Parquet
source without an ``offset`` column is taken (each partition's rows in file order). The summary
holds the translation from source to target offsets.

**Consumer groups** (``groups=...``): their committed offsets are restored in the same job as the
records (:mod:`storage_core.tools.restore_groups`' planning and staging, one
:func:`~storage_core.log.staged.commit_job`): every refusal of the groups is asked with the records',
before anything is written, against the target's partitions as the restore will leave them; the
offsets are mapped once the records are staged (kept, or translated to the new offsets), and records
and groups become visible together.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, get_args

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from storage_core.errors import GroupRestoreError, InvalidTopicError, ReplicatedWriteError, RestoreError
from storage_core.files import staging_prefix
from storage_core.fs import OPTION_PREFIX, StorageOptions, uri_scheme
from storage_core.log.cluster_metadata import ClusterMetadata, check_new_topic, find_cluster_metadata
from storage_core.log.journal import journal_path
from storage_core.log.lock import check_free_to_stage
from storage_core.log.manager import find_partitions
from storage_core.log.replicas import write_targets
from storage_core.log.staged import (
    StagedPartition,
    StagingWriter,
    check_at_offsets,
    collect_staging,
    commit_job,
)
from storage_core.log.topic_configs import config_for_topic, load_topic_configs
from storage_core.log.topic_partition import (
    GROUP_OFFSETS_TOPIC,
    INTERNAL_TOPICS,
    TopicPartition,
    check_appendable,
    validate_topic_name,
)
from storage_core.record.columnar import DEFAULT_BATCH_BYTES, EncodeBuffer
from storage_core.record.compression import CompressionType
from storage_core.tools.restore_groups import (
    UNMAPPED_POLICIES,
    KeptOffsets,
    OffsetTranslation,
    RestoredOffset,
    RestoreGroupsReport,
    SkippedOffset,
    Translate,
    Unmapped,
    offsets_partitions,
    plan_groups,
    stage_groups,
    target_dirs,
    target_range,
)
from storage_core.workers import pool_size, stream_in_order

#: the columns a Parquet source must have (what ``klog export`` writes), besides ``value``
PARQUET_COLUMNS = ("topic", "partition", "offset")


@dataclass(frozen=True)
class RestoredPartition:
    """What a restore wrote into one partition: offsets ``[first, end)``, ``records`` of them; with new
    offsets (``offsets="new"``), the source offsets of the first and last records restored
    (``source_first``, ``source_last``; None for a source without offsets, or offsets kept)."""

    topic: str
    partition: int
    first: int
    end: int
    records: int
    source_first: int | None = None
    source_last: int | None = None


@dataclass(frozen=True)
class RestoreSummary:
    """What :func:`restore` wrote, per partition (in topic, partition order), and the groups it restored
    in the same commit (``groups``; None when none were asked). ``offsets``: ``keep`` or ``new``;
    ``translation``: with new offsets, each restored partition's source offsets to target offsets
    (:class:`~storage_core.tools.restore_groups.OffsetTranslation`; None with offsets kept, or a source
    without offsets)."""

    target: str
    partitions: tuple[RestoredPartition, ...]
    offsets: str = "keep"
    groups: RestoreGroupsReport | None = None
    translation: OffsetTranslation | None = field(default=None, compare=False, repr=False)

    @property
    def records(self) -> int:
        return sum(p.records for p in self.partitions)


@dataclass(frozen=True)
class _Source:
    """A source opened: each partition's first offset (the restored partition's base) and its rows;
    ``ends``, each partition's end (its high watermark for a log dir, the last offset + 1 for Parquet
    and tables; for a log dir only when asked: it takes a second plan); ``kind``: ``log dir``,
    ``parquet`` or ``table``; ``has_offsets``: False for Parquet without an ``offset`` column (taken
    with new offsets only: its ``starts`` are 0, its rows numbered in file order)."""

    description: str
    starts: dict[TopicPartition, int]
    batches: Iterator[pa.RecordBatch]
    ends: dict[TopicPartition, int] = field(default_factory=dict)
    kind: str = "log dir"
    has_offsets: bool = True


def _parquet_files(path: Path) -> list[Path] | None:
    """The Parquet files of a ``klog export`` (a file, or a dir of them), or None: not Parquet."""
    if path.is_file():
        return [path] if path.suffix == ".parquet" else None
    files = sorted(p for p in path.iterdir() if p.is_file() and p.suffix == ".parquet" and not p.name.startswith("."))
    return files or None


class _Index:
    """Each partition's first offset over the rows of a source's files or tables, in their order, each
    partition's offsets checked to increase from one to the next."""

    def __init__(self, offsets_required: bool = True) -> None:
        self.starts: dict[TopicPartition, int] = {}
        self.last: dict[TopicPartition, int] = {}
        self.held: set[str] = set()
        self.offsets_required = offsets_required
        self.has_offsets = True

    def add(self, where: str, names: Sequence[str], index: pa.Table, topics: Sequence[str] | None) -> None:
        """``index``: the ``topic``, ``partition`` and ``offset`` columns of ``where`` (its columns ``names``).
        Without ``offsets_required`` (new offsets), a source without an ``offset`` column is taken: each
        partition's rows in their order, its ``starts`` 0."""
        needed = (*PARQUET_COLUMNS, "value") if self.offsets_required or "offset" in names else \
            ("topic", "partition", "value")
        missing = [c for c in needed if c not in names]
        if missing:
            raise RestoreError(f"{where} has no {', '.join(repr(c) for c in missing)} column; expected the columns a "
                               f"klog export writes (topic, partition, offset, key, value, timestamp, timestampType), "
                               f"so that each record goes back at its partition and offset"
                               + (" (or new offsets, appended at each partition's end: offsets='new', klog restore "
                                  "--offsets new)" if "offset" in missing else "")
                               + f"; found {list(names)}")
        if ("offset" in names) != self.has_offsets and (self.starts or self.held):
            raise RestoreError(f"{where} {'has' if 'offset' in names else 'has no'} 'offset' column, unlike the "
                               "files before it; expected all of the source's files with offsets, or none")
        self.held.update(str(t) for t in pc.unique(index.column("topic")).to_pylist())
        if "offset" not in names:
            self.has_offsets = False
            for tp, _, _ in _partition_runs(index, topics):
                self.starts.setdefault(tp, 0)
            return
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

    def ends(self) -> dict[TopicPartition, int]:
        """Each partition's end: its last offset + 1 (none without offsets)."""
        return {tp: last + 1 for tp, last in self.last.items()}

    def check_topics(self, where: str, topics: Sequence[str] | None) -> None:
        absent = sorted(set(topics or ()) - self.held)
        if absent:
            raise RestoreError(f"{where} holds no record of topic {', '.join(map(repr, absent))}; expected one of "
                               f"the topics it holds: {sorted(self.held)}")


def _open_parquet(files: list[Path], topics: Sequence[str] | None, offsets_required: bool) -> _Source:
    import pyarrow.parquet as pq

    index = _Index(offsets_required)
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

    return _Source(where, index.starts, stream_in_order(groups, batches, pool_size(None, len(groups)), depth=4),
                   index.ends(), "parquet", index.has_offsets)


def _latest_iceberg_metadata(path: Path) -> Path | None:
    """The newest ``metadata/<version>-<uuid>.metadata.json`` of an Iceberg table's dir, or None: not one."""
    found = sorted(path.glob("metadata/*.metadata.json"), key=lambda p: (int(p.name.split("-", 1)[0])
                                                                        if p.name.split("-", 1)[0].isdigit() else -1,
                                                                        p.name))
    return found[-1] if found else None


def _open_table(path: Path, topics: Sequence[str] | None, offsets_required: bool) -> _Source | None:
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
    index = _Index(offsets_required)
    index.add(str(path), names, table.select([c for c in PARQUET_COLUMNS if c in names]), topics)
    index.check_topics(str(path), topics)
    return _Source(str(path), index.starts, iter(table.to_batches(max_chunksize=1 << 16)), index.ends(), "table",
                   index.has_offsets)


def _open_log_dir(path: Path | str, topics: Sequence[str] | None, want_ends: bool,
                  storage: StorageOptions | None = None) -> _Source:
    """A log dir's records, read ``read_committed`` from one plan: its ranges give each partition's
    first offset, its pieces (those of the chosen topics) the rows. ``want_ends``: each partition's
    high watermark too (where a consumer's read ends, past the transactions ``read_committed`` leaves
    out), from a second, ``read_uncommitted`` plan of the same partitions."""
    from storage_core.read.api import read_options
    from storage_core.read.piece_reader import read_pieces
    from storage_core.read.planner import plan_read

    options: dict[str, object] = {"isolationLevel": "read_committed", "includeHeaders": True,
                                  **{OPTION_PREFIX + k: v for k, v in (storage or StorageOptions()).items}}
    if topics is not None:
        options["topics"] = list(topics)
    opts = read_options(str(path), **options)
    the_plan = plan_read(opts)
    chosen = {r.topic_partition.topic for r in the_plan.ranges} - (INTERNAL_TOPICS if topics is None else set())
    starts = {r.topic_partition: r.start for r in the_plan.ranges
              if r.topic_partition.topic in chosen and r.end > r.start}
    pieces = [pc for pc in the_plan.pieces if pc.topic in chosen]
    ends: dict[TopicPartition, int] = {}
    if want_ends:
        uncommitted = plan_read(read_options(str(path), **{**options, "isolationLevel": "read_uncommitted"}))
        ends = {r.topic_partition: r.end for r in uncommitted.ranges if r.topic_partition.topic in chosen}
    batches = read_pieces(pieces, include_headers=True, fail_on_data_loss=opts.fail_on_data_loss,
                          threads=opts.max_threads)
    return _Source(str(path), starts, batches, ends, "log dir")


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


def _open_source(source: str | os.PathLike[str], topics: Sequence[str] | None, *, offsets_required: bool = True,
                 want_ends: bool = False, storage: StorageOptions | None = None) -> _Source:
    """``offsets_required``: refuse Parquet without an ``offset`` column (a restore at the original
    offsets); ``want_ends``: each partition's end, for a log dir too (:func:`_open_log_dir`). A URI
    (``s3://bucket/snapshot``) is a log dir or ``klog snapshot`` in object storage, read through
    ``storage`` as the read path reads one."""
    from storage_core.read.options import split_paths

    if uri_scheme(os.fspath(source)) is not None:
        if os.fspath(source).rstrip("/").endswith(".parquet"):
            raise RestoreError(f"source {os.fspath(source)} is a Parquet file in object "
                               "storage; expected a log dir or klog snapshot there (klog restore reads those through "
                               "--fs), or the export copied to a local path")
        return _open_log_dir(os.fspath(source), topics, want_ends, storage)
    path = Path(source)
    dirs = split_paths(str(source)) if not path.exists() and "," in str(source) else ()
    if dirs and all(Path(d).is_dir() for d in dirs):  # a cluster's dirs, "b1/data,b2/data": one log dir to read
        return _open_log_dir(path, topics, want_ends)
    if not path.exists():
        raise RestoreError(f"source {source} does not exist; expected a log dir (or a cluster's, \"b1/data,b2/data\"), "
                           "a klog snapshot, or a klog export Parquet file or dir")
    table = _open_table(path, topics, offsets_required)
    if table is not None:
        return table
    files = _parquet_files(path)
    return _open_parquet(files, topics, offsets_required) if files is not None else \
        _open_log_dir(path, topics, want_ends)


def _check_target(targets: Sequence[Path], kraft: ClusterMetadata | None, topics: Iterable[str],
                  partitions: Iterable[TopicPartition], lock_timeout_s: float) -> None:
    """Every refusal of the target's KRaft metadata and locks, before anything is written (see the
    module's doc); the replicas' are :func:`_write_plan`'s."""
    for t in targets:
        check_free_to_stage(t, lock_timeout_s)
    target = targets[0]
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
        if len(targets) == 1 and reg is not None and (kraft.node_id or "").isdigit() and reg.replicas and int(kraft.node_id or 0) not in reg.replicas:
            raise InvalidTopicError(f"partition {tp} is not hosted by broker {kraft.node_id}, whose log dir {target} "
                                    f"is: its replicas are brokers {list(reg.replicas)}, and a broker treats a "
                                    "partition dir it does not host as stray; expected the log dir of one of them")


@dataclass(frozen=True)
class _Placement:
    """Where a restored partition is written: the dir its records are staged in (its replica read,
    the leader's when given), and the dirs of its other replicas, which get the same batches."""

    stage: Path
    replicas: tuple[Path, ...]


def _write_plan(targets: Sequence[Path], partitions: Iterable[TopicPartition]) -> dict[TopicPartition, _Placement]:
    """Each partition's :class:`_Placement` in the target's log dirs, by the writer's rule for a
    replicated partition (:func:`~storage_core.log.replicas.write_targets`, which raises
    :class:`ReplicatedWriteError` when its in-sync replicas are not all given or do not end at the same
    offset). A partition no dir holds is made in the one log dir given; given several, it is refused:
    which brokers host it is theirs to say (they make its dirs when the topic is created)."""
    wanted = set(partitions)
    found = {pd.topic_partition: pd for pd in find_partitions([t for t in targets if t.is_dir()], allow_empty=True,
                                                              only=lambda tp: tp in wanted)
             if pd.topic_partition in wanted}
    out: dict[TopicPartition, _Placement] = {}
    for tp in sorted(wanted):
        pd = found.get(tp)
        if pd is None:
            if len(targets) > 1:
                raise RestoreError(f"no dir of partition {tp} in the log dirs {', '.join(map(str, targets))}; "
                                   "expected its replicas' dirs, which the brokers make when the topic is created: "
                                   "start the cluster once after creating it, stop it, then restore")
            out[tp] = _Placement(targets[0] / tp.dir_name, ())
            continue
        more = write_targets(pd.replicas) if pd.replicas is not None else ()
        out[tp] = _Placement(pd.path, tuple(more))
    return out


def _check_names(topics: Iterable[str]) -> None:
    """Topics Kafka would not take: an invalid name, an internal topic."""
    for topic in sorted(set(topics)):
        validate_topic_name(topic)
        check_appendable(topic)


#: ``offsets``: the records at their original offsets, or appended at each partition's end
Offsets = Literal["keep", "new"]
OFFSETS_MODES: tuple[str, ...] = get_args(Offsets)
#: ``groups="source"``: the consumer groups of the source itself (a log dir or snapshot)
GROUPS_FROM_SOURCE = "source"


def restore(source: str | os.PathLike[str], target_dir: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], *,
            topics: Sequence[str] | str | None = None, compression: CompressionType | str = CompressionType.NONE,
            lock_timeout_s: float = 0.0, max_batch_bytes: int = DEFAULT_BATCH_BYTES, offsets: Offsets = "keep",
            groups: str | os.PathLike[str] | Mapping[str, Mapping[TopicPartition, object]] | None = None,
            unmapped: Unmapped = "fail", only_groups: Iterable[str] | None = None,
            protocols: Mapping[str, str] | None = None, now_ms: int | None = None,
            storage: StorageOptions | None = None) -> RestoreSummary:
    """Restore the records of ``source`` into the log dir ``target_dir``, at their original offsets or
    at new ones, and consumer groups' committed offsets with them, in one atomic commit.

    ``source``: a log dir or a ``klog snapshot`` of one (read ``read_committed``; also in object
    storage, ``s3://bucket/snapshot``, read through ``storage``, the ``fs.*`` settings), a ``klog
    export`` Parquet file or dir of them, or the dir of a Delta or Iceberg table ``klog sync`` made.
    ``target_dir``: a log dir, or the log dirs of a cluster's brokers (``"b1/data,b2/data"``, a glob,
    or a list): every in-sync replica of a restored partition gets the same batches.
    ``topics``: those to restore (default: every topic of the source but Kafka's internal ones).
    ``compression``: the codec of the written batches.
    ``lock_timeout_s``: how long to wait for another klog writer's lock (a broker's is refused at
    once).

    ``offsets``: ``keep`` (the records at their original offsets; each partition must end at or below
    the first one) or ``new`` (appended at each partition's log end with new offsets, pinned there: a
    partition that grows meanwhile makes the commit refuse; Parquet without an ``offset`` column is
    taken in this mode only). ``groups``: consumer groups to restore with the records
    (:func:`~storage_core.tools.restore_groups.load_groups`): ``"source"`` (the source's own
    ``__consumer_offsets``: a log dir or snapshot), a ``klog groups --json`` file, another log dir, or
    a mapping group -> (topic, partition) -> offset. Their offsets are kept where the restored
    partition reaches them (a committed offset past the last restored record, up to the source
    partition's end, becomes the target partition's end: aborted records and markers at the end of a
    ``read_committed`` source), or with new offsets translated (the target offset of the first
    restored record at or after it; :class:`~storage_core.tools.restore_groups.OffsetTranslation`).
    ``unmapped``: what an offset nothing maps to does (``fail``, ``skip``, ``end``, ``start``);
    ``only_groups``: these groups alone; ``protocols``, ``now_ms``: as
    :func:`~storage_core.tools.restore_groups.restore_groups`.

    Every refusal, of the records and of the groups, comes before anything is written:
    :class:`~storage_core.errors.RestoreError` (a source without offsets at the original offsets),
    :class:`~storage_core.errors.OffsetOverlapError` (a partition holding offsets at or above
    the first one restored), :class:`~storage_core.errors.InvalidTopicError` (a topic the dir's KRaft
    metadata does not know, an internal topic), :class:`~storage_core.errors.ReplicatedWriteError` (a
    replicated partition whose in-sync replicas are not all given),
    :class:`~storage_core.errors.LogDirLockedError` (a broker holds a dir),
    :class:`~storage_core.errors.GroupRestoreError` (a target without
    ``__consumer_offsets``, a group it has already, an offset nothing maps to under
    ``unmapped="fail"``, a group's partition neither in the target nor restored, ``groups="source"``
    from a Parquet or table source, groups with a source without offsets). Records and groups
    are then staged and committed as one job: a kill at any moment leaves the target as it was."""
    if offsets not in OFFSETS_MODES:
        raise RestoreError(f"offsets={offsets!r}; expected 'keep' (the records at their original offsets) or 'new' "
                           "(appended at each partition's end with new offsets)")
    if unmapped not in UNMAPPED_POLICIES:
        raise GroupRestoreError(f"unmapped={unmapped!r}; expected one of {', '.join(UNMAPPED_POLICIES)}")
    if groups is None and (only_groups is not None or protocols is not None):
        raise GroupRestoreError("only_groups or protocols without groups; expected groups=\"source\", a path or a "
                                "mapping of the groups to restore (klog restore --groups [FROM] --group G)")
    new = offsets == "new"
    wanted = [topics] if isinstance(topics, str) else None if topics is None else list(topics)
    codec = compression if isinstance(compression, CompressionType) else CompressionType.from_name(compression)
    targets = target_dirs(target_dir)
    target = targets[0]
    _check_names(wanted or ())
    src = _open_source(source, wanted, offsets_required=not new, want_ends=new or groups is not None, storage=storage)
    groups_from = _groups_source(groups, source, src)
    # the target's KRaft metadata replayed once, for every check and the writers' epochs
    kraft = find_cluster_metadata([t for t in targets if t.is_dir()])
    _check_target(targets, kraft, {tp.topic for tp in src.starts} | set(wanted or ()), src.starts, lock_timeout_s)
    stored = load_topic_configs(target) if target.is_dir() else {}
    configs = {t: config_for_topic(t, stored, kraft=kraft) for t in {tp.topic for tp in src.starts}}
    try:
        placed = _write_plan(targets, src.starts)
    except ReplicatedWriteError as exc:
        raise ReplicatedWriteError(f"{exc.detail}; a restore into a replicated partition writes every in-sync "
                                   "replica: give every broker's log dir (DIR as b1/data,b2/data,b3/data)") from None
    if not new:
        for tp, first in sorted(src.starts.items()):
            for pdir in (placed[tp].stage, *placed[tp].replicas):
                check_at_offsets(pdir.parent, tp, configs[tp.topic], [(first, first)])
    # each source partition's range in the target now: where new offsets start, what groups map into
    before: dict[TopicPartition, tuple[int, int]] = {}
    if new or groups_from is not None:
        for tp in sorted(set(src.starts) | set(src.ends)):
            now_there = target_range(placed[tp].stage.parent if tp in placed else target, tp)
            if now_there is not None or tp in src.starts:
                before[tp] = now_there or (0, 0)
    plan = None
    if groups_from is not None:
        projected = _projected(before, src, new)
        plan = plan_groups(groups_from, targets, translate=_translation(new, src, projected, {}), unmapped=unmapped,
                           protocols=protocols, only=only_groups, ranges=projected)
    # every refusal asked: from here on the target is written (staging, then the commit)
    target.mkdir(parents=True, exist_ok=True)
    job = uuid.uuid4().hex[:16]
    writers: dict[TopicPartition, StagingWriter] = {}
    counts: dict[TopicPartition, int] = {}
    firsts: dict[TopicPartition, int] = {}  # the first restored record's target offset
    ends: dict[TopicPartition, int] = {}  # the last restored record's target offset + 1
    moved: dict[TopicPartition, list[np.ndarray]] = {}  # new offsets: the source offsets restored, in order
    buffer = EncodeBuffer()
    staged: list[StagedPartition] = []
    try:
        for batch in src.batches:
            for tp, a, b in _partition_runs(batch, wanted):
                rows = batch.slice(a, b - a)
                w = writers.get(tp)
                if w is None:
                    if tp not in src.starts:
                        raise RestoreError(f"{src.description}: rows of {tp}, which its index of partitions did not "
                                           "list; expected the source not to change during the restore")
                    pdir = placed[tp].stage
                    pdir.mkdir(exist_ok=True)
                    reg = kraft.partition(tp.topic, tp.partition) if kraft is not None else None
                    # at their own offsets, the partition's first segment starts at its first restored
                    # record (at or above the source's first offset, checked above: a read_committed
                    # source may begin with records it leaves out); new offsets start at its log end
                    first = before[tp][1] if new else int(rows.column("offset")[0].as_py())
                    w = writers[tp] = StagingWriter(pdir, staging_prefix(job) + "restore", configs[tp.topic], codec,
                                                    max_batch_bytes, buffer, None if reg is None else reg.leader_epoch,
                                                    pinned_base=first)
                    firsts[tp] = first
                if new:
                    at = firsts[tp] + counts.get(tp, 0)
                    if src.has_offsets:
                        moved.setdefault(tp, []).append(_offsets_of(rows))
                    rows = _with_offsets(rows, np.arange(at, at + rows.num_rows, dtype=np.int64))
                counts[tp] = counts.get(tp, 0) + w.append_rows_at(rows)
                ends[tp] = int(rows.column("offset")[rows.num_rows - 1].as_py()) + 1
        staged = [w.finish() for w in writers.values()]
        translation = _final_translation(new, src, before, firsts, ends, moved)
        group_staged: list[StagedPartition] = []
        group_replicas: dict[str, list[str]] = {}  # a replicated __consumer_offsets partition's other replicas
        restored_groups: tuple[list[RestoredOffset], list[SkippedOffset], dict[int, list[tuple[bytes, bytes]]]] | \
            None = None
        if plan is not None:
            after = {tp: _after(r, firsts.get(tp), ends.get(tp)) for tp, r in before.items()}
            spans = {**plan.target.ranges, **after}
            kept = KeptOffsets({tp: e for tp, (_, e) in spans.items()}, src.ends,
                               {tp: s for tp, (s, _) in spans.items()})
            restored, skipped = plan.map(translation if new else kept, after)
            plan.check_offsets_dirs(restored)
            now = int(time.time() * 1000) if now_ms is None else now_ms
            rows_by_partition = plan.records(restored, now) if restored else {}
            restored_groups = (restored, skipped, rows_by_partition)
            if rows_by_partition:
                group_staged = stage_groups(plan, rows_by_partition, now, staging_prefix(job) + "groups")
                group_replicas = plan.replicas_by_dir(rows_by_partition)
    except BaseException:
        for w in writers.values():
            w.discard()
        raise
    try:
        replicas = {str(p.stage): [str(r) for r in p.replicas] for p in placed.values() if p.replicas}
        replicas.update(group_replicas)
        committed = commit_job(job, [sp for sp in staged if sp.segments] + group_staged, lock_timeout_s=lock_timeout_s,
                               replicas=replicas)
    except BaseException:
        # refused before its journal was written (a partition that moved since the checks): the staging
        # goes; a journal written is settled by the next writable open, which removes it with the commit
        if not any(journal_path(t, job).exists() for t in targets):
            collect_staging([w.partition_dir for w in writers.values()] +
                            [Path(sp.partition_dir) for sp in group_staged] +
                            [r for p in placed.values() for r in p.replicas] +
                            [Path(r) for rs in group_replicas.values() for r in rs], job_id=job)
        raise
    report = None
    if plan is not None and restored_groups is not None:
        restored, skipped, rows_by_partition = restored_groups
        report = plan.report(restored, skipped, rows_by_partition, offsets_partitions(committed))
    done = []
    for tp, (first, end) in sorted(committed.items()):
        if tp.topic == GROUP_OFFSETS_TOPIC:
            continue
        span = moved.get(tp)
        done.append(RestoredPartition(tp.topic, tp.partition, first, end, counts.get(tp, 0),
                                      int(span[0][0]) if span else None, int(span[-1][-1]) if span else None))
    return RestoreSummary(",".join(map(str, targets)), tuple(done), offsets, report, translation)


def _groups_source(groups: str | os.PathLike[str] | Mapping[str, Mapping[TopicPartition, object]] | None,
                   source: str | os.PathLike[str], src: _Source,
                   ) -> str | os.PathLike[str] | Mapping[str, Mapping[TopicPartition, object]] | None:
    """Where the groups come from (``"source"``: the source itself, which must be a log dir), refused
    where the restored records cannot map their offsets (a source without offsets)."""
    if groups is None:
        return None
    if isinstance(groups, str) and groups == GROUPS_FROM_SOURCE:
        if src.kind != "log dir":
            raise GroupRestoreError(f"groups from the source: {src.description} is a {src.kind}, which holds no "
                                    "consumer groups; expected a log dir or klog snapshot as the source, or the groups "
                                    "from a `klog groups --json` file or a log dir (klog restore --groups FROM)")
        if uri_scheme(os.fspath(source)) is not None:
            raise GroupRestoreError(f"groups from the source: {os.fspath(source)} is in object storage, whose "
                                    f"{GROUP_OFFSETS_TOPIC} klog does not read for a restore yet; expected the groups "
                                    "from a `klog groups --json` file or a local log dir (klog restore --groups FROM)")
        groups = source
    if not src.has_offsets:
        raise GroupRestoreError(f"{src.description} has no 'offset' column: the groups' committed offsets cannot be "
                                "mapped to its records; expected a source with offsets (a klog export) to restore "
                                "groups with")
    return groups


def _projected(before: Mapping[TopicPartition, tuple[int, int]], src: _Source,
               new: bool) -> dict[TopicPartition, tuple[int, int]]:
    """Each partition's (log start, log end) as the restore will leave it, projected before its records
    are read: at their own offsets, an empty partition starts at the source's first offset and each
    ends at most at the source's end; with new offsets it starts where it does (its end is known once
    the records are staged)."""
    out: dict[TopicPartition, tuple[int, int]] = {}
    for tp, (start, end) in before.items():
        first = src.starts.get(tp)
        if new or first is None:
            out[tp] = (start, end)
        else:
            out[tp] = (first if start >= end else start, max(end, src.ends.get(tp, end)))
    return out


def _translation(new: bool, src: _Source, ranges: Mapping[TopicPartition, tuple[int, int]],
                 moved: Mapping[TopicPartition, tuple[np.ndarray, np.ndarray]]) -> Translate:
    """The mapping of the groups' offsets into the restored partitions ``ranges``: kept
    (:class:`KeptOffsets`), or with new offsets an :class:`OffsetTranslation` of the records ``moved``
    (source offsets, target offsets; a partition without them maps up to its source end to its end).
    Before the records are read (``moved`` empty, ``ranges`` projected) it maps the same offsets as
    after: a group's refusals are asked before anything is written."""
    ends = {tp: e for tp, (_, e) in ranges.items()}
    if not new:
        return KeptOffsets(ends, src.ends, {tp: s for tp, (s, _) in ranges.items()})
    empty = np.empty(0, np.int64)
    return OffsetTranslation({tp: moved.get(tp, (empty, empty)) for tp in ranges}, source_ends=src.ends,
                             target_ends=ends)


def _after(before: tuple[int, int], first: int | None, end: int | None) -> tuple[int, int]:
    """A partition's (log start, log end) once the restore's records from ``first`` to ``end`` (None:
    none) are committed: an empty partition's log start moves up to its first record, as the commit
    does (:func:`~storage_core.log.staged.commit_job`)."""
    start, stop = before
    if first is None or end is None:
        return before
    return (first if start >= stop else start, end)


def _final_translation(new: bool, src: _Source, before: Mapping[TopicPartition, tuple[int, int]],
                       firsts: Mapping[TopicPartition, int], ends: Mapping[TopicPartition, int],
                       moved: Mapping[TopicPartition, list[np.ndarray]]) -> OffsetTranslation | None:
    """With new offsets (and a source that has offsets), what the restore did: each partition's source
    offsets to the target offsets it wrote them at, from the first on."""
    if not new or not src.has_offsets:
        return None
    after = {tp: _after(r, firsts.get(tp), ends.get(tp)) for tp, r in before.items()}
    pairs = {}
    for tp, chunks in moved.items():
        source_offsets = np.concatenate(chunks)
        pairs[tp] = (source_offsets, np.arange(firsts[tp], firsts[tp] + source_offsets.size, dtype=np.int64))
    translation = _translation(True, src, after, pairs)
    assert isinstance(translation, OffsetTranslation)
    return translation


def _offsets_of(rows: pa.RecordBatch) -> np.ndarray:
    return np.asarray(rows.column("offset").to_numpy(zero_copy_only=False), dtype=np.int64)


def _with_offsets(rows: pa.RecordBatch, offsets: np.ndarray) -> pa.RecordBatch:
    """``rows`` with ``offsets`` as their ``offset`` column (new offsets)."""
    column = pa.array(offsets, pa.int64())
    names = rows.schema.names
    if "offset" in names:
        return rows.set_column(names.index("offset"), "offset", column)
    return rows.append_column("offset", column)

