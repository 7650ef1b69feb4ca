"""Options of Spark's Kafka source and sink, and what each means to klog: the one table.

A job written for ``format("kafka")`` ports to ``format("klog")`` by changing the format and
giving a path: every option of Spark's Kafka source and sink (Spark 4.x, *Structured Streaming +
Kafka Integration Guide*, ``KafkaSourceProvider.scala``) is accepted. They fall in four groups:

* **the same meaning here**: ``subscribe``, ``startingOffsets``, ``includeHeaders``, ... (parsed by
  :mod:`storage_core.read.options` and the writer), ``kafka.isolation.level``, and on writes
  ``kafka.compression.type`` (the ``compression`` of the batches written);
* **a broker's business, ignored**: every other ``kafka.<client config>`` (``kafka.bootstrap.servers``,
  ``kafka.security.protocol``, ``kafka.group.id``, ``kafka.sasl.jaas.config``, ...), ``groupIdPrefix``,
  ``fetchOffset.numRetries``, ``fetchOffset.retryIntervalMs``, ``kafkaConsumer.pollTimeoutMs``:
  :func:`split_kafka_options` takes them out and names them, and each query logs one warning
  listing them (:func:`warn_ignored`) -- names only, never values (a JAAS config holds passwords);
* **refused by Spark's Kafka source too**, with Spark's reason: ``kafka.auto.offset.reset``,
  ``kafka.key.deserializer``, ``kafka.value.deserializer``, ``kafka.enable.auto.commit``,
  ``kafka.interceptor.classes`` on reads; ``kafka.key.serializer``, ``kafka.value.serializer`` on
  writes;
* ``kafka.partitioner.class`` on writes: Kafka's built-in partitioning is what klog does (murmur2
  of the key, the ``partition`` column first); a custom Java partitioner cannot run here and is an
  error rather than a silently different placement.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from storage_core.errors import InvalidOptionError

log = logging.getLogger("klog")

#: Prefix Spark's Kafka source and sink give Kafka client configs.
KAFKA_PREFIX = "kafka."

#: Source options of Spark's that tune talking to a broker (lower-cased key -> Spark's spelling).
BROKER_ONLY_OPTIONS = {
    "groupidprefix": "groupIdPrefix",
    "fetchoffset.numretries": "fetchOffset.numRetries",
    "fetchoffset.retryintervalms": "fetchOffset.retryIntervalMs",
    "kafkaconsumer.polltimeoutms": "kafkaConsumer.pollTimeoutMs",
}

#: ``kafka.*`` configs that mean something to a klog read.
READ_KAFKA_CONFIGS = frozenset({"kafka.isolation.level"})
#: ``kafka.*`` configs that mean something to a klog write.
WRITE_KAFKA_CONFIGS = frozenset({"kafka.compression.type", "kafka.partitioner.class"})

_STARTING = ("Instead set the source option 'startingOffsets' to 'earliest' or 'latest' to specify where to "
             "start (as Spark's Kafka source requires)")
#: ``kafka.*`` configs Spark's Kafka source refuses, with its reasons; klog refuses them alike.
REFUSED_ON_READ = {
    "kafka.auto.offset.reset": f"Kafka option 'auto.offset.reset' is not supported. {_STARTING}",
    "kafka.key.deserializer": "Kafka option 'key.deserializer' is not supported as keys are read as bytes; use "
                              "DataFrame operations to deserialize the keys",
    "kafka.value.deserializer": "Kafka option 'value.deserializer' is not supported as values are read as bytes; "
                                "use DataFrame operations to deserialize the values",
    "kafka.enable.auto.commit": "Kafka option 'enable.auto.commit' is not supported (there is no consumer group "
                                "to commit to)",
    "kafka.interceptor.classes": "Kafka option 'interceptor.classes' is not supported (interceptors could change "
                                 "the records read)",
}
#: ``kafka.*`` configs Spark's Kafka sink refuses; klog refuses them alike.
REFUSED_ON_WRITE = {
    "kafka.key.serializer": "Kafka option 'key.serializer' is not supported: the key column (string or binary) is "
                            "written as its bytes; serialize keys with DataFrame operations",
    "kafka.value.serializer": "Kafka option 'value.serializer' is not supported: the value column (string or binary) "
                              "is written as its bytes; serialize values with DataFrame operations",
}

#: Partitioners that choose as klog does: Kafka's built-in partitioning (murmur2 of the key; the
#: two classes are the pre-4.0 names of that behaviour).
BUILT_IN_PARTITIONERS = frozenset({
    "org.apache.kafka.clients.producer.internals.DefaultPartitioner",
    "org.apache.kafka.clients.producer.UniformStickyPartitioner",
})


def split_kafka_options(options: Mapping[str, str], *, write: bool) -> tuple[dict[str, str], tuple[str, ...]]:
    """``(the options klog reads, the names of those it ignores)`` from lower-cased ``options``.

    Raises :class:`InvalidOptionError` for what Spark's Kafka source or sink refuses too, and for a
    custom ``kafka.partitioner.class``."""
    refused = REFUSED_ON_WRITE if write else REFUSED_ON_READ
    meaningful = WRITE_KAFKA_CONFIGS if write else READ_KAFKA_CONFIGS
    kept: dict[str, str] = {}
    ignored: list[str] = []
    for key, value in options.items():
        if key in refused:
            raise InvalidOptionError(refused[key])
        if key in BROKER_ONLY_OPTIONS:
            ignored.append(BROKER_ONLY_OPTIONS[key])
        elif key.startswith(KAFKA_PREFIX) and key not in meaningful:
            ignored.append(key)
        else:
            kept[key] = value
    partitioner = kept.pop("kafka.partitioner.class", None)
    if partitioner is not None and partitioner.strip() not in BUILT_IN_PARTITIONERS:
        raise InvalidOptionError(f"kafka.partitioner.class={partitioner.strip()!r} cannot run here: klog places rows "
                                 "by the 'partition' column, else as Kafka's built-in partitioner does (murmur2 of the "
                                 "key; null keys spread evenly). Give a partition column to place rows yourself, or "
                                 "remove the option")
    return kept, tuple(sorted(ignored))


#: Warnings given in this process, by ``once_key`` (see :func:`warn_ignored`).
_WARNED: set[tuple[str, str]] = set()


def warn_ignored(ignored: Iterable[str], what: str, *, once_key: str | None = None) -> None:
    """The one warning of a query (``what``: "read", "stream", "write") about options ignored.

    Callers call it where a query passes once (a batch scan's planning, a stream's first trigger,
    a write's setup). A streaming write sets up a writer for every micro-batch: it passes
    ``once_key`` (the sink's path and identity) and the warning is given once per process."""
    names = sorted(set(ignored))
    if names and once_key is not None:
        if (what, once_key) in _WARNED:
            return
        _WARNED.add((what, once_key))
    if names:
        log.warning("klog %s: ignoring option%s %s (they configure a Kafka client; klog reads and writes log dirs "
                    "with no broker)", what, "s" if len(names) > 1 else "", ", ".join(names))
