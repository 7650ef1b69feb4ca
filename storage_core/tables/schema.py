"""The columns of a synced table, and how they may change between syncs.

A raw sync writes Spark's Kafka-source columns. A decoded sync (``valueFormat`` ``confluent-*``)
writes the value's fields as columns of their own beside the Kafka columns (:func:`table_schema`;
a value that is not a record stays one ``value`` column), typed by the subject's latest schema.

Before any record is read, :func:`evolve` fits what a sync writes to the table's columns (a table
made by an older sync, with an older schema of the subject, or by another writer). The Kafka columns
must be as they were. The value's fields may evolve as the Schema Registry's compatibility rules
let them: a field added becomes a new nullable column (or nested field), a field removed stays in
the table and is null in new rows, and a type may widen where the table format can (Iceberg's
promotions: int to long, float to double, a decimal's precision). Any other change names the field.
A duration is held as its microseconds (:func:`storable`).
:func:`to_table` then gives each batch the table's columns.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from storage_core.errors import SyncError

__all__ = ["PARTITIONINGS", "evolve", "partition_column", "table_schema", "to_table"]

#: The Kafka columns a value field may not be named after, and whose types never change.
KAFKA_COLUMNS = ("key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers",
                 "leaderEpoch", "sequence", "producerId", "producerEpoch", "isTransactional", "isControl")

#: ``partitionBy``: the table partitioned by the day or the hour (UTC) of the record timestamp.
PARTITIONINGS = ("day", "hour")


def partition_column(by: str) -> pa.Field:
    """The column a table partitioned by ``by`` (:data:`PARTITIONINGS`) is partitioned on: Iceberg's
    partition field name for a ``day``/``hour`` transform of ``timestamp``, and the derived column
    a Delta table (which has no transforms) holds: a date, or the timestamp floored to the hour."""
    return pa.field(f"timestamp_{by}", pa.date32() if by == "day" else pa.timestamp("us", tz="UTC"))


def _derived(name: str, timestamps: pa.Array) -> pa.Array | None:
    """The value of the derived partition column ``name`` (:func:`partition_column`), if it is one."""
    if name == "timestamp_day":
        return timestamps.cast(pa.timestamp("us", tz="UTC")).cast(pa.date32())
    if name == "timestamp_hour":
        return pc.floor_temporal(timestamps.cast(pa.timestamp("us", tz="UTC")), unit="hour")
    return None


def _plain(t: pa.DataType) -> str:
    """``t`` with the representation choices of one engine or another left out (large or small
    offsets, views, a list's element name, a timestamp's zone spelling), so Iceberg's and Delta's
    Arrow renderings compare equal to the source's when the logical types are equal."""
    if pa.types.is_large_binary(t) or pa.types.is_binary_view(t) or pa.types.is_binary(t):
        return "binary"
    if pa.types.is_large_string(t) or pa.types.is_string_view(t) or pa.types.is_string(t):
        return "string"
    if pa.types.is_timestamp(t):
        return f"timestamp[{'utc' if t.tz else 'local'}]"
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_list_view(t):
        return f"list<{_plain(t.value_type)}>"
    if pa.types.is_map(t):
        return f"map<{_plain(t.key_type)}, {_plain(t.item_type)}>"
    if pa.types.is_struct(t):
        return "struct<" + ", ".join(f"{t.field(i).name}: {_plain(t.field(i).type)}" for i in range(t.num_fields)) + ">"
    return str(t)


def storable(t: pa.DataType) -> pa.DataType:
    """``t`` as a table holds it: a duration (Protobuf's Duration, Spark's day-time interval) as its
    microseconds, a long, since neither Iceberg nor Delta has an interval type; the rest as it is."""
    if pa.types.is_duration(t):
        return pa.int64()
    if pa.types.is_struct(t):
        return pa.struct([t.field(i).with_type(storable(t.field(i).type)) for i in range(t.num_fields)])
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return pa.list_(t.value_field.with_type(storable(t.value_type)))
    if pa.types.is_map(t):
        return pa.map_(storable(t.key_type), t.item_field.with_type(storable(t.item_type)))
    return t


