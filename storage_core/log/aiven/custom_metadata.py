"""The custom metadata the plugin stores in ``__remote_log_metadata`` (``customMetadata`` of the
``COPY_SEGMENT_FINISHED`` update), with ``custom.metadata.fields.include``.

Layout (``metadata/SegmentCustomMetadataSerde.java``, ``SegmentCustomMetadataField.java``): a Kafka
tagged-fields struct, that is an unsigned varint count of fields, then per field an unsigned varint
tag, an unsigned varint size and that many bytes::

    tag 0  REMOTE_SIZE    varlong         bytes of the three objects together
    tag 1  OBJECT_PREFIX  compact string  the key prefix the objects were written under
    tag 2  OBJECT_KEY     compact string  the main path (``ObjectKeyFactory.mainPath``), no suffix

A compact string is an unsigned varint length + 1, then UTF-8 bytes. ``ObjectKeyFactory.key(fields,
...)`` prefers these fields over the configured prefix and the computed main path for the ``.log``
and ``.indexes`` objects (``KafkaRemoteStorageManager.objectKey``); the manifest's key is always the
configured one.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from storage_core.errors import KlogError
from storage_core.record.varint import read_varlong

__all__ = ["SegmentCustomMetadata", "SegmentCustomMetadataField"]

#: an unsigned varint takes at most 5 bytes (Kafka's ``ByteUtils.readUnsignedVarint``)
MAX_VARINT_BYTES = 5


class SegmentCustomMetadataField(enum.IntEnum):
    """``SegmentCustomMetadataField``: the tag of each field."""

    REMOTE_SIZE = 0
    OBJECT_PREFIX = 1
    OBJECT_KEY = 2


@dataclass(frozen=True)
class SegmentCustomMetadata:
    """The fields the plugin recorded for one segment (None: not recorded)."""

    remote_size: int | None = None
    object_prefix: str | None = None
    object_key: str | None = None

    @classmethod
    def parse(cls, data: bytes | None, where: str) -> SegmentCustomMetadata:
        """Decode ``data`` (None or empty: no fields); a :class:`KlogError` naming ``where``
        (the segment) when the bytes are not such a struct. Unknown tags are skipped, as Kafka's
        tagged fields are."""
        if not data:
            return cls()
        try:
            count, pos = _unsigned(data, 0)
            fields: dict[int, bytes] = {}
            for _ in range(count):
                tag, pos = _unsigned(data, pos)
                size, pos = _unsigned(data, pos)
                if pos + size > len(data):
                    raise ValueError(f"field {tag} of {size} bytes runs past the end ({len(data)} bytes)")
                fields[tag] = data[pos:pos + size]
                pos += size
            if pos != len(data):
                raise ValueError(f"{len(data) - pos} bytes left after {count} fields")
            size_field = fields.get(SegmentCustomMetadataField.REMOTE_SIZE)
            return cls(None if size_field is None else read_varlong(size_field, 0)[0],
                       _compact_string(fields.get(SegmentCustomMetadataField.OBJECT_PREFIX)),
                       _compact_string(fields.get(SegmentCustomMetadataField.OBJECT_KEY)))
        except (ValueError, KlogError) as exc:
            raise KlogError(f"the custom metadata of {where} in __remote_log_metadata is not the plugin's "
                            f"(SegmentCustomMetadataSerde: tagged fields 0 remote_size, 1 object_prefix, "
                            f"2 object_key): {exc}") from None


def _unsigned(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    for i in range(MAX_VARINT_BYTES):
        if pos + i >= len(buf):
            raise ValueError(f"an unsigned varint at {pos} runs past the end")
        b = buf[pos + i]
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos + i + 1
        shift += 7
    raise ValueError(f"an unsigned varint at {pos} is longer than {MAX_VARINT_BYTES} bytes")


def _compact_string(data: bytes | None) -> str | None:
    if data is None:
        return None
    n, pos = _unsigned(data, 0)
    if n == 0:
        return None
    if pos + n - 1 != len(data):
        raise ValueError(f"a compact string of {n - 1} bytes in a field of {len(data) - pos}")
    return data[pos:pos + n - 1].decode("utf-8")
