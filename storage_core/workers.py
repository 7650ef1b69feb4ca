"""How many threads the paths without Spark use, and the one way they run work on them.

``read_arrow``, ``klog export`` (pieces decoded at once), ``klog compact``, ``klog verify`` and
``klog recover`` (partitions at once) size their pools by one rule, :func:`pool_size`: what the
caller asked for (``maxThreads``, ``--threads``, ``--workers``), else the ``KLOG_THREADS``
environment variable, else the CPUs this process may run on, at most :data:`DEFAULT_MAX`; never
more than there are items to work on. One thread means the serial code, with no thread started.
(Spark parallelises by its tasks and uses none of this.)

Work runs through :func:`stream_in_order`: every result in exactly the order a serial loop gives
it, with a sliding window of items in progress and a bounded queue of results per item, so
memory stays bounded whatever the item count; an item's exception is raised where the serial
loop would have raised it (after the results before it); and when the consumer stops (an error,
the generator closed or dropped) the workers are told to stop and joined before it returns:
no thread outlives the call.
"""

from __future__ import annotations

import os
import queue
import threading
from collections import deque
from collections.abc import Callable, Generator, Iterable, Sized
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

from storage_core.errors import InvalidOptionError

__all__ = ["DEFAULT_MAX", "THREADS_ENV", "available_cpus", "ordered_map", "pool_size", "stream_in_order"]

#: The default pool is at most this many threads, however many CPUs the machine has: past that the
#: disk, not the CPU, is what a read or a compaction waits for, and each thread holds buffers.
DEFAULT_MAX = 8
#: The environment variable that sets the default pool size (an explicit option or flag wins).
THREADS_ENV = "KLOG_THREADS"

T = TypeVar("T")
R = TypeVar("R")


def available_cpus() -> int:
    """The CPUs this process may run on (its affinity where the system tells it)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _positive(value: object, what: str) -> int:
    try:
        n = int(str(value).strip())
    except ValueError:
        raise InvalidOptionError(f"{what}={value!r} is not an integer; expected a number of threads >= 1") from None
    if n < 1:
        raise InvalidOptionError(f"{what}={value!r}: expected a number of threads >= 1")
    return n


def pool_size(requested: int | None = None, items: int | None = None) -> int:
    """The number of threads for ``items`` pieces of work (None: unknown): ``requested`` if given,
    else ``KLOG_THREADS`` if set, else the available CPUs up to :data:`DEFAULT_MAX`; at most
    ``items``, at least 1. A request below 1 is an :class:`InvalidOptionError`."""
    if requested is not None:
        n = _positive(requested, "threads")
    elif os.environ.get(THREADS_ENV, "").strip():
        n = _positive(os.environ[THREADS_ENV], THREADS_ENV)
    else:
        n = min(available_cpus(), DEFAULT_MAX)
    if items is not None:
        n = min(n, items)
    return max(1, n)


def sized(items: Iterable[object]) -> int | None:
    """How many ``items`` there are, if that is known without consuming them."""
    return len(items) if isinstance(items, Sized) else None


_END = object()


class _Failed:
    __slots__ = ("exc",)

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


def _put(q: queue.Queue[object], item: object, stop: threading.Event) -> bool:
    """Put ``item`` on ``q``, waiting for room; False (not put) once ``stop`` is set."""
    while not stop.is_set():
        try:
            q.put(item, timeout=0.05)
            return True
        except queue.Full:
            continue
    return False


def stream_in_order(items: Iterable[T], produce: Callable[[T], Iterable[R]], workers: int, *, depth: int = 2,
                    window: int | None = None, done: Callable[[T], None] | None = None) -> Generator[R, None, None]:
    """Every result of ``produce(item)`` for each of ``items`` in turn: what
    ``for item in items: yield from produce(item); done(item)`` gives, in that order, with up to
    ``workers`` items produced at once on threads.

    At most ``window`` items (default ``workers``) are in progress, each at most ``depth``
    results ahead of the consumer. ``done(item)`` is called on the consumer's thread, in the
    items' order, once every result of the item was consumed. An exception of ``produce`` is
    raised when the consumer reaches it, after the item's results before it. Closing the
    generator (or an exception) stops the workers at their next result and joins them.
    ``workers <= 1`` is the serial loop itself: no thread is started.
    """
    if workers <= 1:
        for item in items:
            yield from produce(item)
            if done is not None:
                done(item)
        return
    limit = max(window or workers, workers)
    stop = threading.Event()
    pending: deque[tuple[T, queue.Queue[object], Future[None]]] = deque()
    source = iter(items)

    def run(item: T, q: queue.Queue[object]) -> None:
        try:
            for result in produce(item):
                if not _put(q, result, stop):
                    return
            _put(q, _END, stop)
        except BaseException as exc:  # noqa: BLE001 - raised on the consumer's thread, where the serial loop raises it
            _put(q, _Failed(exc), stop)

    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="klog-worker")
    try:
        def fill() -> None:
            while len(pending) < limit and not stop.is_set():
                item = next(source, _END)
                if item is _END:
                    return
                q: queue.Queue[object] = queue.Queue(maxsize=max(1, depth))
                pending.append((item, q, pool.submit(run, item, q)))  # type: ignore[arg-type]

        fill()
        while pending:
            item, q, _ = pending[0]
            while True:
                result = q.get()
                if result is _END:
                    break
                if isinstance(result, _Failed):
                    raise result.exc
                yield result  # type: ignore[misc]
            pending.popleft()
            if done is not None:
                done(item)
            fill()
    finally:
        stop.set()
        for _, q, fut in pending:
            fut.cancel()
            while True:  # room for a worker waiting to put: it sees stop and ends
                try:
                    q.get_nowait()
                except queue.Empty:
                    break
        pool.shutdown(wait=True, cancel_futures=True)


def ordered_map(fn: Callable[[T], R], items: Iterable[T], workers: int, *,
                window: int | None = None) -> Generator[R, None, None]:
    """``fn(item)`` for each of ``items``, in order, up to ``workers`` at once (see
    :func:`stream_in_order`; ``window`` defaults to four items per worker, so that one slow item
    does not leave the others idle)."""
    return stream_in_order(items, lambda item: (fn(item),), workers, depth=1,
                           window=window if window is not None else 4 * workers)
