"""read_committed on the bulk path: the kernel's TxnFilter, its Python reference and the per-batch path agree.

Three ways to read a slice of a segment under read_committed, which must give the same rows, or
the same error at the same position:

* ``bulk-native``: ``decode_file_range`` with the kernel's builder and filter (``_kernel.TxnFilter``
  updated inside ``add_v2_run``, ``NativeTxnFilter.admit`` for the batches the object path takes);
* ``bulk-python``: ``decode_file_range`` with the pure-Python builder and ``PyTxnFilter`` (no kernel);
* ``per-batch``: ``filter_read_committed`` over the CRC-checked batches, then ``ArrowDecoder.add``
  (the path read_committed reads took before).

The rows expected come from the generator, which knows which transactions it committed and
aborted and which offsets it wrote; the errors' positions from where it put the batch they are
about. The rule itself is not derived again here.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import shared_fixtures as sf
from hypothesis import given, settings
from hypothesis import strategies as st
from test_property import legacy_entry

from storage_core.errors import CorruptIndexError, CorruptRecordError, InvalidRecordError, KlogError
from storage_core.log.config import LogConfig
from storage_core.log.log import Log
from storage_core.log.txn_index import AbortedTxn
from storage_core.record import columnar
from storage_core.record.columnar import ArrowDecoder, native_kernel
from storage_core.record.compression import CompressionType
from storage_core.record.control import ControlRecordType, EndTransactionMarker
from storage_core.record.file_records import READ_CHUNK_BYTES, AnyBatch, FileRecords
from storage_core.record.records import Header, Record, build_batch
from storage_core.record.scan import decode_file_range
from storage_core.record.txn_filter import NativeTxnFilter, PyTxnFilter, filter_read_committed, new_txn_filter

pytestmark = pytest.mark.skipif(native_kernel() is None, reason="the native kernel is not built")

T0 = 1_700_000_000_000
I64_MIN, I64_MAX = -(1 << 63), (1 << 63) - 1
CODECS = [CompressionType.NONE, CompressionType.NONE, CompressionType.LZ4, CompressionType.GZIP,
          CompressionType.SNAPPY, CompressionType.ZSTD]
FIXTURE = sf.KAFKA_FIXTURES / "generated-by-kafka-clients-4.3.0" / "v2-txn-markers.log"


# --- building logs ------------------------------------------------------------------------------


def value_of(offset: int, pid: int) -> bytes:
    return b"v%d-p%d" % (offset, pid)


def data_batch(base: int, n: int, pid: int, *, txn: bool, codec: CompressionType = CompressionType.NONE,
               headers: bool = False) -> bytes:
    recs = [Record(o, T0 + o, b"k%d" % o, value_of(o, pid), (Header("h", b"%d" % o),) if headers else ())
            for o in range(base, base + n)]
    return build_batch(recs, compression=codec, producer_id=pid, producer_epoch=0 if pid >= 0 else -1,
                       base_sequence=0 if pid >= 0 else -1, is_transactional=txn)


def marker_batch(offset: int, pid: int, *, abort: bool, codec: CompressionType = CompressionType.NONE,
                 key: bytes | None = None) -> bytes:
    kind = ControlRecordType.ABORT if abort else ControlRecordType.COMMIT
    rec = Record(offset, T0 + offset, kind.key_bytes() if key is None else key,
                 EndTransactionMarker(kind, 3).value_bytes())
    return build_batch([rec], compression=codec, producer_id=pid, producer_epoch=0, is_transactional=True,
                       is_control=True)


@dataclass
class TxnLog:
    """A segment file and what its generator knows about it."""

    raw: bytes = b""
    aborted: list[AbortedTxn] = field(default_factory=list)            # the transaction index
    visible: dict[int, bytes] = field(default_factory=dict)           # offset -> value a committed read returns
    batches: list[tuple[int, int, int]] = field(default_factory=list)  # (position, first offset, last offset)
    marker_at: dict[AbortedTxn, int] = field(default_factory=dict)    # position of each aborted txn's marker
    data_of: dict[AbortedTxn, dict[int, bytes]] = field(default_factory=dict)  # each aborted txn's records

    def add(self, raw: bytes, first: int, last: int) -> int:
        pos = len(self.raw)
        self.raw += raw
        self.batches.append((pos, first, last))
        return pos


@st.composite
def txn_logs(draw: st.DrawFn, legacy: bool = True) -> TxnLog:
    """Interleaved transactions of producers 1-3 (data batches of 1-5 records in any codec, COMMIT
    and ABORT markers, a few compressed), plain batches (no producer, or a transactional one's id),
    legacy messages, markers of no open transaction (as the cleaner leaves them), offset gaps; every
    transaction ends by the end of the file."""
    kinds = ["txn", "txn", "txn", "commit", "abort", "plain"] + (["legacy"] if legacy else [])
    ops = draw(st.lists(st.tuples(st.sampled_from(kinds), st.integers(1, 3), st.integers(1, 5),
                                  st.sampled_from(CODECS), st.integers(0, 2)), min_size=1, max_size=40)
               | st.lists(st.tuples(st.sampled_from(kinds), st.integers(1, 2), st.integers(1, 3),
                                    st.sampled_from(CODECS), st.integers(0, 2)), min_size=10, max_size=40))
    log = TxnLog()
    nxt = draw(st.integers(0, 1000))
    open_txn: dict[int, tuple[int, dict[int, bytes]]] = {}  # pid -> (first offset, records)

    def end_txn(pid: int, abort: bool, codec: CompressionType, base: int) -> None:
        pos = log.add(marker_batch(base, pid, abort=abort, codec=codec), base, base)
        if pid not in open_txn:
            return  # a marker the cleaner kept without its transaction: nothing to skip, no index entry
        first, recs = open_txn.pop(pid)
        if abort:
            t = AbortedTxn(pid, first, base, first)
            log.aborted.append(t)
            log.marker_at[t] = pos
            log.data_of[t] = recs
        else:
            log.visible.update(recs)

    for kind, pid, n, codec, gap in ops:
        base = nxt + gap
        if kind == "txn":
            log.add(data_batch(base, n, pid, txn=True, codec=codec, headers=gap == 1), base, base + n - 1)
            open_txn.setdefault(pid, (base, {}))[1].update({o: value_of(o, pid) for o in range(base, base + n)})
            nxt = base + n
        elif kind in ("commit", "abort"):
            end_txn(pid, kind == "abort", codec if codec == CompressionType.LZ4 else CompressionType.NONE, base)
            nxt = base + 1
        elif kind == "plain":
            owner = pid if gap == 2 else -1  # a non-transactional batch of a producer in a transaction
            log.add(data_batch(base, n, owner, txn=False, codec=codec), base, base + n - 1)
            log.visible.update({o: value_of(o, owner) for o in range(base, base + n)})
            nxt = base + n
        else:
            log.add(legacy_entry(base, gap % 2, 0, b"k%d" % base, value_of(base, -1), T0 + base), base, base)
            log.visible[base] = value_of(base, -1)
            nxt = base + 1
    for pid in sorted(open_txn):
        end_txn(pid, draw(st.booleans()), CompressionType.NONE, nxt)
        nxt += 1
    return log


# --- the three readers ----------------------------------------------------------------------------

Error = tuple[str, str, str | None, int | None]


def error_of(exc: KlogError) -> Error:
    return type(exc).__name__, exc.detail, exc.path, exc.position


@dataclass
class Read:
    rows: pa.Table
    error: Error | None
    snapshot: tuple[int, frozenset[int], frozenset[int]] | None = None


def decoder(native: bool) -> ArrowDecoder:
    return ArrowDecoder("t", 3, include_headers=True, include_metadata=True, native=native)


def table(parts: list[pa.RecordBatch]) -> pa.Table:
    return pa.Table.from_batches(parts).combine_chunks()


def read_bulk(path: Path, aborted: list[AbortedTxn], native: bool, *, filter_native: bool | None = None,
              start: int = 0, stop: int | None = None, min_offset: int = I64_MIN, end_offset: int = I64_MAX,
              chunk_bytes: int = READ_CHUNK_BYTES, flush_bytes: int | None = None) -> Read:
    dec = decoder(native)
    txn = new_txn_filter(aborted, where="slice", native=native if filter_native is None else filter_native)
    parts: list[pa.RecordBatch] = []
    error = None
    try:
        for rb in decode_file_range(FileRecords(path), start, stop, dec, min_offset=min_offset, end_offset=end_offset,
                                    chunk_bytes=chunk_bytes, flush_bytes=flush_bytes, flush_rows=None, txn=txn):
            parts.append(rb)
    except KlogError as exc:
        error = error_of(exc)
    parts.append(dec.finish())
    return Read(table(parts), error, txn.snapshot())


def read_per_batch(path: Path, aborted: list[AbortedTxn], *, start: int = 0, stop: int | None = None,
                   min_offset: int = I64_MIN, end_offset: int = I64_MAX) -> Read:
    dec = decoder(False)

    def checked() -> Iterator[AnyBatch]:
        for b in FileRecords(path).batches(start, stop):
            b.ensure_valid()
            yield b

    error = None
    try:
        for b in filter_read_committed(checked(), aborted, where="slice"):
            dec.add(b, min_offset=min_offset, end_offset=end_offset, verify=False)
    except KlogError as exc:
        error = error_of(exc)
    return Read(table([dec.finish()]), error)


def read_all_ways(path: Path, aborted: list[AbortedTxn], *, cross: bool = False, **kw: Any) -> Read:
    """The three readers (and, with ``cross``, each builder with the other filter) must agree; the
    kernel's filter ends in the reference's state."""
    native = read_bulk(path, aborted, True, **kw)
    python = read_bulk(path, aborted, False, **kw)
    assert native.error == python.error
    assert native.rows.equals(python.rows)
    assert native.snapshot == python.snapshot
    per_batch = read_per_batch(path, aborted, **{k: v for k, v in kw.items() if k in (
        "start", "stop", "min_offset", "end_offset")})
    assert per_batch.error == native.error
    assert per_batch.rows.equals(native.rows)
    if cross:
        for filter_native in (True, False):
            other = read_bulk(path, aborted, not filter_native, filter_native=filter_native, **kw)
            assert other.error == native.error and other.rows.equals(native.rows)
    return native


def offsets_values(rows: pa.Table) -> dict[int, bytes]:
    return dict(zip(rows.column("offset").to_pylist(), rows.column("value").to_pylist(), strict=True))


def step_both(log: TxnLog, path: Path, aborted: list[AbortedTxn]) -> None:
    """The kernel's filter and the reference, batch by batch: the same verdicts, errors and state."""
    kernel = native_kernel()
    filters = [PyTxnFilter(aborted, where="w"), NativeTxnFilter(aborted, kernel, where="w")]
    for batch in FileRecords(path).batches():
        outcomes = []
        for f in filters:
            try:
                outcomes.append(f.admit(batch))
            except KlogError as exc:
                outcomes.append(error_of(exc))
        assert outcomes[0] == outcomes[1]
        assert filters[0].snapshot() == filters[1].snapshot()


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("txn") / "00000000000000000000.log"


# --- generated logs -------------------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(log=txn_logs(), data=st.data())
def test_bulk_read_committed_equals_reference_on_generated_slices(log: TxnLog, data: st.DataObject,
                                                                 work: Path) -> None:
    """Slices from any batch boundary (aborted transactions that began before it included, as
    Log.aborted_transactions gives them, or also those that ended before it, as a Spark piece gets
    them), offset ranges, chunks as small as one batch (state carried from call to call and across
    legacy batches), flushes inside chunks."""
    work.write_bytes(log.raw)
    after_abort = [k + 1 for k, b in enumerate(log.batches[:-1]) if b[0] in log.marker_at.values()]
    just_after_abort = bool(after_abort) and data.draw(st.booleans(), "start just after an ABORT marker")
    i = data.draw(st.sampled_from(after_abort) if just_after_abort else st.integers(0, len(log.batches) - 1),
                  "first batch")
    j = data.draw(st.integers(i + 1, len(log.batches)), "end batch")
    start = log.batches[i][0]
    stop = log.batches[j][0] if j < len(log.batches) else None
    first, last = log.batches[i][1], log.batches[j - 1][2]
    min_offset = data.draw(st.none() | st.integers(first - 1, last + 1), "min_offset")
    end_offset = data.draw(st.none() | st.integers(first, last + 2), "end_offset")
    lo = first if min_offset is None else max(first, min_offset)
    hi = last + 1 if end_offset is None else min(last + 1, end_offset)
    if just_after_abort or data.draw(st.booleans(), "the range's list"):  # as a Spark piece gets it, ended ones too
        aborted = [t for t in log.aborted if t.first_offset <= last]
    else:  # as Log.aborted_transactions gives it for the bytes read
        aborted = [t for t in log.aborted if t.last_offset >= first and t.first_offset <= last]
    kw = {"start": start, "stop": stop, "min_offset": I64_MIN if min_offset is None else min_offset,
          "end_offset": I64_MAX if end_offset is None else end_offset,
          "chunk_bytes": data.draw(st.sampled_from([17, 100, 300, 1000, READ_CHUNK_BYTES]), "chunk"),
          "flush_bytes": data.draw(st.none() | st.integers(1, 500), "flush_bytes")}
    got = read_all_ways(work, aborted, cross=data.draw(st.booleans(), "cross"), **kw)
    assert got.error is None
    assert offsets_values(got.rows) == {o: v for o, v in sorted(log.visible.items()) if lo <= o < hi}
    assert got.rows.column("offset").to_pylist() == sorted(offsets_values(got.rows))
    if i == 0:
        step_both(log, work, log.aborted)


@settings(max_examples=100, deadline=None)
@given(log=txn_logs(), damage=st.sampled_from(["crc", "index"]), data=st.data())
def test_damage_gives_the_same_error_at_the_same_position(log: TxnLog, damage: str, data: st.DataObject,
                                                          work: Path) -> None:
    """A CRC mismatch in the middle, or a transaction index that lost an entry: the same error, at the
    batch the generator damaged, on every path, after the same rows; the filters end in the same state."""
    raw = bytearray(log.raw)
    aborted = list(log.aborted)
    visible = dict(log.visible)
    if damage == "crc":
        k = data.draw(st.integers(0, len(log.batches) - 1), "batch")
        pos, first, _ = log.batches[k]
        end = log.batches[k + 1][0] if k + 1 < len(log.batches) else len(raw)
        raw[data.draw(st.integers(pos + 17, end - 1), "byte")] ^= 0x5A
        want = (CorruptRecordError, pos)
        before = first
    else:
        if not aborted:
            return
        lost = data.draw(st.sampled_from(aborted), "lost entry")
        aborted.remove(lost)
        visible.update(log.data_of[lost])  # read as if committed, up to its marker
        want = (CorruptIndexError, log.marker_at[lost])
        before = lost.last_offset
    work.write_bytes(bytes(raw))
    got = read_all_ways(work, aborted, chunk_bytes=data.draw(st.sampled_from([17, 300, READ_CHUNK_BYTES]), "chunk"))
    assert got.error is not None
    assert (got.error[0], got.error[3]) == (want[0].__name__, want[1])
    assert got.error[2] == str(work)
    assert offsets_values(got.rows) == {o: v for o, v in sorted(visible.items()) if o < before}
    if damage == "index":
        step_both(log, work, aborted)


# --- a log written by klog's Log: segments, txn index, transactions across segments -----------------


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 3), st.sampled_from(["data", "data", "commit", "abort", "plain", "roll"]),
                          st.integers(1, 4)), min_size=1, max_size=40))
