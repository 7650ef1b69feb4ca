"""Staged writes and the journaled commit that makes them visible all at once.

Protocol (what a Spark job, or any batch writer, does):

1. **Stage.** Each task writes whole segments (``.log`` + ``.index`` + ``.timeindex``) into a
   staging directory *inside* the target partition directory,
   ``<topic>-<p>/.klog-staging-<job>-<task>-<attempt>/``. Kafka's loader only looks at files in
   a partition dir, so a broker ignores staging, and nothing staged is visible to readers.
   Offsets are staged from :data:`STAGED_ORIGIN` (2**62), far above any real offset.
2. **Commit** (:func:`commit_job`, on the driver, holding the log dir's ``.lock``): the log
   end offset of each partition is read, every staged segment gets its final base offset (in
   task order), and the plan is written to a journal ``<log dir>/.klog-commit-<job>.json``
   (temp file, fsync, rename). Then, entry by entry, each staged batch's base offset is patched
   in place (it lies outside the CRC: nothing is re-encoded), the files are fsynced and renamed
   into the partition (indexes first, ``.log`` last). Checkpoints and the clean-shutdown marker
   are written, and the journal is removed.
3. **Crash.** Readers hide the segments of a journal that is still there, so a job is never
   seen in part. A journal left behind is settled by the next commit, writable open or the
   job's own ``abort`` (:func:`recover_commits`): the commit did not return, so its job failed
   as far as Spark and the user know, and it is **rolled back** (its segments removed: the job's
   records are absent and a rerun writes them once). Only an overwrite that had started to
   delete the old data is completed instead. A job that never wrote its journal left only
   staging, which :func:`collect_staging` removes.
4. **Streaming sinks** (:class:`SinkBatch`): a micro-batch commit also records
   ``<log dir>/.klog-sink-<sink id>.json`` = the last batch id committed there, written after
   the data is in place and before the journal goes (the journal's removal is the commit
   point). A rollback restores the mark the journal saved, so mark and data always agree. A
   commit whose batch id is not above the mark was already made (Spark replays a micro-batch
   with the same id after a failure): its staging is dropped and nothing is written twice.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import struct
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TypeVar

from storage_core.errors import CommitError, CorruptCheckpointError, KlogError, LogDirLockedError, storage_error
from storage_core.faults import maybe_crash_at_step
from storage_core.files import (
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    JOURNAL_PREFIX,
    JSON_SUFFIX,
    LOG_START_OFFSET_CHECKPOINT,
    LOG_SUFFIX,
    RECOVERY_POINT_OFFSET_CHECKPOINT,
    SEGMENT_SUFFIXES,
    SNAPSHOT_SUFFIX,
    STAGING_PREFIX,
    TIME_INDEX_SUFFIX,
    TMP_SUFFIX,
    base_offset_of,
    filename_prefix,
    is_offset_named,
    journal_name,
    sink_mark_name,
    staging_prefix,
)
from storage_core.limits import INT64_MAX
from storage_core.log.checkpoint import CleanShutdownFile, OffsetCheckpointFile, fsync_dir
from storage_core.log.config import LogConfig
from storage_core.log.lock import LogDirLock
from storage_core.log.log import Log
from storage_core.log.segment import LogSegment, RollParams
from storage_core.log.topic_partition import TopicPartition
from storage_core.record.columnar import encode_arrow
from storage_core.record.compression import CompressionType
from storage_core.record.file_records import FileRecords, iter_batches

#: Staged batches carry offsets from here; patched ones are below it.
STAGED_ORIGIN = 1 << 62
_BASE_OFFSET = struct.Struct(">q")


def pending_journal_offsets(log_dir: str | os.PathLike[str]) -> dict[str, int]:
    """Partition dir → the first offset an unfinished commit is adding there. Readers hide
    segments from that offset on, so a job is visible all at once or not at all."""
    out: dict[str, int] = {}
    for j in Path(log_dir).glob(JOURNAL_PREFIX + "*" + JSON_SUFFIX):
        try:
            journal = load_journal(j)
        except FileNotFoundError:
            continue  # the commit finished (and removed it) since the listing
        for e in journal["entries"]:  # type: ignore[attr-defined]
            pdir = str(e["partition_dir"])
            out[pdir] = min(out.get(pdir, INT64_MAX), int(e["final_base"]))
    return out


def _bad_journal(path: Path, why: str) -> CorruptCheckpointError:
    return CorruptCheckpointError(f"not a klog commit journal: {why}; expected the JSON a klog commit writes "
                                  "(job, entries of partition_dir/staging_dir/staged_base/final_base, ends, starts, "
                                  "phase). Move the file away to open the log dir; the commit it describes is then "
                                  "neither completed nor rolled back", path=path)


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= INT64_MAX


def load_journal(path: str | os.PathLike[str]) -> dict[str, object]:
    """Read and check a commit journal. Recovery renames and deletes the files a journal names,
    so every path in it must lie in this log dir: a partition dir that is a direct child of it,
    a staging dir that is a direct child of that partition dir; anything else is a
    :class:`CorruptCheckpointError` and nothing is touched."""
    p = Path(path)
    log_dir = p.parent
    data = p.read_bytes()
    try:
        journal = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise _bad_journal(p, f"not JSON ({str(exc)[:120]})") from None
    if not isinstance(journal, dict):
        raise _bad_journal(p, f"a JSON {type(journal).__name__}")
    entries = journal.get("entries")
    if not isinstance(entries, list):
        raise _bad_journal(p, "'entries' is not a list")
    real_dir = os.path.abspath(log_dir)

    def check_pdir(pdir: object, what: str) -> str:
        if not isinstance(pdir, str) or "\x00" in pdir:
            raise _bad_journal(p, f"{what} {pdir!r} is not a path")
        if os.path.dirname(os.path.abspath(pdir)) != real_dir:
            raise _bad_journal(p, f"{what} {pdir!r} is not a partition dir of {log_dir}")
        try:
            TopicPartition.parse_dir_name(Path(pdir).name)
        except KlogError:
            raise _bad_journal(p, f"{what} {pdir!r} is not named <topic>-<partition>") from None
        return pdir

    for e in entries:
        if not isinstance(e, dict) or set(e) != {"partition_dir", "staging_dir", "staged_base", "final_base"}:
            raise _bad_journal(p, f"entry {str(e)[:120]} does not have exactly partition_dir, staging_dir, "
                                  "staged_base, final_base")
        check_pdir(e["partition_dir"], "entry partition_dir")
        sd = e["staging_dir"]
        if not isinstance(sd, str) or not sd.startswith(STAGING_PREFIX) or "/" in sd or "\x00" in sd or ".." in sd:
            raise _bad_journal(p, f"staging_dir {sd!r} is not a {STAGING_PREFIX}* dir name")
        if not _is_int(e["staged_base"]) or not _is_int(e["final_base"]) or e["staged_base"] < STAGED_ORIGIN \
                or e["final_base"] >= STAGED_ORIGIN:
            raise _bad_journal(p, f"entry bases {e['staged_base']!r}, {e['final_base']!r} are not a staged offset "
                                  f"(>= {STAGED_ORIGIN}) and a final one (below it)")
    for key in ("ends", "starts", "overwrite"):
        m = journal.get(key, {})
        if not isinstance(m, dict):
            raise _bad_journal(p, f"{key!r} is not an object")
        for pdir, off in m.items():
            check_pdir(pdir, f"{key} key")
            if not _is_int(off):
                raise _bad_journal(p, f"{key}[{pdir!r}] = {off!r} is not an offset")
    if "ends" not in journal:
        raise _bad_journal(p, "'ends' is missing")
    if journal.get("phase") not in ("applying", "replacing"):
        raise _bad_journal(p, f"phase {journal.get('phase')!r} is not 'applying' or 'replacing'")
    sink = journal.get("sink")
    if sink is not None:
        if not isinstance(sink, dict) or not isinstance(sink.get("id"), str) or not _is_int(sink.get("batch")) \
                or "/" in sink["id"] or "\x00" in sink["id"]:
            raise _bad_journal(p, f"sink {str(sink)[:120]} is not {{id: name, batch: id, previous: mark}}")
        prev = sink.get("previous")
        if prev is not None and (not isinstance(prev, dict) or not _is_int(prev.get("batch"))):
            raise _bad_journal(p, f"sink previous mark {str(prev)[:120]} is not {{batch: id, job: name}}")
    return journal


@dataclass(frozen=True)
class StagedSegment:
    staged_base: int  # >= STAGED_ORIGIN
    records: int  # offsets it spans (next offset - base)
    size: int


@dataclass(frozen=True)
class StagedPartition:
    """What one task staged for one partition (travels in a Spark commit message)."""

    topic: str
    partition: int
    partition_dir: str
    staging_dir: str
    segments: tuple[StagedSegment, ...]

    @property
    def records(self) -> int:
        return sum(s.records for s in self.segments)


_F = TypeVar("_F", bound=Callable[..., Any])


def _staging_io(doing: str) -> Callable[[_F], _F]:
    """An ``OSError`` while staging (disk full) becomes a :class:`StorageError`; the staged
    files are left for the job's abort (:func:`collect_staging`), nothing is visible."""
    def deco(fn: _F) -> _F:
        @functools.wraps(fn)
        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                return fn(self, *args, **kwargs)
            except OSError as exc:
                raise storage_error(exc, doing, getattr(self, "staging", None)) from exc
        return wrapper  # type: ignore[return-value]
    return deco


