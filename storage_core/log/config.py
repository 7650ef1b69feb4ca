"""Topic configs (``LogConfig.java``, ``TopicConfig.java``): Kafka's names, defaults and rules.

:class:`LogConfig` is a frozen dataclass with one field per topic config of Kafka 4.x, in the
order ``LogConfig.java`` defines them. Every field carries its :class:`ConfigKey` (Kafka name,
type, default, validator, broker-wide synonym, doc) right next to its default;
:data:`CONFIG_KEYS` lists them by Kafka name. Configs klog's storage engine does not act on
(replication, tiered storage, producer timestamp checks) are kept anyway, so that a broker's
topic config passes through klog unchanged (``ConfigKey.broker_only``).

Strings are parsed the way Kafka's ``ConfigDef`` parses them, after removing surrounding
whitespace (Java's ``String.trim``: characters up to U+0020):

- INT / LONG: optional sign and digits, within the Java type's range (``+7``, ``007`` are fine);
- DOUBLE: Java's decimal syntax (``0.5``, ``.5``, ``5e-1``, ``0.5d``);
- BOOLEAN: ``true`` or ``false``, in any case;
- STRING: as given; enum values are case-sensitive, as Kafka's validators are;
- LIST: split at commas (with the whitespace around them), ``""`` is the empty list; lists
  validated against a set of values drop repeated values and reject empty elements, as Kafka
  4.3's ``ValidList`` does.

A bad value is a :class:`~storage_core.errors.LogConfigError` in Kafka's words,
``Invalid value X for configuration NAME: REASON``, where the reason says what is legal; an
unknown name is one that lists the closest known names.

Where klog knowingly differs from Kafka 4.x:

- ``segment.bytes`` accepts values down to 14 (:data:`SEGMENT_BYTES_MIN`, the minimum up to
  Kafka 3.9), so tests and tools can make small segments. Kafka 4.0 (KIP-1030) rejects values
  below 1 MiB (:data:`KAFKA_SEGMENT_BYTES_MIN`) and has the internal ``internal.segment.bytes``
  (which overrides it, see :attr:`LogConfig.segment_size`) for that; klog accepts both. A config
  with ``segment.bytes`` under 1 MiB is one a Kafka 4 broker would refuse to set on a topic,
  although it loads the segments such a config produced.
- ``internal.segment.bytes`` must also be at least 14 (Kafka does not check it).
- ``min.cleanable.dirty.ratio`` rejects NaN (Java's range check lets NaN through).
- Non-ASCII digits and hexadecimal floating-point literals are not numbers here.
"""

from __future__ import annotations

import builtins
import dataclasses
import difflib
import enum
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, TypeVar

from storage_core.errors import LogConfigError
from storage_core.limits import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN
from storage_core.record.compression import CompressionType
from storage_core.record.records import LOG_OVERHEAD

__all__ = [
    "LogConfig",
    "ConfigKey",
    "ConfigType",
    "CleanupPolicy",
    "BrokerCompressionType",
    "MessageTimestampType",
    "Range",
    "ValidString",
    "ValidList",
    "ThrottledReplicaList",
    "CONFIG_KEYS",
    "BROKER_SYNONYMS",
    "REMOVED_CONFIGS",
    "DEFAULT_CONFIG",
    "SEGMENT_BYTES_MIN",
    "KAFKA_SEGMENT_BYTES_MIN",
    "OFFSET_INDEX_ENTRY_SIZE",
    "TIME_INDEX_ENTRY_SIZE",
    "java_double_to_string",
    "topic_configs_from_broker",
]

# --- limits ------------------------------------------------------------------------------------

#: ``segment.bytes``' minimum in klog: Kafka 3.x's ``LegacyRecord.RECORD_OVERHEAD_V0``.
SEGMENT_BYTES_MIN = 14
#: ``segment.bytes``' minimum on a Kafka 4 broker (KIP-1030).
KAFKA_SEGMENT_BYTES_MIN = 1024 * 1024

#: ``.index`` entry: int32 relative offset + int32 position.
OFFSET_INDEX_ENTRY_SIZE = 8
#: ``.timeindex`` entry: int64 timestamp + int32 relative offset.
TIME_INDEX_ENTRY_SIZE = 12

#: ``ServerLogConfigs.MAX_MESSAGE_BYTES_DEFAULT``: 1 MiB plus the offset and size fields.
MAX_MESSAGE_BYTES_DEFAULT = 1024 * 1024 + LOG_OVERHEAD

#: ``LogConfig.DEFAULT_LOCAL_RETENTION_MS/BYTES``: "use retention.ms / retention.bytes".
LOCAL_RETENTION_INHERIT = -2

_WEEK_MS = 7 * 24 * 60 * 60 * 1000
_DAY_MS = 24 * 60 * 60 * 1000
_HOUR_MS = 60 * 60 * 1000

