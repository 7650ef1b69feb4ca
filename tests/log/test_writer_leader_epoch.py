"""klog's writer stamps each batch with the partition's leader epoch, as a broker's leader does
(issue 56): the epoch the partition's ``leader-epoch-checkpoint`` ends with, so that checkpoint stays
valid (every batch's epoch is an epoch it holds, starting at or before the batch). A partition
without one keeps ``-1`` (``RecordBatch.NO_PARTITION_LEADER_EPOCH``), as before."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from storage_core.log.checkpoint import EpochEntry, LeaderEpochCheckpointFile
from storage_core.log.config import LogConfig
from storage_core.log.staged import StagingWriter, commit_job
from storage_core.record.compression import CompressionType
from storage_core.record.file_records import FileRecords

CFG = LogConfig.from_properties({"segment.bytes": "4096"})


def _write(root: Path, job: str, n: int) -> None:
    staged = []
    for p in range(2):
        w = StagingWriter(root / f"t-{p}", f".klog-staging-{job}-00000-0", CFG, CompressionType.LZ4, 512)
        w.append(pa.table({"value": [f"{job}-{i}".encode() for i in range(n)]}), 1_700_000_000_000)
        staged.append(w.finish())
    commit_job(job, staged, config=CFG)


def _epochs(part: Path) -> list[int]:
    return [b.partition_leader_epoch for seg in sorted(part.glob("*.log")) for b in FileRecords(seg).batches()]


def test_batches_carry_the_checkpoints_epoch_and_it_stays_valid(tmp_path: Path) -> None:
    for p in range(2):
        (tmp_path / f"t-{p}").mkdir()
    entries = [EpochEntry(0, 0), EpochEntry(3, 0)]
    LeaderEpochCheckpointFile.in_dir(tmp_path / "t-0").write(entries)
    _write(tmp_path, "a", 300)
    _write(tmp_path, "b", 50)
    epochs = _epochs(tmp_path / "t-0")
    assert len(epochs) > 2 and set(epochs) == {3}
    assert LeaderEpochCheckpointFile.in_dir(tmp_path / "t-0").read() == entries  # still true of every batch
    assert set(_epochs(tmp_path / "t-1")) == {-1}  # no checkpoint: no epoch, as before


def _write_epoch(root: Path, job: str, n: int, registered: int | None,
                 replicas: dict[str, list[str]] | None = None) -> dict[str, object]:
    w = StagingWriter(root / "t-0", f".klog-staging-{job}-00000-0", CFG, CompressionType.NONE, 512,
                      registered_epoch=registered)
    w.append(pa.table({"value": [f"{job}-{i}".encode() for i in range(n)]}), 1_700_000_000_000)
    return dict(commit_job(job, [w.finish()], config=CFG, replicas=replicas))


def test_without_a_checkpoint_the_kraft_epoch_is_stamped_and_recorded(tmp_path: Path) -> None:
    """A partition with no leader-epoch checkpoint (a replica that never held a batch) takes the
    KRaft metadata's leader epoch, and the commit records it where the write began, as the broker's
    ``LeaderEpochFileCache.assign`` does for each batch it appends."""
    (tmp_path / "t-0").mkdir()
    _write_epoch(tmp_path, "a", 40, registered=7)
    assert set(_epochs(tmp_path / "t-0")) == {7}
    assert LeaderEpochCheckpointFile.in_dir(tmp_path / "t-0").read() == [EpochEntry(7, 0)]
    _write_epoch(tmp_path, "b", 10, registered=9)  # the checkpoint now decides, as the broker's cache would
    assert LeaderEpochCheckpointFile.in_dir(tmp_path / "t-0").read() == [EpochEntry(7, 0)]
    assert set(_epochs(tmp_path / "t-0")) == {7}


def test_a_followers_checkpoint_gets_the_leaders_epoch(tmp_path: Path) -> None:
    """A follower's checkpoint lacks the epoch its leader was elected in when nothing was appended
    under it: the byte copy of klog's batches carries that epoch, so the commit assigns it in the
    follower's checkpoint too (``UnifiedLog.appendAsFollower`` assigns each batch's epoch)."""
    leader, follower = tmp_path / "b1" / "t-0", tmp_path / "b2" / "t-0"
    for d in (leader, follower):
        d.mkdir(parents=True)
        LeaderEpochCheckpointFile.in_dir(d).write([EpochEntry(0, 0)])
    for job, n in (("a", 30), ("c", 25)):
        if job == "c":  # broker 1 became leader in epoch 2 at its log end, and nothing was appended since
            LeaderEpochCheckpointFile.in_dir(leader).write([EpochEntry(0, 0), EpochEntry(2, 30)])
        w = StagingWriter(leader, f".klog-staging-{job}-00000-0", CFG, CompressionType.NONE, 512)
        w.append(pa.table({"value": [b"x"] * n}), 1_700_000_000_000)
        commit_job(job, [w.finish()], config=CFG, replicas={str(leader): [str(follower)]})
    assert _epochs(leader) == _epochs(follower) and set(_epochs(leader)) == {0, 2}
    assert LeaderEpochCheckpointFile.in_dir(leader).read() == [EpochEntry(0, 0), EpochEntry(2, 30)]
    assert LeaderEpochCheckpointFile.in_dir(follower).read() == [EpochEntry(0, 0), EpochEntry(2, 30)]


def test_assign_follows_leader_epoch_file_cache() -> None:
    """``assign_leader_epoch`` against ``LeaderEpochFileCache.assign``'s rules, on random histories: the
    same epoch again is no change; a lower start offset or a new epoch removes the entries at or
    above it (``maybeTruncateNonMonotonicEntries``) before appending; -1 assigns nothing."""
    import random
    import tempfile

    from storage_core.log.checkpoint import assign_leader_epoch

    seed = random.randrange(2**32)
    rng = random.Random(seed)
    for _ in range(60):
        with tempfile.TemporaryDirectory() as d:
            model: dict[int, int] = {}  # Kafka's TreeMap<epoch, startOffset>
            for _ in range(rng.randint(1, 8)):
                epoch, start = rng.randint(-1, 6), rng.randint(0, 60)
                changed = assign_leader_epoch(d, epoch, start)
                latest = max(model.items()) if model else None
                need = epoch >= 0 and (latest is None or epoch != latest[0] or start < latest[1])
                if need:
                    for e in sorted(model, reverse=True):
                        if e >= epoch or model[e] >= start:
                            del model[e]
                        else:
                            break
                    model[epoch] = start
                assert changed == need, f"seed={seed}"
                assert LeaderEpochCheckpointFile.in_dir(d).read() == [EpochEntry(e, s) for e, s in sorted(model.items())], \
                    f"seed={seed}"
