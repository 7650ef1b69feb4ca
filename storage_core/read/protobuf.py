"""Confluent Protobuf values (``valueFormat=confluent-protobuf``) → Arrow, typed as Spark's
``from_protobuf`` types them; the ``.proto`` schemas and their references from ``_schemas``.

Confluent's ``KafkaProtobufSerializer`` writes magic byte 0, the schema id (4 bytes, big-endian),
the *message indexes* and then the message's protobuf binary. The indexes say which message of the
schema's ``.proto`` file the record is: a count and that many indexes, each a zigzag varint, the
first into the file's top-level messages and each next one into the previous message's nested
messages, in the order the registered text declares them (:func:`message_tree`); the common
``[0]`` (the file's first message) is written as the single count 0.

Schemas are ``.proto`` text (maps as Confluent prints them, explicit ``map_entry`` messages, are
read as the ``map<K, V>`` fields they stand for: :func:`maps_as_declared`). Each ``import`` is either one of the schema's references (the import
path is the reference's name; references may import others) or one of protobuf's well-known files
(``google/protobuf/*.proto``, which Confluent never registers). klog compiles them with ``protoc``
itself (the ``grpcio-tools`` package, extra ``klog[protobuf]``), once per schema id and process,
into a ``FileDescriptorSet`` that protobuf's own runtime parses records with.

The column's message is the first message of the subject's latest schema (Spark's
``from_protobuf`` also reads one message type). Each record's message, by its writer schema's id
and message indexes, must have the same full name; its bytes are then parsed with the *reader's*
descriptor, so fields match by number and evolve as protobuf defines (unknown fields ignored,
missing ones absent). Types, as Spark's ``SchemaConverters`` gives them:

========================================  ==============================================================
Protobuf                                  Arrow (Spark)
========================================  ==============================================================
int32, sint32, sfixed32, uint32, fixed32  int32 (unsigned ones keep their 32 bits: 2^32-1 reads -1)
int64, sint64, sfixed64, uint64, fixed64  int64 (likewise)
float, double, bool, string, bytes        float32, float64, bool, string, binary
enum                                      string: the value's name (``UNKNOWN_ENUM_VALUE_<Enum>_<n>``)
message ``Timestamp`` (seconds, nanos)    timestamp(us, UTC) (TimestampType)
message ``Duration`` (seconds, nanos)     duration(us) (DayTimeIntervalType)
other message (``Any``, wrappers, ...)    struct of its fields; one with no fields is left out
``repeated T`` / ``map<K, V>``            list<T> / map<K, V>
recursive message                         refused, as Spark refuses it
========================================  ==============================================================

A field reads null unless it is repeated (an empty list or map), has an explicit proto2 default,
or is set: ``has`` for fields with presence (messages, oneof members, ``optional``, proto2), a
value other than the default for proto3's plain scalars (Spark's rule, ``emit.default.values``
off). Map keys and values are read as they are.
"""

from __future__ import annotations

import importlib.util
import keyword
import math
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from storage_core.errors import (
    InvalidOptionError,
    InvalidRecordError,
    SchemaRegistryError,
    UnknownSchemaError,
    ValueDecodeError,
)
from storage_core.read.schema_registry import WIRE_HEADER, RegisteredSchema, SchemaRegistry, wire_schema_id
from storage_core.record.varint import MAX_VARINT_BYTES, read_varint

__all__ = ["CompiledSchema", "MessageTree", "ProtobufDecoder", "WriterProtobufJson", "compile_schema",
           "maps_as_declared", "message_indexes", "message_tree", "require_protoc"]

Convert = Callable[[Any], Any]

#: The name the compiled schema's own file gets (a reference's name is its import path).
_ROOT_FILE = "__klog_schema_{id}.proto"
_WELL_KNOWN = "google/protobuf/"
#: protobuf's FieldDescriptor.TYPE_* codes
_DOUBLE, _FLOAT, _INT64, _UINT64, _INT32, _FIXED64, _FIXED32, _BOOL, _STRING, _GROUP, _MESSAGE, _BYTES, \
    _UINT32, _ENUM, _SFIXED32, _SFIXED64, _SINT32, _SINT64 = range(1, 19)
