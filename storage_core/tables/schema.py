"""The columns of a synced table: what a sync writes must fit the table's columns, checked before
any record is read (a table created by an older sync with other options, or by another writer)."""

from __future__ import annotations

import pyarrow as pa

from storage_core.errors import SyncError

__all__ = ["check_columns"]


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
    if pa.types.is_struct(t):
        return "struct<" + ", ".join(f"{t.field(i).name}: {_plain(t.field(i).type)}" for i in range(t.num_fields)) + ">"
    return str(t)


def check_columns(table: str, writing: pa.Schema, held: pa.Schema) -> None:
    """Refuse to append ``writing``'s columns to a table whose columns are ``held``: a column
    missing on either side or of another type is named, with both types."""
    theirs = {f.name: f for f in held}
    ours = {f.name: f for f in writing}
    missing = [n for n in ours if n not in theirs]
    extra = [n for n in theirs if n not in ours]
    if missing or extra:
        parts = ([f"the table has no column{'s' if len(missing) > 1 else ''} {', '.join(missing)}"] if missing else []) \
            + ([f"this sync writes no column{'s' if len(extra) > 1 else ''} {', '.join(extra)}"] if extra else [])
        raise SyncError(f"{table}: {'; '.join(parts)}: its columns are {', '.join(theirs)}; expected "
                        f"{', '.join(ours)} (the same includeHeaders/includeMetadata/valueFormat as the syncs that made it)")
    for name, f in ours.items():
        if _plain(f.type) != _plain(theirs[name].type):
            raise SyncError(f"{table}: column {name} is {_plain(theirs[name].type)} in the table; this sync writes "
                            f"{_plain(f.type)}")
