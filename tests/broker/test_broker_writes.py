"""klog → broker: Apache Kafka's broker loads what klog wrote into its log dir, and serves it.

The session's broker creates the topics (so its KRaft metadata knows them and their ids) and
writes into them first, with Kafka's own producers (idempotent and transactional). Then the broker
is stopped and klog writes into the same partitions, after what the broker wrote:

* the Spark batch writer, once per codec;
* the Spark streaming sink (``Trigger.AvailableNow``);
* ``klog compact`` (``--roll``, the broker having been kept from cleaning by
  ``min.compaction.lag.ms``), ``klog retention`` (``retention.bytes``), and ``klog recover`` of a
  torn tail (the last batch of a segment cut short, the clean-shutdown marker removed, as after a
  crash);
* ``klog restore`` of an export into a topic the broker created empty: records from an offset above
  0, with gaps and LogAppendTime batches, which its consumer must return at the same offsets, and
  ListOffsets earliest at the first of them; and the same from a notebook, another export written by
  the Spark writer's ``offsets=keep`` into another such topic.

What klog then reads from the dir is what it claims to have written; the rows the Spark writers
were given are in it. The broker restarts on the dir: it must log no error, no stray or offline
partition and no truncation, and its consumer must return exactly klog's rows at both isolation
levels. Then Kafka's idempotent and transactional producers append more, and klog reads the whole
result exactly as the broker's consumer does. Last, a write of a topic the dir's KRaft metadata
does not know is refused, in words, before anything is written.

``KLOG_BROKER_SEED`` fixes the seed (default: a new one per run, printed in every failure).
"""

from __future__ import annotations

import datetime as dt
import os
import random
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from broker_fixture import Broker, consumer_row
from broker_fixture import problems as _problems
from kafka_corpus import assert_same_rows, rows_of
from restore_gen import export_table
from sink_rows import sink_frame, sink_rows

import storage_core
from storage_core.files import CLEAN_SHUTDOWN_FILE
from storage_core.tools.cli import main as klog

pytestmark = [pytest.mark.broker, pytest.mark.interop, pytest.mark.spark]

SEED = int(os.environ.get("KLOG_BROKER_SEED") or random.SystemRandom().randrange(1, 1 << 31))
CTX = f"KLOG_BROKER_SEED={SEED}"
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
ISOLATION = ("read_uncommitted", "read_committed")
Row = dict[str, Any]


def _payload(r: Row) -> tuple[Any, ...]:
    """What a writer was given of a row, in the form klog's rows have it."""
    return (r["key"], r["value"], [(h["key"], h["value"]) for h in r["headers"]] or None)


def _klog_rows(log_dir: Path, topics: list[str], iso: str) -> list[Row]:
    return rows_of(storage_core.read_arrow(log_dir, topics=",".join(topics), isolationLevel=iso,
                                           includeHeaders=True).read_all())


