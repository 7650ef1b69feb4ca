"""Checkpoint text files (:mod:`storage_core.log.checkpoint`) and topic / directory names (:mod:`storage_core.log.topic_partition`).

Real broker files from the shared fixtures are read in place and re-written into ``tmp_path``:

* ``leader-epoch-checkpoint``, ``partition.metadata``, ``.kafka_cleanshutdown``: re-writing gives
  the same bytes, always (Kafka writes these in a fixed order).
* offset checkpoints: Kafka writes them in ``HashMap`` order, klog sorted by topic and partition.
  Files whose entries are already in that order (in the fixtures: every file with 0 or 1 entry,
  and ``rjmfernandes .../log-start-offset-checkpoint`` and ``ronem123 .../cleaner-offset-checkpoint``
  with 2) come back byte for byte; the others come back with the same header and the same entry
  lines, sorted. A 0-byte file (Kafka reads it as empty) comes back as ``0\\n0\\n``.
* ``meta.properties``: the ``key=value`` lines come back byte for byte, in file order; the whole
  file too when its date comment is in UTC (klog writes the date in UTC).
"""

from __future__ import annotations

import os
import re
import uuid
from datetime import datetime, timezone
from pathlib import Path

import pytest

from storage_core.errors import CorruptCheckpointError, InvalidOptionError, InvalidTopicError, KlogError, StorageError
from storage_core.files import (
    CLEAN_SHUTDOWN_FILE,
    LEADER_EPOCH_CHECKPOINT,
    META_PROPERTIES_FILE,
    OFFSET_CHECKPOINT_FILES,
    PARTITION_METADATA_FILE,
    RECOVERY_POINT_OFFSET_CHECKPOINT,
)
from storage_core.log.checkpoint import (
    CleanShutdownFile,
    EpochEntry,
    LeaderEpochCheckpointFile,
    MetaProperties,
    OffsetCheckpointFile,
    PartitionMetadata,
    PartitionMetadataFile,
    uuid_from_base64,
    uuid_to_base64,
)
from storage_core.log.topic_partition import TopicPartition, validate_topic_name
from tests.shared_fixtures import KAFKA_FIXTURES, MISSING_REASON, available, params

TP = TopicPartition


def _fixture_params(*names: str) -> list[object]:
    return params({p for name in names for p in KAFKA_FIXTURES.rglob(name) if p.is_file()} if available() else [],
                     " / ".join(names) + " files")


def _tmp_files(directory: Path) -> list[str]:
    return sorted(name for name in os.listdir(directory) if name.endswith(".tmp"))


# --- real broker files ------------------------------------------------------------------------


@pytest.mark.skipif(not available(), reason=MISSING_REASON)
def test_fixtures_hold_every_kind_of_file() -> None:
    counts = {
        name: sum(1 for _ in KAFKA_FIXTURES.rglob(name))
        for name in (*OFFSET_CHECKPOINT_FILES, LEADER_EPOCH_CHECKPOINT, PARTITION_METADATA_FILE)
    }
    counts[META_PROPERTIES_FILE] = sum(1 for _ in KAFKA_FIXTURES.rglob(META_PROPERTIES_FILE))
    counts[CLEAN_SHUTDOWN_FILE] = sum(1 for _ in KAFKA_FIXTURES.rglob(CLEAN_SHUTDOWN_FILE))
    assert all(n > 0 for n in counts.values()), counts


