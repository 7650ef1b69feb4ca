"""Longer fuzz run of the kernel's entry points.

Decoding: runs of one to three record batches (every codec), mutated or not, through the file
walker, CRC check and both columnar builders (C kernel and Python), and through the kernel's bulk
path (``decode_view``: ``add_v2_run`` with the object path for what it leaves). Invariants: only
``KlogError``s come out, whatever decodes is valid Arrow, and the bulk path gives exactly the rows
and the error class of the batch-by-batch kernel path. The pool also holds transactional batches
and COMMIT/ABORT markers (some compressed); every input is read under read_committed too, with a
random aborted list, in bulk (the kernel's TxnFilter) and batch by batch (filter_read_committed,
the Python reference): the same rows, or the same error class at the same position.

Encoding (every other input): random Arrow rows (null keys, values and header values, headers,
any int64 timestamps, sliced arrays) through ``encode_v2_batches`` with the kernel and its
pure-Python twin, in both modes (records areas; whole batches with header and CRC), for a random
row range and byte bound: the outputs must be identical and every whole batch valid. Then the
same columns with one buffer made to lie (offsets past the data or going back, a short validity
bitmap, header counts past the header columns, a row range past the end) straight into the
kernel: only ``ValueError``/``OverflowError`` may come out (and nothing ASan can see).

    python fuzz/decode.py 1000000            # one million inputs
    # under AddressSanitizer + UBSan (kernel built with KLOG_ASAN=1, see docs/testing.md):
    LD_PRELOAD=$(gcc -print-file-name=libasan.so):$(gcc -print-file-name=libubsan.so) \\
        ASAN_OPTIONS=detect_leaks=0 python fuzz/decode.py 100000
"""

from __future__ import annotations

import random
import sys
import time
from collections.abc import Iterator

import numpy as np
import pyarrow as pa

from storage_core.errors import KlogError
from storage_core.log.txn_index import AbortedTxn
from storage_core.record import columnar
from storage_core.record.columnar import HEADER_TYPE, ArrowDecoder
from storage_core.record.compression import CompressionType
from storage_core.record.control import ControlRecordType, EndTransactionMarker
from storage_core.record.file_records import AnyBatch, iter_batches
from storage_core.record.records import DefaultRecordBatch, Header, Record, build_batch, crc32c
from storage_core.record.scan import decode_view
from storage_core.record.txn_filter import filter_read_committed, new_txn_filter


def seeds(rng: random.Random) -> list[bytes]:
    out = []
    for codec in CompressionType:
        recs = [Record(i, 1_700_000_000_000 + i,
                       None if i % 3 == 0 else bytes(rng.randrange(256) for _ in range(rng.randrange(20))),
                       bytes(rng.randrange(256) for _ in range(rng.randrange(60))),
                       (Header("h", b"v"),) if i % 2 else ())
                for i in range(rng.randrange(1, 12))]
        out.append(build_batch(recs, compression=codec))
    for pid in (1, 2):  # transactional data and markers, for read_committed
        base = rng.randrange(30)
        recs = [Record(base + i, 1_700_000_000_000, b"k", bytes(rng.randrange(256) for _ in range(rng.randrange(20))))
                for i in range(rng.randrange(1, 4))]
        out.append(build_batch(recs, compression=rng.choice(list(CompressionType)), producer_id=pid, producer_epoch=0,
                               base_sequence=0, is_transactional=True))
        for kind in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
            at = rng.randrange(30)
            marker = Record(at, 1_700_000_000_000, kind.key_bytes(), EndTransactionMarker(kind, 0).value_bytes())
            for codec in (CompressionType.NONE, CompressionType.LZ4):
                out.append(build_batch([marker], compression=codec, producer_id=pid, producer_epoch=0,
                                       is_transactional=True, is_control=True))
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


def _maybe_bytes(rng: random.Random, p_null: float, max_len: int) -> bytes | None:
    if rng.random() < p_null:
        return None
    return bytes(rng.randrange(256) for _ in range(rng.choice((0, 1, rng.randrange(max_len + 1)))))


def random_columns(rng: random.Random) -> columnar.EncodeColumns:
    n = rng.randrange(0, 40)
    ts_pool = [0, -1, 1, (1 << 63) - 1, -(1 << 63), 1_700_000_000_000]
    table = pa.table({
        "key": pa.array([_maybe_bytes(rng, 0.2, 30) for _ in range(n)], pa.binary()),
        "value": pa.array([_maybe_bytes(rng, 0.1, 300) for _ in range(n)], pa.binary()),
        "timestamp": pa.array([rng.choice(ts_pool) if rng.random() < 0.3 else 1_700_000_000_000 + rng.randrange(-10**6, 10**6)
                               for _ in range(n)], pa.int64()),
        "headers": pa.array([None if rng.random() < 0.5 else
                             [{"key": bytes(rng.randrange(256) for _ in range(rng.randrange(6))).decode("latin-1"),
                               "value": _maybe_bytes(rng, 0.3, 20)} for _ in range(rng.randrange(4))]
                             for _ in range(n)], HEADER_TYPE),
    })
    if rng.random() < 0.3 and n > 2:  # sliced columns: non-zero array offsets
        a = rng.randrange(n)
        table = table.slice(a, rng.randrange(n - a + 1))
    if rng.random() < 0.3:
        table = table.drop_columns(["key"])
    if rng.random() < 0.3:
        table = table.drop_columns(["headers"])
    return columnar.prepare_columns(table)