class StagingWriter:
    """Stages Arrow rows for one partition as whole segments, offsets from STAGED_ORIGIN."""

    @_staging_io("creating the staging directory")
    def __init__(self, partition_dir: str | os.PathLike[str], staging_name: str, config: LogConfig,
                 compression: CompressionType, max_batch_bytes: int) -> None:
        self.partition_dir = Path(partition_dir)
        self.topic_partition = TopicPartition.parse_dir_name(self.partition_dir.name)
        self.staging = self.partition_dir / staging_name
        if self.staging.exists():
            shutil.rmtree(self.staging)  # a previous try of the same attempt id
        self.staging.mkdir(parents=True)
        self.config = config
        self.compression = compression
        self.max_batch_bytes = min(max_batch_bytes, config.max_message_bytes)
        self.next_offset = STAGED_ORIGIN
        self.segment: LogSegment | None = None
        self.segments: list[StagedSegment] = []

    def _new_segment(self) -> LogSegment:
        if self.segment is not None:
            self._close_segment()
        self.segment = LogSegment(self.staging, self.next_offset, index_interval_bytes=self.config.index_interval_bytes,
                                  max_index_size=self.config.segment_index_bytes, writable=True)
        return self.segment

    def _close_segment(self) -> None:
        seg = self.segment
        assert seg is not None
        seg.on_become_inactive_segment()
        seg.flush()
        size = seg.size_in_bytes
        seg.close()
        if size:
            self.segments.append(StagedSegment(seg.base_offset, self.next_offset - seg.base_offset, size))
        self.segment = None

    @_staging_io("staging records")
    def append(self, table: object, default_timestamp_ms: int) -> int:
        """Encode and stage rows (``key``, ``value``, ``headers``, ``timestamp``); returns records staged."""
        import pyarrow as pa

        assert isinstance(table, (pa.Table, pa.RecordBatch))
        if table.num_rows == 0:
            return 0
        batches = encode_arrow(table, base_offset=self.next_offset, compression=self.compression,
                               max_batch_bytes=self.max_batch_bytes, default_timestamp_ms=default_timestamp_ms)
        now = int(time.time() * 1000)
        for raw in batches:
            (batch,) = list(iter_batches(raw))
            if batch.size_in_bytes > self.config.max_message_bytes:
                from storage_core.errors import RecordTooLargeError

                raise RecordTooLargeError(f"a record batch of {batch.size_in_bytes} bytes is larger than "
                                          f"max.message.bytes ({self.config.max_message_bytes})")
            seg = self.segment or self._new_segment()
            if seg.should_roll(RollParams(self.config.segment_ms, self.config.segment_bytes, batch.max_timestamp,
                                          batch.last_offset, len(raw), now)):
                seg = self._new_segment()
            seg.append(batch.last_offset, batch.max_timestamp, batch.last_offset, raw)
            self.next_offset = batch.last_offset + 1
        rows: int = table.num_rows
        return rows

    @_staging_io("finishing the staged segments")
    def finish(self) -> StagedPartition:
        if self.segment is not None:
            self._close_segment()
        return StagedPartition(self.topic_partition.topic, self.topic_partition.partition, str(self.partition_dir),
                               self.staging.name, tuple(self.segments))


