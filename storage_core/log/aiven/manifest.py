"""The segment manifest (``<key>.rsm-manifest``): JSON, in plaintext even when encryption is on.

Layout (``manifest/SegmentManifestV1.java``, its Jackson serde ``manifest/serde/*``,
``manifest/index/*``)::

    {"version": "1",
     "chunkIndex": {"type": "fixed", "originalChunkSize": C, "originalFileSize": F,
                    "transformedChunkSize": T, "finalTransformedChunkSize": L}
                 | {"type": "variable", "originalChunkSize": C, "originalFileSize": F,
                    "transformedChunks": "<base64 of a zstd frame of ChunkSizesBinaryCodec bytes>"},
     "segmentIndexes": {"offset"|"timestamp"|"producerSnapshot"|"leaderEpoch"|"transaction":
                        {"position": P, "size": S} | null},
     "compression": bool,
     "encryption": {"dataKey": "<key pair id>:<base64 of the RSA-wrapped data key>",
                    "aad": "<base64>"}            (absent without encryption)
     "remoteLogSegmentMetadata": {...}}           (written, not read back by the plugin)

Chunk ``i`` holds original bytes ``[i*C, min((i+1)*C, F))``; there are ``ceil(F / C)`` chunks
(``AbstractChunkIndex``). In a fixed index (no compression) every transformed chunk is ``T`` bytes
but the last, ``L`` (``FixedSizeChunkIndex``); a variable index lists every transformed size
(``VariableSizeChunkIndex``). Transformed chunks follow each other in the ``.log`` object, so a
chunk's position there is the sum of the sizes before it.

``ChunkSizesBinaryCodec`` (``manifest/index/serde/ChunkSizesBinaryCodec.java``), big-endian::

    count            int32
    (count == 0: nothing more; count == 1: the one value, int32)
    base             int32     the least of the values but the last
    bytes per value  int8      1..4
    values           (count - 1) * bytes per value, each minus base
    last value       int32
"""

from __future__ import annotations

import base64
import binascii
import json
import struct
from dataclasses import dataclass
from typing import Any

import zstandard

__all__ = ["Chunk", "ChunkIndex", "EncryptionMetadata", "SegmentIndex", "SegmentManifest", "decode_chunk_sizes"]

#: ``SegmentManifestV1``'s type id
MANIFEST_VERSION = "1"
#: the five indexes of ``SegmentIndexesV1``, in their order in the ``.indexes`` object
INDEX_NAMES = ("offset", "timestamp", "producerSnapshot", "leaderEpoch", "transaction")
_INT = struct.Struct(">i")
_COUNT_SIZE = _BASE_SIZE = _FULL_VALUE_SIZE = 4
_BYTES_PER_VALUE_SIZE = 1
#: the largest a transformedChunks frame may decode to (count + base + width + 4 bytes per chunk of a 2 GiB file)
_MAX_SIZES_BYTES = 64 << 20


class ManifestError(ValueError):
    """A manifest that is not the plugin's: internal, always raised on as the typed
    :class:`~storage_core.errors.RemoteManifestError` naming the segment and the object (objects)."""


@dataclass(frozen=True)
class Chunk:
    """One chunk (``manifest/index/Chunk.java``): where its bytes are before and after the transform."""

    id: int
    original_position: int
    original_size: int
    transformed_position: int
    transformed_size: int

    @property
    def original_end(self) -> int:
        return self.original_position + self.original_size

    @property
    def transformed_end(self) -> int:
        return self.transformed_position + self.transformed_size


