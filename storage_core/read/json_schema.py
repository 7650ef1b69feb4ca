"""Confluent JSON Schema values (``valueFormat=confluent-json``) → Arrow, typed by the subject's latest schema.

Confluent's ``KafkaJsonSchemaSerializer`` writes magic byte 0, the schema id (4 bytes, big-endian)
and the value as UTF-8 JSON. JSON carries its own field names, so the writer schema is only checked
(its id must be in ``_schemas`` and be a JSON schema); each value is read into the column type that
the reader schema (the subject's latest) gives, fields it lacks null, fields it does not know
dropped. Spark has no JSON Schema mapping of its own; klog's:

=====================================================  =============================================
JSON Schema                                            Arrow (Spark)
=====================================================  =============================================
``object`` with ``properties``                         struct of the properties (all nullable)
``object`` with only ``additionalProperties: S``       map<string, S>
``array`` with ``items: S``                            list<S>
``string`` (any ``format``), string ``enum``/``const``  string
``integer`` / ``number`` / ``boolean``                 int64 / float64 / bool
``[T, "null"]``, ``oneOf``/``anyOf`` of one type + null  T, nullable
``$ref`` (``#/definitions``, ``#/$defs``, references)  the referenced schema
``allOf`` of objects                                   struct of all their properties
anything else (several types, ``{}``, ``true``)        string: the value's JSON text
=====================================================  =============================================

A value whose JSON does not fit the column type (a string where the schema says integer) fails
the read (or is null under ``mode=PERMISSIVE``); the JSON Schema is not otherwise validated.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from storage_core.errors import SchemaRegistryError, UnknownSchemaError, ValueDecodeError
from storage_core.read.schema_registry import WIRE_HEADER, RegisteredSchema, SchemaRegistry, wire_schema_id

__all__ = ["JsonSchemaDecoder", "WriterJson", "json_schema_type"]

Convert = Callable[[Any], Any]


def _json_text(v: Any) -> Any:
    return None if v is None else json.dumps(v, separators=(",", ":"), ensure_ascii=False)


def _check(kind: type | tuple[type, ...], name: str) -> Convert:
    def conv(v: Any) -> Any:
        if v is None:
            return None
        ok = isinstance(v, bool) if name == "boolean" else isinstance(v, kind) and not isinstance(v, bool)
        if not ok:
            raise ValueError(f"{json.dumps(v)[:60]} is not a JSON {name}")
        return float(v) if name == "number" else v
    return conv


class _Types:
    def __init__(self, root: Any, refs: dict[str, Any]) -> None:
        self.root = root
        self.refs = refs

    def _deref(self, ref: str, stack: tuple[str, ...]) -> Any:
        if ref in stack:
            raise SchemaRegistryError(f"recursive JSON schema $ref {ref!r} has no Spark type")
        if ref.startswith("#/"):
            node = self.root
            for part in ref[2:].split("/"):
                if not isinstance(node, dict) or part not in node:
                    raise SchemaRegistryError(f"JSON schema $ref {ref!r} points at nothing")
                node = node[part]
            return node
        base, _, frag = ref.partition("#")
        if base in self.refs:
            target = self.refs[base]
            sub = _Types(target, self.refs)
            return sub._deref("#" + frag, stack) if frag else target
        raise SchemaRegistryError(f"JSON schema $ref {ref!r} is neither local nor a schema reference")

    def node(self, s: Any, stack: tuple[str, ...] = ()) -> tuple[pa.DataType, Convert]:
        if not isinstance(s, dict):
            return pa.string(), _json_text
        if "$ref" in s:
            return self.node(self._deref(s["$ref"], stack), (*stack, s["$ref"]))
        for key in ("oneOf", "anyOf"):
            if key in s:
                alts = [a for a in s[key] if not (isinstance(a, dict) and a.get("type") == "null")]
                return self.node(alts[0], stack) if len(alts) == 1 else (pa.string(), _json_text)
        if "allOf" in s:
            parts = [self._deref(a["$ref"], stack) if isinstance(a, dict) and "$ref" in a else a for a in s["allOf"]]
            if all(isinstance(p, dict) and ("properties" in p or p.get("type") == "object") for p in parts):
                merged: dict[str, Any] = {}
                for p in parts:
                    merged.update(p.get("properties", {}))
                return self.node({"type": "object", "properties": merged}, stack)
            return pa.string(), _json_text
        t = s.get("type")
        if isinstance(t, list):
            others = [x for x in t if x != "null"]
            if len(others) != 1:
                return pa.string(), _json_text
            t = others[0]
        if t is None and ("enum" in s or "const" in s):
            symbols = s.get("enum", [s.get("const")])
            if isinstance(symbols, list) and all(isinstance(x, str) for x in symbols):
                return pa.string(), _check(str, "string")
            return pa.string(), _json_text
        if t == "string":
            return pa.string(), _check(str, "string")
        if t == "integer":
            return pa.int64(), _check(int, "integer")
        if t == "number":
            return pa.float64(), _check((int, float), "number")
        if t == "boolean":
            return pa.bool_(), _check(bool, "boolean")
        if t == "array":
            item_t, item_c = self.node(s.get("items", {}), stack)

            def conv_list(v: Any) -> Any:
                if v is None:
                    return None
                if not isinstance(v, list):
                    raise ValueError(f"{json.dumps(v)[:60]} is not a JSON array")
                return [item_c(x) for x in v]
            return pa.list_(item_t), conv_list
        if t == "object" or "properties" in s:
            props = s.get("properties")
            if not props:
                extra = s.get("additionalProperties")
                if isinstance(extra, dict):
                    vt, vc = self.node(extra, stack)

                    def conv_map(v: Any) -> Any:
                        if v is None:
                            return None
                        if not isinstance(v, dict):
                            raise ValueError(f"{json.dumps(v)[:60]} is not a JSON object")
                        return [(k, vc(x)) for k, x in v.items()]
                    return pa.map_(pa.string(), vt), conv_map
                return pa.string(), _json_text
            fields = [(name, *self.node(sub, stack)) for name, sub in props.items()]

            def conv_obj(v: Any) -> Any:
                if v is None:
                    return None
                if not isinstance(v, dict):
                    raise ValueError(f"{json.dumps(v)[:60]} is not a JSON object")
                return {name: c(v.get(name)) for name, _, c in fields}
            return pa.struct([pa.field(n, ft, True) for n, ft, _ in fields]), conv_obj
        return pa.string(), _json_text


def json_schema_type(schema: str | dict[str, Any], refs: dict[str, Any] | None = None) -> pa.DataType:
    obj = json.loads(schema) if isinstance(schema, str) else schema
    return _Types(obj, refs or {}).node(obj)[0]


class JsonSchemaDecoder:
    """Decodes a column of Confluent JSON Schema bytes of one subject (picklable)."""

    def __init__(self, registry: SchemaRegistry, reader: RegisteredSchema) -> None:
        self.registry = registry
        self.reader = reader
        self._node: tuple[pa.DataType, Convert] | None = None
        self._ok: dict[int, str | None] = {}  # schema id -> why it cannot be a writer schema (None: it can)

    def __getstate__(self) -> dict[str, Any]:
        return {"registry": self.registry, "reader": self.reader}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["registry"], state["reader"])  # type: ignore[misc]

    def _parsed(self, rs: RegisteredSchema, seen: tuple[int, ...] = ()) -> tuple[Any, dict[str, Any]]:
        if rs.schema_type != "JSON":
            raise SchemaRegistryError(f"schema id {rs.id} (subject {rs.subject!r} version {rs.version}) is "
                                      f"{rs.schema_type}, not JSON")
        refs: dict[str, Any] = {}
        for ref, target in self.registry.referenced(rs):
            if target.id not in seen:
                refs[ref.name], more = self._parsed(target, (*seen, target.id))
                refs.update(more)
        try:
            return json.loads(rs.schema), refs
        except ValueError as exc:
            raise SchemaRegistryError(f"schema id {rs.id} (subject {rs.subject!r} version {rs.version}) does not "
                                      f"parse as JSON: {exc}") from None

    def node(self) -> tuple[pa.DataType, Convert]:
        if self._node is None:
            root, refs = self._parsed(self.reader)
            self._node = _Types(root, refs).node(root)
        return self._node

    @property
    def arrow_type(self) -> pa.DataType:
        return self.node()[0]

    def _writer_problem(self, sid: int) -> str | None:
        if sid not in self._ok:
            rs = self.registry.by_id(sid)
            if rs is None:
                self._ok[sid] = f"schema id {sid} is not in {self.registry.where}"
            else:
                try:
                    self._parsed(rs)
                    self._ok[sid] = None
                except SchemaRegistryError as exc:
                    self._ok[sid] = exc.detail
        return self._ok[sid]

    def decode_one(self, data: bytes) -> tuple[int, Any]:
        """``(schema id, parsed JSON)``; ValueDecodeError/UnknownSchemaError without a location."""
        sid = wire_schema_id(data)
        problem = self._writer_problem(sid)
        if problem is not None:
            raise UnknownSchemaError(problem)
        try:
            return sid, json.loads(data[WIRE_HEADER:])
        except (ValueError, UnicodeDecodeError) as exc:
            raise ValueDecodeError(f"schema id {sid}: the bytes are not JSON: {exc}") from None

    def decode(self, column: pa.Array, offsets: pa.Array, *, topic: str, partition: int, what: str,
               permissive: bool) -> pa.Array:
        arrow_type, conv = self.node()
        out: list[Any] = []
        for i, data in enumerate(column.to_pylist()):
            if data is None:
                out.append(None)
                continue
            try:
                sid, v = self.decode_one(data)
                try:
                    out.append(conv(v))
                except ValueError as exc:
                    raise ValueDecodeError(f"schema id {sid}: the value does not fit subject {self.reader.subject!r} "
                                           f"version {self.reader.version}: {exc}") from None
            except ValueDecodeError as exc:
                if permissive:
                    out.append(None)
                    continue
                raise type(exc)(f"{what} of topic {topic!r} partition {partition} offset {offsets[i].as_py()}: "
                                f"{exc.detail}") from None
        return pa.array(out, type=arrow_type)


class WriterJson:
    """``klog dump --value-decoder confluent-json``: each value's JSON, its writer schema id checked."""

    def __init__(self, registry: SchemaRegistry) -> None:
        self._dec = JsonSchemaDecoder(registry, RegisteredSchema("", 0, -1, "{}", "JSON"))

    def decode(self, data: bytes) -> Any:
        return self._dec.decode_one(data)[1]
