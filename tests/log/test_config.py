"""LogConfig: Kafka's topic config names, defaults, parsing, validation and formatting.

The expected values below are written out from Kafka's sources (``LogConfig.java``,
``ServerLogConfigs.java``, ``TopicConfig.java``, ``CompressionType``'s level validators), not
derived from klog's tables. ``test_parsing_agrees_with_kafka_configdef`` runs Kafka 4.3's own
``ConfigDef`` (kafka-clients jar, via the test oracle's cache) over the same strings.
"""

from __future__ import annotations

import dataclasses
import math
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storage_core.errors import KlogError, LogConfigError
from storage_core.log.config import (
    CONFIG_KEYS,
    DEFAULT_CONFIG,
    KAFKA_SEGMENT_BYTES_MIN,
    BrokerCompressionType,
    CleanupPolicy,
    ConfigType,
    LogConfig,
    MessageTimestampType,
    Range,
    ThrottledReplicaList,
    ValidList,
    java_double_to_string,
)
from storage_core.record.compression import CompressionType

LONG_MAX = 9223372036854775807
INT_MAX = 2147483647

# --- defaults ----------------------------------------------------------------------------------

# (Kafka name, Python value, Kafka's string form, ConfigDef type) for every topic config.
KAFKA_DEFAULTS: list[tuple[str, Any, str, str]] = [
    ("segment.bytes", 1073741824, "1073741824", "INT"),
    ("segment.ms", 604800000, "604800000", "LONG"),
    ("segment.jitter.ms", 0, "0", "LONG"),
    ("segment.index.bytes", 10485760, "10485760", "INT"),
    ("flush.messages", LONG_MAX, "9223372036854775807", "LONG"),
    ("flush.ms", LONG_MAX, "9223372036854775807", "LONG"),
    ("retention.bytes", -1, "-1", "LONG"),
    ("retention.ms", 604800000, "604800000", "LONG"),
    ("max.message.bytes", 1048588, "1048588", "INT"),
    ("index.interval.bytes", 4096, "4096", "INT"),
    ("delete.retention.ms", 86400000, "86400000", "LONG"),
    ("min.compaction.lag.ms", 0, "0", "LONG"),
    ("max.compaction.lag.ms", LONG_MAX, "9223372036854775807", "LONG"),
    ("file.delete.delay.ms", 60000, "60000", "LONG"),
    ("min.cleanable.dirty.ratio", 0.5, "0.5", "DOUBLE"),
    ("cleanup.policy", (CleanupPolicy.DELETE,), "delete", "LIST"),
    ("unclean.leader.election.enable", False, "false", "BOOLEAN"),
    ("min.insync.replicas", 1, "1", "INT"),
    ("compression.type", BrokerCompressionType.PRODUCER, "producer", "STRING"),
    ("compression.gzip.level", -1, "-1", "INT"),
    ("compression.lz4.level", 9, "9", "INT"),
    ("compression.zstd.level", 3, "3", "INT"),
    ("preallocate", False, "false", "BOOLEAN"),
    ("message.timestamp.type", MessageTimestampType.CREATE_TIME, "CreateTime", "STRING"),
    ("message.timestamp.before.max.ms", LONG_MAX, "9223372036854775807", "LONG"),
    ("message.timestamp.after.max.ms", 3600000, "3600000", "LONG"),  # Kafka 4.0, KIP-1030
    ("leader.replication.throttled.replicas", (), "", "LIST"),
    ("follower.replication.throttled.replicas", (), "", "LIST"),
    ("remote.storage.enable", False, "false", "BOOLEAN"),
    ("local.retention.ms", -2, "-2", "LONG"),
    ("local.retention.bytes", -2, "-2", "LONG"),
    ("remote.log.copy.disable", False, "false", "BOOLEAN"),
    ("remote.copy.lag.ms", 0, "0", "LONG"),
    ("remote.copy.lag.bytes", 0, "0", "LONG"),
    ("remote.log.delete.on.disable", False, "false", "BOOLEAN"),
    ("message.downconversion.enable", True, "true", "BOOLEAN"),
    ("internal.segment.bytes", None, "", "INT"),
]

# TopicConfig.*_CONFIG of kafka-clients 4.3.0 (javap -constants), minus the policy values.
TOPIC_CONFIG_4_3 = {
    "segment.bytes", "segment.ms", "segment.jitter.ms", "segment.index.bytes", "flush.messages", "flush.ms",
    "retention.bytes", "retention.ms", "remote.storage.enable", "local.retention.ms", "local.retention.bytes",
    "remote.log.copy.disable", "remote.log.delete.on.disable", "max.message.bytes", "index.interval.bytes",
    "file.delete.delay.ms", "delete.retention.ms", "min.compaction.lag.ms", "max.compaction.lag.ms",
    "min.cleanable.dirty.ratio", "cleanup.policy", "unclean.leader.election.enable", "min.insync.replicas",
    "compression.type", "compression.gzip.level", "compression.lz4.level", "compression.zstd.level", "preallocate",
    "message.timestamp.type", "message.timestamp.before.max.ms", "message.timestamp.after.max.ms",
    "message.downconversion.enable",
}


def test_every_kafka_topic_config_is_known_and_nothing_else() -> None:
    assert [name for name, *_ in KAFKA_DEFAULTS] == list(CONFIG_KEYS)
    assert TOPIC_CONFIG_4_3 <= set(CONFIG_KEYS)
    extra = set(CONFIG_KEYS) - TOPIC_CONFIG_4_3
    assert extra == {
        "leader.replication.throttled.replicas",  # QuotaConfig
        "follower.replication.throttled.replicas",
        "remote.copy.lag.ms",  # LogConfig after 4.3
        "remote.copy.lag.bytes",
        "internal.segment.bytes",  # LogConfig.defineInternal
    }


