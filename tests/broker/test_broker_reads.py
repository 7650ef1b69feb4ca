"""Broker → klog: what Apache Kafka's own broker wrote, every klog read path returns exactly as the
broker's own consumer and admin client serve it.

Random workloads (``oracle/BrokerClient.java workload``: plain, idempotent and interleaved
transactional producers committing and aborting across segment rolls with
``sendOffsetsToTransaction``, every codec, headers, null keys and values, LogAppendTime, retention
deleting segments while the workload runs, a compacted topic whose cleaner runs, consumer groups of
the classic and the consumer protocol) go through the session's broker. The truth comes from the
broker alone: a ``KafkaConsumer`` at both isolation levels, and the Admin client (ListOffsets,
topic ids and configs, committed group offsets). klog then reads the broker's log dir three ways,
each a value of the ``state`` fixture: ``live`` (the broker running: no lock taken, no byte
changed), ``clean`` (after SIGTERM) and ``killed`` (restarted, then SIGKILL: recovery in memory).

``KLOG_BROKER_WORKLOADS`` (default 3) sets how many workloads run, ``KLOG_BROKER_RECORDS`` the
records per workload (default: random, 10,000 to 16,000), ``KLOG_BROKER_SEED`` the seed (default:
a new one each run, printed in every failure). ``KLOG_BROKER_CAMPAIGN=N`` runs N more rounds of
fresh workloads through the engine paths (the ``slow`` test ``test_campaign``).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from broker_fixture import Broker, b64, consumer_row, settle
from kafka_corpus import assert_same_rows, available_now_rows, env_int, rows_of

import storage_core
from storage_core.tools.cli import main as klog

pytestmark = [pytest.mark.broker, pytest.mark.interop]

N_WORKLOADS = env_int("KLOG_BROKER_WORKLOADS", 3)
SEED = int(os.environ.get("KLOG_BROKER_SEED") or random.SystemRandom().randrange(1, 1 << 31))
ISOLATION = ("read_uncommitted", "read_committed")
KINDS = ("plain", "txn", "retained", "compacted")
Row = dict[str, Any]


@dataclass
class Truth:
    """What the broker served, after the workloads settled."""

    seed: int
    pattern: str  # a regex matching every workload topic
    topics: list[str]
    rows: dict[str, list[Row]]  # by isolation level
    admin: dict[str, Any]
    probes: list[int]  # timestamps the admin's ListOffsets was asked about
    ctx: str = field(init=False)

    def __post_init__(self) -> None:
        self.ctx = f"KLOG_BROKER_SEED={self.seed}"

    def offsets(self, tp: str) -> dict[str, list[int]]:
        o: dict[str, list[int]] = self.admin["offsets"][tp]
        return o

    def partitions(self) -> list[tuple[str, int]]:
        out = []
        for tp in self.admin["offsets"]:
            topic, _, p = tp.rpartition("-")
            out.append((topic, int(p)))
        return sorted(out)


def _run_workloads(broker: Broker, seed: int, n: int, out: Path) -> Truth:
    """``n`` random workloads through the broker, settled, and the broker's truth about them."""
    out.mkdir(parents=True, exist_ok=True)
    broker.start()
    rnd = random.Random(seed)
    base = f"b{seed}"
    jobs = []
    for i in range(n):
        records = env_int("KLOG_BROKER_RECORDS", 0) or rnd.randint(10_000, 16_000)
        jobs.append((rnd.randrange(1 << 62), f"{base}w{i}", records))
    with ThreadPoolExecutor(2) as pool:  # two client JVMs at once
        done = list(pool.map(lambda j: broker.workload(*j), jobs))
    topics = sorted(t["topic"] for w in done for t in w)
    settle(broker, topics)
    rows = {iso: [consumer_row(d) for d in broker.consume(iso, topics, out / f"{iso}.jsonl")] for iso in ISOLATION}
    stamps = sorted({r["timestamp"] for r in rows["read_uncommitted"]})
    probes = sorted({stamps[0] - 1, stamps[-1], stamps[-1] + 1, *rnd.sample(stamps, min(6, len(stamps)))})
    admin = broker.admin([*topics, *(f"@{p}" for p in probes)])
    return Truth(seed, f"{base}w[0-9]+-.*", topics, rows, admin, probes)


