"""A streaming pipeline between two topics of a log dir, while a producer job appends to the first.

    python examples/stream_pipeline.py                        # under ./klog-pipeline, 5 rounds
    python examples/stream_pipeline.py --work-dir /tmp/p --rounds 10 --orders-per-round 500

A stream reads topic ``orders`` with ``spark.readStream.format("klog")``, decodes the JSON
values with ``from_json``, keeps the orders of 10 or more, adds the amount with tax, and writes
topic ``orders-large`` (3 partitions, keyed by customer) with ``writeStream.format("klog")``.
Meanwhile a producer job appends a round of orders to ``orders`` every second with
``df.write.format("klog")``. The sink commits each micro-batch exactly once (its checkpoint is
under the work dir): stop the script at any point and run it again with ``--resume`` and no
order is lost or written twice. At the end it checks the output against the input.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

ORDER_SCHEMA = "order_id LONG, customer STRING, amount DOUBLE"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                epilog="\n\n".join(__doc__.split("\n\n")[1:]),
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--work-dir", default="klog-pipeline", help="log dir and checkpoint go here (default: "
                   "./klog-pipeline)")
    p.add_argument("--rounds", type=int, default=5, help="rounds of orders the producer appends (default: 5)")
    p.add_argument("--orders-per-round", type=int, default=200, help="orders per round (default: 200)")
    p.add_argument("--resume", action="store_true", help="keep the work dir: continue the topics and the query")
    p.add_argument("--master", default="local[2]", help="Spark master (default: local[2])")
    args = p.parse_args(argv)
    if args.rounds < 1 or args.orders_per_round < 1:
        p.error("--rounds and --orders-per-round must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    work = Path(args.work_dir).resolve()
    if work.exists() and not args.resume:
        shutil.rmtree(work)
    logs, checkpoint = work / "logs", work / "checkpoint"
    logs.mkdir(parents=True, exist_ok=True)
    spark = (SparkSession.builder.master(args.master).appName("klog-stream-pipeline")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")

    def produce(first_id: int, n: int) -> None:  # the producer job: one append of n orders
        (spark.range(first_id, first_id + n)
         .selectExpr("CONCAT('c', CAST(id % 23 AS STRING)) AS key",
                     "to_json(named_struct('order_id', id, 'customer', CONCAT('c', CAST(id % 23 AS STRING)), "
                     "'amount', CAST(id % 20 AS DOUBLE) + 0.5)) AS value")
         .write.format("klog").option("topic", "orders").option("numPartitions", "3").mode("append")
         .save(str(logs)))

    already = spark.read.format("klog").load(str(logs)).where("topic = 'orders'").count() \
        if any(logs.glob("orders-*")) else 0
    if not already:
        produce(0, args.orders_per_round)  # the topic exists before the stream starts
        already = args.orders_per_round

    orders = (spark.readStream.format("klog").option("topics", "orders").option("startingOffsets", "earliest")
              .load(str(logs)))
    large = (orders.select(F.from_json(F.col("value").cast("string"), ORDER_SCHEMA).alias("o"))
             .where("o.amount >= 10")
             .select(F.col("o.customer").alias("key"),
                     F.to_json(F.struct("o.order_id", "o.customer", "o.amount",
                                        F.round(F.col("o.amount") * 1.2, 2).alias("with_tax"))).alias("value")))
    query = (large.writeStream.format("klog").option("topic", "orders-large").option("numPartitions", "3")
             .option("checkpointLocation", str(checkpoint)).trigger(processingTime="500 milliseconds")
             .start(str(logs)))
    print(f"stream running: {logs}/orders-* -> {logs}/orders-large-* (checkpoint {checkpoint})")
    next_id = already
    for r in range(args.rounds):
        produce(next_id, args.orders_per_round)
        next_id += args.orders_per_round
        time.sleep(1.0)
        done = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
        print(f"round {r + 1}: appended {args.orders_per_round} orders; the stream has read {sum(done)} in "
              f"{len(done)} micro-batches")
    query.processAllAvailable()
    query.stop()

    inp = spark.read.format("klog").option("topics", "orders").load(str(logs)) \
        .select(F.from_json(F.col("value").cast("string"), ORDER_SCHEMA).alias("o")).where("o.amount >= 10")
    out = spark.read.format("klog").option("topics", "orders-large").load(str(logs)) \
        .select(F.from_json(F.col("value").cast("string"), ORDER_SCHEMA).alias("o"))
    want = sorted(r.o.order_id for r in inp.collect())
    got = sorted(r.o.order_id for r in out.collect())
    print(f"orders read: {next_id}; large orders: {len(want)}; in orders-large: {len(got)} "
          f"({'exactly once' if got == want else 'MISMATCH'})")
    (spark.read.format("klog").option("topics", "orders-large").load(str(logs))
     .groupBy("partition").count().orderBy("partition").show())
    spark.stop()
    print(f"next: klog describe {logs}")
    return 0 if got == want else 1


if __name__ == "__main__":
    sys.exit(main())
