"""Kafka's five codecs, framed exactly as Java Kafka frames them (``common/compress/*.java``).

| id | codec  | written as (what Java Kafka writes)                         | read as                                  |
|----|--------|-------------------------------------------------------------|------------------------------------------|
| 0  | none   | the records                                                 | the records                              |
| 1  | gzip   | one RFC 1952 member                                         | any number of members                    |
| 2  | snappy | xerial snappy-java stream: 16-byte header, then             | xerial stream, or one raw snappy block   |
|    |        | ``[int32 BE length][raw block of <= 32 KiB input]``...      | (librdkafka, Sarama write raw blocks)    |
| 3  | lz4    | LZ4 frame, FLG 0x60 (independent blocks, no checksums),     | any valid LZ4 frame; magic v0's broken   |
|    |        | BD 0x40 (64 KiB blocks)                                     | header checksum is repaired first        |
| 4  | zstd   | one streaming frame without a content size                  | any number of frames (v2 only)           |

The compressed stream covers the records area only: batch bytes 61..end for v2, the wrapper
message's value for v0/v1.
"""

from __future__ import annotations

import enum
import struct
import threading
import zlib
from collections.abc import Callable

import cramjam
import lz4.frame
import zstandard

from storage_core.errors import CompressionError, UnsupportedCodecError

__all__ = ["CompressionType", "compress", "decompress", "v2_decompressors", "MAX_DECOMPRESSED_BYTES"]

#: A decompressed batch larger than this is treated as corrupt instead of being allocated.
#: Kafka's own limit on a batch is ``max.message.bytes`` of *compressed* data; 1 GiB of output
#: is far above anything a producer can make and still bounds a malicious payload.
MAX_DECOMPRESSED_BYTES = 1 << 30


class CompressionType(enum.IntEnum):
    """The codec id in bits 0-2 of a batch's attributes (``CompressionType.java``)."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @property
    def label(self) -> str:
        """Kafka's name for the codec: ``none``, ``gzip``, ``snappy``, ``lz4``, ``zstd``."""
        return self.name.lower()

    @classmethod
    def from_id(cls, codec_id: int) -> CompressionType:
        try:
            return cls(codec_id)
        except ValueError:
            raise UnsupportedCodecError(
                f"Unknown compression type id: {codec_id}; expected one of "
                + ", ".join(f"{c.value} ({c.label})" for c in cls)
            ) from None

    @classmethod
    def from_name(cls, name: str) -> CompressionType:
        key = name.strip().lower()
        for c in cls:
            if c.label == key:
                return c
        raise UnsupportedCodecError(
            f"Unknown compression type {name!r}; expected one of {', '.join(c.label for c in cls)}"
        )


# --- snappy: xerial snappy-java framing ------------------------------------------------------

#: ``SnappyCodec.MAGIC_HEADER``: 0x82 'SNAPPY' 0x00.
XERIAL_MAGIC = b"\x82SNAPPY\x00"
#: Header = magic, int32 BE version (1), int32 BE min compatible version (1).
XERIAL_HEADER = struct.Struct(">8sii")
XERIAL_VERSION = 1
XERIAL_MIN_COMPATIBLE_VERSION = 1
#: snappy-java's ``SnappyOutputStream`` default block size: 32 KiB of input per block.
XERIAL_BLOCK_SIZE = 32 * 1024
_XERIAL_LENGTH = struct.Struct(">i")


def _snappy_compress(data: bytes | memoryview, level: int | None) -> bytes:
    out = bytearray(XERIAL_HEADER.pack(XERIAL_MAGIC, XERIAL_VERSION, XERIAL_MIN_COMPATIBLE_VERSION))
    view = memoryview(data)
    for start in range(0, len(view), XERIAL_BLOCK_SIZE):
        block = bytes(cramjam.snappy.compress_raw(view[start:start + XERIAL_BLOCK_SIZE]))
        out += _XERIAL_LENGTH.pack(len(block))
        out += block
    return bytes(out)


def _snappy_raw_block(block: bytes | memoryview) -> bytes:
    try:
        return bytes(cramjam.snappy.decompress_raw(block))
    except Exception as exc:  # cramjam raises its own DecompressionError
        raise CompressionError(f"Invalid snappy block: {exc}") from exc


def _xerial_blocks(view: memoryview) -> list[memoryview]:
    """The raw blocks of a xerial snappy stream (a header first; concatenated streams allowed)."""
    blocks: list[memoryview] = []
    pos = 0
    end = len(view)
    while pos < end:
        if end - pos >= XERIAL_HEADER.size and view[pos:pos + 8] == XERIAL_MAGIC:
            # A header at the start, or a concatenated stream (snappy-java accepts both).
            pos += XERIAL_HEADER.size
            continue
        if end - pos < 4:
            raise CompressionError(f"Truncated xerial snappy stream: {end - pos} bytes left where a "
                                   "4-byte block length was expected")
        (length,) = _XERIAL_LENGTH.unpack_from(view, pos)
        pos += 4
        if length < 0 or length > end - pos:
            raise CompressionError(f"Invalid xerial snappy block length {length}; "
                                   f"{end - pos} bytes remain")
        blocks.append(view[pos:pos + length])
        pos += length
    return blocks