@pytest.mark.parametrize("path", _fixture_params(*OFFSET_CHECKPOINT_FILES))
def test_real_offset_checkpoint(path: Path, tmp_path: Path) -> None:
    original = path.read_bytes()
    offsets = OffsetCheckpointFile(path).read(missing_ok=False)

    # Read independently of the module: the text is version, count, then "topic partition offset".
    lines = original.decode("utf-8").splitlines()
    if lines:
        assert lines[0] == "0"
        assert int(lines[1]) == len(lines) - 2 == len(offsets)
    expected = {TP(t, int(p)): int(o) for t, p, o in (line.split(" ") for line in lines[2:])}
    assert offsets == expected

    out = tmp_path / path.name
    OffsetCheckpointFile(out).write(offsets)
    rewritten = out.read_bytes()
    assert OffsetCheckpointFile(out).read() == offsets
    assert _tmp_files(tmp_path) == []
    if not original:
        assert rewritten == b"0\n0\n"
        return
    new_lines = rewritten.decode("utf-8").splitlines()
    assert new_lines[:2] == lines[:2]
    assert sorted(new_lines[2:]) == sorted(lines[2:])
    if lines[2:] == [f"{tp.topic} {tp.partition} {o}" for tp, o in sorted(offsets.items())]:
        assert rewritten == original  # already in klog's order: byte for byte


@pytest.mark.parametrize("path", _fixture_params(LEADER_EPOCH_CHECKPOINT))
def test_real_leader_epoch_checkpoint(path: Path, tmp_path: Path) -> None:
    original = path.read_bytes()
    entries = LeaderEpochCheckpointFile(path).read(missing_ok=False)
    lines = original.decode("utf-8").splitlines()
    assert entries == [EpochEntry(int(e), int(o)) for e, o in (line.split(" ") for line in lines[2:])]
    out = LeaderEpochCheckpointFile.in_dir(tmp_path)
    out.write(entries)
    assert out.path.read_bytes() == original
    assert _tmp_files(tmp_path) == []


@pytest.mark.parametrize("path", _fixture_params(PARTITION_METADATA_FILE))
def test_real_partition_metadata(path: Path, tmp_path: Path) -> None:
    original = path.read_bytes()
    meta = PartitionMetadataFile(path).read(missing_ok=False)
    assert meta is not None
    assert meta.version == 0
    assert original == f"version: 0\ntopic_id: {meta.topic_id_base64}".encode()
    out = PartitionMetadataFile.in_dir(tmp_path)
    out.write(meta.topic_id)
    assert out.path.read_bytes() == original
    assert _tmp_files(tmp_path) == []


_UTC_DATE_LINE = re.compile(r"#\w{3} (\w{3}) (\d\d) (\d\d):(\d\d):(\d\d) UTC (\d{4})")
_MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]


@pytest.mark.parametrize("path", _fixture_params(META_PROPERTIES_FILE))
def test_real_meta_properties(path: Path, tmp_path: Path) -> None:
    original = path.read_bytes()
    props = MetaProperties(path).read(missing_ok=False)
    assert props["version"] in ("0", "1")
    assert ("broker.id" if props["version"] == "0" else "node.id") in props
    lines = original.decode("ascii").splitlines()
    assert lines[0] == "#" and lines[1].startswith("#")
    assert [f"{k}={v}" for k, v in props.items()] == lines[2:]

    m = _UTC_DATE_LINE.fullmatch(lines[1])
    now = None
    if m:
        month, day, hh, mm, ss, year = m.groups()
        now = datetime(int(year), _MONTHS.index(month) + 1, int(day), int(hh), int(mm), int(ss), tzinfo=timezone.utc)
    out = MetaProperties.in_dir(tmp_path)
    out.write(props, now=now)
    assert out.read() == props
    rewritten = out.path.read_bytes()
    assert rewritten.decode("ascii").splitlines()[2:] == lines[2:]
    if now is not None:
        assert rewritten == original


@pytest.mark.parametrize("path", _fixture_params(CLEAN_SHUTDOWN_FILE))
def test_real_clean_shutdown(path: Path, tmp_path: Path) -> None:
    original = path.read_bytes()
    epoch = CleanShutdownFile(path).read(missing_ok=False)
    assert CleanShutdownFile(path).exists()
    if original:
        assert isinstance(epoch, int)
    else:
        assert epoch is None  # brokers before 3.7 left the file empty
    out = CleanShutdownFile.in_dir(tmp_path)
    out.write(epoch)
    assert out.path.read_bytes() == original


# --- offset checkpoints -----------------------------------------------------------------------


