"""Record formats (Kafka's ``clients/.../common/record``): what the bytes of a ``.log`` mean.

Owns: varints (:mod:`~storage_core.record.varint`), codecs (:mod:`~storage_core.record.compression`),
v2 record batches and records (:mod:`~storage_core.record.records`), v0/v1 message sets
(:mod:`~storage_core.record.legacy_records`), control records (:mod:`~storage_core.record.control`),
walking the batches of a file or buffer (:mod:`~storage_core.record.file_records`), and batches to
and from Arrow in bulk (:mod:`~storage_core.record.columnar`, :mod:`~storage_core.record.scan`)
through the native kernel ``storage_core.record._kernel`` (``_kernel_src/``, one C unit per concern).

May import: :mod:`storage_core.errors`, :mod:`storage_core.limits` and :mod:`storage_core.files`
only. Nothing here knows segments, indexes, log dirs or Spark: the log layer above reads records
through this one.
"""
