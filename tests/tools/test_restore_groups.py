"""Consumer groups restored into ``__consumer_offsets`` (:mod:`storage_core.tools.restore_groups`), held
against Kafka itself:

* the partition of a group is Kafka's ``Utils.abs(groupId.hashCode()) % partitions`` computed by Java
  (``oracle/GroupRestore.java``) for random unicode group ids;
* the records klog writes are byte for byte those Kafka's ``GroupCoordinatorRecordHelpers`` builds and
  ``GroupCoordinatorRecordSerde`` serializes, and Kafka's serde reads klog's bytes back to the same record;
  klog's own reader decodes them to what was written; the message codec writes every coordinator
  record of the shared fixtures back to its bytes;
* offsets translated by the rule (the first restored record at or after the committed offset);
* a restore into a dir of klog's own, read back by :func:`~storage_core.read.groups.group_offsets`; the
  refusals, before anything is written; internal topics other than this one stay refused;
* one round trip with the broker: groups of both protocols (and a simple one) restored into the stopped
  broker's dir; restarted, it logs no error, Admin lists the restored offsets and each group's consumer
  resumes at exactly the restored offset.

``KLOG_GROUPS_SEED`` fixes the seed (default: a new one per run, printed in every failure).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import group_oracle
import pytest

from storage_core.errors import GroupRestoreError, InvalidTopicError, LogDirLockedError
from storage_core.log.config import LogConfig
from storage_core.log.staged import StagingWriter
from storage_core.log.topic_partition import TopicPartition
from storage_core.read.groups import CLASSIC, CONSUMER, SIMPLE, group_offsets, group_protocols, offsets_partition_for
from storage_core.record.compression import CompressionType
from storage_core.record.messages.codec import uuid_string
from storage_core.record.messages.decoders import Decoder, decode_coordinator_record, encode_coordinator_record
from storage_core.tools.restore_groups import (
    OffsetTranslation,
    _group_records,
    _offset_commit,
    load_groups,
    restore_groups,
)

SEED = int(os.environ.get("KLOG_GROUPS_SEED") or random.SystemRandom().randrange(1, 1 << 31))
CTX = f"KLOG_GROUPS_SEED={SEED}"
#: A string whose Java hashCode is Integer.MIN_VALUE (Utils.abs maps it to 0).
MIN_VALUE_HASH = "polygenelubricants"


def _java(*args: str, stdin: str = "", timeout: float = 180) -> str:
    return group_oracle.java(*args, stdin=stdin, timeout=timeout, context=CTX)


def _hex16(s: str | None) -> str:
    return "-" if s is None else s.encode("utf-16-be", "surrogatepass").hex()


def _random_text(rnd: random.Random, n: int) -> str:
    """Letters of every width: ASCII, Latin-1, CJK, and astral characters (two UTF-16 code units)."""
    pools = [(0x21, 0x7E), (0xA1, 0xFF), (0x4E00, 0x9FFF), (0x1F300, 0x1F64F), (0x10000, 0x1FFFF)]
    out = []
    for _ in range(n):
        lo, hi = rnd.choice(pools)
        out.append(chr(rnd.randint(lo, hi)))
    return "".join(out)


# --- the partition ------------------------------------------------------------------------------


def test_partition_is_javas() -> None:
    rnd = random.Random(SEED)
    ids = [MIN_VALUE_HASH, "a", "console-consumer-1", *(_random_text(rnd, rnd.randint(1, 40)) for _ in range(400))]
    counts = (1, 3, 50, rnd.randint(2, 1000))
    out = _java("hash", *map(str, counts), stdin="".join(_hex16(g) + "\n" for g in ids))
    java = [tuple(map(int, line.split())) for line in out.splitlines() if line]
    mine = [tuple(offsets_partition_for(g, n) for n in counts) for g in ids]
    assert mine == java, f"{CTX} partitions of {counts}: " + ", ".join(
        f"{g!r}: klog {a}, Kafka {b}" for g, a, b in zip(ids, mine, java, strict=True) if a != b)
    assert offsets_partition_for(MIN_VALUE_HASH, 7) == 0


# --- the records ---------------------------------------------------------------------------------


def test_records_are_kafkas() -> None:
    """klog's records = Kafka's, byte for byte; Kafka's serde reads klog's back to the same bytes;
    klog's reader decodes them to what was written."""
    rnd = random.Random(SEED + 1)
    lines: list[str] = []
    mine: list[tuple[bytes, bytes]] = []
    for i in range(60):
        group = _random_text(rnd, rnd.randint(1, 30))
        now = rnd.randint(0, 1 << 42)
        kind = i % 3
        if kind == 0:
            topic = f"t{rnd.randint(0, 99)}.x_{i}"
            tp = TopicPartition(topic, rnd.randint(0, 500))
            offset = rnd.randint(0, 1 << 40)
            meta = rnd.choice([None, "", _random_text(rnd, rnd.randint(1, 20))])
            tid = rnd.choice([None, uuid_string(rnd.randbytes(16))])
            mine.append(_offset_commit(group, tp, offset, meta, now, {topic: tid} if tid else {}))
            lines.append(f"offset {_hex16(group)} {_hex16(topic)} {tp.partition} {offset} {_hex16(meta or '')} {now} "
                         f"{tid or '-'}")
        elif kind == 1:
            ptype = rnd.choice(["consumer", "connect", _random_text(rnd, 5)])
            mine.extend(_group_records(group, CLASSIC, ptype, now))
            lines.append(f"classic {_hex16(group)} {_hex16(ptype)} {now}")
        else:
            mine.extend(_group_records(group, CONSUMER, "", now))
            lines.append(f"consumer {_hex16(group)} 1")
    kafka = [tuple(bytes.fromhex(x) for x in line.split()) for line in _java("records", stdin="\n".join(lines)).split("\n")
             if line]
    assert len(kafka) == len(mine), CTX
    for j, ((k, v), (kk, kv)) in enumerate(zip(mine, kafka, strict=True)):
        assert (k.hex(), v.hex()) == (kk.hex(), kv.hex()), f"{CTX} record {j}: klog's bytes differ from Kafka's"
    back = [line.split(" ", 2) for line in _java("decode", stdin="".join(f"{k.hex()} {v.hex()}\n" for k, v in mine))
            .split("\n") if line]
    assert [(bytes.fromhex(a), bytes.fromhex(b)) for a, b, _ in back] == mine, CTX
    for k, v in mine:
        rec = decode_coordinator_record(Decoder.OFFSETS, k, v, strict=True)
        assert rec.key is not None and rec.value is not None
        again = encode_coordinator_record(Decoder.OFFSETS, int(rec.key["type"]), rec.key["data"],
                                          int(rec.value["version"]), rec.value["data"])
        assert again == (k, v), CTX


