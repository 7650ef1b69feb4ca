"""Whose commit it is: the Spark driver a batch write's commit belongs to.

PySpark runs a data source writer's ``commit`` in a Python worker that the driver's JVM starts
through ``pyspark.daemon``, and the daemon puts itself in a process group of its own: killing the
driver (its Python process and JVM, one process group) leaves the worker running, and it would
finish the commit of a job whose driver never told its user the job succeeded. The user's rerun
then writes the records twice. So the commit asks, before it decides, whether the JVM it was
started from still lives (:func:`driver_liveness`), and rolls back if not
(:func:`storage_core.log.staged.commit_job`'s ``owner_alive``).

The JVM is found by walking up the worker's parents in ``/proc`` (Linux) to the first ``java``
process; it is identified by its PID and start time, so a reused PID is not mistaken for it. A
chain that reaches PID 1 without one means the JVM died and the daemon was re-parented. Where
``/proc`` is missing (not Linux) there is nothing to check, and the commit goes on as before.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

__all__ = ["driver_liveness"]

_PROC = Path("/proc")
_MAX_DEPTH = 16


def _stat(pid: int) -> tuple[str, int, int] | None:
    """``(comm, ppid, starttime)`` of ``/proc/<pid>/stat``, None when the process is gone."""
    try:
        raw = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    comm = raw[raw.find("(") + 1: raw.rfind(")")]
    rest = raw[raw.rfind(")") + 2:].split()  # state ppid pgrp ... (fields 3.. of proc(5))
    return comm, int(rest[1]), int(rest[19])


def _driver_jvm() -> tuple[int, int] | None:
    """``(pid, starttime)`` of the nearest ``java`` ancestor; ``(-1, -1)`` when the chain of
    parents reaches PID 1 without one (the JVM is gone); None where ``/proc`` cannot tell."""
    pid = os.getppid()
    for _ in range(_MAX_DEPTH):
        if pid <= 1:
            return (-1, -1)
        st = _stat(pid)
        if st is None:
            return None
        comm, ppid, start = st
        if comm == "java":
            return (pid, start)
        pid = ppid
    return None


def driver_liveness() -> Callable[[], bool] | None:
    """A check that the driver JVM this process was started from still runs, or None where it
    cannot be told (no ``/proc``)."""
    if not (_PROC / "self" / "stat").exists():
        return None
    found = _driver_jvm()
    if found is None:
        return None
    pid, start = found

    def alive() -> bool:
        if pid < 0:
            return False
        st = _stat(pid)
        return st is not None and st[2] == start

    return alive
