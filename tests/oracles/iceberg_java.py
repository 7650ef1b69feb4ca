"""Apache Iceberg's own Java library in the test suite: the oracle that reads the Iceberg tables
``klog sync`` writes (``tests/tables/test_sync_oracles.py``), since Maven Central serves no Iceberg Spark
runtime for the Spark release the suite runs (the 4.1 runtime fails on 4.2 with
``IncompatibleClassChangeError``).

``tests/oracles/iceberg_java/pom.xml`` pins iceberg-core, iceberg-parquet and iceberg-data with SQLite's
JDBC driver and Hadoop's client; Maven copies them into ``$KLOG_ICEBERG_JAVA_CACHE/<version>/libs-<pom
digest>`` (default ``~/.cache/klog-iceberg-java``) and ``oracle/IcebergRead.java`` is compiled
against them into the same cache. :func:`read_tables` runs it once for several tables of one
warehouse: Iceberg's ``JdbcCatalog`` named ``klog`` on the warehouse's ``catalog.db`` (pyiceberg's
SQL catalog), a full scan of each table with ``IcebergGenerics``.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from broker_fixture import JAVA, BrokerError, compiled_classpath, maven_cache, maven_jars, pom_property, skip_reason

HERE = Path(__file__).resolve().parent
POM = HERE / "iceberg_java" / "pom.xml"
SOURCE = JAVA / "IcebergRead.java"

_classpath: str | None = None
_failure: str | None = None


@dataclass
class IcebergTable:
    """One table as Iceberg's Java library read it."""

    name: str
    offsets: Any  # the current snapshot's klog.offsets, parsed (None: none)
    schema: str  # Iceberg's rendering of the table's schema
    rows: list[dict[str, Any]]  # one per row: binary as base64, timestamps as microseconds


def iceberg_version() -> str:
    return pom_property(POM, "iceberg.version")


def classpath() -> str:
    """The jars and the compiled ``IcebergRead`` (raises :class:`BrokerError` saying why not)."""
    global _classpath, _failure
    if _classpath is not None:
        return _classpath
    if _failure is not None:
        raise BrokerError(_failure)
    try:
        version = iceberg_version()
        cache = maven_cache("KLOG_ICEBERG_JAVA_CACHE", "klog-iceberg-java", version)
        jars = maven_jars(POM, cache, f"iceberg-data-{version}.jar", "Iceberg's Java library")
        _classpath = compiled_classpath(POM, cache, jars, SOURCE, "Iceberg's Java library")
    except BrokerError as e:
        _failure = str(e)
        raise
    return _classpath


def unavailable() -> str | None:
    """None if the oracle can run here, else why not (a skip reason)."""
    return skip_reason(classpath)


def read_tables(warehouse: Path, *names: str, timeout: float = 300) -> dict[str, IcebergTable]:
    """Read the tables ``names`` (``namespace.table``) of the embedded catalog in ``warehouse`` with
    Iceberg's Java library, in one JVM."""
    env = dict(os.environ)
    env.pop("CLASSPATH", None)
    cmd = ["java", "-XX:TieredStopAtLevel=1", "-Dslf4j.internal.verbosity=ERROR", "-cp", classpath(), "IcebergRead",
           str(Path(warehouse).resolve()), *names]
    proc = subprocess.run(cmd, capture_output=True, timeout=timeout, check=False, env=env)
    if proc.returncode != 0:
        raise AssertionError(f"IcebergRead failed (exit {proc.returncode}): "
                             f"{proc.stderr.decode('utf-8', 'replace')[-3000:]}")
    tables: dict[str, IcebergTable] = {}
    current: IcebergTable | None = None
    for line in proc.stdout.decode("ascii").split("\n")[:-1]:
        if line.startswith("#TABLE "):
            current = IcebergTable(line[len("#TABLE "):], None, "", [])
        elif current is None:
            raise AssertionError(f"unexpected IcebergRead output: {line[:200]!r}")
        elif line.startswith("#OFFSETS "):
            current.offsets = json.loads(line[len("#OFFSETS "):])
        elif line.startswith("#SCHEMA "):
            current.schema = line[len("#SCHEMA "):]
        elif line.startswith("#END "):
            assert line == f"#END {current.name} rows={len(current.rows)}", line
            tables[current.name] = current
            current = None
        else:
            current.rows.append(json.loads(line))
    assert current is None and sorted(tables) == sorted(names), (sorted(tables), names)
    return tables