#: Names that were topic configs before Kafka 4 and are not any more, with what to do instead.
REMOVED_CONFIGS: Mapping[str, str] = {
    "message.format.version": "removed in Kafka 4.0 by KIP-724; brokers write record format v2 only",
    "message.timestamp.difference.max.ms": (
        "not a topic config in Kafka 4; use message.timestamp.before.max.ms and "
        "message.timestamp.after.max.ms (KIP-937)"
    ),
}

#: Broker configs that feed a topic config besides its main synonym (``ServerTopicConfigSynonyms``),
#: in Kafka's order after the main one, each with the factor its value is multiplied by
#: (``ConfigSynonym.HOURS_TO_MILLISECONDS``, ``MINUTES_TO_MILLISECONDS``).
_SECONDARY_SYNONYMS: Mapping[str, tuple[tuple[str, int], ...]] = {
    "segment.ms": (("log.roll.hours", _HOUR_MS),),
    "segment.jitter.ms": (("log.roll.jitter.hours", _HOUR_MS),),
    "flush.ms": (("log.flush.scheduler.interval.ms", 1),),
    "retention.ms": (("log.retention.minutes", 60 * 1000), ("log.retention.hours", _HOUR_MS)),
}
_SECONDARY_BROKER_SYNONYMS: Mapping[str, str] = {
    broker: topic for topic, synonyms in _SECONDARY_SYNONYMS.items() for broker, _ in synonyms
}

# --- enums -------------------------------------------------------------------------------------


_E = TypeVar("_E", bound="_KafkaEnum")


class _KafkaEnum(enum.Enum):
    """An enum whose values are Kafka's spellings."""

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """Kafka's spellings, in Kafka's order."""
        return tuple(str(m.value) for m in cls)

    @classmethod
    def from_name(cls: type[_E], name: str) -> _E:
        """The member spelled ``name`` (case-sensitive, as Kafka's validators are)."""
        for m in cls:
            if m.value == name:
                return m
        raise LogConfigError(f"Invalid {cls.__name__} {name!r}; expected one of: {', '.join(cls.names())}")


class CleanupPolicy(_KafkaEnum):
    """The values of ``cleanup.policy``."""

    COMPACT = "compact"
    DELETE = "delete"


class BrokerCompressionType(_KafkaEnum):
    """``compression.type`` (``BrokerCompressionType.java``), in Kafka's order."""

    UNCOMPRESSED = "uncompressed"
    ZSTD = "zstd"
    LZ4 = "lz4"
    SNAPPY = "snappy"
    GZIP = "gzip"
    PRODUCER = "producer"

    @property
    def codec(self) -> CompressionType | None:
        """The codec batches are rewritten with, or None for ``producer`` (keep the producer's)."""
        if self is BrokerCompressionType.PRODUCER:
            return None
        if self is BrokerCompressionType.UNCOMPRESSED:
            return CompressionType.NONE
        return CompressionType.from_name(str(self.value))


class MessageTimestampType(_KafkaEnum):
    """``message.timestamp.type``."""

    CREATE_TIME = "CreateTime"
    LOG_APPEND_TIME = "LogAppendTime"


class ConfigType(enum.Enum):
    """``ConfigDef.Type``, the ones topic configs use."""

    INT = "INT"
    LONG = "LONG"
    DOUBLE = "DOUBLE"
    BOOLEAN = "BOOLEAN"
    STRING = "STRING"
    LIST = "LIST"


# --- validators (ConfigDef.Range, ValidString, ValidList; ThrottledReplicaListValidator) -------

#: A failed check: the value to show in the message, and the reason.
_Failure = tuple[object, str]


@dataclass(frozen=True, slots=True)
class Range:
    """``ConfigDef.Range``; with ``or_equal``, the gzip level rule ``[1,...,9] or -1``."""

    min: int | None = None
    max: int | None = None
    or_equal: int | None = None

    def check(self, value: Any) -> _Failure | None:
        if self.or_equal is not None and value == self.or_equal:
            return None
        if isinstance(value, float) and math.isnan(value):
            return value, f"Value must be a number in {self}, not NaN"
        too_small = self.min is not None and value < self.min
        too_large = self.max is not None and value > self.max
        if self.or_equal is not None and (too_small or too_large):
            return value, f"Value must be between {self.min} and {self.max} or equal to {self.or_equal}"
        if too_small:
            return value, f"Value must be at least {self.min}"
        if too_large:
            return value, f"Value must be no more than {self.max}"
        return None

    def __str__(self) -> str:
        if self.min is None and self.max is None:
            text = "[...]"
        elif self.min is None:
            text = f"[...,{self.max}]"
        elif self.max is None:
            text = f"[{self.min},...]"
        else:
            text = f"[{self.min},...,{self.max}]"
        return text if self.or_equal is None else f"{text} or {self.or_equal}"


@dataclass(frozen=True, slots=True)
class ValidString:
    """``ConfigDef.ValidString.in``: one of a fixed set of strings, case-sensitive."""

    values: tuple[str, ...]

    def check(self, value: Any) -> _Failure | None:
        if value in self.values:
            return None
        return value, f"String must be one of: {', '.join(self.values)}{_case_hint(value, self.values)}"

    def __str__(self) -> str:
        return f"one of: {', '.join(self.values)}"


