"""The commit journal: a commit's plan on disk, applied in full or undone after a crash.

A commit of staged segments (:func:`storage_core.log.staged.commit_job`) writes its plan to
``<log dir>/.klog-commit-<job>.json`` (temp file, fsync, rename) before it changes anything in
a partition: one :class:`JournalEntry` per staged segment (its partition dir, its staging dir,
its staged base offset and the final one it gets), each partition's log end before (``starts``)
and after (``ends``) the commit, the partitions an overwrite empties (``overwrite``), the
``phase``, for a streaming sink, the sink mark it sets and the one it replaces, and, for a
restore into an empty partition, the log start offset it moves up to (``log_starts``: the
records keep their offsets, and a consumer at ``earliest`` starts at the first).

:func:`finish_commit` applies it: entry by entry, each staged batch's base offset is patched in
place (it lies outside the CRC: nothing is re-encoded), the files are fsynced and renamed into
the partition (indexes first, ``.log`` last); an overwrite then removes the old data (phase
``replacing`` from then on); the recovery points and log start offsets are checkpointed and the
sink mark written. Removing the journal is the commit point.

While a journal is there, readers hide the segments it adds (:func:`pending_journal_offsets`,
used when a log is opened read-only), so a job is never seen in part. A journal left behind by
a crash is settled by the next commit, writable open or the job's own ``abort``
(:func:`recover_commits`): the commit did not return, so its job failed as far as Spark and the
user know, and it is **rolled back** (its segments removed, the previous sink mark restored);
only an overwrite that had started to delete the old data is completed instead.

**Streaming sinks** (:class:`SinkBatch`): ``<log dir>/.klog-sink-<sink id>.json`` holds the last
batch id a sink committed there (:func:`read_sink_mark`), written after the data is in place and
before the journal goes, so mark and data always agree.

Each step of applying a journal is a crash point of the crash tests
(:func:`storage_core.faults.maybe_crash_at_step`). This module does not open logs: the loader
and the log manager use it, and staging and the commit itself (which do) are
:mod:`storage_core.log.staged`.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from storage_core.errors import CommitError, CorruptCheckpointError, KlogError
from storage_core.faults import maybe_crash_at_step
from storage_core.files import (
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    JOURNAL_PREFIX,
    JSON_SUFFIX,
    LOG_START_OFFSET_CHECKPOINT,
    LOG_SUFFIX,
    RECOVERY_POINT_OFFSET_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
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
)
from storage_core.fs import as_path
from storage_core.limits import INT64_MAX
from storage_core.log.checkpoint import OffsetCheckpointFile, fsync_dir
from storage_core.log.topic_partition import TopicPartition
from storage_core.record.file_records import FileRecords

#: Staged batches carry offsets from here; patched ones are below it.
STAGED_ORIGIN = 1 << 62
_BASE_OFFSET = struct.Struct(">q")


def pending_journal_offsets(log_dir: str | os.PathLike[str]) -> dict[str, int]:
    """Partition dir *name* → the first offset an unfinished commit is adding there. Readers hide
    segments from that offset on, so a job is visible all at once or not at all.

    Keyed by the name, not the path the writer spelled: a journal's partition dirs are direct
    children of its log dir (:func:`load_journal` checks), and a reader that spells the dir
    otherwise (relative, through ``..`` or a symlink) must hide the same segments."""
    out: dict[str, int] = {}
    for j in as_path(log_dir).glob(JOURNAL_PREFIX + "*" + JSON_SUFFIX):
        try:
            journal = load_journal(j)
        except FileNotFoundError:
            continue  # the commit finished (and removed it) since the listing
        before: dict[str, int] = journal.get("starts", {})  # type: ignore[assignment]
        for e in journal["entries"]:  # type: ignore[attr-defined]
            name = os.path.basename(os.path.normpath(str(e["partition_dir"])))
            # from the partition's end before the commit: a restore's segments start above it (a gap)
            first = min(int(e["final_base"]), before.get(str(e["partition_dir"]), INT64_MAX))
            out[name] = min(out.get(name, INT64_MAX), first)
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
    p = as_path(path)
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
    for key in ("ends", "starts", "overwrite", "log_starts"):
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
class JournalEntry:
    partition_dir: str
    staging_dir: str
    staged_base: int
    final_base: int


def _patch_offsets(path: Path, staged_base: int, final_base: int) -> None:
    """Rebase every batch of a staged ``.log`` in place; idempotent (patched bases are < origin)."""
    with open(path, "r+b") as f:
        for position, base, _size in FileRecords(path).heads():  # the bases are outside the CRC: no byte else is read
            if base >= STAGED_ORIGIN:
                f.seek(position)
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


def journal_path(log_dir: Path, job_id: str) -> Path:
    """Where the journal of ``job_id``'s commit in ``log_dir`` is."""
    return log_dir / journal_name(job_id)


def write_json(path: Path, obj: object) -> None:
    """Write a journal or sink mark atomically: temp file, fsync, rename, fsync of the dir."""
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