@pytest.mark.parametrize(("name", "value", "text", "type_name"), KAFKA_DEFAULTS, ids=[d[0] for d in KAFKA_DEFAULTS])
def test_defaults_are_kafkas(name: str, value: Any, text: str, type_name: str) -> None:
    key = CONFIG_KEYS[name]
    assert key.default == value
    assert key.type is ConfigType(type_name)
    assert getattr(LogConfig(), key.attr) == value
    assert DEFAULT_CONFIG.get(name) == value
    assert key.render(value) == text
    if value is not None:
        assert getattr(LogConfig.from_properties({name: text}), key.attr) == value


def test_field_names_are_the_kafka_names_in_snake_case() -> None:
    fields = dataclasses.fields(LogConfig)
    assert [f.name for f in fields] == [name.replace(".", "_") for name in CONFIG_KEYS]
    assert all(CONFIG_KEYS[f.metadata["klog.config"].name] is f.metadata["klog.config"] for f in fields)
    assert LogConfig().segment_bytes == 1 << 30
    assert LogConfig().min_insync_replicas == 1


@pytest.mark.parametrize(
    ("name", "broker"),
    [
        ("segment.bytes", "log.segment.bytes"),
        ("segment.ms", "log.roll.ms"),
        ("segment.index.bytes", "log.index.size.max.bytes"),
        ("flush.messages", "log.flush.interval.messages"),
        ("max.message.bytes", "message.max.bytes"),
        ("min.cleanable.dirty.ratio", "log.cleaner.min.cleanable.ratio"),
        ("file.delete.delay.ms", "log.segment.delete.delay.ms"),
        ("delete.retention.ms", "log.cleaner.delete.retention.ms"),
        ("compression.type", "compression.type"),
        ("remote.storage.enable", None),
    ],
)
def test_broker_synonyms(name: str, broker: str | None) -> None:
    assert CONFIG_KEYS[name].broker_name == broker


def test_broker_only_configs_are_marked() -> None:
    broker_only = {n for n, k in CONFIG_KEYS.items() if k.broker_only}
    assert "min.insync.replicas" in broker_only and "remote.storage.enable" in broker_only
    assert not broker_only & {"segment.bytes", "cleanup.policy", "compression.type", "index.interval.bytes"}
    assert [n for n, k in CONFIG_KEYS.items() if k.internal] == ["internal.segment.bytes"]


# --- parsing, per type -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "value"),
    [
        ("1048576", 1048576),
        ("  1048576\t", 1048576),
        ("+1048576", 1048576),
        ("0001048576", 1048576),
        ("14", 14),
        (str(INT_MAX), INT_MAX),
    ],
)
def test_parse_int(raw: str, value: int) -> None:
    assert LogConfig.from_properties({"segment.bytes": raw}).segment_bytes == value


@pytest.mark.parametrize("raw", ["2147483648", "1e6", "1.0", "0x100000", "1_048_576", "", "  ", "ten", "1 000", "--5"])
def test_parse_int_rejects(raw: str) -> None:
    with pytest.raises(LogConfigError) as e:
        LogConfig.from_properties({"segment.bytes": raw})
    msg = str(e.value)
    assert "for configuration segment.bytes: Not a number of type INT" in msg
    assert "expected an INT in [14,...]" in msg
    assert (repr(raw) if raw.strip() != raw or not raw else raw) in msg


@pytest.mark.parametrize(
    ("raw", "value"),
    [("9223372036854775807", LONG_MAX), ("-1", -1), ("0", 0), (" 86400000 ", 86400000)],
)
def test_parse_long(raw: str, value: int) -> None:
    assert LogConfig.from_properties({"retention.ms": raw}).retention_ms == value


def test_parse_long_rejects_overflow_and_huge_strings() -> None:
    for raw in ("9223372036854775808", "1" * 5000):
        with pytest.raises(LogConfigError, match="Not a number of type LONG; expected a LONG in"):
            LogConfig.from_properties({"flush.ms": raw})
    with pytest.raises(LogConfigError, match=r"expected a LONG in \[-9223372036854775808,...,9223372036854775807\]"):
        LogConfig.from_properties({"retention.bytes": "x"})


@pytest.mark.parametrize(
    ("raw", "value"),
    [("0.5", 0.5), (".25", 0.25), ("1", 1.0), ("0", 0.0), ("5e-1", 0.5), ("1E-5", 1e-5), ("0.75d", 0.75),
     ("0.125F", 0.125), (" 0.3 ", 0.3), ("1.", 1.0), ("+0.5", 0.5), ("-0.0", 0.0)],
)
def test_parse_double(raw: str, value: float) -> None:
    assert LogConfig.from_properties({"min.cleanable.dirty.ratio": raw}).min_cleanable_dirty_ratio == value


@pytest.mark.parametrize("raw", ["half", "", "0,5", "0x1p-1", "1e", "nan", "inf"])
def test_parse_double_rejects(raw: str) -> None:
    with pytest.raises(LogConfigError, match="Not a number of type DOUBLE; expected a DOUBLE in \\[0,...,1\\]"):
        LogConfig.from_properties({"min.cleanable.dirty.ratio": raw})


@pytest.mark.parametrize(("raw", "value"), [("true", True), ("TRUE", True), (" True ", True), ("false", False),
                                            ("FaLsE", False)])
