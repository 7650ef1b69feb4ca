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
