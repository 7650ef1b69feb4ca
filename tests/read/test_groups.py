"""Consumer groups' committed offsets (storage_core.read.groups) and the ...FromGroup read options.

Oracles: generated dirs whose truth is the generator's final state (tests/generators/groups_gen.py, records
encoded with the independent test encoder), the same dirs after klog's compaction, and the real
brokers' ``__consumer_offsets`` in the shared fixtures, whose truth is the last OffsetCommit record of
each key in Kafka's own record list (the ``*.expected.jsonl`` beside each segment).
"""

from __future__ import annotations

import base64
import json
import struct
from pathlib import Path

import pyarrow.compute as pc
import pytest
import shared_fixtures as sf
from groups_gen import T0, generate, offset_commit_key, offset_commit_value

import storage_core as klog
from storage_core.errors import InvalidOptionError, OffsetOutOfRangeError
from storage_core.log.log import Log
from storage_core.log.topic_partition import TopicPartition
from storage_core.read.api import read_options
from storage_core.read.groups import group_offsets
from storage_core.record.records import Record, build_batch
from storage_core.tools.cli import main as klog_main


def got(root: Path) -> dict[str, dict[TopicPartition, tuple[int, int, str | None, int]]]:
    return {g: {tp: (c.offset, c.leader_epoch, c.metadata, c.commit_timestamp) for tp, c in parts.items()}
            for g, parts in group_offsets([root]).items()}


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_generated_dirs_give_the_generators_final_state(tmp_path: Path, seed: int) -> None:
    gen = generate(tmp_path / "d", seed)
    assert gen.truth and got(gen.root) == gen.truth
    segments = [p for p in gen.root.glob("__consumer_offsets-*/*.log")]
    assert len(segments) > 6  # spread over segments and partitions


def test_compaction_leaves_the_committed_offsets_unchanged(tmp_path: Path) -> None:
    gen = generate(tmp_path / "d", 7, commits=200)
    before = sum(p.stat().st_size for p in gen.root.glob("__consumer_offsets-*/*.log"))
    rc = klog_main(["compact", str(gen.root), "--topic", "__consumer_offsets", "--roll", "--now",
                    str(T0 + 10**10), "--quiet"])
    assert rc == 0
    after = sum(p.stat().st_size for p in gen.root.glob("__consumer_offsets-*/*.log"))
    assert after < before / 2  # the cleaner did remove superseded commits and tombstones
    assert got(gen.root) == gen.truth


def test_python_api_table(tmp_path: Path) -> None:
    gen = generate(tmp_path / "d", 4)
    table = klog.committed_offsets(gen.root)
    rows = table.to_pylist()
    assert len(rows) == sum(len(v) for v in gen.truth.values())
    for r in rows:
        tp = TopicPartition(r["topic"], r["partition"])
        off, epoch, meta, ts = gen.truth[r["group"]][tp]
        assert (r["committedOffset"], r["leaderEpoch"], r["metadata"]) == (off, None if epoch < 0 else epoch, meta)
        assert int(r["commitTimestamp"].timestamp() * 1000) == ts
        assert r["logEndOffset"] == gen.log_ends[tp] and r["lag"] == gen.log_ends[tp] - off
    one = sorted(gen.truth)[1]
    assert set(klog.committed_offsets(gen.root, group=one).column("group").to_pylist()) == {one}
    with pytest.raises(InvalidOptionError, match="groups found: " + repr(sorted(gen.truth)[0])):
        klog.committed_offsets(gen.root, group="nope")


# --- the read options -----------------------------------------------------------------------------


def _ranges(root: Path, **options: object) -> dict[TopicPartition, tuple[int, int]]:
    selection: dict[str, object] = {} if "topics" in options else {"topicPattern": "orders|clicks"}
    return {r.topic_partition: (r.start, r.end) for r in klog.plan(root, **selection, **options).ranges}


def test_starting_and_ending_from_group(tmp_path: Path) -> None:
    gen = generate(tmp_path / "d", 5)
    group, truth = max(gen.truth.items(), key=lambda kv: len(kv[1]))
    ranges = _ranges(gen.root, startingOffsetsFromGroup=group)
    for tp, end in gen.log_ends.items():
        assert ranges[tp] == ((truth[tp][0] if tp in truth else 0), end)  # never committed: earliest
    ranges = _ranges(gen.root, endingOffsetsFromGroup=group)
    for tp, end in gen.log_ends.items():
        assert ranges[tp] == (0, truth[tp][0] if tp in truth else end)  # never committed: latest
    # the records read are those the option names: read_arrow agrees with a filter of the whole log
    table = klog.read_arrow(gen.root, topicPattern="orders|clicks", startingOffsetsFromGroup=group).read_all()
    whole = klog.read_arrow(gen.root, topicPattern="orders|clicks").read_all().to_pylist()
    expected = [r for r in whole
                if r["offset"] >= truth.get(TopicPartition(r["topic"], r["partition"]), (0,))[0]]
    assert sorted((r["topic"], r["partition"], r["offset"]) for r in table.to_pylist()) == \
        sorted((r["topic"], r["partition"], r["offset"]) for r in expected)


