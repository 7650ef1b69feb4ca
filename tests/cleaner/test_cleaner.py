"""The log cleaner (storage_core.cleaner): Kafka's compaction rules, against a model.

The model test appends random keyed records, tombstones, keyless records and transactions
(committed, aborted, left open) and compacts at random points with random map sizes (several
passes when the map is small). After each compaction the log is checked against what was
appended: every surviving record is the one appended at its offset, read_committed returns
exactly the committed records that survive, every key reads its latest committed value (or
nothing after a tombstone whose delete horizon passed), and the cleaned range holds one record
per key. The unit tests pin single rules of ``LogCleaner``/``MemoryRecords.filterTo``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from storage_core.cleaner import (
    LogCleaner,
    SkimpyOffsetMap,
    cleanable_range,
    needs_cleaning,
    read_cleaner_offset,
)
from storage_core.errors import KlogError
from storage_core.files import CLEANER_OFFSET_CHECKPOINT
from storage_core.log.checkpoint import OffsetCheckpointFile
from storage_core.log.config import LogConfig
from storage_core.log.log import Log
from storage_core.log.segment import scan_segment
from storage_core.log.topic_partition import TopicPartition
from storage_core.record.compression import CompressionType
from storage_core.record.control import ControlRecordType, EndTransactionMarker
from storage_core.record.records import DefaultRecordBatch, Header, Record, build_batch, build_end_txn_marker

T0 = 1_700_000_000_000
RETENTION = 1_000  # delete.retention.ms of the model


def cfg(**props: str) -> LogConfig:
    base = {"segment.bytes": "700", "cleanup.policy": "compact", "delete.retention.ms": str(RETENTION),
            "index.interval.bytes": "200"}
    base.update(props)
    return LogConfig.from_properties(base)


def recs(pairs: list[tuple[bytes | None, bytes | None]], ts: int) -> list[Record]:
    return [Record(i, ts + i, k, v, (Header("h", b"x"),) if i % 2 else ()) for i, (k, v) in enumerate(pairs)]


def marker(pid: int, abort: bool, ts: int) -> bytes:
    kind = ControlRecordType.ABORT if abort else ControlRecordType.COMMIT
    return build_end_txn_marker(0, ts, 0, pid, 0, EndTransactionMarker(kind, 1))


def all_batches(log: Log) -> list[DefaultRecordBatch]:
    return [b for b in log.batches() if isinstance(b, DefaultRecordBatch)]


def surviving(log: Log) -> dict[int, Record]:
    return {r.offset: r for b in all_batches(log) if not b.is_control for r in b.records()}


# --- the model -----------------------------------------------------------------------------------


@dataclass
class Appended:
    record: Record
    pid: int  # -1: not transactional
    batch_id: int


@dataclass
class Model:
    records: dict[int, Appended] = field(default_factory=dict)  # offset -> what was appended
    aborted: set[int] = field(default_factory=set)  # offsets of aborted transactional data
    open_txn: dict[int, list[int]] = field(default_factory=dict)  # pid -> its offsets so far
    cleans: list[tuple[int, int]] = field(default_factory=list)  # (now, end offset) of each clean
    passes: int = 0  # passes the last clean ran (0: nothing was dirty)

    def committed(self, below: int) -> list[Appended]:
        pending = {o for offs in self.open_txn.values() for o in offs}
        return [a for o, a in sorted(self.records.items()) if o < below and o not in self.aborted and o not in pending]


def run_model(tmp_path: Path, seed: int, steps: int) -> int:
    rng = random.Random(seed)
    d = tmp_path / f"m{seed}-0"
    d.mkdir()
    config = cfg(**({"compression.type": "lz4"} if seed % 3 == 0 else {}))
    model = Model()
    now = T0
    batch_id = 0
    cleans = 0
    log = Log(d, config, writable=True)
    try:
        for _step in range(steps):
            now += rng.randrange(1, 200)
            action = rng.random()
            if action < 0.1 and len(model.open_txn) < 2:  # begin a transaction
                pid = rng.choice([p for p in (7, 8, 9) if p not in model.open_txn])
                model.open_txn[pid] = []
                continue
            if action < 0.2 and model.open_txn:  # end one
                pid = rng.choice(sorted(model.open_txn))
                abort = rng.random() < 0.5
                first, _ = log.append(marker(pid, abort, now), now_ms=now)
                offs = model.open_txn.pop(pid)
                if abort:
                    model.aborted.update(offs)
                continue
            if action < 0.88:
                n = rng.randrange(1, 4)
                pairs: list[tuple[bytes | None, bytes | None]] = []
                for _ in range(n):
                    key = None if rng.random() < 0.04 else b"key-%d" % rng.randrange(12)
                    value = None if key is not None and rng.random() < 0.15 else b"v%d-%d" % (seed, rng.randrange(10**6))
                    pairs.append((key, value))
                pid = -1
                if model.open_txn and rng.random() < 0.5:
                    pid = rng.choice(sorted(model.open_txn))
                codec = CompressionType.LZ4 if rng.random() < 0.3 else CompressionType.NONE
                raw = build_batch(recs(pairs, now), compression=codec, producer_id=pid if pid >= 0 else 3,
                                  producer_epoch=0, base_sequence=0, is_transactional=pid >= 0)
                first, last = log.append(raw, now_ms=now)
                batch_id += 1
                for i, rec in enumerate(recs(pairs, now)):
                    o = first + i
                    model.records[o] = Appended(Record(o, rec.timestamp, rec.key, rec.value, rec.headers), pid,
                                                batch_id)
                    if pid >= 0:
                        model.open_txn[pid].append(o)
                continue
            # compact
            memory = rng.choice([24 * 6, 24 * 12, 24 * 40, 1 << 20])
            if rng.random() < 0.3:
                log.roll()
            result = LogCleaner(memory, now_ms=now).clean_log(log)
            assert result is not None
            model.cleans.append((now, result.end_offset))
            model.passes = result.stats.passes
            cleans += 1
            check(log, model, now)
            if rng.random() < 0.3:  # reopen: the cleaned files load as Kafka's loader would
                log.close()
                log = Log(d, config, writable=True, had_clean_shutdown=rng.random() < 0.5)
                check(log, model, now)
    finally:
        log.close()
    return cleans


def check(log: Log, model: Model, now: int) -> None:
    end = model.cleans[-1][1]
    lso = log.last_stable_offset
    got = surviving(log)
    # every surviving record is the one appended at its offset
    for o, r in got.items():
        a = model.records[o].record
        assert (r.key, r.value, r.timestamp, r.headers) == (a.key, a.value, a.timestamp, a.headers), o
    # the cleaned range [0, end) holds the latest non-aborted record per key, nothing else
    latest: dict[bytes, int] = {}
    for o, a in sorted(model.records.items()):
        if o < end and o not in model.aborted and a.record.key is not None:
            latest[a.record.key] = o
    for o in got:
        if o < end:
            key = model.records[o].record.key
            assert key is not None, f"keyless record at {o} survived a clean"
            assert o not in model.aborted, f"aborted record at {o} survived a clean"
            assert latest[key] == o, f"offset {o} of {key!r} survived, but {latest[key]} is later"
    for key, o in latest.items():
        rec = model.records[o].record
        if rec.value is not None:
            assert o in got, f"latest value of {key!r} at {o} was removed"
        else:
            # a tombstone goes only once a delete horizon set by an earlier clean has passed ...
            may_go = any(c_now + RETENTION <= now for c_now, _ in model.cleans[:-1])
            # ... and it must go when this clean recopied it after a horizon set before had passed
            must_go = model.passes > 0 and any(c_now + RETENTION <= now and c_end > o
                                               for c_now, c_end in model.cleans[:-1])
            if o not in got:
                assert may_go, f"tombstone of {key!r} at {o} removed before its delete horizon"
            else:
                assert not must_go, f"tombstone of {key!r} at {o} kept past its delete horizon"
    # past the cleaned range nothing committed is lost
    for o in model.records:
        if o >= end and o not in model.aborted:
            assert o in got, f"record at {o} past the cleaned range was removed"
    # read_committed equals the oracle: the committed records that survive, in order
    rc = [r.offset for b in log.batches(read_committed=True) for r in b.records()]
    expected = [a.record.offset for a in model.committed(lso) if a.record.offset in got]
    assert rc == expected
    # each key's latest committed value, as a consumer reading everything would see it
    view: dict[bytes, bytes | None] = {}
    for b in log.batches(read_committed=True):
        for r in b.records():
            if r.key is not None:
                view[r.key] = r.value
    want: dict[bytes, bytes | None] = {}
    for a in model.committed(lso):
        if a.record.key is not None:
            want[a.record.key] = a.record.value
    for key, value in want.items():
        if value is None:
            assert view.get(key) is None
        else:
            assert view.get(key) == value, key
    # the segments are valid Kafka segments
    for seg in log.segments:
        scan = scan_segment(seg.log_path, base_offset=seg.base_offset)
        assert scan.error is None and scan.partial_tail is None, seg.log_path
    ckpt = read_cleaner_offset(log)
    assert ckpt == end or (ckpt is None and end == 0)  # written by the first clean that cleans something


@pytest.mark.parametrize("seed", range(6))
def test_model(tmp_path: Path, seed: int) -> None:
    assert run_model(tmp_path, seed, 260) >= 5


# --- single rules ----------------------------------------------------------------------------------


def new_log(tmp_path: Path, name: str = "t-0", **props: str) -> Log:
    d = tmp_path / name
    d.mkdir()
    return Log(d, cfg(**props), writable=True)


def put(log: Log, pairs: list[tuple[bytes | None, bytes | None]], ts: int = T0, **kw: object) -> tuple[int, int]:
    return log.append(build_batch(recs(pairs, ts), **kw), now_ms=ts)  # type: ignore[arg-type]


def test_offset_map_slots_and_digest() -> None:
    m = SkimpyOffsetMap(24 * 100)
    assert (m.slots, m.max_entries) == (100, 90)
    m.put(b"a", 5)
    m.put(b"a", 7)
    assert (m.get(b"a"), m.get(b"b"), m.size) == (7, -1, 1)
    with pytest.raises(KlogError, match="holds no key"):
        SkimpyOffsetMap(24)


def test_unmodified_batches_copied_byte_for_byte_and_offsets_kept(tmp_path: Path) -> None:
    with new_log(tmp_path) as log:
        put(log, [(b"a", b"1"), (b"b", b"1")])
        put(log, [(b"c", b"1")])
        put(log, [(b"a", b"2"), (None, b"keyless")])
        log.roll()
        before = [bytes(b.buffer) for b in all_batches(log)]
        r = LogCleaner(now_ms=T0 + 10).clean_log(log)
        assert r is not None and r.stats.keyless_dropped == 1
        after = all_batches(log)
        assert bytes(after[1].buffer) == before[1]  # nothing removed: same bytes
        first = after[0]  # a@0 removed: rebuilt with the same base and last offset
        assert (first.base_offset, first.last_offset, [x.offset for x in first.records()]) == (0, 1, [1])
        last = after[2]
        assert (last.base_offset, last.last_offset, [x.offset for x in last.records()]) == (3, 4, [3])
        assert r.end_offset == 5


def test_tombstone_gets_a_delete_horizon_then_goes(tmp_path: Path) -> None:
    with new_log(tmp_path) as log:
        put(log, [(b"a", b"1")])
        put(log, [(b"a", None), (b"b", b"1")])
        put(log, [(b"c", b"1")])
        log.roll()
        LogCleaner(now_ms=T0 + 100).clean_log(log)
        tomb = [b for b in all_batches(log) if any(r.value is None for r in b.records())]
        assert len(tomb) == 1 and tomb[0].has_delete_horizon
        assert tomb[0].delete_horizon_ms == T0 + 100 + RETENTION == tomb[0].base_timestamp
        assert [r.timestamp for r in tomb[0].records()] == [T0, T0 + 1]  # record timestamps unchanged
        put(log, [(b"d", b"1")], ts=T0 + 200)
        log.roll()
        r = LogCleaner(now_ms=T0 + 100 + RETENTION - 1).clean_log(log)  # horizon not yet reached
        assert r is not None and r.stats.tombstones_kept == 1
        r = LogCleaner(now_ms=T0 + 100 + RETENTION).clean_log(log)
        assert r is not None and r.stats.tombstones_removed == 1
        assert sorted(surviving(log)) == [2, 3, 4]


def test_empty_batch_kept_for_producer_and_end_of_round(tmp_path: Path) -> None:
    with new_log(tmp_path) as log:
        put(log, [(b"a", b"1")], producer_id=5, producer_epoch=2, base_sequence=0)  # pid 5's last batch
        put(log, [(b"b", b"1")])
        put(log, [(b"b", b"2")])
        put(log, [(b"a", b"2"), (b"b", b"3")])
        log.roll()
        put(log, [(b"z", b"1")])
        LogCleaner(now_ms=T0).clean_log(log)
        batches = all_batches(log)
        kept = [(b.base_offset, b.last_offset, b.records_count, b.producer_id) for b in batches]
        # offset 0 (pid 5's last data batch) survives as an empty header; 1 and 2 go
        assert kept[0] == (0, 0, 0, 5) and batches[0].size_in_bytes == 61
        assert batches[0].base_sequence == 0 and batches[0].producer_epoch == 2
        assert [k[:3] for k in kept[1:]] == [(3, 4, 2), (5, 5, 1)]


def test_aborted_data_and_markers(tmp_path: Path) -> None:
    with new_log(tmp_path) as log:
        put(log, [(b"a", b"aborted")], producer_id=1, producer_epoch=0, is_transactional=True)  # 0
        put(log, [(b"b", b"committed")], producer_id=2, producer_epoch=0, is_transactional=True)  # 1
        log.append(marker(1, True, T0), now_ms=T0)  # 2 abort
        log.append(marker(2, False, T0), now_ms=T0)  # 3 commit
        put(log, [(b"c", b"1")], producer_id=1, producer_epoch=0)  # 4: pid 1's last data batch
        put(log, [(b"d", b"1")])  # 5: the end of the round
        log.roll()
        assert len(log.segments[0].txn_index.read()) == 1
        r = LogCleaner(now_ms=T0).clean_log(log)
        assert r is not None and r.stats.aborted_batches_dropped == 1
        assert sorted(surviving(log)) == [1, 4, 5]
        # the abort marker stays (its transaction's batches were seen) with its txnindex entry
        markers = [b for b in all_batches(log) if b.is_control]
        assert [m.base_offset for m in markers] == [2, 3]
        assert [t.first_offset for t in log.segments[0].txn_index.read()] == [0]
        # second clean: the abort's data is gone, so it gets a delete horizon and loses its entry
        LogCleaner(now_ms=T0 + 1).clean_log(log)
        abort = [b for b in all_batches(log) if b.is_control and b.base_offset == 2][0]
        assert abort.delete_horizon_ms == T0 + 1 + RETENTION
        assert log.segments[0].txn_index.read() == []
        assert [r.offset for b in log.batches(read_committed=True) for r in b.records()] == [1, 4, 5]
        r = LogCleaner(now_ms=T0 + 1 + RETENTION).clean_log(log)
        assert r is not None and r.stats.markers_dropped == 1
        assert [b.base_offset for b in all_batches(log) if b.is_control] == [3]  # the commit's batch 1 remains


def test_aborted_last_batch_of_a_producer_stays_as_a_header(tmp_path: Path) -> None:
    with new_log(tmp_path) as log:
        put(log, [(b"a", b"aborted")], producer_id=1, producer_epoch=0, is_transactional=True)  # 0
        log.append(marker(1, True, T0), now_ms=T0)  # 1
        put(log, [(b"d", b"1")])  # 2
        log.roll()
        r = LogCleaner(now_ms=T0).clean_log(log)
        assert r is not None and r.stats.batches_emptied == 1
        first = all_batches(log)[0]
        assert (first.base_offset, first.records_count, first.is_transactional) == (0, 0, True)
        assert sorted(surviving(log)) == [2]


def test_cleaning_stops_at_lso_and_min_compaction_lag(tmp_path: Path) -> None:
    with new_log(tmp_path) as log:
        put(log, [(b"a", b"1")])
        log.roll()
        put(log, [(b"a", b"2")], producer_id=1, producer_epoch=0, is_transactional=True)  # open txn at 1
        log.roll()
        put(log, [(b"a", b"3")])
        log.roll()
        rng = cleanable_range(log, T0)
        assert (rng.first_dirty_offset, rng.first_uncleanable_offset) == (0, 1)
    with new_log(tmp_path, "u-0", **{"min.compaction.lag.ms": "500"}) as log:
        put(log, [(b"a", b"1")], ts=T0)
        log.roll()
        put(log, [(b"a", b"2")], ts=T0 + 1000)
        log.roll()
        put(log, [(b"a", b"3")], ts=T0 + 1000)
        assert cleanable_range(log, T0 + 1200).first_uncleanable_offset == 1
        LogCleaner(now_ms=T0 + 1200).clean_log(log)
        assert sorted(surviving(log)) == [0, 1, 2]
        LogCleaner(now_ms=T0 + 1600).clean_log(log)  # the second segment is old enough now
        assert sorted(surviving(log)) == [1, 2]


def test_checkpoint_and_dirty_ratio(tmp_path: Path) -> None:
    with new_log(tmp_path, **{"min.cleanable.dirty.ratio": "0.5"}) as log:
        for i in range(20):
            put(log, [(b"k%d" % (i % 3), b"v%d" % i)])
        log.roll()
        assert needs_cleaning(log, T0)
        r = LogCleaner(now_ms=T0).clean_log(log, force=False)
        assert r is not None
        assert OffsetCheckpointFile(tmp_path / CLEANER_OFFSET_CHECKPOINT).read() == {TopicPartition("t", 0): 20}
        assert log.log_start_offset == 0
        put(log, [(b"k0", b"new")])
        log.roll()
        rng = cleanable_range(log, T0, read_cleaner_offset(log))
        assert rng.first_dirty_offset == 20 and rng.dirty_ratio < 0.5
        assert LogCleaner(now_ms=T0).clean_log(log, force=False) is None  # below the ratio
        assert LogCleaner(now_ms=T0).clean_log(log) is not None  # explicit: whatever the ratio
        assert sorted(surviving(log)) == [17, 19, 20]  # k2, k1, and k0 superseded at 20


def test_small_map_takes_several_passes_with_the_same_result(tmp_path: Path) -> None:
    results = []
    for name, memory in (("a-0", 1 << 20), ("b-0", 24 * 3)):
        with new_log(tmp_path, name) as log:
            rng = random.Random(5)
            for i in range(120):
                put(log, [(b"k%d" % rng.randrange(30), b"v%d" % i)])
            log.roll()
            r = LogCleaner(memory, now_ms=T0).clean_log(log)
            assert r is not None
            results.append((sorted(surviving(log)), r.stats.passes))
    assert results[0][0] == results[1][0]
    assert results[0][1] == 1 and results[1][1] > 5


def test_read_only_log_is_refused(tmp_path: Path) -> None:
    with new_log(tmp_path) as log:
        put(log, [(b"a", b"1")])
    with Log(tmp_path / "t-0", cfg()) as ro, pytest.raises(KlogError, match="read-only"):
        LogCleaner().clean_log(ro)


def test_swap_next_to_cleaned_files_is_rolled_back_on_open(tmp_path: Path) -> None:
    """KAFKA-6264's rule: a .swap at or after a .cleaned file was not committed."""
    with new_log(tmp_path) as log:
        for i in range(30):
            put(log, [(b"k%d" % (i % 4), b"v%d" % i)])
        log.roll()
        before = surviving(log)
    d = tmp_path / "t-0"
    seg0 = sorted(d.glob("*.log"))[0]
    (d / (seg0.name + ".swap")).write_bytes(build_batch([Record(0, T0, b"k0", b"new")]))
    (d / (seg0.name.replace(".log", ".index") + ".cleaned")).write_bytes(b"")
    with Log(d, cfg(), writable=True) as log:
        assert surviving(log) == before
        assert not [p for p in d.iterdir() if p.name.endswith((".swap", ".cleaned"))]


