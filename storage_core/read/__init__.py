"""The read layer: one planner and one piece reader, under every way klog reads a log dir.

* :mod:`~storage_core.read.options` — the read options (Spark's Kafka-source names), parsed once;
* :mod:`~storage_core.read.planner` — selection, range resolution, pieces, aborted transactions
  per piece (Kafka's fetch rule);
* :mod:`~storage_core.read.piece_reader` — one piece → Arrow (chunks, CRC, the bulk kernel walk,
  damage skipping, transaction filtering);
* :mod:`~storage_core.read.api` — the public Python API: a log dir → ``pyarrow.RecordBatchReader``.

Spark's data source (``spark_logsource``), ``klog export`` and the Python API all go through
here; this layer imports the log and record layers, never Spark.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from storage_core.read.api import plan, read_arrow

__all__ = ["plan", "read_arrow"]


def __getattr__(name: str) -> object:
    """``plan`` and ``read_arrow`` on first use: the options and the planner import without pyarrow."""
    if name in __all__:
        from storage_core.read import api

        return getattr(api, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
