"""The log cleaner's native kernel (``OffsetMap``, MD5, ``map_run``/``clean_run``) against its
pure-Python twins.

Unit tests put each C rule next to its Python twin (MD5 and hashlib, ``should_retain`` and
:func:`should_retain_record`, ``om_map_records`` and :func:`map_records`, ``retained_records``
and :func:`rebuild_batch`). The differential test runs the same random script of appends
(keyed, keyless, tombstones, headers, every codec, LogAppendTime, idempotent and transactional
producers, commits and aborts), rolls and cleanings (small maps: several passes, or a map full
before the first batch; clocks past the delete horizons) on two logs, one cleaned by the kernel
path and one by the pure-Python path, and requires byte-identical directories and equal results
after every cleaning.
"""

from __future__ import annotations

import hashlib
import os
import random
from dataclasses import replace
from pathlib import Path

import pytest

import storage_core.record.file_records as file_records
from storage_core.cleaner import CleanResult, LogCleaner, SkimpyOffsetMap, new_offset_map
from storage_core.cleaner.cleaned_segment import rebuild_batch, rebuilt_from_area
from storage_core.cleaner.cleaner import (
    CleanerStats,
    _NativeSelection,
    _PySelection,
    map_records,
    should_retain_record,
)
from storage_core.errors import KlogError
from storage_core.log.config import LogConfig
from storage_core.log.log import Log
from storage_core.record.compression import CompressionType
from storage_core.record.control import ControlRecordType, EndTransactionMarker
from storage_core.record.kernel import native_kernel
from storage_core.record.records import (
    DefaultRecordBatch,
    Header,
    Record,
    TimestampType,
    build_batch,
    build_end_txn_marker,
    crc32c,
)

kernel = native_kernel()
pytestmark = pytest.mark.skipif(kernel is None, reason="the native kernel is not built")

T0 = 1_700_000_000_000
RETENTION = 1_000
CODECS = [CompressionType.NONE] * 4 + [CompressionType.GZIP, CompressionType.SNAPPY, CompressionType.LZ4,
                                       CompressionType.ZSTD]


def test_md5_matches_hashlib() -> None:
    assert kernel is not None
    rng = random.Random(5)
    for n in [*range(301), 1000, 4095, 4096, 65_537, 1 << 20]:
        data = rng.randbytes(n)
        assert kernel.md5(data) == hashlib.md5(data).digest(), n


def test_offset_map_like_the_python_map() -> None:
    assert kernel is not None
    rng = random.Random(1)
    for memory in (24 * 2, 24 * 7, 24 * 100, 1000, 1 << 16):
        native, py = kernel.OffsetMap(memory), SkimpyOffsetMap(memory)
        assert (native.slots, native.max_entries, native.memory_bytes) == (py.slots, py.max_entries, memory)
        keys = [rng.randbytes(rng.randrange(0, 40)) for _ in range(native.max_entries)]
        for i in range(3 * len(keys)):
            k = rng.choice(keys)
            native.put(k, i)
            py.put(k, i)
        assert native.size == py.size and native.utilization == py.utilization
        assert native.is_full == py.is_full
        for k in [*keys, b"absent", b""]:
            assert native.get(k) == py.get(k)
        native.update_latest_offset(42)
        assert native.latest_offset == 42
        native.clear()
        assert (native.size, native.latest_offset, native.get(keys[0])) == (0, -1, -1)
    with pytest.raises(KlogError, match="holds no key"):
        new_offset_map(24)


def random_batch(rng: random.Random, base: int, *, codec: CompressionType = CompressionType.NONE,
                 n: int | None = None) -> DefaultRecordBatch:
    n = rng.randrange(0, 30) if n is None else n
    recs = []
    for i in range(n):
        key = None if rng.random() < 0.1 else b"k%d" % rng.randrange(15)
        value = None if rng.random() < 0.2 else rng.randbytes(rng.randrange(0, 30))
        headers = tuple(Header(f"h{j}", None if rng.random() < 0.3 else rng.randbytes(3))
                        for j in range(rng.randrange(0, 3)))
        recs.append(Record(base + 2 * i, T0 + rng.randrange(-50, 50), key, value, headers))
    lat = rng.random() < 0.2
    horizon = T0 + 500 if rng.random() < 0.2 else None
    raw = build_batch(recs, base_offset=base, compression=codec, last_offset=base + 2 * n + 1,
                      timestamp_type=TimestampType.LOG_APPEND_TIME if lat else TimestampType.CREATE_TIME,
                      log_append_time=T0 + 99 if lat else None, producer_id=rng.choice([-1, 4]),
                      producer_epoch=1, base_sequence=rng.choice([-1, 0]), partition_leader_epoch=3,
                      delete_horizon_ms=horizon)
    return DefaultRecordBatch(raw)


