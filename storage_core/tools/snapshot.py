"""``klog snapshot SRC DST``: a consistent, incremental copy of a log dir that another process may be
writing (a broker, or a klog writer), into a local dir or any URI :mod:`storage_core.fs` knows.

**Read-only on the source**: no lock, no write. Each partition is opened the way a following
reader opens it (``Log(..., had_clean_shutdown=True, verify_tail=False)``: the segment list, the
log start offset, the segments of an unfinished klog commit left out, nothing scanned), then:

* **closed segments** (every segment but the last): ``.log``, ``.index``, ``.timeindex`` and
  ``.txnindex`` are copied as they are (a rolled segment is immutable; an index with a
  zero-filled tail is trimmed as a roll would have trimmed it). A segment without its ``.index``
  gets both indexes built from the bytes copied (Kafka's sparse rule, as recovery builds them);
* **the active segment** (the last): its bytes are read once, up to the size it had when opened,
  and copied up to the last complete batch whose CRC is valid; its ``.index`` and ``.timeindex``
  are built for exactly those bytes (:func:`storage_core.log.segment.scan_segment`'s rule) and
  its ``.txnindex`` keeps the entries below the copied end;
* ``partition.metadata``, ``leader-epoch-checkpoint`` (entries starting below the copied end, as
  ``LeaderEpochFileCache.truncateFromEnd`` keeps them), the producer ``.snapshot`` files from
  the first segment's base up to the copied end, and KRaft's ``<offset>-<epoch>.checkpoint``
  snapshots (up to the copied end) and ``quorum-state``. A partition dir without any ``.log``, or
  holding only segments of an unfinished klog commit, is not copied this time (a note says so).

A segment that retention renames (``*.deleted``) while it is copied is read under its new name
(the file is found by its identity, :func:`storage_core.log.segment.resolve_segment_file`); one
that is gone (deleted, or replaced by a compaction) ends that pass over the partition, which
starts again from a fresh listing (a few times at most). Nothing of the source is fatal that a
writer's retention or compaction can do.

**The destination** gets, per log dir: ``recovery-point-offset-checkpoint`` (each partition's
copied end), ``log-start-offset-checkpoint`` (where the log start is above the first segment's
base, as ``LogManager`` writes it), the source's ``meta.properties`` and
``klog-topic-configs.json`` and ``bootstrap.checkpoint`` if it has them, and ``klog-snapshot.json`` (the manifest, written
last: size, CRC-32C and source identity of every file copied). **No clean-shutdown marker** is
written: the active segment came from a live file, so a broker or klog opening DST revalidates
each partition's last segment (recovery starts at the recovery point, which is the copied end,
inside the last segment) and trusts the rest, which costs one segment's scan and finds nothing
to cut. DST therefore opens clean: no recovery note, ``klog verify`` passes.

**Readers of DST never see a half-copied segment, nor a gap.** Every object is written
atomically (a local DST writes ``<name>.tmp``, fsyncs it and renames it; an object store
publishes an object when its upload completes), in an order of which every prefix is a
consistent log: a partition's segments in offset order; a new segment's indexes before its
``.log``; a segment that DST has already (the active segment of the last run, now longer) its
``.log`` first, then its indexes (an index of a prefix stays valid); then segments below the
new log start deleted from the front (each segment's ``.log`` after its indexes); the checkpoints; partitions gone from the
source; the manifest last. When retention at the source has passed everything DST holds, the
new first segment is written unseen, ``log-start-offset-checkpoint`` moves to it, the old
segments are deleted and the segment is committed: a reader may meet, for that moment, a
partition without segments (klog's read path fails; retry), never a gap, even if it read the
checkpoint before listing. A compaction that replaced a range of segments leaves DST briefly
holding the replacement and the segments it replaced. Local DST files are fsynced one by one and
their dirs before the checkpoints and the manifest are written.

**Incremental.** A rerun copies only what changed: a file is skipped when the manifest has it
with DST's object at the recorded size and the source file has the recorded identity (inode,
size, modification time), or, when the identity differs, the same size and CRC-32C (read from
the source). A segment replaced under the same name (compaction) is copied again; the active
segment is copied again when it grew. Segments and partitions gone from the source are removed
from DST after what replaces them is in place. Staging dirs, commit journals, sink marks,
``.lock``, ``*.deleted``/``.cleaned``/``.swap`` files and ``-delete``/``-future``/``-stray``
dirs are never copied.

**A cluster snapshot.** Given the log dirs of several brokers of one cluster, each partition is
copied once, from the replica a read reads (:mod:`storage_core.log.replicas`: the leader's, or the
in-sync replica Kafka would elect), its active segment cut at the partition's high watermark (the
segments above it left out), so that DST holds what the cluster served; a partition no in-sync
replica of which is among the dirs refuses the run (``ReplicaMissingError``) before DST is made.
DST is one log dir of the cluster's data, no broker's: see :func:`_cluster_source`.

A local DST is locked (its ``.lock``) for the run; DST must be empty, missing, or a snapshot of
the same SRC (:class:`~storage_core.errors.SnapshotError` otherwise: a live log dir of a broker
or writer is refused).
"""

from __future__ import annotations

import copy
import json
import os
import re
import struct
import threading
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import IO, Any

from storage_core.errors import (
    InvalidOptionError,
    KlogError,
    PendingCommitError,
    ReplicaMissingError,
    SnapshotError,
    storage_error,
)
from storage_core.files import (
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LEADER_EPOCH_CHECKPOINT,
    LOCK_FILE,
    LOG_START_OFFSET_CHECKPOINT,
    LOG_SUFFIX,
    META_PROPERTIES_FILE,
    PARTITION_METADATA_FILE,
    RECOVERY_POINT_OFFSET_CHECKPOINT,
    SNAPSHOT_MANIFEST_FILE,
    SNAPSHOT_SUFFIX,
    TIME_INDEX_SUFFIX,
    TMP_SUFFIX,
    TOPIC_CONFIGS_FILE,
    TXN_INDEX_SUFFIX,
    filename_prefix,
    is_offset_named,
)
from storage_core.fs import ObjectPath, ObjectStoreError, StorageOptions, as_path
from storage_core.limits import INT32_MAX
from storage_core.log.aiven.objects import AivenPath
from storage_core.log.checkpoint import LeaderEpochCheckpointFile, fsync_dir
from storage_core.log.cluster_metadata import CLUSTER_METADATA_TOPIC
from storage_core.log.dir_state import LogDirStates
from storage_core.log.log import Log
from storage_core.log.lost import gather_evidence, lost_data, lost_offsets_text
from storage_core.log.manager import PartitionDir, find_partitions, replica_problems, scan_log_dirs
from storage_core.log.offset_index import OFFSET_INDEX_ENTRY
from storage_core.log.segment import LogSegment
from storage_core.log.tiered import (
    RemoteStorage,
    TieredMetadata,
    attach_history,
    history_below_local,
    load_remote_metadata,
    partition_history,
)
from storage_core.log.time_index import TIME_INDEX_ENTRY
from storage_core.log.topic_partition import TopicPartition
from storage_core.log.txn_index import ABORTED_TXN
from storage_core.record.file_records import iter_batches
from storage_core.record.records import crc32c
from storage_core.workers import ordered_map, pool_size

__all__ = ["MANIFEST_VERSION", "PartitionCopy", "SnapshotSummary", "snapshot"]

MANIFEST_VERSION = 1
#: Bytes read from the source at a time.
CHUNK_BYTES = 8 << 20
#: Passes in a row over a partition whose segments keep vanishing (retention, compaction) while
#: nothing new is copied, before giving up.
MAX_ATTEMPTS = 5
#: Passes over one partition in all: a pass that copied new segments before one vanished made
#: progress (the next pass skips them), but a writer that always outruns the copy must end too.
MAX_PASSES = 25