@dataclass(frozen=True, slots=True)
class ValidList:
    """``ConfigDef.ValidList.in``: a list of strings from a fixed set, possibly empty."""

    values: tuple[str, ...]

    def check(self, value: Any) -> _Failure | None:
        for element in value:
            if element == "":
                return ",".join(value), f"values must not be empty; expected {self}"
            if element not in self.values:
                return element, f"String must be one of: {', '.join(self.values)}{_case_hint(element, self.values)}"
        return None

    def __str__(self) -> str:
        return f"a comma-separated list of: {', '.join(self.values)} (or an empty list)"


_REPLICA = re.compile(r"[0-9]+:[0-9]+")


@dataclass(frozen=True, slots=True)
class ThrottledReplicaList:
    """``ThrottledReplicaListValidator``: ``*``, or ``partition:broker`` pairs."""

    def check(self, value: Any) -> _Failure | None:
        proposed = [_java_trim(str(e)) for e in value]
        if proposed == ["*"] or self._valid_list(proposed):
            return None
        return ",".join(value), (
            "must be the literal '*' or a list of replicas in the following format: "
            "[partitionId]:[brokerId],[partitionId]:[brokerId],..."
        )

    @staticmethod
    def _valid_list(proposed: list[str]) -> bool:
        # Empty entries may only trail (what Kafka's isValidReplicaList accepts).
        seen_empty = False
        for replica in proposed:
            if replica == "":
                seen_empty = True
            elif seen_empty or not _REPLICA.fullmatch(replica):
                return False
            elif any(int(part) > INT32_MAX for part in replica.split(":")):
                return False
        return True

    def __str__(self) -> str:
        return "'*' or [partitionId]:[brokerId],[partitionId]:[brokerId],..."


_Validator = Range | ValidString | ValidList | ThrottledReplicaList


def _case_hint(value: object, legal: tuple[str, ...]) -> str:
    if value == "none" and "uncompressed" in legal:  # the producer's name for it
        return " (a topic's compression.type spells no compression 'uncompressed')"
    if isinstance(value, str):
        for name in legal:
            if name.lower() == value.lower():
                return f" (values are case-sensitive: did you mean {name}?)"
    return ""


# --- parsing and formatting like ConfigDef ------------------------------------------------------

_JAVA_TRIM = "".join(chr(c) for c in range(0x21))
_INTEGER = re.compile(r"[+-]?[0-9]+")
# Double.parseDouble's decimal syntax; NaN and Infinity included (the range check decides).
_DOUBLE_SYNTAX = re.compile(r"[+-]?(?:NaN|Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fFdD]?)")
# ConfigDef.COMMA_WITH_WHITESPACE; Java's \s is [ \t\n\x0B\f\r].
_LIST_SEPARATOR = re.compile(r"[ \t\n\x0b\f\r]*,[ \t\n\x0b\f\r]*")
_INT_RANGES = {ConfigType.INT: (INT32_MIN, INT32_MAX), ConfigType.LONG: (INT64_MIN, INT64_MAX)}


def _java_trim(text: str) -> str:
    return text.strip(_JAVA_TRIM)


def _parse_integer(text: str, lo: int, hi: int) -> int | None:
    """``Integer/Long.parseLong`` (ASCII digits): None when not a number of the range."""
    if not _INTEGER.fullmatch(text) or len(text.lstrip("+-0")) > 20:  # also keeps int() off huge strings
        return None
    value = int(text)
    return value if lo <= value <= hi else None


def _parse_double(text: str) -> float | None:
    if not _DOUBLE_SYNTAX.fullmatch(text):
        return None
    body = text.rstrip("fFdD") if not text.endswith("Infinity") else text
    return float(body.replace("Infinity", "inf"))


