"""What a read asks for: the one parser of read options, shared by every read path.

Spark batch reads and streams, ``klog export`` and the Python API (:func:`storage_core.read.read_arrow`)
all take the options of ``spark.read.format("klog")``, parsed and validated here once (on the
driver) into a frozen :class:`ReadOptions`, which the planner (:mod:`storage_core.read.planner`)
turns into pieces. Names and meanings follow Spark's Kafka source where they carry over; option
keys are case-insensitive (Spark lower-cases them). A wrong option is an
:class:`InvalidOptionError` that names the option, the value and what is legal, raised before
any data is read.

=====================================  ==========================  =============================================
option                                 default                     meaning
=====================================  ==========================  =============================================
``path`` (``load(path)``)              required                    log dir, several separated by commas, or a
                                                                   partition dir
``topics`` / ``subscribe``             all topics                  comma-separated topic names
``topicPattern`` / ``subscribePattern``                            Java-style regex, whole-name match
``assign``                                                         JSON ``{"t": [0, 1]}``
``startingOffsets``                    ``earliest``                ``earliest`` or JSON ``{"t": {"0": 5}}``
                                                                   (-2 earliest; ``latest``/-1 rejected)
``endingOffsets``                      ``latest``                  ``latest`` or JSON (-1 latest; -2 rejected);
                                                                   exclusive
``startingTimestamp``                                              ms; first offset with timestamp >= it
``endingTimestamp``                                                ms; exclusive end by timestamp
``startingOffsetsByTimestamp``                                     JSON ``{"t": {"0": ms}}``
``endingOffsetsByTimestamp``                                       JSON
``startingOffsetsByTimestampStrategy`` ``error``                   ``error`` or ``latest`` when no offset matches
``startingOffsetsFromGroup``                                       group id: start at its committed offsets
                                                                   (partitions it never committed: ``startingOffsets``)
``endingOffsetsFromGroup``                                         group id: end (exclusive) at its committed
                                                                   offsets (never committed: ``latest``); batch only
``includeHeaders``                     ``false``                   add ``headers``
``includeMetadata``                    ``false``                   add batch metadata columns
``isolationLevel``                     ``read_uncommitted``        or ``read_committed`` (also
                                                                   ``kafka.isolation.level``)
``failOnDataLoss``                     ``true``                    false: skip lost/corrupt ranges, log them
``minPartitions``                                                  at least this many Spark partitions
``maxRecordsPerPartition``                                         split ranges above this many records
``maxBytesPerPartition``               134217728                   split/pack input by log bytes per task
``valueFormat`` / ``keyFormat``        ``raw``                     ``confluent-avro``, ``confluent-json`` or
                                                                   ``confluent-protobuf``: decode by the Schema
                                                                   Registry's schemas
``schemaRegistryPath``                 the read's paths            log dir(s) holding the ``_schemas`` topic
``schemasTopic``                       ``_schemas``                the registry's ``kafkastore.topic``
``subjectNameStrategy``                ``TopicNameStrategy``       or ``RecordNameStrategy``,
                                                                   ``TopicRecordNameStrategy`` (with ``recordName``)
``keySubject`` / ``valueSubject``                                  the subject, whatever the strategy
``mode``                               ``FAILFAST``                ``PERMISSIVE``: a record that does not decode is
                                                                   null
``remoteStorage``                                                  a tiered topic's remote storage (a path or an
                                                                   ``s3://`` URI): its remote segments are read
                                                                   before the local ones (earlier offsets)
``remoteStorageLayout``                ``local-tiered``            Kafka's ``LocalTieredStorage`` layout (plain
                                                                   segment copies), or ``aiven``: Aiven's
                                                                   ``RemoteStorageManager`` (chunks, zstd,
                                                                   AES-GCM)
``remoteStorageConfig``                                            ``aiven``: a properties file with the plugin's
                                                                   ``rsm.config.*`` settings (a broker's
                                                                   ``server.properties`` as it is);
                                                                   ``rsm.config.*`` options override it
``maxThreads``                         CPUs, at most 8             Python API only: at most this many threads
                                                                   open partitions and decode pieces at
                                                                   once (1: no thread);
                                                                   ``KLOG_THREADS`` sets the default; Spark
                                                                   ignores it (its tasks are its parallelism)
=====================================  ==========================  =============================================

The group options read every ``__consumer_offsets`` partition of the same log dirs
(:mod:`storage_core.read.groups`); a group with no committed offset there is an error listing the
groups found. ``startingOffsetsFromGroup`` conflicts with the other starting options except
``startingOffsets=earliest`` (batch) or ``earliest``/``latest`` (stream), its fallback;
``endingOffsetsFromGroup`` conflicts with every other ending option except ``endingOffsets=latest``.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from storage_core.errors import InvalidOptionError, InvalidTopicError
from storage_core.fs import OPTION_PREFIX, StorageOptions, as_path, refuse_credentials
from storage_core.log.aiven.config import RSM_CONFIG_PREFIX
from storage_core.log.tiered import RemoteStorage
from storage_core.log.topic_partition import MAX_PARTITION, validate_topic_name
from storage_core.read.kafka_compat import BROKER_ONLY_OPTIONS, split_kafka_options

EARLIEST = -2
LATEST = -1
DEFAULT_MAX_BYTES_PER_PARTITION = 128 << 20

#: Known options, lower-cased as Spark hands them over.
READ_OPTIONS = {
    "path", "topics", "subscribe", "topicpattern", "subscribepattern", "assign",
    "startingoffsets", "endingoffsets", "startingtimestamp", "endingtimestamp",
    "startingoffsetsbytimestamp", "endingoffsetsbytimestamp", "startingoffsetsbytimestampstrategy",
    "includeheaders", "includemetadata", "isolationlevel", "kafka.isolation.level", "failondataloss",
    "minpartitions", "maxrecordsperpartition", "maxbytesperpartition",
    "startingoffsetsfromgroup", "endingoffsetsfromgroup",
    "valueformat", "keyformat", "schemaregistrypath", "schemastopic", "subjectnamestrategy", "recordname",
    "keysubject", "valuesubject", "mode",
    "maxthreads",  # klog's Python API (read_arrow): accepted and ignored by Spark, whose tasks read in parallel
    "remotestorage", "remotestoragelayout",  # a tiered topic's remote segments (storage_core.log.tiered)
    "remotestorageconfig",  # remoteStorageLayout=aiven: the plugin's rsm.config.* settings (storage_core.log.aiven)
}
#: Streaming-only options accepted (and ignored, as Spark's Kafka source does) by a batch read.
STREAM_ONLY_OPTIONS = {"maxoffsetspertrigger", "minoffsetspertrigger", "maxtriggerdelay"}
_CANONICAL = {
    "startingoffsets": "startingOffsets", "endingoffsets": "endingOffsets", "startingtimestamp": "startingTimestamp",
    "endingtimestamp": "endingTimestamp", "startingoffsetsbytimestamp": "startingOffsetsByTimestamp",
    "endingoffsetsbytimestamp": "endingOffsetsByTimestamp",
    "startingoffsetsbytimestampstrategy": "startingOffsetsByTimestampStrategy", "includeheaders": "includeHeaders",
    "includemetadata": "includeMetadata", "isolationlevel": "isolationLevel", "failondataloss": "failOnDataLoss",
    "minpartitions": "minPartitions", "maxrecordsperpartition": "maxRecordsPerPartition",
    "maxbytesperpartition": "maxBytesPerPartition", "topicpattern": "topicPattern",
    "subscribepattern": "subscribePattern", "maxoffsetspertrigger": "maxOffsetsPerTrigger",
    "minoffsetspertrigger": "minOffsetsPerTrigger", "maxtriggerdelay": "maxTriggerDelay",
    "startingoffsetsfromgroup": "startingOffsetsFromGroup", "endingoffsetsfromgroup": "endingOffsetsFromGroup",
    "valueformat": "valueFormat", "keyformat": "keyFormat", "schemaregistrypath": "schemaRegistryPath",
    "schemastopic": "schemasTopic", "subjectnamestrategy": "subjectNameStrategy", "recordname": "recordName",
    "keysubject": "keySubject", "valuesubject": "valueSubject", "maxthreads": "maxThreads",
    "remotestorage": "remoteStorage", "remotestoragelayout": "remoteStorageLayout",
    "remotestorageconfig": "remoteStorageConfig",
    # writes (spark_logsource.writer)
    "numpartitions": "numPartitions", "maxbatchbytes": "maxBatchBytes", "locktimeoutms": "lockTimeoutMs",
    "txnappid": "txnAppId", "txnversion": "txnVersion",
    **BROKER_ONLY_OPTIONS,
}

PartitionOffsets = Mapping[str, Mapping[int, int]]

#: valueFormat/keyFormat values: raw bytes, or Confluent's wire format decoded by the writer schema.
FORMATS = ("raw", "confluent-avro", "confluent-json", "confluent-protobuf")
_DECODED_FORMATS = ("confluent-avro", "confluent-json", "confluent-protobuf")
SUBJECT_STRATEGIES = ("TopicNameStrategy", "RecordNameStrategy", "TopicRecordNameStrategy")


@dataclass(frozen=True)
class ValueFormats:
    """How keys and values are decoded: ``raw`` (binary, the default), ``confluent-avro``,
    ``confluent-json`` or ``confluent-protobuf`` with the schemas of a Schema Registry's ``_schemas`` topic
    (:mod:`storage_core.read.values`)."""

    value_format: str = "raw"
    key_format: str = "raw"
    registry_paths: tuple[str, ...] | None = None  # where _schemas is; None: the read's paths
    schemas_topic: str = "_schemas"
    subject_strategy: str = "TopicNameStrategy"
    record_name: str | None = None
    key_subject: str | None = None
    value_subject: str | None = None
    permissive: bool = False  # mode=PERMISSIVE: a record that does not decode is null

    @property
    def decoded(self) -> bool:
        return self.value_format != "raw" or self.key_format != "raw"


@dataclass(frozen=True)
class OffsetSpec:
    """Where a range starts or ends: ``earliest``/``latest``, per-partition offsets, timestamps, or a
    consumer group's committed offsets (``fallback`` for the partitions it never committed)."""

    kind: str  # "earliest" | "latest" | "offset" | "offsets" | "timestamp" | "timestamps" | "group"
    offsets: PartitionOffsets | None = None  # kind "offsets" (-2/-1 allowed) or "timestamps" (ms)
    timestamp: int | None = None  # kind "timestamp": one for every partition
    offset: int | None = None  # kind "offset": one for every partition (klog export --start-offset)
    group: str | None = None  # kind "group": the group id
    fallback: OffsetSpec | None = None  # kind "group": "earliest" or "latest"

    @property
    def listed(self) -> PartitionOffsets | None:
        """The per-partition JSON of kinds "offsets" and "timestamps", else None."""
        return self.offsets if self.kind in ("offsets", "timestamps") else None