def test_pieces_of_a_log_read_like_log_batches(steps: list[tuple[int, str, int]]) -> None:
    """Each segment read as the Spark reader reads a piece (a fresh filter with the range's aborted
    transactions, some begun in an earlier segment): the rows of Log.batches(read_committed=True)."""
    import tempfile

    tmp = Path(tempfile.mkdtemp())
    try:
        d = tmp / "t-0"
        d.mkdir()
        cfg = LogConfig.from_properties({"segment.bytes": "700", "index.interval.bytes": "200"})
        visible: list[int] = []
        open_txn: dict[int, list[int]] = {}
        with Log(d, cfg, writable=True) as log:
            for pid, op, n in steps:
                if op == "data":
                    first, last = log.append(data_batch(0, n, pid, txn=True))
                    open_txn.setdefault(pid, []).extend(range(first, last + 1))
                elif op in ("commit", "abort") and pid in open_txn:
                    log.append(marker_batch(0, pid, abort=op == "abort"))
                    if op == "commit":
                        visible += open_txn[pid]
                    del open_txn[pid]
                elif op == "plain":
                    first, last = log.append(data_batch(0, n, -1, txn=False, codec=CompressionType.LZ4))
                    visible += range(first, last + 1)
                elif op == "roll":
                    log.roll()
            for pid in sorted(open_txn):
                log.append(marker_batch(0, pid, abort=False))
                visible += open_txn[pid]
            assert log.last_stable_offset == log.log_end_offset
            start, end = log.log_start_offset, log.log_end_offset
            aborted = log.aborted_transactions(start, end)
            reference = decoder(False)
            for b in log.batches(start, end, read_committed=True):
                reference.add(b)
            want = table([reference.finish()])
            parts: list[pa.RecordBatch] = []
            for seg in log.segments:
                dec = decoder(True)
                txn = new_txn_filter(aborted, where=str(seg.log_path))
                parts += decode_file_range(FileRecords(seg.log_path), 0, None, dec, min_offset=start,
                                           end_offset=end, chunk_bytes=256, txn=txn)
                parts.append(dec.finish())
        got = table(parts)
        assert got.equals(want)
        assert got.column("offset").to_pylist() == sorted(visible)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# --- the Kafka-written fixture --------------------------------------------------------------------


