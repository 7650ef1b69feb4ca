"""The cleaner under real crashes: a child process compacts a partition and kills itself with
SIGKILL (``faults.maybe_crash`` with ``"signal": "KILL"``) at one of the steps of the
``.cleaned → .swap → .deleted`` protocol. 50 random trials over the steps and segment groups.

After each crash the log dir reopens as a broker would (writable: ``.cleaned``/``.deleted``
removed, ``.swap`` completed, recovery) and then:

* every segment is valid and every offset readable;
* each surviving offset holds the record appended there (old contents), and every record the
  completed compaction keeps is there (nothing lost): new ⊆ after ⊆ old, offset by offset;
* each segment group of the compaction holds its old or its new records, not a mix;
* compacting again gives exactly the result of an uninterrupted compaction.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from storage_core.cleaner import LogCleaner
from storage_core.log.config import LogConfig
from storage_core.log.log import Log
from storage_core.log.manager import LogManager
from storage_core.log.segment import scan_segment
from storage_core.log.topic_configs import update_topic_configs
from storage_core.record.control import ControlRecordType, EndTransactionMarker
from storage_core.record.records import DefaultRecordBatch, Record, build_batch, build_end_txn_marker

pytestmark = pytest.mark.fault

T0 = 1_700_000_000_000
NOW = T0 + 10_000
PROPS = {"cleanup.policy": "compact", "segment.bytes": "1500", "index.interval.bytes": "300",
         "delete.retention.ms": "100"}

#: (point, context key with its number of values or None)
POINTS = [
    ("cleaner-map-built", None),
    ("cleaner-cleaned-writing", "group"),
    ("cleaner-cleaned-written", "group"),
    ("cleaner-swap-partial", "group"),
    ("cleaner-swapped", "group"),
    ("cleaner-old-deleted", "group"),
    ("cleaner-replaced-partial", "group"),
    ("cleaner-replaced", "group"),
    ("cleaner-checkpoint", None),
]

CHILD = textwrap.dedent("""
    import sys
    from storage_core.cleaner import LogCleaner
    from storage_core.log.manager import LogManager
    memory = int(sys.argv[3]) if len(sys.argv) > 3 else 1 << 20
    with LogManager([sys.argv[1]], writable=True) as m:
        for tp, log in sorted(m.logs.items()):
            r = LogCleaner(memory, now_ms=int(sys.argv[2])).clean_log(log)
            print("GROUPS", r.stats.groups, "PASSES", r.stats.passes)
    print("CLEANED")