def _lie(rng: random.Random, col: tuple[object, object, object, int], n: int) -> tuple[object, object, object, int]:
    validity, offsets, data, off = col
    offs = np.frombuffer(offsets, dtype=np.int32).copy()  # type: ignore[call-overload]
    choice = rng.randrange(4)
    if choice == 0 and len(offs):
        offs[rng.randrange(len(offs))] = rng.choice([-1, 1 << 30, len(data or b"") + 1])  # type: ignore[arg-type]
    elif choice == 1 and len(offs) > 2:
        i = rng.randrange(1, len(offs))
        offs[i - 1], offs[i] = offs[i] + 1, offs[i - 1]
    elif choice == 2:
        validity = b""  # a bitmap shorter than the rows
    else:
        offs = offs[: rng.randrange(len(offs) + 1)]
    return validity, offs.tobytes(), data, off


def encode_one(rng: random.Random) -> str | None:
    """One encode input; returns a description of a failure, or None."""
    cols = random_columns(rng)
    n = cols.num_rows
    start = rng.randrange(n + 1)
    stop = rng.randrange(start, n + 1)
    max_bytes = rng.choice([-1, 0, 1, 50, 500, 5000, 1 << 40])
    header = None if rng.random() < 0.5 else (rng.randrange(-(1 << 62), 1 << 62), rng.randrange(-(1 << 31), 1 << 31),
                                              rng.randrange(1 << 15))
    outcomes = []
    for native in (True, False):
        try:
            out, meta = columnar.encode_v2_batches(cols, start, stop, max_bytes, header, native=native)
            outcomes.append((out, meta.tolist()))
        except (KlogError, ValueError, OverflowError) as exc:
            outcomes.append(type(exc))
    if outcomes[0] != outcomes[1]:
        return f"kernel and Python disagree: {str(outcomes[0])[:200]} vs {str(outcomes[1])[:200]}"
    if header is not None and isinstance(outcomes[0], tuple):
        for raw in outcomes[0][0]:
            DefaultRecordBatch(raw).ensure_valid()
    # the kernel alone, fed buffers that lie
    from storage_core.record import _kernel  # type: ignore[attr-defined]

    keys = columnar._bincol(cols.keys) if cols.keys is not None else None
    values = columnar._bincol(cols.values)
    hk = columnar._bincol(cols.header_keys) if cols.header_keys is not None else None
    hv = columnar._bincol(cols.header_values) if cols.header_values is not None else None
    hc = cols.header_counts
    ts = cols.timestamps
    what = rng.randrange(6)
    if what == 0:
        values = _lie(rng, values, n)
    elif what == 1 and keys is not None:
        keys = _lie(rng, keys, n)
    elif what == 2 and hk is not None:
        hk, hv = _lie(rng, hk, n), _lie(rng, hv, n)  # type: ignore[arg-type]
    elif what == 3 and hc is not None and n:
        hc = hc.copy()
        hc[rng.randrange(n)] = rng.choice([-1, 1 << 20, 1 << 30])
    elif what == 4:
        stop = n + rng.randrange(1, 4)
    else:
        ts = ts[: rng.randrange(n + 1)]
    try:
        _kernel.encode_v2_batches(keys, values, ts, hc, hk, hv, start, stop, max_bytes, header)
    except (ValueError, OverflowError):
        pass
    return None


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
    i = rb.schema.get_field_index("timestamp")  # as int64: years past 9999 have no datetime
    return rb.set_column(i, "timestamp", rb.column(i).cast(pa.int64())).to_pylist(), None


def decode_committed(data: bytes, aborted: list[AbortedTxn], bulk: bool) -> tuple[object, object]:
    """read_committed: the kernel's filter in bulk runs, or filter_read_committed batch by batch."""
    dec = ArrowDecoder("t", 0, include_headers=True, native=bulk)

    def checked() -> Iterator[AnyBatch]:
        for batch in iter_batches(data):
            batch.ensure_valid()
            yield batch

    try:
        if bulk:
            decode_view(memoryview(data), dec, txn=new_txn_filter(aborted, native=True))
        else:
            for batch in filter_read_committed(checked(), aborted):
                dec.add(batch, verify=False)
    except KlogError as exc:
        return None, (type(exc).__name__, exc.position)
    rb = dec.finish()
    rb.validate(full=True)
    i = rb.schema.get_field_index("timestamp")
    return rb.set_column(i, "timestamp", rb.column(i).cast(pa.int64())).to_pylist(), None


def main(argv: list[str]) -> int:
    n = int(argv[0]) if argv else 100_000
    rng = random.Random(int(argv[1]) if len(argv) > 1 else 1)
    pool = seeds(rng)
    untyped = disagree = 0
    t = time.time()
    encodes = 0
    for i in range(n):
        if i % 2 == 1 and columnar.native_kernel() is not None:
            encodes += 1
            try:
                problem = encode_one(rng)
            except Exception as exc:  # noqa: BLE001 - this is what the run looks for
                problem = f"UNTYPED {type(exc).__name__}: {exc}"
            if problem:
                untyped += 1
                print(f"ENCODE {problem}")
            continue
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
        if columnar.native_kernel() is not None:
            aborted = [AbortedTxn(rng.choice((1, 2)), rng.randrange(30), rng.randrange(30), 0)
                       for _ in range(rng.randrange(3))]
            try:
                committed = [decode_committed(data, aborted, bulk) for bulk in (True, False)]
            except Exception as exc:  # noqa: BLE001 - this is what the run looks for
                untyped += 1
                print(f"UNTYPED read_committed {type(exc).__name__}: {exc} aborted={aborted} input={data.hex()}")
            else:
                if committed[0] != committed[1]:
                    disagree += 1
                    print(f"DISAGREE read_committed bulk={committed[0][1]} batches={committed[1][1]} "
                          f"aborted={aborted} input={data.hex()}")
    print(f"inputs={n} decodes={3 * (n - encodes)} encodes={encodes} untyped={untyped} disagreements={disagree} "
          f"seconds={time.time() - t:.0f}")
    return 1 if untyped or disagree else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