@pytest.fixture(scope="module")
def truth(broker: Broker, tmp_path_factory: pytest.TempPathFactory) -> Truth:
    return _run_workloads(broker, SEED, N_WORKLOADS, tmp_path_factory.mktemp("broker-truth"))


def _topic_dirs(log_dir: Path, topics: list[str]) -> dict[str, str]:
    """sha256 of every file of the topics' partition dirs."""
    out = {}
    for d in sorted(log_dir.iterdir()):
        if d.is_dir() and d.name.rpartition("-")[0] in topics:
            for f in sorted(d.iterdir()):
                if not f.name.endswith(".deleted"):  # the broker's own async deletes (file.delete.delay.ms)
                    out[str(f)] = hashlib.sha256(f.read_bytes()).hexdigest()
    return out


@pytest.fixture(scope="module", params=["live", "clean", "killed"])
def state(request: pytest.FixtureRequest, broker: Broker, truth: Truth) -> Iterator[Path]:
    """The broker's log dir, read while the broker runs, after a clean shutdown, or after a SIGKILL."""
    if request.param == "live":
        broker.start()
        before = _topic_dirs(broker.log_dir, truth.topics)
        yield broker.log_dir
        assert broker.running, "the broker died while klog read its live dir"
        after = _topic_dirs(broker.log_dir, truth.topics)
        assert after == before, f"{truth.ctx}: files changed while klog read the live dir: " + ", ".join(
            sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))[:10])
        assert not (broker.log_dir / "klog-journal").exists()
    elif request.param == "clean":
        broker.stop()
        assert (broker.log_dir / ".kafka_cleanshutdown").exists(), "no clean-shutdown marker after SIGTERM"
        yield broker.log_dir
    else:
        broker.start()
        broker.kill()
        assert not (broker.log_dir / ".kafka_cleanshutdown").exists()
        yield broker.log_dir
        broker.start()  # the session's broker serves the tests that follow


def _want(truth: Truth, iso: str, ranges: dict[tuple[str, int], tuple[int, int]] | None = None,
          topics: set[str] | None = None) -> list[Row]:
    rows = truth.rows[iso]
    if topics is not None:
        rows = [r for r in rows if r["topic"] in topics]
    if ranges is not None:
        rows = [r for r in rows if (r["topic"], r["partition"]) in ranges
                and ranges[r["topic"], r["partition"]][0] <= r["offset"] < ranges[r["topic"], r["partition"]][1]]
    return rows


def _ranges(truth: Truth, rnd: random.Random) -> dict[tuple[str, int], tuple[int, int]]:
    out = {}
    for topic, p in truth.partitions():
        o = truth.offsets(f"{topic}-{p}")
        lo, hi = o["earliest"][0], o["lso"][0]
        a, b = sorted((rnd.randint(lo, hi), rnd.randint(lo, hi)))
        out[topic, p] = (a, b)
    return out


def _json(ranges: dict[tuple[str, int], tuple[int, int]], which: int) -> str:
    out: dict[str, dict[str, int]] = {}
    for (t, p), r in ranges.items():
        out.setdefault(t, {})[str(p)] = r[which]
    return json.dumps(out)


# --- the engine: read_arrow ------------------------------------------------------------------------


@pytest.mark.parametrize("iso", ISOLATION)
def test_read_arrow_equals_consumer(state: Path, truth: Truth, iso: str) -> None:
    ctx = f"{truth.ctx} {state.name} read_arrow {iso}"
    got = storage_core.read_arrow(state, subscribePattern=truth.pattern, isolationLevel=iso,
                                  includeHeaders=True).read_all()
    assert_same_rows(rows_of(got), _want(truth, iso), ctx + " whole")
    rnd = random.Random(truth.seed + len(iso))
    ranges = _ranges(truth, rnd)
    opts: dict[str, object] = {"startingOffsets": _json(ranges, 0), "endingOffsets": _json(ranges, 1),
                               "isolationLevel": iso, "includeHeaders": True, "maxRecordsPerPartition": 977}
    got = storage_core.read_arrow(state, **opts).read_all()
    assert_same_rows(rows_of(got), _want(truth, iso, ranges), f"{ctx} ranges {opts}")