@dataclass(frozen=True)
class ReadOptions:
    paths: tuple[str, ...]
    topics: tuple[str, ...] | None
    topic_pattern: str | None
    assign: PartitionOffsets | None  # topic -> {partition: 0}, the partitions chosen
    starting: OffsetSpec
    ending: OffsetSpec
    starting_timestamp_strategy: str
    include_headers: bool
    include_metadata: bool
    read_committed: bool
    fail_on_data_loss: bool
    min_partitions: int | None
    max_records_per_partition: int | None
    max_bytes_per_partition: int
    #: Spark Kafka-source options given that mean nothing without a broker (see kafka_compat).
    ignored: tuple[str, ...] = ()
    #: the ``fs.*`` options: how to reach URI paths (``s3://...``); secrets hidden from repr
    storage: StorageOptions = StorageOptions()
    #: an ending offset past a partition's end reads to its end, whatever ``fail_on_data_loss`` says
    #: (the CLI's ``--end-offset``: one end for every partition, "up to here or the end"); Spark's
    #: rule, the default, fails such a read unless failOnDataLoss=false
    clamp_ending: bool = False
    #: (Spark's option name, the face's own) where the face is not Spark's: the CLI's ``--partition``
    #: for ``assign``; an empty name: the face has no such option (see :meth:`setting`)
    spelling: tuple[tuple[str, str], ...] = ()

    def setting(self, name: str, value: str | None = None) -> str | None:
        """The option ``name`` (Spark's name), set to ``value`` if given, as this read's face spells
        it in a message: ``option assign``, ``startingOffsetsByTimestampStrategy=latest``; from the
        CLI ``--partition``, ``--if-past-end latest``. None: the face has no such option, so a
        message must not suggest it."""
        spelled = dict(self.spelling).get(name, name)
        if not spelled:
            return None
        flag = spelled.startswith("--")
        if value is None:
            return spelled if flag else f"option {spelled}"
        return f"{spelled} {value}" if flag else f"{spelled}={value}"

    @property
    def log_dirs(self) -> tuple[Path, ...]:
        """The paths as :class:`~pathlib.Path` objects: local, or in object storage through ``storage``."""
        return tuple(as_path(p, self.storage) for p in self.paths)
    formats: ValueFormats = ValueFormats()
    #: ``maxThreads``: how many threads open partitions (the planner) and decode pieces
    #: (:func:`~storage_core.read.api.read_arrow`) at once
    #: (None: :func:`~storage_core.workers.pool_size`'s default); Spark does not use it
    max_threads: int | None = None
    #: ``remoteStorage``/``remoteStorageLayout``: where a tiered topic's remote segments are (None:
    #: read the local segments only)
    remote: RemoteStorage | None = None


