"""Every name klog gives to, or looks for in, a file or directory of a log dir (Kafka's ``LogFileUtils``,
plus the names ``LogManager``, ``UnifiedLog`` and the checkpoint classes use, and klog's own).

A partition dir (``<topic>-<partition>``, see :mod:`storage_core.log.topic_partition`) holds a
segment's files, named by its base offset zero-padded to 20 digits (:func:`filename_prefix`)::

    00000000000000000042.log          the records                     LOG_SUFFIX
    00000000000000000042.index        offset index                    INDEX_SUFFIX
    00000000000000000042.timeindex    time index                      TIME_INDEX_SUFFIX
    00000000000000000042.txnindex     aborted transactions            TXN_INDEX_SUFFIX
    00000000000000000042.snapshot     producer state at offset 42     SNAPSHOT_SUFFIX
    <one of them>.deleted             renamed for deletion (retention, a compaction's swap), removed
                                      after file.delete.delay.ms      DELETED_SUFFIX
    <one of them>.cleaned             written by a cleaning, not swapped in yet    CLEANED_SUFFIX
    <one of them>.swap                a cleaned segment being swapped in           SWAP_SUFFIX
    leader-epoch-checkpoint, partition.metadata

A log dir holds the partition dirs (and ``<topic>-<partition>.<uuid>-delete`` / ``-future`` /
``-stray`` ones, which are skipped), ``.lock``, ``.kafka_cleanshutdown``, the offset checkpoints,
``meta.properties`` and, written by klog only: ``klog-topic-configs.json``, commit journals
``.klog-commit-<job>.json``, streaming sink marks ``.klog-sink-<sink id>.json`` and ``klog snapshot``'s
``klog-snapshot.json``; staged segments
lie in ``.klog-staging-<job>-...`` dirs inside a partition dir (a broker ignores all of these).

A file is written as ``<name>.tmp`` and renamed over ``<name>`` (:data:`TMP_SUFFIX`). Imports only
:mod:`storage_core.errors`.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from storage_core.errors import KlogError
from storage_core.fs import as_path, list_names

__all__ = [
    "CLEANED_SUFFIX",
    "CLEANER_OFFSET_CHECKPOINT",
    "CLEAN_SHUTDOWN_FILE",
    "DELETED_SUFFIX",
    "DELETE_DIR_SUFFIX",
    "FUTURE_DIR_SUFFIX",
    "INDEX_SUFFIX",
    "INDEX_SUFFIXES",
    "JOURNAL_PREFIX",
    "JSON_SUFFIX",
    "LEADER_EPOCH_CHECKPOINT",
    "LOCK_FILE",
    "LOG_START_OFFSET_CHECKPOINT",
    "LOG_SUFFIX",
    "MARKED_DIR_SUFFIXES",
    "REMOTE_INDEX_CACHE_DIR",
    "REMOTE_SEGMENT_STEM",
    "META_PROPERTIES_FILE",
    "OFFSET_CHECKPOINT_FILES",
    "PARTITION_METADATA_FILE",
    "RECOVERY_POINT_OFFSET_CHECKPOINT",
    "REPLICATION_OFFSET_CHECKPOINT",
    "SEGMENT_SUFFIXES",
    "SINK_MARK_PREFIX",
    "SNAPSHOT_MANIFEST_FILE",
    "SNAPSHOT_SUFFIX",
    "STAGING_PREFIX",
    "STRAY_DIR_SUFFIX",
    "SWAP_SUFFIX",
    "TIME_INDEX_SUFFIX",
    "TMP_SUFFIX",
    "TOPIC_CONFIGS_FILE",
    "LOG_DIR_FILES",
    "TXN_INDEX_SUFFIX",
    "base_offset_of",
    "delete_dir_name",
    "filename_prefix",
    "has_log_files",
    "is_log_file",
    "is_offset_named",
    "is_segment_named",
    "journal_name",
    "segment_file",
    "sink_mark_name",
    "staging_prefix",
]

# --- a segment's files (LogFileUtils) ------------------------------------------------------------

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
#: A producer state snapshot (``LogFileUtils.PRODUCER_SNAPSHOT_FILE_SUFFIX``).
SNAPSHOT_SUFFIX = ".snapshot"
#: A segment's files, in the order a swap renames them (the ``.log`` first).
SEGMENT_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
#: The files that only index a ``.log`` (removed when their ``.log`` is missing).
INDEX_SUFFIXES = (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
#: A file renamed for deletion, removed after ``file.delete.delay.ms``.
DELETED_SUFFIX = ".deleted"
#: A file a cleaning wrote, before it is renamed to ``.swap``.
CLEANED_SUFFIX = ".cleaned"
#: A cleaned file on its way into place (completed by the next writable open).
SWAP_SUFFIX = ".swap"
#: What a file is written as before the atomic rename (``CheckpointFile.tempPath``).
TMP_SUFFIX = ".tmp"


def filename_prefix(offset: int) -> str:
    """``LogFileUtils.filenamePrefixFromOffset``: the base offset zero-padded to 20 digits."""
    return f"{offset:020d}"


def segment_file(directory: str | os.PathLike[str], base_offset: int, suffix: str, state: str = "") -> Path:
    """``<directory>/<20-digit base offset><suffix><state>`` (``LogFileUtils.logFile`` and its
    siblings; ``state`` is ``""``, :data:`DELETED_SUFFIX`, :data:`CLEANED_SUFFIX` or :data:`SWAP_SUFFIX`)."""
    return as_path(directory) / (filename_prefix(base_offset) + suffix + state)


def is_offset_named(name: str) -> bool:
    """Whether a file name starts with a base offset (``00000000000000000042.log.deleted``)."""
    return name.split(".", 1)[0].isdigit()


def is_log_file(name: str) -> bool:
    """A segment's ``<base offset>.log`` (not ``.log.swap``, not ``.log.deleted``)."""
    return name.endswith(LOG_SUFFIX) and is_offset_named(name)