""")
SMALL_MAP = 24 * 12  # 10 keys: several passes over the 40 keys


def build_seed(root: Path) -> None:
    root.mkdir()
    update_topic_configs(root, "t", PROPS)
    rng = random.Random(7)
    with LogManager([root], writable=True) as m:
        from storage_core.log.topic_partition import TopicPartition

        log = m.create_log(TopicPartition("t", 0))
        ts = T0
        for i in range(400):
            ts += 5
            if i % 37 == 5:
                log.append(build_batch([Record(0, ts, b"tx%d" % i, b"aborted")], producer_id=9, producer_epoch=0,
                                       is_transactional=True), now_ms=ts)
                kind = ControlRecordType.ABORT if i % 2 else ControlRecordType.COMMIT
                log.append(build_end_txn_marker(0, ts, 0, 9, 0, EndTransactionMarker(kind, 1)), now_ms=ts)
                continue
            n = rng.randrange(1, 4)
            recs = []
            for j in range(n):
                key = b"k%d" % rng.randrange(40)
                value = None if rng.random() < 0.1 else b"v%d-%d" % (i, j)
                recs.append(Record(j, ts + j, key, value))
            log.append(build_batch(recs), now_ms=ts)
        log.roll()
        log.append(build_batch([Record(0, ts, b"active", b"x")]), now_ms=ts)


def contents(root: Path) -> dict[int, tuple[bytes | None, bytes | None]]:
    out = {}
    with Log(root / "t-0", LogConfig.from_properties(PROPS), had_clean_shutdown=True) as lg:
        for b in lg.batches():
            if isinstance(b, DefaultRecordBatch) and not b.is_control:
                for r in b.records():
                    out[r.offset] = (r.key, r.value)
    return out


def run_child(root: Path, fault: dict[str, object] | None, memory: int = 1 << 20) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.pop("KLOG_FAULT_FILE", None)
    if fault is not None:
        spec = root.parent / (root.name + ".fault.json")
        spec.write_text(json.dumps(fault))
        env["KLOG_FAULT_FILE"] = str(spec)
    return subprocess.run([sys.executable, "-c", CHILD, str(root), str(NOW), str(memory)], capture_output=True,
                          text=True, env=env, timeout=120)


def test_cleaner_crash_trials(tmp_path: Path) -> None:
    seed = tmp_path / "seed"
    build_seed(seed)
    old = contents(seed)
    done = tmp_path / "done"
    subprocess.run(["cp", "-a", str(seed), str(done)], check=True)
    res = run_child(done, None)
    assert "CLEANED" in res.stdout, res.stderr[-3000:]
    groups = int(res.stdout.split()[1])
    assert groups >= 3, res.stdout
    new = contents(done)
    assert set(new) < set(old)
    with Log(done / "t-0", LogConfig.from_properties(PROPS), had_clean_shutdown=True) as lg:
        bounds = [s.base_offset for s in lg.segments]  # each group became one segment
    group_ranges = list(zip(bounds, bounds[1:] + [1 << 62], strict=True))

    rng = random.Random(2026)
    trials = [(p, None) if ctx is None else (p, rng.randrange(groups)) for p, ctx in POINTS]  # every step once
    while len(trials) < 50:
        p, ctx = rng.choice(POINTS)
        trials.append((p, None if ctx is None else rng.randrange(groups)))
    fired = 0
    for n, (point, group) in enumerate(trials):
        root = tmp_path / f"trial{n}"
        subprocess.run(["cp", "-a", str(seed), str(root)], check=True)
        fault: dict[str, object] = {"point": point, "signal": "KILL"}
        if group is not None:
            fault["group"] = group
        res = run_child(root, fault)
        crashed = res.returncode == -9  # killed by SIGKILL
        assert crashed or "CLEANED" in res.stdout, (point, group, res.stderr[-3000:])
        fired += crashed
        # a reader before any writer: never an error, and whatever it returns is old contents
        ro = contents(root)
        assert all(old[o] == v for o, v in ro.items()), (point, group)
        with LogManager([root], writable=True):  # reopen as a broker: completes or rolls back
            pass
        for seg in sorted((root / "t-0").glob("*.log")):
            scan = scan_segment(seg)
            assert scan.error is None and scan.partial_tail is None, (point, group, seg)
        leftovers = [p.name for p in (root / "t-0").iterdir() if p.name.endswith((".cleaned", ".swap", ".deleted"))]
        assert leftovers == [], (point, group, leftovers)
        after = contents(root)
        assert set(new) <= set(after) <= set(old), (point, group)
        assert all(old[o] == v for o, v in after.items()), (point, group)
        for lo, hi in group_ranges:
            got = {o for o in after if lo <= o < hi}
            assert got in ({o for o in old if lo <= o < hi}, {o for o in new if lo <= o < hi}), (point, group, lo)
        # finishing the job gives what an uninterrupted compaction gives
        with LogManager([root], writable=True) as m:
            for log in m.logs.values():
                LogCleaner(1 << 20, now_ms=NOW).clean_log(log)
        assert contents(root) == new, (point, group)
        subprocess.run(["rm", "-rf", str(root)], check=True)
    assert fired >= 45, f"only {fired} of {len(trials)} trials reached their crash point"


def test_crash_points_are_documented() -> None:
    import storage_core.cleaner as c

    for point, _ in POINTS:
        assert f"[{point}]" in (c.__doc__ or ""), point
    assert LogCleaner  # the module the points belong to


def test_cleaner_crash_during_multi_pass_clean(tmp_path: Path) -> None:
    """A small map: several passes, each with its groups. A crash in any pass leaves every offset
    with its old contents or removed as an (earlier or this) pass would remove it; finishing the
    clean gives the uninterrupted result."""
    seed = tmp_path / "seed"
    build_seed(seed)
    old = contents(seed)
    done = tmp_path / "done"
    subprocess.run(["cp", "-a", str(seed), str(done)], check=True)
    res = run_child(done, None, SMALL_MAP)
    assert "CLEANED" in res.stdout, res.stderr[-3000:]
    groups, passes = int(res.stdout.split()[1]), int(res.stdout.split()[3])
    assert passes >= 3, res.stdout
    new = contents(done)
    rng = random.Random(99)
    fired = 0
    for n in range(8):
        point, ctx = rng.choice(POINTS)
        fault: dict[str, object] = {"point": point, "signal": "KILL"}
        if ctx is not None:
            fault["group"] = rng.randrange(max(1, groups // passes))
        root = tmp_path / f"trial{n}"
        subprocess.run(["cp", "-a", str(seed), str(root)], check=True)
        res = run_child(root, fault, SMALL_MAP)
        assert res.returncode == -9 or "CLEANED" in res.stdout, (fault, res.stderr[-3000:])
        fired += res.returncode == -9
        with LogManager([root], writable=True):
            pass
        after = contents(root)
        assert set(new) <= set(after) <= set(old), fault
        assert all(old[o] == v for o, v in after.items()), fault
        with LogManager([root], writable=True) as m:
            for log in m.logs.values():
                LogCleaner(SMALL_MAP, now_ms=NOW).clean_log(log)
        assert contents(root) == new, fault
        subprocess.run(["rm", "-rf", str(root)], check=True)
    assert fired >= 5
