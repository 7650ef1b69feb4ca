"""The reader on ``local-cluster[2,1,1024]``: two executor JVMs, each with its own Python workers.

Every broker log dir of the fixtures is read on the cluster; per partition the count, offsets,
value bytes and the sum of CRC-32s of keys and of values (Spark's ``crc32``, zlib's here) must
equal Kafka's decoding.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import textwrap
import zlib
from pathlib import Path

import pytest
import shared_fixtures as sf

pytestmark = [pytest.mark.spark, pytest.mark.slow]

SCRIPT = textwrap.dedent("""
    import json, os, sys
    from pyspark.sql import SparkSession, functions as F
    spark = (SparkSession.builder.master("local-cluster[2,1,1024]").appName("klog-cluster")
             .config("spark.ui.enabled", "false").config("spark.sql.session.timeZone", "UTC").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    out = {}
    pids = set()
    options = json.loads(os.environ.get("KLOG_TEST_OPTIONS", "{}"))  # per dir (failOnDataLoss=false where lost)
    for d in sys.argv[1:]:
        df = spark.read.format("klog").options(**options.get(d, {})).option("maxBytesPerPartition", "1000000").load(d)
        rows = df.groupBy("topic", "partition").agg(
            F.count("*").alias("n"), F.min("offset").alias("lo"), F.max("offset").alias("hi"),
            F.sum(F.length("value")).alias("bytes"), F.sum(F.crc32("key")).alias("kc"),
            F.sum(F.crc32("value")).alias("vc")).collect()
        out[d] = sorted([r.topic, r.partition, r.n, r.lo, r.hi, r.bytes or 0, r.kc or 0, r.vc or 0] for r in rows)
    biggest = max(sys.argv[1:], key=lambda d: sum(f.stat().st_size for f in __import__("pathlib").Path(d).rglob("*.log")))
    df = spark.read.format("klog").options(**options.get(biggest, {})).option("maxBytesPerPartition", "100000").load(biggest)
    pids |= set(df.rdd.mapPartitions(lambda it: [os.getpid()]).collect())
    print("RESULT " + json.dumps({"dirs": out, "pids": len(pids)}))
    spark.stop()
""")


def _expected(log_dir: Path) -> list[list[object]]:
    from test_spark_read import _expected as rows

    agg: dict[tuple[str, int], list[int]] = {}
    for topic, part, offset, k, v, _ts in rows(log_dir):
        a = agg.setdefault((topic, part), [0, offset, offset, 0, 0, 0])
        key = base64.b64decode(k) if k is not None else None
        value = base64.b64decode(v) if v is not None else None
        a[0] += 1
        a[1] = min(a[1], offset)
        a[2] = max(a[2], offset)
        a[3] += len(value) if value is not None else 0
        a[4] += zlib.crc32(key) if key is not None else 0
        a[5] += zlib.crc32(value) if value is not None else 0
    return sorted([t, p, *a] for (t, p), a in agg.items())


@pytest.mark.skipif(not sf.available(), reason=sf.MISSING_REASON)
def test_broker_dirs_on_local_cluster(tmp_path: Path) -> None:
    import pyspark
    from test_spark_read import LOG_DIRS

    env = dict(os.environ, SPARK_HOME=str(Path(pyspark.__file__).parent), PYSPARK_PYTHON=sys.executable,
               PYSPARK_DRIVER_PYTHON=sys.executable,
               KLOG_TEST_OPTIONS=json.dumps({str(d): sf.tolerant_options(d) for d in LOG_DIRS}))
    script = tmp_path / "cluster.py"
    script.write_text(SCRIPT)
    res = subprocess.run([sys.executable, str(script), *map(str, LOG_DIRS)], capture_output=True, text=True,
                         env=env, timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(next(line for line in res.stdout.splitlines() if line.startswith("RESULT "))[7:])
    for d in LOG_DIRS:
        assert out["dirs"][str(d)] == _expected(d), d
    assert out["pids"] >= 2  # Python workers of both executors took part
