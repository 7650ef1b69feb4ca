"""Where a log dir lives: a local path, or a URI in object storage (``s3://``, ``gs://``, ``abfs://``,
``hdfs://``, any fsspec scheme), behind one path type.

Every read path names files with :class:`pathlib.Path` (``dir / name``, ``.stat()``,
``.open("rb")``, ``.iterdir()``). :func:`as_path` turns what a user passed into one: a plain path
or a ``file://`` URI stays a local :class:`~pathlib.Path`; any other URI becomes an
:class:`ObjectPath`, a ``Path`` whose reads go to the object store through ``pyarrow.fs``
(S3, GCS, Azure, HDFS), with fsspec as the fallback for other schemes. So the log layer (listing
partition dirs, reading checkpoints, indexes, ``partition.metadata`` and producer snapshots as
whole objects, reading segment byte ranges) is the same code for a local disk and a bucket.

Rules of an :class:`ObjectPath`:

* **Read-only.** Every write (``unlink``, ``rename``, ``mkdir``, ``open("wb")``, and any ``os``
  call, which needs a local path: ``__fspath__``) raises :class:`ObjectStoreReadOnlyError`, so a
  write path that was handed a URI stops before it changes anything. Recovery, rebuilt indexes
  and hidden staging of a read-only open already happen in memory.
* **Segment reads are large ranged reads with read-ahead** (:class:`ObjectReader`): a read of
  ``n`` bytes fetches at least :data:`READ_AHEAD_BYTES` and, while the caller decodes it, the
  next block is fetched in the background, so a task is bound by throughput, not request latency.
* **Identity.** ``stat().st_ino`` of an object is a number made from its size and modification
  time: an object replaced or deleted since a read was planned is never read in its place
  (:func:`storage_core.log.segment.resolve_segment_file`).
* **Listings are snapshots.** :meth:`ObjectPath.iterdir` lists once and the children it returns
  (and ``dir / name`` of a listed dir) answer ``stat``/``exists``/``is_file`` from the listing:
  opening a partition of 1,000 segments is one LIST, not 3,000 HEADs.
* **Settings, not clients.** A path carries its scheme and :class:`StorageOptions` (picklable,
  secrets hidden from ``repr``); each process builds its own filesystem from them, once
  (:func:`filesystem`). Credentials and endpoints come from each SDK's own environment variables
  and config files (for S3: ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``,
  ``AWS_SESSION_TOKEN``, ``AWS_REGION``, ``AWS_PROFILE``, ``AWS_ENDPOINT_URL``), or from the
  read/write options under :data:`OPTION_PREFIX` (``fs.endpoint_override``, ``fs.region``,
  ``fs.access_key``, ...: any argument of the scheme's ``pyarrow.fs`` class, or of the fsspec
  filesystem). No error or ``repr`` shows a secret.
"""

from __future__ import annotations

import io
import os
import re
import sys
import threading
import zlib
from collections.abc import Callable, Generator, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path, PosixPath
from typing import IO, TYPE_CHECKING, Any, ClassVar, TypeVar, cast
from urllib.parse import unquote, urlparse

from storage_core.errors import USER_NAME_SCHEMES, InvalidOptionError, KlogError, redact_uris

if TYPE_CHECKING:
    import pyarrow.fs as pafs

__all__ = [
    "OPTION_PREFIX",
    "READ_AHEAD_BYTES",
    "ObjectPath",
    "ObjectReader",
    "ObjectStoreError",
    "ObjectStoreReadOnlyError",
    "StorageOptions",
    "as_path",
    "filesystem",
    "is_object_path",
    "list_names",
    "refuse_credentials",
    "uri_scheme",
    "writable_dir",
]

#: The prefix of the read/write options that configure the filesystem of a URI (``fs.region``).
OPTION_PREFIX = "fs."
#: Bytes an object read fetches at least, and fetches ahead while the caller works on the last block.
READ_AHEAD_BYTES = 8 << 20

_T = TypeVar("_T")
_URI = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
#: schemes pyarrow.fs serves itself (others go to fsspec), and the names they are known by
_ARROW_SCHEMES = {"s3": "s3", "s3a": "s3", "s3n": "s3", "gs": "gcs", "gcs": "gcs", "abfs": "abfs", "abfss": "abfs",
                  "az": "abfs", "hdfs": "hdfs", "viewfs": "hdfs"}