@pytest.fixture(scope="module")
def written(broker: Broker, spark, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    rnd = random.Random(SEED)
    prefix = f"kw{SEED}"
    tmp = tmp_path_factory.mktemp("broker-writes")
    broker.start()
    spark_topics = [f"{prefix}-spark-{c}" for c in CODECS]
    stream_topic, compact_topic = f"{prefix}-stream", f"{prefix}-compact"
    retain_topic, torn_topic = f"{prefix}-retain", f"{prefix}-torn"
    small = {"internal.segment.bytes": "32768"}
    for i, t in enumerate(spark_topics):
        broker.create_topic(t, 2, small)
        broker.produce(t, 600, rnd.randrange(1 << 40), "txn" if i < 2 else "idempotent", CODECS[i])
    broker.create_topic(stream_topic, 1)
    broker.produce(stream_topic, 300, rnd.randrange(1 << 40), "idempotent", "lz4")
    broker.create_topic(compact_topic, 1, {**small, "cleanup.policy": "compact", "min.compaction.lag.ms": "3600000",
                                           "delete.retention.ms": "86400000"})
    broker.produce(compact_topic, 3000, rnd.randrange(1 << 40), "idempotent", "zstd")
    broker.create_topic(retain_topic, 1, small)
    broker.produce(retain_topic, 3000, rnd.randrange(1 << 40), "idempotent", "none")
    broker.create_topic(torn_topic, 1, small)
    broker.produce(torn_topic, 1500, rnd.randrange(1 << 40), "idempotent", "gzip")
    restore_topic, keep_topic = f"{prefix}-restore", f"{prefix}-keep"
    broker.create_topic(restore_topic, 2)  # empty: klog restores into it
    broker.create_topic(keep_topic, 2)  # empty: the Spark writer writes into it at the rows' offsets
    topics = [*spark_topics, stream_topic, compact_topic, retain_topic, torn_topic, restore_topic, keep_topic]
    broker.stop()
    log_dir = broker.log_dir
    before = {iso: _klog_rows(log_dir, topics, iso) for iso in ISOLATION}

    # klog recover of a torn tail: the last batch of the torn topic's last segment cut short, and
    # no clean-shutdown marker, as after a crash
    seg = sorted((log_dir / f"{torn_topic}-0").glob("*.log"))[-1]
    size = seg.stat().st_size
    with open(seg, "r+b") as f:
        f.truncate(size - rnd.randint(1, 40))
    (log_dir / CLEAN_SHUTDOWN_FILE).unlink()
    assert klog(["recover", str(log_dir), "--quiet"]) == 1  # 1: bytes were cut
    assert (log_dir / CLEAN_SHUTDOWN_FILE).exists()

    # klog compact (the broker never cleaned: min.compaction.lag.ms) and klog retention
    later = int(dt.datetime.now().timestamp() * 1000) + 2 * 3600_000
    assert klog(["compact", str(log_dir), "--topic", compact_topic, "--roll", "--now", str(later), "--quiet"]) == 0
    assert klog(["retention", str(log_dir), "--topic", retain_topic, "--config", "retention.bytes=100000",
                 "--quiet"]) == 0

    # the Spark batch writer, every codec, after what the broker wrote
    given: dict[str, list[tuple[Any, ...]]] = {}
    for codec, t in zip(CODECS, spark_topics, strict=True):
        rows = sink_rows(rnd, rnd.randint(500, 1500))
        (sink_frame(spark, rows).write.format("klog").option("topic", t).option("compression", codec)
         .mode("append").save(str(log_dir)))
        given[t] = [_payload(r) for r in rows]

    # the streaming sink: a klog dir of klog's own, streamed into the broker's dir
    src = tmp / "src"
    rows = sink_rows(rnd, 700)
    sink_frame(spark, rows).write.format("klog").option("topic", "in").option("numPartitions", "2") \
        .mode("append").save(str(src))
    q = (spark.readStream.format("klog").option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "200")
         .option("includeHeaders", "true").load(str(src)).select("key", "value", "headers", "timestamp")
         .writeStream.format("klog").option("topic", stream_topic).option("compression", "snappy")
         .option("checkpointLocation", str(tmp / "ck")).trigger(availableNow=True).start(str(log_dir)))
    try:
        q.awaitTermination(300)
        assert q.exception() is None, q.exception()
    finally:
        q.stop()
    given[stream_topic] = [_payload(r) for r in rows]

    # klog restore of an export (made up by the generator) at its offsets, from an offset above 0
    export = export_table(rnd, restore_topic, 2, rnd.randint(200, 400), rnd.randint(1, 10**6),
                          int(time.time() * 1000) - 3600_000)  # recent: the topic's retention.ms keeps it
    pq.write_table(export, tmp / "export.parquet")
    storage_core.restore(tmp / "export.parquet", log_dir, topics=[restore_topic], compression=rnd.choice(CODECS))

    # the same from a notebook: the Spark writer at the rows' offsets (one task per partition: in a
    # topic that is not compacted, a gap between two tasks' ranges would read as lost data)
    kept = export_table(rnd, keep_topic, 2, rnd.randint(200, 400), rnd.randint(1, 10**6),
                        int(time.time() * 1000) - 3600_000)
    pq.write_table(kept, tmp / "keep.parquet")
    (spark.read.parquet(str(tmp / "keep.parquet")).repartition("partition").write.format("klog")
     .option("offsets", "keep").option("compression", rnd.choice(CODECS)).mode("append").save(str(log_dir)))
    after = {iso: _klog_rows(log_dir, topics, iso) for iso in ISOLATION}
    return {"log_dir": log_dir, "prefix": prefix, "topics": topics, "before": before, "after": after,
            "given": given, "torn": torn_topic, "compact": compact_topic, "retain": retain_topic, "tmp": tmp,
            "restore": restore_topic, "restored": export, "keep": keep_topic, "kept": kept}