#: KRaft metadata snapshots in ``__cluster_metadata-0``: ``<20-digit end offset>-<10-digit epoch>.checkpoint``.
KRAFT_SNAPSHOT_SUFFIX = ".checkpoint"
#: A KRaft log dir's bootstrap metadata (``bootstrap.checkpoint``).
BOOTSTRAP_CHECKPOINT = "bootstrap.checkpoint"

#: KRaft's election state in ``__cluster_metadata-0``.
QUORUM_STATE_FILE = "quorum-state"

_SNAPSHOT_NAME = re.compile(r"^\d+(?:\.snapshot|-\d+\.checkpoint)$")


def _snapshot_named(name: str) -> bool:
    """A producer snapshot ``<offset>.snapshot`` or a KRaft snapshot ``<offset>-<epoch>.checkpoint``."""
    return _SNAPSHOT_NAME.match(name) is not None


Progress = Callable[[int, int], None]  # (bytes just done, total bytes of the run)


class _Vanished(Exception):
    """A source file was deleted or replaced while the partition was copied: start the pass again."""


# --- what a run did ------------------------------------------------------------------------------

@dataclass
class PartitionCopy:
    """One partition of a snapshot: the offsets DST holds and what this run copied of it."""

    topic: str
    partition: int
    start_offset: int
    end_offset: int
    segments: int
    segments_copied: int = 0
    files_copied: int = 0
    bytes_copied: int = 0
    notes: list[str] = field(default_factory=list)
    #: a tiered partition's remote history below its first local segment (``__remote_log_metadata``,
    #: :mod:`storage_core.log.tiered`): offsets [remote_start_offset, remote_end_offset) in
    #: ``remote_segments`` segments; ``remote_included``: copied into DST as ordinary segments
    #: (``include_remote``), else left in the remote storage and only noted
    remote_start_offset: int | None = None
    remote_end_offset: int | None = None
    remote_segments: int = 0
    remote_included: bool = False
    #: a cluster snapshot's partition: the broker whose replica was copied (the one a read reads)
    broker: int | None = None


@dataclass
class SnapshotSummary:
    """What ``snapshot`` copied, skipped (DST had it already) and removed (gone from the source).
    Segments are counted by the pass over a partition that completed; files and bytes are all the
    work done, a pass restarted after a segment vanished included."""

    source: str
    destination: str
    partitions_copied: int = 0  # partitions of which at least one file was copied
    partitions_skipped: int = 0  # partitions DST had up to date
    partitions_deleted: int = 0  # partitions gone from the source, removed from DST
    segments_copied: int = 0
    segments_skipped: int = 0
    segments_deleted: int = 0  # DST segments below the source's log start (or replaced), removed
    segments_vanished: int = 0  # source segments deleted or replaced while being copied (pass restarted)
    files_copied: int = 0
    files_skipped: int = 0
    bytes_copied: int = 0
    bytes_skipped: int = 0
    partitions: list[PartitionCopy] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: lost data of the source that no copy can carry: partitions whose ``.log`` files are all gone
    #: while their checkpoints say they held offsets (:mod:`storage_core.log.lost`), one line each
    lost: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# --- the destination -----------------------------------------------------------------------------

class _Sink:
    """One object being written; visible at :meth:`commit` only."""

    def write(self, data: bytes | memoryview) -> None:
        raise NotImplementedError

    def commit(self) -> None:
        raise NotImplementedError

    def abort(self) -> None:
        raise NotImplementedError


class _Dest:
    """DST: files by their path relative to DST (``orders-0/00000000000000000000.log``)."""

    uri: str

    def listing(self) -> dict[str, int]:
        raise NotImplementedError

    def read(self, rel: str) -> bytes | None:
        raise NotImplementedError

    def open(self, rel: str) -> _Sink:
        raise NotImplementedError

    def delete(self, rel: str) -> None:
        raise NotImplementedError

    def sync(self) -> None:
        """Make what was written so far durable (a local DST fsyncs the dirs it renamed into)."""

    def put(self, rel: str, data: bytes) -> None:
        sink = self.open(rel)
        try:
            sink.write(data)
        except BaseException:
            sink.abort()
            raise
        sink.commit()