def test_unknown_group_lists_the_groups(tmp_path: Path) -> None:
    gen = generate(tmp_path / "d", 6)
    for option in ("startingOffsetsFromGroup", "endingOffsetsFromGroup"):
        with pytest.raises(InvalidOptionError) as exc:
            klog.plan(gen.root, **{option: "no-such-group"})
        assert f"option {option}='no-such-group'" in str(exc.value)
        for g in gen.truth:
            assert repr(g) in str(exc.value)
    plain = tmp_path / "plain"
    (plain / "t-0").mkdir(parents=True)
    with Log(plain / "t-0", writable=True) as lg:
        lg.append(build_batch([Record(0, T0, b"k", b"v")]))
    with pytest.raises(InvalidOptionError, match="there is no __consumer_offsets"):
        klog.plan(plain, startingOffsetsFromGroup="g")


@pytest.mark.parametrize(("options", "message"), [
    ({"startingOffsetsFromGroup": "g", "startingTimestamp": "1"}, "conflict"),
    ({"startingOffsetsFromGroup": "g", "startingOffsetsByTimestamp": '{"t": {"0": 1}}'}, "conflict"),
    ({"startingOffsetsFromGroup": "g", "startingOffsets": '{"t": {"0": 1}}'}, "never committed start"),
    ({"endingOffsetsFromGroup": "g", "endingOffsets": '{"t": {"0": 1}}'}, "never committed end"),
    ({"endingOffsetsFromGroup": "g", "endingTimestamp": "5"}, "conflict"),
    ({"startingOffsetsFromGroup": " "}, "empty"),
])
def test_contradictory_options(tmp_path: Path, options: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidOptionError, match=message):
        read_options(tmp_path, **options)


def test_committed_offsets_outside_the_log_follow_fail_on_data_loss(tmp_path: Path) -> None:
    gen = generate(tmp_path / "d", 8)
    with Log(gen.root / "__consumer_offsets-0", writable=True) as lg:
        lg.append(build_batch([Record(0, T0, offset_commit_key("far", "orders", 0), offset_commit_value(10**6, 3)),
                               Record(1, T0, offset_commit_key("far", "orders", 1), offset_commit_value(5, 3))]))
    with pytest.raises(OffsetOutOfRangeError, match="past the end"):
        klog.plan(gen.root, topics="orders", startingOffsetsFromGroup="far")
    ranges = _ranges(gen.root, topics="orders", startingOffsetsFromGroup="far", failOnDataLoss=False)
    assert ranges[TopicPartition("orders", 0)] == (40, 40) and ranges[TopicPartition("orders", 1)] == (5, 40)
    # an ending offset past the end fails too (as endingOffsets does, and Spark's Kafka source);
    # with failOnDataLoss=false it reads to the end
    with pytest.raises(OffsetOutOfRangeError, match="ending offset 1000000 is past the end"):
        klog.plan(gen.root, topics="orders", endingOffsetsFromGroup="far")
    assert _ranges(gen.root, topics="orders", endingOffsetsFromGroup="far",
                   failOnDataLoss=False)[TopicPartition("orders", 0)] == (0, 40)


# --- real brokers' __consumer_offsets ---------------------------------------------------------------


def _fixture_dirs() -> list[Path]:
    if not sf.available():
        return []
    return sorted({p.parent for p in sf.KAFKA_FIXTURES.rglob("__consumer_offsets-*") if p.is_dir()})


def _str(buf: bytes, pos: int) -> tuple[str, int]:
    (n,) = struct.unpack_from(">h", buf, pos)
    return buf[pos + 2:pos + 2 + n].decode(), pos + 2 + n


def _kafka_truth(log_dir: Path) -> dict[str, dict[TopicPartition, int]]:
    """The last OffsetCommit of each key in Kafka's record lists, decoded by hand (key: int16 type,
    string group, string topic, int32 partition; value: int16 version, int64 offset first)."""
    state: dict[tuple[str, str, int], int | None] = {}
    for part in sorted(log_dir.glob("__consumer_offsets-*")):
        for seg in sorted(part.glob("*.log")):
            for line in sf.expected_lines(seg):
                rec = json.loads(line)
                assert not rec["is_transactional"]  # the fixtures hold no transactional offset commits
                if rec["is_control"] or rec["key_b64"] is None:
                    continue
                key = base64.b64decode(rec["key_b64"])
                (kind,) = struct.unpack_from(">h", key)
                if kind not in (0, 1):
                    continue
                group, pos = _str(key, 2)
                topic, pos = _str(key, pos)
                (partition,) = struct.unpack_from(">i", key, pos)
                value = None if rec["value_b64"] is None else base64.b64decode(rec["value_b64"])
                state[(group, topic, partition)] = None if value is None else struct.unpack_from(">q", value, 2)[0]
    out: dict[str, dict[TopicPartition, int]] = {}
    for (g, t, p), off in state.items():
        if off is not None:
            out.setdefault(g, {})[TopicPartition(t, p)] = off
    return out


@pytest.mark.parametrize("log_dir", sf.params(_fixture_dirs(), "__consumer_offsets partitions"))
def test_fixture_offsets_are_kafkas_last_commits(log_dir: Path) -> None:
    truth = _kafka_truth(log_dir)
    assert {g: {tp: c.offset for tp, c in parts.items()} for g, parts in group_offsets([log_dir]).items()} == truth
    table = klog.committed_offsets(log_dir)
    assert table.num_rows == sum(len(v) for v in truth.values())
    assert pc.all(pc.greater_equal(table.column("committedOffset"), 0)).as_py() in (True, None)
