"""The log dir's lock: ``<log dir>/.lock``, locked the way a Kafka broker locks it, so that klog
never writes a dir a running broker (or another klog writer) owns, and a broker does not start on
a dir klog is writing. Every writer takes it through :class:`LogDirLock`: a writable
:class:`~storage_core.log.manager.LogManager` fails at once when it is held, a commit waits for it.
Readers take no lock and never wait for one.

**What a broker takes.** ``LogManager.lockLogDirs`` calls Kafka's ``FileLock.tryLock``, that is
``FileChannel.tryLock()``: position 0, size ``Long.MAX_VALUE``, exclusive. OpenJDK makes that
``fcntl(F_SETLK)`` of an ``F_WRLCK`` from byte 0 to the end of the file (``l_len`` 0): a classic
POSIX record lock, owned by the JVM's process. On a local file system Linux keeps ``flock`` locks
and POSIX locks apart, so a ``flock`` (what klog took before) neither sees a broker's lock nor
keeps a broker out.

**What klog takes**, both on one open file of ``.lock``:

- the same POSIX lock (whole file, exclusive), as an *open file description* lock
  (``F_OFD_SETLK``, Linux 3.15+). It conflicts with a broker's classic lock both ways. Unlike a
  classic lock it belongs to the open file, not the process: a second :class:`LogDirLock` in the
  same process is refused too, and code closing some other descriptor of ``.lock`` does not drop it;
- an exclusive ``flock``, which keeps out klog versions that take only that.

Both end when the file is closed: :meth:`release`, or the process ending however it ends. A child
forked while a lock is held shares it until it too closes the file or exits.

Where OFD locks do not exist (systems other than Linux, or a kernel older than 3.15) the POSIX
lock is a classic one. A process loses its classic locks on a file when it closes *any*
descriptor of that file, so then a second lock of a dir this process holds is refused before the
file is opened.

A broker's shutdown unlocks ``.lock``, then deletes it (``FileLock.destroy``). A writer locking
the file just before it is deleted would hold a file no longer at the path while the next broker
locks a new one there. So each attempt opens ``.lock`` anew and, once locked, checks that the path
still names the file it locked; a writer that waited checks again :data:`SETTLE_S` later (the
broker deletes right after it unlocks); either way it starts over if not.

When the lock is held the error names the holder's PID where the system tells it:
``F_OFD_GETLK`` gives the owner's PID of a classic lock (a broker), and -1 for an OFD lock; then
``/proc/locks`` gives the PID that took the ``flock`` (another klog writer).

On NFS, Linux takes POSIX locks (classic or OFD) at the server (NLM for v3, the protocol itself
for v4), so a broker on another host is kept out as well; ``flock`` is emulated there as a
whole-file POSIX lock (since Linux 2.6.12, unless mounted ``local_lock=flock`` or ``all``), which,
taken on the same open file as klog's OFD lock, has the same owner (the open file) and does not
conflict with it. The locks are advisory: they keep out only processes that take them (brokers,
klog writers).
"""

from __future__ import annotations

import errno
import fcntl
import os
import struct
import threading
import time
from pathlib import Path

from storage_core.errors import LogDirLockedError
from storage_core.files import LOCK_FILE

__all__ = ["LogDirLock", "check_free_to_stage", "is_held"]

#: Linux's open-file-description lock commands; None where the system has none (classic locks then).
F_OFD_SETLK: int | None = getattr(fcntl, "F_OFD_SETLK", None)
F_OFD_GETLK: int | None = getattr(fcntl, "F_OFD_GETLK", None)
#: How long a writer that waited for the lock waits again, once it has it, to see that ``.lock`` stays
#: the file it locked (a broker's shutdown unlocks, then deletes it).
SETTLE_S = 0.05
#: ``struct flock``: l_type, l_whence, l_start, l_len, l_pid, padded to its alignment.
_FLOCK = "@hhqqi0q"

#: Dirs this process holds with a classic POSIX lock, by (st_dev, st_ino) of their ``.lock``.
_held_here: set[tuple[int, int]] = set()
_here = threading.RLock()  # reentrant: a dropped lock's __del__ may run while this thread holds it


def _whole_file(l_type: int) -> bytes:
    """``struct flock`` of ``l_type`` from byte 0 to the end of the file, as ``tryLock()`` asks."""
    return struct.pack(_FLOCK, l_type, os.SEEK_SET, 0, 0, 0)


