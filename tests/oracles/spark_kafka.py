"""Spark's own Kafka source and sink (``format("kafka")``) in the test suite: the peer that
``format("klog")`` is compared with, row for row (``test_kafka_source_parity.py``) and for speed
(``benchmarks/kafka_source.py``).

The connector (``org.apache.spark:spark-sql-kafka-0-10_2.13``) must be of exactly the installed
``pyspark``'s release; ``tests/oracles/spark_kafka_pom/pom.xml`` pins it, and Maven copies it with its
dependencies into ``$KLOG_SPARK_KAFKA_CACHE/<version>/libs-<pom digest>`` (default
``~/.cache/klog-spark-kafka``). The jars Spark already ships (Hadoop's client, lz4, snappy, Scala)
are left out of ``spark.jars``: two copies of a class on one classpath is a bug of its own.
"""

from __future__ import annotations

import re
from pathlib import Path

from broker_fixture import BrokerError, maven_cache, maven_jars, pom_property, skip_reason

HERE = Path(__file__).resolve().parent
POM = HERE / "spark_kafka_pom" / "pom.xml"
_JAR_VERSION = re.compile(r"-\d[\w.]*\.jar$")

_jars: list[Path] | None = None
_failure: str | None = None


def spark_version() -> str:
    return pom_property(POM, "spark.version")


def cache_dir() -> Path:
    return maven_cache("KLOG_SPARK_KAFKA_CACHE", "klog-spark-kafka", spark_version())


def _artifact(jar: str) -> str:
    """``lz4-java-1.10.1.jar`` -> ``lz4-java``."""
    return _JAR_VERSION.sub("", jar)


def connector_jars() -> list[Path]:
    """The connector's jars to add to ``spark.jars`` (raises :class:`BrokerError` saying why not)."""
    global _jars, _failure
    if _jars is not None:
        return _jars
    if _failure is not None:
        raise BrokerError(_failure)
    try:
        import pyspark

        want = spark_version()
        if pyspark.__version__ != want:
            raise BrokerError(
                f"Spark's Kafka connector unavailable: pyspark {pyspark.__version__} is installed, "
                f"{POM.relative_to(HERE.parent)} pins the connector of Spark {want} (Maven Central serves none "
                f"newer); 'make test' installs pyspark=={want}")
        jars = maven_jars(POM, cache_dir(), f"spark-sql-kafka-0-10_2.13-{want}.jar", "Spark's Kafka connector")
        shipped = {_artifact(j.name) for j in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}
        _jars = [j for j in jars if _artifact(j.name) not in shipped]
    except BrokerError as e:
        _failure = str(e)
        raise
    return _jars


def unavailable() -> str | None:
    """None if ``format("kafka")`` can run here, else why not (a skip reason)."""
    return skip_reason(connector_jars)
