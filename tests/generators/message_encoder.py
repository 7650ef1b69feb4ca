"""A writer of Kafka's generated-message encoding, for the tests: random messages of a
:class:`~storage_core.record.messages.schema.MessageSpec` at a version, and their bytes.

Written independently of klog's reader (``storage_core/record/messages/codec.py``) from Kafka's
rules (``MessageDataGenerator``'s ``write``): the tests round-trip every version of every table
through it, and hand its bytes to Kafka's own classes where kafka-clients has them
(``oracle/KafkaMessages.java``). Values are given as the JSON klog's reader returns (JsonConverter's
names and shapes: uuids as Kafka's base64 strings, bytes as standard base64).
"""

from __future__ import annotations

import base64
import random
import struct
from typing import Any

from storage_core.record.messages.schema import FieldSpec, MessageSpec

_PACK = {"int8": ">b", "int16": ">h", "uint16": ">H", "int32": ">i", "uint32": ">I", "int64": ">q", "float64": ">d"}
_RANGE = {"int8": (-128, 127), "int16": (-32768, 32767), "uint16": (0, 65535), "int32": (-(2**31), 2**31 - 1),
          "uint32": (0, 2**32 - 1), "int64": (-(2**63), 2**63 - 1)}


def uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def encode(spec: MessageSpec, version: int, value: dict[str, Any]) -> bytes:
    return _struct(spec.fields, version, spec.flexible.contains(version), value)


def _struct(fields: tuple[FieldSpec, ...], version: int, flexible: bool, value: dict[str, Any]) -> bytes:
    out = b""
    tagged: list[tuple[int, bytes]] = []
    for f in fields:
        if not f.versions.contains(version):
            continue
        if f.tagged.contains(version):
            if f.json_name in value:
                assert f.tag is not None
                tagged.append((f.tag, _field(f, version, flexible, value[f.json_name], tagged=True)))
            continue
        out += _field(f, version, flexible, value[f.json_name])
    if flexible:
        out += uvarint(len(tagged))
        for tag, raw in sorted(tagged):
            out += uvarint(tag) + uvarint(len(raw)) + raw
    return out


def _length(n: int | None, flexible: bool, fixed: str) -> bytes:
    if flexible:
        return uvarint(0 if n is None else n + 1)
    return struct.pack(fixed, -1 if n is None else n)


def _field(f: FieldSpec, version: int, flexible: bool, v: Any, tagged: bool = False) -> bytes:
    if f.type.startswith("[]"):
        if v is None:
            return _length(None, flexible, ">i")
        out = _length(len(v), flexible, ">i")
        for e in v:
            out += _struct(f.fields, version, flexible, e) if f.fields else _prim(f.element, flexible, e)
        return out
    if f.fields:
        if f.nullable.contains(version):  # a tagged nullable struct: a varint 0 (null) or 1 first
            marker = (b"\x00", b"\x01") if tagged else (b"\xff", b"\x01")
            return marker[0] if v is None else marker[1] + _struct(f.fields, version, flexible, v)
        return _struct(f.fields, version, flexible, v)
    return _prim(f.type, flexible, v)


def _prim(t: str, flexible: bool, v: Any) -> bytes:
    if t in _PACK:
        return struct.pack(_PACK[t], v)
    if t == "bool":
        return b"\x01" if v else b"\x00"
    if t == "uuid":
        return base64.urlsafe_b64decode(v + "==")
    if t == "string":
        if v is None:
            return _length(None, flexible, ">h")
        raw = v.encode("utf-8")
        return _length(len(raw), flexible, ">h") + raw
    if t == "bytes":
        if v is None:
            return _length(None, flexible, ">i")
        raw = base64.b64decode(v)
        return _length(len(raw), flexible, ">i") + raw
    raise AssertionError(t)


def random_message(spec: MessageSpec, version: int, rng: random.Random) -> dict[str, Any]:
    """A random message as the reader's JSON: tagged fields present only when not their default."""
    return _random_struct(spec.fields, version, rng, 0)


def _random_struct(fields: tuple[FieldSpec, ...], version: int, rng: random.Random, depth: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in fields:
        if not f.versions.contains(version):
            continue
        if f.tagged.contains(version) and rng.random() < 0.4:
            continue  # absent: the reader leaves it out too
        v = _random_field(f, version, rng, depth)
        if f.tagged.contains(version) and v == _tag_default(f, version):
            continue
        out[f.json_name] = v
    return out


def _tag_default(f: FieldSpec, version: int) -> Any:
    if f.default is not None:
        return list(f.default) if isinstance(f.default, tuple) else f.default  # (): an empty array
    if f.fields and not f.type.startswith("[]"):
        return object()  # a struct's default is a new struct: a tagged null struct is written
    if f.nullable.contains(version):
        return None
    return [] if f.type.startswith("[]") else {"string": "", "bool": False}.get(f.type, 0)


def _random_field(f: FieldSpec, version: int, rng: random.Random, depth: int) -> Any:
    if f.nullable.contains(version) and rng.random() < 0.25:
        return None
    if f.type.startswith("[]"):
        n = rng.randint(0, 3 if depth < 2 else 1)
        if f.fields:
            return [_random_struct(f.fields, version, rng, depth + 1) for _ in range(n)]
        return [_random_prim(f.element, rng) for _ in range(n)]
    if f.fields:
        return _random_struct(f.fields, version, rng, depth + 1)
    return _random_prim(f.type, rng)


def _random_prim(t: str, rng: random.Random) -> Any:
    if t in _RANGE:
        lo, hi = _RANGE[t]
        return rng.choice([lo, hi, 0, -1 if lo < 0 else 1, rng.randint(lo, hi)])
    if t == "float64":
        return rng.choice([0.0, 1.5, -2.25e10, rng.random()])
    if t == "bool":
        return rng.random() < 0.5
    if t == "uuid":
        return base64.urlsafe_b64encode(rng.randbytes(16)).decode().rstrip("=")
    if t == "string":
        return rng.choice(["", "a", "grüße-€", "topic-" + str(rng.randint(0, 999)), "x" * rng.randint(0, 200)])
    if t == "bytes":
        return base64.b64encode(rng.randbytes(rng.randint(0, 40))).decode()
    raise AssertionError(t)