def java_double_to_string(value: float) -> str:
    """``Double.toString``: ``0.5``, ``100.0``, ``1.0E-5``, ``1.0E7`` (what Kafka prints for a DOUBLE)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    sign = "-" if value < 0 else ""
    magnitude = abs(value)
    exact = Decimal(repr(magnitude)).normalize()  # the shortest digits that read back the same
    if 1e-3 <= magnitude < 1e7:
        text = format(exact, "f")
        return sign + (text if "." in text else text + ".0")
    _, digits, exponent = exact.as_tuple()
    assert isinstance(exponent, int)
    mantissa = "".join(map(str, digits))
    power = len(mantissa) - 1 + exponent
    return f"{sign}{mantissa[0]}.{mantissa[1:] or '0'}E{power}"


def _show(value: object) -> str:
    """A value as it goes into a message: bare like Kafka, quoted when blank or padded."""
    text = str(value)
    return repr(text) if text == "" or text != text.strip() else text


@dataclass(frozen=True, slots=True)
class ConfigKey:
    """One topic config: ``ConfigDef.ConfigKey`` plus what klog needs to know about it."""

    name: str
    type: ConfigType
    default: Any
    validator: _Validator | None
    doc: str
    #: The broker-wide config that sets this one's default (``ServerTopicConfigSynonyms``).
    broker_name: str | None = None
    #: The enum of the values (STRING) or of the elements (LIST), when there is one.
    enum_type: builtins.type[_KafkaEnum] | None = None
    #: Kept so that a broker's config round-trips; klog's storage engine does not act on it.
    broker_only: bool = False
    #: ``defineInternal``: not in Kafka's documentation.
    internal: bool = False
    #: None is a legal value (and the default): set or not set.
    nullable: bool = False

    @property
    def attr(self) -> str:
        """The :class:`LogConfig` field: the Kafka name in snake_case."""
        return self.name.replace(".", "_")

    def legal(self) -> str:
        """What values are legal, in words."""
        t = self.type
        if t in (ConfigType.INT, ConfigType.LONG, ConfigType.DOUBLE):
            article = "an" if t is ConfigType.INT else "a"
            if self.validator is None:
                lo, hi = _INT_RANGES[t]
                return f"{article} {t.value} in [{lo},...,{hi}]"
            return f"{article} {t.value} in {self.validator}"
        if t is ConfigType.BOOLEAN:
            return "true or false"
        return str(self.validator) if self.validator is not None else f"any {t.value}"

    def error(self, value: object, reason: str) -> LogConfigError:
        return LogConfigError(f"Invalid value {_show(value)} for configuration {self.name}: {reason}")

    def parse(self, raw: str) -> Any:
        """A Kafka property string to the field's value; raises :class:`LogConfigError`."""
        text = _java_trim(raw)
        t = self.type
        value: Any
        if t in (ConfigType.INT, ConfigType.LONG):
            value = _parse_integer(text, *_INT_RANGES[t])
            if value is None:
                raise self.error(raw, f"Not a number of type {t.value}; expected {self.legal()}")
        elif t is ConfigType.DOUBLE:
            value = _parse_double(text)
            if value is None:
                raise self.error(raw, f"Not a number of type {t.value}; expected {self.legal()}")
        elif t is ConfigType.BOOLEAN:
            lowered = text.lower()
            if lowered not in ("true", "false"):
                raise self.error(raw, "Expected value to be either true or false")
            value = lowered == "true"
        elif t is ConfigType.STRING:
            value = text
        else:
            value = tuple(_LIST_SEPARATOR.split(text)) if text else ()
        return self._checked(value)

    def coerce(self, value: object) -> Any:
        """A Python value (or a Kafka string) to the field's value; raises :class:`LogConfigError`."""
        if isinstance(value, str):
            return self.parse(value)
        t = self.type
        if value is None:
            if self.nullable:
                return None
        elif t in (ConfigType.INT, ConfigType.LONG):
            if isinstance(value, int) and not isinstance(value, bool):
                lo, hi = _INT_RANGES[t]
                if not lo <= value <= hi:
                    raise self.error(value, f"Not a number of type {t.value}; expected {self.legal()}")
                return self._checked(int(value))
        elif t is ConfigType.DOUBLE:
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                return self._checked(float(value))
        elif t is ConfigType.BOOLEAN:
            if isinstance(value, bool):
                return value
        elif t is ConfigType.STRING:
            if self.enum_type is not None and isinstance(value, self.enum_type):
                return value
        elif isinstance(value, Sequence):
            elements = [e.value if isinstance(e, _KafkaEnum) else e for e in value]
            if all(isinstance(e, str) for e in elements):
                return self._checked(tuple(elements))
        kind = "None" if value is None else type(value).__name__
        raise self.error(value, f"expected {self.legal()}, got {kind}")

    def _checked(self, value: Any) -> Any:
        if isinstance(self.validator, ValidList):
            value = tuple(dict.fromkeys(value))  # Kafka 4.3's ValidList drops repeated values
        if self.validator is not None:
            failure = self.validator.check(value)
            if failure is not None:
                shown, reason = failure
                if isinstance(shown, float):
                    shown = java_double_to_string(shown)  # as Kafka shows the parsed Double
                if isinstance(self.validator, ThrottledReplicaList):
                    reason = f"{self.name} {reason}"
                raise self.error(shown, reason)
        if self.enum_type is not None:
            if self.type is ConfigType.LIST:
                return tuple(self.enum_type(v) for v in value)
            return self.enum_type(value)
        return value

    def render(self, value: Any) -> str:
        """The field's value as Kafka writes it (``ConfigDef.convertToString``)."""
        if value is None:
            return ""
        if self.type is ConfigType.BOOLEAN:
            return "true" if value else "false"
        if self.type is ConfigType.DOUBLE:
            return java_double_to_string(value)
        if self.type is ConfigType.LIST:
            return ",".join(str(v.value) if isinstance(v, _KafkaEnum) else str(v) for v in value)
        if isinstance(value, _KafkaEnum):
            return str(value.value)
        return str(value)


_META = "klog.config"
_T = TypeVar("_T")


