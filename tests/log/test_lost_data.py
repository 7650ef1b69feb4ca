"""Issue 30 items 2 and 3, each case as reproduced: data the dir's own evidence says should be there
is lost data. Under failOnDataLoss=true (the default) every read path fails naming the file, the
offsets and the bytes; under false it reads every intact record and warns naming the lost offsets;
describe and verify say so. A torn tail of the last segment after a crash is not a loss.

The partitions are written by klog's LogManager (checkpoints, producer snapshots, the
clean-shutdown marker), 3,000 records with known keys and values; one case uses the shared Kafka
fixtures (a broker dir whose .log files are not in the copy).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import shared_fixtures as sf
from damage_gen import check_rows, rows_by_offset, value_of, warnings_of_klog

import storage_core as klog
from storage_core.errors import DataLossError
from storage_core.log.config import LogConfig
from storage_core.log.manager import LogManager, PartitionDir
from storage_core.log.topic_partition import TopicPartition
from storage_core.record.file_records import FileRecords
from storage_core.record.records import Record, build_batch
from storage_core.tools.report import verify_partition

T0 = 1_700_000_000_000
N = 3000


def three_segments(root: Path) -> Path:
    """3,000 records in batches of 10, three segments, shut down cleanly (marker, recovery point 3000)."""
    root.mkdir(parents=True)
    cfg = LogConfig.from_properties({"segment.bytes": "75000"})
    with LogManager([root], writable=True, config=cfg) as m:
        lg = m.create_log(TopicPartition("t", 0))
        for b in range(N // 10):
            lg.append(build_batch([Record(j, T0 + b * 10 + j, b"k%d" % (b * 10 + j), value_of(b * 10 + j))
                                   for j in range(10)]))
    part = root / "t-0"
    assert len(list(part.glob("*.log"))) >= 3
    return part


def middle(part: Path) -> Path:
    return sorted(part.glob("*.log"))[1]


def klog_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "storage_core.tools.cli", *args], capture_output=True, text=True)


def _offsets(text: str) -> tuple[int, int]:
    import re

    m = re.search(r"offsets (\d+)\.\.(\d+)", text)
    assert m, text
    return int(m.group(1)), int(m.group(2))


def assert_every_path(root: Path, lost: tuple[int, int], file: Path | None, *, cheap: bool = True) -> None:
    """Every read path on ``root`` whose offsets ``lost`` (inclusive) are gone: errors under
    failOnDataLoss=true naming the offsets and ``file``; under false exactly the other records and a
    warning naming them; export exit 1; verify (and, when ``cheap`` evidence shows it, describe) say so."""
    first, last = lost
    with pytest.raises(DataLossError) as info:
        klog.read_arrow(str(root)).read_all()
    msg = str(info.value)
    assert _offsets(msg)[0] == first and _offsets(msg)[1] == last, msg
    if file is not None:
        assert str(file) in msg
    assert "bytes" in msg
    with warnings_of_klog() as cap:
        rows = rows_by_offset(klog.read_arrow(str(root), failOnDataLoss="false").read_all())
    check_rows(rows, N)
    assert set(rows) == set(range(N)) - set(range(first, last + 1))
    assert any(f"offsets {first}..{last}" in m for m in cap.messages), cap.messages

    out = root.parent / "out.parquet"
    res = klog_cli("export", str(root), "--topic", "t", "-o", str(out))
    assert res.returncode == 1 and f"{first}..{last}" in res.stderr and not out.exists(), res.stderr
    res = klog_cli("verify", str(root))
    assert res.returncode == 1 and f"offsets {first}..{last}" in res.stdout + res.stderr
    res = klog_cli("describe", str(root), "--json")
    if cheap:
        assert res.returncode == 1 and f"offsets {first}..{last}" in res.stderr, res.stderr
        assert json.loads(res.stdout)[0]["lost"]
    else:
        assert res.returncode in (0, 1)


def test_middle_log_truncated_to_20000_bytes(tmp_path: Path) -> None:
    part = three_segments(tmp_path / "d")
    seg = middle(part)
    batches = list(FileRecords(seg).batches())
    os.truncate(seg, 20000)
    whole = [b for b in batches if b.position + b.size_in_bytes <= 20000]
    next_base = int(sorted(part.glob("*.log"))[2].name.split(".")[0])
    assert_every_path(tmp_path / "d", (whole[-1].last_offset + 1, next_base - 1), seg)


def test_batch_length_patched_to_0x7ffffff0_loses_only_that_batch(tmp_path: Path) -> None:
    part = three_segments(tmp_path / "d")
    seg = middle(part)
    target = list(FileRecords(seg).batches())[5]
    raw = bytearray(seg.read_bytes())
    raw[target.position + 8: target.position + 12] = (0x7FFFFFF0).to_bytes(4, "big")
    seg.write_bytes(bytes(raw))
    assert_every_path(tmp_path / "d", (target.base_offset, target.last_offset), seg, cheap=False)


def test_zero_byte_middle_log(tmp_path: Path) -> None:
    part = three_segments(tmp_path / "d")
    seg = middle(part)
    base = int(seg.name.split(".")[0])
    next_base = int(sorted(part.glob("*.log"))[2].name.split(".")[0])
    os.truncate(seg, 0)
    assert_every_path(tmp_path / "d", (base, next_base - 1), seg)


def test_zero_byte_small_segment_without_index_entries(tmp_path: Path) -> None:
    """A small middle segment has no offset-index entries: its time index still names its offsets."""
    root = tmp_path / "d"
    root.mkdir()
    cfg = LogConfig.from_properties({"segment.bytes": "1500"})
    with LogManager([root], writable=True, config=cfg) as m:
        lg = m.create_log(TopicPartition("t", 0))
        for b in range(30):
            lg.append(build_batch([Record(0, T0 + b, b"k%d" % b, value_of(b))]))
    part = root / "t-0"
    logs = sorted(part.glob("*.log"))
    seg = logs[1]
    assert seg.with_suffix(".index").stat().st_size == 0
    base, next_base = (int(p.name.split(".")[0]) for p in logs[1:3])
    os.truncate(seg, 0)
    with pytest.raises(DataLossError, match=f"offsets {base}..{next_base - 1} "):
        klog.read_arrow(str(root)).read_all()
    rep = verify_partition(PartitionDir(TopicPartition("t", 0), part, root))
    assert rep.errors and any(f"offsets {base}..{next_base - 1} " in e for e in rep.errors), rep.errors


def test_64_byte_overwrite_loses_only_the_damaged_batch(tmp_path: Path) -> None:
    """Item 3: failOnDataLoss=false resynchronises at the next intact batch, not the next index entry."""
    part = three_segments(tmp_path / "d")
    seg = middle(part)
    batches = list(FileRecords(seg).batches())
    target = next(b for b in batches if b.position > 30000)
    raw = bytearray(seg.read_bytes())
    raw[target.position + 30: target.position + 94] = bytes(64)  # inside one batch of about 580 bytes
    seg.write_bytes(bytes(raw))
    assert_every_path(tmp_path / "d", (target.base_offset, target.last_offset), seg, cheap=False)


def test_all_logs_gone_while_checkpoints_say_17081(tmp_path: Path) -> None:
    """A partition whose .log files are gone while its checkpoints and snapshot say offset 17,081."""
    root = tmp_path / "d"
    part = root / "t-0"
    part.mkdir(parents=True)
    (part / "00000000000000017081.snapshot").write_bytes(b"\0" * 10)
    (root / "recovery-point-offset-checkpoint").write_text("0\n1\nt 0 17081\n")
    (root / "log-start-offset-checkpoint").write_text("0\n1\nt 0 0\n")
    with pytest.raises(DataLossError, match=r"offsets 0\.\.17080 of t-0 are lost"):
        klog.read_arrow(str(root)).read_all()
    with warnings_of_klog() as cap:
        assert klog.read_arrow(str(root), failOnDataLoss="false").read_all().num_rows == 0
    assert any("offsets 0..17080" in m for m in cap.messages)
    assert klog.describe(str(root)).to_pylist()[0]["lost"]
    res = klog_cli("describe", str(root))
    assert res.returncode == 1 and "offsets 0..17080" in res.stderr
    res = klog_cli("verify", str(root))
    assert res.returncode == 1 and "offsets 0..17080" in res.stdout + res.stderr


def test_broker_dir_without_its_logs_is_lost_data() -> None:
    """The shared fixture rjmfernandes+flink-on-prem: customers-0 kept its indexes and a snapshot
    at 17081, not its .log."""
    d = sf.KAFKA_FIXTURES / "rjmfernandes+flink-on-prem" / "43d3daa" / "data"
    if not (d / "customers-0").is_dir():
        pytest.skip(f"{d} is not in this copy of the shared fixtures")
    with pytest.raises(DataLossError, match=r"offsets 0\.\.17080 of customers-0"):
        klog.read_arrow(str(d), topics="customers").read_all()
    res = klog_cli("verify", str(d), "--topic", "customers")
    assert res.returncode == 1 and "offsets 0..17080" in res.stdout + res.stderr


def test_spark_count_fails_by_default_and_reads_the_rest_without(tmp_path: Path, spark) -> None:  # type: ignore[no-untyped-def]
    part = three_segments(tmp_path / "d")
    os.truncate(middle(part), 20000)
    with pytest.raises(Exception, match=r"offsets \d+\.\.\d+ of t-0 are lost"):
        spark.read.format("klog").load(str(tmp_path / "d")).count()
    n = spark.read.format("klog").option("failOnDataLoss", "false").load(str(tmp_path / "d")).count()
    assert n == klog.read_arrow(str(tmp_path / "d"), failOnDataLoss="false").read_all().num_rows < N


test_spark_count_fails_by_default_and_reads_the_rest_without = pytest.mark.spark(
    test_spark_count_fails_by_default_and_reads_the_rest_without)


# --- what is not a loss ---------------------------------------------------------------------------

def test_torn_tail_beyond_the_recovery_point_is_not_a_loss(tmp_path: Path) -> None:
    """After a crash the last segment's tail beyond the recovery point may be torn: Kafka truncates it."""
    root = tmp_path / "d"
    part = three_segments(root)
    last = sorted(part.glob("*.log"))[-1]
    base = int(last.name.split(".")[0])
    (root / ".kafka_cleanshutdown").unlink()
    (root / "recovery-point-offset-checkpoint").write_text(f"0\n1\nt 0 {base}\n")
    os.truncate(last, last.stat().st_size - 7)
    with warnings_of_klog() as cap:
        rows = rows_by_offset(klog.read_arrow(str(root)).read_all())
    assert set(rows) == set(range(N - 10)) and not cap.messages
    assert verify_partition(PartitionDir(TopicPartition("t", 0), part, root)).errors == []
    out = tmp_path / "x.parquet"
    assert klog_cli("export", str(root), "--topic", "t", "-o", str(out)).returncode == 0
    assert pq.read_table(out).num_rows == N - 10
    assert klog_cli("describe", str(root)).returncode == 0