# --- commit ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class JournalEntry:
    partition_dir: str
    staging_dir: str
    staged_base: int
    final_base: int


def _patch_offsets(path: Path, staged_base: int, final_base: int) -> None:
    """Rebase every batch of a staged ``.log`` in place; idempotent (patched bases are < origin)."""
    with open(path, "r+b") as f:
        for batch in FileRecords(path).batches():
            base = batch.base_offset
            if base >= STAGED_ORIGIN:
                f.seek(batch.position)
                f.write(_BASE_OFFSET.pack(final_base + (base - staged_base)))
        f.flush()
        os.fsync(f.fileno())


def _apply(entry: JournalEntry) -> None:
    maybe_crash_at_step()
    part = Path(entry.partition_dir)
    staging = part / entry.staging_dir
    src = filename_prefix(entry.staged_base)
    dst = filename_prefix(entry.final_base)
    log_src = staging / (src + LOG_SUFFIX)
    log_dst = part / (dst + LOG_SUFFIX)
    if log_dst.exists() and not log_src.exists():
        return  # done before a crash
    if not log_src.exists():
        raise CommitError(f"staged segment {log_src} is missing; the commit cannot complete")
    _patch_offsets(log_src, entry.staged_base, entry.final_base)
    maybe_crash_at_step()
    for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
        s = staging / (src + suffix)
        if s.exists():
            os.replace(s, part / (dst + suffix))
    maybe_crash_at_step()
    os.replace(log_src, log_dst)


