"""Reading Kafka's generated-message encoding by a :class:`~.schema.MessageSpec` (the rules of
Kafka's ``MessageDataGenerator``: what its generated ``read(Readable, short version)`` does).

- Fixed-width integers are big-endian; ``uint16`` and ``uint32`` unsigned; ``bool`` one byte
  (non-zero is true); ``float64`` an IEEE double; ``uuid`` 16 bytes, shown as Kafka's
  ``Uuid.toString()`` (URL-safe base64 without padding).
- Before the message's first flexible version: ``string`` is an int16 length (-1 null) and UTF-8;
  ``bytes`` an int32 length (-1 null); an array an int32 count (-1 null).
- From the first flexible version: compact forms, an unsigned varint of length + 1 (0 is null), and
  after the fields of each struct a tagged-field section: an unsigned varint count, then per field
  its tag, its size (unsigned varints) and its bytes.
- A nullable struct is one int8 first: -1 null, anything else present; in a tagged field it is an
  unsigned varint instead: 0 null, anything else present (the generated ``read`` of
  ``ConsumerGroupMemberMetadataValue.ClassicMemberMetadata``, which a 4.x broker writes as null for
  every member of the consumer protocol).

The result is the JSON of Kafka's generated ``*JsonConverter.write(message, version)``: field names
with a lower-case first letter, uuids as strings, bytes as standard base64, a field absent from the
version left out, a tagged field written only when it is not its default. Tags the schema does not
know are kept under ``_unknownTaggedFields`` (Kafka keeps them too, but its JSON drops them).
Any malformed input raises :class:`~storage_core.errors.MessageDecodeError`, naming the message,
its version, the field and the byte position.

:func:`write_message` is the other direction, by the same rules (the generated ``write(Writable, ...,
short version)``): the JSON :func:`read_message` returns, back to the bytes. A field absent from the
JSON is written as its default (a tagged field at its default is left out, as Kafka leaves it out);
a value that does not fit its field raises :class:`~storage_core.errors.MessageEncodeError`.
"""

from __future__ import annotations

import base64
import struct
from typing import Any

from storage_core.errors import MessageDecodeError, MessageEncodeError, UnknownMessageTypeError
from storage_core.record.messages.schema import FieldSpec, Kind, MessageSpec
from storage_core.record.text import java_utf8

#: The JSON of a decoded message (``JsonConverter.write``'s ObjectNode).
Json = dict[str, Any]

_FIXED = {
    "int8": struct.Struct(">b"),
    "int16": struct.Struct(">h"),
    "uint16": struct.Struct(">H"),
    "int32": struct.Struct(">i"),
    "uint32": struct.Struct(">I"),
    "int64": struct.Struct(">q"),
    "float64": struct.Struct(">d"),
}
MAX_UNSIGNED_VARINT_BYTES = 5


def uuid_string(raw: bytes) -> str:
    """Kafka's ``Uuid.toString()``: URL-safe base64 of the 16 bytes, without padding."""
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def b64(raw: bytes) -> str:
    """Standard base64 with padding (how Jackson writes a ``BinaryNode``)."""
    return base64.b64encode(raw).decode("ascii")


class Reader:
    """A cursor over the bytes of one message; every read names what it reads when it fails."""

    def __init__(self, data: bytes, what: str) -> None:
        self.data = data
        self.pos = 0
        self.what = what  # "OffsetCommitValue v3", for error messages

    def fail(self, detail: str) -> MessageDecodeError:
        return MessageDecodeError(f"{self.what}: {detail} (at byte {self.pos} of {len(self.data)})")

    def take(self, n: int, field: str) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise self.fail(f"field {field} needs {n} bytes, {len(self.data) - self.pos} left")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def fixed(self, type_: str, field: str) -> Any:
        s = _FIXED[type_]
        return s.unpack(self.take(s.size, field))[0]

    def unsigned_varint(self, field: str) -> int:
        result = 0
        for i in range(MAX_UNSIGNED_VARINT_BYTES):
            if self.pos >= len(self.data):
                raise self.fail(f"field {field}: premature end of an unsigned varint")
            b = self.data[self.pos]
            self.pos += 1
            result |= (b & 0x7F) << (7 * i)
            if not b & 0x80:
                return result
        raise self.fail(f"field {field}: unsigned varint longer than {MAX_UNSIGNED_VARINT_BYTES} bytes")

    def remaining(self) -> int:
        return len(self.data) - self.pos


def read_message(spec: MessageSpec, version: int, data: bytes) -> Json:
    """Decode ``data`` as ``spec`` at ``version``: Kafka's JsonConverter JSON of it.
    Raises :class:`UnknownMessageTypeError` for a version outside ``validVersions`` and
    :class:`MessageDecodeError` for bytes that do not parse."""
    if not spec.valid.contains(version):
        raise UnknownMessageTypeError(
            f"{spec.name} has no version {version} (klog knows versions {spec.valid}, from {spec.source})")
    reader = Reader(bytes(data), f"{spec.name} v{version}")
    return _read_struct(reader, spec.fields, version, spec.flexible.contains(version))