def decode_chunk_sizes(data: bytes) -> list[int]:
    """``ChunkSizesBinaryCodec.decode`` (layout in the module doc)."""
    if len(data) < _COUNT_SIZE:
        raise ManifestError(f"chunk sizes of {len(data)} bytes: expected at least the {_COUNT_SIZE}-byte count")
    (count,) = _INT.unpack_from(data, 0)
    if count < 0:
        raise ManifestError(f"chunk sizes count {count}: expected >= 0")
    if count == 0:
        return []
    if count == 1:
        if len(data) != _COUNT_SIZE + _FULL_VALUE_SIZE:
            raise ManifestError(f"one chunk size in {len(data)} bytes: expected {_COUNT_SIZE + _FULL_VALUE_SIZE}")
        return [_INT.unpack_from(data, _COUNT_SIZE)[0]]
    head = _COUNT_SIZE + _BASE_SIZE + _BYTES_PER_VALUE_SIZE
    if len(data) < head:
        raise ManifestError(f"chunk sizes of {len(data)} bytes: expected a {head}-byte header")
    (base,) = _INT.unpack_from(data, _COUNT_SIZE)
    width = data[_COUNT_SIZE + _BASE_SIZE]
    expected = head + (count - 1) * width + _FULL_VALUE_SIZE
    if not 1 <= width <= _FULL_VALUE_SIZE or len(data) != expected:
        raise ManifestError(f"{count} chunk sizes of {width} bytes each in {len(data)} bytes: expected 1..4 bytes "
                            f"per value and {expected} bytes")
    out = []
    pos = head
    for _ in range(count - 1):
        out.append(int.from_bytes(data[pos:pos + width], "big") + base)
        pos += width
    out.append(_INT.unpack_from(data, pos)[0])
    return out


