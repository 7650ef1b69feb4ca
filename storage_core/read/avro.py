"""Confluent Avro values → Arrow, typed as spark-avro types them; the writer schemas from ``_schemas``.

Each record is Confluent's wire format: magic byte 0, the writer schema's id (4 bytes, big-endian),
then the Avro binary datum. It is decoded with its own writer schema (by id, from the
:class:`~storage_core.read.schema_registry.SchemaRegistry`) resolved to the reader schema (the
subject's latest) by Avro's resolution rules (fastavro's ``schemaless_reader``), and the column is
built by Arrow from the decoded values in one call (``pyarrow.array``), with the types spark-avro's
``SchemaConverters.toSqlType`` gives:

=================================  ===========================================================
Avro                               Arrow (Spark)
=================================  ===========================================================
boolean, int, long, float, double  bool, int32, int64, float32, float64
bytes, fixed                       binary
string, enum, ``uuid``             string
``decimal(p, s)``                  decimal128(p, s)
``date``                           date32 (DateType)
``timestamp-millis``/``-micros``   timestamp(us, UTC) (TimestampType)
``local-timestamp-millis/micros``  timestamp(us) (TimestampNTZType)
``time-millis``/``time-micros``    int32/int64 (spark-avro has no time type)
record                             struct (every field nullable, see ``_NULLABLE``)
array, map                         list, map<string, _>
``[null, x]``                      x, nullable
``[int, long]``/``[float, double]``  int64/float64
other unions                       struct ``member0..n`` (one per non-null branch)
=================================  ===========================================================

Logical types (dates, times, timestamps, decimals, uuids) are stripped from the schemas handed to
fastavro, so it reads plain ints and bytes, and the column is converted at once (:func:`finish`:
Arrow casts, decimals from their unscaled bytes), not value by value.
A recursive record is refused, as spark-avro refuses it.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from storage_core.errors import SchemaRegistryError, UnknownSchemaError, ValueDecodeError
from storage_core.read.schema_registry import WIRE_HEADER, RegisteredSchema, SchemaRegistry, wire_schema_id

__all__ = ["AvroDecoder", "WIRE_HEADER", "WriterSchemaJson", "avro_arrow_type", "json_value"]

_STRIPPED = {"decimal", "date", "time-millis", "time-micros", "timestamp-millis", "timestamp-micros",
             "local-timestamp-millis", "local-timestamp-micros", "uuid"}
_PRIMITIVE = {"null": pa.null(), "boolean": pa.bool_(), "int": pa.int32(), "long": pa.int64(),
              "float": pa.float32(), "double": pa.float64(), "bytes": pa.binary(), "string": pa.string()}

Convert = Callable[[Any], Any]
#: Every nested field is nullable: spark-avro marks fields outside unions non-null, but Arrow (and so
#: Spark's Arrow path) refuses a non-null child under a null parent, as an optional record's fields are.
_NULLABLE = True


@dataclass(frozen=True)
class Node:
    """A schema's Arrow types: as built from fastavro's values (``raw``) and as delivered
    (``final``, a cast away), its nullability, and the Python conversion it needs (None: none)."""

    raw: pa.DataType
    final: pa.DataType
    nullable: bool
    convert: Convert | None = None


def _decimals(arr: pa.Array, t: pa.Decimal128Type) -> pa.Array:
    """Avro decimals (big-endian two's-complement unscaled bytes) → a decimal128 column."""
    import pyarrow.compute as pc

    limit = 10 ** t.precision
    data = bytearray()
    for b in arr.to_pylist():
        x = 0 if b is None else int.from_bytes(b, "big", signed=True)
        if not -limit < x < limit:
            raise ValueDecodeError(f"decimal unscaled value {x} does not fit decimal({t.precision}, {t.scale})")
        data += x.to_bytes(16, "little", signed=True)
    out = pa.Array.from_buffers(t, len(arr), [None, pa.py_buffer(bytes(data))])
    return pc.if_else(arr.is_null(), pa.scalar(None, t), out) if arr.null_count else out


def finish(arr: pa.Array, final: pa.DataType) -> pa.Array:
    """A column built from fastavro's values (logical types read raw) in its delivered types: Arrow
    casts where it can (timestamp units, dates), decimals from their bytes."""
    raw = arr.type
    if raw.equals(final):
        return arr
    if pa.types.is_decimal(final):
        return _decimals(arr, final)
    mask = arr.is_null() if arr.null_count else None
    if pa.types.is_struct(final):
        children = [finish(arr.field(i), final.field(i).type) for i in range(final.num_fields)]
        return pa.StructArray.from_arrays(children, fields=list(final), mask=mask)
    if pa.types.is_map(final):
        return pa.MapArray.from_arrays(arr.offsets, arr.keys, finish(arr.items, final.item_type), type=final,
                                       mask=mask)
    if pa.types.is_list(final):
        return pa.ListArray.from_arrays(arr.offsets, finish(arr.values, final.value_type), type=final, mask=mask)
    return arr.cast(final)


def _strip(schema: Any) -> Any:
    """``schema`` without the logical types Arrow converts itself (see the module doc)."""
    if isinstance(schema, list):
        return [_strip(s) for s in schema]
    if isinstance(schema, dict):
        out = {k: _strip(v) if k in ("type", "items", "values", "fields") else v for k, v in schema.items()
               if not (k == "logicalType" and v in _STRIPPED)}
        if "fields" in schema:
            out["fields"] = [{**f, "type": _strip(f["type"])} for f in schema["fields"]]
        return out
    return schema


class _Types:
    """spark-avro's ``SchemaConverters.toSqlType`` over a parsed schema and its named types."""

    def __init__(self, names: dict[str, Any]) -> None:
        self.names = names

    def node(self, s: Any, stack: tuple[str, ...] = ()) -> Node:
        if isinstance(s, str):
            if s in _PRIMITIVE:
                t = _PRIMITIVE[s]
                return Node(t, t, s == "null")
            if s in stack:
                raise SchemaRegistryError(f"recursive Avro type {s!r} has no Spark type (spark-avro refuses it too)")
            if s not in self.names:
                raise SchemaRegistryError(f"Avro type {s!r} is not defined (a missing schema reference?)")
            return self.node(self.names[s], stack)
        if isinstance(s, list):
            return self.union(s, stack)
        t = s["type"]
        logical = s.get("logicalType")
        if not isinstance(t, str):
            return self.node(t, stack)
        if logical == "decimal" and t in ("bytes", "fixed"):
            p, sc = int(s.get("precision", 0)), int(s.get("scale", 0))
            if not 0 < p <= 38 or not 0 <= sc <= p:
                raise SchemaRegistryError(f"decimal({p}, {sc}) has no Spark type (precision 1..38)")
            return Node(pa.binary(), pa.decimal128(p, sc), False)
        if t == "int" and logical == "date":
            return Node(pa.date32(), pa.date32(), False)
        if t == "long" and logical in ("timestamp-millis", "timestamp-micros"):
            return Node(pa.timestamp("ms" if logical.endswith("millis") else "us", tz="UTC"),
                        pa.timestamp("us", tz="UTC"), False)
        if t == "long" and logical in ("local-timestamp-millis", "local-timestamp-micros"):
            return Node(pa.timestamp("ms" if logical.endswith("millis") else "us"), pa.timestamp("us"), False)
        if t == "record":
            name = s.get("name", "")
            fields = [(f["name"], self.node(f["type"], (*stack, name))) for f in s["fields"]]
            convs = [(n, nd.convert) for n, nd in fields if nd.convert is not None]
            conv: Convert | None = None
            if convs:
                def conv(v: Any, convs: list[tuple[str, Convert]] = convs) -> Any:
                    if v is None:
                        return None
                    v = dict(v)
                    for n, c in convs:
                        v[n] = c(v[n])
                    return v
            return Node(pa.struct([pa.field(n, nd.raw, _NULLABLE) for n, nd in fields]),
                        pa.struct([pa.field(n, nd.final, _NULLABLE) for n, nd in fields]), False, conv)
        if t == "enum":
            return Node(pa.string(), pa.string(), False)
        if t == "fixed":
            return Node(pa.binary(), pa.binary(), False)
        if t == "array":
            item = self.node(s["items"], stack)
            ic = item.convert
            return Node(pa.list_(pa.field("element", item.raw, _NULLABLE)),
                        pa.list_(pa.field("element", item.final, _NULLABLE)), False,
                        None if ic is None else (lambda v: None if v is None else [ic(x) for x in v]))
        if t == "map":
            val = self.node(s["values"], stack)
            vc = val.convert
            return Node(pa.map_(pa.string(), pa.field("value", val.raw, _NULLABLE)),
                        pa.map_(pa.string(), pa.field("value", val.final, _NULLABLE)), False,
                        None if vc is None else (lambda v: None if v is None else {k: vc(x) for k, x in v.items()}))
        return self.node(t, stack)

    def union(self, branches: list[Any], stack: tuple[str, ...]) -> Node:
        others = [b for b in branches if b != "null"]
        has_null = len(others) < len(branches)
        if not others:
            return Node(pa.null(), pa.null(), True)
        if len(others) == 1:
            n = self.node(others[0], stack)
            return Node(n.raw, n.final, True, n.convert)
        kinds = [self._kind(b) for b in others]
        if set(kinds) == {"int", "long"} and len(kinds) == 2:
            return Node(pa.int64(), pa.int64(), has_null)
        if set(kinds) == {"float", "double"} and len(kinds) == 2:
            return Node(pa.float64(), pa.float64(), has_null)
        nodes = [self.node(b, stack) for b in others]
        names = [self._name(b) for b in others]
        match = _branch_matcher(kinds, names)
        convs = [n.convert for n in nodes]
        width = len(nodes)

        def conv(v: Any) -> Any:
            if v is None:
                return None
            i, v = match(v)
            out: list[Any] = [None] * width
            c = convs[i]
            out[i] = v if c is None else c(v)
            return {f"member{j}": x for j, x in enumerate(out)}

        return Node(pa.struct([pa.field(f"member{i}", n.raw, True) for i, n in enumerate(nodes)]),
                    pa.struct([pa.field(f"member{i}", n.final, True) for i, n in enumerate(nodes)]), True, conv)

    def _resolve(self, s: Any) -> Any:
        while isinstance(s, str) and s in self.names:
            s = self.names[s]
        while isinstance(s, dict) and not isinstance(s.get("type"), str):
            s = s["type"]
        return s

    def _kind(self, s: Any) -> str:
        r = self._resolve(s)
        if isinstance(r, str):
            return r
        if isinstance(r, list):
            return "union"
        if r.get("logicalType") == "decimal":
            return "decimal"
        return str(r["type"])

    def _name(self, s: Any) -> str | None:
        r = self._resolve(s)
        return r.get("name") if isinstance(r, dict) and r.get("type") in ("record", "enum", "fixed") else None


def _branch_matcher(kinds: list[str], names: list[str | None]) -> Callable[[Any], tuple[int, Any]]:
    """Which branch of a union a value fastavro returned belongs to (fastavro is asked to tag named
    types with their name where a union holds more than one)."""
    by_name = {n: i for i, n in enumerate(names) if n is not None}
    by_kind: dict[type, int] = {}
    for i, k in enumerate(kinds):
        py: tuple[type, ...] = {"boolean": (bool,), "int": (int,), "long": (int,), "float": (float,),
                                "double": (float,), "string": (str,), "enum": (str,), "bytes": (bytes,),
                                "fixed": (bytes,), "record": (dict,), "map": (dict,), "array": (list,),
                                "decimal": (bytes,)}.get(k, ())
        for t in py:
            by_kind.setdefault(t, i)

    def match(v: Any) -> tuple[int, Any]:
        if isinstance(v, tuple) and len(v) == 2 and v[0] in by_name:
            return by_name[v[0]], v[1]
        i = by_kind.get(type(v))
        if i is None:
            raise ValueError(f"no union branch for a {type(v).__name__}")
        return i, v

    return match


def avro_arrow_type(schema: str | dict[str, Any] | list[Any], named: dict[str, Any] | None = None) -> Node:
    """The Arrow types of an Avro schema (JSON text or parsed), as :class:`Node`."""
    import fastavro

    names: dict[str, Any] = dict(named or {})
    obj = json.loads(schema) if isinstance(schema, str) else schema
    parsed = fastavro.parse_schema(obj, named_schemas=names, _write_hint=False)
    return _Types(names).node(parsed)


@dataclass
class _Parsed:
    fastavro: Any  # the parsed, stripped schema fastavro reads with
    named: dict[str, Any]  # its named types


class AvroDecoder:
    """Decodes a column of Confluent-Avro bytes of one subject: each record by its writer schema
    (its id, from ``registry``) resolved to ``reader``. Picklable (caches are rebuilt)."""

    def __init__(self, registry: SchemaRegistry, reader: RegisteredSchema) -> None:
        self.registry = registry
        self.reader = reader
        self._cache: dict[int, _Parsed] = {}
        self._pairs: dict[int, tuple[Any, Any] | None] = {}
        self._node: Node | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"registry": self.registry, "reader": self.reader}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["registry"], state["reader"])  # type: ignore[misc]

    # --- schemas -----------------------------------------------------------------------------
    def _parse(self, rs: RegisteredSchema, *, strip: bool, names: dict[str, Any], seen: tuple[int, ...] = ()) -> Any:
        """``rs`` parsed (after its references, into ``names``)."""
        import fastavro

        if rs.schema_type != "AVRO":
            raise SchemaRegistryError(f"schema id {rs.id} (subject {rs.subject!r} version {rs.version}) is "
                                      f"{rs.schema_type}, not AVRO")
        for _ref, target in self.registry.referenced(rs):
            if target.id not in seen:
                self._parse(target, strip=strip, names=names, seen=(*seen, target.id))
        try:
            obj = json.loads(rs.schema)
            return fastavro.parse_schema(_strip(obj) if strip else obj, named_schemas=names)
        except Exception as exc:  # noqa: BLE001 - fastavro raises many kinds for a bad schema
            raise SchemaRegistryError(f"schema id {rs.id} (subject {rs.subject!r} version {rs.version}) does not "
                                      f"parse as Avro: {type(exc).__name__}: {exc}") from None

    def parsed(self, rs: RegisteredSchema) -> _Parsed:
        p = self._cache.get(rs.id)
        if p is None:
            stripped: dict[str, Any] = {}
            p = self._cache[rs.id] = _Parsed(self._parse(rs, strip=True, names=stripped), stripped)
        return p

    def node(self) -> Node:
        """The reader schema's Arrow types."""
        if self._node is None:
            names: dict[str, Any] = {}
            parsed = self._parse(self.reader, strip=False, names=names)
            self._node = _Types(names).node(parsed)
        return self._node

    @property
    def arrow_type(self) -> pa.DataType:
        return self.node().final

    # --- records -----------------------------------------------------------------------------
    def decode_one(self, data: bytes) -> tuple[int, Any]:
        """``(schema id, value)`` of one record's bytes, fastavro's value (logical dates and times as
        ints); raises ValueDecodeError/UnknownSchemaError without a location."""
        import fastavro

        sid = wire_schema_id(data)
        rs = self.registry.by_id(sid)
        if rs is None:
            raise UnknownSchemaError(f"schema id {sid} is not in {self.registry.where}")
        try:
            writer = self.parsed(rs).fastavro
        except SchemaRegistryError as exc:
            raise UnknownSchemaError(exc.detail) from None
        reader = None if rs.id == self.reader.id else self.parsed(self.reader).fastavro
        try:
            value = fastavro.schemaless_reader(io.BytesIO(data[WIRE_HEADER:]), writer, reader,
                                               return_named_type=True, return_named_type_override=True)
        except Exception as exc:  # noqa: BLE001 - fastavro's errors: EOFError, SchemaResolutionError, ...
            raise ValueDecodeError(f"schema id {sid}: the bytes do not parse as Avro of subject "
                                   f"{rs.subject!r} version {rs.version} read as version {self.reader.version}: "
                                   f"{type(exc).__name__}: {exc}") from None
        return sid, value

    def _readers(self, sid: int) -> tuple[Any, Any] | None:
        """``(writer, reader)`` parsed schemas for records with schema id ``sid`` (reader None: the
        same schema), or None when ``sid`` does not decode (:meth:`decode_one` says why)."""
        try:
            return self._pairs[sid]
        except KeyError:
            pass
        rs = self.registry.by_id(sid)
        pair = None
        if rs is not None:
            try:
                pair = (self.parsed(rs).fastavro, None if rs.id == self.reader.id else self.parsed(self.reader).fastavro)
            except SchemaRegistryError:
                pair = None
        self._pairs[sid] = pair
        return pair

    def decode(self, column: pa.Array, offsets: pa.Array, *, topic: str, partition: int, what: str,
               permissive: bool) -> pa.Array:
        """The column of decoded values (null for a null record; for a bad one under PERMISSIVE)."""
        import fastavro

        node = self.node()
        conv = node.convert
        out: list[Any] = []
        append = out.append
        read = fastavro.schemaless_reader
        readers = self._readers
        bytes_io = io.BytesIO
        for i, data in enumerate(column.to_pylist()):
            if data is None:
                append(None)
                continue
            # the fast path: a good header and a known schema; anything else goes to decode_one,
            # which raises the error that says why
            pair = readers(int.from_bytes(data[1:5], "big")) if len(data) >= WIRE_HEADER and data[0] == 0 else None
            try:
                if pair is None:
                    v = self.decode_one(data)[1]
                else:
                    try:
                        v = read(bytes_io(data[WIRE_HEADER:]), pair[0], pair[1], return_named_type=True,
                                 return_named_type_override=True)
                    except Exception:  # noqa: BLE001 - decode_one names the error
                        v = self.decode_one(data)[1]
                append(v if conv is None else conv(v))
            except ValueDecodeError as exc:
                if permissive:
                    append(None)
                    continue
                off = offsets[i].as_py()
                raise type(exc)(f"{what} of topic {topic!r} partition {partition} offset {off}: {exc.detail}") \
                    from None
            except ValueError as exc:  # a union branch not matched
                if permissive:
                    append(None)
                    continue
                raise ValueDecodeError(f"{what} of topic {topic!r} partition {partition} offset "
                                       f"{offsets[i].as_py()}: {exc}") from None
        return finish(pa.array(out, type=node.raw), node.final)


