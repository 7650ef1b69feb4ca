"""The collection PySpark runs after every task, kept to what the task made.

A PySpark worker that is reused (``spark.python.worker.reuse``, Spark's default) runs
``gc.collect()`` after each task it serves (``pyspark/daemon.py``). That is a full collection: it
walks every object the process tracks, whatever the task did. A worker that has run a klog task
holds about 93,000 of them (pyspark's, pyarrow's, numpy's and klog's modules, and pandas', which
the worker imports after its first task), and the walk took 30-90 ms per task on the 2-core
development machine: about 0.18 CPU s of a 4-task scan of 4M records whose workers spend 0.6 s in
all, more than its CRC checks, and most of a 40,000-row read's own cost.

:func:`task_started`, called where each of klog's tasks begins (a batch or micro-batch read, a
batch or streaming write), moves the objects alive at that moment (the worker's modules, classes
and functions, and its state between tasks) into the permanent generation with ``gc.freeze()``,
which collections skip: the collection after the task walks only what was made since. Every
:data:`FULL_COLLECTION_EVERY`-th task unfreezes them instead, so the collection after that task is
a full one again: an object frozen while alive that later became garbage in a reference cycle
(none did in the benchmark's runs: a full collection after a frozen stretch found nothing) is
freed at most that many tasks later, never kept for the life of the worker.

Outside a PySpark worker (the Python API, a test, the driver of a notebook) it does nothing: the
caller's process and its collector are the caller's.
"""

from __future__ import annotations

import gc

from .errors import in_spark_worker

__all__ = ["FULL_COLLECTION_EVERY", "TaskCollections", "task_started"]

#: Every this many of klog's tasks in one worker, the collection after the task is a full one.
FULL_COLLECTION_EVERY = 64


class TaskCollections:
    """The rule above, for the tasks one process runs: :meth:`started` freezes, or on every
    ``every``-th task unfreezes."""

    def __init__(self, every: int = FULL_COLLECTION_EVERY) -> None:
        if every < 1:
            raise ValueError(f"every must be at least 1, got {every}")
        self.every = every
        self.tasks = 0

    def started(self) -> None:
        self.tasks += 1
        if self.tasks % self.every == 0:
            gc.unfreeze()
        else:
            gc.freeze()


_PROCESS = TaskCollections()


def task_started() -> None:
    """Mark the start of one of klog's tasks (see the module docstring); nothing outside a PySpark
    worker."""
    if in_spark_worker():
        _PROCESS.started()
