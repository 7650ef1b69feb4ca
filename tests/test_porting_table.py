"""The porting table (``docs/porting.md``) names every option of Spark's Kafka source and sink, and
says of each what klog's option parser does with it: the same, ignored, or refused.

Which options Spark's Kafka source and sink have comes from the connector itself: the option keys
are string constants of ``KafkaSourceProvider$`` in the very
``spark-sql-kafka-0-10_2.13`` jar the parity tests run (``tests/oracles/spark_kafka.py``), read from the
class files' constant pools. A Spark release that adds an option fails this test until the table
(and the parser) say what klog does with it.
"""

from __future__ import annotations

import re
import struct
import zipfile
from pathlib import Path

import pytest
import spark_kafka
from broker_fixture import required

from spark_logsource.writer import WRITE_OPTIONS
from storage_core.errors import InvalidOptionError
from storage_core.read.kafka_compat import BROKER_ONLY_OPTIONS, split_kafka_options
from storage_core.read.options import READ_OPTIONS, STREAM_ONLY_OPTIONS

TABLE = Path(__file__).resolve().parent.parent / "docs" / "porting.md"
#: where Spark keeps its Kafka source's and sink's option keys (``KafkaWriter$`` holds column names)
CLASSES = ("org/apache/spark/sql/kafka010/KafkaSourceProvider$.class",)
#: strings of those classes that look like option keys and are not: option values, a prefix, a role
NOT_OPTIONS = {"earliest", "latest", "none", "false", "true", "error", "source", "executor", "driver", "kafka."}
#: Spark's source options with a dot in their name (every other dotted key is a Kafka client config)
DOTTED_SPARK_OPTIONS = {"fetchoffset.numretries", "fetchoffset.retryintervalms", "kafkaconsumer.polltimeoutms"}


def class_strings(data: bytes) -> list[str]:
    """The ``CONSTANT_String`` entries of a class file (JVMS §4.4)."""
    count = struct.unpack(">H", data[8:10])[0]
    utf8: dict[int, str] = {}
    strings: list[int] = []
    pos, index = 10, 1
    while index < count:
        tag = data[pos]
        if tag == 1:  # Utf8
            (n,) = struct.unpack(">H", data[pos + 1:pos + 3])
            utf8[index] = data[pos + 3:pos + 3 + n].decode("utf-8", "replace")
            pos += 3 + n
        elif tag == 8:  # String
            strings.append(struct.unpack(">H", data[pos + 1:pos + 3])[0])
            pos += 3
        elif tag in (7, 16, 19, 20):  # Class, MethodType, Module, Package
            pos += 3
        elif tag == 15:  # MethodHandle
            pos += 4
        elif tag in (3, 4, 9, 10, 11, 12, 17, 18):  # Integer, Float, refs, NameAndType, (Invoke)Dynamic
            pos += 5
        elif tag in (5, 6):  # Long, Double: two slots
            pos += 9
            index += 1
        else:
            raise AssertionError(f"constant pool tag {tag} at {pos}")
        index += 1
    return [utf8[i] for i in strings]


@pytest.fixture(scope="module")
def spark_option_keys() -> set[str]:
    """Every option key Spark's Kafka source and sink read (lower-cased, as Spark keeps them;
    Kafka client configs as the ``kafka.``-prefixed option a user gives)."""
    reason = spark_kafka.unavailable()
    if reason is not None:
        if required():
            pytest.fail(f"KLOG_REQUIRE_BROKER=1 but {reason}")
        pytest.skip(reason)
    jar = next(j for j in spark_kafka.connector_jars() if j.name.startswith("spark-sql-kafka-0-10"))
    keys: set[str] = set()
    with zipfile.ZipFile(jar) as z:
        for name in CLASSES:
            for s in class_strings(z.read(name)):
                if re.fullmatch(r"[a-z][a-z0-9.]*", s) and s not in NOT_OPTIONS:
                    dotted_client = "." in s and s not in DOTTED_SPARK_OPTIONS and not s.startswith("kafka.")
                    keys.add(f"kafka.{s}" if dotted_client else s)
    assert {"subscribe", "startingoffsets", "maxoffsetspertrigger", "topic"} <= keys, sorted(keys)
    return keys


def table_rows() -> list[tuple[set[str], str]]:
    """``(option names lower-cased, what klog does)`` per row of the porting table."""
    rows = []
    lines = TABLE.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| Spark Kafka option |"))
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        first, second = [c.strip() for c in line.strip("|").split("|")][:2]
        rows.append(({n.lower() for n in re.findall(r"`([^`]+)`", first)}, second))
    return rows


def what_klog_does(key: str) -> str:
    """What klog's option parser does with option ``key`` (lower-cased) on a read and a write."""
    outcomes = set()
    for write in (False, True):
        try:
            kept, ignored = split_kafka_options({key: "x"}, write=write)
        except InvalidOptionError:
            outcomes.add("refused")
            continue
        if ignored:
            outcomes.add("ignored")
        elif key in (WRITE_OPTIONS if write else READ_OPTIONS | STREAM_ONLY_OPTIONS) or (
                write and key == "kafka.compression.type"):
            outcomes.add("same")
    return "same" if "same" in outcomes else "refused" if "refused" in outcomes else "ignored" if outcomes else "?"


def row_says(text: str) -> str:
    t = text.lower()
    if t.startswith("the same meaning") or "`isolationlevel`" in t or "is what klog does" in t:
        return "same"
    if t.startswith("refused"):
        return "refused"
    if t.startswith("ignored"):
        return "ignored"
    raise AssertionError(f"{TABLE}: a row of the porting table says neither same, ignored nor refused: {text!r}")


def test_the_table_names_every_option_of_sparks_kafka_source_and_sink(spark_option_keys: set[str]) -> None:
    rows = table_rows()
    named = set().union(*(names for names, _ in rows))
    wildcard = "every other `kafka.*`" in TABLE.read_text()
    missing = sorted(k for k in spark_option_keys if k not in named and not (wildcard and k.startswith("kafka.")))
    assert missing == [], f"{TABLE} does not say what klog does with Spark's options {missing}"
    unknown = sorted(n for n in named if not n.startswith("kafka.") and n not in spark_option_keys)
    assert unknown == [], f"{TABLE} names options Spark's Kafka source and sink do not have: {unknown}"


def test_the_table_agrees_with_the_option_parser(spark_option_keys: set[str]) -> None:
    disagree = []
    rows = table_rows()
    for key in sorted(spark_option_keys):
        said = next((row_says(text) for names, text in rows if key in names), None)
        if said is None:  # a client config under "every other kafka.*"
            said = "ignored"
        if said == "same" and key == "kafka.partitioner.class":
            with pytest.raises(InvalidOptionError, match="cannot run here"):
                split_kafka_options({key: "com.example.MyPartitioner"}, write=True)
            continue
        does = what_klog_does(key)
        if does != said:
            disagree.append(f"{key}: the table says {said}, klog's parser does {does}")
    for key, spelled in BROKER_ONLY_OPTIONS.items():
        assert key in spark_option_keys, f"{spelled} is not an option of Spark's Kafka source"
    assert disagree == [], disagree