def test_torn_tail_below_the_recovery_point_is_a_loss(tmp_path: Path) -> None:
    """The recovery point says those offsets were flushed: their absence is lost data."""
    root = tmp_path / "d"
    part = three_segments(root)
    last = sorted(part.glob("*.log"))[-1]
    (root / ".kafka_cleanshutdown").unlink()
    os.truncate(last, last.stat().st_size - 7)
    with pytest.raises(DataLossError, match=f"offsets {N - 10}..{N - 1} of t-0"):
        klog.read_arrow(str(root)).read_all()


def test_live_like_active_segment_with_preallocated_indexes_is_not_a_loss(tmp_path: Path) -> None:
    """A broker's live dir: no marker, the active segment's indexes preallocated with zeros, a
    partial batch being written at its end, the recovery point behind."""
    root = tmp_path / "d"
    part = three_segments(root)
    (root / ".kafka_cleanshutdown").unlink()
    last = sorted(part.glob("*.log"))[-1]
    base = int(last.name.split(".")[0])
    (root / "recovery-point-offset-checkpoint").write_text(f"0\n1\nt 0 {base}\n")
    for suffix in (".index", ".timeindex"):
        p = last.with_suffix(suffix)
        with p.open("ab") as f:
            f.write(bytes(1 << 16))
    with last.open("ab") as f:
        f.write(bytes(build_batch([Record(0, T0, b"k", b"v")]))[:30])
    with warnings_of_klog() as cap:
        assert klog.read_arrow(str(root)).read_all().num_rows == N
    assert not cap.messages
    assert klog.describe(str(root)).to_pylist()[0]["lost"] == []


