"""spark_logsource: the Spark data source ``klog`` on top of storage_core.

Empty for now: ``spark.read.format("klog")``, the writer and streaming arrive with their issues.
All storage work goes through :mod:`storage_core`; nothing here opens a file before
``read()``/``write()`` runs on an executor.
"""