def test_klog_wrote_what_it_was_given(written: dict[str, Any]) -> None:
    """Before the broker sees anything: the Spark writers' rows follow the broker's, in full."""
    before, after = written["before"]["read_uncommitted"], written["after"]["read_uncommitted"]
    for topic, payloads in written["given"].items():
        old = {(r["partition"], r["offset"]) for r in before if r["topic"] == topic}
        ends = {p: max((o for q, o in old if q == p), default=-1) for p, _ in old}
        new = [r for r in after if r["topic"] == topic and (r["partition"], r["offset"]) not in old]
        assert all(r["offset"] > ends.get(r["partition"], -1) for r in new), f"{CTX} {topic}: klog wrote below the end"
        got = sorted(((r["key"], r["value"], r["headers"]) for r in new), key=repr)
        assert got == sorted(payloads, key=repr), f"{CTX} {topic}: klog's rows are not the rows it was given"
    # the torn tail lost only the cut batch; compaction kept each key's last value; retention cut the start
    torn = written["torn"]
    t_before = [r for r in before if r["topic"] == torn]
    t_after = [r for r in after if r["topic"] == torn]
    assert 0 < len(t_before) - len(t_after) < len(t_before) and t_after == t_before[:len(t_after)], CTX
    comp = written["compact"]
    last: dict[bytes, Row] = {}
    for r in before:
        if r["topic"] == comp:
            last[r["key"]] = r
    kept = {r["key"]: r for r in after if r["topic"] == comp}
    assert {k: r["value"] for k, r in kept.items()} == {k: r["value"] for k, r in last.items()}, CTX
    assert len([r for r in after if r["topic"] == comp]) < len([r for r in before if r["topic"] == comp]), CTX
    ret = [r for r in after if r["topic"] == written["retain"]]
    assert ret and ret[0]["offset"] > 0, f"{CTX}: retention deleted nothing"
    # the broker's high watermarks cover what klog appended (else a restarted broker starts them
    # below klog's records, as not yet replicated)
    from storage_core.log.checkpoint import OffsetCheckpointFile
    from storage_core.log.topic_partition import TopicPartition

    hw = OffsetCheckpointFile(written["log_dir"] / "replication-offset-checkpoint").read()
    for topic in written["given"]:
        for p in (0, 1):
            offsets = [r["offset"] for r in after if r["topic"] == topic and r["partition"] == p]
            if offsets:
                assert hw.get(TopicPartition(topic, p), -1) >= max(offsets) + 1, f"{CTX} {topic}-{p}: high watermark"


def test_unknown_topic_refused_in_a_broker_dir(written: dict[str, Any], broker: Broker, spark) -> None:  # type: ignore[no-untyped-def]
    """A topic the KRaft metadata does not know would be a stray to the broker: refused, nothing
    written (the broker is stopped, as for every klog write)."""
    assert not broker.running
    t = f"{written['prefix']}-unknown"
    df = sink_frame(spark, sink_rows(random.Random(SEED), 3))
    with pytest.raises(Exception, match="not in the KRaft metadata") as e:
        df.write.format("klog").option("topic", t).mode("append").save(str(broker.log_dir))
    assert "stray" in str(e.value)
    assert not list(broker.log_dir.glob(f"{t}-*")), f"{CTX}: partition dirs of the unknown topic were created"


@pytest.fixture(scope="module")
def restarted(written: dict[str, Any], broker: Broker) -> dict[str, Any]:
    written["log_mark"] = broker.log_mark()
    broker.start()
    return written


