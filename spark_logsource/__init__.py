"""spark_logsource: the Spark data source ``klog`` on top of storage_core.

``spark.read.format("klog").load(path)`` works in any SparkSession once klog is installed
(Spark discovers ``pyspark_klog``). :func:`register` additionally enables filter pushdown.
"""

from __future__ import annotations

from typing import Any

import storage_core  # noqa: F401 - its import points Spark's Python workers at this interpreter (python_env.py)


def register(spark: Any, *, pushdown: bool = True) -> None:
    """Register ``klog`` on this session; with ``pushdown`` also turn on Python filter pushdown
    (``spark.sql.python.filterPushdown.enabled``) and use the pushdown-capable reader."""
    from .source import KlogDataSource

    if pushdown:
        from .source import KlogPushdownDataSource

        spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
        spark.dataSource.register(KlogPushdownDataSource)
    else:
        spark.dataSource.register(KlogDataSource)


def with_kafka_partitions(df: Any, num_partitions: int, *, key_column: str = "key") -> Any:
    """``df`` with a ``partition`` column chosen by Kafka's default partitioner (murmur2 of the
    key; null keys round-robin) and repartitioned so that each Spark task holds exactly one
    Kafka partition: ``df.write.format("klog")`` then writes one large segment run per partition
    instead of a small one per task and partition.

    Use the topic's partition count (``numPartitions`` for a new topic).
    """
    import pyarrow as pa
    from pyspark.sql.types import IntegerType, StructField, StructType

    if num_partitions < 1:
        raise ValueError(f"num_partitions must be at least 1, got {num_partitions}")
    schema = StructType([*df.schema.fields, StructField("partition", IntegerType(), True)])

    def assign(batches):  # type: ignore[no-untyped-def]
        import numpy as np

        from storage_core.record.columnar import murmur2_partitions

        rr = 0
        for b in batches:
            if key_column in b.schema.names:
                parts = murmur2_partitions(b.column(b.schema.get_field_index(key_column)), num_partitions)
            else:
                parts = np.full(b.num_rows, -1, dtype=np.int32)
            nulls = parts < 0
            if nulls.any():
                idx = np.nonzero(nulls)[0]
                parts[idx] = (rr + np.arange(len(idx))) % num_partitions
                rr += len(idx)
            yield pa.RecordBatch.from_arrays([*b.columns, pa.array(parts, pa.int32())],
                                             names=[*b.schema.names, "partition"])

    with_part = df.drop("partition") if "partition" in df.columns else df
    if "partition" in df.columns:
        schema = StructType([*with_part.schema.fields, StructField("partition", IntegerType(), True)])
    # Spark hash-partitions by pmod(hash(col), n), which would put some Kafka partitions together:
    # route partition p through a bucket value whose hash lands in task p, found with Spark's own hash.
    spark = df.sparkSession
    probe = spark.range(0, 64 * num_partitions).selectExpr("id", f"pmod(hash(id), {num_partitions}) AS task")
    first: dict[int, int] = {}
    for row in probe.groupBy("task").agg({"id": "min"}).collect():
        first[int(row["task"])] = int(row["min(id)"])
    if len(first) < num_partitions:  # cannot happen with 64 candidates per task in practice
        return with_part.mapInArrow(assign, schema).repartition(num_partitions, "partition")
    mapping = ", ".join(f"{p}, {first[p]}L" for p in range(num_partitions))
    out = with_part.mapInArrow(assign, schema).withColumn("__klog_bucket",
                                                          _expr(f"element_at(map({mapping}), partition)"))
    return out.repartition(num_partitions, "__klog_bucket").drop("__klog_bucket")


def _expr(sql: str) -> Any:
    from pyspark.sql import functions as F

    return F.expr(sql)


__all__ = ["register", "with_kafka_partitions"]
