"""Where a sync resumes: the offsets a table records in its own metadata, one rule for both formats.

Every commit of ``klog sync`` records, in the same atomic commit as its records, the next offset to
read of each partition the table holds (a consumer's position: one past the last offset consumed,
so under ``read_committed`` it may lie past trailing control records and aborted batches):

- Iceberg: the snapshot summary property ``klog.offsets``, JSON ``{"topic": {"partition": offset}}``
  of every partition the table holds (:data:`OFFSETS_PROPERTY`);
- Delta: an application transaction per partition, ``appId`` ``klog/<topic>/<partition>`` with the
  offset as its ``version`` (:func:`app_id`; Delta keeps transactions in checkpoints, so they outlive
  the commit log), and the same JSON in the commit info for people reading the history.

A sync reads the offsets when it opens the table, reads each partition from there (a partition the
table does not hold yet from its earliest offset: :func:`starting_offsets`), and commits only if the
table has not moved since: a record can be committed once, never twice, never lost.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from storage_core.errors import SyncError
from storage_core.log.topic_partition import TopicPartition

__all__ = ["EARLIEST", "MODE_PROPERTY", "OFFSETS_PROPERTY", "TableOffsets", "app_id", "check_history",
           "check_holds", "check_mode", "decode", "encode", "offsets_held", "starting_offsets"]

#: The Iceberg snapshot summary property (and Delta commit info key) holding the offsets' JSON.
OFFSETS_PROPERTY = "klog.offsets"
#: Beside it: the sync's mode, ``append`` or ``upsert`` (a commit without it: ``append``, as syncs
#: made before the mode existed).
MODE_PROPERTY = "klog.mode"
#: Kafka's "earliest" in a startingOffsets JSON: a partition the table has never held.
EARLIEST = -2

#: topic -> partition -> the next offset to read
TableOffsets = dict[str, dict[int, int]]


def app_id(tp: TopicPartition) -> str:
    """The Delta application transaction id recording ``tp``'s next offset."""
    return f"klog/{tp.topic}/{tp.partition}"


def encode(offsets: Mapping[str, Mapping[int, int]]) -> str:
    """The JSON of ``offsets``, sorted (the same offsets always give the same text)."""
    return json.dumps({t: {str(p): o for p, o in sorted(ps.items())} for t, ps in sorted(offsets.items())},
                      separators=(",", ":"))


def decode(text: str, where: str) -> TableOffsets:
    """The offsets of ``text`` (:func:`encode`'s JSON); ``where`` names the table and snapshot in errors."""
    try:
        obj = json.loads(text)
        if not isinstance(obj, dict):
            raise ValueError("not an object")
        out: TableOffsets = {}
        for topic, parts in obj.items():
            if not isinstance(topic, str) or not isinstance(parts, dict):
                raise ValueError(f"topic {topic!r} maps to {parts!r}")
            out[topic] = {}
            for p, o in parts.items():
                if not str(p).isdigit() or not isinstance(o, int) or isinstance(o, bool) or o < 0:
                    raise ValueError(f"partition {p!r} maps to {o!r}")
                out[topic][int(p)] = o
        return out
    except ValueError as exc:
        raise SyncError(f"{where}: {OFFSETS_PROPERTY} is not klog's offsets ({exc}); expected JSON like "
                        '{"orders": {"0": 1200, "1": 1175}}') from None


def starting_offsets(held: Mapping[str, Mapping[int, int]],
                     partitions: Iterable[TopicPartition]) -> dict[str, dict[int, int]]:
    """The ``startingOffsets`` of a sync of ``partitions``: each from the next offset the table
    records, or from the earliest offset when the table does not hold it yet."""
    out: dict[str, dict[int, int]] = {}
    for tp in partitions:
        out.setdefault(tp.topic, {})[tp.partition] = held.get(tp.topic, {}).get(tp.partition, EARLIEST)
    return out


def check_holds(table: str, held: Mapping[str, Mapping[int, int]], topics: Iterable[str], *,
                has_records: bool, named: Iterable[str] = ()) -> None:
    """Refuse a table that holds records but no offsets of any topic this sync reads: another
    topic's table (``named``: the topics its offsets name, where known), or a table klog did not
    write. Appending there would mix two streams under one set of offsets."""
    wanted = sorted(set(topics))
    if not has_records or any(held.get(t) for t in wanted):
        return
    others = sorted(set(named) | {t for t, ps in held.items() if ps})
    what = (f"the offsets of topic{'s' if len(others) > 1 else ''} {', '.join(others)}" if others else
            f"records but no {OFFSETS_PROPERTY} (it was not written by klog sync)")
    raise SyncError(f"{table} holds {what}; this sync reads {', '.join(wanted)}: expected an empty table, a new one, "
                    f"or one synced from {'these topics' if len(wanted) > 1 else 'this topic'}")


def check_mode(table: str, held: str | None, mode: str) -> None:
    """Refuse to sync in ``mode`` a table whose last sync ran in ``held`` (None: a table no sync has
    committed to): appending every record to an upserted table would give a key several rows, and
    upserting into an appended one would delete rows the table was meant to keep."""
    if held is not None and held != mode:
        raise SyncError(f"{table} was synced in {held} mode; this sync runs in {mode} mode; expected mode {held} "
                        "(a table keeps the mode it was made with)")


#: The changes a refusal lists before it says how many more there are.
_LISTED = 4


def check_history(table: str, last_sync: str, changes: Sequence[str], *, rebase: bool) -> bool:
    """The one rule of a table changed behind klog's back: ``changes`` are the commits since klog's
    last sync (``last_sync`` names it: the Delta version or Iceberg snapshot) that klog did not make
    and that change the records (a restore or rollback, a foreign append, delete, overwrite; not a
    compaction or a property set), each named by its version or snapshot and what it did, as the
    format's own history says (:meth:`~storage_core.tables.delta.DeltaTarget.held`,
    :meth:`~storage_core.tables.iceberg.IcebergTarget.held`). Then the offsets the table records no
    longer say which records it holds: a sync would lose records for good (a restore) or hold some
    twice (an append), silently. Refused in one line before anything is written, unless ``rebase``
    (``klog sync --rebase``, ``sync(rebase=True)``): a user who changed the table on purpose has
    the offsets re-based on the records it holds (:func:`offsets_held`). Returns whether to."""
    if not changes:
        return False
    if rebase:
        return True
    listed = "; ".join(changes[:_LISTED]) + (f"; and {len(changes) - _LISTED} more" if len(changes) > _LISTED else "")
    raise SyncError(f"{table} changed since klog's last sync ({last_sync}) by commits klog did not make: {listed}; "
                    "its offsets no longer say which records it holds, so nothing was written; expected a table only "
                    "klog sync writes, or --rebase (rebase=True) to re-base the offsets on the records the table holds")


def offsets_held(rows: pa.Table) -> TableOffsets:
    """The offsets a re-based sync resumes from: one past the highest offset the table holds of each
    partition (``rows``: its ``topic``, ``partition`` and ``offset`` columns). A partition it holds no
    record of is left out: read from its earliest offset."""
    if not rows.num_rows:
        return {}
    grouped = rows.group_by(["topic", "partition"], use_threads=False).aggregate([("offset", "max")])
    out: TableOffsets = {}
    nxt = pc.add(grouped.column("offset_max"), 1)
    for t, p, o in zip(grouped.column("topic").to_pylist(), grouped.column("partition").to_pylist(),
                       nxt.to_pylist(), strict=True):
        out.setdefault(t, {})[int(p)] = int(o)
    return out