#: option names whose values are shown in a repr or an error (everything else is hidden)
_SHOWN = {"endpoint_override", "region", "scheme", "anonymous", "connect_timeout", "request_timeout",
          "allow_bucket_creation", "force_virtual_addressing", "project_id", "default_bucket_location",
          "account_name", "host", "port", "user", "replication", "buffer_size"}


# --- errors ---------------------------------------------------------------------------------------

class ObjectStoreError(KlogError):
    """Object storage failed or refused: a bucket that does not exist, wrong credentials, an
    unreachable endpoint, a read cut off. The message names the URI and the operation, never a
    secret."""


class ObjectStoreReadOnlyError(ObjectStoreError):
    """A write was asked of a log dir in object storage: klog reads log dirs there; ``klog snapshot``
    puts a log dir into a bucket."""


# --- settings -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class StorageOptions:
    """The ``fs.*`` options of a read or write, without the prefix: picklable, hashable, and shown
    with every secret hidden. Empty means: each SDK's environment variables and config files."""

    items: tuple[tuple[str, str], ...] = ()

    @classmethod
    def from_options(cls, options: Mapping[str, object]) -> StorageOptions:
        """The ``fs.``-prefixed entries of ``options`` (any case of the prefix)."""
        out = {k[len(OPTION_PREFIX):]: str(v) for k, v in options.items()
               if k.lower().startswith(OPTION_PREFIX) and v is not None}
        empty = [k for k in out if not k]
        if empty:
            raise InvalidOptionError(f"option {OPTION_PREFIX!r} names no setting; expected e.g. fs.region or "
                                     "fs.endpoint_override")
        return cls(tuple(sorted(out.items())))

    def as_dict(self) -> dict[str, str]:
        return dict(self.items)

    def secrets(self) -> list[str]:
        """The values an error or a log line must not show."""
        return [v for k, v in self.items if k not in _SHOWN and v]

    def redact(self, text: str) -> str:
        """``text`` with every secret value (and any in the environment) replaced by ``***``."""
        for s in sorted(self.secrets() + _env_secrets(), key=len, reverse=True):
            if len(s) >= 4:
                text = text.replace(s, "***")
        return text

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={v!r}" if k in _SHOWN else f"{k}=***" for k, v in self.items)
        return f"StorageOptions({shown})"

    __str__ = __repr__


def _env_secrets() -> list[str]:
    return [v for k in ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AZURE_STORAGE_ACCOUNT_KEY",
                        "AZURE_CLIENT_SECRET") if (v := os.environ.get(k))]


# --- filesystems ----------------------------------------------------------------------------------

def uri_scheme(path: str) -> str | None:
    """The scheme of a URI (``s3``), or None for a plain path."""
    m = _URI.match(path)
    return m.group(1).lower() if m else None


_FS_LOCK = threading.Lock()
_FILESYSTEMS: dict[tuple[str, str, StorageOptions], pafs.FileSystem] = {}


def filesystem(scheme: str, authority: str, options: StorageOptions) -> pafs.FileSystem:
    """The process's filesystem for ``scheme://authority`` and ``options``, built once (settings
    travel to executors; clients never do)."""
    key = (scheme, authority if _ARROW_SCHEMES.get(scheme) in ("hdfs", "abfs") else "", options)
    with _FS_LOCK:
        fs = _FILESYSTEMS.get(key)
        if fs is None:
            fs = _FILESYSTEMS[key] = _build(scheme, authority, options)
        return fs


def _typed(cls: Callable[..., Any], kwargs: Mapping[str, str], scheme: str) -> dict[str, Any]:
    """``kwargs`` (strings) converted to the types of ``cls``'s parameters; an unknown name is an
    :class:`InvalidOptionError` listing the known ones."""
    import inspect

    try:
        params = list(inspect.signature(cls).parameters)
    except (TypeError, ValueError):  # a Cython class: read the names off its docstring
        params = re.findall(r"(\w+)\s*=", (cls.__doc__ or "").split("\n", 1)[0])
    out: dict[str, Any] = {}
    for k, v in kwargs.items():
        if k not in params:
            known = ", ".join(OPTION_PREFIX + n for n in params if n not in ("self", "args", "kwargs"))
            raise InvalidOptionError(f"unknown option {OPTION_PREFIX}{k} for {scheme}:// log dirs; the filesystem "
                                     f"takes {known}")
        out[k] = _value(v)
    return out


