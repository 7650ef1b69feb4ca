"""What one query sees of a log dir's own files: one pass per dir, not one per partition.

A log dir's checkpoints (``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``,
``cleaner-offset-checkpoint``), its clean-shutdown marker and its commit journals
(``.klog-commit-*.json``) are shared by all its partitions, as are its topic configs
(``klog-topic-configs.json``, the KRaft metadata). Opening each partition with its own
read of them makes a query over N partitions parse N whole checkpoints and glob the dir N times:
O(N²). A :class:`LogDirState` reads each of them **once per query** (again only when it changed
during the query: O(1) checks per partition tell) and every partition
open of that query takes its part from it (:func:`~storage_core.log.manager.open_log_read_only`,
:func:`~storage_core.log.lost.gather_evidence`, the loader's hiding of unfinished commits,
``describe``, the planner, the stream source). :class:`LogDirStates` holds one per dir for a query.

The rules, in this one place:

* **Checkpoints** are parsed on first use and kept for the query while they stay the same
  file: each use stats the file (O(1), not O(partitions)) and parses it again only when its identity (inode, size, mtime, ctime) changed. A checkpoint is replaced by a
  rename, which always gives it a new inode, so what a partition takes is what a read of the
  file at that moment would give, as when each partition read the whole file: the checkpoints
  are read *before* the partition is opened and no older than that. (Older would not do: a
  writer moves the log start offset, then deletes the segments below it; evidence read long
  before the listing would call the index of a deleted segment lost data.) A query reads them
  afresh: nothing is kept across queries. The **clean-shutdown marker** is a stat at each use,
  and whether the dir is **held** (its ``.lock``) a lock query at each use.
  A topic's **config** is resolved once per query while ``klog-topic-configs.json`` (a stat)
  and the KRaft metadata (cached by :func:`~storage_core.log.cluster_metadata.cluster_metadata`
  while its files are unchanged) stay the same.
* **Journals** hide the segments of a commit that has not finished, so a job is never seen in
  part (:mod:`storage_core.log.journal`). That must hold for the partition's listing, which
  comes after the query started, so the journals are not simply kept: after listing a partition
  dir the loader asks :meth:`LogDirState.pending_commit_from`, which stats the log dir and
  globs the journals again only if the dir changed since the last glob (a journal is created,
  replaced and removed by renames and unlinks in the log dir, each of which changes its
  mtime). Within a file system's timestamp granularity of the last change, an unchanged mtime
  proves nothing, so the glob is repeated until the change is older than
  :data:`MTIME_MARGIN_NS` (two seconds where the dir's timestamps are whole seconds). The
  answer is then what a glob made right after the listing would have said; a query over an
  unchanging dir globs it once. In object storage (no dir mtime, and klog never commits there)
  the journals are globbed once per query.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Mapping
from pathlib import Path

from storage_core.files import (
    CLEANER_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_OFFSET_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    TOPIC_CONFIGS_FILE,
)
from storage_core.fs import ObjectPath, as_path
from storage_core.log.checkpoint import CleanShutdownFile, OffsetCheckpointFile
from storage_core.log.cluster_metadata import ClusterMetadata, cluster_metadata
from storage_core.log.config import LogConfig
from storage_core.log.journal import pending_journal_offsets
from storage_core.log.lock import is_held
from storage_core.log.topic_configs import ResolvedConfig, config_for_topic, load_topic_configs, resolve_topic_config
from storage_core.log.topic_partition import TopicPartition

__all__ = ["MTIME_MARGIN_NS", "LogDirState", "LogDirStates"]

#: How old the log dir's last change must be for an unchanged mtime to prove that no journal came
#: or went since (local file systems stamp with a clock that ticks every 1-10 ms).
MTIME_MARGIN_NS = 50_000_000
_COARSE_MARGIN_NS = 2_000_000_000  # a dir whose mtime is a whole second: a file system of 1-2 s stamps


class LogDirState:
    """One log dir's checkpoints, clean-shutdown marker and pending commits, as one query sees
    them (see the module): each checkpoint is parsed once per version (a stat tells whether it
    changed), the journals are globbed again only when the dir changed. Threads may share one
    (its caches are under a lock)."""

    __slots__ = ("_checkpoints", "_config_key", "_configs", "_journal_checked_ns", "_journal_token", "_journals",
                 "_lock", "_stored_configs", "log_dir")

    def __init__(self, log_dir: str | os.PathLike[str]) -> None:
        self.log_dir: Path = as_path(log_dir)
        #: checkpoint name -> (the file's identity when parsed, its offsets)
        self._checkpoints: dict[str, tuple[_Identity | None, dict[TopicPartition, int]]] = {}
        self._config_key: tuple[_Identity | None, ClusterMetadata | None] | None = None
        self._stored_configs: dict[str, dict[str, str]] = {}
        self._configs: dict[str, LogConfig] = {}
        self._journals: dict[str, int] | None = None
        self._journal_token: tuple[int, int, int] | None = None
        self._journal_checked_ns = 0
        #: the query's partitions may be opened on threads (the planner's): one lock over the caches
        self._lock = threading.Lock()

    def _offsets(self, name: str) -> Mapping[TopicPartition, int]:
        path = self.log_dir / name
        with self._lock:
            identity = _identity(path)
            cached = self._checkpoints.get(name)
            if cached is not None and cached[0] == identity:
                return cached[1]
            # replaced between the stat and the read: the next use sees a new identity and reads again
            offsets = OffsetCheckpointFile(path).read()
            self._checkpoints[name] = (identity, offsets)
            return offsets

    @property
    def recovery_points(self) -> Mapping[TopicPartition, int]:
        """``recovery-point-offset-checkpoint`` as it is now (empty if missing)."""
        return self._offsets(RECOVERY_POINT_OFFSET_CHECKPOINT)

    @property
    def log_starts(self) -> Mapping[TopicPartition, int]:
        """``log-start-offset-checkpoint`` as it is now (empty if missing)."""
        return self._offsets(LOG_START_OFFSET_CHECKPOINT)

    @property
    def high_watermarks(self) -> Mapping[TopicPartition, int]:
        """``replication-offset-checkpoint`` (a broker's high watermarks) as it is now (empty if missing)."""
        return self._offsets(REPLICATION_OFFSET_CHECKPOINT)

    @property
    def cleaner_offsets(self) -> Mapping[TopicPartition, int]:
        """``cleaner-offset-checkpoint`` as it is now (empty if missing)."""
        return self._offsets(CLEANER_OFFSET_CHECKPOINT)

    def config_for(self, topic: str) -> LogConfig:
        """The config a partition of ``topic`` in this dir opens with (what
        :class:`~storage_core.log.log.Log` resolves without one: Kafka's defaults, the KRaft metadata,
        the dir's ``klog-topic-configs.json``), resolved once per topic while neither file changed."""
        kraft = cluster_metadata(self.log_dir)  # cached in the process while its files are unchanged
        with self._lock:
            identity = _identity(self.log_dir / TOPIC_CONFIGS_FILE)
            if self._config_key is None or identity != self._config_key[0] or kraft is not self._config_key[1]:
                self._stored_configs = load_topic_configs(self.log_dir)
                self._configs = {}
                self._config_key = (identity, kraft)
            config = self._configs.get(topic)
            if config is None:
                config = self._configs[topic] = config_for_topic(topic, self._stored_configs, kraft=kraft)
            return config

    def resolved_config(self, topic: str) -> ResolvedConfig:
        """:meth:`config_for`'s config of ``topic`` with where each value came from."""
        return resolve_topic_config(topic, load_topic_configs(self.log_dir), kraft=cluster_metadata(self.log_dir))

    def config_known(self, topic: str) -> bool:
        """Whether the dir says how ``topic`` is configured (its KRaft metadata, or
        ``klog-topic-configs.json`` listing the topic), rather than :meth:`config_for` falling back
        to Kafka's defaults: a copy of a compacted topic's dir without either reads as ``delete``."""
        self.config_for(topic)
        if cluster_metadata(self.log_dir) is not None:
            return True
        with self._lock:
            return topic in self._stored_configs

    @property
    def clean_shutdown(self) -> bool:
        """Whether the dir holds the clean-shutdown marker (``.kafka_cleanshutdown``) now: a stat."""
        return CleanShutdownFile.in_dir(self.log_dir).exists()

    @property
    def held(self) -> bool:
        """Whether a process holds the dir's ``.lock`` now (a running broker, or a klog writer: it is
        being appended to): asked of the lock each time, not cached. A dir in object storage is never held."""
        return not isinstance(self.log_dir, ObjectPath) and is_held(self.log_dir)

    def _token(self) -> tuple[int, int, int] | None:
        if isinstance(self.log_dir, ObjectPath):
            return None
        st = os.stat(self.log_dir)
        return (st.st_mtime_ns, st.st_ctime_ns, st.st_ino)

    def pending_commit_from(self, partition_dir_name: str) -> int | None:
        """The first offset an unfinished commit is adding to the partition dir of that name (the
        loader hides its segments from there), as a glob of the journals made now would say: call
        it after listing the partition dir (see the module)."""
        with self._lock:
            if self._journals is not None and isinstance(self.log_dir, ObjectPath):
                return self._journals.get(partition_dir_name)
            token = self._token()
            if self._journals is None or token != self._journal_token or self._ambiguous():
                checked = time.time_ns()
                token = self._token()  # the dir as the glob below finds it (or newer: then globbed again next time)
                self._journals = pending_journal_offsets(self.log_dir)
                self._journal_token = token
                self._journal_checked_ns = checked
            return self._journals.get(partition_dir_name)

    def _ambiguous(self) -> bool:
        """Whether the last glob came within a timestamp tick of the dir's last change: a change
        after it could have left the mtime as it was."""
        if self._journal_token is None:
            return False
        mtime = self._journal_token[0]
        margin = _COARSE_MARGIN_NS if mtime % 1_000_000_000 == 0 else MTIME_MARGIN_NS
        return self._journal_checked_ns - mtime < margin


_Identity = tuple[int, int, int, int]


def _identity(path: Path) -> _Identity | None:
    """What tells one version of a file from the next: inode, size, mtime, ctime (None: missing)."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class LogDirStates:
    """The :class:`LogDirState` of each log dir one query touches, each made on first use. Threads
    may share one (the workers of a command over many partitions, the planner's): each dir's files
    are then read once, not once per partition or per thread."""

    __slots__ = ("_by_dir", "_lock")

    def __init__(self) -> None:
        self._by_dir: dict[Path, LogDirState] = {}
        self._lock = threading.Lock()

    def of(self, log_dir: str | os.PathLike[str]) -> LogDirState:
        d = as_path(log_dir)
        with self._lock:
            state = self._by_dir.get(d)
            if state is None:
                state = self._by_dir[d] = LogDirState(d)
            return state
