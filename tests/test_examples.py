"""Every example runs (in its own process, as a user runs it)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import shared_fixtures as sf
from spark_env import short_jvm_env

REPO = Path(__file__).resolve().parent.parent
#: Examples with an argparse --help (the quickstart takes no arguments: it is what `make quickstart` runs).
HELP_EXAMPLES = ["backfill_range.py", "read_broker_dir.py", "stream_pipeline.py", "compact_topic.py"]


def run(script: str, *args: str, cwd: Path, env: dict[str, str] | None = None,
        timeout: int = 600) -> subprocess.CompletedProcess[str]:
    pythonpath = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
    full = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYTHONPATH=pythonpath, **(env or {}))
    full.update(short_jvm_env())
    return subprocess.run([sys.executable, str(REPO / "examples" / script), *args], capture_output=True, text=True,
                          env=full, timeout=timeout, cwd=cwd)


@pytest.mark.parametrize("example", HELP_EXAMPLES)
def test_every_example_has_help(example: str, tmp_path: Path) -> None:
    res = run(example, "--help", cwd=tmp_path, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.startswith(f"usage: {example} ") and "python examples/" in res.stdout


@pytest.mark.spark
def test_backfill_range_sample_then_own_dir(tmp_path: Path) -> None:
    res = run("backfill_range.py", cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "sample: wrote 7200 events to topic 'events' (3 partitions)" in res.stdout
    assert "backfilled events from 2025-11-22T10:30:00Z to 2025-11-22T11:00:00Z: 1800 records" in res.stdout
    out = tmp_path / "klog-backfill" / "backfill-events"
    import pyarrow.dataset as ds

    table = ds.dataset(out, format="parquet", partitioning="hive").to_table()
    assert table.num_rows == 1800
    assert {"offset", "timestamp", "key", "user", "page", "amount", "n", "partition"} <= set(table.column_names)
    assert sorted(table.column("n").to_pylist()) == list(range(1800, 3600))
    # the same log dir as a user's own: a 10-minute ISO range, values kept as strings
    res = run("backfill_range.py", "--log-dir", str(tmp_path / "klog-backfill" / "data"), "--topic", "events",
              "--start", "2025-11-22T11:50Z", "--end", "2025-11-22 12:30", "--output", str(tmp_path / "own"),
              cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "2025-11-22T11:50:00Z to 2025-11-22T12:30:00Z: 600 records" in res.stdout
    assert "value" in ds.dataset(tmp_path / "own", format="parquet", partitioning="hive").schema.names


def test_backfill_range_wrong_arguments(tmp_path: Path) -> None:
    res = run("backfill_range.py", "--log-dir", str(tmp_path), cwd=tmp_path)
    assert res.returncode == 2 and "with --log-dir, give --start and --end" in res.stderr
    res = run("backfill_range.py", "--start", "noon", cwd=tmp_path)
    assert res.returncode == 2 and "expected epoch milliseconds or ISO-8601" in res.stderr
    res = run("backfill_range.py", "--start", "2025-11-22T11:00Z", "--end", "2025-11-22T10:00Z", cwd=tmp_path)
    assert res.returncode == 2 and "must be after --start" in res.stderr
    res = run("backfill_range.py", "--log-dir", str(tmp_path / "nope"), "--start", "1", "--end", "2", cwd=tmp_path)
    assert res.returncode == 2 and "no such directory" in res.stderr


@pytest.mark.spark
def test_read_broker_dir_builds_a_sample_without_fixtures(tmp_path: Path) -> None:
    res = run("read_broker_dir.py", cwd=tmp_path, env={"KLOG_SHARED": str(tmp_path / "no-shared")})
    assert res.returncode == 0, res.stderr[-3000:]
    assert "no broker dir given and no shared fixture found: built a sample" in res.stdout
    assert "2 topics, 3,200 records read with spark.read.format('klog')" in res.stdout
    assert "newest records of orders:" in res.stdout
    assert "read-only: all " in res.stdout and "are unchanged" in res.stdout


def test_read_broker_dir_wrong_arguments(tmp_path: Path) -> None:  # checked before Spark starts
    res = run("read_broker_dir.py", str(tmp_path / "nope"), cwd=tmp_path)
    assert res.returncode == 2 and "no such log directory" in res.stderr
    (tmp_path / "orders-0").mkdir()
    (tmp_path / "orders-0" / "00000000000000000000.log").touch()
    res = run("read_broker_dir.py", str(tmp_path), "--topics", "nope", cwd=tmp_path)
    assert res.returncode == 2 and f"error: no such topic in {tmp_path}: nope; topics there: orders" in res.stderr


@pytest.mark.spark
@pytest.mark.conformance
@pytest.mark.skipif(not sf.available(), reason=sf.MISSING_REASON)
def test_read_broker_dir_real_broker_fixture(tmp_path: Path) -> None:
    broker_dir = sf.KAFKA_FIXTURES / "rjmfernandes+flink-on-prem" / "43d3daa" / "data"
    res = run("read_broker_dir.py", str(broker_dir), "--topics", "orders,connect-status", cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "2 topics, 17,240 records" in res.stdout  # orders-0 17,212 + connect-status 28 (Kafka's decoding)
    assert "newest records of orders:" in res.stdout and "|0        |17211 |2024-04-19 15:49:54.336|" in res.stdout
    assert "are unchanged" in res.stdout


@pytest.mark.spark
def test_stream_pipeline_then_resume(tmp_path: Path) -> None:
    res = run("stream_pipeline.py", "--rounds", "3", "--orders-per-round", "60", cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "orders read: 240; large orders: 120; in orders-large: 120 (exactly once)" in res.stdout
    again = run("stream_pipeline.py", "--rounds", "1", "--orders-per-round", "60", "--resume", cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "orders read: 300; large orders: 150; in orders-large: 150 (exactly once)" in again.stdout


# compact_topic.py's run, and what it prints, is docs/examples.md's console block (tests/test_docs.py)


def test_new_examples_reject_bad_arguments(tmp_path: Path) -> None:
    for script, args in (("stream_pipeline.py", ["--rounds", "0"]), ("compact_topic.py", ["--updates", "1"])):
        res = run(script, *args, cwd=tmp_path, timeout=120)
        assert res.returncode == 2 and "error:" in res.stderr, (script, res.stderr)
