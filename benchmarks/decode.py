"""Decode throughput: klog's columnar decoder against kafka-python's, on the same segment file.

A segment of ``--records`` records (100-byte JSON-ish values, 10-byte keys, batches of at most
16 KiB as a producer with ``batch.size=16384`` writes them) is written with klog's own encoder,
once uncompressed and once lz4, into a temporary directory. On each file, in this process:

* ``klog``: ``decode_file_range`` (what Spark reads run: the file read in chunks, runs of batches
  decoded by one kernel call each, CRCs checked) to one ``pyarrow.RecordBatch``;
* ``klog batch by batch``: ``decode_batches(FileRecords(path).batches())``, the kernel called
  once per batch, for information;
* ``klog (pure Python)``: the same with ``native=False``, for information;
* ``kafka-python``: ``MemoryRecords(file bytes)``, every batch's ``validate_crc()``, and every
  record's offset, timestamp, key, value and headers read;
* ``lz4 alone`` (lz4 case): ``lz4.frame.decompress`` of every batch's records area, already in
  memory: the decompression klog has to do, and nothing else.

Each is timed best of ``--repeat``; throughput is in records/s and in MB/s (10^6 bytes/s) of the
``.log`` file, and each row gives the process's peak resident memory during its runs. Before
timing, the decoders' offsets, timestamps, keys and values are checked against each other and
against the data written, so a broken decoder cannot be timed.

Run ``python -m benchmarks.decode`` (or ``python benchmarks/decode.py``) from the repository root.
The lines to grep: ``ratio <case> klog/kafka-python: <x>x`` and
``ratio lz4 klog/lz4-alone throughput: <x>x``.
"""

from __future__ import annotations

import argparse
import gc
import random
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import lz4.frame
import pyarrow as pa
from kafka.record import MemoryRecords

from benchmarks import _summary as summary
from benchmarks._memory import peak_rss_bytes, reset_peak_rss
from storage_core.record.columnar import ArrowDecoder, decode_batches, encode_arrow, native_kernel
from storage_core.record.compression import CompressionType
from storage_core.record.file_records import FileRecords
from storage_core.record.records import RECORD_BATCH_OVERHEAD
from storage_core.record.scan import decode_file_range

__all__ = ["CASES", "Measurement", "build_segment", "main", "make_table", "run"]

DEFAULT_RECORDS = 200_000
DEFAULT_REPEAT = 5
DEFAULT_SEED = 20_240_917
VALUE_BYTES = 100
MAX_BATCH_BYTES = 16_384
BASE_TIMESTAMP_MS = 1_700_000_000_000
TOPIC = "bench"

#: Case name → codec of the segment file.
CASES: dict[str, CompressionType] = {"uncompressed": CompressionType.NONE, "lz4": CompressionType.LZ4}

KLOG = "klog"
KLOG_BATCHES = "klog batch by batch"
KLOG_PY = "klog (pure Python)"
KAFKA_PYTHON = "kafka-python"
LZ4_ALONE = "lz4 alone"

_EVENTS = ("click", "view", "purchase", "signup", "logout", "search", "add_to_cart")
_WORDS = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet")


@dataclass(frozen=True)
class Measurement:
    """One timed way of doing a case: best wall time and the peak memory of its runs."""

    case: str
    name: str       # the decoder, encoder... timed
    records: int
    nbytes: int     # bytes of the data measured (the .log file, the batches written)
    seconds: float  # the best of the runs
    peak_rss: int   # the process's peak resident bytes during the runs

    @property
    def records_per_s(self) -> float:
        return self.records / self.seconds

    @property
    def mb_per_s(self) -> float:
        return self.nbytes / self.seconds / 1e6


# --- the data ---------------------------------------------------------------------------------


