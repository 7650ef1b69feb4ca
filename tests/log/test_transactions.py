"""Transactions: producer state and snapshots, .txnindex on ABORT, read_committed (LSO, aborted data skipped)."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest
import shared_fixtures as sf
from hypothesis import given, settings
from hypothesis import strategies as st

from storage_core.errors import CorruptIndexError
from storage_core.log.config import LogConfig
from storage_core.log.log import Log
from storage_core.log.producer_state import ProducerStateManager, snapshot_files
from storage_core.log.txn_index import AbortedTxn
from storage_core.record.control import ControlRecordType, EndTransactionMarker
from storage_core.record.records import Record, build_batch, build_end_txn_marker

T0 = 1_700_000_000_000
CFG = LogConfig.from_properties({"segment.bytes": "2000", "index.interval.bytes": "300"})


def data(pid: int, n: int, txn: bool, seq: int = 0) -> bytes:
    return build_batch([Record(i, T0 + i, b"k%d" % i, b"p%d" % pid) for i in range(n)], producer_id=pid,
                       producer_epoch=0, base_sequence=seq, is_transactional=txn)


def marker(pid: int, abort: bool) -> bytes:
    kind = ControlRecordType.ABORT if abort else ControlRecordType.COMMIT
    return build_end_txn_marker(0, T0, 0, pid, 0, EndTransactionMarker(kind, 3))


def committed(log: Log, start: int | None = None) -> list[int]:
    return [r.offset for b in log.batches(start, read_committed=True) for r in b.records()]


@pytest.mark.skipif(not sf.available(), reason=sf.MISSING_REASON)
@pytest.mark.parametrize("writable", [False, True])
def test_kafka_generated_transactions(tmp_path: Path, writable: bool) -> None:
    d = tmp_path / "t-0"
    d.mkdir()
    shutil.copy(sf.KAFKA_FIXTURES / "generated-by-kafka-clients-4.3.0" / "v2-txn-markers.log",
                d / "00000000000000000000.log")
    with Log(d, writable=writable) as log:
        # [0-2] idempotent; [3-6] txn committed at 7; [8-9] txn aborted at 10; [11-13] plain
        assert committed(log) == [0, 1, 2, 3, 4, 5, 6, 11, 12, 13]
        assert log.last_stable_offset == log.log_end_offset == 14
        assert log.aborted_transactions(0, 14) == [AbortedTxn(4242, 8, 10, 11)]
    if writable:
        txn = d / "00000000000000000000.txnindex"
        assert txn.stat().st_size == 34  # one entry, written by recovery as Kafka's would be


def test_append_writes_txnindex_and_lso_follows_open_transactions(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    d.mkdir()
    with Log(d, CFG, writable=True) as log:
        log.append(data(1, 3, txn=True))          # 0-2, pid 1 open
        log.append(data(2, 2, txn=True))          # 3-4, pid 2 open
        log.append(data(9, 2, txn=False))         # 5-6
        assert log.last_stable_offset == 0
        assert committed(log) == []
        log.append(marker(1, abort=True))         # 7: pid 1 aborted; LSO -> pid 2's first offset
        assert log.last_stable_offset == 3
        assert log.aborted_transactions(0, 100) == [AbortedTxn(1, 0, 7, 3)]
        log.append(marker(2, abort=False))        # 8: pid 2 committed
        assert log.last_stable_offset == 9
        assert committed(log) == [3, 4, 5, 6]
        assert [r.offset for b in log.batches() for r in b.records() if not b.is_control] == [0, 1, 2, 3, 4, 5, 6]
        log.append(data(1, 1, txn=True))          # 9: pid 1 again, open
    assert snapshot_files(d)[-1][0] == 10
    state = ProducerStateManager.read_snapshot(snapshot_files(d)[-1][1])
    assert state.producers[1].current_txn_first_offset == 9
    with Log(d, CFG, had_clean_shutdown=True) as ro:
        assert ro.last_stable_offset == 9
        assert committed(ro) == [3, 4, 5, 6]


def test_missing_txnindex_is_an_error_not_a_silent_read(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    d.mkdir()
    with Log(d, CFG, writable=True) as log:
        log.append(data(1, 2, txn=True))
        log.append(marker(1, abort=True))
    (d / "00000000000000000000.txnindex").unlink()
    with Log(d, CFG, had_clean_shutdown=True) as log, pytest.raises(CorruptIndexError, match="klog recover"):
        committed(log)
    with Log(d, CFG, writable=True) as log:  # unclean open: recovery rebuilds the txn index
        assert committed(log) == []


def test_reading_fixture_snapshots() -> None:
    if not sf.available():
        pytest.skip(sf.MISSING_REASON)
    snaps = sorted(sf.KAFKA_FIXTURES.rglob("*.snapshot"))
    assert snaps
    sizes = []
    for p in snaps:
        state = ProducerStateManager.read_snapshot(p)
        sizes.append(len(state.producers))
        assert all(e.producer_id >= 0 for e in state.producers.values())
    assert max(sizes) >= 3
    state = ProducerStateManager.read_snapshot(
        sf.KAFKA_FIXTURES / "DonaldY+kafka-2.7.1/13bb4a8/kafka-logs/myTopic-0/00000000000000000038.snapshot")
    assert sorted(state.producers) == [4001, 4002, 4003] and state.producers[4001].last_sequence == 11


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.sampled_from(["data", "commit", "abort", "plain", "roll",
                                                               "reopen", "kill"])), min_size=1, max_size=40),
       st.randoms(use_true_random=False))
def test_read_committed_model(steps: list[tuple[int, str]], rnd: random.Random) -> None:
    import tempfile

    tmp = Path(tempfile.mkdtemp())
    d = tmp / "t-0"
    d.mkdir()
    log = Log(d, CFG, writable=True)
    open_txn: dict[int, list[int]] = {}
    visible: list[int] = []
    try:
        for pid, op in steps:
            pid += 1
            if op == "data":
                n = rnd.randint(1, 4)
                first, last = log.append(data(pid, n, txn=True))
                open_txn.setdefault(pid, []).extend(range(first, last + 1))
            elif op in ("commit", "abort"):
                if pid not in open_txn:
                    continue
                log.append(marker(pid, abort=op == "abort"))
                offs = open_txn.pop(pid)
                if op == "commit":
                    visible.extend(offs)
            elif op == "plain":
                first, last = log.append(data(0, 2, txn=False))
                visible.extend(range(first, last + 1))
            elif op == "roll":
                log.roll()
            elif op == "reopen":
                log.close()
                log = Log(d, CFG, writable=True, had_clean_shutdown=True)
            elif op == "kill":
                log = Log(d, CFG, writable=True)  # the old writer is abandoned, as by a kill
            lso = min((o[0] for o in open_txn.values()), default=log.log_end_offset)
            assert log.last_stable_offset == lso
            assert committed(log) == sorted(o for o in visible if o < lso)
        with Log(d, CFG) as ro:  # a read-only open with recovery in memory agrees
            assert committed(ro) == sorted(o for o in visible if o < lso)
    finally:
        log.close()
        shutil.rmtree(tmp, ignore_errors=True)