def _identity(st: os.stat_result) -> tuple[int, int]:
    return st.st_dev, st.st_ino


def _identity_at(path: Path) -> tuple[int, int] | None:
    try:
        return _identity(os.stat(path))
    except FileNotFoundError:
        return None


class LogDirLock:
    """``<log dir>/.lock``, held from construction until :meth:`release` (or the end of a ``with``).

    ``timeout_s`` is how long to wait for another holder to let go: 0 fails at once. Either way
    a lock that stays held raises :class:`LogDirLockedError`."""

    def __init__(self, log_dir: str | os.PathLike[str], timeout_s: float = 0) -> None:
        self.log_dir = Path(log_dir)
        self.path = self.log_dir / LOCK_FILE
        self._fd: int | None = None
        self._file_id: tuple[int, int] | None = None  # of the file locked
        self._classic = False  # a classic lock, its identity in _held_here
        deadline = time.monotonic() + timeout_s
        waited = False
        while True:
            with _here:
                held = self._try()
            if held and waited:  # its holder just let go: if a broker, it deletes .lock right after
                time.sleep(SETTLE_S)
                if _identity_at(self.path) != self._file_id:
                    self.release()
                    continue
            if held:
                return
            if held is False:
                if time.monotonic() >= deadline:
                    raise self._held(timeout_s)
                waited = True
                time.sleep(0.05)

    def _try(self) -> bool | None:
        """One attempt: True when locked, False when another holder has it, None when ``.lock``
        was replaced meanwhile (try again at once). The caller holds ``_here``."""
        ofd = F_OFD_SETLK
        if ofd is None and _identity_at(self.path) in _held_here:
            return False  # opening (and closing) the file would drop this process's classic lock
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            locked = _lock(fd, ofd)
            mine = _identity(os.fstat(fd))
            if locked and _identity_at(self.path) != mine:  # deleted (a broker's shutdown) or replaced
                locked = None
        except BaseException:
            os.close(fd)
            raise
        if not locked:
            os.close(fd)  # ends whatever this attempt took
            return locked
        self._fd, self._file_id = fd, mine
        if ofd is None:
            self._classic = True
            _held_here.add(mine)
        return True

    def _held(self, timeout_s: float) -> LogDirLockedError:
        return _held_error(self.log_dir, timeout_s)

    def release(self) -> None:
        with _here:
            if self._fd is not None:
                os.close(self._fd)  # ends the POSIX lock and the flock
                self._fd = None
            if self._classic and self._file_id is not None:
                _held_here.discard(self._file_id)
                self._classic = False

    def __del__(self) -> None:
        if getattr(self, "_fd", None) is not None:  # dropped without release(): let go, as a closed file did
            self.release()

    def __enter__(self) -> LogDirLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _holder(path: Path) -> int | None:
    """The PID holding the lock file ``path`` where the system tells it, else None."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    asked = _posix_lock_of(path)
    if asked is None:
        return None
    l_type, pid = asked
    if l_type != fcntl.F_UNLCK and pid > 0:
        return pid  # a classic lock's owner: a broker (or any fcntl locker), or this process's own
    return _flock_holder(st)


def _who(log_dir: Path) -> str:
    """The holder of ``log_dir``'s lock, as the refusals name it."""
    pid = _holder(log_dir / LOCK_FILE)
    if pid is None:
        return "another process (a Kafka broker or another klog writer)"
    if pid == os.getpid():
        return f"process {pid} (this process: another of its writers holds the dir)"
    return f"process {pid} (a Kafka broker or another klog writer)"


def _held_error(log_dir: Path, timeout_s: float) -> LogDirLockedError:
    if timeout_s <= 0:
        return LogDirLockedError(f"log dir {log_dir} is locked by {_who(log_dir)}; wait for it to finish or open "
                                 "the dir read-only")
    return LogDirLockedError(f"log dir {log_dir} stayed locked by {_who(log_dir)} for {timeout_s:g} s")