def test_parse_boolean(raw: str, value: bool) -> None:
    assert LogConfig.from_properties({"preallocate": raw}).preallocate is value


@pytest.mark.parametrize("raw", ["yes", "1", "0", "", "t", "on"])
def test_parse_boolean_rejects(raw: str) -> None:
    with pytest.raises(LogConfigError) as e:
        LogConfig.from_properties({"preallocate": raw})
    assert "for configuration preallocate: Expected value to be either true or false" in str(e.value)


@pytest.mark.parametrize("codec", list(BrokerCompressionType))
def test_parse_compression_type(codec: BrokerCompressionType) -> None:
    cfg = LogConfig.from_properties({"compression.type": f" {codec.value} "})
    assert cfg.compression_type is codec


@pytest.mark.parametrize(
    ("raw", "value"),
    [
        ("delete", (CleanupPolicy.DELETE,)),
        ("compact", (CleanupPolicy.COMPACT,)),
        ("compact,delete", (CleanupPolicy.COMPACT, CleanupPolicy.DELETE)),
        (" delete ,  compact ", (CleanupPolicy.DELETE, CleanupPolicy.COMPACT)),
        ("compact,delete,compact", (CleanupPolicy.COMPACT, CleanupPolicy.DELETE)),  # Kafka 4.3 drops repeats
        ("", ()),  # Kafka 4.x: no cleanup, infinite retention
        ("   ", ()),
    ],
)
def test_parse_list(raw: str, value: tuple[CleanupPolicy, ...]) -> None:
    assert LogConfig.from_properties({"cleanup.policy": raw}).cleanup_policy == value


@pytest.mark.parametrize(
    ("raw", "value"),
    [("", ()), ("*", ("*",)), ("0:1, 1:2", ("0:1", "1:2")), ("0:1,", ("0:1", "")), (" 3:4 ", ("3:4",))],
)
def test_parse_throttled_replicas(raw: str, value: tuple[str, ...]) -> None:
    cfg = LogConfig.from_properties({"leader.replication.throttled.replicas": raw})
    assert cfg.leader_replication_throttled_replicas == value


@pytest.mark.parametrize("raw", ["0:1,*", "*,*", "a:b", "1", ",0:1", "0:1,,1:2", "0:99999999999"])
def test_throttled_replicas_rejects(raw: str) -> None:
    with pytest.raises(LogConfigError) as e:
        LogConfig.from_properties({"follower.replication.throttled.replicas": raw})
    assert str(e.value) == (
        f"Invalid value {raw} for configuration follower.replication.throttled.replicas: "
        "follower.replication.throttled.replicas must be the literal '*' or a list of replicas in the following "
        "format: [partitionId]:[brokerId],[partitionId]:[brokerId],..."
    )


def test_typed_values_are_accepted_too() -> None:
    cfg = LogConfig.from_properties({"segment.bytes": 2 << 20, "preallocate": True, "cleanup.policy": ["compact"],
                                     "min.cleanable.dirty.ratio": 1, "compression.type": BrokerCompressionType.LZ4})
    assert (cfg.segment_bytes, cfg.preallocate, cfg.cleanup_policy) == (2 << 20, True, (CleanupPolicy.COMPACT,))
    assert cfg.min_cleanable_dirty_ratio == 1.0 and isinstance(cfg.min_cleanable_dirty_ratio, float)
    assert cfg.compression_type is BrokerCompressionType.LZ4


@pytest.mark.parametrize(
    ("attr", "value", "expected"),
    [
        ("segment_bytes", True, "expected an INT in [14,...], got bool"),
        ("segment_bytes", 1.5, "expected an INT in [14,...], got float"),
        ("segment_bytes", None, "expected an INT in [14,...], got None"),
        ("segment_bytes", 1 << 31, "Not a number of type INT"),
        ("preallocate", 1, "expected true or false, got int"),
        ("min_cleanable_dirty_ratio", "2", "Value must be no more than 1"),
        ("compression_type", CompressionType.ZSTD, "expected one of: uncompressed, zstd, lz4, snappy, gzip, producer"),
        ("cleanup_policy", [1], "got list"),
        ("cleanup_policy", ["compact", "bogus"], "String must be one of: compact, delete"),
    ],
)
def test_wrong_python_values_are_rejected(attr: str, value: object, expected: str) -> None:
    with pytest.raises(LogConfigError) as e:
        DEFAULT_CONFIG.with_overrides(**{attr: value})
    assert expected in str(e.value)
    assert f"for configuration {attr.replace('_', '.')}" in str(e.value)


def test_constructor_validates() -> None:
    with pytest.raises(LogConfigError, match="Invalid value 4 for configuration segment.bytes: Value must be at least 14"):
        LogConfig(segment_bytes=4)
    assert LogConfig(compression_type="zstd").compression_type is BrokerCompressionType.ZSTD  # type: ignore[arg-type]


# --- every validator's failure message ----------------------------------------------------------

