"""``klog groups``: the table, --group, --json, an unknown group, a dir without __consumer_offsets, help."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from groups_gen import generate


def klog(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "storage_core.tools.cli", *args], capture_output=True, text=True)


def test_table_and_json(tmp_path: Path) -> None:
    gen = generate(tmp_path / "d", 11)
    res = klog("groups", str(gen.root))
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].split() == ["GROUP", "TOPIC", "PARTITION", "COMMITTED", "LOG-END", "LAG", "COMMIT", "TIMESTAMP"]
    rows = [line.split() for line in lines[1:]]
    want = sorted((g, tp.topic, tp.partition, off) for g, parts in gen.truth.items() for tp, (off, *_) in parts.items())
    assert [(r[0], r[1], int(r[2]), int(r[3])) for r in rows] == want
    for r in rows:
        assert int(r[5]) == int(r[4]) - int(r[3])
    group = want[0][0]
    res = klog("groups", str(gen.root), "--group", group, "--json")
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout)
    assert {(r["topic"], r["partition"]): (r["committedOffset"], r["commitTimestamp"]) for r in got} == \
        {(tp.topic, tp.partition): (v[0], v[3]) for tp, v in gen.truth[group].items()}


def test_unknown_group_and_no_offsets_topic(tmp_path: Path) -> None:
    gen = generate(tmp_path / "d", 12)
    res = klog("groups", str(gen.root), "--group", "nope")
    assert res.returncode == 2
    assert "groups found:" in res.stderr and all(repr(g) in res.stderr for g in gen.truth)
    assert "--group 'nope'" in res.stderr and "option group" not in res.stderr  # the flag the user typed
    res = klog("groups", str(gen.root / "orders-0"), "--group", "nope")
    assert res.returncode == 2 and "there is no __consumer_offsets" in res.stderr and "--group 'nope'" in res.stderr
    res = klog("groups", str(gen.root / "orders-0"))
    assert res.returncode == 0 and "no committed offsets" in res.stdout
    res = klog("groups", str(tmp_path / "missing"))
    assert res.returncode == 2


def test_help_has_examples_and_exit_codes() -> None:
    res = klog("groups", "--help")
    assert res.returncode == 0
    assert "klog groups /var/lib/kafka/data" in res.stdout and "exit codes:" in res.stdout
    assert "--debug" in res.stdout
