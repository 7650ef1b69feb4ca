"""The commit protocol under real crashes: a child process stages a job and commits it, and is
ended at a chosen step (before the journal, after it, between every patch and rename, before the
journal's removal). Readers must see the job all at once or not at all; recovery rolls an
unfinished commit back (the job did not succeed, so a rerun must not duplicate it): afterwards
each record of a finished job is there exactly once, and an unfinished job is absent entirely."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from storage_core.log.config import LogConfig
from storage_core.log.log import Log
from storage_core.log.manager import LogManager
from storage_core.log.staged import collect_staging

pytestmark = pytest.mark.fault

CFG = {"segment.bytes": "3000"}

CHILD = textwrap.dedent("""
    import sys, pyarrow as pa
    from storage_core.log.staged import StagingWriter, commit_job
    from storage_core.record.compression import CompressionType
    from storage_core.log.config import LogConfig
    root, job, tag = sys.argv[1], sys.argv[2], sys.argv[3]
    cfg = LogConfig.from_properties({"segment.bytes": "3000"})
    staged = []
    for task in range(3):
        for p in range(3):
            w = StagingWriter(f"{root}/t-{p}", f".klog-staging-{job}-{task:05d}-0", cfg, CompressionType.LZ4, 1024)
            w.append(pa.table({"value": [f"{tag}-{task}-{p}-{i}".encode() for i in range(200)]}), 1700000000000)
            staged.append(w.finish())
    commit_job(job, staged, config=cfg)
    print("COMMITTED")
""")


def values(root: Path) -> dict[int, list[str]]:
    out = {}
    for p in range(3):
        with Log(root / f"t-{p}", LogConfig.from_properties(CFG), had_clean_shutdown=True) as lg:
            out[p] = [r.value.decode() for b in lg.batches() for r in b.records()]
    return out


def run_child(root: Path, job: str, tag: str, crash_at: int | None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.pop("KLOG_CRASH_AT", None)
    if crash_at is not None:
        env["KLOG_CRASH_AT"] = str(crash_at)
    return subprocess.run([sys.executable, "-c", CHILD, str(root), job, tag], capture_output=True, text=True, env=env,
                          timeout=120)


def test_commit_crash_trials(tmp_path: Path) -> None:
    rng = random.Random(2026)
    seed = tmp_path / "seed"
    seed.mkdir()
    for p in range(3):
        (seed / f"t-{p}").mkdir()
    assert "COMMITTED" in run_child(seed, "job0", "old", None).stdout
    old = values(seed)
    assert all(len(v) == 600 for v in old.values())
    outcomes = {"absent": 0, "rolled back": 0, "complete": 0}
    for trial, crash_at in enumerate(sorted(rng.sample(range(1, 32), 20))):
        root = tmp_path / f"trial{trial}"
        subprocess.run(["cp", "-a", str(seed), str(root)], check=True)
        res = run_child(root, "job1", "new", crash_at)
        finished = "COMMITTED" in res.stdout
        assert finished or res.returncode == 137, res.stderr[-2000:]
        journal = list(root.glob(".klog-commit-*.json"))
        # a reader now: the job is all there or not at all
        seen = values(root)
        job_rows = sum(1 for v in seen.values() for x in v if x.startswith("new"))
        assert job_rows in (0, 1800), (crash_at, job_rows)
        assert all(v[:600] == old[p] for p, v in seen.items())
        # recovery: a writable open rolls a written journal forward
        with LogManager([root], writable=True, config=LogConfig.from_properties(CFG)) as lm:
            recovered = list(lm.recovered_commits)
        collect_staging([root / f"t-{p}" for p in range(3)], job_id="job1")
        after = values(root)
        n_new = [sum(1 for x in v if x.startswith("new")) for v in after.values()]
        assert bool(recovered) == bool(journal)
        if finished:
            assert n_new == [600, 600, 600], (crash_at, n_new)
            for p, v in after.items():
                assert v[:600] == old[p] and len(set(v)) == len(v) == 1200  # exactly once, in order
                assert v[600:] == [f"new-{t}-{p}-{i}" for t in range(3) for i in range(200)]
            outcomes["complete"] += 1
        else:
            assert n_new == [0, 0, 0], (crash_at, n_new)
            assert all(v == old[p] for p, v in after.items())
            outcomes["rolled back" if journal else "absent"] += 1
        # the log takes a new job after recovery (offsets continue where they were)
        if trial == 0:
            assert "COMMITTED" in run_child(root, "job2", "again", None).stdout
            again = values(root)
            assert all(v[-600:] == [f"again-{t}-{p}-{i}" for t in range(3) for i in range(200)]
                       for p, v in again.items())
        assert not list(root.rglob(".klog-staging-*")), crash_at
        res = subprocess.run([sys.executable, "-m", "storage_core.tools.cli", "verify", str(root), "--quiet"],
                             capture_output=True, text=True)
        assert res.returncode == 0, (crash_at, res.stderr)
    assert outcomes["rolled back"] >= 10 and outcomes["absent"] >= 1, outcomes


def test_an_unfinished_commit_is_hidden_however_the_reader_spells_the_dir(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 30: the journal lookup compared path strings, so ``read_arrow('data/kj2')`` or a path
    through ``..`` showed the rows of a commit that recovery then rolled back."""
    import storage_core

    seed = tmp_path / "seed"
    seed.mkdir()
    for p in range(3):
        (seed / f"t-{p}").mkdir()
    assert "COMMITTED" in run_child(seed, "job0", "old", None).stdout
    checked = 0
    for crash_at in range(4, 32, 3):
        root = tmp_path / f"c{crash_at}"
        subprocess.run(["cp", "-a", str(seed), str(root)], check=True)
        res = run_child(root, "job1", "new", crash_at)
        if "COMMITTED" in res.stdout or not list(root.glob(".klog-commit-*.json")):
            continue
        (root / "sub").mkdir()
        monkeypatch.chdir(tmp_path)
        for spelling in (str(root), root.name, f"{root.name}/sub/..", f"./{root.name}/", str(root / "sub" / "..")):
            values_seen = storage_core.read_arrow(spelling).read_all().column("value").to_pylist()
            new = sum(1 for v in values_seen if v.startswith(b"new"))
            assert new == 0 and len(values_seen) == 1800, (crash_at, spelling, new, len(values_seen))
        checked += 1
    assert checked >= 3


