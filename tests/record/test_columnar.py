"""Columnar encoding and decoding: kernel and pure Python give the same bytes and rows."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from storage_core.errors import KlogError
from storage_core.record import columnar as _col
from storage_core.record.columnar import (
    ArrowDecoder,
    decode_batches,
    encode_arrow,
    kafka_schema,
    murmur2,
    murmur2_partitions,
)
from storage_core.record.compression import CompressionType
from storage_core.record.file_records import iter_batches
from storage_core.record.records import DefaultRecordBatch

T0 = 1_700_000_000_000


def rows(n: int) -> pa.Table:
    return pa.table({
        "key": [None if i % 7 == 0 else f"k{i}".encode() for i in range(n)],
        "value": [None if i % 11 == 0 else b"x" * (i % 130) for i in range(n)],
        "timestamp": pa.array([T0 + i * 3 - (i % 5) * 100 for i in range(n)], pa.int64()),
        "headers": [None if i % 3 else [{"key": "a", "value": b"1"}, {"key": "b", "value": None}] for i in range(n)],
    })


def decoded(raw: list[bytes], native: bool, **kw: object) -> pa.RecordBatch:
    return decode_batches([b for r in raw for b in iter_batches(r)], "t", 3, include_headers=True,
                          native=native, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("codec", list(CompressionType), ids=lambda c: c.label)
def test_kernel_and_python_encoders_write_the_same_bytes(codec: CompressionType) -> None:
    t = rows(3000)
    a = encode_arrow(t, compression=codec, max_batch_bytes=4096, native=True)
    b = encode_arrow(t, compression=codec, max_batch_bytes=4096, native=False)
    assert a == b and len(a) > 10
    for native in (True, False):
        out = decoded(a, native)
        assert out.column("key").to_pylist() == t.column("key").to_pylist()
        assert out.column("value").to_pylist() == t.column("value").to_pylist()
        assert out.column("headers").to_pylist() == t.column("headers").to_pylist()
        assert out.column("offset").to_pylist() == list(range(3000))
        assert out.column("timestamp").cast(pa.int64()).to_pylist() == [x * 1000 for x in
                                                                        t.column("timestamp").to_pylist()]


def test_batches_respect_the_byte_bound() -> None:
    t = rows(3000)
    for raw in encode_arrow(t, max_batch_bytes=2048):
        assert len(raw) <= 2048


def test_encode_sliced_and_string_columns() -> None:
    t = rows(500).slice(123, 200)
    assert encode_arrow(t, native=True) == encode_arrow(t, native=False)
    s = pa.table({"key": ["a", None, "ccc"], "value": pa.array(["x", "yy", None], pa.large_string())})
    raw = encode_arrow(s, default_timestamp_ms=T0)
    out = decoded(raw, True)
    assert out.column("key").to_pylist() == [b"a", None, b"ccc"]
    assert out.column("value").to_pylist() == [b"x", b"yy", None]


def test_encode_rejects_bad_columns() -> None:
    with pytest.raises(KlogError, match="'value'"):
        encode_arrow(pa.table({"key": [b"a"]}), default_timestamp_ms=T0)
    with pytest.raises(KlogError, match="column 'value' has type int64"):
        encode_arrow(pa.table({"value": [1]}), default_timestamp_ms=T0)
    with pytest.raises(KlogError, match="timestamp"):
        encode_arrow(pa.table({"value": [b"a"]}))
    with pytest.raises(KlogError, match="null header key"):
        encode_arrow(pa.table({"value": [b"a"], "headers": [[{"key": None, "value": b"v"}]]}),
                     default_timestamp_ms=T0)


@pytest.mark.parametrize("native", [True, False], ids=["kernel", "python"])
def test_decode_range_trimming_and_schema(native: bool) -> None:
    raw = encode_arrow(rows(1000), max_batch_bytes=4096)
    out = decoded(raw, native, min_offset=250, end_offset=777)
    assert out.column("offset").to_pylist() == list(range(250, 777))
    assert out.schema == kafka_schema(include_headers=True)
    assert out.column("partition").to_pylist() == [3] * 527


def test_decoder_is_atomic_per_batch() -> None:
    """A batch that fails halfway leaves nothing of itself in the builder."""
    good, bad = encode_arrow(rows(20), max_batch_bytes=400)[:2]
    broken = bytearray(bad)
    broken[-1] = 0x7F  # last header count/varint byte: the record no longer parses
    from storage_core.record.records import crc32c

    broken[17:21] = crc32c(bytes(broken[21:])).to_bytes(4, "big")
    for native in (True, False):
        dec = ArrowDecoder("t", 0, include_headers=True, native=native)
        dec.add(next(iter(iter_batches(good))))
        n = dec.num_rows
        with pytest.raises(KlogError):
            dec.add(next(iter(iter_batches(bytes(broken)))))
        assert dec.num_rows == n
        out = dec.finish()
        assert out.num_rows == n
        out.validate(full=True)


def test_metadata_columns() -> None:
    raw = encode_arrow(rows(50), compression=CompressionType.ZSTD, max_batch_bytes=1024, partition_leader_epoch=4)
    out = decode_batches([b for r in raw for b in iter_batches(r)], "t", 0, include_metadata=True)
    assert set(out.column("compression").to_pylist()) == {"zstd"}
    assert set(out.column("leaderEpoch").to_pylist()) == {4}
    assert set(out.column("producerId").to_pylist()) == {-1}
    assert out.column("batchBaseOffset").to_pylist()[0] == 0


def test_murmur2_matches_kafka_python_and_kafka_vectors() -> None:
    # Known values from Kafka's UtilsTest.testMurmur2 (cases as signed ints)
    assert murmur2(b"21") == -973932308
    assert murmur2(b"foobar") == -790332482
    assert murmur2(b"a-little-bit-long-string") == -985981536
    assert murmur2(b"a-little-bit-longer-string") == -1486304829
    assert murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8") == -58897971
    assert murmur2(b"abc") == 479470107
    rng = np.random.default_rng(7)
    keys = [rng.bytes(int(n)) for n in rng.integers(0, 40, 100_000)]
    parts = murmur2_partitions(pa.array(keys, pa.binary()), 12)
    expected = [(kafka_python_murmur2(k) & 0x7FFFFFFF) % 12 for k in keys]
    assert parts.tolist() == expected
    with_null = murmur2_partitions(pa.array([b"a", None]), 3)
    assert with_null.tolist()[1] == -1


# --- the kernel's bulk path and its memory ------------------------------------------------------


@pytest.mark.parametrize("n", [0, 1, 7, 8, 9, 255, 767, 768, 769, 24_575, 24_576, 24_577, 100_001, 1 << 20])
def test_kernel_crc32c_equals_the_crc32c_package(n: int) -> None:
    import os

    import crc32c

    from storage_core.record import _kernel

    for skew in range(3):  # unaligned starts too
        data = os.urandom(n + skew)[skew:]
        assert _kernel.crc32c(data) == crc32c.crc32c(data)
        assert _kernel.crc32c(data, True) == crc32c.crc32c(data)  # the table-driven fallback


def bulk(raw: bytes, **kw: object) -> pa.RecordBatch:
    from storage_core.record.scan import decode_view

    dec = ArrowDecoder("t", 3, include_headers=True, include_metadata=True, native=True)
    assert decode_view(memoryview(raw), dec, **kw) == len(raw)  # type: ignore[arg-type]
    return dec.finish()


@pytest.mark.parametrize("codec", list(CompressionType), ids=lambda c: c.label)
def test_bulk_path_equals_batch_by_batch(codec: CompressionType) -> None:
    raw = b"".join(encode_arrow(rows(900), compression=codec, max_batch_bytes=2048, base_offset=100))
    batches = list(iter_batches(raw))
    for kw in ({}, {"min_offset": 250, "end_offset": 777}):
        want = decode_batches(batches, "t", 3, include_headers=True, include_metadata=True, native=False,
                              **kw)  # type: ignore[arg-type]
        assert bulk(raw, **kw).equals(want)


def test_pooled_kernel_buffers_never_change_a_batch_still_in_use() -> None:
    """Column buffers go back to the kernel's pool only when Arrow lets go of them: decoding more
    data while earlier results are alive leaves those results as they were."""
    big = pa.table({"key": [b"k%d" % i for i in range(40_000)], "value": [b"%064d" % i for i in range(40_000)]})
    other = pa.table({"key": [b"z" * 9] * 40_000, "value": [b"y" * 70] * 40_000})
    first = bulk(b"".join(encode_arrow(big, default_timestamp_ms=T0)))
    snapshot = first.to_pylist()[::997]
    for _ in range(3):
        again = bulk(b"".join(encode_arrow(other, default_timestamp_ms=T0)))
        assert again.column("value")[5].as_py() == b"y" * 70
        del again  # its buffers go back to the pool, for the next decode
    assert first.to_pylist()[::997] == snapshot
    first.validate(full=True)


# --- the kernel's whole-batch encoder (encode_v2_batches) against its pure-Python twin ----------------


def _both(cols: _col.EncodeColumns, start: int, stop: int, max_bytes: int,
          header: tuple[int, int, int] | None) -> tuple[list[bytes], np.ndarray]:
    a, ma = _col.encode_v2_batches(cols, start, stop, max_bytes, header, native=True)
    b, mb = _col.encode_v2_batches(cols, start, stop, max_bytes, header, native=False)
    assert a == b
    assert ma.tolist() == mb.tolist()
    return a, ma


@pytest.mark.parametrize("header", [None, (0, -1, 0), (5, 7, 3), (2**62, 0, 0), (-3, -1, 4)],
                         ids=["areas", "batches", "epoch-attrs", "big-offset", "negative-offset"])
@pytest.mark.parametrize("max_bytes", [1, 100, 4096 - 61, 1 << 20, 1 << 40], ids=lambda m: f"max{m}")
@pytest.mark.parametrize("span", [(0, 3000), (0, 0), (17, 2981), (2999, 3000), (1500, 1500)],
                         ids=lambda s: f"rows{s[0]}-{s[1]}")
def test_encode_v2_batches_kernel_matches_python(header: tuple[int, int, int] | None, max_bytes: int,
                                                 span: tuple[int, int]) -> None:
    t = rows(3000)
    cols = _col.prepare_columns(t)
    start, stop = span
    out, meta = _both(cols, start, stop, max_bytes, header)
    assert len(out) == len(meta)
    if start == stop:
        assert out == []
        return
    ends = [int(e) for e in meta[:, 0]]
    assert ends[-1] == stop and ends == sorted(ends)
    firsts = [start] + ends[:-1]
    ts = cols.timestamps
    for raw, first, (end, first_ts, max_ts) in zip(out, firsts, meta.tolist(), strict=True):
        assert first_ts == ts[first] and max_ts == int(ts[first:end].max())
        area_len = len(raw) - (0 if header is None else 61)
        if end - first > 1:
            assert area_len <= max(1, min(max_bytes, _col.MAX_RECORDS_AREA))
        if header is not None:
            b = DefaultRecordBatch(raw)
            b.ensure_valid()
            assert b.base_offset == header[0] + first - start
            assert b.partition_leader_epoch == header[1] and b.attributes == header[2]
            assert b.records_count == end - first and b.max_timestamp == max_ts and b.base_timestamp == first_ts
            assert (b.producer_id, b.producer_epoch, b.base_sequence) == (-1, -1, -1)


def test_encode_v2_batches_areas_are_encode_v2() -> None:
    """Records areas from the many-batch call are what the one-batch reference encode_v2 gives, batch by batch."""
    t = rows(1000)
    cols = _col.prepare_columns(t)
    areas, meta = _both(cols, 0, 1000, 700, None)
    row = 0
    for area, (end, first_ts, max_ts) in zip(areas, meta.tolist(), strict=True):
        assert _col._py_encode_v2(cols, row, 1000, 700) == (area, end, first_ts, max_ts)
        row = end


def test_encode_v2_batches_without_keys_or_headers() -> None:
    t = pa.table({"value": [b"v" * (i % 50) for i in range(500)],
                  "timestamp": pa.array([T0 - i for i in range(500)], pa.int64())})
    cols = _col.prepare_columns(t)
    for header in (None, (0, -1, 0)):
        out, _ = _both(cols, 0, 500, 300, header)
        assert len(out) > 5


def test_encode_v2_batches_refuses_lying_buffers() -> None:
    """Hand-made column buffers that point outside their data are a ValueError, never a crash."""
    from storage_core.record import _kernel  # type: ignore[attr-defined]

    ts = np.zeros(4, dtype=np.int64)
    good = (None, np.array([0, 1, 2, 3, 4], dtype=np.int32).tobytes(), b"abcd", 0)
    bad_offsets = (None, np.array([0, 1, 99, 3, 4], dtype=np.int32).tobytes(), b"abcd", 0)
    backwards = (None, np.array([0, 3, 1, 3, 4], dtype=np.int32).tobytes(), b"abcd", 0)
    short_bitmap = (b"", good[1], good[2], 0)
    for values in (bad_offsets, backwards, short_bitmap):
        for header in (None, (0, -1, 0)):
            with pytest.raises(ValueError):
                _kernel.encode_v2_batches(None, values, ts, None, None, None, 0, 4, 100, header)
    for start, stop in ((0, 5), (-1, 2), (3, 2)):
        with pytest.raises(ValueError):
            _kernel.encode_v2_batches(None, good, ts, None, None, None, start, stop, 100, None)
    with pytest.raises(ValueError):  # header counts past the header columns
        _kernel.encode_v2_batches(None, good, ts, np.array([0, 0, 5, 0], dtype=np.int32), good, good, 0, 4, 100, None)
    with pytest.raises(ValueError):  # a null header key
        hk = (b"\x00", good[1], good[2], 0)
        _kernel.encode_v2_batches(None, good, ts, np.array([1, 0, 0, 0], dtype=np.int32), hk, good, 0, 4, 100, None)
    with pytest.raises(OverflowError):  # offsets past int64
        _kernel.encode_v2_batches(None, good, ts, None, None, None, 0, 4, 100, ((1 << 63) - 2, -1, 0))
    with pytest.raises(KlogError):
        encode_arrow(pa.table({"value": [b"a", b"b"]}), base_offset=(1 << 63) - 1, default_timestamp_ms=T0)


# --- rows picked in place from several sources (encode_v2_rows, RowsEncoder) -----------------------


def _random_table(rng: np.random.Generator, n: int, keys: bool, headers: bool) -> pa.Table:
    cols: dict[str, pa.Array] = {
        "value": pa.array([None if rng.random() < .1 else rng.bytes(int(rng.integers(0, 300))) for _ in range(n)],
                          pa.binary()),
        "timestamp": pa.array(rng.integers(T0 - 10**9, T0 + 10**9, n), pa.int64()),
    }
    if keys:
        cols["key"] = pa.array([None if rng.random() < .2 else rng.bytes(int(rng.integers(0, 20))) for _ in range(n)],
                               pa.binary())
    if headers:
        cols["headers"] = pa.array([None if rng.random() < .3 else
                                    [{"key": f"h{j}", "value": None if rng.random() < .3 else rng.bytes(3)}
                                     for j in range(int(rng.integers(0, 3)))] for _ in range(n)], _col.HEADER_TYPE)
    t = pa.table(cols)
    skip = int(rng.integers(0, 3))  # a slice: its buffers hold more than its rows
    return t.slice(skip) if skip < n else t


def _random_picks(rng: np.random.Generator) -> list[tuple[pa.Table, np.ndarray | None]]:
    keys, headers = bool(rng.random() < .5), bool(rng.random() < .5)
    tables = [_random_table(rng, int(rng.integers(0, 60)), keys, headers) for _ in range(int(rng.integers(1, 5)))]
    picks: list[tuple[pa.Table, np.ndarray | None]] = []
    for _ in range(int(rng.integers(1, 6))):
        t = tables[int(rng.integers(0, len(tables)))]
        rows = None if rng.random() < .3 or not t.num_rows else \
            rng.integers(0, t.num_rows, int(rng.integers(0, 30))).astype(np.int64)
        picks.append((t, rows))
    return picks


def _selection(picks: list[tuple[pa.Table, np.ndarray | None]]) -> _col.RowSelection:
    prepared: dict[int, _col.EncodeColumns] = {}
    return _col.RowSelection.of([(prepared.setdefault(id(t), _col.prepare_columns(t)), rows) for t, rows in picks])


@pytest.mark.parametrize("seed", range(6))
def test_encode_v2_rows_kernel_matches_python(seed: int) -> None:
    """The kernel encodes picked rows where they lie; the twin gathers them first and encodes them
    with _py_encode_v2_batches: the same bytes and meta, into a reused buffer or a new one."""
    rng = np.random.default_rng(seed)
    for trial in range(25):
        sel = _selection(_random_picks(rng))
        max_bytes = int(rng.integers(1, 3000))
        header = None if rng.random() < .4 else (int(rng.integers(0, 1 << 40)), 3, 0)
        out = bytearray(int(rng.integers(0, 5000))) if rng.random() < .5 else None
        a, ma = _col.encode_v2_rows(sel, max_bytes, header, out, native=True)
        b, mb = _col.encode_v2_rows(sel, max_bytes, header, None, native=False)
        end = int(ma[-1, 3]) if len(ma) else 0
        assert bytes(a[:end]) == bytes(b), f"seed {seed} trial {trial}"
        assert ma.tolist() == mb.tolist(), f"seed {seed} trial {trial}"
        assert (a is out) == (out is not None and len(out) >= end), f"seed {seed} trial {trial}"
        g = sel.gather()
        whole, mw = _col.encode_v2_batches(g, 0, g.num_rows, max_bytes, header, native=True)
        assert b"".join(whole) == bytes(b) and mw.tolist() == ma[:, :3].tolist(), f"seed {seed} trial {trial}"


@pytest.mark.parametrize("codec", [CompressionType.NONE, CompressionType.LZ4, CompressionType.GZIP],
                         ids=lambda c: c.name.lower())
@pytest.mark.parametrize("seed", range(3))
def test_rows_encoder_is_encode_arrow_of_the_picked_rows(codec: CompressionType, seed: int) -> None:
    """The oracle picks the rows with Arrow's own take and encodes the table with encode_arrow."""
    rng = np.random.default_rng(100 + seed)
    encoder = _col.RowsEncoder(codec, max_batch_bytes=int(rng.integers(200, 4000)))
    for trial in range(10):
        picks = _random_picks(rng)
        parts = [t.take(pa.array(rows if rows is not None else np.arange(t.num_rows), pa.int64())) for t, rows in picks]
        table = pa.concat_tables([p.cast(parts[0].schema) for p in parts])
        base = int(rng.integers(0, 1 << 40))
        got = encoder.encode(_selection(picks), base)
        want = encode_arrow(table, base_offset=base, compression=codec, max_batch_bytes=encoder.budget + 61)
        assert [bytes(b.data) for b in got] == want, f"seed {seed} trial {trial}"
        for b, raw in zip(got, want, strict=True):
            (batch,) = list(iter_batches(raw))
            assert (b.last_offset, b.max_timestamp) == (batch.last_offset, batch.max_timestamp)


