"""Side by side with Spark's own Kafka source: the same DataFrame code, run once with
``format("kafka")`` against the session's broker and once with ``format("klog")`` on that broker's
log dir, gives the same rows in every column (key, value, topic, partition, offset, timestamp,
timestampType, headers).

The data are random broker workloads (``oracle/BrokerClient.java workload``: plain, transactional
with aborts, retention deleting segments, a compacted topic, every codec, headers, nulls,
LogAppendTime), settled. Every read option klog documents is drawn at random per workload:
``subscribe``/``subscribePattern``/``assign``, ``startingOffsets``/``endingOffsets`` as
earliest/latest and as JSON with -2/-1, ``startingTimestamp``, ``endingTimestamp``, ``startingOffsetsByTimestamp``,
``endingOffsetsByTimestamp``, ``startingOffsetsByTimestampStrategy``, ``kafka.isolation.level``,
``includeHeaders``, ``minPartitions``, ``maxRecordsPerPartition`` and ``failOnDataLoss``. Spark's
Kafka source reads while the broker runs; klog reads the live dir, and again (a random half of the
queries) after the broker's clean shutdown, and both must equal what Spark's Kafka source returned.

``KLOG_PARITY_WORKLOADS`` (default 1; each run draws new ones) sets the number of workloads, ``KLOG_PARITY_SEED`` the seed
(default: new each run, printed in every failure).
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import spark_kafka
from broker_fixture import Broker, required, settle
from kafka_corpus import assert_same_rows, env_int, rows_of

import storage_core

pytestmark = [pytest.mark.broker, pytest.mark.interop, pytest.mark.spark]

N_WORKLOADS = env_int("KLOG_PARITY_WORKLOADS", 1)
SEED = int(os.environ.get("KLOG_PARITY_SEED") or random.SystemRandom().randrange(1, 1 << 31))
Row = dict[str, Any]
Options = dict[str, str]


@dataclass
class Workload:
    """One settled workload's topics, and what Kafka's admin client says of their offsets."""

    seed: int
    prefix: str
    topics: list[str]
    partitions: list[tuple[str, int]]
    earliest: dict[tuple[str, int], int]
    latest: dict[tuple[str, int], int]
    stamps: dict[tuple[str, int], list[int]]  # each partition's record timestamps, sorted

    @property
    def ctx(self) -> str:
        return f"KLOG_PARITY_SEED={SEED} workload {self.prefix}"


@pytest.fixture(scope="module")
def kafka_source(spark):  # type: ignore[no-untyped-def]
    """The session's SparkSession, which has Spark's Kafka connector on its ``spark.jars``."""
    reason = spark_kafka.unavailable()
    if reason is not None:
        if required():
            pytest.fail(f"KLOG_REQUIRE_BROKER=1 but {reason}")
        pytest.skip(reason)
    if "spark-sql-kafka" not in spark.conf.get("spark.jars", ""):
        pytest.fail("the session's SparkSession was started without Spark's Kafka connector (tests/conftest.py)")
    return spark


@pytest.fixture(scope="module")
def workloads(broker: Broker, tmp_path_factory: pytest.TempPathFactory) -> list[Workload]:
    broker.start()
    rnd = random.Random(SEED)
    out = []
    for i in range(N_WORKLOADS):
        seed, prefix = rnd.randrange(1 << 62), f"p{SEED}w{i}"
        topics = sorted(t["topic"] for t in broker.workload(seed, prefix, rnd.randint(1_000, 3_000)))
        settle(broker, topics)
        admin = broker.admin(topics)["offsets"]
        parts = sorted((tp.rpartition("-")[0], int(tp.rpartition("-")[2])) for tp in admin)
        table = storage_core.read_arrow(str(broker.log_dir), topics=topics).read_all()
        stamps: dict[tuple[str, int], list[int]] = {}
        for r in table.select(["topic", "partition", "timestamp"]).to_pylist():
            stamps.setdefault((r["topic"], r["partition"]), []).append(int(r["timestamp"].timestamp() * 1000))
        out.append(Workload(seed, prefix, topics, parts,
                            {p: admin[f"{p[0]}-{p[1]}"]["earliest"][0] for p in parts},
                            {p: admin[f"{p[0]}-{p[1]}"]["latest"][0] for p in parts},
                            {p: sorted(v) for p, v in stamps.items()}))
    return out


def _offsets_json(spec: dict[tuple[str, int], int]) -> str:
    out: dict[str, dict[str, int]] = {}
    for (topic, p), o in sorted(spec.items()):
        out.setdefault(topic, {})[str(p)] = o
    return json.dumps(out)


def _assign(parts: list[tuple[str, int]]) -> str:
    out: dict[str, list[int]] = {}
    for topic, p in sorted(parts):
        out.setdefault(topic, []).append(p)
    return json.dumps(out)


def batch_variants(w: Workload, rnd: random.Random) -> list[tuple[str, Options]]:
    """Random read options, each a query both sources run; every option klog documents appears."""
    iso = lambda: rnd.choice(["read_committed", "read_uncommitted"])  # noqa: E731
    heads = lambda: rnd.choice(["true", "false"])  # noqa: E731
    some = rnd.sample(w.partitions, rnd.randint(1, len(w.partitions)))
    within = {p: (w.earliest[p], w.latest[p]) for p in some}

    def offset_in(p: tuple[str, int], lo: int | None = None) -> int:
        a, b = within[p]
        return rnd.randint(lo if lo is not None else a, b) if b > a else a

    starts = {p: rnd.choice([-2, offset_in(p)]) for p in some}
    ends = {p: rnd.choice([-1, offset_in(p, max(starts[p], w.earliest[p]))]) for p in some}
    stamped = [p for p in some if w.stamps.get(p)]
    all_stamps = sorted(s for p in w.partitions for s in w.stamps.get(p, []))
    out: list[tuple[str, Options]] = [
        ("subscribe", {"subscribe": ",".join(w.topics), "includeHeaders": "true", "kafka.isolation.level": iso()}),
        ("subscribePattern earliest..latest", {"subscribePattern": f"{w.prefix}-.*", "startingOffsets": "earliest",
                                               "endingOffsets": "latest", "includeHeaders": heads(),
                                               "kafka.isolation.level": iso()}),
        ("assign, offsets as JSON", {"assign": _assign(some), "startingOffsets": _offsets_json(starts),
                                     "endingOffsets": _offsets_json(ends), "includeHeaders": "true",
                                     "kafka.isolation.level": iso()}),
        ("minPartitions, maxRecordsPerPartition", {
            "subscribePattern": f"{w.prefix}-.*", "minPartitions": str(rnd.randint(3, 9)),
            "maxRecordsPerPartition": str(rnd.randint(150, 2_000)), "includeHeaders": heads(),
            "kafka.isolation.level": iso()}),
        ("failOnDataLoss=false", {"subscribe": ",".join(w.topics), "failOnDataLoss": "false",
                                  "includeHeaders": "true"}),
    ]
    # out of bounds: where Spark's Kafka source fails, klog must fail too (and return the same
    # rows where it does not)
    p = rnd.choice(w.partitions)
    out.append(("startingOffsets past the end", {"assign": _assign([p]), "startingOffsets": _offsets_json(
        {p: w.latest[p] + rnd.randint(1, 50)}), "includeHeaders": "true"}))
    if rnd.random() < 0.5:  # Spark's Kafka source waits kafkaConsumer.pollTimeoutMs for the missing records
        for fail in ("true", "false"):
            out.append((f"endingOffsets past the end, failOnDataLoss={fail}", {
                "assign": _assign([p]), "endingOffsets": _offsets_json({p: w.latest[p] + rnd.randint(1, 50)}),
                "failOnDataLoss": fail, "includeHeaders": "true"}))
    lost = [q for q in w.partitions if w.earliest[q] > 0]  # retention deleted their first segments
    if lost:
        q = rnd.choice(lost)
        for fail in ("true", "false"):
            out.append((f"startingOffsets below the log start, failOnDataLoss={fail}", {
                "assign": _assign([q]), "startingOffsets": _offsets_json({q: rnd.randint(0, w.earliest[q] - 1)}),
                "failOnDataLoss": fail, "includeHeaders": "true"}))
    topic = rnd.choice(w.topics)
    missing = max(n for t, n in w.partitions if t == topic) + 1
    out.append(("assign a partition the topic lacks", {"assign": json.dumps({topic: [missing]})}))
    if all_stamps:
        # before every record (an offset in each partition that has records), and a random one
        # (past the last record of some partition: an error, by default, to both)
        for t in (all_stamps[0] - 1, rnd.choice(all_stamps)):
            out.append((f"startingTimestamp={t}", {"subscribe": ",".join(w.topics), "startingTimestamp": str(t),
                                                   "includeHeaders": "true", "kafka.isolation.level": iso()}))
        # an end by timestamp (exclusive; after a partition's last record: its end)
        t = rnd.choice(all_stamps) + rnd.choice([0, 1])
        out.append((f"endingTimestamp={t}", {"subscribePattern": f"{w.prefix}-.*", "endingTimestamp": str(t),
                                             "includeHeaders": "true", "kafka.isolation.level": iso()}))
    if stamped:
        by_ts = {p: rnd.choice(w.stamps[p]) + rnd.choice([-1, 0, 1]) for p in stamped}
        end_ts = {p: rnd.choice([s for s in w.stamps[p] if s >= by_ts[p]] or [by_ts[p]]) + 1 for p in stamped}
        out.append(("startingOffsetsByTimestamp, endingOffsetsByTimestamp", {
            "assign": _assign(stamped), "startingOffsetsByTimestamp": _offsets_json(by_ts),
            "endingOffsetsByTimestamp": _offsets_json(end_ts), "includeHeaders": "true",
            "kafka.isolation.level": iso()}))
        past = {p: w.stamps[p][-1] + 1 + rnd.randint(0, 1000) for p in stamped}
        out.append(("startingOffsetsByTimestampStrategy=latest past the end", {
            "assign": _assign(stamped), "startingOffsetsByTimestamp": _offsets_json(past),
            "startingOffsetsByTimestampStrategy": "latest", "includeHeaders": "true"}))
    return out


Outcome = tuple[str, Any]  # ("rows", the rows) or ("error", its message)


def read_batch(spark: Any, fmt: str, opts: Options, where: str) -> Outcome:
    """The same DataFrame code for both sources (only the format and where it reads from differ):
    the rows, or the error the query failed with."""
    try:
        # the time Spark's Kafka source waits for records that are not there (klog ignores it, as
        # every option for a Kafka client)
        reader = spark.read.format(fmt).option("kafkaConsumer.pollTimeoutMs", "5000").options(**opts)
        df = reader.option("kafka.bootstrap.servers", where).load() if fmt == "kafka" else reader.load(where)
        return "rows", rows_of(df.collect())
    except Exception as exc:  # noqa: BLE001 - an error is an outcome both sources must agree on
        return "error", f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"


def assert_same_outcome(got: Outcome, want: Outcome, ctx: str) -> None:
    """klog fails where Spark's Kafka source fails (its message naming the option), else returns
    the same rows."""
    assert got[0] == want[0], f"{ctx}: Spark's Kafka source gave {want[0]} ({str(want[1])[:300]}), klog " \
                              f"{got[0]} ({str(got[1])[:300]})"
    if want[0] == "rows":
        assert_same_rows(got[1], want[1], ctx)
    else:
        ERRORS.append((ctx, want[1], got[1]))


#: (context, Spark's Kafka source's error, klog's error) of the queries both refused
ERRORS: list[tuple[str, str, str]] = []

#: Where klog deliberately differs from Spark's Kafka source (docs/porting.md says so): the query,
#: what Spark's Kafka source gives, what klog gives instead
DIFFERENCES = {
    # a batch read that assigns a partition the topic does not have: Spark's Kafka source returns no
    # rows for it, without a word; klog refuses the read, naming the partition and those that exist
    "assign a partition the topic lacks": ("rows", "error"),
}


def _each_variant(workloads: list[Workload], fn: Callable[[Workload, str, Options], None], *,
                  share: float = 1.0) -> int:
    """``fn`` on every variant of every workload (``share``: on that random share of them, one at least)."""
    n = 0
    for w in workloads:
        rnd = random.Random(w.seed)
        pick = random.Random(w.seed + 2)
        variants = list(batch_variants(w, rnd))
        chosen = [v for v in variants if pick.random() < share] or variants[:1]
        for name, opts in chosen:
            fn(w, name, opts)
            n += 1
    return n


def test_batch_reads_equal_sparks_kafka_source_live_and_after_shutdown(kafka_source, broker: Broker,  # type: ignore[no-untyped-def]
                                                                       workloads: list[Workload]) -> None:
    spark = kafka_source
    broker.start()
    kafka_out: dict[tuple[str, str], Outcome] = {}

    def live(w: Workload, name: str, opts: Options) -> None:
        want = read_batch(spark, "kafka", opts, broker.bootstrap)
        kafka_out[w.prefix, name] = want
        got = read_batch(spark, "klog", opts, str(broker.log_dir))
        if name in DIFFERENCES:  # pinned: if Spark's Kafka source or klog changes, this says so
            assert (want[0], got[0]) == DIFFERENCES[name], (f"{w.ctx} {name}", want, got)
            return
        assert_same_outcome(got, want, f"{w.ctx} {name} (live) {opts}")

    n = _each_variant(workloads, live)
    assert n >= 6 * len(workloads)
    assert sum(len(v) for kind, v in kafka_out.values() if kind == "rows") > 0
    broker.stop()
    try:
        def stopped(w: Workload, name: str, opts: Options) -> None:
            if name in DIFFERENCES:
                assert read_batch(spark, "klog", opts, str(broker.log_dir))[0] == DIFFERENCES[name][1]
                return
            assert_same_outcome(read_batch(spark, "klog", opts, str(broker.log_dir)), kafka_out[w.prefix, name],
                                f"{w.ctx} {name} (after shutdown) {opts}")

        # the same queries on the dir the broker left (a random half of them: the dir is the
        # same, only the broker's state differs)
        assert _each_variant(workloads, stopped, share=0.5) > 0
    finally:
        broker.start()  # the session's broker serves the tests that follow
    for ctx, spark_error, klog_error in ERRORS:  # both refused: klog's words are shown beside Spark's
        print(f"{ctx}\n  Spark: {spark_error[:300]}\n  klog:  {klog_error[:300]}")


def run_stream(spark: Any, fmt: str, opts: Options, where: str, checkpoint: Path) -> tuple[list[Row], list[tuple[Any, Any]]]:
    """The same streaming code for both sources, ``Trigger.AvailableNow`` into ``foreachBatch``
    (a sink that restarts from its checkpoint): the rows, and each micro-batch's (start, end)
    offsets as the query's progress reports them."""
    collected: list[Any] = []

    def on_batch(batch: Any, _batch_id: int) -> None:
        collected.extend(batch.collect())

    reader = spark.readStream.format(fmt).options(**opts)
    df = reader.option("kafka.bootstrap.servers", where).load() if fmt == "kafka" else reader.load(where)
    q = (df.writeStream.foreachBatch(on_batch).trigger(availableNow=True)
         .option("checkpointLocation", str(checkpoint)).start())
    try:
        q.awaitTermination(600)
        if q.exception() is not None:
            raise RuntimeError(str(q.exception()))
        bounds = [(json.loads(p["sources"][0]["startOffset"] or "null"), json.loads(p["sources"][0]["endOffset"]))
                  for p in q.recentProgress if p["numInputRows"] or p["sources"][0]["startOffset"] !=
                  p["sources"][0]["endOffset"]]
    finally:
        q.stop()
    return rows_of(collected), bounds