def test_codec_writes_back_every_fixture_record() -> None:
    """Every coordinator record of the shared fixtures (Kafka 2.1 to 4.1) re-encodes to its bytes."""
    import shared_fixtures

    import storage_core

    if not shared_fixtures.available():
        pytest.skip(shared_fixtures.MISSING_REASON)
    n = 0
    for d in sorted(shared_fixtures.KAFKA_FIXTURES.glob("**/__consumer_offsets-*")):
        try:
            table = storage_core.read_arrow(d).read_all()
        except Exception:  # noqa: BLE001 - a damaged fixture dir of another test's: not this one's concern
            continue
        for k, v in zip(table.column("key").to_pylist(), table.column("value").to_pylist(), strict=True):
            rec = decode_coordinator_record(Decoder.OFFSETS, k, v)
            if rec.error or rec.key is None or (rec.value is not None and rec.key["type"] == "2"):
                continue  # type 2: a consumer group's subscription bytes are shown decoded
            again = encode_coordinator_record(Decoder.OFFSETS, int(rec.key["type"]), rec.key["data"],
                                              None if rec.value is None else int(rec.value["version"]),
                                              None if rec.value is None else rec.value["data"])
            assert again == (k, v), f"{d}: {rec}"
            n += 1
    assert n > 100


# --- translation ---------------------------------------------------------------------------------


