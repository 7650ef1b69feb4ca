"""spark_logsource: the Spark data source ``klog`` (built on storage_core; see the reader/writer issues)."""
