"""Spark finds ``spark.read.format("klog")`` through this module after ``pip install klog``.

PySpark imports every top-level ``pyspark_*`` module on its Python path and registers its
``DefaultSource``. This one is the variant without filter pushdown, which works whatever
``spark.sql.python.filterPushdown.enabled`` says; ``spark_logsource.register(spark)`` installs
the pushdown-capable one.
"""

from spark_logsource.source import KlogDataSource as DefaultSource

__all__ = ["DefaultSource"]