def test_offset_checkpoint_round_trip_sorted(tmp_path: Path) -> None:
    offsets = {
        TP("orders.v2", 1): 99821,
        TP("__consumer_offsets", 49): 0,
        TP("my-topic", 10): 2**63 - 1,
        TP("my-topic", 2): -1,
        TP("a_b-c.d", 0): 7,
    }
    f = OffsetCheckpointFile(tmp_path / RECOVERY_POINT_OFFSET_CHECKPOINT)
    f.write(offsets)
    assert f.path.read_bytes() == (
        b"0\n5\n__consumer_offsets 49 0\na_b-c.d 0 7\nmy-topic 2 -1\nmy-topic 10 9223372036854775807\norders.v2 1 99821\n"
    )
    assert f.read() == offsets
    assert _tmp_files(tmp_path) == []


def test_offset_checkpoint_empty_round_trip(tmp_path: Path) -> None:
    f = OffsetCheckpointFile(tmp_path / "cleaner-offset-checkpoint")
    f.write({})
    assert f.path.read_bytes() == b"0\n0\n"
    assert f.read() == {}


def test_offset_checkpoint_overwrites_atomically(tmp_path: Path) -> None:
    f = OffsetCheckpointFile(tmp_path / "replication-offset-checkpoint")
    (tmp_path / "replication-offset-checkpoint.tmp").write_bytes(b"stale leftover")
    f.write({TP("t", 0): 1})
    f.write({TP("t", 0): 2, TP("t", 1): 3})
    assert f.read() == {TP("t", 0): 2, TP("t", 1): 3}
    assert sorted(os.listdir(tmp_path)) == ["replication-offset-checkpoint"]


def test_failed_write_leaves_no_tmp(tmp_path: Path) -> None:
    target = tmp_path / "recovery-point-offset-checkpoint"
    target.mkdir()  # the rename onto a directory fails after the .tmp was written
    with pytest.raises(StorageError, match="Is a directory"):  # typed, not a raw OSError
        OffsetCheckpointFile(target).write({TP("t", 0): 1})
    assert _tmp_files(tmp_path) == []