def option_name(key: str) -> str:
    return _CANONICAL.get(key, key)


def unknown_options_message(given: list[str], known: set[str], what: str) -> str:
    """``unknown option 'startingOffset' (did you mean 'startingOffsets'?) for format klog; known
    [what] options: `` -- the caller appends the list. ``given`` in the user's spelling (Spark hands
    a source its option names lower-cased, so from Spark that is all there is)."""
    hints = []
    candidates = sorted(set(known) | set(BROKER_ONLY_OPTIONS))
    for name in given:
        close = difflib.get_close_matches(name.lower(), candidates, n=1, cutoff=0.6)
        hints.append(f"{name!r}" + (f" (did you mean {option_name(close[0])!r}?)" if close else ""))
    return (f"unknown {what + ' ' if what else ''}option{'s' if len(given) > 1 else ''} {', '.join(hints)} for format "
            f"klog; known {what + ' ' if what else ''}options: ")


def _bool(opts: Mapping[str, str], key: str, default: bool) -> bool:
    raw = opts.get(key)
    if raw is None:
        return default
    v = str(raw).strip().lower()
    if v in ("true", "false"):
        return v == "true"
    raise InvalidOptionError(f"option {option_name(key)}={raw!r} is not a boolean; expected true or false")


def option_long(opts: Mapping[str, str], key: str, *, minimum: int | None = None) -> int | None:
    raw = opts.get(key)
    if raw is None:
        return None
    try:
        v = int(str(raw).strip())
    except ValueError:
        raise InvalidOptionError(f"option {option_name(key)}={raw!r} is not an integer") from None
    if not -(1 << 63) <= v < (1 << 63):
        raise InvalidOptionError(f"option {option_name(key)}={raw!r} does not fit a 64-bit integer")
    if minimum is not None and v < minimum:
        raise InvalidOptionError(f"option {option_name(key)}={raw!r} must be at least {minimum}")
    return v