def test_retention_rule_kernel_against_python() -> None:
    """``select`` (C should_retain) and :func:`should_retain_record` on the same map and batches;
    then the batch rebuilt from the kept records by each twin."""
    assert kernel is not None
    rng = random.Random(2)
    for trial in range(300):
        m = kernel.OffsetMap(24 * 40)
        for _ in range(rng.randrange(0, 25)):
            m.put(b"k%d" % rng.randrange(15), rng.randrange(0, 120))
        m.update_latest_offset(rng.randrange(-1, 120))
        batch = random_batch(rng, rng.randrange(0, 60), codec=rng.choice(CODECS))
        deletes_retained = rng.random() < 0.5
        c, p = _NativeSelection(batch, kernel, m, deletes_retained), _PySelection(batch, m, deletes_retained)
        assert [bool(x) for x in c.keep] == p.keep, trial
        for f in ("count", "retained", "tombstones_read", "tombstones_kept", "keyless_dropped"):
            assert getattr(c, f) == getattr(p, f), (trial, f)
        if p.retained:
            for horizon in (None, T0 + 7):
                assert c.rebuild(horizon) == p.rebuild(horizon), trial
    # the rule itself, case by case
    assert should_retain_record(10, None, False, -1, 9, True)  # past the map
    assert not should_retain_record(9, None, False, -1, 9, True)  # keyless
    assert not should_retain_record(5, b"k", False, 6, 9, True)  # a later offset of its key
    assert should_retain_record(6, b"k", True, 6, 9, True) and not should_retain_record(6, b"k", True, 6, 9, False)


def test_retained_records_against_rebuild_batch() -> None:
    """Random subsets of random batches: the kernel's re-encoding equals build_batch's."""
    assert kernel is not None
    rng = random.Random(3)
    for trial in range(300):
        batch = random_batch(rng, 1000, codec=rng.choice(CODECS), n=rng.randrange(1, 30))
        records = batch.records()
        keep = bytes(rng.random() < 0.5 for _ in records)
        if not any(keep):
            continue
        horizon = rng.choice([None, T0 + 1, batch.delete_horizon_ms])
        lat = batch.max_timestamp if batch.timestamp_type == TimestampType.LOG_APPEND_TIME else None
        built = kernel.retained_records(batch.records_payload(), batch.records_count, batch.base_offset,
                                        batch.base_timestamp, lat, keep, horizon)
        assert built is not None
        want = rebuild_batch(batch, [r for r, k in zip(records, keep, strict=True) if k], horizon)
        assert rebuilt_from_area(batch, *built, horizon) == want, trial


def test_retained_records_leaves_non_utf8_header_keys_to_python() -> None:
    """A header key that is not UTF-8: Python's decoder replaces it (Kafka's String does too), so
    the kernel declines and the Python builder rebuilds the batch."""
    assert kernel is not None
    raw = bytearray(build_batch([Record(0, T0, b"k", b"v", (Header("é", b"x"),))]))
    i = raw.index("é".encode())
    raw[i:i + 2] = b"\xff\xfe"
    raw[17:21] = crc32c(bytes(raw[21:])).to_bytes(4, "big")
    batch = DefaultRecordBatch(bytes(raw))
    assert kernel.retained_records(batch.records_payload(), 1, 0, T0, None, b"\x01", None) is None
    m = kernel.OffsetMap(1 << 10)
    sel = _NativeSelection(batch, kernel, m, True)
    assert sel.rebuild(T0 + 5) == _PySelection(batch, m, True).rebuild(T0 + 5)


