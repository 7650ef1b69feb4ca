"""A Spark Kafka-source job ports to klog by changing the format and giving a path.

Every option of Spark's Kafka source and sink is accepted (Spark's own table, below); those that
configure a Kafka client are ignored with one warning per query; those Spark's Kafka source
refuses are refused with Spark's reason. The Python examples of Spark's Kafka guide run ported
verbatim (tests/porting/spark_docs_examples.py), as a Spark job in its own process, and return
exactly the records the test wrote."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from spark_env import short_jvm_env

import storage_core
from storage_core.errors import InvalidOptionError
from storage_core.read.kafka_compat import split_kafka_options
from storage_core.read.options import parse_read_options
from tests.porting.data import append, value

HERE = Path(__file__).resolve().parent

#: Spark 4.x Kafka source options (docs/streaming/structured-streaming-kafka-integration.md), with a legal value.
SPARK_SOURCE_OPTIONS = {
    "kafka.bootstrap.servers": "host1:port1,host2:port2",
    "startingTimestamp": "1000",
    "failOnDataLoss": "true",
    "kafkaConsumer.pollTimeoutMs": "120000",
    "fetchOffset.numRetries": "3",
    "fetchOffset.retryIntervalMs": "10",
    "minPartitions": "4",
    "groupIdPrefix": "spark-kafka-source",
    "kafka.group.id": "my-group",
    "includeHeaders": "true",
    "startingOffsetsByTimestampStrategy": "latest",
    "kafka.security.protocol": "SASL_SSL",
    "kafka.sasl.mechanism": "PLAIN",
    "kafka.sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required password="s3cret";',
    "kafka.ssl.truststore.location": "/etc/kafka/truststore.jks",
    "kafka.session.timeout.ms": "10000",
    "kafka.isolation.level": "read_committed",
}
STREAM_ONLY = {"maxOffsetsPerTrigger": "100", "minOffsetsPerTrigger": "10", "maxTriggerDelay": "15m"}
BATCH_ONLY = {"endingTimestamp": "2000"}
#: Spark 4.x Kafka sink options, and producer configs users set through it.
SPARK_SINK_OPTIONS = {
    "kafka.bootstrap.servers": "host1:port1",
    "topic": "orders",
    "includeHeaders": "true",
    "kafka.partitioner.class": "org.apache.kafka.clients.producer.internals.DefaultPartitioner",
    "kafka.acks": "all",
    "kafka.linger.ms": "5",
    "kafka.compression.type": "lz4",
    "kafka.security.protocol": "SSL",
}
IGNORED_ON_READ = sorted(["kafka.bootstrap.servers", "kafkaConsumer.pollTimeoutMs", "fetchOffset.numRetries",
                          "fetchOffset.retryIntervalMs", "groupIdPrefix", "kafka.group.id", "kafka.security.protocol",
                          "kafka.sasl.mechanism", "kafka.sasl.jaas.config", "kafka.ssl.truststore.location",
                          "kafka.session.timeout.ms"])


def lower(d: dict[str, str]) -> dict[str, str]:
    return {k.lower(): v for k, v in d.items()}  # as Spark hands options to a Python data source


def test_every_source_option_of_spark_is_accepted_by_a_batch_read() -> None:
    o = parse_read_options(lower({**SPARK_SOURCE_OPTIONS, **BATCH_ONLY, **STREAM_ONLY, "path": "/data"}))
    assert list(o.ignored) == IGNORED_ON_READ
    assert o.read_committed and o.include_headers and o.min_partitions == 4
    assert o.starting.timestamp == 1000 and o.ending.timestamp == 2000 and o.starting_timestamp_strategy == "latest"


def test_every_source_option_of_spark_is_accepted_by_a_stream() -> None:
    from spark_logsource.options import parse_stream_options

    o = parse_stream_options(lower({**SPARK_SOURCE_OPTIONS, **STREAM_ONLY, "path": "/data"}))
    assert list(o.read.ignored) == IGNORED_ON_READ
    assert o.max_offsets_per_trigger == 100 and o.min_offsets_per_trigger == 10


def test_every_sink_option_of_spark_is_accepted_by_a_write() -> None:
    pytest.importorskip("pyspark")
    from spark_logsource.writer import parse_write_options
    from storage_core.record.compression import CompressionType

    o = parse_write_options(lower({**SPARK_SINK_OPTIONS, "path": "/data"}))
    assert o.compression == CompressionType.LZ4 and o.topic == "orders"
    assert list(o.ignored) == ["kafka.acks", "kafka.bootstrap.servers", "kafka.linger.ms", "kafka.security.protocol"]
    with pytest.raises(InvalidOptionError, match="disagree"):
        parse_write_options({"path": "/d", "compression": "gzip", "kafka.compression.type": "lz4"})
    with pytest.raises(InvalidOptionError, match=r"kafka.partitioner.class='com.acme.P' cannot run here"):
        parse_write_options({"path": "/d", "kafka.partitioner.class": "com.acme.P"})
    with pytest.raises(InvalidOptionError, match=r"unknown write option 'numpartition' \(did you mean 'numPartitions'"):
        parse_write_options({"path": "/d", "numpartition": "3"})


@pytest.mark.parametrize("key", ["kafka.auto.offset.reset", "kafka.key.deserializer", "kafka.value.deserializer",
                                 "kafka.enable.auto.commit", "kafka.interceptor.classes"])
def test_what_spark_refuses_on_read_is_refused_with_its_reason(key: str) -> None:
    with pytest.raises(InvalidOptionError, match=f"Kafka option '{key[len('kafka.'):]}' is not supported"):
        parse_read_options({"path": "/d", key: "x"})


def test_what_spark_refuses_on_write_is_refused() -> None:
    for key in ("kafka.key.serializer", "kafka.value.serializer"):
        with pytest.raises(InvalidOptionError, match=f"'{key[len('kafka.'):]}' is not supported"):
            split_kafka_options({key: "x"}, write=True)


def test_messages_keep_the_users_spelling(tmp_path: Path) -> None:
    with pytest.raises(InvalidOptionError, match=r"unknown option 'startingOffset' \(did you mean 'startingOffsets'"):
        storage_core.read_arrow(tmp_path, startingOffset="earliest")
    with pytest.raises(InvalidOptionError, match=r"unknown option 'GroupIdPrefx' \(did you mean 'groupIdPrefix'"):
        storage_core.read_arrow(tmp_path, GroupIdPrefx="x")


def test_the_python_api_warns_once_naming_the_ignored_options_and_no_secret(tmp_path: Path,
                                                                           caplog: pytest.LogCaptureFixture) -> None:
    append(tmp_path, "orders", 0, 20)
    with caplog.at_level(logging.WARNING, logger="klog"):
        table = storage_core.read_arrow(tmp_path, **{"kafka.bootstrap.servers": "b:9092", "kafka.sasl.jaas.config":
                                                     'x required password="s3cret";', "groupIdPrefix": "g"}).read_all()
    assert table.column("value").to_pylist() == [value("orders", 0, o).encode() for o in range(20)]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    assert "groupIdPrefix, kafka.bootstrap.servers, kafka.sasl.jaas.config" in warnings[0]
    assert "s3cret" not in warnings[0] and "b:9092" not in warnings[0]


@pytest.mark.spark
def test_the_spark_guides_examples_run_ported_verbatim(tmp_path: Path) -> None:
    pytest.importorskip("pyspark")
    log_dir, out = tmp_path / "kafka-logs", tmp_path / "out"
    log_dir.mkdir()
    sizes = {("topic1", 0): 60, ("topic1", 1): 60, ("topic2", 0): 30, ("events", 0): 10}
    for (t, p), n in sizes.items():
        append(log_dir, t, p, n)
    env = {**os.environ, **short_jvm_env(), "PYSPARK_PYTHON": sys.executable, "PYTHONPATH": os.pathsep.join(
        p for p in (str(HERE.parent), os.environ.get("PYTHONPATH")) if p)}
    proc = subprocess.run([sys.executable, str(HERE / "porting" / "run_examples.py"), str(log_dir), str(out)],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])

    def vals(t: str, p: int, offsets: range) -> list[str]:
        return [value(t, p, o) for o in offsets]

    every = {tp: range(n) for tp, n in sizes.items()}
    assert got["one topic, earliest to latest"] == sorted(vals("topic1", 0, range(60)) + vals("topic1", 1, range(60)))
    assert got["multiple topics, explicit offsets"] == sorted(vals("topic1", 0, range(23, 50)) +
                                                              vals("topic1", 1, range(60)) + vals("topic2", 0, range(30)))
    assert got["a pattern, earliest to latest"] == sorted(v for (t, p), r in every.items() if t != "events"
                                                          for v in vals(t, p, r))
    # each stream starts at latest and reads the 5 records per partition appended while it runs
    streams = [("subscribe one topic", {"topic1"}), ("subscribe one topic, with headers", {"topic1"}),
               ("subscribe multiple topics", {"topic1", "topic2"}), ("subscribe a pattern", {"topic1", "topic2"})]
    for i, (name, topics) in enumerate(streams):
        new = sorted(v for (t, p), n in sizes.items() if t in topics for v in vals(t, p, range(n + 5 * i, n + 5 * i + 5)))
        assert got[name] == new, name
    assert got["subscribe one topic, with headers (headers)"] == ["[('src', 'porting')]"]
    final = sorted(v for (t, p), n in sizes.items() for v in vals(t, p, range(n + 20)))
    for name in ("write to a topic given as an option", "write to the topic in the data",
                 "stream to a topic given as an option", "stream to the topic in the data"):
        assert got[name] == final, name
    assert got["stream to a topic given as an option (topics)"] == ["topic1"]
    assert got["stream to the topic in the data (topics)"] == ["events", "topic1", "topic2"]
    # one warning per query naming what is ignored, and no value of it
    lines = proc.stderr.splitlines()
    count = {what: sum(f"klog {what}: ignoring option kafka.bootstrap.servers " in line for line in lines)
             for what in ("read", "stream", "write", "stream write")}
    assert count == {"read": 3, "stream": 4, "write": 2, "stream write": 2}, [ln for ln in lines if "klog" in ln]
    assert "host1:port1" not in proc.stderr
    # the guide's sinks rely on spark.sql.streaming.checkpointLocation: at-least-once, and said once per query
    assert sum("no checkpointLocation option" in line for line in lines) == 2
