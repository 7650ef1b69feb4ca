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

Transactional data (``--txn-records``, by default five times ``--records``): the same kind of
records written by 8 producers in transactions of 1-4 batches, interleaved, about 30% of them
aborted (ABORT markers and the aborted list a ``.txnindex`` would hold), once uncompressed and once
lz4. On each file:

* ``read_uncommitted``: ``decode_file_range`` as above (every record, control batches left out);
* ``read_committed``: ``decode_file_range(..., txn=new_txn_filter(aborted))``, the kernel's filter
  in the same bulk runs;
* ``read_committed batch by batch``: what read_committed reads did before, for context:
  ``filter_read_committed`` over the CRC-checked batches, then ``ArrowDecoder.add`` per batch.

Before timing, the read_committed rows of both paths are checked against each other and against
the transactions the generator committed.

Each is timed best of ``--repeat``; throughput is in records/s and in MB/s (10^6 bytes/s) of the
``.log`` file, and each row gives the process's peak resident memory during its runs. Before
timing, the decoders' offsets, timestamps, keys and values are checked against each other and
against the data written, so a broken decoder cannot be timed.

Run ``python -m benchmarks.decode`` (or ``python benchmarks/decode.py``) from the repository root.
The lines to grep: ``ratio <case> klog/kafka-python: <x>x``,
``ratio lz4 klog/lz4-alone throughput: <x>x`` and ``ratio txn <case> read_committed/read_uncommitted
time: <x>x`` (target: at most 1.2x).
"""

from __future__ import annotations

import argparse
import gc
import random
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import lz4.frame
import numpy as np
import pyarrow as pa
from kafka.record import MemoryRecords

from benchmarks import _summary as summary
from benchmarks._memory import peak_rss_bytes, reset_peak_rss
from storage_core.log.txn_index import AbortedTxn
from storage_core.record.columnar import (
    ArrowDecoder,
    decode_batches,
    encode_arrow,
    encode_v2_batches,
    native_kernel,
    prepare_columns,
)
from storage_core.record.compression import CompressionType, compress
from storage_core.record.control import ControlRecordType, EndTransactionMarker
from storage_core.record.file_records import AnyBatch, FileRecords
from storage_core.record.records import (
    RECORD_BATCH_OVERHEAD,
    TimestampType,
    batch_attributes,
    build_end_txn_marker,
    write_batch_header,
)
from storage_core.record.scan import decode_file_range
from storage_core.record.txn_filter import filter_read_committed, new_txn_filter

__all__ = ["CASES", "Measurement", "TxnSegment", "build_segment", "build_txn_segment", "main", "make_table", "run",
           "run_txn"]

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
READ_UNCOMMITTED = "read_uncommitted"
READ_COMMITTED = "read_committed"
READ_COMMITTED_BATCHES = "read_committed batch by batch"

#: The transactional segments: producers writing at once, batches per transaction, share aborted.
TXN_PRODUCERS = 8
TXN_MAX_BATCHES = 4
TXN_ABORT_SHARE = 0.3
TXN_PRODUCER_BASE = 4000

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


@dataclass(frozen=True)
class TxnSegment:
    """A transactional segment file and what its generator knows about it."""

    aborted: list[AbortedTxn]       # what the segment's .txnindex holds
    committed_rows: np.ndarray      # the table rows a read_committed read returns, in offset order
    committed_offsets: np.ndarray   # and their offsets
    batches: int                    # data batches
    markers: int                    # COMMIT and ABORT markers


def build_txn_segment(table: pa.Table, path: Path, compression: CompressionType, seed: int) -> TxnSegment:
    """Write ``table`` as batches of producers in transactions (see the module's doc) with their
    markers; offsets from 0, one per record and one per marker."""
    rng = random.Random(seed)
    cols = prepare_columns(table)
    areas, meta = encode_v2_batches(cols, 0, cols.num_rows, MAX_BATCH_BYTES - RECORD_BATCH_OVERHEAD, None)
    attributes = batch_attributes(compression, TimestampType.CREATE_TIME, True, False)
    out: list[bytes] = []
    aborted: list[AbortedTxn] = []
    committed: list[tuple[int, int, int]] = []  # (first row, end row, offset of the first row)
    open_txn: dict[int, tuple[int, int, bool, list[tuple[int, int, int]]]] = {}  # pid -> (first offset, batches
    sequence: dict[int, int] = {}                                                # left, abort, row ranges)
    offset = row = markers = 0

    def end(pid: int) -> None:
        nonlocal offset, markers
        first, _, abort, ranges = open_txn.pop(pid)
        kind = ControlRecordType.ABORT if abort else ControlRecordType.COMMIT
        out.append(build_end_txn_marker(offset, BASE_TIMESTAMP_MS, 0, pid, 0, EndTransactionMarker(kind, 1)))
        if abort:
            aborted.append(AbortedTxn(pid, first, offset, first))
        else:
            committed.extend(ranges)
        offset += 1
        markers += 1

    for area, (stop, first_ts, max_ts) in zip(areas, meta.tolist(), strict=True):
        pid = TXN_PRODUCER_BASE + rng.randrange(TXN_PRODUCERS)
        if pid not in open_txn:
            open_txn[pid] = (offset, rng.randint(1, TXN_MAX_BATCHES), rng.random() < TXN_ABORT_SHARE, [])
        payload = area if compression == CompressionType.NONE else compress(compression, area)
        buf = bytearray(RECORD_BATCH_OVERHEAD + len(payload))
        buf[RECORD_BATCH_OVERHEAD:] = payload
        n = stop - row
        write_batch_header(buf, base_offset=offset, partition_leader_epoch=0, attributes=attributes,
                           last_offset_delta=n - 1, base_timestamp=first_ts, max_timestamp=max_ts, producer_id=pid,
                           producer_epoch=0, base_sequence=sequence.get(pid, 0), records_count=n)
        out.append(bytes(buf))
        sequence[pid] = sequence.get(pid, 0) + n
        first, left, abort, ranges = open_txn[pid]
        ranges.append((row, stop, offset))
        open_txn[pid] = (first, left - 1, abort, ranges)
        offset += n
        row = stop
        if left == 1:
            end(pid)
    for pid in sorted(open_txn):
        end(pid)
    path.write_bytes(b"".join(out))
    committed.sort(key=lambda r: r[2])
    rows = np.concatenate([np.arange(a, b) for a, b, _ in committed]) if committed else np.zeros(0, np.int64)
    offsets = np.concatenate([np.arange(o, o + b - a) for a, b, o in committed]) if committed else rows
    return TxnSegment(aborted, rows, offsets, len(areas), markers)


# --- the decoders -----------------------------------------------------------------------------


def decode_klog(path: Path) -> pa.RecordBatch:
    """What a Spark read does with a slice: the bulk path, CRCs checked."""
    dec = ArrowDecoder(TOPIC, 0)
    for _ in decode_file_range(FileRecords(path), 0, None, dec, verify=True):  # no flush limits: one batch
        raise AssertionError("decode_file_range flushed without flush limits")
    return dec.finish()


def decode_klog_batches(path: Path, native: bool | None = None) -> pa.RecordBatch:
    return decode_batches(FileRecords(path).batches(), TOPIC, 0, native=native, verify=True)


def decode_read_committed(path: Path, aborted: list[AbortedTxn]) -> pa.RecordBatch:
    """The bulk path under read_committed: the kernel's filter over the same runs."""
    dec = ArrowDecoder(TOPIC, 0)
    for _ in decode_file_range(FileRecords(path), 0, None, dec, verify=True, txn=new_txn_filter(aborted)):
        raise AssertionError("decode_file_range flushed without flush limits")
    return dec.finish()


def decode_read_committed_batches(path: Path, aborted: list[AbortedTxn]) -> pa.RecordBatch:
    """read_committed as it was read before the bulk path took it: batch by batch."""
    def checked() -> Iterator[AnyBatch]:
        for batch in FileRecords(path).batches():
            batch.ensure_valid()
            yield batch

    dec = ArrowDecoder(TOPIC, 0)
    for batch in filter_read_committed(checked(), aborted):
        dec.add(batch, verify=False)
    return dec.finish()


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


def run_txn(table: pa.Table, records: int, repeat: int, seed: int, *, workdir: Path | None = None,
            log: Callable[[str], None] = print) -> list[Measurement]:
    """The transactional segments (``table`` repeated to ``records`` rows): read_committed against
    read_uncommitted and against the batch-by-batch read_committed path; one row per case and path."""
    reps = -(-records // table.num_rows)
    data = pa.concat_tables([table] * reps).slice(0, records).combine_chunks()
    out: list[Measurement] = []
    with tempfile.TemporaryDirectory(prefix="klog-bench-txn-", dir=workdir) as tmp:
        for name, codec in CASES.items():
            case = f"txn {name}"
            path = Path(tmp) / name / "00000000000000000000.log"
            path.parent.mkdir()
            start = time.perf_counter()
            seg = build_txn_segment(data, path, codec, seed)
            size = path.stat().st_size
            log(f"{case}: {records:,} records in {seg.batches:,} batches of {TXN_PRODUCERS} producers, "
                f"{seg.markers:,} markers, {len(seg.aborted):,} transactions aborted, "
                f"{records - len(seg.committed_rows):,} records aborted, {size:,} bytes "
                f"(written in {time.perf_counter() - start:.1f} s)")
            everything = decode_klog(path)
            if everything.num_rows != records:
                raise AssertionError(f"{case}: read_uncommitted read {everything.num_rows} records of {records}")
            del everything
            committed = decode_read_committed(path, seg.aborted)
            if not decode_read_committed_batches(path, seg.aborted).equals(committed):
                raise AssertionError(f"{case}: read_committed in bulk and batch by batch disagree")
            if not np.array_equal(committed.column("offset").to_numpy(), seg.committed_offsets) or \
                    not committed.column("value").equals(data.column("value").chunk(0).take(seg.committed_rows)):
                raise AssertionError(f"{case}: read_committed did not return the committed transactions")
            del committed
            timings = {READ_UNCOMMITTED: best_of(repeat, partial(decode_klog, path)),
                       READ_COMMITTED: best_of(repeat, partial(decode_read_committed, path, seg.aborted)),
                       READ_COMMITTED_BATCHES: best_of(repeat, partial(decode_read_committed_batches, path,
                                                                       seg.aborted))}
            out += [Measurement(case, k, records, size, seconds, rss) for k, (seconds, rss) in timings.items()]
    return out


def format_txn_table(results: Sequence[Measurement]) -> str:
    lines = [f"{'case':<17} {'read':<30} {'best s':>8} {'records/s':>12} {'MB/s':>8} {'vs read_uncommitted':>20} "
             f"{'peak RSS MiB':>13}"]
    for m in results:
        lines.append(f"{m.case:<17} {m.name:<30} {m.seconds:>8.4f} {m.records_per_s:>12,.0f} {m.mb_per_s:>8.1f} "
                     f"{m.seconds / ratio_base(results, m.case):>19.2f}x {m.peak_rss / (1 << 20):>13.0f}")
    return "\n".join(lines)


def ratio_base(results: Sequence[Measurement], case: str) -> float:
    return next(m.seconds for m in results if m.case == case and m.name == READ_UNCOMMITTED)


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
    # issue 29's codec floor: klog's decode time over the codec's alone on the same batches (also per
    # shape and codec in benchmarks.kafka_filerecords)
    summary.add(summary.Row(
        "columnar decode, lz4, 100-byte values", f"{k.seconds * 1e3:.1f} ms ({k.mb_per_s:.0f} MB/s of segment)",
        f"lz4.frame.decompress of every batch alone, {alone.seconds * 1e3:.1f} ms", k.seconds / alone.seconds,
        "time", 1.25, k.peak_rss))
    for case in CASES:
        rc, ru, old = by.get((f"txn {case}", READ_COMMITTED)), by.get((f"txn {case}", READ_UNCOMMITTED)), \
            by.get((f"txn {case}", READ_COMMITTED_BATCHES))
        if rc is None or ru is None or old is None:
            continue
        summary.add(summary.Row(
            f"columnar decode, read_committed vs read_uncommitted on the same transactional data, {case}, "
            f"{TXN_PRODUCERS} producers, ~{TXN_ABORT_SHARE:.0%} of transactions aborted",
            f"{rc.seconds * 1e3:.0f} ms for {rc.records:,} records ({rc.mb_per_s:.0f} MB/s; batch by batch, as "
            f"before: {old.seconds * 1e3:.0f} ms, {old.seconds / rc.seconds:.1f}x as long)",
            f"read_uncommitted decode, {ru.seconds * 1e3:.0f} ms", rc.seconds / ru.seconds, "time", 1.2, rc.peak_rss))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.decode", description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=DEFAULT_RECORDS,
                        help="records per segment (default %(default)s)")
    parser.add_argument("--repeat", type=int, default=DEFAULT_REPEAT,
                        help="runs per measurement, the best kept (default %(default)s)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="data seed (default %(default)s)")
    parser.add_argument("--txn-records", type=int, default=None,
                        help="records of the transactional segments (default: 5 x --records)")
    parser.add_argument("--pure-python", action=argparse.BooleanOptionalAction, default=True,
                        help="also time klog's pure-Python builder (default: yes)")
    parser.add_argument("--workdir", type=Path, default=None, help="where to make the temporary directory")
    args = parser.parse_args(argv)
    txn_records = 5 * args.records if args.txn_records is None else args.txn_records
    if args.records < 1 or args.repeat < 1 or txn_records < 1:
        parser.error("--records, --txn-records and --repeat must be at least 1")

    kernel = native_kernel()
    print(f"decode benchmark: {args.records:,} records, {VALUE_BYTES}-byte values, 10-byte keys, "
          f"batches <= {MAX_BATCH_BYTES} bytes, seed {args.seed}, best of {args.repeat}")
    print(f"klog kernel: {getattr(kernel, '__file__', 'NOT BUILT, klog runs the pure-Python builder')}")
    results = run(args.records, args.repeat, args.seed, pure_python=args.pure_python, workdir=args.workdir)
    txn = run_txn(make_table(args.records, args.seed), txn_records, args.repeat, args.seed, workdir=args.workdir)
    print()
    print(format_table(results))
    print()
    print(format_txn_table(txn))
    print()
    for case in CASES:
        print(f"ratio {case} klog/kafka-python: {ratio(results, case):.1f}x")
    print(f"ratio lz4 klog/lz4-alone throughput: {ratio(results, 'lz4', KLOG, LZ4_ALONE):.2f}x")
    for case in CASES:
        by = {m.name: m.seconds for m in txn if m.case == f"txn {case}"}
        print(f"ratio txn {case} read_committed/read_uncommitted time: {by[READ_COMMITTED] / by[READ_UNCOMMITTED]:.2f}x"
              f" (target <= 1.2x; batch by batch, as before: {by[READ_COMMITTED_BATCHES] / by[READ_UNCOMMITTED]:.2f}x)")
    add_summary([*results, *txn])
    print("peak RSS: the process's, data and every earlier step included (the table and files take about "
          "a third of it)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
