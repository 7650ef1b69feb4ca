"""Encode throughput: klog's columnar encoder against kafka-python's batch builder, same records.

The table of ``benchmarks.decode.make_table`` (``--records`` rows of 10-byte keys, 100-byte
JSON-ish values and int64 ms timestamps, seeded) is encoded into uncompressed v2 record batches
of at most 16 KiB, as a producer with ``batch.size=16384`` would build them, in this process:

* ``klog``: ``encode_arrow(table, max_batch_bytes=16384)`` with the native kernel, from the
  Arrow table to a list of whole batches (header and CRC-32C included);
* ``klog (pure Python)``: the same with ``native=False``, for information;
* ``kafka-python``: ``DefaultRecordBatchBuilder(magic=2, compression_type=0, ...,
  batch_size=16384)``, ``append(offset, timestamp, key, value, headers=[])`` until it returns
  None (the batch is full), then ``build()``, for every batch. Its inputs are the same rows as
  Python lists (built once, outside the timing: the builder takes ``bytes``).

Both bound a batch at 16 KiB with the first record always admitted (kafka-python counts the
61-byte header in ``batch_size``; klog's ``max_batch_bytes`` does too), so both cut the same
batches. Before timing, klog's batches are decoded back (CRCs checked) and must equal the table,
and kafka-python's built batches, read with kafka-python's own reader, must hold the same
offsets, keys, values and timestamps: a broken encoder cannot be timed.

Each is timed best of ``--repeat``; throughput is in records/s and MB/s (10^6 bytes/s) of encoded
batches. Run ``python -m benchmarks.encode`` from the repository root. The line to grep:
``ratio encode klog/kafka-python: <x>x``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import pyarrow as pa
from kafka.record import MemoryRecords
from kafka.record.default_records import DefaultRecordBatchBuilder

from benchmarks import _summary as summary
from benchmarks import decode
from benchmarks.decode import DEFAULT_SEED, MAX_BATCH_BYTES, VALUE_BYTES, Measurement, best_of, make_table
from storage_core.record.columnar import decode_batches, encode_arrow, native_kernel
from storage_core.record.file_records import iter_batches

__all__ = ["main", "run"]

DEFAULT_RECORDS = 200_000
DEFAULT_REPEAT = 5

KLOG = "klog"
KLOG_PY = "klog (pure Python)"
KAFKA_PYTHON = "kafka-python"


def encode_klog(table: pa.Table, native: bool | None = None) -> list[bytes]:
    return encode_arrow(table, max_batch_bytes=MAX_BATCH_BYTES, native=native)


def python_rows(table: pa.Table) -> tuple[list[bytes], list[bytes], list[int]]:
    """The table's keys, values and timestamps as Python lists (kafka-python's input)."""
    return (table.column("key").to_pylist(), table.column("value").to_pylist(),
            table.column("timestamp").to_pylist())


def encode_kafka_python(rows: tuple[list[bytes], list[bytes], list[int]]) -> list[bytes]:
    """kafka-python's producer work per batch: a builder, appends until full, ``build()``."""
    keys, values, timestamps = rows
    n = len(keys)
    out: list[bytes] = []
    i = 0
    while i < n:
        builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                            producer_epoch=-1, base_sequence=-1, batch_size=MAX_BATCH_BYTES)
        offset = 0
        while i < n:
            if builder.append(offset, timestamps[i], keys[i], values[i], headers=[]) is None:
                break  # full: this record starts the next batch
            offset += 1
            i += 1
        out.append(builder.build())
    return out


