"""The native kernel on many threads: its loops run without the GIL, so threads really run at once,
and nothing they share (the buffer pool, the Python codecs called back mid-walk) may mix up their
results.

Each test compares what 8 threads get, at the same time and repeatedly, with what one thread gets
alone, on generated data of every codec (lz4 decoded by the kernel itself, the others called back in
Python from the middle of the GIL-free walk), transactions for read_committed, the whole-batch
encoder and the cleaner's map and recopy. The same tests run under AddressSanitizer and UBSan with
the fuzz campaign (docs/testing.md). The seed is printed on failure (``KLOG_THREADS_SEED`` replays).
"""

from __future__ import annotations

import os
import random
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from storage_core.record import columnar
from storage_core.record.compression import CompressionType, compress, decompress, v2_decompressors
from storage_core.record.control import ControlRecordType, EndTransactionMarker
from storage_core.record.kernel import native_kernel
from storage_core.record.records import Record, build_batch

kernel = native_kernel()
pytestmark = pytest.mark.skipif(kernel is None, reason="the native kernel is not built")

THREADS = 8
ROUNDS = 3
SEED = int(os.environ.get("KLOG_THREADS_SEED", random.randrange(1 << 30)))


def partition_run(rng: random.Random, n_batches: int) -> tuple[bytes, list[tuple[int, int, int]]]:
    """The bytes of a random partition's batches (every codec, transactions with markers) and its
    aborted transactions ``(producer_id, first_offset, last_offset)``."""
    out: list[bytes] = []
    aborted: list[tuple[int, int, int]] = []
    offset = 0
    open_txn: dict[int, int] = {}
    for _ in range(n_batches):
        codec = rng.choice(list(CompressionType))
        pid = rng.choice([-1, -1, 7, 8])
        if pid >= 0 and pid in open_txn and rng.random() < 0.3:
            kind = rng.choice([ControlRecordType.ABORT, ControlRecordType.COMMIT])
            marker = Record(offset, 1_700_000_000_000, kind.key_bytes(), EndTransactionMarker(kind, 0).value_bytes())
            out.append(build_batch([marker], producer_id=pid, producer_epoch=0, is_transactional=True,
                                   is_control=True))
            if kind == ControlRecordType.ABORT:
                aborted.append((pid, open_txn[pid], offset))
            del open_txn[pid]
            offset += 1
            continue
        recs = [Record(offset + i, 1_700_000_000_000 + rng.randrange(10**6),
                       None if rng.random() < 0.2 else rng.randbytes(rng.randrange(1, 24)),
                       None if rng.random() < 0.05 else rng.randbytes(rng.randrange(200)), ())
                for i in range(rng.randrange(1, 60))]
        if pid >= 0:
            open_txn.setdefault(pid, offset)
        out.append(build_batch(recs, compression=codec, producer_id=pid, producer_epoch=0 if pid >= 0 else -1,
                               base_sequence=0 if pid >= 0 else -1, is_transactional=pid >= 0))
        offset += len(recs)
    return b"".join(out), aborted


def decode(data: bytes, aborted: list[tuple[int, int, int]] | None) -> tuple[Any, ...]:
    """One partition through the kernel's bulk walk (read_committed if ``aborted`` is given)."""
    assert kernel is not None
    builder = kernel.RecordsBuilder(True)
    txn = kernel.TxnFilter(aborted) if aborted is not None else None
    consumed, stop, info = builder.add_v2_run(data, 0, 1 << 62, True, v2_decompressors(), -1, txn)
    cols = builder.finish()
    return (consumed, stop, bytes(info)) + tuple(bytes(cols[k]) for k in sorted(cols) if k not in ("n", "nh")) + (
        cols["n"], cols["nh"])


def encode_table(rng: random.Random, n: int, headers: bool = False) -> pa.Table:
    """``n`` random rows for the encoder: nullable keys, values up to 300 bytes, [headers]."""
    cols = {
        "key": pa.array([None if rng.random() < 0.1 else rng.randbytes(rng.randrange(16)) for _ in range(n)],
                        pa.binary()),
        "value": pa.array([rng.randbytes(rng.randrange(300)) for _ in range(n)], pa.binary()),
        "timestamp": pa.array(np.arange(n, dtype=np.int64) * 7 + 1_700_000_000_000, pa.int64()),
    }
    if headers:
        cols["headers"] = pa.array([[{"key": "h", "value": rng.randbytes(2)}] * rng.randrange(3) for _ in range(n)],
                                   columnar.HEADER_TYPE)
    return pa.table(cols)