# (name, rejected value, Kafka's reason): the message must name the config, the value and the rule.
RANGE_FAILURES = [
    ("segment.bytes", "13", "Value must be at least 14"),
    ("segment.ms", "0", "Value must be at least 1"),
    ("segment.jitter.ms", "-1", "Value must be at least 0"),
    ("segment.index.bytes", "3", "Value must be at least 4"),
    ("flush.messages", "0", "Value must be at least 1"),
    ("flush.ms", "-1", "Value must be at least 0"),
    ("retention.ms", "-2", "Value must be at least -1"),
    ("max.message.bytes", "-1", "Value must be at least 0"),
    ("index.interval.bytes", "-1", "Value must be at least 0"),
    ("delete.retention.ms", "-1", "Value must be at least 0"),
    ("min.compaction.lag.ms", "-1", "Value must be at least 0"),
    ("max.compaction.lag.ms", "0", "Value must be at least 1"),
    ("file.delete.delay.ms", "-1", "Value must be at least 0"),
    ("min.cleanable.dirty.ratio", "-0.1", "Value must be at least 0"),
    ("min.cleanable.dirty.ratio", "1.5", "Value must be no more than 1"),
    ("min.cleanable.dirty.ratio", "Infinity", "Value must be no more than 1"),
    ("min.cleanable.dirty.ratio", "NaN", "Value must be a number in [0,...,1], not NaN"),
    ("min.insync.replicas", "0", "Value must be at least 1"),
    ("compression.gzip.level", "0", "Value must be between 1 and 9 or equal to -1"),
    ("compression.gzip.level", "10", "Value must be between 1 and 9 or equal to -1"),
    ("compression.gzip.level", "-2", "Value must be between 1 and 9 or equal to -1"),
    ("compression.lz4.level", "0", "Value must be at least 1"),
    ("compression.lz4.level", "18", "Value must be no more than 17"),
    ("compression.zstd.level", "-131073", "Value must be at least -131072"),
    ("compression.zstd.level", "23", "Value must be no more than 22"),
    ("message.timestamp.before.max.ms", "-1", "Value must be at least 0"),
    ("message.timestamp.after.max.ms", "-1", "Value must be at least 0"),
    ("local.retention.ms", "-3", "Value must be at least -2"),
    ("local.retention.bytes", "-3", "Value must be at least -2"),
    ("remote.copy.lag.ms", "-2", "Value must be at least -1"),
    ("remote.copy.lag.bytes", "-2", "Value must be at least -1"),
    ("internal.segment.bytes", "13", "Value must be at least 14"),
]


@pytest.mark.parametrize(("name", "raw", "reason"), RANGE_FAILURES, ids=[f"{n}={r}" for n, r, _ in RANGE_FAILURES])
def test_range_failures(name: str, raw: str, reason: str) -> None:
    with pytest.raises(LogConfigError) as e:
        LogConfig.from_properties({name: raw})
    assert str(e.value) == f"Invalid value {raw} for configuration {name}: {reason}"
    assert isinstance(e.value, KlogError) and isinstance(e.value, ValueError)
    assert e.value.kafka_exception == "ConfigException"


def test_range_edges_are_legal() -> None:
    for name, raw in [("segment.bytes", "14"), ("compression.gzip.level", "1"), ("compression.gzip.level", "9"),
                      ("compression.lz4.level", "17"), ("compression.zstd.level", "-131072"),
                      ("compression.zstd.level", "22"), ("retention.ms", "-1"), ("local.retention.ms", "-2"),
                      ("min.cleanable.dirty.ratio", "0"), ("min.cleanable.dirty.ratio", "1"),
                      ("segment.index.bytes", "4"), ("retention.bytes", "-9223372036854775808")]:
        LogConfig.from_properties({name: raw})


def test_every_validated_config_has_a_failure_case() -> None:
    covered = {name for name, _, _ in RANGE_FAILURES}
    ranged = {n for n, k in CONFIG_KEYS.items() if isinstance(k.validator, Range)}
    assert ranged == covered


ENUM_FAILURES = [
    ("compression.type", "none", "String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer"
     " (a topic's compression.type spells no compression 'uncompressed')"),
    ("compression.type", "ZSTD", "String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer"
     " (values are case-sensitive: did you mean zstd?)"),
    ("compression.type", "brotli", "String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer"),
    ("message.timestamp.type", "createtime", "String must be one of: CreateTime, LogAppendTime"
     " (values are case-sensitive: did you mean CreateTime?)"),
    ("message.timestamp.type", "", "String must be one of: CreateTime, LogAppendTime"),
    ("cleanup.policy", "foo", "String must be one of: compact, delete"),
    ("cleanup.policy", "Compact", "String must be one of: compact, delete (values are case-sensitive: did you mean compact?)"),
]


@pytest.mark.parametrize(("name", "raw", "reason"), ENUM_FAILURES)
def test_enum_failures_list_the_legal_values(name: str, raw: str, reason: str) -> None:
    with pytest.raises(LogConfigError) as e:
        LogConfig.from_properties({name: raw})
    shown = raw if raw else "''"
    assert str(e.value) == f"Invalid value {shown} for configuration {name}: {reason}"


def test_list_failures_name_the_bad_element() -> None:
    with pytest.raises(LogConfigError, match="^Invalid value snapshot for configuration cleanup.policy: String must"):
        LogConfig.from_properties({"cleanup.policy": "compact, snapshot"})
    for raw in ("compact,,delete", ",", "delete,"):
        with pytest.raises(LogConfigError) as e:
            LogConfig.from_properties({"cleanup.policy": raw})
        assert str(e.value).endswith(
            "for configuration cleanup.policy: values must not be empty; "
            "expected a comma-separated list of: compact, delete (or an empty list)"
        )


def test_compaction_lags_must_be_ordered() -> None:
    with pytest.raises(LogConfigError) as e:
        LogConfig.from_properties({"min.compaction.lag.ms": "100", "max.compaction.lag.ms": "99"})
    assert str(e.value) == "conflict topic config setting min.compaction.lag.ms (100) > max.compaction.lag.ms (99)"
    LogConfig.from_properties({"min.compaction.lag.ms": "100", "max.compaction.lag.ms": "100"})


