"""The log (Kafka's ``storage/internals/log``): a partition's segments on disk and the log dirs
that hold them.

Owns: the indexes (:mod:`~storage_core.log.index`, :mod:`~storage_core.log.offset_index`,
:mod:`~storage_core.log.time_index`, :mod:`~storage_core.log.txn_index`), a segment
(:mod:`~storage_core.log.segment`), opening a partition dir (:mod:`~storage_core.log.loader`), the
log itself (:mod:`~storage_core.log.log`), producer state and snapshots
(:mod:`~storage_core.log.producer_state`), the checkpoint files (:mod:`~storage_core.log.checkpoint`),
topic configs (:mod:`~storage_core.log.config`, :mod:`~storage_core.log.topic_configs`), partition
names (:mod:`~storage_core.log.topic_partition`), log dirs and their lock
(:mod:`~storage_core.log.manager`, :mod:`~storage_core.log.lock`), and klog's staged writes with the
journaled commit that makes them visible (:mod:`~storage_core.log.staged`,
:mod:`~storage_core.log.journal`).

May import: :mod:`storage_core.record` and the base modules (:mod:`storage_core.errors`,
:mod:`storage_core.limits`, :mod:`storage_core.files`, :mod:`storage_core.faults`). Never the
cleaner, the tools or Spark, which build on it.
"""
