"""A remote segment's three objects in the plugin's layout, read as a read-only segment.

Object keys (``ObjectKeyFactory.java``)::

    <prefix><topic>-<topic id>/<partition>/<base offset, 20 digits>-<segment id>.<suffix>

with ``suffix`` ``rsm-manifest``, ``log`` or ``indexes``. The manifest's key always uses the
configured ``key.prefix``; the ``.log`` and ``.indexes`` keys prefer the ``OBJECT_PREFIX`` and
``OBJECT_KEY`` custom-metadata fields when ``__remote_log_metadata`` carries them
(``KafkaRemoteStorageManager.objectKey``, :mod:`.custom_metadata`). The keys are relative to the
storage: ``FileSystemStorage`` keeps each as a file under ``storage.root``
(``storage/filesystem/.../FileSystemStorage.java``); ``S3Storage`` as an object of its bucket
(``storage/s3/.../S3Storage.java``).

:class:`AivenSegment` opens a segment: its manifest (one small fetch), checked against the
metadata's segment and the ``.log`` object's size, and, when encrypted, its data key unwrapped.
Nothing else is fetched until read: :class:`AivenSegment.read` fetches the transformed bytes of the
chunks an original byte range needs, in one ranged request, and undoes the transform on the
caller's thread (:mod:`.transform`); the indexes are fetched from ``.indexes`` one by one when first
used. Decoded chunks are kept in a small process-wide cache, so the planner's lookups and the piece
reader share them.

:func:`aiven_log_segment` gives the segment as a :class:`~storage_core.log.segment.LogSegment` over
virtual files (:class:`AivenPath`: ``<stem>.log`` of the original size, ``<stem>.index``,
``.timeindex``, ``.txnindex``, ``.snapshot`` from ``.indexes``), so ranges, timestamps and
read_committed go through the same rules as local segments. Such a path pickles as the segment's
description (no key, no cache): a Spark executor unpickling it fetches and decrypts on its own
threads.
"""

from __future__ import annotations

import io
import os
import threading
import zlib
from collections import OrderedDict
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PosixPath
from typing import IO, Any, ClassVar, cast

from storage_core.errors import (
    KlogError,
    RemoteChunkError,
    RemoteKeyError,
    RemoteManifestError,
    RemoteSegmentMissingError,
)
from storage_core.files import INDEX_SUFFIX, LOG_SUFFIX, SNAPSHOT_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX
from storage_core.fs import ObjectPath, StorageOptions, as_path
from storage_core.log.aiven.config import AivenConfig
from storage_core.log.aiven.custom_metadata import SegmentCustomMetadata
from storage_core.log.aiven.manifest import Chunk, ManifestError, SegmentManifest
from storage_core.log.aiven.transform import ChunkTransformError, DataKey, KeyRingError, detransform, unwrap_data_key
from storage_core.log.remote_metadata import RemoteSegment
from storage_core.log.segment import LogSegment

__all__ = ["AivenPath", "AivenSegment", "FetchCounter", "aiven_log_segment", "object_keys", "FETCHED"]

#: ``ObjectKeyFactory.Suffix`` values (and ``INDEXES``) the reader fetches
MANIFEST_SUFFIX = ".rsm-manifest"
LOG_OBJECT_SUFFIX = ".log"
INDEXES_SUFFIX = ".indexes"
#: the virtual index files and the manifest's ``segmentIndexes`` name each is cut from
_INDEX_FILES = {INDEX_SUFFIX: "offset", TIME_INDEX_SUFFIX: "timestamp", TXN_INDEX_SUFFIX: "transaction",
                SNAPSHOT_SUFFIX: "producerSnapshot"}
#: decoded chunks kept across reads in one process (the planner's lookups and the piece reads share them)
CHUNK_CACHE_BYTES = 64 << 20