def test_validator_descriptions() -> None:
    assert str(Range(min=-1)) == "[-1,...]"
    assert str(Range(0, 1)) == "[0,...,1]"
    assert str(Range(1, 9, or_equal=-1)) == "[1,...,9] or -1"
    assert str(Range(max=5)) == "[...,5]"
    assert str(ValidList(("a", "b"))) == "a comma-separated list of: a, b (or an empty list)"
    assert "[partitionId]:[brokerId]" in str(ThrottledReplicaList())
    assert CONFIG_KEYS["preallocate"].legal() == "true or false"
    assert CONFIG_KEYS["compression.type"].legal() == "one of: uncompressed, zstd, lz4, snappy, gzip, producer"


def test_enum_from_name() -> None:
    assert BrokerCompressionType.from_name("gzip") is BrokerCompressionType.GZIP
    assert MessageTimestampType.from_name("LogAppendTime") is MessageTimestampType.LOG_APPEND_TIME
    with pytest.raises(LogConfigError, match="expected one of: compact, delete"):
        CleanupPolicy.from_name("both")


# --- unknown names -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "hint"),
    [
        ("segment.byte", "did you mean segment.bytes"),
        ("retention.msec", "did you mean retention.ms"),
        ("cleanup.polcy", "did you mean cleanup.policy?"),
        ("segment_bytes", "did you mean segment.bytes?"),
        ("Segment.Bytes", "did you mean segment.bytes?"),
        ("log.segment.bytes", "log.segment.bytes is a broker config; the topic config is segment.bytes"),
        ("log.retention.hours", "log.retention.hours is a broker config; the topic config is retention.ms"),
        ("message.max.bytes", "message.max.bytes is a broker config; the topic config is max.message.bytes"),
        ("message.format.version", "removed in Kafka 4.0 by KIP-724"),
        ("message.timestamp.difference.max.ms", "message.timestamp.before.max.ms"),
        ("zzz", "known topic configs: segment.bytes, segment.ms,"),
    ],
)
def test_unknown_names_suggest_known_ones(name: str, hint: str) -> None:
    with pytest.raises(LogConfigError) as e:
        LogConfig.from_properties({name: "1"})
    assert str(e.value).startswith(f"Unknown topic config name: {name} (")
    assert hint in str(e.value)


def test_all_unknown_names_are_reported_and_non_strict_ignores_them() -> None:
    with pytest.raises(LogConfigError) as e:
        LogConfig.from_properties({"segment.bytes": "20000", "retention.mss": "1", "flush.msg": "1"})
    assert "flush.msg" in str(e.value) and "retention.mss" in str(e.value)
    cfg = LogConfig.from_properties({"segment.bytes": "20000", "retention.mss": "1"}, strict=False)
    assert cfg == LogConfig(segment_bytes=20000)
    with pytest.raises(LogConfigError, match="Invalid value x for configuration segment.bytes"):
        LogConfig.from_properties({"segment.bytes": "x", "bogus": "1"}, strict=False)


def test_unknown_fields_and_get() -> None:
    with pytest.raises(LogConfigError, match=r"Unknown LogConfig field: segment_byte \(did you mean segment_bytes"):
        DEFAULT_CONFIG.with_overrides(segment_byte=1 << 20)
    with pytest.raises(LogConfigError, match="did you mean flush.ms"):
        DEFAULT_CONFIG.get("flush.mss")
    assert DEFAULT_CONFIG.get("segment.ms") == 604800000


# --- formatting and round trips ----------------------------------------------------------------


def test_to_properties_lists_only_overrides_in_kafka_format() -> None:
    assert DEFAULT_CONFIG.to_properties() == {}
    cfg = LogConfig.from_properties({
        "cleanup.policy": "compact, delete", "preallocate": "TRUE", "min.cleanable.dirty.ratio": "1e-5",
        "segment.bytes": "+01048576", "compression.type": "zstd", "retention.ms": "604800000",
        "leader.replication.throttled.replicas": "0:1 , 1:2", "internal.segment.bytes": "1024",
    })
    assert cfg.to_properties() == {
        "segment.bytes": "1048576",
        "min.cleanable.dirty.ratio": "1.0E-5",
        "cleanup.policy": "compact,delete",
        "compression.type": "zstd",
        "preallocate": "true",
        "leader.replication.throttled.replicas": "0:1,1:2",
        "internal.segment.bytes": "1024",
    }
    assert LogConfig.from_properties(cfg.to_properties()) == cfg


def test_to_properties_with_defaults() -> None:
    props = DEFAULT_CONFIG.to_properties(include_defaults=True)
    expected = {name: text for name, _, text, _ in KAFKA_DEFAULTS if name != "internal.segment.bytes"}
    assert props == expected
    assert LogConfig.from_properties(props) == DEFAULT_CONFIG
    assert LogConfig.from_properties({"cleanup.policy": ""}).to_properties() == {"cleanup.policy": ""}


@pytest.mark.parametrize(
    ("value", "text"),
    [(0.5, "0.5"), (1.0, "1.0"), (0.0, "0.0"), (-0.0, "-0.0"), (1e-5, "1.0E-5"), (0.001, "0.001"),
     (0.0009, "9.0E-4"), (100.0, "100.0"), (1e7, "1.0E7"), (9999999.0, "9999999.0"), (1.5e20, "1.5E20"),
     (0.1, "0.1"), (1 / 3, "0.3333333333333333"), (-2.5e-7, "-2.5E-7"), (math.inf, "Infinity"),
     (-math.inf, "-Infinity"), (math.nan, "NaN")],
)
def test_java_double_to_string(value: float, text: str) -> None:
    assert java_double_to_string(value) == text