_ARROW = {_DOUBLE: pa.float64(), _FLOAT: pa.float32(), _INT64: pa.int64(), _UINT64: pa.int64(),
          _INT32: pa.int32(), _FIXED64: pa.int64(), _FIXED32: pa.int32(), _BOOL: pa.bool_(),
          _STRING: pa.string(), _BYTES: pa.binary(), _UINT32: pa.int32(), _ENUM: pa.string(),
          _SFIXED32: pa.int32(), _SFIXED64: pa.int64(), _SINT32: pa.int32(), _SINT64: pa.int64()}


def require_protoc(what: str) -> None:
    """An :class:`InvalidOptionError` before any work when protobuf's compiler is not installed."""
    if importlib.util.find_spec("grpc_tools") is None or importlib.util.find_spec("google.protobuf") is None:
        raise InvalidOptionError(f"{what}=confluent-protobuf compiles the .proto schemas with protoc, from the "
                                 "grpcio-tools package: pip install 'klog[protobuf]'")


# --- the wire ------------------------------------------------------------------------------------
def _index_varint(data: bytes, pos: int) -> tuple[int, int]:
    """One zigzag varint of the message indexes: Kafka's ``ByteUtils.readVarint``, which Confluent's
    ``MessageIndexes.readFrom`` reads them with."""
    try:
        return read_varint(data, pos)
    except InvalidRecordError:
        where = "run past the end of the value" if len(data) - pos < MAX_VARINT_BYTES else \
            f"hold a varint longer than {MAX_VARINT_BYTES} bytes"
        raise ValueDecodeError(f"the message indexes {where}") from None


def message_indexes(data: bytes, pos: int = WIRE_HEADER) -> tuple[tuple[int, ...], int]:
    """The message indexes after the header of a Confluent Protobuf value, and where the message starts."""
    count, pos = _index_varint(data, pos)
    if count == 0:
        return (0,), pos
    if count < 0 or count > 256:
        raise ValueDecodeError(f"{count} message indexes (expected 0 for the first message, or 1 to 256)")
    out = []
    for _ in range(count):
        i, pos = _index_varint(data, pos)
        if i < 0:
            raise ValueDecodeError(f"message index {i} is negative")
        out.append(i)
    return tuple(out), pos


# --- schemas -------------------------------------------------------------------------------------
_MESSAGE_OPEN = re.compile(r"\bmessage\s+(\w+)\s*\{")
_MAP_ENTRY = re.compile(r"\boption\s+map_entry\s*=\s*true\s*;")
_ENTRY_FIELD = re.compile(r"(?:^|[;{}\s])(?:optional\s+)?([\w.]+)\s+(key|value)\s*=\s*([12])\b")


def _masked(text: str) -> str:
    """``text`` with its comments and string literals blanked (same length), so braces count true."""
    return re.sub(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'',
                  lambda m: " " * len(m.group(0)), text, flags=re.S)


def _close(masked: str, open_brace: int) -> int:
    """The index of the brace closing the one at ``open_brace``."""
    depth = 0
    for i in range(open_brace, len(masked)):
        if masked[i] == "{":
            depth += 1
        elif masked[i] == "}":
            depth -= 1
            if depth == 0:
                return i
    raise SchemaRegistryError("a message's braces do not close")


def maps_as_declared(text: str) -> str:
    """``text`` with each explicit map-entry message (``message XEntry { option map_entry = true; K key =
    1; V value = 2; }`` and the ``repeated XEntry f = n;`` using it) written back as ``map<K, V> f = n;``.

    Confluent's registry prints maps that way (its canonical text of a schema is printed from the
    descriptors, where a map is such a message); protoc refuses an explicit ``map_entry``. The
    descriptors are the same either way."""
    while True:
        masked = _masked(text)
        found = None
        for m in _MESSAGE_OPEN.finditer(masked):
            end = _close(masked, m.end() - 1)
            body = masked[m.end():end]
            # the option must be the entry's own (not a message nested in it)
            if _MAP_ENTRY.search(body) and "{" not in body:
                found = (m.start(), end + 1, m.group(1), text[m.end():end])
                break
        if found is None:
            return text
        start, stop, name, body = found
        types = {kind: t for t, kind, _n in _ENTRY_FIELD.findall(body)}
        if set(types) != {"key", "value"}:
            raise SchemaRegistryError(f"map entry message {name} lacks a key = 1 or value = 2 field")
        # the enclosing message: the innermost unclosed brace before the entry
        depth, parent_open = 0, -1
        for i in range(start - 1, -1, -1):
            if masked[i] == "}":
                depth += 1
            elif masked[i] == "{":
                if depth == 0:
                    parent_open = i
                    break
                depth -= 1
        if parent_open < 0:
            raise SchemaRegistryError(f"map entry message {name} is not nested in a message")
        parent_close = _close(masked, parent_open)
        inner = text[parent_open + 1:start] + text[stop:parent_close]
        field = re.compile(r"\brepeated\s+(?:[\w.]*\.)?" + re.escape(name) + r"\s+(\w+)\s*=")
        inner, n = field.subn(f"map<{types['key']}, {types['value']}> \\1 =", inner)
        if n != 1:
            raise SchemaRegistryError(f"map entry message {name} is used by {n} fields, expected one")
        text = text[:parent_open + 1] + inner + text[parent_close:]


