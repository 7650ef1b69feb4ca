"""Log directories (``LogManager``): the partitions of one or more log dirs, opened together.

A log dir holds one directory per partition, named ``<topic>-<partition>`` (the *last* ``-``
splits it), plus the checkpoint files. Directories being deleted (``.<uuid>-delete``), moved
(``-future``) or left over (``-stray``) are skipped, as is anything that is not a partition
(``__cluster_metadata-0`` is a partition too: KRaft's metadata log). A path that is itself a
partition directory (it holds ``.log`` files) is accepted as well (:func:`find_partitions`).

:class:`LogManager` opens every partition of its dirs with the dirs' checkpoints and clean-shutdown
marker; writable, it holds each dir's lock (:mod:`storage_core.log.lock`), settles commits a crash
interrupted (:mod:`storage_core.log.journal`) and writes the checkpoints back on close.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from storage_core.errors import InvalidTopicError, KlogError, NotALogDirError, storage_error
from storage_core.files import (
    LOG_DIR_FILES,
    LOG_START_OFFSET_CHECKPOINT,
    MARKED_DIR_SUFFIXES,
    RECOVERY_POINT_OFFSET_CHECKPOINT,
    REMOTE_INDEX_CACHE_DIR,
    STAGING_PREFIX,
    delete_dir_name,
    has_log_files,
)
from storage_core.fs import StorageOptions, as_path, writable_dir
from storage_core.log.checkpoint import CleanShutdownFile, OffsetCheckpointFile
from storage_core.log.cluster_metadata import find_cluster_metadata
from storage_core.log.config import LogConfig
from storage_core.log.dir_state import LogDirState
from storage_core.log.journal import recover_commits
from storage_core.log.lock import LogDirLock
from storage_core.log.log import Log
from storage_core.log.replicas import BrokerDir, ReplicaSet, broker_dir, check_one_cluster, replica_sets
from storage_core.log.topic_configs import ResolvedConfig, load_topic_configs, resolve_topic_config
from storage_core.log.topic_partition import MAX_PARTITION, TopicPartition, validate_topic_name
from storage_core.workers import ordered_map, pool_size


@dataclass(frozen=True, slots=True)
class PartitionDir:
    topic_partition: TopicPartition
    path: Path
    log_dir: Path
    #: the partition's replicas when the log dirs are several brokers' of one cluster, or when the
    #: KRaft metadata says it is replicated (:mod:`storage_core.log.replicas`): ``path`` is then the
    #: replica read, and reads end at ``replicas.high_watermark``; None for a partition of one copy
    replicas: ReplicaSet | None = None

    @property
    def high_watermark(self) -> int | None:
        """Where a read of the partition ends (exclusive), or None: at the log end of ``path``."""
        return None if self.replicas is None else self.replicas.high_watermark


@dataclass(frozen=True)
class LogDirsView:
    """What a set of log dirs holds: each partition once (its replica read, when the dirs are several
    brokers'), and the partitions the KRaft metadata assigns to brokers whose dirs hold no replica
    of them (``absent``: by partition, the brokers that hold it)."""

    partitions: list[PartitionDir]
    absent: Mapping[TopicPartition, tuple[int, ...]]
    brokers: Mapping[Path, BrokerDir]


def open_log_read_only(pd: PartitionDir, state: LogDirState | None = None, *, follow: bool = False) -> Log:
    """The partition's log, read-only, with its log dir's checkpoints and clean-shutdown state
    (what exports and Spark reads open; no lock is taken and no byte changes). ``state``: the log
    dir's state of the query (:mod:`storage_core.log.dir_state`: a query over many partitions reads
    the dir's files once); None reads them for this partition alone.

    How much of the files the open checks is one rule, here:

    - a dir without the clean-shutdown marker is recovered in memory from the recovery point, as
      Kafka's recovery would (every batch after it checked, a torn tail cut), **unless its owner
      holds it now** (:func:`~storage_core.log.lock.is_held`: a running broker, or a klog writer).
      Then nothing is wrong with it: the owner validated every batch it appended and is appending
      more, so its batches after the recovery point are unflushed, not suspect. The files are taken
      as they are (each batch's CRC is checked when a read reads it, so damage fails that read with
      its file and position), and a batch the owner is still writing at the end is not read;
    - after a clean shutdown the files are trusted, the active segment's tail checked (a copy of a
      log dir may be torn by the copy);
    - ``follow`` (a stream following the log): the files are trusted as they are, whatever the
      marker says: each trigger would otherwise re-check the whole unflushed log.

    A replica of a replicated partition (``pd.replicas``) is bounded by its high watermark
    (:meth:`Log.bound_to <storage_core.log.log.Log.bound_to>`): reads end where the cluster
    committed it.
    """
    tp = pd.topic_partition
    if state is None:
        state = LogDirState(pd.log_dir)
    start = state.log_starts.get(tp)
    if follow or (not state.clean_shutdown and state.held):
        lg = Log(pd.path, state.config_for(tp.topic), log_start_offset=start, had_clean_shutdown=True,
                 verify_tail=False, dir_state=state)
    else:
        lg = Log(pd.path, state.config_for(tp.topic), recovery_point=state.recovery_points.get(tp, 0),
                 log_start_offset=start, had_clean_shutdown=state.clean_shutdown, dir_state=state)
    lg.bound_to(pd.high_watermark)
    return lg


def find_partitions(paths: Iterable[str | os.PathLike[str]], *, required: bool = False,
                    allow_empty: bool = False, storage: StorageOptions | None = None,
                    only: Callable[[TopicPartition], bool] | None = None) -> list[PartitionDir]:
    """Every partition under the given log dirs (or partition dirs), sorted by topic and partition.

    With ``required`` (every read path), a path that holds no topic-partition dir is a
    :class:`NotALogDirError` saying what the path holds instead; ``allow_empty`` (a stream, which
    may start before the first topic is written) lets through a path that is empty or holds only
    a log dir's own files. A path may be a URI (``s3://bucket/prefix``), read through ``storage``
    (:mod:`storage_core.fs`). The log dirs of several brokers of one cluster give each partition
    once, as its replica read (:func:`scan_log_dirs`; ``only``: the partitions whose replicas are
    weighed, see there)."""
    return scan_log_dirs(paths, required=required, allow_empty=allow_empty, storage=storage, only=only).partitions


def scan_log_dirs(paths: Iterable[str | os.PathLike[str]], *, required: bool = False,
                  allow_empty: bool = False, storage: StorageOptions | None = None,
                  only: Callable[[TopicPartition], bool] | None = None) -> LogDirsView:
    """:func:`find_partitions`, with the partitions the dirs lack.

    A partition found in two log dirs is two replicas of it when the dirs are of different brokers
    of one cluster (``meta.properties``: the same ``cluster.id``, different ``node.id``): the one a
    read reads, and where it ends, is :mod:`storage_core.log.replicas`' rule. Dirs of two clusters
    are a :class:`~storage_core.errors.MixedClustersError`; a partition in two dirs of one broker
    (or of dirs without ``meta.properties``) an error naming both.

    Weighing a partition's replicas reads each replica's small files and the tail of its last
    segment; ``only`` (a read's selection) limits that to the partitions it takes: the others are
    listed by their first dir, without replicas, for the names and counts of errors."""
    found: dict[TopicPartition, list[PartitionDir]] = {}
    roots: list[Path] = []
    for raw in paths:
        root = as_path(raw, storage)
        if not root.exists():
            raise NotALogDirError(f"no such log directory: {root}")
        if not root.is_dir():
            raise NotALogDirError(f"not a directory: {root}; expected a Kafka log dir or a <topic>-<partition> dir")
        candidates = [root] if has_log_files(root) else sorted(p for p in root.iterdir() if p.is_dir())
        roots.append(root)
        count = 0
        here: list[TopicPartition] = []
        for d in candidates:
            if d.name.endswith(MARKED_DIR_SUFFIXES):
                continue
            try:
                tp = TopicPartition.parse_dir_name(d.name)
            except InvalidTopicError:
                if d == root:
                    raise
                continue  # not a partition directory (e.g. a stray folder in the log dir)
            found.setdefault(tp, []).append(PartitionDir(tp, d, d.parent))
            here.append(tp)
            count += 1
        if 0 < count <= _NESTED_CHECK_MAX and candidates != [root]:
            # the parent of log dirs named like partitions ("data-1", "data-2"): not a log dir
            for tp in here:
                if _is_log_dir(found[tp][-1].path):
                    found[tp].pop()
                    if not found[tp]:
                        del found[tp]
                    count -= 1
        if required and not count:
            _no_partitions(root, allow_empty)
    return _one_per_partition(found, roots, only)


def _one_per_partition(found: Mapping[TopicPartition, list[PartitionDir]], roots: Sequence[Path],
                       only: Callable[[TopicPartition], bool] | None = None) -> LogDirsView:
    """Each partition once: its only dir, or its replica read when several brokers' dirs hold it."""
    log_dirs = list(dict.fromkeys([*(pd.log_dir for pds in found.values() for pd in pds),
                                   *(r for r in roots if not has_log_files(r))]))
    brokers = {d: broker_dir(d) for d in log_dirs}
    check_one_cluster(brokers.values())
    for tp, pds in found.items():
        if len(pds) > 1:
            nodes = [brokers[pd.log_dir].node_id for pd in pds]
            if None in nodes or len(set(nodes)) < len(nodes):
                raise KlogError(f"partition {tp} is in two log dirs: {pds[0].path} and {pds[1].path}"
                                + ("" if None in nodes else f" (both of broker {nodes[0]})"))
    kraft = find_cluster_metadata(log_dirs)
    registrations = {} if kraft is None else kraft.partition_states
    # replicated: several copies here, or a replication factor above one by the metadata (whose ISR
    # a clean shutdown of the cluster may have shrunk to one, the others kept as eligible, KIP-966)
    replicated = (any(len(pds) > 1 for pds in found.values())
                  or any(len(reg.replicas) > 1 for reg in registrations.values()))
    if not replicated:
        return LogDirsView([found[tp][0] for tp in sorted(found)], {}, brokers)
    weighed = {tp: pds for tp, pds in found.items() if only is None or only(tp)}
    sets = replica_sets({tp: [(pd.path, pd.log_dir) for pd in pds] for tp, pds in weighed.items()}, brokers, kraft)
    out = [PartitionDir(tp, sets[tp].read.path, sets[tp].read.log_dir, sets[tp]) if tp in sets else found[tp][0]
           for tp in sorted(found)]
    absent: dict[TopicPartition, tuple[int, ...]] = {}
    if len({b for reg in registrations.values() for b in reg.replicas}) > 1:
        for (topic, p), reg in registrations.items():
            if TopicPartition(topic, p) not in found:
                absent[TopicPartition(topic, p)] = reg.replicas
    return LogDirsView(out, absent, brokers)


def broker_groups(log_dirs: Iterable[str | os.PathLike[str]]) -> list[list[Path]]:
    """The log dirs grouped by the broker that owns them (``meta.properties``: its ``cluster.id`` and
    ``node.id``), in the order given: what one :class:`LogManager` may hold, since each broker keeps its
    own replica of a partition and its own checkpoints. Dirs without a broker identity (klog's own, a
    copy without ``meta.properties``) form one group, as a single writer's ``log.dirs`` do."""
    groups: dict[object, list[Path]] = {}
    for raw in log_dirs:
        d = as_path(raw)
        b = broker_dir(d)
        key: object = (b.cluster_id, b.node_id) if b.node_id is not None else None
        groups.setdefault(key, []).append(d)
    return list(groups.values())


def replica_problems(selected: Iterable[PartitionDir], absent: Mapping[TopicPartition, tuple[int, ...]]) -> list[str]:
    """Why the partitions ``selected`` from several brokers' log dirs (and those ``absent`` from
    them, by the brokers holding them) cannot be read as their cluster serves them: one line each
    for a partition with no in-sync replica among the dirs
    (:attr:`~storage_core.log.replicas.ReplicaSet.problem`) and for a partition no dir holds."""
    problems = [pd.replicas.problem for pd in selected if pd.replicas is not None and pd.replicas.problem]
    for tp, brokers in sorted(absent.items()):
        problems.append(f"{tp}: no replica is among the log dirs; it is on "
                        f"{'broker' if len(brokers) == 1 else 'brokers'} {', '.join(map(str, brokers))}")
    return problems


def _none(tp: TopicPartition) -> bool:
    return False


def skipped_dirs(paths: Iterable[str | os.PathLike[str]], storage: StorageOptions | None = None) -> list[tuple[str, str]]:
    """The child dirs of the given log dirs that are not read, each with why: names that are not
    ``<topic>-<partition>`` (``bad name-0``, ``t-99999999999``, ``t-01``, non-UTF-8), which a broker
    refuses to start with. Dirs marked for deletion or moving, and hidden dirs, are not listed.
    Names are shown printable (undecodable bytes as ``\\xNN``)."""
    out: list[tuple[str, str]] = []
    for raw in paths:
        root = as_path(raw, storage)
        if not root.is_dir() or has_log_files(root):
            continue
        for d in sorted(p for p in root.iterdir() if p.is_dir()):
            if d.name.startswith(".") or d.name.endswith(MARKED_DIR_SUFFIXES) or d.name == REMOTE_INDEX_CACHE_DIR:
                continue
            shown = os.fsencode(d.name).decode("utf-8", "backslashreplace")
            try:
                TopicPartition.parse_dir_name(d.name)
            except InvalidTopicError as exc:
                why = exc.detail.split(": ", 1)[1] if ": " in exc.detail else exc.detail
                if shown != d.name:
                    why = "the name is not UTF-8"
                out.append((str(d.parent / shown), why))
    return out


def _no_partitions(root: Path, allow_empty: bool) -> None:
    """Raise NotALogDirError for ``root``, which holds no partition dir, unless ``allow_empty`` and
    it holds nothing but a log dir's own files."""
    entries = sorted(root.iterdir(), key=lambda p: p.name)
    if allow_empty and all(p.name in LOG_DIR_FILES for p in entries):
        return
    if not entries:
        raise NotALogDirError(f"{root} is empty: no topic-partition directories (<topic>-<partition>, e.g. orders-0) "
                              "to read; expected a Kafka log dir (a broker's log.dirs entry) or a partition dir")
    names = [p.name + ("/" if p.is_dir() else "") for p in entries]
    shown = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
    marked = [p.name for p in entries if p.is_dir() and p.name.endswith(MARKED_DIR_SUFFIXES)]
    hint = ""
    if marked:
        hint = f"; {', '.join(marked[:3])} {'is' if len(marked) == 1 else 'are'} marked for deletion or moving (skipped)"
    elif all(p.name in LOG_DIR_FILES for p in entries):
        hint = "; it is a log dir whose partitions are all gone"
    else:
        children = [(p, _partition_dir_names(p)) for p in entries if p.is_dir()]
        looks = [(p, tps) for p, tps in children if tps]
        if len(looks) == 1:
            p, tps = looks[0]
            hint = f"; {p} looks like a Kafka log dir (it holds {', '.join(tps[:3])}{', ...' if len(tps) > 3 else ''}): pass that path"
        elif looks:
            held = "; ".join(f"{p.name} holds {', '.join(tps[:2])}{', ...' if len(tps) > 2 else ''}" for p, tps in looks)
            hint = (f"; it holds Kafka log dirs ({held}): pass them as "
                    f"'{','.join(str(p) for p, _ in looks)}', as a broker's log.dirs lists them")
    raise NotALogDirError(f"no topic-partition directories (<topic>-<partition>, e.g. orders-0) in {root}: it holds "
                          f"{shown}{hint}; expected a Kafka log dir (a broker's log.dirs entry) or a partition dir")


#: Up to this many partition dirs in a path, each is checked for being a log dir itself (a path
#: holding more log dirs than that is not met; a real log dir of many partitions pays nothing).
_NESTED_CHECK_MAX = 64


def _is_log_dir(d: Path) -> bool:
    """Whether ``d``, named like a partition dir, is a log dir: it holds a log dir's own files
    (checkpoints, ``meta.properties``, the lock) or partition dirs with segments, and no segment."""
    if any((d / name).exists() for name in LOG_DIR_FILES):
        return not has_log_files(d)
    return not has_log_files(d) and bool(_partition_dir_names(d))


def _partition_dir_names(d: Path) -> list[str]:
    """The names of the partition dirs (with segments) directly under ``d``."""
    try:
        subdirs = sorted(p for p in d.iterdir() if p.is_dir())
    except OSError:
        return []
    out = []
    for p in subdirs[:10_000]:
        if p.name.startswith(STAGING_PREFIX) or p.name.endswith(MARKED_DIR_SUFFIXES):
            continue  # a write's staged segments, or a partition marked for deletion: not a partition dir
        try:
            TopicPartition.parse_dir_name(p.name)
        except InvalidTopicError:
            continue
        if has_log_files(p):
            out.append(p.name)
    return out


# --- LogManager ---------------------------------------------------------------------------------

class LogManager:
    """One or more log dirs: partitions, checkpoints, the clean-shutdown marker, a writer's lock.

    Read-only (the default) takes no lock and writes nothing. Writable takes each dir's ``.lock``
    (:class:`~storage_core.log.lock.LogDirLock`: the POSIX lock a broker takes, so klog never
    writes a dir a running broker owns; a dir another holds fails the open, which then writes
    nothing), loads every partition (recovering from the recovery points unless the dir was
    shut down cleanly), deletes the clean-shutdown marker, and on :meth:`close` writes the
    checkpoints and the marker again.
    """

    def __init__(self, log_dirs: Iterable[str | os.PathLike[str]], *, writable: bool = False,
                 config: LogConfig | None = None, topic_configs: Mapping[str, LogConfig] | None = None,
                 overrides: Mapping[str, object] | None = None,
                 full_recovery: bool = False, on_loaded: Callable[[PartitionDir], None] | None = None,
                 close_each: bool = False, workers: int | None = 1) -> None:
        """``config`` is the default config (below everything stored, see
        :mod:`storage_core.log.topic_configs`), ``overrides`` Kafka-named configs applied to every
        topic above everything stored, ``topic_configs`` whole configs of topics that replace the
        resolution. ``on_loaded(pd)`` is called after each partition is loaded (recovered), for
        progress reports.

        ``close_each`` closes each partition as soon as it is loaded (recovered): its files are
        closed and its indexes trimmed, so that the open files do not grow with the number of
        partitions (a writable log holds about 4); :meth:`reopen` opens one again. A failed open
        closes what it loaded and puts back the clean-shutdown markers it deleted: the dirs are
        left as they were found (less what recovery repaired), never with a preallocated index.

        ``workers`` loads (recovers) that many partitions of a dir at once (None:
        :func:`~storage_core.workers.pool_size`'s default; 1, the default, one after the other on
        the caller's thread). The dirs' locks are taken once, here, on the caller's thread, before
        any partition is loaded; the logs, ``on_loaded`` calls and errors come in the same order
        as with one worker. A failed load is raised once every worker stopped; the partitions
        after it that other workers had loaded meanwhile are closed with the rest (recovered, as a
        broker would have recovered them)."""
        self.log_dirs = [writable_dir(d) if writable else as_path(d) for d in log_dirs]
        self.writable = writable
        self.default_config = config or LogConfig()
        self.topic_configs = dict(topic_configs or {})
        self.overrides = dict(overrides or {})
        if self.overrides:
            LogConfig.from_properties(self.overrides)  # a bad name or value fails here, once
        self._locks: list[LogDirLock] = []
        self.recovered_commits: list[str] = []
        self.logs: dict[TopicPartition, Log] = {}
        self._dir_of: dict[TopicPartition, Path] = {}
        for d in self.log_dirs:
            if not d.is_dir():
                raise KlogError(f"no such log directory: {d}")
        # klog-topic-configs.json of each dir (topic_configs.py); a later dir's file wins on a conflict
        self.stored_topic_configs: dict[str, dict[str, str]] = {}
        for d in self.log_dirs:
            for topic, props in load_topic_configs(d).items():
                self.stored_topic_configs.setdefault(topic, {}).update(props)
        # the KRaft metadata of the dirs (cluster_metadata.py): in one of them, if any
        self.kraft = find_cluster_metadata(self.log_dirs)
        deleted_markers: list[CleanShutdownFile] = []
        #: each dir's broker epoch in its clean-shutdown marker, written back with the marker on close
        self._broker_epochs: dict[Path, int | None] = {}
        loaded: list[Log] = []  # every log a worker opened, handed over or not: all closed if the open fails
        try:
            if writable:
                for d in self.log_dirs:
                    self._lock(d)
                    for what in recover_commits(d):  # settle a commit a crash interrupted
                        self.recovered_commits.append(f"{d}: commit of job {what}")
            for d in self.log_dirs:
                recovery = OffsetCheckpointFile(d / RECOVERY_POINT_OFFSET_CHECKPOINT).read()
                starts = OffsetCheckpointFile(d / LOG_START_OFFSET_CHECKPOINT).read()
                marker = CleanShutdownFile.in_dir(d)
                self._broker_epochs[d] = marker.kept_epoch()
                clean = marker.exists() and not full_recovery
                if full_recovery:
                    recovery = {}
                # every replica of every dir is opened: a manager (recovery, retention, compaction) works
                # on each replica given, so none is weighed against the others
                pds = [pd for pd in find_partitions([d], only=_none) if writable or has_log_files(pd.path)]
                configs = {t: self.config_for(t) for t in sorted({pd.topic_partition.topic for pd in pds})}

                def load(pd: PartitionDir, recovery: Mapping[TopicPartition, int] = recovery,
                         starts: Mapping[TopicPartition, int] = starts, clean: bool = clean,
                         configs: Mapping[str, LogConfig] = configs) -> Log:
                    tp = pd.topic_partition
                    log = Log(pd.path, configs[tp.topic], writable=writable, recovery_point=recovery.get(tp, 0),
                              log_start_offset=starts.get(tp), had_clean_shutdown=clean)
                    loaded.append(log)
                    if close_each:
                        log.close()
                    return log

                for pd in pds:  # the same partition in two of the dirs: two brokers' replicas (see broker_groups)
                    if pd.topic_partition in self._dir_of:
                        raise KlogError(f"partition {pd.topic_partition} is in two of the log dirs: "
                                        f"{self._dir_of[pd.topic_partition]} and {d}; a log manager works on one "
                                        "broker's dirs (each replica has its own checkpoints): open one per "
                                        "broker (broker_groups)")
                n = 1 if workers == 1 else pool_size(workers, len(pds))
                for pd, log in zip(pds, ordered_map(load, pds, n, window=n), strict=False):
                    self.logs[pd.topic_partition] = log
                    self._dir_of[pd.topic_partition] = d
                    if on_loaded is not None:
                        on_loaded(pd)
                if writable and marker.exists():
                    marker.delete()  # from now on a crash must lead to recovery
                    deleted_markers.append(marker)
        except BaseException as exc:
            undone = True
            for log in {id(x): x for x in [*self.logs.values(), *loaded]}.values():  # release the files, trim
                # the preallocated indexes
                try:
                    log.close()
                except (OSError, KlogError):
                    undone = False
            if undone:
                for m in deleted_markers:  # every loaded log was closed cleanly: as found
                    m.write(self._broker_epochs.get(m.path.parent))
            for lock in self._locks:  # a failed open holds nothing
                lock.release()
            self._locks = []
            if isinstance(exc, OSError):
                raise storage_error(exc, "opening the log dirs for writing" if writable else "opening the log dirs",
                                    ) from exc
            raise

    def _lock(self, d: Path) -> None:
        # refused: the caller's handler releases the locks taken so far and writes nothing (close()
        # would write checkpoints and clean-shutdown markers into dirs it never loaded, or never held)
        self._locks.append(LogDirLock(d))

    def config_for(self, topic: str) -> LogConfig:
        """Explicit ``topic_configs`` given to the manager, else :meth:`resolved_config_for`'s."""
        explicit = self.topic_configs.get(topic)
        if explicit is not None:
            return explicit
        return self.resolved_config_for(topic).config

    def resolved_config_for(self, topic: str) -> ResolvedConfig:
        """Kafka's defaults (or ``config``) < internal-topic configs < KRaft cluster defaults < KRaft
        topic configs < the dirs' ``klog-topic-configs.json`` < ``overrides``, with each value's source."""
        return resolve_topic_config(topic, self.stored_topic_configs, default=self.default_config, kraft=self.kraft,
                                    overrides=self.overrides)

    def reopen(self, tp: TopicPartition) -> Log:
        """A partition that a ``close_each`` manager loaded and closed, opened again (it was closed
        cleanly: no recovery), in place of the closed one. Close it when done with it."""
        old = self.logs[tp]
        if not old.closed:
            return old
        log = Log(old.dir, self.config_for(tp.topic), writable=self.writable, recovery_point=old.recovery_point,
                  log_start_offset=old.log_start_offset, had_clean_shutdown=True)
        self.logs[tp] = log
        return log

    def get_log(self, tp: TopicPartition) -> Log | None:
        return self.logs.get(tp)

    def create_log(self, tp: TopicPartition, config: LogConfig | None = None, log_dir: Path | None = None) -> Log:
        """The partition's log, created (as an empty directory) in the first log dir if needed."""
        if not self.writable:
            raise KlogError("cannot create a partition: the log manager is read-only")
        if tp in self.logs:
            return self.logs[tp]
        validate_topic_name(tp.topic)
        if isinstance(tp.partition, bool) or not isinstance(tp.partition, int) or not 0 <= tp.partition <= MAX_PARTITION:
            raise InvalidTopicError(f"invalid partition {tp.partition!r} for topic {tp.topic!r}; expected 0..{MAX_PARTITION}")
        d = log_dir or min(self.log_dirs, key=lambda x: sum(1 for v in self._dir_of.values() if v == x))
        path = d / tp.dir_name
        try:
            path.mkdir(exist_ok=True)
        except OSError as exc:
            raise storage_error(exc, f"creating partition dir {tp.dir_name}", path) from exc
        if config is not None:
            self.topic_configs[tp.topic] = config
        log = Log(path, self.config_for(tp.topic), writable=True, had_clean_shutdown=True)
        self.logs[tp] = log
        self._dir_of[tp] = d
        return log

    def delete_log(self, tp: TopicPartition) -> None:
        """Delete a partition as Kafka does: rename it ``<topic>-<p>.<uuid>-delete`` (readers that
        opened its files keep reading; a broker skips such dirs), then remove it."""
        import shutil
        import uuid

        if not self.writable:
            raise KlogError("cannot delete a partition: the log manager is read-only")
        log = self.logs.pop(tp, None)
        if log is None:
            raise KlogError(f"no such partition: {tp}")
        log.close()
        doomed = log.dir.with_name(delete_dir_name(tp.dir_name, uuid.uuid4().hex))
        os.replace(log.dir, doomed)
        del self._dir_of[tp]
        self.checkpoint()
        shutil.rmtree(doomed)

    def retention(self, now_ms: int | None = None) -> dict[TopicPartition, list[int]]:
        """Apply retention to every log; returns the deleted segments' base offsets per partition."""
        out = {}
        for tp in list(self.logs):
            was_closed = self.logs[tp].closed  # a close_each manager: one partition's files open at a time
            log = self.reopen(tp)
            try:
                deleted = log.delete_old_segments(now_ms)
            finally:
                if was_closed:
                    log.close()
            if deleted:
                out[tp] = deleted
        self.checkpoint()
        return out

    def flush(self) -> None:
        for log in self.logs.values():
            if log.writable and not log.closed:
                log.flush()

    def checkpoint(self) -> None:
        """Write each dir's recovery points and log start offsets (temp file + fsync + rename)."""
        if not self.writable:
            return
        for d in self.log_dirs:
            mine = {tp: log for tp, log in self.logs.items() if self._dir_of[tp] == d}
            OffsetCheckpointFile(d / RECOVERY_POINT_OFFSET_CHECKPOINT).write(
                {tp: log.recovery_point for tp, log in mine.items()})
            OffsetCheckpointFile(d / LOG_START_OFFSET_CHECKPOINT).write(
                {tp: log.log_start_offset for tp, log in mine.items()
                 if log.log_start_offset > log.segments[0].base_offset})

    def close(self) -> None:
        """Flush, close every log, write the checkpoints and the clean-shutdown marker, unlock."""
        try:
            for log in self.logs.values():
                log.close()
            if self.writable and self.logs is not None:
                self.checkpoint()
                for d in self.log_dirs:
                    CleanShutdownFile.in_dir(d).write(self._broker_epochs.get(d))
        finally:
            for lock in self._locks:
                lock.release()
            self._locks = []

    def __enter__(self) -> LogManager:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