def test_map_records_kernel_against_python() -> None:
    """Putting batches until the map is full: the same records counted, the same stop, the same map."""
    assert kernel is not None
    rng = random.Random(4)
    for trial in range(200):
        memory = rng.choice([24 * 3, 24 * 8, 24 * 20])
        c, p = kernel.OffsetMap(memory), SkimpyOffsetMap(memory)
        start = rng.randrange(0, 40)
        base = 0
        for _ in range(6):
            batch = random_batch(rng, base)
            base = batch.next_offset
            cs, ps = CleanerStats(), CleanerStats()
            records, full = c.map_records(batch.records_payload(), batch.records_count, batch.base_offset, start)
            cs.map_records += records
            assert (full, cs.map_records) == (map_records(p, batch.records(), start, ps), ps.map_records), trial
            assert c.size == p.size
            if full:
                break
        for k in range(15):
            assert c.get(b"k%d" % k) == p.get(b"k%d" % k)


# --- the differential test -----------------------------------------------------------------------


def marker(pid: int, abort: bool, ts: int) -> bytes:
    kind = ControlRecordType.ABORT if abort else ControlRecordType.COMMIT
    return build_end_txn_marker(0, ts, 0, pid, 0, EndTransactionMarker(kind, 1))


Op = tuple[str, bytes, int]


def script(seed: int, steps: int) -> list[Op]:
    """Appends, rolls and cleanings: ("append", batch, now), ("roll", b"", 0), ("clean", memory, now)."""
    rng = random.Random(seed)
    ops: list[Op] = []
    now = T0
    open_txn: set[int] = set()
    keys = [b"key-%d" % i for i in range(rng.choice([6, 20, 60]))]
    for _ in range(steps):
        now += rng.randrange(1, 300)
        a = rng.random()
        if a < 0.06 and len(open_txn) < 2:
            open_txn.add(rng.choice([p for p in (7, 8, 9) if p not in open_txn]))
        elif a < 0.12 and open_txn:
            pid = rng.choice(sorted(open_txn))
            open_txn.discard(pid)
            ops.append(("append", marker(pid, rng.random() < 0.5, now), now))
        elif a < 0.86:
            recs = []
            for i in range(rng.randrange(1, 9)):
                key = None if rng.random() < 0.05 else rng.choice(keys)
                value = None if key is not None and rng.random() < 0.15 else rng.randbytes(rng.randrange(0, 60))
                headers = (Header("h", b"x"),) if rng.random() < 0.2 else ()
                recs.append(Record(i, now + rng.randrange(-5, 5), key, value, headers))
            pid = rng.choice(sorted(open_txn)) if open_txn and rng.random() < 0.5 else -1
            idempotent = pid < 0 and rng.random() < 0.3
            lat = rng.random() < 0.1
            raw = build_batch(recs, compression=rng.choice(CODECS), producer_id=pid if pid >= 0 else 3 if idempotent else -1,
                              producer_epoch=0 if pid >= 0 or idempotent else -1,
                              base_sequence=0 if pid >= 0 or idempotent else -1, is_transactional=pid >= 0,
                              timestamp_type=TimestampType.LOG_APPEND_TIME if lat else TimestampType.CREATE_TIME,
                              log_append_time=now if lat else None)
            ops.append(("append", raw, now))
        elif a < 0.9:
            ops.append(("roll", b"", 0))
        else:
            memory = rng.choice([24 * 6, 24 * 15, 24 * 50, 1 << 20])
            ops.append(("clean", memory.to_bytes(8, "big"), now))
    ops.append(("roll", b"", 0))
    ops.append(("clean", (1 << 20).to_bytes(8, "big"), now + 1))
    ops.append(("clean", (24 * 15).to_bytes(8, "big"), now + 5 * RETENTION))  # horizons passed
    return ops


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def play(root: Path, ops: list[Op], props: dict[str, str], native: bool) -> list[object]:
    """The script on a log under ``root``; after each cleaning, its result, the progress it
    reported and every file."""
    d = root / "t-0"
    d.mkdir(parents=True)
    config = LogConfig.from_properties(props)
    out: list[object] = []
    log = Log(d, config, writable=True)
    try:
        for kind, data, now in ops:
            if kind == "append":
                log.append(data, now_ms=now)
            elif kind == "roll":
                log.roll()
            else:
                progress = [0, 0]  # bytes done, bytes added to the total

                def report(done: int, added: int, progress: list[int] = progress) -> None:
                    progress[0] += done
                    progress[1] += added

                try:
                    result = LogCleaner(int.from_bytes(data, "big"), now_ms=now, native=native,
                                        progress=report).clean_log(log)
                    out.append(replace(result, path="") if isinstance(result, CleanResult) else result)
                except KlogError as exc:  # a map full before the first batch
                    out.append(str(exc).replace(str(root), "<root>"))
                out.append(progress)
                out.append(snapshot(root))
    finally:
        log.close()
    return out