def _journal_path(log_dir: Path, job_id: str) -> Path:
    return log_dir / journal_name(job_id)


def _write_json(path: Path, obj: object) -> None:
    tmp = path.with_name(path.name + TMP_SUFFIX)
    with open(tmp, "w") as f:
        json.dump(obj, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)


@dataclass(frozen=True)
class SinkBatch:
    """A streaming sink's micro-batch: commits are idempotent per (sink id, batch id)."""

    sink_id: str
    batch_id: int


def sink_mark_path(log_dir: str | os.PathLike[str], sink_id: str) -> Path:
    return Path(log_dir) / sink_mark_name(sink_id)


def read_sink_mark(log_dir: str | os.PathLike[str], sink_id: str) -> dict[str, object] | None:
    """``{"batch": <last committed batch id>, "job": <its commit>}`` or None if none yet."""
    path = sink_mark_path(log_dir, sink_id)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    text = raw.decode("utf-8", "replace")
    try:
        mark = json.loads(raw.decode("utf-8"))
        if not isinstance(mark, dict) or not _is_int(mark["batch"]):
            raise TypeError("batch")
    except (ValueError, KeyError, TypeError, RecursionError):
        raise CorruptCheckpointError(f"{path}: not a klog sink mark (expected JSON with an integer 'batch'); got "
                                     f"{text[:80]!r}") from None
    return dict(mark)


def last_sink_batch(log_dirs: Iterable[str | os.PathLike[str]], sink_id: str) -> int | None:
    """The highest batch id the sink committed in any of ``log_dirs`` (None if none)."""
    marks = [read_sink_mark(d, sink_id) for d in log_dirs if Path(d).is_dir()]
    batches = [int(m["batch"]) for m in marks if m is not None]  # type: ignore[call-overload]
    return max(batches) if batches else None


def _finish(log_dir: Path, journal: dict[str, object], jpath: Path) -> None:
    entries = [JournalEntry(**e) for e in journal["entries"]]  # type: ignore[attr-defined]
    for e in entries:
        _apply(e)
    for pdir in sorted({e.partition_dir for e in entries}):
        fsync_dir(Path(pdir))
    overwrite: dict[str, int] = journal.get("overwrite", {})  # type: ignore[assignment]
    if overwrite and journal.get("phase") != "replacing":
        # from here on the old data goes: a crash must complete the commit, not undo it
        journal["phase"] = "replacing"
        _write_json(jpath, journal)
        maybe_crash_at_step()
    for pdir, new_start in overwrite.items():
        for p in Path(pdir).iterdir():
            if p.is_file() and is_offset_named(p.name) and base_offset_of(p) < new_start \
                    and not p.name.endswith(DELETED_SUFFIX) and p.suffix in (*SEGMENT_SUFFIXES, SNAPSHOT_SUFFIX):
                p.unlink()
        if not any(Path(pdir).glob("*" + LOG_SUFFIX)):  # nothing new for it: an empty segment keeps its offsets
            for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
                (Path(pdir) / (filename_prefix(new_start) + suffix)).touch()
    ends: dict[str, int] = journal["ends"]  # type: ignore[assignment]
    rp_file = OffsetCheckpointFile(log_dir / RECOVERY_POINT_OFFSET_CHECKPOINT)
    recovery = rp_file.read()
    starts_file = OffsetCheckpointFile(log_dir / LOG_START_OFFSET_CHECKPOINT)
    starts = starts_file.read()
    for pdir, end in ends.items():
        tp = TopicPartition.parse_dir_name(Path(pdir).name)
        recovery[tp] = end
        if pdir in overwrite:
            starts.pop(tp, None)  # the first segment now starts at the new log start
    rp_file.write(recovery)
    starts_file.write(starts)
    sink: dict[str, object] | None = journal.get("sink")  # type: ignore[assignment]
    if sink is not None:
        _write_json(sink_mark_path(log_dir, str(sink["id"])), {"batch": sink["batch"], "job": journal["job"]})
        maybe_crash_at_step()
    for e in entries:
        staging = Path(e.partition_dir) / e.staging_dir
        if staging.exists() and not any(staging.glob("*" + LOG_SUFFIX)):
            shutil.rmtree(staging, ignore_errors=True)