class _LocalSink(_Sink):
    def __init__(self, dest: _LocalDest, path: Path) -> None:
        self._dest = dest
        self._path = path
        self._tmp = path.with_name(path.name + TMP_SUFFIX)
        path.parent.mkdir(parents=True, exist_ok=True)
        self._f: IO[bytes] | None = open(self._tmp, "wb")  # noqa: SIM115 - closed by commit/abort

    def write(self, data: bytes | memoryview) -> None:
        assert self._f is not None
        self._f.write(data)

    def commit(self) -> None:
        assert self._f is not None
        try:
            self._f.flush()
            os.fsync(self._f.fileno())
            self._f.close()
            self._f = None
            os.replace(self._tmp, self._path)
        except OSError as exc:
            self.abort()
            raise storage_error(exc, f"writing {self._path.name} of the snapshot", self._path) from exc
        self._dest.touched.add(self._path.parent)

    def abort(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None
        self._tmp.unlink(missing_ok=True)


class _LocalDest(_Dest):
    def __init__(self, root: Path) -> None:
        self.root = root
        self.uri = str(root)
        self.touched: set[Path] = set()
        root.mkdir(parents=True, exist_ok=True)

    def listing(self) -> dict[str, int]:
        out = {}
        for dirpath, _dirs, files in os.walk(self.root):
            for name in files:
                p = Path(dirpath) / name
                try:
                    out[p.relative_to(self.root).as_posix()] = p.stat().st_size
                except FileNotFoundError:
                    continue
        return out

    def read(self, rel: str) -> bytes | None:
        try:
            return (self.root / rel).read_bytes()
        except FileNotFoundError:
            return None

    def open(self, rel: str) -> _Sink:
        return _LocalSink(self, self.root / rel)

    def delete(self, rel: str) -> None:
        (self.root / rel).unlink(missing_ok=True)
        self.touched.add((self.root / rel).parent)

    def remove_empty_dir(self, rel: str) -> None:
        try:
            (self.root / rel).rmdir()
        except OSError:
            pass  # not empty (a file someone else put there): left alone

    def sync(self) -> None:
        for d in sorted(self.touched):
            if d.is_dir():
                fsync_dir(d)
        self.touched.clear()


class _ObjectSink(_Sink):
    def __init__(self, dest: _ObjectDest, key: str) -> None:
        self._dest = dest
        self._key = key
        self._stream: Any = dest.call("writing", key, lambda: dest.fs.open_output_stream(key))

    def write(self, data: bytes | memoryview) -> None:
        self._dest.call("writing", self._key, lambda: self._stream.write(data))

    def commit(self) -> None:
        self._dest.call("writing", self._key, self._stream.close)

    def abort(self) -> None:
        # pyarrow publishes an object when its stream closes, whatever happened before: close it and
        # delete what it published (an object that existed before is gone until the rerun)
        try:
            self._stream.close()
        except OSError:
            return  # the upload failed: nothing was published
        self._dest.delete_key(self._key)


class _ObjectDest(_Dest):
    def __init__(self, root: ObjectPath) -> None:
        self.root = root
        self.uri = str(root)
        self.fs: Any = root.store.fs()
        self.base = root.fs_key.rstrip("/")
        self.options = root.options

    def key(self, rel: str) -> str:
        return f"{self.base}/{rel}" if self.base else rel

    def call(self, doing: str, key: str, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except FileNotFoundError:
            raise
        except OSError as exc:
            raise ObjectStoreError(f"{doing} {self.root.store.scheme}://{key} failed: "
                                   f"{self.options.redact(str(exc))}") from None

    def listing(self) -> dict[str, int]:
        import pyarrow.fs as pafs

        infos = self.call("listing", self.base, lambda: self.fs.get_file_info(
            pafs.FileSelector(self.base, recursive=True, allow_not_found=True)))
        out = {}
        for info in infos:
            if info.type == pafs.FileType.File:
                out[info.path[len(self.base) + 1:] if self.base else info.path] = info.size
        return out

    def read(self, rel: str) -> bytes | None:
        key = self.key(rel)

        def get() -> bytes:
            with self.fs.open_input_stream(key) as f:
                return bytes(f.read())
        try:
            return bytes(self.call("reading", key, get))
        except FileNotFoundError:
            return None

    def open(self, rel: str) -> _Sink:
        return _ObjectSink(self, self.key(rel))

    def delete_key(self, key: str) -> None:
        try:
            self.call("deleting", key, lambda: self.fs.delete_file(key))
        except FileNotFoundError:
            pass

    def delete(self, rel: str) -> None:
        self.delete_key(self.key(rel))


# --- reading the source --------------------------------------------------------------------------

def _identity(st: os.stat_result) -> list[Any]:
    return [st.st_ino, st.st_size, st.st_mtime]


_SELF_OPENING = (ObjectPath, AivenPath)


def _open_source(path: Path, identity: int | None) -> tuple[IO[bytes], os.stat_result]:
    """The file at ``path`` or ``path.deleted`` (retention renamed it), opened, and its stat; the
    file must be the one with inode ``identity`` if given. :class:`_Vanished` if neither is."""
    for p in (path, path.with_name(path.name + DELETED_SUFFIX)):
        try:
            # object storage and Aiven's remote segments open themselves (no file descriptor)
            f: IO[bytes] = p.open("rb") if isinstance(p, _SELF_OPENING) else open(p, "rb", buffering=0)  # noqa: SIM115
        except FileNotFoundError:
            continue
        try:
            st = p.stat() if isinstance(p, _SELF_OPENING) else os.fstat(f.fileno())
        except FileNotFoundError:
            f.close()
            continue
        if identity is not None and st.st_ino != identity:
            f.close()
            continue
        return f, st
    raise _Vanished(str(path))


def _read_small(path: Path) -> bytes | None:
    """A small file (index, checkpoint, snapshot) whole, under its name or ``.deleted``; None if absent."""
    for p in (path, path.with_name(path.name + DELETED_SUFFIX)):
        try:
            return p.read_bytes()
        except FileNotFoundError:
            continue
    return None


def _trim_index(data: bytes, entry: struct.Struct) -> bytes:
    """An index without its zero-filled tail (a preallocated, untrimmed index): entries end at the
    first all-zero entry after the first (``DumpLogSegments``' rule), and at a whole entry."""
    size = entry.size
    n = len(data) // size
    zero = bytes(size)
    for i in range(1, n):
        if data[i * size:(i + 1) * size] == zero:
            return data[:i * size]
    if n == 1 and entry is OFFSET_INDEX_ENTRY and data[:size] == zero:
        return b""  # the first batch of a segment never has an entry: a zero first entry is unwritten
    return data[:n * size]


@dataclass
class _Streamed:
    """What streaming a ``.log`` found: the bytes copied and the indexes for them."""

    size: int = 0
    crc: int = 0
    end_offset: int = 0
    offset_index: bytes = b""
    time_index: bytes = b""
    note: str | None = None


def _stream_log(f: IO[bytes], limit: int, sink: _Sink, base: int, *, interval: int, cut: bool, index: bool,
                progress: Callable[[int], None], end_limit: int | None = None) -> _Streamed:
    """Copy ``limit`` bytes of a ``.log`` to ``sink``, walking its batches once if ``cut`` or
    ``index``: with ``cut`` (the active segment) the copy ends at the last complete batch with a
    valid CRC, and before the first batch holding ``end_limit`` (a cluster's high watermark, at a
    batch boundary: a broker's log end offsets are); otherwise everything is copied and the
    indexes cover the valid prefix. The offset and time index entries follow ``scan_segment``'s
    rule (Kafka's recovery)."""
    out = _Streamed(end_offset=base)
    if not cut and not index:  # a closed segment with its indexes: bytes only
        left = limit
        while left > 0:
            chunk = f.read(min(CHUNK_BYTES, left))
            if not chunk:
                break
            sink.write(chunk)
            out.crc = crc32c_update(out.crc, chunk)
            out.size += len(chunk)
            left -= len(chunk)
            progress(len(chunk))
        return out
    oentries: list[bytes] = []
    tentries: list[bytes] = []
    last_ts = -1
    max_ts, max_ts_offset = -1, base
    last_index_entry = 0
    pending = b""
    limited = False  # the copy reached end_limit
    pos = 0  # file position of pending[0]
    read = 0
    indexing = True
    while True:
        want = min(CHUNK_BYTES, limit - read)
        chunk = f.read(want) if want > 0 else b""
        read += len(chunk)
        at_eof = not chunk or read >= limit
        data = pending + chunk if pending else chunk
        if not data:
            break
        consumed = 0
        if indexing:
            walk = iter_batches(data, base_position=pos)
            try:
                for batch in walk:
                    if cut and end_limit is not None and batch.last_offset >= end_limit:
                        if batch.base_offset < end_limit:  # not met: high watermarks are batch boundaries
                            out.note = (f"the batch at offsets {batch.base_offset}-{batch.last_offset} holds the high "
                                        f"watermark {end_limit}; copied up to offset {batch.base_offset}")
                        limited = True
                        break
                    if cut:
                        batch.ensure_valid()
                    last = batch.last_offset
                    if last - base > INT32_MAX or last < base:
                        raise KlogError(f"batch with last offset {last} cannot be in a segment based at {base}",
                                        position=batch.position)
                    if batch.max_timestamp > max_ts:
                        max_ts, max_ts_offset = batch.max_timestamp, last
                    if batch.position - last_index_entry > interval:
                        oentries.append(OFFSET_INDEX_ENTRY.pack(last - base, batch.position))
                        if max_ts > last_ts:
                            tentries.append(TIME_INDEX_ENTRY.pack(max_ts, max_ts_offset - base))
                            last_ts = max_ts
                        last_index_entry = batch.position
                    out.end_offset = last + 1
                    consumed = batch.position + batch.size_in_bytes - pos
            except KlogError as exc:
                if cut:
                    rest = memoryview(data)[consumed:]
                    why = ("the rest is zero-filled (a preallocated segment)" if rest.nbytes and
                           rest.tobytes().count(0) == rest.nbytes else exc.detail)
                    out.note = f"copied up to position {pos + consumed}: {why}"
                    at_eof = True
                    data = data[:consumed]
                else:
                    indexing = False  # a damaged closed segment: copied as it is, indexed up to the damage
            else:
                tail = walk.partial_tail
                if limited:
                    at_eof = True
                    data = data[:consumed]
                elif at_eof and tail is not None and cut:
                    out.note = f"copied up to position {tail.position}: a batch still being written was left out"
                    data = data[:consumed]
        if not indexing or at_eof:
            consumed = len(data)
        if consumed:
            view = memoryview(data)[:consumed]
            sink.write(view)
            out.crc = crc32c_update(out.crc, view)
            out.size += consumed
            progress(consumed)
        pending = data[consumed:]
        pos += consumed
        if at_eof:
            break
    if max_ts > last_ts:
        tentries.append(TIME_INDEX_ENTRY.pack(max_ts, max_ts_offset - base))
    out.offset_index = b"".join(oentries)
    out.time_index = b"".join(tentries)
    return out


def crc32c_update(crc: int, data: bytes | memoryview) -> int:
    """CRC-32C of the bytes so far followed by ``data``."""
    import crc32c as _crc32c

    return int(_crc32c.crc32c(data, crc))


def _crc(data: bytes) -> int:
    return crc32c(data)


def _checkpoint_text(offsets: dict[TopicPartition, int]) -> bytes:
    lines = [f"{tp.topic} {tp.partition} {off}" for tp, off in sorted(offsets.items())]
    return "".join(f"{line}\n" for line in ["0", str(len(lines)), *lines]).encode()


# --- a run ---------------------------------------------------------------------------------------

class _Run:
    """A snapshot run: what DST holds (``listing``), what the manifest will say (``files``), the summary.

    Partitions are copied by :meth:`for_partition` runs, on several threads at once: each works on
    its own partition's files with its own listing, manifest entries and counts, which
    :meth:`absorb` adds to this run in partition order. What they share is the destination, the
    previous manifest (read only), the progress callback and the log-start checkpoint a partition
    may have to move mid-copy (:meth:`move_log_start`), those two under ``lock``."""

    def __init__(self, dest: _Dest, summary: SnapshotSummary, progress: Progress | None, checksum: bool,
                 ends: dict[TopicPartition, int | None]) -> None:
        #: a cluster snapshot's partitions: where each copy ends (the high watermark; None: the log end)
        self.ends = ends
        self.dest = dest
        self.summary = summary
        self.progress_cb = progress
        self.checksum = checksum
        self.total = 0
        self.listing = dest.listing()
        raw = dest.read(SNAPSHOT_MANIFEST_FILE)
        manifest = json.loads(raw) if raw else {}
        self.old_files: dict[str, dict[str, Any]] = manifest.get("files", {})
        self.old_remote: dict[str, Any] = manifest.get("remote") or {}
        self.files: dict[str, dict[str, Any]] = {}
        self.dst_starts = _read_offsets(dest, LOG_START_OFFSET_CHECKPOINT)
        #: SRC's remote log metadata (tiered partitions), and the remote storage whose segments are
        #: copied too (``include_remote``; None: remote history is only noted)
        self.tiered: TieredMetadata | None = None
        self.remote: RemoteStorage | None = None
        self.jump: tuple[str, TopicPartition, int, int] | None = None  # (dir, tp, new log start, first base)
        # SRC's checkpoints and journals read once per version, not per partition (workers share it)
        self.states = LogDirStates()
        self.root: _Run = self
        self.lock = threading.RLock()

    def for_partition(self, prefix: str) -> _Run:
        """A run for the partition dir ``prefix`` (see the class doc), on any thread."""
        child = copy.copy(self)
        child.summary = SnapshotSummary(source=self.summary.source, destination=self.summary.destination)
        child.listing = {rel: size for rel, size in list(self.listing.items()) if rel.startswith(prefix + "/")}
        child.files = {}
        child.jump = None
        return child

    def absorb(self, child: _Run, prefix: str) -> None:
        """Add a partition run's listing, manifest entries and counts to this one."""
        with self.lock:
            for rel in [r for r in self.listing if r.startswith(prefix + "/")]:
                del self.listing[rel]
            self.listing.update(child.listing)
            self.files.update(child.files)
            for f in fields(SnapshotSummary):
                mine, theirs = getattr(self.summary, f.name), getattr(child.summary, f.name)
                if isinstance(mine, int):
                    setattr(self.summary, f.name, mine + theirs)
                elif isinstance(mine, list):
                    mine.extend(theirs)

    def progress(self, n: int) -> None:
        if self.progress_cb is not None and n:
            with self.root.lock:
                self.progress_cb(n, self.root.total)

    def move_log_start(self, tp: TopicPartition, start: int) -> None:
        """DST's log-start-offset-checkpoint with ``tp`` at ``start`` (the other partitions' as
        they are): written now, mid-copy (see the jump in :meth:`_copy_partition_once`)."""
        root = self.root
        with root.lock:
            root.dst_starts[tp] = start
            root.put_small(LOG_START_OFFSET_CHECKPOINT, _checkpoint_text(root.dst_starts), None)

    # -- single files
    def _unchanged(self, rel: str, size: int, crc: int) -> bool:
        old = self.old_files.get(rel)
        return (old is not None and old["size"] == size and old["crc32c"] == crc
                and self.listing.get(rel) == size)

    def put_small(self, rel: str, data: bytes, part: PartitionCopy | None) -> bool:
        """Write a small file unless DST has it with this size and checksum; whether it was written."""
        crc = _crc(data)
        self.files[rel] = {"size": len(data), "crc32c": crc, "source": None}
        if self._unchanged(rel, len(data), crc):
            self.summary.files_skipped += 1
            self.summary.bytes_skipped += len(data)
            return False
        self.dest.put(rel, data)
        self.listing[rel] = len(data)
        self.summary.files_copied += 1
        self.summary.bytes_copied += len(data)
        if part is not None:
            part.files_copied += 1
            part.bytes_copied += len(data)
        return True

    def delete(self, rel: str) -> None:
        if rel in self.listing:
            self.dest.delete(rel)
            del self.listing[rel]

    def dst_bases(self, prefix: str) -> list[int]:
        out = []
        for rel in self.listing:
            d, _, name = rel.partition("/")
            if d == prefix and "/" not in name and name.endswith(LOG_SUFFIX) and is_offset_named(name):
                out.append(int(name.split(".", 1)[0]))
        return sorted(out)

    def delete_segment(self, prefix: str, base: int) -> None:
        """A DST segment removed, its indexes first and its ``.log`` last: a reader listing in between
        meets a ``.log`` without (some of) its indexes, which it reads by scanning, never an
        ``.index`` without its ``.log`` at or above the log start of a checkpoint it read before the
        listing, which is evidence of lost data (:func:`storage_core.log.lost.lost_data`)."""
        name = filename_prefix(base)
        for suffix in (TXN_INDEX_SUFFIX, TIME_INDEX_SUFFIX, INDEX_SUFFIX, LOG_SUFFIX):
            self.delete(f"{prefix}/{name}{suffix}")
        self.summary.segments_deleted += 1

    # -- a partition
    def copy_partition(self, pd: PartitionDir) -> PartitionCopy | None:
        stalled = 0
        for _pass in range(MAX_PASSES):
            counted = (self.summary.segments_copied, self.summary.segments_skipped)
            uploaded = self.summary.bytes_copied
            try:
                return self._copy_partition_once(pd)
            except _Vanished as gone:
                stalled = 0 if self.summary.bytes_copied > uploaded else stalled + 1
                # segments are counted by the pass that completes (files and bytes are work done)
                self.summary.segments_copied, self.summary.segments_skipped = counted
                if not pd.path.is_dir():  # the partition itself was deleted (renamed -delete)
                    self.summary.notes.append(f"{pd.topic_partition}: deleted at the source during the copy; "
                                              "DST keeps its last copy until the next snapshot")
                    return None
                self.summary.segments_vanished += 1
                self.summary.notes.append(f"{pd.topic_partition}: {Path(str(gone)).name} was deleted or replaced "
                                          "while it was copied; the partition was listed again")
                if stalled >= MAX_ATTEMPTS:
                    break
        raise KlogError(f"{pd.path}: segments kept being deleted or replaced while they were copied "
                        f"({_pass + 1} passes, the last {stalled} copying nothing new); rerun the snapshot")

    def _open(self, pd: PartitionDir) -> Log | None:
        state = self.states.of(pd.log_dir)
        start = state.log_starts.get(pd.topic_partition)
        if not pd.path.is_dir():
            raise _Vanished(str(pd.path))
        try:
            return Log(pd.path, state.config_for(pd.topic_partition.topic), log_start_offset=start,
                       had_clean_shutdown=True, verify_tail=False, dir_state=state)
        except PendingCommitError as exc:
            self.summary.notes.append(f"{pd.topic_partition}: not copied: {exc.detail}")
        except KlogError as exc:
            if exc.detail.startswith("no such segment file"):  # deleted between listing and opening
                raise _Vanished(exc.detail.rsplit(" ", 1)[-1]) from None
            if not exc.detail.startswith("no segments"):
                raise
            lost = lost_data(pd, None, gather_evidence(pd, state))
            if lost:  # a copy holds no sign of it: the summary names it
                self.summary.lost.extend(str(x) for x in lost)
                self.summary.notes.append(f"{pd.topic_partition}: not copied: its data is lost ({lost_offsets_text(lost)})")
            else:
                self.summary.notes.append(f"{pd.topic_partition}: not copied: no segments yet")
        return None

    def _copy_partition_once(self, pd: PartitionDir) -> PartitionCopy | None:
        log = self._open(pd)
        if log is None:
            return None
        tp = pd.topic_partition
        try:
            remote = self._remote_history(log, tp)
            segments = list(log.segments)
            log_start = log.log_start_offset
            interval = log.config.index_interval_bytes
        finally:
            log.close()
        prefix = pd.path.name
        first = segments[0].base_offset
        end_limit = self.ends.get(tp)
        if end_limit is not None:  # a cluster's partition: its segments up to the high watermark
            segments = segments[:1] + [s for s in segments[1:] if s.base_offset < end_limit]
        part = PartitionCopy(tp.topic, tp.partition, log_start, first, len(segments),
                             broker=None if pd.replicas is None else pd.replicas.read.broker)
        if remote is not None:
            part.remote_start_offset, part.remote_end_offset, part.remote_segments = remote
            part.remote_included = self.remote is not None
            if not part.remote_included:
                part.notes.append(f"offsets {remote[0]}-{remote[1] - 1} ({remote[2]} segments) are in remote storage "
                                  "(tiered, __remote_log_metadata) and not copied; --include-remote with "
                                  "--remote-storage copies them")
        old_bases = self.dst_bases(prefix)
        self.jump = None
        if old_bases and old_bases[0] < first and first not in old_bases:
            # retention at the source passed everything DST has. Once the new first segment is
            # written (not yet visible) and its indexes are in place, log-start-offset-checkpoint
            # moves DST's log start to it, the old segments are deleted from the front, and the
            # segment is committed: a reader sees the old log (or a suffix of it), then for a
            # moment no segment (an error to retry; a broker starts an empty log at the new start,
            # as a follower's truncateFullyAndStartAt leaves it), then the new log: never a gap,
            # even for a reader that read the checkpoint before listing the segments.
            self.jump = (prefix, tp, max(first, log_start), first)
        for i, seg in enumerate(segments):
            active = i == len(segments) - 1
            copied = self._copy_segment(prefix, seg, active=active, interval=interval, part=part, end_limit=end_limit)
            if copied:
                part.segments_copied += 1
                self.summary.segments_copied += 1
            else:
                self.summary.segments_skipped += 1
            nxt = None if active else segments[i + 1].base_offset
            for b in self.dst_bases(prefix):  # replaced by a compaction, or cut from the source's end
                if b > seg.base_offset and (nxt is None or b < nxt):
                    self.delete_segment(prefix, b)
        end = part.end_offset
        self._partition_files(pd, prefix, first, end, part)
        return part

    def _remote_history(self, log: Log, tp: TopicPartition) -> tuple[int, int, int] | None:
        """A tiered partition's remote history below its first local segment, as ``(start, end,
        segments)``; with ``include_remote`` its segments are put before the local ones in ``log``
        (so they are copied as ordinary segments, and the log start is the remote history's). None
        when the partition has none."""
        history = history_below_local(log, tp, self.tiered)
        if not history:
            return None
        local = log.segments[0].base_offset
        if self.remote is not None:
            assert self.tiered is not None
            # from the metadata, before any file is read: one log dir cannot hold overlapping segments
            for seg, nxt in zip(history, [*(s.start_offset for s in history[1:]), local], strict=True):
                if seg.end_offset >= nxt:
                    raise SnapshotError(f"remote segment {seg.segment_id} of {tp} (offsets {seg.start_offset}-"
                                        f"{seg.end_offset}) runs past offset {nxt}, where the next segment starts "
                                        "(uploads of two leaders that rolled at different offsets); a snapshot cannot "
                                        "hold overlapping segments. Read the history with remoteStorage instead")
            attach_history(log, tp, self.tiered, self.remote)
        return history[0].start_offset, min(local, history[-1].end_offset + 1), len(history)

    def _copy_segment(self, prefix: str, seg: LogSegment, *, active: bool, interval: int,
                      part: PartitionCopy, end_limit: int | None) -> bool:
        """Copy one segment (see the module doc); the active one (the last copied) ends at its last
        complete valid batch, and no further than ``end_limit`` (a cluster's high watermark)."""
        base = seg.base_offset
        name = filename_prefix(base)
        rel_log = f"{prefix}/{name}{LOG_SUFFIX}"
        rels = {s: f"{prefix}/{name}{s}" for s in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)}
        f, st = _open_source(seg.log_path, seg.file_identity)
        with f:
            identity = _identity(st)
            old = self.old_files.get(rel_log) or {}
            existed = rel_log in self.listing
            same_file = bool(old) and old["source"] == identity and self.listing.get(rel_log) == old["size"]
            if active:
                indexes_there = all(rels[x] not in self.old_files or self.listing.get(rels[x]) ==
                                    self.old_files[rels[x]]["size"] for x in (INDEX_SUFFIX, TIME_INDEX_SUFFIX))
                if (same_file and indexes_there and not self.checksum and old.get("end") is not None
                        and old.get("limit") == end_limit):
                    part.end_offset = int(old["end"])
                    self._skip_log(rel_log, old, st.st_size)
                    return self._put_indexes(rels, self._active_indexes(seg, rels, int(old["end"])), part)
                return self._stream(f, st, rel_log, rels, seg, existed, True, interval, part, None, end_limit)
            # a remote segment's files are named <base>-<segment id> (seg.stem); DST names them <base>
            indexes = {INDEX_SUFFIX: _read_small(seg.log_path.with_name(seg.stem + INDEX_SUFFIX)),
                       TIME_INDEX_SUFFIX: _read_small(seg.log_path.with_name(seg.stem + TIME_INDEX_SUFFIX)),
                       TXN_INDEX_SUFFIX: _read_small(seg.log_path.with_name(seg.stem + TXN_INDEX_SUFFIX))}
            oindex, tindex = indexes[INDEX_SUFFIX], indexes[TIME_INDEX_SUFFIX]
            if oindex is None:
                # deleted together with its .log (retention: _Vanished), or never there (built from the bytes)
                _open_source(seg.log_path, seg.file_identity)[0].close()
            else:
                indexes[INDEX_SUFFIX] = _trim_index(oindex, OFFSET_INDEX_ENTRY)
                if tindex is not None:
                    indexes[TIME_INDEX_SUFFIX] = _trim_index(tindex, TIME_INDEX_ENTRY)
            if (same_file and not self.checksum and old["size"] == st.st_size) or \
                    (old and self.listing.get(rel_log) == old["size"] == st.st_size
                     and self._source_crc(f, st.st_size) == old["crc32c"]):
                self._skip_log(rel_log, old, st.st_size, identity)
                if indexes[INDEX_SUFFIX] is None:
                    self.summary.notes.append(f"{rel_log}: the source has no .index; DST keeps the one built when "
                                              "it was copied")
                    for s in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
                        if rels[s] in self.old_files:
                            self.files[rels[s]] = self.old_files[rels[s]]
                    indexes[INDEX_SUFFIX] = indexes[TIME_INDEX_SUFFIX] = None
                    return self._put_indexes(rels, {TXN_INDEX_SUFFIX: indexes[TXN_INDEX_SUFFIX]}, part)
                return self._put_indexes(rels, indexes, part)
            return self._stream(f, st, rel_log, rels, seg, existed, False, interval, part, indexes, None)

    def _source_crc(self, f: IO[bytes], size: int) -> int:
        crc = 0
        f.seek(0)
        left = size
        while left > 0:
            chunk = f.read(min(CHUNK_BYTES, left))
            if not chunk:
                break
            crc = crc32c_update(crc, chunk)
            left -= len(chunk)
        f.seek(0)
        return crc

    def _skip_log(self, rel: str, old: dict[str, Any], source_size: int, identity: list[Any] | None = None) -> None:
        entry = dict(old)
        if identity is not None:
            entry["source"] = identity
        self.files[rel] = entry
        self.summary.files_skipped += 1
        self.summary.bytes_skipped += int(old["size"])
        self.progress(source_size)

    def _active_indexes(self, seg: LogSegment, rels: dict[str, str], end: int) -> dict[str, bytes | None]:
        """The indexes of an active segment copied up to ``end`` that DST has (rebuilt last time),
        and the source's ``.txnindex`` entries below ``end``."""
        out: dict[str, bytes | None] = {}
        for s in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
            old = self.old_files.get(rels[s])
            if old is not None:
                self.files[rels[s]] = old
        out[TXN_INDEX_SUFFIX] = self._txn_below(seg, end)
        return out

    def _txn_below(self, seg: LogSegment, end: int) -> bytes | None:
        data = _read_small(seg.txn_index.path)
        if data is None:
            return None
        size = ABORTED_TXN.size
        keep = [data[i:i + size] for i in range(0, len(data) - len(data) % size, size)
                if ABORTED_TXN.unpack_from(data, i)[3] < end]
        return b"".join(keep) if keep else None

    def _put_indexes(self, rels: dict[str, str], indexes: dict[str, bytes | None], part: PartitionCopy) -> bool:
        """Write the indexes given (txnindex, timeindex, index: the order a new segment needs);
        a None index is removed from DST. Whether anything was written."""
        wrote = False
        for s in (TXN_INDEX_SUFFIX, TIME_INDEX_SUFFIX, INDEX_SUFFIX):
            if s not in indexes:
                continue
            data = indexes[s]
            if data is None:
                if rels[s] in self.listing:
                    self.delete(rels[s])
                    wrote = True
                continue
            wrote = self.put_small(rels[s], data, part) or wrote
        return wrote

    def _stream(self, f: IO[bytes], st: os.stat_result, rel_log: str, rels: dict[str, str], seg: LogSegment,
                existed: bool, active: bool, interval: int, part: PartitionCopy,
                indexes: dict[str, bytes | None] | None, end_limit: int | None) -> bool:
        """Copy a ``.log`` (and its indexes) that DST lacks or has in another version."""
        old = self.old_files.get(rel_log)
        grown = existed and old is not None and old["source"] is not None and old["source"][0] == st.st_ino
        if not active and indexes is not None and indexes[INDEX_SUFFIX] is not None and not existed:
            self._put_indexes(rels, indexes, part)  # a new segment: its indexes first, then its .log
            indexes = None
        elif existed and not grown:
            for s in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):  # a replaced segment: no index of the old bytes
                self.delete(rels[s])
        f.seek(0)
        sink = self.dest.open(rel_log)
        try:
            streamed = _stream_log(f, st.st_size, sink, seg.base_offset, interval=interval, cut=active,
                                   index=indexes is not None and indexes[INDEX_SUFFIX] is None,
                                   progress=self.progress, end_limit=end_limit)
        except BaseException:
            sink.abort()
            raise
        if active:
            part.end_offset = streamed.end_offset
            if streamed.note:
                part.notes.append(f"{rel_log}: {streamed.note}")
            indexes = {TXN_INDEX_SUFFIX: self._txn_below(seg, streamed.end_offset),
                       TIME_INDEX_SUFFIX: streamed.time_index, INDEX_SUFFIX: streamed.offset_index}
        elif indexes is not None and indexes[INDEX_SUFFIX] is None:
            indexes = {TXN_INDEX_SUFFIX: indexes[TXN_INDEX_SUFFIX], TIME_INDEX_SUFFIX: streamed.time_index,
                       INDEX_SUFFIX: streamed.offset_index}
        new_first = indexes is not None and not existed
        if new_first:
            assert indexes is not None
            self._put_indexes(rels, indexes, part)
        if self.jump is not None and self.jump[0] == rel_log.split("/", 1)[0] and self.jump[3] == seg.base_offset:
            prefix, tp, start, first = self.jump
            self.move_log_start(tp, start)
            for b in self.dst_bases(prefix):
                if b < first:
                    self.delete_segment(prefix, b)
            self.jump = None
        try:
            sink.commit()
        except BaseException:
            sink.abort()
            raise
        self.listing[rel_log] = streamed.size
        entry: dict[str, Any] = {"size": streamed.size, "crc32c": streamed.crc, "source": _identity(st)}
        if active:
            entry["end"] = streamed.end_offset
            if end_limit is not None:
                entry["limit"] = end_limit
        self.files[rel_log] = entry
        self.summary.files_copied += 1
        self.summary.bytes_copied += streamed.size
        part.files_copied += 1
        part.bytes_copied += streamed.size
        self.progress(st.st_size - streamed.size)
        if indexes is not None and not new_first:
            self._put_indexes(rels, indexes, part)
        return True

    def _partition_files(self, pd: PartitionDir, prefix: str, first: int, end: int, part: PartitionCopy) -> None:
        """Producer snapshots in [first segment's base, end], the leader epochs below ``end``,
        ``partition.metadata``; DST's other snapshots removed."""
        keep = set()
        for p in sorted(pd.path.glob("*" + SNAPSHOT_SUFFIX)) + sorted(pd.path.glob("*" + KRAFT_SNAPSHOT_SUFFIX)):
            if not _snapshot_named(p.name):
                continue
            off = int(p.name.split(".", 1)[0].split("-", 1)[0])
            # producer snapshots of the copied segments; KRaft snapshots (<end offset>-<epoch>.checkpoint)
            # up to the copied end (written whole and renamed into place, as producer snapshots are)
            if (first <= off or p.name.endswith(KRAFT_SNAPSHOT_SUFFIX)) and off <= end:
                data = _read_small(p)
                if data is not None:
                    rel = f"{prefix}/{p.name}"
                    self.put_small(rel, data, part)
                    keep.add(rel)
        for rel in list(self.listing):
            d, _, name = rel.partition("/")
            if d == prefix and _snapshot_named(name) and rel not in keep:
                self.delete(rel)
        epochs = pd.path / LEADER_EPOCH_CHECKPOINT
        raw = _read_small(epochs)
        if raw is not None:
            try:
                entries = [e for e in LeaderEpochCheckpointFile(epochs).read() if e.start_offset < end]
                lines = [f"{e.epoch} {e.start_offset}" for e in entries]
                raw = "".join(f"{line}\n" for line in ["0", str(len(lines)), *lines]).encode()
            except KlogError:
                pass  # copied as it is: a broker reading it says what is wrong
            self.put_small(f"{prefix}/{LEADER_EPOCH_CHECKPOINT}", raw, part)
        for name in (PARTITION_METADATA_FILE, QUORUM_STATE_FILE):
            data = _read_small(pd.path / name)
            if data is not None:
                self.put_small(f"{prefix}/{name}", data, part)