@dataclass
class FetchCounter:
    """Bytes fetched from the remote storage in this process, by object kind (for tests and
    benchmarks: a narrow read must fetch only the chunks it needs)."""

    log_bytes: int = 0
    index_bytes: int = 0
    manifest_bytes: int = 0
    requests: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, kind: str, n: int) -> None:
        with self._lock:
            setattr(self, kind, getattr(self, kind) + n)
            self.requests += 1

    def reset(self) -> None:
        with self._lock:
            self.log_bytes = self.index_bytes = self.manifest_bytes = self.requests = 0


FETCHED = FetchCounter()


def _fetch(path: Path, start: int, n: int) -> bytes:
    """Bytes ``[start, start + n)`` of an object, in one ranged request."""
    if isinstance(path, ObjectPath):
        def read(fs: Any) -> bytes:
            return bytes(fs.open_input_file(path.fs_key).read_at(n, start))
        return path.store.call(read)
    with path.open("rb") as f:
        f.seek(start)
        return f.read(n)


def _size(path: Path) -> int:
    return path.stat().st_size


@dataclass(frozen=True)
class ObjectKeys:
    """The three object keys of one segment."""

    manifest: str
    log: str
    indexes: str


def object_keys(config: AivenConfig, seg: RemoteSegment) -> ObjectKeys:
    """``ObjectKeyFactory.key``: the manifest under the configured prefix and the computed main
    path; ``.log``/``.indexes`` under the custom metadata's ``OBJECT_PREFIX``/``OBJECT_KEY`` when given."""
    main = (f"{seg.topic}-{seg.topic_id}/{seg.partition}/{seg.start_offset:020d}-{seg.segment_id}")
    custom = SegmentCustomMetadata.parse(seg.custom_metadata, f"segment {seg.segment_id}")
    prefix = config.key_prefix
    data_prefix = prefix if custom.object_prefix is None else custom.object_prefix
    data_main = main if custom.object_key is None else custom.object_key
    return ObjectKeys(prefix + main + MANIFEST_SUFFIX, data_prefix + data_main + LOG_OBJECT_SUFFIX,
                      data_prefix + data_main + INDEXES_SUFFIX)


class _ChunkCache:
    def __init__(self, budget: int) -> None:
        self._budget = budget
        self._used = 0
        self._items: OrderedDict[tuple[str, int], bytes] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[str, int]) -> bytes | None:
        with self._lock:
            data = self._items.get(key)
            if data is not None:
                self._items.move_to_end(key)
            return data

    def put(self, key: tuple[str, int], data: bytes) -> None:
        with self._lock:
            if key in self._items:
                return
            self._items[key] = data
            self._used += len(data)
            while self._used > self._budget and len(self._items) > 1:
                _, old = self._items.popitem(last=False)
                self._used -= len(old)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._used = 0


CHUNKS = _ChunkCache(CHUNK_CACHE_BYTES)