def on_threads(jobs: list[Callable[[], Any]], threads: int = THREADS) -> list[Any]:
    """Every job on a pool of ``threads`` threads, all started together, results in job order."""
    results: list[Any] = [None] * len(jobs)
    errors: list[BaseException] = []
    barrier = threading.Barrier(threads)
    lock = threading.Lock()
    queue = list(enumerate(jobs))

    def worker() -> None:
        barrier.wait()
        while True:
            with lock:
                if not queue:
                    return
                i, job = queue.pop()
            try:
                results[i] = job()
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

    ts = [threading.Thread(target=worker) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        raise errors[0]
    return results


def test_decode_on_8_threads_equals_one_thread() -> None:
    rng = random.Random(SEED)
    parts = [partition_run(rng, rng.randrange(20, 80)) for _ in range(24)]
    alone = [decode(data, aborted if i % 2 else None) for i, (data, aborted) in enumerate(parts)]
    for _ in range(ROUNDS):
        jobs = [lambda d=data, a=(aborted if i % 2 else None): decode(d, a) for i, (data, aborted) in enumerate(parts)]
        assert on_threads(jobs) == alone, f"KLOG_THREADS_SEED={SEED}"


def test_encode_on_8_threads_equals_one_thread() -> None:
    rng = random.Random(SEED + 1)
    cols = [columnar.prepare_columns(encode_table(rng, rng.randrange(1, 3000))) for _ in range(16)]

    def encode(c: columnar.EncodeColumns) -> tuple[list[bytes], bytes]:
        batches, meta = columnar.encode_v2_batches(c, 0, c.num_rows, 4096, (5, 0, 0), native=True)
        return batches, meta.tobytes()

    alone = [encode(c) for c in cols]
    for _ in range(ROUNDS):
        assert on_threads([lambda c=c: encode(c) for c in cols]) == alone, f"KLOG_THREADS_SEED={SEED}"


def test_encode_of_picked_rows_on_8_threads_equals_one_thread() -> None:
    """encode_v2_rows reads rows where they lie in sources every thread shares, and writes into a
    buffer each job reuses from call to call (as a partition's writer does)."""
    rng = random.Random(SEED + 3)
    cols = [columnar.prepare_columns(encode_table(rng, rng.randrange(1, 2000), headers=True)) for _ in range(6)]
    picks = [columnar.RowSelection.of([(c, np.array([rng.randrange(c.num_rows) for _ in range(rng.randrange(1, 500))]))
                                       for c in rng.sample(cols, rng.randrange(1, len(cols)))]) for _ in range(16)]

    def encode(sel: columnar.RowSelection, out: list[bytearray | None]) -> list[tuple[bytes, bytes]]:
        got = []
        for _ in range(3):  # the same buffer again, as a writer's next run
            buf, meta = columnar.encode_v2_rows(sel, 4096, (5, 0, 0), out[0], native=True)
            out[0] = buf
            got.append((bytes(buf[:int(meta[-1, 3])]), meta.tobytes()))
        return got

    alone = [encode(sel, [None]) for sel in picks]
    for _ in range(ROUNDS):
        jobs = [lambda sel=sel: encode(sel, [None]) for sel in picks]
        assert on_threads(jobs) == alone, f"KLOG_THREADS_SEED={SEED}"


def test_cleaner_runs_on_8_threads_equal_one_thread() -> None:
    assert kernel is not None
    rng = random.Random(SEED + 2)
    runs = []
    for _ in range(16):
        keys = [rng.randbytes(rng.randrange(1, 6)) for _ in range(40)]
        offset, parts = 0, []
        for _ in range(rng.randrange(5, 40)):
            recs = [Record(offset + i, 1_700_000_000_000, rng.choice(keys),
                           None if rng.random() < 0.1 else rng.randbytes(rng.randrange(50)), ())
                    for i in range(rng.randrange(1, 30))]
            parts.append(build_batch(recs))
            offset += len(recs)
        runs.append(b"".join(parts))

    def clean(data: bytes) -> tuple[Any, ...]:
        assert kernel is not None
        m = kernel.OffsetMap(1 << 16)
        mapped = m.map_run(data, 0, 0, 1 << 62)
        pos, why, out, meta, stats = m.clean_run(data, 0, 1_800_000_000_000, 86_400_000, b"")
        return mapped, pos, why, bytes(out), bytes(meta), stats

    alone = [clean(d) for d in runs]
    for _ in range(ROUNDS):
        assert on_threads([lambda d=d: clean(d) for d in runs]) == alone, f"KLOG_THREADS_SEED={SEED}"


def ran_beside(call: Callable[[], object], rounds: int = 3) -> int:
    """How often another thread ran Python while ``call`` ran on this one.

    The switch interval is made huge so that the interpreter never takes the GIL from a thread: the
    other thread (which gives it back at each step) can only run while this one is in a call that
    let it go. A call that keeps the GIL gives 0 (``bytes.count`` over 200 MB does)."""
    progress: list[float] = []
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            progress.append(time.perf_counter())
            time.sleep(0)  # gives the GIL back

    interval = sys.getswitchinterval()
    spinner = threading.Thread(target=spin)
    sys.setswitchinterval(1000.0)
    spinner.start()
    during = 0
    try:
        time.sleep(0.05)
        for _ in range(rounds):
            t0 = time.perf_counter()
            call()
            t1 = time.perf_counter()
            during += sum(1 for t in progress[-100_000:] if t0 < t < t1)
    finally:
        stop.set()
        spinner.join()
        sys.setswitchinterval(interval)
    return during


def test_the_decode_walk_lets_other_threads_run() -> None:
    assert kernel is not None
    recs = [Record(i, 1_700_000_000_000, b"k", b"v" * 100, ()) for i in range(2000)]
    data = build_batch(recs) * 200  # offsets repeat: fine for the walk, which checks batches, not their order
    assert ran_beside(lambda: kernel.RecordsBuilder().add_v2_run(data, 0, 1 << 62, True, None)) > 0, (
        "no Python ran on another thread while the kernel decoded: the GIL was held")


@pytest.mark.parametrize("codec", [c for c in CompressionType if c != CompressionType.NONE], ids=lambda c: c.label)
def test_the_codecs_klog_calls_let_other_threads_run(codec: CompressionType) -> None:
    """Compression and decompression are the bindings' (python-lz4, zstandard, zlib, cramjam), and
    each lets the GIL go for its work: klog calls them on whole records areas, so a writer or a
    reader on another thread is not held back by them."""
    rng = random.Random(SEED)
    words = [rng.randbytes(rng.randrange(3, 12)) for _ in range(2000)]
    data = b"".join(rng.choice(words) for _ in range(1_000_000))[:6_000_000]
    packed = compress(codec, data)
    # lz4 inflates 6 MB in a few ms: on two busy cores (the suite runs beside it) the other thread
    # may not be scheduled within three such calls, so the fast calls get more rounds; a call that
    # keeps the GIL gives 0 however many
    assert ran_beside(lambda: compress(codec, data), rounds=20) > 0, f"{codec.label} compression held the GIL"
    assert ran_beside(lambda: decompress(codec, packed), rounds=20) > 0, f"{codec.label} decompression held the GIL"


def test_a_builder_used_from_its_own_walk_says_so() -> None:
    """A call on a builder while another call works on it without the GIL (here: from a Python codec
    the walk calls back) is refused with a clear error instead of racing on its buffers."""
    assert kernel is not None
    builder = kernel.RecordsBuilder()
    seen: list[str] = []

    def gzip_then_poke(raw: memoryview) -> bytes:
        for poke in (builder.finish, lambda: builder.num_rows, lambda: builder.add_v2_run(b"", 0, 1, True, None)):
            try:
                poke()
            except RuntimeError as exc:
                seen.append(str(exc))
        return v2_decompressors()[CompressionType.GZIP](raw)

    data = build_batch([Record(0, 1, b"k", b"v", ())], compression=CompressionType.GZIP)
    decompressors = (None, gzip_then_poke, None, None, None)
    consumed, stop, _ = builder.add_v2_run(data, 0, 10, True, decompressors)
    assert (consumed, stop) == (len(data), 0)
    assert len(seen) == 3 and all("in use by another thread" in s for s in seen), seen
    assert builder.finish()["n"] == 1
