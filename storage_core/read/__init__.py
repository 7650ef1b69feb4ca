"""The read layer: one planner and one piece reader, under every way klog reads a log dir.

* :mod:`~storage_core.read.options` — the read options (Spark's Kafka-source names), parsed once;
* :mod:`~storage_core.read.planner` — selection, range resolution, pieces, aborted transactions
  per piece (Kafka's fetch rule);
* :mod:`~storage_core.read.piece_reader` — one piece → Arrow (chunks, CRC, the bulk kernel walk,
  damage skipping, transaction filtering);
* :mod:`~storage_core.read.api` — the public Python API: a log dir → ``pyarrow.RecordBatchReader``;
* :mod:`~storage_core.read.groups` — consumer groups' committed offsets from ``__consumer_offsets``
  (``klog groups``, the ``...FromGroup`` options and :func:`storage_core.committed_offsets`);
* :mod:`~storage_core.read.describe` — what is in a log dir, one summary per partition
  (``klog describe`` and :func:`storage_core.describe`);
* :mod:`~storage_core.read.values` — ``valueFormat``/``keyFormat``: Schema Registry values decoded
  with the schemas of the ``_schemas`` topic (:mod:`~storage_core.read.schema_registry`,
  :mod:`~storage_core.read.avro`, :mod:`~storage_core.read.json_schema`).

Spark's data source (``spark_logsource``), ``klog export`` and the Python API all go through
here; this layer imports the log and record layers, never Spark.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from storage_core.read.api import plan, read_arrow
    from storage_core.read.describe import describe
    from storage_core.read.groups import committed_offsets

__all__ = ["committed_offsets", "describe", "plan", "read_arrow"]
_MODULES = {"committed_offsets": "storage_core.read.groups", "describe": "storage_core.read.describe", "plan": "storage_core.read.api", "read_arrow": "storage_core.read.api"}


def __getattr__(name: str) -> object:
    """The API's names on first use: the options and the planner import without pyarrow."""
    if name in _MODULES:
        import importlib

        return getattr(importlib.import_module(_MODULES[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
