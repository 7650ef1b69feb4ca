"""The reader on ``local-cluster[2,1,1024]``: two executor JVMs, each with its own Python workers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import shared_fixtures as sf

pytestmark = [pytest.mark.spark, pytest.mark.slow]

SCRIPT = textwrap.dedent("""
    import json, sys
    from pyspark.sql import SparkSession
    spark = (SparkSession.builder.master("local-cluster[2,1,1024]").appName("klog-cluster")
             .config("spark.ui.enabled", "false").config("spark.sql.session.timeZone", "UTC").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    out = {}
    for d in sys.argv[1:]:
        df = spark.read.format("klog").option("maxBytesPerPartition", "20000").load(d)
        rows = df.select("topic", "partition", "offset").collect()
        out[d] = {"count": len(rows), "tasks": df.rdd.getNumPartitions(),
                  "executors": sorted({e for e in df.rdd.mapPartitions(
                      lambda it: [__import__("pyspark").TaskContext.get().getLocalProperty("x") or
                                  __import__("os").getpid()]).collect()}),
                  "offsets": sorted([r.topic, r.partition, r.offset] for r in rows)}
    print("RESULT " + json.dumps(out))
    spark.stop()
""")


@pytest.mark.skipif(not sf.available(), reason=sf.MISSING_REASON)
def test_broker_dirs_on_local_cluster(tmp_path: Path) -> None:
    import pyspark

    dirs = [sf.KAFKA_FIXTURES / "VolodymyrZee+kafka/587a452", sf.KAFKA_FIXTURES / "Niloufar1171+LDI-POC/8030792"]
    env = dict(os.environ, SPARK_HOME=str(Path(pyspark.__file__).parent), PYSPARK_PYTHON=sys.executable,
               PYSPARK_DRIVER_PYTHON=sys.executable)
    script = tmp_path / "cluster.py"
    script.write_text(SCRIPT)
    res = subprocess.run([sys.executable, str(script), *map(str, dirs)], capture_output=True, text=True, env=env,
                         timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(next(line for line in res.stdout.splitlines() if line.startswith("RESULT "))[7:])
    for d in dirs:
        expected = []
        for seg in sorted(d.glob("*/*.log")):
            topic, _, part = seg.parent.name.rpartition("-")
            for line in sf.expected_lines(seg):
                o = json.loads(line)
                if o.get("offset") is not None and not o["is_control"]:
                    expected.append([topic, int(part), o["offset"]])
        got = out[str(d)]
        assert got["offsets"] == sorted(expected)
        assert got["tasks"] > 1
    assert len({pid for d in dirs for pid in out[str(d)]["executors"]}) >= 2  # Python workers of both executors