def json_value(v: Any, t: pa.DataType) -> Any:
    """A decoded value (``to_pylist`` of Arrow type ``t``) as JSON data: records as objects, maps as
    objects, bytes/fixed base64, decimals as strings, timestamps as epoch microseconds and dates as
    epoch days (what Spark stores), durations as microseconds, NaN/Infinity as strings."""
    import base64
    import datetime as dt
    import math
    from decimal import Decimal

    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float):
        return v if math.isfinite(v) else ("NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity"))
    if isinstance(v, dict):
        return {k: json_value(x, t.field(k).type) for k, x in v.items()}
    if isinstance(v, list):
        if pa.types.is_map(t):
            return {k: json_value(x, t.item_type) for k, x in v}
        return [json_value(x, t.value_type) for x in v]
    if isinstance(v, (bytes, bytearray)):
        return base64.b64encode(v).decode()
    if isinstance(v, Decimal):
        return format(v, "f")
    if isinstance(v, dt.timedelta):
        return v // dt.timedelta(microseconds=1)
    if isinstance(v, dt.datetime):
        when = v if v.tzinfo is not None else v.replace(tzinfo=dt.timezone.utc)
        return (when - dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)) // dt.timedelta(microseconds=1)
    if isinstance(v, dt.date):
        return (v - dt.date(1970, 1, 1)).days
    raise TypeError(f"no JSON form for {type(v).__name__}")