def test_offsets_by_timestamp_equal_list_offsets(state: Path, truth: Truth) -> None:
    """``startingOffsetsByTimestamp`` resolves as the broker's ListOffsets(timestamp) does."""
    parts = truth.partitions()
    for ts in truth.probes:
        spec = {t: {} for t, _ in parts}  # type: dict[str, dict[str, int]]
        for t, p in parts:
            spec[t][str(p)] = ts
        plan = storage_core.plan(state, startingOffsetsByTimestamp=json.dumps(spec),
                                 startingOffsetsByTimestampStrategy="latest")
        got = {(r.topic_partition.topic, r.topic_partition.partition): r.start for r in plan.ranges}
        for t, p in parts:
            o = truth.offsets(f"{t}-{p}")
            found = o[f"@{ts}"][0]
            want = found if found >= 0 else o["latest"][0]
            assert got[t, p] == want, f"{truth.ctx} {state.name} {t}-{p} timestamp {ts}: klog {got[t, p]}, broker {want}"


# --- klog describe and klog groups -----------------------------------------------------------------


def test_describe_equals_admin(state: Path, truth: Truth) -> None:
    table = storage_core.describe(state).to_pylist()
    rows = {(r["topic"], r["partition"]): r for r in table}
    for t, p in truth.partitions():
        o = truth.offsets(f"{t}-{p}")
        r = rows[t, p]
        got = (r["start_offset"], r["end_offset"], r["last_stable_offset"])
        want = (o["earliest"][0], o["latest"][0], o["lso"][0])
        assert got == want, f"{truth.ctx} {state.name} describe {t}-{p} (start, end, LSO): klog {got}, broker {want}"
        info = truth.admin["topics"][t]
        assert r["topic_id"] == info["id"], f"{truth.ctx} {t}: topic id {r['topic_id']}, broker {info['id']}"
        configs = dict(c.split(" (")[0].split("=", 1) for c in r["configs"] if "(kraft topic)" in c)
        for name, value in info["configs"].items():
            if name == "internal.segment.bytes":
                continue  # a test-only config the broker keeps out of its documented set
            assert configs.get(name) == value, f"{truth.ctx} {t} config {name}: klog {configs.get(name)}, broker {value}"
        if o["maxTimestamp"][0] >= 0 and r["max_timestamp"] is not None:
            ms = int(r["max_timestamp"].timestamp() * 1000)
            assert ms == o["maxTimestamp"][1], f"{truth.ctx} {t}-{p} max timestamp {ms}, broker {o['maxTimestamp']}"
        if r["first_timestamp"] is not None and r["max_timestamp"] is not None:
            assert r["first_timestamp"] <= r["max_timestamp"], f"{truth.ctx} {t}-{p}: first timestamp after max"


def test_groups_equal_admin(state: Path, truth: Truth, capsys: pytest.CaptureFixture[str]) -> None:
    prefix = truth.pattern.split("w[")[0]
    capsys.readouterr()
    assert klog(["groups", str(state), "--json"]) == 0
    out = capsys.readouterr()
    got: dict[str, dict[str, list[Any]]] = {}
    for g in json.loads(out.out):
        if g["group"].startswith(prefix):
            got.setdefault(g["group"], {})[f"{g['topic']}-{g['partition']}"] = [g["committedOffset"], g["metadata"]]
    # klog groups lists committed offsets, one row per group and partition: a group that holds none
    # is not in it. The broker's Admin lists one when every transactional commit of the workload's
    # txgroup was aborted (seed 1071118056): its coordinator made the group (an empty "simple" group)
    # for the commits and keeps it after their abort, also after a restart
    want = {g: v for g, v in truth.admin["groups"].items() if g.startswith(prefix) and v}
    assert got == want, f"{truth.ctx} {state.name} klog groups"
    assert "could not be decoded" not in out.err, f"{truth.ctx} {state.name} klog groups: {out.err.strip()}"


# --- klog export and klog dump ---------------------------------------------------------------------