def test_deleted_index_is_not_a_loss(tmp_path: Path) -> None:
    root = tmp_path / "d"
    part = three_segments(root)
    middle(part).with_suffix(".index").unlink()
    assert klog.read_arrow(str(root)).read_all().num_rows == N
    shutil.rmtree(root)


def test_appends_after_the_open_are_no_loss(tmp_path: Path) -> None:
    """A dir a klog writer shut down cleanly (marker, recovery point) is read while a writer opens it
    again and appends: batches past what the read-only open saw are new data, not intact batches
    after damage. The append lands between the evidence and the lost-data check, as it can for any
    reader of a live dir."""
    from storage_core.log.log import Log
    from storage_core.log.lost import gather_evidence, lost_data

    part = three_segments(tmp_path / "logs")
    root = part.parent
    pd = PartitionDir(TopicPartition("t", 0), part, root)
    evidence = gather_evidence(pd)
    assert evidence.clean_shutdown
    with Log(part, had_clean_shutdown=True) as lg:
        with LogManager([root], writable=True) as m:  # the writer's turn: the marker goes, batches land
            lg_w = m.get_log(TopicPartition("t", 0))
            assert lg_w is not None
            for _ in range(3):
                lg_w.append(build_batch([Record(j, T0 + j, b"k", b"new") for j in range(10)]))
        assert lost_data(pd, lg, evidence) == []
        assert lost_data(pd, lg, evidence, full=True) == []


