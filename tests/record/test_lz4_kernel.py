"""The kernel's LZ4 frame decoder against python-lz4 (the reference library, lz4.c and lz4frame.c).

The kernel decodes the lz4 records areas of v2 batches itself and declines any frame it is not
sure of (the Python codec then decides). Two properties: every frame python-lz4 writes, in every
setting, decodes to the bytes that were compressed; and no frame, however damaged, is decoded by
the kernel unless python-lz4 decodes it to the same bytes.
"""

from __future__ import annotations

import itertools
import os
import random

import lz4.frame
import pytest

from storage_core.record.columnar import native_kernel
from storage_core.record.compression import xxh32

kernel = native_kernel()
pytestmark = pytest.mark.skipif(kernel is None, reason="the native kernel is not built")


def payloads(rng: random.Random) -> list[bytes]:
    words = [b"order", b"user", b"amount", b"{\"id\":", b"note", b"-", b"42", b"\n"]
    text = b" ".join(rng.choice(words) for _ in range(20_000))
    out = [b"", b"x", b"abcde", os.urandom(13), b"\0" * 100_000, text[:70_000], text,
           os.urandom(70_000),  # incompressible: stored blocks
           bytes(rng.randrange(4) for _ in range(50_000)),
           os.urandom(5000) + b"\0" * 5000 + text[:5000] + os.urandom(3)]
    # short periods (offsets below 8 and 16, the pattern copies) and lengths around the block end
    for period in (1, 2, 3, 5, 7, 8, 9, 15, 16, 17, 31):
        unit = os.urandom(period)
        out.append(os.urandom(rng.randrange(20)) + unit * (rng.randrange(100, 3000) // period) + os.urandom(7))
    for n in (65_535, 65_536, 65_537, 262_144 + 3):
        out.append((text * 3)[:n])
    return out


SETTINGS = list(itertools.product(
    (lz4.frame.BLOCKSIZE_MAX64KB, lz4.frame.BLOCKSIZE_MAX256KB, lz4.frame.BLOCKSIZE_MAX1MB,
     lz4.frame.BLOCKSIZE_MAX4MB),
    (False, True),   # block_linked
    (False, True),   # content_checksum
    (False, True),   # block_checksum
    (False, True),   # store_size
))


@pytest.mark.parametrize("level", [0, 9])
def test_kernel_decodes_every_frame_python_lz4_writes(level: int) -> None:
    assert kernel is not None
    rng = random.Random(level)
    settings = SETTINGS if level == 0 else rng.sample(SETTINGS, 12)  # the HC compressor is slow
    for data in payloads(rng):
        for block_size, linked, content_sum, block_sum, store_size in settings:
            frame = lz4.frame.compress(data, compression_level=level, block_size=block_size, block_linked=linked,
                                       content_checksum=content_sum, block_checksum=block_sum, store_size=store_size)
            got = kernel.lz4_frame_decompress(frame)
            assert got == data, (len(data), block_size, linked, content_sum, block_sum, store_size)


def _reference(frame: bytes) -> bytes | None:
    try:
        return lz4.frame.decompress(frame)  # type: ignore[no-any-return]
    except RuntimeError:
        return None


def test_kernel_never_decodes_a_frame_the_reference_refuses_or_reads_otherwise() -> None:
    """Damaged frames: bytes flipped (with the header checksum made right again half the time),
    cut, extended, blocks resized. The kernel may decline any of them; what it decodes, python-lz4
    must decode to the same bytes."""
    assert kernel is not None
    rng = random.Random(7)
    seeds = []
    for data in payloads(rng)[:18]:
        for block_size, linked, content_sum, block_sum, store_size in rng.sample(SETTINGS, 3):
            seeds.append(lz4.frame.compress(data[:20_000], block_size=block_size, block_linked=linked,
                                            content_checksum=content_sum, block_checksum=block_sum,
                                            store_size=store_size))
    accepted = declined = 0
    for i in range(10_000):
        frame = bytearray(rng.choice(seeds))
        for _ in range(rng.randrange(1, 4)):
            what = rng.random()
            if what < 0.6 and len(frame) > 7:
                # mostly in the block data, where a decoder's own rules are tested
                pos = rng.randrange(7, len(frame)) if rng.random() < 0.8 else rng.randrange(len(frame))
                frame[pos] = rng.choice([0, 255, 15, 0xF0, rng.randrange(256)]) if rng.random() < 0.5 else frame[pos] ^ (1 << rng.randrange(8))
            elif what < 0.8:
                del frame[rng.randrange(len(frame) + 1):]
            else:
                frame += os.urandom(rng.randrange(1, 9))
        if rng.random() < 0.5 and len(frame) >= 7:
            desc = 2 + (8 if frame[4] & 0x08 else 0)
            if len(frame) > 4 + desc:
                frame[4 + desc] = (xxh32(bytes(frame[4:4 + desc])) >> 8) & 0xFF
        got = kernel.lz4_frame_decompress(bytes(frame))
        if got is None:
            declined += 1
            continue
        accepted += 1
        assert got == _reference(bytes(frame)), f"input {i}: the kernel decoded a frame python-lz4 refuses or reads otherwise"
    assert accepted > 200 and declined > 200, (accepted, declined)  # both sides of the rule were reached