def _inside(a: Path, b: Path) -> bool:
    """Whether ``a`` is ``b`` or lies under it (local paths resolved; URIs compared as text)."""
    if isinstance(a, ObjectPath) != isinstance(b, ObjectPath):
        return False
    sa, sb = (str(a), str(b)) if isinstance(a, ObjectPath) else (os.path.realpath(a), os.path.realpath(b))
    sa, sb = sa.rstrip("/"), sb.rstrip("/")
    return sa == sb or sa.startswith(sb + "/")


def _destination(dst: Path, srcs: Sequence[Path]) -> _Dest:
    for src in srcs:
        if _inside(dst, src):
            raise SnapshotError(f"the destination {dst} is inside the source {src}: a snapshot would copy itself; "
                                "choose a DST outside SRC")
        if _inside(src, dst):
            raise SnapshotError(f"the source {src} is inside the destination {dst}; choose a DST that does not "
                                "hold SRC")
    if isinstance(dst, ObjectPath):
        return _ObjectDest(dst)
    if dst.exists() and not dst.is_dir():
        raise SnapshotError(f"the destination {dst} is a file; expected a directory (it is created if missing)")
    return _LocalDest(dst)


def _check_destination(dest: _Dest, listing: dict[str, int], src: Sequence[Path]) -> None:
    """DST is empty, or a snapshot of this SRC: never a log dir of its own (a broker's, a writer's)."""
    others = [r for r in listing if r != LOCK_FILE and not r.endswith(TMP_SUFFIX)]
    if not others:
        return
    raw = dest.read(SNAPSHOT_MANIFEST_FILE)
    if raw is None:
        shown = ", ".join(sorted({r.split("/", 1)[0] for r in others})[:5])
        raise SnapshotError(f"the destination {dest.uri} is not empty and is not a klog snapshot (no "
                            f"{SNAPSHOT_MANIFEST_FILE}; it holds {shown}): klog snapshot writes only into an empty "
                            "dir or one it wrote, never into a log dir of a broker or writer")
    try:
        manifest = json.loads(raw)
        source = manifest["source"]
        version = manifest["version"]
        if not isinstance(manifest["files"], dict):
            raise TypeError("files")
    except (ValueError, KeyError, TypeError) as exc:
        raise SnapshotError(f"{dest.uri}/{SNAPSHOT_MANIFEST_FILE} is not a klog snapshot manifest ({exc}); remove "
                            "the destination or choose another") from None
    if version != MANIFEST_VERSION:
        raise SnapshotError(f"{dest.uri} was written by a klog snapshot of manifest version {version}; this klog "
                            f"writes version {MANIFEST_VERSION}: snapshot into a new destination")
    if source != _source_name(src):
        raise SnapshotError(f"the destination {dest.uri} is a snapshot of {source}, not of {_source_name(src)}; "
                            "snapshot into another destination")