class AivenSegment:
    """One remote segment's objects: its manifest, keys, and (encrypted) data key.

    Picklable as its description (``location``, ``storage``, ``config``, the metadata's segment and
    the manifest's bytes): the data key is unwrapped again where it is used, never pickled."""

    def __init__(self, location: str, storage: StorageOptions, config: AivenConfig, seg: RemoteSegment,
                 manifest_bytes: bytes | None = None) -> None:
        self.location = location
        self.storage = storage
        self.config = config
        self.seg = seg
        self.keys = object_keys(config, seg)
        self.root = as_path(location, storage)
        self.log_object = self.root / self.keys.log
        self.indexes_object = self.root / self.keys.indexes
        manifest_object = self.root / self.keys.manifest
        self.what = (f"remote segment {seg.segment_id} of {seg.topic}-{seg.partition} (offsets {seg.start_offset}-"
                     f"{seg.end_offset})")
        if manifest_bytes is None:
            try:
                manifest_bytes = manifest_object.read_bytes()
            except FileNotFoundError:
                raise self._missing(f"its manifest {self._shown(manifest_object)} is not in the remote storage "
                                    f"{location} (the plugin writes it last: the copy never finished)",
                                    manifest_object) from None
            except OSError as exc:
                raise self._missing(f"its manifest {self._shown(manifest_object)} could not be read: {exc}",
                                    manifest_object) from None
            FETCHED.add("manifest_bytes", len(manifest_bytes))
        self._manifest_bytes = manifest_bytes
        try:
            self.manifest = SegmentManifest.parse(manifest_bytes)
        except ManifestError as exc:
            raise self._manifest_error(f"manifest {self._shown(manifest_object)} is not the plugin's "
                                       f"(SegmentManifestV1): {exc}", manifest_object) from None
        self._check(manifest_object)
        self._key: DataKey | None = None
        self._key_lock = threading.Lock()
        if self.manifest.encryption is not None:
            self.data_key()  # a missing or wrong key fails the open, before any row

    # -- checks
    def _shown(self, path: Path) -> str:
        key = str(path)
        return key if not self.config.key_prefix_mask else key.replace(self.config.key_prefix, "<prefix>/", 1)

    def _offsets(self) -> tuple[tuple[int, int], ...]:
        return ((self.seg.start_offset, self.seg.end_offset),)

    def _missing(self, detail: str, path: Path) -> RemoteSegmentMissingError:
        return RemoteSegmentMissingError(f"{self.what}: {detail}", offsets=self._offsets(), path=self._shown(path))

    def _manifest_error(self, detail: str, path: Path) -> RemoteManifestError:
        return RemoteManifestError(f"{self.what}: {detail}", offsets=self._offsets(), path=self._shown(path))

    def _check(self, manifest_object: Path) -> None:
        m, seg = self.manifest, self.seg
        if m.segment_id is not None and m.segment_id != seg.segment_id or (
                m.start_offset is not None and m.start_offset != seg.start_offset) or (
                m.end_offset is not None and m.end_offset != seg.end_offset):
            raise self._manifest_error(f"manifest {self._shown(manifest_object)} was written for segment "
                                       f"{m.segment_id} (offsets {m.start_offset}-{m.end_offset}); expected "
                                       f"{seg.segment_id} (offsets {seg.start_offset}-{seg.end_offset})",
                                       manifest_object)
        if m.chunk_index.original_file_size != seg.size_bytes:
            raise self._manifest_error(f"manifest {self._shown(manifest_object)} has originalFileSize "
                                       f"{m.chunk_index.original_file_size}; expected the segment's "
                                       f"{seg.size_bytes} bytes (segmentSizeInBytes in __remote_log_metadata)",
                                       manifest_object)
        try:
            size = _size(self.log_object)
        except FileNotFoundError:
            raise self._missing(f"its object {self._shown(self.log_object)} is not in the remote storage "
                                f"{self.location}", self.log_object) from None
        expected = m.chunk_index.transformed_file_size
        if size != expected:
            raise self._manifest_error(f"object {self._shown(self.log_object)} has {size} bytes; its manifest's "
                                       f"{m.chunk_index.count} chunks ({m.chunk_index.kind} chunk index) make "
                                       f"{expected}", self.log_object)

    def data_key(self) -> DataKey | None:
        """The segment's data key (None: not encrypted), unwrapped once per process."""
        enc = self.manifest.encryption
        if enc is None:
            return None
        with self._key_lock:
            if self._key is None:
                try:
                    self._key = unwrap_data_key(self.config, enc)
                except KeyRingError as exc:
                    raise RemoteKeyError(f"{self.what}: {exc}", offsets=self._offsets(),
                                         path=self._shown(self.log_object)) from None
            return self._key

    # -- reading
    @property
    def size(self) -> int:
        """The segment file's original size."""
        return self.manifest.chunk_index.original_file_size

    def _chunk_error(self, chunk: Chunk, exc: ChunkTransformError) -> RemoteChunkError:
        return RemoteChunkError(f"{self.what}: chunk {chunk.id} of {self.manifest.chunk_index.count} (bytes "
                                f"{chunk.transformed_position}-{chunk.transformed_end - 1} of object "
                                f"{self._shown(self.log_object)}, original bytes {chunk.original_position}-"
                                f"{chunk.original_end - 1}) does not undo its transform: {exc}",
                                offsets=self._offsets(), path=self._shown(self.log_object),
                                position=chunk.original_position)

    def chunks(self, start: int, end: int) -> Iterator[tuple[Chunk, bytes]]:
        """The decoded chunks holding original bytes ``[start, end)``: those not cached fetched in
        one ranged request per run of them, decrypted and decompressed here."""
        wanted = self.manifest.chunk_index.chunks_for(max(0, start), min(end, self.size))
        cache_name = str(self.log_object)
        i = 0
        while i < len(wanted):
            hit = CHUNKS.get((cache_name, wanted[i].id))
            if hit is not None:
                yield wanted[i], hit
                i += 1
                continue
            j = i
            while j + 1 < len(wanted) and CHUNKS.get((cache_name, wanted[j + 1].id)) is None:
                j += 1
            first, last = wanted[i], wanted[j]
            n = last.transformed_end - first.transformed_position
            try:
                raw = _fetch(self.log_object, first.transformed_position, n)
            except FileNotFoundError:
                raise self._missing(f"its object {self._shown(self.log_object)} is gone from the remote storage",
                                    self.log_object) from None
            FETCHED.add("log_bytes", len(raw))
            if len(raw) != n:
                raise self._manifest_error(f"object {self._shown(self.log_object)} ends at "
                                           f"{first.transformed_position + len(raw)}; its manifest's chunks run to "
                                           f"{last.transformed_end}", self.log_object)
            key = self.data_key()
            for c in wanted[i:j + 1]:
                at = c.transformed_position - first.transformed_position
                try:
                    data = detransform(raw[at:at + c.transformed_size], key=key,
                                       compressed=self.manifest.compression, expected=c.original_size)
                except ChunkTransformError as exc:
                    raise self._chunk_error(c, exc) from None
                CHUNKS.put((cache_name, c.id), data)
                yield c, data
            i = j + 1

    def read(self, start: int, end: int) -> bytes:
        """Original bytes ``[start, end)`` of the segment file."""
        end = min(end, self.size)
        if end <= start:
            return b""
        out = bytearray()
        for c, data in self.chunks(start, end):
            lo, hi = max(start, c.original_position), min(end, c.original_end)
            out += memoryview(data)[lo - c.original_position:hi - c.original_position]
        return bytes(out)

    def index(self, name: str) -> bytes | None:
        """An index of the ``.indexes`` object by its manifest name, detransformed (decrypted;
        indexes are never compressed, ``KafkaRemoteStorageManager.transformIndex``); None when the
        manifest records none (``"transaction": null``)."""
        entry = self.manifest.indexes.get(name)
        if entry is None:
            return None
        if entry.size == 0:
            return b""
        cache_key = (str(self.indexes_object) + "#" + name, 0)
        hit = CHUNKS.get(cache_key)
        if hit is not None:
            return hit
        try:
            raw = _fetch(self.indexes_object, entry.position, entry.size)
        except FileNotFoundError:
            raise self._missing(f"its object {self._shown(self.indexes_object)} is not in the remote storage",
                                self.indexes_object) from None
        FETCHED.add("index_bytes", len(raw))
        if len(raw) != entry.size:
            raise self._manifest_error(f"object {self._shown(self.indexes_object)} holds {len(raw)} bytes of the "
                                       f"{name} index at {entry.position}; its manifest says {entry.size}",
                                       self.indexes_object)
        try:
            data = detransform(raw, key=self.data_key(), compressed=False, expected=None)
        except ChunkTransformError as exc:
            raise RemoteChunkError(f"{self.what}: the {name} index (bytes {entry.position}-"
                                   f"{entry.position + entry.size - 1} of object {self._shown(self.indexes_object)}) "
                                   f"does not decrypt: {exc}", offsets=self._offsets(),
                                   path=self._shown(self.indexes_object)) from None
        CHUNKS.put(cache_key, data)
        return data

    def index_size(self, name: str) -> int | None:
        entry = self.manifest.indexes.get(name)
        if entry is None:
            return None
        if entry.size == 0 or self.manifest.encryption is None:
            return entry.size
        return entry.size - self.manifest.encryption.iv_size - 16

    def __reduce__(self) -> tuple[Any, ...]:
        return (AivenSegment, (self.location, self.storage, self.config, self.seg, self._manifest_bytes))

    def __repr__(self) -> str:
        return f"AivenSegment({self.what})"