def epoch_ms(opts: Mapping[str, str], key: str) -> int | None:
    """A timestamp option: milliseconds since the epoch, as in Spark's Kafka source. A date given
    instead is named as one, with its value in milliseconds."""
    raw = opts.get(key)
    if raw is not None and not re.fullmatch(r"\s*[-+]?\d+\s*", raw):
        import datetime as dt

        text = raw.strip()
        try:
            when = dt.datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text)
            epoch = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
            ms = (when.replace(tzinfo=when.tzinfo or dt.timezone.utc) - epoch) // dt.timedelta(milliseconds=1)
            hint = f"{text}{'' if when.tzinfo else ' UTC'} is {ms}"
        except ValueError:
            hint = "e.g. 1767225600000 for 2026-01-01T00:00:00Z"
        raise InvalidOptionError(f"option {option_name(key)}={raw!r} is not a number of epoch milliseconds; {hint}")
    return option_long(opts, key, minimum=0)


def _json(opts: Mapping[str, str], key: str) -> Any:
    raw = opts[key]
    try:
        return json.loads(raw)
    except RecursionError:
        raise InvalidOptionError(f"option {option_name(key)} is JSON nested too deeply ({len(raw)} characters); "
                                 "expected e.g. {\"topic\": {\"0\": 23, \"1\": -2}}") from None
    except json.JSONDecodeError as exc:
        raise InvalidOptionError(f"option {option_name(key)} is not valid JSON ({exc.msg} at character {exc.pos}): "
                                 f"{raw!r}; expected e.g. {{\"topic\": {{\"0\": 23, \"1\": -2}}}}") from None