def test_translation_rule() -> None:
    tp = TopicPartition("t", 0)
    # source offsets with gaps (compaction, aborted records, markers), restored after 1000 existing records
    src, dst = [5, 6, 9, 20, 21], [1000, 1001, 1002, 1003, 1004]
    t = OffsetTranslation({tp: (src, dst)}, source_ends={tp: 25})
    assert [t(tp, c) for c in (0, 5, 6, 7, 9, 10, 20, 21)] == [1000, 1000, 1001, 1002, 1002, 1003, 1003, 1004]
    assert t(tp, 22) == 1005 and t(tp, 25) == 1005  # everything consumed: the target's end
    assert t(tp, 26) is None  # past the source's end
    assert t(TopicPartition("t", 1), 3) is None  # a partition not restored
    assert OffsetTranslation({tp: (src, dst)})(tp, 23) is None  # no source end given: the last + 1 ends it
    with pytest.raises(ValueError, match="ascending"):
        OffsetTranslation({tp: ([3, 2], [0, 1])})
    rnd = random.Random(SEED + 2)
    for _ in range(200):  # the rule against its definition
        s = sorted(rnd.sample(range(500), rnd.randint(1, 40)))
        base = rnd.randint(0, 10_000)
        d = [base + i for i in range(len(s))]
        end = s[-1] + 1 + rnd.randint(0, 5)
        t = OffsetTranslation({tp: (s, d)}, source_ends={tp: end})
        for c in range(0, end + 3):
            after = [j for j, o in enumerate(s) if o >= c]
            want = d[after[0]] if after else (d[-1] + 1 if c <= end else None)
            assert t(tp, c) == want, f"{CTX} {s} -> {d}, committed {c}"


def test_translation_at_scale() -> None:
    """A restore's millions of offsets (numpy arrays, searchsorted): the rule against its statement
    (the first source offset at or above the committed offset, found by a scan of them all), for
    target offsets dense (held as their first one) and with gaps."""
    import numpy as np

    rnd = np.random.default_rng(SEED + 4)
    tp = TopicPartition("t", 0)
    n = 2_000_000
    src = np.cumsum(rnd.integers(1, 4, n, dtype=np.int64)) + int(rnd.integers(0, 10**6))
    dense = np.arange(7_000, 7_000 + n, dtype=np.int64)
    gappy = np.cumsum(rnd.integers(1, 3, n, dtype=np.int64))
    end = int(src[-1]) + 1 + int(rnd.integers(0, 50))
    committed = np.concatenate([rnd.integers(int(src[0]) - 10, end + 10, 150), src[:3], src[-3:], [end, end + 1]])
    firsts = [int(np.argmax(at)) if at.any() else n for at in (src >= c for c in committed.tolist())]
    for dst in (dense, gappy):
        t = OffsetTranslation({tp: (src, dst)}, source_ends={tp: end})
        for c, i in zip(committed.tolist(), firsts, strict=True):
            want = int(dst[i]) if i < n else (int(dst[-1]) + 1 if c <= end else None)
            assert t(tp, c) == want, f"{CTX} committed {c}"
        assert t.records(tp) == n and t.target_ends[tp] == int(dst[-1]) + 1


# --- a restore into a dir of klog's own ----------------------------------------------------------


