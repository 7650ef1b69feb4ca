"""How many files klog may need open at once, and the check of the OS's limit against it.

Every command holds the files of a bounded number of partitions at a time, whatever the partition
count: a writable open (``recover``, ``retention``, ``compact``) holds one partition's segment,
indexes and ``.lock`` (about 4-8 descriptors), readers one segment per piece they decode, plus
the interpreter's own (standard streams, shared libraries, pyarrow's and the object-store
client's pools). :data:`MIN_OPEN_FILES` is that with room to spare; a dir of 2,000 partitions
recovers and compacts under ``ulimit -n 256`` (tests/test_wrong_inputs_table.py).

:func:`ensure_open_files` is the one place the OS limit is checked. Below the minimum, the soft
limit is raised to it when the hard limit allows (as the JVM's ``-XX:+MaxFDLimit``, on by
default, raises it for a broker); otherwise it is a :class:`~storage_core.errors.StorageError`
(``errno`` ``EMFILE``) before any work starts, naming both limits and how to raise them.
Imports only :mod:`storage_core.errors`.
"""

from __future__ import annotations

import errno

from storage_core.errors import StorageError

__all__ = ["MIN_OPEN_FILES", "ensure_open_files"]

#: File descriptors klog needs free to run any command.
MIN_OPEN_FILES = 64


def ensure_open_files(minimum: int = MIN_OPEN_FILES) -> int:
    """The soft limit on open files after making sure it is at least ``minimum``; a
    :class:`StorageError` when the hard limit is lower. Where the platform has no such limit
    (no :mod:`resource` module), ``minimum``."""
    try:
        import resource
    except ImportError:  # Windows: no RLIMIT_NOFILE to check
        return minimum
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= minimum:
        return minimum if soft == resource.RLIM_INFINITY else soft
    if hard == resource.RLIM_INFINITY or hard >= minimum:
        resource.setrlimit(resource.RLIMIT_NOFILE, (minimum, hard))
        return minimum
    raise StorageError(f"the OS allows this process {soft} open files (ulimit -n; hard limit {hard}), and klog "
                       f"needs at least {minimum}: raise the limit (ulimit -n {minimum * 16}) and rerun",
                       errno=errno.EMFILE)

