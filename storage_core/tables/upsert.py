"""Upsert mode: a table holding the latest record of each key, as Kafka's log cleaner leaves a
compacted topic (``kafka-format.md`` A5.4), read as a table.

Keys are per partition, as the cleaner's are: the row of a key is the key's last record in its
partition (the default partitioner sends a key to one partition; a key found in two keeps a row
in each, as compaction keeps a record in each). A tombstone (a null value) deletes the key's row. A
record with no key is dropped, as the cleaner drops it (a broker refuses one on a compacted topic);
the sync counts them and says so. Aborted transactions never reach the table: an upsert sync reads
``read_committed``.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["KEY_COLUMNS", "Latest", "latest"]

#: What identifies a row in an upserted table: a key in its partition.
KEY_COLUMNS = ("topic", "partition", "key")


class Latest:
    """The last record of each key in one commit's records: ``rows`` to put in the table (replacing
    the key's row), ``deleted`` the keys (:data:`KEY_COLUMNS`) whose last record is a tombstone,
    ``dropped`` the count of records with no key."""

    def __init__(self, rows: pa.Table, deleted: pa.Table, dropped: int) -> None:
        self.rows, self.deleted, self.dropped = rows, deleted, dropped

    def keys(self) -> pa.Table:
        """Every key this commit sets or deletes: the rows the table has for them go."""
        return pa.concat_tables([self.rows.select(list(KEY_COLUMNS)), self.deleted])


def latest(data: pa.Table, tombstone: pa.ChunkedArray | pa.Array) -> Latest:
    """:class:`Latest` of ``data`` (records in offset order within each partition), ``tombstone``
    saying which are tombstones."""
    keyed = pc.is_valid(data.column("key"))
    dropped = len(data) - pc.sum(keyed).as_py() if len(data) else 0
    indexed = data.select(list(KEY_COLUMNS)).append_column("__row", pa.array(np.arange(len(data), dtype=np.int64)))
    if dropped:
        indexed = indexed.filter(keyed)
    last = indexed.group_by(list(KEY_COLUMNS), use_threads=False).aggregate([("__row", "max")])
    rows = pc.sort_indices(last.column("__row_max"))
    picked = pc.take(last.column("__row_max"), rows)
    dead = pc.take(pa.chunked_array([tombstone]) if isinstance(tombstone, pa.Array) else tombstone, picked)
    live = pc.invert(dead)
    return Latest(data.take(pc.filter(picked, live)), data.select(list(KEY_COLUMNS)).take(pc.filter(picked, dead)),
                  int(dropped))
