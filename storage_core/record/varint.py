"""Kafka's variable-length integers (``ByteUtils.java``).

A varint is ZigZag-encoded (``(n << 1) ^ (n >> 31)``; ``>> 63`` for a varlong), then written as
unsigned LEB128: 7 bits a byte, least significant group first, high bit = more bytes follow.
A varint takes at most :data:`MAX_VARINT_BYTES` bytes and a varlong at most
:data:`MAX_VARLONG_BYTES`; Kafka rejects longer encodings ("Varint is too long").

These are the reference implementations, used by the per-record API and the pure-Python
columnar path; the native kernel has its own copy of the same loops.
"""

from __future__ import annotations

from storage_core.errors import InvalidRecordError
from storage_core.limits import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN

MAX_VARINT_BYTES = 5
MAX_VARLONG_BYTES = 10


def _read_unsigned(buf: bytes | bytearray | memoryview, pos: int, max_bytes: int, what: str) -> tuple[int, int]:
    result = 0
    shift = 0
    end = len(buf)
    for _ in range(max_bytes):
        if pos >= end:
            raise InvalidRecordError(f"Found invalid record structure: premature EOF while reading a {what}")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
    raise InvalidRecordError(f"{what.capitalize()} is too long, the most significant bit in the "
                             f"{max_bytes}th byte is set")


def read_varint(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """Decode a zigzag varint (int32) at ``pos``; returns ``(value, next position)``."""
    raw, pos = _read_unsigned(buf, pos, MAX_VARINT_BYTES, "varint")
    raw &= 0xFFFFFFFF  # Java drops bits beyond 32 in the fifth byte
    return (raw >> 1) ^ -(raw & 1), pos


def read_varlong(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """Decode a zigzag varlong (int64) at ``pos``; returns ``(value, next position)``."""
    raw, pos = _read_unsigned(buf, pos, MAX_VARLONG_BYTES, "varlong")
    raw &= 0xFFFFFFFFFFFFFFFF
    return (raw >> 1) ^ -(raw & 1), pos


def _write_unsigned(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def encode_varint(value: int) -> bytes:
    """Encode an int32 as a zigzag varint."""
    if not INT32_MIN <= value <= INT32_MAX:
        raise ValueError(f"varint out of int32 range: {value}")
    return _write_unsigned(((value << 1) ^ (value >> 31)) & 0xFFFFFFFF)


def encode_varlong(value: int) -> bytes:
    """Encode an int64 as a zigzag varlong."""
    if not INT64_MIN <= value <= INT64_MAX:
        raise ValueError(f"varlong out of int64 range: {value}")
    return _write_unsigned(((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)


def size_of_varint(value: int) -> int:
    """Bytes :func:`encode_varint` would write for ``value``."""
    v = ((value << 1) ^ (value >> 31)) & 0xFFFFFFFF
    n = 1
    while v > 0x7F:
        v >>= 7
        n += 1
    return n


def size_of_varlong(value: int) -> int:
    """Bytes :func:`encode_varlong` would write for ``value``."""
    v = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    n = 1
    while v > 0x7F:
        v >>= 7
        n += 1
    return n