def _value(v: str) -> Any:
    low = v.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    if re.fullmatch(r"-?\d+", low):
        return int(low)
    if re.fullmatch(r"-?\d+\.\d*", low):
        return float(low)
    return v


def _forget(scheme: str, authority: str, options: StorageOptions) -> None:
    key = (scheme, authority if _ARROW_SCHEMES.get(scheme) in ("hdfs", "abfs") else "", options)
    with _FS_LOCK:
        _FILESYSTEMS.pop(key, None)


def _build(scheme: str, authority: str, options: StorageOptions) -> pafs.FileSystem:
    import pyarrow.fs as pafs

    kind = _ARROW_SCHEMES.get(scheme)
    kwargs = options.as_dict()
    try:
        if kind == "s3":
            if "endpoint_override" not in kwargs:
                url = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
                if url:
                    parsed = urlparse(url)
                    kwargs["endpoint_override"] = parsed.netloc or parsed.path
                    kwargs.setdefault("scheme", parsed.scheme or "https")
            if "region" not in kwargs and (region := os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")):
                kwargs["region"] = region
            return pafs.S3FileSystem(**_typed(pafs.S3FileSystem, kwargs, scheme))
        if kind == "gcs":
            return pafs.GcsFileSystem(**_typed(pafs.GcsFileSystem, kwargs, scheme))
        if kind == "abfs":
            account = authority.split("@", 1)[1].split(".", 1)[0] if "@" in authority else None
            if account and "account_name" not in kwargs:
                kwargs["account_name"] = account
            return pafs.AzureFileSystem(**_typed(pafs.AzureFileSystem, kwargs, scheme))
        if kind == "hdfs":
            host, _, port = authority.partition(":")
            kwargs.setdefault("host", host or "default")
            if port:
                kwargs.setdefault("port", port)
            return pafs.HadoopFileSystem(**_typed(pafs.HadoopFileSystem, kwargs, scheme))
        try:
            import fsspec
        except ImportError:
            raise InvalidOptionError(f"{scheme}:// is not a scheme pyarrow serves (s3, gs, abfs, hdfs) and fsspec is "
                                     "not installed; pip install fsspec (and its package for the scheme)") from None
        try:
            fs = fsspec.filesystem(scheme, **{k: _value(v) for k, v in kwargs.items()})
        except (ImportError, ValueError) as exc:
            raise InvalidOptionError(f"no filesystem for {scheme}:// log dirs: {options.redact(str(exc))}") from None
        return pafs.PyFileSystem(pafs.FSSpecHandler(fs))
    except (OSError, TypeError, ValueError) as exc:
        if isinstance(exc, KlogError):
            raise
        raise ObjectStoreError(f"cannot set up the {scheme}:// filesystem with {options!r}: "
                               f"{options.redact(str(exc))}") from None


#: what an SDK's error code means for the user, and what to check: whole words of the SDK's own
#: text, the network first (a refused connection is never a refused credential)
_HINTS = tuple((re.compile(r"\b(?:" + "|".join(map(re.escape, needles)) + r")\b"), hint) for needles, hint in (
    (("NETWORK_CONNECTION", "Could not connect", "Couldn't connect", "Could not resolve", "Connection refused"),
     "the endpoint cannot be reached: check fs.endpoint_override/fs.scheme (or AWS_ENDPOINT_URL) and the network"),
    (("ACCESS_DENIED", "SIGNATURE_DOES_NOT_MATCH", "INVALID_ACCESS_KEY_ID", "AccessDenied", "403", "Unauthorized"),
     "the credentials were refused: check fs.access_key/fs.secret_key (or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, "
     "AWS_PROFILE) and that they may read this bucket"),
    (("NoSuchBucket", "NO_SUCH_BUCKET", "Bucket does not exist"), "the bucket does not exist"),
    (("RESOURCE_NOT_FOUND", "NoSuchKey", "NO_SUCH_KEY"),
     "the object was deleted since it was listed (retention, or a newer klog snapshot): rerun to read what is there now"),
))
#: a name the SDK quotes (``key 'logs' in bucket 't31403-20'``): the user's, never read as a code
_QUOTED_NAME = re.compile(r"'[^'\s]*'")


def _explained(message: str) -> str:
    """``message`` with the hint of the first SDK code in it (bucket and key names left out of the
    match: a bucket named ``t31403-20`` is not an HTTP 403)."""
    sdk = _QUOTED_NAME.sub("''", message)
    for pattern, hint in _HINTS:
        if pattern.search(sdk):
            return f"{hint} ({message})"
    return message


# --- paths ----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Store:
    scheme: str
    authority: str  # the bucket (s3, gs), container@account (abfs), host:port (hdfs)
    options: StorageOptions

    def fs(self) -> pafs.FileSystem:
        return filesystem(self.scheme, self.authority, self.options)

    def call(self, fn: Callable[[pafs.FileSystem], _T]) -> _T:
        """``fn(filesystem)``, once more with a new filesystem if it fails with an error that is not
        a missing file: a client's pooled connections may have outlived the server (a restart), and
        the SDK's own retries reuse them."""
        try:
            return fn(self.fs())
        except FileNotFoundError:
            raise
        except OSError:
            _forget(self.scheme, self.authority, self.options)
            return fn(self.fs())

    def key(self, parts: tuple[str, ...]) -> str:
        """The filesystem's path of an ObjectPath's parts (``('/', 'bucket', 'a')`` → ``bucket/a``)."""
        rest = "/".join(parts[1:])
        kind = _ARROW_SCHEMES.get(self.scheme)
        if kind in ("hdfs", "abfs"):  # the authority is the host/account, not the first path element
            return "/" + rest if kind == "hdfs" else rest
        return rest

    def uri(self, parts: tuple[str, ...]) -> str:
        rest = "/".join(parts[1:])
        kind = _ARROW_SCHEMES.get(self.scheme)
        if kind in ("hdfs", "abfs"):
            return f"{self.scheme}://{self.authority}/{rest}"
        return f"{self.scheme}://{rest}"


_CLASSES: dict[_Store, type[ObjectPath]] = {}


def _path_class(store: _Store) -> type[ObjectPath]:
    """One subclass per store, so that every path derived from one (``/``, ``parent``,
    ``with_name``) keeps it on every Python version."""
    with _FS_LOCK:
        cls = _CLASSES.get(store)
        if cls is None:
            cls = _CLASSES[store] = type("ObjectPath", (ObjectPath,), {"_store": store})
        return cls


def _object_path(store: _Store, posix: str) -> ObjectPath:
    return _path_class(store)(posix)


def _stat_result(size: int, mtime_ns: int | None, *, is_dir: bool) -> os.stat_result:
    mtime = (mtime_ns or 0) / 1e9
    identity = zlib.crc32(f"{size}:{mtime_ns}".encode()) + 1  # never 0
    mode = 0o40555 if is_dir else 0o100444
    return os.stat_result((mode, identity, 0, 1, 0, 0, size, mtime, mtime, mtime))


class ObjectPath(PosixPath):
    """A path in object storage (see the module doc): reads go to the store, writes are refused."""

    _store: ClassVar[_Store]
    _info: Any = None  # the pyarrow FileInfo this path was listed with (or looked up with)
    _listing: dict[str, Any] | None = None  # name -> FileInfo, once iterdir() listed this dir

    if sys.version_info >= (3, 12):
        def with_segments(self, *pathsegments: Any) -> ObjectPath:
            return type(self)(*pathsegments)

    # -- identity
    @property
    def store(self) -> _Store:
        return self._store

    @property
    def options(self) -> StorageOptions:
        return self._store.options

    @property
    def fs_key(self) -> str:
        """The path the filesystem knows (``bucket/prefix/orders-0``)."""
        return self._store.key(self.parts)

    def __str__(self) -> str:
        return self._store.uri(self.parts)

    def __repr__(self) -> str:
        return f"ObjectPath({str(self)!r})"

    def __fspath__(self) -> str:
        raise ObjectStoreReadOnlyError(f"{self} is in object storage: this operation needs a local path (klog reads "
                                       "log dirs in object storage; 'klog snapshot' copies one there)")

    def __reduce__(self) -> tuple[Any, ...]:
        return (_object_path, (self._store, "/" + "/".join(self.parts[1:])))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ObjectPath) and str(self) == str(other)

    def __hash__(self) -> int:
        return hash(str(self))

    def __truediv__(self, key: Any) -> ObjectPath:
        child: ObjectPath = super().__truediv__(key)
        if self._listing is not None and isinstance(key, str) and "/" not in key:
            child._info = self._listing.get(key, _MISSING)
        return child

    def as_posix(self) -> str:
        return str(self)

    def resolve(self, strict: bool = False) -> ObjectPath:
        return self

    def absolute(self) -> ObjectPath:
        return self

    # -- reading
    def _fail(self, doing: str, exc: BaseException) -> ObjectStoreError:
        return ObjectStoreError(f"{doing} {self} failed: {_explained(self.options.redact(str(exc)))}")

    def _file_info(self) -> Any:
        if self._info is None:
            try:
                self._info = self._store.call(lambda fs: fs.get_file_info(self.fs_key))
            except OSError as exc:
                raise self._fail("looking up", exc) from None
        return self._info

    def stat(self, *, follow_symlinks: bool = True) -> os.stat_result:
        import pyarrow.fs as pafs

        info = self._file_info()
        if info is _MISSING or info.type == pafs.FileType.NotFound:
            raise FileNotFoundError(2, "No such object", str(self))
        is_dir = info.type == pafs.FileType.Directory
        return _stat_result(0 if is_dir else info.size, info.mtime_ns, is_dir=is_dir)

    def lstat(self) -> os.stat_result:
        return self.stat()

    def exists(self, *, follow_symlinks: bool = True) -> bool:
        try:
            self.stat()
        except FileNotFoundError:
            return False
        return True

    def is_dir(self, *, follow_symlinks: bool = True) -> bool:
        try:
            return (self.stat().st_mode & 0o40000) != 0
        except FileNotFoundError:
            return False

    def is_file(self, *, follow_symlinks: bool = True) -> bool:
        try:
            return (self.stat().st_mode & 0o100000) != 0
        except FileNotFoundError:
            return False

    def is_symlink(self) -> bool:
        return False

    def iterdir(self) -> Generator[ObjectPath, None, None]:
        """The dir's children, listed once (a snapshot): their stat() needs no further request."""
        import pyarrow.fs as pafs

        try:
            selector = pafs.FileSelector(self.fs_key, allow_not_found=True)
            infos = self._store.call(lambda fs: fs.get_file_info(selector))
        except OSError as exc:
            raise self._fail("listing", exc) from None
        listing = {}
        for info in infos:
            name = info.path.rstrip("/").rsplit("/", 1)[-1]
            if name:
                listing[name] = info
        self._listing = listing
        for name in sorted(listing):
            yield self / name

    def glob(self, pattern: str, *args: Any, **kwargs: Any) -> Iterator[ObjectPath]:  # type: ignore[override]
        import fnmatch

        if "/" in pattern:
            raise ObjectStoreError(f"glob {pattern!r} in {self}: only patterns of one path element are supported")
        return (p for p in self.iterdir() if fnmatch.fnmatchcase(p.name, pattern))

    def open(self, mode: str = "r", buffering: int = -1, encoding: str | None = None,  # type: ignore[override]
             errors: str | None = None, newline: str | None = None) -> IO[Any]:
        if any(c in mode for c in "wax+"):
            raise self._read_only(f"open({mode!r})")
        raw = self.reader()
        if "b" in mode:
            return cast(IO[Any], raw)
        return io.TextIOWrapper(io.BufferedReader(raw), encoding=encoding or "utf-8", errors=errors, newline=newline)

    def reader(self, read_ahead: int = READ_AHEAD_BYTES) -> ObjectReader:
        """A seekable binary reader of the object with read-ahead."""
        st = self.stat()  # FileNotFoundError for a missing object, as open() gives
        if st.st_mode & 0o40000:
            raise IsADirectoryError(21, "Is a directory", str(self))
        try:
            raf = self._store.call(lambda fs: fs.open_input_file(self.fs_key))
        except FileNotFoundError:
            raise
        except OSError as exc:
            raise self._fail("opening", exc) from None
        # the object as opened now: one replaced since it was listed (a newer snapshot's checkpoint) is
        # read whole as it is, never cut at the listed size
        return ObjectReader(self, raf, raf.size(), read_ahead)

    def read_bytes(self) -> bytes:
        with self.reader() as f:
            return f.read()

    def read_text(self, encoding: str | None = None, errors: str | None = None) -> str:
        return self.read_bytes().decode(encoding or "utf-8", errors or "strict")

    # -- writing: refused
    def _read_only(self, what: str) -> ObjectStoreReadOnlyError:
        return ObjectStoreReadOnlyError(f"cannot {what} {self}: klog does not write log dirs in object storage (it "
                                        "reads them; 'klog snapshot SRC DST' copies a log dir there)")

    def unlink(self, missing_ok: bool = False) -> None:
        raise self._read_only("delete")

    def mkdir(self, mode: int = 0o777, parents: bool = False, exist_ok: bool = False) -> None:
        raise self._read_only("create the directory")

    def rename(self, target: Any) -> ObjectPath:
        raise self._read_only("rename")

    def replace(self, target: Any) -> ObjectPath:
        raise self._read_only("replace")

    def touch(self, mode: int = 0o666, exist_ok: bool = True) -> None:
        raise self._read_only("create")

    def write_bytes(self, data: Any) -> int:
        raise self._read_only("write")

    def write_text(self, data: str, encoding: str | None = None, errors: str | None = None,
                   newline: str | None = None) -> int:
        raise self._read_only("write")

    def rmdir(self) -> None:
        raise self._read_only("delete the directory")