def table_schema(source: pa.Schema) -> pa.Schema:
    """The table's columns for batches of ``source`` (the read's schema, the value decoded or not):
    the Kafka columns, then the value's fields when the value is a record (:func:`storable` types)."""
    source = pa.schema([f.with_type(storable(f.type)) for f in source])
    value = source.field("value")
    if not pa.types.is_struct(value.type):
        return source
    kafka = [f for f in source if f.name != "value"]
    taken = {f.name for f in kafka}
    clash = [value.type.field(i).name for i in range(value.type.num_fields) if value.type.field(i).name in taken]
    if clash:
        raise SyncError(f"the value's field{'s' if len(clash) > 1 else ''} {', '.join(clash)} would be a column "
                        f"beside the Kafka column{'s' if len(clash) > 1 else ''} of the same name; expected value "
                        f"fields named other than {', '.join(sorted(taken))}")
    return pa.schema(kafka + [value.type.field(i).with_nullable(True) for i in range(value.type.num_fields)])


class _Incompatible(Exception):
    def __init__(self, path: str, held: pa.DataType, ours: pa.DataType, why: str) -> None:
        super().__init__(path)
        self.path, self.held, self.ours, self.why = path, held, ours, why


def _widens(held: pa.DataType, ours: pa.DataType) -> bool:
    """Iceberg's type promotions (the spec's "schema evolution"), which Avro's resolution also allows."""
    if pa.types.is_int32(held) and pa.types.is_int64(ours):
        return True
    if pa.types.is_float32(held) and pa.types.is_float64(ours):
        return True
    return bool(pa.types.is_decimal(held) and pa.types.is_decimal(ours) and held.scale == ours.scale
                and held.precision <= ours.precision)


def _union(path: str, held: pa.DataType, ours: pa.DataType, widen: bool) -> pa.DataType:
    """The type a column that is ``held`` in the table takes to hold ``ours`` too; ``ours``'s
    representation where the two agree (no copy of the data to the table's)."""
    if _plain(held) == _plain(ours):
        return ours
    if pa.types.is_struct(held) and pa.types.is_struct(ours):
        mine = {ours.field(i).name: ours.field(i) for i in range(ours.num_fields)}
        fields = []
        for i in range(held.num_fields):
            f = held.field(i)
            fields.append(f if f.name not in mine else
                          mine[f.name].with_type(_union(f"{path}.{f.name}", f.type, mine[f.name].type, widen)))
        seen = {held.field(i).name for i in range(held.num_fields)}
        fields += [f.with_nullable(True) for n, f in mine.items() if n not in seen]
        return pa.struct(fields)
    if (pa.types.is_list(held) or pa.types.is_large_list(held)) and pa.types.is_list(ours):
        return pa.list_(ours.value_field.with_type(_union(f"{path}[]", held.value_type, ours.value_type, widen)))
    if pa.types.is_map(held) and pa.types.is_map(ours) and _plain(held.key_type) == _plain(ours.key_type):
        return pa.map_(ours.key_type, _union(f"{path}{{}}", held.item_type, ours.item_type, widen))
    if _widens(held, ours):
        if widen:
            return ours
        raise _Incompatible(path, held, ours, "the table format cannot widen a column's type")
    raise _Incompatible(path, held, ours, "not a compatible change (a field's type may only widen: int to long, "
                                          "float to double, a decimal's precision)")