#: A remote copy's file name before the suffix (tiered storage, Kafka's ``LocalTieredStorage``):
#: ``<base offset, 20 digits>-<segment id, Kafka's Uuid in base64url>``
REMOTE_SEGMENT_STEM = re.compile(r"(\d{20})-[A-Za-z0-9_-]{22}")


def is_segment_named(name: str) -> bool:
    """Whether a file name is a segment's: offset-named (:func:`is_offset_named`) or a remote
    copy's (:data:`REMOTE_SEGMENT_STEM`). Listings of a log dir use :func:`is_offset_named`."""
    return is_offset_named(name) or REMOTE_SEGMENT_STEM.fullmatch(name.split(".", 1)[0]) is not None


def base_offset_of(path: str | os.PathLike[str]) -> int:
    """The base offset in a segment file's name (``00000000000000000042.log`` → 42), a remote
    copy's included (``00000000000000000042-<segment id>.index``, :data:`REMOTE_SEGMENT_STEM`)."""
    name = Path(path).name
    stem = name.split(".", 1)[0]
    remote = REMOTE_SEGMENT_STEM.fullmatch(stem)
    if remote is not None:
        return int(remote.group(1))
    if not stem.isdigit():
        raise KlogError(f"not a segment file name: {name!r}; expected <20-digit base offset>.log (or a remote "
                        "copy's <20-digit base offset>-<segment id>.log)")
    return int(stem)


def has_log_files(directory: str | os.PathLike[str]) -> bool:
    """Whether a directory holds a ``*.log`` file (a partition dir with data, as far as names tell)."""
    return any(n.endswith(LOG_SUFFIX) for n in list_names(as_path(directory)))


# --- a log dir's files (LogManager, checkpoints) -------------------------------------------------

#: The lock every writer of a log dir holds (``LogManager.LockFileName``).
LOCK_FILE = ".lock"
#: Present after a clean shutdown (``CleanShutdownFileHandler``).
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
RECOVERY_POINT_OFFSET_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
#: The four log-dir level checkpoints, all read and written as ``OffsetCheckpointFile``.
OFFSET_CHECKPOINT_FILES = (
    RECOVERY_POINT_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    CLEANER_OFFSET_CHECKPOINT,
)
META_PROPERTIES_FILE = "meta.properties"
#: In a partition dir.
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
PARTITION_METADATA_FILE = "partition.metadata"

#: Partition dirs being deleted, moved (alter-log-dirs) or stray (KIP-858): ``<topic>-<p>.<uuid><suffix>``.
DELETE_DIR_SUFFIX = "-delete"
FUTURE_DIR_SUFFIX = "-future"
STRAY_DIR_SUFFIX = "-stray"
MARKED_DIR_SUFFIXES = (DELETE_DIR_SUFFIX, FUTURE_DIR_SUFFIX, STRAY_DIR_SUFFIX)
#: The broker's cache of remote segments' indexes (``RemoteIndexCache.DIR_NAME``, tiered storage):
#: a dir of the log dir that is no partition, which ``LogManager`` passes over as well.
REMOTE_INDEX_CACHE_DIR = "remote-log-index-cache"


def delete_dir_name(dir_name: str, unique: str) -> str:
    """What a partition dir is renamed to when it is deleted (``LocalLog.logDeleteDirName``)."""
    return f"{dir_name}.{unique}{DELETE_DIR_SUFFIX}"


# --- klog's own (no broker writes these) -------------------------------------------------------

#: Topic configs of a log dir written without a broker (:mod:`storage_core.log.topic_configs`).
TOPIC_CONFIGS_FILE = "klog-topic-configs.json"
#: What ``klog snapshot`` copied into a log dir, written last (:mod:`storage_core.tools.snapshot`).
SNAPSHOT_MANIFEST_FILE = "klog-snapshot.json"
#: Files a log dir holds beside its partition dirs (a broker's, and klog's own).
LOG_DIR_FILES = (LOCK_FILE, CLEAN_SHUTDOWN_FILE, *OFFSET_CHECKPOINT_FILES, META_PROPERTIES_FILE, TOPIC_CONFIGS_FILE,
                 SNAPSHOT_MANIFEST_FILE)
#: A task's staged segments, a dir inside the partition dir: ``.klog-staging-<job>-<task>-...``.
STAGING_PREFIX = ".klog-staging-"
#: A commit's journal in the log dir: ``.klog-commit-<job>.json``.
JOURNAL_PREFIX = ".klog-commit-"
#: A streaming sink's last committed batch in the log dir: ``.klog-sink-<sink id>.json``.
SINK_MARK_PREFIX = ".klog-sink-"
JSON_SUFFIX = ".json"


def staging_prefix(job_id: str) -> str:
    """What the names of a job's staging dirs start with."""
    return f"{STAGING_PREFIX}{job_id}-"


def journal_name(job_id: str) -> str:
    return f"{JOURNAL_PREFIX}{job_id}{JSON_SUFFIX}"


def sink_mark_name(sink_id: str) -> str:
    return f"{SINK_MARK_PREFIX}{sink_id}{JSON_SUFFIX}"