# -- the segment as files --------------------------------------------------------------------------


def _path_class(segment: AivenSegment) -> type[AivenPath]:
    return cast(type[AivenPath], type("AivenPath", (AivenPath,), {"_segment": segment}))


def _aiven_path(segment: AivenSegment, posix: str) -> AivenPath:
    return _path_class(segment)(posix)


class AivenPath(PosixPath):
    """A virtual file or dir of one :class:`AivenSegment`: ``<dir>/<stem>.log`` and its indexes.
    Reads only; every write is refused as the object store's are."""

    _segment: ClassVar[AivenSegment]

    def __reduce__(self) -> tuple[Any, ...]:
        return (_aiven_path, (self._segment, str(self)))

    def __fspath__(self) -> str:
        raise KlogError(f"{self} is a remote segment of Aiven's layout: it has no local file")

    @property
    def segment(self) -> AivenSegment:
        return self._segment

    def _stem(self) -> str:
        s = self._segment.seg
        return f"{s.start_offset:020d}-{s.segment_id}"

    def _kind(self) -> str | None:
        """``dir``, ``log`` or an index suffix; None for a name the segment does not have."""
        stem = self._stem()
        if self.name == stem + LOG_SUFFIX:
            return "log"
        for suffix, index in _INDEX_FILES.items():
            if self.name == stem + suffix:
                return suffix if self._segment.index_size(index) is not None else None
        if not self.name.startswith(stem):
            return "dir"
        return None

    def stat(self, *, follow_symlinks: bool = True) -> os.stat_result:
        kind = self._kind()
        if kind is None:
            raise FileNotFoundError(2, "No such object", str(self))
        seg = self._segment
        identity = zlib.crc32(f"{seg.keys.log}:{seg.size}".encode()) + 1
        if kind == "dir":
            return os.stat_result((0o40555, identity, 0, 1, 0, 0, 0, 0, 0, 0))
        size = seg.size if kind == "log" else seg.index_size(_INDEX_FILES[kind]) or 0
        mtime = seg.seg.event_timestamp_ms / 1000
        return os.stat_result((0o100444, identity, 0, 1, 0, 0, size, mtime, mtime, mtime))

    def lstat(self) -> os.stat_result:
        return self.stat()

    def exists(self, *, follow_symlinks: bool = True) -> bool:
        return self._kind() is not None

    def is_file(self, *, follow_symlinks: bool = True) -> bool:
        return self._kind() not in (None, "dir")

    def is_dir(self, *, follow_symlinks: bool = True) -> bool:
        return self._kind() == "dir"

    def is_symlink(self) -> bool:
        return False

    def resolve(self, strict: bool = False) -> AivenPath:
        return self

    def absolute(self) -> AivenPath:
        return self

    def iterdir(self) -> Generator[AivenPath, None, None]:
        if self._kind() != "dir":
            raise NotADirectoryError(20, "Not a directory", str(self))
        for suffix in (LOG_SUFFIX, *_INDEX_FILES):
            child = self / (self._stem() + suffix)
            if child.exists():
                yield child

    def glob(self, pattern: str, *args: Any, **kwargs: Any) -> Iterator[AivenPath]:  # type: ignore[override]
        import fnmatch

        return (p for p in self.iterdir() if fnmatch.fnmatchcase(p.name, pattern))

    def open(self, mode: str = "r", buffering: int = -1, encoding: str | None = None,  # type: ignore[override]
             errors: str | None = None, newline: str | None = None) -> IO[Any]:
        if any(c in mode for c in "wax+"):
            raise KlogError(f"{self} is a remote segment: read-only (open({mode!r}))")
        kind = self._kind()
        if kind is None or kind == "dir":
            raise FileNotFoundError(2, "No such object", str(self))
        raw: io.RawIOBase = (_SegmentReader(self._segment) if kind == "log"
                             else _BytesReader(self._segment.index(_INDEX_FILES[kind]) or b""))
        if "b" in mode:
            return cast(IO[Any], raw)
        return io.TextIOWrapper(io.BufferedReader(raw), encoding=encoding or "utf-8", errors=errors, newline=newline)

    def read_bytes(self) -> bytes:
        with self.open("rb") as f:
            return cast(bytes, f.read())

    def _refused(self, *args: Any, **kwargs: Any) -> Any:
        raise KlogError(f"{self} is a remote segment: read-only")

    unlink = mkdir = rename = replace = touch = write_bytes = write_text = rmdir = _refused