@dataclass(frozen=True)
class ChunkIndex:
    """The chunk index (``ChunkIndex``): the original sizes and every transformed size."""

    kind: str  # "fixed" | "variable"
    original_chunk_size: int
    original_file_size: int
    transformed_sizes: tuple[int, ...]

    @property
    def count(self) -> int:
        return len(self.transformed_sizes)

    @property
    def transformed_file_size(self) -> int:
        """The ``.log`` object's size the index implies."""
        return sum(self.transformed_sizes)

    @staticmethod
    def expected_count(original_file_size: int, original_chunk_size: int) -> int:
        """``ceil(originalFileSize / originalChunkSize)`` (``AbstractChunkIndex``)."""
        return -(-original_file_size // original_chunk_size)

    def chunk(self, i: int) -> Chunk:
        pos = sum(self.transformed_sizes[:i]) if self.kind == "variable" else i * (
            self.transformed_sizes[0] if self.transformed_sizes else 0)
        start = i * self.original_chunk_size
        return Chunk(i, start, min(self.original_chunk_size, self.original_file_size - start), pos,
                     self.transformed_sizes[i])

    def chunks_for(self, start: int, end: int) -> list[Chunk]:
        """The chunks holding original bytes ``[start, end)`` (``ChunkIndex.chunksForRange``)."""
        if end <= start:
            return []
        first = max(0, start // self.original_chunk_size)
        last = min(self.count - 1, (end - 1) // self.original_chunk_size)
        out = []
        pos = self.chunk(first).transformed_position if first <= last else 0
        for i in range(first, last + 1):
            c = Chunk(i, i * self.original_chunk_size,
                      min(self.original_chunk_size, self.original_file_size - i * self.original_chunk_size), pos,
                      self.transformed_sizes[i])
            out.append(c)
            pos += c.transformed_size
        return out

    @classmethod
    def parse(cls, d: Any) -> ChunkIndex:
        if not isinstance(d, dict):
            raise ManifestError(f"chunkIndex is {type(d).__name__}: expected an object")
        kind = d.get("type")
        ocs, ofs = _int(d, "originalChunkSize"), _int(d, "originalFileSize")
        if ocs <= 0 or ofs < 0:
            raise ManifestError(f"chunkIndex originalChunkSize={ocs}, originalFileSize={ofs}: expected > 0 and >= 0")
        n = cls.expected_count(ofs, ocs)
        if kind == "fixed":
            t, last = _int(d, "transformedChunkSize"), _int(d, "finalTransformedChunkSize")
            sizes = tuple([t] * (n - 1) + [last]) if n else ()
        elif kind == "variable":
            raw = d.get("transformedChunks")
            if not isinstance(raw, str):
                raise ManifestError("chunkIndex.transformedChunks is missing: expected a base64 string")
            try:
                frame = base64.b64decode(raw, validate=True)
                with zstandard.ZstdDecompressor().stream_reader(frame) as r:
                    packed = r.read(_MAX_SIZES_BYTES)
            except (binascii.Error, zstandard.ZstdError) as exc:
                raise ManifestError(f"chunkIndex.transformedChunks is not base64 of a zstd frame "
                                    f"(TransformedChunksSerializer): {exc}") from None
            sizes = tuple(decode_chunk_sizes(packed))
            if len(sizes) != n:
                raise ManifestError(f"chunkIndex lists {len(sizes)} chunks: expected ceil(originalFileSize {ofs} / "
                                    f"originalChunkSize {ocs}) = {n}")
        else:
            raise ManifestError(f"chunkIndex.type={kind!r}: expected fixed or variable")
        if any(s < 0 for s in sizes):
            raise ManifestError("chunkIndex has a negative transformed chunk size")
        return cls(kind, ocs, ofs, sizes)


@dataclass(frozen=True)
class SegmentIndex:
    """One index in the ``.indexes`` object (``SegmentIndexV1``): its transformed byte range."""

    position: int
    size: int


@dataclass(frozen=True)
class EncryptionMetadata:
    """``SegmentEncryptionMetadataV1``: the wrapped data key, the pair that wraps it, the AAD.

    ``repr`` names the pair only: the wrapped key and the AAD never go into messages."""

    key_pair_id: str
    wrapped_key: bytes
    aad: bytes
    #: ``SegmentEncryptionMetadataV1.IV_SIZE``
    iv_size: int = 12

    def __repr__(self) -> str:
        return f"EncryptionMetadata(key_pair_id={self.key_pair_id!r})"


@dataclass(frozen=True)
class SegmentManifest:
    """A parsed ``.rsm-manifest`` (``SegmentManifestV1``)."""

    chunk_index: ChunkIndex
    indexes: dict[str, SegmentIndex | None]
    compression: bool
    encryption: EncryptionMetadata | None
    #: ``remoteLogSegmentMetadata``: the id, start and end offsets the manifest was written for
    segment_id: str | None
    start_offset: int | None
    end_offset: int | None

    @classmethod
    def parse(cls, data: bytes) -> SegmentManifest:
        """The manifest in ``data``; :class:`ManifestError` saying what is not the plugin's."""
        try:
            d = json.loads(data)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ManifestError(f"not JSON: {exc}") from None
        if not isinstance(d, dict):
            raise ManifestError(f"a JSON {type(d).__name__}: expected an object")
        if d.get("version") != MANIFEST_VERSION:
            raise ManifestError(f"version={d.get('version')!r}: expected {MANIFEST_VERSION!r} (SegmentManifestV1)")
        chunks = ChunkIndex.parse(d.get("chunkIndex"))
        raw_indexes = d.get("segmentIndexes")
        if not isinstance(raw_indexes, dict):
            raise ManifestError("segmentIndexes is missing: expected an object")
        indexes: dict[str, SegmentIndex | None] = {}
        for name in INDEX_NAMES:
            v = raw_indexes.get(name)
            indexes[name] = None if v is None else SegmentIndex(_int(v, "position"), _int(v, "size"))
        enc = d.get("encryption")
        encryption = None
        if enc is not None:
            data_key, aad = (enc.get("dataKey"), enc.get("aad")) if isinstance(enc, dict) else (None, None)
            if not isinstance(data_key, str) or ":" not in data_key or not isinstance(aad, str):
                raise ManifestError("encryption: expected {\"dataKey\": \"<key pair id>:<base64>\", \"aad\": "
                                    "\"<base64>\"} (DataKeySerializer)")
            pair, _, wrapped = data_key.partition(":")
            try:
                encryption = EncryptionMetadata(pair, base64.b64decode(wrapped, validate=True),
                                                base64.b64decode(aad, validate=True))
            except binascii.Error:
                raise ManifestError(f"encryption of key pair {pair!r}: the data key or the AAD is not base64") from None
        meta = d.get("remoteLogSegmentMetadata")
        seg_id = start = end = None
        if isinstance(meta, dict):
            rid = meta.get("remoteLogSegmentId")
            seg_id = rid.get("id") if isinstance(rid, dict) else None
            start, end = meta.get("startOffset"), meta.get("endOffset")
        return cls(chunks, indexes, bool(d.get("compression", False)), encryption, seg_id,
                   start if isinstance(start, int) else None, end if isinstance(end, int) else None)


def _int(d: Any, name: str) -> int:
    v = d.get(name) if isinstance(d, dict) else None
    if not isinstance(v, int) or isinstance(v, bool):
        raise ManifestError(f"{name}={v!r}: expected an integer")
    return v