def test_encoders_sharing_a_buffer_take_turns() -> None:
    """A Spark task's writers (one per partition, each its codec and batch size) share one buffer:
    used in turns, each encoder's batches are still encode_arrow's, and the buffer only grows."""
    rng = np.random.default_rng(7)
    shared = _col.EncodeBuffer()
    encoders = [_col.RowsEncoder(c, max_batch_bytes=m, buffer=shared)
                for c, m in ((CompressionType.NONE, 700), (CompressionType.LZ4, 3000), (CompressionType.NONE, 1 << 20))]
    sizes = []
    for turn in range(30):
        e = encoders[turn % 3]
        t = _random_table(rng, int(rng.integers(1, 400)), True, bool(turn % 2))
        got = [bytes(b.data) for b in e.encode(_selection([(t, None)]), turn)]
        assert got == encode_arrow(t, base_offset=turn, compression=e.compression, max_batch_bytes=e.budget + 61), turn
        assert shared.data is not None
        sizes.append(len(shared.data))
    assert sizes == sorted(sizes)


def test_encode_v2_rows_refuses_picks_outside_the_sources() -> None:
    """A pick naming a source or a row that is not there is an error in both twins, never a read."""
    cols = _col.prepare_columns(rows(10))
    for which, local in (([0, 1], [0, 0]), ([0, -1], [0, 0]), ([0, 0], [9, 10]), ([0], [-1])):
        sel = _col.RowSelection((cols,), np.array(which, np.int32), np.array(local, np.int64))
        with pytest.raises(ValueError, match="outside its source"):
            _col.encode_v2_rows(sel, 100, None, native=True)
        with pytest.raises(KlogError, match="outside"):
            _col.encode_v2_rows(sel, 100, None, native=False)