def test_frozen_and_derived_copies() -> None:
    cfg = LogConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.segment_bytes = 5  # type: ignore[misc]
    assert not hasattr(cfg, "__dict__")  # slotted
    smaller = cfg.with_overrides(segment_bytes=1 << 20, cleanup_policy=("compact",))
    assert cfg.segment_bytes == 1 << 30 and cfg.cleanup_policy == (CleanupPolicy.DELETE,)
    assert smaller.segment_bytes == 1 << 20 and smaller.cleanup_policy == (CleanupPolicy.COMPACT,)
    merged = smaller.merged({"retention.ms": "-1"})
    assert (merged.retention_ms, merged.segment_bytes, smaller.retention_ms) == (-1, 1 << 20, 604800000)
    assert hash(merged) == hash(LogConfig(segment_bytes=1 << 20, cleanup_policy=(CleanupPolicy.COMPACT,),
                                          retention_ms=-1))
    assert {cfg, LogConfig()} == {cfg}


# --- convenience properties --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "compact", "delete"),
    [("delete", False, True), ("compact", True, False), ("compact,delete", True, True),
     ("delete,compact", True, True), ("", False, False)],
)
def test_compact_and_delete_flags(raw: str, compact: bool, delete: bool) -> None:
    cfg = LogConfig.from_properties({"cleanup.policy": raw})
    assert (cfg.compact, cfg.delete) == (compact, delete)


def test_derived_values() -> None:
    cfg = LogConfig()
    assert (cfg.max_index_entries, cfg.max_time_index_entries) == (1310720, 873813)
    assert LogConfig(segment_index_bytes=4).max_index_entries == 0
    assert LogConfig(segment_index_bytes=100).max_time_index_entries == 8
    assert cfg.segment_size == 1 << 30 and cfg.init_file_size == 0
    tiny = LogConfig(internal_segment_bytes=1000, preallocate=True)
    assert tiny.segment_size == 1000 and tiny.init_file_size == 1000
    assert cfg.max_segment_ms == 604800000
    assert LogConfig(cleanup_policy=(CleanupPolicy.COMPACT,), max_compaction_lag_ms=1000).max_segment_ms == 1000
    assert LogConfig(max_compaction_lag_ms=1000).max_segment_ms == 604800000  # only for compacted logs
    assert cfg.codec is None and cfg.compression_level is None
    assert LogConfig(compression_type=BrokerCompressionType.UNCOMPRESSED).codec is CompressionType.NONE
    gz = LogConfig.from_properties({"compression.type": "gzip", "compression.gzip.level": "9"})
    assert (gz.codec, gz.compression_level) == (CompressionType.GZIP, 9)
    assert LogConfig(compression_type=BrokerCompressionType.ZSTD).compression_level == 3
    assert LogConfig(compression_type=BrokerCompressionType.SNAPPY).compression_level is None
    assert (cfg.effective_local_retention_ms, cfg.effective_local_retention_bytes) == (604800000, -1)
    assert LogConfig(local_retention_ms=5, local_retention_bytes=7).effective_local_retention_bytes == 7
    assert KAFKA_SEGMENT_BYTES_MIN == 1 << 20


# --- property: any legal config round-trips through Kafka's string form ------------------------


def _strategy(name: str) -> st.SearchStrategy[Any]:
    key = CONFIG_KEYS[name]
    if key.enum_type is not None:
        members = st.sampled_from(list(key.enum_type))
        return members if key.type is ConfigType.STRING else st.lists(members, unique=True).map(tuple)
    if isinstance(key.validator, ThrottledReplicaList):
        pairs = st.lists(st.tuples(st.integers(0, INT_MAX), st.integers(0, INT_MAX)).map(lambda p: f"{p[0]}:{p[1]}"))
        return st.just(("*",)) | pairs.map(tuple)
    if key.type is ConfigType.BOOLEAN:
        return st.booleans()
    if key.type is ConfigType.DOUBLE:
        return st.floats(0.0, 1.0)
    lo, hi = (-(1 << 31), INT_MAX) if key.type is ConfigType.INT else (-(1 << 63), LONG_MAX)
    legal = key.validator if isinstance(key.validator, Range) else Range()
    ints = st.integers(lo if legal.min is None else legal.min, hi if legal.max is None else legal.max)
    if legal.or_equal is not None:
        ints = ints | st.just(legal.or_equal)
    return st.none() | ints if key.nullable else ints


@st.composite
def configs(draw: st.DrawFn) -> LogConfig:
    values = {CONFIG_KEYS[name].attr: draw(_strategy(name)) for name in draw(st.sets(st.sampled_from(list(CONFIG_KEYS))))}
    lo, hi = values.get("min_compaction_lag_ms", 0), values.get("max_compaction_lag_ms", LONG_MAX)
    if lo > hi:
        values["min_compaction_lag_ms"], values["max_compaction_lag_ms"] = hi, lo
    return LogConfig(**values)


@settings(max_examples=300, deadline=None)
@given(configs())
def test_round_trip_through_properties(cfg: LogConfig) -> None:
    props = cfg.to_properties()
    assert all(isinstance(v, str) for v in props.values())
    assert LogConfig.from_properties(props) == cfg
    assert LogConfig.from_properties(cfg.to_properties(include_defaults=True)) == cfg
    assert DEFAULT_CONFIG.merged(props) == cfg