def _key(
    name: str,
    default: _T,
    type_: ConfigType,
    validator: _Validator | None = None,
    *,
    broker: str | None,
    doc: str,
    enum_type: type[_KafkaEnum] | None = None,
    broker_only: bool = False,
    internal: bool = False,
) -> _T:
    """A :class:`LogConfig` field: the default, with its :class:`ConfigKey` in the metadata."""
    if enum_type is not None and validator is None:
        names = enum_type.names()
        validator = ValidList(names) if type_ is ConfigType.LIST else ValidString(names)
    key = ConfigKey(name, type_, default, validator, doc, broker, enum_type, broker_only, internal, default is None)
    return field(default=default, metadata={_META: key})


_INT = ConfigType.INT
_LONG = ConfigType.LONG
_DOUBLE = ConfigType.DOUBLE
_BOOLEAN = ConfigType.BOOLEAN
_STRING = ConfigType.STRING
_LIST = ConfigType.LIST


def _at_least(n: int) -> Range:
    return Range(min=n)


# --- the config --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LogConfig:
    """A topic's configs, with Kafka's names (see :data:`CONFIG_KEYS`) and Kafka 4.x defaults.

    Build one with :meth:`from_properties` (Kafka names, string values), or directly with Python
    values (``LogConfig(segment_bytes=1 << 20)``); either way every value is validated. Derive
    new ones with :meth:`with_overrides` (field names) or :meth:`merged` (Kafka names).
    """

    segment_bytes: int = _key(
        "segment.bytes", 1024 * 1024 * 1024, _INT, _at_least(SEGMENT_BYTES_MIN), broker="log.segment.bytes",
        doc="Roll a new segment when an append would take the active one past this size. "
        "Kafka 4 brokers require at least 1 MiB; klog accepts 14 and up.",
    )
    segment_ms: int = _key(
        "segment.ms", _WEEK_MS, _LONG, _at_least(1), broker="log.roll.ms",
        doc="Roll a new segment when its records span this long (by record timestamps).",
    )
    segment_jitter_ms: int = _key(
        "segment.jitter.ms", 0, _LONG, _at_least(0), broker="log.roll.jitter.ms",
        doc="Largest random amount subtracted from segment.ms per segment.",
    )
    segment_index_bytes: int = _key(
        "segment.index.bytes", 10 * 1024 * 1024, _INT, _at_least(4), broker="log.index.size.max.bytes",
        doc="Size the offset and time indexes are preallocated to; a full index rolls the segment.",
    )
    flush_messages: int = _key(
        "flush.messages", INT64_MAX, _LONG, _at_least(1), broker="log.flush.interval.messages",
        doc="fsync after this many messages (default: leave it to the OS).",
    )
    flush_ms: int = _key(
        "flush.ms", INT64_MAX, _LONG, _at_least(0), broker="log.flush.interval.ms",
        doc="fsync when data has been unflushed this long (default: leave it to the OS).",
    )
    # No validator in Kafka: any negative value means "no size limit".
    retention_bytes: int = _key(
        "retention.bytes", -1, _LONG, broker="log.retention.bytes",
        doc="Delete old segments while the partition is larger than this (delete policy); -1: no limit.",
    )
    retention_ms: int = _key(
        "retention.ms", _WEEK_MS, _LONG, _at_least(-1), broker="log.retention.ms",
        doc="Delete segments whose newest record is older than this (delete policy); -1: no limit.",
    )
    max_message_bytes: int = _key(
        "max.message.bytes", MAX_MESSAGE_BYTES_DEFAULT, _INT, _at_least(0), broker="message.max.bytes",
        doc="Largest record batch accepted (after compression).",
    )
    index_interval_bytes: int = _key(
        "index.interval.bytes", 4096, _INT, _at_least(0), broker="log.index.interval.bytes",
        doc="Add an index entry once more than this many bytes were appended since the last one.",
    )
    delete_retention_ms: int = _key(
        "delete.retention.ms", _DAY_MS, _LONG, _at_least(0), broker="log.cleaner.delete.retention.ms",
        doc="How long compaction keeps tombstones.",
    )
    min_compaction_lag_ms: int = _key(
        "min.compaction.lag.ms", 0, _LONG, _at_least(0), broker="log.cleaner.min.compaction.lag.ms",
        doc="Records younger than this are not compacted.",
    )
    max_compaction_lag_ms: int = _key(
        "max.compaction.lag.ms", INT64_MAX, _LONG, _at_least(1), broker="log.cleaner.max.compaction.lag.ms",
        doc="Records older than this make the log eligible for compaction whatever its dirty ratio.",
    )
    file_delete_delay_ms: int = _key(
        "file.delete.delay.ms", 60000, _LONG, _at_least(0), broker="log.segment.delete.delay.ms",
        doc="How long *.deleted files stay before they are removed.",
    )
    min_cleanable_dirty_ratio: float = _key(
        "min.cleanable.dirty.ratio", 0.5, _DOUBLE, Range(0, 1), broker="log.cleaner.min.cleanable.ratio",
        doc="Compact a log once this fraction of it is uncompacted.",
    )
    # Kafka 4.x allows the empty list: no cleanup at all, infinite retention (TopicConfig's doc).
    cleanup_policy: tuple[CleanupPolicy, ...] = _key(
        "cleanup.policy", (CleanupPolicy.DELETE,), _LIST, broker="log.cleanup.policy", enum_type=CleanupPolicy,
        doc="delete, compact, both, or none (empty): how old segments are cleaned up.",
    )
    unclean_leader_election_enable: bool = _key(
        "unclean.leader.election.enable", False, _BOOLEAN, broker="unclean.leader.election.enable",
        broker_only=True, doc="Let an out-of-sync replica become leader as a last resort.",
    )
    min_insync_replicas: int = _key(
        "min.insync.replicas", 1, _INT, _at_least(1), broker="min.insync.replicas", broker_only=True,
        doc="Replicas that must acknowledge an acks=all write.",
    )
    compression_type: BrokerCompressionType = _key(
        "compression.type", BrokerCompressionType.PRODUCER, _STRING, broker="compression.type",
        enum_type=BrokerCompressionType,
        doc="Codec batches are stored with; producer keeps the producer's codec.",
    )
    # CompressionType.GZIP.levelValidator(): 1..9, or -1 for zlib's default (6).
    compression_gzip_level: int = _key(
        "compression.gzip.level", -1, _INT, Range(1, 9, or_equal=-1), broker="compression.gzip.level",
        doc="gzip level when compression.type is gzip; -1: the codec's default.",
    )
    compression_lz4_level: int = _key(
        "compression.lz4.level", 9, _INT, Range(1, 17), broker="compression.lz4.level",
        doc="lz4 level when compression.type is lz4.",
    )
    compression_zstd_level: int = _key(
        "compression.zstd.level", 3, _INT, Range(-131072, 22), broker="compression.zstd.level",
        doc="zstd level when compression.type is zstd.",
    )
    preallocate: bool = _key(
        "preallocate", False, _BOOLEAN, broker="log.preallocate",
        doc="Create new segment files at their full segment.bytes size.",
    )
    message_timestamp_type: MessageTimestampType = _key(
        "message.timestamp.type", MessageTimestampType.CREATE_TIME, _STRING, broker="log.message.timestamp.type",
        enum_type=MessageTimestampType,
        doc="CreateTime keeps the producer's timestamps; LogAppendTime stamps batches on append.",
    )
    message_timestamp_before_max_ms: int = _key(
        "message.timestamp.before.max.ms", INT64_MAX, _LONG, _at_least(0),
        broker="log.message.timestamp.before.max.ms", broker_only=True,
        doc="How far in the past a CreateTime timestamp may be.",
    )
    # Kafka 4.0 (KIP-1030) lowered the default from Long.MAX_VALUE to one hour.
    message_timestamp_after_max_ms: int = _key(
        "message.timestamp.after.max.ms", _HOUR_MS, _LONG, _at_least(0),
        broker="log.message.timestamp.after.max.ms", broker_only=True,
        doc="How far in the future a CreateTime timestamp may be.",
    )
    leader_replication_throttled_replicas: tuple[str, ...] = _key(
        "leader.replication.throttled.replicas", (), _LIST, ThrottledReplicaList(), broker=None, broker_only=True,
        doc="Replicas throttled on the leader side: '*' or partition:broker pairs.",
    )
    follower_replication_throttled_replicas: tuple[str, ...] = _key(
        "follower.replication.throttled.replicas", (), _LIST, ThrottledReplicaList(), broker=None, broker_only=True,
        doc="Replicas throttled on the follower side: '*' or partition:broker pairs.",
    )
    remote_storage_enable: bool = _key(
        "remote.storage.enable", False, _BOOLEAN, broker=None, broker_only=True,
        doc="Tiered storage for this topic.",
    )
    local_retention_ms: int = _key(
        "local.retention.ms", LOCAL_RETENTION_INHERIT, _LONG, _at_least(-2), broker="log.local.retention.ms",
        broker_only=True, doc="Local retention with tiered storage; -2: use retention.ms.",
    )
    local_retention_bytes: int = _key(
        "local.retention.bytes", LOCAL_RETENTION_INHERIT, _LONG, _at_least(-2), broker="log.local.retention.bytes",
        broker_only=True, doc="Local retention with tiered storage; -2: use retention.bytes.",
    )
    remote_log_copy_disable: bool = _key(
        "remote.log.copy.disable", False, _BOOLEAN, broker=None, broker_only=True,
        doc="Stop uploading to tiered storage (tiered data becomes read-only).",
    )
    # remote.copy.lag.*: in Kafka's LogConfig after 4.3 (kafka-clients 4.3.0's TopicConfig lacks
    # them); accepted so that configs from newer brokers load.
    remote_copy_lag_ms: int = _key(
        "remote.copy.lag.ms", 0, _LONG, _at_least(-1), broker=None, broker_only=True,
        doc="Delay before a rolled segment is copied to tiered storage; -1: the local retention.",
    )
    remote_copy_lag_bytes: int = _key(
        "remote.copy.lag.bytes", 0, _LONG, _at_least(-1), broker=None, broker_only=True,
        doc="Bytes a partition may hold before rolled segments are copied; -1: the local retention.",
    )
    remote_log_delete_on_disable: bool = _key(
        "remote.log.delete.on.disable", False, _BOOLEAN, broker=None, broker_only=True,
        doc="Delete tiered data when tiered storage is turned off for the topic.",
    )
    # A no-op since Kafka 4.0, deprecated for removal in 5.0 (TopicConfig's doc in 4.3); still a
    # legal topic config in 4.x, so kept.
    message_downconversion_enable: bool = _key(
        "message.downconversion.enable", True, _BOOLEAN, broker=None,
        broker_only=True, doc="No effect since Kafka 4.0.",
    )
    internal_segment_bytes: int | None = _key(
        "internal.segment.bytes", None, _INT, _at_least(SEGMENT_BYTES_MIN), broker=None, internal=True,
        doc="Overrides segment.bytes when set, without its 1 MiB minimum (Kafka: for tests).",
    )

    def __post_init__(self) -> None:
        for key in CONFIG_KEYS.values():
            value = getattr(self, key.attr)
            checked = key.coerce(value)
            if checked is not value:
                object.__setattr__(self, key.attr, checked)
        # LogConfig.validateValues
        if self.min_compaction_lag_ms > self.max_compaction_lag_ms:
            raise LogConfigError(
                f"conflict topic config setting min.compaction.lag.ms ({self.min_compaction_lag_ms}) > "
                f"max.compaction.lag.ms ({self.max_compaction_lag_ms})"
            )

    # --- building ------------------------------------------------------------------------------

    @classmethod
    def from_properties(cls, props: Mapping[str, object], *, strict: bool = True) -> LogConfig:
        """A config from Kafka-named properties over Kafka's defaults.

        Values are strings parsed like Kafka's ``ConfigDef`` (or Python values of the field's
        type). Unknown names raise :class:`LogConfigError` naming the closest known ones, unless
        ``strict`` is false, in which case they are ignored.
        """
        return cls().merged(props, strict=strict)

    def merged(self, props: Mapping[str, object], *, strict: bool = True) -> LogConfig:
        """A copy with Kafka-named properties applied on top (see :meth:`from_properties`)."""
        if strict:
            unknown = [name for name in props if name not in CONFIG_KEYS]
            if unknown:
                raise LogConfigError("; ".join(_unknown_name(name) for name in sorted(unknown)))
        changes = {CONFIG_KEYS[name].attr: CONFIG_KEYS[name].coerce(value)
                   for name, value in props.items() if name in CONFIG_KEYS}
        return dataclasses.replace(self, **changes)

    def with_overrides(self, **overrides: object) -> LogConfig:
        """A copy with fields replaced by name (``segment_bytes=...``); values are validated."""
        unknown = [name for name in overrides if name not in _KEYS_BY_ATTR]
        if unknown:
            raise LogConfigError("; ".join(_unknown_attr(name) for name in sorted(unknown)))
        changes: dict[str, Any] = dict(overrides)  # __post_init__ checks and converts them
        return dataclasses.replace(self, **changes)

    # --- reading -------------------------------------------------------------------------------

    def get(self, name: str) -> Any:
        """The value of a config by its Kafka name."""
        key = CONFIG_KEYS.get(name)
        if key is None:
            raise LogConfigError(_unknown_name(name))
        return getattr(self, key.attr)

    def to_properties(self, *, include_defaults: bool = False) -> dict[str, str]:
        """Kafka-named properties in Kafka's formatting; by default only the values that differ
        from Kafka's defaults (a topic's overrides). An unset ``internal.segment.bytes`` is left out."""
        props: dict[str, str] = {}
        for key in CONFIG_KEYS.values():
            value = getattr(self, key.attr)
            if value is None or (not include_defaults and value == key.default):
                continue
            props[key.name] = key.render(value)
        return props

    @property
    def compact(self) -> bool:
        """``cleanup.policy`` contains ``compact``."""
        return CleanupPolicy.COMPACT in self.cleanup_policy

    @property
    def delete(self) -> bool:
        """``cleanup.policy`` contains ``delete``."""
        return CleanupPolicy.DELETE in self.cleanup_policy

    @property
    def segment_size(self) -> int:
        """The segment size in effect: ``internal.segment.bytes`` if set, else ``segment.bytes``."""
        return self.segment_bytes if self.internal_segment_bytes is None else self.internal_segment_bytes

    @property
    def max_index_entries(self) -> int:
        """Entries an ``.index`` holds (``segment.index.bytes`` rounded down to whole entries)."""
        return self.segment_index_bytes // OFFSET_INDEX_ENTRY_SIZE

    @property
    def max_time_index_entries(self) -> int:
        """Entries a ``.timeindex`` holds."""
        return self.segment_index_bytes // TIME_INDEX_ENTRY_SIZE

    @property
    def max_segment_ms(self) -> int:
        """``LogConfig.maxSegmentMs``: a compacted log also rolls by ``max.compaction.lag.ms``."""
        if self.compact and self.max_compaction_lag_ms > 0:
            return min(self.max_compaction_lag_ms, self.segment_ms)
        return self.segment_ms

    @property
    def init_file_size(self) -> int:
        """``LogConfig.initFileSize``: bytes a new ``.log`` is created with."""
        return self.segment_size if self.preallocate else 0

    @property
    def codec(self) -> CompressionType | None:
        """The codec batches are stored with, or None to keep the producer's."""
        return self.compression_type.codec

    @property
    def compression_level(self) -> int | None:
        """The configured level for the codec of ``compression.type`` (gzip's -1: zlib's default)."""
        return {
            BrokerCompressionType.GZIP: self.compression_gzip_level,
            BrokerCompressionType.LZ4: self.compression_lz4_level,
            BrokerCompressionType.ZSTD: self.compression_zstd_level,
        }.get(self.compression_type)

    @property
    def effective_local_retention_ms(self) -> int:
        """``LogConfig.localRetentionMs``: ``local.retention.ms``, or ``retention.ms`` for -2."""
        return self.retention_ms if self.local_retention_ms == LOCAL_RETENTION_INHERIT else self.local_retention_ms

    @property
    def effective_local_retention_bytes(self) -> int:
        """``LogConfig.localRetentionBytes``: ``local.retention.bytes``, or ``retention.bytes`` for -2."""
        if self.local_retention_bytes == LOCAL_RETENTION_INHERIT:
            return self.retention_bytes
        return self.local_retention_bytes