@pytest.mark.parametrize("software", [False, True], ids=["hardware-or-best", "software"])
def test_kernel_crc32c_matches_the_crc32c_package(software: bool) -> None:
    import crc32c

    from storage_core.record import _kernel  # type: ignore[attr-defined]

    rng = np.random.default_rng(7)
    data = rng.integers(0, 256, 70_000, dtype=np.uint8).tobytes()
    for n in (0, 1, 2, 7, 8, 9, 15, 16, 17, 63, 64, 1000, 65_537, 70_000):
        for skew in (0, 1, 3, 5):
            chunk = data[skew:skew + n]
            assert _kernel.crc32c(chunk, software) == crc32c.crc32c(chunk), (n, skew)
    assert _kernel.crc32c(b"123456789", software) == 0xE3069283  # the CRC-32C check value


def test_bulk_read_flushes_by_bytes_inside_a_chunk(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """decode_file_range hands on RecordBatches of about flush_bytes, however large its chunks:
    the kernel stops before the batch that would go on past the budget (RUN_FULL)."""
    from storage_core.record.file_records import FileRecords
    from storage_core.record.scan import decode_file_range

    raw = b"".join(encode_arrow(rows(3000), compression=CompressionType.LZ4, max_batch_bytes=2048, base_offset=7))
    path = tmp_path / "00000000000000000007.log"
    path.write_bytes(raw)
    want = decode_batches(list(iter_batches(raw)), "t", 3, include_headers=True, native=False)
    dec = ArrowDecoder("t", 3, include_headers=True, native=True)
    parts = list(decode_file_range(FileRecords(path), 0, None, dec, flush_bytes=20_000))
    parts.append(dec.finish())
    assert len(parts) > 5
    assert all(p.num_rows for p in parts)
    largest_batch = max(len(b.records_payload()) for b in iter_batches(raw))  # one record batch past the budget
    assert max(p.column("key").nbytes + p.column("value").nbytes for p in parts) < 20_000 + 2 * largest_batch + 16 * 3000
    assert pa.Table.from_batches(parts).combine_chunks().to_batches()[0].equals(want)


def test_kernel_type_stub_matches_the_module() -> None:
    """storage_core/record/_kernel.pyi names what the kernel exports, with the same signatures (mypy's stubtest)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    pytest.importorskip("mypy.stubtest")
    if _col.native_kernel() is None:
        pytest.skip("the native kernel is not built")
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run([sys.executable, "-m", "mypy.stubtest", "storage_core.record._kernel"], cwd=root, env=env,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