def _snappy_decompress(data: bytes | memoryview, magic: int) -> bytes:
    view = memoryview(data)
    if len(view) < XERIAL_HEADER.size or view[:8] != XERIAL_MAGIC:
        # SnappyInputStream.readHeader: no xerial header -> the whole payload is one raw block.
        return _snappy_raw_block(view)
    blocks = _xerial_blocks(view)
    if len(blocks) == 1:
        return _snappy_raw_block(blocks[0])
    try:  # each block's length is its first varint: decompress them all into one buffer
        sizes = [cramjam.snappy.decompress_raw_len(b) for b in blocks]
    except Exception as exc:
        raise CompressionError(f"Invalid snappy block: {exc}") from exc
    if sum(sizes) > MAX_DECOMPRESSED_BYTES:
        raise CompressionError(f"snappy payload expands past {MAX_DECOMPRESSED_BYTES} bytes")
    out = bytearray(sum(sizes))
    target = memoryview(out)
    pos = 0
    for block, size in zip(blocks, sizes, strict=True):
        try:
            written = cramjam.snappy.decompress_raw_into(block, target[pos:pos + size])
        except Exception as exc:
            raise CompressionError(f"Invalid snappy block: {exc}") from exc
        if written != size:
            raise CompressionError(f"Invalid snappy block: {written} bytes decoded where its header says {size}")
        pos += size
    return bytes(out)


# --- lz4: Kafka's Lz4BlockOutputStream frame ---------------------------------------------------

LZ4_FRAME_MAGIC = b"\x04\x22\x4d\x18"
#: FLG byte Java Kafka writes: version 01, block independence, nothing else.
KAFKA_LZ4_FLG = 0x60
#: BD byte Java Kafka writes: 64 KiB maximum block size.
KAFKA_LZ4_BD = 0x40
_LZ4_FLG_CONTENT_SIZE = 0x08


def xxh32(data: bytes, seed: int = 0) -> int:
    """xxHash32, used only for the LZ4 frame's 1-byte header checksum (a few bytes of input)."""
    p1, p2, p3, p4, p5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
    mask = 0xFFFFFFFF

    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (32 - r))) & mask

    n = len(data)
    i = 0
    if n >= 16:
        v1, v2, v3, v4 = (seed + p1 + p2) & mask, (seed + p2) & mask, seed & mask, (seed - p1) & mask
        while i + 16 <= n:
            lanes = struct.unpack_from("<4I", data, i)
            v1 = (rotl((v1 + lanes[0] * p2) & mask, 13) * p1) & mask
            v2 = (rotl((v2 + lanes[1] * p2) & mask, 13) * p1) & mask
            v3 = (rotl((v3 + lanes[2] * p2) & mask, 13) * p1) & mask
            v4 = (rotl((v4 + lanes[3] * p2) & mask, 13) * p1) & mask
            i += 16
        h = (rotl(v1, 1) + rotl(v2, 7) + rotl(v3, 12) + rotl(v4, 18)) & mask
    else:
        h = (seed + p5) & mask
    h = (h + n) & mask
    while i + 4 <= n:
        (k,) = struct.unpack_from("<I", data, i)
        h = (rotl((h + k * p3) & mask, 17) * p4) & mask
        i += 4
    while i < n:
        h = (rotl((h + data[i] * p5) & mask, 11) * p1) & mask
        i += 1
    h ^= h >> 15
    h = (h * p2) & mask
    h ^= h >> 13
    h = (h * p3) & mask
    h ^= h >> 16
    return h


def _lz4_compress(data: bytes | memoryview, level: int | None) -> bytes:
    # Kafka's default lz4 level is 9 with the fast compressor; python-lz4's level 0 is that
    # compressor. Only FLG/BD matter to a reader: independent blocks, 64 KiB, no checksums.
    return bytes(lz4.frame.compress(
        bytes(data),
        compression_level=0 if level is None else level,
        block_size=lz4.frame.BLOCKSIZE_MAX64KB,
        block_linked=False,
        content_checksum=False,
        block_checksum=False,
        store_size=False,
    ))


#: Frames up to this size decode in one call: even at LZ4's largest ratio they stay in bounds.
_LZ4_ONE_SHOT_MAX_INPUT = (MAX_DECOMPRESSED_BYTES - (1 << 16)) // 256


