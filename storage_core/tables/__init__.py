"""Topics as lakehouse tables: ``klog sync`` keeps an Iceberg or Delta table in step with topics of
a log dir, incrementally and exactly once, with no broker.

- :mod:`~storage_core.tables.offsets`: the one rule of where a sync resumes, the offsets a table records;
- :mod:`~storage_core.tables.schema`: the table's columns against what a sync writes;
- :mod:`~storage_core.tables.iceberg`, :mod:`~storage_core.tables.delta`: the two table formats
  (``pyiceberg``, ``deltalake``: imported only by a sync to that format);
- :mod:`~storage_core.tables.run`: the sync itself, :func:`sync`.
"""

from storage_core.tables.run import DEFAULT_COMMIT_RECORDS, FORMATS, SyncSummary, sync

__all__ = ["DEFAULT_COMMIT_RECORDS", "FORMATS", "SyncSummary", "sync"]
