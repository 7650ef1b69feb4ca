"""Random rows in the schema of Spark's Kafka sink (key, value, headers, and a timestamp some
writers take), and the DataFrame of them: what the broker-write and the sink-parity tests give
both writers."""

from __future__ import annotations

import datetime as dt
import random
from typing import Any


def sink_rows(rnd: random.Random, n: int) -> list[dict[str, Any]]:
    """Random rows for Spark's Kafka sink schema: keys (some null), values (some null), headers,
    a timestamp on some."""
    now = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
    out = []
    for _ in range(n):
        out.append({
            "key": None if rnd.random() < 0.2 else rnd.randbytes(rnd.randint(0, 20)),
            "value": None if rnd.random() < 0.05 else rnd.randbytes(rnd.randint(0, 300)),
            "headers": [{"key": f"h{rnd.randint(0, 3)}", "value": None if rnd.random() < 0.2 else rnd.randbytes(8)}
                        for _ in range(rnd.choice((0, 0, 1, 2)))],
            "timestamp": now - dt.timedelta(milliseconds=rnd.randint(0, 10_000_000)) if rnd.random() < 0.5 else None,
        })
    return out


def sink_frame(spark, rows: list[dict[str, Any]]):  # type: ignore[no-untyped-def]
    from pyspark.sql.types import ArrayType, BinaryType, StringType, StructField, StructType, TimestampType

    schema = StructType([
        StructField("key", BinaryType()), StructField("value", BinaryType()),
        StructField("headers", ArrayType(StructType([StructField("key", StringType()),
                                                     StructField("value", BinaryType())]))),
        StructField("timestamp", TimestampType()),
    ])
    return spark.createDataFrame([(r["key"], r["value"], r["headers"], r["timestamp"]) for r in rows], schema)