RESTORE_CHILD = textwrap.dedent("""
    import sys
    from storage_core import restore
    restore(sys.argv[1], sys.argv[2])
    print("RESTORED")
""")


def test_restore_crash_at_every_step(tmp_path: Path) -> None:
    """A restore (records pinned at their own offsets, a gap after what a partition holds, the log
    start offset of an empty partition moved up) killed at each step of its commit: a reader sees all
    of it or none of it, and recovery leaves each partition as it was, log start offset included;
    a rerun then restores it."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    import storage_core
    from storage_core.record.records import Record, build_batch

    rng = random.Random(55)
    offsets = sorted(rng.sample(range(500, 900), 150))
    rows = {"topic": ["t"] * 300, "partition": [0] * 150 + [1] * 150, "offset": offsets + offsets,
            "key": [None if i % 7 == 0 else b"k%d" % i for i in range(300)],
            "value": [b"restored-%d" % i for i in range(300)],
            "timestamp": pa.array([1_500_000_000_000 + (0 if (i // 10) % 2 else i) for i in range(300)],
                                  pa.timestamp("ms", tz="UTC")),
            "timestampType": pa.array([(i // 10) % 2 for i in range(300)], pa.int32())}
    source = tmp_path / "export.parquet"
    pq.write_table(pa.table(rows), source)
    seed = tmp_path / "seed"
    for p in range(2):
        (seed / f"t-{p}").mkdir(parents=True)
    with Log(seed / "t-0", writable=True) as lg:  # t-0 holds 0..2; t-1 is empty
        lg.append(build_batch([Record(i, 1_700_000_000_000, None, b"old%d" % i) for i in range(3)]))
    LogManager([seed], writable=True).close()

    def state(root: Path) -> tuple[list[tuple[int, int, bytes]], dict[int, int]]:
        t = storage_core.read_arrow(str(root)).read_all()
        got = sorted(zip(t.column("partition").to_pylist(), t.column("offset").to_pylist(),
                         t.column("value").to_pylist(), strict=True))
        starts = {r.topic_partition.partition: r.start for r in storage_core.plan(str(root)).ranges}
        return got, starts

    before = state(seed)
    assert before == ([(0, i, b"old%d" % i) for i in range(3)], {0: 0, 1: 0})
    after_rows = sorted(before[0] + [(p, o, v) for p, o, v in zip(rows["partition"], rows["offset"], rows["value"],
                                                                      strict=True)])
    complete = (after_rows, {0: 0, 1: offsets[0]})
    outcomes = {"absent": 0, "rolled back": 0, "complete": 0}
    # steps: 1 before the journal, 2 after it, 3-5 and 6-8 each segment's patch and renames (the
    # second segment's are the first's again: not run), 9 the checkpoints, 10 the empty segment removed,
    # 11 and 12 before the journal goes
    for crash_at in (s for s in range(1, 40) if s not in (6, 7, 8)):
        root = tmp_path / f"crash{crash_at}"
        subprocess.run(["cp", "-a", str(seed), str(root)], check=True)
        env = {k: v for k, v in os.environ.items() if k != "KLOG_CRASH_AT"} | {"KLOG_CRASH_AT": str(crash_at)}
        res = subprocess.run([sys.executable, "-c", RESTORE_CHILD, str(source), str(root)], capture_output=True,
                             text=True, env=env, timeout=120)
        finished = "RESTORED" in res.stdout
        assert finished or res.returncode == 137, res.stderr[-2000:]
        journal = list(root.glob(".klog-commit-*.json"))
        assert state(root)[0] in (before[0], after_rows), crash_at  # a reader: all of it or none
        with LogManager([root], writable=True):  # recovery rolls an unfinished commit back
            pass
        collect_staging([root / f"t-{p}" for p in range(2)], older_than_s=0)
        if finished:
            assert state(root) == complete, crash_at
            outcomes["complete"] += 1
            break
        assert state(root) == before, crash_at
        outcomes["rolled back" if journal else "absent"] += 1
        assert not list(root.rglob(".klog-staging-*")), crash_at
        if crash_at == 10:  # the partitions take the restore again
            assert "RESTORED" in subprocess.run([sys.executable, "-c", RESTORE_CHILD, str(source), str(root)],
                                                capture_output=True, text=True, timeout=120).stdout
            assert state(root) == complete
    assert outcomes["complete"] == 1 and outcomes["rolled back"] >= 5 and outcomes["absent"] >= 1, outcomes


RESTORE_GROUPS_CHILD = textwrap.dedent("""
    import sys
    from storage_core import restore
    restore(sys.argv[1], sys.argv[2], groups=sys.argv[3], offsets=sys.argv[4])
    print("RESTORED")