@pytest.mark.skipif(not sf.available(), reason=sf.MISSING_REASON)
def test_kafka_generated_transactions_fixture() -> None:
    """v2-txn-markers.log (kafka-clients 4.3.0): [0-2] idempotent, [3-6] committed (lz4) at 7, [8-9]
    aborted (zstd) at 10, [11-13] plain gzip with LogAppendTime; its one aborted transaction is
    AbortedTxn(4242, 8, 10, 11) (what Kafka's recovery writes, see test_transactions)."""
    aborted = [AbortedTxn(4242, 8, 10, 11)]
    got = read_all_ways(FIXTURE, aborted, cross=True)
    assert got.error is None
    assert got.rows.column("offset").to_pylist() == [0, 1, 2, 3, 4, 5, 6, 11, 12, 13]
    for chunk in (17, 200):
        for min_offset in (0, 4, 9, 11):
            part = read_all_ways(FIXTURE, aborted, chunk_bytes=chunk, min_offset=min_offset)
            assert part.rows.column("offset").to_pylist() == [o for o in [0, 1, 2, 3, 4, 5, 6, 11, 12, 13]
                                                              if o >= min_offset]
    # slices from each batch boundary, the aborted list as Log.aborted_transactions gives it
    positions = [b.position for b in FileRecords(FIXTURE).batches()]
    firsts = [b.base_offset for b in FileRecords(FIXTURE).batches()]
    for pos, first in zip(positions, firsts, strict=True):
        part = read_all_ways(FIXTURE, [t for t in aborted if t.last_offset >= first], start=pos)
        assert part.rows.column("offset").to_pylist() == [o for o in [0, 1, 2, 3, 4, 5, 6, 11, 12, 13] if o >= first]
    # the index without its entry: the aborted data is returned up to the marker, then CorruptIndexError there
    lost = read_all_ways(FIXTURE, [])
    assert lost.error is not None and lost.error[0] == "CorruptIndexError"
    assert lost.error[3] == positions[firsts.index(10)]
    assert lost.rows.column("offset").to_pylist() == [0, 1, 2, 3, 4, 5, 6, 8, 9]