def _topic(name: str, key: str) -> str:
    """A topic name in an option, checked as Kafka's ``Topic.validate`` does (no ``..``, ``/``, NUL, ...)."""
    try:
        validate_topic_name(name)
    except InvalidTopicError as exc:
        raise InvalidOptionError(f"option {option_name(key)}: {exc.detail}") from None
    return name


def _partition(p: object, topic: str, key: str) -> int:
    if isinstance(p, bool) or not isinstance(p, int) or not 0 <= p <= MAX_PARTITION:
        raise InvalidOptionError(f"option {option_name(key)}: partition {p!r} of topic {topic!r} is not a partition number "
                                 f"(0..{MAX_PARTITION})")
    return p


def _partition_map(opts: Mapping[str, str], key: str) -> dict[str, dict[int, int]]:
    obj = _json(opts, key)
    example = '{"topic": {"0": 23, "1": -2}}'
    if not isinstance(obj, dict) or not obj:
        raise InvalidOptionError(f"option {option_name(key)} must be a non-empty JSON object like {example}; got {opts[key]!r}")
    out: dict[str, dict[int, int]] = {}
    for topic, parts in obj.items():
        _topic(topic, key)
        if not isinstance(parts, dict):
            raise InvalidOptionError(f"option {option_name(key)}: topic {topic!r} must map partition numbers to values "
                                     f"like {example}")
        m: dict[int, int] = {}
        for p, v in parts.items():
            try:
                pn = int(p)
            except ValueError:
                raise InvalidOptionError(f"option {option_name(key)}: {p!r} of topic {topic!r} is not a partition "
                                         "number") from None
            _partition(pn, topic, key)
            if isinstance(v, bool) or not isinstance(v, int):
                raise InvalidOptionError(f"option {option_name(key)}: value {v!r} of {topic}-{p} is not an integer")
            m[pn] = v
        out[topic] = m
    return out


def _group(opts: Mapping[str, str], key: str, conflicting: tuple[str, ...], fallback_key: str,
           fallbacks: tuple[str, ...], default: str) -> OffsetSpec | None:
    """The spec of a ``...FromGroup`` option, or None when it is not given."""
    raw = opts.get(key)
    if raw is None:
        return None
    group = raw.strip()
    if not group:
        raise InvalidOptionError(f"option {option_name(key)} is empty; expected a consumer group id")
    given = [k for k in conflicting if k in opts]
    if given:
        raise InvalidOptionError(f"options {option_name(key)} and {option_name(given[0])} conflict; give one "
                                 f"(the group's committed offsets, or {option_name(given[0])})")
    fb = opts.get(fallback_key, default).strip().lower()
    if fb not in fallbacks:
        raise InvalidOptionError(f"options {option_name(key)} and {option_name(fallback_key)}={opts[fallback_key]!r} "
                                 f"conflict: with a group, {option_name(fallback_key)} is only where partitions the "
                                 f"group never committed {'start' if key.startswith('start') else 'end'}: "
                                 f"{' or '.join(fallbacks)}")
    return OffsetSpec("group", group=group, fallback=OffsetSpec(fb))