#: A file's messages in the order its text declares them, each with its nested messages.
MessageTree = tuple[tuple[str, "MessageTree"], ...]


def message_tree(text: str) -> MessageTree:
    """The messages ``text`` declares, in its order (enums left out), each with its nested ones: what
    message indexes count, as Confluent's ``ProtobufSchema.toMessageName`` counts them (an explicit
    map-entry message is one of them)."""
    masked = _masked(text)
    root: list[tuple[str, list[Any]]] = []
    stack: list[tuple[int, list[tuple[str, list[Any]]]]] = [(len(masked), root)]  # (end, children)
    for m in _MESSAGE_OPEN.finditer(masked):
        while m.start() > stack[-1][0]:
            stack.pop()
        end = _close(masked, m.end() - 1)
        children: list[tuple[str, list[Any]]] = []
        stack[-1][1].append((m.group(1), children))
        stack.append((end, children))

    def freeze(nodes: list[tuple[str, list[Any]]]) -> MessageTree:
        return tuple((name, freeze(kids)) for name, kids in nodes)
    return freeze(root)


@dataclass(frozen=True)
class CompiledSchema:
    """One registered ``.proto`` schema compiled by protoc: its descriptors (with everything it
    imports), its package and its messages as its text declares them."""

    schema_id: int
    descriptor_set: bytes  # a serialized FileDescriptorSet, the schema's file among them
    package: str
    messages: MessageTree

    def message_name(self, indexes: tuple[int, ...]) -> str:
        """The full name of the message at ``indexes``; ValueDecodeError if there is none."""
        level = self.messages
        names = [self.package] if self.package else []
        for depth, i in enumerate(indexes):
            if i >= len(level):
                raise ValueDecodeError(f"message indexes {list(indexes)} point past the {len(level)} "
                                       f"{'top-level' if depth == 0 else 'nested'} messages of schema id "
                                       f"{self.schema_id}")
            names.append(level[i][0])
            level = level[i][1]
        return ".".join(names)


def _write_sources(registry: SchemaRegistry, rs: RegisteredSchema, into: Path, name: str,
                   seen: dict[str, int]) -> None:
    if rs.schema_type != "PROTOBUF":
        raise SchemaRegistryError(f"schema id {rs.id} (subject {rs.subject!r} version {rs.version}) is "
                                  f"{rs.schema_type}, not PROTOBUF")
    if name in seen:
        if seen[name] != rs.id:
            raise SchemaRegistryError(f"import {name!r} names two schemas (ids {seen[name]} and {rs.id})")
        return
    seen[name] = rs.id
    if os.path.isabs(name) or ".." in Path(name).parts or "\\" in name:
        raise SchemaRegistryError(f"schema id {rs.id}: reference name {name!r} is not a relative import path")
    path = into / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(maps_as_declared(rs.schema), encoding="utf-8")
    for ref, target in registry.referenced(rs):
        if ref.name.startswith(_WELL_KNOWN):
            continue  # protoc's own copy, as Confluent's built-in dependencies
        _write_sources(registry, target, into, ref.name, seen)


def _well_known_dir() -> str:
    import grpc_tools

    return os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")