#: Every topic config by Kafka name, in ``LogConfig.java``'s order.
CONFIG_KEYS: Mapping[str, ConfigKey] = {
    k.name: k for k in (f.metadata[_META] for f in dataclasses.fields(LogConfig))
}
_KEYS_BY_ATTR: Mapping[str, ConfigKey] = {k.attr: k for k in CONFIG_KEYS.values()}
_BROKER_NAMES: Mapping[str, str] = {
    **{k.broker_name: k.name for k in CONFIG_KEYS.values() if k.broker_name and k.broker_name != k.name},
    **_SECONDARY_BROKER_SYNONYMS,
}


#: ``ServerTopicConfigSynonyms.ALL_TOPIC_CONFIG_SYNONYMS``: for each topic config that has a
#: broker-wide default, the broker configs that set it, highest priority first, each with the
#: factor that turns its value into the topic config's (``log.retention.hours`` is hours).
BROKER_SYNONYMS: Mapping[str, tuple[tuple[str, int], ...]] = {
    k.name: ((k.broker_name, 1), *_SECONDARY_SYNONYMS.get(k.name, ()))
    for k in CONFIG_KEYS.values() if k.broker_name
}


def topic_configs_from_broker(props: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """Broker-named configs (``log.retention.ms``, ``log.cleanup.policy``, a KRaft dynamic broker
    default) as the topic configs they default: for each topic config the first synonym set in
    ``props`` wins (``log.retention.ms`` over ``log.retention.minutes`` over
    ``log.retention.hours``), converted to the topic config's unit. Returns the topic configs and
    what could not be used (a value a converter cannot parse), in words; broker configs that are
    no topic config's synonym (``num.io.threads``) are not topic configs and are left out."""
    out: dict[str, str] = {}
    problems: list[str] = []
    for topic_name, synonyms in BROKER_SYNONYMS.items():
        for broker_name, factor in synonyms:
            if broker_name not in props:
                continue
            value = props[broker_name]
            if factor != 1:
                n = _parse_integer(_java_trim(value), INT64_MIN, INT64_MAX)
                if n is None or not INT64_MIN <= n * factor <= INT64_MAX:
                    problems.append(f"{broker_name}={value} (not a number of {'hours' if factor == _HOUR_MS else 'minutes'})")
                    continue
                value = str(n * factor)
            out[topic_name] = value
            break
    return out, problems


def _unknown_name(name: str) -> str:
    text = f"Unknown topic config name: {_show(name)}"
    if name in REMOVED_CONFIGS:
        return f"{text} ({REMOVED_CONFIGS[name]})"
    if name in _BROKER_NAMES:
        return f"{text} ({name} is a broker config; the topic config is {_BROKER_NAMES[name]})"
    dotted = name.strip().lower().replace("_", ".").replace("-", ".")
    close = [dotted] if dotted in CONFIG_KEYS else difflib.get_close_matches(name, list(CONFIG_KEYS), n=3)
    if close:
        return f"{text} (did you mean {' or '.join(close)}?)"
    return f"{text} (known topic configs: {', '.join(CONFIG_KEYS)})"


def _unknown_attr(name: str) -> str:
    text = f"Unknown LogConfig field: {_show(name)}"
    close = difflib.get_close_matches(name, list(_KEYS_BY_ATTR), n=3)
    if close:
        return f"{text} (did you mean {' or '.join(close)}?)"
    return f"{text} (fields: {', '.join(_KEYS_BY_ATTR)})"


#: Kafka's defaults.
DEFAULT_CONFIG = LogConfig()