def check_agree(table: pa.Table, klog: list[bytes], klog_py: list[bytes] | None, kafka: list[bytes]) -> None:
    """klog's batches decode back to the table; kafka-python's hold the same records."""
    n = table.num_rows

    def fail(what: str) -> None:
        raise AssertionError(f"encode: {what}")

    decoded = decode_batches([b for raw in klog for b in iter_batches(raw)], verify=True)
    if decoded.num_rows != n or decoded.column("offset").to_pylist() != list(range(n)):
        fail(f"klog's batches decode to {decoded.num_rows} records with wrong offsets; expected {n}")
    for name in ("key", "value"):
        if not decoded.column(name).equals(table.column(name).combine_chunks()):
            fail(f"klog's batches decode to different {name}s than the table's")
    ts = [t // 1000 for t in decoded.column("timestamp").cast(pa.int64()).to_pylist()]
    if ts != table.column("timestamp").to_pylist():
        fail("klog's batches decode to different timestamps than the table's")
    if klog_py is not None and klog_py != klog:
        fail("klog's kernel and pure-Python encoders wrote different bytes")

    cols: dict[str, list[Any]] = {"offset": [], "timestamp": [], "key": [], "value": []}
    base = 0
    for raw in kafka:  # each built batch has base offset 0: number them as one log would
        batch = MemoryRecords(bytes(raw)).next_batch()
        if batch is None or not batch.validate_crc():
            fail("kafka-python built a batch it cannot read back or whose CRC is wrong")
        count = 0
        for rec in batch:
            cols["offset"].append(base + rec.offset)
            cols["timestamp"].append(rec.timestamp)
            cols["key"].append(rec.key)
            cols["value"].append(rec.value)
            count += 1
        base += count
    if cols["offset"] != list(range(n)):
        fail(f"kafka-python's batches hold {len(cols['offset'])} records, expected {n}")
    if cols["key"] != table.column("key").to_pylist() or cols["value"] != table.column("value").to_pylist():
        fail("kafka-python's batches hold different keys or values than the table")
    if cols["timestamp"] != table.column("timestamp").to_pylist():
        fail("kafka-python's batches hold different timestamps than the table")
    if len(kafka) != len(klog):
        fail(f"kafka-python cut {len(kafka)} batches and klog {len(klog)}: not the same bound")


def run(records: int = DEFAULT_RECORDS, repeat: int = DEFAULT_REPEAT, seed: int = DEFAULT_SEED, *,
        pure_python: bool = True, log: Callable[[str], None] = print) -> list[Measurement]:
    table = make_table(records, seed)
    rows = python_rows(table)
    klog = encode_klog(table)
    klog_py = encode_klog(table, native=False) if pure_python else None
    kafka = encode_kafka_python(rows)
    check_agree(table, klog, klog_py, kafka)
    size = sum(len(b) for b in klog)
    log(f"{records:,} records → {len(klog):,} batches, {size:,} bytes (kafka-python: {len(kafka):,} batches, "
        f"{sum(len(b) for b in kafka):,} bytes); outputs checked")
    del klog, klog_py, kafka
    timings = {KLOG: best_of(repeat, partial(encode_klog, table))}
    if pure_python:
        timings[KLOG_PY] = best_of(max(1, min(repeat, 2)), partial(encode_klog, table, False))
    timings[KAFKA_PYTHON] = best_of(repeat, partial(encode_kafka_python, rows))
    return [Measurement("uncompressed", name, records, size, seconds, rss) for name, (seconds, rss) in timings.items()]


def ratio(results: Sequence[Measurement], encoder: str = KLOG) -> float:
    """How many times faster ``encoder`` is than kafka-python."""
    return decode.ratio(results, "uncompressed", encoder)


def main(argv: Sequence[str] | None = None) -> int:
    doc = __doc__ or ""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.encode", description=doc.splitlines()[0])
    parser.add_argument("--records", type=int, default=DEFAULT_RECORDS, help="records (default %(default)s)")
    parser.add_argument("--repeat", type=int, default=DEFAULT_REPEAT,
                        help="runs per measurement, the best kept (default %(default)s)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="data seed (default %(default)s)")
    parser.add_argument("--pure-python", action=argparse.BooleanOptionalAction, default=True,
                        help="also time klog's pure-Python encoder (default: yes)")
    args = parser.parse_args(argv)
    if args.records < 1 or args.repeat < 1:
        parser.error("--records and --repeat must be at least 1")

    kernel = native_kernel()
    print(f"encode benchmark: {args.records:,} records, {VALUE_BYTES}-byte values, 10-byte keys, timestamps, "
          f"uncompressed batches <= {MAX_BATCH_BYTES} bytes, seed {args.seed}, best of {args.repeat}")
    print(f"klog kernel: {getattr(kernel, '__file__', 'NOT BUILT, klog runs the pure-Python encoder')}")
    results = run(args.records, args.repeat, args.seed, pure_python=args.pure_python)
    print()
    print(decode.format_table(results, "encoder"))
    print()
    print(f"ratio encode klog/kafka-python: {ratio(results):.1f}x")
    print("peak RSS: the process's during each encoder's runs (the table and the Python rows included)")
    by = {m.name: m for m in results}
    summary.add(summary.Row(
        "columnar encode from Arrow, uncompressed, 16 KiB batches", f"{by[KLOG].records_per_s / 1e6:.1f} M records/s",
        f"kafka-python's `DefaultRecordBatchBuilder`, {by[KAFKA_PYTHON].records_per_s / 1e6:.2f} M records/s",
        ratio(results), "throughput", 30.0, by[KLOG].peak_rss))
    return 0


if __name__ == "__main__":
    sys.exit(main())
