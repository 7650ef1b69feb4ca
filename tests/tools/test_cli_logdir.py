"""``klog describe`` and ``klog verify`` on log dirs: success, bad path, corrupt data, wrong argument."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import shared_fixtures as sf

from storage_core.log.config import LogConfig
from storage_core.log.log import Log
from storage_core.record.records import Record, build_batch

T0 = 1_700_000_000_000


def klog(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "storage_core.tools.cli", *args], capture_output=True, text=True)


def log_dir(tmp_path: Path) -> Path:
    cfg = LogConfig.from_properties({"segment.bytes": "2048", "index.interval.bytes": "256"})
    for topic, parts in (("orders", 2), ("my.topic-x", 1)):
        for p in range(parts):
            d = tmp_path / f"{topic}-{p}"
            d.mkdir()
            with Log(d, cfg, writable=True) as log:
                for i in range(20):
                    log.append(build_batch([Record(j, T0 + 1000 * i + j, b"k", b"v" * 40) for j in range(5)]))
    return tmp_path


def test_describe_table_and_json(tmp_path: Path) -> None:
    d = log_dir(tmp_path)
    res = klog("describe", str(d))
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].split()[:4] == ["TOPIC", "PART", "START", "END"]
    assert len(lines) == 10 and lines[1].startswith("my.topic-x") and lines[4] == ""
    assert lines[5] == f"3 partitions of 2 topics, ~300 records, 17.6 KiB in {d}"
    assert lines[6] == ("topic configs: no __cluster_metadata in this log dir (ZooKeeper-era or a copy without "
                        "it): topic configs unknown, Kafka defaults assumed")
    assert lines[7].split() == ["TOPIC", "TOPIC", "ID", "ID", "vs", "KRAFT", "CONFIGS", "(source)"]
    assert lines[8].split() == ["my.topic-x", "-", "-", "Kafka", "defaults"]
    assert klog("describe", str(d), "--quiet").stdout.splitlines()[1:] == lines[1:4]
    res = klog("describe", str(d), "--topic", "orders", "--json")
    rows = json.loads(res.stdout)
    assert [(r["topic"], r["partition"], r["start_offset"], r["end_offset"]) for r in rows] == [
        ("orders", 0, 0, 100), ("orders", 1, 0, 100)]
    assert rows[0]["segments"] > 1 and rows[0]["codecs"] == ["none"]
    assert rows[0]["first_timestamp"] == T0 and rows[0]["max_timestamp"] == T0 + 19004


def test_verify_ok_and_read_only(tmp_path: Path) -> None:
    d = log_dir(tmp_path)
    before = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in d.rglob("*") if p.is_file()}
    res = klog("verify", str(d))
    assert res.returncode == 0, res.stderr
    assert "orders-0: ok" in res.stdout
    assert before == {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in d.rglob("*") if p.is_file()}


def test_verify_bad_crc_is_exit_1(tmp_path: Path) -> None:
    d = log_dir(tmp_path)
    seg = sorted((d / "orders-0").glob("*.log"))[0]
    data = bytearray(seg.read_bytes())
    data[200] ^= 0x01
    seg.write_bytes(bytes(data))
    res = klog("verify", str(d), "--quiet")
    assert res.returncode == 1
    assert "Record is corrupt" in res.stderr and str(seg) in res.stderr
    assert "Traceback" not in res.stderr


def test_verify_wrong_index_entry_is_exit_1_missing_index_a_warning(tmp_path: Path) -> None:
    d = log_dir(tmp_path)
    segs = sorted((d / "orders-1").glob("*.log"))
    idx = segs[0].with_suffix(".index")
    raw = bytearray(idx.read_bytes())
    assert raw, "the test needs an index entry"
    raw[3] += 1  # relative offset of the first entry
    idx.write_bytes(bytes(raw))
    segs[1].with_suffix(".index").unlink()
    res = klog("verify", str(d / "orders-1"))
    assert res.returncode == 1
    assert "points to position" in res.stderr
    assert "missing (Kafka rebuilds it)" in res.stderr


def test_bad_path_and_wrong_argument(tmp_path: Path) -> None:
    for cmd in ("describe", "verify"):
        res = klog(cmd, str(tmp_path / "nope"))
        assert res.returncode == 2 and "no such log directory" in res.stderr
        assert klog(cmd).returncode == 2
        assert klog(cmd, str(tmp_path), "--bogus").returncode == 2
    d = log_dir(tmp_path)
    res = klog("describe", str(d), "--topic", "absent")
    assert res.returncode == 2 and "no such topic" in res.stderr


@pytest.mark.skipif(not sf.available(), reason=sf.MISSING_REASON)
def test_verify_every_broker_log_dir_passes() -> None:
    dirs = sorted({p.parent.parent for p in sf.KAFKA_FIXTURES.rglob("*.log") if "captures" not in str(p)
                   and "generated" not in str(p)})
    from storage_core.log.manager import find_partitions
    from storage_core.tools.report import verify_partition

    for d in dirs:  # each is its own cluster: the same partition names recur across them
        for part in find_partitions([d]):
            rep = verify_partition(part)
            if part.path in sf.lost_partitions_under(d):  # .log files gone, checkpoints say offsets
                assert len(rep.errors) == 1 and sf.names_loss(rep.errors[0], d), rep.errors
            else:
                assert rep.errors == [], rep.errors


def test_dump_index_files(tmp_path: Path) -> None:
    d = log_dir(tmp_path)
    seg = sorted((d / "orders-0").glob("*.log"))[0]
    idx, tidx = seg.with_suffix(".index"), seg.with_suffix(".timeindex")
    res = klog("dump", str(idx))
    assert res.returncode == 0
    entries = [ln for ln in res.stdout.splitlines() if ln.startswith("offset: ")]
    assert entries and all(" position: " in ln for ln in entries)
    res = klog("dump", str(tidx))
    assert res.returncode == 0 and "timestamp: " in res.stdout
    res = klog("dump", "--index-sanity-check", str(idx))
    assert res.returncode == 0 and res.stdout.splitlines()[-1] == f"{idx} passed sanity check."
    res = klog("dump", "--verify-index-only", str(idx))
    assert res.returncode == 0 and "offset: " not in res.stdout
    raw = bytearray(idx.read_bytes())
    raw[3] += 1
    idx.write_bytes(bytes(raw))
    res = klog("dump", "--verify-index-only", str(idx))
    assert res.returncode == 1
    assert f"Mismatches in :{idx}" in res.stderr and "Index offset: " in res.stderr


def test_recover_cuts_a_torn_tail(tmp_path: Path) -> None:
    d = log_dir(tmp_path)
    assert klog("recover", str(d)).returncode == 0
    seg = sorted((d / "orders-0").glob("*.log"))[-1]
    seg.write_bytes(seg.read_bytes()[:-9])
    res = klog("recover", str(d), "--quiet")
    assert res.returncode == 1
    assert "orders-0: cut " in res.stdout and "bytes after offset" in res.stdout
    assert "00000000000000000090.log: recovered; cut" in res.stdout
    assert klog("verify", str(d), "--quiet").returncode == 0
    assert (d / ".kafka_cleanshutdown").exists()
    assert klog("recover", str(tmp_path / "nope")).returncode == 2


def test_retention_command(tmp_path: Path) -> None:
    d = log_dir(tmp_path)
    res = klog("retention", str(d), "--topic", "orders", "--config", "retention.ms=5000", "--now", str(T0 + 20_000))
    assert res.returncode == 0, res.stderr
    assert "orders-0: deleted" in res.stdout and "my.topic-x" not in res.stdout
    rows = {(r["topic"], r["partition"]): r for r in json.loads(klog("describe", str(d), "--json").stdout)}
    assert rows[("orders", 0)]["start_offset"] > 0 and rows[("my.topic-x", 0)]["start_offset"] == 0
    res = klog("retention", str(d), "--config", "retention.ms=abc")
    assert res.returncode == 2 and "retention.ms" in res.stderr
    assert klog("retention", str(d), "--config", "nonsense").returncode == 2


def corrupt_crc(seg: Path) -> None:
    data = bytearray(seg.read_bytes())
    data[200] ^= 0x01
    seg.write_bytes(bytes(data))


def test_describe_corrupt_files_are_exit_1(tmp_path: Path) -> None:
    d = log_dir(tmp_path)
    (d / "log-start-offset-checkpoint").write_text("garbage\n")
    res = klog("describe", str(d))
    assert res.returncode == 1
    assert res.stderr.startswith("klog: error: Malformed line 1 in checkpoint file")
    assert str(d / "log-start-offset-checkpoint") in res.stderr and "Traceback" not in res.stderr
    (d / "log-start-offset-checkpoint").unlink()
    seg = sorted((d / "orders-1").glob("*.log"))[0]
    seg.write_bytes(b"\xff" * 12 + seg.read_bytes()[12:])  # the first batch's offset and size
    res = klog("describe", str(d))  # the partition is described; its unreadable offsets are named
    assert res.returncode == 1 and "Traceback" not in res.stderr, res.stderr
    assert f"error: LOST DATA: {seg}: offsets 0.." in res.stderr
    assert "Found record size -1 smaller than minimum record overhead (14)" in res.stderr
    assert "from position 0" in res.stderr


def test_describe_uses_the_log_start_checkpoint(tmp_path: Path) -> None:
    d = log_dir(tmp_path)
    (d / "log-start-offset-checkpoint").write_text("0\n1\norders 1 42\n")
    rows = {(r["topic"], r["partition"]): r for r in json.loads(klog("describe", str(d), "--json").stdout)}
    assert rows[("orders", 1)]["start_offset"] == 42 and rows[("orders", 1)]["estimated_records"] == 58
    assert rows[("orders", 0)]["start_offset"] == 0


def test_describe_and_verify_wrong_argument_messages(tmp_path: Path) -> None:
    d = log_dir(tmp_path)
    for cmd in ("describe", "verify"):
        res = klog(cmd)
        assert res.returncode == 2 and "the following arguments are required: DIR" in res.stderr
        res = klog(cmd, str(d), "--bogus")
        assert res.returncode == 2 and "unrecognized arguments: --bogus" in res.stderr
        res = klog(cmd, str(d), "--topic", "absent")
        assert res.returncode == 2
        assert res.stderr.strip() == f"klog: error: no such topic in {d}: absent; topics there: my.topic-x, orders"
    res = klog("verify", str(d / "orders-0" / "00000000000000000000.log"))
    assert res.returncode == 2 and "not a directory" in res.stderr


def test_verify_summary_quiet_and_progress(tmp_path: Path) -> None:
    d = log_dir(tmp_path)
    res = klog("verify", str(d))
    assert res.stdout.splitlines()[-1].startswith("verified 3 partitions (") and "no corrupt data" in res.stdout
    corrupt_crc(sorted((d / "orders-0").glob("*.log"))[0])
    res = subprocess.run([sys.executable, "-m", "storage_core.tools.cli", "verify", str(d)], capture_output=True, text=True,
                         env={**__import__("os").environ, "KLOG_PROGRESS": "1"})
    assert res.returncode == 1
    assert "corrupt or lost data found" in res.stdout.splitlines()[-1]
    assert "verify:" in res.stderr and "%|" in res.stderr  # the bar
    res = klog("verify", str(d), "--quiet")
    assert res.returncode == 1 and res.stdout == ""
    assert {ln.split(":")[0] for ln in res.stderr.splitlines()} == {"error"}


def test_recover_corrupt_middle_bad_path_wrong_argument(tmp_path: Path) -> None:
    d = log_dir(tmp_path)
    segs = sorted((d / "orders-1").glob("*.log"))
    corrupt_crc(segs[1])
    res = klog("recover", str(d))
    assert res.returncode == 1
    assert f"orders-1: {segs[1]}: recovered; cut " in res.stdout
    assert f"orders-1: {segs[2]}: deleted, it followed a truncated segment" in res.stdout
    assert res.stdout.splitlines()[-1] == f"recovered 3 partitions in {d}: bytes were cut (listed above)"
    assert klog("verify", str(d), "--quiet").returncode == 0
    res = klog("recover", str(tmp_path / "nope"))
    assert res.returncode == 2 and res.stderr.strip() == f"klog: error: no such log directory: {tmp_path / 'nope'}"
    res = klog("recover", str(d), "--topic", "orders")
    assert res.returncode == 2 and "unrecognized arguments: --topic orders" in res.stderr
    res = klog("recover", str(d), "--quiet")
    assert res.returncode == 0 and res.stdout == ""
    res = subprocess.run([sys.executable, "-m", "storage_core.tools.cli", "recover", str(d)], capture_output=True, text=True,
                         env={**__import__("os").environ, "KLOG_PROGRESS": "1"})
    assert res.returncode == 0 and "recover:" in res.stderr and "%|" in res.stderr


def test_recover_refuses_a_locked_dir(tmp_path: Path) -> None:
    from storage_core.log.manager import LogManager

    d = log_dir(tmp_path)
    with LogManager([d], writable=True):
        res = klog("recover", str(d))
    assert res.returncode == 2
    assert res.stderr.strip().startswith(f"klog: error: log dir {d} is locked by process {os.getpid()} (a Kafka "
                                         "broker or another klog writer)")


def test_retention_bad_path_and_corrupt_checkpoint(tmp_path: Path) -> None:
    res = klog("retention", str(tmp_path / "nope"), "--config", "retention.ms=1")
    assert res.returncode == 2 and res.stderr.strip() == f"klog: error: no such log directory: {tmp_path / 'nope'}"
    d = log_dir(tmp_path)
    (d / "recovery-point-offset-checkpoint").write_text("0\n1\norders 0\n")
    res = klog("retention", str(d), "--config", "retention.ms=1000")
    assert res.returncode == 1
    assert "checkpoint file" in res.stderr and str(d / "recovery-point-offset-checkpoint") in res.stderr
    assert "Traceback" not in res.stderr
    (d / "recovery-point-offset-checkpoint").unlink()
    res = klog("retention", str(d), "--topic", "absent", "--config", "retention.ms=1000")
    assert res.returncode == 2 and "no such topic" in res.stderr
    res = klog("retention", str(d), "--config", "retention.ms=-5")
    assert res.returncode == 2 and res.stderr.startswith("klog: error: ") and "retention.ms" in res.stderr


def test_every_command_has_help_with_examples_and_debug() -> None:
    res = klog("--help")
    assert res.returncode == 0 and "exit codes: 0 ok, 1 corrupt or lost data found, 2 usage error" in res.stdout
    commands = ["dump", "describe", "verify", "export", "recover", "retention"]
    for cmd in commands:
        assert cmd in res.stdout
        h = klog(cmd, "--help")
        assert h.returncode == 0, cmd
        assert "examples:" in h.stdout and f"klog {cmd} " in h.stdout, cmd
        assert "--quiet" in h.stdout and "--debug" in h.stdout, cmd
