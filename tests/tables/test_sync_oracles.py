"""The tables ``klog sync`` writes, read back by the formats' own readers, not by the libraries that
wrote them: Delta's ``delta-spark`` (the release built for the installed Spark) reads each Delta
table, Apache Iceberg's Java library (iceberg-core, iceberg-parquet, iceberg-data, through
Iceberg's ``JdbcCatalog`` on the embedded SQLite catalog) each Iceberg table. Each table must equal
the same range read by klog, row for row and in every column: Delta's against
``spark.read.format("klog")`` (``exceptAll`` both ways and the counts), Iceberg's against
``storage_core.read_arrow``. The range is what the table's offsets say it holds, under
``read_committed``, and the generator's own answer checks klog's read of it.

Maven Central serves no Iceberg Spark runtime for Spark 4.2 (the 4.1 runtime fails on 4.2 with
``IncompatibleClassChangeError``), hence Iceberg's Java library rather than Spark for Iceberg.

The workloads are random (``KLOG_SYNC_SEED`` replays one; a failure names its seed): transactions
committed, aborted and left open, several partitions and topics, headers, LogAppendTime batches;
each is synced, appended to and synced again. One Spark process and one JVM read every table,
and a tampered copy of a table (one field of one row changed) must be seen by each oracle."""

from __future__ import annotations

import base64
import json
import os
import random
import shutil
import subprocess
import sys
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, NoReturn

import broker_fixture as bf
import iceberg_java
import pyarrow as pa
import pytest
from spark_env import short_jvm_env
from sync_gen import SyncWorkload

import storage_core
from storage_core.tables import sync

TESTS = Path(__file__).resolve().parents[1]
DELTA_POM = TESTS / "oracles" / "delta_spark" / "pom.xml"
SEED = int(os.environ.get("KLOG_SYNC_SEED", random.randrange(1 << 30)))
WAREHOUSE = "iceberg"
TAMPERED = "tampered"


@dataclass
class Case:
    """One workload synced into a Delta table and an Iceberg table, twice."""

    name: str
    work: SyncWorkload
    topics: str
    columns: dict[str, str]  # the column options of both the syncs and klog's reads
    delta: Path
    iceberg: str  # namespace.table in the warehouse
    offsets: dict[str, dict[int, int]]  # what both tables hold after the second sync

    def read_options(self) -> dict[str, str]:
        """``format("klog")``'s options for the range the tables hold."""
        ending = {t: {str(p): o for p, o in parts.items()} for t, parts in self.offsets.items()}
        return {"topics": self.topics, "isolationLevel": "read_committed", "startingOffsets": "earliest",
                "endingOffsets": json.dumps(ending), **self.columns}

    def klog_rows(self) -> pa.Table:
        return storage_core.read_arrow(self.work.root, **self.read_options()).read_all()


#: name, seed offset, topics, partitions, the generator's extras (headers, LogAppendTime, null values), the column options
WORKLOADS: list[tuple[str, int, tuple[str, ...], int, dict[str, Any], dict[str, str]]] = [
    ("headers", 0, ("orders",), 3, {"headers": True, "append_time": True}, {"includeHeaders": "true"}),
    ("topics", 1, ("orders", "payments"), 2, {"tombstones": 0.1}, {"includeMetadata": "true"}),
]


@pytest.fixture(scope="module")
def cases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Case]:
    root = tmp_path_factory.mktemp("sync-oracles")
    out = {}
    for name, offset, topics, partitions, extras, columns in WORKLOADS:
        work = SyncWorkload(root / name / "data", SEED + offset, topics=topics, partitions=partitions, **extras)
        delta, iceberg, chosen = root / name / "delta", f"kafka.{name}", ",".join(topics)
        work.write(30)
        for _ in range(2):
            d = sync(work.root, delta, format="delta", topics=chosen, commit_records=150, **columns)
            i = sync(work.root, iceberg, format="iceberg", warehouse=root / WAREHOUSE, topics=chosen,
                     commit_records=150, **columns)
            assert d.offsets == i.offsets, (d.offsets, i.offsets, f"seed {SEED}")
            work.write(20)  # the second round is read by neither sync: the tables hold less than the log
        out[name] = Case(name, work, chosen, columns, delta, iceberg, d.offsets)
    return out