# --- corner cases -------------------------------------------------------------------------------


def write(path: Path, *batches: bytes) -> list[int]:
    path.write_bytes(b"".join(batches))
    return [b.position for b in FileRecords(path).batches()]


def test_aborted_transaction_begun_before_the_slice(work: Path) -> None:
    """The file starts inside an aborted transaction whose first offset is in an earlier segment."""
    write(work, data_batch(100, 3, 7, txn=True), data_batch(103, 2, 8, txn=True), data_batch(105, 2, -1, txn=False),
          marker_batch(107, 7, abort=True), marker_batch(108, 8, abort=False), data_batch(109, 2, 7, txn=True),
          marker_batch(111, 7, abort=False))
    got = read_all_ways(work, [AbortedTxn(7, 40, 107, 40)], cross=True, chunk_bytes=17)
    assert got.error is None
    assert got.rows.column("offset").to_pylist() == [103, 104, 105, 106, 109, 110]


def test_a_transaction_that_ended_before_the_slice_hides_nothing(tmp_path: Path) -> None:
    """A Spark piece gets its whole range's aborted list: the piece of the second segment must not
    put producer 1 in the aborted set for good because of the transaction it aborted in the first
    (its marker is behind the piece) and so lose the transaction it committed later."""
    d = tmp_path / "t-0"
    d.mkdir()
    with Log(d, LogConfig.from_properties({"segment.bytes": "700"}), writable=True) as log:
        log.append(data_batch(0, 2, 1, txn=True))
        log.append(marker_batch(0, 1, abort=True))
        log.roll()
        log.append(data_batch(0, 2, 1, txn=True))
        log.append(marker_batch(0, 1, abort=False))
        aborted = log.aborted_transactions(0, log.log_end_offset)
        assert aborted == [AbortedTxn(1, 0, 2, 3)]
        second = log.segments[1].log_path
    got = read_all_ways(second, aborted, cross=True)
    assert got.error is None and got.rows.column("offset").to_pylist() == [3, 4]


