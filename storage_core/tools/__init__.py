"""The ``klog`` command line and what its commands compute.

Owns: :mod:`~storage_core.tools.cli` (arguments, exit codes, progress bars, the console script
``klog``), :mod:`~storage_core.tools.dump` (``kafka-dump-log``'s output and a JSON-lines form),
:mod:`~storage_core.tools.report` (``describe`` and ``verify``) and :mod:`~storage_core.tools.export`
(a topic or a range of it to Parquet). Run as ``klog`` or ``python -m storage_core.tools.cli``.

May import: everything in :mod:`storage_core` (record, log, cleaner). Nothing in ``storage_core``
or ``spark_logsource`` imports the tools: they are the top of the tree.
"""
