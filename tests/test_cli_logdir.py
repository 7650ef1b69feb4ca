"""``klog describe`` and ``klog verify`` on log dirs: success, bad path, corrupt data, wrong argument."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
import shared_fixtures as sf

from storage_core.config import LogConfig
from storage_core.log import Log
from storage_core.records import Record, build_batch

T0 = 1_700_000_000_000


def klog(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "storage_core.cli", *args], capture_output=True, text=True)


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
    assert len(lines) == 6 and lines[1].startswith("my.topic-x") and lines[4] == ""
    assert lines[5] == f"3 partitions of 2 topics, ~300 records, 17.6 KiB in {d}"
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
    from storage_core.manager import find_partitions
    from storage_core.report import verify_partition

    for d in dirs:  # each is its own cluster: the same partition names recur across them
        for part in find_partitions([d]):
            rep = verify_partition(part)
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