def _source_name(srcs: Sequence[Path]) -> str:
    """The manifest's ``source``: the log dir, or a cluster's log dirs in the order given, joined by commas."""
    return ",".join(str(s) if isinstance(s, ObjectPath) else os.path.realpath(s) for s in srcs)


def snapshot(src: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], dst: str | os.PathLike[str], *,
             storage: StorageOptions | None = None, progress: Progress | None = None, checksum: bool = False,
             workers: int | None = 1, remote: RemoteStorage | None = None,
             include_remote: bool = False) -> SnapshotSummary:
    """Copy the log dir ``src`` to ``dst`` (see the module doc); returns what was copied and skipped.

    ``src`` and ``dst`` are local paths or URIs (``s3://bucket/prefix``) read and written through
    ``storage`` (the ``fs.*`` options; default: each SDK's environment). ``progress(n, total)`` is
    called as bytes of ``.log`` files are copied or found up to date. ``checksum`` compares every
    closed segment's CRC-32C with DST's, not only its identity and size. ``workers`` copies that
    many partitions at once (None: :func:`~storage_core.workers.pool_size`'s default; 1, the default,
    one after the other); DST ends the same whatever it is.

    **Several log dirs** (a sequence, or ``"b1/data,b2/data,b3/data"`` and globs as every read
    path takes them: the brokers of one cluster) make a **cluster snapshot**: each partition is
    copied once, from the replica a read reads (:mod:`storage_core.log.replicas`), up to its high
    watermark, so DST is one log dir holding what the cluster serves (see the module doc).

    A tiered partition's remote history (KIP-405, ``__remote_log_metadata`` in SRC) is noted in
    the summary and the manifest, and left where it is; with ``include_remote`` its segments are
    read from ``remote`` (:class:`~storage_core.log.tiered.RemoteStorage`) and copied into DST
    before the local ones as ordinary segments, so DST holds the partition's whole history (its log
    start the remote history's). A segment the metadata lists and the storage lacks is then a
    :class:`~storage_core.errors.RemoteSegmentMissingError`: nothing is copied without it. A DST
    that holds remote history from an earlier run is refused without ``include_remote`` (the run
    would delete it as below the source's log start)."""
    if include_remote and remote is None:
        raise InvalidOptionError("include_remote (--include-remote) needs the remote storage to copy from: "
                                 "remote (--remote-storage PATH|URI)")
    from storage_core.read.options import split_paths

    raw = split_paths(src) if isinstance(src, str) else (src,) if isinstance(src, os.PathLike) else tuple(src)
    if not raw:
        raise InvalidOptionError("no source log dir given; expected a log dir, or the log dirs of a cluster's "
                                 "brokers as 'b1/data,b2/data,b3/data'")
    src_paths = list(dict.fromkeys(as_path(p, storage) for p in raw))
    dst_path = as_path(dst, storage)
    if len(src_paths) == 1:
        parts = find_partitions(src_paths, required=True, storage=storage)  # SRC may be one partition dir
        cluster = None
    else:
        cluster = _cluster_source(src_paths)
        parts = cluster.partitions
    dest = _destination(dst_path, src_paths)
    _check_destination(dest, dest.listing(), src_paths)  # before the lock: a refused DST gets no .lock
    lock = None
    if isinstance(dest, _LocalDest):
        from storage_core.log.lock import LogDirLock

        lock = LogDirLock(dest.root)  # LogDirLockedError: a broker, a writer or another snapshot has it
    try:
        return _snapshot(src_paths, dest, parts, progress, checksum, workers, remote if include_remote else None,
                         remote, cluster)
    finally:
        if lock is not None:
            lock.release()


