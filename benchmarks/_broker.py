"""What the benchmarks that run Kafka's broker beside Spark's Kafka connector share: the tests'
broker fixture (``tests/oracles/broker_fixture.py``) and connector jars (``tests/oracles/spark_kafka.py``)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

TESTS = Path(__file__).resolve().parent.parent / "tests" / "oracles"


def broker_and_connector(name: str) -> tuple[Any, list[str]] | None:
    """The ``broker_fixture`` module and the connector's jars; None, with ``name``'s skip line
    printed, where the broker or the connector cannot be had here."""
    if str(TESTS) not in sys.path:
        sys.path.insert(0, str(TESTS))
    import broker_fixture
    import spark_kafka

    for reason in (broker_fixture.unavailable(), spark_kafka.unavailable()):
        if reason is not None:
            print(f"benchmarks.{name}: skipped: {reason}")
            return None
    return broker_fixture, [str(j) for j in spark_kafka.connector_jars()]