def _value(rng: random.Random) -> bytes:
    """A 100-byte JSON-ish event: some random fields, some text lz4 finds again."""
    head = (f'{{"user":{rng.randrange(1_000_000)},"event":"{rng.choice(_EVENTS)}",'
            f'"amount":{rng.randrange(100_000)},"id":"{rng.getrandbits(64):016x}","note":"')
    note = " ".join(rng.choice(_WORDS) for _ in range(VALUE_BYTES // 4))
    return (head + note)[:VALUE_BYTES - 2].encode() + b'"}'


def make_table(n: int, seed: int = DEFAULT_SEED) -> pa.Table:
    """``n`` rows of ``key`` (10 bytes), ``value`` (100 bytes), ``timestamp`` (int64 ms), seeded."""
    rng = random.Random(seed)
    keys = [f"key-{rng.randrange(1_000_000):06d}".encode() for _ in range(n)]
    values = [_value(rng) for _ in range(n)]
    timestamps = [BASE_TIMESTAMP_MS + 10 * i + rng.randrange(10) for i in range(n)]
    return pa.table({
        "key": pa.array(keys, pa.binary()),
        "value": pa.array(values, pa.binary()),
        "timestamp": pa.array(timestamps, pa.int64()),
    })


def build_segment(table: pa.Table, path: Path, compression: CompressionType) -> int:
    """Write ``table`` as a segment file of v2 batches; returns the number of batches."""
    batches = encode_arrow(table, compression=compression, max_batch_bytes=MAX_BATCH_BYTES)
    path.write_bytes(b"".join(batches))
    return len(batches)


# --- the decoders -----------------------------------------------------------------------------


def decode_klog(path: Path) -> pa.RecordBatch:
    """What a Spark read does with a slice: the bulk path, CRCs checked."""
    dec = ArrowDecoder(TOPIC, 0)
    for _ in decode_file_range(FileRecords(path), 0, None, dec, verify=True):  # no flush limits: one batch
        raise AssertionError("decode_file_range flushed without flush limits")
    return dec.finish()


def decode_klog_batches(path: Path, native: bool | None = None) -> pa.RecordBatch:
    return decode_batches(FileRecords(path).batches(), TOPIC, 0, native=native, verify=True)


def records_areas(path: Path) -> list[bytes]:
    """The compressed records area of every batch of the file, in memory."""
    return [bytes(b.buffer[RECORD_BATCH_OVERHEAD:]) for b in FileRecords(path).batches()]


def decompress_lz4_alone(areas: list[bytes]) -> int:
    return sum(len(lz4.frame.decompress(a)) for a in areas)


def decode_kafka_python(path: Path) -> int:
    """kafka-python's consumer work on a fetched record set; returns the number of records."""
    records = MemoryRecords(path.read_bytes())
    n = 0
    while (batch := records.next_batch()) is not None:
        if not batch.validate_crc():
            raise AssertionError(f"kafka-python: CRC mismatch in the batch at offset {batch.base_offset}")
        for rec in batch:
            _offset = rec.offset
            _timestamp = rec.timestamp
            _key = rec.key
            _value = rec.value
            _headers = rec.headers
            n += 1
    return n


def kafka_python_columns(path: Path) -> dict[str, list[Any]]:
    """offset, timestamp, key, value of every record, as kafka-python decodes them."""
    cols: dict[str, list[Any]] = {"offset": [], "timestamp": [], "key": [], "value": []}
    records = MemoryRecords(path.read_bytes())
    while (batch := records.next_batch()) is not None:
        for rec in batch:
            cols["offset"].append(rec.offset)
            cols["timestamp"].append(rec.timestamp)
            cols["key"].append(rec.key)
            cols["value"].append(rec.value)
    return cols


def check_agree(case: str, table: pa.Table, klog: pa.RecordBatch, klog_py: pa.RecordBatch | None,
                kafka: dict[str, list[Any]]) -> None:
    """klog, its pure-Python twin, kafka-python and the data written all say the same."""
    n = table.num_rows

    def fail(what: str) -> None:
        raise AssertionError(f"{case}: {what}")

    if klog.num_rows != n or len(kafka["offset"]) != n:
        fail(f"record counts differ: written {n}, klog {klog.num_rows}, kafka-python {len(kafka['offset'])}")
    offsets = klog.column("offset").to_pylist()
    if offsets != list(range(n)) or kafka["offset"] != offsets:
        fail("offsets differ between klog, kafka-python and the data written")
    written_values = table.column("value").combine_chunks()
    if not klog.column("value").equals(written_values) or kafka["value"] != written_values.to_pylist():
        fail("values differ between klog, kafka-python and the data written")
    written_keys = table.column("key").combine_chunks()
    if not klog.column("key").equals(written_keys) or kafka["key"] != written_keys.to_pylist():
        fail("keys differ between klog, kafka-python and the data written")
    ts_ms = klog.column("timestamp").cast(pa.int64()).to_pylist()
    if [t // 1000 for t in ts_ms] != kafka["timestamp"] or kafka["timestamp"] != table.column("timestamp").to_pylist():
        fail("timestamps differ between klog, kafka-python and the data written")
    if klog_py is not None and not klog_py.equals(klog):
        fail("klog's native and pure-Python decoders disagree")


# --- timing -----------------------------------------------------------------------------------


def best_of(repeat: int, fn: Callable[[], object]) -> tuple[float, int]:
    """The shortest wall time of ``repeat`` calls of ``fn`` (a full collection before each), and
    the peak resident memory of the process during them."""
    best = float("inf")
    gc.collect()
    reset_peak_rss()
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best, peak_rss_bytes()


def run(records: int = DEFAULT_RECORDS, repeat: int = DEFAULT_REPEAT, seed: int = DEFAULT_SEED, *,
        pure_python: bool = True, workdir: Path | None = None, log: Callable[[str], None] = print) -> list[Measurement]:
    """Build the segments, check the decoders agree on them, time them; one row per case and decoder."""
    table = make_table(records, seed)
    out: list[Measurement] = []
    plain_area_bytes = 0
    with tempfile.TemporaryDirectory(prefix="klog-bench-", dir=workdir) as tmp:
        for case, codec in CASES.items():
            path = Path(tmp) / case / "00000000000000000000.log"
            path.parent.mkdir()
            start = time.perf_counter()
            n_batches = build_segment(table, path, codec)
            size = path.stat().st_size
            log(f"{case}: {records:,} records in {n_batches:,} batches, {size:,} bytes "
                f"(written in {time.perf_counter() - start:.1f} s)")

            if codec == CompressionType.NONE:
                plain_area_bytes = sum(len(a) for a in records_areas(path))
            klog = decode_klog(path)
            if not decode_klog_batches(path).equals(klog):
                raise AssertionError(f"{case}: klog's bulk and batch-by-batch decoders disagree")
            check_agree(case, table, klog, decode_klog_batches(path, native=False) if pure_python else None,
                        kafka_python_columns(path))
            del klog

            timings = {KLOG: best_of(repeat, partial(decode_klog, path)),
                       KLOG_BATCHES: best_of(repeat, partial(decode_klog_batches, path))}
            if pure_python:
                timings[KLOG_PY] = best_of(repeat, partial(decode_klog_batches, path, native=False))
            timings[KAFKA_PYTHON] = best_of(repeat, partial(decode_kafka_python, path))
            if codec == CompressionType.LZ4:
                areas = records_areas(path)
                if decompress_lz4_alone(areas) != plain_area_bytes:
                    raise AssertionError("lz4 alone: the decompressed areas are not the uncompressed file's")
                timings[LZ4_ALONE] = best_of(repeat, partial(decompress_lz4_alone, areas))
                del areas
            out += [Measurement(case, name, records, size, seconds, rss) for name, (seconds, rss) in timings.items()]
    return out


def ratio(results: Sequence[Measurement], case: str, decoder: str = KLOG, peer: str = KAFKA_PYTHON) -> float:
    """How many times the throughput of ``peer`` ``decoder`` has on ``case``."""
    by_name = {m.name: m for m in results if m.case == case}
    return by_name[peer].seconds / by_name[decoder].seconds


def format_table(results: Sequence[Measurement], what: str = "decoder") -> str:
    lines = [f"{'case':<13} {what:<20} {'best s':>8} {'records/s':>12} {'MB/s':>8} {'vs kafka-python':>16} "
             f"{'peak RSS MiB':>13}"]
    for m in results:
        lines.append(f"{m.case:<13} {m.name:<20} {m.seconds:>8.4f} {m.records_per_s:>12,.0f} "
                     f"{m.mb_per_s:>8.1f} {ratio(results, m.case, m.name):>15.1f}x {m.peak_rss / (1 << 20):>13.0f}")
    return "\n".join(lines)


def add_summary(results: Sequence[Measurement]) -> None:
    by = {(m.case, m.name): m for m in results}
    for case, label in (("uncompressed", "uncompressed"), ("lz4", "lz4")):
        k, peer = by[(case, KLOG)], by[(case, KAFKA_PYTHON)]
        summary.add(summary.Row(
            f"columnar decode, {label}, 100-byte values, CRC checked", f"{k.records_per_s / 1e6:.1f} M records/s",
            f"kafka-python's decoder, {peer.records_per_s / 1e6:.2f} M records/s", ratio(results, case),
            "throughput", 50.0 if case == "uncompressed" else None, k.peak_rss))
    k, alone = by[("lz4", KLOG)], by[("lz4", LZ4_ALONE)]
    summary.add(summary.Row(
        "columnar decode, lz4", f"{k.mb_per_s:.0f} MB/s of segment", f"lz4.frame.decompress of every batch "
        f"alone, {alone.mb_per_s:.0f} MB/s", ratio(results, "lz4", KLOG, LZ4_ALONE), "throughput", 0.7,
        k.peak_rss))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.decode", description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=DEFAULT_RECORDS,
                        help="records per segment (default %(default)s)")
    parser.add_argument("--repeat", type=int, default=DEFAULT_REPEAT,
                        help="runs per measurement, the best kept (default %(default)s)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="data seed (default %(default)s)")
    parser.add_argument("--pure-python", action=argparse.BooleanOptionalAction, default=True,
                        help="also time klog's pure-Python builder (default: yes)")
    parser.add_argument("--workdir", type=Path, default=None, help="where to make the temporary directory")
    args = parser.parse_args(argv)
    if args.records < 1 or args.repeat < 1:
        parser.error("--records and --repeat must be at least 1")

    kernel = native_kernel()
    print(f"decode benchmark: {args.records:,} records, {VALUE_BYTES}-byte values, 10-byte keys, "
          f"batches <= {MAX_BATCH_BYTES} bytes, seed {args.seed}, best of {args.repeat}")
    print(f"klog kernel: {getattr(kernel, '__file__', 'NOT BUILT, klog runs the pure-Python builder')}")
    results = run(args.records, args.repeat, args.seed, pure_python=args.pure_python, workdir=args.workdir)
    print()
    print(format_table(results))
    print()
    for case in CASES:
        print(f"ratio {case} klog/kafka-python: {ratio(results, case):.1f}x")
    print(f"ratio lz4 klog/lz4-alone throughput: {ratio(results, 'lz4', KLOG, LZ4_ALONE):.2f}x")
    add_summary(results)
    print("peak RSS: the process's, data and every earlier step included (the table and files take about "
          "a third of it)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
