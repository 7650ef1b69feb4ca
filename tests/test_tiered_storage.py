"""Tiered storage (KIP-405) on Kafka's own broker: the whole history of a tiered topic, read from
the log dir and the remote storage with no broker in the loop.

A broker of its own (tiered storage cannot be switched on for the session's broker without
changing what the other tests see) copies closed segments into Kafka's ``LocalTieredStorage``
(the kafka-storage test jar) and local retention (``local.retention.bytes=1``) deletes the local
copies, so the log dir keeps only the tail. The truth comes from the broker alone: a
``KafkaConsumer`` from the earliest offset at both isolation levels (the broker serves the old
offsets from its remote storage), and the Admin client's ListOffsets (earliest, and by timestamp).

``KLOG_TIERED_SEED`` sets the seed (default: a new one each run, printed in every failure).
"""

from __future__ import annotations

import json
import logging
import os
import random
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import broker_fixture
import pytest
from broker_fixture import Broker, consumer_row, tiered_storage_config
from kafka_corpus import assert_same_rows, available_now_rows, rows_of

import storage_core
from storage_core.errors import InvalidOptionError, RemoteSegmentMissingError
from storage_core.files import LOG_SUFFIX, base_offset_of
from storage_core.log.tiered import load_remote_metadata, remote_history
from storage_core.log.topic_partition import TopicPartition
from storage_core.record.file_records import FileRecords
from storage_core.tools.cli import main as klog

pytestmark = [pytest.mark.broker, pytest.mark.interop]

SEED = int(os.environ.get("KLOG_TIERED_SEED") or random.SystemRandom().randrange(1, 1 << 31))
TOPIC = "tiered"
PARTITIONS = 2
ISOLATION = ("read_uncommitted", "read_committed")
Row = dict[str, Any]


@dataclass
class Tiered:
    """The broker's log dir and remote storage once the copies settled, and what the broker served."""

    broker: Broker
    log_dir: Path
    remote: Path
    rows: dict[str, list[Row]]  # by isolation level, as the consumer saw them
    admin: dict[str, Any]
    probes: list[int]
    local_start: dict[int, int]  # partition -> base offset of its first local segment
    ctx: str


def _local_start(log_dir: Path, partition: int) -> int:
    logs = [base_offset_of(p) for p in (log_dir / f"{TOPIC}-{partition}").glob("*" + LOG_SUFFIX)]
    return min(logs) if logs else 0


def _remote_logs(remote: Path, partition: int) -> list[Path]:
    return sorted((remote / "kafka-tiered-storage").glob(f"{TOPIC}-{partition}-*/*{LOG_SUFFIX}"))


