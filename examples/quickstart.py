"""klog quickstart: write a small Kafka topic partition with storage_core and dump it.

Run with ``make quickstart``. It writes ``klog-data/quickstart-0/00000000000000000000.log``
(three lz4 batches, keyed records with headers), decodes it into Arrow, and prints the
``klog dump`` view of it. The Spark parts (write with Spark, read a range, tail a stream)
arrive with the reader, writer and streaming issues.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa

from storage_core.columnar import decode_batches, encode_arrow
from storage_core.compression import CompressionType
from storage_core.file_records import FileRecords

DATA = Path(os.environ.get("KLOG_QUICKSTART_DIR", "klog-data"))


def main() -> None:
    part = DATA / "quickstart-0"
    part.mkdir(parents=True, exist_ok=True)
    n = 30
    rows = pa.table({
        "key": [f"user-{i % 5}".encode() for i in range(n)],
        "value": [f'{{"event": "click", "n": {i}}}'.encode() for i in range(n)],
        "timestamp": pa.array([1_700_000_000_000 + 1000 * i for i in range(n)], pa.int64()),
        "headers": [[{"key": "source", "value": b"quickstart"}]] * n,
    })
    batches = encode_arrow(rows, compression=CompressionType.LZ4, max_batch_bytes=1024)
    log = part / "00000000000000000000.log"
    log.write_bytes(b"".join(batches))
    print(f"wrote {n} records in {len(batches)} lz4 batches to {log}")

    table = decode_batches(FileRecords(log).batches(), "quickstart", 0, include_headers=True)
    print(f"\ndecoded {table.num_rows} records into Arrow; the first five:")
    print(f"{'offset':>6}  {'timestamp':<26} {'key':<8} value")
    for row in table.slice(0, 5).to_pylist():
        print(f"{row['offset']:>6}  {str(row['timestamp']):<26} {row['key'].decode():<8} {row['value'].decode()}")

    print(f"\n$ klog dump {log}")
    sys.stdout.flush()
    klog = Path(sys.executable).with_name("klog")
    subprocess.run([str(klog), "dump", str(log)], check=True)


if __name__ == "__main__":
    main()
