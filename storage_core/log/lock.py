"""The log dir's lock: an exclusive ``flock`` on ``<log dir>/.lock``, the one a Kafka broker holds
too (``LogManager.lockLogDirs``), so that klog never writes a dir a running broker (or another
klog writer) owns. Every writer takes it through :class:`LogDirLock`: a writable
:class:`~storage_core.log.manager.LogManager` fails at once when it is held, a commit waits for it.
Readers take no lock.
"""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

from storage_core.errors import LogDirLockedError
from storage_core.files import LOCK_FILE

__all__ = ["LogDirLock"]


class LogDirLock:
    """``<log dir>/.lock``, held from construction until :meth:`release` (or the end of a ``with``).

    ``timeout_s`` is how long to wait for another holder to let go: 0 fails at once. Either way
    a lock that stays held raises :class:`LogDirLockedError`."""

    def __init__(self, log_dir: str | os.PathLike[str], timeout_s: float = 0) -> None:
        self.log_dir = Path(log_dir)
        self.path = self.log_dir / LOCK_FILE
        self._file = open(self.path, "a+b")  # noqa: SIM115 - held until release()
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(self._file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    self._file.close()
                    raise self._held(timeout_s) from None
                time.sleep(0.05)

    def _held(self, timeout_s: float) -> LogDirLockedError:
        if timeout_s <= 0:
            return LogDirLockedError(f"log dir {self.log_dir} is locked by another process (a Kafka broker or another "
                                     "klog writer); wait for it to finish or open the dir read-only")
        return LogDirLockedError(f"log dir {self.log_dir} stayed locked by another writer (a Kafka broker or another "
                                 f"klog job) for {timeout_s:.0f} s")

    def release(self) -> None:
        self._file.close()

    def __enter__(self) -> LogDirLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