@pytest.mark.parametrize("iso", ISOLATION)
def test_export_equals_consumer(state: Path, truth: Truth, iso: str, tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    for topic in truth.topics:
        if not topic.endswith(("-txn", "-compacted")):
            continue  # the transactional and the compacted topics: the others are read whole above
        out = tmp_path / f"{topic}.parquet"
        args = ["export", str(state), "--topic", topic, "-o", str(out), "--quiet", "--headers"]
        assert klog(args + (["--read-committed"] if iso == "read_committed" else [])) == 0
        assert_same_rows(rows_of(pq.read_table(out)), _want(truth, iso, topics={topic}),
                         f"{truth.ctx} {state.name} export {topic} {iso}")


def test_dump_equals_consumer(state: Path, truth: Truth, tmp_path: Path) -> None:
    """``klog dump --jsonl`` of every segment: its data records are the read_uncommitted records."""
    want: dict[tuple[str, int], list[tuple[int, bytes | None]]] = {}
    for r in truth.rows["read_uncommitted"]:
        want.setdefault((r["topic"], r["partition"]), []).append((r["offset"], r["value"]))
    for t, p in truth.partitions():
        if not t.endswith(("-txn", "-compacted")):
            continue
        got = []
        for seg in sorted((state / f"{t}-{p}").glob("*.log")):
            out = tmp_path / "dump.jsonl"
            with open(out, "w") as f, redirect_stdout(f):
                assert klog(["dump", "--jsonl", str(seg)]) == 0
            for line in out.read_text().splitlines():
                o = json.loads(line)
                if not o["is_control"] and o["offset"] is not None:
                    got.append((o["offset"], b64(o["value_b64"])))
        start = truth.offsets(f"{t}-{p}")["earliest"][0]
        got = [g for g in got if g[0] >= start]
        assert got == want.get((t, p), []), f"{truth.ctx} {state.name} dump {t}-{p}"


# --- Spark -----------------------------------------------------------------------------------------


@pytest.mark.spark
def test_spark_batch_equals_consumer(spark, state: Path, truth: Truth) -> None:  # type: ignore[no-untyped-def]
    for iso in ISOLATION:
        ctx = f"{truth.ctx} {state.name} spark {iso}"
        df = (spark.read.format("klog").option("subscribePattern", truth.pattern).option("includeHeaders", "true")
              .option("kafka.isolation.level", iso).load(str(state)))
        assert_same_rows(rows_of(df.collect()), _want(truth, iso), ctx + " whole")
        rnd = random.Random(truth.seed * 3 + len(iso))
        ranges = _ranges(truth, rnd)
        df = (spark.read.format("klog").option("includeHeaders", "true").option("kafka.isolation.level", iso)
              .option("startingOffsets", _json(ranges, 0)).option("endingOffsets", _json(ranges, 1))
              .option("maxRecordsPerPartition", str(rnd.randint(200, 3000))).load(str(state)))
        assert_same_rows(rows_of(df.collect()), _want(truth, iso, ranges), ctx + " ranges, small pieces")


@pytest.mark.spark
def test_spark_stream_equals_consumer(spark, state: Path, truth: Truth, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    for iso in ISOLATION:
        name = f"broker_{state.name}_{iso}_{truth.seed}".replace("-", "_")
        stream = (spark.readStream.format("klog").option("subscribePattern", truth.pattern)
                  .option("startingOffsets", "earliest").option("kafka.isolation.level", iso)
                  .option("includeHeaders", "true").option("maxOffsetsPerTrigger", "60000").load(str(state)))
        got = available_now_rows(spark, stream, name, tmp_path / name)
        assert_same_rows(got, _want(truth, iso), f"{truth.ctx} {state.name} stream AvailableNow {iso}")


# --- out of Kafka and back: snapshot, export, Iceberg and Delta sync, then klog restore ---------------


#: How a topic of the round trip leaves the source: each of the first workload's topics takes one.
TAKEOUTS = ("snapshot", "export", "iceberg", "delta")
#: Topic configs not given to the target's topics: retention would delete restored segments as the
#: target's broker starts (they are as old as the source's), and ``internal.segment.bytes`` is a
#: config of tests the broker keeps to itself.
NOT_RESTORED_CONFIGS = ("retention.bytes", "retention.ms", "internal.segment.bytes")


def _takeout(kind: str, source: Path, topic: str, out: Path) -> Path:
    """``topic`` taken out of the log dir ``source`` by ``kind``: what klog restore is then given."""
    out.mkdir(parents=True, exist_ok=True)
    if kind == "snapshot":
        storage_core.snapshot(source, out / "snapshot")
        return out / "snapshot"
    if kind == "export":
        assert klog(["export", str(source), "--topic", topic, "-o", str(out / "export.parquet"), "--quiet",
                     "--headers", "--read-committed"]) == 0
        return out / "export.parquet"
    if kind == "delta":
        storage_core.sync(str(source), str(out / "delta"), format="delta", topics=topic, includeHeaders="true")
        return out / "delta"
    storage_core.sync(str(source), "ns.t", format="iceberg", warehouse=str(out / "wh"), topics=topic,
                      includeHeaders="true")
    return out / "wh" / "ns" / "t"


def test_restore_round_trip_into_another_cluster(broker: Broker, truth: Truth, tmp_path: Path) -> None:
    """The first workload's topics leave the broker by four ways (a ``klog snapshot``, a ``klog
    export``, a Delta and an Iceberg table ``klog sync`` made), one topic each, and its consumer
    groups with the snapshot. A new broker (another cluster id; the topics created by Kafka's Admin
    with the source's partition counts and configs, but retention) is stopped, klog restores each
    takeout and the groups into its log dir, and the broker restarts: it logs no error, its consumer
    at both isolation levels returns the source's ``read_committed`` records at their offsets, Admin
    lists each group's committed offsets as the source's (one past the restored records, at the
    partition's end: the transaction markers there are not restored), and a consumer of each group
    resumes at that offset."""
    import group_oracle
    from broker_fixture import BROKER_CONFIG, problems, split_tp

    rnd = random.Random(truth.seed * 11)
    prefix = truth.pattern.split("w[")[0] + "w0-"
    topics = sorted(t for t in truth.topics if t.startswith(prefix))
    kinds = dict(zip(topics, rnd.sample(TAKEOUTS, len(TAKEOUTS)), strict=True))
    ctx = f"{truth.ctx} takeouts {kinds}"
    takeouts = {t: _takeout(k, broker.log_dir, t, tmp_path / k) for t, k in kinds.items()}
    snapshot = takeouts[next(t for t, k in kinds.items() if k == "snapshot")]
    groups = {g: v for g, v in truth.admin["groups"].items() if g.startswith(prefix[:-1]) and v}
    assert any(g.endswith("-classic") for g in groups) and any(g.endswith("-consumer") for g in groups), ctx

    target = Broker(tmp_path / "target")
    assert target.cluster_id != broker.cluster_id
    try:
        target.start()
        parts = {t: sum(1 for tt, _ in truth.partitions() if tt == t) for t in topics}
        for t in topics:
            configs = {k: v for k, v in truth.admin["topics"][t]["configs"].items() if k not in NOT_RESTORED_CONFIGS}
            if "compacted" in t:  # the restored records as the source's cleaner left them, not cleaned again
                configs["min.compaction.lag.ms"] = str(7 * 24 * 3600 * 1000)
            target.create_topic(t, parts[t], configs)
        group_oracle.admin_offsets(target.bootstrap, [f"{prefix}probe"], ctx)  # makes __consumer_offsets
        n = int(BROKER_CONFIG["offsets.topic.num.partitions"])
        deadline = time.monotonic() + 30
        while len(list(target.log_dir.glob("__consumer_offsets-*"))) < n and time.monotonic() < deadline:
            time.sleep(0.2)
        target.stop()
        # the snapshot's topic last, with the groups in the same commit (the other topics' partitions are
        # then in the target); a group offset past a partition's last restored record (markers there)
        # maps to its end, also where the records came from a takeout that does not know the source's end
        for t, source in sorted(takeouts.items(), key=lambda kv: kinds[kv[0]] == "snapshot"):
            summary = storage_core.restore(source, target.log_dir, topics=[t],
                                           compression=rnd.choice(["none", "zstd", "lz4"]),
                                           **({"groups": "source", "only_groups": list(groups), "unmapped": "end"}
                                              if source == snapshot else {}))
        assert summary.groups is not None and {r.group for r in summary.groups.restored} == set(groups), ctx
        mark = target.log_mark()
        target.start()
        want = [r for r in truth.rows["read_committed"] if r["topic"] in topics]
        for iso in ISOLATION:
            got = [consumer_row(d) for d in target.consume(iso, topics, tmp_path / f"target-{iso}.jsonl")]
            assert_same_rows(got, want, f"{ctx}: the target's consumer at {iso}")
        listed_offsets = target.admin(topics)["offsets"]
        ends = {split_tp(tp): v["latest"][0] for tp, v in listed_offsets.items()}
        starts = {split_tp(tp): v["earliest"][0] for tp, v in listed_offsets.items()}

        def restored_at(tp: str, committed: int) -> int:
            """Where a group's committed offset lands: the first restored record at or after it (the
            log start, where the source's first records were aborted or deleted), or the end."""
            return max(min(committed, ends[split_tp(tp)]), starts[split_tp(tp)])

        for (t, p), end in ends.items():
            restored = [r["offset"] for r in want if (r["topic"], r["partition"]) == (t, p)]
            assert not restored or end == max(restored) + 1, f"{ctx} {t}-{p}: log end {end}"
        listed = group_oracle.admin_offsets(target.bootstrap, list(groups), ctx)
        for g, offsets in groups.items():
            expect = {tp: restored_at(tp, o[0]) for tp, o in offsets.items()}
            assert listed[g]["offsets"] == expect, f"{ctx} {g}: Admin lists {listed[g]}, expected {expect}"
        for g in sorted(groups):
            if not g.endswith(("-classic", "-consumer")):
                continue
            topic = rnd.choice(sorted({split_tp(tp)[0] for tp in groups[g]}))
            got = group_oracle.resume(target.bootstrap, g, g.rpartition("-")[2], topic, ctx)
            for tp, o in groups[g].items():
                if split_tp(tp)[0] != topic:
                    continue
                at = restored_at(tp, o[0])
                assert got["positions"].get(tp) == at, f"{ctx} {g} {tp}: resumed at {got}, expected {at}"
                # the first record it gets: the source's next committed one (an offset of an aborted
                # record or a marker, not restored, is a gap the consumer steps over)
                nxt = min((r["offset"] for r in want if f"{r['topic']}-{r['partition']}" == tp and r["offset"] >= at),
                          default=None)
                if nxt is not None:
                    assert got["first"].get(tp) == nxt, f"{ctx} {g} {tp}: first record {got['first']}, expected {nxt}"
        found = problems(target.log_since(mark), prefix)
        assert not found, f"{ctx}: the target broker complained after the restore:\n" + "\n".join(found[:20])
    finally:
        target.stop()


def test_workload_shape(truth: Truth) -> None:
    """The workloads did what they are for: aborted transactions, segments deleted by retention,
    records removed by the cleaner, LogAppendTime, nulls and headers."""
    rc, ru = truth.rows["read_committed"], truth.rows["read_uncommitted"]
    assert len(rc) < len(ru), f"{truth.ctx}: no aborted records"
    assert any(truth.offsets(tp)["earliest"][0] > 0 for tp in truth.admin["offsets"] if "-retained-" in tp)
    compacted = [r for r in ru if r["topic"].endswith("-compacted")]
    ends = sum(truth.offsets(tp)["latest"][0] for tp in truth.admin["offsets"] if "-compacted-" in tp)
    assert len(compacted) < ends, f"{truth.ctx}: the cleaner removed nothing"
    assert any(r["key"] is None for r in ru) and any(r["value"] is None for r in ru)
    assert any(r["headers"] for r in ru)
    assert len(ru) >= 5_000 * N_WORKLOADS


def test_transactions_v2_bump_epochs(broker: Broker, truth: Truth) -> None:
    """Kafka 4's transactions v2 (on by default for a 4.x cluster): each transaction of a producer
    has its own, bumped epoch, so one producer id writes with many epochs."""
    txn = [t for t in truth.topics if t.endswith("-txn")]
    table = storage_core.read_arrow(broker.log_dir, topics=",".join(txn), includeMetadata=True).read_all()
    epochs: dict[int, set[int]] = {}
    for pid, epoch in zip(table.column("producerId").to_pylist(), table.column("producerEpoch").to_pylist(),
                          strict=True):
        epochs.setdefault(pid, set()).add(epoch)
    assert max(len(e) for e in epochs.values()) > 3, f"{truth.ctx}: epochs per producer id {epochs}"


@pytest.mark.slow
def test_campaign(broker: Broker, tmp_path: Path) -> None:
    """``KLOG_BROKER_CAMPAIGN`` rounds of four fresh workloads each, read live by ``read_arrow``
    (whole and in random ranges) and ``klog export``, at both isolation levels."""
    rounds = env_int("KLOG_BROKER_CAMPAIGN", 0)
    if not rounds:
        pytest.skip("set KLOG_BROKER_CAMPAIGN=N to run N rounds of broker workloads")
    for i in range(rounds):
        t = _run_workloads(broker, SEED + 1000 * (i + 1), 4, tmp_path / f"r{i}")
        for iso in ISOLATION:
            test_read_arrow_equals_consumer(broker.log_dir, t, iso)
            (tmp_path / f"x{i}-{iso}").mkdir()
            test_export_equals_consumer(broker.log_dir, t, iso, tmp_path / f"x{i}-{iso}")


# --- segments out of their place (issue 53) ---------------------------------------------------------

N_MISPLACED = env_int("KLOG_BROKER_MISPLACED", 8)


def test_misplaced_segments_fail_or_are_named(request: pytest.FixtureRequest, state: Path, truth: Truth,
                                              tmp_path: Path) -> None:
    """Segments of the broker's dir put out of their place (tests/generators/damage_gen.py ``misplace``: a
    segment's end overlapping the next one, a segment deleted with its indexes, another partition's
    segment in its place with or without its indexes), one at a time in a copy of a random
    partition of a topic that is not compacted: read_arrow fails naming offsets, and under
    failOnDataLoss=false returns exactly the consumer's rows outside the offsets its warnings name."""
    import shutil

    from damage_gen import Written, misplace, named_offsets, warnings_of_klog

    from storage_core.errors import DataLossError

    if request.node.callspec.params.get("state") != "clean":
        pytest.skip("segments are put out of their place in a copy of the cleanly stopped dir only")
    copy = tmp_path / "logs"
    shutil.copytree(state, copy, ignore=shutil.ignore_patterns(".lock", "*.deleted"))
    candidates = sorted(d for d in copy.iterdir() if d.is_dir() and d.name.rpartition("-")[0] in truth.topics
                        and "-compacted" not in d.name and len(list(d.glob("*.log"))) >= 2)
    assert candidates, f"{truth.ctx}: no partition of two segments"
    rnd = random.Random(truth.seed * 7)
    failures = []
    for trial in range(N_MISPLACED):
        part = rnd.choice(candidates)
        backup = tmp_path / "backup"
        shutil.copytree(part, backup)
        topic, _, p = part.name.rpartition("-")
        want = [r for r in truth.rows["read_uncommitted"] if r["topic"] == topic and r["partition"] == int(p)]
        what = misplace(Written(copy, part, 0, 0, True), rnd)
        ctx = f"{truth.ctx} trial {trial}: {part.name}: {what}"
        opts: dict[str, object] = {"assign": json.dumps({topic: [int(p)]}), "includeHeaders": True}
        try:
            if what is not None:
                try:
                    storage_core.read_arrow(copy, **opts).read_all()
                    failures.append(f"{ctx}: failOnDataLoss=true read it")
                except DataLossError as exc:
                    if not named_offsets(str(exc)):
                        failures.append(f"{ctx}: the error names no offsets: {exc}")
                with warnings_of_klog() as cap:
                    got = rows_of(storage_core.read_arrow(copy, failOnDataLoss="false", **opts).read_all())
                named = set().union(*(named_offsets(m) for m in cap.messages)) if cap.messages else set()
                try:
                    assert_same_rows(got, [r for r in want if r["offset"] not in named], ctx)
                except AssertionError as exc:
                    failures.append(str(exc).splitlines()[0][:500])
        finally:
            shutil.rmtree(part)
            shutil.move(str(backup), part)
    assert not failures, "\n".join(failures)
