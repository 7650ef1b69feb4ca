"""Longer fuzz run of the decoders: runs of mutated record batches (every codec) through the file
walker, CRC check and both columnar builders (C kernel and Python), and through the kernel's bulk
path (``decode_view``: ``add_v2_run`` with the object path for what it leaves). Invariants: only
``KlogError``s come out, whatever decodes is valid Arrow, and the bulk path gives exactly the rows
and the error class of the batch-by-batch kernel path.

    python fuzz/decode.py 1000000            # one million inputs
    # under AddressSanitizer + UBSan (kernel built with KLOG_ASAN=1, see README):
    LD_PRELOAD=$(gcc -print-file-name=libasan.so):$(gcc -print-file-name=libubsan.so) \\
        ASAN_OPTIONS=detect_leaks=0 python fuzz/decode.py 100000
"""

from __future__ import annotations

import random
import sys
import time

from storage_core.columnar import ArrowDecoder
from storage_core.compression import CompressionType
from storage_core.errors import KlogError
from storage_core.file_records import iter_batches
from storage_core.records import Header, Record, build_batch, crc32c
from storage_core.scan import decode_view


def seeds(rng: random.Random) -> list[bytes]:
    out = []
    for codec in CompressionType:
        recs = [Record(i, 1_700_000_000_000 + i,
                       None if i % 3 == 0 else bytes(rng.randrange(256) for _ in range(rng.randrange(20))),
                       bytes(rng.randrange(256) for _ in range(rng.randrange(60))),
                       (Header("h", b"v"),) if i % 2 else ())
                for i in range(rng.randrange(1, 12))]
        out.append(build_batch(recs, compression=codec))
    return out


def mutate(rng: random.Random, seed: bytes) -> bytes:
    b = bytearray(seed)
    for _ in range(rng.randrange(1, 4)):
        pos = rng.randrange(61, len(b)) if len(b) > 61 and rng.random() < 0.8 else rng.randrange(len(b))
        b[pos] = rng.randrange(256)
    if rng.random() < 0.7 and len(b) > 21:  # a valid CRC, so that the record parser is reached
        b[17:21] = crc32c(bytes(b[21:])).to_bytes(4, "big")
    if rng.random() < 0.1:
        b = b[: rng.randrange(len(b))]
    return bytes(b)


def decode(data: bytes, mode: str) -> tuple[object, str | None]:
    """(the rows, or None; the error class name, or None) of one way of decoding ``data``."""
    dec = ArrowDecoder("t", 0, include_headers=True, native=mode != "python")
    try:
        if mode == "bulk":
            decode_view(memoryview(data), dec)
        else:
            for batch in iter_batches(data):
                dec.add(batch)
    except KlogError as exc:
        return None, type(exc).__name__
    rb = dec.finish()
    rb.validate(full=True)
    return rb.to_pylist(), None


def main(argv: list[str]) -> int:
    n = int(argv[0]) if argv else 100_000
    rng = random.Random(int(argv[1]) if len(argv) > 1 else 1)
    pool = seeds(rng)
    untyped = disagree = 0
    t = time.time()
    for _ in range(n):
        # one to three batches, any of them mutated: the bulk path walks runs of batches
        data = b"".join(mutate(rng, rng.choice(pool)) if rng.random() < 0.7 else rng.choice(pool)
                        for _ in range(rng.randrange(1, 4)))
        outcomes = {}
        for mode in ("kernel", "python", "bulk"):
            try:
                outcomes[mode] = decode(data, mode)
            except Exception as exc:  # noqa: BLE001 - this is what the run looks for
                untyped += 1
                print(f"UNTYPED {mode} {type(exc).__name__}: {exc} input={data.hex()}")
        if "kernel" in outcomes and "bulk" in outcomes and outcomes["kernel"] != outcomes["bulk"]:
            disagree += 1
            print(f"DISAGREE kernel={outcomes['kernel'][1]} bulk={outcomes['bulk'][1]} input={data.hex()}")
    print(f"inputs={n} decodes={3 * n} untyped={untyped} disagreements={disagree} seconds={time.time() - t:.0f}")
    return 1 if untyped or disagree else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
