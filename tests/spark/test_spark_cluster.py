"""The reader on ``local-cluster[2,1,1024]``: two executor JVMs, each with its own Python workers.

Every broker log dir of the fixtures is read on the cluster from the disk and two of them (the
biggest and the first by name), uploaded to a bucket of the tests' S3 server (SeaweedFS), from ``s3://``
with credentials given only by the ``AWS_*`` environment (no ``fs.*`` option, no client shipped
from the driver: each executor builds its own).
Per partition the count, offsets, value bytes and the sum of CRC-32s of keys and of values (Spark's
``crc32``, zlib's here) must equal Kafka's decoding. Both reads run in one Spark application: a
local cluster takes half a minute to start on the 2-core machine.
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
from s3_server import SECRET_KEY, S3Server
from spark_env import short_jvm_env

pytestmark = [pytest.mark.spark, pytest.mark.slow]

SCRIPT = textwrap.dedent("""
    import functools, json, os, sys
    from pyspark.sql import SparkSession, functions as F
    spark = (SparkSession.builder.master("local-cluster[2,1,1024]").appName("klog-cluster")
             .config("spark.ui.enabled", "false").config("spark.sql.session.timeZone", "UTC")
             .config("spark.sql.shuffle.partitions", "4").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    # {"dirs": {dir or URI: options}, "piece": {dir or URI: maxBytesPerPartition}, "pids": [dir or URI, ...]}
    todo = json.loads(os.environ["KLOG_TEST_READS"])
    # every read in one job (a union, each read's rows named by its source): a job per read costs
    # seconds of scheduling each on the local cluster
    frames = [spark.read.format("klog").options(**options).option("maxBytesPerPartition", todo["piece"][d]).load(d)
              .select(F.lit(d).alias("src"), "topic", "partition", "offset", "key", "value")
              for d, options in todo["dirs"].items()]
    rows = functools.reduce(lambda a, b: a.unionByName(b), frames).groupBy("src", "topic", "partition").agg(
        F.count("*").alias("n"), F.min("offset").alias("lo"), F.max("offset").alias("hi"),
        F.sum(F.length("value")).alias("bytes"), F.sum(F.crc32("key")).alias("kc"),
        F.sum(F.crc32("value")).alias("vc")).collect()
    out, pids = {d: [] for d in todo["dirs"]}, {}
    for r in rows:
        out[r.src].append([r.topic, r.partition, r.n, r.lo, r.hi, r.bytes or 0, r.kc or 0, r.vc or 0])
    out = {d: sorted(v) for d, v in out.items()}
    for d in todo["pids"]:  # small pieces of the biggest dir: tasks on both executors
        df = spark.read.format("klog").options(**todo["dirs"][d]).option("maxBytesPerPartition", "2000000").load(d)
        pids[d] = len(set(df.rdd.mapPartitions(lambda it: [os.getpid()]).collect()))
    print("RESULT " + json.dumps({"dirs": out, "pids": pids}))
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
def test_broker_dirs_on_local_cluster_from_disk_and_s3(tmp_path: Path) -> None:
    import pyspark
    from test_spark_read import LOG_DIRS

    try:
        s3: S3Server | None = S3Server.shared()
    except RuntimeError as exc:
        s3, no_s3 = None, str(exc)
    sources = {str(d): d for d in LOG_DIRS}
    piece = dict.fromkeys(sources, "1000000")
    biggest = max(LOG_DIRS, key=lambda d: sum(f.stat().st_size for f in d.rglob("*.log")))
    pids = [str(biggest)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    if s3 is not None:
        # from the bucket: the biggest dir and the first by name (every dir is read from S3 on local[2]
        # by test_object_store; here what is new is each executor building its own client)
        bucket = s3.bucket()
        for i, d in enumerate(LOG_DIRS):
            if d != biggest and d != LOG_DIRS[0]:
                continue
            uri = f"{bucket}/dir{i}"
            s3.upload(d, uri)
            sources[uri], piece[uri] = d, "8000000"  # fewer, larger requests from the bucket
            if d == biggest:
                pids.append(uri)
        env.update(s3.env)
    reads = {"dirs": {k: sf.tolerant_options(d) for k, d in sources.items()}, "piece": piece, "pids": pids}
    env.update(SPARK_HOME=str(Path(pyspark.__file__).parent), PYSPARK_PYTHON=sys.executable,
               PYSPARK_DRIVER_PYTHON=sys.executable, KLOG_TEST_READS=json.dumps(reads),
               **short_jvm_env())
    script = tmp_path / "cluster.py"
    script.write_text(SCRIPT)
    res = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    assert SECRET_KEY not in res.stdout + res.stderr
    out = json.loads(next(line for line in res.stdout.splitlines() if line.startswith("RESULT "))[7:])
    for key, d in sources.items():
        assert out["dirs"][key] == _expected(d), key
    for key in pids:
        assert out["pids"][key] >= 2, key  # Python workers of both executors took part
    if s3 is None:
        pytest.skip(f"read from the disk on local-cluster: passed; the same from s3:// not run: {no_s3}")