def test_invalid_entries_are_refused_before_writing(tmp_path: Path) -> None:
    f = OffsetCheckpointFile(tmp_path / "recovery-point-offset-checkpoint")
    f.write({TP("t", 0): 5})
    before = f.path.read_bytes()
    with pytest.raises(InvalidTopicError, match="'a b'"):
        f.write({TP("a b", 0): 1})
    with pytest.raises(InvalidTopicError, match="'..'"):
        f.write({TP("..", 0): 1})
    with pytest.raises(InvalidOptionError, match="partition"):
        f.write({TP("t", -1): 1})
    with pytest.raises(InvalidOptionError, match="outside"):
        f.write({TP("t", 0): 2**63})
    with pytest.raises(InvalidOptionError, match="must be an int"):
        f.write({TP("t", 0): True})
    with pytest.raises(InvalidOptionError, match="TopicPartition"):
        f.write({("t", 0): 1})  # type: ignore[dict-item]
    assert f.path.read_bytes() == before
    assert _tmp_files(tmp_path) == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (b"", {}),  # Kafka: first readLine() is null -> empty
        (b"0\n", {}),  # Kafka: no count line -> empty
        (b"0\n0\n", {}),
        (b"0\n1\nt 0 5", {TP("t", 0): 5}),  # no final newline
        (b"0\r\n1\r\nt 0 5\r\n", {TP("t", 0): 5}),  # readLine ends lines at \r\n too
        (b"0\r1\rt 0 5\r", {TP("t", 0): 5}),  # and at a lone \r
        (b"0\n1\nt\t0   5  \n", {TP("t", 0): 5}),  # split on \s+, trailing empties dropped
        (b"+0\n+1\nt +0 +5\n", {TP("t", 0): 5}),  # Integer.parseInt / Long.parseLong take a sign
        (b"0\n2\nt 0 5\nt 0 6\n", {TP("t", 0): 6}),  # HashMap.put: the last one wins
        (b"0\n1\nt 0 -9223372036854775808\n", {TP("t", 0): -(2**63)}),
    ],
)
def test_offset_checkpoint_accepts_what_kafka_accepts(tmp_path: Path, text: bytes, expected: dict[TP, int]) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    path.write_bytes(text)
    assert OffsetCheckpointFile(path).read() == expected


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        (b"1\n0\n", 1, "Unrecognised version 1 in checkpoint file (line 1), expected version 0"),
        (b"-1\n0\n", 1, "Unrecognised version -1"),
        (b"x\n0\n", 1, "Malformed line 1 in checkpoint file: 'x' (the version 'x' is not an integer)"),
        (b"0 \n0\n", 1, "Malformed line 1"),
        (b"\n0\n", 1, "Malformed line 1"),
        (b"0\nx\n", 2, "Malformed line 2 in checkpoint file: 'x' (the entry count 'x' is not an integer)"),
        (b"0\n99999999999\n", 2, "Malformed line 2"),
        (b"0\n2\nt 0 5\n", 2, "Expected 2 entries in checkpoint file (count on line 2), but found 1"),
        (b"0\n0\nt 0 5\n", 2, "Expected 0 entries in checkpoint file (count on line 2), but found 1"),
        (b"0\n1\nt 0 5\nu 0 6\n", 2, "Expected 1 entries"),
        (b"0\n1\nt 0\n", 3, "Malformed line 3 in checkpoint file: 't 0' (2 fields instead of 3; expected"),
        (b"0\n1\nt 0 5 6\n", 3, "(4 fields instead of 3"),
        (b"0\n1\n t 0 5\n", 3, "(4 fields instead of 3"),  # Java keeps the leading empty field
        (b"0\n1\nt 0 5\n\n", 4, "Malformed line 4 in checkpoint file: '' (1 fields instead of 3"),
        (b"0\n2\nt 0 5\n\nu 0 6\n", 4, "Malformed line 4"),
        (b"0\n1\nt x 5\n", 3, "the partition 'x' is not an integer"),
        (b"0\n1\nt 0 5.5\n", 3, "the offset '5.5' is not an integer"),
        (b"0\n1\nt 0 9223372036854775808\n", 3, "the offset 9223372036854775808 is outside"),
        (b"0\n1\nt 2147483648 0\n", 3, "the partition 2147483648 is outside"),
        (b"0\n1\nt -1 0\n", 3, "the partition -1 is outside"),
        (b"0\n1\na/b 0 5\n", 3, "Topic name 'a/b' is illegal"),
        (b"0\n1\n.. 0 5\n", 3, 'cannot be "." or ".."'),
    ],
)
def test_offset_checkpoint_malformed(tmp_path: Path, text: bytes, line: int, message: str) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    path.write_bytes(text)
    with pytest.raises(CorruptCheckpointError) as info:
        OffsetCheckpointFile(path).read()
    err = info.value
    assert err.path == str(path)
    assert message in str(err)
    assert f"line {line}" in str(err)
    assert str(path) in str(err)
    assert err.position == sum(len(x) for x in re.split(rb"(?<=\n)", text)[: line - 1])
    assert err.kafka_exception == "IOException"
    assert isinstance(err, KlogError)


def test_offset_checkpoint_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    path.write_bytes(b"0\n1\nt\xff 0 5\n")
    with pytest.raises(CorruptCheckpointError, match="Line 3 is not valid UTF-8") as info:
        OffsetCheckpointFile(path).read()
    assert info.value.position == 5


def test_missing_files(tmp_path: Path) -> None:
    assert OffsetCheckpointFile(tmp_path / "recovery-point-offset-checkpoint").read() == {}
    assert LeaderEpochCheckpointFile.in_dir(tmp_path).read() == []
    assert PartitionMetadataFile.in_dir(tmp_path).read() is None
    assert MetaProperties.in_dir(tmp_path).read() == {}
    assert CleanShutdownFile.in_dir(tmp_path).read() is None
    for f in (
        OffsetCheckpointFile(tmp_path / "recovery-point-offset-checkpoint"),
        LeaderEpochCheckpointFile.in_dir(tmp_path),
        PartitionMetadataFile.in_dir(tmp_path),
        MetaProperties.in_dir(tmp_path),
        CleanShutdownFile.in_dir(tmp_path),
    ):
        assert not f.exists()
        with pytest.raises(CorruptCheckpointError, match="No such file") as info:
            f.read(missing_ok=False)
        assert info.value.path == str(f.path)
    assert os.listdir(tmp_path) == []  # reading never creates files