def _target(root: Path, offsets_partitions: int = 3, records: dict[str, int] | None = None) -> Path:
    """A log dir with ``__consumer_offsets`` and a topic ``t`` of 2 partitions, ``records`` records each."""
    import pyarrow as pa

    from storage_core.log.staged import commit_job

    root.mkdir(parents=True, exist_ok=True)
    for p in range(offsets_partitions):
        (root / f"__consumer_offsets-{p}").mkdir()
    staged = []
    for p in range(2):
        (root / f"t-{p}").mkdir()
        n = (records or {}).get(f"t-{p}", 10)
        w = StagingWriter(root / f"t-{p}", ".klog-staging-seed-00000-0", LogConfig(), CompressionType.NONE, 1 << 20)
        w.append(pa.table({"value": pa.array([b"v%d" % i for i in range(n)], pa.binary())}), int(time.time() * 1000))
        staged.append(w.finish())
    commit_job("seed", staged)
    return root


def test_restore_into_a_dir_reads_back(tmp_path: Path) -> None:
    d = _target(tmp_path / "target")
    t0, t1 = TopicPartition("t", 0), TopicPartition("t", 1)
    groups = {"classic-é": {t0: 3, t1: 10}, "k848-𝄞": {t0: 0}, "plain": {t1: 7}}
    report = restore_groups(groups, d, protocols={"classic-é": CLASSIC, "k848-𝄞": CONSUMER}, now_ms=1_700_000_000_000)
    assert {(r.group, r.topic_partition, r.target_offset) for r in report.restored} == \
        {(g, tp, o) for g, parts in groups.items() for tp, o in parts.items()}
    got = group_offsets([d])
    assert {g: {tp: c.offset for tp, c in parts.items()} for g, parts in got.items()} == groups
    assert all(c.commit_timestamp == 1_700_000_000_000 and c.leader_epoch == -1
               for parts in got.values() for c in parts.values())
    for g, parts in got.items():
        assert {c.source_partition for c in parts.values()} == {offsets_partition_for(g, 3)}
    assert group_protocols([d]) == {"classic-é": (CLASSIC, "consumer"), "k848-𝄞": (CONSUMER, "")}
    # groups the target has already: refused (replayed over them, a consumer group's records over a
    # classic group fail the coordinator's load of the partition)
    with pytest.raises(GroupRestoreError, match="already has group 'classic-é'"):
        restore_groups({"classic-é": {t0: 1}}, d, protocols={"classic-é": CONSUMER})
    # the restored dir is a source: groups and protocols carried over to another target
    d2 = _target(tmp_path / "again")
    again = restore_groups(d, d2)
    assert again.protocols == {"classic-é": CLASSIC, "k848-𝄞": CONSUMER, "plain": SIMPLE}
    assert {g: {tp: c.offset for tp, c in parts.items()} for g, parts in group_offsets([d2]).items()} == groups
    # a `klog groups --json` file
    rows = [{"group": g, "topic": tp.topic, "partition": tp.partition, "committedOffset": o, "metadata": "m"}
            for g, parts in groups.items() for tp, o in parts.items()]
    (tmp_path / "groups.json").write_text(json.dumps(rows))
    found, known = load_groups(tmp_path / "groups.json")
    assert {g: {tp: go.offset for tp, go in parts.items()} for g, parts in found.items()} == groups and known == {}


