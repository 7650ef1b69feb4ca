"""What one query sees of a log dir's own files: one pass per dir, not one per partition.

A log dir's checkpoints (``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``,
``cleaner-offset-checkpoint``), its clean-shutdown marker and its commit journals
(``.klog-commit-*.json``) are shared by all its partitions. Opening each partition with its own
read of them makes a query over N partitions parse N whole checkpoints and glob the dir N times:
O(N²). A :class:`LogDirState` reads each of them **at most once per query** and every partition
open of that query takes its part from it (:func:`~storage_core.log.manager.open_log_read_only`,
:func:`~storage_core.log.lost.gather_evidence`, the loader's hiding of unfinished commits,
``describe``, the planner, the stream source). :class:`LogDirStates` holds one per dir for a query.

The rules, in this one place:

* **Checkpoints and the marker** are read on first use and kept for the query, so each is read
  *before* the open of every partition that uses it (a live broker only adds data after it: an
  older recovery point says less, never more). A query reads them afresh: nothing is kept
  across queries.
* **Journals** hide the segments of a commit that has not finished, so a job is never seen in
  part (:mod:`storage_core.log.journal`). That must hold for the partition's listing, which
  comes after the query started, so the journals are not simply kept: after listing a partition
  dir the loader asks :meth:`LogDirState.pending_commit_from`, which ``stat``\\ s the log dir and
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
import time
from collections.abc import Mapping
from pathlib import Path

from storage_core.files import CLEANER_OFFSET_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_OFFSET_CHECKPOINT
from storage_core.fs import ObjectPath, as_path
from storage_core.log.checkpoint import CleanShutdownFile, OffsetCheckpointFile
from storage_core.log.journal import pending_journal_offsets
from storage_core.log.topic_partition import TopicPartition

__all__ = ["MTIME_MARGIN_NS", "LogDirState", "LogDirStates"]

#: How old the log dir's last change must be for an unchanged mtime to prove that no journal came
#: or went since (local file systems stamp with a clock that ticks every 1-10 ms).
MTIME_MARGIN_NS = 50_000_000
_COARSE_MARGIN_NS = 2_000_000_000  # a dir whose mtime is a whole second: a file system of 1-2 s stamps


class LogDirState:
    """One log dir's checkpoints, clean-shutdown marker and pending commits, as one query sees
    them (see the module): each file is read at most once, on first use; the values never change
    afterwards, except the pending commits, which are re-checked against the dir's mtime."""

    __slots__ = ("_cleaner", "_clean_shutdown", "_journal_checked_ns", "_journal_token", "_journals",
                 "_log_starts", "_recovery", "log_dir")

    def __init__(self, log_dir: str | os.PathLike[str]) -> None:
        self.log_dir: Path = as_path(log_dir)
        self._recovery: dict[TopicPartition, int] | None = None
        self._log_starts: dict[TopicPartition, int] | None = None
        self._cleaner: dict[TopicPartition, int] | None = None
        self._clean_shutdown: bool | None = None
        self._journals: dict[str, int] | None = None
        self._journal_token: tuple[int, int, int] | None = None
        self._journal_checked_ns = 0

    @property
    def recovery_points(self) -> Mapping[TopicPartition, int]:
        """``recovery-point-offset-checkpoint`` (empty if missing)."""
        if self._recovery is None:
            self._recovery = OffsetCheckpointFile(self.log_dir / RECOVERY_POINT_OFFSET_CHECKPOINT).read()
        return self._recovery

    @property
    def log_starts(self) -> Mapping[TopicPartition, int]:
        """``log-start-offset-checkpoint`` (empty if missing)."""
        if self._log_starts is None:
            self._log_starts = OffsetCheckpointFile(self.log_dir / LOG_START_OFFSET_CHECKPOINT).read()
        return self._log_starts

    @property
    def cleaner_offsets(self) -> Mapping[TopicPartition, int]:
        """``cleaner-offset-checkpoint`` (empty if missing)."""
        if self._cleaner is None:
            self._cleaner = OffsetCheckpointFile(self.log_dir / CLEANER_OFFSET_CHECKPOINT).read()
        return self._cleaner

    @property
    def clean_shutdown(self) -> bool:
        """Whether the dir holds the clean-shutdown marker (``.kafka_cleanshutdown``)."""
        if self._clean_shutdown is None:
            self._clean_shutdown = CleanShutdownFile.in_dir(self.log_dir).exists()
        return self._clean_shutdown

    def _token(self) -> tuple[int, int, int] | None:
        if isinstance(self.log_dir, ObjectPath):
            return None
        st = os.stat(self.log_dir)
        return (st.st_mtime_ns, st.st_ctime_ns, st.st_ino)

    def pending_commit_from(self, partition_dir_name: str) -> int | None:
        """The first offset an unfinished commit is adding to the partition dir of that name (the
        loader hides its segments from there), as a glob of the journals made now would say: call
        it after listing the partition dir (see the module)."""
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


class LogDirStates:
    """The :class:`LogDirState` of each log dir one query touches, each made on first use."""

    __slots__ = ("_by_dir",)

    def __init__(self) -> None:
        self._by_dir: dict[Path, LogDirState] = {}

    def of(self, log_dir: str | os.PathLike[str]) -> LogDirState:
        d = as_path(log_dir)
        state = self._by_dir.get(d)
        if state is None:
            state = self._by_dir[d] = LogDirState(d)
        return state