@given(st.floats(allow_nan=False))
def test_java_double_strings_read_back(value: float) -> None:
    text = java_double_to_string(value)
    assert ("E" in text) == (value != 0 and math.isfinite(value) and not 1e-3 <= abs(value) < 1e7)
    if math.isfinite(value):
        assert float(text) == value


# --- Kafka's own ConfigDef as the oracle -------------------------------------------------------

# The definitions of LogConfig.java (Kafka 4.x) for the configs whose validators live in
# kafka-clients; ThrottledReplicaListValidator and the internal/newer configs are left out.
ORACLE_JAVA = r"""
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.common.config.ConfigException;
import org.apache.kafka.common.record.internal.CompressionType;
import java.io.*;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import static org.apache.kafka.common.config.ConfigDef.Importance.MEDIUM;
import static org.apache.kafka.common.config.ConfigDef.Range.atLeast;
import static org.apache.kafka.common.config.ConfigDef.Range.between;
import static org.apache.kafka.common.config.ConfigDef.Type.*;

public class TopicConfigOracle {
    public static void main(String[] args) throws IOException {
        long week = 604800000L, longMax = Long.MAX_VALUE;
        ConfigDef def = new ConfigDef()
            .define("segment.bytes", INT, 1073741824, atLeast(1024 * 1024), MEDIUM, "")
            .define("segment.ms", LONG, week, atLeast(1), MEDIUM, "")
            .define("segment.jitter.ms", LONG, 0L, atLeast(0), MEDIUM, "")
            .define("segment.index.bytes", INT, 10485760, atLeast(4), MEDIUM, "")
            .define("flush.messages", LONG, longMax, atLeast(1), MEDIUM, "")
            .define("flush.ms", LONG, longMax, atLeast(0), MEDIUM, "")
            .define("retention.bytes", LONG, -1L, MEDIUM, "")
            .define("retention.ms", LONG, week, atLeast(-1), MEDIUM, "")
            .define("max.message.bytes", INT, 1048588, atLeast(0), MEDIUM, "")
            .define("index.interval.bytes", INT, 4096, atLeast(0), MEDIUM, "")
            .define("delete.retention.ms", LONG, 86400000L, atLeast(0), MEDIUM, "")
            .define("min.compaction.lag.ms", LONG, 0L, atLeast(0), MEDIUM, "")
            .define("max.compaction.lag.ms", LONG, longMax, atLeast(1), MEDIUM, "")
            .define("file.delete.delay.ms", LONG, 60000L, atLeast(0), MEDIUM, "")
            .define("min.cleanable.dirty.ratio", DOUBLE, 0.5, between(0, 1), MEDIUM, "")
            .define("cleanup.policy", LIST, "delete", ConfigDef.ValidList.in("compact", "delete"), MEDIUM, "")
            .define("unclean.leader.election.enable", BOOLEAN, false, MEDIUM, "")
            .define("min.insync.replicas", INT, 1, atLeast(1), MEDIUM, "")
            .define("compression.type", STRING, "producer",
                    ConfigDef.ValidString.in("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"), MEDIUM, "")
            .define("compression.gzip.level", INT, CompressionType.GZIP.defaultLevel(),
                    CompressionType.GZIP.levelValidator(), MEDIUM, "")
            .define("compression.lz4.level", INT, CompressionType.LZ4.defaultLevel(),
                    CompressionType.LZ4.levelValidator(), MEDIUM, "")
            .define("compression.zstd.level", INT, CompressionType.ZSTD.defaultLevel(),
                    CompressionType.ZSTD.levelValidator(), MEDIUM, "")
            .define("preallocate", BOOLEAN, false, MEDIUM, "")
            .define("message.timestamp.type", STRING, "CreateTime",
                    ConfigDef.ValidString.in("CreateTime", "LogAppendTime"), MEDIUM, "")
            .define("message.timestamp.before.max.ms", LONG, longMax, atLeast(0), MEDIUM, "")
            .define("message.timestamp.after.max.ms", LONG, 3600000L, atLeast(0), MEDIUM, "")
            .define("remote.storage.enable", BOOLEAN, false, null, MEDIUM, "")
            .define("local.retention.ms", LONG, -2L, atLeast(-2), MEDIUM, "")
            .define("local.retention.bytes", LONG, -2L, atLeast(-2), MEDIUM, "")
            .define("remote.log.copy.disable", BOOLEAN, false, MEDIUM, "")
            .define("remote.log.delete.on.disable", BOOLEAN, false, MEDIUM, "");
        if (args.length > 0) {  // the defaults, as Kafka prints them
            for (ConfigDef.ConfigKey key : def.configKeys().values())
                System.out.println(key.name + "\t" + ConfigDef.convertToString(key.defaultValue, key.type));
            return;
        }
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream out = new PrintStream(new FileOutputStream(FileDescriptor.out), true, "UTF-8");
        String line;
        while ((line = in.readLine()) != null) {
            int tab = line.indexOf('\t');
            String name = line.substring(0, tab), raw = line.substring(tab + 1);
            try {
                Object value = def.parse(Map.of(name, raw)).get(name);
                out.println("OK\t" + ConfigDef.convertToString(value, def.configKeys().get(name).type));
            } catch (ConfigException e) {
                out.println("ERR\t" + e.getMessage());
            }
        }
    }
}
"""