def check_free_to_stage(log_dir: str | os.PathLike[str], timeout_s: float | None) -> None:
    """Refuse, before a staged write (:mod:`storage_core.log.staged`) creates anything in
    ``log_dir`` (a partition dir, a staging dir), a dir whose commit would be refused: raises
    :class:`LogDirLockedError`, naming the holder, that nothing was written.

    Staging takes no lock (many tasks stage into one dir at once; only the commit locks), so
    without this a write into a running broker's dir would fill the broker's partition dirs with
    ``.klog-staging-*`` dirs until its commit gave up ``lockTimeoutMs`` later.

    - A **classic** POSIX lock of another process is what a broker holds (``FileChannel.tryLock``,
      see the module's doc) and holds for as long as it runs: refused at once.
    - klog's own lock (an open-file-description lock, PID -1 to ``F_OFD_GETLK``; or one this
      process holds) is another klog writer's: a commit, a ``klog recover``, which end. The
      driver of a write (``timeout_s`` a number) waits up to ``timeout_s`` for it, as its commit
      would; a task (``timeout_s`` None) goes on staging, which that writer neither sees nor
      touches, and the commit waits for the lock.

    Where the system has no OFD locks, klog writers take classic locks too, and another process's
    klog writer is refused at once like a broker. A dir without ``.lock`` is free."""
    d = Path(log_dir)
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        asked = _posix_lock_of(d / LOCK_FILE)
        if asked is None or asked[0] == fcntl.F_UNLCK:
            return
        pid = asked[1]
        if pid > 0 and pid != os.getpid():  # a broker's lock
            raise LogDirLockedError(f"log dir {d} is locked by {_who(d)}; nothing was written (a running broker's "
                                    "dir is written by the broker alone: produce to it, or write to a copy of the "
                                    "dir)")
        if deadline is None:
            return
        if time.monotonic() >= deadline:
            raise LogDirLockedError(f"log dir {d} stayed locked by {_who(d)} for {timeout_s:g} s; nothing was "
                                    "written")
        time.sleep(0.05)


def is_held(log_dir: str | os.PathLike[str]) -> bool:
    """Whether a process holds ``<log dir>/.lock`` now: a running broker (or a klog writer) is
    appending to the dir. A reader's question, asked without locking: a dir that is held is being
    written by its owner, which validated what it wrote, so a read may take its files as they are
    (see :func:`storage_core.log.manager.open_log_read_only`). Only the POSIX lock is asked about (a
    broker's, and klog's); a dir without ``.lock`` is not held."""
    asked = _posix_lock_of(Path(log_dir) / LOCK_FILE)
    return asked is not None and asked[0] != fcntl.F_UNLCK


def _posix_lock_of(path: Path) -> tuple[int, int] | None:
    """(l_type, pid) of the POSIX lock that conflicts with a whole-file write lock of ``path``:
    ``F_UNLCK`` when there is none; a classic lock's owner PID (this process's own for a lock it
    holds), -1 for an open-file-description lock. None when ``path`` cannot be opened (no such file)."""
    with _here:
        try:
            st = os.stat(path)
        except OSError:
            return None
        if _identity(st) in _held_here:
            return fcntl.F_WRLCK, os.getpid()
        try:  # opening is safe: this process holds no classic lock of this file
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            return None
        try:
            ask = fcntl.F_GETLK if F_OFD_SETLK is None or F_OFD_GETLK is None else F_OFD_GETLK
            answer = fcntl.fcntl(fd, ask, _whole_file(fcntl.F_WRLCK))
        except OSError:
            return None
        finally:
            os.close(fd)
    l_type, _, _, _, pid = struct.unpack(_FLOCK, answer)
    return int(l_type), int(pid)


def _lock(fd: int, ofd: int | None) -> bool | None:
    """The POSIX lock (OFD with the command ``ofd``, else classic) and the ``flock`` of ``fd``:
    True when both are taken, False when another holder has one, None to try again."""
    try:
        fcntl.fcntl(fd, fcntl.F_SETLK if ofd is None else ofd, _whole_file(fcntl.F_WRLCK))
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EAGAIN, errno.EACCES):
            return False
        if exc.errno == errno.EINVAL and ofd is not None:  # a kernel before 3.15: classic locks from now on
            global F_OFD_SETLK, F_OFD_GETLK
            F_OFD_SETLK = F_OFD_GETLK = None
            return None
        raise
    return True


def _flock_holder(st: os.stat_result) -> int | None:
    """The PID that took a ``flock`` of the file ``st`` (a klog writer), from ``/proc/locks``."""
    where = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    try:
        with open("/proc/locks", encoding="ascii", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:  # "1: FLOCK  ADVISORY  WRITE 1234 fd:00:5678 0 EOF"; "1: -> ..." is a waiter
        fields = line.split()
        if len(fields) >= 6 and fields[1] != "->" and fields[5] == where and fields[4].isdigit():
            pid = int(fields[4])
            if pid > 0:
                return pid
    return None