def finish_commit(log_dir: Path, journal: dict[str, object], jpath: Path) -> None:
    """Apply a written journal (again, after a crash: every step is idempotent); the caller holds
    the lock and removes the journal afterwards."""
    entries = [JournalEntry(**e) for e in journal["entries"]]  # type: ignore[attr-defined]
    for e in entries:
        _apply(e)
    for pdir in sorted({e.partition_dir for e in entries}):
        fsync_dir(Path(pdir))
    overwrite: dict[str, int] = journal.get("overwrite", {})  # type: ignore[assignment]
    if overwrite and journal.get("phase") != "replacing":
        # from here on the old data goes: a crash must complete the commit, not undo it
        journal["phase"] = "replacing"
        write_json(jpath, journal)
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
    log_starts: dict[str, int] = journal.get("log_starts", {})  # type: ignore[assignment]
    rp_file = OffsetCheckpointFile(log_dir / RECOVERY_POINT_OFFSET_CHECKPOINT)
    recovery = rp_file.read()
    starts_file = OffsetCheckpointFile(log_dir / LOG_START_OFFSET_CHECKPOINT)
    starts = starts_file.read()
    for pdir, end in ends.items():
        tp = TopicPartition.parse_dir_name(Path(pdir).name)
        recovery[tp] = end
        if pdir in overwrite:
            starts.pop(tp, None)  # the first segment now starts at the new log start
        if pdir in log_starts:
            starts[tp] = log_starts[pdir]
    rp_file.write(recovery)
    starts_file.write(starts)
    maybe_crash_at_step()
    for pdir, new_start in log_starts.items():
        _remove_empty_segments_below(Path(pdir), new_start)
    sink: dict[str, object] | None = journal.get("sink")  # type: ignore[assignment]
    if sink is not None:
        write_json(sink_mark_path(log_dir, str(sink["id"])), {"batch": sink["batch"], "job": journal["job"]})
        maybe_crash_at_step()
    for e in entries:
        staging = Path(e.partition_dir) / e.staging_dir
        if staging.exists() and not any(staging.glob("*" + LOG_SUFFIX)):
            shutil.rmtree(staging, ignore_errors=True)


def _remove_empty_segments_below(pdir: Path, new_start: int) -> None:
    """A restore into an empty partition starts its log at the first restored offset, as Kafka's
    ``UnifiedLog.truncateFullyAndStartAt`` does: the empty segments below it go (a segment with
    records below a log start offset is left to retention, as the broker leaves it). Idempotent."""
    for p in sorted(pdir.glob("*" + LOG_SUFFIX)):
        base = base_offset_of(p)
        if base < new_start and p.stat().st_size == 0:
            for suffix in reversed(SEGMENT_SUFFIXES):  # the .log last: no index is left without it
                (pdir / (filename_prefix(base) + suffix)).unlink(missing_ok=True)
            maybe_crash_at_step()
    fsync_dir(pdir)


def advance_high_watermarks(log_dir: Path, ends: dict[str, int]) -> None:
    """After a commit is decided: where the log dir has a broker's ``replication-offset-checkpoint``,
    its high watermarks of the partitions written move up to their new ends. A broker restarting on
    the dir starts each partition at the checkpointed high watermark; left below klog's records, it
    would treat them as not yet replicated (a follower truncates to it). A dir without the file (klog's
    own) gets none. Not part of the journal's roll-forward: a high watermark left behind by a crash is
    only what the broker finds after any append it did not see."""
    path = log_dir / REPLICATION_OFFSET_CHECKPOINT
    if not path.exists():
        return
    hw_file = OffsetCheckpointFile(path)
    hw = hw_file.read()
    for pdir, end in ends.items():
        tp = TopicPartition.parse_dir_name(Path(pdir).name)
        hw[tp] = max(hw.get(tp, 0), end)
    hw_file.write(hw)


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
    log_starts: dict[str, int] = journal.get("log_starts", {})  # type: ignore[assignment]
    if log_starts:  # a restore into empty partitions: their log start back at their end, where it was
        starts_file = OffsetCheckpointFile(log_dir / LOG_START_OFFSET_CHECKPOINT)
        checkpointed = starts_file.read()
        for pdir in log_starts.keys() & starts.keys():
            checkpointed[TopicPartition.parse_dir_name(Path(pdir).name)] = starts[pdir]
            part = Path(pdir)
            if part.is_dir() and not any(part.glob("*" + LOG_SUFFIX)):  # its empty segment was removed: again
                for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
                    (part / (filename_prefix(starts[pdir]) + suffix)).touch()
                fsync_dir(part)
        starts_file.write(checkpointed)
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
                write_json(mark_path, previous)


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
            finish_commit(d, journal, j)
            what = "completed"
        else:
            _rollback(d, journal)
            what = "rolled back"
        j.unlink()
        fsync_dir(d)
        done.append(f"{journal.get('job')}: {what}")
    return done
