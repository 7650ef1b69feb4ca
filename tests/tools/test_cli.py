"""``klog`` command line: success, bad path, corrupt file, wrong argument — exit codes and messages."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from storage_core.record.compression import CompressionType
from storage_core.record.records import Header, Record, build_batch

T0 = 1_700_000_000_000


def klog(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "storage_core.tools.cli", *args], capture_output=True, text=True)


def segment(tmp_path: Path) -> Path:
    path = tmp_path / "00000000000000000100.log"
    recs = [Record(100 + i, T0 + i, f"k{i}".encode(), f"v{i}".encode(), (Header("h", b"x"),)) for i in range(6)]
    path.write_bytes(build_batch(recs[:3], compression=CompressionType.LZ4) + build_batch(recs[3:]))
    return path


def test_dump_text(tmp_path: Path) -> None:
    path = segment(tmp_path)
    res = klog("dump", str(path))
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0] == f"Dumping {path}"
    assert lines[1] == "Log starting offset: 100"
    assert lines[2].startswith("baseOffset: 100 lastOffset: 102 count: 3 ")
    assert "compresscodec: lz4" in lines[2] and "isvalid: true" in lines[2] and "position: 0 " in lines[2]
    assert len(lines) == 4


def test_dump_print_data_log(tmp_path: Path) -> None:
    res = klog("dump", "--print-data-log", str(segment(tmp_path)))
    assert res.returncode == 0
    recs = [ln for ln in res.stdout.splitlines() if ln.startswith("| ")]
    assert recs[0] == ("| offset: 100 CreateTime: 1700000000000 keySize: 2 valueSize: 2 sequence: -1 "
                       "headerKeys: [h] key: k0 payload: v0")
    assert len(recs) == 6


def test_dump_jsonl(tmp_path: Path) -> None:
    res = klog("dump", "--jsonl", str(segment(tmp_path)))
    assert res.returncode == 0
    rows = [json.loads(x) for x in res.stdout.splitlines()]
    assert [r["offset"] for r in rows] == list(range(100, 106))
    assert list(rows[0]) == ["batch_base_offset", "batch_last_offset", "magic", "compression", "timestamp_type",
                             "is_transactional", "is_control", "producer_id", "producer_epoch", "base_sequence",
                             "partition_leader_epoch", "offset", "timestamp", "key_b64", "value_b64", "headers",
                             "control_type"]


def test_dump_bad_path(tmp_path: Path) -> None:
    res = klog("dump", str(tmp_path / "nope.log"))
    assert res.returncode == 2
    assert "no such file" in res.stderr and "nope.log" in res.stderr
    assert "Traceback" not in res.stderr


def test_dump_corrupt_file(tmp_path: Path) -> None:
    path = segment(tmp_path)
    data = bytearray(path.read_bytes())
    second = len(build_batch([Record(100 + i, T0 + i, f"k{i}".encode(), f"v{i}".encode(), (Header("h", b"x"),))
                              for i in range(3)], compression=CompressionType.LZ4))
    data[second + 70] ^= 0xFF  # a record byte of the second batch: CRC mismatch
    path.write_bytes(bytes(data))
    res = klog("dump", "--deep-iteration", str(path))
    assert res.returncode == 1
    bad = [ln for ln in res.stdout.splitlines() if "isvalid: false" in ln]
    assert len(bad) == 1 and f"position: {second} " in bad[0]
    assert "Found 1 batches with a bad CRC" in res.stdout
    assert "Traceback" not in res.stderr
    res = klog("dump", "--jsonl", str(path))
    assert res.returncode == 1
    last = json.loads(res.stdout.splitlines()[-1])
    assert last["position"] == second and last["error"].startswith("CorruptRecordException: Record is corrupt")
    assert str(path) in res.stderr


def test_dump_truncated_tail_is_reported_not_an_error(tmp_path: Path) -> None:
    path = segment(tmp_path)
    path.write_bytes(path.read_bytes()[:-10])
    res = klog("dump", str(path))
    assert res.returncode == 0
    assert res.stdout.splitlines()[-1].startswith("Found ") and "invalid bytes at the end of" in res.stdout


def test_wrong_argument() -> None:
    res = klog("dump", "--no-such-flag", "x.log")
    assert res.returncode == 2
    assert "unrecognized arguments: --no-such-flag" in res.stderr
    res = klog()
    assert res.returncode == 2


def test_help_has_examples() -> None:
    res = klog("dump", "--help")
    assert res.returncode == 0
    assert "examples:" in res.stdout and "--jsonl" in res.stdout


def test_console_script_installed() -> None:
    exe = Path(sys.executable).with_name("klog")
    assert exe.exists(), "the klog console script is not installed in this environment"
    res = subprocess.run([str(exe), "--help"], capture_output=True, text=True)
    assert res.returncode == 0 and "dump" in res.stdout


def test_dump_wrong_values_quiet_and_debug(tmp_path: Path) -> None:
    path = segment(tmp_path)
    res = klog("dump", "--max-bytes", "-1", str(path))
    assert res.returncode == 2 and res.stderr.strip() == "klog: error: --max-bytes must be >= 0, got -1"
    res = klog("dump", "--max-bytes", "lots", str(path))
    assert res.returncode == 2 and "argument --max-bytes: invalid int value: 'lots'" in res.stderr
    data = bytearray(path.read_bytes())
    data[70] ^= 0xFF
    path.write_bytes(bytes(data))
    res = klog("dump", "--jsonl", "--quiet", str(path))
    assert res.returncode == 1 and res.stderr == ""  # the error line is in the output only
    assert json.loads(res.stdout.splitlines()[-1])["error"].startswith("CorruptRecordException")
    res = klog("dump", "--debug", str(tmp_path / "nope.log"))
    assert res.returncode == 2 and "Traceback" in res.stderr and "klog: error: no such file" in res.stderr


def test_dump_progress_bar_when_output_is_redirected(tmp_path: Path) -> None:
    import os

    path = segment(tmp_path)
    env = {**os.environ, "KLOG_PROGRESS": "1"}
    res = subprocess.run([sys.executable, "-m", "storage_core.tools.cli", "dump", "--jsonl", str(path)], capture_output=True,
                         text=True, env=env)
    assert res.returncode == 0
    assert "00000000000000000100.log:" in res.stderr and "%|" in res.stderr
    assert len(res.stdout.splitlines()) == 6  # the bar never goes to the output
    res = subprocess.run([sys.executable, "-m", "storage_core.tools.cli", "dump", "--quiet", str(path)], capture_output=True,
                         text=True, env=env)
    assert res.returncode == 0 and res.stderr == ""


def test_version() -> None:
    from importlib.metadata import version

    res = klog("--version")
    assert res.returncode == 0 and res.stdout.strip() == f"klog {version('klog')}"


def test_every_command_takes_debug_and_says_its_exit_codes() -> None:
    from storage_core.tools.cli import build_parser

    commands = build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    for name in commands:
        res = klog(name, "--help")
        assert res.returncode == 0, name
        assert "--debug" in res.stdout, f"klog {name} has no --debug"
        assert "exit codes:" in res.stdout, f"klog {name} --help does not say its exit codes"


def test_usage_errors_are_redacted_like_every_other_message(tmp_path: Path) -> None:
    """argparse echoes what it did not take ("unrecognized arguments", "invalid choice"): a URI's
    credentials there are redacted as in every other message klog prints."""
    for args in (["describe", str(tmp_path), "--bogus", "s3://KEY:SECRET@h/b"],
                 ["sync", str(tmp_path), "--to", "t", "--format", "s3://KEY:SECRET@h/b"]):
        r = klog(*args)
        assert r.returncode == 2, r.stderr
        assert "SECRET" not in r.stderr + r.stdout and "s3://***@h/b" in r.stderr, r.stderr


def test_verify_and_the_readers_agree_on_a_zero_filled_active_segment(tmp_path: Path) -> None:
    """A preallocated active segment (file.preallocate: a sparse file of segment.bytes, zeros past its
    last batch) reads clean and verifies ok with a warning; so does a non-zero byte in that tail, which
    every reader reads past in the same way (one rule: storage_core.log.lost), while a damaged batch
    of the same segment is corrupt for both."""
    import os

    import storage_core
    from storage_core.log.log import Log

    (tmp_path / "t-0").mkdir()
    with Log(tmp_path / "t-0", writable=True) as lg:
        for i in range(20):
            lg.append(build_batch([Record(0, 1_700_000_000_000 + i, None, b"v%d" % i, ())]), now_ms=1_700_000_000_000)
    log = tmp_path / "t-0" / "00000000000000000000.log"
    end = log.stat().st_size
    os.truncate(log, 256 << 20)  # sparse: nothing written past the batches
    assert storage_core.read_arrow(tmp_path).read_all().num_rows == 20
    r = klog("verify", str(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"zero-filled from position {end} to its size {256 << 20}" in r.stdout + r.stderr
    with open(log, "r+b") as f:
        f.seek(100 << 20)
        f.write(b"\x01")
    r = klog("verify", str(tmp_path))
    assert r.returncode == 0 and "a torn tail" in r.stdout + r.stderr, r.stdout + r.stderr
    from damage_gen import warnings_of_klog

    with warnings_of_klog() as cap:
        assert storage_core.read_arrow(tmp_path, failOnDataLoss="false").read_all().num_rows == 20
    assert not cap.messages, cap.messages
    with open(log, "r+b") as f:  # a flipped byte in the first batch's record: lost, corrupt for verify
        f.seek(8)
        first_end = 12 + int.from_bytes(f.read(4), "big")
        f.seek(first_end - 2)
        b = f.read(1)
        f.seek(first_end - 2)
        f.write(bytes([b[0] ^ 0xFF]))
    r = klog("verify", str(tmp_path))
    assert r.returncode == 1 and "CORRUPT" in r.stdout + r.stderr, r.stdout + r.stderr
    with pytest.raises(storage_core.KlogError):
        storage_core.read_arrow(tmp_path).read_all()


def test_verify_takes_the_indexes_recovery_rebuilds_as_warnings(tmp_path: Path) -> None:
    """A copy of a running broker's dir (no clean-shutdown marker): its active segment's ``.index`` is
    the preallocated file, holding what the broker's mmap holds (here an entry left past a truncation).
    Kafka's recovery rebuilds the indexes from the recovery point on, so that is a warning; the same
    index in a dir shut down cleanly is corrupt (the cluster tests' live copies met this)."""
    import os
    import struct

    from storage_core.log.log import Log

    (tmp_path / "t-0").mkdir()
    with Log(tmp_path / "t-0", writable=True) as lg:
        for i in range(3):
            lg.append(build_batch([Record(0, 1_700_000_000_000 + i, None, b"v%d" % i, ())]), now_ms=1_700_000_000_000)
    index = tmp_path / "t-0" / "00000000000000000000.index"
    with open(index, "r+b") as f:
        f.write(struct.pack(">ii", 0, 0) + struct.pack(">ii", 2, 9999))  # garbage past the broker's position
    os.truncate(index, 10 << 20)  # preallocated (segment.index.bytes)
    (tmp_path / ".kafka_cleanshutdown").write_text('{"version":0,"brokerEpoch":5}')
    r = klog("verify", str(tmp_path))
    assert r.returncode == 1 and "CORRUPT" in r.stdout, r.stdout + r.stderr
    (tmp_path / ".kafka_cleanshutdown").unlink()  # a live broker's dir
    r = klog("verify", str(tmp_path))
    assert r.returncode == 0 and "t-0: ok" in r.stdout, r.stdout + r.stderr
    assert "Kafka's recovery rebuilds it" in r.stdout + r.stderr, r.stdout + r.stderr


def test_verify_takes_a_cleanly_shut_down_empty_partition_as_it_is(tmp_path: Path) -> None:
    """An empty partition after a clean shutdown: Kafka trims its active segment's indexes to no bytes.
    That is no preallocated index and no warning (the ZooKeeper-era cluster's stopped copy met this:
    ``__transaction_state`` partitions no transaction maps to); the preallocated one of a live copy is."""
    import os

    (tmp_path / "t-0").mkdir()
    for suffix in (".log", ".index", ".timeindex"):
        (tmp_path / "t-0" / f"00000000000000000000{suffix}").write_bytes(b"")
    (tmp_path / ".kafka_cleanshutdown").write_text('{"version":0,"brokerEpoch":5}')
    r = klog("verify", str(tmp_path))
    assert r.returncode == 0 and "t-0: ok (0 batches, 0 errors, 0 warnings)" in r.stdout, r.stdout + r.stderr
    assert "preallocated" not in r.stdout + r.stderr, r.stdout + r.stderr
    (tmp_path / ".kafka_cleanshutdown").unlink()  # a running broker's dir: its indexes preallocated
    for suffix in (".index", ".timeindex"):
        os.truncate(tmp_path / "t-0" / f"00000000000000000000{suffix}", 10 << 20)
    r = klog("verify", str(tmp_path))
    assert r.returncode == 0 and "preallocated (10485760 bytes) for an empty active segment" in r.stdout + r.stderr