def test_directory_instead_of_file(tmp_path: Path) -> None:
    (tmp_path / "leader-epoch-checkpoint").mkdir()
    with pytest.raises(CorruptCheckpointError, match="directory"):
        LeaderEpochCheckpointFile.in_dir(tmp_path).read()


# --- leader-epoch-checkpoint ------------------------------------------------------------------


def test_leader_epoch_round_trip_keeps_order(tmp_path: Path) -> None:
    entries = [EpochEntry(0, 0), EpochEntry(3, 1734), EpochEntry(10, 4), EpochEntry(2**31 - 1, 2**63 - 1)]
    f = LeaderEpochCheckpointFile.in_dir(tmp_path)
    f.write(entries)
    assert f.path.read_bytes() == b"0\n4\n0 0\n3 1734\n10 4\n2147483647 9223372036854775807\n"
    assert f.read() == entries
    assert sorted(os.listdir(tmp_path)) == ["leader-epoch-checkpoint"]


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        (b"1\n0\n", 1, "Unrecognised version 1"),
        (
            b"0\n1\n0\n",
            3,
            "Malformed line 3 in checkpoint file: '0' (1 fields instead of 2; expected '<leaderEpoch> <startOffset>')",
        ),
        (b"0\n1\n0 0 0\n", 3, "3 fields instead of 2"),
        (b"0\n1\nx 0\n", 3, "the leader epoch 'x' is not an integer"),
        (b"0\n1\n2147483648 0\n", 3, "the leader epoch 2147483648 is outside"),
        (b"0\n1\n0 y\n", 3, "the start offset 'y' is not an integer"),
        (b"0\n2\n0 0\n", 2, "Expected 2 entries"),
    ],
)
def test_leader_epoch_malformed(tmp_path: Path, text: bytes, line: int, message: str) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_bytes(text)
    with pytest.raises(CorruptCheckpointError) as info:
        LeaderEpochCheckpointFile(path).read()
    assert message in str(info.value)
    assert f"line {line}" in str(info.value)
    assert info.value.path == str(path)


def test_leader_epoch_write_refuses_bad_entries(tmp_path: Path) -> None:
    f = LeaderEpochCheckpointFile.in_dir(tmp_path)
    with pytest.raises(InvalidOptionError, match="leader epoch 2147483648"):
        f.write([EpochEntry(2**31, 0)])
    with pytest.raises(InvalidOptionError, match="EpochEntry"):
        f.write([(0, 0)])  # type: ignore[list-item]
    assert os.listdir(tmp_path) == []


# --- partition.metadata -----------------------------------------------------------------------


def test_partition_metadata_round_trip(tmp_path: Path) -> None:
    topic_id = uuid.UUID("077fc788-d3e0-490e-a8c4-6f5967a103e4")  # TestTopicPatient in LDI-POC
    f = PartitionMetadataFile.in_dir(tmp_path)
    f.write(topic_id)
    assert f.path.read_bytes() == b"version: 0\ntopic_id: B3_HiNPgSQ6oxG9ZZ6ED5A"
    assert f.read() == PartitionMetadata(0, topic_id)
    assert f.exists()
    f.delete()
    assert not f.exists()
    f.delete()  # a second delete is fine


