"""klog's errors at the Spark boundary: klog's sentence on the first line Spark shows.

An exception that leaves a data source method reaches Spark as the text PySpark's worker makes of
it (``pyspark.util.handle_worker_exception``): the whole traceback, which Spark puts after its own
prefix. So the first line of the notebook's ``AnalysisException`` / ``StreamingQueryException`` and
of the driver log was ``[PYTHON_DATA_SOURCE_ERROR] Failed to create Python data source instance:
Traceback (most recent call last):``, and klog's sentence came 7 to 30 lines later. Raising a
``PySparkException``, cutting the traceback (``with_traceback(None)``, ``from None``) or a short
``__str__`` change nothing there: the worker formats the traceback of the frames the exception
passed through. The one switch it has is ``SPARK_HIDE_TRACEBACK`` (what
``spark.sql.execution.pyspark.udf.hideTraceback.enabled`` sets for UDFs), read when it formats
the exception: then it sends only ``Type: message``.

:func:`spark_entry` wraps every method Spark calls on klog's data source, reader, stream reader
and writers. A :class:`~storage_core.errors.KlogError` leaving one in a PySpark worker process
(klog's own, deliberate errors: a wrong option, a missing path, an offset out of range) is sent
as one line, ``InvalidOptionError: unknown option ...``, so Spark shows
``[PYTHON_DATA_SOURCE_ERROR] Failed to create Python data source instance: InvalidOptionError:
unknown option ...``. Setting the variable is safe there: every PySpark worker exits after
reporting an exception (its process is not reused), so it never reaches a user's UDF.

Everything else keeps its full traceback: any other exception (a bug in klog or in Spark), a
``KlogError`` raised outside a Spark worker (the Python API, a test calling the source directly:
the same exception object, unchanged), and every error when ``KLOG_SPARK_TRACEBACK=1`` is set in
the workers' environment (to debug klog itself).
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any, ParamSpec, TypeVar, cast

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadLimit, SupportsTriggerAvailableNow

from storage_core.errors import KlogError

__all__ = ["FailingStreamReader", "in_spark_worker", "spark_entry", "stream_reader"]

P = ParamSpec("P")
R = TypeVar("R")

#: Set on the wrappers, so that a test can check every Spark-facing method has one.
MARK = "__klog_spark_entry__"


def in_spark_worker() -> bool:
    """True in a process PySpark started to run Python for Spark (forked by ``pyspark.daemon``,
    or started as ``pyspark.worker``, ``pyspark.sql.worker.*`` or a streaming runner)."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    return str(getattr(spec, "name", "") or "").startswith("pyspark.")


_SHOWN: dict[type[KlogError], type[KlogError]] = {}


def _shown_as(cls: type[KlogError]) -> type[KlogError]:
    """A subclass of ``cls`` that a traceback prints by its bare name (``InvalidOptionError``, not
    ``storage_core.errors.InvalidOptionError``): only ever formatted, never pickled or caught."""
    shown = _SHOWN.get(cls)
    if shown is None:
        shown = _SHOWN[cls] = type(cls.__name__, (cls,), {"__module__": "builtins", "__qualname__": cls.__name__,
                                                          "__doc__": cls.__doc__})
    return shown


def _for_spark(exc: KlogError) -> KlogError | None:
    """What to raise instead of ``exc`` so that Spark shows it as one line, or None to re-raise
    ``exc`` unchanged (see the module docstring)."""
    if not in_spark_worker() or os.environ.get("KLOG_SPARK_TRACEBACK"):
        return None
    os.environ["SPARK_HIDE_TRACEBACK"] = "1"  # read by handle_worker_exception; this process then exits
    shown_cls = _shown_as(type(exc))
    shown = shown_cls.__new__(shown_cls, *exc.args)
    shown.__dict__.update(exc.__dict__)
    return shown


def _guarded(it: Iterator[Any]) -> Iterator[Any]:
    try:
        yield from it
    except KlogError as exc:
        shown = _for_spark(exc)
        if shown is None:
            raise
        raise shown from None


def spark_entry(fn: Callable[P, R]) -> Callable[P, R]:
    """Mark ``fn`` as called by Spark: a KlogError leaving it (or the iterator it returns, as
    ``read`` does) reaches Spark as one line, ``Type: message``."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            result = fn(*args, **kwargs)
        except KlogError as exc:
            shown = _for_spark(exc)
            if shown is None:
                raise
            raise shown from None
        if isinstance(result, Iterator):
            return cast(R, _guarded(result))
        return result

    setattr(wrapper, MARK, True)
    return wrapper


def stream_reader(make: Callable[[], DataSourceStreamReader]) -> DataSourceStreamReader:
    """``make()``, or in a Spark worker, if it raises a KlogError, a reader that raises it at its
    first call: PySpark 4.3's streaming source runner calls ``reader.stop()`` in a ``finally``
    around ``streamReader()``, so an exception from ``streamReader`` itself reaches Spark as
    ``UnboundLocalError: cannot access local variable 'reader'`` (klog's error only as its
    context, below a traceback)."""
    try:
        return make()
    except KlogError as exc:
        if not in_spark_worker():
            raise
        return FailingStreamReader(exc)


class FailingStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """A stream reader whose options were wrong: each call Spark makes to plan a batch raises the
    error (the first one fails the query); ``commit`` and ``stop`` do nothing."""

    def __init__(self, error: KlogError) -> None:
        self.error = error

    @spark_entry
    def initialOffset(self) -> dict[str, Any]:
        raise self.error

    @spark_entry
    def getDefaultReadLimit(self) -> ReadLimit:
        raise self.error

    @spark_entry
    def prepareForTriggerAvailableNow(self) -> None:
        raise self.error

    @spark_entry
    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        raise self.error

    @spark_entry
    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        raise self.error

    @spark_entry
    def read(self, partition: InputPartition) -> Iterator[Any]:
        raise self.error

    @spark_entry
    def commit(self, end: dict[str, Any]) -> None:
        """Nothing was read."""

    @spark_entry
    def stop(self) -> None:
        """Nothing to release."""