@dataclass(frozen=True)
class _ClusterSource:
    """The log dirs of several brokers, as a cluster snapshot copies them: each partition's replica
    read and where it ends, the log dir's files DST gets in place of one broker's."""

    partitions: list[PartitionDir]
    #: by partition: the offset its copy ends at (the high watermark), None for the replica's log end
    ends: dict[TopicPartition, int | None]
    meta_properties: bytes
    topic_configs: bytes


def _cluster_source(paths: list[Path]) -> _ClusterSource:
    """Each partition of the brokers' log dirs ``paths`` once, as a read takes it; refused (before
    anything is written) where a read would be: a partition with no in-sync replica among the dirs,
    or none at all though the KRaft metadata assigns it (:func:`~storage_core.log.manager.replica_problems`).

    DST is one log dir, not a broker's: no ``__cluster_metadata`` (its registrations name brokers
    and ISRs that one dir cannot be read against), a ``meta.properties`` with the cluster id and no
    node id, and ``klog-topic-configs.json`` holding each topic's configs as the replica read's dir
    resolves them (KRaft topic and broker configs, the dir's own file), so that DST reads, compacts
    and retains each topic as the cluster does."""
    view = scan_log_dirs(paths, required=True)
    problems = replica_problems(view.partitions, view.absent)
    if problems:
        more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
        raise ReplicaMissingError("a cluster snapshot copies each partition from an in-sync replica: "
                                  + "; ".join(problems[:5]) + more)
    parts = [pd for pd in view.partitions if pd.topic_partition.topic != CLUSTER_METADATA_TOPIC]
    clusters = sorted({b.cluster_id for b in view.brokers.values() if b.cluster_id is not None})
    nodes = sorted({b.node_id for b in view.brokers.values() if b.node_id is not None})
    meta = (f"#a klog cluster snapshot of brokers {', '.join(map(str, nodes)) or '(unknown)'}: one replica per "
            "partition, up to its high watermark\n" + "".join(f"cluster.id={c}\n" for c in clusters[:1]))
    states = LogDirStates()
    configs: dict[str, dict[str, str]] = {}
    for pd in parts:
        topic = pd.topic_partition.topic
        if topic not in configs:
            configs[topic] = states.of(pd.log_dir).resolved_config(topic).set_values()
    return _ClusterSource(parts, {pd.topic_partition: pd.high_watermark for pd in parts}, meta.encode("latin-1"),
                          (json.dumps(configs, indent=2, sort_keys=True) + "\n").encode())