def test_uuid_base64_matches_kafka() -> None:
    # Kafka's METADATA_TOPIC_ID is new Uuid(0L, 1L); partition.metadata of __cluster_metadata-0 has it.
    assert uuid_from_base64("AAAAAAAAAAAAAAAAAAAAAQ") == uuid.UUID(int=1)
    assert uuid_to_base64(uuid.UUID(int=1)) == "AAAAAAAAAAAAAAAAAAAAAQ"
    assert uuid_from_base64("AAAAAAAAAAAAAAAAAAAAAQ==") == uuid.UUID(int=1)
    u = uuid.uuid4()
    assert uuid_from_base64(uuid_to_base64(u)) == u
    for bad in ("", "AAAA", "AAAAAAAAAAAAAAAAAAAA+Q", "AAAAAAAAAAAAAAAAAAAAAQ=", "AAAAAAAAAAAAAAAAAAAAAAAA"):
        with pytest.raises(ValueError):
            uuid_from_base64(bad)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ\n", PartitionMetadata(0, uuid.UUID(int=1))),
        (b"version:  0\r\ntopic_id:\tAAAAAAAAAAAAAAAAAAAAAQ\r\n\n", PartitionMetadata(0, uuid.UUID(int=1))),
        (b"version: 1\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ", PartitionMetadata(1, uuid.UUID(int=1))),  # Kafka: >= 0
    ],
)
def test_partition_metadata_accepts(tmp_path: Path, text: bytes, expected: PartitionMetadata) -> None:
    path = tmp_path / "partition.metadata"
    path.write_bytes(text)
    assert PartitionMetadataFile(path).read() == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (b"", "has 0 line(s)"),
        (b"version: 0\n", "has 1 line(s)"),
        (b"version:0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ", "Malformed line 1 in partition metadata file: 'version:0'"),
        (b"Version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ", "Malformed line 1"),
        (b"version: x\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ", "the version 'x' is not an integer"),
        (b"version: -1\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ", "Unrecognized version -1 of partition metadata file"),
        (b"version: 0\ntopicid: AAAAAAAAAAAAAAAAAAAAAQ", "Malformed line 2"),
        (b"version: 0\ntopic_id: AAAA", "Malformed line 2 in partition metadata file: 'topic_id: AAAA'"),
        (b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA", "the zero topic id"),
        (b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ\nmore", "Malformed line 3"),
    ],
)
def test_partition_metadata_malformed(tmp_path: Path, text: bytes, message: str) -> None:
    path = tmp_path / "partition.metadata"
    path.write_bytes(text)
    with pytest.raises(CorruptCheckpointError) as info:
        PartitionMetadataFile(path).read()
    assert message in str(info.value)
    assert info.value.path == str(path)


def test_partition_metadata_write_refuses_zero_uuid(tmp_path: Path) -> None:
    with pytest.raises(InvalidOptionError, match="zero"):
        PartitionMetadataFile.in_dir(tmp_path).write(uuid.UUID(int=0))
    with pytest.raises(InvalidOptionError, match="uuid.UUID"):
        PartitionMetadataFile.in_dir(tmp_path).write("AAAAAAAAAAAAAAAAAAAAAQ")  # type: ignore[arg-type]
    assert os.listdir(tmp_path) == []


# --- .kafka_cleanshutdown ---------------------------------------------------------------------


def test_clean_shutdown_round_trip(tmp_path: Path) -> None:
    f = CleanShutdownFile.in_dir(tmp_path)
    assert not f.exists()
    f.write(11)
    assert f.path.read_bytes() == b'{"version":0,"brokerEpoch":11}'
    assert f.exists()
    assert f.read() == 11
    f.write(None)
    assert f.path.read_bytes() == b""
    assert f.read() is None
    f.delete()
    assert not f.exists()
    f.delete()
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (b"", None),
        (b"\n", None),
        (b'{"version":0}', None),
        (b'{"version":0,"brokerEpoch":null}', None),
        (b'{"brokerEpoch":7,"version":0,"extra":true}', 7),
        (b'{"version":1,"brokerEpoch":-1}', -1),
    ],
)
def test_clean_shutdown_reads(tmp_path: Path, text: bytes, expected: int | None) -> None:
    path = tmp_path / ".kafka_cleanshutdown"
    path.write_bytes(text)
    assert CleanShutdownFile(path).read() == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (b"clean", "is not JSON"),
        (b"\xff\xfe", "is not JSON"),
        (b"[0, 11]", "holds list JSON"),
        (b'{"version":0,"brokerEpoch":"11"}', "brokerEpoch '11' is not a 64-bit integer"),
        (b'{"version":0,"brokerEpoch":1.5}', "brokerEpoch 1.5"),
        (b'{"version":"0","brokerEpoch":1}', "version '0' is not an integer"),
    ],
)
def test_clean_shutdown_malformed(tmp_path: Path, text: bytes, message: str) -> None:
    path = tmp_path / ".kafka_cleanshutdown"
    path.write_bytes(text)
    with pytest.raises(CorruptCheckpointError, match=re.escape(message)) as info:
        CleanShutdownFile(path).read()
    assert info.value.path == str(path)