def test_markers_without_index_entries(work: Path) -> None:
    """An ABORT marker of no open transaction (the cleaner kept it) is nothing to skip; nor is one
    after a control batch of the same producer; after returned data of its producer it is an error."""
    write(work, marker_batch(0, 5, abort=True), data_batch(1, 2, 5, txn=True),
          build_batch([], base_offset=3, producer_id=5, producer_epoch=0, is_transactional=True, is_control=True),
          marker_batch(4, 5, abort=True), data_batch(5, 1, -1, txn=False))
    got = read_all_ways(work, [], cross=True)
    assert got.error is None and got.rows.column("offset").to_pylist() == [1, 2, 5]
    positions = write(work, data_batch(0, 2, 5, txn=True), data_batch(2, 1, 6, txn=True),
                      marker_batch(3, 6, abort=False), marker_batch(4, 5, abort=True, codec=CompressionType.LZ4),
                      data_batch(5, 1, -1, txn=False))
    for chunk in (17, READ_CHUNK_BYTES):
        got = read_all_ways(work, [], chunk_bytes=chunk)
        assert got.error is not None and got.error[0] == "CorruptIndexError" and got.error[3] == positions[3]
        assert "ABORT marker at offset 4 (producer 5)" in got.error[1] and "klog recover" in got.error[1]
        assert got.rows.column("offset").to_pylist() == [0, 1, 2]


