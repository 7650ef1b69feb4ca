"""spark_logsource: the Spark data source ``klog`` on top of storage_core.

``spark.read.format("klog").load(path)`` works in any SparkSession once klog is installed
(Spark discovers ``pyspark_klog``). :func:`register` additionally enables filter pushdown.
"""

from __future__ import annotations

from typing import Any


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


__all__ = ["register"]