@pytest.mark.parametrize("seed", range(6))
def test_kernel_and_python_clean_byte_for_byte(tmp_path: Path, seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(seed)
    props = {"segment.bytes": str(rng.choice([700, 2000, 8000])), "cleanup.policy": "compact",
             "delete.retention.ms": str(RETENTION), "index.interval.bytes": str(rng.choice([1, 200, 4096]))}
    if seed % 2:  # reads in chunks smaller than a segment: runs stop at partial batches
        monkeypatch.setattr(file_records, "READ_CHUNK_BYTES", rng.choice([300, 1000]))
    ops = script(seed, 160)
    native = play(tmp_path / "native", ops, props, True)
    python = play(tmp_path / "python", ops, props, False)
    assert len(native) == len(python)
    for i, (a, b) in enumerate(zip(native, python, strict=True)):
        if isinstance(a, dict) and isinstance(b, dict):
            assert a.keys() == b.keys(), i
            for name in a:
                assert a[name] == b[name], (i, name)
        else:
            assert a == b, i
    cleaned = [r for r in native if isinstance(r, CleanResult)]
    assert cleaned and any(r.stats.batches_rebuilt for r in cleaned)


def test_kernel_path_is_taken() -> None:
    """Without KLOG_PURE_PYTHON the cleaner's map is the kernel's."""
    if os.environ.get("KLOG_PURE_PYTHON") == "1":
        pytest.skip("pure Python forced")
    assert not isinstance(LogCleaner(1 << 16).offset_map, SkimpyOffsetMap)
    assert isinstance(LogCleaner(1 << 16, native=False).offset_map, SkimpyOffsetMap)


def test_kernel_entry_points_refuse_damaged_bytes() -> None:
    """Damaged records areas raise InvalidRecordError (the Python side then raises the decoder's
    located error); damaged batches in a run stop it for Python, never raise (ASAN-checked)."""
    assert kernel is not None
    rng = random.Random(9)
    raw = build_batch([Record(i, T0, b"k%d" % i, b"v" * i, (Header("h", b"x"),)) for i in range(20)])
    m = kernel.OffsetMap(1 << 12)
    for _ in range(400):
        area = bytearray(raw[61:])
        for _ in range(rng.randrange(1, 4)):
            area[rng.randrange(len(area))] = rng.randrange(256)
        cut = bytes(area[:rng.randrange(len(area) + 1)])
        for call in (lambda c=cut: m.map_records(c, 20, 0, 0), lambda c=cut: m.select(c, 20, 0, True),
                     lambda c=cut: kernel.retained_records(c, 20, 0, T0, None, b"\x01" * 20, None)):
            try:
                call()
            except KlogError:
                pass
        whole = bytearray(raw * 3)
        for _ in range(rng.randrange(1, 4)):
            whole[rng.randrange(len(whole))] = rng.randrange(256)
        pos, why, _records, _bytes = m.map_run(bytes(whole), 0, 0, 1 << 40)
        assert 0 <= pos <= len(whole) and why in (kernel.CLEAN_END, kernel.CLEAN_SHORT, kernel.CLEAN_BATCH,
                                                  kernel.CLEAN_FULL, kernel.CLEAN_LIMIT)
        pos, why, _out, _meta, _counts = m.clean_run(bytes(whole), 0, T0, RETENTION, b"")
        assert 0 <= pos <= len(whole) and why in (kernel.CLEAN_END, kernel.CLEAN_SHORT, kernel.CLEAN_BATCH)