def _lz4_decompress(data: bytes | memoryview, magic: int) -> bytes:
    frame: bytes | memoryview = data
    if len(frame) < 7 or bytes(frame[:4]) != LZ4_FRAME_MAGIC:
        raise CompressionError(f"Invalid lz4 frame: expected magic {LZ4_FRAME_MAGIC.hex()}, "
                               f"found {bytes(frame[:4]).hex()}")
    if magic == 0:
        # Magic v0 producers computed the header checksum over magic+FLG+BD (KAFKA-3160) and
        # Kafka skips the check for v0: put the correct checksum in so the frame decoder accepts it.
        desc_len = 2 + (8 if frame[4] & _LZ4_FLG_CONTENT_SIZE else 0)
        if len(frame) < 4 + desc_len + 1:
            raise CompressionError("Truncated lz4 frame header")
        hc = (xxh32(bytes(frame[4:4 + desc_len])) >> 8) & 0xFF
        frame = bytes(frame[:4 + desc_len]) + bytes([hc]) + bytes(frame[4 + desc_len + 1:])
    if len(frame) <= _LZ4_ONE_SHOT_MAX_INPUT:
        # LZ4 expands a byte into at most 255 (a match length grows by 255 per extra byte), so a
        # frame this small cannot pass the bound: decode it in one call, the fast way.
        try:
            return lz4.frame.decompress(frame)  # type: ignore[no-any-return]
        except RuntimeError as exc:
            raise CompressionError(f"Invalid lz4 frame: {exc}") from exc
    decoder = lz4.frame.LZ4FrameDecompressor()
    # Bounded output: python-lz4 allocates max_length up front, so ask for a few times the
    # input at a time (a batch rarely compresses more than that) and go on while output remains.
    step = max(1 << 16, 4 * len(frame))
    try:
        out = decoder.decompress(frame, max_length=step)
        while not decoder.eof and not decoder.needs_input:
            if len(out) > MAX_DECOMPRESSED_BYTES:
                raise CompressionError(f"lz4 payload expands past {MAX_DECOMPRESSED_BYTES} bytes")
            out += decoder.decompress(b"", max_length=step)
    except RuntimeError as exc:
        raise CompressionError(f"Invalid lz4 frame: {exc}") from exc
    if not decoder.eof:
        raise CompressionError("Truncated lz4 frame (no end mark)")
    return bytes(out)


# --- gzip / zstd ---------------------------------------------------------------------------------

_GZIP_OS_UNKNOWN = 0xFF


def _gzip_compress(data: bytes | memoryview, level: int | None) -> bytes:
    lvl = 6 if level is None or level == -1 else level
    c = zlib.compressobj(lvl, zlib.DEFLATED, 31)
    out = bytearray(c.compress(data) + c.flush())
    out[9] = _GZIP_OS_UNKNOWN  # java.util.zip.GZIPOutputStream's header says OS 255, zlib's says 3
    return bytes(out)


def _gzip_decompress(data: bytes | memoryview, magic: int) -> bytes:
    out = bytearray()
    rest = bytes(data)
    try:
        while True:
            d = zlib.decompressobj(31)
            out += d.decompress(rest, MAX_DECOMPRESSED_BYTES + 1 - len(out))
            if len(out) > MAX_DECOMPRESSED_BYTES:
                raise CompressionError(f"gzip payload expands past {MAX_DECOMPRESSED_BYTES} bytes")
            if not d.eof:
                raise CompressionError("Truncated gzip stream (premature end of compressed data)")
            rest = d.unused_data
            # GZIPInputStream reads further members; trailing zero padding is not a member.
            if len(rest) < 10 or rest[:2] != b"\x1f\x8b":
                return bytes(out)
    except zlib.error as exc:
        raise CompressionError(f"Invalid gzip stream: {exc}") from exc


def _zstd_compress(data: bytes | memoryview, level: int | None) -> bytes:
    # A streaming frame, as zstd-jni's ZstdOutputStream writes it: no Frame_Content_Size.
    c = zstandard.ZstdCompressor(level=3 if level is None else level, write_content_size=False)
    obj = c.compressobj()
    # zstd-jni's stream closes with an empty last block after the data blocks: flush the data as
    # a block first, then finish, and the frame is byte-identical to Java Kafka's.
    return obj.compress(bytes(data)) + obj.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK) + obj.flush()


#: One zstd decompression context per thread (making one costs about 20 us, more than decoding a
#: small batch; a context must not be used by two threads at once, and readers decode on several).
_ZSTD_CONTEXTS = threading.local()
#: zstd-jni's default window limit on the consumer side (ZSTD_WINDOWLOG_LIMIT_DEFAULT, 2**27).
ZSTD_MAX_WINDOW_BYTES = 1 << 27