def _plain(v: Any) -> Any:
    """A value of a klog row as the Java oracle prints it: bytes as base64, timestamps as microseconds."""
    if isinstance(v, bytes):
        return base64.b64encode(v).decode()
    if isinstance(v, datetime):
        return (v - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)
    if isinstance(v, list):
        return [_plain(e) for e in v]
    if isinstance(v, dict):
        return {k: _plain(e) for k, e in v.items()}
    return v


def _ordered(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(rows, key=lambda r: (r["topic"], r["partition"], r["offset"]))


def test_klog_reads_what_the_generator_wrote(cases: dict[str, Case]) -> None:
    """The reference side of both oracles: klog's read of each table's range is the generator's
    answer (read_committed records, their keys, values and headers), so the oracles compare the
    tables with the truth, not only with klog."""
    for case in cases.values():
        rows = case.klog_rows().to_pylist()
        expected = case.work.expected()
        want = {(t, p, o): kv for (t, p), recs in expected.items() for o, kv in recs.items()
                if o < case.offsets[t][p]}
        got = {(r["topic"], r["partition"], r["offset"]): (r["key"], r["value"]) for r in rows}
        assert len(rows) == len(got) == len(want) and got == want, (case.name, f"seed {SEED}")
        if "includeHeaders" in case.columns:
            for r in rows:
                hdrs = case.work.headers[(r["topic"], r["partition"])][r["offset"]]
                assert r["headers"] == ([{"key": k, "value": v} for k, v in hdrs] or None), (r, f"seed {SEED}")


# ------------------------------------------------------------------ Delta, read by delta-spark


def _delta_jars() -> list[Path]:
    version = bf.pom_property(DELTA_POM, "delta.version")
    cache = bf.maven_cache("KLOG_DELTA_SPARK_CACHE", "klog-delta-spark", version)
    jars = bf.maven_jars(DELTA_POM, cache, f"delta-spark_2.13-{version}.jar", "delta-spark")
    # Delta's own jars only: the rest are Spark's dependencies, which the installed Spark ships
    return [j for j in jars if j.name.startswith("delta-")]


def _unavailable(reason: str) -> NoReturn:
    if bf.required():
        pytest.fail(f"{bf.REQUIRE_ENV}=1 but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def delta_spark(cases: dict[str, Case], tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """delta-spark's reading of every Delta table (and of a tampered copy), in one Spark process."""
    pytest.importorskip("pyspark")
    try:
        jars = _delta_jars()
    except bf.BrokerError as e:
        _unavailable(str(e))
    work = tmp_path_factory.mktemp("delta-oracle")
    # the tampered copy: one row's timestampType changed, every other field and row as synced
    tampered = work / TAMPERED
    shutil.copytree(cases["headers"].delta, tampered)
    from deltalake import DeltaTable

    victim = cases["headers"].klog_rows().slice(7, 1).to_pylist()[0]
    DeltaTable(tampered).update(updates={"timestampType": "timestampType + 7"},
                                predicate=f"\"partition\" = {victim['partition']} AND \"offset\" = {victim['offset']}")
    specs = [{"name": c.name, "delta": str(c.delta), "log_dir": str(c.work.root), "options": c.read_options()}
             for c in cases.values()]
    specs.append({**specs[0], "name": TAMPERED, "delta": str(tampered)})
    (work / "cases.json").write_text(json.dumps(specs))
    repo = str(TESTS.parent)
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable, **short_jvm_env(),
               PYTHONPATH=os.pathsep.join(filter(None, [repo, os.environ.get("PYTHONPATH")])))
    proc = subprocess.run([sys.executable, str(TESTS / "oracles" / "sync_spark_oracle.py"), ",".join(map(str, jars)),
                           str(work / "cases.json")], capture_output=True, text=True, timeout=600, env=env)
    results = {}
    for line in proc.stdout.splitlines():
        if line.startswith("ORACLE "):
            got = json.loads(line[len("ORACLE "):])
            results[got["name"]] = got
    assert proc.returncode == 0 and len(results) == len(specs), (proc.returncode, proc.stderr[-4000:], f"seed {SEED}")
    return results


@pytest.mark.spark
@pytest.mark.parametrize("name", [w[0] for w in WORKLOADS])
def test_delta_spark_reads_what_klog_sync_wrote(name: str, cases: dict[str, Case],
                                                delta_spark: dict[str, dict[str, Any]]) -> None:
    case, got = cases[name], delta_spark[name]
    expected = sum(o < case.offsets[t][p] for (t, p), recs in case.work.expected().items() for o in recs)
    assert got["table"] == got["klog"] == expected, (got, f"seed {SEED}")
    assert got["only_table"] == got["only_klog"] == 0, (got, f"seed {SEED}")
    assert got["table_columns"] == got["klog_columns"] and got["table_schema"] == got["klog_schema"], got


@pytest.mark.spark
def test_delta_oracle_sees_a_tampered_table(delta_spark: dict[str, dict[str, Any]]) -> None:
    """The oracle can fail: a copy of a table with one field of one row changed differs by that row."""
    got = delta_spark[TAMPERED]
    assert got["table"] == got["klog"] and got["only_table"] == got["only_klog"] == 1, got


# ------------------------------------------------------------------ Iceberg, read by Iceberg's Java library


@pytest.fixture(scope="module")
def iceberg_read(cases: dict[str, Case]) -> dict[str, iceberg_java.IcebergTable]:
    """Iceberg's Java library's reading of every Iceberg table (and of a tampered copy), in one JVM."""
    reason = iceberg_java.unavailable()
    if reason is not None:
        _unavailable(reason)
    from pyiceberg.catalog import load_catalog

    warehouse = cases["headers"].work.root.parent.parent / WAREHOUSE
    catalog = load_catalog("klog", type="sql", uri=f"sqlite:///{warehouse / 'catalog.db'}", warehouse=warehouse.as_uri())
    # the tampered copy: klog's rows with one record's null headers made an empty list (the two must differ)
    rows = cases["headers"].klog_rows()
    victim = rows.column("headers").to_pylist().index(None)
    headers = rows.column("headers").to_pylist()
    headers[victim] = []
    rows = rows.set_column(rows.schema.get_field_index("headers"), "headers",
                           pa.array(headers, rows.schema.field("headers").type))
    catalog.create_table(f"kafka.{TAMPERED}", schema=rows.schema).append(rows)
    return iceberg_java.read_tables(warehouse, *(c.iceberg for c in cases.values()), f"kafka.{TAMPERED}")


def _differences(table: list[dict[str, Any]], klog: list[dict[str, Any]]) -> str:
    """The first rows where the table and klog differ, for the failure message."""
    out = [f"{len(table)} rows in the table, {len(klog)} read by klog"]
    for t, k in zip(table, klog, strict=False):
        if t != k:
            out.append(f"table: {t}\nklog:  {k}")
            if len(out) > 3:
                break
    return "\n".join(out)


@pytest.mark.parametrize("name", [w[0] for w in WORKLOADS])
def test_iceberg_java_reads_what_klog_sync_wrote(name: str, cases: dict[str, Case],
                                                 iceberg_read: dict[str, iceberg_java.IcebergTable]) -> None:
    case, got = cases[name], iceberg_read[cases[name].iceberg]
    klog = case.klog_rows()
    want = _ordered([_plain(r) for r in klog.to_pylist()])
    table = _ordered(got.rows)
    assert table == want, f"seed {SEED}: {_differences(table, want)}"
    assert all(list(r) == klog.schema.names for r in got.rows), (got.schema, klog.schema.names)
    assert "timestamp: optional timestamptz" in got.schema, got.schema
    assert got.offsets == {t: {str(p): o for p, o in parts.items()} for t, parts in case.offsets.items()}, got.offsets


def test_iceberg_oracle_sees_a_tampered_table(cases: dict[str, Case],
                                              iceberg_read: dict[str, iceberg_java.IcebergTable]) -> None:
    """The oracle can fail: a table whose one row has [] for null headers differs by that row."""
    want = _ordered([_plain(r) for r in cases["headers"].klog_rows().to_pylist()])
    table = _ordered(iceberg_read[f"kafka.{TAMPERED}"].rows)
    assert len(table) == len(want) and sum(t != k for t, k in zip(table, want, strict=True)) == 1
