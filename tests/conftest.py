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