class _BytesReader(io.RawIOBase):
    def __init__(self, data: bytes) -> None:
        super().__init__()
        self._buf = io.BytesIO(data)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, pos: int, whence: int = io.SEEK_SET) -> int:
        return self._buf.seek(pos, whence)

    def tell(self) -> int:
        return self._buf.tell()

    def readinto(self, b: Any) -> int:
        return self._buf.readinto(b)


class _SegmentReader(io.RawIOBase):
    """The original segment file of an :class:`AivenSegment`, read by chunks on demand."""

    def __init__(self, segment: AivenSegment) -> None:
        super().__init__()
        self._seg = segment
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, pos: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._seg.size}[whence]
        self._pos = max(0, base + pos)
        return self._pos

    def readinto(self, b: Any) -> int:
        view = memoryview(b).cast("B")
        end = min(self._pos + len(view), self._seg.size)
        got = 0
        for c, data in self._seg.chunks(self._pos, end):
            lo, hi = max(self._pos, c.original_position), min(end, c.original_end)
            view[got:got + hi - lo] = memoryview(data)[lo - c.original_position:hi - c.original_position]
            got += hi - lo
        self._pos += got
        return got


class AivenLogSegment(LogSegment):
    """A read-only :class:`LogSegment` over an :class:`AivenSegment`'s virtual files: its walks read
    one chunk's worth at a time, so a lookup fetches the chunks it reaches, not the segment's rest."""

    def batches(self, start_position: int = 0, end_position: int | None = None, *, transient: bool = False) -> Any:
        end = self.size_in_bytes if end_position is None else end_position
        chunk = self.dir_segment.manifest.chunk_index.original_chunk_size
        return self._records().batches(start_position, end, chunk_bytes=chunk, transient=transient)

    @property
    def dir_segment(self) -> AivenSegment:
        return cast(AivenPath, self.dir).segment


