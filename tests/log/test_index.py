"""Offset, time and transaction indexes: Kafka's files read as Kafka lists them, rebuilt as Kafka rebuilds them."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import shared_fixtures as sf

from storage_core.errors import CorruptIndexError, KlogError
from storage_core.files import base_offset_of
from storage_core.log.offset_index import OffsetIndex, OffsetPosition
from storage_core.log.segment import scan_segment
from storage_core.log.time_index import TimeIndex, TimestampOffset
from storage_core.log.txn_index import ABORTED_TXN, AbortedTxn, TransactionIndex

PAIRS = sorted(sf.KAFKA_FIXTURES.rglob("*.index.expected.tsv")) if sf.available() else []


def _tsv(path: Path) -> list[tuple[int, ...]]:
    return [tuple(int(x) for x in line.split("\t")) for line in path.read_text().splitlines()[1:]]


@pytest.mark.skipif(not sf.available(), reason=sf.MISSING_REASON)
def test_there_are_60_index_pairs() -> None:
    assert len(PAIRS) == 60


@pytest.mark.conformance
@pytest.mark.parametrize("tsv", sf.params(PAIRS, "index dumps (*.index.expected.tsv)"))
def test_broker_indexes_read_and_rebuild(tsv: Path) -> None:
    index = tsv.with_name(tsv.name[: -len(".expected.tsv")])
    log, tindex = index.with_suffix(".log"), index.with_suffix(".timeindex")
    before = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in (index, log, tindex)}
    base = base_offset_of(log)
    expected = _tsv(tsv)
    t_expected = _tsv(tindex.with_name(tindex.name + ".expected.tsv"))
    with OffsetIndex(index, base) as oi, TimeIndex(tindex, base) as ti:
        assert [(e.offset - base, e.offset, e.position) for e in oi.all_entries()] == expected
        assert [(e.timestamp, e.offset - base, e.offset) for e in ti.all_entries()] == t_expected
        oi.sanity_check()
        ti.sanity_check()
    scan = scan_segment(log, index_interval_bytes=4096)
    assert scan.error is None and scan.valid_bytes == log.stat().st_size
    assert [(e.offset - base, e.offset, e.position) for e in scan.offset_entries] == expected
    # the timestamps always match; offsets may be the batch's last offset (recovery's rule) where the
    # broker's append path wrote the offset of the record holding the max timestamp
    assert [e.timestamp for e in scan.time_entries] == [t[0] for t in t_expected]
    for mine, theirs in zip(scan.time_entries, t_expected, strict=True):
        assert mine.offset >= theirs[2]
    assert {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in (index, log, tindex)} == before


def test_offset_index_write_lookup_trim(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000100.index"
    oi = OffsetIndex(path, 100, max_index_size=80, writable=True)
    assert path.stat().st_size == 80  # preallocated
    for i in range(1, 6):
        oi.append(100 + 10 * i, 1000 * i)
    assert oi.lookup(99) == OffsetPosition(100, 0)
    assert oi.lookup(110) == OffsetPosition(110, 1000)
    assert oi.lookup(135) == OffsetPosition(130, 3000)
    assert oi.lookup(10_000) == OffsetPosition(150, 5000)
    with pytest.raises(CorruptIndexError):
        oi.append(150, 6000)
    oi.truncate_to(130)
    assert oi.last_offset == 120
    oi.close()
    assert path.stat().st_size == 16  # trimmed on close
    ro = OffsetIndex(path, 100)
    assert ro.all_entries() == [OffsetPosition(110, 1000), OffsetPosition(120, 2000)]
    with pytest.raises(KlogError, match="read-only"):
        ro.append(200, 9000)
    ro.close()


def test_preallocated_index_zero_tail_is_ignored_read_only(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.index"
    oi = OffsetIndex(path, 0, max_index_size=8 * 1000, writable=True)
    oi.append(0, 0)  # relative offset 0 in slot 0 is legal
    oi.append(7, 4200)
    oi.flush()
    ro = OffsetIndex(path, 0)  # as copied off a running broker: 1000 slots, 2 used
    assert ro.entries == 2
    assert ro.lookup(5) == OffsetPosition(0, 0)
    ro.close()
    oi.close()


def test_time_index_rules(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.timeindex"
    ti = TimeIndex(path, 0, max_index_size=12 * 4, writable=True)
    ti.maybe_append(-1, 0)  # NO_TIMESTAMP: nothing
    assert ti.entries == 0
    ti.maybe_append(1000, 3)
    ti.maybe_append(1000, 5)  # not greater: ignored
    ti.maybe_append(2000, 9)
    assert ti.all_entries() == [TimestampOffset(1000, 3), TimestampOffset(2000, 9)]
    with pytest.raises(CorruptIndexError):
        ti.maybe_append(3000, 4)  # offset goes back
    ti.maybe_append(2500, 12)
    assert ti.is_full()  # the last slot is kept for the close entry
    ti.maybe_append(2600, 13, skip_full_check=True)
    assert ti.lookup(999) == TimestampOffset(-1, 0)
    assert ti.lookup(2100) == TimestampOffset(2000, 9)
    ti.close()
    assert path.stat().st_size == 48


def test_sanity_check_catches_a_torn_index(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.index"
    path.write_bytes(b"\x00\x00\x00\x05\x00\x00\x10\x00\x00\x00")
    with pytest.raises(CorruptIndexError, match="multiple of 8"):
        OffsetIndex(path, 0).sanity_check()


def test_txn_index(tmp_path: Path) -> None:
    ti = TransactionIndex(tmp_path / "00000000000000000000.txnindex", 0)
    assert ti.read() == []
    ti.append(AbortedTxn(7, 3, 10, 3))
    ti.append(AbortedTxn(8, 11, 20, 11))
    assert len(ti.path.read_bytes()) == 2 * ABORTED_TXN.size == 68
    with pytest.raises(CorruptIndexError):
        ti.append(AbortedTxn(9, 1, 15, 1))
    assert ti.collect_aborted(12, 100) == [AbortedTxn(8, 11, 20, 11)]
    assert ti.collect_aborted(0, 5) == [AbortedTxn(7, 3, 10, 3)]
    ti.truncate_to(15)
    assert ti.read() == [AbortedTxn(7, 3, 10, 3)]
    ti.path.write_bytes(ti.path.read_bytes() + b"\x00")
    with pytest.raises(CorruptIndexError, match="multiple of the entry size 34"):
        ti.read()


def test_empty_existing_index_opens_writable_with_no_entries(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.index"
    path.write_bytes(b"")  # what a broker leaves for a just-rolled segment after trimming
    oi = OffsetIndex(path, 0, max_index_size=800, writable=True)
    assert oi.entries == 0 and path.stat().st_size == 800
    oi.append(5, 4100)
    oi.close()
    assert OffsetIndex(path, 0).all_entries() == [OffsetPosition(5, 4100)]


def test_in_memory_index_for_read_only_recovery(tmp_path: Path) -> None:
    from storage_core.log.offset_index import OFFSET_INDEX_ENTRY

    data = b"".join(OFFSET_INDEX_ENTRY.pack(rel, pos) for rel, pos in [(3, 4200), (9, 8500)])
    oi = OffsetIndex.in_memory(tmp_path / "00000000000000000010.index", 10, data)
    assert isinstance(oi, OffsetIndex)
    assert oi.lookup(15) == OffsetPosition(13, 4200)
    assert not (tmp_path / "00000000000000000010.index").exists()
    oi.close()


def test_read_only_open_survives_a_writer_trimming_the_file(tmp_path: Path) -> None:
    """A writer preallocates an active segment's index and trims it on close, in another process.
    A reader that mapped the longer file would die of SIGBUS touching a page past the new end
    (found by a stream tailing a topic while a Spark job committed to it); reads must not."""
    import os
    import subprocess
    import sys
    import textwrap
    import time

    path = tmp_path / "00000000000000000000.index"
    with OffsetIndex(path, 0, max_index_size=1 << 20, writable=True) as idx:
        for i in range(1, 200):
            idx.append(i * 10, i * 4096)
    entries = path.stat().st_size
    reader = textwrap.dedent(f"""
        import time
        from storage_core.log.offset_index import OffsetIndex
        end = time.monotonic() + 3
        n = 0
        while time.monotonic() < end:
            with OffsetIndex({str(path)!r}, 0) as idx:
                idx.lookup(1990)
                n += 1
        print(n)
    """)
    child = subprocess.Popen([sys.executable, "-c", reader], stdout=subprocess.PIPE, text=True)
    while child.poll() is None:  # preallocate to 1 MiB (zeros past the entries), trim back
        fd = os.open(path, os.O_RDWR)
        os.ftruncate(fd, 1 << 20)
        time.sleep(0.0005)
        os.ftruncate(fd, entries)
        os.close(fd)
    out, _ = child.communicate()
    assert child.returncode == 0, f"reader died with {child.returncode} (SIGBUS is -7)"
    assert int(out) > 10


def _bytes_read() -> int:
    """What this process has read through read(2) and pread(2) so far (``rchar`` of /proc/self/io)."""
    return int(dict(line.split(": ") for line in Path("/proc/self/io").read_text().splitlines())["rchar"])


@pytest.mark.parametrize("kind", ["offset", "time"])
@pytest.mark.parametrize("seed", range(4))
def test_a_preallocated_index_is_read_up_to_its_zero_tail(tmp_path: Path, kind: str, seed: int) -> None:
    """A running broker's active index is preallocated (10 MiB by default) and holds its entries
    in a prefix: a read-only open finds where the zeros start by a binary search and reads only the
    entries (a live partition's open read 20 MiB of zeros before), with the same entries as a
    read of the whole file. Random entry counts, 0 and a full file included."""
    import random

    rng = random.Random(seed)
    cls = OffsetIndex if kind == "offset" else TimeIndex
    es = cls.ENTRY.size
    slots = (2 << 20) // es  # Kafka's default is 10 MiB
    n = rng.choice([0, 1, 2, 3, slots - 1, slots, rng.randrange(4, 30_000)])
    path = tmp_path / f"00000000000000000000.{'index' if kind == 'offset' else 'timeindex'}"
    rels = sorted(rng.sample(range(1, 1 << 30), n - 1)) if n else []
    rels = ([0] + rels) if n else []  # slot 0 may hold relative offset 0, as the first batch's entry does
    raw = b"".join(cls.ENTRY.pack(*((r, 1024 * i) if kind == "offset" else (1000 + i, r)))
                   for i, r in enumerate(rels))
    path.write_bytes(raw + bytes(slots * es - len(raw)))
    before = _bytes_read()
    with cls(path, 0) as idx:
        got = idx.all_entries()
        assert idx.max_index_size == slots * es
    read = _bytes_read() - before
    want = [OffsetPosition(r, 1024 * i) if kind == "offset" else TimestampOffset(1000 + i, r)
            for i, r in enumerate(rels)]
    assert got == want, f"seed {seed}: {n} entries"
    full = n == slots and n > 0 and rels[-1] != 0
    assert read <= (slots * es if full else (n + 1) * es + 64 * es), f"seed {seed}: read {read} bytes for {n} entries"


def test_an_index_of_no_whole_number_of_entries_is_still_read_whole(tmp_path: Path) -> None:
    """The prefix read is only for a file of whole entries: a torn one is read whole, and its sanity
    check still fails (what a writable open then rebuilds)."""
    path = tmp_path / "00000000000000000000.index"
    path.write_bytes(OffsetIndex.ENTRY.pack(0, 0) + bytes((1 << 20) + 3))
    with OffsetIndex(path, 0) as idx, pytest.raises(CorruptIndexError, match="multiple of 8"):
        idx.sanity_check()
