"""spark.read.format("klog"): real broker dirs equal Kafka's decoding; ranges, selection, errors."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
import shared_fixtures as sf

pytestmark = pytest.mark.spark

LOG_DIRS = sorted({p.parent.parent for p in sf.KAFKA_FIXTURES.rglob("*.log")
                   if "captures" not in str(p) and "generated" not in str(p)}) if sf.available() else []


def _expected(log_dir: Path) -> list[tuple[str, int, int, str | None, str | None, int]]:
    """Kafka's decoding of the segments, from each partition's log start offset on (records below it
    were deleted by DeleteRecords, e.g. Kafka Streams' repartition topics: no consumer sees them)."""
    from storage_core.log.checkpoint import OffsetCheckpointFile
    from storage_core.log.topic_partition import TopicPartition

    starts = OffsetCheckpointFile(log_dir / "log-start-offset-checkpoint").read()
    rows = []
    for seg in sorted(log_dir.glob("*/*.log")):
        topic, _, part = seg.parent.name.rpartition("-")
        start = starts.get(TopicPartition(topic, int(part)), 0)
        for line in sf.expected_lines(seg):
            o = json.loads(line)
            if o.get("offset") is None or o["is_control"] or o["offset"] < start:
                continue
            rows.append((topic, int(part), o["offset"], o["key_b64"], o["value_b64"], o["timestamp"]))
    return sorted(rows)


def _b64(b: bytes | bytearray | None) -> str | None:
    return None if b is None else base64.b64encode(bytes(b)).decode()


@pytest.mark.conformance
@pytest.mark.parametrize("log_dir", sf.params(LOG_DIRS, "broker log dirs"))
def test_broker_dirs_read_through_spark(spark, log_dir: Path) -> None:  # type: ignore[no-untyped-def]
    if sf.lost_partitions(log_dir):  # .log files gone while the checkpoints say offsets: the default read says so
        with pytest.raises(Exception) as info:  # noqa: PT011 - Spark's own exception type
            spark.read.format("klog").load(str(log_dir)).count()
        assert "DataLossError" in str(info.value) and sf.names_loss(str(info.value), log_dir), str(info.value)[:2000]
    df = spark.read.format("klog").options(**sf.tolerant_options(log_dir)).load(str(log_dir))
    got = sorted((r.topic, r.partition, r.offset, _b64(r.key), _b64(r.value),
                  int(r.timestamp.timestamp() * 1000) if r.timestamp is not None else None) for r in df.collect())
    expected = _expected(log_dir)
    assert len(got) == len(expected)
    assert got == [(t, p, o, k, v, ts) for t, p, o, k, v, ts in expected]