def test_translated_and_unmapped(tmp_path: Path) -> None:
    d = _target(tmp_path / "target", records={"t-0": 30, "t-1": 5})
    t0, t1 = TopicPartition("t", 0), TopicPartition("t", 1)
    # the source's records 100..119 of t-0 were restored at 10..29
    tr = OffsetTranslation({t0: (range(100, 120), range(10, 30))}, source_ends={t0: 120})
    with pytest.raises(GroupRestoreError, match=r"group 'g2' t-1: no restored record maps committed offset 4") as e:
        restore_groups({"g1": {t0: 105}, "g2": {t1: 4}}, d, translate=tr)
    assert "\n" not in str(e.value)
    assert group_offsets([d]) == {}, "a refused restore wrote something"
    rep = restore_groups({"g1": {t0: 105}, "g3": {t0: 120}, "g2": {t1: 4}}, d, translate=tr, unmapped="skip")
    assert [(s.group, s.source_offset) for s in rep.skipped] == [("g2", 4)]
    assert {g: {tp: c.offset for tp, c in p.items()} for g, p in group_offsets([d]).items()} == \
        {"g1": {t0: 15}, "g3": {t0: 30}}
    rep = restore_groups({"g4": {t1: 4}, "g5": {t1: 1}}, d, translate=tr, unmapped="end")
    assert [(r.group, r.target_offset, r.how) for r in rep.restored] == [("g4", 5, "end"), ("g5", 5, "end")]
    # kept offsets (no translation): beyond the target's end is unmapped
    with pytest.raises(GroupRestoreError, match="committed offset 6"):
        restore_groups({"g6": {t1: 6}}, d)
    rep = restore_groups({"g6": {t1: 6}}, d, unmapped="start")
    assert [(r.target_offset, r.how) for r in rep.restored] == [(0, "start")]


