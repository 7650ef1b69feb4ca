"""klog's benchmarks: ``python -m benchmarks`` runs them all, ``python -m benchmarks.NAME`` one."""