def compile_schema(registry: SchemaRegistry, rs: RegisteredSchema) -> CompiledSchema:
    """``rs`` and the schemas it references compiled by protoc; SchemaRegistryError naming the schema
    and protoc's complaint if they do not compile."""
    from google.protobuf import descriptor_pb2

    require_protoc("valueFormat")
    with tempfile.TemporaryDirectory(prefix="klog-proto-") as tmp:
        src = Path(tmp) / "src"
        src.mkdir()
        root = _ROOT_FILE.format(id=rs.id)
        _write_sources(registry, rs, src, root, {})
        out = Path(tmp) / "set.pb"
        proc = subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"--proto_path={src}",
                               f"--proto_path={_well_known_dir()}", "--include_imports",
                               f"--descriptor_set_out={out}", root],
                              capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            said = " ".join(line.replace(str(src) + os.sep, "") for line in proc.stderr.strip().splitlines()[-3:])
            raise SchemaRegistryError(f"schema id {rs.id} (subject {rs.subject!r} version {rs.version}) does not "
                                      f"compile as Protobuf: {said or f'protoc exited {proc.returncode}'}")
        raw = out.read_bytes()
    fds = descriptor_pb2.FileDescriptorSet.FromString(raw)
    own = next(f for f in fds.file if f.name == root)
    return CompiledSchema(rs.id, raw, own.package, message_tree(rs.schema))


# --- types ---------------------------------------------------------------------------------------
def _twos32(v: int) -> int:
    return v - (1 << 32) if v >= 1 << 31 else v