def test_refusals_before_anything_is_written(tmp_path: Path) -> None:
    d = _target(tmp_path / "target")
    before = sorted(str(p.relative_to(d)) for p in d.rglob("*"))
    t0 = TopicPartition("t", 0)
    with pytest.raises(GroupRestoreError, match=r"no partition t-5 .*create the topic"):
        restore_groups({"g": {TopicPartition("t", 5): 0}}, d)
    with pytest.raises(GroupRestoreError, match=r"no partition other-0"):
        restore_groups({"g": {TopicPartition("other", 0): 0}}, d)
    with pytest.raises(GroupRestoreError, match="unmapped='later'"):
        restore_groups({"g": {t0: 0}}, d, unmapped="later")  # type: ignore[arg-type]
    with pytest.raises(GroupRestoreError, match="protocol 'streams'"):
        restore_groups({"g": {t0: 0}}, d, protocols={"g": "streams"})
    assert sorted(str(p.relative_to(d)) for p in d.rglob("*")) == before
    # no __consumer_offsets: says how to make one
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "t-0").mkdir()
    with pytest.raises(GroupRestoreError, match="has no __consumer_offsets: .*kafka-consumer-groups"):
        restore_groups({"g": {t0: 0}}, bare)
    # a dir a broker holds (a classic POSIX lock of another process, as FileChannel.tryLock takes)
    holder = subprocess.Popen([sys.executable, "-c", (
        "import fcntl, sys, time\n"
        f"f = open({str(d / '.lock')!r}, 'a+')\n"
        "fcntl.lockf(f, fcntl.LOCK_EX)\nprint('locked', flush=True)\ntime.sleep(60)\n")],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        with pytest.raises(LogDirLockedError, match="nothing was written"):
            restore_groups({"g": {t0: 0}}, d)
    finally:
        holder.kill()
        holder.wait()
    assert group_offsets([d]) == {}


def test_other_internal_topics_stay_refused(tmp_path: Path) -> None:
    """Only group records into __consumer_offsets: every other internal topic, and __consumer_offsets
    for any other writer, is refused before anything is staged."""
    for topic in ("__transaction_state", "__share_group_state", "__cluster_metadata", "__remote_log_metadata",
                  "__consumer_offsets"):
        (tmp_path / f"{topic}-0").mkdir()
        for flag in (False, True):
            if flag and topic == "__consumer_offsets":
                continue
            with pytest.raises(InvalidTopicError, match=f"Cannot append to internal topic '{topic}'"):
                StagingWriter(tmp_path / f"{topic}-0", ".klog-staging-x-00000-0", LogConfig(), CompressionType.NONE,
                              1024, group_records=flag)
        assert list((tmp_path / f"{topic}-0").iterdir()) == []


# --- the broker ----------------------------------------------------------------------------------


def _admin_offsets(bootstrap: str, groups: list[str]) -> dict[str, Any]:
    out = _java("offsets", bootstrap, *groups)
    return {d["group"]: d for d in (json.loads(line) for line in out.splitlines() if line.startswith("{"))}


def _restore_translated(log_dir: Path, topic: str, held: dict[int, int], rnd: random.Random,
                        prefix: str) -> dict[str, Any]:
    """A klog export of ``topic`` made up here (sparse source offsets, each value saying where it came
    from) restored into the stopped broker's ``topic``, which holds ``held`` records per partition, at
    new offsets, with a group translated onto them in the same commit; returns what the group's
    consumer must find: its position, and the value of the record it resumes at."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from storage_core.tools.restore import restore

    rows: dict[int, list[tuple[int, bytes]]] = {}
    for p in held:
        at = rnd.randint(0, 10_000)
        for _ in range(rnd.randint(20, 60)):
            rows.setdefault(p, []).append((at, f"{topic}/{p}/{at}/".encode() + rnd.randbytes(6)))
            at += rnd.choice((1, 1, 2, 7))
    now = int(time.time() * 1000)
    export = log_dir.parent / f"{prefix}-export.parquet"
    flat = [(p, o, v) for p, rs in sorted(rows.items()) for o, v in rs]
    pq.write_table(pa.table({"topic": [topic] * len(flat), "partition": pa.array([r[0] for r in flat], pa.int32()),
                             "offset": [r[1] for r in flat], "value": [r[2] for r in flat],
                             "timestamp": pa.array([now] * len(flat), pa.timestamp("ms", tz="UTC"))}), export)
    group = f"{prefix}-moved"
    committed: dict[TopicPartition, int] = {}
    for p, rs in rows.items():
        offsets = [o for o, _ in rs]
        committed[TopicPartition(topic, p)] = rnd.choice(
            [offsets[0], rnd.choice(offsets), rnd.choice(offsets) - 1, offsets[-1], offsets[-1] + 1])
    summary = restore(export, log_dir, offsets="new", groups={group: committed}, protocols={group: CONSUMER})
    want: dict[str, Any] = {"group": group, "ends": {p.partition: p.end for p in summary.partitions}, "offsets": {}}
    for tp, c in committed.items():
        offsets = [o for o, _ in rows[tp.partition]]
        after = [i for i, o in enumerate(offsets) if o >= c]  # the next record the group had to consume
        target = held[tp.partition] + (after[0] if after else len(offsets))
        want["offsets"][str(tp)] = (c, target, rows[tp.partition][after[0]][1].hex() if after else None)
    assert summary.groups is not None and {(str(r.topic_partition), r.target_offset) for r in summary.groups.restored} \
        == {(k, t) for k, (_, t, _) in want["offsets"].items()}, CTX
    assert {s.partition: (s.first, s.records) for s in summary.partitions} == \
        {p: (held[p], len(rs)) for p, rs in rows.items()}, CTX
    return want


def _check_translated(broker: Any, topic: str, want: dict[str, Any], listed: dict[str, Any]) -> None:  # noqa: ANN401
    """After the restart: Admin lists the translated group's offsets (``listed``), and its consumer
    resumes there, at the record holding the value the group was to read next in the source."""
    g = want["group"]
    expect = {k: t for k, (_, t, _) in want["offsets"].items()}
    assert listed[g]["offsets"] == expect, f"{CTX} Admin lists {g}'s offsets as {listed[g]['offsets']}, restored {expect}"
    out = _java("resume", broker.bootstrap, g, "consumer", topic)
    got = json.loads([line for line in out.splitlines() if line.startswith("{")][-1])
    for key, (c, target, value) in want["offsets"].items():
        assert got["positions"].get(key) == target, f"{CTX} {g} {key} (committed {c}): resumed at {got}"
        if value is not None:
            assert (got["first"].get(key), got["firstValue"].get(key)) == (target, value), \
                f"{CTX} {g} {key} (committed {c}): first record {got['first'].get(key)} " \
                f"{got['firstValue'].get(key)}, expected {target} {value}"
        else:
            assert target == want["ends"][int(key.rpartition("-")[2])], f"{CTX} {g} {key}"


@pytest.mark.broker
@pytest.mark.interop
def test_broker_resumes_restored_groups(broker: Any) -> None:  # noqa: ANN401 - the session's Broker
    from broker_fixture import problems

    rnd = random.Random(SEED + 3)
    prefix = f"rg{SEED}"
    topic = f"{prefix}-in"
    broker.start()
    broker.create_topic(topic, 3)
    broker.produce(topic, 300, rnd.randrange(1 << 40), "idempotent", "none")
    _admin_offsets(broker.bootstrap, [f"{prefix}-probe"])  # FindCoordinator: the broker creates __consumer_offsets
    deadline = time.monotonic() + 30
    while len(list(broker.log_dir.glob("__consumer_offsets-*"))) < 3 and time.monotonic() < deadline:
        time.sleep(0.2)
    ends = {int(tp.rpartition("-")[2]): v["latest"][0] for tp, v in broker.admin([topic])["offsets"].items()}
    broker.stop()
    # records restored after those the topic holds, at new offsets, a group translated onto them
    translated = _restore_translated(broker.log_dir, topic, ends, rnd, prefix)
    names = {CLASSIC: f"{prefix}-classic-é", CONSUMER: f"{prefix}-consumer-𝄞", SIMPLE: f"{prefix}-simple"}
    groups = {g: {TopicPartition(topic, p): rnd.choice([0, end, rnd.randint(0, end)]) for p, end in ends.items()}
              for g in names.values()}
    report = restore_groups(groups, broker.log_dir, protocols={g: proto for proto, g in names.items()})
    assert len(report.restored) == 9 and report.protocols == {g: p for p, g in names.items()}, CTX
    mark = broker.log_mark()
    broker.start()
    listed = _admin_offsets(broker.bootstrap, [*names.values(), translated["group"]])
    for proto, g in names.items():
        want = {str(tp): o for tp, o in groups[g].items()}
        assert listed[g]["offsets"] == want, f"{CTX} Admin lists {g}'s offsets as {listed[g]['offsets']}, restored {want}"
        assert listed[g]["type"] == ("Consumer" if proto == CONSUMER else "Classic"), f"{CTX} {g}: {listed[g]}"
    # each group's consumer resumes at the restored offset (the simple group's by the consumer protocol,
    # which replaces the simple group by a consumer group, the offsets kept)
    for proto, g in names.items():
        out = _java("resume", broker.bootstrap, g, "classic" if proto == CLASSIC else "consumer", topic)
        got = json.loads([line for line in out.splitlines() if line.startswith("{")][-1])
        for tp, o in groups[g].items():
            key = f"{topic}-{tp.partition}"
            assert got["positions"].get(key) == o, f"{CTX} {g} ({proto}) {key}: resumed at {got}, restored {o}"
            if o < ends[tp.partition]:
                assert got["first"].get(key) == o, f"{CTX} {g} ({proto}) {key}: first record {got['first']}, restored {o}"
    _check_translated(broker, topic, translated, listed)
    # what the coordinator wrote of them since, read back by klog (the live dir): the classic group
    # rejoined as classic, the simple one taken over by the consumer protocol
    assert {g: v for g, v in group_protocols([broker.log_dir]).items() if g in groups} == {
        names[CLASSIC]: (CLASSIC, "consumer"), names[CONSUMER]: (CONSUMER, ""), names[SIMPLE]: (CONSUMER, "")}, CTX
    found = problems(broker.log_since(mark), prefix)
    assert not found, f"{CTX}: the broker complained after the restore:\n" + "\n".join(found[:20])