def _rollback(log_dir: Path, journal: dict[str, object]) -> None:
    """Undo an interrupted commit: remove what it renamed in (every segment at or above the
    partition's pre-commit log end) and its staging. Readers never saw any of it."""
    starts: dict[str, int] = journal.get("starts", {})  # type: ignore[assignment]
    entries = [JournalEntry(**e) for e in journal["entries"]]  # type: ignore[attr-defined]
    for e in entries:
        part = Path(e.partition_dir)
        if e.final_base < starts.get(e.partition_dir, e.final_base):
            continue  # not ours (cannot happen: final bases start at the pre-commit end)
        for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
            p = part / (filename_prefix(e.final_base) + suffix)
            if p.exists():
                p.unlink()
        staging = part / e.staging_dir
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    for pdir in sorted({e.partition_dir for e in entries}):
        if Path(pdir).is_dir():  # a partition dir removed since the crash: nothing of the commit is left there
            fsync_dir(Path(pdir))
    sink: dict[str, object] | None = journal.get("sink")  # type: ignore[assignment]
    if sink is not None:
        mark_path = sink_mark_path(log_dir, str(sink["id"]))
        mark = read_sink_mark(log_dir, str(sink["id"]))
        if mark is not None and mark.get("job") == journal.get("job"):  # written by the commit undone
            previous = sink.get("previous")
            if previous is None:
                mark_path.unlink()
                fsync_dir(log_dir)
            else:
                _write_json(mark_path, previous)


def recover_commits(log_dir: str | os.PathLike[str], job_id: str | None = None) -> list[str]:
    """Settle every journal left by an interrupted commit (the caller holds the lock).

    A commit that did not return did not succeed as far as its job knows (Spark reports the job
    failed and the user may run it again), so it is **rolled back**: the job's records are absent
    entirely. The exception is an overwrite that had started to remove the old data
    (phase ``replacing``), which is completed. Returns ``"<job>: rolled back|completed"`` lines.
    """
    d = Path(log_dir)
    done = []
    for j in sorted(d.glob(JOURNAL_PREFIX + "*" + JSON_SUFFIX)):
        journal = load_journal(j)
        if job_id is not None and journal.get("job") != job_id:
            continue
        if journal.get("phase") == "replacing":
            _finish(d, journal, j)
            what = "completed"
        else:
            _rollback(d, journal)
            what = "rolled back"
        j.unlink()
        fsync_dir(d)
        done.append(f"{journal.get('job')}: {what}")
    return done


def commit_job(job_id: str, staged: Sequence[StagedPartition], *, overwrite_topics: Iterable[str] = (),
               lock_timeout_s: float = 600.0, config: LogConfig | None = None,
               sink: SinkBatch | None = None) -> dict[TopicPartition, tuple[int, int]]:
    """Make a job's staged partitions visible atomically per log dir; returns each partition's
    new ``(first offset, end offset)`` of what was committed. With ``sink``, a log dir whose
    sink mark already holds the batch (or a later one) is skipped and its staging dropped.

    A write that fails (disk full, read-only file system) raises :class:`StorageError`: the
    commit did not return, so, as after a crash, its journal makes the next commit or writable
    open roll it back (readers never see it in part)."""
    try:
        return _commit_job(job_id, staged, overwrite_topics=overwrite_topics, lock_timeout_s=lock_timeout_s,
                           config=config, sink=sink)
    except OSError as exc:
        raise storage_error(exc, f"committing job {job_id}") from exc


