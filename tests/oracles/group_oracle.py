"""Kafka's own view of consumer groups, for the restore tests: ``oracle/GroupRestore.java`` (compiled
against the broker's jars by :func:`broker_fixture.classpath`) run as a client of a broker.

* :func:`admin_offsets`: ``Admin.listConsumerGroupOffsets`` and ``describeConsumerGroups`` of groups;
* :func:`resume`: where a consumer of a group (by its protocol, ``auto.offset.reset=none``, no
  commits) starts on each partition of a topic, and the offset of the first record it gets.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

from kafka_oracle import JAVA

ORACLE = JAVA / "GroupRestore.java"


def classpath() -> str:
    import broker_fixture
    from conftest import skip_unless_runs

    skip_unless_runs(broker_fixture.skip_reason(lambda: broker_fixture.classpath(ORACLE)))
    return broker_fixture.classpath(ORACLE)


def java(*args: str, stdin: str = "", timeout: float = 180, context: str = "") -> str:
    """GroupRestore's standard output; a failure names ``context`` (the test's seed)."""
    from broker_fixture import java_env

    cmd = ["java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Dlog4j2.level=WARN", "-cp", classpath(),
           "GroupRestore", *args]
    proc = subprocess.run(cmd, input=stdin, capture_output=True, text=True, env=java_env(), check=False,
                          timeout=timeout)
    assert proc.returncode == 0, f"{context} GroupRestore {args[0]} failed: {proc.stderr[-3000:]}"
    return proc.stdout


def admin_offsets(bootstrap: str, groups: list[str], context: str = "") -> dict[str, Any]:
    """group -> {"group", "type" (Classic or Consumer), "offsets": {"topic-partition": offset}}."""
    out = java("offsets", bootstrap, *groups, context=context)
    return {d["group"]: d for d in (json.loads(line) for line in out.splitlines() if line.startswith("{"))}


def resume(bootstrap: str, group: str, protocol: str, topic: str, context: str = "") -> dict[str, Any]:
    """{"positions": {"topic-partition": offset}, "first": {"topic-partition": offset of the first
    record}} of a consumer of ``group`` (``protocol``: classic or consumer) subscribed to ``topic``."""
    out = java("resume", bootstrap, group, protocol, topic, context=context)
    found: dict[str, Any] = json.loads([line for line in out.splitlines() if line.startswith("{")][-1])
    return found
