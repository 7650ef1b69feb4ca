from __future__ import annotations

import os
import sys
import time
from pathlib import Path

# Spark's Python workers must start with this interpreter (and so with klog installed).
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
# the shared helpers by their module names: this folder (fixtures, doc blocks), the oracles (Kafka's
# broker and cluster, the Java harnesses and their runners) and the generators of inputs
for _helpers in ("generators", "oracles", ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent / _helpers))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # benchmarks/

import pytest  # noqa: E402

#: The test files that take longest (about 40 s and more of a full run on the 2-core machine, in
#: that order), run first. ``make test`` distributes whole files (``--dist loadfile``) in the
#: collection order (``--no-loadscope-reorder``; xdist's own order, by number of tests, put
#: one-test files of minutes last), each worker taking the next file as it finishes one: long
#: files first leave the short ones to even out the end, instead of one worker alone at the end.
LONGEST_FIRST = (
    "test_cluster.py", "test_docs.py", "test_kafka_source_parity.py", "test_examples.py", "test_spark_cluster.py",
    "test_broker_reads.py", "test_spark_write_faults.py", "test_spark_write.py", "test_benchmarks.py",
    "test_broker_tools.py", "test_read_paths_corpus.py", "test_tiered_storage.py", "test_wrong_inputs_table.py",
    "test_object_store.py", "test_streaming_kill.py", "test_notebooks.py", "test_broker_writes.py",
    "test_commit_crash.py", "test_dump_groups.py", "test_streaming.py", "test_sync.py", "test_parallel.py",
    "test_cleaner_crash.py", "test_damage_campaign.py", "test_sync_oracles.py", "test_sink_commit_crash.py",
    "test_cli_export.py", "test_porting.py", "test_cluster_zookeeper.py", "test_corpus.py", "test_snapshot.py",
    "test_schema_registry_avro.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the rest keep their order


@pytest.fixture(scope="session")
def spark():  # type: ignore[no-untyped-def]
    """One local[2] SparkSession per test process (about 10 s to start), with Spark's Kafka connector
    on its ``spark.jars`` where it can be had (``tests/oracles/spark_kafka.py``)."""
    pyspark = pytest.importorskip("pyspark")
    import spark_kafka
    from pyspark.sql import SparkSession

    del pyspark
    builder = (SparkSession.builder.master("local[2]").appName("klog-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "4")
               .config("spark.sql.session.timeZone", "UTC"))
    if spark_kafka.unavailable() is None:  # Spark's own Kafka source, the peer of the parity tests
        builder = builder.config("spark.jars", ",".join(map(str, spark_kafka.connector_jars())))
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def skip_unless_runs(reason: str | None) -> None:
    """Skip with ``reason`` (why Kafka cannot run here), or fail under ``KLOG_REQUIRE_BROKER=1`` (CI)."""
    import broker_fixture

    if reason is not None:
        if broker_fixture.required():
            pytest.fail(f"{broker_fixture.REQUIRE_ENV}=1 but {reason}")
        pytest.skip(reason)


@pytest.fixture(scope="session")
def broker(tmp_path_factory):  # type: ignore[no-untyped-def]
    """One Apache Kafka broker per test process (``tests/oracles/broker_fixture.py``), a few seconds to
    start; tests make fresh topics. Skips with the reason where the broker cannot run, fails
    instead under ``KLOG_REQUIRE_BROKER=1`` (CI)."""
    import broker_fixture

    skip_unless_runs(broker_fixture.unavailable())
    b = broker_fixture.Broker(tmp_path_factory.mktemp("kafka-broker"))
    b.start()
    yield b
    b.stop()


@pytest.fixture(scope="session")
def cluster(tmp_path_factory):  # type: ignore[no-untyped-def]
    """One Kafka 4.4.0 KRaft cluster per test process (``tests/oracles/cluster_fixture.py``): a controller and
    three brokers, each its own JVM, about 20 s to start. Tests make fresh topics; a test that leaves
    a broker down (the messy scenario does) leaves it so for the next: call ``cluster.start()`` (it
    starts every broker not running) where all three are needed. Skips or fails as ``broker`` does."""
    import cluster_fixture

    skip_unless_runs(cluster_fixture.unavailable())
    c = cluster_fixture.Cluster(tmp_path_factory.mktemp("kafka-cluster"))
    try:
        c.start()
        yield c
        c.stop()
    finally:
        c.kill()


@pytest.fixture(scope="session")
def messy(cluster, tmp_path_factory):  # type: ignore[no-untyped-def]
    """One run of ``cluster_fixture.messy_scenario`` per test process on the ``cluster`` fixture
    (every broker started first; about 100 s), with a random seed it prints (``KLOG_CLUSTER_SEED``
    sets it; Kafka's own choices of leaders still vary), topics ``messy-*``; it leaves
    ``messy.dead`` down: tests needing all brokers call ``cluster.start()``. Every node's dir is copied
    live right after it (``messy.live``), while the dead broker is still down."""
    import random

    import cluster_fixture

    cluster.start()
    seed = int(os.environ.get("KLOG_CLUSTER_SEED") or random.randrange(2**31))
    m = cluster_fixture.messy_scenario(cluster, seed, "messy")
    time.sleep(2.5)  # the live brokers' high-watermark checkpoints catch up (replica.high.watermark.checkpoint.interval.ms)
    m.live = cluster.snapshot(tmp_path_factory.mktemp("messy-copies") / "live")
    return m
