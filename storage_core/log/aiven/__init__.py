"""Aiven's ``RemoteStorageManager`` layout (``remoteStorageLayout=aiven``): tiered segments as the
open-source plugin ``tiered-storage-for-apache-kafka`` (tag v1.1.1) stores them.

Per remote segment the plugin writes three objects (``KafkaRemoteStorageManager.copyLogSegmentData``,
in this order), under ``<key.prefix><topic>-<topic id>/<partition>/<base, 20 digits>-<segment id>``
(``ObjectKeyFactory.mainPath``):

* ``.log``: the segment file cut into chunks of ``chunk.size`` original bytes, each transformed
  on its own (zstd, then AES-256-GCM), concatenated (:mod:`.transform`);
* ``.indexes``: the offset, time, producer-snapshot, leader-epoch and transaction indexes, one
  after the other, each transformed as one chunk (never compressed);
* ``.rsm-manifest``: JSON naming the chunk index, the indexes' ranges and the segment's wrapped
  data key (:mod:`.manifest`).

The modules, bottom up: :mod:`.config` (the plugin's ``rsm.config.*`` settings),
:mod:`.custom_metadata` (the fields the plugin puts in ``__remote_log_metadata``), :mod:`.manifest`
(the manifest and its chunk index), :mod:`.transform` (the key ring, AES-GCM and zstd per chunk),
:mod:`.objects` (object keys, ranged fetches, and a segment's objects seen as a read-only
:class:`~storage_core.log.segment.LogSegment`).
"""