def _twos64(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


def _micros(msg: Any) -> int:
    nanos = int(msg.nanos)
    return int(msg.seconds) * 1_000_000 + (nanos // 1000 if nanos >= 0 else -(-nanos // 1000))


def _is_seconds_nanos(d: Any, name: str) -> bool:
    fields = d.fields
    return d.name == name and len(fields) == 2 and fields[0].name == "seconds" and fields[1].name == "nanos"


class _Types:
    """Arrow types and converters of a message's fields, by Spark's ``SchemaConverters``."""

    def message(self, d: Any, stack: tuple[str, ...]) -> tuple[pa.DataType, Convert] | None:
        if d.full_name in stack:
            raise SchemaRegistryError(f"message {d.full_name} is recursive ({' -> '.join((*stack, d.full_name))}); "
                                      "Spark's protobuf types have no recursive struct, and neither has klog")
        stack = (*stack, d.full_name)
        fields: list[tuple[str, pa.DataType, Any, Convert]] = []
        for fd in d.fields:
            t = self.field(fd, stack)
            if t is not None:
                fields.append((fd.name, t[0], fd, t[1]))
        if not fields and len(stack) > 1:
            return None  # Spark leaves out a field of a message with no fields

        conv_msg = _message_converter(d.full_name, [(fd, conv) for _n, _t, fd, conv in fields])
        return pa.struct([pa.field(name, t, True) for name, t, _fd, _c in fields]), conv_msg

    def value(self, fd: Any, stack: tuple[str, ...]) -> tuple[pa.DataType, Convert] | None:
        """The type and converter of one value of ``fd`` (an element, if repeated)."""
        t = fd.type
        if t in (_MESSAGE, _GROUP):
            m = fd.message_type
            if _is_seconds_nanos(m, "Timestamp"):
                return pa.timestamp("us", tz="UTC"), _micros
            if _is_seconds_nanos(m, "Duration"):
                return pa.duration("us"), _micros
            return self.message(m, stack)
        if t == _ENUM:
            enum = fd.enum_type
            names = {n: v.name for n, v in enum.values_by_number.items()}
            unknown = f"UNKNOWN_ENUM_VALUE_{enum.name}_"
            return pa.string(), lambda v: names.get(v) or unknown + str(v)
        if t in (_UINT32, _FIXED32):
            return pa.int32(), _twos32
        if t in (_UINT64, _FIXED64):
            return pa.int64(), _twos64
        return _ARROW[t], _identity

    def field(self, fd: Any, stack: tuple[str, ...]) -> tuple[pa.DataType, Convert] | None:
        if fd.is_repeated and fd.type == _MESSAGE and fd.message_type.GetOptions().map_entry:
            entry = fd.message_type
            k = self.value(entry.fields_by_name["key"], stack)
            v = self.value(entry.fields_by_name["value"], stack)
            if k is None or v is None:
                return None
            kc, vc = k[1], v[1]

            def conv_map(m: Any) -> Any:
                return [(kc(key), vc(val)) for key, val in m.items()]
            return pa.map_(k[0], v[0]), conv_map
        one = self.value(fd, stack)
        if one is None:
            return None
        if fd.is_repeated:
            ec = one[1]
            if ec is _identity:
                return pa.list_(one[0]), list

            def conv_list(xs: Any) -> Any:
                return [ec(x) for x in xs]
            return pa.list_(one[0]), conv_list
        return one


def _identity(v: Any) -> Any:
    return v


def _message_converter(full_name: str, fields: list[tuple[Any, Convert]]) -> Convert:
    """A function from a message to its row (a dict), each field in Spark's form: null unless
    repeated, defaulted or set (``has`` for fields with presence; not the default for proto3's plain
    scalars, where -0.0 and NaN count as set). Generated as one expression per message type: a
    closure per field cost five times as much per record."""
    env: dict[str, Any] = {"_isneg": lambda v: math.copysign(1.0, v) < 0}
    items = []
    for i, (fd, conv) in enumerate(fields):
        name = fd.name
        get = f"m.{name}" if name.isidentifier() and not keyword.iskeyword(name) else f"getattr(m, {name!r})"
        if conv is _identity:
            value = get
        else:
            env[f"_c{i}"] = conv
            value = f"_c{i}({get})"
        if fd.is_repeated or fd.has_default_value:
            expr = value
        elif fd.has_presence:
            expr = f"({value} if m.HasField({name!r}) else None)"
        elif fd.type in (_DOUBLE, _FLOAT):
            expr = f"({value} if ({get} != 0 or _isneg({get})) else None)"
        else:
            expr = f"({value} if {get} else None)"
        items.append(f"{name!r}: {expr}")
    source = "def convert(m):\n    return {" + ", ".join(items) + "}\n"
    code = compile(source, f"<klog protobuf converter of {full_name}>", "exec")
    exec(code, env)  # noqa: S102 - the source is built above from field names repr()'d and fixed templates
    return env["convert"]  # type: ignore[no-any-return]


# --- decoding ------------------------------------------------------------------------------------
class ProtobufDecoder:
    """Decodes a column of Confluent Protobuf bytes of one subject into the reader's message (the
    first of ``reader``, or ``message``, a full name). Picklable: the compiled schemas travel as
    descriptor sets, protoc runs again only for writer schemas a worker has not seen."""

    def __init__(self, registry: SchemaRegistry, reader: RegisteredSchema, message: str | None = None,
                 compiled: dict[int, CompiledSchema] | None = None) -> None:
        self.registry = registry
        self.reader = reader
        self._compiled: dict[int, CompiledSchema] = dict(compiled or {})
        self._message = message
        self._node: tuple[pa.DataType, Convert] | None = None
        self._cls: Any = None
        self._names: dict[tuple[int, tuple[int, ...]], str] = {}

    def __getstate__(self) -> dict[str, Any]:
        return {"registry": self.registry, "reader": self.reader, "message": self.message,
                "compiled": self._compiled}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(**state)  # type: ignore[misc]

    def compiled(self, rs: RegisteredSchema) -> CompiledSchema:
        c = self._compiled.get(rs.id)
        if c is None:
            c = self._compiled[rs.id] = compile_schema(self.registry, rs)
        return c

    @property
    def message(self) -> str:
        """The full name of the column's message."""
        if self._message is None:
            c = self.compiled(self.reader)
            if not c.messages:
                raise SchemaRegistryError(f"schema id {self.reader.id} (subject {self.reader.subject!r} version "
                                          f"{self.reader.version}) defines no message")
            self._message = c.message_name((0,))
        return self._message

    def _reader_class(self) -> Any:
        if self._cls is None:
            from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

            pool = descriptor_pool.DescriptorPool()
            for f in descriptor_pb2.FileDescriptorSet.FromString(self.compiled(self.reader).descriptor_set).file:
                pool.Add(f)
            try:
                d = pool.FindMessageTypeByName(self.message)
            except KeyError:
                raise SchemaRegistryError(f"message {self.message} is not in schema id {self.reader.id} (subject "
                                          f"{self.reader.subject!r} version {self.reader.version})") from None
            self._cls = message_factory.GetMessageClass(d)
        return self._cls

    def node(self) -> tuple[pa.DataType, Convert]:
        if self._node is None:
            node = _Types().message(self._reader_class().DESCRIPTOR, ())
            assert node is not None  # the root message is kept, fields or not
            self._node = node
        return self._node

    @property
    def arrow_type(self) -> pa.DataType:
        return self.node()[0]

    def _writer_message(self, sid: int, indexes: tuple[int, ...]) -> str:
        key = (sid, indexes)
        name = self._names.get(key)
        if name is None:
            rs = self.registry.by_id(sid)
            if rs is None:
                raise UnknownSchemaError(f"schema id {sid} is not in {self.registry.where}")
            try:
                c = self.compiled(rs)
            except SchemaRegistryError as exc:
                raise UnknownSchemaError(exc.detail) from None
            name = self._names[key] = c.message_name(indexes)
        return name

    def decode_one(self, data: bytes) -> tuple[int, Any]:
        """``(schema id, message)`` of one record's bytes; ValueDecodeError/UnknownSchemaError without
        a location."""
        from google.protobuf.message import DecodeError

        sid = wire_schema_id(data)
        indexes, start = message_indexes(data)
        name = self._writer_message(sid, indexes)
        if name != self.message:
            raise ValueDecodeError(f"schema id {sid}: the record is a {name}, not the column's {self.message} "
                                   f"(subject {self.reader.subject!r} version {self.reader.version})")
        try:
            return sid, self._reader_class().FromString(data[start:])
        except DecodeError as exc:
            raise ValueDecodeError(f"schema id {sid}: the bytes do not parse as {name}: {exc}") from None

    def decode(self, column: pa.Array, offsets: pa.Array, *, topic: str, partition: int, what: str,
               permissive: bool) -> pa.Array:
        """The column of decoded values (null for a null record; for a bad one under PERMISSIVE)."""
        arrow_type, conv = self.node()
        parse = self._reader_class().FromString
        good: set[bytes] = set()  # headers (magic, id, indexes [0]) already checked to be the column's message
        out: list[Any] = []
        append = out.append
        for i, data in enumerate(column.to_pylist()):
            if data is None:
                append(None)
                continue
            head = data[:6]
            try:
                if head in good:
                    try:
                        append(conv(parse(data[6:])))
                        continue
                    except Exception:  # noqa: BLE001 - decode_one says why, with the schema id
                        pass
                sid, msg = self.decode_one(data)
                if len(data) >= 6 and data[5] == 0:
                    good.add(head)
                append(conv(msg))
            except ValueDecodeError as exc:
                if permissive:
                    append(None)
                    continue
                raise type(exc)(f"{what} of topic {topic!r} partition {partition} offset {offsets[i].as_py()}: "
                                f"{exc.detail}") from None
        return pa.array(out, type=arrow_type)


class WriterProtobufJson:
    """``klog dump --value-decoder confluent-protobuf``: each value decoded as its own writer schema's
    message (what ``KafkaProtobufDeserializer`` returns), as :func:`~storage_core.read.avro.json_value`
    data."""

    def __init__(self, registry: SchemaRegistry) -> None:
        self.registry = registry
        self._compiled: dict[int, CompiledSchema] = {}  # by schema id: protoc runs once per writer schema
        self._decoders: dict[tuple[int, tuple[int, ...]], ProtobufDecoder] = {}

    def decode(self, data: bytes) -> Any:
        from storage_core.read.avro import json_value

        sid = wire_schema_id(data)
        indexes, _ = message_indexes(data)
        dec = self._decoders.get((sid, indexes))
        if dec is None:
            rs = self.registry.by_id(sid)
            if rs is None:
                raise UnknownSchemaError(f"schema id {sid} is not in {self.registry.where}")
            try:
                compiled = self._compiled.get(sid) or compile_schema(self.registry, rs)
                self._compiled[sid] = compiled
                dec = ProtobufDecoder(self.registry, rs, compiled.message_name(indexes), {sid: compiled})
                dec.node()
            except SchemaRegistryError as exc:
                raise UnknownSchemaError(exc.detail) from None
            self._decoders[(sid, indexes)] = dec
        arrow_type, conv = dec.node()
        _, msg = dec.decode_one(data)
        return json_value(pa.array([conv(msg)], type=arrow_type).to_pylist()[0], arrow_type)