_MISSING: Any = object()


class ObjectReader(io.RawIOBase):
    """A seekable reader of one object: each read fetches at least ``read_ahead`` bytes, and the
    next ``BLOCKS_AHEAD`` blocks are fetched in the background while the caller works on this one
    (two in flight keep a sequential scan from waiting on each request's latency)."""

    BLOCKS_AHEAD: ClassVar[int] = 2
    _POOL: ClassVar[ThreadPoolExecutor | None] = None
    _POOL_PID: ClassVar[int] = 0

    def __init__(self, path: ObjectPath, raf: Any, size: int, read_ahead: int) -> None:
        super().__init__()
        self._path = path
        self._raf = raf
        self._size = size
        self._block = max(1, read_ahead)
        self._pos = 0
        self._cur: tuple[int, bytes] = (0, b"")
        self._ahead: list[tuple[int, Future[bytes]]] = []  # blocks requested, in order

    @classmethod
    def _pool(cls) -> ThreadPoolExecutor:
        if cls._POOL is None or cls._POOL_PID != os.getpid():  # a forked worker starts its own
            cls._POOL = ThreadPoolExecutor(max_workers=4, thread_name_prefix="klog-read-ahead")
            cls._POOL_PID = os.getpid()
        return cls._POOL

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, pos: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        self._pos = max(0, base + pos)
        return self._pos

    def _fetch(self, start: int, n: int) -> bytes:
        try:
            try:
                return bytes(self._raf.read_at(n, start))
            except OSError:  # once more through a new client (see _Store.call)
                store = self._path.store
                _forget(store.scheme, store.authority, store.options)
                self._raf = store.fs().open_input_file(self._path.fs_key)
                return bytes(self._raf.read_at(n, start))
        except OSError as exc:
            raise ObjectStoreError(f"reading {n} bytes at position {start} of {self._path} failed: "
                                   f"{_explained(self._path.options.redact(str(exc)))}") from None

    def _block_at(self, pos: int, want: int) -> tuple[int, bytes]:
        start, data = self._cur
        if start <= pos < start + len(data):
            return self._cur
        while self._ahead:
            nstart, fut = self._ahead.pop(0)
            data = fut.result()
            if nstart <= pos < nstart + len(data):
                self._cur = (nstart, data)
                return self._cur
        n = min(max(want, self._block), self._size - pos)
        self._cur = (pos, self._fetch(pos, n))
        return self._cur

    def readinto(self, b: Any) -> int:
        view = memoryview(b).cast("B")
        if self._pos >= self._size or not len(view):
            return 0
        want = min(len(view), self._size - self._pos)
        got = 0
        while got < want:
            start, data = self._block_at(self._pos + got, want - got)
            off = self._pos + got - start
            k = min(len(data) - off, want - got)
            view[got:got + k] = memoryview(data)[off:off + k]  # one copy, into the caller's buffer
            got += k
            end = start + len(data) if not self._ahead else self._ahead[-1][0] + self._block
            while len(self._ahead) < self.BLOCKS_AHEAD and end < self._size:  # the next blocks fetched while this one is used
                n = min(self._block, self._size - end)
                self._ahead.append((end, self._pool().submit(self._fetch, end, n)))
                end += n
        self._pos += got
        return got

    def readall(self) -> bytes:
        out = bytearray(max(0, self._size - self._pos))
        n = self.readinto(out)
        return bytes(out[:n])

    def close(self) -> None:
        for _, fut in self._ahead:
            fut.cancel()
        self._ahead = []
        self._cur = (0, b"")
        try:
            self._raf.close()
        except OSError:
            pass  # closing a read-only handle: nothing was written that could be lost
        super().close()


