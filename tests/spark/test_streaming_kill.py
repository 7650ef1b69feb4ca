"""Kill-and-restart: a streaming query (klog → transform → klog) runs in its own process, which
is SIGKILLed (JVM, Python workers and all) at random points ``KLOG_STREAM_KILLS`` times (default 1;
10 passed on 2026-12-02) and restarted from its checkpoint while records keep being appended; a last
run drains the input with AvailableNow. The output must hold every input record exactly once, in
per-partition order."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from benchmarks.producer import produce
from storage_core.log.log import Log

pytestmark = [pytest.mark.fault, pytest.mark.spark]
pytest.importorskip("pyspark")

CHILD = textwrap.dedent("""
    import sys
    from pyspark.sql import SparkSession, functions as F
    src, out, ck, mode = sys.argv[1:5]
    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    q = (spark.readStream.format("klog").option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "90")
         .load(src).select("key", F.upper(F.col("value").cast("string")).alias("value"), "partition")
         .writeStream.format("klog").option("topic", "u").option("numPartitions", 3).option("checkpointLocation", ck)
         .trigger(**({"availableNow": True} if mode == "drain" else {"processingTime": "100 milliseconds"}))
         .start(out))
    print("RUNNING", flush=True)
    q.awaitTermination()
    print("DONE", flush=True)
""")


def partition_values(root: Path, topic: str) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for d in sorted(root.glob(f"{topic}-*")):
        if not any(d.glob("*.log")):
            continue
        with Log(d) as lg:
            out[int(d.name.rsplit("-", 1)[1])] = [r.value.decode() for b in lg.batches() for r in b.records()]
    return out


def test_query_killed_and_restarted_output_exactly_once(tmp_path: Path) -> None:
    src, out, ck = tmp_path / "in", tmp_path / "out", tmp_path / "ck"
    src.mkdir()
    produced = 600  # with 90 per trigger: the kill lands among several micro-batches, the drain runs a few more
    produce(str(src), "t", partitions=3, records=produced, rate=0, per_append=30)
    rng = random.Random(7)
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    killed_with_output = 0  # trials in which the query committed at least one batch before dying
    last_committed = 0
    kills = int(os.environ.get("KLOG_STREAM_KILLS", "1"))
    for _trial in range(kills):
        child = subprocess.Popen([sys.executable, "-c", CHILD, str(src), str(out), str(ck), "run"],
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env,
                                 start_new_session=True)
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "RUNNING"
        planned = len(list((ck / "offsets").glob("[0-9]*"))) if (ck / "offsets").exists() else 0
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and (not (ck / "offsets").exists() or
                                               len(list((ck / "offsets").glob("[0-9]*"))) <= planned):
            time.sleep(0.05)  # until this run plans a micro-batch of its own
        time.sleep(rng.uniform(0.0, 2.5))  # then anywhere in reading, staging, committing or the next batches
        os.killpg(child.pid, signal.SIGKILL)
        child.wait(timeout=60)
        committed = len(list((ck / "commits").glob("[0-9]*"))) if (ck / "commits").exists() else 0
        killed_with_output += committed > last_committed
        last_committed = committed
        produce(str(src), "t", partitions=3, records=60, rate=0, per_append=30, start=produced)  # keeps coming
        produced += 60
    drain = subprocess.run([sys.executable, "-c", CHILD, str(src), str(out), str(ck), "drain"], capture_output=True,
                           text=True, env=env, timeout=600)
    assert "DONE" in drain.stdout, drain.stderr[-3000:]
    assert killed_with_output >= kills // 2  # the kills landed while the query was writing
    got, want = partition_values(out, "u"), partition_values(src, "t")
    assert sum(len(v) for v in want.values()) == produced
    assert got == {p: [v.upper() for v in vs] for p, vs in want.items()}  # exactly once, in partition order
