"""``klog compact`` and ``klog-topic-configs.json``: success, bad path, corrupt file, wrong argument."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from storage_core.errors import LogConfigError
from storage_core.files import TOPIC_CONFIGS_FILE
from storage_core.log.config import LogConfig
from storage_core.log.log import Log
from storage_core.log.manager import LogManager
from storage_core.log.topic_configs import (
    CorruptTopicConfigsError,
    config_for_topic,
    load_topic_configs,
    save_topic_configs,
    update_topic_configs,
)
from storage_core.record.records import Record, build_batch

T0 = 1_700_000_000_000


def klog(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "storage_core.tools.cli", *args], capture_output=True, text=True)


def log_dir(tmp_path: Path) -> Path:
    """``users`` (compacted by its stored config) and ``clicks`` (delete), 2 partitions each."""
    root = tmp_path / "data"
    root.mkdir()
    update_topic_configs(root, "users", {"cleanup.policy": "compact", "segment.bytes": 1024})
    cfg = LogConfig.from_properties({"segment.bytes": "1024"})
    for topic in ("users", "clicks"):
        for p in range(2):
            d = root / f"{topic}-{p}"
            d.mkdir()
            with Log(d, cfg, writable=True) as log:
                for i in range(60):
                    value = None if i % 17 == 16 else b"value-%d" % i
                    log.append(build_batch([Record(0, T0 + i, b"key-%d" % (i % 5), value)]), now_ms=T0 + i)
    return root


def values(d: Path) -> dict[bytes, bytes | None]:
    out: dict[bytes, bytes | None] = {}
    with Log(d, had_clean_shutdown=True) as log:
        for b in log.batches():
            for r in b.records():
                out[r.key] = r.value  # type: ignore[index]
    return out


def test_compact_the_configured_topics(tmp_path: Path) -> None:
    root = log_dir(tmp_path)
    before = {p.name: values(p) for p in root.iterdir() if p.is_dir()}
    res = klog("compact", str(root), "--now", str(T0 + 10**9))
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].split()[:2] == ["TOPIC", "PART"]
    assert [ln.split()[:2] for ln in lines[1:3]] == [["users", "0"], ["users", "1"]]
    assert lines[-1].startswith("total: 2 partitions")
    for name, vals in before.items():
        assert values(root / name) == vals  # every key reads the same latest value
    sizes = [int(ln.split()[2]) - int(ln.split()[3]) for ln in lines[1:3]]
    assert all(s > 0 for s in sizes)  # bytes before - bytes after
    assert (root / "cleaner-offset-checkpoint").read_text().splitlines()[:2] == ["0", "2"]
    verify = klog("verify", str(root), "--quiet")
    assert verify.returncode == 0, verify.stdout + verify.stderr
    # stderr is not a terminal here: no progress bar, by the rule every command follows (it once
    # drew one whatever KLOG_PROGRESS, the terminal and the size said)
    assert "compact:" not in res.stderr, res.stderr


def test_compact_named_topic_whatever_its_policy_json(tmp_path: Path) -> None:
    root = log_dir(tmp_path)
    res = klog("compact", str(root), "--topic", "clicks", "--json", "--memory", "1K")
    assert res.returncode == 0, res.stderr
    rows = json.loads(res.stdout)
    assert [(r["topic"], r["partition"]) for r in rows] == [("clicks", 0), ("clicks", 1)]
    assert all(r["bytes_after"] < r["bytes_before"] and r["records_removed"] > 0 for r in rows)
    assert all(r["passes"] >= 1 for r in rows)
    # the replaced segments were set aside as *.deleted, as Kafka does, and removed before it exited:
    # it holds the dir's lock, so no run after it has to (issue 56: they were left for the next one)
    assert all(any(n.endswith(".log.deleted") for n in r["deleted_files"]) for r in rows), rows
    assert not list(root.glob("*/*.deleted"))


def test_compact_bad_path_and_wrong_arguments(tmp_path: Path) -> None:
    res = klog("compact", str(tmp_path / "missing"))
    assert res.returncode == 2 and "no such log directory" in res.stderr and "missing" in res.stderr
    root = log_dir(tmp_path)
    res = klog("compact", str(root), "--topic", "nope")
    assert res.returncode == 2 and "no such topic" in res.stderr and "nope" in res.stderr and "users" in res.stderr
    res = klog("compact", str(root), "--memory", "12X")
    assert res.returncode == 2 and "--memory" in res.stderr and "12X" in res.stderr
    res = klog("compact", str(root), "--memory", "10")  # holds no key
    assert res.returncode == 2 or res.returncode == 1
    assert "holds no key" in res.stderr


def test_compact_corrupt_config_file(tmp_path: Path) -> None:
    root = log_dir(tmp_path)
    (root / TOPIC_CONFIGS_FILE).write_text('{"users": {"cleanup.policy": "compact"')
    res = klog("compact", str(root))
    assert res.returncode == 1
    assert TOPIC_CONFIGS_FILE in res.stderr and "not valid JSON" in res.stderr
    (root / TOPIC_CONFIGS_FILE).write_text('{"users": {"cleanup.policy": "shred"}}')
    res = klog("compact", str(root))
    assert res.returncode == 1 and "shred" in res.stderr and "users" in res.stderr


def test_nothing_to_compact(tmp_path: Path) -> None:
    root = log_dir(tmp_path)
    (root / TOPIC_CONFIGS_FILE).unlink()
    res = klog("compact", str(root))
    assert res.returncode == 0 and "no compacted topics" in res.stdout


# --- the topic configs file -----------------------------------------------------------------------


def test_topic_configs_roundtrip_and_precedence(tmp_path: Path) -> None:
    assert load_topic_configs(tmp_path) == {}
    update_topic_configs(tmp_path, "t", {"cleanup.policy": "compact", "segment.bytes": 4096})
    update_topic_configs(tmp_path, "t", {"delete.retention.ms": "5"})
    stored = load_topic_configs(tmp_path)
    assert stored == {"t": {"cleanup.policy": "compact", "segment.bytes": "4096", "delete.retention.ms": "5"}}
    assert not list(tmp_path.glob("*.tmp"))
    cfg = config_for_topic("t", stored, overrides={"segment.bytes": "8192"})
    assert (cfg.compact, cfg.segment_bytes, cfg.delete_retention_ms) == (True, 8192, 5)
    assert config_for_topic("__consumer_offsets", {}).compact  # Kafka creates it compacted
    assert not config_for_topic("other", stored).compact
    (tmp_path / "t-0").mkdir()
    with Log(tmp_path / "t-0", writable=True) as log:  # an open without a config reads the file
        assert log.config.compact and log.config.segment_bytes == 4096
    with LogManager([tmp_path]) as m:
        assert m.config_for("t").delete_retention_ms == 5
    with LogManager([tmp_path], topic_configs={"t": LogConfig()}) as m:  # explicit configs win
        assert not m.config_for("t").compact


def test_topic_configs_refuse_bad_values(tmp_path: Path) -> None:
    with pytest.raises(LogConfigError, match="segment.bytes"):
        save_topic_configs(tmp_path, {"t": {"segment.bytes": "-1"}})
    (tmp_path / TOPIC_CONFIGS_FILE).write_text("[1, 2]")
    with pytest.raises(CorruptTopicConfigsError, match="found a JSON list"):
        load_topic_configs(tmp_path)
    (tmp_path / TOPIC_CONFIGS_FILE).write_text('{"t": "compact"}')
    with pytest.raises(CorruptTopicConfigsError, match="'t' maps to a JSON str"):
        load_topic_configs(tmp_path)


def test_compact_corrupt_cleaner_checkpoint(tmp_path: Path) -> None:
    root = log_dir(tmp_path)
    (root / "cleaner-offset-checkpoint").write_text("0\n1\nusers 0 not-a-number\n")
    res = klog("compact", str(root))
    assert res.returncode == 1
    assert "cleaner-offset-checkpoint" in res.stderr and "not-a-number" in res.stderr


def test_compact_roll_makes_the_active_segment_cleanable(tmp_path: Path) -> None:
    root = tmp_path / "data"
    (root / "__consumer_offsets-0").mkdir(parents=True)  # compacted by Kafka's internal-topic config
    with Log(root / "__consumer_offsets-0", LogConfig(), writable=True) as log:
        for i in range(30):
            log.append(build_batch([Record(0, T0 + i, b"group-%d" % (i % 3), b"v%d" % i)]), now_ms=T0 + i)
    res = klog("compact", str(root))
    assert res.returncode == 0 and "--roll" in res.stdout  # one active segment: nothing cleanable
    res = klog("compact", str(root), "--roll", "--json", "--quiet")
    assert res.returncode == 0, res.stderr
    (row,) = json.loads(res.stdout)
    assert (row["topic"], row["records_read"], row["records_removed"]) == ("__consumer_offsets", 30, 27)