def _zstd_context() -> zstandard.ZstdDecompressor:
    dctx: zstandard.ZstdDecompressor | None = getattr(_ZSTD_CONTEXTS, "dctx", None)
    if dctx is None:
        dctx = _ZSTD_CONTEXTS.dctx = zstandard.ZstdDecompressor(max_window_size=ZSTD_MAX_WINDOW_BYTES)
    return dctx


def _zstd_decompress(data: bytes | memoryview, magic: int) -> bytes:
    if magic < 2:
        raise UnsupportedCodecError("zstd compression is not allowed for magic v0/v1 messages")
    dctx = _zstd_context()
    try:
        d = dctx.decompressobj()
        first: bytes = d.decompress(data)
        if d.eof and not d.unused_data and len(first) <= MAX_DECOMPRESSED_BYTES:
            return first  # one frame, the way Kafka writes it: no copy
        out = bytearray(first)
        if len(out) > MAX_DECOMPRESSED_BYTES:
            raise CompressionError(f"zstd payload expands past {MAX_DECOMPRESSED_BYTES} bytes")
        if not d.eof:
            raise CompressionError("Truncated zstd frame")
        rest = d.unused_data
        while rest:
            d = dctx.decompressobj()
            out += d.decompress(rest)
            if len(out) > MAX_DECOMPRESSED_BYTES:
                raise CompressionError(f"zstd payload expands past {MAX_DECOMPRESSED_BYTES} bytes")
            if not d.eof:
                raise CompressionError("Truncated zstd frame")
            rest = d.unused_data
    except zstandard.ZstdError as exc:
        raise CompressionError(f"Invalid zstd stream: {exc}") from exc
    return bytes(out)


_Compressor = Callable[[bytes | memoryview, int | None], bytes]
_Decompressor = Callable[[bytes | memoryview, int], bytes]

_COMPRESSORS: dict[CompressionType, _Compressor] = {
    CompressionType.GZIP: _gzip_compress,
    CompressionType.SNAPPY: _snappy_compress,
    CompressionType.LZ4: _lz4_compress,
    CompressionType.ZSTD: _zstd_compress,
}
_DECOMPRESSORS: dict[CompressionType, _Decompressor] = {
    CompressionType.GZIP: _gzip_decompress,
    CompressionType.SNAPPY: _snappy_decompress,
    CompressionType.LZ4: _lz4_decompress,
    CompressionType.ZSTD: _zstd_decompress,
}


def compress(codec: CompressionType, data: bytes | memoryview, level: int | None = None) -> bytes:
    """Compress a records area the way Java Kafka does for ``codec`` (v2 framing)."""
    if codec == CompressionType.NONE:
        return bytes(data)
    return _COMPRESSORS[codec](data, level)


def decompress(codec: CompressionType, data: bytes | memoryview, magic: int = 2) -> bytes:
    """Decompress a records area; raises :class:`CompressionError` for a bad payload."""
    if codec == CompressionType.NONE:
        return bytes(data)
    try:
        return _DECOMPRESSORS[codec](data, magic)
    except (CompressionError, UnsupportedCodecError):
        raise
    except (ValueError, RuntimeError, MemoryError, OverflowError) as exc:
        raise CompressionError(f"Invalid {codec.label} payload: {exc}") from exc


def _lz4_decompress_v2(data: memoryview) -> bytes:
    """:func:`decompress` of a v2 lz4 records area, with as little around the codec call as can be
    (the bulk decoder calls it once per batch)."""
    if len(data) <= _LZ4_ONE_SHOT_MAX_INPUT and data[:4] == LZ4_FRAME_MAGIC:
        try:
            return lz4.frame.decompress(data)  # type: ignore[no-any-return]
        except RuntimeError:
            pass  # the general path raises the error, with its message
    return decompress(CompressionType.LZ4, data)


def v2_decompressors() -> tuple[Callable[[memoryview], bytes] | None, ...]:
    """Per codec id, a function of a v2 records area to its decompressed bytes (None for NONE).

    Each raises what :func:`decompress` raises for a bad payload; the kernel's bulk decoder
    (``RecordsBuilder.add_v2_run``) calls them for every codec but lz4, whose frames it decodes
    itself, and for an lz4 frame it declines (see ``lz4_frame`` in ``_kernel_src/lz4.c``).
    """
    def general(codec: CompressionType) -> Callable[[memoryview], bytes]:
        return lambda data: decompress(codec, data)

    by_id: list[Callable[[memoryview], bytes] | None] = [None] * (max(int(c) for c in CompressionType) + 1)
    for codec in CompressionType:
        if codec != CompressionType.NONE:
            by_id[int(codec)] = _lz4_decompress_v2 if codec == CompressionType.LZ4 else general(codec)
    return tuple(by_id)