def evolve(table: str, writing: pa.Schema, held: pa.Schema, *, widen: bool, source: str) -> pa.Schema:
    """The columns the table must have to take ``writing``'s, given it has ``held``'s: ``held`` when
    nothing changes. ``widen``: the format can promote a column's type. ``source`` says where
    ``writing``'s value columns come from, for messages. Raises :class:`SyncError` naming the
    column or field that does not fit, before anything is written."""
    theirs = {f.name: f for f in held}
    ours = {f.name: f for f in writing}
    kafka = [n for n in KAFKA_COLUMNS if n in ours or n in theirs]
    missing = [n for n in kafka if n not in theirs]
    extra = [n for n in kafka if n not in ours]
    if missing or extra:
        parts = ([f"the table has no column{'s' if len(missing) > 1 else ''} {', '.join(missing)}"] if missing else []) \
            + ([f"this sync writes no column{'s' if len(extra) > 1 else ''} {', '.join(extra)}"] if extra else [])
        raise SyncError(f"{table}: {'; '.join(parts)}: its columns are {', '.join(theirs)}; expected "
                        f"{', '.join(ours)} (the same includeHeaders/includeMetadata/valueFormat as the syncs that made it)")
    fields = []
    for name, f in theirs.items():
        if name not in ours:
            fields.append(f.with_nullable(True))  # a field the value no longer has: null from now on
            continue
        try:
            if name in KAFKA_COLUMNS and name not in ("key", "value"):
                if _plain(f.type) != _plain(ours[name].type):
                    raise _Incompatible(name, f.type, ours[name].type, "a Kafka column's type never changes")
                fields.append(ours[name])
            else:
                fields.append(ours[name].with_type(_union(name, f.type, ours[name].type, widen)))
        except _Incompatible as exc:
            raise SyncError(f"{table}: column {exc.path} is {_plain(exc.held)} in the table; {source} gives "
                            f"{_plain(exc.ours)}: {exc.why}") from None
    fields += [f.with_nullable(True) for n, f in ours.items() if n not in theirs]
    return pa.schema(fields)


def changed(held: pa.Schema, evolved: pa.Schema) -> bool:
    """Whether ``evolved`` (from :func:`evolve`) adds to or widens the table's columns."""
    return [(f.name, _plain(f.type)) for f in held] != [(f.name, _plain(f.type)) for f in evolved]


def _conform(arr: pa.Array, t: pa.DataType) -> pa.Array:
    """``arr`` as type ``t`` (a type :func:`evolve` made from ``arr``'s): fields it lacks null,
    types widened."""
    if arr.type == t:
        return arr
    if pa.types.is_struct(t):
        have = {arr.type.field(i).name for i in range(arr.type.num_fields)}
        children = [_conform(arr.field(f.name), f.type) if f.name in have else pa.nulls(len(arr), f.type)
                    for f in t]
        return pa.StructArray.from_arrays(children, fields=list(t), mask=arr.is_null() if arr.null_count else None)
    if pa.types.is_list(t):
        arr = arr.cast(pa.list_(arr.type.value_field)) if not pa.types.is_list(arr.type) else arr
        return pa.ListArray.from_arrays(arr.offsets, _conform(arr.values, t.value_type), type=t,
                                        mask=arr.is_null() if arr.null_count else None)
    if pa.types.is_map(t):
        return pa.MapArray.from_arrays(arr.offsets, _conform(arr.keys, t.key_type), _conform(arr.items, t.item_type),
                                       type=t, mask=arr.is_null() if arr.null_count else None)
    if pa.types.is_duration(arr.type) and pa.types.is_int64(t):
        return arr.view(pa.int64())
    return arr.cast(t)


def to_table(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """``batch`` (the read's columns) with the table's columns ``schema``: the value's fields as
    columns when the table has them (:func:`table_schema`), a Delta table's partition column
    derived from the timestamp (:func:`partition_column`), missing ones null, types widened."""
    columns = dict(zip(batch.schema.names, batch.columns, strict=True))
    if "value" not in schema.names and "value" in columns:
        value = columns.pop("value")
        columns.update(zip((f.name for f in value.type), value.flatten(), strict=True))
    out = []
    for f in schema:
        if f.name in columns:
            out.append(_conform(columns[f.name], f.type))
            continue
        derived = _derived(f.name, columns["timestamp"])
        out.append(_conform(derived, f.type) if derived is not None else pa.nulls(batch.num_rows, f.type))
    return pa.RecordBatch.from_arrays(out, schema=schema)
