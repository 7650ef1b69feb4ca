"""Tiered storage (KIP-405) on Kafka's own broker: the whole history of a tiered topic, read from
the log dir and the remote storage with no broker in the loop.

A broker of its own (tiered storage cannot be switched on for the session's broker without
changing what the other tests see) copies closed segments into Kafka's ``LocalTieredStorage``
(the kafka-storage test jar; a 4.3.1 broker when the pin is 4.4.0, whose test jar Maven Central lacks) and local retention (``local.retention.bytes=1``) deletes the local
copies, so the log dir keeps only the tail. The truth comes from the broker alone: a
``KafkaConsumer`` from the earliest offset at both isolation levels (the broker serves the old
offsets from its remote storage), and the Admin client's ListOffsets (earliest, and by timestamp).

``KLOG_TIERED_SEED`` sets the seed (default: a new one each run, printed in every failure).
"""

from __future__ import annotations

import io
import json
import logging
import os
import random
import re
import shutil
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import broker_fixture
import pytest
from broker_fixture import Broker, consumer_row, tiered_storage_config
from dump_text import as_newest
from kafka_corpus import assert_same_rows, available_now_rows, rows_of

import storage_core
from storage_core.errors import InvalidOptionError, RemoteSegmentMissingError, SnapshotError
from storage_core.files import LOG_SUFFIX, base_offset_of
from storage_core.log.tiered import RemoteStorage, load_remote_metadata, remote_history
from storage_core.log.topic_partition import TopicPartition
from storage_core.record.file_records import FileRecords
from storage_core.tools.cli import main as klog

pytestmark = [pytest.mark.broker, pytest.mark.interop]

#: The release of the tiered broker: the pinned one, or the newest whose LocalTieredStorage Maven
#: Central serves (4.3.1 for 4.4.0, whose kafka-storage test jar it does not: broker_fixture.tiered_release).
RELEASE = broker_fixture.tiered_release()
SEED = int(os.environ.get("KLOG_TIERED_SEED") or random.SystemRandom().randrange(1, 1 << 31))
#: three random workloads, one topic each, on one broker: every read path below reads all three
TOPICS = ("tiered-0", "tiered-1", "tiered-2")
TOPIC = TOPICS[0]  # the workload with transactions aborted in its remote segments, whatever the seed
ISOLATION = ("read_uncommitted", "read_committed")
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
Row = dict[str, Any]
TP = tuple[str, int]


@dataclass
class Tiered:
    """The broker's log dir and remote storage once the copies settled, and what the broker served."""

    broker: Broker
    log_dir: Path
    remote: Path
    partitions: dict[str, int]  # topic -> partitions
    rows: dict[str, list[Row]]  # by isolation level, as the consumer saw them (every topic)
    admin: dict[str, Any]
    probes: list[int]
    local_start: dict[TP, int]  # base offset of each partition's first local segment
    ctx: str

    @property
    def tps(self) -> list[TP]:
        return [(t, p) for t, n in self.partitions.items() for p in range(n)]

    @property
    def topics(self) -> str:
        return ",".join(TOPICS)


def _local_start(log_dir: Path, tp: TP) -> int:
    logs = [base_offset_of(p) for p in (log_dir / f"{tp[0]}-{tp[1]}").glob("*" + LOG_SUFFIX)]
    return min(logs) if logs else 0


def _remote_logs(remote: Path, tp: TP) -> list[Path]:
    return sorted((remote / "kafka-tiered-storage").glob(f"{tp[0]}-{tp[1]}-*/*{LOG_SUFFIX}"))