def start_spec(opts: Mapping[str, str], *, streaming: bool = False) -> OffsetSpec:
    """Where a read starts. A batch read defaults to earliest and refuses latest (it would read
    nothing); a stream defaults to latest, as Spark's Kafka source."""
    group = _group(opts, "startingoffsetsfromgroup", ("startingtimestamp", "startingoffsetsbytimestamp"),
                   "startingoffsets", ("earliest", "latest") if streaming else ("earliest",),
                   "latest" if streaming else "earliest")
    if group is not None:
        return group
    ts = epoch_ms(opts, "startingtimestamp")
    if ts is not None:
        return OffsetSpec("timestamp", timestamp=ts)
    if "startingoffsetsbytimestamp" in opts:
        m = _partition_map(opts, "startingoffsetsbytimestamp")
        _check_timestamps(m, "startingOffsetsByTimestamp")
        return OffsetSpec("timestamps", offsets=m)
    raw = opts.get("startingoffsets", "latest" if streaming else "earliest").strip().lower()
    if raw == "earliest" or (streaming and raw == "latest"):
        return OffsetSpec(raw)
    if raw == "latest":
        raise InvalidOptionError("startingOffsets=latest is not allowed for batch queries (it would read nothing); "
                                 "use earliest, a timestamp, or JSON offsets")
    m = _partition_map(opts, "startingoffsets")
    for t, parts in m.items():
        for p, v in parts.items():
            if v == LATEST and not streaming:
                raise InvalidOptionError(f"startingOffsets for {t}-{p} is -1 (latest), which is not allowed for "
                                         "batch queries")
            if v < EARLIEST:
                legal = "-2 for earliest or -1 for latest" if streaming else "or -2 for earliest"
                raise InvalidOptionError(f"startingOffsets for {t}-{p} is {v}; expected an offset >= 0, {legal}")
    return OffsetSpec("offsets", offsets=m)


def end_spec(opts: Mapping[str, str]) -> OffsetSpec:
    group = _group(opts, "endingoffsetsfromgroup", ("endingtimestamp", "endingoffsetsbytimestamp"),
                   "endingoffsets", ("latest",), "latest")
    if group is not None:
        return group
    ts = epoch_ms(opts, "endingtimestamp")
    if ts is not None:
        return OffsetSpec("timestamp", timestamp=ts)
    if "endingoffsetsbytimestamp" in opts:
        m = _partition_map(opts, "endingoffsetsbytimestamp")
        _check_timestamps(m, "endingOffsetsByTimestamp")
        return OffsetSpec("timestamps", offsets=m)
    raw = opts.get("endingoffsets")
    if raw is None or raw.strip().lower() == "latest":
        return OffsetSpec("latest")
    if raw.strip().lower() == "earliest":
        raise InvalidOptionError("endingOffsets=earliest is not allowed (it would read nothing); use latest, a "
                                 "timestamp, or JSON offsets")
    m = _partition_map(opts, "endingoffsets")
    for t, parts in m.items():
        for p, v in parts.items():
            if v == EARLIEST:
                raise InvalidOptionError(f"endingOffsets for {t}-{p} is -2 (earliest), which is not allowed")
            if v < LATEST:
                raise InvalidOptionError(f"endingOffsets for {t}-{p} is {v}; expected an offset >= 0, or -1 for latest")
    return OffsetSpec("offsets", offsets=m)


def check_start_before_end(starting: OffsetSpec, ending: OffsetSpec) -> None:
    """Refuse JSON ``startingOffsets`` above JSON ``endingOffsets`` for a partition (it would read
    nothing), as Spark's Kafka source and ``klog export`` do."""
    if starting.kind != "offsets" or ending.kind != "offsets" or not starting.offsets or not ending.offsets:
        return
    for t, parts in starting.offsets.items():
        for p, start in parts.items():
            end = ending.offsets.get(t, {}).get(p)
            if end is not None and start >= 0 and end >= 0 and start > end:
                raise InvalidOptionError(f"startingOffsets for {t}-{p} is {start}, above endingOffsets {end}: the range "
                                         f"would be empty; expected startingOffsets <= endingOffsets")


def _check_timestamps(m: Mapping[str, Mapping[int, int]], name: str) -> None:
    for t, parts in m.items():
        for p, v in parts.items():
            if v < 0:
                raise InvalidOptionError(f"{name} for {t}-{p} is {v}; expected a timestamp in ms >= 0")


def _format(opts: Mapping[str, str], key: str) -> str:
    raw = opts.get(key, "raw").strip().lower()
    if raw not in FORMATS:
        raise InvalidOptionError(f"option {option_name(key)}={opts[key]!r}; expected one of {', '.join(FORMATS)}")
    return raw


