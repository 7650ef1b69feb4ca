"""startingOffsetsFromGroup / endingOffsetsFromGroup through Spark: batch, a stream, and read_arrow alike."""

from __future__ import annotations

from pathlib import Path

import pytest
from groups_gen import generate

import storage_core as klog
from storage_core.log.topic_partition import TopicPartition

pytestmark = pytest.mark.spark


def _two_groups(gen):  # type: ignore[no-untyped-def]
    by_size = sorted(gen.truth, key=lambda g: -len(gen.truth[g]))
    return by_size[0], by_size[1]


def test_batch_from_group_to_group(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    gen = generate(tmp_path / "d", 21)
    start_g, end_g = _two_groups(gen)
    options = {"topicPattern": "orders|clicks", "startingOffsetsFromGroup": start_g, "endingOffsetsFromGroup": end_g}
    df = spark.read.format("klog").options(**options).load(str(gen.root))
    rows = sorted((r.topic, r.partition, r.offset) for r in df.select("topic", "partition", "offset").collect())
    want = sorted((tp.topic, tp.partition, o) for tp, leo in gen.log_ends.items()
                  for o in range(gen.truth[start_g].get(tp, (0,))[0], gen.truth[end_g].get(tp, (leo,))[0]))
    assert rows == want and rows
    table = klog.read_arrow(gen.root, **options).read_all()
    assert sorted(zip(table.column("topic").to_pylist(), table.column("partition").to_pylist(),
                      table.column("offset").to_pylist(), strict=True)) == rows


def test_stream_starts_at_the_groups_offsets(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    gen = generate(tmp_path / "d", 22)
    group, _ = _two_groups(gen)
    committed = gen.truth[group]

    def run(name: str, **options: str) -> list[tuple[str, int, int]]:
        q = (spark.readStream.format("klog").option("topicPattern", "orders|clicks")
             .option("startingOffsetsFromGroup", group).options(**options).load(str(gen.root))
             .select("topic", "partition", "offset")
             .writeStream.format("memory").queryName(name).trigger(availableNow=True).start())
        assert q.awaitTermination(120)
        return sorted((r.topic, r.partition, r.offset) for r in spark.sql(f"select * from {name}").collect())

    earliest = run("groups_earliest", startingOffsets="earliest")
    assert earliest == sorted((tp.topic, tp.partition, o) for tp, leo in gen.log_ends.items()
                              for o in range(committed.get(tp, (0,))[0], leo))
    latest = run("groups_latest")  # a stream's fallback is latest: uncommitted partitions read nothing now
    assert latest == [r for r in earliest if TopicPartition(r[0], r[1]) in committed]
    table = klog.read_arrow(gen.root, topicPattern="orders|clicks", startingOffsetsFromGroup=group).read_all()
    assert sorted(zip(table.column("topic").to_pylist(), table.column("partition").to_pylist(),
                      table.column("offset").to_pylist(), strict=True)) == earliest


def test_unknown_group_through_spark(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    gen = generate(tmp_path / "d", 23, commits=30)
    with pytest.raises(Exception, match="groups found: ") as exc:
        spark.read.format("klog").option("startingOffsetsFromGroup", "nope").load(str(gen.root)).collect()
    assert all(repr(g) in str(exc.value) for g in gen.truth)