# --- meta.properties --------------------------------------------------------------------------


def test_meta_properties_write_matches_java_store(tmp_path: Path) -> None:
    f = MetaProperties.in_dir(tmp_path)
    props = {"node.id": "1", "directory.id": "XHhkr4tkSsD900pOQ8pPfg", "version": "1", "cluster.id": "q1w2e3r4"}
    f.write(props, now=datetime(2026, 1, 30, 16, 43, 51, tzinfo=timezone.utc))
    assert f.path.read_bytes() == (
        b"#\n#Fri Jan 30 16:43:51 UTC 2026\n"
        b"node.id=1\ndirectory.id=XHhkr4tkSsD900pOQ8pPfg\nversion=1\ncluster.id=q1w2e3r4\n"
    )
    assert f.read() == props
    assert sorted(os.listdir(tmp_path)) == ["meta.properties"]


def test_meta_properties_escapes_round_trip(tmp_path: Path) -> None:
    props = {
        "key with spaces": " leading and trailing ",
        "a=b:c#d!e": "x=y:z#!",
        "back\\slash": "tab\there\nnewline\rcr\fff",
        "unicode": "caf\u00e9 \u2603 \U0001f600",
        "empty": "",
        "": "empty key",
    }
    f = MetaProperties.in_dir(tmp_path)
    f.write(props)
    f.path.read_bytes().decode("ascii")  # everything non-ASCII is \uXXXX
    assert f.read() == props


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (b"a=b\n", {"a": "b"}),
        (b"a = b\n", {"a": "b"}),
        (b"a:b\n", {"a": "b"}),
        (b"a b\n", {"a": "b"}),
        (b"a\t=\t b  \n", {"a": "b  "}),  # trailing whitespace belongs to the value
        (b"   a=b\n", {"a": "b"}),
        (b"# c=d\n! e=f\n\n   \na=b", {"a": "b"}),
        (b"a=b\\\n    c\n", {"a": "bc"}),  # continuation: leading whitespace of the next line dropped
        (b"a=b\\\\\nc=d\n", {"a": "b\\", "c": "d"}),  # an even number of backslashes does not continue
        (b"a\\ b=c\\=d\n", {"a b": "c=d"}),
        (b"\\u0041=\\u00e9\\t\n", {"A": "\u00e9\t"}),
        (b"a\n", {"a": ""}),
        (b"a=\n", {"a": ""}),
        (b"a=1\na=2\n", {"a": "2"}),
        (b"a=\xe9\r\nb=2\r", {"a": "\u00e9", "b": "2"}),  # ISO-8859-1, as Properties.load(InputStream)
    ],
)
def test_meta_properties_parses_like_java(tmp_path: Path, text: bytes, expected: dict[str, str]) -> None:
    path = tmp_path / "meta.properties"
    path.write_bytes(text)
    assert MetaProperties(path).read() == expected


def test_meta_properties_malformed_unicode_escape(tmp_path: Path) -> None:
    path = tmp_path / "meta.properties"
    path.write_bytes(b"#\nversion=1\nnode.id=\\u12G4\n")
    with pytest.raises(CorruptCheckpointError, match=r"Malformed line 3 in properties file.*\\uxxxx") as info:
        MetaProperties(path).read()
    assert info.value.path == str(path)
    assert info.value.position == 12