def _plans(rnd: random.Random) -> dict[str, list[tuple[str, str, int]]]:
    """Each topic's producers, phase by phase (a restart between the second and third phase).

    The first topic has transactions with aborts in two codecs (the remote .txnindex); the others
    draw plain, idempotent or transactional producers and any codec. The restart makes the
    partitions' leader epoch change, so each history spans two epochs; only idempotent or plain
    producers follow it (a transactional id used again right after a restart can meet its
    coordinator still loading: InvalidTxnStateException, seen in CI25). The last, small producer
    rolls the segment the one before it wrote, so that one is tiered too."""
    plans = {TOPIC: [("txn", "none", 9_000), ("txn", "zstd", 9_000), ("idempotent", "lz4", 9_000),
                     ("idempotent", "none", 300)]}
    for t in TOPICS[1:]:
        plans[t] = [(rnd.choice(("plain", "idempotent", "txn")), rnd.choice(CODECS), 4_000) for _ in range(2)] + [
            (rnd.choice(("plain", "idempotent")), rnd.choice(CODECS), 4_000), ("idempotent", "none", 300)]
    return {t: [(kind, codec, rnd.randint(n * 2 // 3, n)) for kind, codec, n in plan] for t, plan in plans.items()}


def _produce(broker: Broker, topic: str, records: int, seed: int, kind: str, codec: str) -> None:
    """One producer run; a transactional one the coordinator failed (InvalidTxnStateException, met
    in CI34 on a machine loaded well past its two cores) runs again once under the same
    transactional id, whose initTransactions aborts what the failed run left open. The records are
    the broker's to say (the truth is what it serves), so a run's partial first attempt is data like
    any other."""
    try:
        broker.produce(topic, records, seed, kind, codec)
    except broker_fixture.BrokerError as exc:
        if kind != "txn" or "InvalidTxnStateException" not in str(exc):
            raise
        broker.produce(topic, records, seed, kind, codec)


@pytest.fixture(scope="module")
def tiered(tmp_path_factory: pytest.TempPathFactory) -> Any:
    reason = (broker_fixture.skip_reason(lambda: broker_fixture.classpath(version=RELEASE))
              or broker_fixture.tiered_storage_unavailable(RELEASE))
    if reason is not None:
        if broker_fixture.required():
            pytest.fail(f"{broker_fixture.REQUIRE_ENV}=1 but {reason}")
        pytest.skip(reason)
    root = tmp_path_factory.mktemp("tiered")
    remote = root / "remote"
    remote.mkdir()
    broker = Broker(root / "broker", RELEASE, **tiered_storage_config(remote))
    broker.start()
    rnd = random.Random(SEED)
    plans = _plans(rnd)
    partitions = {t: 2 if t == TOPIC else rnd.randint(1, 3) for t in TOPICS}
    ctx = f"seed {SEED} (KLOG_TIERED_SEED={SEED} reruns it): partitions {partitions}, producers {plans}"
    try:
        for t in TOPICS:  # segments roll at 1 MiB and after a second: each producer writes its own segments
            broker.create_topic(t, partitions[t], {"remote.storage.enable": "true", "segment.bytes": "1048576",
                                                   "segment.ms": "1000", "local.retention.bytes": "1",
                                                   "retention.ms": "-1", "file.delete.delay.ms": "0"})
        with ThreadPoolExecutor(len(TOPICS)) as pool:  # the topics' producers of a phase at once
            for phase in range(4):
                if phase == 2:
                    broker.restart()
                runs = [(t, *plans[t][phase][::-1], SEED + 10 * phase + i) for i, t in enumerate(TOPICS)]
                list(pool.map(lambda r: _produce(broker, r[0], r[1], r[4], r[3], r[2]), runs))
                time.sleep(1.1)
        tps = [(t, p) for t in TOPICS for p in range(partitions[t])]
        deadline = time.monotonic() + 90
        while True:  # until every partition has closed segments copied and deleted locally
            starts = {tp: _local_start(broker.log_dir, tp) for tp in tps}
            copied = {tp: len(_remote_logs(remote, tp)) for tp in tps}
            local = {tp: len(list((broker.log_dir / f"{tp[0]}-{tp[1]}").glob("*" + LOG_SUFFIX))) for tp in tps}
            if all(starts[tp] > 0 and copied[tp] >= 2 and local[tp] == 1 for tp in tps):
                break  # every closed segment copied and deleted locally: only the active one is left
            if time.monotonic() > deadline:
                pytest.fail(f"{ctx}: the broker did not tier the topics in 90 s (local starts {starts}, local "
                            f"segments {local}, remote segments {copied}): {broker.log_tail()}")
            time.sleep(0.5)
        time.sleep(1)  # the copy task's metadata update lands after the files
        rows = {}
        for iso in ISOLATION:
            got = broker.consume(iso, list(TOPICS), root / f"consumed-{iso}.jsonl")
            rows[iso] = [consumer_row(d) for d in got]
        ts = sorted({r["timestamp"] for r in rows["read_uncommitted"] if r["topic"] == TOPIC})
        remote_ts = sorted({r["timestamp"] for r in rows["read_uncommitted"]
                            if r["topic"] == TOPIC and 0 < r["offset"] < min(starts[(TOPIC, p)] for p in range(2))})
        probes = sorted(rnd.sample(remote_ts, 3) + rnd.sample(ts, 2)) + [ts[0] - 1, ts[-1] + 1]
        admin = json.loads(broker.client("admin", *TOPICS, *(f"@{t}" for t in probes)).strip().splitlines()[-1])
        yield Tiered(broker, broker.log_dir, remote, partitions, rows, admin, probes, starts, ctx)
    finally:
        broker.stop()


def _want(t: Tiered, iso: str, lo: dict[TP, int] | None = None, hi: dict[TP, int] | None = None) -> list[Row]:
    return [r for r in t.rows[iso] if (lo is None or r["offset"] >= lo[(r["topic"], r["partition"])])
            and (hi is None or r["offset"] < hi[(r["topic"], r["partition"])])]


@pytest.mark.parametrize("iso", ISOLATION)
def test_read_arrow_gives_the_whole_history(tiered: Tiered, iso: str) -> None:
    """With the remote storage named, every offset the broker serves from the earliest (most of them
    from its remote storage) comes back, the same rows in every column; read_committed leaves out
    the aborted transactions by the remote copies' transaction indexes."""
    got = storage_core.read_arrow(tiered.log_dir, topics=tiered.topics, isolationLevel=iso, includeHeaders=True,
                                  remoteStorage=str(tiered.remote)).read_all()
    want = tiered.rows[iso]
    # every topic's history starts at offset 0 (read_committed may leave out an aborted offset 0, as CI28 met)
    assert {r["topic"] for r in tiered.rows["read_uncommitted"] if r["offset"] == 0} == set(TOPICS)
    assert min(tiered.local_start.values()) > 0
    assert_same_rows(rows_of(got), want, f"{tiered.ctx} {iso} whole history")
    if iso == "read_committed":  # the workload did what it is for: aborted records in remote segments
        kept = {(r["topic"], r["partition"], r["offset"]) for r in want}
        assert any((r["topic"], r["partition"], r["offset"]) not in kept and r["offset"] < tiered.local_start[
            (r["topic"], r["partition"])] for r in tiered.rows["read_uncommitted"]), tiered.ctx


def test_the_remote_history_spans_leader_epochs(tiered: Tiered) -> None:
    """The workload did what it is for: remote segments of more than one leader epoch, walked by
    the partition's lineage into one contiguous history from offset 0 to the first local segment."""
    meta = load_remote_metadata([tiered.log_dir])
    assert load_remote_metadata([tiered.log_dir]) is meta  # unchanged files: the replay is not done again
    for t, p in tiered.tps:
        part = meta.get(TopicPartition(t, p))
        assert part is not None, tiered.ctx
        history = remote_history(part, tiered.log_dir / f"{t}-{p}")
        epochs = {e for seg in history for e, _ in seg.leader_epochs}
        assert len(epochs) >= 2, f"{tiered.ctx}: {t}-{p} has remote segments of epochs {epochs} only"
        assert history[0].start_offset == 0 and history[-1].end_offset + 1 == tiered.local_start[(t, p)], tiered.ctx
        assert all(a.end_offset + 1 == b.start_offset for a, b in zip(history, history[1:], strict=False)), tiered.ctx


def test_ranges_and_timestamps_resolve_in_the_remote_segments(tiered: Tiered) -> None:
    """Offsets ranges that start in the remote segments and end in the local ones, and starting
    timestamps, resolve as the broker's consumer and ListOffsets resolve them (through the remote
    copies' indexes)."""
    rnd = random.Random(SEED + 7)
    ends = {(t, p): int(tiered.admin["offsets"][f"{t}-{p}"]["latest"][0]) for t, p in tiered.tps}
    for i in range(3):
        lo = {tp: rnd.randrange(0, tiered.local_start[tp]) for tp in tiered.tps}
        # the first range ends in each partition's local segment; the others anywhere
        hi = {tp: rnd.randrange(tiered.local_start[tp] + 1, ends[tp] + 1) if i == 0 else
              min(rnd.randrange(lo[tp] + 1, lo[tp] + 8000), ends[tp]) for tp in tiered.tps}
        opts = {"startingOffsets": json.dumps({t: {str(p): o for (t2, p), o in lo.items() if t2 == t} for t in TOPICS}),
                "endingOffsets": json.dumps({t: {str(p): o for (t2, p), o in hi.items() if t2 == t} for t in TOPICS})}
        got = storage_core.read_arrow(tiered.log_dir, includeHeaders=True, remoteStorage=str(tiered.remote),
                                      maxRecordsPerPartition=997, **opts).read_all()
        assert_same_rows(rows_of(got), _want(tiered, "read_uncommitted", lo, hi), f"{tiered.ctx} {opts}")
    for probe in tiered.probes:  # as ListOffsets(timestamp), or the end where no record is at or after it
        starting = json.dumps({t: {str(p): probe for (t2, p) in tiered.tps if t2 == t} for t in TOPICS})
        plan = storage_core.plan(tiered.log_dir, topics=tiered.topics, startingOffsetsByTimestamp=starting,
                                 startingOffsetsByTimestampStrategy="latest", remoteStorage=str(tiered.remote))
        got = {(r.topic_partition.topic, r.topic_partition.partition): r.start for r in plan.ranges}
        for t, p in tiered.tps:
            listed = tiered.admin["offsets"][f"{t}-{p}"]
            want = listed[f"@{probe}"][0] if listed[f"@{probe}"][0] >= 0 else listed["latest"][0]
            assert got[(t, p)] == want, f"{tiered.ctx}: timestamp {probe} {t}-{p}: klog {got[(t, p)]}, broker {want}"
    assert any(0 <= o < tiered.local_start[(t, p)] for (t, p) in tiered.tps for o in
               (tiered.admin["offsets"][f"{t}-{p}"][f"@{ts}"][0] for ts in tiered.probes)), \
        f"{tiered.ctx}: no probe resolved inside the remote segments"


def test_without_remote_storage_the_local_tail_is_read_and_the_rest_named(
        tiered: Tiered, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="klog"):
        got = storage_core.read_arrow(tiered.log_dir, topics=tiered.topics, includeHeaders=True).read_all()
    assert_same_rows(rows_of(got), _want(tiered, "read_uncommitted", tiered.local_start), tiered.ctx)
    for t, p in tiered.tps:
        assert any(f"{t}-{p} is tiered: offsets 0-{tiered.local_start[(t, p)] - 1} are in remote storage" in m
                   for m in caplog.messages), caplog.messages


def test_describe_gives_the_remote_range_beside_the_local_one(tiered: Tiered, capsys: pytest.CaptureFixture[str]) -> None:
    """The remote range from the metadata alone: it starts at the broker's earliest offset and ends
    where the local segments start; its segments and bytes are the copies in the storage, its max
    timestamp the copies' own."""
    table = storage_core.describe(tiered.log_dir, topics=tiered.topics).to_pylist()
    assert [(r["topic"], r["partition"]) for r in table] == tiered.tps
    for r in table:
        tp = (r["topic"], r["partition"])
        copies = _remote_logs(tiered.remote, tp)
        assert r["remote_start_offset"] == tiered.admin["offsets"][f"{tp[0]}-{tp[1]}"]["earliest"][0] == 0
        assert r["remote_end_offset"] == r["start_offset"] == tiered.local_start[tp], tiered.ctx
        assert r["remote_segments"] == len(copies)
        assert r["remote_size_bytes"] == sum(c.stat().st_size for c in copies)
        max_ts = max(b.max_timestamp for c in copies for b in FileRecords(c).batches())
        assert int(r["remote_max_timestamp"].timestamp() * 1000) == max_ts
    assert klog(["describe", str(tiered.log_dir), "--topic", TOPIC]) == 0
    out = capsys.readouterr().out
    assert "LOCAL START" in out and "REMOTE START" in out and "remote (tiered storage" in out


def test_verify_reads_the_remote_segments(tiered: Tiered, capsys: pytest.CaptureFixture[str]) -> None:
    """``klog verify --remote-storage``: the broker's remote copies pass, each batch counted; without
    the storage a warning says they were not verified."""
    capsys.readouterr()
    assert klog(["verify", str(tiered.log_dir), "--topic", TOPIC]) == 0
    local = capsys.readouterr()
    assert "not verified: give the remote storage" in local.err, local
    assert klog(["verify", str(tiered.log_dir), "--topic", TOPIC, "--remote-storage", str(tiered.remote)]) == 0
    both = capsys.readouterr()
    # the broker is live: its active segment's preallocated index is warned about (Kafka's recovery
    # rebuilds it) whenever that segment has no entry yet; any other warning is a failure
    live = ("(the active segment of a dir not shut down cleanly: Kafka's recovery rebuilds it)",
            "as an unclean shutdown leaves it (Kafka's recovery rebuilds it)")
    other = [w for w in both.err.splitlines() if w.startswith("warning:") and not any(x in w for x in live)]
    assert not other, both
    copies = sum(1 for tp in tiered.tps if tp[0] == TOPIC for c in _remote_logs(tiered.remote, tp)
                 for _ in FileRecords(c).batches())
    counted = [int(m) for m in re.findall(r": ok \((\d+) batches", both.out)]
    before = [int(m) for m in re.findall(r": ok \((\d+) batches", local.out)]
    assert copies and sum(counted) - sum(before) == copies, (tiered.ctx, local.out, both.out)


def test_export_reads_the_remote_segments(tiered: Tiered, tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    got = []
    for t in TOPICS:  # export takes one topic
        out = tmp_path / f"{t}.parquet"
        assert klog(["export", str(tiered.log_dir), "--topic", t, "-o", str(out), "--headers", "--read-committed",
                     "--remote-storage", str(tiered.remote), "--quiet"]) == 0
        got += rows_of(pq.read_table(out))
    assert_same_rows(got, tiered.rows["read_committed"], f"{tiered.ctx} export")


def test_spark_reads_the_whole_history(tiered: Tiered, spark) -> None:  # type: ignore[no-untyped-def]
    df = (spark.read.format("klog").option("topics", tiered.topics).option("includeHeaders", "true")
          .option("remoteStorage", str(tiered.remote)).load(str(tiered.log_dir)))
    assert_same_rows(rows_of(df.collect()), tiered.rows["read_uncommitted"], f"{tiered.ctx} spark")


def test_a_stream_starts_at_the_remote_history(tiered: Tiered, spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """An AvailableNow stream from earliest, given the remote storage, reads the whole history in
    micro-batches (read_committed: the remote transaction indexes)."""
    name = f"tiered_stream_{SEED}"
    stream = (spark.readStream.format("klog").option("topics", tiered.topics).option("startingOffsets", "earliest")
              .option("kafka.isolation.level", "read_committed").option("includeHeaders", "true")
              .option("maxOffsetsPerTrigger", "9000").option("remoteStorage", str(tiered.remote))
              .load(str(tiered.log_dir)))
    got = available_now_rows(spark, stream, name, tmp_path / name)
    assert_same_rows(got, tiered.rows["read_committed"], f"{tiered.ctx} stream")


def test_a_missing_remote_segment_is_named(tiered: Tiered, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A segment the metadata lists that the storage lacks fails the read naming the object; under
    failOnDataLoss=false its offsets are skipped with a warning and every other record is read. A
    snapshot that was to copy it fails, and copies nothing."""
    remote = tmp_path / "remote"
    shutil.copytree(tiered.remote, remote)
    meta = load_remote_metadata([tiered.log_dir])
    part = meta.get(TopicPartition(TOPIC, 0))
    assert part is not None
    gone = remote_history(part, tiered.log_dir / f"{TOPIC}-0")[0]
    victim = next(p for p in _remote_logs(remote, (TOPIC, 0)) if gone.segment_id in p.name)
    victim.unlink()
    with pytest.raises(RemoteSegmentMissingError) as info:
        storage_core.read_arrow(tiered.log_dir, topics=tiered.topics, remoteStorage=str(remote)).read_all()
    assert str(victim) in str(info.value) and f"{gone.start_offset}-{gone.end_offset}" in str(info.value)
    with caplog.at_level(logging.WARNING, logger="klog"):
        got = storage_core.read_arrow(tiered.log_dir, topics=tiered.topics, remoteStorage=str(remote),
                                      includeHeaders=True, failOnDataLoss="false").read_all()
    want = [r for r in tiered.rows["read_uncommitted"]
            if not (r["topic"] == TOPIC and r["partition"] == 0 and gone.start_offset <= r["offset"] <= gone.end_offset)]
    assert_same_rows(rows_of(got), want, f"{tiered.ctx} segment {gone.segment_id} missing")
    assert any(f"offsets {gone.start_offset}-{gone.end_offset} skipped" in m for m in caplog.messages)
    with pytest.raises(RemoteSegmentMissingError, match=str(victim)):
        storage_core.snapshot(tiered.log_dir, tmp_path / "snap", remote=RemoteStorage.of(str(remote), None),
                              include_remote=True)


def test_remote_storage_in_a_bucket(tiered: Tiered) -> None:
    """The remote storage in S3 (a real server): the same history, read through the fs.* options;
    no secret in what a failure says."""
    from s3_server import SECRET_KEY, server_or_skip

    s3 = server_or_skip()
    uri = s3.bucket() + "/tiered"
    s3.upload(tiered.remote, uri)
    got = storage_core.read_arrow(tiered.log_dir, topics=tiered.topics, isolationLevel="read_committed",
                                  includeHeaders=True, remoteStorage=uri, **s3.options).read_all()
    assert_same_rows(rows_of(got), tiered.rows["read_committed"], f"{tiered.ctx} remote storage in S3")
    with pytest.raises(RemoteSegmentMissingError) as info:
        storage_core.read_arrow(tiered.log_dir, topics=tiered.topics, remoteStorage=uri + "-elsewhere", **s3.options)
    assert uri + "-elsewhere/" in str(info.value) and SECRET_KEY not in str(info.value)


def test_a_snapshot_notes_the_remote_history_or_copies_it(tiered: Tiered, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """Without --include-remote a snapshot copies the local dir (and __remote_log_metadata), notes
    each tiered partition's remote range, and the history reads whole from it with the remote
    storage named; with it, the remote segments are copied in as ordinary segments and the
    snapshot alone holds the whole history, at both isolation levels. A rerun copies nothing new
    of them, and a rerun without --include-remote is refused (it would delete them)."""
    described = {(r["topic"], r["partition"]): (r["remote_start_offset"], r["remote_end_offset"], r["remote_segments"])
                 for r in storage_core.describe(tiered.log_dir, topics=tiered.topics).to_pylist()}
    noted = tmp_path / "noted"
    summary = storage_core.snapshot(tiered.log_dir, noted)
    got = {(pc.topic, pc.partition): (pc.remote_start_offset, pc.remote_end_offset, pc.remote_segments)
           for pc in summary.partitions if pc.remote_segments}
    assert got == described and not any(pc.remote_included for pc in summary.partitions), tiered.ctx
    manifest = json.loads((noted / "klog-snapshot.json").read_text())["remote"]
    assert manifest["included"] is None and set(manifest["partitions"]) == {f"{t}-{p}" for t, p in tiered.tps}
    read = storage_core.read_arrow(noted, topics=tiered.topics, includeHeaders=True, remoteStorage=str(tiered.remote))
    assert_same_rows(rows_of(read.read_all()), tiered.rows["read_uncommitted"], f"{tiered.ctx} snapshot + remote")

    whole = tmp_path / "whole"
    args = ["snapshot", str(tiered.log_dir), str(whole), "--remote-storage", str(tiered.remote), "--quiet"]
    assert klog([*args, "--include-remote"]) == 0
    for iso in ISOLATION:
        read = storage_core.read_arrow(whole, topics=tiered.topics, includeHeaders=True, isolationLevel=iso)
        assert_same_rows(rows_of(read.read_all()), tiered.rows[iso], f"{tiered.ctx} snapshot --include-remote {iso}")
    for (t, p), (start, end, segments) in described.items():
        bases = sorted(base_offset_of(f) for f in (whole / f"{t}-{p}").glob("*" + LOG_SUFFIX))
        assert bases[0] == start == 0 and len([b for b in bases if b < end]) == segments, (t, p, bases)
    assert klog(["verify", str(whole), "--quiet"]) == 0
    again = storage_core.snapshot(tiered.log_dir, whole, remote=RemoteStorage.of(str(tiered.remote), None),
                                  include_remote=True)
    assert sum(pc.segments_copied for pc in again.partitions) <= len(tiered.tps), again  # only active segments
    with pytest.raises(SnapshotError, match="holds the remote history"):
        storage_core.snapshot(tiered.log_dir, whole)
    capsys.readouterr()
    assert klog(["snapshot", str(tiered.log_dir), str(tmp_path / "x"), "--include-remote"]) == 2
    assert "--include-remote) needs the remote storage" in capsys.readouterr().err


def test_dump_of_remote_copies_equals_kafka(tiered: Tiered, tmp_path: Path) -> None:
    """``klog dump`` of a remote segment's copies, under their remote names (``<base>-<segment
    id>.log``, ...), prints what Kafka's DumpLogSegments prints for the same bytes under a log dir's
    names (Kafka reads the base offset from the name, so it cannot take the remote names)."""
    copies = [p for tp in tiered.tps for p in _remote_logs(tiered.remote, tp) if p.with_suffix(".txnindex").exists()]
    assert copies, f"{tiered.ctx}: no remote segment with aborted transactions"
    seg = random.Random(SEED + 11).choice(copies)
    stem = seg.name[: -len(LOG_SUFFIX)]
    named = tmp_path / seg.parent.name.rsplit("-", 1)[0]
    named.mkdir()
    remote_files, kafka_files = [], []
    for suffix in (".log", ".index", ".timeindex", ".txnindex", ".snapshot"):
        src = seg.with_name(stem + suffix)
        if src.exists():
            remote_files.append(src)
            kafka_files.append(shutil.copy(src, named / (stem.split("-", 1)[0] + suffix)))
    assert len(remote_files) == 5, remote_files
    cmd = ["java", "-Xmx512m", "-XX:TieredStopAtLevel=1", "-Dfile.encoding=UTF-8", "-Dsun.stdout.encoding=UTF-8",
           "-cp", broker_fixture.classpath(version=RELEASE), broker_fixture.dump_log_segments_class(RELEASE), "--deep-iteration", "--print-data-log",
           "--files", ",".join(map(str, kafka_files))]
    proc = subprocess.run(cmd, capture_output=True, env=broker_fixture.java_env(), check=True, timeout=300)
    out = io.StringIO()
    with redirect_stdout(out):
        assert klog(["dump", "--quiet", "--deep-iteration", "--print-data-log", *map(str, remote_files)]) == 0
    got = out.getvalue()
    for remote, named_copy in zip(remote_files, kafka_files, strict=True):
        got = got.replace(f"Dumping {remote}\n", f"Dumping {named_copy}\n")
    want = as_newest(proc.stdout.decode("utf-8"), RELEASE)
    assert got == want, f"{tiered.ctx}: klog dump of {seg} differs from Kafka's"


def test_remote_storage_options_are_checked_first(tmp_path: Path) -> None:
    (tmp_path / "t-0").mkdir()
    (tmp_path / "t-0" / "00000000000000000000.log").write_bytes(b"")
    with pytest.raises(InvalidOptionError, match="remoteStorageConfig=.* is not a file"):
        storage_core.read_arrow(tmp_path, remoteStorage=str(tmp_path), remoteStorageLayout="aiven",
                                remoteStorageConfig=str(tmp_path / "none.properties"))
    with pytest.raises(InvalidOptionError, match="need remoteStorageLayout=aiven"):
        storage_core.read_arrow(tmp_path, remoteStorage=str(tmp_path), remoteStorageConfig=str(tmp_path))
    with pytest.raises(InvalidOptionError, match="needs option remoteStorage .*rsm.config.storage.root"):
        storage_core.read_arrow(tmp_path, remoteStorageLayout="aiven")
    with pytest.raises(InvalidOptionError, match="expected one of local-tiered, aiven"):
        storage_core.read_arrow(tmp_path, remoteStorage=str(tmp_path), remoteStorageLayout="s3")
    with pytest.raises(InvalidOptionError, match="needs option remoteStorage"):
        storage_core.read_arrow(tmp_path, remoteStorageLayout="local-tiered")
    with pytest.raises(InvalidOptionError):
        storage_core.read_arrow(tmp_path, remoteStorage="s3://AKIAXXXX:secretsecret@bucket/p")


def _damage_remote(kind: str, t: Tiered, remote: Path, log_dir: Path) -> tuple[Path, int, int]:
    """One damage of ``kind`` to a copy of the remote storage (or of the log dir); the damaged file and
    the offsets ``first..last`` of the segment it hits (issue 53: each was read short or wrong). The
    segment (the first for ``also-local``) and the batch a cut starts at are drawn from the run's seed."""
    rng = random.Random(f"{SEED}-{kind}")
    meta = load_remote_metadata([t.log_dir])
    part = meta.get(TopicPartition(TOPIC, 0))
    assert part is not None
    history = remote_history(part, t.log_dir / f"{TOPIC}-0")
    seg = history[0] if kind == "also-local" else rng.choice(history)
    victim = next(p for p in _remote_logs(remote, (TOPIC, 0)) if seg.segment_id in p.name)
    if kind == "cut":
        batches = list(FileRecords(victim).batches())
        os.truncate(victim, batches[rng.randrange(1, len(batches))].position if len(batches) > 1 else 0)
    elif kind == "emptied":
        os.truncate(victim, 0)
    elif kind == "other-partition":
        other = _remote_logs(remote, (TOPIC, 1))[-1]
        shutil.copyfile(other, victim)
    else:  # the first remote segment also present as the partition's first local segment
        stem = victim.name[: -len(LOG_SUFFIX)]
        local = log_dir / f"{TOPIC}-0"
        for f in victim.parent.glob(stem + ".*"):
            suffix = f.name[len(stem):]
            if suffix in (".log", ".index", ".timeindex"):
                shutil.copyfile(f, local / f"{seg.start_offset:020d}{suffix}")
        victim = local / f"{seg.start_offset:020d}{LOG_SUFFIX}"
    return victim, seg.start_offset, seg.end_offset


@pytest.mark.parametrize("kind", ["cut", "emptied", "other-partition", "also-local"])
def test_a_damaged_remote_segment_fails_or_is_skipped_by_name(tiered: Tiered, tmp_path: Path, kind: str,  # type: ignore[no-untyped-def]
                                                               caplog: pytest.LogCaptureFixture, spark) -> None:
    """A remote copy cut at a batch boundary, emptied or replaced by another partition's, and the
    first remote segment also in the log dir as a local one: the read fails naming the file and the
    offsets (read_arrow, a Spark batch read, and export exiting 1), and under failOnDataLoss=false
    returns exactly the broker's rows outside the offsets its warnings name, never a foreign row
    (read_arrow, a Spark batch read and an AvailableNow stream)."""
    from damage_gen import named_offsets

    from storage_core.errors import DataLossError

    remote = tmp_path / "remote"
    shutil.copytree(tiered.remote, remote)
    log_dir = tiered.log_dir
    if kind == "also-local":
        log_dir = tmp_path / "logs"
        shutil.copytree(tiered.log_dir, log_dir, ignore=shutil.ignore_patterns(".lock"))
    victim, first, last = _damage_remote(kind, tiered, remote, log_dir)
    ctx = f"{tiered.ctx}: {kind} {victim.name} (offsets {first}-{last})"
    with pytest.raises(DataLossError) as info:
        storage_core.read_arrow(log_dir, topics=tiered.topics, remoteStorage=str(remote)).read_all()
    said = named_offsets(str(info.value).replace(f"{first}-{last}", f"{first}..{last}"))
    assert victim.name in str(info.value) and said, (ctx, str(info.value))
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="klog"):
        got = storage_core.read_arrow(log_dir, topics=tiered.topics, remoteStorage=str(remote), includeHeaders=True,
                                      failOnDataLoss="false").read_all()
    named = set().union(*(named_offsets(m.replace(f"{a}-{b}", f"{a}..{b}")) for m in caplog.messages
                          for a, b in [(first, last)]))
    assert named, (ctx, caplog.messages)
    want = [r for r in tiered.rows["read_uncommitted"]
            if not (r["topic"] == TOPIC and r["partition"] == 0 and r["offset"] in named)]
    assert_same_rows(rows_of(got), want, ctx)
    assert klog(["export", str(log_dir), "--topic", TOPIC, "-o", str(tmp_path / "x.parquet"), "--quiet",
                 "--remote-storage", str(remote)]) == 1, ctx
    if kind != "also-local":  # the copy itself is damaged: verify names it (the also-local copy is sound)
        assert klog(["verify", str(log_dir), "--topic", TOPIC, "--quiet", "--remote-storage", str(remote)]) == 1, ctx

    def spark_read(fail: str):  # type: ignore[no-untyped-def]
        return (spark.read.format("klog").option("topics", tiered.topics).option("includeHeaders", "true")
                .option("remoteStorage", str(remote)).option("failOnDataLoss", fail).load(str(log_dir)))

    with pytest.raises(Exception, match="offsets"):  # noqa: PT011 - Spark wraps klog's DataLossError
        spark_read("true").count()
    assert_same_rows(rows_of(spark_read("false").collect()), want, f"{ctx} spark")
    name = f"damaged_{kind.replace('-', '_')}_{SEED}"
    stream = (spark.readStream.format("klog").option("topics", tiered.topics).option("startingOffsets", "earliest")
              .option("includeHeaders", "true").option("remoteStorage", str(remote))
              .option("failOnDataLoss", "false").load(str(log_dir)))
    assert_same_rows(available_now_rows(spark, stream, name, tmp_path / name), want, f"{ctx} stream")