def _read_struct(r: Reader, fields: tuple[FieldSpec, ...], version: int, flexible: bool) -> Json:
    values: dict[str, Any] = {}
    tagged: dict[int, FieldSpec] = {}
    for f in fields:
        if not f.versions.contains(version):
            continue
        if f.tagged.contains(version):
            assert f.tag is not None
            tagged[f.tag] = f
            continue
        values[f.name] = _read_field(r, f, version, flexible)
    unknown: list[Json] = []
    if flexible:
        count = r.unsigned_varint("tagged fields count")
        last = -1
        for _ in range(count):
            tag = r.unsigned_varint("tag")
            if tag <= last:
                raise r.fail(f"tag {tag} follows tag {last}: tags must be ascending")
            last = tag
            size = r.unsigned_varint(f"size of tag {tag}")
            raw = r.take(size, f"tag {tag}")
            tf = tagged.get(tag)
            if tf is None:
                unknown.append({"tag": tag, "data": b64(raw)})
                continue
            sub = Reader(raw, f"{r.what} tagged field {tf.name}")
            value = _read_field(sub, tf, version, flexible, tagged=True)
            if sub.remaining():
                raise sub.fail(f"tagged field {tf.name} leaves {sub.remaining()} of its {size} bytes unread")
            if value != _default(tf, version):
                values[tf.name] = value
    # JsonConverter writes the fields in their declared order, tagged or not
    out: Json = {f.json_name: values[f.name] for f in fields if f.name in values}
    if unknown:
        out["_unknownTaggedFields"] = unknown
    return out


_NEW_STRUCT = object()  # a struct field's default: Kafka's ``new Struct()``, never equal to a decoded value


def _default(f: FieldSpec, version: int) -> Any:
    """What a tagged field is when absent (its ``default``, else the type's zero; a nullable field's
    zero is null, so a nullable array whose Kafka default is empty says ``default=()``). A struct's
    is a new struct, even where it is nullable (Kafka's JSON then prints a tagged null struct)."""
    if f.default is not None:
        return list(f.default) if isinstance(f.default, tuple) else f.default  # (): an empty array
    if f.kind is Kind.STRUCT:
        return _NEW_STRUCT
    if f.nullable.contains(version):
        return None
    if f.type.startswith("[]"):
        return []
    return {"bool": False, "string": "", "bytes": "", "uuid": uuid_string(bytes(16)),
            "float64": 0.0}.get(f.type, 0)


def _read_field(r: Reader, f: FieldSpec, version: int, flexible: bool, tagged: bool = False) -> Any:
    nullable = f.nullable.contains(version)
    kind = f.kind
    if kind is Kind.STRUCT:
        if nullable and (r.unsigned_varint(f.name) == 0 if tagged else r.fixed("int8", f.name) < 0):
            return None
        return _read_struct(r, f.fields, version, flexible)
    if kind in (Kind.ARRAY, Kind.STRUCT_ARRAY):
        n = r.unsigned_varint(f.name) - 1 if flexible else r.fixed("int32", f.name)
        if n < 0:
            if not nullable:
                raise r.fail(f"non-nullable field {f.name} was serialized as null")
            return None
        if n > r.remaining():
            raise r.fail(f"field {f.name}: array of {n} elements is longer than the {r.remaining()} bytes left")
        if kind is Kind.STRUCT_ARRAY:
            return [_read_struct(r, f.fields, version, flexible) for _ in range(n)]
        return [_read_primitive(r, f.element, f"{f.name}[{i}]", False, flexible) for i in range(n)]
    return _read_primitive(r, f.type, f.name, nullable, flexible)


def _read_primitive(r: Reader, type_: str, name: str, nullable: bool, flexible: bool) -> Any:
    if type_ in _FIXED:
        return r.fixed(type_, name)
    if type_ == "bool":
        return r.take(1, name)[0] != 0
    if type_ == "uuid":
        return uuid_string(r.take(16, name))
    if type_ == "string":
        n = r.unsigned_varint(name) - 1 if flexible else r.fixed("int16", name)
        if n < 0:
            if not nullable:
                raise r.fail(f"non-nullable field {name} was serialized as null")
            return None
        return java_utf8(r.take(n, name))  # Readable.readString: malformed bytes replaced, never refused
    if type_ == "bytes":
        n = r.unsigned_varint(name) - 1 if flexible else r.fixed("int32", name)
        if n < 0:
            if not nullable:
                raise r.fail(f"non-nullable field {name} was serialized as null")
            return None
        return b64(r.take(n, name))
    raise r.fail(f"field {name} has type {type_}, which klog cannot read")


# --- writing ---------------------------------------------------------------------------------------