def test_meta_properties_write_refuses_non_strings(tmp_path: Path) -> None:
    with pytest.raises(InvalidOptionError, match="str to str"):
        MetaProperties.in_dir(tmp_path).write({"node.id": 1})  # type: ignore[dict-item]
    assert os.listdir(tmp_path) == []


# --- topic names and partition directories ----------------------------------------------------


@pytest.mark.parametrize(
    "name",
    ["my-topic", "a.b", "__consumer_offsets", "A_Z-0.9", "t", "-", "x" * 249, "orders.v2-eu_1"],
)
def test_valid_topic_names(name: str) -> None:
    validate_topic_name(name)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("", "can't be empty"),
        (".", 'cannot be "." or ".."'),
        ("..", '\'..\' is illegal, it cannot be "." or ".."'),
        ("/", "'/' is illegal, it contains a character other than ASCII alphanumerics"),
        ("a/b", "first bad character: '/'"),
        ("../etc", "first bad character: '/'"),
        ("a\\b", "first bad character: '\\\\'"),
        ("a\x00b", "'a\\x00b' is illegal"),
        ("a b", "first bad character: ' '"),
        ("caf\u00e9", "first bad character: '\u00e9'"),
        ("x" * 250, "can't be longer than 249 characters (it has 250)"),
    ],
)
def test_invalid_topic_names(name: str, message: str) -> None:
    with pytest.raises(InvalidTopicError) as info:
        validate_topic_name(name)
    assert message in str(info.value)
    assert isinstance(info.value, ValueError)
    assert info.value.kafka_exception == "InvalidTopicException"


def test_topic_name_must_be_str() -> None:
    with pytest.raises(InvalidTopicError, match="must be a string"):
        validate_topic_name(None)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("my-topic-12", TP("my-topic", 12)),
        ("a.b-0", TP("a.b", 0)),
        ("__consumer_offsets-49", TP("__consumer_offsets", 49)),
        ("topic--1", TP("topic-", 1)),
        ("t-0.e8f0a1b2c3d4e5f60718293a4b5c6d7e-delete", TP("t", 0)),
        ("my.topic-3.e8f0a1b2c3d4e5f60718293a4b5c6d7e-delete", TP("my.topic", 3)),
        ("my-topic-7.0123456789abcdef0123456789abcdef-future", TP("my-topic", 7)),
        ("my-topic-7.0123456789abcdef0123456789abcdef-stray", TP("my-topic", 7)),
        ("t-2147483647", TP("t", 2**31 - 1)),
    ],
)
def test_parse_dir_name(name: str, expected: TopicPartition) -> None:
    assert TP.parse_dir_name(name) == expected


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("topic", "it has no '-'"),
        ("", "it has no '-'"),
        ("topic-x", "the partition 'x' is not a non-negative integer"),
        ("-1", "the topic before the last '-' is empty"),
        ("topic-", "the partition after the last '-' is empty"),
        ("topic-+1", "the partition '+1' is not a non-negative integer"),
        ("topic-2147483648", "larger than 2147483647"),
        ("topic-0-delete", "ends in '-delete' but not in '.<uuid>-delete'"),
        ("topic-0.-future", "ends in '-future'"),
        ("topic-0.a b-stray", "ends in '-stray'"),
        ("..-0", 'cannot be "." or ".."'),
        ("a b-0", "first bad character: ' '"),
        ("lost+found", "it has no '-'"),
    ],
)
def test_parse_dir_name_rejects(name: str, message: str) -> None:
    with pytest.raises(InvalidTopicError) as info:
        TP.parse_dir_name(name)
    assert message in str(info.value)
    assert repr(name) in str(info.value)


def test_topic_partition_value() -> None:
    tp = TP("my-topic", 12)
    assert tp.dir_name == "my-topic-12"
    assert str(tp) == "my-topic-12"
    assert TP.parse_dir_name(tp.dir_name) == tp
    assert sorted([TP("b", 0), TP("a", 10), TP("a", 2)]) == [TP("a", 2), TP("a", 10), TP("b", 0)]
    assert {tp: 1}[TP("my-topic", 12)] == 1
    with pytest.raises(AttributeError):
        tp.partition = 3  # type: ignore[misc]
