from __future__ import annotations

import os
import sys
import time
from pathlib import Path

# Spark's Python workers must start with this interpreter (and so with klog installed).
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # benchmarks/

import pytest  # noqa: E402

#: Each slow test file's seconds in CI on the 2-core machine (the mean of two full runs, rounded):
#: ``make test`` hands whole files to its two workers (``--dist loadfile``) in collection order
#: (``--no-loadscope-reorder``), and this order is longest first, so that no worker is left with a
#: long file at the end while the other idles. Files not named here come after, in their usual
#: order. Off by some seconds, the order is still good; a file that grew a lot belongs here.
FILE_SECONDS = {
    "test_cluster.py": 275, "test_kafka_source_parity.py": 265, "test_docs.py": 240, "test_examples.py": 220,
    "test_object_store.py": 120, "test_spark_write_faults.py": 195, "test_broker_reads.py": 195,
    "test_broker_tools.py": 140, "test_benchmarks.py": 130, "test_notebooks.py": 130,
    "test_read_paths_corpus.py": 130, "test_wrong_inputs_table.py": 130, "test_spark_write.py": 130,
    "test_spark_cluster.py": 150, "test_tiered_storage.py": 120, "test_broker_writes.py": 115,
    "test_parallel.py": 85, "test_dump_groups.py": 80, "test_sync.py": 78, "test_streaming.py": 77,
    "test_streaming_kill.py": 75, "test_sync_oracles.py": 65, "test_porting.py": 60, "test_cleaner_crash.py": 55,
    "test_snapshot.py": 55, "test_sink_commit_crash.py": 51, "test_damage_campaign.py": 48,
    "test_commit_crash.py": 47, "test_schema_registry_avro.py": 45, "test_cluster_zookeeper.py": 44,
    "test_worker_python.py": 42, "test_spark_errors.py": 37, "test_cli_logdir.py": 35, "test_corpus.py": 34,
    "test_restore_groups.py": 45,
}


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """The slowest files first (:data:`FILE_SECONDS`), each file's tests in their own order."""
    first = {name: i for i, name in enumerate(sorted(FILE_SECONDS, key=lambda n: -FILE_SECONDS[n]))}
    order = {id(item): n for n, item in enumerate(items)}
    items.sort(key=lambda item: (first.get(item.path.name, len(first)), order[id(item)]))


@pytest.fixture(scope="session")
def spark():  # type: ignore[no-untyped-def]
    """One local[2] SparkSession per test process (about 10 s to start), with Spark's Kafka connector
    on its ``spark.jars`` where it can be had (``tests/spark_kafka.py``)."""
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
    """One Apache Kafka broker per test process (``tests/broker_fixture.py``), a few seconds to
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
    """One Kafka 4.4.0 KRaft cluster per test process (``tests/cluster_fixture.py``): a controller and
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