def unsigned_varint(n: int) -> bytes:
    """Kafka's ``ByteUtils.writeUnsignedVarint``."""
    out = bytearray()
    while n & ~0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def uuid_bytes(text: str) -> bytes:
    """Kafka's ``Uuid.fromString``: the 16 bytes of a URL-safe base64 uuid (22 characters)."""
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if len(raw) != 16:
        raise MessageEncodeError(f"uuid {text!r} is {len(raw)} bytes, expected 16")
    return raw


def write_message(spec: MessageSpec, version: int, data: Json) -> bytes:
    """Encode ``data`` (the JSON :func:`read_message` returns, field names as Kafka's JSON spells them)
    as ``spec`` at ``version``; the inverse of :func:`read_message`."""
    if not spec.valid.contains(version):
        raise UnknownMessageTypeError(
            f"{spec.name} has no version {version} (klog knows versions {spec.valid}, from {spec.source})")
    out = bytearray()
    _write_struct(out, spec.fields, version, spec.flexible.contains(version), data, f"{spec.name} v{version}")
    return bytes(out)


def _write_struct(out: bytearray, fields: tuple[FieldSpec, ...], version: int, flexible: bool, data: Json,
                  what: str) -> None:
    known = {f.json_name for f in fields} | {"_unknownTaggedFields"}
    extra = sorted(set(data) - known)
    if extra:
        raise MessageEncodeError(f"{what}: no field {', '.join(extra)} (fields: {', '.join(f.json_name for f in fields)})")
    tagged: list[tuple[int, bytes]] = []
    for f in fields:
        if not f.versions.contains(version):
            if f.json_name in data and data[f.json_name] != _default(f, version):
                raise MessageEncodeError(f"{what}: field {f.json_name} is not in version {version} "
                                         f"(versions {f.versions})")
            continue
        value = data.get(f.json_name, _default(f, version))
        if f.tagged.contains(version):
            assert f.tag is not None
            if value is _NEW_STRUCT or value == _default(f, version):
                continue  # Kafka writes a tagged field only when it is not its default
            buf = bytearray()
            _write_field(buf, f, version, flexible, value, what, tagged=True)
            tagged.append((f.tag, bytes(buf)))
            continue
        _write_field(out, f, version, flexible, value, what)
    if flexible:
        for unknown in data.get("_unknownTaggedFields") or ():
            tagged.append((int(unknown["tag"]), base64.b64decode(unknown["data"])))
        tagged.sort()
        out += unsigned_varint(len(tagged))
        for tag, raw in tagged:
            out += unsigned_varint(tag) + unsigned_varint(len(raw)) + raw
    elif data.get("_unknownTaggedFields"):
        raise MessageEncodeError(f"{what}: tagged fields in version {version}, which is not flexible")


def _write_field(out: bytearray, f: FieldSpec, version: int, flexible: bool, value: Any, what: str,
                 tagged: bool = False) -> None:
    nullable = f.nullable.contains(version)
    name = f"{what} field {f.json_name}"
    if value is None and not nullable:
        raise MessageEncodeError(f"{name} is null, which version {version} does not allow")
    kind = f.kind
    if kind is Kind.STRUCT:
        if value is _NEW_STRUCT:
            value = {}
        if nullable:
            if value is None:
                out += unsigned_varint(0) if tagged else b"\xff"
                return
            out += unsigned_varint(1) if tagged else b"\x01"
        _write_struct(out, f.fields, version, flexible, value, name)
        return
    if kind in (Kind.ARRAY, Kind.STRUCT_ARRAY):
        if value is None:
            out += unsigned_varint(0) if flexible else _FIXED["int32"].pack(-1)
            return
        out += unsigned_varint(len(value) + 1) if flexible else _FIXED["int32"].pack(len(value))
        for i, v in enumerate(value):
            if kind is Kind.STRUCT_ARRAY:
                _write_struct(out, f.fields, version, flexible, v, f"{name}[{i}]")
            else:
                _write_primitive(out, f.element, f"{name}[{i}]", v, flexible)
        return
    _write_primitive(out, f.type, name, value, flexible)


def _write_primitive(out: bytearray, type_: str, name: str, value: Any, flexible: bool) -> None:
    try:
        if type_ in _FIXED:
            out += _FIXED[type_].pack(value)
        elif type_ == "bool":
            out.append(1 if value else 0)
        elif type_ == "uuid":
            out += uuid_bytes(value)
        elif type_ in ("string", "bytes"):
            if value is None:
                out += unsigned_varint(0) if flexible else _FIXED["int16" if type_ == "string" else "int32"].pack(-1)
                return
            raw = value.encode("utf-8") if type_ == "string" else base64.b64decode(value, validate=True)
            out += unsigned_varint(len(raw) + 1) if flexible else _FIXED["int16" if type_ == "string" else "int32"].pack(len(raw))
            out += raw
        else:
            raise MessageEncodeError(f"{name} has type {type_}, which klog cannot write")
    except (struct.error, TypeError, ValueError, AttributeError) as e:
        raise MessageEncodeError(f"{name}: {value!r} is not a {type_} ({e})") from e
