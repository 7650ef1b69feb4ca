"""Log compaction: Kafka's log cleaner on klog's engine (``LogCleaner``/``Cleaner``,
``LogCleanerManager``, ``SkimpyOffsetMap``, ``MemoryRecords.filterTo``,
``CleanedTransactionMetadata``).

What one cleaning of a partition does (:meth:`LogCleaner.clean_log`)
-----------------------------------------------------------------------

1. **Range.** The first dirty offset comes from ``cleaner-offset-checkpoint`` in the log dir
   (Kafka's offset-checkpoint text format), reset to the log start offset when missing or out of
   range. The first uncleanable offset is the least of the last stable offset (an open
   transaction is never cleaned past), the active segment's base offset, and the base offset of
   the first dirty segment whose largest timestamp is newer than ``min.compaction.lag.ms``.
2. **Offset map.** Kafka's ``SkimpyOffsetMap`` maps the MD5 digest of each key (16 bytes) to
   the key's latest offset in the dirty range, in a bounded number of slots: ``memory_bytes / 24``
   slots (digest + offset), filled to a 0.9 load factor. With the native kernel it is Kafka's
   own layout (``OffsetMap`` in ``_kernel_src/cleaner.c``: one flat array of 24-byte slots, Kafka's probe
   sequence, MD5 in C); without it, :class:`SkimpyOffsetMap`, a dict of ``hashlib`` digests with
   the same number of keys (:func:`new_offset_map` picks). Batches of aborted transactions
   (``.txnindex``) are not mapped. When the map fills, it covers a prefix of the dirty range: the
   pass cleans up to ``map.latest_offset + 1`` - the last offset of the last batch mapped whole
   (Kafka stops at the last record put) - and the next pass continues from there (an explicit
   clean runs passes until the range is done).
   *Collisions*: as in Kafka, two keys with the same MD5 digest would be taken for one key, and
   the older record dropped. With 2**128 digests the chance is negligible (Kafka accepts it;
   klog does the same), and keys are never compared byte for byte.
3. **Recopy.** Segments from the start of the log up to the map's end are grouped so that a
   group's log bytes stay within ``segment.bytes``, its index bytes within
   ``segment.index.bytes`` and its offsets within an int (``groupSegmentsBySize``); each group is
   rewritten into one segment named after its first base offset. Per batch (v2), as
   ``MemoryRecords.filterTo`` with the cleaner's filter:

   * a record past the map's latest offset is kept; a record without a key is dropped; a keyed
     record is kept if its offset is the latest for its key and it has a value, or it is a
     tombstone whose batch has no delete horizon yet or whose horizon is still in the future;
   * batches of aborted transactions are dropped whatever their keys; an ABORT marker is kept
     (and its ``.txnindex`` entry re-added) while batches of its transaction were seen in this
     cleaning, a COMMIT marker while batches of its transaction were seen; a marker that could
     be dropped first gets a delete horizon and goes when the horizon has passed;
   * a batch from which nothing is removed is copied byte for byte, unless it holds tombstones
     (or is such a marker) and has no delete horizon yet: then it is rebuilt with attribute bit 6
     set and ``baseTimestamp = now + delete.retention.ms`` (KIP-534);
   * a filtered batch is rebuilt with the same codec, base offset, last offset (offset gaps
     inside a batch are normal afterwards), producer fields and leader epoch;
   * a batch left empty is removed, except the last data batch of a producer (or its last marker
     when it has no data), and the batch that ends at the first uncleanable offset: those keep a
     61-byte header (``RETAIN_EMPTY``), so that producer state and the last offset survive.

   Legacy (magic 0/1) batches are copied unchanged (klog does not rewrite v0/v1 message sets).
4. **Checkpoint.** ``cleaner-offset-checkpoint`` is updated to the end of the cleaned range.
   The log start offset and the producer snapshots are not changed.

An explicit request (``force=True``, ``klog compact``) cleans whatever the policy and dirty
ratio; when nothing is dirty it still recopies the clean section with an empty map, so that
tombstones and markers whose delete horizon passed go (Kafka waits for new dirty data). An
automatic round (:meth:`LogCleaner.clean_logs`) cleans the compacted logs whose dirty ratio
reaches ``min.cleanable.dirty.ratio`` (or whose oldest dirty batch is older than
``max.compaction.lag.ms``), dirtiest first.

With the native kernel, no Python runs per record, and none per batch for the plain batches (v2,
uncompressed, neither control nor transactional) that make most logs: the kernel walks runs of
them straight from the file's bytes, puts their keys in the map (``map_run``) and recopies them
(``clean_run``: ``shouldRetainRecord``, a byte-for-byte copy, or the kept records' bytes
re-encoded behind a new header and CRC). Every other batch (control, transactional, compressed,
legacy, a producer's last, the one ending the range, anything the kernel refuses) goes through
the per-batch Python above - the transaction state lives only there - with the kernel's loops
over its records. The pure-Python twins (``KLOG_PURE_PYTHON=1``, no compiler,
``LogCleaner(native=False)``) write the same bytes; the tests compare the two on random logs.

Crash safety: the ``.cleaned → .swap → .deleted`` protocol
----------------------------------------------------------

Each group is replaced as ``LogCleaner.cleanSegments`` + ``LocalLog.replaceSegments`` do. The
names below use the group's first base offset ``B``; ``maybe_crash`` points (see
:mod:`storage_core.faults`) are given in brackets, with the context ``group`` (the group's
index in its pass) or ``partition`` (the partition directory's name).

1. ``[cleaner-map-built]`` nothing written yet.
2. ``B.log.cleaned`` is written batch by batch ``[cleaner-cleaned-writing]`` (after the group's
   first source segment), then ``B.index.cleaned``, ``B.timeindex.cleaned`` and, when the group
   keeps aborted transactions, ``B.txnindex.cleaned``; all fsynced, the log's mtime set to that
   of the group's last source segment ``[cleaner-cleaned-written]``.
3. Each ``*.cleaned`` is renamed ``*.swap``, in Kafka's order: the ``.log`` first
   ``[cleaner-swap-partial]``, then the indexes ``[cleaner-swapped]``; the directory is fsynced.
   Once no ``B.*.cleaned`` is left, ``B.log.swap`` commits the group: from then on reopening
   completes the replacement (before, it rolls it back: KAFKA-6264's rule).
4. The old segments' files are renamed ``*.deleted`` one segment at a time
   ``[cleaner-old-deleted]`` (context ``segment`` = its position in the group).
5. The ``*.swap`` files are renamed to their final names, ``B.log`` first
   ``[cleaner-replaced-partial]``, then the indexes ``[cleaner-replaced]``; then the ``*.deleted``
   files are removed (Kafka waits ``file.delete.delay.ms`` for readers; klog's readers keep
   their open file handles, so the files go at once). A group whose recopy changed nothing
   (one segment, every batch copied byte for byte) is not replaced: its ``.cleaned`` files
   are removed after step 2.
6. After every group, ``[cleaner-checkpoint]``, then the checkpoint is written.

Reopening (:class:`storage_core.log.log.Log`, writable, through :mod:`storage_core.log.loader`):
``*.cleaned`` and ``*.deleted`` files are removed, with any ``*.swap`` at or after a ``*.cleaned``
(a crash in steps 1-3 leaves the old segments untouched); each remaining ``*.log.swap`` is completed: the
segments whose base offsets lie in ``[B, next offset of the swap)`` are removed and the
``*.swap`` files renamed into place; a lone index ``*.swap`` is renamed into place (a crash in
steps 3-5). Missing indexes are rebuilt. So every
offset reads its old or its new contents. As in Kafka, when the last batches of a group were all
removed, the swap's next offset lies before the group's end, and an old segment of the group
that starts after it can survive a crash beside the new one: its offsets keep their old
contents (records the cleaner would have removed), nothing is lost. A crash before step 6 leaves
the old checkpoint: the next cleaning redoes the range, which is idempotent. A read-only open
ignores ``*.swap`` files and reads the ``.log`` files in place; after a crash in step 4-5 it
can miss the offsets of the group being replaced until a writable open completes the swap.

This package builds on :mod:`storage_core.log` and :mod:`storage_core.record` (and the base
modules); only the tools import it.
"""