def aiven_log_segment(segment: AivenSegment, *, index_interval_bytes: int) -> LogSegment:
    """``segment`` as a read-only :class:`LogSegment` (its dir: the objects' dir, virtual)."""
    obj = segment.log_object
    dir_name = str(obj.parent) if not isinstance(obj, ObjectPath) else "/" + "/".join(obj.parts[1:-1])
    directory = _aiven_path(segment, dir_name)
    stem = directory._stem()
    return AivenLogSegment(directory, segment.seg.start_offset, index_interval_bytes=index_interval_bytes, stem=stem)


# -- one segment's objects by name (klog dump) -----------------------------------------------------

#: the suffixes of a segment's objects (``ObjectKeyFactory.Suffix``: ``log``, ``indexes``, ``rsm-manifest``)
OBJECT_SUFFIXES = (MANIFEST_SUFFIX, LOG_OBJECT_SUFFIX, INDEXES_SUFFIX)


def is_aiven_object(path: Path) -> bool:
    """Whether ``path`` is one of a segment's objects in the plugin's layout: a manifest, or a
    ``.log``/``.indexes`` with its manifest beside it."""
    name = path.name
    if name.endswith(MANIFEST_SUFFIX):
        return True
    for suffix in (LOG_OBJECT_SUFFIX, INDEXES_SUFFIX):
        if name.endswith(suffix):
            return path.with_name(name[:-len(suffix)] + MANIFEST_SUFFIX).is_file()
    return False