def test_verify_checks_the_intact_batches_after_damage(tmp_path: Path) -> None:
    """One damaged batch in a middle segment: ``verify`` reports it (its CRC, its lost offsets) and
    checks every batch and index entry after it, as every reader resumes there; before, it stopped at
    the damage and called each later index entry "past the valid data" (dozens of false errors)."""
    part = three_segments(tmp_path / "d")
    seg = middle(part)
    batches = list(FileRecords(seg).batches())
    total = sum(len(list(FileRecords(s).batches())) for s in part.glob("*.log"))
    target = batches[3]
    raw = bytearray(seg.read_bytes())
    raw[target.position + 30: target.position + 34] = bytes(4)
    seg.write_bytes(bytes(raw))
    rep = verify_partition(PartitionDir(TopicPartition("t", 0), part, part.parent))
    assert rep.batches == total - 1
    assert [(x.first, x.last) for x in rep.lost] == [(target.base_offset, target.last_offset)]
    assert len(rep.errors) == 2, rep.errors  # the CRC error and the lost offsets, nothing about the indexes
    assert "Record is corrupt" in rep.errors[0] and rep.errors[1].startswith("lost data: ")
    # a damaged batch right under an index entry: that entry is one error naming the entries
    entry = next(b for b in batches[5:] if b.position > 4096 + batches[0].position)
    raw = bytearray(seg.read_bytes())
    entries = [b for b in batches if b.position >= entry.position]
    for b in entries[:1]:
        raw[b.position + 30: b.position + 34] = bytes(4)
    seg.write_bytes(bytes(raw))
    rep = verify_partition(PartitionDir(TopicPartition("t", 0), part, part.parent))
    assert rep.batches == total - 2
    assert all("past the valid data" not in e for e in rep.errors), rep.errors


@pytest.mark.parametrize("damage", ["truncated", "first .log gone"])
def test_a_read_answers_for_the_losses_of_its_own_range(tmp_path: Path, damage: str) -> None:
    """A read of offsets past a loss returns them without error (it reads no lost offset, and does
    not look at the segments below it: a tail read of 10,000 segments opened them all); a read from
    the log start, or one that reaches into the lost range, fails. Data lost below the first
    segment is in the range of a read from the earliest offset."""
    root = tmp_path / "logs"
    part = three_segments(root)
    segs = sorted(part.glob("*.log"))
    if damage == "truncated":
        os.truncate(middle(part), 20_000)
    else:  # the first segment's .log is gone, its index is there: offsets below the first segment lost
        segs[0].unlink()
    past = int(segs[2].name[:20])
    with pytest.raises(DataLossError) as info:
        klog.read_arrow(str(root)).read_all()
    first, last = _offsets(str(info.value))
    assert last == past - 1 if damage == "truncated" else (first, last) == (0, int(segs[1].name[:20]) - 1)
    tail = klog.read_arrow(str(root), startingOffsets=json.dumps({"t": {"0": past + 5}})).read_all()
    assert tail.column("offset").to_pylist() == list(range(past + 5, N))
    for start, end in ((last, "latest"), (past, "latest"), ("earliest", first + 1)):
        ending = end if isinstance(end, str) else json.dumps({"t": {"0": end}})
        starting = start if isinstance(start, str) else json.dumps({"t": {"0": start}})
        if start == past:
            assert klog.read_arrow(str(root), startingOffsets=starting).read_all().num_rows == N - past
            continue
        with pytest.raises(DataLossError, match=rf"offsets {first}\.\.{last}"):
            klog.read_arrow(str(root), startingOffsets=starting, endingOffsets=ending).read_all()