""")


def test_restore_with_groups_crash_at_every_step(tmp_path: Path) -> None:
    """A restore of records and consumer groups (one job: the topic's partitions, pinned at their log
    end with new offsets, and the groups' ``__consumer_offsets`` partitions) killed at each step of its
    commit: the records and the groups are both there or both absent, for a reader and after
    recovery. (At the original offsets the commit is the same, its bases the records' own:
    :func:`test_restore_crash_at_every_step`.)"""
    offsets = "new"
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq

    import storage_core
    from storage_core.read.groups import group_offsets
    from storage_core.record.records import Record, build_batch

    offsets_ = sorted(random.Random(56).sample(range(500, 900), 60))
    source = tmp_path / "export.parquet"
    pq.write_table(pa.table({"topic": ["t"] * 120, "partition": [0] * 60 + [1] * 60, "offset": offsets_ + offsets_,
                             "value": [b"restored-%d" % i for i in range(120)]}), source)
    groups = tmp_path / "groups.json"  # klog groups --json's rows: two groups, in two __consumer_offsets partitions
    groups.write_text(json.dumps([{"group": g, "topic": "t", "partition": p, "committedOffset": offsets_[i]}
                                  for i, g in ((10, "billing"), (40, "audit-x")) for p in (0, 1)]))
    seed = tmp_path / "seed"
    for d in ("t-0", "t-1", *(f"__consumer_offsets-{p}" for p in range(3))):
        (seed / d).mkdir(parents=True)
    with Log(seed / "t-0", writable=True) as lg:  # t-0 holds 0..2; t-1 is empty
        lg.append(build_batch([Record(i, 1_700_000_000_000, None, b"old%d" % i) for i in range(3)]))
    LogManager([seed], writable=True).close()

    def state(root: Path) -> tuple[list[tuple[int, int, bytes]], dict[str, dict[int, int]]]:
        t = storage_core.read_arrow(str(root), topics="t").read_all()
        got = sorted(zip(t.column("partition").to_pylist(), t.column("offset").to_pylist(),
                         t.column("value").to_pylist(), strict=True))
        return got, {g: {tp.partition: c.offset for tp, c in parts.items()}
                     for g, parts in group_offsets([root]).items()}

    before = state(seed)
    assert before[1] == {}
    outcomes = {"absent": 0, "rolled back": 0, "complete": 0}
    complete = None
    for crash_at in range(1, 80):
        root = tmp_path / f"crash{crash_at}"
        subprocess.run(["cp", "-a", str(seed), str(root)], check=True)
        env = {k: v for k, v in os.environ.items() if k != "KLOG_CRASH_AT"} | {"KLOG_CRASH_AT": str(crash_at)}
        res = subprocess.run([sys.executable, "-c", RESTORE_GROUPS_CHILD, str(source), str(root), str(groups),
                              offsets], capture_output=True, text=True, env=env, timeout=120)
        finished = "RESTORED" in res.stdout
        assert finished or res.returncode == 137, res.stderr[-2000:]
        journal = list(root.glob(".klog-commit-*.json"))
        seen = state(root)  # a reader: all of it or none
        with LogManager([root], writable=True):  # recovery rolls an unfinished commit back
            pass
        collect_staging([p for p in root.iterdir() if p.is_dir()], older_than_s=0)
        after = state(root)
        if finished:
            complete = after
            assert seen == after and len(after[0]) == len(before[0]) + 120 and set(after[1]) == {"billing", "audit-x"}
            outcomes["complete"] += 1
            break
        assert seen in (before, after) and after == before, (crash_at, seen, after)
        outcomes["rolled back" if journal else "absent"] += 1
        assert not list(root.rglob(".klog-staging-*")), crash_at
    assert complete is not None and outcomes["rolled back"] >= 5 and outcomes["absent"] >= 1, outcomes
    # the groups translated: the i-th restored record of t-0 is at 3 + i (after what it held), of t-1 at i
    assert complete[1] == {g: {0: 3 + i, 1: i} for i, g in ((10, "billing"), (40, "audit-x"))}
    assert outcomes["rolled back"] + outcomes["absent"] >= 10, outcomes