@pytest.mark.parametrize("key", [b"\x00", b"\x00\x00\x00", None, b"\xff\xff\x00\x00"], ids=["1B", "3B", "null", "neg"])
def test_malformed_marker_is_the_object_paths_error(work: Path, key: bytes | None) -> None:
    """A transactional control record whose key ControlRecordType.parse refuses: the kernel leaves it
    to the object path, which raises InvalidRecordError located at the marker on every path."""
    rec = Record(2, T0, key, b"")
    bad = build_batch([rec], producer_id=5, producer_epoch=0, is_transactional=True, is_control=True)
    positions = write(work, data_batch(0, 2, 5, txn=True), bad, data_batch(3, 1, -1, txn=False))
    got = read_all_ways(work, [])
    assert got.error is not None and got.error[0] == InvalidRecordError.__name__
    assert got.error[2:] == (str(work), positions[1])
    assert got.rows.column("offset").to_pylist() == [0, 1]
    # read_uncommitted never reads control records: no error there
    dec = decoder(True)
    list(decode_file_range(FileRecords(work), 0, None, dec))
    assert dec.finish().column("offset").to_pylist() == [0, 1, 3]


def test_the_kernel_decides_every_plain_batch_itself(work: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the kernel's filter the object path sees only what the kernel cannot decide: here the
    compressed marker and the legacy message, nothing else."""
    write(work, data_batch(0, 3, 1, txn=True, codec=CompressionType.LZ4), data_batch(3, 2, 2, txn=True),
          marker_batch(5, 1, abort=True), marker_batch(6, 2, abort=False, codec=CompressionType.LZ4),
          legacy_entry(7, 1, 0, b"k", b"v", T0), data_batch(8, 2, 1, txn=True), marker_batch(10, 1, abort=False))
    seen: list[int] = []
    admit = NativeTxnFilter.admit

    def counting(self: NativeTxnFilter, batch: AnyBatch) -> bool:
        seen.append(batch.last_offset)
        return admit(self, batch)

    monkeypatch.setattr(NativeTxnFilter, "admit", counting)
    got = read_bulk(work, [AbortedTxn(1, 0, 5, 0)], True)
    assert got.error is None and got.rows.column("offset").to_pylist() == [3, 4, 7, 8, 9]
    assert seen == [6, 7]


def test_filter_choice_and_kernel_argument_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    assert isinstance(new_txn_filter([]), NativeTxnFilter)
    assert isinstance(new_txn_filter([], native=False), PyTxnFilter)
    monkeypatch.setenv("KLOG_PURE_PYTHON", "1")
    assert isinstance(new_txn_filter([]), PyTxnFilter)
    with pytest.raises(KlogError, match="not available"):
        new_txn_filter([], native=True)
    monkeypatch.delenv("KLOG_PURE_PYTHON")
    kernel = native_kernel()
    builder = kernel.RecordsBuilder(False)
    with pytest.raises(TypeError, match="TxnFilter"):
        builder.add_v2_run(b"", 0, 1, True, None, -1, object())
    with pytest.raises(TypeError):
        kernel.TxnFilter([(1, 2)])
    state = kernel.TxnFilter([(9, 30, 40), (8, 10, 20), (7, 10, 15)])
    assert state.snapshot() == (0, frozenset(), frozenset())
    assert state.step(False, True, 7, 12, False) == kernel.TXN_SKIP  # reaches first offset 10: 7 and 8
    assert state.snapshot() == (2, frozenset({7, 8}), frozenset())
    assert state.step(True, True, 7, 15, True) == kernel.TXN_SKIP
    assert state.step(False, True, 7, 16, False) == kernel.TXN_ADMIT
    assert state.snapshot() == (2, frozenset({8}), frozenset({7}))
    assert state.step(True, True, 7, 17, True) == kernel.TXN_MISSING_ENTRY  # 17 is no entry's marker
    assert state.snapshot() == (2, frozenset({8}), frozenset({7}))  # unchanged
    # a decoder given a filter without kernel state leaves every batch to the object path
    assert columnar.ArrowDecoder("t", 0).add_run(b"\x00" * 80, txn=PyTxnFilter([])) == (0, columnar.RUN_SLOW_PATH)