from __future__ import annotations

from storage_core.cleaner.cleaned_segment import CleanedSegment
from storage_core.cleaner.cleaner import (
    CleanableRange,
    CleanerStats,
    CleanResult,
    LogCleaner,
    Progress,
    cleanable_range,
    group_segments_by_size,
    iter_compacted_logs,
    needs_cleaning,
    read_cleaner_offset,
    write_cleaner_offset,
)
from storage_core.cleaner.offset_map import (
    DEFAULT_MEMORY_BYTES,
    HASH_ALGORITHM,
    OFFSET_MAP_ENTRY_BYTES,
    OFFSET_MAP_LOAD_FACTOR,
    OffsetMap,
    SkimpyOffsetMap,
    new_offset_map,
)
from storage_core.cleaner.transactions import CleanedTransactionMetadata

__all__ = [
    "DEFAULT_MEMORY_BYTES",
    "HASH_ALGORITHM",
    "OFFSET_MAP_ENTRY_BYTES",
    "OFFSET_MAP_LOAD_FACTOR",
    "CleanableRange",
    "CleanedSegment",
    "CleanedTransactionMetadata",
    "CleanerStats",
    "CleanResult",
    "LogCleaner",
    "OffsetMap",
    "Progress",
    "SkimpyOffsetMap",
    "cleanable_range",
    "group_segments_by_size",
    "iter_compacted_logs",
    "needs_cleaning",
    "new_offset_map",
    "read_cleaner_offset",
    "write_cleaner_offset",
]