def object_files(path: Path, config: AivenConfig, storage: StorageOptions | None = None) -> list[Path]:
    """The segment files one object of the plugin holds, as :class:`AivenPath` s: a ``.log`` or
    manifest gives the original ``.log``; ``.indexes`` its ``.index``, ``.timeindex``,
    ``.txnindex`` and ``.snapshot`` (those it has). The segment is the one the manifest's
    ``remoteLogSegmentMetadata`` names (the plugin writes it, :mod:`.manifest`); the manifest is
    checked against the ``.log`` object's size, and an encrypted segment's key unwrapped."""
    from storage_core.record.messages.remote import RemoteLogSegmentState

    name = path.name
    suffix = next(s for s in OBJECT_SUFFIXES if name.endswith(s))
    stem = name[:-len(suffix)]
    manifest_path = path.with_name(stem + MANIFEST_SUFFIX)
    data = manifest_path.read_bytes()
    try:
        import json

        meta = json.loads(data)["remoteLogSegmentMetadata"]
        rid = meta["remoteLogSegmentId"]
        tip = rid["topicIdPartition"]
        manifest = SegmentManifest.parse(data)
        seg = RemoteSegment(tip["topicPartition"]["topic"], tip["topicId"], tip["topicPartition"]["partition"],
                            rid["id"], meta["startOffset"], meta["endOffset"], meta["maxTimestampMs"],
                            meta["eventTimestampMs"], meta["brokerId"], manifest.chunk_index.original_file_size,
                            tuple(sorted((int(e), o) for e, o in meta["segmentLeaderEpochs"].items())),
                            RemoteLogSegmentState.COPY_SEGMENT_FINISHED, None, bool(meta.get("txnIdxEmpty")))
    except (KeyError, TypeError, ValueError, ManifestError) as exc:
        raise RemoteManifestError(f"{manifest_path} is not a segment manifest of the plugin (SegmentManifestV1 with "
                                  f"remoteLogSegmentMetadata): {exc}", path=str(manifest_path)) from None
    main = f"{seg.topic}-{seg.topic_id}/{seg.partition}/{seg.start_offset:020d}-{seg.segment_id}"
    whole = str(manifest_path)
    if not whole.endswith(main + MANIFEST_SUFFIX):
        raise RemoteManifestError(f"{manifest_path} names segment {main}: its objects are not under that key",
                                  path=whole)
    root = whole[:-len(main + MANIFEST_SUFFIX)].rstrip("/") or "/"
    local = AivenConfig({**config.settings, "key.prefix": ""}, config.source)  # the root holds the prefix
    segment = AivenSegment(root, storage or StorageOptions(), local, seg, data)
    log_seg = aiven_log_segment(segment, index_interval_bytes=4096)
    if suffix != INDEXES_SUFFIX:
        return [log_seg.log_path]
    return [f for f in (log_seg.dir / (log_seg.stem + s) for s in _INDEX_FILES) if f.exists()]
