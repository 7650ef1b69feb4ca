"""The streaming sink's commit under real crashes: a child process stages micro-batch 7 of a
query and commits it with its sink mark, and is ended at every step of the commit. After
recovery, the mark and the data must agree (mark 7 ⇔ batch 7's records are there); Spark then
replays batch 7 with the same id, and afterwards every record is there exactly once."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from storage_core.log.journal import SinkBatch, read_sink_mark
from storage_core.log.log import Log
from storage_core.log.manager import LogManager
from storage_core.log.staged import collect_staging, commit_job

pytestmark = pytest.mark.fault

CHILD = textwrap.dedent("""
    import sys, uuid, pyarrow as pa
    from storage_core.log.journal import SinkBatch
    from storage_core.log.staged import StagingWriter, commit_job
    from storage_core.record.compression import CompressionType
    from storage_core.log.config import LogConfig
    root, batch = sys.argv[1], int(sys.argv[2])
    cfg = LogConfig()
    staged = []
    for task in range(2):
        for p in range(2):
            w = StagingWriter(f"{root}/t-{p}", f".klog-staging-sq1-{task:05d}-{uuid.uuid4().hex[:8]}-0", cfg,
                              CompressionType.NONE, 1024)
            w.append(pa.table({"value": [f"b{batch}-{task}-{p}-{i}".encode() for i in range(50)]}), 1700000000000)
            staged.append(w.finish())
    commit_job(f"sq1-b{batch}-{uuid.uuid4().hex[:8]}", staged, sink=SinkBatch("q1", batch))
    print("COMMITTED")
""")


def values(root: Path) -> list[str]:
    out = []
    for p in range(2):
        with Log(root / f"t-{p}", had_clean_shutdown=False) as lg:
            out += [r.value.decode() for b in lg.batches() for r in b.records()]
    return out


def commit(root: Path, batch: int, crash_at: int | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "KLOG_CRASH_AT"}
    if crash_at is not None:
        env["KLOG_CRASH_AT"] = str(crash_at)
    return subprocess.run([sys.executable, "-c", CHILD, str(root), str(batch)], capture_output=True, text=True,
                          env=env, timeout=120)


def test_sink_commit_killed_at_every_step_then_replayed(tmp_path: Path) -> None:
    seed = tmp_path / "seed"
    for p in range(2):
        (seed / f"t-{p}").mkdir(parents=True)
    assert "COMMITTED" in commit(seed, 6, None).stdout  # the batch before
    before = values(seed)
    assert len(before) == 200 and read_sink_mark(seed, "q1")["batch"] == 6  # type: ignore[index]
    outcomes = set()
    step = 1
    while True:
        root = tmp_path / f"step{step}"
        subprocess.run(["cp", "-a", str(seed), str(root)], check=True)
        res = commit(root, 7, step)
        finished = "COMMITTED" in res.stdout
        assert finished or res.returncode == 137, res.stderr[-2000:]
        with LogManager([root], writable=True):  # the next writer settles a half-made commit
            pass
        mark = read_sink_mark(root, "q1")
        assert mark is not None
        new = [v for v in values(root) if v.startswith("b7-")]
        assert sorted(v for v in values(root) if not v.startswith("b7-")) == sorted(before)
        if mark["batch"] == 7:
            assert len(new) == 200, f"step {step}: mark says batch 7 is in but {len(new)} of its records are"
        else:
            assert mark["batch"] == 6 and new == [], f"step {step}: batch 7 half there without its mark"
        outcomes.add((finished, mark["batch"]))
        # Spark replays batch 7 (same id): exactly once either way
        assert "COMMITTED" in commit(root, 7, None).stdout
        after = values(root)
        assert sorted(after) == sorted(before + [f"b7-{t}-{p}-{i}" for t in range(2) for p in range(2)
                                                 for i in range(50)])
        collect_staging([root / "t-0", root / "t-1"], job_id="sq1")  # as KlogStreamWriter.commit does
        assert not list(root.glob("t-*/.klog-staging-*")) and sorted(values(root)) == sorted(after)
        if finished:
            break
        step += 1
    assert step >= 8  # the commit has that many kill points
    assert {m for _, m in outcomes} == {6, 7}  # both sides of the commit point were hit


def test_replayed_batch_is_skipped_and_older_batches_too(tmp_path: Path) -> None:
    root = tmp_path / "d"
    (root / "t-0").mkdir(parents=True)
    (root / "t-1").mkdir()
    for batch in (0, 1, 1, 0):
        assert "COMMITTED" in commit(root, batch, None).stdout
    assert sorted({v.split("-")[0] for v in values(root)}) == ["b0", "b1"]
    assert len(values(root)) == 400
    assert commit_job("empty", [], sink=SinkBatch("q1", 9)) == {}