# --- entry points ---------------------------------------------------------------------------------

def as_path(path: str | os.PathLike[str], options: StorageOptions | None = None) -> Path:
    """A local :class:`Path` for a plain path or ``file://`` URI; an :class:`ObjectPath` (reads
    through ``options``, default: the environment) for any other URI; a path unchanged."""
    if isinstance(path, Path):
        return path
    s = os.fspath(path)
    scheme = uri_scheme(s)
    if scheme is None:
        return Path(s)
    parsed = urlparse(s)
    refuse_credentials(s)
    if scheme == "file":
        if parsed.netloc not in ("", "localhost"):
            raise InvalidOptionError(f"{s}: a file:// URI names a local path (file:///data/kafka); found host "
                                     f"{parsed.netloc!r}")
        return Path(unquote(parsed.path))
    store_opts = options or StorageOptions()
    kind = _ARROW_SCHEMES.get(scheme)
    if not parsed.netloc and kind != "hdfs":
        raise InvalidOptionError(f"{s}: expected {scheme}://<bucket>/<prefix> (no bucket given)")
    if kind in ("hdfs", "abfs"):
        store = _Store(scheme, parsed.netloc, store_opts)
        posix = "/" + parsed.path.strip("/")
    else:
        store = _Store(scheme, "", store_opts)
        posix = "/" + parsed.netloc + ("/" + parsed.path.strip("/") if parsed.path.strip("/") else "")
    return _object_path(store, posix)