def _snapshot(src: Sequence[Path], dest: _Dest, parts: list[PartitionDir], progress: Progress | None,
              checksum: bool, workers: int | None, include: RemoteStorage | None,
              remote: RemoteStorage | None, cluster: _ClusterSource | None) -> SnapshotSummary:
    summary = SnapshotSummary(source=",".join(map(str, src)), destination=dest.uri)
    listing = dest.listing()
    _check_destination(dest, listing, src)
    run = _Run(dest, summary, progress, checksum, {} if cluster is None else cluster.ends)
    held = run.old_remote.get("included") if run.old_remote else None
    if held and include is None:
        raise SnapshotError(f"{dest.uri} holds the remote history of tiered partitions (copied from {held}); "
                            "without --include-remote this run would delete it as below the source's log start. "
                            "Rerun with --include-remote --remote-storage, or snapshot into another DST")
    run.tiered = load_remote_metadata(dict.fromkeys(pd.log_dir for pd in parts))  # paths already resolved
    run.remote = include
    for rel in list(run.listing):
        if rel.endswith(TMP_SUFFIX):  # a run interrupted while writing
            run.delete(rel)
    run.total = sum(seg.size_in_bytes for seg in _segments_for_total(parts))
    if include is not None:  # and the remote segments to copy (the metadata's sizes: no request per segment)
        run.total += sum(s.size_bytes for pd in parts for s in partition_history(run.tiered, pd.topic_partition, pd.path))
    copied: dict[TopicPartition, PartitionCopy] = {}

    def copy_one(pd: PartitionDir) -> tuple[PartitionDir, _Run, PartitionCopy | None]:
        part_run = run.for_partition(pd.path.name)
        return pd, part_run, part_run.copy_partition(pd)

    # partitions on up to `workers` threads; each one's run is absorbed in partition order, and the
    # first error (in that order) is raised once every thread stopped
    for pd, part_run, result in ordered_map(copy_one, parts, pool_size(workers, len(parts))):
        run.absorb(part_run, pd.path.name)
        if result is None:
            continue
        copied[pd.topic_partition] = result
        summary.partitions.append(result)
        if result.files_copied:
            summary.partitions_copied += 1
        else:
            summary.partitions_skipped += 1
    dest.sync()
    # segments below each new log start, from the front (each state a log without gaps: the new
    # segments are in place, and where DST's old ones ended below them the log start hides them)
    src_dirs = {pd.topic_partition: pd.path.name for pd in parts}
    doomed = {tp: [b for b in run.dst_bases(src_dirs[tp]) if b < _first_kept(run.dst_bases(src_dirs[tp]), pc)]
              for tp, pc in copied.items()}
    if any(doomed.values()):
        # log-start-offset-checkpoint first moves above them: a reader that meets a segment half
        # deleted (its .log gone, its indexes not yet) sees it below the log start, as retention leaves
        # it, not a segment lost from the middle of the log (storage_core.log.lost)
        interim = {**_read_offsets(dest, LOG_START_OFFSET_CHECKPOINT)}
        for tp, bases in doomed.items():
            if bases:
                interim[tp] = max(copied[tp].start_offset, _first_kept(run.dst_bases(src_dirs[tp]), copied[tp]))
        run.put_small(LOG_START_OFFSET_CHECKPOINT, _checkpoint_text(interim), None)
        dest.sync()
    for tp, bases in doomed.items():
        for b in bases:
            run.delete_segment(src_dirs[tp], b)
    dest.sync()
    # the log dir's files: checkpoints describe what DST holds now
    old_rp = _read_offsets(dest, RECOVERY_POINT_OFFSET_CHECKPOINT)
    old_ls = _read_offsets(dest, LOG_START_OFFSET_CHECKPOINT)
    recovery = {tp: rp for tp, rp in old_rp.items() if tp in src_dirs and tp not in copied}
    starts = {tp: s for tp, s in old_ls.items() if tp in src_dirs and tp not in copied}
    for tp, pc in copied.items():
        recovery[tp] = pc.end_offset
        if pc.start_offset > _first_kept(run.dst_bases(src_dirs[tp]), pc):  # as LogManager writes it
            starts[tp] = pc.start_offset
    if cluster is not None:  # one log dir of the cluster's data, no broker's (see _cluster_source)
        run.put_small(META_PROPERTIES_FILE, cluster.meta_properties, None)
        run.put_small(TOPIC_CONFIGS_FILE, cluster.topic_configs, None)
    else:
        base_dir = parts[0].log_dir if parts else src[0]
        for name in (META_PROPERTIES_FILE, TOPIC_CONFIGS_FILE, BOOTSTRAP_CHECKPOINT):
            data = _read_small(base_dir / name)
            if data is not None:
                run.put_small(name, data, None)
    run.put_small(RECOVERY_POINT_OFFSET_CHECKPOINT, _checkpoint_text(recovery), None)
    run.put_small(LOG_START_OFFSET_CHECKPOINT, _checkpoint_text(starts), None)
    dest.sync()
    # then the partitions the source no longer has (after the checkpoints that leave them out)
    kept_dirs = set(src_dirs.values())
    for rel in sorted(run.listing, key=lambda r: (not r.endswith(LOG_SUFFIX), r)):
        d, sep, _ = rel.partition("/")
        if not sep or d in kept_dirs:
            continue
        try:
            TopicPartition.parse_dir_name(d)
        except KlogError:
            continue  # not a partition dir: left alone
        run.delete(rel)
    gone = {rel.partition("/")[0] for rel in run.old_files if "/" in rel} - kept_dirs
    summary.partitions_deleted = len(gone)
    if isinstance(dest, _LocalDest):
        for d in gone:
            dest.remove_empty_dir(d)
    dest.sync()
    # the manifest last: what DST holds, with the source identity of each file
    files = {rel: e for rel, e in run.files.items() if rel in run.listing}
    for rel, e in run.old_files.items():  # partitions not copied this time (an unfinished commit) keep theirs
        d = rel.partition("/")[0]
        if rel in run.listing and rel not in files and d in kept_dirs:
            files[rel] = e
    manifest: dict[str, Any] = {"version": MANIFEST_VERSION, "source": _source_name(src),
                                "files": dict(sorted(files.items()))}
    if cluster is not None:  # where each partition came from: the broker of the replica read, and its end
        manifest["replicas"] = {f"{pc.topic}-{pc.partition}": {"broker": pc.broker, "end": pc.end_offset}
                                for pc in sorted(summary.partitions, key=lambda pc: (pc.topic, pc.partition))}
    tiered = [pc for pc in summary.partitions if pc.remote_segments]
    if tiered:  # where the history of the tiered partitions is (remote storage named as given, no secret)
        manifest["remote"] = {
            "storage": None if remote is None else remote.location,
            "layout": None if remote is None else remote.layout.value,
            "included": None if include is None else include.location,
            "partitions": {f"{pc.topic}-{pc.partition}": {"start": pc.remote_start_offset, "end": pc.remote_end_offset,
                                                          "segments": pc.remote_segments} for pc in tiered}}
    dest.put(SNAPSHOT_MANIFEST_FILE, json.dumps(manifest, indent=1).encode())
    dest.sync()
    return summary


def _first_kept(bases: list[int], pc: PartitionCopy) -> int:
    """The base of the first DST segment to keep: the one holding the log start offset."""
    keep = bases[0] if bases else 0
    for b in bases:
        if b <= pc.start_offset:
            keep = b
    return keep


def _segments_for_total(parts: list[PartitionDir]) -> list[LogSegment]:
    out: list[LogSegment] = []
    for pd in parts:
        try:
            with Log(pd.path, had_clean_shutdown=True, verify_tail=False) as log:
                out += log.segments
        except KlogError:
            continue  # an unfinished commit or no segments: said when the partition is copied
    return out


def _read_offsets(dest: _Dest, name: str) -> dict[TopicPartition, int]:
    raw = dest.read(name)
    if raw is None:
        return {}
    out = {}
    for line in raw.decode(errors="replace").splitlines()[2:]:
        fields = line.split()
        if len(fields) == 3 and fields[1].isdigit() and fields[2].lstrip("-").isdigit():
            out[TopicPartition(fields[0], int(fields[1]))] = int(fields[2])
    return out