def _commit_job(job_id: str, staged: Sequence[StagedPartition], *, overwrite_topics: Iterable[str],
                lock_timeout_s: float, config: LogConfig | None,
                sink: SinkBatch | None) -> dict[TopicPartition, tuple[int, int]]:
    by_dir: dict[Path, list[StagedPartition]] = {}
    for sp in staged:
        by_dir.setdefault(Path(sp.partition_dir).parent, []).append(sp)
    for d in _overwrite_dirs(overwrite_topics, staged):
        by_dir.setdefault(d, [])
    result: dict[TopicPartition, tuple[int, int]] = {}
    for log_dir, parts in sorted(by_dir.items()):
        try:
            lock = LogDirLock(log_dir, lock_timeout_s)
        except LogDirLockedError as exc:
            raise CommitError(f"{exc.detail}; nothing was committed") from None
        try:
            recover_commits(log_dir)
            previous_mark = read_sink_mark(log_dir, sink.sink_id) if sink is not None else None
            if sink is not None and previous_mark is not None and \
                    int(previous_mark["batch"]) >= sink.batch_id:  # type: ignore[call-overload]
                for sp in parts:  # a replayed micro-batch: already committed here
                    shutil.rmtree(Path(sp.partition_dir) / sp.staging_dir, ignore_errors=True)
                continue
            entries: list[dict[str, object]] = []
            ends: dict[str, int] = {}
            overwrite: dict[str, int] = {}
            overwrite_set = set(overwrite_topics)
            pdirs = sorted({sp.partition_dir for sp in parts} |
                           {str(p) for p in log_dir.iterdir() if p.is_dir() and _topic_of(p) in overwrite_set})
            recovery = OffsetCheckpointFile(log_dir / RECOVERY_POINT_OFFSET_CHECKPOINT).read()
            clean = CleanShutdownFile.in_dir(log_dir).exists()
            for pdir in pdirs:
                tp0 = TopicPartition.parse_dir_name(Path(pdir).name)
                with Log(pdir, config, writable=True, recovery_point=recovery.get(tp0, 0),
                         had_clean_shutdown=clean) as lg:
                    leo = lg.log_end_offset
                next_base = leo
                for sp in sorted((s for s in parts if s.partition_dir == pdir), key=lambda s: s.staging_dir):
                    for seg in sp.segments:
                        entries.append(asdict(JournalEntry(pdir, sp.staging_dir, seg.staged_base, next_base)))
                        next_base += seg.records
                tp = TopicPartition.parse_dir_name(Path(pdir).name)
                result[tp] = (leo, next_base)
                ends[pdir] = next_base
                if tp.topic in overwrite_set:
                    overwrite[pdir] = leo
            starts = {str(Path(pdir)): result[TopicPartition.parse_dir_name(Path(pdir).name)][0] for pdir in pdirs}
            journal: dict[str, object] = {"job": job_id, "entries": entries, "ends": ends, "overwrite": overwrite,
                                          "starts": starts, "phase": "applying"}
            if sink is not None:
                journal["sink"] = {"id": sink.sink_id, "batch": sink.batch_id, "previous": previous_mark}
            jpath = _journal_path(log_dir, job_id)
            maybe_crash_at_step()
            _write_json(jpath, journal)
            maybe_crash_at_step()
            _finish(log_dir, journal, jpath)
            maybe_crash_at_step()
            jpath.unlink()
            fsync_dir(log_dir)
            CleanShutdownFile.in_dir(log_dir).write(None)
        finally:
            lock.release()
    return result


def _topic_of(p: Path) -> str | None:
    try:
        return TopicPartition.parse_dir_name(p.name).topic
    except KlogError:
        return None


def _overwrite_dirs(topics: Iterable[str], staged: Sequence[StagedPartition]) -> set[Path]:
    return {Path(sp.partition_dir).parent for sp in staged if sp.topic in set(topics)}


def collect_staging(partition_dirs: Iterable[str | os.PathLike[str]], *, job_id: str | None = None,
                    older_than_s: float | None = None) -> int:
    """Remove staging left by aborted jobs, failed or speculative attempts; returns how many."""
    n = 0
    now = time.time()
    for pdir in partition_dirs:
        for s in Path(pdir).glob(STAGING_PREFIX + "*"):
            mine = job_id is not None and s.name.startswith(staging_prefix(job_id))
            old = older_than_s is not None and now - s.stat().st_mtime > older_than_s
            if mine or old:
                shutil.rmtree(s, ignore_errors=True)
                n += 1
    return n
