"""Compact a topic the way Kafka's log cleaner does, without a broker, and read the result.

    python examples/compact_topic.py                          # under ./klog-compact
    python examples/compact_topic.py --work-dir /tmp/c --customers 50 --updates 5000

Writes topic ``profiles`` (2 partitions) with ``df.write.format("klog")`` and the option
``cleanup.policy=compact``, which klog keeps for the topic in ``klog-topic-configs.json`` in the
log dir: ``--updates`` profile updates for ``--customers`` keys, and a tombstone (null value) for
every tenth customer. Then runs ``klog compact`` on the log dir (``--roll`` first closes the
active segment, which Kafka's cleaner never touches), prints its summary, and reads the topic
back with Spark: one record per live customer, its latest profile, at its original offset.
Tombstones stay until ``delete.retention.ms`` has passed (one day by default), as in Kafka.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                epilog="\n\n".join(__doc__.split("\n\n")[1:]),
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--work-dir", default="klog-compact", help="the log dir goes here (default: ./klog-compact)")
    p.add_argument("--customers", type=int, default=100, help="distinct keys (default: 100)")
    p.add_argument("--updates", type=int, default=20_000, help="profile updates written (default: 20000)")
    p.add_argument("--master", default="local[2]", help="Spark master (default: local[2])")
    args = p.parse_args(argv)
    if args.customers < 1 or args.updates < args.customers:
        p.error("need --customers >= 1 and --updates >= --customers")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    logs = Path(args.work_dir).resolve() / "logs"
    if logs.exists():
        shutil.rmtree(logs)
    spark = (SparkSession.builder.master(args.master).appName("klog-compact-topic").config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    n, c = args.updates, args.customers
    updates = spark.range(n).selectExpr(
        f"CONCAT('customer-', CAST(id % {c} AS STRING)) AS key",
        # the last update of every tenth customer is a tombstone: the customer was deleted
        f"CASE WHEN id >= {n - c} AND (id % {c}) % 10 = 0 THEN NULL "
        "ELSE to_json(named_struct('version', id, 'tier', CASE WHEN id % 3 = 0 THEN 'gold' ELSE 'basic' END)) END "
        "AS value")
    (updates.coalesce(1).write.format("klog").option("topic", "profiles").option("numPartitions", "2")
     .option("cleanup.policy", "compact").mode("append").save(str(logs)))
    print(f"wrote {n} updates of {c} customers to topic 'profiles' (cleanup.policy=compact) in {logs}")

    klog = Path(sys.executable).with_name("klog")
    cmd = [str(klog) if klog.exists() else "klog", "compact", str(logs), "--roll"]
    print("$ " + " ".join(["klog", *cmd[1:]]), flush=True)
    subprocess.run(cmd, check=True)

    df = spark.read.format("klog").option("topics", "profiles").load(str(logs)) \
        .selectExpr("partition", "offset", "CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value")
    rows = df.collect()
    live = [r for r in rows if r.value is not None]
    tombstones = [r for r in rows if r.value is None]
    print(f"after compaction: {len(rows)} records ({len(live)} live customers, {len(tombstones)} tombstones "
          f"kept until delete.retention.ms), from {n}")
    df.orderBy("offset").show(5, truncate=False)
    spark.stop()
    ok = len({r.key for r in rows}) == len(rows) == c
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