def test_available_now_streams_equal_sparks_kafka_source(kafka_source, broker: Broker,  # type: ignore[no-untyped-def]
                                                         workloads: list[Workload], tmp_path: Path) -> None:
    """The same rows, and with ``maxOffsetsPerTrigger`` the same micro-batch boundaries (Spark's
    ``rateLimit`` shares the limit by backlog), both on the live dir."""
    spark = kafka_source
    broker.start()
    for i, w in enumerate(workloads):
        rnd = random.Random(w.seed + 1)
        total = sum(w.latest[p] - w.earliest[p] for p in w.partitions)
        opts: Options = {"subscribePattern": f"{w.prefix}-.*", "startingOffsets": "earliest",
                         "includeHeaders": "true",
                         "kafka.isolation.level": rnd.choice(["read_committed", "read_uncommitted"])}
        if rnd.random() < 0.75:
            opts["maxOffsetsPerTrigger"] = str(max(1, total // rnd.randint(2, 7)))
        got = {}
        for fmt in ("kafka", "klog"):
            where = broker.bootstrap if fmt == "kafka" else str(broker.log_dir)
            got[fmt] = run_stream(spark, fmt, opts, where, tmp_path / f"{fmt}-{i}")
        ctx = f"{w.ctx} stream {opts}"
        assert_same_rows(got["klog"][0], got["kafka"][0], ctx)
        assert got["klog"][1] == got["kafka"][1], (ctx, got["klog"][1], got["kafka"][1])
        if "maxOffsetsPerTrigger" in opts:
            assert len(got["kafka"][1]) > 1, ctx  # the limit did split the backlog


def _by_partition(rows: list[Row]) -> tuple[dict[int, list[tuple[Any, ...]]], list[tuple[Any, ...]]]:
    """A topic's records as a consumer sees them: keyed ones by partition (Kafka's default
    partitioner puts a key in murmur2(key) % n, so both writers must agree), the null-keyed ones
    by topic (the producer's sticky partitioner picks their partition at will)."""
    keyed: dict[int, list[tuple[Any, ...]]] = {}
    unkeyed = []
    for r in rows:
        payload = (r["key"] or b"", r["value"] or b"", r["value"] is None,
                   tuple((k, v or b"", v is None) for k, v in r["headers"] or []))
        if r["key"] is None:
            unkeyed.append(payload)
        else:
            keyed.setdefault(r["partition"], []).append(payload)
    return {p: sorted(v) for p, v in keyed.items()}, sorted(unkeyed)


def test_sinks_write_what_sparks_kafka_sink_writes(kafka_source, broker: Broker,  # type: ignore[no-untyped-def]
                                                   tmp_path: Path) -> None:
    """The same frame written by ``df.write.format("kafka")`` into the broker and by
    ``df.write.format("klog")`` into the broker's dir (stopped, then restarted on it), batch and
    streaming: the broker's consumer reads the same records in the same partitions, with headers."""
    from sink_rows import sink_frame, sink_rows

    spark = kafka_source
    rnd = random.Random(SEED + 7)
    rounds = []
    broker.start()
    for i in range(N_WORKLOADS):
        parts = rnd.randint(1, 4)
        names = {how: f"s{SEED}r{i}-{how}" for how in ("kafka", "klog", "kafka-stream", "klog-stream")}
        for t in names.values():
            broker.create_topic(t, parts)
        rows = sink_rows(rnd, rnd.randint(300, 1_500))
        src = tmp_path / f"src-{i}"  # the streaming sinks' source: a klog dir of the same rows
        sink_frame(spark, rows).drop("timestamp").write.format("klog").option("topic", "in") \
            .option("numPartitions", str(rnd.randint(1, 3))).mode("append").save(str(src))
        codec = rnd.choice(["none", "gzip", "snappy", "lz4", "zstd"])
        rounds.append((names, rows, src, codec, str(rnd.randint(50, 400))))

    def stream(fmt: str, src: Path, topic: str, codec: str, limit: str, ck: Path) -> None:
        df = (spark.readStream.format("klog").option("startingOffsets", "earliest").option("includeHeaders", "true")
              .option("maxOffsetsPerTrigger", limit).load(str(src)).select("key", "value", "headers"))
        w = df.writeStream.format(fmt).option("topic", topic).option("checkpointLocation", str(ck))
        w = (w.option("kafka.bootstrap.servers", broker.bootstrap).option("kafka.compression.type", codec)
             if fmt == "kafka" else w.option("compression", codec))
        q = w.trigger(availableNow=True).start() if fmt == "kafka" else w.trigger(availableNow=True).start(
            str(broker.log_dir))
        try:
            q.awaitTermination(600)
            assert q.exception() is None, q.exception()
        finally:
            q.stop()

    for i, (names, rows, src, codec, limit) in enumerate(rounds):
        (sink_frame(spark, rows).drop("timestamp").write.format("kafka")
         .option("kafka.bootstrap.servers", broker.bootstrap).option("topic", names["kafka"])
         .option("kafka.compression.type", codec).save())
        stream("kafka", src, names["kafka-stream"], codec, limit, tmp_path / f"ck-kafka-{i}")
    broker.stop()
    try:
        for i, (names, rows, src, codec, limit) in enumerate(rounds):
            (sink_frame(spark, rows).drop("timestamp").write.format("klog").option("topic", names["klog"])
             .option("compression", codec).mode("append").save(str(broker.log_dir)))
            stream("klog", src, names["klog-stream"], codec, limit, tmp_path / f"ck-klog-{i}")
    finally:
        broker.start()
    everything = rows_of_consumer(broker, [t for names, *_ in rounds for t in names.values()],
                                  tmp_path / "consumed.jsonl")  # one consumer for all the topics
    for i, (names, rows, _src, codec, _limit) in enumerate(rounds):
        got = {how: [r for r in everything if r["topic"] == t] for how, t in names.items()}
        for kind in ("", "-stream"):
            ctx = f"KLOG_PARITY_SEED={SEED} round {i}{kind or ' batch'} codec {codec}"
            kafka, klog = got[f"kafka{kind}"], got[f"klog{kind}"]
            assert len(kafka) == len(klog) == len(rows), (ctx, len(kafka), len(klog), len(rows))
            assert _by_partition(klog) == _by_partition(kafka), ctx


def rows_of_consumer(broker: Broker, topics: list[str], out: Path) -> list[Row]:
    from broker_fixture import consumer_row

    return [consumer_row(d) for d in broker.consume("read_uncommitted", topics, out)]


def test_min_offsets_per_trigger_and_max_trigger_delay_as_sparks_kafka_source(  # type: ignore[no-untyped-def]
        kafka_source, broker: Broker, tmp_path: Path) -> None:
    """``minOffsetsPerTrigger`` with ``maxTriggerDelay`` under a processing-time trigger, on a
    topic a producer appends to while both queries run: the same micro-batches, admitted after the
    same waits. The first trigger does not wait (Spark's Kafka source counts the delay from its last
    admitted batch, and before the first there is none); a backlog below the minimum waits until
    ``maxTriggerDelay`` has passed since the last batch, then goes in whole."""
    import datetime as dt

    spark = kafka_source
    broker.start()
    rnd = random.Random(SEED + 11)
    topic = f"m{SEED}"
    broker.create_topic(topic, rnd.randint(1, 3))
    broker.produce(topic, rnd.randint(100, 400), rnd.randrange(1 << 40), "idempotent")
    delay_s = 6
    opts = {"subscribe": topic, "startingOffsets": "earliest", "minOffsetsPerTrigger": "100000",
            "maxTriggerDelay": f"{delay_s}s", "includeHeaders": "true"}
    queries = {}
    began = dt.datetime.now(dt.timezone.utc)
    for fmt in ("kafka", "klog"):
        reader = spark.readStream.format(fmt).options(**opts)
        df = reader.option("kafka.bootstrap.servers", broker.bootstrap).load() if fmt == "kafka" \
            else reader.load(str(broker.log_dir))
        queries[fmt] = (df.writeStream.format("memory").queryName(f"delay_{fmt}_{SEED}")
                        .trigger(processingTime="500 milliseconds")
                        .option("checkpointLocation", str(tmp_path / fmt)).start())

    def batches(fmt: str) -> list[dict[str, Any]]:
        return [p for p in queries[fmt].recentProgress if p["numInputRows"]]

    def wait_for(n: int, timeout: float = 120) -> None:
        import time

        deadline = time.monotonic() + timeout
        while not all(len(batches(f)) >= n for f in queries):
            assert time.monotonic() < deadline, {f: len(batches(f)) for f in queries}
            for q in queries.values():
                assert q.exception() is None, q.exception()
            time.sleep(0.2)

    try:
        wait_for(1)
        broker.produce(topic, rnd.randint(20, 200), rnd.randrange(1 << 40), "idempotent")
        wait_for(2)
    finally:
        for q in queries.values():
            q.stop()

    def stamp(p: dict[str, Any]) -> dt.datetime:
        return dt.datetime.fromisoformat(p["timestamp"].replace("Z", "+00:00"))

    got = {}
    for fmt in queries:
        bs = batches(fmt)
        got[fmt] = [(json.loads(b["sources"][0]["startOffset"] or "null"), json.loads(b["sources"][0]["endOffset"]))
                    for b in bs]
        # from the query's first trigger (Spark reports the first one that finds no data too: its
        # ProgressReporter.updateIdleness adds it, so a first batch held back shows as an empty trigger
        # before it), not from before the two queries were started: on a busy 2-core machine starting
        # a query, its Python source runner included, can take longer than the delay (klog's took 6.6 s once)
        triggers = queries[fmt].recentProgress
        first = (stamp(bs[0]) - stamp(triggers[0])).total_seconds()
        assert first < delay_s - 1, (f"{fmt}: the first batch came {first:.1f} s after the query's first trigger "
                                     f"({(stamp(triggers[0]) - began).total_seconds():.1f} s after it was started): "
                                     f"{[(p['timestamp'], p['numInputRows']) for p in triggers[:4]]}")
        waited = (stamp(bs[1]) - stamp(bs[0])).total_seconds()
        assert waited >= delay_s - 1, f"{fmt}: the second batch came {waited:.1f} s after the first"
        rows = rows_of(spark.sql(f"select * from delay_{fmt}_{SEED}").collect())
        got[f"{fmt} rows"] = rows
    ctx = f"KLOG_PARITY_SEED={SEED} {opts}"
    assert got["klog"] == got["kafka"], (ctx, got["klog"], got["kafka"])
    assert_same_rows(got["klog rows"], got["kafka rows"], ctx)


def test_data_lost_between_batches_as_sparks_kafka_source(kafka_source, broker: Broker,  # type: ignore[no-untyped-def]
                                                          tmp_path: Path) -> None:
    """A stream stopped at offset X, retention deleting past X, the stream restarted from its
    checkpoint: with ``failOnDataLoss=true`` both sources fail (klog naming the offsets lost), with
    ``false`` both skip to the log start and return the same rows."""
    import time

    spark = kafka_source
    broker.start()
    rnd = random.Random(SEED + 13)
    topic = f"lost{SEED}"
    # few records at first (retention must not race the first reads), then more until retention
    # has deleted past where the first reads ended
    broker.create_topic(topic, 1, {"internal.segment.bytes": "16384", "retention.bytes": "65536"})
    broker.produce(topic, 40, rnd.randrange(1 << 40), "idempotent")
    outcomes: dict[tuple[str, str], Outcome] = {}
    for fail in ("true", "false"):
        opts = {"subscribe": topic, "startingOffsets": "earliest", "failOnDataLoss": fail}
        for fmt in ("kafka", "klog"):
            where = broker.bootstrap if fmt == "kafka" else str(broker.log_dir)
            run_stream(spark, fmt, opts, where, tmp_path / f"{fmt}-{fail}")
    first_end = broker.admin([topic])["offsets"][f"{topic}-0"]["latest"][0]
    deadline = time.monotonic() + 180
    while broker.admin([topic])["offsets"][f"{topic}-0"]["earliest"][0] <= first_end:  # retention ran past X
        assert time.monotonic() < deadline, "the broker's retention did not delete the first segments"
        broker.produce(topic, 2_000, rnd.randrange(1 << 40), "idempotent")
        time.sleep(2)
    settle(broker, [topic])
    for fail in ("true", "false"):
        opts = {"subscribe": topic, "startingOffsets": "earliest", "failOnDataLoss": fail}
        for fmt in ("kafka", "klog"):
            where = broker.bootstrap if fmt == "kafka" else str(broker.log_dir)
            try:
                outcomes[fmt, fail] = "rows", run_stream(spark, fmt, opts, where, tmp_path / f"{fmt}-{fail}")[0]
            except Exception as exc:  # noqa: BLE001 - the outcome compared
                outcomes[fmt, fail] = "error", f"{type(exc).__name__}: {exc}"
        assert_same_outcome(outcomes["klog", fail], outcomes["kafka", fail],
                            f"KLOG_PARITY_SEED={SEED} data lost between batches, failOnDataLoss={fail}")
    assert outcomes["kafka", "true"][0] == "error" and outcomes["kafka", "false"][0] == "rows", outcomes
    assert "deleted" in outcomes["klog", "true"][1], outcomes["klog", "true"]