def value_formats(opts: Mapping[str, str]) -> ValueFormats:
    """The key/value decoding options (lower-cased keys); InvalidOptionError if wrong."""
    vf, kf = _format(opts, "valueformat"), _format(opts, "keyformat")
    decoded = vf != "raw" or kf != "raw"
    needs = [k for k in ("schemaregistrypath", "schemastopic", "subjectnamestrategy", "recordname", "keysubject",
                         "valuesubject", "mode") if k in opts]
    if needs and not decoded:
        raise InvalidOptionError(f"option {option_name(needs[0])} only applies with valueFormat or keyFormat "
                                 "confluent-avro or confluent-json")
    strategy_raw = opts.get("subjectnamestrategy", "TopicNameStrategy").strip()
    strategy = strategy_raw.rsplit(".", 1)[-1]  # io.confluent...subject.TopicNameStrategy
    by_lower = {s.lower(): s for s in SUBJECT_STRATEGIES}
    if strategy.lower() not in by_lower:
        raise InvalidOptionError(f"option subjectNameStrategy={strategy_raw!r}; expected one of "
                                 f"{', '.join(SUBJECT_STRATEGIES)}")
    strategy = by_lower[strategy.lower()]
    record_name = opts.get("recordname", "").strip() or None
    if strategy != "TopicNameStrategy" and record_name is None:
        missing = [k for k, f in (("valuesubject", vf), ("keysubject", kf)) if f != "raw" and k not in opts]
        if missing:
            raise InvalidOptionError(f"subjectNameStrategy={strategy} needs option recordName (the record's full "
                                     f"name, e.g. com.example.Order) or {option_name(missing[0])}")
    mode = opts.get("mode", "FAILFAST").strip().upper()
    if mode not in ("FAILFAST", "PERMISSIVE"):
        raise InvalidOptionError(f"option mode={opts['mode']!r}; expected FAILFAST (the default: a record that does "
                                 "not decode fails the read) or PERMISSIVE (it is null)")
    reg_path = opts.get("schemaregistrypath")
    reg_paths = None
    if reg_path is not None:
        reg_paths = split_paths(reg_path)
        if not reg_paths:
            raise InvalidOptionError(f"option schemaRegistryPath={reg_path!r} names no directory; expected the log "
                                     "dir holding the _schemas topic")
    topic = opts.get("schemastopic", "_schemas").strip()
    _topic(topic, "schemastopic")
    subjects = {}
    for k in ("keysubject", "valuesubject"):
        v = opts.get(k)
        if v is not None and not v.strip():
            raise InvalidOptionError(f"option {option_name(k)} is empty; expected a subject name")
        subjects[k] = v.strip() if v is not None else None
    return ValueFormats(vf, kf, reg_paths, topic, strategy, record_name, subjects["keysubject"],
                        subjects["valuesubject"], mode == "PERMISSIVE")


def split_paths(path: str) -> tuple[str, ...]:
    """The log dirs of a ``path`` option: ``"dir1,dir2"`` as Kafka's ``log.dirs`` lists them. A local
    path with a glob (``*``, ``?``, ``[...]``) stands for the dirs it matches, sorted
    (``"copies/b*/data"``: every broker's copy of a cluster); one matching nothing is an
    :class:`InvalidOptionError`. URIs are taken as they are."""
    import glob

    out: list[str] = []
    for p in (p.strip() for p in path.split(",")):
        if not p:
            continue
        if "://" in p or not glob.has_magic(p):
            out.append(p)
            continue
        found = sorted(glob.glob(p))
        if not found:
            raise InvalidOptionError(f"no log dir matches {p!r}; expected a glob matching log dirs, such as "
                                     "'copies/b*/data'")
        out.extend(found)
    return tuple(out)