def test_automatic_round_cleans_dirty_compacted_logs_dirtiest_first(tmp_path: Path) -> None:
    logs = [new_log(tmp_path, "a-0"), new_log(tmp_path, "b-0"), new_log(tmp_path, "c-0", **{"cleanup.policy": "delete"})]
    try:
        for log in logs:
            for i in range(12):
                put(log, [(b"k%d" % (i % 2), b"v%d" % i)])
            log.roll()
        LogCleaner(now_ms=T0).clean_log(logs[1])  # b is clean now
        results = LogCleaner(now_ms=T0).clean_logs(logs)
        assert [r.topic_partition.topic for r in results if r.topic_partition] == ["a"]
        assert sorted(surviving(logs[0])) == [10, 11] and len(surviving(logs[2])) == 12
    finally:
        for log in logs:
            log.close()


def test_groups_stay_under_segment_bytes(tmp_path: Path) -> None:
    with new_log(tmp_path, **{"segment.bytes": "1000"}) as log:
        for i in range(80):
            put(log, [(b"k%d" % i, b"v" * 20)])  # all keys distinct: nothing is removed
            if i % 4 == 3:
                log.roll()
        log.roll()
        before = [s.size_in_bytes for s in log.segments[:-1]]
        assert len(before) == 20 and max(before) < 400  # rolled by hand every 4 records
        r = LogCleaner(now_ms=T0).clean_log(log)
        assert r is not None and r.stats.records_removed == 0
        after = [s.size_in_bytes for s in log.segments[:-1]]
        assert len(after) == 10 and max(after) <= 1000  # pairs of neighbours merged: a third would pass segment.bytes
        assert sum(after) == sum(before)
        assert sorted(surviving(log)) == list(range(80))


def test_max_compaction_lag_forces_a_clean_below_the_ratio(tmp_path: Path) -> None:
    with new_log(tmp_path, **{"min.cleanable.dirty.ratio": "0.9", "max.compaction.lag.ms": "1000"}) as log:
        for i in range(20):
            put(log, [(b"k%d" % (i % 3), b"v%d" % i)])
        log.roll()
        LogCleaner(now_ms=T0).clean_log(log)
        put(log, [(b"k0", b"late")], ts=T0 + 100)
        log.roll()
        assert cleanable_range(log, T0 + 500, read_cleaner_offset(log)).dirty_ratio < 0.9
        assert not needs_cleaning(log, T0 + 500)
        assert needs_cleaning(log, T0 + 100 + 1001)  # the dirty batch is older than the max lag
        assert LogCleaner(now_ms=T0 + 1101).clean_logs([log])