ORACLE_CASES: list[tuple[str, str]] = [
    *[("segment.bytes", r) for r in ["1048576", " 2000000 ", "+2000000", "0002000000", "1048575", "14", "13",
                                      "2147483647", "2147483648", "-1", "1e6", "", "0x10", "1_000_000", "2.0"]],
    *[("segment.ms", r) for r in ["1", "0", "9223372036854775807", "9223372036854775808", "-9223372036854775808"]],
    *[("retention.bytes", r) for r in ["-5", "-9223372036854775808", "0"]],
    *[("retention.ms", r) for r in ["-1", "-2", "\t60000 "]],
    *[("min.cleanable.dirty.ratio", r) for r in ["0", "1", "0.5", ".5", "5e-1", "0.5d", "0.25F", "1.5", "-0.1",
                                                  "1e-5", "Infinity", "-0.0", "0.1234567", "1.", "abc", "", "NaN",
                                                  "0.0001", "+0.75"]],
    *[("cleanup.policy", r) for r in ["", " ", "compact", "compact,delete", " delete , compact ", "compact,compact",
                                       "Compact", "compact,,delete", ",", "delete,", "foo", "delete,compact,delete"]],
    *[("preallocate", r) for r in ["true", "TRUE", " false ", "yes", "1", ""]],
    *[("unclean.leader.election.enable", r) for r in ["True", "nope"]],
    *[("compression.type", r) for r in ["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer", " gzip",
                                         "ZSTD", "none", ""]],
    *[("compression.gzip.level", r) for r in ["-1", "1", "9", "0", "10", "-2"]],
    *[("compression.lz4.level", r) for r in ["1", "17", "0", "18"]],
    *[("compression.zstd.level", r) for r in ["-131072", "22", "-131073", "23", "0"]],
    *[("message.timestamp.type", r) for r in ["CreateTime", "LogAppendTime", "createtime", " LogAppendTime ", ""]],
    *[("min.insync.replicas", r) for r in ["0", "1", "3"]],
    *[("max.message.bytes", r) for r in ["0", "-1"]],
    *[("index.interval.bytes", r) for r in ["0", "-1"]],
    *[("segment.index.bytes", r) for r in ["4", "3"]],
    *[("local.retention.ms", r) for r in ["-2", "-3"]],
    *[("local.retention.bytes", r) for r in ["-2", "-3"]],
    *[("remote.storage.enable", r) for r in ["false", "TRUE"]],
    *[("max.compaction.lag.ms", r) for r in ["0", "1"]],
    *[("message.timestamp.after.max.ms", r) for r in ["-1", "0"]],
]

# Where klog differs on purpose (see storage_core/log/config.py's docstring): klog accepts, Kafka rejects
# small segment.bytes; Kafka accepts, klog rejects a NaN dirty ratio.
DELIBERATE_DIFFERENCES = {("segment.bytes", "14"), ("segment.bytes", "1048575"), ("min.cleanable.dirty.ratio", "NaN")}


@pytest.fixture(scope="module")
def kafka_configdef(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The command that runs Kafka's ConfigDef over ``name\\traw`` lines on stdin."""
    import kafka_oracle

    reason = kafka_oracle.oracle_available()
    if reason is not None:
        pytest.skip(reason)
    jars = sorted((kafka_oracle.cache_dir() / "libs").glob("*.jar"))
    classpath = ":".join(map(str, jars))
    work: Path = tmp_path_factory.mktemp("configdef")
    (work / "TopicConfigOracle.java").write_text(ORACLE_JAVA)
    subprocess.run(["javac", "-nowarn", "-cp", classpath, "-d", str(work), str(work / "TopicConfigOracle.java")],
                   check=True, capture_output=True)
    return ["java", "-XX:TieredStopAtLevel=1", "-Dslf4j.internal.verbosity=ERROR", "-cp", f"{classpath}:{work}",
            "TopicConfigOracle"]


def test_defaults_agree_with_kafka_configdef(kafka_configdef: list[str]) -> None:
    out = subprocess.run([*kafka_configdef, "--defaults"], check=True, capture_output=True, text=True).stdout
    kafka = dict(line.split("\t", 1) for line in out.splitlines())
    assert len(kafka) == 31
    assert kafka == {name: DEFAULT_CONFIG.to_properties(include_defaults=True)[name] for name in kafka}


def test_parsing_agrees_with_kafka_configdef(kafka_configdef: list[str]) -> None:
    stdin = "".join(f"{name}\t{raw}\n" for name, raw in ORACLE_CASES)
    out = subprocess.run(kafka_configdef, input=stdin, check=True, capture_output=True, text=True).stdout.splitlines()
    assert len(out) == len(ORACLE_CASES)
    disagreements = []
    for (name, raw), line in zip(ORACLE_CASES, out, strict=True):
        status, kafka_text = line.split("\t", 1)
        try:
            cfg = LogConfig.from_properties({name: raw})
            klog_status, klog_text = "OK", CONFIG_KEYS[name].render(cfg.get(name))
        except LogConfigError as e:
            klog_status, klog_text = "ERR", str(e)
        if (name, raw) in DELIBERATE_DIFFERENCES:
            assert status != klog_status, (name, raw)
            continue
        if status != klog_status:
            disagreements.append((name, raw, line, klog_text))
        elif status == "OK" and kafka_text != klog_text:
            disagreements.append((name, raw, line, klog_text))
        elif status == "ERR" and kafka_text.startswith("Invalid value") and raw == raw.strip() and raw:
            # klog's message is Kafka's, sometimes with what is legal added at the end.
            if kafka_text.endswith("Value must be at least 1048576"):  # klog's minimum is 14
                kafka_text = kafka_text.replace("1048576", "14")
            if not klog_text.startswith(kafka_text):
                disagreements.append((name, raw, line, klog_text))
    assert disagreements == [], "\n".join(map(repr, disagreements))