def parse_read_options(options: Mapping[str, str], *, streaming: bool = False) -> ReadOptions:
    """Validate the options of a read; raises InvalidOptionError naming what is wrong."""
    spelled = {str(k).lower(): str(k) for k in options}  # the user's spelling, for messages
    opts, ignored = split_kafka_options({str(k).lower(): str(v) for k, v in options.items()}, write=False)
    storage = StorageOptions.from_options(opts)  # fs.*: the filesystem of URI paths (storage_core.fs)
    opts = {k: v for k, v in opts.items() if not k.startswith(OPTION_PREFIX)}
    # rsm.config.*: the Aiven plugin's settings, spelled as given (key pair ids keep their case)
    rsm = {spelled.get(k, k): v for k, v in opts.items() if k.startswith(RSM_CONFIG_PREFIX)}
    opts = {k: v for k, v in opts.items() if not k.startswith(RSM_CONFIG_PREFIX)}
    known = READ_OPTIONS | STREAM_ONLY_OPTIONS
    unknown = sorted(k for k in opts if k not in known)
    if unknown:
        raise InvalidOptionError(unknown_options_message([spelled[k] for k in unknown], known, "")
                                 + ", ".join(sorted(option_name(k) for k in READ_OPTIONS)))
    path = opts.get("path")
    if not path or not path.strip():
        raise InvalidOptionError("no path: use spark.read.format('klog').load('/path/to/kafka-log-dir')")
    paths = split_paths(path)
    if not paths:
        raise InvalidOptionError(f"path {path!r} names no directory; expected a log dir (or a comma-separated list)")
    for p in paths:
        refuse_credentials(p)  # before any message or plan could show a secret
    selectors = [k for k in ("topics", "subscribe", "topicpattern", "subscribepattern", "assign") if k in opts]
    if len(selectors) > 1:
        raise InvalidOptionError(f"options {', '.join(option_name(s) for s in selectors)} conflict; give at most one of "
                                 "topics (subscribe), topicPattern (subscribePattern), assign")
    topics = None
    pattern = None
    assign = None
    if "topics" in opts or "subscribe" in opts:
        raw = opts.get("topics", opts.get("subscribe", ""))
        topics = tuple(_topic(t.strip(), "topics") for t in raw.split(",") if t.strip())
        if not topics:
            raise InvalidOptionError("option topics is empty; expected a comma-separated list of topic names")
    if "topicpattern" in opts or "subscribepattern" in opts:
        pattern = opts.get("topicpattern", opts.get("subscribepattern", ""))
        try:
            re.compile(pattern)
        except re.error as exc:
            raise InvalidOptionError(f"option topicPattern={pattern!r} is not a valid regular expression: {exc}") from None
    if "assign" in opts:
        obj = _json(opts, "assign")
        if not isinstance(obj, dict) or not all(isinstance(v, list) and all(isinstance(p, int) for p in v)
                                                for v in obj.values()):
            raise InvalidOptionError(f"option assign must be JSON like {{\"topicA\": [0, 1]}}; got {opts['assign']!r}")
        assign = {_topic(t, "assign"): {_partition(p, t, "assign"): 0 for p in ps} for t, ps in obj.items()}
    strategy = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise InvalidOptionError(f"startingOffsetsByTimestampStrategy={strategy!r}; expected error or latest")
    iso = opts.get("isolationlevel", opts.get("kafka.isolation.level", "read_uncommitted")).strip().lower()
    if iso not in ("read_committed", "read_uncommitted"):
        raise InvalidOptionError(f"isolationLevel={iso!r}; expected read_committed or read_uncommitted")
    if streaming:
        starting = OffsetSpec("latest")  # refined by the stream reader
        ending = OffsetSpec("latest")
    else:
        starting = start_spec(opts)
        ending = end_spec(opts)
        check_start_before_end(starting, ending)
    min_parts = option_long(opts, "minpartitions", minimum=1)
    max_records = option_long(opts, "maxrecordsperpartition", minimum=1)
    max_bytes = option_long(opts, "maxbytesperpartition", minimum=1)
    return ReadOptions(
        paths=paths,
        topics=topics,
        topic_pattern=pattern,
        assign=assign,
        starting=starting,
        ending=ending,
        starting_timestamp_strategy=strategy,
        include_headers=_bool(opts, "includeheaders", False),
        include_metadata=_bool(opts, "includemetadata", False),
        read_committed=iso == "read_committed",
        fail_on_data_loss=_bool(opts, "failondataloss", True),
        min_partitions=min_parts,
        max_records_per_partition=max_records,
        max_bytes_per_partition=max_bytes or DEFAULT_MAX_BYTES_PER_PARTITION,
        ignored=ignored,
        storage=storage,
        formats=value_formats(opts),
        max_threads=option_long(opts, "maxthreads", minimum=1),
        remote=RemoteStorage.of(opts.get("remotestorage"), opts.get("remotestoragelayout"), storage,
                                config=opts.get("remotestorageconfig"), rsm=rsm),
    )