class WriterSchemaJson:
    """Each record decoded by its own writer schema (no reader schema: what ``KafkaAvroDeserializer``
    returns without one) as :func:`json_value` data; for ``klog dump --value-decoder confluent-avro``."""

    def __init__(self, registry: SchemaRegistry) -> None:
        self.registry = registry
        self._decoders: dict[int, AvroDecoder] = {}

    def decode(self, data: bytes) -> Any:
        """The JSON data of one record's bytes; ValueDecodeError (no location) if they do not decode."""
        if len(data) >= WIRE_HEADER and data[0] == 0:
            sid = int.from_bytes(data[1:5], "big")
            dec = self._decoders.get(sid)
            if dec is None:
                rs = self.registry.by_id(sid)
                if rs is None:
                    raise UnknownSchemaError(f"schema id {sid} is not in {self.registry.where}")
                try:
                    dec = self._decoders[sid] = AvroDecoder(self.registry, rs)
                    dec.node()
                except SchemaRegistryError as exc:
                    del self._decoders[sid]
                    raise UnknownSchemaError(exc.detail) from None
        else:
            dec = AvroDecoder(self.registry, RegisteredSchema("", 0, -1, '"null"'))
        _, v = dec.decode_one(data)  # raises for a short value or a bad magic byte
        node = dec.node()
        try:
            if node.convert is not None:
                v = node.convert(v)
            arr = pa.array([v], type=node.raw)
        except (ValueError, TypeError, pa.ArrowException) as exc:
            raise ValueDecodeError(f"schema id {dec.reader.id}: {exc}") from None
        return json_value(finish(arr, node.final).to_pylist()[0], node.final)
