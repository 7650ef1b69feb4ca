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