#: where each scheme's SDK takes its credentials from instead of the URI
_CREDENTIALS_FROM = {
    "s3": "the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_PROFILE) or the options "
          "fs.access_key and fs.secret_key",
    "gcs": "the environment (GOOGLE_APPLICATION_CREDENTIALS) or the option fs.access_token",
    "abfs": "the environment (AZURE_STORAGE_ACCOUNT_KEY, AZURE_CLIENT_SECRET, ...) or the options fs.account_name and "
            "fs.account_key",
}


def refuse_credentials(uri: str) -> None:
    """A URI with user info holding a secret (``s3://KEY:SECRET@bucket``) is refused before
    anything uses it, and the message shows it redacted: a secret in a path ends up in shell
    histories, Spark's plans and logs. ``hdfs://user@namenode`` (a user name) and
    ``abfs://container@account.dfs.core.windows.net`` (a container) hold no secret and stay allowed."""
    scheme = uri_scheme(uri)
    if scheme is None:
        return
    netloc = urlparse(uri).netloc
    if "@" not in netloc:
        return
    userinfo = netloc.rsplit("@", 1)[0]
    kind = _ARROW_SCHEMES.get(scheme, scheme)
    if scheme in USER_NAME_SCHEMES and ":" not in userinfo:
        return  # HDFS's user name, Azure's container: not a secret
    source = _CREDENTIALS_FROM.get(kind, "the environment or the fs.* options (fs.key, fs.secret, ...)")
    raise InvalidOptionError(f"{redact_uris(uri)}: credentials in a URI are refused (they would be shown in logs and "
                             f"errors); give the path without them ({scheme}://<bucket>/<prefix>) and the credentials "
                             f"through {source}")


def writable_dir(path: str | os.PathLike[str]) -> Path:
    """The local directory a write goes to; a URI in object storage is refused here, before any
    work starts. klog's writer keeps a log dir consistent with a lock, renames and fsyncs, which
    object stores do not have: a log dir reaches a bucket through ``klog snapshot``. Local disks,
    NFS, and HDFS mounted through its NFS gateway or FUSE are local paths."""
    p = as_path(path)
    if isinstance(p, ObjectPath):
        raise ObjectStoreReadOnlyError(
            f"cannot write to {p}: klog writes log dirs on a local or mounted file system only (its commit "
            "needs a lock, atomic renames and fsync, which object stores lack). Write to a local dir, then "
            "copy it with 'klog snapshot LOCAL_DIR " + str(p) + "'")
    return p


def is_object_path(path: object) -> bool:
    return isinstance(path, ObjectPath)


def list_names(directory: Path) -> list[str]:
    """The names in a directory (``os.listdir``), local or in object storage."""
    if isinstance(directory, ObjectPath):
        return [p.name for p in directory.iterdir()]
    return os.listdir(directory)