@pytest.fixture(scope="module")
def tiered(tmp_path_factory: pytest.TempPathFactory) -> Any:
    reason = broker_fixture.unavailable()
    if reason is not None:
        if broker_fixture.required():
            pytest.fail(f"{broker_fixture.REQUIRE_ENV}=1 but {reason}")
        pytest.skip(reason)
    root = tmp_path_factory.mktemp("tiered")
    remote = root / "remote"
    remote.mkdir()
    broker = Broker(root / "broker", **tiered_storage_config(remote))
    broker.start()
    ctx = f"seed {SEED} (KLOG_TIERED_SEED={SEED} reruns it)"
    try:
        # segments roll at 1 MiB and after a second: each producer below writes its own segments
        broker.create_topic(TOPIC, PARTITIONS, {"remote.storage.enable": "true", "segment.bytes": "1048576",
                                                "segment.ms": "1000", "local.retention.bytes": "1",
                                                "retention.ms": "-1", "file.delete.delay.ms": "0"})
        rnd = random.Random(SEED)
        # transactions (commits and aborts: the remote .txnindex), idempotent producers, two codecs
        # the restart makes the partitions' leader epoch change, so the history spans two epochs;
        # only idempotent producers follow it (a transactional id used again right after a restart
        # can meet its coordinator still loading: InvalidTxnStateException, seen in CI25). The last,
        # small producer rolls the segment the one before it wrote, so that one is tiered too
        plan = [("txn", "none", 9_000), ("txn", "zstd", 9_000), ("restart", "", 0), ("idempotent", "lz4", 9_000),
                ("idempotent", "none", 300)]
        for i, (kind, codec, n) in enumerate(plan):
            if kind == "restart":
                broker.restart()
                continue
            broker.produce(TOPIC, rnd.randint(n * 2 // 3, n), SEED + i, kind, codec)
            time.sleep(1.1)
        deadline = time.monotonic() + 90
        while True:  # until every partition has closed segments copied and deleted locally
            starts = {p: _local_start(broker.log_dir, p) for p in range(PARTITIONS)}
            copied = {p: len(_remote_logs(remote, p)) for p in range(PARTITIONS)}
            local = {p: len(list((broker.log_dir / f"{TOPIC}-{p}").glob("*" + LOG_SUFFIX))) for p in range(PARTITIONS)}
            if all(starts[p] > 0 and copied[p] >= 2 and local[p] == 1 for p in range(PARTITIONS)):
                break  # every closed segment copied and deleted locally: only the active one is left
            if time.monotonic() > deadline:
                pytest.fail(f"{ctx}: the broker did not tier the topic in 90 s (local starts {starts}, local "
                            f"segments {local}, remote segments {copied}): {broker.log_tail()}")
            time.sleep(0.5)
        time.sleep(1)  # the copy task's metadata update lands after the files
        rows = {}
        for iso in ISOLATION:
            got = broker.consume(iso, [TOPIC], root / f"consumed-{iso}.jsonl")
            rows[iso] = [consumer_row(d) for d in got]
        ts = sorted({r["timestamp"] for r in rows["read_uncommitted"]})
        remote_ts = sorted({r["timestamp"] for r in rows["read_uncommitted"] if 0 < r["offset"] < min(starts.values())})
        probes = sorted(rnd.sample(remote_ts, 3) + rnd.sample(ts, 2)) + [ts[0] - 1, ts[-1] + 1]
        admin = json.loads(broker.client("admin", TOPIC, *(f"@{t}" for t in probes)).strip().splitlines()[-1])
        yield Tiered(broker, broker.log_dir, remote, rows, admin, probes, starts, ctx)
    finally:
        broker.stop()


def _want(t: Tiered, iso: str, lo: dict[int, int] | None = None, hi: dict[int, int] | None = None) -> list[Row]:
    return [r for r in t.rows[iso]
            if (lo is None or r["offset"] >= lo[r["partition"]]) and (hi is None or r["offset"] < hi[r["partition"]])]


@pytest.mark.parametrize("iso", ISOLATION)
def test_read_arrow_gives_the_whole_history(tiered: Tiered, iso: str) -> None:
    """With the remote storage named, every offset the broker serves from the earliest (most of them
    from its remote storage) comes back, the same rows in every column; read_committed leaves out
    the aborted transactions by the remote copies' transaction indexes."""
    got = storage_core.read_arrow(tiered.log_dir, topics=TOPIC, isolationLevel=iso, includeHeaders=True,
                                  remoteStorage=str(tiered.remote)).read_all()
    want = tiered.rows[iso]
    assert min(r["offset"] for r in tiered.rows["read_uncommitted"]) == 0 and min(tiered.local_start.values()) > 0
    assert_same_rows(rows_of(got), want, f"{tiered.ctx} {iso} whole history")


def test_the_remote_history_spans_leader_epochs(tiered: Tiered) -> None:
    """The workload did what it is for: remote segments of more than one leader epoch, walked by
    the partition's lineage into one contiguous history from offset 0 to the first local segment."""
    meta = load_remote_metadata([tiered.log_dir])
    assert load_remote_metadata([tiered.log_dir]) is meta  # unchanged files: the replay is not done again
    for p in range(PARTITIONS):
        part = meta.get(TopicPartition(TOPIC, p))
        assert part is not None, tiered.ctx
        history = remote_history(part, tiered.log_dir / f"{TOPIC}-{p}")
        epochs = {e for seg in history for e, _ in seg.leader_epochs}
        assert len(epochs) >= 2, f"{tiered.ctx}: partition {p} has remote segments of epochs {epochs} only"
        assert history[0].start_offset == 0 and history[-1].end_offset + 1 == tiered.local_start[p], tiered.ctx
        assert all(a.end_offset + 1 == b.start_offset for a, b in zip(history, history[1:], strict=False)), tiered.ctx


def test_ranges_and_timestamps_resolve_in_the_remote_segments(tiered: Tiered) -> None:
    """Offsets ranges across the remote and local segments, and starting timestamps, resolve as the
    broker's consumer and ListOffsets resolve them (through the remote copies' indexes)."""
    rnd = random.Random(SEED + 7)
    for _ in range(3):
        lo = {p: rnd.randrange(0, tiered.local_start[p] + 10) for p in range(PARTITIONS)}
        hi = {p: rnd.randrange(lo[p] + 1, lo[p] + 8000) for p in range(PARTITIONS)}
        ends = {p: int(tiered.admin["offsets"][f"{TOPIC}-{p}"]["latest"][0]) for p in range(PARTITIONS)}
        hi = {p: min(hi[p], ends[p]) for p in range(PARTITIONS)}
        opts = {"startingOffsets": json.dumps({TOPIC: {str(p): o for p, o in lo.items()}}),
                "endingOffsets": json.dumps({TOPIC: {str(p): o for p, o in hi.items()}})}
        got = storage_core.read_arrow(tiered.log_dir, includeHeaders=True, remoteStorage=str(tiered.remote),
                                      maxRecordsPerPartition=997, **opts).read_all()
        assert_same_rows(rows_of(got), _want(tiered, "read_uncommitted", lo, hi), f"{tiered.ctx} {opts}")
    for probe in tiered.probes:  # as ListOffsets(timestamp), or the end where no record is at or after it
        starting = json.dumps({TOPIC: {str(p): probe for p in range(PARTITIONS)}})
        plan = storage_core.plan(tiered.log_dir, topics=TOPIC, startingOffsetsByTimestamp=starting,
                                 startingOffsetsByTimestampStrategy="latest", remoteStorage=str(tiered.remote))
        got = {r.topic_partition.partition: r.start for r in plan.ranges}
        for p in range(PARTITIONS):
            listed = tiered.admin["offsets"][f"{TOPIC}-{p}"]
            want = listed[f"@{probe}"][0] if listed[f"@{probe}"][0] >= 0 else listed["latest"][0]
            assert got[p] == want, f"{tiered.ctx}: timestamp {probe} partition {p}: klog {got[p]}, broker {want}"
    assert any(0 <= o < min(tiered.local_start.values()) for o in
               (tiered.admin["offsets"][f"{TOPIC}-{p}"][f"@{t}"][0] for p in range(PARTITIONS) for t in tiered.probes)), \
        f"{tiered.ctx}: no probe resolved inside the remote segments"


def test_without_remote_storage_the_local_tail_is_read_and_the_rest_named(
        tiered: Tiered, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="klog"):
        got = storage_core.read_arrow(tiered.log_dir, topics=TOPIC, includeHeaders=True).read_all()
    assert_same_rows(rows_of(got), _want(tiered, "read_uncommitted", tiered.local_start), tiered.ctx)
    for p in range(PARTITIONS):
        assert any(f"{TOPIC}-{p} is tiered: offsets 0-{tiered.local_start[p] - 1} are in remote storage" in m
                   for m in caplog.messages), caplog.messages


def test_describe_gives_the_remote_range_beside_the_local_one(tiered: Tiered, capsys: pytest.CaptureFixture[str]) -> None:
    """The remote range from the metadata alone: it starts at the broker's earliest offset and ends
    where the local segments start; its segments and bytes are the copies in the storage, its max
    timestamp the copies' own."""
    table = storage_core.describe(tiered.log_dir, topics=TOPIC).to_pylist()
    assert [r["partition"] for r in table] == list(range(PARTITIONS))
    for r in table:
        p = r["partition"]
        copies = _remote_logs(tiered.remote, p)
        assert r["remote_start_offset"] == tiered.admin["offsets"][f"{TOPIC}-{p}"]["earliest"][0] == 0
        assert r["remote_end_offset"] == r["start_offset"] == tiered.local_start[p], tiered.ctx
        assert r["remote_segments"] == len(copies)
        assert r["remote_size_bytes"] == sum(c.stat().st_size for c in copies)
        max_ts = max(b.max_timestamp for c in copies for b in FileRecords(c).batches())
        assert int(r["remote_max_timestamp"].timestamp() * 1000) == max_ts
    assert klog(["describe", str(tiered.log_dir), "--topic", TOPIC]) == 0
    out = capsys.readouterr().out
    assert "LOCAL START" in out and "REMOTE START" in out and "remote (tiered storage" in out


def test_export_reads_the_remote_segments(tiered: Tiered, tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    out = tmp_path / "all.parquet"
    assert klog(["export", str(tiered.log_dir), "--topic", TOPIC, "-o", str(out), "--headers", "--read-committed",
                 "--remote-storage", str(tiered.remote), "--quiet"]) == 0
    assert_same_rows(rows_of(pq.read_table(out)), tiered.rows["read_committed"], f"{tiered.ctx} export")


def test_spark_reads_the_whole_history(tiered: Tiered, spark) -> None:  # type: ignore[no-untyped-def]
    df = (spark.read.format("klog").option("topics", TOPIC).option("includeHeaders", "true")
          .option("remoteStorage", str(tiered.remote)).load(str(tiered.log_dir)))
    assert_same_rows(rows_of(df.collect()), tiered.rows["read_uncommitted"], f"{tiered.ctx} spark")


def test_a_stream_starts_at_the_remote_history(tiered: Tiered, spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """An AvailableNow stream from earliest, given the remote storage, reads the whole history in
    micro-batches (read_committed: the remote transaction indexes)."""
    name = f"tiered_stream_{SEED}"
    stream = (spark.readStream.format("klog").option("topics", TOPIC).option("startingOffsets", "earliest")
              .option("kafka.isolation.level", "read_committed").option("includeHeaders", "true")
              .option("maxOffsetsPerTrigger", "9000").option("remoteStorage", str(tiered.remote))
              .load(str(tiered.log_dir)))
    got = available_now_rows(spark, stream, name, tmp_path / name)
    assert_same_rows(got, tiered.rows["read_committed"], f"{tiered.ctx} stream")


def test_a_missing_remote_segment_is_named(tiered: Tiered, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A segment the metadata lists that the storage lacks fails the read naming the object; under
    failOnDataLoss=false its offsets are skipped with a warning and every other record is read."""
    remote = tmp_path / "remote"
    shutil.copytree(tiered.remote, remote)
    meta = load_remote_metadata([tiered.log_dir])
    part = meta.get(TopicPartition(TOPIC, 0))
    assert part is not None
    gone = remote_history(part, tiered.log_dir / f"{TOPIC}-0")[0]
    victim = next(p for p in _remote_logs(remote, 0) if gone.segment_id in p.name)
    victim.unlink()
    with pytest.raises(RemoteSegmentMissingError) as info:
        storage_core.read_arrow(tiered.log_dir, topics=TOPIC, remoteStorage=str(remote)).read_all()
    assert str(victim) in str(info.value) and f"{gone.start_offset}-{gone.end_offset}" in str(info.value)
    with caplog.at_level(logging.WARNING, logger="klog"):
        got = storage_core.read_arrow(tiered.log_dir, topics=TOPIC, remoteStorage=str(remote), includeHeaders=True,
                                      failOnDataLoss="false").read_all()
    want = [r for r in tiered.rows["read_uncommitted"]
            if not (r["partition"] == 0 and gone.start_offset <= r["offset"] <= gone.end_offset)]
    assert_same_rows(rows_of(got), want, f"{tiered.ctx} segment {gone.segment_id} missing")
    assert any(f"offsets {gone.start_offset}-{gone.end_offset} skipped" in m for m in caplog.messages)


def test_remote_storage_in_a_bucket(tiered: Tiered) -> None:
    """The remote storage in S3 (a real server): the same history, read through the fs.* options;
    no secret in what a failure says."""
    from s3_server import SECRET_KEY, server_or_skip

    s3 = server_or_skip()
    uri = s3.bucket() + "/tiered"
    s3.upload(tiered.remote, uri)
    got = storage_core.read_arrow(tiered.log_dir, topics=TOPIC, isolationLevel="read_committed", includeHeaders=True,
                                  remoteStorage=uri, **s3.options).read_all()
    assert_same_rows(rows_of(got), tiered.rows["read_committed"], f"{tiered.ctx} remote storage in S3")
    with pytest.raises(RemoteSegmentMissingError) as info:
        storage_core.read_arrow(tiered.log_dir, topics=TOPIC, remoteStorage=uri + "-elsewhere", **s3.options)
    assert uri + "-elsewhere/" in str(info.value) and SECRET_KEY not in str(info.value)


def test_remote_storage_options_are_checked_first(tmp_path: Path) -> None:
    (tmp_path / "t-0").mkdir()
    (tmp_path / "t-0" / "00000000000000000000.log").write_bytes(b"")
    with pytest.raises(InvalidOptionError, match="remoteStorageLayout=aiven .*not supported yet"):
        storage_core.read_arrow(tmp_path, remoteStorage=str(tmp_path), remoteStorageLayout="aiven")
    with pytest.raises(InvalidOptionError, match="expected one of local-tiered, aiven"):
        storage_core.read_arrow(tmp_path, remoteStorage=str(tmp_path), remoteStorageLayout="s3")
    with pytest.raises(InvalidOptionError, match="needs option remoteStorage"):
        storage_core.read_arrow(tmp_path, remoteStorageLayout="local-tiered")
    with pytest.raises(InvalidOptionError):
        storage_core.read_arrow(tmp_path, remoteStorage="s3://AKIAXXXX:secretsecret@bucket/p")