@pytest.mark.parametrize("iso", ISOLATION)
def test_broker_serves_klogs_records(restarted: dict[str, Any], broker: Broker, iso: str) -> None:
    got = [consumer_row(d) for d in broker.consume(iso, restarted["topics"], restarted["tmp"] / f"c-{iso}.jsonl")]
    assert_same_rows(got, restarted["after"][iso], f"{CTX} the broker's consumer ({iso}) on klog's dir vs klog")


def _restored_rows(written: dict[str, Any], which: str = "restored") -> list[Row]:
    """The export the restore (``restored``) or the Spark writer (``kept``) was given, as rows of klog's
    reader and of the broker's consumer."""
    export = written[which]
    millis = export.column("timestamp").cast(pa.int64()).to_pylist()
    return sorted(({**r, "timestamp": ms, "headers": [(h["key"], h["value"]) for h in r["headers"]] or None}
                   for r, ms in zip(export.to_pylist(), millis, strict=True)),
                  key=lambda r: (r["partition"], r["offset"]))


def test_klog_restored_the_export(written: dict[str, Any]) -> None:
    """Every record of each export (klog restore's, the Spark writer's offsets=keep) at its offset, with
    its key, value, headers, timestamp and timestamp type (the broker's consumer returns the same: test_broker_serves_klogs_records, whose topics hold
    the restored one; ListOffsets: test_broker_loads_klogs_dir_clean)."""
    for topic, which in ((written["restore"], "restored"), (written["keep"], "kept")):
        want = _restored_rows(written, which)
        for iso in ISOLATION:
            got = sorted((dict(r) for r in written["after"][iso] if r["topic"] == topic),
                         key=lambda r: (r["partition"], r["offset"]))
            assert [{**r, "headers": [tuple(h) for h in r["headers"]] if r["headers"] else None}
                    for r in got] == want, f"{CTX} {iso}: klog's read of {topic} ({which})"


def test_broker_and_producers_carry_on(restarted: dict[str, Any], broker: Broker) -> None:
    """Kafka's idempotent and transactional producers append after klog's offsets; klog reads the
    result (live) exactly as the broker's consumer does, at both isolation levels."""
    rnd = random.Random(SEED + 1)
    for t in restarted["topics"]:
        broker.produce(t, 200, rnd.randrange(1 << 40), rnd.choice(("idempotent", "txn")), rnd.choice(CODECS))
    for iso in ISOLATION:
        want = [consumer_row(d) for d in broker.consume(iso, restarted["topics"], restarted["tmp"] / f"m-{iso}.jsonl")]
        got = _klog_rows(broker.log_dir, restarted["topics"], iso)
        assert_same_rows(got, want, f"{CTX} after more appends by the broker ({iso})")
        assert len(want) > len(restarted["after"][iso]), CTX


def test_broker_loads_klogs_dir_clean(restarted: dict[str, Any], broker: Broker) -> None:
    """No error or warning about klog's partitions from the broker's start through the appends
    above and a few rounds of its retention and cleaner tasks."""
    time.sleep(3)
    problems = _problems(broker.log_since(restarted["log_mark"]), restarted["prefix"])
    assert not problems, f"{CTX}: the broker complained on loading klog's dir:\n" + "\n".join(problems[:20])
    assert not list(broker.log_dir.glob("*-stray")), f"{CTX}: stray partitions"
    admin = broker.admin(restarted["topics"])
    for tp, o in admin["offsets"].items():
        topic, _, p = tp.rpartition("-")
        mine = [r["offset"] for r in restarted["after"]["read_uncommitted"]
                if r["topic"] == topic and r["partition"] == int(p)]
        assert o["latest"][0] >= (max(mine) + 1 if mine else 0), f"{CTX} {tp}: the broker truncated klog's records"
        which = {restarted["restore"]: "restored", restarted["keep"]: "kept"}.get(topic)
        if which is not None:  # a consumer at earliest starts at the first restored record
            first = min(r["offset"] for r in _restored_rows(restarted, which) if r["partition"] == int(p))
            assert o["earliest"][0] == first, f"{CTX} {tp}: ListOffsets earliest after a restore ({which})"
